/* The backend interface: a struct of function pointers plus an opaque context pointer.
 * src/api.c validates every request first; a backend receives only valid descriptors and
 * decides how to run them. Backends report failures through fc_set_error (src/error.h). */
#ifndef FLASHCL_BACKEND_H
#define FLASHCL_BACKEND_H

#include "flashcl.h"

typedef struct fc_backend fc_backend;

/* A validated softmax request: 2-D views with element strides and byte offsets. */
typedef struct fc_softmax_desc {
    void *x_mem, *y_mem;            /* backend buffer handles */
    size_t x_offset, y_offset;      /* bytes */
    flashcl_dtype x_dtype, y_dtype;
    int64_t rows, cols;
    int64_t x_row_stride, y_row_stride; /* elements */
    float scale;                    /* already defaulted (never 0) */
    int log;
    int in_place;                   /* x and y are the same view */
    flashcl_softmax_variant variant;/* AUTO, or a forced variant */
} fc_softmax_desc;

/* A validated attention request. Strides are in elements, indexed [batch, seq, head, dim]
 * (dim stride is 1); lse strides [batch, head, seq]. */
typedef struct fc_attention_desc {
    void *q_mem, *k_mem, *v_mem, *o_mem, *lse_mem; /* lse_mem NULL when not requested */
    size_t q_offset, k_offset, v_offset, o_offset, lse_offset; /* bytes */
    flashcl_dtype dtype;            /* q, k, v and o share it; lse is f32 */
    int64_t batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim;
    int64_t q_strides[4], k_strides[4], v_strides[4], o_strides[4];
    int64_t lse_strides[3];
    float scale;                    /* already defaulted: never 0 */
    int causal;
    int window_left, window_right;  /* -1: unbounded */
    float softcap;                  /* 0: off */
} fc_attention_desc;

/* A validated merge of `parts` partial attention results over disjoint key sets. */
typedef struct fc_attention_merge_desc {
    size_t parts;
    void *const *o_part_mems;       /* parts entries */
    const size_t *o_part_offsets;   /* bytes */
    const int64_t (*o_part_strides)[4];
    void *const *lse_part_mems;
    const size_t *lse_part_offsets;
    const int64_t (*lse_part_strides)[3];
    flashcl_dtype o_part_dtype;     /* all parts share one dtype */
    void *o_mem, *lse_mem;          /* lse_mem NULL when not requested */
    size_t o_offset, lse_offset;
    flashcl_dtype o_dtype;
    int64_t o_strides[4], lse_strides[3];
    int64_t batch, seqlen_q, heads, head_dim;
} fc_attention_merge_desc;

struct fc_backend {
    const char *name;
    flashcl_backend kind;
    /* Appends this backend's devices (in stable order) to out[*count..capacity), always
     * counting all of them in *count. */
    flashcl_status (*list_devices)(flashcl_device_info *out, size_t capacity, size_t *count);
    /* Opens the backend-local device `index` (0-based among this backend's devices). */
    flashcl_status (*context_create)(int index, const char *cache_dir, void **out_ctx);
    void (*context_destroy)(void *ctx);
    flashcl_status (*context_device)(const void *ctx, flashcl_device_info *out);
    flashcl_status (*finish)(void *ctx);
    void (*build_info)(const void *ctx, int *from_cache, double *seconds);
    flashcl_status (*buffer_create)(void *ctx, size_t bytes, void **out_mem);
    void (*buffer_release)(void *ctx, void *mem);
    flashcl_status (*buffer_write)(void *ctx, void *mem, size_t offset, const void *src,
                                   size_t bytes);
    flashcl_status (*buffer_read)(void *ctx, void *mem, size_t offset, void *dst, size_t bytes);
    flashcl_status (*softmax)(void *ctx, const fc_softmax_desc *desc);
    flashcl_status (*attention_forward)(void *ctx, const fc_attention_desc *desc);
    flashcl_status (*attention_merge)(void *ctx, const fc_attention_merge_desc *desc);
};

/* The registry (src/registry.c, the one file with backend #ifdefs): every compiled-in
 * backend in preference order for AUTO. */
const fc_backend *const *fc_backends(size_t *count);

#endif
