/* The CUDA backend's softmax: runs the plan softmax_plan.c chooses for a call (or the forced
 * variant) by launching the kernels of cuda/softmax.cuh; the variants and the environment
 * switches are described there. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "softmax_plan.h"
#include "split_state.h"
#include "../text.h"
#include "../error.h"

_Static_assert(sizeof(fc_softmax_args) == FC_SOFTMAX_ARGS_BYTES,
               "fc_softmax_args differs from the layout the kernels were compiled with");

#define FC_STREAM_STEP ((int64_t)FC_SOFTMAX_STREAM_THREADS * FC_SOFTMAX_STREAM_VALUES)
#define FC_MAX_GRID_X 0x7fffffffu
#define FC_ROWS_PREFETCH_COLS 512 /* see run_rows */

/* Whether every row of a view starts on an `align`-byte boundary. */
static int rows_aligned(uint64_t address, int64_t rows, int64_t stride, size_t bytes,
                        size_t align) {
    return address % align == 0 && (rows == 1 || ((uint64_t)stride * bytes) % align == 0);
}

/* Launches f over `blocks` blocks (a 2-D grid past gridDim.x's limit) with `smem` bytes of
 * dynamic shared memory each (0 but for the split-held ring kernel) on the context's stream,
 * as a programmatic dependent of the kernel before it where the device allows (fc_cuda_launch):
 * every kernel launched here begins with dependent_launch_enter (cuda/common.cuh). Between
 * flashcl calls that hides the launch gap, and the first blocks of short 16-bit rows fetch
 * their rows into L2 while the kernel before them ends (run_rows). H200, 2026-11-27, ms, against
 * FLASHCL_CUDA_NO_PDL=1 (which launches them the ordinary way): 32768x128 f32 0.0098 / 0.0114,
 * f16 0.0059 / 0.0077; 16384x1024 f32 0.0337 / 0.0360, 4096x4096 f16 0.0188 / 0.0202; rows of
 * 32768 columns and more 0.5-1 % (bench/results/2026-11-27-session32.md). */
static flashcl_status launch(fc_cuda_context *ctx, CUfunction f, uint64_t blocks,
                             unsigned threads, unsigned smem, fc_softmax_args *args,
                             const char *what) {
    unsigned gx = blocks > FC_MAX_GRID_X ? FC_MAX_GRID_X : (unsigned)blocks;
    unsigned gy = (unsigned)((blocks + gx - 1) / gx);
    return fc_cuda_launch(ctx, f, gx, gy, threads, smem, args, 1, what);
}

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
static int rows_config(const fc_softmax_desc *d, const fc_softmax_args *a, int legacy,
                       int *shifted) {
    const int64_t shift = a->x_vec_ok || fc_env_flag("FLASHCL_CUDA_SOFTMAX_NO_SHIFT")
                              ? 0
                              : 16 / (int64_t)fc_cuda_dtype_bytes(d->x_dtype) - 1;
    const int c = fc_cuda_row_config_for(d->cols, d->x_dtype, legacy, a->x_vec_ok);
    const int s = shift ? fc_cuda_row_config_for(d->cols + shift, d->x_dtype, legacy, 1) : -1;
    *shifted = s >= 0 && d->cols >= 128 &&
               (fc_cuda_row_capacity(s) == fc_cuda_row_capacity(c) || d->cols > 4096);
    return *shifted ? s : c;
}

