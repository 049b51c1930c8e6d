// Probe (not built by CMake; see README.md): split-row softmax of a few very long rows on one
// GPU, two designs. run(): two passes whose second read was meant to hit L2. runheld(): each
// slice held on chip (registers, then parked in shared memory) from its one read to its one
// write, the row's (max, sum) exchanged through global words in one of three ways (MODE).
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cmath>
#include <vector>
#include <algorithm>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1);} } while (0)

__device__ __forceinline__ uint64_t pol(int h) {
    uint64_t p = 0;
    if (h == 1) asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(p));
    if (h == 2) asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
    if (h == 3) asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(p));
    return p;
}
__device__ __forceinline__ uint4 ld(const uint4 *a, int h, uint64_t p) {
    uint4 v;
    if (h == 0)
        asm volatile("ld.global.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(a));
    else if (h == 4)
        asm volatile("ld.global.cs.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(a));
    else
        asm volatile("ld.global.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(a), "l"(p));
    return v;
}
__device__ __forceinline__ void st(uint4 *a, uint4 v, int h, uint64_t p) {
    if (h == 0)
        asm volatile("st.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(a), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
    else if (h == 4)
        asm volatile("st.global.cs.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(a), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
    else
        asm volatile("st.global.L2::cache_hint.v4.u32 [%0], {%1,%2,%3,%4}, %5;" ::"l"(a), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "l"(p) : "memory");
}

template <bool F16> struct io {
    static constexpr int VEC = F16 ? 8 : 4;
    static __device__ void unpack(uint4 r, float *o) {
        if constexpr (F16) {
            const unsigned w[4] = {r.x, r.y, r.z, r.w};
            _Pragma("unroll") for (int i = 0; i < 4; i++) {
                o[2 * i] = __half2float(__ushort_as_half((unsigned short)(w[i] & 0xffffu)));
                o[2 * i + 1] = __half2float(__ushort_as_half((unsigned short)(w[i] >> 16)));
            }
        } else {
            o[0] = __uint_as_float(r.x), o[1] = __uint_as_float(r.y), o[2] = __uint_as_float(r.z), o[3] = __uint_as_float(r.w);
        }
    }
    static __device__ uint4 pack(const float *o) {
        if constexpr (F16) {
            unsigned w[4];
            _Pragma("unroll") for (int i = 0; i < 4; i++)
                w[i] = (unsigned)__half_as_ushort(__float2half_rn(o[2 * i])) | ((unsigned)__half_as_ushort(__float2half_rn(o[2 * i + 1])) << 16);
            return make_uint4(w[0], w[1], w[2], w[3]);
        } else {
            return make_uint4(__float_as_uint(o[0]), __float_as_uint(o[1]), __float_as_uint(o[2]), __float_as_uint(o[3]));
        }
    }
};

__device__ __forceinline__ float sub(float m) { return m == -INFINITY ? 0.f : m; }
__device__ __forceinline__ void merge(float &m, float &d, float m2, float d2) {
    float M = fmaxf(m, m2), s = sub(M);
    d = d * __expf(m - s) + d2 * __expf(m2 - s);
    m = M;
}
__device__ unsigned long long pk(float m, float d) { return ((unsigned long long)__float_as_uint(m) << 32) | __float_as_uint(d); }
__device__ float2 upk(unsigned long long w) { return make_float2(__uint_as_float((unsigned)(w >> 32)), __uint_as_float((unsigned)w)); }

struct Args {
    const uint4 *x; uint4 *y;
    int rows, S, slice_vecs, lead, grid, h1, h2, hs, ticketed;
    unsigned long long *words, *final_; unsigned *arrivals; unsigned *ticket;
};

template <int TPB> __device__ float2 bmerge(float m, float d, float2 *ws) {
    for (int o = 16; o; o >>= 1) {
        float m2 = __shfl_xor_sync(~0u, m, o), d2 = __shfl_xor_sync(~0u, d, o);
        merge(m, d, m2, d2);
    }
    if ((threadIdx.x & 31) == 0) ws[threadIdx.x >> 5] = make_float2(m, d);
    __syncthreads();
    float2 r = ws[0];
    for (int i = 1; i < TPB / 32; i++) merge(r.x, r.y, ws[i].x, ws[i].y);
    __syncthreads();
    return r;
}

template <bool F16, int TPB, int NV> __global__ void __launch_bounds__(TPB) two_pass(Args a) {
    constexpr int VEC = io<F16>::VEC;
    const int S = a.S, N = a.rows * S;
    const int D = min(a.lead, N);
    const int T = 2 * N;
    __shared__ int sh_t, sh_last;
    __shared__ float2 sh_final;
    __shared__ float2 ws[TPB / 32];
    const uint64_t p1 = pol(a.h1), p2 = pol(a.h2), ps = pol(a.hs);
    for (int k = 0;; k++) {
        int t;
        if (a.ticketed) {
            if (threadIdx.x == 0) sh_t = (int)atomicAdd(a.ticket, 1u);
            __syncthreads();
            t = sh_t;
            __syncthreads();
        } else {
            t = blockIdx.x + k * a.grid;
        }
        if (t >= T) return;
        int phase, i;
        if (t < D) phase = 1, i = t;
        else {
            const int u = t - D;
            if (u < 2 * (N - D)) phase = (u & 1) ? 2 : 1, i = (u & 1) ? u / 2 : u / 2 + D;
            else phase = 2, i = N - D + (u - 2 * (N - D));
        }
        const int row = i / S;
        const uint4 *xs = a.x + (size_t)i * a.slice_vecs + threadIdx.x;
        uint4 raw[NV];
        if (phase == 1) {
#pragma unroll
            for (int v = 0; v < NV; v++) raw[v] = ld(xs + v * TPB, a.h1, p1);
            float m = -INFINITY;
            float f[NV][VEC];
#pragma unroll
            for (int v = 0; v < NV; v++) {
                io<F16>::unpack(raw[v], f[v]);
                _Pragma("unroll") for (int e = 0; e < VEC; e++) m = fmaxf(m, f[v][e]);
            }
            float d = 0.f, s = sub(m);
#pragma unroll
            for (int v = 0; v < NV; v++)
                _Pragma("unroll") for (int e = 0; e < VEC; e++) d += __expf(f[v][e] - s);
            float2 r = bmerge<TPB>(m, d, ws);
            if (threadIdx.x == 0) {
                __stcg(a.words + i, pk(r.x, r.y));
                __threadfence();
                sh_last = atomicAdd(a.arrivals + row, 1u) == (unsigned)S - 1;
            }
            __syncthreads();
            if (sh_last) {
                __threadfence();
                float M = -INFINITY, Dd = 0.f;
                for (int j = threadIdx.x; j < S; j += TPB) {
                    float2 q = upk(__ldcg(a.words + (size_t)row * S + j));
                    merge(M, Dd, q.x, q.y);
                }
                float2 r2 = bmerge<TPB>(M, Dd, ws);
                if (threadIdx.x == 0) {
                    __threadfence();
                    asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(a.final_ + row), "l"(pk(r2.x, r2.y)) : "memory");
                }
            }
            __syncthreads();
        } else {
            if (threadIdx.x == 0) {
                unsigned long long w;
                for (;;) {
                    asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(w) : "l"(a.final_ + row) : "memory");
                    if (w) break;
                    __nanosleep(100);
                }
                sh_final = upk(w);
            }
#pragma unroll
            for (int v = 0; v < NV; v++) raw[v] = ld(xs + v * TPB, a.h2, p2);
            __syncthreads();
            const float2 r = sh_final;
            const float s = sub(r.x), inv = 1.0f / r.y;
            uint4 *ys = a.y + (size_t)i * a.slice_vecs + threadIdx.x;
#pragma unroll
            for (int v = 0; v < NV; v++) {
                float f[VEC];
                io<F16>::unpack(raw[v], f);
                _Pragma("unroll") for (int e = 0; e < VEC; e++) f[e] = __expf(f[e] - s) * inv;
                st(ys + v * TPB, io<F16>::pack(f), a.hs, ps);
            }
            __syncthreads();
        }
    }
}

__global__ void copyk(const uint4 *x, uint4 *y, size_t n) {
    const size_t step = (size_t)gridDim.x * blockDim.x;
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    for (; i + 3 * step < n; i += 4 * step) {
        uint4 a0 = x[i], a1 = x[i + step], a2 = x[i + 2 * step], a3 = x[i + 3 * step];
        y[i] = a0; y[i + step] = a1; y[i + 2 * step] = a2; y[i + 3 * step] = a3;
    }
    for (; i < n; i += step) y[i] = x[i];
}

// reads x twice with a given distance: pass A reads [0,n), pass B reads [0,n) again (separate kernels)
__global__ void readk(const uint4 *x, size_t n, unsigned *sink, int h) {
    uint4 acc = make_uint4(0, 0, 0, 0);
    uint64_t p = pol(h);
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint4 v = ld(x + i, h, p);
        acc.x ^= v.x; acc.y ^= v.y;
    }
    if (acc.x == 0x12345678u && acc.y == 1u) *sink = 1;
}

static float h2f(uint16_t h) { __half x = *reinterpret_cast<__half *>(&h); return __half2float(x); }
// the same random rows in [-4, 4) for every form (seed 7)
template <bool F16> static void fill_input(std::vector<char> &hx, size_t nel) {
    srand(7);
    for (size_t i = 0; i < nel; i++) {
        float v = ((rand() & 0xffff) / 65536.0f - 0.5f) * 8.0f;
        if (F16) { __half h = __float2half(v); memcpy(&hx[i * 2], &h, 2); } else memcpy(&hx[i * 4], &v, 4);
    }
}

// ---- held pipelined probe: slices held (regs + one parked in smem), row stats by MODE ----
// MODE 0: publish word + count, then each lane waits each word in turn (the library's gather)
// MODE 1: publish word, release-add count; after the count, words loaded in a batch
// MODE 2: the last arriver merges the row's words and publishes the row's (M, D) in one word
struct HArgs {
    const uint4 *x; uint4 *y;
    int rows, S, slice_vecs;
    unsigned long long *words, *fin; unsigned *arrivals; unsigned *ticket;
};
__device__ __forceinline__ unsigned long long ldrel(const unsigned long long *p) {
    unsigned long long v; asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory"); return v;
}
__device__ __forceinline__ unsigned ldacq32(const unsigned *p) {
    unsigned v; asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory"); return v;
}
__device__ __forceinline__ unsigned long long ldacq(const unsigned long long *p) {
    unsigned long long v; asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory"); return v;
}
template <bool F16, int TPB, int NV, int MODE, int ST> __global__ void __launch_bounds__(TPB, 4) held(HArgs a) {
    constexpr int VEC = io<F16>::VEC;
    __shared__ uint4 parked[NV * TPB];
    __shared__ float2 ws[TPB / 32];
    __shared__ float2 rowst;
    __shared__ int sh_t, sh_last;
    const int S = a.S, total = a.rows * S;
    uint4 raw[NV];
    static_assert(MODE >= 0 && MODE <= 2, "MODE 0, 1 or 2");
    auto draw = [&]() { if (threadIdx.x == 0) sh_t = (int)atomicAdd(a.ticket, 1u); __syncthreads(); int t = sh_t; return t; };
    auto merge_row = [&](int row) {
        __threadfence();
        float M = -INFINITY, D = 0.f;
        for (int j = threadIdx.x; j < S; j += TPB) { float2 q = upk(__ldcg(a.words + (size_t)row * S + j)); merge(M, D, q.x, q.y); }
        float2 f = bmerge<TPB>(M, D, ws);
        if (threadIdx.x == 0) { __threadfence(); asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(a.fin + row), "l"(pk(f.x, f.y)) : "memory"); }
    };
    auto take = [&](int t) {
        const uint4 *xs = a.x + (size_t)t * a.slice_vecs + threadIdx.x;
#pragma unroll
        for (int v = 0; v < NV; v++) raw[v] = __ldg(xs + v * TPB);
        float m = -INFINITY;
        if constexpr (F16) {
            unsigned acc = 0xfc00fc00u;
#pragma unroll
            for (int v = 0; v < NV; v++) {
                const unsigned w[4] = {raw[v].x, raw[v].y, raw[v].z, raw[v].w};
                _Pragma("unroll") for (int i = 0; i < 4; i++) asm("max.f16x2 %0, %1, %2;" : "=r"(acc) : "r"(acc), "r"(w[i]));
            }
            m = fmaxf(__half2float(__ushort_as_half((unsigned short)(acc & 0xffffu))), __half2float(__ushort_as_half((unsigned short)(acc >> 16))));
        } else {
#pragma unroll
        for (int v = 0; v < NV; v++) { float f[VEC]; io<F16>::unpack(raw[v], f); _Pragma("unroll") for (int e = 0; e < VEC; e++) m = fmaxf(m, f[e]); }
        }
        float d = 0.f; const float s = sub(m);
#pragma unroll
        for (int v = 0; v < NV; v++) { float f[VEC]; io<F16>::unpack(raw[v], f); _Pragma("unroll") for (int e = 0; e < VEC; e++) d += __expf(f[e] - s); }
        float2 r = bmerge<TPB>(m, d, ws);
        const int row = t / S;
        if (threadIdx.x == 0) {
            if (MODE == 0) {
                asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(a.words + t), "l"(pk(r.x, r.y)) : "memory");
                atomicAdd(a.arrivals + row, 1u);
            } else {
                __stcg(a.words + t, pk(r.x, r.y));
                __threadfence();
                const unsigned old = atomicAdd(a.arrivals + row, 1u);
                sh_last = MODE == 2 && old == (unsigned)S - 1;
            }
        }
        if (MODE == 2) {
            __syncthreads();
            if (sh_last) merge_row(row); /* before this block waits for anything */
        }
        return m;
    };
    auto stats = [&](int row) {
        if (MODE == 2) {
            if (threadIdx.x == 0) { unsigned long long w; while (!(w = ldacq(a.fin + row))) __nanosleep(64); rowst = upk(w); }
            __syncthreads();
        } else {
            if (threadIdx.x == 0) { while (ldacq32(a.arrivals + row) < (unsigned)S) __nanosleep(64); }
            __syncthreads();
            if (threadIdx.x < 32) {
                float M = -INFINITY, D = 0.f;
                if (MODE == 0) {
                    for (int i = threadIdx.x; i < S; i += 32) { unsigned long long w; while (!(w = ldrel(a.words + (size_t)row * S + i))) __nanosleep(64); float2 q = upk(w); merge(M, D, q.x, q.y); }
                } else {
                    int i = threadIdx.x;
                    for (; i + 96 < S; i += 128) {
                        float2 q0 = upk(__ldcg(a.words + (size_t)row * S + i)), q1 = upk(__ldcg(a.words + (size_t)row * S + i + 32));
                        float2 q2 = upk(__ldcg(a.words + (size_t)row * S + i + 64)), q3 = upk(__ldcg(a.words + (size_t)row * S + i + 96));
                        merge(M, D, q0.x, q0.y); merge(M, D, q1.x, q1.y); merge(M, D, q2.x, q2.y); merge(M, D, q3.x, q3.y);
                    }
                    for (; i < S; i += 32) { float2 q = upk(__ldcg(a.words + (size_t)row * S + i)); merge(M, D, q.x, q.y); }
                }
                for (int o = 16; o; o >>= 1) { float m2 = __shfl_xor_sync(~0u, M, o), d2 = __shfl_xor_sync(~0u, D, o); merge(M, D, m2, d2); }
                if (threadIdx.x == 0) rowst = make_float2(M, D);
            }
            __syncthreads();
        }
        return rowst;
    };
    int t = draw();
    if (t >= total) return;
    float m = take(t);
    for (;;) {
#pragma unroll
        for (int v = 0; v < NV; v++) parked[v * TPB + threadIdx.x] = raw[v];
        const float pm = m;
        const int p = t;
        __syncthreads();
        t = draw();
        if (t < total) m = take(t);
        const float2 r = stats(p / S);
        const float s = sub(pm), f = __expf(pm - sub(r.x)) / r.y;
        uint4 *ys = a.y + (size_t)p * a.slice_vecs + threadIdx.x;
#pragma unroll
        for (int v = 0; v < NV; v++) {
            float o[VEC]; io<F16>::unpack(parked[v * TPB + threadIdx.x], o);
            _Pragma("unroll") for (int e = 0; e < VEC; e++) o[e] = __expf(o[e] - s) * f;
            if (ST) __stcs(ys + v * TPB, io<F16>::pack(o)); else ys[v * TPB] = io<F16>::pack(o);
        }
        if (t >= total) return;
    }
}

