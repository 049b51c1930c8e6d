/* Host side of the attention programs (cl/attention*.cl): the launch of the forward variant
 * that attention_plan.c chose (with or without split-KV) and of the split merge, and the launch
 * helpers the attention files share (kernel arguments, enqueue, split-KV scratch).
 * attention_plan.c owns the geometry, the build options and the choice; attention_kernels.c says
 * which programs a device builds and creates their kernels; attention_decode.c owns the
 * key-parallel kernels, attention_merge.c the merge kernels and the merge API. Descriptors arrive
 * validated (src/api_attention.c). */
#include <stdio.h>
#include <string.h>

#include "attention_internal.h"
#include "../attention_tail.h"
#include "../error.h"

#define FC_ATTN_LOG2E 1.4426950408889634

/* ---- launching ---------------------------------------------------------------------------- */

void fc_attn_arg(fc_args *a, size_t size, const void *value)
{
    cl_int err = clSetKernelArg(a->kernel, a->next++, size, value);
    if (a->err == CL_SUCCESS) a->err = err;
}
void fc_attn_arg_mem(fc_args *a, void *mem)
{
    fc_attn_arg(a, sizeof(cl_mem), mem ? (cl_mem *)&mem : NULL);
}

cl_long4 fc_attn_long4(int64_t x, int64_t y, int64_t z, int64_t w)
{
    cl_long4 v;
    v.s[0] = x, v.s[1] = y, v.s[2] = z, v.s[3] = w;
    return v;
}
cl_int4 fc_attn_int4(int64_t x, int64_t y, int64_t z, int64_t w)
{
    cl_int4 v;
    v.s[0] = (cl_int)x, v.s[1] = (cl_int)y, v.s[2] = (cl_int)z, v.s[3] = (cl_int)w;
    return v;
}

size_t fc_attn_dtype_bytes(flashcl_dtype dt) { return dt == FLASHCL_F32 ? 4 : 2; }

/* Whether every row of a view starts on a multiple of `elems` elements, so that the kernels'
 * vector accesses may be used: 4 elements (16 bytes for f32, 8 for f16/bf16) or 16 bytes (the
 * decode kernel's K loads), 8 16-bit elements (the tensor-core kernel's 16-byte copies). Buffers
 * are base-aligned by OpenCL. */
int fc_attn_rows_aligned(const fc_cl_context *ctx, size_t offset, flashcl_dtype dt,
                         const int64_t *strides, int n, int64_t elems)
{
    int i;
    if (ctx->dev.mem_base_align_bytes < 16 || offset % ((size_t)elems * fc_attn_dtype_bytes(dt)))
        return 0;
    for (i = 0; i < n; i++)
        if (strides[i] % elems) return 0;
    return 1;
}

flashcl_status fc_attn_enqueue(fc_cl_context *ctx, fc_args *a, size_t groups, size_t wg)
{
    char what[128];
    size_t global = groups * wg;
    cl_int err;
    if (a->err != CL_SUCCESS) {
        snprintf(what, sizeof what, "clSetKernelArg(%s)", a->name);
        return fc_cl_fail(a->err, what);
    }
    err = clEnqueueNDRangeKernel(ctx->queue, a->kernel, 1, NULL, &global, &wg, 0, NULL, NULL);
    if (err != CL_SUCCESS) {
        snprintf(what, sizeof what, "clEnqueueNDRangeKernel(%s)", a->name);
        return fc_cl_fail(err, what);
    }
    return FLASHCL_SUCCESS;
}

/* Makes ctx->attention_scratch hold `bytes` (caller holds launch_lock). Work already enqueued
 * on the old buffer keeps it alive until it finishes (OpenCL reference counting). */
flashcl_status fc_attn_scratch_reserve(fc_cl_context *ctx, size_t bytes)
{
    cl_int err;
    if (ctx->attention_scratch && ctx->attention_scratch_bytes >= bytes) return FLASHCL_SUCCESS;
    if (ctx->attention_scratch) clReleaseMemObject(ctx->attention_scratch);
    ctx->attention_scratch = NULL;
    ctx->attention_scratch_bytes = 0;
    if (bytes > ctx->dev.max_alloc_bytes)
        return fc_fail(FLASHCL_OUT_OF_MEMORY,
                       "attention scratch of %zu bytes exceeds the device's largest allocation",
                       bytes);
    ctx->attention_scratch = clCreateBuffer(ctx->context, CL_MEM_READ_WRITE, bytes, NULL, &err);
    if (err != CL_SUCCESS) {
        ctx->attention_scratch = NULL;
        return fc_cl_fail(err, "clCreateBuffer(attention scratch)");
    }
    ctx->attention_scratch_bytes = bytes;
    return FLASHCL_SUCCESS;
}

