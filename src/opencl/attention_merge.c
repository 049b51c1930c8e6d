/* Host side of the merge kernels (cl/attention_merge.cl; a program of their own on GPUs): their
 * creation, and flashcl_attention_merge: N partial results (o_i, lse_i) of the same queries over
 * disjoint key sets combined by fc_attn_merge, four parts per launch, longer lists chained
 * through f32 scratch. attention.c launches the split-KV merge. Descriptors arrive validated
 * (src/api_attention.c). */
#include <string.h>

#include "attention_internal.h"
#include "../error.h"

/* ---- kernels ------------------------------------------------------------------------------ */

/* The split merge runs at the work-group size it was compiled for on GPUs, and is dropped where
 * the kernel cannot run that many (forward then runs unsplit); the generic (CPU) build runs at
 * any power of two up to it, the largest the kernel allows (Rusticl on llvmpipe reports 32 for
 * every kernel). fc_attn_merge runs at any work-group size: the largest power of two up to
 * fc_attn_merge_wg that the kernel allows. */
static size_t pow2_within(size_t wg, size_t max_wg)
{
    while (wg > 1 && wg > max_wg) wg /= 2;
    return wg;
}

flashcl_status fc_attn_merge_create_kernels(fc_cl_context *ctx, cl_program program)
{
    fc_attention_kernels *ak = &ctx->attention;
    size_t max_wg = 0, split_wg = fc_attn_split_merge_wg(&ctx->dev);
    flashcl_status st = fc_attn_create_kernel(ctx, program, "fc_attn_split_merge",
                                              &ak->split_merge, &max_wg);
    if (st != FLASHCL_SUCCESS) return st;
    ak->split_merge_wg = fc_attn_generic_kernels(&ctx->dev) ? pow2_within(split_wg, max_wg)
                                                            : split_wg;
    if (max_wg < ak->split_merge_wg) {
        clReleaseKernel(ak->split_merge);
        ak->split_merge = NULL;
    }
    st = fc_attn_create_kernel(ctx, program, "fc_attn_merge", &ak->merge, &max_wg);
    if (st != FLASHCL_SUCCESS) return st;
    ak->merge_wg = pow2_within(fc_attn_merge_wg(&ctx->dev), max_wg);
    return FLASHCL_SUCCESS;
}

void fc_attn_merge_release_kernels(fc_cl_context *ctx)
{
    fc_attention_kernels *ak = &ctx->attention;
    if (ak->split_merge) clReleaseKernel(ak->split_merge);
    if (ak->merge) clReleaseKernel(ak->merge);
    ak->split_merge = ak->merge = NULL;
}

/* ---- flashcl_attention_merge -------------------------------------------------------------- */

/* One input of the merge kernel: an o view and an lse view. */
typedef struct fc_merge_slot {
    void *o_mem, *lse_mem;
    cl_long4 os, ls;
    int dtype;
} fc_merge_slot;

/* One launch over n slots; acc_in: slot 0 is a running result, acc_out: `out` is one (see
 * cl/attention_merge.cl). */
static flashcl_status merge_launch(fc_cl_context *ctx, const fc_attention_merge_desc *d,
                                   const fc_merge_slot *slots, int n, const fc_merge_slot *out,
                                   int acc_in, int acc_out)
{
    fc_args a;
    cl_int4 dt = fc_attn_int4(slots[0].dtype, n > 1 ? slots[1].dtype : 0, n > 2 ? slots[2].dtype : 0,
                         n > 3 ? slots[3].dtype : 0);
    cl_int4 dims = fc_attn_int4(d->seqlen_q, d->heads, d->head_dim, n);
    cl_int4 flags;
    int i;
    flags.s[0] = out->dtype, flags.s[1] = out->lse_mem != NULL;
    flags.s[2] = acc_in, flags.s[3] = acc_out;
    memset(&a, 0, sizeof a);
    a.kernel = ctx->attention.merge;
    a.name = "fc_attn_merge";
    for (i = 0; i < 4; i++) { /* unused slots repeat slot 0; the kernel does not read them */
        const fc_merge_slot *s = &slots[i < n ? i : 0];
        fc_attn_arg_mem(&a, s->o_mem), fc_attn_arg(&a, sizeof s->os, &s->os);
        fc_attn_arg_mem(&a, s->lse_mem), fc_attn_arg(&a, sizeof s->ls, &s->ls);
    }
    fc_attn_arg(&a, sizeof dt, &dt), fc_attn_arg(&a, sizeof dims, &dims);
    fc_attn_arg_mem(&a, out->o_mem), fc_attn_arg(&a, sizeof out->os, &out->os);
    fc_attn_arg_mem(&a, out->lse_mem), fc_attn_arg(&a, sizeof out->ls, &out->ls);
    fc_attn_arg(&a, sizeof flags, &flags);
    return fc_attn_enqueue(ctx, &a, (size_t)(d->batch * d->seqlen_q * d->heads),
                           ctx->attention.merge_wg);
}

