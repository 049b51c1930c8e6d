/* The CUDA backend's softmax: picks a variant from the shape (or takes the forced one) and
 * launches the kernels of cuda/softmax.cuh.
 *
 *   row in registers  cols <= 32768: a group of 4..1024 threads holds the row; one read, one write.
 *   resident split    a row's chunks of 8192..32768 columns (registers, plus up to 3 parts in
 *                     shared memory) on co-resident blocks (cooperative launch) that exchange
 *                     their (max, sum) and normalise what they hold: one read, any number of
 *                     rows, as long as one row fits on the device (~8.6M columns on an H100/H200).
 *   online chunked    one block per row, pass 1 (max, sum), pass 2 normalise: any length.
 *   two-kernel split  few very long rows: partial (max, sum) per chunk, then merge + normalise.
 * Forced SPLIT_ROW takes the resident split where it fits, else the two-kernel split. */
#include <stdio.h>
#include <string.h>

#include "cuda_internal.h"
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
#define FC_MAX_GRID_X 0x7fffffffu

typedef enum { PLAN_ROWS, PLAN_RESIDENT, PLAN_CHUNKED, PLAN_SPLIT } plan_kind;

static size_t dtype_bytes(flashcl_dtype dt) { return dt == FLASHCL_F32 ? 4 : 2; }

/* Whether every row of a view starts on an `align`-byte boundary. */
static int rows_aligned(uint64_t address, int64_t rows, int64_t stride, size_t bytes,
                        size_t align) {
    return address % align == 0 && (rows == 1 || ((uint64_t)stride * bytes) % align == 0);
}

static int first_row_config(int64_t cols) {
    int c;
    for (c = 0; c < FC_ROW_CONFIG_COUNT; c++)
        if ((int64_t)row_configs[c].group * row_configs[c].items >= cols) return c;
    return -1;
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
        int64_t max_blocks =
            (int64_t)k->softmax_resident_blocks_per_sm[d->x_dtype][r.parts] * ctx->sm_count;
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

/* AUTO. Registers whenever the row fits, except a few long rows that would leave most SMs idle;
 * then reading once (resident) beats reading twice (chunked: the second read may hit L2;
 * split: fills the GPU when rows are too few for one block each). */
static plan_kind choose(const fc_cuda_context *ctx, const fc_softmax_desc *d) {
    int resident = plan_resident(ctx, d).rows_per_grid > 0;
    if (d->cols <= FC_ROWS_MAX_COLS) {
        if (d->cols <= 4096 || d->rows >= ctx->sm_count / 2 || !resident) return PLAN_ROWS;
        return PLAN_RESIDENT;
    }
    if (resident) return PLAN_RESIDENT;
    return d->rows >= 2 * (int64_t)ctx->sm_count ? PLAN_CHUNKED : PLAN_SPLIT;
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

static uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

static flashcl_status run_rows(fc_cuda_context *ctx, const fc_softmax_desc *d,
                               fc_softmax_args *a) {
    int c = first_row_config(d->cols);
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

/* One cooperative grid of rows_per_grid * chunks blocks loops over all rows; the counters (one
 * per row) are zeroed on the stream first. Returns UNSUPPORTED when a row does not fit on the
 * device, or the driver refuses the grid as too large (e.g. SMs withheld by MPS), so that the
 * caller can fall back to the two-kernel split. */
static flashcl_status run_resident(fc_cuda_context *ctx, const fc_softmax_desc *d,
                                   fc_softmax_args *a) {
    const resident_plan plan = plan_resident(ctx, d);
    const uint64_t partial_bytes = (uint64_t)d->rows * (uint64_t)plan.chunks * 8;
    const unsigned smem = (unsigned)(plan.parts * FC_RESIDENT_PART * 4);
    void *params[1];
    CUdeviceptr scratch;
    CUresult r;
    flashcl_status st;
    if (plan.rows_per_grid == 0) return FLASHCL_UNSUPPORTED;
    st = fc_cuda_scratch(ctx, partial_bytes + (uint64_t)d->rows * 4, &scratch);
    if (st != FLASHCL_SUCCESS) return st;
    a->chunk_cols = plan.chunk_cols;
    a->chunks = (int32_t)plan.chunks;
    a->smem_parts = plan.parts;
    a->partials = scratch;
    a->counters = scratch + partial_bytes;
    r = fc_cu()->MemsetD32Async(a->counters, 0, (size_t)d->rows, ctx->stream);
    if (r != CUDA_SUCCESS) return fc_cu_fail(r, "cuMemsetD32Async");
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

flashcl_status fc_cuda_softmax(void *opaque, const fc_softmax_desc *d) {
    fc_cuda_context *ctx = opaque;
    const fc_cuda_buffer *x = d->x_mem, *y = d->y_mem;
    const size_t x_bytes = dtype_bytes(d->x_dtype), y_bytes = dtype_bytes(d->y_dtype);
    const size_t vec = 16 / x_bytes; /* elements per 16-byte load of x */
    const size_t y_align = vec * y_bytes < 16 ? vec * y_bytes : 16;
    fc_softmax_args a;
    plan_kind plan;
    flashcl_status st;

    memset(&a, 0, sizeof a);
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
    case FLASHCL_SOFTMAX_SPLIT_ROW: plan = PLAN_RESIDENT; break;
    default: plan = choose(ctx, d); break;
    }

    st = fc_cuda_enter(ctx);
    if (st != FLASHCL_SUCCESS) return st;
    mtx_lock(&ctx->lock); /* the stream, the scratch, and launches that share it */
    switch (plan) {
    case PLAN_ROWS: st = run_rows(ctx, d, &a); break;
    case PLAN_CHUNKED: st = run_chunked(ctx, d, &a); break;
    case PLAN_SPLIT: st = run_split(ctx, d, &a); break;
    case PLAN_RESIDENT:
        st = run_resident(ctx, d, &a);
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
