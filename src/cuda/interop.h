/* What src/api_cuda.c (the public CUDA interop entry points) needs from the backend. Free of
 * cuda.h, so that api_cuda.c compiles with or without the CUDA toolkit's headers. */
#ifndef FLASHCL_CUDA_INTEROP_H
#define FLASHCL_CUDA_INTEROP_H

#include "../backend.h"

extern const fc_backend fc_cuda_backend;

/* Checks that [device_ptr, device_ptr + bytes) is device memory of the context's device and
 * returns a backend handle that refers to it without owning it. */
flashcl_status fc_cuda_buffer_wrap(void *ctx, void *device_ptr, size_t bytes, void **out_mem);

/* Directs the context's work to `stream` (a CUstream of the context's device; NULL: flashcl's
 * own stream), ordered after everything already enqueued. */
flashcl_status fc_cuda_set_stream(void *ctx, void *stream);

/* The device address behind a backend buffer handle. */
void *fc_cuda_buffer_pointer(const void *mem);

#endif