template <bool F16, int TPB, int NV, int MODE, int ST> void runheld(int rows, long cols, const char *tag) {
    constexpr int VEC = F16 ? 8 : 4;
    const int esz = F16 ? 2 : 4;
    const long slice_cols = (long)TPB * NV * VEC;
    const int S = (int)(cols / slice_cols);
    const size_t nel = (size_t)rows * cols, bytes = nel * esz;
    void *dx, *dy;
    CK(cudaMalloc(&dx, bytes)); CK(cudaMalloc(&dy, bytes));
    std::vector<char> hx(bytes);
    fill_input<F16>(hx, nel);
    CK(cudaMemcpy(dx, hx.data(), bytes, cudaMemcpyHostToDevice));
    unsigned long long *words, *fin; unsigned *arr, *tick;
    CK(cudaMalloc(&words, (size_t)rows * S * 8)); CK(cudaMalloc(&fin, rows * 8)); CK(cudaMalloc(&arr, rows * 4)); CK(cudaMalloc(&tick, 4));
    int dev; cudaGetDevice(&dev); cudaDeviceProp pr; cudaGetDeviceProperties(&pr, dev);
    int occ; CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, held<F16, TPB, NV, MODE, ST>, TPB, 0));
    HArgs a{(const uint4 *)dx, (uint4 *)dy, rows, S, TPB * NV, words, fin, arr, tick};
    const int grid = std::min(pr.multiProcessorCount * occ, rows * S);
    cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
    std::vector<float> ts, tc;
    for (int it = 0; it < 14; it++) {
        CK(cudaMemsetAsync(fin, 0, rows * 8)); CK(cudaMemsetAsync(arr, 0, rows * 4)); CK(cudaMemsetAsync(tick, 0, 4));
        CK(cudaMemsetAsync(words, 0, (size_t)rows * S * 8));
        cudaEventRecord(e0);
        void *params[] = {&a};
        CK(cudaLaunchCooperativeKernel((void *)held<F16, TPB, NV, MODE, ST>, grid, TPB, params, 0, 0));
        cudaEventRecord(e1); CK(cudaEventSynchronize(e1));
        float ms; cudaEventElapsedTime(&ms, e0, e1); ts.push_back(ms);
    }
    for (int it = 0; it < 12; it++) {
        cudaEventRecord(e0);
        copyk<<<pr.multiProcessorCount * 8, 256>>>((const uint4 *)dx, (uint4 *)dy, bytes / 16);
        cudaEventRecord(e1); CK(cudaEventSynchronize(e1));
        float ms; cudaEventElapsedTime(&ms, e0, e1); tc.push_back(ms);
    }
    // check
    CK(cudaMemsetAsync(fin, 0, rows * 8)); CK(cudaMemsetAsync(arr, 0, rows * 4)); CK(cudaMemsetAsync(tick, 0, 4)); CK(cudaMemsetAsync(words, 0, (size_t)rows * S * 8));
    CK(cudaMemset(dy, 0xff, bytes));
    { void *params[] = {&a}; CK(cudaLaunchCooperativeKernel((void *)held<F16, TPB, NV, MODE, ST>, grid, TPB, params, 0, 0)); }
    CK(cudaDeviceSynchronize());
    std::vector<char> hy(bytes);
    CK(cudaMemcpy(hy.data(), dy, bytes, cudaMemcpyDeviceToHost));
    double err = 0;
    for (int r : {0, rows - 1}) {
        auto gx = [&](size_t j) { size_t k = (size_t)r * cols + j; if (F16) { uint16_t h; memcpy(&h, &hx[k * 2], 2); return (double)h2f(h); } float f; memcpy(&f, &hx[k * 4], 4); return (double)f; };
        auto gy = [&](size_t j) { size_t k = (size_t)r * cols + j; if (F16) { uint16_t h; memcpy(&h, &hy[k * 2], 2); return (double)h2f(h); } float f; memcpy(&f, &hy[k * 4], 4); return (double)f; };
        double m = -1e300, d = 0;
        for (long j = 0; j < cols; j++) m = std::max(m, gx(j));
        for (long j = 0; j < cols; j++) d += exp(gx(j) - m);
        for (long j = 0; j < cols; j++) { double ref = exp(gx(j) - m) / d; double e = fabs(ref - gy(j)) / (ref + (F16 ? 1e-6 : 1e-30)); if (!(e <= err)) err = e; }
    }
    std::sort(ts.begin() + 2, ts.end()); std::sort(tc.begin() + 2, tc.end());
    float med = ts[2 + (ts.size() - 2) / 2], cmed = tc[2 + (tc.size() - 2) / 2];
    printf("%-22s st%d %s %dx%ld S=%d grid=%d (%d/SM): min %.4f med %.4f ms, %.0f GB/s, copy %.4f -> %.1f%% of copy, err %.2e\n", tag, ST, F16 ? "f16" : "f32", rows, cols, S, grid, occ, ts[2], med, 2.0 * bytes / med / 1e6, cmed, 100.0 * cmed / med, err);
    cudaFree(dx); cudaFree(dy); cudaFree(words); cudaFree(fin); cudaFree(arr); cudaFree(tick);
}

