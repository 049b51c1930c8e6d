/* The CUDA backend's split-held plans (softmax_plan.c's file comment describes the variant):
 * which split-held kernel takes a row, with which slices and grid, and the bounds that keep
 * its waits from deadlocking. softmax_plan.c asks for them before any other variant. */
#include <stdlib.h>
#include <string.h>

#include "softmax_plan.h"
#include "../text.h"

/* Columns of a slice of `threads` threads holding `items` values each. */
#define FC_SLICE_COLS(threads, items) ((int64_t)(threads) * (items))
#define FC_SPLIT_HELD_SLICE                                                                   \
    FC_SLICE_COLS(FC_SOFTMAX_SPLIT_HELD_THREADS, FC_SOFTMAX_SPLIT_HELD_ITEMS)
#define FC_SPLIT_HELD_BITS_SLICE                                                              \
    FC_SLICE_COLS(FC_SOFTMAX_SPLIT_HELD_THREADS, FC_SOFTMAX_SPLIT_HELD_BITS_ITEMS)
#define FC_SPLIT_HELD_DEEP_SLICE                                                              \
    FC_SLICE_COLS(FC_SOFTMAX_SPLIT_HELD_DEEP_THREADS, FC_SOFTMAX_SPLIT_HELD_DEEP_ITEMS)
#define FC_SPLIT_HELD_DEEP_BITS_SLICE                                                         \
    FC_SLICE_COLS(FC_SOFTMAX_SPLIT_HELD_DEEP_THREADS, FC_SOFTMAX_SPLIT_HELD_DEEP_BITS_ITEMS)
#define FC_SPLIT_HELD_WIDE_SLICE                                                              \
    FC_SLICE_COLS(FC_SOFTMAX_SPLIT_HELD_WIDE_THREADS, FC_SOFTMAX_SPLIT_HELD_BITS_ITEMS)
#define FC_SPLIT_HELD_NARROW_SLICE                                                            \
    FC_SLICE_COLS(FC_SOFTMAX_SPLIT_HELD_NARROW_THREADS, FC_SOFTMAX_SPLIT_HELD_ITEMS)
#define FC_SPLIT_HELD_NARROW_BITS_SLICE                                                       \
    FC_SLICE_COLS(FC_SOFTMAX_SPLIT_HELD_NARROW_THREADS, FC_SOFTMAX_SPLIT_HELD_BITS_ITEMS)

/* The split-held kernel for this call: unless FLASHCL_CUDA_SOFTMAX_NO_HELD_BITS=1 (A/B) or the
 * rows do not suit them (x and y rows 16-byte aligned, cols a multiple of a 16-byte vector),
 * a kernel that holds the values as their storage bits (held_bits in
 * cuda/softmax_split_held.cuh: slices of 16384 16-bit columns or 8192 f32 ones, 32 registers a
 * thread), else the one-ticket f32-held one (slices of 8192). Held as bits, rows of at least
 * FC_SPLIT_HELD_PIPELINE_SLICES slices take the pipelined kernel when they are more slices in
 * all than its grid has blocks, others the one-ticket kernel (for f32 inputs its f32-held form:
 * the same expressions over the same slices).
 *
 * Each is deterministic; for 16-bit inputs the two holders may differ in the last bits (their
 * sums run over different trees). H100 (2026-11-25, session 8), 16-bit, ms, bits against
 * f32-held in the same run: 1024x131072 0.223 vs 0.247-0.256, 64x1048576 0.119-0.120 vs
 * 0.135-0.136, 2048x65536 0.216-0.218 vs 0.241-0.247, 4096x40000 0.269-0.279 vs 0.297-0.300,
 * 256x262144 0.115 vs 0.121-0.122.
 *
 * Pipelined against one-ticket, H200 (2026-11-25, session 14, ms): 64x1048576 f32 (128 slices)
 * 0.163-0.164 against 0.188-0.191, f16 (64) 0.097 against 0.100-0.101; rows of fewer slices
 * slower: 256x262144 f16 (16) 0.100-0.102 against 0.0965-0.0976, 1024x131072 f16 (8)
 * 0.187-0.188 against 0.179-0.182, 2048x65536 f16 (4) 0.187 against 0.177-0.180, 4096x40000
 * f32 (5) 0.383 against 0.366-0.373. A row of few slices waits little in the one-ticket kernel
 * (its slices are drawn together), so the pipeline's parking costs more than it saves; so does a
 * launch of no more slices than the pipelined grid's blocks, each of which then takes one:
 * 4x1048576 f32 0.0143-0.0144 against 0.0139, and 1x8388608 16-bit (512 slices, cooperative)
 * 0.020 against the resident split's 0.0166. Rows of 32 slices (H200, 2026-11-26, ms, same
 * call): 256x262144 f32 0.154-0.155 pipelined against 0.160-0.161; 128x524288 16-bit 0.095-0.097
 * either way. FLASHCL_CUDA_SOFTMAX_PIPELINE_SLICES=n instead sends every row of at least n
 * slices to it (tests, A/B). */
