/* Which attention programs a device builds, and the kernels of each: their creation from the
 * built program and their release. attention_plan.c owns the geometry and the build options,
 * attention.c the launches; attention_decode.c and attention_merge.c create the kernels of their
 * own files.
 *
 * GPUs build one program per q/k/v dtype (prefill tiles and the key-parallel decode kernel), so
 * that their driver compiles the three at once, and the merge kernels as one more. CPUs build
 * one program of generic kernels for every dtype, merges included: per-dtype programs would
 * compile each generic kernel three times, and PoCL compiles one program at a time anyway (a
 * program of its own would only add its overhead, 0.2 s).
 * The tiled decode kernels were replaced by the key-parallel one and stay as its A/B reference:
 * they are built (one more program) only when FLASHCL_ATTENTION_DECODE_LEGACY is set as the
 * context is created, or where a head-dim class runs them for want of another kernel: its decode
 * tile fits the device but its prefill tile or its key-parallel kernel does not. */
#include <stdio.h>

#include "attention_internal.h"

static const char *const family_name[FC_ATTN_FAMILIES] = {"prefill", "decode"};

flashcl_status fc_attn_create_kernel(fc_cl_context *ctx, cl_program program, const char *name,
                                     cl_kernel *out, size_t *max_wg)
{
    cl_int err;
    char what[128];
    *out = clCreateKernel(program, name, &err);
    if (err != CL_SUCCESS) {
        *out = NULL;
        snprintf(what, sizeof what, "clCreateKernel(%s)", name);
        return fc_cl_fail(err, what);
    }
    err = clGetKernelWorkGroupInfo(*out, ctx->dev.device, CL_KERNEL_WORK_GROUP_SIZE,
                                   sizeof *max_wg, max_wg, NULL);
    if (err != CL_SUCCESS) {
        snprintf(what, sizeof what, "clGetKernelWorkGroupInfo(%s)", name);
        return fc_cl_fail(err, what);
    }
    return FLASHCL_SUCCESS;
}

flashcl_status fc_attn_create_kernel_for_wg(fc_cl_context *ctx, cl_program program,
                                            const char *name, size_t wg, cl_kernel *out)
{
    size_t max_wg = 0;
    flashcl_status st = fc_attn_create_kernel(ctx, program, name, out, &max_wg);
    if (st == FLASHCL_SUCCESS && max_wg < wg) {
        clReleaseKernel(*out);
        *out = NULL;
    }
    return st;
}

int fc_attn_part_has(int part, int dt)
{
    return part == FC_PART_ALL_DTYPES || part == dt;
}

static int tiled_decode_needed(const fc_cl_device *dev)
{
    fc_attn_tile tiles[FC_ATTN_FAMILIES][FC_ATTN_DIM_CLASSES];
    fc_attn_keys_tile keys[FC_ATTN_DIM_CLASSES];
    int c;
    fc_attn_plan(dev, tiles);
    fc_attn_keys_plan(dev, 0, keys);
    for (c = 0; c < FC_ATTN_DIM_CLASSES; c++)
        if (tiles[FC_ATTN_DECODE][c].columns > 0 &&
            (tiles[FC_ATTN_PREFILL][c].columns == 0 || keys[c].work_group == 0))
            return 1;
    return 0;
}

int fc_cl_attention_wanted(const fc_cl_device *dev, int part)
{
    switch (part) {
    case FC_PART_ALL_DTYPES: return fc_attn_generic_kernels(dev);
    case FC_ATTN_PART_MERGE: return !fc_attn_generic_kernels(dev);
    case FC_ATTN_PART_TILED_DECODE: return fc_attn_decode_legacy() || tiled_decode_needed(dev);
    default: return !fc_attn_generic_kernels(dev); /* one dtype */
    }
}

