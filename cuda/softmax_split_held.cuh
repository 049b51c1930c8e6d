/* The split-held softmax kernels: long rows cut into slices of TPB * ITEMS columns, one slice
 * per block, held in registers from the one read to the one write; the slices of a row exchange
 * their (max, sum) through global memory. Included by softmax.cuh. (A form whose slices
 * exchanged them inside a thread-block cluster, for rows of at most 8 slices on compute
 * capability 9.0+, was removed once the exchange below beat it: H100, 2026-11-25, f32
 * 2048 x 65536 0.378-0.382 ms against 0.393-0.401 as clusters, 4096 x 40000 0.455-0.459 against
 * 0.478-0.492, 1000 x 50000 0.151 against 0.158-0.200.)
 *
 * A plain (not cooperative) grid of rows * slices blocks, several blocks per SM, no item loop:
 * a block that waits for its row's other slices leaves the SM to the other blocks there, which
 * are loading or storing, instead of holding a lock-step round of the whole grid. Which slice a
 * block takes is not its blockIdx but a ticket, drawn (atomicAdd on a counter that is 0 when the
 * launch starts) once the block runs: ticket t is slice t % slices of row t / slices. Tickets go
 * out in the order blocks start, so when ticket t is drawn every smaller ticket is held by a
 * block that has started; every row below the newest one is then complete and finishes without
 * waiting on anything else, freeing its SMs, and the newest row's missing slices are next in
 * line for them. As long as `slices` blocks fit on the GPU at once (the host keeps slices <= SMs,
 * see plan_split_held), the waits end: no deadlock whatever order the hardware launches blocks
 * in.
 * The slices of a row exchange their (max, sum) as published words (row_stats_from_words, in
 * softmax_split_exchange.cuh).
 * Rows of many slices take the pipelined form instead (softmax_split_held_pipelined): a grid
 * the GPU holds at once, whose blocks take tickets until they run out and load their next
 * slice before they wait for the row of the one before.
 *
 * Thread t owns NV = ITEMS / VEC vectors of VEC columns, vector k at slice column
 * (k * TPB + t) * VEC (load_slice's layout); columns past the row read as -inf. Softmax takes
 * e = exp(s - m_own) against the thread's own max and stores e * e^(m_own - m) / d; log-softmax
 * stores (s - m) - log d: the resident split's formulas with the thread in the chunk's place,
 * so the same special values (NaN, +-inf, |x| ~ 1e30) come out as torch's. */
#pragma once

#include "softmax_split_held_holders.cuh"

/* ---- the ticketed kernels (their exchange: softmax_split_exchange.cuh) ---- */

/* The ticketed kernel over holder H (held_floats or held_bits). Each thread takes its exps
 * against its own max (no block reduction between the loads and the exps) and rescales them
 * once, by e^(m_own - M) / D, at the store; the block merges its threads' (m, d) once, and
 * the row's slices exchange theirs as published words. The same shape as the OpenCL
 * cooperative split row (cl/softmax_cooperative.cl), whose trimmed reductions made it faster
 * than this kernel with block reductions and partials behind an arrival counter: H100,
 * 2026-11-25, 1024 x 131072 f16 2702 GB/s through NVIDIA's OpenCL against 2519 here. State:
 * row_words. */
template <int TPB, typename H> __device__ void softmax_split_held(const fc_softmax_args &a) {
    __shared__ float2 warp_slots[32];
    __shared__ float2 row_stats;
    __shared__ unsigned ticket;
    unsigned long long *state = reinterpret_cast<unsigned long long *>(a.counters);
    clear_previous<TPB>(a);
    /* 32-bit ticket arithmetic: the host keeps rows * slices below 2^31. */
    const int slices = a.chunks;
    int row, slice = 0;
    if (slices == 1) { /* whole rows wait for nothing: the block index is the row, no ticket */
        row = (int)(blockIdx.y * gridDim.x + blockIdx.x);
    } else {
        const int t = draw_ticket(state, &ticket);
        row = t / slices;
        slice = t - row * slices;
    }
    H held;
    float m;
    const float d = held.sum(a, row, slice, m);
    /* The block's (m, d): every thread needs it for a row of one slice, else thread 0 only. */
    float bm = m, bd = d;
    block_merge<TPB>(bm, bd, warp_slots, slices == 1);
    float2 r = make_float2(bm, bd);
    if (slices > 1)
        r = row_stats_from_words<TPB>(row_words(state, slices, row),
                                      row_arrivals(state, a.rows, slices, row), slice, slices, r,
                                      warp_slots, &row_stats);
    held.store(a, row, slice, m, r);
}

