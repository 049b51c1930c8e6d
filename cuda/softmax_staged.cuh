/* The staged softmax kernel: long rows (and 16-bit rows past the registers' sweet spot) read
 * once from HBM, with enough bytes in flight to saturate it. Included by softmax.cuh.
 *
 * A block of STAGED_THREADS owns one chunk of a row at a time (an "item"), held in dynamic
 * shared memory in its storage dtype (16-bit stays 16-bit: twice the columns of an f32 park).
 * The chunk arrives by cp.async (sm_80+): every thread issues all its 16-byte copies at once, in
 * STAGED_SUBSTAGES commit groups, so the per-thread online (max, sum) of the first groups runs
 * while the later ones are still in flight. With two buffers the block issues its next item's
 * copies before it works on this one, so HBM stays busy across the exchange of (max, sum)
 * between the chunks of a row (the resident split's counters, cooperative launch) and the output
 * pass. Thread t owns the 16-byte vectors t, t + THREADS, ... of a buffer: it copies them,
 * reads them and refills them itself, so no barrier guards the buffers (cp.async.wait_group
 * makes a thread's own copies visible to it); barriers only serve the reductions.
 *
 * y = exp(s - m) / d or (s - m) - log d with the row's m and d, the same expressions as the
 * streaming kernels. Requires every x row 16-byte aligned (the host checks a.x_vec_ok) and
 * chunk_cols a multiple of 16 bytes' worth of columns. */
#pragma once

#define FC_STAGED_SUBSTAGES 4

/* ---- cp.async: 16 bytes global -> shared, asynchronously on sm_80+, plainly before ---------- */

FC_DEVICE void copy16_async(void *smem, const void *global) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(global) : "memory");
#else
    *reinterpret_cast<uint4 *>(smem) = *reinterpret_cast<const uint4 *>(global);
#endif
}

FC_DEVICE void copy_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}

/* Waits until at most `pending` of this thread's most recent commit groups are still in flight
 * (wait_group takes an immediate: one case per count). */
FC_DEVICE void copy_wait(int pending) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    switch (pending) {
    case 0: asm volatile("cp.async.wait_group 0;" ::: "memory"); break;
    case 1: asm volatile("cp.async.wait_group 1;" ::: "memory"); break;
    case 2: asm volatile("cp.async.wait_group 2;" ::: "memory"); break;
    case 3: asm volatile("cp.async.wait_group 3;" ::: "memory"); break;
    case 4: asm volatile("cp.async.wait_group 4;" ::: "memory"); break;
    case 5: asm volatile("cp.async.wait_group 5;" ::: "memory"); break;
    case 6: asm volatile("cp.async.wait_group 6;" ::: "memory"); break;
    default: asm volatile("cp.async.wait_group 7;" ::: "memory"); break;
    }
#else
    (void)pending;
#endif
}
static_assert(2 * FC_STAGED_SUBSTAGES - 1 <= 7, "copy_wait has cases up to 7 pending groups");

/* Where an item lies: its row, chunk, first column, number of columns, and how many of those
 * its buffer holds (the first ones). */
struct staged_item {
    int row, chunk;
    int64_t origin;
    int valid, held;
};

FC_DEVICE staged_item locate(const fc_softmax_args &a, int item) {
    staged_item it;
    it.row = item / a.chunks;
    it.chunk = item % a.chunks;
    it.origin = (int64_t)it.chunk * a.chunk_cols;
    it.valid = (int)min((int64_t)a.chunk_cols, a.cols - it.origin);
    it.held = min(it.valid, a.held_cols);
    return it;
}

/* Issues one substage of an item's copies into buf, as one commit group (empty ones included,
 * so that every item is exactly FC_STAGED_SUBSTAGES groups): this thread's vectors of the rounds
 * [r0, r1), vector t + r * TPB in round r. A last partial vector (cols not a multiple of VEC) is
 * copied element by element by its owner. */
template <int DT, int TPB>
FC_DEVICE void staged_issue_stage(const fc_softmax_args &a, const staged_item &it, uint4 *buf,
                                  int r0, int r1) {
    constexpr int VEC = dtype_io<DT>::vec, BYTES = dtype_io<DT>::bytes;
    const char *src = row_ptr(a.x, it.row, a.x_stride, BYTES) + it.origin * BYTES;
    const int full = it.held / VEC, tail = it.held % VEC;
    for (int r = r0; r < r1; r++) {
        const int j = (int)threadIdx.x + r * TPB;
        if (j < full) {
            copy16_async(buf + j, src + (int64_t)j * 16);
        } else if (j == full && tail) {
            unsigned short *dst16 = reinterpret_cast<unsigned short *>(buf + j);
            float *dst32 = reinterpret_cast<float *>(buf + j);
            for (int e = 0; e < tail; e++) {
                if (BYTES == 4) dst32[e] = reinterpret_cast<const float *>(src)[j * VEC + e];
                else dst16[e] = reinterpret_cast<const unsigned short *>(src)[j * VEC + e];
            }
        }
    }
    copy_commit();
}