template <bool F16, int TPB, int NV>
void run(int rows, long cols, int lead_slices, int h1, int h2, int hs, int ticketed, int bps, const char *tag, bool check) {
    constexpr int VEC = F16 ? 8 : 4;
    const int esz = F16 ? 2 : 4;
    const long slice_cols = (long)TPB * NV * VEC;
    const int S = (int)(cols / slice_cols);
    const size_t nel = (size_t)rows * cols, bytes = nel * esz;
    static void *dx = nullptr, *dy = nullptr; static size_t have = 0;
    static std::vector<char> hx;
    if (have < bytes) {
        if (dx) { cudaFree(dx); cudaFree(dy); }
        CK(cudaMalloc(&dx, bytes)); CK(cudaMalloc(&dy, bytes)); have = bytes;
    }
    hx.resize(bytes);
    fill_input<F16>(hx, nel);
    CK(cudaMemcpy(dx, hx.data(), bytes, cudaMemcpyHostToDevice));
    unsigned long long *words, *fin; unsigned *arr, *tick;
    CK(cudaMalloc(&words, (size_t)rows * S * 8)); CK(cudaMalloc(&fin, rows * 8)); CK(cudaMalloc(&arr, rows * 4)); CK(cudaMalloc(&tick, 4));
    int dev; cudaGetDevice(&dev); cudaDeviceProp pr; cudaGetDeviceProperties(&pr, dev);
    int occ; CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, two_pass<F16, TPB, NV>, TPB, 0));
    int per = std::min(occ, bps);
    Args a{(const uint4 *)dx, (uint4 *)dy, rows, S, TPB * NV, lead_slices, pr.multiProcessorCount * per, h1, h2, hs, ticketed, words, fin, arr, tick};
    cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
    std::vector<float> ts;
    for (int it = 0; it < 12; it++) {
        CK(cudaMemsetAsync(fin, 0, rows * 8)); CK(cudaMemsetAsync(arr, 0, rows * 4)); CK(cudaMemsetAsync(tick, 0, 4));
        CK(cudaMemsetAsync(words, 0, (size_t)rows * S * 8));
        cudaEventRecord(e0);
        void *params[] = {&a};
        if (ticketed) two_pass<F16, TPB, NV><<<a.grid, TPB>>>(a);
        else CK(cudaLaunchCooperativeKernel((void *)two_pass<F16, TPB, NV>, a.grid, TPB, params, 0, 0));
        cudaEventRecord(e1);
        CK(cudaEventSynchronize(e1));
        float ms; cudaEventElapsedTime(&ms, e0, e1); ts.push_back(ms);
    }
    CK(cudaGetLastError());
    std::sort(ts.begin() + 2, ts.end());
    float med = ts[2 + (ts.size() - 2) / 2], mn = ts[2];
    // copy reference
    std::vector<float> tc;
    for (int it = 0; it < 12; it++) {
        cudaEventRecord(e0);
        copyk<<<pr.multiProcessorCount * 8, 256>>>((const uint4 *)dx, (uint4 *)dy, bytes / 16);
        cudaEventRecord(e1); CK(cudaEventSynchronize(e1));
        float ms; cudaEventElapsedTime(&ms, e0, e1); tc.push_back(ms);
    }
    std::sort(tc.begin() + 2, tc.end());
    float cmed = tc[2 + (tc.size() - 2) / 2];
    double err = 0;
    if (check) {
        // rerun once and check two rows fully
        CK(cudaMemsetAsync(fin, 0, rows * 8)); CK(cudaMemsetAsync(arr, 0, rows * 4)); CK(cudaMemsetAsync(tick, 0, 4));
        void *params[] = {&a};
        if (ticketed) two_pass<F16, TPB, NV><<<a.grid, TPB>>>(a);
        else CK(cudaLaunchCooperativeKernel((void *)two_pass<F16, TPB, NV>, a.grid, TPB, params, 0, 0));
        CK(cudaDeviceSynchronize());
        std::vector<char> hy(bytes);
        CK(cudaMemcpy(hy.data(), dy, bytes, cudaMemcpyDeviceToHost));
        for (int r : {0, rows - 1}) {
            double m = -1e300, d = 0;
            auto gx = [&](size_t j) { size_t k = (size_t)r * cols + j; if (F16) { uint16_t h; memcpy(&h, &hx[k * 2], 2); return (double)h2f(h); } float f; memcpy(&f, &hx[k * 4], 4); return (double)f; };
            auto gy = [&](size_t j) { size_t k = (size_t)r * cols + j; if (F16) { uint16_t h; memcpy(&h, &hy[k * 2], 2); return (double)h2f(h); } float f; memcpy(&f, &hy[k * 4], 4); return (double)f; };
            for (long j = 0; j < cols; j++) m = std::max(m, gx(j));
            for (long j = 0; j < cols; j++) d += exp(gx(j) - m);
            for (long j = 0; j < cols; j++) { double ref = exp(gx(j) - m) / d; err = std::max(err, fabs(ref - gy(j)) / std::max(ref, 1e-30)); }
        }
    }
    printf("%-28s %s %dx%ld S=%d lead=%d h=%d/%d/%d %s bps=%d: min %.4f med %.4f ms, %.0f GB/s, copy %.4f ms -> %.1f%% of copy, relerr %.2e\n",
           tag, F16 ? "f16" : "f32", rows, cols, S, lead_slices, h1, h2, hs, ticketed ? "tick" : "coop", per, mn, med,
           2.0 * bytes / med / 1e6, cmed, 100.0 * cmed / med, err);
    cudaFree(words); cudaFree(fin); cudaFree(arr); cudaFree(tick);
}

