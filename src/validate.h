/* Validation of tensor views, shared by every operation in api.c. */
#ifndef FLASHCL_VALIDATE_H
#define FLASHCL_VALIDATE_H

#include "handles.h"

/* The byte range [begin, end) of a buffer that a valid view touches. */
typedef struct fc_view {
    const flashcl_buffer *buffer;
    size_t begin, end;
} fc_view;

size_t fc_dtype_size(flashcl_dtype dtype);
const char *fc_dtype_name(flashcl_dtype dtype);

/* Checks that `t` (called `name` in messages) is a well-formed view of `ndim` dimensions of a
 * buffer of `ctx`: not NULL, a known dtype, a positive shape, a contiguous last dimension,
 * non-negative strides (a 2-D view's row stride at least its columns), an offset aligned to
 * the element size, no 64-bit overflow, and inside its buffer. Fills `view` on success. */
flashcl_status fc_validate_view(const flashcl_context *ctx, const flashcl_tensor *t,
                                const char *name, int ndim, fc_view *view);
/* No two distinct elements of the view share memory (needed of every output). */
int fc_view_is_injective(const flashcl_tensor *t);
/* Same buffer, offset, dtype, shape and strides. */
int fc_same_view(const flashcl_tensor *a, const flashcl_tensor *b);
/* The two views' byte ranges intersect in the same buffer. */
int fc_views_overlap(const fc_view *a, const fc_view *b);

#endif