/* The stall prefetch of the merged kernel's f32 form (a.prefetch: tickets ahead; 0 in the other
 * kernels). When a block draws a ticket t of its parked slice's row, it will wait for that row
 * once t's slice is loaded, with no load of its own in flight; by then the row is the whole
 * grid's (a row of 2 x grid f32 slices fills what the grid holds), so the grid waits and HBM
 * idles. Thread 0 plans, as it draws t (when the block holds nothing in registers), a prefetch
 * into L2 of ticket t + a.prefetch's slice, which a block draws after that wait, and issues it
 * as one bulk prefetch (sm_90+) just before the wait. Planned into shared memory (address |
 * bytes / 16 << 52; 0: none) because the address arithmetic at the wait, where the registers
 * hold t's slice, spilled (4-20 bytes, sm_90a). */
template <typename H>
FC_DEVICE void plan_stall_prefetch(const fc_softmax_args &a, int slices, int total, int t,
                                   int parked_row, volatile unsigned long long *plan) {
    constexpr int BYTES = 16 / H::VEC;
    const int f = t + a.prefetch;
    *plan = 0;
    if (t >= total || t / slices != parked_row || f >= total) return;
    const int row = f / slices;
    const int64_t begin = (int64_t)(f - row * slices) * H::COLS;
    const int64_t n = a.cols - begin < H::COLS ? a.cols - begin : H::COLS;
    const unsigned long long at =
        reinterpret_cast<unsigned long long>(row_ptr(a.x, row, a.x_stride, BYTES) + begin * BYTES);
    if (n > 0 && !(at & 15u)) *plan = at | (unsigned long long)((n * BYTES) >> 4) << 52;
}
FC_DEVICE void issue_stall_prefetch(const volatile unsigned long long *plan) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    const unsigned long long w = *plan;
    if (w)
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(w & ((1ull << 52) - 1)),
                     "r"((unsigned)(w >> 52) << 4));
#else
    (void)plan;
#endif
}

/* The pipelined ticketed kernel over held_bits: a grid of at most as many blocks as fit on the
 * GPU at once, each taking tickets until they run out. A block publishes its slice's (m, d),
 * parks the slice's bits in shared memory, then loads and publishes the slice of its next ticket
 * before it waits for the parked slice's row; by then that row's other slices have had a whole
 * slice's load to publish theirs, so the wait that the one-ticket kernel spends idle (10-16 % of
 * its time: H100, 2026-11-25, the same kernel with the exchange skipped ran 1024 x 131072 f16 in
 * 0.185 ms against 0.204, 64 x 1M f32 0.183 against 0.219) is mostly spent loading.
 *
 * Why waiting cannot deadlock: every ticket a block draws is published before the block waits
 * for anything, so a row all of whose tickets are drawn completes. A block only waits for the
 * row of its parked slice, and holds at most two tickets (the parked one and the next, which is
 * later). Were every running block waiting on a row not wholly drawn, that row would be the
 * newest (the one holding the highest ticket drawn), and every running block's tickets would
 * be slices of it: more slices than running blocks, which the host's one slice per SM excludes
 * (plan_split_held). Past that, the host launches the grid cooperatively, so that all its
 * blocks run together: each then holds two tickets of that row (a block holds one only once
 * the tickets have run out, when no row is short of any), so the row would have at least twice
 * as many slices as the grid has blocks, which the host excludes too (it keeps to one a
 * block).
 *
 * Tickets drawn in the order blocks get to them beat a fixed assignment: a cooperative form in
 * which block b took tickets b, b + grid, ... (no atomic, no barrier per draw) measured slower
 * on every shape (H200, 2026-11-26, ms, against this kernel: 1024x131072 f16 0.205-0.206
 * against 0.189, f32 0.336-0.337 against 0.313; 64x1M f16 0.105 against 0.098; 16x4194304 f32
 * 0.234 against 0.210). */
/* What the pipelined kernel tells a tracer: the moments a block drew and loaded a ticket, and
 * began and ended its wait for that ticket's row and stored it. The library's kernels trace
 * nothing (no code); bench/probes/merged_row_end_trace times a row's end with its own. */
enum { FC_TRACE_DRAWN, FC_TRACE_LOADED, FC_TRACE_WAIT_BEGIN, FC_TRACE_WAIT_END, FC_TRACE_STORED };
struct no_trace {
    static FC_DEVICE void at(int, int) {}
};

