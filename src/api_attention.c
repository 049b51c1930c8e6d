/* Validation and dispatch of the attention entry points: forward and merge. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "handles.h"
#include "validate.h"

/* The largest head dimension any backend supports; larger is valid but unsupported. */
#define FC_MAX_HEAD_DIM 256

static flashcl_status shape_mismatch(const char *name, int dim, const char *what,
                                     int64_t got, int64_t want) {
    return fc_fail(FLASHCL_INVALID_ARGUMENT, "%s->shape[%d] (%s) is %lld; expected %lld", name,
                   dim, what, (long long)got, (long long)want);
}

/* Checks t->shape against want[0..ndim), naming each dimension. */
static flashcl_status check_shape(const flashcl_tensor *t, const char *name,
                                  const int64_t *want, const char *const *dims) {
    int i;
    for (i = 0; i < t->ndim; i++)
        if (t->shape[i] != want[i]) return shape_mismatch(name, i, dims[i], t->shape[i], want[i]);
    return FLASHCL_SUCCESS;
}

static flashcl_status check_output_apart(const fc_view *out, const char *out_name,
                                         const fc_view *in, const char *in_name) {
    if (fc_views_overlap(out, in))
        return fc_fail(FLASHCL_INVALID_ARGUMENT, "%s overlaps %s in buffer memory", out_name,
                       in_name);
    return FLASHCL_SUCCESS;
}

static const char *const fc_seq_dims[4] = {"batch", "seqlen", "heads", "head_dim"};
static const char *const fc_lse_dims[3] = {"batch", "heads", "seqlen_q"};

static flashcl_status validate_lse(const flashcl_context *ctx, const flashcl_tensor *lse,
                                   const char *name, int64_t b, int64_t h, int64_t s,
                                   fc_view *view) {
    int64_t want[3];
    flashcl_status st = fc_validate_view(ctx, lse, name, 3, view);
    if (st != FLASHCL_SUCCESS) return st;
    if (lse->dtype != FLASHCL_F32)
        return fc_fail(FLASHCL_INVALID_ARGUMENT, "%s->dtype must be f32 (FLASHCL_F32)", name);
    want[0] = b, want[1] = h, want[2] = s;
    return check_shape(lse, name, want, fc_lse_dims);
}

static void copy_strides(int64_t *dst, const flashcl_tensor *t) {
    int i;
    for (i = 0; i < t->ndim; i++) dst[i] = t->strides[i];
}

