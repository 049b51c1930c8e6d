/* The CUDA backend's softmax plans: the variant for a shape (or the forced one) and its layout;
 * softmax.c launches the kernels of cuda/softmax.cuh that they choose.
 *
 *   row in registers  cols <= 32768: a group of 4..1024 threads holds the row; one read, one write.
 *                     16-bit rows of 4096 and 8192 take 32 items per thread (64 bytes in flight);
 *                     longer 16-bit rows, where x and y allow, are held whole as their bits by
 *                     the split-held kernels instead (fc_cuda_held_whole_rows).
 *   resident split    a row's chunks of 8192..32768 columns (registers, plus up to 3 parts in
 *                     shared memory) on co-resident blocks (cooperative launch) that exchange
 *                     their (max, sum) and normalise what they hold: one read, any number of
 *                     rows, as long as one row fits on the device (~8.6M columns on an H100/H200).
 *   online chunked    one block per row, pass 1 (max, sum), pass 2 normalise: any length.
 *   two-kernel split  few very long rows: partial (max, sum) per chunk, then merge + normalise.
 *   staged            (cuda/softmax_staged.cuh) one 1024-thread block per SM holds chunks of rows
 *                     in shared memory, copied in by cp.async with the next chunk already in
 *                     flight; the chunks of a row exchange (max, sum) like the resident split.
 *                     One read (but for up to a third of a chunk past its buffer, read twice,
 *                     the second time from L2): 16-bit rows past 32768 columns in at most 32
 *                     chunks, where it measured faster than the resident split (see choose()).
 *   split-held        (cuda/softmax_split_held.cuh; its plans in softmax_plan_held.c, whose
 *                     functions the notes below name) slices of 8192 columns (16384 for 16-bit
 *                     inputs, held as their bits; 4096 in 128-thread blocks for aligned f32
 *                     rows of few slices), one per 256-thread block, in registers;
 *                     a plain grid of rows * slices blocks, each taking its
 *                     (row, slice) by ticket in the order blocks start, exchanging (max, sum)
 *                     as published words on state its blocks clear for the next launch (no
 *                     memset first): one read, one write, no lock-step rounds. Rows of many
 *                     slices take the pipelined form: a grid the GPU holds at once, whose
 *                     blocks park a slice in shared memory and load their next one before
 *                     waiting for the parked one's row. Rows past 32768 columns, as long as a
 *                     row takes at most one slice per SM (~1.08M columns on an H100, ~2.16M
 *                     for 16-bit inputs), or in the pipelined form, launched cooperatively,
 *                     one per block (4 per SM: ~4.3M and ~8.6M columns). Longer rows take
 *                     the ring form, whose blocks park two slices each, three blocks an SM
 *                     (cuda/softmax_split_held_ring.cuh), while they are at most two slices
 *                     per ring block (~6.5M f32, ~13M 16-bit columns); then the merged
 *                     pipelined form, where the block that completes a row merges its (max,
 *                     sum) once for all the others to read (for f32 rows of 880 slices or
 *                     more, prefetching into L2 while it waits: stall_prefetch_ahead), up to
 *                     twice the pipelined grid's blocks less one (~8.6M and ~17.3M columns);
 *                     then the ring again,
 *                     up to three times its blocks less one (~9.7M and ~19.4M) (ring_suits),
 *                     for 16-bit rows; f32 rows past the merged kernel's ~8.6M columns, and
 *                     16-bit rows past the ring's, take the merged kernel in deep blocks (128
 *                     threads of 88 f32 or 176 16-bit values, four an SM) up to ~11.9M and
 *                     ~23.8M columns (deep_suits).
 *                     Rows that do not start 16-byte aligned (odd lengths, element offsets)
 *                     are held in their shifted layout, counted from the 16-byte boundary
 *                     before each row, so that their vectors load and store 16 bytes at a
 *                     time: f32 as floats, 16-bit inputs as their bits.
 * Forced SPLIT_ROW takes the split-held kernel where it fits, else the staged kernel with two
 * chunks or more where it fits, else the resident split, else the two-kernel split.
 *
 * FLASHCL_CUDA_SOFTMAX_LEGACY=1 restores the plans of before the staged kernel (no staged or
 * split-held kernel, 16-bit rows in the f32 register configurations), for A/B measurements;
 * FLASHCL_CUDA_SOFTMAX_SPLIT_HELD=0 leaves the split-held kernel out (AUTO and forced SPLIT_ROW
 * then choose as before it), for A/B measurements;
 * FLASHCL_CUDA_SOFTMAX_NO_HELD_BITS=1 holds split-held slices as f32 (8192 columns; 4096 for
 * f32 inputs), in the one-ticket kernel; FLASHCL_CUDA_SOFTMAX_NO_NARROW=1 gives aligned f32 rows
 * the one-ticket kernel's blocks of 256 (8192 columns) instead of 128 (4096);
 * FLASHCL_CUDA_SOFTMAX_PIPELINE_SLICES=n sends split-held rows of at least
 * n slices to the pipelined kernel (by default rows of 32 or more, when they are more slices
 * than its grid's blocks); FLASHCL_CUDA_SOFTMAX_PIPELINE_MERGED=0 keeps rows of more slices
 * than the pipelined grid's blocks out of the merged kernel (to the ring kernel where it takes
 * them), =2 gives the merged kernel every pipelined row, also rows of at most the grid's blocks
 * and those the ring would take (A/B, tests; default 1: rows of more slices than the grid's
 * blocks where the ring does not suit them better);
 * FLASHCL_CUDA_SOFTMAX_PIPELINE_RING=1 gives every pipelined row the ring kernel, =0 none (by
 * default rows longer than the pipelined kernels take; A/B, tests);
 * FLASHCL_CUDA_SOFTMAX_STALL_PREFETCH=n sets the merged f32 kernel's prefetch (tickets ahead, 0:
 * none) and FLASHCL_CUDA_SOFTMAX_DEEP=0|1|2 where the deep blocks go (stall_prefetch_ahead,
 * deep_suits; A/B, tests);
 * FLASHCL_CUDA_SOFTMAX_NO_SHIFT=1 loads and stores unaligned rows element by element in the
 * split-held and register kernels, as before the shifted layout (A/B, tests);
 * FLASHCL_CUDA_SOFTMAX_PIPELINED_CARVEOUT=n replaces the pipelined kernels' shared-memory
 * carveout (src/cuda/kernels.c; A/B);
 * FLASHCL_CUDA_SOFTMAX_HELD_ROWS=0 keeps 16-bit rows of up to 32768 columns in the register
 * kernels (fc_cuda_held_whole_rows);
 * FLASHCL_CUDA_SOFTMAX_TRACE=1 prints the plan of each call on stderr;
 * FLASHCL_CUDA_SOFTMAX_STAGED_BUFFERS=1|2 and FLASHCL_CUDA_SOFTMAX_STAGED_CHUNKS=n restrict the
 * staged kernel's layouts to those (where they fit), for tuning. */