template <int TPB, typename H, bool MERGED_ONCE = false, bool STALL_PREFETCH = false,
          typename Trace = no_trace>
__device__ void softmax_split_held_pipelined(const fc_softmax_args &a) {
    __shared__ uint4 parked[H::NV * TPB];
    /* Each thread's own max over its parked values: in a register, except in the merged
     * kernel, which then spilled 8 bytes at its 64-register cap (f32, sm_90a); the bisect probe
     * timed the register at about 0.5 % of 8x8388608 f16 (MAX_IN_REG). */
    __shared__ float parked_max_shared[MERGED_ONCE ? TPB : 1];
    __shared__ float2 warp_slots[32];
    __shared__ float2 row_stats;
    __shared__ unsigned ticket, completes;
    volatile __shared__ unsigned long long prefetch_plan; /* thread 0's (STALL_PREFETCH) */
    unsigned long long *state = reinterpret_cast<unsigned long long *>(a.counters);
    clear_previous<TPB>(a);
    /* 32-bit ticket arithmetic: the host keeps rows * slices + blocks below 2^31. */
    const int slices = a.chunks, total = (int)(a.rows * slices);
    const auto draw = [&]() { return draw_ticket(state, &ticket); };
    H held;
    /* ticket t's slice into held (take_slice); returns the thread's own max */
    const auto take = [&](int t) {
        float m;
        const unsigned long long before =
            take_slice<TPB>(held, a, state, slices, t, m, warp_slots);
        if (MERGED_ONCE && threadIdx.x == 0)
            completes = before + 1 == (unsigned long long)slices;
        return m;
    };
    /* MERGED_ONCE: the row that ticket t's slice completed (thread 0's `completes`, from the
     * block's last take) is merged before the block next waits, with its registers free where
     * that wait is for another row (at the loop's top, the slice parked), at once where it is
     * for this same row. */
    const auto merge_if_completed = [&](int t) {
        __syncthreads(); /* thread 0's completes */
        if (!completes) return; /* uniform across the block */
        const int row = t / slices;
        const float2 r = merge_words<TPB>(row_words(state, slices, row), slices, warp_slots);
        if (threadIdx.x == 0) store_word(row_merged(state, a.rows, slices, row), md_pack(r.x, r.y));
    };
    int t = draw();
    Trace::at(FC_TRACE_DRAWN, t);
    if (t >= total) return; /* uniform across the block */
    float m = take(t);
    Trace::at(FC_TRACE_LOADED, t);
    bool deferred = MERGED_ONCE; /* the first slice: merged at the loop's top, before any wait */
    for (;;) {
        /* each thread reads back only its own places of parked and parked_max_shared */
        held.park(parked);
        const float parked_max = m;
        if constexpr (MERGED_ONCE) parked_max_shared[threadIdx.x] = m;
        const int p = t;
        if (MERGED_ONCE && deferred) merge_if_completed(p);
        if constexpr (STALL_PREFETCH)
            t = draw_ticket(state, &ticket, [&](int drawn) {
                plan_stall_prefetch<H>(a, slices, total, drawn, p / slices, &prefetch_plan);
            });
        else
            t = draw();
        Trace::at(FC_TRACE_DRAWN, t);
        const int row = p / slices, slice = p - row * slices;
        if (t < total) {
            m = take(t);
            Trace::at(FC_TRACE_LOADED, t);
            if (MERGED_ONCE) {
                deferred = t / slices != row;
                if (!deferred) merge_if_completed(t);
            }
        }
        if (STALL_PREFETCH && threadIdx.x == 0) issue_stall_prefetch(&prefetch_plan);
        Trace::at(FC_TRACE_WAIT_BEGIN, p);
        float2 r;
        if (MERGED_ONCE) {
            if (threadIdx.x == 0)
                row_stats = md_unpack(wait_word(row_merged(state, a.rows, slices, row), 1ull));
            __syncthreads();
            r = row_stats;
        } else {
            r = gather_row_stats<TPB>(row_words(state, slices, row),
                                      row_arrivals(state, a.rows, slices, row), slices,
                                      warp_slots, &row_stats);
        }
        Trace::at(FC_TRACE_WAIT_END, p);
        H::store_parked(a, row, slice,
                        MERGED_ONCE ? parked_max_shared[threadIdx.x] : parked_max, r, parked);
        Trace::at(FC_TRACE_STORED, p);
        if (t >= total) return;
    }
}