flashcl_status flashcl_attention_forward(flashcl_context *ctx,
                                         const flashcl_attention_params *params,
                                         const flashcl_tensor *q, const flashcl_tensor *k,
                                         const flashcl_tensor *v, const flashcl_tensor *o,
                                         const flashcl_tensor *lse) {
    fc_view vq, vk, vv, vo, vl;
    fc_attention_desc d;
    int64_t want[4];
    flashcl_status st;

    fc_clear_error();
    if (!ctx) return fc_fail(FLASHCL_INVALID_ARGUMENT, "ctx is NULL");
    if ((st = fc_validate_view(ctx, q, "q", 4, &vq)) != FLASHCL_SUCCESS) return st;
    if ((st = fc_validate_view(ctx, k, "k", 4, &vk)) != FLASHCL_SUCCESS) return st;
    if ((st = fc_validate_view(ctx, v, "v", 4, &vv)) != FLASHCL_SUCCESS) return st;
    if ((st = fc_validate_view(ctx, o, "o", 4, &vo)) != FLASHCL_SUCCESS) return st;
    if (k->dtype != q->dtype || v->dtype != q->dtype || o->dtype != q->dtype)
        return fc_fail(FLASHCL_INVALID_ARGUMENT,
                       "q, k, v and o must share one dtype (q %s, k %s, v %s, o %s)",
                       fc_dtype_name(q->dtype), fc_dtype_name(k->dtype),
                       fc_dtype_name(v->dtype), fc_dtype_name(o->dtype));
    want[0] = q->shape[0], want[1] = k->shape[1], want[2] = k->shape[2], want[3] = q->shape[3];
    if ((st = check_shape(k, "k", want, fc_seq_dims)) != FLASHCL_SUCCESS) return st;
    if ((st = check_shape(v, "v", want, fc_seq_dims)) != FLASHCL_SUCCESS) return st;
    if ((st = check_shape(o, "o", q->shape, fc_seq_dims)) != FLASHCL_SUCCESS) return st;
    if (q->shape[2] % k->shape[2] != 0)
        return fc_fail(FLASHCL_INVALID_ARGUMENT,
                       "heads_q (q->shape[2] = %lld) is not a multiple of heads_kv "
                       "(k->shape[2] = %lld)",
                       (long long)q->shape[2], (long long)k->shape[2]);
    if (!fc_view_is_injective(o))
        return fc_fail(FLASHCL_INVALID_ARGUMENT,
                       "o's strides make distinct elements share memory");
    if ((st = check_output_apart(&vo, "o", &vq, "q")) != FLASHCL_SUCCESS) return st;
    if ((st = check_output_apart(&vo, "o", &vk, "k")) != FLASHCL_SUCCESS) return st;
    if ((st = check_output_apart(&vo, "o", &vv, "v")) != FLASHCL_SUCCESS) return st;
    if (lse) {
        st = validate_lse(ctx, lse, "lse", q->shape[0], q->shape[2], q->shape[1], &vl);
        if (st != FLASHCL_SUCCESS) return st;
        if (!fc_view_is_injective(lse))
            return fc_fail(FLASHCL_INVALID_ARGUMENT,
                           "lse's strides make distinct elements share memory");
        if ((st = check_output_apart(&vo, "o", &vl, "lse")) != FLASHCL_SUCCESS) return st;
        if ((st = check_output_apart(&vl, "lse", &vq, "q")) != FLASHCL_SUCCESS) return st;
        if ((st = check_output_apart(&vl, "lse", &vk, "k")) != FLASHCL_SUCCESS) return st;
        if ((st = check_output_apart(&vl, "lse", &vv, "v")) != FLASHCL_SUCCESS) return st;
    }

    memset(&d, 0, sizeof d);
    d.scale = 1.0f / sqrtf((float)q->shape[3]);
    d.window_left = d.window_right = -1;
    if (params) {
        if (!isfinite(params->scale))
            return fc_fail(FLASHCL_INVALID_ARGUMENT, "params->scale is %g; it must be finite",
                           (double)params->scale);
        if (params->scale != 0.0f) d.scale = params->scale;
        if (params->window_left < -1 || params->window_right < -1)
            return fc_fail(FLASHCL_INVALID_ARGUMENT,
                           "params->window_left/right are %d/%d; each must be >= -1 "
                           "(-1 = unbounded)",
                           params->window_left, params->window_right);
        if (isnan(params->softcap) || params->softcap < 0.0f || isinf(params->softcap))
            return fc_fail(FLASHCL_INVALID_ARGUMENT,
                           "params->softcap is %g; it must be 0 (off) or finite and positive",
                           (double)params->softcap);
        d.causal = params->causal != 0;
        d.window_left = params->window_left;
        d.window_right = params->window_right;
        d.softcap = params->softcap;
    }
    if (q->shape[3] > FC_MAX_HEAD_DIM)
        return fc_fail(FLASHCL_UNSUPPORTED, "head_dim %lld is over the supported %d",
                       (long long)q->shape[3], FC_MAX_HEAD_DIM);

    d.q_mem = q->buffer->mem, d.k_mem = k->buffer->mem, d.v_mem = v->buffer->mem;
    d.o_mem = o->buffer->mem, d.lse_mem = lse ? lse->buffer->mem : NULL;
    d.q_offset = q->offset, d.k_offset = k->offset, d.v_offset = v->offset;
    d.o_offset = o->offset, d.lse_offset = lse ? lse->offset : 0;
    d.dtype = q->dtype;
    d.batch = q->shape[0], d.seqlen_q = q->shape[1], d.heads_q = q->shape[2];
    d.head_dim = q->shape[3], d.seqlen_k = k->shape[1], d.heads_kv = k->shape[2];
    copy_strides(d.q_strides, q), copy_strides(d.k_strides, k), copy_strides(d.v_strides, v);
    copy_strides(d.o_strides, o);
    if (lse) copy_strides(d.lse_strides, lse);
    return ctx->backend->attention_forward(ctx->impl, &d);
}

