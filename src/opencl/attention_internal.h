/* What the host files of the attention programs share (src/opencl/attention_plan.c: geometry,
 * build options and the forward call's plan; attention.c: the forward launch and the launch
 * helpers; attention_decode.c: the key-parallel decode kernels; attention_merge.c: the merge
 * kernels and flashcl_attention_merge). Not part of the library's interface. */
#ifndef FC_ATTENTION_INTERNAL_H
#define FC_ATTENTION_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "cl_internal.h"

#define FC_ATTN_PREFILL 0
#define FC_ATTN_DECODE 1

/* Sets kernel arguments in order, remembering the first failure (reported by fc_attn_enqueue). */
typedef struct fc_args {
    cl_kernel kernel;
    cl_uint next;
    cl_int err;
    const char *name;
} fc_args;

void fc_attn_arg(fc_args *a, size_t size, const void *value);
void fc_attn_arg_mem(fc_args *a, void *mem);
flashcl_status fc_attn_enqueue(fc_cl_context *ctx, fc_args *a, size_t groups, size_t wg);

cl_long4 fc_attn_long4(int64_t x, int64_t y, int64_t z, int64_t w);
cl_int4 fc_attn_int4(int64_t x, int64_t y, int64_t z, int64_t w);
size_t fc_attn_dtype_bytes(flashcl_dtype dt);
/* Whether every row of a view (n strides) starts on a multiple of `elems` elements. */
int fc_attn_rows_aligned(const fc_cl_context *ctx, size_t offset, flashcl_dtype dt,
                         const int64_t *strides, int n, int64_t elems);

/* Makes ctx->attention_scratch hold `bytes` (caller holds launch_lock). */
flashcl_status fc_attn_scratch_reserve(fc_cl_context *ctx, size_t bytes);

/* clCreateKernel (from `program`) plus its CL_KERNEL_WORK_GROUP_SIZE, failures as statuses. */
flashcl_status fc_attn_create_kernel(fc_cl_context *ctx, cl_program program, const char *name,
                                     cl_kernel *out, size_t *max_wg);
/* fc_attn_create_kernel for a kernel launched in work-groups of `wg`: where the compiled kernel
 * cannot take that many work-items (too many registers), it is released and *out left NULL,
 * which callers read as "not built here"; still a success. */
flashcl_status fc_attn_create_kernel_for_wg(fc_cl_context *ctx, cl_program program,
                                            const char *name, size_t wg, cl_kernel *out);
/* Whether a program part (FC_PART_*) holds the kernels of dtype dt. */
int fc_attn_part_has(int part, int dt);

/* Work-group sizes of fc_attn_merge and fc_attn_split_merge on this device (powers of two). */
size_t fc_attn_merge_wg(const fc_cl_device *dev);
size_t fc_attn_split_merge_wg(const fc_cl_device *dev);

/* ---- the merge kernels (attention_merge.c): FC_ATTN_PART_MERGE, or the generic part ---- */
flashcl_status fc_attn_merge_create_kernels(fc_cl_context *ctx, cl_program program);
void fc_attn_merge_release_kernels(fc_cl_context *ctx);

/* CPUs get generic kernels (dtype and head dim decided at run time). */
int fc_attn_generic_kernels(const fc_cl_device *dev);
/* The program part (FC_PART_*) that holds the CPU kernels (cl/attention_cpu.cl) on this
 * device, -1 where none does (every GPU but Oclgrind, and Mesa's llvmpipe). */
int fc_attn_cpu_part(const fc_cl_device *dev);

/* Padded head dim of each class, and the dtypes' kernel name suffixes. */
extern const int fc_attn_class_dim[FC_ATTN_DIM_CLASSES];
extern const char *const fc_attn_dtype_name[FC_DTYPE_COUNT];

/* The tiled kernels' geometry per family and head-dim class (attention_plan.c): a pure function
 * of the device, so build options and launches agree; a tile whose columns are 0 is disabled. */
typedef struct fc_attention_tile fc_attn_tile;
void fc_attn_plan(const fc_cl_device *dev,
                  fc_attn_tile tiles[FC_ATTN_FAMILIES][FC_ATTN_DIM_CLASSES]);

/* ---- the forward call's plan (attention_plan.c), launched by attention.c ---- */
/* The launch plan of one forward call. */
typedef struct fc_attn_launch {
    int family, dim_class, ntiles, nsplit, keys_per_split;
    int per_cu;                 /* work-groups a compute unit is expected to run at once */
    int heads;                  /* kv heads a work-group takes (fc_attn_decode_vector), else 1 */
    size_t wg;
    cl_kernel kernel;
} fc_attn_launch;
/* Chooses one forward call's kernel, work-group, tiles and key splits, or fails for its shape. */
flashcl_status fc_attn_plan_forward(fc_cl_context *ctx, const fc_attention_desc *d,
                                    fc_attn_launch *p);