template <int TPB, typename H>
__device__ void softmax_split_held_pipelined_merged(const fc_softmax_args &a) {
    softmax_split_held_pipelined<TPB, H, true>(a);
}
template <int TPB, typename H>
__device__ void softmax_split_held_pipelined_merged_prefetch(const fc_softmax_args &a) {
    softmax_split_held_pipelined<TPB, H, true, true>(a);
}

/* FC_SOFTMAX_SPLIT_HELD_BLOCKS_PER_SM blocks per SM: 64 registers per thread at 256 threads,
 * enough for the 32 values plus addresses, and four blocks to overlap one block's exchange
 * with the others' loads and stores. */
#define FC_HELD_FLOATS(DT) \
    held_floats<DT, FC_SOFTMAX_SPLIT_HELD_THREADS, FC_SOFTMAX_SPLIT_HELD_ITEMS>
/* held_bits holds 16 bytes a vector: 64 16-bit values or 32 f32 ones per thread, 32 registers. */
#define FC_HELD_BITS(DT)                                                                       \
    held_bits<DT, FC_SOFTMAX_SPLIT_HELD_THREADS,                                               \
              DT == FC_F32 ? FC_SOFTMAX_SPLIT_HELD_ITEMS : FC_SOFTMAX_SPLIT_HELD_BITS_ITEMS>
/* One exported split-held kernel: fc_softmax_<name>_<dt_name>, blocks of TPB threads, BLOCKS of
 * them per SM, running FORM (softmax_split_held or _pipelined) over the holder type given last
 * (variadic: a holder's template arguments hold commas). */
#define FC_SPLIT_HELD_ENTRY(name, dt_name, TPB, BLOCKS, FORM, ...)                              \
    extern "C" __global__ void __launch_bounds__(TPB, BLOCKS)                                   \
        fc_softmax_##name##_##dt_name(fc_softmax_args a) {                                      \
        dependent_launch_enter(); /* launched dependent (src/cuda/softmax.c, launch) */        \
        FORM<TPB, __VA_ARGS__>(a);                                                              \
    }
#define FC_SPLIT_HELD_KERNEL(dt_name, DT, unused)                                              \
    FC_SPLIT_HELD_ENTRY(split_held, dt_name, FC_SOFTMAX_SPLIT_HELD_THREADS,                     \
                        FC_SOFTMAX_SPLIT_HELD_BLOCKS_PER_SM, softmax_split_held,                \
                        FC_HELD_FLOATS(DT))
FC_SOFTMAX_FOR_DTYPES(FC_SPLIT_HELD_KERNEL, 0)
/* The same over rows that do not start 16-byte aligned, in their shifted layout: f32 rows held
 * as floats (slices of 8192 columns), 16-bit ones as their bits (slices of 16384). */
FC_SPLIT_HELD_ENTRY(split_held_shifted, f32, FC_SOFTMAX_SPLIT_HELD_THREADS,
                    FC_SOFTMAX_SPLIT_HELD_BLOCKS_PER_SM, softmax_split_held,
                    held_floats<FC_F32, FC_SOFTMAX_SPLIT_HELD_THREADS,
                                FC_SOFTMAX_SPLIT_HELD_ITEMS, true>)
#define FC_SPLIT_HELD_SHIFTED_BITS_KERNEL(dt_name, DT)                                         \
    FC_SPLIT_HELD_ENTRY(split_held_shifted, dt_name, FC_SOFTMAX_SPLIT_HELD_THREADS,             \
                        FC_SOFTMAX_SPLIT_HELD_BLOCKS_PER_SM, softmax_split_held,                \
                        held_bits<DT, FC_SOFTMAX_SPLIT_HELD_THREADS,                            \
                                  FC_SOFTMAX_SPLIT_HELD_BITS_ITEMS, true>)
FC_SPLIT_HELD_SHIFTED_BITS_KERNEL(f16, FC_F16)
FC_SPLIT_HELD_SHIFTED_BITS_KERNEL(bf16, FC_BF16)
/* ... and in blocks of 128 (slices of 8192 columns), as the narrow kernel below is for aligned
 * rows. */
#define FC_SPLIT_HELD_NARROW_SHIFTED_KERNEL(dt_name, DT)                                       \
    FC_SPLIT_HELD_ENTRY(split_held_narrow_shifted, dt_name,                                     \
                        FC_SOFTMAX_SPLIT_HELD_NARROW_THREADS,                                   \
                        FC_SOFTMAX_SPLIT_HELD_NARROW_BLOCKS_PER_SM, softmax_split_held,         \
                        held_bits<DT, FC_SOFTMAX_SPLIT_HELD_NARROW_THREADS,                     \
                                  FC_SOFTMAX_SPLIT_HELD_BITS_ITEMS, true>)