/* Rounds [first, end) of substage s. */
FC_DEVICE int stage_first(int s, int per_stage) { return s * per_stage; }
FC_DEVICE int stage_end(int s, int per_stage, int rounds) { return min(rounds, (s + 1) * per_stage); }

template <int DT, int TPB>
FC_DEVICE void staged_issue(const fc_softmax_args &a, int item, uint4 *buf, int rounds,
                            int per_stage) {
    const staged_item it = locate(a, item);
    for (int s = 0; s < FC_STAGED_SUBSTAGES; s++)
        staged_issue_stage<DT, TPB>(a, it, buf, stage_first(s, per_stage),
                                    stage_end(s, per_stage, rounds));
}

/* Vector j of a buffer as VEC scaled values; columns at or past `held` read as -inf. */
template <int DT>
FC_DEVICE void staged_values(const uint4 *buf, int j, int held, float scale, float *o) {
    constexpr int VEC = dtype_io<DT>::vec;
    dtype_io<DT>::unpack(buf[j], o);
    if (j * VEC + VEC <= held) {
#pragma unroll
        for (int e = 0; e < VEC; e++) o[e] = __fmul_rn(o[e], scale);
    } else {
#pragma unroll
        for (int e = 0; e < VEC; e++)
            o[e] = j * VEC + e < held ? __fmul_rn(o[e], scale) : -INFINITY;
    }
}

/* Output pass over this thread's vectors of the rounds [r0, r1) of an item's buffer, y of dtype
 * YT. */
template <int DT, int TPB, int YT>
FC_DEVICE void staged_store_as(const fc_softmax_args &a, const staged_item &it, const uint4 *buf,
                               int r0, int r1, float m, float d) {
    constexpr int VEC = dtype_io<DT>::vec, Y_BYTES = YT == FC_F32 ? 4 : 2;
    const bool log = a.log != 0, vec_ok = a.y_vec_ok != 0;
    const float s = subtrahend(m), inv_d = 1.0f / d, log_d = log ? logf(d) : 0.0f;
    char *y = row_ptr(a.y, it.row, a.y_stride, Y_BYTES) + it.origin * Y_BYTES;
#pragma unroll 2
    for (int r = r0; r < r1; r++) {
        const int j = (int)threadIdx.x + r * TPB;
        if (j * VEC >= it.held) break;
        float v[VEC];
        staged_values<DT>(buf, j, it.held, a.scale, v);
        if (log) {
#pragma unroll
            for (int e = 0; e < VEC; e++) v[e] = (v[e] - s) - log_d;
        } else {
#pragma unroll
            for (int e = 0; e < VEC; e++) v[e] = softmax_exp_stored<DT, YT>(v[e] - s) * inv_d;
        }
        char *p = y + (int64_t)j * VEC * Y_BYTES;
        if (vec_ok && j * VEC + VEC <= it.held) {
            store_vec<VEC, true>(p, YT, v);
        } else {
#pragma unroll
            for (int e = 0; e < VEC; e++)
                if (j * VEC + e < it.held) store_one(p + e * Y_BYTES, YT, v[e]);
        }
    }
}

template <int DT, int TPB>
FC_DEVICE void staged_store(const fc_softmax_args &a, const staged_item &it, const uint4 *buf,
                            int r0, int r1, float m, float d) {
    if (a.y_dtype == FC_F32) staged_store_as<DT, TPB, FC_F32>(a, it, buf, r0, r1, m, d);
    else if (a.y_dtype == FC_F16) staged_store_as<DT, TPB, FC_F16>(a, it, buf, r0, r1, m, d);
    else staged_store_as<DT, TPB, FC_BF16>(a, it, buf, r0, r1, m, d);
}

/* a.buffers (1 or 2) buffers of a.held_cols columns each in dynamic shared memory; columns of a
 * chunk past those are streamed from global memory in both passes, before the buffer's. Launched
 * cooperatively with a grid that is a multiple of a.chunks when a.chunks > 1 (every row's chunks
 * are resident in the same round, so the waits finish); any grid when a.chunks == 1. */