#define FC_SPLIT_HELD_PIPELINE_SLICES 32

/* Whether x and y suit the kernels that hold values as their bits: every row 16-byte aligned,
 * cols a multiple of a 16-byte vector (and not FLASHCL_CUDA_SOFTMAX_NO_HELD_BITS=1, for A/B). */
static int held_bits_ok(const fc_softmax_desc *d, const fc_softmax_args *a) {
    const int64_t vec = 16 / (int64_t)fc_cuda_dtype_bytes(d->x_dtype);
    return a->x_vec_ok && a->y_vec_ok && d->cols % vec == 0 &&
           !fc_env_flag("FLASHCL_CUDA_SOFTMAX_NO_HELD_BITS");
}

/* A one-ticket kernel for 16-bit inputs held as their bits: blocks of
 * FC_SOFTMAX_SPLIT_HELD_THREADS (slices of 16384 columns), or with `wide` of
 * FC_SOFTMAX_SPLIT_HELD_WIDE_THREADS (slices of 32768; AUTO gives it whole rows only). */
static fc_cuda_held_kernels held_bits_one_ticket(const fc_cuda_context *ctx,
                                                 const fc_softmax_desc *d, int wide) {
    const fc_cuda_kernels *k = &ctx->kernels;
    const int dt = (int)d->x_dtype;
    fc_cuda_held_kernels h;
    memset(&h, 0, sizeof h);
    h.kernel = wide ? k->softmax_split_held_wide[dt] : k->softmax_split_held_bits[dt];
    h.slice_cols = wide ? FC_SPLIT_HELD_WIDE_SLICE : FC_SPLIT_HELD_BITS_SLICE;
    h.blocks_per_sm = wide ? k->softmax_split_held_wide_blocks_per_sm[dt]
                           : k->softmax_split_held_bits_blocks_per_sm[dt];
    h.threads = wide ? FC_SOFTMAX_SPLIT_HELD_WIDE_THREADS : FC_SOFTMAX_SPLIT_HELD_THREADS;
    return h;
}

/* The narrow one-ticket kernel: blocks of FC_SOFTMAX_SPLIT_HELD_NARROW_THREADS holding aligned
 * f32 rows as floats (slices of 4096 columns) or 16-bit rows as their bits (slices of 8192);
 * with `shifted`, 16-bit rows in their shifted layout (the caller sets h.shift). */
static fc_cuda_held_kernels held_narrow(const fc_cuda_context *ctx, const fc_softmax_desc *d,
                                        int shifted) {
    const fc_cuda_kernels *k = &ctx->kernels;
    const int dt = (int)d->x_dtype;
    fc_cuda_held_kernels h;
    memset(&h, 0, sizeof h);
    h.kernel =
        shifted ? k->softmax_split_held_narrow_shifted[dt] : k->softmax_split_held_narrow[dt];
    h.slice_cols = d->x_dtype == FLASHCL_F32 ? FC_SPLIT_HELD_NARROW_SLICE
                                             : FC_SPLIT_HELD_NARROW_BITS_SLICE;
    h.blocks_per_sm = shifted ? k->softmax_split_held_narrow_shifted_blocks_per_sm[dt]
                              : k->softmax_split_held_narrow_blocks_per_sm[dt];
    h.threads = FC_SOFTMAX_SPLIT_HELD_NARROW_THREADS;
    return h;
}

