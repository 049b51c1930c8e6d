/* The CUDA backend's softmax plans (softmax_plan.c): which kernel takes a validated call and
 * with which layout. softmax.c launches what they choose. */
#ifndef FLASHCL_CUDA_SOFTMAX_PLAN_H
#define FLASHCL_CUDA_SOFTMAX_PLAN_H

#include "cuda_internal.h"

#define FC_ROWS_MAX_COLS ((int64_t)1024 * 32) /* the largest configuration's capacity */
#define FC_RESIDENT_PART ((int64_t)FC_SOFTMAX_RESIDENT_THREADS * FC_SOFTMAX_RESIDENT_ITEMS)

/* The variants softmax.c launches (the file comment of softmax_plan.c describes them). */
typedef enum {
    FC_CUDA_PLAN_ROWS,
    FC_CUDA_PLAN_RESIDENT,
    FC_CUDA_PLAN_CHUNKED,
    FC_CUDA_PLAN_SPLIT,
    FC_CUDA_PLAN_STAGED,
    FC_CUDA_PLAN_SPLIT_HELD
} fc_cuda_plan_kind;

static inline size_t fc_cuda_dtype_bytes(flashcl_dtype dt) { return dt == FLASHCL_F32 ? 4 : 2; }

static inline uint64_t fc_cuda_ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

/* Blocks of a kernel with blocks_per_sm blocks per SM that the GPU holds at once. */
static inline int64_t fc_cuda_blocks_fit(const fc_cuda_context *ctx, int blocks_per_sm) {
    return (int64_t)ctx->sm_count * blocks_per_sm;
}

/* A register configuration of cuda/softmax.cuh: threads per row, items per thread, threads
 * per block (FC_SOFTMAX_ROW_CONFIGS). */
typedef struct fc_cuda_row_config {
    int group, items, block;
} fc_cuda_row_config;
extern const fc_cuda_row_config fc_cuda_row_configs[FC_ROW_CONFIG_COUNT];

/* Columns configuration c holds. */
static inline int64_t fc_cuda_row_capacity(int c) {
    return (int64_t)fc_cuda_row_configs[c].group * fc_cuda_row_configs[c].items;
}

/* The register configuration for rows of `cols` columns of dtype dt (-1: none holds them). */
int fc_cuda_row_config_for(int64_t cols, flashcl_dtype dt, int legacy, int vectors);

/* The resident split's layout for this shape: shared-memory parts per block (the fewest that
 * let one row's chunks all be resident), chunks per row, and how many rows one cooperative grid
 * holds, which is 0 when even one row does not fit on the device at once. */
typedef struct fc_cuda_resident_plan {
    int parts;
    int64_t chunk_cols, chunks, rows_per_grid;
} fc_cuda_resident_plan;

fc_cuda_resident_plan fc_cuda_plan_resident(const fc_cuda_context *ctx,
                                            const fc_softmax_desc *d);

/* The staged kernel's layout for this shape: buffers (2 when two fit in shared memory), columns
 * per chunk and of those held in a buffer, chunks per row (0: the kernel cannot take this shape)
 * and rows per round of the grid. Among the layouts that fit, the one with the least work per
 * SM: rounds times (a chunk's bytes + its bytes past the buffer, which are read twice + a fixed
 * cost per round for the exchange and the pipeline's ends, larger with one buffer, which has no
 * loads in flight during the exchange). At most a third of a chunk lies past its buffer, so that
 * the second reads find it in L2 (132 SMs * 57 KiB at most). */
typedef struct fc_cuda_staged_plan {
    int buffers;
    int64_t chunk_cols, held_cols, chunks, rows_per_grid;
} fc_cuda_staged_plan;

fc_cuda_staged_plan fc_cuda_plan_staged(const fc_cuda_context *ctx, const fc_softmax_desc *d,
                                        int x_vec_ok, int64_t min_chunks);

/* A split-held kernel and its geometry (fc_cuda_pick_held). */
typedef struct fc_cuda_held_kernels {
    CUfunction kernel;
    int64_t slice_cols;
    int blocks_per_sm;
    int threads;   /* per block */
    int pipelined; /* a grid of at most blocks_per_sm per SM, each block taking tickets */
    int merged;    /* pipelined, rows of up to twice its grid's blocks: the merged kernel */
    int ring;      /* pipelined, rows of up to three times its grid's blocks: the ring kernel */
    unsigned smem; /* dynamic shared memory a block (the ring's; 0 for the others) */
    int stall_prefetch; /* merged f32 kernel: its stall prefetch's tickets ahead (0: none) */
    int64_t shift; /* columns a row's shifted layout may add before it (0: not shifted) */
} fc_cuda_held_kernels;

/* The split-held plans (softmax_plan_held.c). The split-held kernel for this call. */
fc_cuda_held_kernels fc_cuda_pick_held(const fc_cuda_context *ctx, const fc_softmax_desc *d,
                                       const fc_softmax_args *a);
/* Blocks of a split-held launch of `tickets` slices. */
uint64_t fc_cuda_split_held_blocks(const fc_cuda_context *ctx, const fc_cuda_held_kernels *h,
                                   uint64_t tickets);
/* Slices per row for the split-held kernel h, 0 when it cannot take the shape. */
int64_t fc_cuda_plan_split_held(const fc_cuda_context *ctx, const fc_softmax_desc *d,
                                const fc_cuda_held_kernels *h);
/* 0 when FLASHCL_CUDA_SOFTMAX_SPLIT_HELD=0 turns the split-held kernel off. */
int fc_cuda_split_held_enabled(void);
/* 16-bit rows of 8193..32768 columns that a one-ticket split-held kernel holds whole, in one
 * slice: 1 with *held set, else 0. */
int fc_cuda_held_whole_rows(const fc_cuda_context *ctx, const fc_softmax_desc *d,
                            const fc_softmax_args *a, fc_cuda_held_kernels *held);

/* AUTO as before the staged kernel (FLASHCL_CUDA_SOFTMAX_LEGACY=1). */
fc_cuda_plan_kind fc_cuda_choose_legacy(const fc_cuda_context *ctx, const fc_softmax_desc *d);
/* AUTO: the plan for this call, filling *held, *staged and *slices for the plans that use them. */
fc_cuda_plan_kind fc_cuda_choose(const fc_cuda_context *ctx, const fc_softmax_desc *d,
                                 const fc_softmax_args *a, fc_cuda_held_kernels *held,
                                 fc_cuda_staged_plan *staged, int64_t *slices);

#endif
