/* The ticketed split-held softmax kernel: long rows cut into slices of TPB * ITEMS columns, one
 * slice per block, held in registers from the one read to the one write. Included by
 * softmax.cuh.
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

template <int DT, int TPB, int ITEMS>
__device__ void softmax_split_held(const fc_softmax_args &a) {
    constexpr int VEC = dtype_io<DT>::vec, NV = ITEMS / VEC;
    constexpr int64_t SLICE = (int64_t)TPB * ITEMS;
    __shared__ float max_slots[32], sum_slots[32];
    __shared__ float2 row_stats;
    __shared__ unsigned ticket;
    float2 *partials = reinterpret_cast<float2 *>(a.partials);
    unsigned *counters = reinterpret_cast<unsigned *>(a.counters); /* rows arrivals, then the
                                                                      ticket counter */
    const bool log = a.log != 0;
    if (threadIdx.x == 0) ticket = atomicAdd(counters + a.rows, 1u);
    __syncthreads();
    /* 32-bit ticket arithmetic: the host keeps rows * slices below 2^31. */
    const int slices = a.chunks;
    const int row = (int)ticket / slices;
    const int slice = (int)ticket - row * slices;
    float v[ITEMS];
    load_slice<DT, TPB, NV>(row_ptr(a.x, row, a.x_stride, dtype_io<DT>::bytes), slice * SLICE,
                            a.cols, threadIdx.x, a.x_vec_ok, a.scale, v);
    float m = -INFINITY;
#pragma unroll
    for (int i = 0; i < ITEMS; i++) m = fmaxf(m, v[i]);
    m = block_max<TPB>(m, max_slots);
    const float d = exp_and_sum<DT, TPB, ITEMS>(v, m, log, sum_slots);
    const float2 r = exchange_row_stats(partials + (int64_t)row * slices, slice, slices,
                                        counters + row, m, d, &row_stats, 64);
    finish_values<ITEMS>(v, log, r.x, log ? 0.0f : chunk_factor(m, r.x, r.y),
                         log ? logf(r.y) : 0.0f);
    store_slice<VEC, TPB, NV, false>(row_ptr(a.y, row, a.y_stride, a.y_dtype == FC_F32 ? 4 : 2),
                                     slice * SLICE, a.cols, threadIdx.x, a.y_dtype, a.y_vec_ok, v);
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