#include <stdlib.h>
#include <string.h>

#include "softmax_plan.h"
#include "../text.h"


const fc_cuda_row_config fc_cuda_row_configs[FC_ROW_CONFIG_COUNT] = {
#define FC_ROW_CONFIG_ROW_(name, group, items, block) {group, items, block},
    FC_SOFTMAX_ROW_CONFIGS(FC_ROW_CONFIG_ROW_)
#undef FC_ROW_CONFIG_ROW_
};

/* The sub-warp groups of 16 or 32 values a thread (g4x16, g8x16, g16x16, g16x32). */
static int short_wide(int c) {
    return fc_cuda_row_configs[c].group < 32 && fc_cuda_row_configs[c].items >= 16;
}

/* f32 (and every dtype under the legacy plans): the first configuration that covers the row.
 * 16-bit: the smallest capacity that covers it, more items per thread on a tie (b128x32 rather
 * than b256x16 for 4096 columns: 64 bytes in flight per thread instead of 32; g16x16 rather
 * than g32x8 for 129..256 columns, g16x32 rather than g32x16 for 257..512), the sub-warp groups
 * of 16 or 32 values only when `vectors` (the rows are held in 16-byte vectors: element by
 * element, 16 loads a thread lose) and not FLASHCL_CUDA_SOFTMAX_SHORT_ITEMS8=1 (A/B).
 * H100, 2026-11-26, ms, before -> after in the same call, f16 (bf16 the same), outputs
 * rotated / one output reused: 32768x160 0.0167 -> 0.0125 /
 * 0.0163 -> 0.0114 (torch 0.0141), 32768x200 0.0168 -> 0.0131 / 0.0164 -> 0.0117 (torch
 * 0.0160), 131072x120 0.0311 -> 0.0248, 65536x48 0.0098 -> 0.0081 / 0.0096 -> 0.0075,
 * 32768x128 0.0090 -> 0.0091 / 0.0080 -> 0.0076, 16384x256 0.0091 -> 0.0091 / 0.0081 -> 0.0076;
 * rows in the element layout unchanged (65536x100, 32768x127)
 * (bench/results/2026-11-26-h100-s22-cuda-short-16bit-items16.txt). g16x32, same day, against
 * g32x16: 32768x300 (shifted) 0.0224 -> 0.0199, 32768x384 0.0226 -> 0.0206, 16384x448 0.0138
 * -> 0.0135, 32768x500 and 16384x512 within 1 % (-s22-cuda-16bit-g16x32.txt). */