FC_SPLIT_HELD_NARROW_SHIFTED_KERNEL(f16, FC_F16)
FC_SPLIT_HELD_NARROW_SHIFTED_KERNEL(bf16, FC_BF16)
#define FC_SPLIT_HELD_BITS_KERNEL(dt_name, DT)                                                 \
    FC_SPLIT_HELD_ENTRY(split_held_bits, dt_name, FC_SOFTMAX_SPLIT_HELD_THREADS,                \
                        FC_SOFTMAX_SPLIT_HELD_BLOCKS_PER_SM, softmax_split_held,                \
                        FC_HELD_BITS(DT))
FC_SPLIT_HELD_BITS_KERNEL(f16, FC_F16)
FC_SPLIT_HELD_BITS_KERNEL(bf16, FC_BF16)
#define FC_SPLIT_HELD_PIPELINED_KERNEL(dt_name, DT, unused)                                    \
    FC_SPLIT_HELD_ENTRY(split_held_pipelined, dt_name, FC_SOFTMAX_SPLIT_HELD_THREADS,           \
                        FC_SOFTMAX_SPLIT_HELD_BLOCKS_PER_SM, softmax_split_held_pipelined,      \
                        FC_HELD_BITS(DT))
FC_SOFTMAX_FOR_DTYPES(FC_SPLIT_HELD_PIPELINED_KERNEL, 0)
#define FC_SPLIT_HELD_PIPELINED_MERGED_KERNEL(dt_name, DT, unused)                             \
    FC_SPLIT_HELD_ENTRY(split_held_pipelined_merged, dt_name, FC_SOFTMAX_SPLIT_HELD_THREADS,    \
                        FC_SOFTMAX_SPLIT_HELD_BLOCKS_PER_SM,                                    \
                        softmax_split_held_pipelined_merged, FC_HELD_BITS(DT))
/* Every dtype: 64 registers, 0 spill bytes each, at the 64-register cap of four blocks an SM
 * (nvcc 13, sm_80/86/89/90a). The 16-bit forms spilled 12 bytes when they were first built
 * (sm_90a); held_bits::each_vector's scale-1 branch is what removed that, and they take it with
 * no change of their own. */
FC_SOFTMAX_FOR_DTYPES(FC_SPLIT_HELD_PIPELINED_MERGED_KERNEL, 0)
/* The merged kernel with the stall prefetch, f32 only: 64 registers, 0 spill bytes (nvcc 13,
 * sm_90a); the 16-bit forms spilled 16 bytes. */
FC_SPLIT_HELD_ENTRY(split_held_pipelined_merged_prefetch, f32, FC_SOFTMAX_SPLIT_HELD_THREADS,
                    FC_SOFTMAX_SPLIT_HELD_BLOCKS_PER_SM,
                    softmax_split_held_pipelined_merged_prefetch, FC_HELD_BITS(FC_F32))
/* The merged kernel in deep blocks: 128 threads of 88 f32 values or 176 16-bit ones (slices of
 * 11264 or 22528 columns, 44 KiB), four an SM at up to 128 registers, so that an SM holds
 * 352 KiB of slices (176 in registers, 176 parked) where the 256-thread form holds 256 (128 +
 * 128: its registers are half data at the 64-register cap). Its grid's 1056 places hold rows
 * of up to 1055 such slices, ~11.9M f32 or ~23.8M 16-bit columns, one read and one write
 * where the other kernels stop at ~8.6M (merged) or ~9.7M (ring) f32 columns. Not a faster
 * form of the rows they take: 8x8388608 f32, 745 slices of 11264 in the 1056 places against
 * the merged kernel's 1024 of 8192, ran 3 % slower (half as many warps an SM to hide the
 * loads' latency; softmax_plan_held.c, deep_suits). 0 spill bytes, 125 registers (f32) and 128
 * (16-bit) (nvcc 13, sm_90a; 128 on sm_80/86/89); 96 f32 values a thread spilled 12 bytes and
 * passed the 48 KiB of static shared memory. The other way to more room, 256-thread blocks
 * holding 3 vectors a thread more in two cp.async slots of dynamic shared memory (slices of
 * 40 KiB, 320 KiB an SM, all 32 warps), lost 8 % on 8x8388608 f32 (0.234 against 0.215 ms):
 * its shared memory leaves L1 28 KiB, which alone cost the merged kernel 3.5 % there (H100,
 * 2026-12-07, branch wip/extra-slots, bench/results/2026-12-07-session49.md). */
