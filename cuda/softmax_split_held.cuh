/* The split-held softmax kernels: long rows cut into slices of TPB * ITEMS columns, one slice
 * per block, held in registers from the one read to the one write; the slices of a row exchange
 * their (max, sum) through global memory (the ticketed kernel, any GPU) or, for rows of at most
 * 8 slices on compute capability 9.0+, inside a thread-block cluster (the cluster-held kernel,
 * below). Included by softmax.cuh.
 *
 * A plain (not cooperative) grid of rows * slices blocks, several blocks per SM, no item loop:
 * a block that waits for its row's other slices leaves the SM to the other blocks there, which
 * are loading or storing, instead of holding a lock-step round of the whole grid. Which slice a
 * block takes is not its blockIdx but a ticket, drawn (atomicAdd on a counter zeroed before the
 * launch) once the block runs: ticket t is slice t % slices of row t / slices. Tickets go out in
 * the order blocks start, so when ticket t is drawn every smaller ticket is held by a block that
 * has started; every row below the newest one is then complete and finishes without waiting on
 * anything else, freeing its SMs, and the newest row's missing slices are next in line for
 * them. As long as `slices` blocks fit on the GPU at once (the host keeps slices <= SMs, see
 * plan_split_held), the waits end: no deadlock whatever order the hardware launches blocks in.
 * The slices of a row exchange their (max, sum) like the resident split (exchange_row_stats).
 *
 * Thread t owns NV = ITEMS / VEC vectors of VEC columns, vector k at slice column
 * (k * TPB + t) * VEC (load_slice's layout), as f32 whatever x's dtype; columns past the row
 * read as -inf. Softmax keeps e = exp(s - m_slice) in place and stores e * e^(m_slice - m) / d;
 * log-softmax keeps s and stores (s - m) - log d: the resident split's formulas, so the same
 * special values (NaN, +-inf, |x| ~ 1e30) come out as torch's. */
#pragma once

/* What a block holds of its slice, and the two things done with it: sum() loads the slice and
 * returns its sum of exponentials (its max in m), store() writes it normalised with the row's
 * (max, sum) r. Two holders, with the same expressions per value (their slices differ, and so
 * do their sums' trees and the last bits of d):
 *
 * held_floats keeps every value as f32 (any dtype): v is s = x * scale, then for softmax
 * e = exp(s - m_slice) in place (one exp per element), stored as e * e^(m_slice - m) / d.
 *
 * held_bits keeps 16-bit inputs as their storage bits, two to a register, and recomputes s (and
 * e) from them in each pass: a block holds twice the columns of a held_floats block in the same
 * registers. A block's life has a fixed part that moves no data (ticket, two block reductions,
 * the exchange; ~3 us on an H100 under ncu), and with f32-held 16-bit slices of 8192 columns it
 * was ~40 % of it: ncu measured 1024x131072 f16 at 61.6 % of DRAM bandwidth against f32's 78.2 %
 * with the same kernel, whose slices move twice the bytes per block. */
template <int DT, int TPB, int ITEMS> struct held_floats {
    static constexpr int COLS = TPB * ITEMS;
    float v[ITEMS];

    FC_DEVICE float sum(const fc_softmax_args &a, int row, int slice, float &m, float *max_slots,
                        float *sum_slots) {
        constexpr int NV = ITEMS / dtype_io<DT>::vec;
        load_slice<DT, TPB, NV>(row_ptr(a.x, row, a.x_stride, dtype_io<DT>::bytes),
                                slice * (int64_t)COLS, a.cols, threadIdx.x, a.x_vec_ok, a.scale, v);
        m = -INFINITY;
#pragma unroll
        for (int i = 0; i < ITEMS; i++) m = fmaxf(m, v[i]);
        m = block_max<TPB>(m, max_slots);
        return exp_and_sum<DT, TPB, ITEMS>(v, m, a.log != 0, sum_slots);
    }

    FC_DEVICE void store(const fc_softmax_args &a, int row, int slice, float m, float2 r) {
        constexpr int VEC = dtype_io<DT>::vec, NV = ITEMS / VEC;
        const bool log = a.log != 0;
        finish_values<ITEMS>(v, log, r.x, log ? 0.0f : chunk_factor(m, r.x, r.y),
                             log ? logf(r.y) : 0.0f);
        store_slice<VEC, TPB, NV, false>(row_ptr(a.y, row, a.y_stride, a.y_dtype == FC_F32 ? 4 : 2),
                                         slice * (int64_t)COLS, a.cols, threadIdx.x, a.y_dtype,
                                         a.y_vec_ok, v);
    }
};

