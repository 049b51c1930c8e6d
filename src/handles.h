/* The public handles' layouts, shared by the API files (api.c, api_opencl.c). */
#ifndef FLASHCL_HANDLES_H
#define FLASHCL_HANDLES_H

#include <threads.h>

#include "backend.h"

struct flashcl_buffer {
    flashcl_context *ctx;
    void *mem;                  /* the backend's handle */
    size_t size;
    flashcl_buffer *prev, *next; /* the context's list of live buffers */
};

struct flashcl_context {
    const fc_backend *backend;
    void *impl;
    mtx_t lock;                 /* guards the buffer list */
    flashcl_buffer *buffers;
};

/* Links a new buffer into its context's list (api.c). */
flashcl_status fc_buffer_register(flashcl_context *ctx, void *mem, size_t size,
                                  flashcl_buffer **out);
/* Wraps an already-created backend context into a public handle (api.c). */
flashcl_status fc_context_wrap(const fc_backend *backend, void *impl, flashcl_context **out);

#endif