void reread(size_t mb, int h) {
    size_t bytes = mb << 20;
    void *x; unsigned *sink;
    CK(cudaMalloc(&x, bytes)); CK(cudaMalloc(&sink, 4)); CK(cudaMemset(x, 1, bytes));
    cudaEvent_t e0, e1, e2; cudaEventCreate(&e0); cudaEventCreate(&e1); cudaEventCreate(&e2);
    float a = 0, b = 0;
    for (int it = 0; it < 5; it++) {
        CK(cudaMemset(x, it, bytes));  // flush-ish: writes
        cudaEventRecord(e0);
        readk<<<132 * 8, 256>>>((const uint4 *)x, bytes / 16, sink, h);
        cudaEventRecord(e1);
        readk<<<132 * 8, 256>>>((const uint4 *)x, bytes / 16, sink, h);
        cudaEventRecord(e2);
        CK(cudaEventSynchronize(e2));
        cudaEventElapsedTime(&a, e0, e1); cudaEventElapsedTime(&b, e1, e2);
    }
    printf("reread %zu MB hint %d: first %.4f ms (%.0f GB/s) second %.4f ms (%.0f GB/s)\n", mb, h, a, bytes / a / 1e6, b, bytes / b / 1e6);
    cudaFree(x); cudaFree(sink);
}