template <int DT, int TPB, int ITEMS> struct held_bits {
    static_assert(DT != FC_F32, "held_bits holds 16-bit storage");
    static constexpr int VEC = 8, NV = ITEMS / VEC, COLS = TPB * ITEMS;
    /* Vector k: columns origin + (k * TPB + t) * VEC .. + VEC (load_slice's layout). The host
     * takes these kernels only for rows whose x and y start 16-byte aligned and whose length is
     * a multiple of VEC, so that a vector lies wholly inside the row or wholly past its end:
     * no element-wise path, whose loads ptxas would schedule side by side and spill; passes skip
     * the vectors past the end rather than select -inf for them, which made ptxas keep 64 such
     * constants in registers and spill (f16, sm_90a). */
    uint4 raw[NV];
    int64_t room; /* columns of the row from this thread's first one on (may be <= 0) */

    FC_DEVICE bool inside(int k) const { return k * TPB * VEC < room; }

    /* The scaled values s of vector k (inside the row). Vectors past the row are skipped by
     * every pass: as -inf (load_slice's value there) they would leave the max, the sum (+0) and
     * the stores as they are. */
    FC_DEVICE void values(int k, float scale, float (&o)[VEC]) const {
        dtype_io<DT>::unpack(raw[k], o);
#pragma unroll
        for (int e = 0; e < VEC; e++) o[e] = __fmul_rn(o[e], scale);
    }

    /* f(k, values of vector k) for every vector inside the row, in order. */
    template <typename F> FC_DEVICE void each_vector(float scale, F f) const {
#pragma unroll
        for (int k = 0; k < NV; k++) {
            if (!inside(k)) continue;
            float o[VEC];
            values(k, scale, o);
            f(k, o);
        }
    }

    FC_DEVICE float sum(const fc_softmax_args &a, int row, int slice, float &m, float *max_slots,
                        float *sum_slots) {
        const int64_t first = slice * (int64_t)COLS + (int64_t)threadIdx.x * VEC;
        const uint4 *p =
            reinterpret_cast<const uint4 *>(row_ptr(a.x, row, a.x_stride, 2) + first * 2);
        room = a.cols - first;
#pragma unroll
        for (int k = 0; k < NV; k++) raw[k] = inside(k) ? p[k * TPB] : make_uint4(0u, 0u, 0u, 0u);
        m = -INFINITY;
        each_vector(a.scale, [&](int, float(&o)[VEC]) {
#pragma unroll
            for (int e = 0; e < VEC; e++) m = fmaxf(m, o[e]);
        });
        m = block_max<TPB>(m, max_slots);
        const float s = subtrahend(m); /* thread_exp_sum's terms, in its order */
        float d = 0.0f;
        each_vector(a.scale, [&](int, float(&o)[VEC]) {
#pragma unroll
            for (int e = 0; e < VEC; e++) d += softmax_exp<DT>(o[e] - s);
        });
        return block_sum<TPB>(d, sum_slots);
    }

    FC_DEVICE void store(const fc_softmax_args &a, int row, int slice, float m, float2 r) {
        char *y = row_ptr(a.y, row, a.y_stride, a.y_dtype == FC_F32 ? 4 : 2);
        if (a.y_dtype == FC_F32) store_as<FC_F32>(a, y, slice, m, r);
        else if (a.y_dtype == FC_F16) store_as<FC_F16>(a, y, slice, m, r);
        else store_as<FC_BF16>(a, y, slice, m, r);
    }

    /* finish_values' expressions on e = exp(s - m_slice) (softmax) or s (log), vector by vector. */
    template <int YT>
    FC_DEVICE void store_as(const fc_softmax_args &a, char *y, int slice, float m, float2 r) {
        constexpr int YBYTES = YT == FC_F32 ? 4 : 2;
        const bool log = a.log != 0;
        const float factor = log ? 0.0f : chunk_factor(m, r.x, r.y);
        const float log_d = log ? logf(r.y) : 0.0f;
        const float s_slice = subtrahend(m), s_row = subtrahend(r.x);
        char *p = y + (slice * (int64_t)COLS + (int64_t)threadIdx.x * VEC) * YBYTES;
        each_vector(a.scale, [&](int k, float(&o)[VEC]) {
#pragma unroll
            for (int e = 0; e < VEC; e++)
                o[e] = log ? (o[e] - s_row) - log_d : softmax_exp<DT>(o[e] - s_slice) * factor;
            store_vec<VEC, false>(p + k * TPB * VEC * YBYTES, YT, o);
        });
    }
};