static flashcl_status run_rows(fc_cuda_context *ctx, const fc_softmax_desc *d,
                               fc_softmax_args *a, int legacy) {
    int shifted;
    const int c = rows_config(d, a, legacy, &shifted);
    a->shifted = (int16_t)shifted;
    /* Short 16-bit rows ask L2 for their input before waiting for the kernel before them
     * (launched as its dependent). H200, 2026-11-27, ms, with / without, both launched
     * dependent (bench/results/2026-11-27-session32.md): f16 32768x128 0.0059 / 0.0062,
     * 65536x64 0.0058 / 0.0061, 32768x256 0.0102 / 0.0108, 16384x500 0.0112 / 0.0114; longer
     * rows gained nothing (16384x1024 f16 0.0185 / 0.0185) and f32 rows as often lost as gained
     * (32768x128 0.0098 / 0.0100, but 32768x127 0.0128 / 0.0122, 16384x500 0.0184 / 0.0178,
     * 16384x1024 0.0350 / 0.0338). FLASHCL_CUDA_SOFTMAX_NO_PREFETCH=1: none (A/B). */
    a->prefetch = (int16_t)(d->x_dtype != FLASHCL_F32 && d->cols <= FC_ROWS_PREFETCH_COLS &&
                            fc_cuda_dependent_launches(ctx) &&
                            !fc_env_flag("FLASHCL_CUDA_SOFTMAX_NO_PREFETCH"));
    uint64_t groups_per_block =
        (uint64_t)(fc_cuda_row_configs[c].block / fc_cuda_row_configs[c].group);
    return launch(ctx, ctx->kernels.softmax_rows[c][d->x_dtype],
                  fc_cuda_ceil_div((uint64_t)d->rows, groups_per_block),
                  (unsigned)fc_cuda_row_configs[c].block, 0, a,
                  "row-in-registers softmax kernel");
}

static flashcl_status run_chunked(fc_cuda_context *ctx, const fc_softmax_desc *d,
                                  fc_softmax_args *a) {
    uint64_t blocks = (uint64_t)d->rows < (1u << 20) ? (uint64_t)d->rows : (1u << 20);
    return launch(ctx, ctx->kernels.softmax_chunked[d->x_dtype], blocks,
                  FC_SOFTMAX_STREAM_THREADS, 0, a, "online chunked softmax kernel");
}