/* Whether 16-bit rows of `cols` columns held as their bits take the narrow blocks (slices of
 * 8192) rather than the 256-thread ones (16384): rows of 16..31 wide slices, or whose last wide
 * slice would be at most half full (the measurements are at fc_cuda_pick_held's use of it), as
 * long as a row keeps to one narrow slice per SM (fc_cuda_plan_split_held's cap: without it
 * 4x1100000 f16 left the split-held kernel, 0.0237 ms against 0.0117 with it; H200,
 * 2026-11-27); FLASHCL_CUDA_SOFTMAX_NARROW_BITS=1 always, FLASHCL_CUDA_SOFTMAX_NO_NARROW=1
 * never (A/B). For rows in the shifted layout, cols counts the columns of that layout. */
static int narrow_bits(const fc_cuda_context *ctx, int64_t cols) {
    const int64_t wide_slices =
        (int64_t)fc_cuda_ceil_div((uint64_t)cols, (uint64_t)FC_SPLIT_HELD_BITS_SLICE);
    if (fc_env_flag("FLASHCL_CUDA_SOFTMAX_NO_NARROW") ||
        (int64_t)fc_cuda_ceil_div((uint64_t)cols, (uint64_t)FC_SPLIT_HELD_NARROW_BITS_SLICE) >
            ctx->sm_count)
        return 0;
    return fc_env_flag("FLASHCL_CUDA_SOFTMAX_NARROW_BITS") ||
           (wide_slices >= 16 && wide_slices < FC_SPLIT_HELD_PIPELINE_SLICES) ||
           (cols % FC_SPLIT_HELD_BITS_SLICE > 0 &&
            cols % FC_SPLIT_HELD_BITS_SLICE <= FC_SPLIT_HELD_NARROW_BITS_SLICE);
}

/* Tickets ahead for the merged f32 kernel's stall prefetch (cuda/softmax_split_held.cuh) on a
 * row of `slices` slices, `fit` the pipelined grid's blocks; 0: the plain merged kernel. Five
 * eighths of the grid ahead (330 tickets on 132 SMs) for rows of at least 2 * fit - fit / 3
 * slices (880), where the grid waits longest at each row's end. H100, 2026-12-07, flashcl-bench
 * ms, two rounds, plain merged against 330 ahead: 8x8388608 (1024 slices) 0.2280, 0.2276
 * against 0.2163, 0.2167; 4x8600000 (1050) 0.1228, 0.1226 against 0.1180, 0.1179; 4x8000000
 * (977) 0.1126, 0.1124 against 0.1078, 0.1077; 4x7500000 (916) 0.1063, 0.1062 against 0.1033,
 * 0.1041; 4x7000000 (855) level, 0.0987 against 0.0985, where session 47's second machine had
 * it 1 % slower (bench/results/2026-12-07-session48.md, -session47.md: a whole grid ahead or
 * more lost everywhere). FLASHCL_CUDA_SOFTMAX_STALL_PREFETCH=n sets it (0: off; A/B, tests). */
static int stall_prefetch_ahead(int64_t slices, int64_t fit) {
    const long asked = fc_env_long("FLASHCL_CUDA_SOFTMAX_STALL_PREFETCH", -1);
    if (asked >= 0) return asked < 32768 ? (int)asked : 0;
    return slices >= 2 * fit - fit / 3 ? (int)(fit * 5 / 8) : 0;
}