flashcl_status flashcl_attention_merge(flashcl_context *ctx, size_t parts,
                                       const flashcl_tensor *o_parts,
                                       const flashcl_tensor *lse_parts, const flashcl_tensor *o,
                                       const flashcl_tensor *lse) {
    fc_view vo, vl, *vin = NULL;
    fc_attention_merge_desc d;
    void **mems = NULL;
    size_t *offsets = NULL, i;
    int64_t (*strides)[4] = NULL, (*lse_strides)[3] = NULL;
    int64_t b, s, h;
    char name[64], other[64];
    flashcl_status st;

    fc_clear_error();
    if (!ctx) return fc_fail(FLASHCL_INVALID_ARGUMENT, "ctx is NULL");
    if (parts == 0) return fc_fail(FLASHCL_INVALID_ARGUMENT, "parts is 0");
    if (parts > 4096) return fc_fail(FLASHCL_INVALID_ARGUMENT, "parts %zu is over 4096", parts);
    if (!o_parts) return fc_fail(FLASHCL_INVALID_ARGUMENT, "o_parts is NULL");
    if (!lse_parts) return fc_fail(FLASHCL_INVALID_ARGUMENT, "lse_parts is NULL");
    if ((st = fc_validate_view(ctx, o, "o", 4, &vo)) != FLASHCL_SUCCESS) return st;
    if (!fc_view_is_injective(o))
        return fc_fail(FLASHCL_INVALID_ARGUMENT, "o's strides make distinct elements share memory");
    b = o->shape[0], s = o->shape[1], h = o->shape[2];
    if (lse) {
        if ((st = validate_lse(ctx, lse, "lse", b, h, s, &vl)) != FLASHCL_SUCCESS) return st;
        if (!fc_view_is_injective(lse))
            return fc_fail(FLASHCL_INVALID_ARGUMENT,
                           "lse's strides make distinct elements share memory");
        if ((st = check_output_apart(&vo, "o", &vl, "lse")) != FLASHCL_SUCCESS) return st;
    }
    vin = calloc(2 * parts, sizeof *vin);
    if (!vin) return fc_fail(FLASHCL_OUT_OF_MEMORY, "out of host memory");
    for (i = 0; i < parts && st == FLASHCL_SUCCESS; i++) {
        snprintf(name, sizeof name, "o_parts[%zu]", i);
        st = fc_validate_view(ctx, &o_parts[i], name, 4, &vin[2 * i]);
        if (st == FLASHCL_SUCCESS) st = check_shape(&o_parts[i], name, o->shape, fc_seq_dims);
        if (st == FLASHCL_SUCCESS && o_parts[i].dtype != o_parts[0].dtype)
            st = fc_fail(FLASHCL_INVALID_ARGUMENT, "%s->dtype %s differs from o_parts[0]'s %s",
                         name, fc_dtype_name(o_parts[i].dtype),
                         fc_dtype_name(o_parts[0].dtype));
        if (st == FLASHCL_SUCCESS) st = check_output_apart(&vo, "o", &vin[2 * i], name);
        if (st == FLASHCL_SUCCESS && lse) st = check_output_apart(&vl, "lse", &vin[2 * i], name);
        snprintf(other, sizeof other, "lse_parts[%zu]", i);
        if (st == FLASHCL_SUCCESS)
            st = validate_lse(ctx, &lse_parts[i], other, b, h, s, &vin[2 * i + 1]);
        if (st == FLASHCL_SUCCESS) st = check_output_apart(&vo, "o", &vin[2 * i + 1], other);
        if (st == FLASHCL_SUCCESS && lse)
            st = check_output_apart(&vl, "lse", &vin[2 * i + 1], other);
    }
    free(vin);
    if (st != FLASHCL_SUCCESS) return st;

    mems = calloc(2 * parts, sizeof *mems);
    offsets = calloc(2 * parts, sizeof *offsets);
    strides = calloc(parts, sizeof *strides);
    lse_strides = calloc(parts, sizeof *lse_strides);
    if (!mems || !offsets || !strides || !lse_strides) {
        st = fc_fail(FLASHCL_OUT_OF_MEMORY, "out of host memory");
        goto done;
    }
    memset(&d, 0, sizeof d);
    for (i = 0; i < parts; i++) {
        mems[i] = o_parts[i].buffer->mem;
        offsets[i] = o_parts[i].offset;
        copy_strides(strides[i], &o_parts[i]);
        mems[parts + i] = lse_parts[i].buffer->mem;
        offsets[parts + i] = lse_parts[i].offset;
        copy_strides(lse_strides[i], &lse_parts[i]);
    }
    d.parts = parts;
    d.o_part_mems = mems;
    d.o_part_offsets = offsets;
    d.o_part_strides = (const int64_t(*)[4])strides;
    d.lse_part_mems = mems + parts;
    d.lse_part_offsets = offsets + parts;
    d.lse_part_strides = (const int64_t(*)[3])lse_strides;
    d.o_part_dtype = o_parts[0].dtype;
    d.o_mem = o->buffer->mem;
    d.o_offset = o->offset;
    d.o_dtype = o->dtype;
    copy_strides(d.o_strides, o);
    d.lse_mem = lse ? lse->buffer->mem : NULL;
    d.lse_offset = lse ? lse->offset : 0;
    if (lse) copy_strides(d.lse_strides, lse);
    d.batch = b, d.seqlen_q = s, d.heads = h, d.head_dim = o->shape[3];
    st = ctx->backend->attention_merge(ctx->impl, &d);
done:
    free(mems);
    free(offsets);
    free(strides);
    free(lse_strides);
    return st;
}