int fc_cuda_row_config_for(int64_t cols, flashcl_dtype dt, int legacy, int vectors) {
    const int wide = vectors && !fc_env_flag("FLASHCL_CUDA_SOFTMAX_SHORT_ITEMS8");
    int c, best = -1;
    for (c = 0; c < FC_ROW_CONFIG_COUNT; c++) {
        const int64_t capacity = fc_cuda_row_capacity(c);
        if (capacity < cols) continue;
        if (short_wide(c) && (dt == FLASHCL_F32 || legacy || !wide)) continue;
        if (dt == FLASHCL_F32 || legacy) return c;
        if (best < 0 || capacity < fc_cuda_row_capacity(best) ||
            (capacity == fc_cuda_row_capacity(best) &&
             fc_cuda_row_configs[c].items > fc_cuda_row_configs[best].items))
            best = c;
    }
    return best;
}

fc_cuda_resident_plan fc_cuda_plan_resident(const fc_cuda_context *ctx, const fc_softmax_desc *d) {
    const fc_cuda_kernels *k = &ctx->kernels;
    fc_cuda_resident_plan r;
    memset(&r, 0, sizeof r);
    if (!ctx->cooperative) return r;
    for (r.parts = 0; r.parts <= k->softmax_resident_max_parts; r.parts++) {
        const int64_t max_blocks =
            fc_cuda_blocks_fit(ctx, k->softmax_resident_blocks_per_sm[d->x_dtype][r.parts]);
        r.chunk_cols = (1 + r.parts) * FC_RESIDENT_PART;
        r.chunks = (d->cols + r.chunk_cols - 1) / r.chunk_cols;
        /* All of one row's chunks must be resident at once; the kernel counts items in int. */
        if (r.chunks > max_blocks || d->rows * r.chunks >= ((int64_t)1 << 31)) continue;
        r.rows_per_grid = max_blocks / r.chunks < d->rows ? max_blocks / r.chunks : d->rows;
        return r;
    }
    r.rows_per_grid = 0;
    return r;
}

fc_cuda_staged_plan fc_cuda_plan_staged(const fc_cuda_context *ctx, const fc_softmax_desc *d,
                                        int x_vec_ok, int64_t min_chunks) {
    const fc_cuda_kernels *k = &ctx->kernels;
    const int64_t bytes = (int64_t)fc_cuda_dtype_bytes(d->x_dtype);
    const int64_t granule = 32 * (16 / bytes); /* a warp's 16-byte vectors: aligned chunk starts */
    const int64_t max_blocks =
        fc_cuda_blocks_fit(ctx, k->softmax_staged_blocks_per_sm[d->x_dtype]);
    /* Tuning overrides, for measurements: only this many buffers / chunks per row. */
    const char *force_buffers = getenv("FLASHCL_CUDA_SOFTMAX_STAGED_BUFFERS");
    const char *force_chunks = getenv("FLASHCL_CUDA_SOFTMAX_STAGED_CHUNKS");
    const int64_t only_chunks = force_chunks ? atoll(force_chunks) : 0;
    fc_cuda_staged_plan best;
    double best_cost = 0;
    int buffers;
    memset(&best, 0, sizeof best);
    if (!x_vec_ok || max_blocks <= 0 || k->softmax_staged_smem == 0) return best;
    for (buffers = 2; buffers >= 1; buffers--) {
        const int64_t capacity =
            (int64_t)(k->softmax_staged_smem / (unsigned)buffers) / (granule * bytes) * granule;
        const double round_cost = buffers == 2 ? 8192.0 : 65536.0;
        int64_t chunks = capacity > 0 ? (int64_t)fc_cuda_ceil_div((uint64_t)d->cols,
                                                          (uint64_t)(capacity + capacity / 2))
                                      : 0;
        if (chunks == 0 || (force_buffers && atoi(force_buffers) != buffers)) continue;
        if (chunks < min_chunks) chunks = min_chunks;
        if (only_chunks > 0 && chunks < only_chunks) chunks = only_chunks;
        for (; chunks <= max_blocks; chunks++) {
            const uint64_t per_chunk = fc_cuda_ceil_div((uint64_t)d->cols, (uint64_t)chunks);
            const int64_t chunk_cols =
                (int64_t)(fc_cuda_ceil_div(per_chunk, (uint64_t)granule) * (uint64_t)granule);
            const int64_t n = (int64_t)fc_cuda_ceil_div((uint64_t)d->cols, (uint64_t)chunk_cols);
            const int64_t held = chunk_cols < capacity ? chunk_cols : capacity;
            int64_t rows_per_grid, rounds;
            double cost;
            if (only_chunks > 0 && chunks > only_chunks) break;
            if (n != chunks) continue; /* rounding merged chunks: the same as a smaller count */
            if (2 * (chunk_cols - held) > held) continue;
            if (n > 1 && !ctx->cooperative) break;
            if (d->rows * n >= ((int64_t)1 << 31)) break; /* the kernel counts items in int */
            rows_per_grid = max_blocks / n < d->rows ? max_blocks / n : d->rows;
            rounds = (int64_t)fc_cuda_ceil_div((uint64_t)d->rows, (uint64_t)rows_per_grid);
            cost = (double)rounds * ((double)((2 * chunk_cols - held) * bytes) + round_cost);
            if (best.chunks == 0 || cost < best_cost) {
                best.buffers = buffers, best.chunk_cols = chunk_cols, best.held_cols = held;
                best.chunks = n;
                best.rows_per_grid = rows_per_grid, best_cost = cost;
            }
        }
    }
    return best;
}

