/* Tensor-view checks: every rule gives FLASHCL_INVALID_ARGUMENT and a message that names the
 * tensor, the field and the problem. */
#include <stdint.h>
#include <string.h>

#include "error.h"
#include "validate.h"

size_t fc_dtype_size(flashcl_dtype dtype) {
    switch (dtype) {
    case FLASHCL_F32: return 4;
    case FLASHCL_F16: return 2;
    case FLASHCL_BF16: return 2;
    }
    return 0;
}

const char *fc_dtype_name(flashcl_dtype dtype) {
    switch (dtype) {
    case FLASHCL_F32: return "f32";
    case FLASHCL_F16: return "f16";
    case FLASHCL_BF16: return "bf16";
    }
    return "unknown";
}

/* a*b + c without wrapping; returns 0 on overflow. */
static int mul_add_u64(uint64_t a, uint64_t b, uint64_t c, uint64_t *out) {
    if (a != 0 && b > (UINT64_MAX - c) / a) return 0;
    *out = a * b + c;
    return 1;
}

flashcl_status fc_validate_view(const flashcl_context *ctx, const flashcl_tensor *t,
                                const char *name, int ndim, fc_view *view) {
    size_t esize;
    uint64_t last_elem = 0, bytes;
    int i;
    if (!t) return fc_fail(FLASHCL_INVALID_ARGUMENT, "%s is NULL", name);
    if (!t->buffer) return fc_fail(FLASHCL_INVALID_ARGUMENT, "%s->buffer is NULL", name);
    if (t->buffer->ctx != ctx)
        return fc_fail(FLASHCL_INVALID_ARGUMENT,
                       "%s->buffer belongs to another flashcl context", name);
    esize = fc_dtype_size(t->dtype);
    if (esize == 0)
        return fc_fail(FLASHCL_INVALID_ARGUMENT, "%s->dtype %d is not a flashcl_dtype", name,
                       (int)t->dtype);
    if (t->ndim != ndim)
        return fc_fail(FLASHCL_INVALID_ARGUMENT, "%s->ndim is %d; this operation needs %d",
                       name, t->ndim, ndim);
    for (i = 0; i < ndim; i++)
        if (t->shape[i] <= 0)
            return fc_fail(FLASHCL_INVALID_ARGUMENT, "%s->shape[%d] is %lld; it must be > 0",
                           name, i, (long long)t->shape[i]);
    if (t->strides[ndim - 1] != 1)
        return fc_fail(FLASHCL_INVALID_ARGUMENT,
                       "%s->strides[%d] is %lld; the last dimension must be contiguous (1)",
                       name, ndim - 1, (long long)t->strides[ndim - 1]);
    for (i = 0; i < ndim - 1; i++)
        if (t->strides[i] < 0)
            return fc_fail(FLASHCL_INVALID_ARGUMENT, "%s->strides[%d] is %lld; it must be >= 0",
                           name, i, (long long)t->strides[i]);
    if (ndim == 2 && t->strides[0] < t->shape[1])
        return fc_fail(FLASHCL_INVALID_ARGUMENT,
                       "%s->strides[0] (row stride) is %lld, less than its %lld columns", name,
                       (long long)t->strides[0], (long long)t->shape[1]);
    if (t->offset % esize != 0)
        return fc_fail(FLASHCL_INVALID_ARGUMENT,
                       "%s->offset %zu is not a multiple of the %s element size (%zu bytes)",
                       name, t->offset, fc_dtype_name(t->dtype), esize);
    /* The last element's index: sum of (shape-1)*stride, checked for overflow. */
    for (i = 0; i < ndim; i++) {
        if (!mul_add_u64((uint64_t)(t->shape[i] - 1), (uint64_t)t->strides[i], last_elem,
                         &last_elem))
            return fc_fail(FLASHCL_INVALID_ARGUMENT, "%s's extent overflows 64 bits", name);
    }
    if (!mul_add_u64(last_elem + 1, esize, t->offset, &bytes) || last_elem + 1 == 0)
        return fc_fail(FLASHCL_INVALID_ARGUMENT, "%s's byte size overflows 64 bits", name);
    if (bytes > t->buffer->size)
        return fc_fail(FLASHCL_INVALID_ARGUMENT,
                       "%s extends past its buffer: the view needs bytes [%zu, %llu) but the "
                       "buffer has %zu",
                       name, t->offset, (unsigned long long)bytes, t->buffer->size);
    view->buffer = t->buffer;
    view->begin = t->offset;
    view->end = (size_t)bytes;
    return FLASHCL_SUCCESS;
}

int fc_same_view(const flashcl_tensor *a, const flashcl_tensor *b) {
    int i;
    if (a->buffer != b->buffer || a->offset != b->offset || a->dtype != b->dtype ||
        a->ndim != b->ndim)
        return 0;
    for (i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i] || a->strides[i] != b->strides[i]) return 0;
    return 1;
}

int fc_views_overlap(const fc_view *a, const fc_view *b) {
    return a->buffer == b->buffer && a->begin < b->end && b->begin < a->end;
}

int fc_view_is_injective(const flashcl_tensor *t) {
    /* Visit dimensions from the smallest stride up: each stride must step past everything the
     * smaller ones span. Size-1 dimensions never alias. */
    int order[4], n = 0, i, j;
    uint64_t span = 1; /* elements covered by the dimensions visited so far */
    for (i = 0; i < t->ndim; i++)
        if (t->shape[i] > 1) order[n++] = i;
    for (i = 1; i < n; i++)
        for (j = i; j > 0 && t->strides[order[j]] < t->strides[order[j - 1]]; j--) {
            int tmp = order[j];
            order[j] = order[j - 1];
            order[j - 1] = tmp;
        }
    for (i = 0; i < n; i++) {
        int d = order[i];
        if ((uint64_t)t->strides[d] < span) return 0;
        span = (uint64_t)t->strides[d] * (uint64_t)(t->shape[d] - 1) + span;
    }
    return 1;
}
