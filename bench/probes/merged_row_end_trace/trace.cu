// Probe (not built by CMake; see README.md): where the merged split-held kernel's time goes on
// 8 x 8388608 f32, #4's last cell under 90 % of copy (84.0 % on an H100, session 49). Runs the
// library's kernel template (cuda/softmax_split_held.cuh, softmax_split_held_pipelined: merged,
// with the stall prefetch, as AUTO launches it) with a tracer that stamps %globaltimer for each
// ticket: drawn, loaded (and published), wait for its row begun, ended, stored. Prints per row
// when its loads began and ended, when its waits ended, and how many blocks waited at once, and
// a timeline of the blocks loading / waiting / storing.
#include "softmax.cuh"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#define CK(x)                                                                                  \
    do {                                                                                       \
        cudaError_t e_ = (x);                                                                  \
        if (e_ != cudaSuccess) {                                                               \
            std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x,                     \
                         cudaGetErrorString(e_));                                              \
            std::exit(1);                                                                      \
        }                                                                                      \
    } while (0)

constexpr int EVENTS = 5; // FC_TRACE_DRAWN .. FC_TRACE_STORED
__device__ unsigned long long *g_stamps; // [ticket * EVENTS + event]
__device__ int g_tickets;

struct stamp_trace {
    static FC_DEVICE void at(int event, int t) {
        if (threadIdx.x != 0 || t >= g_tickets) return;
        unsigned long long now;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        g_stamps[(size_t)t * EVENTS + event] = now;
    }
};

#define HELD FC_HELD_BITS(FC_F32)
extern "C" __global__ void __launch_bounds__(FC_SOFTMAX_SPLIT_HELD_THREADS,
                                             FC_SOFTMAX_SPLIT_HELD_BLOCKS_PER_SM)
    traced_merged_prefetch(fc_softmax_args a) {
    softmax_split_held_pipelined<FC_SOFTMAX_SPLIT_HELD_THREADS, HELD, true, true, stamp_trace>(a);
}
extern "C" __global__ void __launch_bounds__(FC_SOFTMAX_SPLIT_HELD_THREADS,
                                             FC_SOFTMAX_SPLIT_HELD_BLOCKS_PER_SM)
    traced_merged(fc_softmax_args a) {
    softmax_split_held_pipelined<FC_SOFTMAX_SPLIT_HELD_THREADS, HELD, true, false, stamp_trace>(a);
}