flashcl_status fc_cl_attention_forward(void *opaque, const fc_attention_desc *d)
{
    fc_cl_context *ctx = opaque;
    fc_attn_launch p;
    fc_args a;
    const size_t es = fc_attn_dtype_bytes(d->dtype);
    const int64_t rows_all = d->batch * d->heads_q * d->seqlen_q, D = d->head_dim;
    const int wr = d->causal ? 0 : d->window_right; /* causal = no key right of the diagonal */
    int split, aligned, in_dtype = (int)d->dtype, tail;
    cl_long4 qs, ks, vs, os, ls;
    cl_int4 dims, grid, mask;
    cl_float2 score;
    cl_long2 split_stride;
    void *o_mem, *lse_mem;
    flashcl_status st = fc_attn_plan_forward(ctx, d, &p);
    if (st != FLASHCL_SUCCESS) return st;
    split = p.nsplit > 1;
    /* (batch, group of p.heads kv heads) pairs: the grid's second dimension */
    const int64_t head_groups = d->batch * (d->heads_kv / p.heads);
    /* The causal tail order (src/attention_tail.h), with per_cu work-groups a compute unit for
     * the blocks the device runs at once (OpenCL has no occupancy query). H100, NVIDIA OpenCL,
     * f16 causal tensor-core kernel, TF/s against the pair-after-pair order (2026-11-25): D 128
     * S512 167-168 vs 159-160, S1024 209-210 vs 197-198, S4096 252 vs 236-238, S8192 260-262
     * vs 247-249; D 64 S2048 233 vs 224, S4096 250-254 vs 243-246, S512 unchanged. */
    tail = p.kernel == ctx->attention.decode_vector ? 0 : /* a few rows a head: no causal tail */
           (int)fc_attention_tail_pairs(d, p.ntiles, (int64_t)ctx->dev.compute_units * p.per_cu,
                                        p.nsplit, "FLASHCL_ATTENTION_NO_TAIL_ORDER",
                                        "FLASHCL_ATTENTION_TAIL_HEADS");

    qs = fc_attn_long4(d->q_strides[0], d->q_strides[1], d->q_strides[2], (int64_t)(d->q_offset / es));
    ks = fc_attn_long4(d->k_strides[0], d->k_strides[1], d->k_strides[2], (int64_t)(d->k_offset / es));
    vs = fc_attn_long4(d->v_strides[0], d->v_strides[1], d->v_strides[2], (int64_t)(d->v_offset / es));
    /* bits 0-2: q, k, v rows 4-element aligned (3: o, below); bit 5: k rows 16-byte aligned */
    aligned = fc_attn_rows_aligned(ctx, d->q_offset, d->dtype, d->q_strides, 3, 4) |
              fc_attn_rows_aligned(ctx, d->k_offset, d->dtype, d->k_strides, 3, 4) << 1 |
              fc_attn_rows_aligned(ctx, d->v_offset, d->dtype, d->v_strides, 3, 4) << 2 |
              fc_attn_rows_aligned(ctx, d->k_offset, d->dtype, d->k_strides, 3,
                           (int64_t)(16 / es)) << 5;
    if (split) {
        /* partials: o [split][B][Hq][Sq][D] then lse [split][B][Hq][Sq], f32 */
        os = fc_attn_long4(d->heads_q * d->seqlen_q * D, D, d->seqlen_q * D, 0);
        ls = fc_attn_long4(d->heads_q * d->seqlen_q, d->seqlen_q, 1, p.nsplit * rows_all * D);
        split_stride.s[0] = rows_all * D, split_stride.s[1] = rows_all;
        aligned |= (D % 4 == 0) << 3;
    } else {
        os = fc_attn_long4(d->o_strides[0], d->o_strides[1], d->o_strides[2],
                      (int64_t)(d->o_offset / es));
        ls = fc_attn_long4(d->lse_strides[0], d->lse_strides[1], d->lse_strides[2],
                      (int64_t)(d->lse_offset / 4));
        split_stride.s[0] = split_stride.s[1] = 0;
        aligned |= fc_attn_rows_aligned(ctx, d->o_offset, d->dtype, d->o_strides, 3, 4) << 3;
    }
    dims = fc_attn_int4(d->seqlen_q, d->seqlen_k, D, d->heads_q / d->heads_kv);
    grid = fc_attn_int4(p.ntiles, head_groups, d->heads_kv / p.heads, p.keys_per_split);
    mask = fc_attn_int4(d->window_left, wr, split ? FLASHCL_F32 : d->dtype, split || d->lse_mem);
    if (d->softcap > 0.0f) { /* softcap·tanh(scale·s / softcap), in log2 units */
        score.s[0] = d->scale / d->softcap;
        score.s[1] = (float)(d->softcap * FC_ATTN_LOG2E);
    } else {
        score.s[0] = (float)(d->scale * FC_ATTN_LOG2E);
        score.s[1] = 0.0f;
    }

    mtx_lock(&ctx->launch_lock);
    if (split) {
        size_t bytes = (size_t)p.nsplit * (size_t)rows_all * (size_t)(D + 1) * 4;
        st = fc_attn_scratch_reserve(ctx, bytes);
        if (st != FLASHCL_SUCCESS) goto done;
    }
    o_mem = split ? (void *)ctx->attention_scratch : d->o_mem;
    lse_mem = split ? (void *)ctx->attention_scratch : d->lse_mem;
    memset(&a, 0, sizeof a);
    a.kernel = p.kernel;
    a.name = "fc_attn_forward";
    fc_attn_arg_mem(&a, d->q_mem), fc_attn_arg_mem(&a, d->k_mem), fc_attn_arg_mem(&a, d->v_mem);
    fc_attn_arg_mem(&a, o_mem), fc_attn_arg_mem(&a, lse_mem);
    fc_attn_arg(&a, sizeof qs, &qs), fc_attn_arg(&a, sizeof ks, &ks), fc_attn_arg(&a, sizeof vs, &vs);
    fc_attn_arg(&a, sizeof os, &os), fc_attn_arg(&a, sizeof ls, &ls);
    fc_attn_arg(&a, sizeof dims, &dims), fc_attn_arg(&a, sizeof grid, &grid), fc_attn_arg(&a, sizeof mask, &mask);
    fc_attn_arg(&a, sizeof score, &score), fc_attn_arg(&a, sizeof split_stride, &split_stride);
    fc_attn_arg(&a, sizeof aligned, &aligned), fc_attn_arg(&a, sizeof in_dtype, &in_dtype);
    fc_attn_arg(&a, sizeof tail, &tail);
    if (p.kernel == ctx->attention.decode_vector) fc_attn_arg(&a, sizeof p.heads, &p.heads);
    st = fc_attn_enqueue(ctx, &a, (size_t)p.ntiles * (size_t)head_groups * (size_t)p.nsplit,
                         p.wg);
    if (st != FLASHCL_SUCCESS || !split) goto done;

    {   /* combine the splits' partials into o and lse */
        cl_long4 at = fc_attn_long4(rows_all * D, rows_all, 0, p.nsplit * rows_all * D);
        cl_int4 mdims = fc_attn_int4(d->seqlen_q, d->heads_q, D, p.nsplit);
        cl_int2 out;
        cl_long4 uos = fc_attn_long4(d->o_strides[0], d->o_strides[1], d->o_strides[2],
                                (int64_t)(d->o_offset / es));
        cl_long4 uls = fc_attn_long4(d->lse_strides[0], d->lse_strides[1], d->lse_strides[2],
                                (int64_t)(d->lse_offset / 4));
        out.s[0] = d->dtype, out.s[1] = d->lse_mem != NULL;
        memset(&a, 0, sizeof a);
        a.kernel = ctx->attention.split_merge;
        a.name = "fc_attn_split_merge";
        fc_attn_arg_mem(&a, ctx->attention_scratch), fc_attn_arg_mem(&a, ctx->attention_scratch);
        fc_attn_arg(&a, sizeof at, &at), fc_attn_arg(&a, sizeof mdims, &mdims);
        fc_attn_arg_mem(&a, d->o_mem), fc_attn_arg(&a, sizeof uos, &uos);
        fc_attn_arg_mem(&a, d->lse_mem), fc_attn_arg(&a, sizeof uls, &uls), fc_attn_arg(&a, sizeof out, &out);
        st = fc_attn_enqueue(ctx, &a, (size_t)rows_all, ctx->attention.split_merge_wg);
    }
done:
    mtx_unlock(&ctx->launch_lock);
    return st;
}