/* Whether the merged kernel in deep blocks (cuda/softmax_split_held.cuh; at most twice its
 * grid's blocks less one slice of 11264 f32 or 22528 16-bit columns: ~11.9M and ~23.8M columns
 * on 132 SMs) takes a pipelined row, whose plan so far is h (slices of h's columns, fit the
 * pipelined grid's blocks): f32 rows longer than the merged kernel takes (past 2 * fit - 1
 * slices of 8192, ~8.65M columns), and 16-bit rows that no other split-held kernel takes (past
 * the ring's ~19.4M columns). Its larger slices were slower wherever the other kernels take
 * the row. H100, 2026-12-07, flashcl-bench ms, deep against the default of the time, two
 * rounds: f32 4x9500000 0.1355, 0.1352 against the ring's 0.1496, 0.1493; 4x11000000 0.1566,
 * 0.1566 against 0.1916, 0.1914 (not split-held); 8x8388608 0.2352, 0.2340 against the merged
 * kernel's 0.2280, 0.2276; 4x6400000 0.0961 against 0.0895 (ring); 16x4194304 0.2083 against
 * 0.1957 (pipelined); f16 2x22000000 0.0806 against 0.1045 (not split-held), 4x16777216
 * 0.1195 against 0.1176 (merged), 4x12000000 0.0898 against 0.0845 (ring)
 * (bench/results/2026-12-07-session48.md). FLASHCL_CUDA_SOFTMAX_DEEP=0 never, =1 every row that
 * h gives the merged or the ring kernel, =2 every pipelined row (A/B, tests). */
static int deep_suits(const fc_cuda_context *ctx, const fc_softmax_desc *d,
                      const fc_cuda_held_kernels *h, int64_t slices, int64_t fit,
                      fc_cuda_held_kernels *deep) {
    const fc_cuda_kernels *k = &ctx->kernels;
    const int dt = (int)d->x_dtype;
    const long asked = fc_env_long("FLASHCL_CUDA_SOFTMAX_DEEP", -1);
    if (!k->softmax_split_held_pipelined_merged_deep[dt] || !ctx->cooperative || asked == 0 ||
        (asked == 1 && !h->merged && !h->ring))
        return 0;
    if (asked < 0 && !(d->x_dtype == FLASHCL_F32 ? slices > 2 * fit - 1
                                                 : fc_cuda_plan_split_held(ctx, d, h) == 0))
        return 0;
    memset(deep, 0, sizeof *deep);
    deep->kernel = k->softmax_split_held_pipelined_merged_deep[dt];
    deep->slice_cols =
        d->x_dtype == FLASHCL_F32 ? FC_SPLIT_HELD_DEEP_SLICE : FC_SPLIT_HELD_DEEP_BITS_SLICE;
    deep->blocks_per_sm = k->softmax_split_held_pipelined_merged_deep_blocks_per_sm[dt];
    deep->threads = FC_SOFTMAX_SPLIT_HELD_DEEP_THREADS;
    deep->pipelined = 1;
    deep->merged = 1;
    return fc_cuda_plan_split_held(ctx, d, deep) > 0;
}

/* Whether a pipelined row takes the ring kernel (cuda/softmax_split_held_ring.cuh) rather than the
 * pipelined kernel h (its merged form for rows of more slices than its grid's blocks, or any row
 * where forced): only where three ring blocks fit an SM, and only rows of more slices than the
 * plain pipelined kernel's grid holds. Those rows take it while they are at most twice its
 * blocks (each block parks two slices, so the whole row is held at once: 792 slices on 132 SMs),
 * and past what the merged kernel takes (twice the pipelined grid's blocks less one: 1055); in
 * between, the merged kernel. prefer_merged (FLASHCL_CUDA_SOFTMAX_PIPELINE_MERGED=2) keeps h
 * wherever the merged kernel takes the row. Thresholds on other GPUs follow their SMs, unmeasured
 * (132 SMs on both the H100 and the H200). H100,
 * 2026-12-07, compare_torch.py, ms, ring against merged, two rounds: f32 (slices of 8192)
 * 4x4500000 (550 slices) 0.0632-0.0626 against 0.0643-0.0642, 4x5500000 (672) 0.0762-0.0748
 * against 0.0790-0.0798, 4x6400000 (782) 0.0904-0.0891 against 0.0891-0.0891, 4x7000000 (855)
 * 0.1033-0.1017 against 0.0982-0.0983, 8x8388608 (1024) 0.2427-0.2420 against 0.2281-0.2289;
 * f16 (slices of 16384; bf16 alike) 4x12000000 (733) 0.0838-0.0847 against 0.0867-0.0867,
 * 4x13500000 (824) 0.0992-0.1000 against 0.0971-0.0952, 4x15000000 (916) 0.1122-0.1122 against
 * 0.1072-0.1071, 4x16000000 (977) 0.1218-0.1217 against 0.1134-0.1129, 4x16777216 (1024)
 * 0.1272-0.1256 against 0.1173-0.1170 (bench/results/2026-12-07-session46.md). The ring's
 * three blocks an SM are slower than the plain pipelined kernel's four wherever that takes the
 * row (session 42: 8x8388608 f16 0.1087 against 0.1023-0.1043; 16x4194304 f16 0.1059 against
 * 0.0967-0.0978; 64x1048576 f16 0.1017 against 0.0942-0.0945; bench/results/
 * 2026-12-06-h100-s42-ring.txt). FLASHCL_CUDA_SOFTMAX_PIPELINE_RING=1 gives it every pipelined
 * row (tests, A/B), =0 none. */