template <int DT, int TPB>
__device__ void softmax_staged(const fc_softmax_args &a) {
    constexpr int VEC = dtype_io<DT>::vec, UV = FC_SOFTMAX_STREAM_VALUES / VEC;
    constexpr int OV = 8 / VEC > 0 ? 8 / VEC : 1; /* vectors per step past the buffer: 8 values,
                                                   which keeps f32 within 64 registers */
    extern __shared__ uint4 stage[];
    __shared__ float2 slots[32];
    __shared__ float2 row_stats;
    const int items = (int)(a.rows * a.chunks); /* the host keeps it below 2^31 */
    const int grid = (int)gridDim.x, buffers = a.buffers;
    const int buf_vecs = a.held_cols / VEC;
    const int rounds = (buf_vecs + TPB - 1) / TPB;
    const int per_stage = (rounds + FC_STAGED_SUBSTAGES - 1) / FC_STAGED_SUBSTAGES;
    float2 *partials = reinterpret_cast<float2 *>(a.partials);
    unsigned *counters = reinterpret_cast<unsigned *>(a.counters);
    int item = (int)blockIdx.x;
    if (item >= items) return; /* uniform across the block */
    staged_issue<DT, TPB>(a, item, stage, rounds, per_stage);
    if (buffers == 2 && item + grid < items)
        staged_issue<DT, TPB>(a, item + grid, stage + buf_vecs, rounds, per_stage);
    for (int k = 0; item < items; item += grid, k++) {
        uint4 *buf = stage + (buffers == 2 ? (k & 1) : 0) * buf_vecs;
        const staged_item it = locate(a, item);
        /* The next item's groups, when already issued, are the most recent ones. */
        const int ahead = buffers == 2 && item + grid < items ? FC_STAGED_SUBSTAGES : 0;
        const char *x_row = row_ptr(a.x, it.row, a.x_stride, dtype_io<DT>::bytes);
        float m = -INFINITY, d = 0.0f;
        /* The part past the buffer first: its loads overlap the copies still in flight. */
        for (int64_t c = it.origin + it.held; c < it.origin + it.valid; c += TPB * OV * VEC) {
            float v[OV * VEC];
            load_slice<DT, TPB, OV>(x_row, c, it.origin + it.valid, threadIdx.x, true, a.scale, v);
            online_step<DT, OV * VEC>(m, d, v);
        }
        for (int s = 0; s < FC_STAGED_SUBSTAGES; s++) {
            copy_wait(ahead + FC_STAGED_SUBSTAGES - 1 - s);
            const int r1 = stage_end(s, per_stage, rounds);
            for (int r = stage_first(s, per_stage); r < r1; r += UV) {
                float v[UV * VEC];
#pragma unroll
                for (int u = 0; u < UV; u++) {
                    const int j = (int)threadIdx.x + (r + u) * TPB;
                    if (r + u < r1 && j * VEC < it.held) {
                        staged_values<DT>(buf, j, it.held, a.scale, v + u * VEC);
                    } else {
#pragma unroll
                        for (int e = 0; e < VEC; e++) v[u * VEC + e] = -INFINITY;
                    }
                }
                online_step<DT, UV * VEC>(m, d, v);
            }
        }
        block_merge<TPB>(m, d, slots);
        if (a.chunks > 1) {
            const float2 r = exchange_row_stats(partials + (item - it.chunk), it.chunk, a.chunks,
                                                counters + it.row, m, d, &row_stats, 64);
            m = r.x, d = r.y;
        }
        /* Past the buffer first again, while those lines are the most recent in L2. */
        if (it.valid > it.held) {
            char *y_row = row_ptr(a.y, it.row, a.y_stride, a.y_dtype == FC_F32 ? 4 : 2);
            stream_normalize<DT, TPB, OV, false>(x_row, y_row, it.origin + it.held,
                                                 it.origin + it.valid, a, m, d);
        }
        if (buffers == 1 && item + grid < items) {
            /* One buffer: each substage's vectors, once written out, are refilled with the next
             * item's (by their owner, so without a barrier), which then loads during this
             * output pass. */
            const staged_item next = locate(a, item + grid);
            for (int s = 0; s < FC_STAGED_SUBSTAGES; s++) {
                const int r0 = stage_first(s, per_stage), r1 = stage_end(s, per_stage, rounds);
                staged_store<DT, TPB>(a, it, buf, r0, r1, m, d);
                staged_issue_stage<DT, TPB>(a, next, buf, r0, r1);
            }
        } else {
            staged_store<DT, TPB>(a, it, buf, 0, rounds, m, d);
        }
        __syncthreads(); /* slots and row_stats are reused by the next item */
        /* Two buffers: this one is consumed (by its owners, the only threads that touch their
         * vectors): refill it with the item two rounds ahead. */
        if (buffers == 2 && item + 2 * grid < items)
            staged_issue<DT, TPB>(a, item + 2 * grid, buf, rounds, per_stage);
    }
}

/* One block per SM: 1024 threads at the 64-register cap, the shared memory all the SM's. The
 * cubins for sm_86/sm_89 (and the 8.x devices that load them) get an empty body: there ptxas
 * spills the 16-bit kernel past 64 registers, and with 99 KB of shared memory it would rarely
 * be chosen; the host never launches it there (src/cuda/kernels.c, size_staged_kernel). */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ > 800 && __CUDA_ARCH__ < 900
#define FC_STAGED_BODY(DT)
#else
#define FC_STAGED_BODY(DT) softmax_staged<DT, FC_SOFTMAX_STAGED_THREADS>(a);
#endif
#define FC_STAGED_KERNEL(dt_name, DT, unused)                                                  \
    extern "C" __global__ void __launch_bounds__(FC_SOFTMAX_STAGED_THREADS, 1)                  \
        fc_softmax_staged_##dt_name(fc_softmax_args a) {                                        \
        (void)a;                                                                                \
        FC_STAGED_BODY(DT)                                                                      \
    }
FC_SOFTMAX_FOR_DTYPES(FC_STAGED_KERNEL, 0)