/* The ticketed kernel over holder H (held_floats or held_bits). */
template <typename H> __device__ void softmax_split_held(const fc_softmax_args &a) {
    __shared__ float max_slots[32], sum_slots[32];
    __shared__ float2 row_stats;
    __shared__ unsigned ticket;
    float2 *partials = reinterpret_cast<float2 *>(a.partials);
    unsigned *counters = reinterpret_cast<unsigned *>(a.counters); /* rows arrivals, then the
                                                                      ticket counter */
    if (threadIdx.x == 0) ticket = atomicAdd(counters + a.rows, 1u);
    __syncthreads();
    /* 32-bit ticket arithmetic: the host keeps rows * slices below 2^31. */
    const int slices = a.chunks;
    const int row = (int)ticket / slices;
    const int slice = (int)ticket - row * slices;
    H held;
    float m;
    const float d = held.sum(a, row, slice, m, max_slots, sum_slots);
    const float2 r = exchange_row_stats(partials + (int64_t)row * slices, slice, slices,
                                        counters + row, m, d, &row_stats, 64);
    held.store(a, row, slice, m, r);
}

/* FC_SOFTMAX_SPLIT_HELD_BLOCKS_PER_SM blocks per SM: 64 registers per thread at 256 threads,
 * enough for the 32 values plus addresses, and four blocks to overlap one block's exchange
 * with the others' loads and stores. */
#define FC_HELD_FLOATS(DT) \
    held_floats<DT, FC_SOFTMAX_SPLIT_HELD_THREADS, FC_SOFTMAX_SPLIT_HELD_ITEMS>
#define FC_HELD_BITS(DT) \
    held_bits<DT, FC_SOFTMAX_SPLIT_HELD_THREADS, FC_SOFTMAX_SPLIT_HELD_BITS_ITEMS>
#define FC_SPLIT_HELD_KERNEL(dt_name, DT, unused)                                              \
    extern "C" __global__ void __launch_bounds__(FC_SOFTMAX_SPLIT_HELD_THREADS,                 \
                                                 FC_SOFTMAX_SPLIT_HELD_BLOCKS_PER_SM)           \
        fc_softmax_split_held_##dt_name(fc_softmax_args a) {                                    \
        softmax_split_held<FC_HELD_FLOATS(DT)>(a);                                              \
    }
FC_SOFTMAX_FOR_DTYPES(FC_SPLIT_HELD_KERNEL, 0)
#define FC_SPLIT_HELD_BITS_KERNEL(dt_name, DT)                                                 \
    extern "C" __global__ void __launch_bounds__(FC_SOFTMAX_SPLIT_HELD_THREADS,                 \
                                                 FC_SOFTMAX_SPLIT_HELD_BLOCKS_PER_SM)           \
        fc_softmax_split_held_bits_##dt_name(fc_softmax_args a) {                               \
        softmax_split_held<FC_HELD_BITS(DT)>(a);                                                \
    }