static int ring_suits(const fc_cuda_context *ctx, const fc_softmax_desc *d,
                      const fc_cuda_held_kernels *h, int64_t slices, int prefer_merged) {
    const int dt = (int)d->x_dtype;
    const long forced = fc_env_long("FLASHCL_CUDA_SOFTMAX_PIPELINE_RING", -1);
    const int64_t ring_blocks = fc_cuda_blocks_fit(ctx, FC_SOFTMAX_SPLIT_HELD_RING_BLOCKS_PER_SM);
    if (!ctx->kernels.softmax_split_held_ring[dt] || !ctx->cooperative ||
        ctx->kernels.softmax_split_held_ring_blocks_per_sm[dt] !=
            FC_SOFTMAX_SPLIT_HELD_RING_BLOCKS_PER_SM ||
        forced == 0)
        return 0;
    /* h's own bound (fc_cuda_plan_split_held) says whether h takes the row */
    return forced == 1 || fc_cuda_plan_split_held(ctx, d, h) == 0 ||
           (h->merged && !prefer_merged && slices <= 2 * ring_blocks);
}

fc_cuda_held_kernels fc_cuda_pick_held(const fc_cuda_context *ctx, const fc_softmax_desc *d,
                              const fc_softmax_args *a) {
    const fc_cuda_kernels *k = &ctx->kernels;
    const int dt = (int)d->x_dtype, f32 = d->x_dtype == FLASHCL_F32;
    const int64_t bits_slice = f32 ? FC_SPLIT_HELD_SLICE : FC_SPLIT_HELD_BITS_SLICE;
    const int bits = held_bits_ok(d, a);
    const int64_t slices = (int64_t)fc_cuda_ceil_div((uint64_t)d->cols, (uint64_t)bits_slice);
    const long forced = fc_env_long("FLASHCL_CUDA_SOFTMAX_PIPELINE_SLICES", 0);
    const int64_t fit = fc_cuda_blocks_fit(ctx, k->softmax_split_held_pipelined_blocks_per_sm[dt]);
    /* 0: never the merged kernel; 2: every pipelined row, any dtype, before the ring (A/B,
     * tests); else rows of more slices than the pipelined grid's blocks that the ring does not
     * suit better (ring_suits) */
    const long merged = fc_env_long("FLASHCL_CUDA_SOFTMAX_PIPELINE_MERGED", 1);
    fc_cuda_held_kernels h;
    memset(&h, 0, sizeof h);
    h.threads = FC_SOFTMAX_SPLIT_HELD_THREADS;
    if (bits && (forced > 0 ? slices >= forced
                            : slices >= FC_SPLIT_HELD_PIPELINE_SLICES && d->rows * slices > fit)) {
        h.kernel = k->softmax_split_held_pipelined[dt];
        h.slice_cols = bits_slice;
        h.blocks_per_sm = k->softmax_split_held_pipelined_blocks_per_sm[dt];
        h.pipelined = 1;
        if (k->softmax_split_held_pipelined_merged[dt] &&
            (merged == 2 || (merged != 0 && slices > fit))) {
            h.kernel = k->softmax_split_held_pipelined_merged[dt];
            h.blocks_per_sm = k->softmax_split_held_pipelined_merged_blocks_per_sm[dt];
            h.merged = 1;
        }
        if (ring_suits(ctx, d, &h, slices, merged == 2)) {
            h.kernel = k->softmax_split_held_ring[dt];
            h.blocks_per_sm = k->softmax_split_held_ring_blocks_per_sm[dt];
            h.smem = k->softmax_split_held_ring_smem;
            h.merged = 0;
            h.ring = 1;
        }
        fc_cuda_held_kernels deep;
        if (deep_suits(ctx, d, &h, slices, fit, &deep)) {
            h = deep;
        } else if (h.merged && f32 && k->softmax_split_held_pipelined_merged_prefetch_f32) {
            h.stall_prefetch = stall_prefetch_ahead(slices, fit);
            if (h.stall_prefetch > 0) {
                h.kernel = k->softmax_split_held_pipelined_merged_prefetch_f32;
                h.blocks_per_sm = k->softmax_split_held_pipelined_merged_prefetch_blocks_per_sm;
            }
        }
    } else if (bits && !f32 && k->softmax_split_held_narrow[dt] && narrow_bits(ctx, d->cols)) {
        /* 16-bit rows whose last 16384-column slice would be at most half full, in blocks of 128
         * holding slices of 8192 as their bits: the same columns in fewer idle threads. f16 ms
         * against the 256-thread blocks, same call: 4096x40000 0.1867 against 0.2019 on an H200,
         * 0.2335 against 0.2452 on an H100. Where both fill their slices alike (1024x131072,
         * 2048x65536, 4096x32768) the narrow blocks were level to 1 % slower, so they keep the
         * wide ones (bench/results/2026-11-27-session27.md; FLASHCL_CUDA_SOFTMAX_NARROW_BITS=1
         * takes the narrow blocks for every 16-bit row, NO_NARROW=1 never). Rows of 16..31 wide
         * slices (not pipelined) take them too: H200, 2026-11-27, f16 256x262144 0.0828-0.0831
         * against 0.0867-0.0870 in two calls (session 27: 0.0845 against 0.0878), while 8 slices
         * (1024x131072) lost 0.5 % and 4 (2048x65536) were level
         * (bench/results/2026-11-27-session32.md). Across the band, session 33 (H200, two rounds
         * each): 256x262144 f16 0.0822 against 0.0866, 512x300000 bf16 0.184 against 0.187,
         * 100x400000 and 64x507904 1-2 % faster, 1024x131072 level
         * (bench/results/2026-11-27-h200-s33-narrow-16-31.txt); on an H100 the band is about
         * level (256x262144 and 512x300000 0.5-1 % faster, 100x400000 and 64x507904 1-2 %
         * slower: -h100-s33-narrow-16-31.txt). Past 31 slices the narrow blocks would need more
         * than one slice per SM for rows that are not pipelined. */
        h = held_narrow(ctx, d, 0);
    } else if (bits && !f32) {
        h = held_bits_one_ticket(ctx, d, 0);
    } else if (!a->x_vec_ok && !fc_env_flag("FLASHCL_CUDA_SOFTMAX_NO_SHIFT")) {
        /* Rows that do not start 16-byte aligned (GPT-2's 50257-column vocabulary rows, a view
         * offset by an element) in their shifted layout: 16-byte loads and stores where element
         * ones ran before (FLASHCL_CUDA_SOFTMAX_NO_SHIFT=1, for A/B). H200, 2026-11-26, ms,
         * against element loads in the same call (torch.softmax beside): 4096x50257 f16 0.346
         * against 1.130 (torch 0.351), f32 0.493 against 1.004 (0.775); 512x50257 f16 0.050
         * against 0.151 (0.054); 64x1000003 f16 0.134 against 0.433 (0.298)
         * (bench/results/2026-11-26-h200-s17-shifted-rows.txt). 16-bit rows are held as their
         * bits (held_bits' shifted form: slices of 16384 columns, or 8192 in blocks of 128 where
         * narrow_bits says so, as for aligned rows) instead of as floats (8192): H200,
         * 2026-11-27, f16 ms, against the float-held kernel in the same call (torch.softmax
         * beside): 4096x50257 0.2535 against 0.3456 (0.352), 512x50257 0.0391 against 0.0492,
         * 256x100003 0.0391 against 0.0479, 64x1000003 0.0911 against 0.1315; 64x50257 0.0097
         * against 0.0091 (torch 0.0136), a launch of 448 narrow blocks. In 256-thread blocks
         * (FLASHCL_CUDA_SOFTMAX_NO_NARROW=1) 4096x50257 took 0.2712-0.2729 and 64x1000003
         * 0.0895 (bench/results/2026-11-27-h200-s34-shifted-bits-narrow.txt). */
        const int64_t shift = 16 / (int64_t)fc_cuda_dtype_bytes(d->x_dtype) - 1;
        if (!f32 && narrow_bits(ctx, d->cols + shift)) {
            h = held_narrow(ctx, d, 1);
        } else {
            h.kernel = k->softmax_split_held_shifted[dt];
            h.slice_cols = f32 ? FC_SPLIT_HELD_SLICE : FC_SPLIT_HELD_BITS_SLICE;
            h.blocks_per_sm = k->softmax_split_held_shifted_blocks_per_sm[dt];
        }
        h.shift = shift;
    } else if (f32 && k->softmax_split_held_narrow[dt] &&
               !fc_env_flag("FLASHCL_CUDA_SOFTMAX_NO_NARROW")) {
        /* Aligned f32 rows in blocks of 128 (slices of 4096 columns) rather than 256: several
         * blocks share an SM, so one's wait for its row overlaps another's loads, as in the
         * OpenCL cooperative split row. H200, 2026-11-26, ms, against the 256-thread kernel in
         * the same call (FLASHCL_CUDA_SOFTMAX_NO_NARROW=1 restores it): 1024x131072 0.2999
         * against 0.3103, 2048x65536 0.3008 against 0.3026, 4096x40000 0.3617 against 0.3629
         * (bench/results/2026-11-26-h200-s21-cuda-narrow-held.txt); on an H100 within 0.7 %
         * either way (256x131072 2.4 % faster), and blocks of 64 were 2-9 % slower there
         * (bench/results/2026-11-26-h100-s21-cuda-narrow-held.txt). */
        h = held_narrow(ctx, d, 0);
    } else {
        h.kernel = k->softmax_split_held[dt];
        h.slice_cols = FC_SPLIT_HELD_SLICE;
        h.blocks_per_sm = k->softmax_split_held_blocks_per_sm[dt];
    }
    return h;
}