// ./probe 0: the two-pass form (and plain re-reads of 8..64 MB); ./probe 1: the held form.
int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    const long C = 8388608;
    const int which = argc > 1 ? atoi(argv[1]) : 1;
    if (which == 0) {
        for (size_t mb : {8, 16, 24, 32, 40, 48, 64}) reread(mb, 0);
        for (size_t mb : {32, 40, 48}) reread(mb, 1);
        /* f32: slices of 256 x 4 x 4 = 4096 columns (16 KB), 2048 a row; lead in slices */
        for (int lead : {2048, 2048 + 512, 2048 + 1024, 3072 + 1024})
            run<false, 256, 4>(8, C, lead, 0, 0, 0, 0, 8, "f32 nohint", lead == 2048);
        for (int lead : {2048, 2048 + 512, 2048 + 1024})
            run<false, 256, 4>(8, C, lead, 1, 2, 2, 0, 8, "f32 last/first/first", lead == 2048);
        run<false, 256, 4>(8, C, 2048 + 512, 1, 4, 4, 0, 8, "f32 last/cs/cs", false);
        run<false, 256, 4>(8, C, 2048 + 512, 1, 2, 2, 1, 8, "f32 ticketed", false);
        run<false, 256, 4>(8, C, 2048 + 512, 1, 2, 2, 0, 4, "f32 bps4", false);
        /* f16: slices of 256 x 4 x 8 = 8192 columns (16 KB), 1024 a row */
        for (int lead : {1024, 1024 + 256, 1024 + 512, 2048})
            run<true, 256, 4>(8, C, lead, 0, 0, 0, 0, 8, "f16 nohint", lead == 1024);
        for (int lead : {1024, 1024 + 256, 1024 + 512, 2048})
            run<true, 256, 4>(8, C, lead, 1, 2, 2, 0, 8, "f16 last/first/first", false);
        run<true, 256, 4>(8, C, 1024 + 512, 1, 4, 4, 0, 8, "f16 last/cs/cs", false);
        return 0;
    }
    runheld<true, 256, 8, 0, 1>(8, C, "held gather(lib)");
    runheld<true, 256, 8, 1, 1>(8, C, "held count+batch");
    runheld<true, 256, 8, 2, 1>(8, C, "held last-merges");
    runheld<false, 256, 8, 0, 1>(8, C, "held gather(lib)");
    runheld<false, 256, 8, 1, 1>(8, C, "held count+batch");
    runheld<false, 256, 8, 2, 1>(8, C, "held last-merges");
    runheld<true, 256, 8, 2, 1>(64, 1048576, "held last-merges");
    runheld<false, 256, 8, 2, 1>(64, 1048576, "held last-merges");
    runheld<true, 256, 8, 2, 1>(16, 4194304, "held last-merges");
    runheld<false, 256, 8, 2, 1>(16, 4194304, "held last-merges");
    return 0;
}