/* ---- key-parallel decode (attention_decode.c) ---- */
typedef struct fc_attention_keys_tile fc_attn_keys_tile;

/* The geometry of a form (0: 8 rows a work-group, 1: 4 rows, GPUs only) per head-dim class (a
 * pure function of the device; WG 0: disabled). */
void fc_attn_keys_plan(const fc_cl_device *dev, int form,
                       fc_attn_keys_tile tiles[FC_ATTN_DIM_CLASSES]);
/* Appends the kernels' -D options (their geometry per class) to out (used bytes so far). */
size_t fc_attn_keys_options(const fc_cl_device *dev, char *out, size_t out_size, size_t used);
/* The kernels of the dtypes of `part` (FC_PART_*) from `program`, and their release. */
flashcl_status fc_attn_keys_create_kernels(fc_cl_context *ctx, cl_program program, int part);
void fc_attn_keys_release_kernels(fc_cl_context *ctx, int part);
/* Local memory that follows the first region (K block or cp.async ring) in both forms of the
 * key-parallel kernel, as cl/attention_decode.cl's FC_ATTN_KTAIL4 computes it. */
size_t fc_attn_keys_tail_bytes(int work_group, int rows, int bk, int dp);
/* Keys per block of a class's kernel (padded head dim dp) for a dtype: f32 blocks over heads
 * wider than 64 hold half the 16-bit ones. */
int fc_attn_keys_block(const fc_attn_keys_tile *t, flashcl_dtype dt, int dp);
/* Whether FLASHCL_ATTENTION_DECODE_LEGACY=1 asks for the tiled decode kernel instead. */
int fc_attn_decode_legacy(void);

/* ---- the key-parallel kernel's cp.async form (attention_decode_async.c) ---- */
typedef struct fc_attention_async_tile fc_attn_async_tile;

/* Whether this device builds it: NVIDIA GPUs of compute capability 8.0+ (inline PTX). */
int fc_attn_async_built(const fc_cl_device *dev);
/* Its geometry per form (0: 8 rows a work-group, 1: 4 rows) and head-dim class, a pure
 * function of the device (WG 0: not built). */
void fc_attn_async_plan(const fc_cl_device *dev, int form,
                        fc_attn_async_tile tiles[FC_ATTN_DIM_CLASSES]);
/* Appends -DFC_ATTN_ASYNC and the tuples where the device builds it (used bytes so far). */
size_t fc_attn_async_options(const fc_cl_device *dev, char *out, size_t out_size, size_t used);
/* Its kernels from the f32 part's `program` (nothing for other parts), and their release. */
flashcl_status fc_attn_async_create_kernels(fc_cl_context *ctx, cl_program program, int part);
void fc_attn_async_release_kernels(fc_cl_context *ctx, int part);
/* The kernel of a form and class where it takes this call (f32, head_dim a multiple of 4, k and
 * v rows 16-byte aligned, built, FLASHCL_ATTENTION_NO_ASYNC unset), with its geometry; else
 * NULL. */
cl_kernel fc_attn_async_pick(const fc_cl_context *ctx, const fc_attention_desc *d, int form,
                             int dim_class, const fc_attn_async_tile **tile);

/* ---- tensor-core forward (attention_mma.c) ---- */
typedef struct fc_attn_mma_choice {
    cl_kernel kernel;
    size_t wg;
    int rows, keys;             /* query rows per work-group, keys per block */
    cl_kernel ring;             /* the two-warp kernel with a deeper ring, or NULL: the caller
                                   takes it where work-groups walk FC_MMA_RING_MIN_KEYS or more */
    int ring_keys;              /* its keys per block (same wg and rows) */
} fc_attn_mma_choice;
#define FC_MMA_RING_MIN_KEYS 512
/* Whether the tensor-core kernel takes this forward call (f16/bf16: head_dim a multiple of 8
 * up to 128; f32, by 3xTF32, only for prefill-family calls: head_dim a multiple of 4 up to 128;
 * 16-byte aligned rows, kernel built); fills *out when it does. */
int fc_attn_mma_pick(const fc_cl_context *ctx, const fc_attention_desc *d, int prefill,
                     fc_attn_mma_choice *out);

#endif