/* Blocks of a split-held launch: one per slice, or for the pipelined kernel at most as many as
 * the GPU holds at once. */
uint64_t fc_cuda_split_held_blocks(const fc_cuda_context *ctx, const fc_cuda_held_kernels *h,
                                  uint64_t tickets) {
    const uint64_t fit = (uint64_t)fc_cuda_blocks_fit(ctx, h->blocks_per_sm);
    return h->pipelined && fit < tickets ? fit : tickets;
}

/* Slices per row for the split-held kernel, or 0 when it cannot take the shape: a row's slices
 * must all be running at once (the blocks of a row wait for one another; see the kernel's
 * comment), and the kernel counts tickets in int. The cap is one slice per SM, not all the
 * device holds (blocks per SM x SMs): launches that run at the same time (two contexts' streams,
 * MPS clients) each need their newest row's slices resident, so with one per SM as many
 * launches as blocks fit on an SM (4) still finish. The same bound as the OpenCL cooperative
 * split row. Past it, on devices that take cooperative launches, the pipelined kernel in one
 * (all its blocks running together, whatever else runs) takes rows of up to one slice per
 * block. Rows of fewer slices
 * than twice its blocks would not deadlock (each block holds two published slices while it
 * waits; the kernel's comment), but past one per block a row fills the GPU alone and every row
 * ends in a grid-wide wait: H200, 2026-11-25, ms, against the plans before it: 8x8388608 f32
 * (1024 slices) 0.331 against 0.204-0.205, while 16-bit (512) gained, 0.123 against 0.137-0.139,
 * as did 16x4194304 (512 f32 / 256 16-bit slices), f32 0.208 against 0.232, f16 0.106 against
 * 0.159. The merged kernel takes rows of up to 2 * fit - 1 slices:
 * the block that completes a row merges it once for all. H100, 2026-12-06, compare_torch.py ms,
 * against the resident split it replaced: 8x8388608 f32 0.232 against 0.247, 6x6000000 0.138
 * against 0.149, 3x5005312 0.057 against 0.065 (bench/results/2026-12-06-session40.md). */