/* The forward kernels of one family for the dtypes of `part` (FC_PART_ALL_DTYPES: every one). */
static flashcl_status create_forward(fc_cl_context *ctx, cl_program program, int f, int part)
{
    fc_attention_kernels *ak = &ctx->attention;
    int c, dt;
    flashcl_status st;
    for (c = 0; c < FC_ATTN_DIM_CLASSES; c++) {
        if (ak->tile[f][c].columns == 0) continue;
        for (dt = 0; dt < FC_DTYPE_COUNT; dt++) {
            char name[64];
            if (!fc_attn_part_has(part, dt)) continue;
            if (fc_attn_generic_kernels(&ctx->dev)) /* one object per slot, same function */
                snprintf(name, sizeof name, "fc_attn_%s_any", family_name[f]);
            else
                snprintf(name, sizeof name, "fc_attn_%s_d%d_%s", family_name[f],
                         fc_attn_class_dim[c], fc_attn_dtype_name[dt]);
            /* too many registers for the group size: the class cannot run here */
            st = fc_attn_create_kernel_for_wg(
                ctx, program, name,
                (size_t)(ak->tile[f][c].columns * ak->tile[f][c].row_groups),
                &ak->forward[f][c][dt]);
            if (st != FLASHCL_SUCCESS) return st;
        }
    }
    return FLASHCL_SUCCESS;
}

static void release_forward(fc_cl_context *ctx, int f, int part)
{
    fc_attention_kernels *ak = &ctx->attention;
    int c, dt;
    for (c = 0; c < FC_ATTN_DIM_CLASSES; c++)
        for (dt = 0; dt < FC_DTYPE_COUNT; dt++) {
            if (!fc_attn_part_has(part, dt)) continue;
            if (ak->forward[f][c][dt]) clReleaseKernel(ak->forward[f][c][dt]);
            ak->forward[f][c][dt] = NULL;
        }
}

flashcl_status fc_cl_attention_create_kernels(fc_cl_context *ctx, cl_program program, int part)
{
    fc_attention_kernels *ak = &ctx->attention;
    flashcl_status st;
    /* The geometry is a pure function of the device: every part may set it. */
    fc_attn_plan(&ctx->dev, ak->tile);
    if (part == FC_ATTN_PART_MERGE) {
        st = fc_attn_merge_create_kernels(ctx, program);
    } else if (part == FC_ATTN_PART_TILED_DECODE) {
        st = create_forward(ctx, program, FC_ATTN_DECODE, FC_PART_ALL_DTYPES);
        ak->tiled_decode = st == FLASHCL_SUCCESS;
    } else {
        st = create_forward(ctx, program, FC_ATTN_PREFILL, part);
        if (st == FLASHCL_SUCCESS) st = fc_attn_keys_create_kernels(ctx, program, part);
        if (st == FLASHCL_SUCCESS) st = fc_attn_async_create_kernels(ctx, program, part);
        if (st == FLASHCL_SUCCESS && part == FC_PART_ALL_DTYPES)
            st = fc_attn_merge_create_kernels(ctx, program);
        if (st == FLASHCL_SUCCESS && part == fc_attn_cpu_part(&ctx->dev)) {
            st = fc_attn_create_kernel_for_wg(ctx, program, "fc_attn_rows_vector", 1,
                                              &ak->rows_vector);
            if (st == FLASHCL_SUCCESS)
                st = fc_attn_create_kernel_for_wg(ctx, program, "fc_attn_decode_vector", 1,
                                                  &ak->decode_vector);
        }
    }
    if (st != FLASHCL_SUCCESS) fc_cl_attention_release_kernels(ctx, part);
    return st;
}

void fc_cl_attention_release_kernels(fc_cl_context *ctx, int part)
{
    if (part == FC_ATTN_PART_MERGE) {
        fc_attn_merge_release_kernels(ctx);
    } else if (part == FC_ATTN_PART_TILED_DECODE) {
        release_forward(ctx, FC_ATTN_DECODE, FC_PART_ALL_DTYPES);
        ctx->attention.tiled_decode = 0;
    } else {
        release_forward(ctx, FC_ATTN_PREFILL, part);
        fc_attn_keys_release_kernels(ctx, part);
        fc_attn_async_release_kernels(ctx, part);
        if (part == FC_PART_ALL_DTYPES) fc_attn_merge_release_kernels(ctx);
        if (part == fc_attn_cpu_part(&ctx->dev)) {
            if (ctx->attention.rows_vector) clReleaseKernel(ctx->attention.rows_vector);
            if (ctx->attention.decode_vector) clReleaseKernel(ctx->attention.decode_vector);
            ctx->attention.rows_vector = ctx->attention.decode_vector = NULL;
        }
    }
}
