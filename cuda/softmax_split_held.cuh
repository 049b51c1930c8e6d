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

/* A block's slice of a row: loaded into v (f32; exponentials relative to the slice's max once
 * this returns, or the scaled inputs for log-softmax), its max in m, its sum of exponentials
 * returned. */
template <int DT, int TPB, int ITEMS>
FC_DEVICE float held_slice_sum(const fc_softmax_args &a, int row, int slice, float (&v)[ITEMS],
                               float &m, float *max_slots, float *sum_slots) {
    constexpr int NV = ITEMS / dtype_io<DT>::vec;
    load_slice<DT, TPB, NV>(row_ptr(a.x, row, a.x_stride, dtype_io<DT>::bytes),
                            slice * (int64_t)TPB * ITEMS, a.cols, threadIdx.x, a.x_vec_ok, a.scale, v);
    m = -INFINITY;
#pragma unroll
    for (int i = 0; i < ITEMS; i++) m = fmaxf(m, v[i]);
    m = block_max<TPB>(m, max_slots);
    return exp_and_sum<DT, TPB, ITEMS>(v, m, a.log != 0, sum_slots);
}

/* The slice normalised with the row's (max, sum) r and stored. */
template <int DT, int TPB, int ITEMS>
FC_DEVICE void store_held_slice(const fc_softmax_args &a, int row, int slice, float (&v)[ITEMS],
                                float m, float2 r) {
    constexpr int VEC = dtype_io<DT>::vec, NV = ITEMS / VEC;
    const bool log = a.log != 0;
    finish_values<ITEMS>(v, log, r.x, log ? 0.0f : chunk_factor(m, r.x, r.y),
                         log ? logf(r.y) : 0.0f);
    store_slice<VEC, TPB, NV, false>(row_ptr(a.y, row, a.y_stride, a.y_dtype == FC_F32 ? 4 : 2),
                                     slice * (int64_t)TPB * ITEMS, a.cols, threadIdx.x, a.y_dtype,
                                     a.y_vec_ok, v);
}

template <int DT, int TPB, int ITEMS>
__device__ void softmax_split_held(const fc_softmax_args &a) {
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
    float v[ITEMS], m;
    const float d = held_slice_sum<DT, TPB, ITEMS>(a, row, slice, v, m, max_slots, sum_slots);
    const float2 r = exchange_row_stats(partials + (int64_t)row * slices, slice, slices,
                                        counters + row, m, d, &row_stats, 64);
    store_held_slice<DT, TPB, ITEMS>(a, row, slice, v, m, r);
}

/* FC_SOFTMAX_SPLIT_HELD_BLOCKS_PER_SM blocks per SM: 64 registers per thread at 256 threads,
 * enough for the 32 values plus addresses, and four blocks to overlap one block's exchange
 * with the others' loads and stores. */
#define FC_SPLIT_HELD_KERNEL(dt_name, DT, unused)                                              \
    extern "C" __global__ void __launch_bounds__(FC_SOFTMAX_SPLIT_HELD_THREADS,                 \
                                                 FC_SOFTMAX_SPLIT_HELD_BLOCKS_PER_SM)           \
        fc_softmax_split_held_##dt_name(fc_softmax_args a) {                                    \
        softmax_split_held<DT, FC_SOFTMAX_SPLIT_HELD_THREADS, FC_SOFTMAX_SPLIT_HELD_ITEMS>(a);  \
    }
FC_SOFTMAX_FOR_DTYPES(FC_SPLIT_HELD_KERNEL, 0)

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

template <int DT, int TPB, int ITEMS>
__device__ void softmax_cluster_held(const fc_softmax_args &a) {
    __shared__ float max_slots[32], sum_slots[32];
    __shared__ float2 slice_stats, row_stats;
    const int slices = a.chunks;
    const int row = (int)(blockIdx.x / (unsigned)slices);
    const int slice = (int)cluster_rank();
    float v[ITEMS], m;
    const float d = held_slice_sum<DT, TPB, ITEMS>(a, row, slice, v, m, max_slots, sum_slots);
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
    store_held_slice<DT, TPB, ITEMS>(a, row, slice, v, m, row_stats);
    cluster_wait_acquire(); /* ... and so have the others read this one's: it may exit */
}
#define FC_CLUSTER_HELD_BODY(DT) \
    softmax_cluster_held<DT, FC_SOFTMAX_SPLIT_HELD_THREADS, FC_SOFTMAX_SPLIT_HELD_ITEMS>(a);
#else
#define FC_CLUSTER_HELD_BODY(DT) (void)a; /* never launched below compute capability 9.0 */
#endif

#define FC_CLUSTER_HELD_KERNEL(dt_name, DT, unused)                                            \
    extern "C" __global__ void __launch_bounds__(FC_SOFTMAX_SPLIT_HELD_THREADS,                 \
                                                 FC_SOFTMAX_SPLIT_HELD_BLOCKS_PER_SM)           \
        fc_softmax_cluster_held_##dt_name(fc_softmax_args a) {                                  \
        FC_CLUSTER_HELD_BODY(DT)                                                                \
    }
FC_SOFTMAX_FOR_DTYPES(FC_CLUSTER_HELD_KERNEL, 0)