/* Two kernels; enough chunks that rows * chunks fills the GPU about twice. */
static flashcl_status run_split(fc_cuda_context *ctx, const fc_softmax_desc *d,
                                fc_softmax_args *a) {
    uint64_t target = 4 * (uint64_t)ctx->sm_count, items, blocks;
    uint64_t want = target > (uint64_t)d->rows ? fc_cuda_ceil_div(target, (uint64_t)d->rows) : 1;
    int64_t chunk_cols =
        (int64_t)fc_cuda_ceil_div(fc_cuda_ceil_div((uint64_t)d->cols, want), FC_STREAM_STEP) *
        FC_STREAM_STEP;
    CUdeviceptr scratch;
    flashcl_status st;
    a->chunk_cols = chunk_cols;
    a->chunks = (int32_t)fc_cuda_ceil_div((uint64_t)d->cols, (uint64_t)chunk_cols);
    items = (uint64_t)d->rows * (uint64_t)a->chunks;
    st = fc_cuda_scratch(ctx, items * 8, &scratch);
    if (st != FLASHCL_SUCCESS) return st;
    a->partials = scratch;
    blocks = items < (1u << 20) ? items : (1u << 20);
    st = launch(ctx, ctx->kernels.softmax_split_stats[d->x_dtype], blocks,
                FC_SOFTMAX_STREAM_THREADS, 0, a, "split-row statistics softmax kernel");
    if (st != FLASHCL_SUCCESS) return st;
    return launch(ctx, ctx->kernels.softmax_split_normalize[d->x_dtype], blocks,
                  FC_SOFTMAX_STREAM_THREADS, 0, a, "split-row normalisation softmax kernel");
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
    const fc_cuda_resident_plan plan = fc_cuda_plan_resident(ctx, d);
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
        return fc_fail(r == CUDA_ERROR_OUT_OF_MEMORY ? FLASHCL_OUT_OF_MEMORY
                                                     : FLASHCL_BACKEND_ERROR,
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
                                 fc_softmax_args *a, const fc_cuda_staged_plan *p) {
    const uint64_t blocks = (uint64_t)(p->rows_per_grid * p->chunks);
    const unsigned smem =
        (unsigned)((uint64_t)p->buffers * (uint64_t)p->held_cols * fc_cuda_dtype_bytes(d->x_dtype));
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
        return fc_fail(r == CUDA_ERROR_OUT_OF_MEMORY ? FLASHCL_OUT_OF_MEMORY
                                                     : FLASHCL_BACKEND_ERROR,
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
                                     fc_softmax_args *a, int64_t slices,
                                     const fc_cuda_held_kernels *h) {
    const uint64_t tickets = (uint64_t)d->rows * (uint64_t)slices;
    const uint64_t blocks = fc_cuda_split_held_blocks(ctx, h, tickets);
    fc_cuda_split_state state;
    flashcl_status st;
    /* the ticket counter, a word per slice, an arrival count and a merged word per row */
    st = fc_cuda_split_state_acquire(ctx, (size_t)(1 + tickets + 2 * (uint64_t)d->rows), blocks,
                                     (unsigned)h->threads, &state);
    if (st != FLASHCL_SUCCESS) return st;
    a->chunks = (int32_t)slices;
    a->chunk_cols = h->slice_cols;
    a->counters = state.words_at;
    a->clear = state.clear_at;
    a->clear_words = state.clear_words;
    a->clear_per = state.clear_per;
    a->prefetch = (int16_t)h->stall_prefetch; /* the merged f32 kernel's; 0 for the others */
    if (slices > ctx->sm_count) { /* only the pipelined kernel (plan_split_held) */
        void *params[1] = {a};
        const CUresult r = fc_cu()->LaunchCooperativeKernel(
            h->kernel, (unsigned)blocks, 1, 1, (unsigned)h->threads, 1, 1, h->smem,
            ctx->stream, params);
        if (r == CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE) return FLASHCL_UNSUPPORTED;
        if (r != CUDA_SUCCESS)
            return fc_fail(r == CUDA_ERROR_OUT_OF_MEMORY ? FLASHCL_OUT_OF_MEMORY
                                                         : FLASHCL_BACKEND_ERROR,
                           "cuLaunchCooperativeKernel(pipelined split-held softmax kernel, %llu "
                           "blocks of %d, %u bytes of shared memory) failed: %s (%d)",
                           (unsigned long long)blocks, h->threads, h->smem,
                           fc_cu_error_name(r), (int)r);
    } else {
        st = launch(ctx, h->kernel, blocks, (unsigned)h->threads, h->smem, a,
                    "split-held softmax kernel");
        if (st != FLASHCL_SUCCESS) return st;
    }
    fc_cuda_split_state_commit(ctx, &state);
    return FLASHCL_SUCCESS;
}

/* FLASHCL_CUDA_SOFTMAX_TRACE=1: one line per call on stderr with the plan taken (before any
 * fallback), to check on a GPU which plan a shape gets. */
static void trace_plan(const fc_cuda_context *ctx, const fc_softmax_desc *d,
                       const fc_softmax_args *a, const fc_cuda_held_kernels *h,
                       fc_cuda_plan_kind plan, int legacy, const fc_cuda_staged_plan *staged,
                       int64_t slices) {
    static const char *const names[] = {"rows",  "resident", "chunked",
                                        "split", "staged",   "split-held"};
    fprintf(stderr, "flashcl cuda softmax %lldx%lld dtype %d%s: %s", (long long)d->rows,
            (long long)d->cols, (int)d->x_dtype, legacy ? " (legacy plans)" : "", names[plan]);
    if (plan == FC_CUDA_PLAN_ROWS) {
        int shifted;
        const int c = rows_config(d, a, legacy, &shifted);
        fprintf(stderr, " config %d (%dx%d%s)", c, fc_cuda_row_configs[c].group,
                fc_cuda_row_configs[c].items, shifted ? ", shifted" : "");
    }
    if (plan == FC_CUDA_PLAN_STAGED)
        fprintf(stderr, " chunks %lld of %lld columns (%lld in a buffer), %d buffers, %lld rows "
                "per round",
                (long long)staged->chunks, (long long)staged->chunk_cols,
                (long long)staged->held_cols, staged->buffers, (long long)staged->rows_per_grid);
    if (plan == FC_CUDA_PLAN_SPLIT_HELD)
        fprintf(stderr, " slices %lld of %lld columns (blocks of %d, %d per SM fit%s)",
                (long long)slices, (long long)h->slice_cols, h->threads, h->blocks_per_sm,
                h->ring        ? ", pipelined, ring"
                : h->merged    ? ", pipelined, merged"
                : h->pipelined ? ", pipelined"
                : h->shift     ? ", shifted rows"
                               : "");
    fputc('\n', stderr);
}

flashcl_status fc_cuda_softmax(void *opaque, const fc_softmax_desc *d) {
    fc_cuda_context *ctx = opaque;
    const fc_cuda_buffer *x = d->x_mem, *y = d->y_mem;
    const size_t x_bytes = fc_cuda_dtype_bytes(d->x_dtype),
                 y_bytes = fc_cuda_dtype_bytes(d->y_dtype);
    const size_t vec = 16 / x_bytes; /* elements per 16-byte load of x */
    const size_t y_align = vec * y_bytes < 16 ? vec * y_bytes : 16;
    const int legacy = fc_env_flag("FLASHCL_CUDA_SOFTMAX_LEGACY");
    fc_softmax_args a;
    fc_cuda_staged_plan staged;
    int64_t slices = 0; /* split-held */
    fc_cuda_held_kernels held;  /* its kernels for this call */
    fc_cuda_plan_kind plan;
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
    held = fc_cuda_pick_held(ctx, d, &a);

    switch (d->variant) {
    case FLASHCL_SOFTMAX_ROW_IN_REGISTERS:
        if (d->cols > FC_ROWS_MAX_COLS)
            return fc_fail(FLASHCL_UNSUPPORTED,
                           "ROW_IN_REGISTERS holds rows of at most %lld columns on the CUDA "
                           "backend; this one has %lld",
                           (long long)FC_ROWS_MAX_COLS, (long long)d->cols);
        plan = FC_CUDA_PLAN_ROWS;
        break;
    case FLASHCL_SOFTMAX_ONLINE_CHUNKED: plan = FC_CUDA_PLAN_CHUNKED; break;
    case FLASHCL_SOFTMAX_SPLIT_ROW:
        if (!legacy && fc_cuda_split_held_enabled())
            slices = fc_cuda_plan_split_held(ctx, d, &held);
        if (slices > 0) {
            plan = FC_CUDA_PLAN_SPLIT_HELD;
            break;
        }
        if (!legacy) staged = fc_cuda_plan_staged(ctx, d, a.x_vec_ok, 2);
        plan = staged.chunks > 0 ? FC_CUDA_PLAN_STAGED : FC_CUDA_PLAN_RESIDENT;
        break;
    default:
        plan = legacy ? fc_cuda_choose_legacy(ctx, d)
                      : fc_cuda_choose(ctx, d, &a, &held, &staged, &slices);
        break;
    }

    if (fc_env_flag("FLASHCL_CUDA_SOFTMAX_TRACE"))
        trace_plan(ctx, d, &a, &held, plan, legacy, &staged, slices);
    st = fc_cuda_enter(ctx);
    if (st != FLASHCL_SUCCESS) return st;
    mtx_lock(&ctx->lock); /* the stream, the scratch, and launches that share it */
    switch (plan) {
    case FC_CUDA_PLAN_ROWS: st = run_rows(ctx, d, &a, legacy); break;
    case FC_CUDA_PLAN_CHUNKED: st = run_chunked(ctx, d, &a); break;
    case FC_CUDA_PLAN_SPLIT: st = run_split(ctx, d, &a); break;
    case FC_CUDA_PLAN_SPLIT_HELD:
    case FC_CUDA_PLAN_STAGED:
    case FC_CUDA_PLAN_RESIDENT:
        /* UNSUPPORTED: the driver refused a cooperative grid as too large (SMs withheld, e.g. by
         * MPS); the resident split, then the two-kernel split, take the call instead */
        st = plan == FC_CUDA_PLAN_SPLIT_HELD ? run_split_held(ctx, d, &a, slices, &held)
             : plan == FC_CUDA_PLAN_STAGED   ? run_staged(ctx, d, &a, &staged)
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