FC_SPLIT_HELD_BITS_KERNEL(f16, FC_F16)
FC_SPLIT_HELD_BITS_KERNEL(bf16, FC_BF16)

/* ---- the same slices exchanging their (max, sum) inside a thread-block cluster (sm_90+) ---- */

/* The cluster-held kernel: the split-held kernel's slices of a row launched as one cluster of
 * `slices` blocks (consecutive block indices; at most 8, the portable size), so that
 * the (max, sum) exchange goes through distributed shared memory and the cluster barrier
 * instead of global memory, an arrival counter and polling -- and needs no counters zeroed
 * before the launch. The hardware starts a cluster's blocks together, so nothing can deadlock.
 * Each block leaves its (m, d) in its shared memory; after the first barrier, warp 0 of every
 * block merges all of them in slice order (merge_stats, as the ticketed kernel's merge_partials
 * does, so the bits equal the split-held kernel's); the second barrier's arrive follows those
 * reads and its wait comes last, so no block exits while another may still read its memory. */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
FC_DEVICE unsigned cluster_rank() {
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}
FC_DEVICE void cluster_arrive_release() { asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory"); }
FC_DEVICE void cluster_wait_acquire() { asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory"); }
/* The float2 at this block's shared address `local` in the block of cluster rank `rank`. */
FC_DEVICE float2 load_cluster_float2(const float2 *local, unsigned rank) {
    unsigned remote;
    float2 v;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
                 : "=r"(remote)
                 : "r"((unsigned)__cvta_generic_to_shared(local)), "r"(rank));
    asm volatile("ld.shared::cluster.v2.f32 {%0, %1}, [%2];" : "=f"(v.x), "=f"(v.y) : "r"(remote) : "memory");
    return v;
}

template <typename H> __device__ void softmax_cluster_held(const fc_softmax_args &a) {
    __shared__ float max_slots[32], sum_slots[32];
    __shared__ float2 slice_stats, row_stats;
    const int slices = a.chunks;
    const int row = (int)(blockIdx.x / (unsigned)slices);
    const int slice = (int)cluster_rank();
    H held;
    float m;
    const float d = held.sum(a, row, slice, m, max_slots, sum_slots);
    if (threadIdx.x == 0) slice_stats = make_float2(m, d);
    cluster_arrive_release();
    cluster_wait_acquire(); /* every slice's (m, d) is in its block's shared memory */
    if (threadIdx.x < 32) {
        float rm, rd;
        merge_stats(slices, [&](int i) { return load_cluster_float2(&slice_stats, (unsigned)i); },
                    rm, rd);
        if (threadIdx.x == 0) row_stats = make_float2(rm, rd);
    }
    cluster_arrive_release(); /* this block has read the others' slice_stats */
    __syncthreads();          /* row_stats */
    held.store(a, row, slice, m, row_stats);
    cluster_wait_acquire(); /* ... and so have the others read this one's: it may exit */
}
#define FC_CLUSTER_HELD_BODY(H) softmax_cluster_held<H>(a);
#else
#define FC_CLUSTER_HELD_BODY(H) (void)a; /* never launched below compute capability 9.0 */
#endif

#define FC_CLUSTER_HELD_KERNEL(dt_name, DT, unused)                                            \
    extern "C" __global__ void __launch_bounds__(FC_SOFTMAX_SPLIT_HELD_THREADS,                 \
                                                 FC_SOFTMAX_SPLIT_HELD_BLOCKS_PER_SM)           \
        fc_softmax_cluster_held_##dt_name(fc_softmax_args a) {                                  \
        FC_CLUSTER_HELD_BODY(FC_HELD_FLOATS(DT))                                                \
    }
FC_SOFTMAX_FOR_DTYPES(FC_CLUSTER_HELD_KERNEL, 0)
/* No cluster form of held_bits: its slices ran faster ticketed (H100, 2026-11-25, 1024x131072
 * f16 0.214-0.215 ms against 0.222-0.225 as clusters of 8, 2048x65536 0.209-0.211 against
 * 0.215-0.220, 4096x40000 0.263-0.264 against 0.268-0.271; 512x98304 the same). */