/* AUTO before the staged kernel. Registers whenever the row fits, except a few long rows that
 * would leave most SMs idle; then reading once (resident) beats reading twice (chunked: the
 * second read may hit L2; split: fills the GPU when rows are too few for one block each). */
fc_cuda_plan_kind fc_cuda_choose_legacy(const fc_cuda_context *ctx, const fc_softmax_desc *d) {
    int resident = fc_cuda_plan_resident(ctx, d).rows_per_grid > 0;
    if (d->cols <= FC_ROWS_MAX_COLS) {
        if (d->cols <= 4096 || d->rows >= ctx->sm_count / 2 || !resident) return FC_CUDA_PLAN_ROWS;
        return FC_CUDA_PLAN_RESIDENT;
    }
    if (resident) return FC_CUDA_PLAN_RESIDENT;
    return d->rows >= 2 * (int64_t)ctx->sm_count ? FC_CUDA_PLAN_CHUNKED : FC_CUDA_PLAN_SPLIT;
}

/* AUTO. First the split-held kernel for rows past the register kernels' 32768 columns, where a
 * row takes at most one slice per SM (H100, 2026-11-22, against the plans before it:
 * 1024x131072 f32 0.395 ms against 0.467, f16 0.250 against 0.318; 64x1048576 f32 0.214 against
 * 0.313, f16 0.138 against 0.164; 16-bit rows of 32768 measured slower split in two slices,
 * 0.248 against 0.235 in b1024x32); then 16-bit rows of 8193..32768 columns held whole in one
 * slice (fc_cuda_held_whole_rows, softmax_plan_held.c). Else, as measured on an H100 (2026-11-22,
 * bench/results/): the legacy choice, except that 16-bit rows longer than the register kernels
 * hold take the staged kernel when a row needs at most 32 chunks (1024x131072: 57% of copy
 * bandwidth against 50%, 64x1048576: 56% against 44%). With more chunks per row (8x8388608) and
 * for f32 (1024x131072: 64% against 79%), and for 16-bit rows of 32768 (54% against 78%), the
 * staged kernel measured slower. */
fc_cuda_plan_kind fc_cuda_choose(const fc_cuda_context *ctx, const fc_softmax_desc *d,
                                 const fc_softmax_args *a, fc_cuda_held_kernels *held,
                                 fc_cuda_staged_plan *staged, int64_t *slices) {
    if (d->cols > FC_ROWS_MAX_COLS && fc_cuda_split_held_enabled()) {
        *slices = fc_cuda_plan_split_held(ctx, d, held);
        if (*slices > 0) return FC_CUDA_PLAN_SPLIT_HELD;
    }
    if (fc_cuda_held_whole_rows(ctx, d, a, held)) {
        *slices = 1;
        return FC_CUDA_PLAN_SPLIT_HELD;
    }
    if (d->x_dtype != FLASHCL_F32 && d->cols > FC_ROWS_MAX_COLS) {
        *staged = fc_cuda_plan_staged(ctx, d, a->x_vec_ok, 1);
        if (staged->chunks > 0 && staged->chunks <= 32) return FC_CUDA_PLAN_STAGED;
        memset(staged, 0, sizeof *staged);
    }
    return fc_cuda_choose_legacy(ctx, d);
}
