/* The CUDA backend's softmax: picks a variant from the shape (or takes the forced one) and
 * launches the kernels of cuda/softmax.cuh.
 *
 *   row in registers  cols <= 32768: a group of 4..1024 threads holds the row; one read, one write.
 *                     16-bit rows of 4096 and 8192 take 32 items per thread (64 bytes in flight);
 *                     longer 16-bit rows, where x and y allow, are held whole as their bits by
 *                     the split-held kernels instead (held_whole_rows).
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
 *   split-held        (cuda/softmax_split_held.cuh) slices of 8192 columns (16384 for 16-bit
 *                     inputs, held as their bits), one per 256-thread block, in registers;
 *                     a plain grid of rows * slices blocks, each taking its
 *                     (row, slice) by ticket in the order blocks start, exchanging (max, sum)
 *                     as published words on state its blocks clear for the next launch (no
 *                     memset first): one read, one write, no lock-step rounds. Rows of many
 *                     slices take the pipelined form: a grid the GPU holds at once, whose
 *                     blocks park a slice in shared memory and load their next one before
 *                     waiting for the parked one's row. Rows past 32768 columns, as long as a
 *                     row takes at most one slice per SM (~1.08M columns on an H100, ~2.16M
 *                     for 16-bit inputs), or in the pipelined form, launched cooperatively,
 *                     one per block (4 per SM: ~4.3M and ~8.6M columns). Rows that do not
 *                     start 16-byte aligned (odd lengths, element offsets) are held as f32 in
 *                     their shifted layout, counted from the 16-byte boundary before each row,
 *                     so that their vectors load and store 16 bytes at a time.
 * Forced SPLIT_ROW takes the split-held kernel where it fits, else the staged kernel with two
 * chunks or more where it fits, else the resident split, else the two-kernel split.
 *
 * FLASHCL_CUDA_SOFTMAX_LEGACY=1 restores the plans of before the staged kernel (no staged or
 * split-held kernel, 16-bit rows in the f32 register configurations), for A/B measurements;
 * FLASHCL_CUDA_SOFTMAX_SPLIT_HELD=0 leaves the split-held kernel out (AUTO and forced SPLIT_ROW
 * then choose as before it), for A/B measurements;
 * FLASHCL_CUDA_SOFTMAX_NO_HELD_BITS=1 holds split-held slices as f32 (8192 columns), in the
 * one-ticket kernel; FLASHCL_CUDA_SOFTMAX_PIPELINE_SLICES=n sends split-held rows of at least
 * n slices to the pipelined kernel (by default rows of 32 or more, when they are more slices
 * than its grid's blocks);
 * FLASHCL_CUDA_SOFTMAX_NO_SHIFT=1 loads and stores unaligned rows element by element in the
 * split-held and register kernels, as before the shifted layout (A/B, tests);
 * FLASHCL_CUDA_SOFTMAX_HELD_ROWS=0 keeps 16-bit rows of up to 32768 columns in the register
 * kernels (held_whole_rows);
 * FLASHCL_CUDA_SOFTMAX_TRACE=1 prints the plan of each call on stderr;
 * FLASHCL_CUDA_SOFTMAX_STAGED_BUFFERS=1|2 and FLASHCL_CUDA_SOFTMAX_STAGED_CHUNKS=n restrict the
 * staged kernel's layouts to those (where they fit), for tuning. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"
#include "split_state.h"
#include "../text.h"
#include "../error.h"

_Static_assert(sizeof(fc_softmax_args) == FC_SOFTMAX_ARGS_BYTES,
               "fc_softmax_args differs from the layout the kernels were compiled with");

static const struct row_config {
    int group, items, block;
} row_configs[FC_ROW_CONFIG_COUNT] = {
#define FC_ROW_CONFIG_ROW_(name, group, items, block) {group, items, block},
    FC_SOFTMAX_ROW_CONFIGS(FC_ROW_CONFIG_ROW_)
#undef FC_ROW_CONFIG_ROW_
};

#define FC_ROWS_MAX_COLS ((int64_t)1024 * 32) /* the largest configuration's capacity */
#define FC_RESIDENT_PART ((int64_t)FC_SOFTMAX_RESIDENT_THREADS * FC_SOFTMAX_RESIDENT_ITEMS)
#define FC_STREAM_STEP ((int64_t)FC_SOFTMAX_STREAM_THREADS * FC_SOFTMAX_STREAM_VALUES)
#define FC_SPLIT_HELD_SLICE ((int64_t)FC_SOFTMAX_SPLIT_HELD_THREADS * FC_SOFTMAX_SPLIT_HELD_ITEMS)
#define FC_SPLIT_HELD_BITS_SLICE \
    ((int64_t)FC_SOFTMAX_SPLIT_HELD_THREADS * FC_SOFTMAX_SPLIT_HELD_BITS_ITEMS)
#define FC_SPLIT_HELD_WIDE_SLICE \
    ((int64_t)FC_SOFTMAX_SPLIT_HELD_WIDE_THREADS * FC_SOFTMAX_SPLIT_HELD_BITS_ITEMS)
#define FC_MAX_GRID_X 0x7fffffffu

typedef enum {
    PLAN_ROWS, PLAN_RESIDENT, PLAN_CHUNKED, PLAN_SPLIT, PLAN_STAGED, PLAN_SPLIT_HELD
} plan_kind;