// The smallest carveout at which `blocks` blocks of f fit an SM (the library's choice,
// src/cuda/kernels.c carveout_for), or 100.
static int carveout_for(const void *f, int threads, int blocks) {
    for (int c = 0; c <= 100; c++) {
        int occ = 0;
        CK(cudaFuncSetAttribute(f, cudaFuncAttributePreferredSharedMemoryCarveout, c));
        CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, f, threads, 0));
        if (occ >= blocks) return c;
    }
    return 100;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    const int rows = argc > 1 ? std::atoi(argv[1]) : 8;
    const long cols = argc > 2 ? std::atol(argv[2]) : 8388608;
    const int cols_per_slice = FC_SOFTMAX_SPLIT_HELD_THREADS * FC_SOFTMAX_SPLIT_HELD_ITEMS;
    const int slices = (int)((cols + cols_per_slice - 1) / cols_per_slice);
    const int tickets = rows * slices;
    const size_t n = (size_t)rows * cols, bytes = n * 4;
    int sms;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const int fit = sms * FC_SOFTMAX_SPLIT_HELD_BLOCKS_PER_SM;
    if (slices > 2 * fit - 1) {
        std::fprintf(stderr, "%d slices a row: more than the merged kernel takes (%d)\n", slices,
                     2 * fit - 1);
        return 1;
    }
    std::vector<float> hx(n);
    unsigned long long seed = 7;
    for (size_t i = 0; i < n; i++) { // uniform in [-4, 4)
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        hx[i] = (float)((seed >> 40) * (8.0 / 16777216.0) - 4.0);
    }
    void *dx, *dy, *dstate;
    unsigned long long *dstamps;
    const size_t words = 1 + (size_t)rows * (slices + 2);
    CK(cudaMalloc(&dx, bytes));
    CK(cudaMalloc(&dy, bytes));
    CK(cudaMalloc(&dstate, words * 8));
    CK(cudaMalloc(&dstamps, (size_t)tickets * EVENTS * 8));
    CK(cudaMemcpy(dx, hx.data(), bytes, cudaMemcpyHostToDevice));
    CK(cudaMemcpyToSymbol(g_stamps, &dstamps, sizeof dstamps));
    CK(cudaMemcpyToSymbol(g_tickets, &tickets, sizeof tickets));
    fc_softmax_args a;
    std::memset(&a, 0, sizeof a);
    a.x = (uint64_t)dx, a.y = (uint64_t)dy, a.rows = rows, a.cols = cols;
    a.x_stride = a.y_stride = cols, a.chunk_cols = cols_per_slice, a.counters = (uint64_t)dstate;
    a.clear = (uint64_t)dstate, a.clear_words = 0, a.clear_per = 0; // the host zeroes the state
    a.scale = 1.0f, a.log = 0, a.y_dtype = FC_F32, a.x_vec_ok = a.y_vec_ok = 1;
    a.chunks = slices;
    struct Run {
        const char *name;
        const void *kernel;
        int prefetch;
    };
    const int ahead = fit * 5 / 8; // the library's stall_prefetch_ahead
    const Run runs[] = {
        {"library fc_softmax_split_held_pipelined_merged_prefetch_f32 (untraced)",
         (const void *)fc_softmax_split_held_pipelined_merged_prefetch_f32, ahead},
        {"traced, stall prefetch", (const void *)traced_merged_prefetch, ahead},
        {"traced, no prefetch", (const void *)traced_merged, 0},
    };
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::printf("%dx%ld f32: %d slices of %d a row, grid %d blocks (%d SMs)\n", rows, cols, slices,
                cols_per_slice, fit, sms);
    for (const Run &run : runs) {
        const int carveout = carveout_for(run.kernel, FC_SOFTMAX_SPLIT_HELD_THREADS,
                                          FC_SOFTMAX_SPLIT_HELD_BLOCKS_PER_SM);
        a.prefetch = (int16_t)run.prefetch;
        std::vector<float> ts;
        for (int it = 0; it < 12; it++) {
            CK(cudaMemsetAsync(dstate, 0, words * 8));
            CK(cudaMemsetAsync(dstamps, 0, (size_t)tickets * EVENTS * 8));
            void *params[] = {&a};
            CK(cudaEventRecord(e0));
            CK(cudaLaunchCooperativeKernel(run.kernel, fit, FC_SOFTMAX_SPLIT_HELD_THREADS, params,
                                           0, 0));
            CK(cudaEventRecord(e1));
            CK(cudaEventSynchronize(e1));
            float ms;
            CK(cudaEventElapsedTime(&ms, e0, e1));
            ts.push_back(ms);
        }
        std::sort(ts.begin() + 2, ts.end());
        // row 0 against a double reference (relative error)
        std::vector<float> hy(cols);
        CK(cudaMemcpy(hy.data(), dy, cols * 4, cudaMemcpyDeviceToHost));
        double m = -1e300, d = 0, worst = 0;
        for (long j = 0; j < cols; j++) m = std::max(m, (double)hx[j]);
        for (long j = 0; j < cols; j++) d += std::exp((double)hx[j] - m);
        for (long j = 0; j < cols; j++) {
            const double ref = std::exp((double)hx[j] - m) / d;
            const double err = std::fabs(ref - hy[j]) / ref;
            if (!(err <= worst)) worst = err;
        }
        std::printf("\n%s: carveout %d, median %.4f ms (min %.4f), %.1f GB/s, row 0 relerr %.1e\n",
                    run.name, carveout, ts[2 + (ts.size() - 2) / 2], ts[2],
                    2.0 * bytes / ts[2] / 1e6, worst);
        if (run.kernel == (const void *)fc_softmax_split_held_pipelined_merged_prefetch_f32)
            continue;
        // the last launch's stamps
        std::vector<unsigned long long> st((size_t)tickets * EVENTS);
        CK(cudaMemcpy(st.data(), dstamps, st.size() * 8, cudaMemcpyDeviceToHost));
        const auto at = [&](int t, int e) { return st[(size_t)t * EVENTS + e]; };
        unsigned long long t0 = ~0ull, t1 = 0, step = ~0ull;
        for (int t = 0; t < tickets; t++)
            for (int e = 0; e < EVENTS; e++) {
                if (!at(t, e)) {
                    std::printf("ticket %d event %d not stamped\n", t, e);
                    return 1;
                }
                t0 = std::min(t0, at(t, e)), t1 = std::max(t1, at(t, e));
                if (e > 0 && at(t, e) > at(t, e - 1))
                    step = std::min(step, at(t, e) - at(t, e - 1));
            }
        std::printf("stamps over %.2f us (smallest step seen %llu ns: the timer's grain at most)\n",
                    (t1 - t0) / 1e3, step);
        std::printf("row  loads begin..end (us)  waits end first..last  stores end  load span  "
                    "last load -> first wait end\n");
        for (int r = 0; r < rows; r++) {
            unsigned long long db = ~0ull, le = 0, wf = ~0ull, wl = 0, se = 0;
            for (int t = r * slices; t < (r + 1) * slices; t++) {
                db = std::min(db, at(t, FC_TRACE_DRAWN));
                le = std::max(le, at(t, FC_TRACE_LOADED));
                wf = std::min(wf, at(t, FC_TRACE_WAIT_END));
                wl = std::max(wl, at(t, FC_TRACE_WAIT_END));
                se = std::max(se, at(t, FC_TRACE_STORED));
            }
            std::printf("%3d  %8.2f .. %8.2f     %8.2f .. %8.2f   %8.2f   %7.2f    %7.2f\n", r,
                        (db - t0) / 1e3, (le - t0) / 1e3, (wf - t0) / 1e3, (wl - t0) / 1e3,
                        (se - t0) / 1e3, (le - db) / 1e3, ((double)wf - (double)le) / 1e3);
        }
        // timeline: blocks loading (drawn..loaded), waiting (wait begin..end), storing (wait
        // end..stored), in bins of 1/40 of the kernel
        const int bins = 40;
        const double w = (double)(t1 - t0) / bins;
        std::vector<double> load(bins), wait(bins), store(bins);
        const auto add = [&](std::vector<double> &v, unsigned long long b, unsigned long long e) {
            for (int i = 0; i < bins; i++) {
                const double lo = t0 + i * w, hi = lo + w;
                const double o = std::min<double>(hi, e) - std::max<double>(lo, b);
                if (o > 0) v[i] += o / w;
            }
        };
        for (int t = 0; t < tickets; t++) {
            add(load, at(t, FC_TRACE_DRAWN), at(t, FC_TRACE_LOADED));
            add(wait, at(t, FC_TRACE_WAIT_BEGIN), at(t, FC_TRACE_WAIT_END));
            add(store, at(t, FC_TRACE_WAIT_END), at(t, FC_TRACE_STORED));
        }
        std::printf("bin (us)   blocks loading / waiting / storing (average over the bin, of %d)\n",
                    fit);
        for (int i = 0; i < bins; i++)
            std::printf("%7.2f  %6.1f %6.1f %6.1f\n", i * w / 1e3, load[i], wait[i], store[i]);
    }
    return 0;
}