int64_t fc_cuda_plan_split_held(const fc_cuda_context *ctx, const fc_softmax_desc *d,
                               const fc_cuda_held_kernels *h) {
    const int64_t fit = fc_cuda_blocks_fit(ctx, h->blocks_per_sm);
    const int64_t cap = h->blocks_per_sm <= 0 ? 0
                        : h->ring && ctx->cooperative ? 3 * fit - 1
                        : h->merged && ctx->cooperative ? 2 * fit - 1
                        : h->pipelined && ctx->cooperative ? fit
                        : ctx->sm_count;
    const int64_t slices =
        (int64_t)fc_cuda_ceil_div((uint64_t)(d->cols + h->shift), (uint64_t)h->slice_cols);
    /* tickets past the last slice are drawn too, one per block (int in the kernel) */
    if (slices > cap || d->rows * slices + fit >= ((int64_t)1 << 31)) return 0;
    return slices;
}

/* FLASHCL_CUDA_SOFTMAX_SPLIT_HELD=0 turns the split-held kernel off (it is on by default, so the
 * switch reads the other way round from fc_env_flag's). */
int fc_cuda_split_held_enabled(void) {
    const char *v = getenv("FLASHCL_CUDA_SOFTMAX_SPLIT_HELD");
    return !(v && strcmp(v, "0") == 0);
}