static size_t dtype_bytes(flashcl_dtype dt) { return dt == FLASHCL_F32 ? 4 : 2; }

static uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

/* An environment switch: set, and neither empty nor "0". */
/* Whether every row of a view starts on an `align`-byte boundary. */
static int rows_aligned(uint64_t address, int64_t rows, int64_t stride, size_t bytes,
                        size_t align) {
    return address % align == 0 && (rows == 1 || ((uint64_t)stride * bytes) % align == 0);
}

/* f32 (and every dtype under the legacy plans): the first configuration that covers the row.
 * 16-bit: the smallest capacity that covers it, more items per thread on a tie (b128x32 rather
 * than b256x16 for 4096 columns: 64 bytes in flight per thread instead of 32). */
static int row_config(int64_t cols, flashcl_dtype dt, int legacy) {
    int c, best = -1;
    for (c = 0; c < FC_ROW_CONFIG_COUNT; c++) {
        const int64_t capacity = (int64_t)row_configs[c].group * row_configs[c].items;
        if (capacity < cols) continue;
        if (dt == FLASHCL_F32 || legacy) return c;
        if (best < 0 || capacity < (int64_t)row_configs[best].group * row_configs[best].items ||
            (capacity == (int64_t)row_configs[best].group * row_configs[best].items &&
             row_configs[c].items > row_configs[best].items))
            best = c;
    }
    return best;
}

/* Blocks of a kernel with blocks_per_sm blocks per SM that the GPU holds at once. */
static int64_t blocks_fit(const fc_cuda_context *ctx, int blocks_per_sm) {
    return (int64_t)ctx->sm_count * blocks_per_sm;
}

/* The resident split's layout for this shape: shared-memory parts per block (the fewest that
 * let one row's chunks all be resident), chunks per row, and how many rows one cooperative grid
 * holds, which is 0 when even one row does not fit on the device at once. */
typedef struct resident_plan {
    int parts;
    int64_t chunk_cols, chunks, rows_per_grid;
} resident_plan;