#define FC_HELD_BITS_DEEP(DT)                                                                  \
    held_bits<DT, FC_SOFTMAX_SPLIT_HELD_DEEP_THREADS,                                          \
              DT == FC_F32 ? FC_SOFTMAX_SPLIT_HELD_DEEP_ITEMS                                  \
                           : FC_SOFTMAX_SPLIT_HELD_DEEP_BITS_ITEMS>
#define FC_SPLIT_HELD_PIPELINED_MERGED_DEEP_KERNEL(dt_name, DT, unused)                        \
    FC_SPLIT_HELD_ENTRY(split_held_pipelined_merged_deep, dt_name,                              \
                        FC_SOFTMAX_SPLIT_HELD_DEEP_THREADS,                                     \
                        FC_SOFTMAX_SPLIT_HELD_DEEP_BLOCKS_PER_SM,                               \
                        softmax_split_held_pipelined_merged, FC_HELD_BITS_DEEP(DT))
FC_SOFTMAX_FOR_DTYPES(FC_SPLIT_HELD_PIPELINED_MERGED_DEEP_KERNEL, 0)
/* The wide one-ticket kernel for 16-bit inputs: blocks of WIDE_THREADS (two per SM at 64
 * registers) holding slices of 32768 columns as their bits. The host gives it whole rows of
 * 16385..32768 columns (one slice, no ticket, no exchange): two rows in flight per SM where the
 * register kernels hold one (b1024x32). Longer rows measured slower in it than in the
 * 256-thread kernel (H200, 2026-11-26, ms: 1024x131072 f16 0.189 against 0.179, 4096x40000
 * 0.294 against 0.235-0.238; f32 in a 512-thread form as floats, 4096x40000 0.422 against
 * 0.369-0.370). */
#define FC_SPLIT_HELD_WIDE_KERNEL(dt_name, DT)                                                 \
    FC_SPLIT_HELD_ENTRY(split_held_wide, dt_name, FC_SOFTMAX_SPLIT_HELD_WIDE_THREADS,           \
                        FC_SOFTMAX_SPLIT_HELD_WIDE_BLOCKS_PER_SM, softmax_split_held,           \
                        held_bits<DT, FC_SOFTMAX_SPLIT_HELD_WIDE_THREADS,                       \
                                  FC_SOFTMAX_SPLIT_HELD_BITS_ITEMS>)
FC_SPLIT_HELD_WIDE_KERNEL(f16, FC_F16)
FC_SPLIT_HELD_WIDE_KERNEL(bf16, FC_BF16)
/* The narrow one-ticket kernel for aligned f32 rows: blocks of NARROW_THREADS holding slices of
 * 4096 columns as floats (softmax_plan_held.c, fc_cuda_pick_held); for 16-bit inputs, slices
 * of 8192 columns as their bits, as the OpenCL backend's cooperative bits kernel holds them
 * (cl/softmax_cooperative_bits.cl: 128 work-items x 64, 1024x131072 f16 at 0.143 ms on an H200
 * against this backend's 0.158 in 256-thread blocks). */
FC_SPLIT_HELD_ENTRY(split_held_narrow, f32, FC_SOFTMAX_SPLIT_HELD_NARROW_THREADS,
                    FC_SOFTMAX_SPLIT_HELD_NARROW_BLOCKS_PER_SM, softmax_split_held,
                    held_floats<FC_F32, FC_SOFTMAX_SPLIT_HELD_NARROW_THREADS,
                                FC_SOFTMAX_SPLIT_HELD_ITEMS>)
#define FC_SPLIT_HELD_NARROW_BITS_KERNEL(dt_name, DT)                                          \
    FC_SPLIT_HELD_ENTRY(split_held_narrow, dt_name, FC_SOFTMAX_SPLIT_HELD_NARROW_THREADS,       \
                        FC_SOFTMAX_SPLIT_HELD_NARROW_BLOCKS_PER_SM, softmax_split_held,         \
                        held_bits<DT, FC_SOFTMAX_SPLIT_HELD_NARROW_THREADS,                     \
                                  FC_SOFTMAX_SPLIT_HELD_BITS_ITEMS>)
FC_SPLIT_HELD_NARROW_BITS_KERNEL(f16, FC_F16)
FC_SPLIT_HELD_NARROW_BITS_KERNEL(bf16, FC_BF16)