/* 16-bit rows of 8193..32768 columns, where held_bits_ok allows: held whole as the bits of one
 * slice of a one-ticket kernel (the 256-thread one up to 16384 columns, four blocks per SM, the
 * wide one past that, two per SM), which with one slice takes no ticket and exchanges nothing.
 * Against the f32 register configurations' one row per 1024-thread block (b1024x32) or per
 * 512-thread one (b512x32), H200, 2026-11-26, ms, f16 / bf16: 4096x32768 0.150-0.152 /
 * 0.151 against 0.183 / 0.182-0.183 (86 % of copy bandwidth against 71 %), 16384x12288
 * 0.232-0.233 / 0.234-0.239 against 0.254-0.255 / 0.259-0.261, 8192x16384 0.145 / 0.146-0.148
 * against 0.146-0.147 / 0.148-0.149. FLASHCL_CUDA_SOFTMAX_HELD_ROWS=0 keeps them in the register
 * kernels (A/B). */
int fc_cuda_held_whole_rows(const fc_cuda_context *ctx, const fc_softmax_desc *d,
                            const fc_softmax_args *a, fc_cuda_held_kernels *held) {
    fc_cuda_held_kernels h;
    if (d->x_dtype == FLASHCL_F32 || d->cols <= FC_SPLIT_HELD_BITS_SLICE / 2 ||
        d->cols > FC_SPLIT_HELD_WIDE_SLICE || !held_bits_ok(d, a) ||
        !fc_cuda_split_held_enabled() || fc_env_long("FLASHCL_CUDA_SOFTMAX_HELD_ROWS", 1) == 0)
        return 0;
    h = held_bits_one_ticket(ctx, d, d->cols > FC_SPLIT_HELD_BITS_SLICE);
    if (fc_cuda_plan_split_held(ctx, d, &h) != 1) return 0;
    *held = h;
    return 1;
}