static resident_plan plan_resident(const fc_cuda_context *ctx, const fc_softmax_desc *d) {
    const fc_cuda_kernels *k = &ctx->kernels;
    resident_plan r;
    memset(&r, 0, sizeof r);
    if (!ctx->cooperative) return r;
    for (r.parts = 0; r.parts <= k->softmax_resident_max_parts; r.parts++) {
        const int64_t max_blocks =
            blocks_fit(ctx, k->softmax_resident_blocks_per_sm[d->x_dtype][r.parts]);
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

/* The staged kernel's layout for this shape: buffers (2 when two fit in shared memory), columns
 * per chunk and of those held in a buffer, chunks per row (0: the kernel cannot take this shape)
 * and rows per round of the grid. Among the layouts that fit, the one with the least work per
 * SM: rounds times (a chunk's bytes + its bytes past the buffer, which are read twice + a fixed
 * cost per round for the exchange and the pipeline's ends, larger with one buffer, which has no
 * loads in flight during the exchange). At most a third of a chunk lies past its buffer, so that
 * the second reads find it in L2 (132 SMs * 57 KiB at most). */
typedef struct staged_plan {
    int buffers;
    int64_t chunk_cols, held_cols, chunks, rows_per_grid;
} staged_plan;

static staged_plan plan_staged(const fc_cuda_context *ctx, const fc_softmax_desc *d, int x_vec_ok,
                               int64_t min_chunks) {
    const fc_cuda_kernels *k = &ctx->kernels;
    const int64_t bytes = (int64_t)dtype_bytes(d->x_dtype);
    const int64_t granule = 32 * (16 / bytes); /* a warp's 16-byte vectors: aligned chunk starts */
    const int64_t max_blocks = blocks_fit(ctx, k->softmax_staged_blocks_per_sm[d->x_dtype]);
    /* Tuning overrides, for measurements: only this many buffers / chunks per row. */
    const char *force_buffers = getenv("FLASHCL_CUDA_SOFTMAX_STAGED_BUFFERS");
    const char *force_chunks = getenv("FLASHCL_CUDA_SOFTMAX_STAGED_CHUNKS");
    const int64_t only_chunks = force_chunks ? atoll(force_chunks) : 0;
    staged_plan best;
    double best_cost = 0;
    int buffers;
    memset(&best, 0, sizeof best);
    if (!x_vec_ok || max_blocks <= 0 || k->softmax_staged_smem == 0) return best;
    for (buffers = 2; buffers >= 1; buffers--) {
        const int64_t capacity =
            (int64_t)(k->softmax_staged_smem / (unsigned)buffers) / (granule * bytes) * granule;
        const double round_cost = buffers == 2 ? 8192.0 : 65536.0;
        int64_t chunks = capacity > 0 ? (int64_t)ceil_div((uint64_t)d->cols,
                                                          (uint64_t)(capacity + capacity / 2))
                                      : 0;
        if (chunks == 0 || (force_buffers && atoi(force_buffers) != buffers)) continue;
        if (chunks < min_chunks) chunks = min_chunks;
        if (only_chunks > 0 && chunks < only_chunks) chunks = only_chunks;
        for (; chunks <= max_blocks; chunks++) {
            const uint64_t per_chunk = ceil_div((uint64_t)d->cols, (uint64_t)chunks);
            const int64_t chunk_cols =
                (int64_t)(ceil_div(per_chunk, (uint64_t)granule) * (uint64_t)granule);
            const int64_t n = (int64_t)ceil_div((uint64_t)d->cols, (uint64_t)chunk_cols);
            const int64_t held = chunk_cols < capacity ? chunk_cols : capacity;
            int64_t rows_per_grid, rounds;
            double cost;
            if (only_chunks > 0 && chunks > only_chunks) break;
            if (n != chunks) continue; /* rounding merged chunks: the same as a smaller count */
            if (2 * (chunk_cols - held) > held) continue;
            if (n > 1 && !ctx->cooperative) break;
            if (d->rows * n >= ((int64_t)1 << 31)) break; /* the kernel counts items in int */
            rows_per_grid = max_blocks / n < d->rows ? max_blocks / n : d->rows;
            rounds = (int64_t)ceil_div((uint64_t)d->rows, (uint64_t)rows_per_grid);
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

typedef struct held_kernels {
    CUfunction kernel;
    int64_t slice_cols;
    int blocks_per_sm;
    int threads;   /* per block */
    int pipelined; /* a grid of at most blocks_per_sm per SM, each block taking tickets */
    int64_t shift; /* columns a row's shifted layout may add before it (0: not shifted) */
} held_kernels;

/* Whether x and y suit the kernels that hold values as their bits: every row 16-byte aligned,
 * cols a multiple of a 16-byte vector (and not FLASHCL_CUDA_SOFTMAX_NO_HELD_BITS=1, for A/B). */
static int held_bits_ok(const fc_softmax_desc *d, const fc_softmax_args *a) {
    const int64_t vec = 16 / (int64_t)dtype_bytes(d->x_dtype);
    return a->x_vec_ok && a->y_vec_ok && d->cols % vec == 0 &&
           !fc_env_flag("FLASHCL_CUDA_SOFTMAX_NO_HELD_BITS");
}

/* A one-ticket kernel for 16-bit inputs held as their bits: blocks of
 * FC_SOFTMAX_SPLIT_HELD_THREADS (slices of 16384 columns), or with `wide` of
 * FC_SOFTMAX_SPLIT_HELD_WIDE_THREADS (slices of 32768; AUTO gives it whole rows only). */
static held_kernels held_bits_one_ticket(const fc_cuda_context *ctx, const fc_softmax_desc *d,
                                         int wide) {
    const fc_cuda_kernels *k = &ctx->kernels;
    const int dt = (int)d->x_dtype;
    held_kernels h;
    memset(&h, 0, sizeof h);
    h.kernel = wide ? k->softmax_split_held_wide[dt] : k->softmax_split_held_bits[dt];
    h.slice_cols = wide ? FC_SPLIT_HELD_WIDE_SLICE : FC_SPLIT_HELD_BITS_SLICE;
    h.blocks_per_sm = wide ? k->softmax_split_held_wide_blocks_per_sm[dt]
                           : k->softmax_split_held_bits_blocks_per_sm[dt];
    h.threads = wide ? FC_SOFTMAX_SPLIT_HELD_WIDE_THREADS : FC_SOFTMAX_SPLIT_HELD_THREADS;
    return h;
}

static held_kernels pick_held(const fc_cuda_context *ctx, const fc_softmax_desc *d,
                              const fc_softmax_args *a) {
    const fc_cuda_kernels *k = &ctx->kernels;
    const int dt = (int)d->x_dtype, f32 = d->x_dtype == FLASHCL_F32;
    const int64_t bits_slice = f32 ? FC_SPLIT_HELD_SLICE : FC_SPLIT_HELD_BITS_SLICE;
    const int bits = held_bits_ok(d, a);
    const int64_t slices = (int64_t)ceil_div((uint64_t)d->cols, (uint64_t)bits_slice);
    const long forced = fc_env_long("FLASHCL_CUDA_SOFTMAX_PIPELINE_SLICES", 0);
    const int64_t fit = blocks_fit(ctx, k->softmax_split_held_pipelined_blocks_per_sm[dt]);
    held_kernels h;
    memset(&h, 0, sizeof h);
    h.threads = FC_SOFTMAX_SPLIT_HELD_THREADS;
    if (bits && (forced > 0 ? slices >= forced
                            : slices >= FC_SPLIT_HELD_PIPELINE_SLICES && d->rows * slices > fit)) {
        h.kernel = k->softmax_split_held_pipelined[dt];
        h.slice_cols = bits_slice;
        h.blocks_per_sm = k->softmax_split_held_pipelined_blocks_per_sm[dt];
        h.pipelined = 1;
    } else if (bits && !f32) {
        h = held_bits_one_ticket(ctx, d, 0);
    } else if (!a->x_vec_ok && !fc_env_flag("FLASHCL_CUDA_SOFTMAX_NO_SHIFT")) {
        /* Rows that do not start 16-byte aligned (GPT-2's 50257-column vocabulary rows, a view
         * offset by an element) in their shifted layout: 16-byte loads and stores where element
         * ones ran before (FLASHCL_CUDA_SOFTMAX_NO_SHIFT=1, for A/B). H200, 2026-11-26, ms,
         * against element loads in the same call (torch.softmax beside): 4096x50257 f16 0.346
         * against 1.130 (torch 0.351), f32 0.493 against 1.004 (0.775); 512x50257 f16 0.050
         * against 0.151 (0.054); 64x1000003 f16 0.134 against 0.433 (0.298)
         * (bench/results/2026-11-26-h200-s17-shifted-rows.txt). */
        h.kernel = k->softmax_split_held_shifted[dt];
        h.slice_cols = FC_SPLIT_HELD_SLICE;
        h.blocks_per_sm = k->softmax_split_held_shifted_blocks_per_sm[dt];
        h.shift = 16 / (int64_t)dtype_bytes(d->x_dtype) - 1;
    } else {
        h.kernel = k->softmax_split_held[dt];
        h.slice_cols = FC_SPLIT_HELD_SLICE;
        h.blocks_per_sm = k->softmax_split_held_blocks_per_sm[dt];
    }
    return h;
}

/* Blocks of a split-held launch: one per slice, or for the pipelined kernel at most as many as
 * the GPU holds at once. */
static uint64_t split_held_blocks(const fc_cuda_context *ctx, const held_kernels *h,
                                  uint64_t tickets) {
    const uint64_t fit = (uint64_t)blocks_fit(ctx, h->blocks_per_sm);
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
 * 0.159. */
static int64_t plan_split_held(const fc_cuda_context *ctx, const fc_softmax_desc *d,
                               const held_kernels *h) {
    const int64_t fit = blocks_fit(ctx, h->blocks_per_sm);
    const int64_t cap = h->blocks_per_sm <= 0 ? 0
                        : h->pipelined && ctx->cooperative ? fit
                        : ctx->sm_count;
    const int64_t slices =
        (int64_t)ceil_div((uint64_t)(d->cols + h->shift), (uint64_t)h->slice_cols);
    /* tickets past the last slice are drawn too, one per block (int in the kernel) */
    if (slices > cap || d->rows * slices + fit >= ((int64_t)1 << 31)) return 0;
    return slices;
}

/* FLASHCL_CUDA_SOFTMAX_SPLIT_HELD=0 turns the split-held kernel off (it is on by default, so the
 * switch reads the other way round from fc_env_flag's). */
static int split_held_enabled(void) {
    const char *v = getenv("FLASHCL_CUDA_SOFTMAX_SPLIT_HELD");
    return !(v && strcmp(v, "0") == 0);
}

/* AUTO before the staged kernel. Registers whenever the row fits, except a few long rows that
 * would leave most SMs idle; then reading once (resident) beats reading twice (chunked: the
 * second read may hit L2; split: fills the GPU when rows are too few for one block each). */
static plan_kind choose_legacy(const fc_cuda_context *ctx, const fc_softmax_desc *d) {
    int resident = plan_resident(ctx, d).rows_per_grid > 0;
    if (d->cols <= FC_ROWS_MAX_COLS) {
        if (d->cols <= 4096 || d->rows >= ctx->sm_count / 2 || !resident) return PLAN_ROWS;
        return PLAN_RESIDENT;
    }
    if (resident) return PLAN_RESIDENT;
    return d->rows >= 2 * (int64_t)ctx->sm_count ? PLAN_CHUNKED : PLAN_SPLIT;
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
static int held_whole_rows(const fc_cuda_context *ctx, const fc_softmax_desc *d,
                           const fc_softmax_args *a, held_kernels *held) {
    held_kernels h;
    if (d->x_dtype == FLASHCL_F32 || d->cols <= FC_SPLIT_HELD_BITS_SLICE / 2 ||
        d->cols > FC_SPLIT_HELD_WIDE_SLICE || !held_bits_ok(d, a) || !split_held_enabled() ||
        fc_env_long("FLASHCL_CUDA_SOFTMAX_HELD_ROWS", 1) == 0)
        return 0;
    h = held_bits_one_ticket(ctx, d, d->cols > FC_SPLIT_HELD_BITS_SLICE);
    if (plan_split_held(ctx, d, &h) != 1) return 0;
    *held = h;
    return 1;
}

/* AUTO. First the split-held kernel for rows past the register kernels' 32768 columns, where a
 * row takes at most one slice per SM (H100, 2026-11-22, against the plans before it:
 * 1024x131072 f32 0.395 ms against 0.467, f16 0.250 against 0.318; 64x1048576 f32 0.214 against
 * 0.313, f16 0.138 against 0.164; 16-bit rows of 32768 measured slower split in two slices,
 * 0.248 against 0.235 in b1024x32); then 16-bit rows of 8193..32768 columns held whole in one
 * slice (held_whole_rows). Else, as measured on an H100 (2026-11-22,
 * bench/results/): the legacy choice, except that 16-bit rows longer than the register kernels
 * hold take the staged kernel when a row needs at most 32 chunks (1024x131072: 57% of copy
 * bandwidth against 50%, 64x1048576: 56% against 44%). With more chunks per row (8x8388608) and
 * for f32 (1024x131072: 64% against 79%), and for 16-bit rows of 32768 (54% against 78%), the
 * staged kernel measured slower. */
static plan_kind choose(const fc_cuda_context *ctx, const fc_softmax_desc *d,
                        const fc_softmax_args *a, held_kernels *held, staged_plan *staged,
                        int64_t *slices) {
    if (d->cols > FC_ROWS_MAX_COLS && split_held_enabled()) {
        *slices = plan_split_held(ctx, d, held);
        if (*slices > 0) return PLAN_SPLIT_HELD;
    }
    if (held_whole_rows(ctx, d, a, held)) {
        *slices = 1;
        return PLAN_SPLIT_HELD;
    }
    if (d->x_dtype != FLASHCL_F32 && d->cols > FC_ROWS_MAX_COLS) {
        *staged = plan_staged(ctx, d, a->x_vec_ok, 1);
        if (staged->chunks > 0 && staged->chunks <= 32) return PLAN_STAGED;
        memset(staged, 0, sizeof *staged);
    }
    return choose_legacy(ctx, d);
}

/* Launches f over `blocks` blocks (a 2-D grid past gridDim.x's limit) on the context's stream. */
static flashcl_status launch(fc_cuda_context *ctx, CUfunction f, uint64_t blocks,
                             unsigned threads, fc_softmax_args *args, const char *what) {
    void *params[1];
    unsigned gx = blocks > FC_MAX_GRID_X ? FC_MAX_GRID_X : (unsigned)blocks;
    unsigned gy = (unsigned)((blocks + gx - 1) / gx);
    CUresult r;
    params[0] = args;
    r = fc_cu()->LaunchKernel(f, gx, gy, 1, threads, 1, 1, 0, ctx->stream, params, NULL);
    if (r != CUDA_SUCCESS)
        return fc_fail(r == CUDA_ERROR_OUT_OF_MEMORY ? FLASHCL_OUT_OF_MEMORY : FLASHCL_BACKEND_ERROR,
                       "cuLaunchKernel(%s softmax kernel, %llu blocks of %u) failed: %s (%d)",
                       what, (unsigned long long)blocks, threads, fc_cu_error_name(r), (int)r);
    return FLASHCL_SUCCESS;
}

static int64_t row_capacity(int c) { return (int64_t)row_configs[c].group * row_configs[c].items; }

/* Rows in registers. Rows of x that do not start 16-byte aligned run in their shifted layout
 * (cuda/softmax.cuh: 16-byte loads and stores, each row's first vector loaded whole and what lies
 * before the row set to -inf) in the configuration that covers cols + a vector - 1, where one
 * does and it holds no more than the row's own configuration or the row is longer than 4096
 * columns; else, and with FLASHCL_CUDA_SOFTMAX_NO_SHIFT=1, element by element. H200,
 * 2026-11-26, ms, against the element path in the same call (torch.softmax beside):
 * 4096x32001 f16 0.185 against 0.668 (torch 0.301), f32 0.287 against 0.678 (0.405); 8192x4097
 * f16 0.063 against 0.151 (0.117); 16384x1001 f16 0.0209 against 0.0697 (0.0335), f32 0.0354
 * against 0.0480 (0.0403); 4096x16383 (twice the capacity shifted) f16 0.161 against 0.338
 * (0.211); but 32768x127 (256 against 128) f32 0.0172 against 0.0138 in session 17, so short
 * rows whose shift would double the configuration stay on the element path, and so do rows of
 * fewer than 128 columns, which for 16-bit inputs is the element layout (cuda/softmax.cuh):
 * 65536x63 f16 0.0144 there against 0.0166 shifted in the same configuration (torch 0.0112),
 * f32 0.0170 against 0.0175; from 513 columns on the shift wins (16384x513 f16 0.0181 against
 * 0.0209); 128..512 was not measured
 * (bench/results/2026-11-26-h200-s18-element-layout.txt). */
static flashcl_status run_rows(fc_cuda_context *ctx, const fc_softmax_desc *d,
                               fc_softmax_args *a, int legacy) {
    const int64_t shift = a->x_vec_ok || fc_env_flag("FLASHCL_CUDA_SOFTMAX_NO_SHIFT")
                              ? 0
                              : 16 / (int64_t)dtype_bytes(d->x_dtype) - 1;
    int c = row_config(d->cols, d->x_dtype, legacy);
    const int shifted = shift ? row_config(d->cols + shift, d->x_dtype, legacy) : -1;
    a->shifted = shifted >= 0 && d->cols >= 128 &&
                 (row_capacity(shifted) == row_capacity(c) || d->cols > 4096);
    if (a->shifted) c = shifted;
    uint64_t groups_per_block = (uint64_t)(row_configs[c].block / row_configs[c].group);
    return launch(ctx, ctx->kernels.softmax_rows[c][d->x_dtype],
                  ceil_div((uint64_t)d->rows, groups_per_block), (unsigned)row_configs[c].block, a,
                  "row-in-registers");
}

static flashcl_status run_chunked(fc_cuda_context *ctx, const fc_softmax_desc *d,
                                  fc_softmax_args *a) {
    uint64_t blocks = (uint64_t)d->rows < (1u << 20) ? (uint64_t)d->rows : (1u << 20);
    return launch(ctx, ctx->kernels.softmax_chunked[d->x_dtype], blocks,
                  FC_SOFTMAX_STREAM_THREADS, a, "online chunked");
}

/* Two kernels; enough chunks that rows * chunks fills the GPU about twice. */
static flashcl_status run_split(fc_cuda_context *ctx, const fc_softmax_desc *d,
                                fc_softmax_args *a) {
    uint64_t target = 4 * (uint64_t)ctx->sm_count, items, blocks;
    uint64_t want = target > (uint64_t)d->rows ? ceil_div(target, (uint64_t)d->rows) : 1;
    int64_t chunk_cols = (int64_t)ceil_div(ceil_div((uint64_t)d->cols, want), FC_STREAM_STEP) *
                         FC_STREAM_STEP;
    CUdeviceptr scratch;
    flashcl_status st;
    a->chunk_cols = chunk_cols;
    a->chunks = (int32_t)ceil_div((uint64_t)d->cols, (uint64_t)chunk_cols);
    items = (uint64_t)d->rows * (uint64_t)a->chunks;
    st = fc_cuda_scratch(ctx, items * 8, &scratch);
    if (st != FLASHCL_SUCCESS) return st;
    a->partials = scratch;
    blocks = items < (1u << 20) ? items : (1u << 20);
    st = launch(ctx, ctx->kernels.softmax_split_stats[d->x_dtype], blocks,
                FC_SOFTMAX_STREAM_THREADS, a, "split-row statistics");
    if (st != FLASHCL_SUCCESS) return st;
    return launch(ctx, ctx->kernels.softmax_split_normalize[d->x_dtype], blocks,
                  FC_SOFTMAX_STREAM_THREADS, a, "split-row normalisation");
}

/* Scratch for the resident split and the staged kernel, whose chunks of a row exchange their
 * (max, sum): a float2 partial per (row, chunk), then a uint32 arrival counter per row, zeroed
 * on the stream. Sets a's chunks, partials and counters. (The split-held kernel keeps its words
 * in the split state instead, split_state.c.) */
static flashcl_status exchange_scratch(fc_cuda_context *ctx, const fc_softmax_desc *d,
                                       fc_softmax_args *a, int64_t chunks) {
    const uint64_t counters = (uint64_t)d->rows;
    const uint64_t partial_bytes = (uint64_t)d->rows * (uint64_t)chunks * 8;
    CUdeviceptr scratch;
    CUresult r;
    flashcl_status st = fc_cuda_scratch(ctx, partial_bytes + counters * 4, &scratch);
    if (st != FLASHCL_SUCCESS) return st;
    a->chunks = (int32_t)chunks;
    a->partials = scratch;
    a->counters = scratch + partial_bytes;
    r = fc_cu()->MemsetD32Async(a->counters, 0, (size_t)counters, ctx->stream);
    if (r != CUDA_SUCCESS) return fc_cu_fail(r, "cuMemsetD32Async");
    return FLASHCL_SUCCESS;
}

/* One cooperative grid of rows_per_grid * chunks blocks loops over all rows; the counters (one
 * per row) are zeroed on the stream first. Returns UNSUPPORTED when a row does not fit on the
 * device, or the driver refuses the grid as too large (e.g. SMs withheld by MPS), so that the
 * caller can fall back to the two-kernel split. */
static flashcl_status run_resident(fc_cuda_context *ctx, const fc_softmax_desc *d,
                                   fc_softmax_args *a) {
    const resident_plan plan = plan_resident(ctx, d);
    const unsigned smem = (unsigned)(plan.parts * FC_RESIDENT_PART * 4);
    void *params[1];
    CUresult r;
    flashcl_status st;
    if (plan.rows_per_grid == 0) return FLASHCL_UNSUPPORTED;
    st = exchange_scratch(ctx, d, a, plan.chunks);
    if (st != FLASHCL_SUCCESS) return st;
    a->chunk_cols = plan.chunk_cols;
    a->smem_parts = plan.parts;
    params[0] = a;
    r = fc_cu()->LaunchCooperativeKernel(ctx->kernels.softmax_resident[d->x_dtype],
                                         (unsigned)(plan.rows_per_grid * plan.chunks), 1, 1,
                                         FC_SOFTMAX_RESIDENT_THREADS, 1, 1, smem, ctx->stream,
                                         params);
    if (r == CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE) return FLASHCL_UNSUPPORTED;
    if (r != CUDA_SUCCESS)
        return fc_fail(r == CUDA_ERROR_OUT_OF_MEMORY ? FLASHCL_OUT_OF_MEMORY : FLASHCL_BACKEND_ERROR,
                       "cuLaunchCooperativeKernel(resident split-row softmax kernel, %lld blocks "
                       "of %d, %u bytes of shared memory) failed: %s (%d)",
                       (long long)(plan.rows_per_grid * plan.chunks), FC_SOFTMAX_RESIDENT_THREADS,
                       smem, fc_cu_error_name(r), (int)r);
    return FLASHCL_SUCCESS;
}

/* The staged kernel with plan p: a cooperative grid of rows_per_grid * chunks blocks when the
 * chunks of a row wait for one another (counters zeroed on the stream first), a plain grid of
 * rows_per_grid blocks when each row is one chunk. Returns UNSUPPORTED when the driver refuses
 * the cooperative grid as too large, for the caller to fall back. */
static flashcl_status run_staged(fc_cuda_context *ctx, const fc_softmax_desc *d,
                                 fc_softmax_args *a, const staged_plan *p) {
    const uint64_t blocks = (uint64_t)(p->rows_per_grid * p->chunks);
    const unsigned smem =
        (unsigned)((uint64_t)p->buffers * (uint64_t)p->held_cols * dtype_bytes(d->x_dtype));
    void *params[1];
    CUresult r;
    a->chunk_cols = p->chunk_cols;
    a->held_cols = (int32_t)p->held_cols;
    a->chunks = (int32_t)p->chunks;
    a->buffers = p->buffers;
    params[0] = a;
    if (p->chunks > 1) {
        flashcl_status st = exchange_scratch(ctx, d, a, p->chunks);
        if (st != FLASHCL_SUCCESS) return st;
        r = fc_cu()->LaunchCooperativeKernel(ctx->kernels.softmax_staged[d->x_dtype],
                                             (unsigned)blocks, 1, 1, FC_SOFTMAX_STAGED_THREADS, 1,
                                             1, smem, ctx->stream, params);
        if (r == CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE) return FLASHCL_UNSUPPORTED;
    } else {
        r = fc_cu()->LaunchKernel(ctx->kernels.softmax_staged[d->x_dtype], (unsigned)blocks, 1, 1,
                                  FC_SOFTMAX_STAGED_THREADS, 1, 1, smem, ctx->stream, params,
                                  NULL);
    }
    if (r != CUDA_SUCCESS)
        return fc_fail(r == CUDA_ERROR_OUT_OF_MEMORY ? FLASHCL_OUT_OF_MEMORY : FLASHCL_BACKEND_ERROR,
                       "%s(staged softmax kernel, %llu blocks of %d, %u bytes of shared memory) "
                       "failed: %s (%d)",
                       p->chunks > 1 ? "cuLaunchCooperativeKernel" : "cuLaunchKernel",
                       (unsigned long long)blocks, FC_SOFTMAX_STAGED_THREADS, smem,
                       fc_cu_error_name(r), (int)r);
    return FLASHCL_SUCCESS;
}

/* The split-held kernel: rows * slices tickets, each a slice (its row and slice come from the
 * ticket, not the block index), taken by one block each or, pipelined, by a grid the GPU holds
 * at once (split_held_blocks); on a region of the split state that is 0 when it starts and whose
 * blocks zero the other region for the next launch (split_state.c). A plain launch where
 * plan_split_held keeps a row's slices within one per SM; past that (pipelined only) a
 * cooperative one, so that all its blocks run together, which returns UNSUPPORTED when the
 * driver refuses the grid as too large. */
static flashcl_status run_split_held(fc_cuda_context *ctx, const fc_softmax_desc *d,
                                     fc_softmax_args *a, int64_t slices, const held_kernels *h) {
    const uint64_t tickets = (uint64_t)d->rows * (uint64_t)slices;
    const uint64_t blocks = split_held_blocks(ctx, h, tickets);
    fc_cuda_split_state state;
    flashcl_status st;
    /* the ticket counter, a word per slice, an arrival count per row */
    st = fc_cuda_split_state_acquire(ctx, (size_t)(1 + tickets + (uint64_t)d->rows), blocks,
                                     (unsigned)h->threads, &state);
    if (st != FLASHCL_SUCCESS) return st;
    a->chunks = (int32_t)slices;
    a->chunk_cols = h->slice_cols;
    a->counters = state.words_at;
    a->clear = state.clear_at;
    a->clear_words = state.clear_words;
    a->clear_per = state.clear_per;
    if (slices > ctx->sm_count) { /* only the pipelined kernel (plan_split_held) */
        void *params[1] = {a};
        const CUresult r = fc_cu()->LaunchCooperativeKernel(
            h->kernel, (unsigned)blocks, 1, 1, (unsigned)h->threads, 1, 1, 0,
            ctx->stream, params);
        if (r == CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE) return FLASHCL_UNSUPPORTED;
        if (r != CUDA_SUCCESS)
            return fc_fail(r == CUDA_ERROR_OUT_OF_MEMORY ? FLASHCL_OUT_OF_MEMORY
                                                         : FLASHCL_BACKEND_ERROR,
                           "cuLaunchCooperativeKernel(pipelined split-held softmax kernel, %llu "
                           "blocks of %d) failed: %s (%d)",
                           (unsigned long long)blocks, h->threads,
                           fc_cu_error_name(r), (int)r);
    } else {
        st = launch(ctx, h->kernel, blocks, (unsigned)h->threads, a, "split-held");
        if (st != FLASHCL_SUCCESS) return st;
    }
    fc_cuda_split_state_commit(ctx, &state);
    return FLASHCL_SUCCESS;
}

/* FLASHCL_CUDA_SOFTMAX_TRACE=1: one line per call on stderr with the plan taken (before any
 * fallback), to check on a GPU which plan a shape gets. */
static void trace_plan(const fc_cuda_context *ctx, const fc_softmax_desc *d,
                       const held_kernels *h, plan_kind plan, int legacy,
                       const staged_plan *staged, int64_t slices) {
    static const char *const names[] = {"rows",  "resident", "chunked",
                                        "split", "staged",   "split-held"};
    fprintf(stderr, "flashcl cuda softmax %lldx%lld dtype %d%s: %s", (long long)d->rows,
            (long long)d->cols, (int)d->x_dtype, legacy ? " (legacy plans)" : "", names[plan]);
    if (plan == PLAN_ROWS)
        fprintf(stderr, " config %d", row_config(d->cols, d->x_dtype, legacy));
    if (plan == PLAN_STAGED)
        fprintf(stderr, " chunks %lld of %lld columns (%lld in a buffer), %d buffers, %lld rows "
                "per round",
                (long long)staged->chunks, (long long)staged->chunk_cols,
                (long long)staged->held_cols, staged->buffers, (long long)staged->rows_per_grid);
    if (plan == PLAN_SPLIT_HELD)
        fprintf(stderr, " slices %lld of %lld columns (blocks of %d, %d per SM fit%s)",
                (long long)slices, (long long)h->slice_cols, h->threads, h->blocks_per_sm,
                h->pipelined ? ", pipelined" : h->shift ? ", shifted rows" : "");
    fputc('\n', stderr);
}

flashcl_status fc_cuda_softmax(void *opaque, const fc_softmax_desc *d) {
    fc_cuda_context *ctx = opaque;
    const fc_cuda_buffer *x = d->x_mem, *y = d->y_mem;
    const size_t x_bytes = dtype_bytes(d->x_dtype), y_bytes = dtype_bytes(d->y_dtype);
    const size_t vec = 16 / x_bytes; /* elements per 16-byte load of x */
    const size_t y_align = vec * y_bytes < 16 ? vec * y_bytes : 16;
    const int legacy = fc_env_flag("FLASHCL_CUDA_SOFTMAX_LEGACY");
    fc_softmax_args a;
    staged_plan staged;
    int64_t slices = 0; /* split-held */
    held_kernels held;  /* its kernels for this call */
    plan_kind plan;
    flashcl_status st;

    memset(&a, 0, sizeof a);
    memset(&staged, 0, sizeof staged);
    a.x = x->pointer + d->x_offset;
    a.y = y->pointer + d->y_offset;
    a.rows = d->rows;
    a.cols = d->cols;
    a.x_stride = d->x_row_stride;
    a.y_stride = d->y_row_stride;
    a.scale = d->scale;
    a.log = d->log;
    a.y_dtype = (int32_t)d->y_dtype;
    a.x_vec_ok = rows_aligned(a.x, d->rows, d->x_row_stride, x_bytes, 16);
    a.y_vec_ok = rows_aligned(a.y, d->rows, d->y_row_stride, y_bytes, y_align);
    held = pick_held(ctx, d, &a);

    switch (d->variant) {
    case FLASHCL_SOFTMAX_ROW_IN_REGISTERS:
        if (d->cols > FC_ROWS_MAX_COLS)
            return fc_fail(FLASHCL_UNSUPPORTED,
                           "ROW_IN_REGISTERS holds rows of at most %lld columns on the CUDA "
                           "backend; this one has %lld",
                           (long long)FC_ROWS_MAX_COLS, (long long)d->cols);
        plan = PLAN_ROWS;
        break;
    case FLASHCL_SOFTMAX_ONLINE_CHUNKED: plan = PLAN_CHUNKED; break;
    case FLASHCL_SOFTMAX_SPLIT_ROW:
        if (!legacy && split_held_enabled()) slices = plan_split_held(ctx, d, &held);
        if (slices > 0) {
            plan = PLAN_SPLIT_HELD;
            break;
        }
        if (!legacy) staged = plan_staged(ctx, d, a.x_vec_ok, 2);
        plan = staged.chunks > 0 ? PLAN_STAGED : PLAN_RESIDENT;
        break;
    default:
        plan = legacy ? choose_legacy(ctx, d) : choose(ctx, d, &a, &held, &staged, &slices);
        break;
    }

    if (fc_env_flag("FLASHCL_CUDA_SOFTMAX_TRACE"))
        trace_plan(ctx, d, &held, plan, legacy, &staged, slices);
    st = fc_cuda_enter(ctx);
    if (st != FLASHCL_SUCCESS) return st;
    mtx_lock(&ctx->lock); /* the stream, the scratch, and launches that share it */
    switch (plan) {
    case PLAN_ROWS: st = run_rows(ctx, d, &a, legacy); break;
    case PLAN_CHUNKED: st = run_chunked(ctx, d, &a); break;
    case PLAN_SPLIT: st = run_split(ctx, d, &a); break;
    case PLAN_SPLIT_HELD:
    case PLAN_STAGED:
    case PLAN_RESIDENT:
        /* UNSUPPORTED: the driver refused a cooperative grid as too large (SMs withheld, e.g. by
         * MPS); the resident split, then the two-kernel split, take the call instead */
        st = plan == PLAN_SPLIT_HELD ? run_split_held(ctx, d, &a, slices, &held)
             : plan == PLAN_STAGED   ? run_staged(ctx, d, &a, &staged)
                                     : FLASHCL_UNSUPPORTED;
        if (st == FLASHCL_UNSUPPORTED) {
            fc_clear_error();
            st = run_resident(ctx, d, &a);
        }
        if (st == FLASHCL_UNSUPPORTED) {
            fc_clear_error();
            st = run_split(ctx, d, &a);
        }
        break;
    }
    mtx_unlock(&ctx->lock);
    fc_cuda_leave(ctx);
    return st;
}