static fc_merge_slot part_slot(const fc_attention_merge_desc *d, size_t i)
{
    fc_merge_slot s;
    const int64_t *st = d->o_part_strides[i], *lt = d->lse_part_strides[i];
    s.o_mem = d->o_part_mems[i];
    s.lse_mem = d->lse_part_mems[i];
    s.os = fc_attn_long4(st[0], st[1], st[2],
                    (int64_t)(d->o_part_offsets[i] / fc_attn_dtype_bytes(d->o_part_dtype)));
    s.ls = fc_attn_long4(lt[0], lt[1], lt[2], (int64_t)(d->lse_part_offsets[i] / 4));
    s.dtype = d->o_part_dtype;
    return s;
}

/* A running result in scratch at `at`: f32 o, packed [B, Sq, H, D], then its (m, s) pairs
 * [B, H, Sq][2] where a part has its lse. */
static fc_merge_slot acc_slot(fc_cl_context *ctx, const fc_attention_merge_desc *d, int64_t at)
{
    fc_merge_slot s;
    const int64_t S = d->seqlen_q, H = d->heads, D = d->head_dim;
    s.o_mem = s.lse_mem = ctx->attention_scratch;
    s.os = fc_attn_long4(S * H * D, H * D, D, at);
    s.ls = fc_attn_long4(2 * H * S, 2 * S, 2, at + d->batch * S * H * D);
    s.dtype = FLASHCL_F32;
    return s;
}

flashcl_status fc_cl_attention_merge(void *opaque, const fc_attention_merge_desc *d)
{
    fc_cl_context *ctx = opaque;
    const int64_t acc_elems = d->batch * d->seqlen_q * d->heads * (d->head_dim + 2);
    fc_merge_slot slots[4], out;
    size_t next = 0;
    int n, cur = 0;
    flashcl_status st = FLASHCL_SUCCESS;

    if (!ctx->attention.merge)
        return fc_fail(FLASHCL_UNSUPPORTED, "attention merge: no merge kernel was built for '%s'",
                       ctx->dev.info.name);
    out.o_mem = d->o_mem, out.lse_mem = d->lse_mem, out.dtype = d->o_dtype;
    out.os = fc_attn_long4(d->o_strides[0], d->o_strides[1], d->o_strides[2],
                      (int64_t)(d->o_offset / fc_attn_dtype_bytes(d->o_dtype)));
    out.ls = fc_attn_long4(d->lse_strides[0], d->lse_strides[1], d->lse_strides[2],
                      (int64_t)(d->lse_offset / 4));
    mtx_lock(&ctx->launch_lock);
    if (d->parts > 4) /* running results ping-pong between two scratch areas */
        st = fc_attn_scratch_reserve(ctx, (size_t)acc_elems * 2 * 4);
    /* Four parts at a time; past the first launch, slot 0 is the running result (area `cur`)
     * and the launch writes the other area. */
    while (st == FLASHCL_SUCCESS && next < d->parts) {
        const int acc_in = next > 0; /* past the first launch */
        n = 0;
        if (acc_in) slots[n++] = acc_slot(ctx, d, cur * acc_elems);
        while (n < 4 && next < d->parts) slots[n++] = part_slot(d, next++);
        if (next == d->parts) {
            st = merge_launch(ctx, d, slots, n, &out, acc_in, 0);
        } else {
            const int dst = acc_in ? 1 - cur : 0; /* the first launch reads no area */
            fc_merge_slot acc = acc_slot(ctx, d, dst * acc_elems);
            st = merge_launch(ctx, d, slots, n, &acc, acc_in, 1);
            cur = dst;
        }
    }
    mtx_unlock(&ctx->launch_lock);
    return st;
}
