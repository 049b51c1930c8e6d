/* flashcl CUDA interop: run flashcl on memory and streams that belong to a CUDA program
 * (PyTorch, CuPy, the runtime or driver API). Plain C; needs no CUDA header.
 *
 * A flashcl context on a CUDA device (backend FLASHCL_BACKEND_CUDA) works in the device's
 * primary context, the one the CUDA runtime uses, so device pointers from cudaMalloc and
 * torch.Tensor.data_ptr() are valid in it. When libflashcl was built without the CUDA backend
 * these functions exist and return FLASHCL_UNSUPPORTED. */
#ifndef FLASHCL_CUDA_H
#define FLASHCL_CUDA_H

#include "flashcl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Stream handles with a special meaning, equal to CU_STREAM_LEGACY / CU_STREAM_PER_THREAD of
 * cuda.h (cudaStreamLegacy / cudaStreamPerThread). The CUDA default stream is handle 0, which
 * flashcl_context_set_cuda_stream reads as "flashcl's own stream": pass
 * FLASHCL_CUDA_STREAM_LEGACY to run on the legacy default stream (PyTorch's default stream,
 * whose cuda_stream is 0). */
#define FLASHCL_CUDA_STREAM_LEGACY ((void *)0x1)
#define FLASHCL_CUDA_STREAM_PER_THREAD ((void *)0x2)

/* Wraps `bytes` of caller-owned device memory at device_ptr (a CUdeviceptr / cudaMalloc
 * pointer, cast to void *) as a flashcl buffer of ctx, usable in tensors like any other.
 * The memory must be on ctx's device and, where the driver knows the allocation, inside it.
 * flashcl_buffer_destroy releases only flashcl's handle, never the memory; the caller keeps the
 * memory alive while the buffer is used (including work still enqueued). */
FLASHCL_API flashcl_status flashcl_buffer_wrap_cuda(flashcl_context *ctx, void *device_ptr,
                                                    size_t bytes, flashcl_buffer **out);

/* Runs ctx's subsequent work (operations, buffer reads and writes, flashcl_finish) on `stream`,
 * a CUstream / cudaStream_t of ctx's device, cast to void *; NULL returns to flashcl's own
 * stream. Work enqueued before the call stays ordered before work enqueued after it. The stream
 * must stay valid until another one is set or the context is destroyed. */
FLASHCL_API flashcl_status flashcl_context_set_cuda_stream(flashcl_context *ctx, void *stream);

/* The device address behind a buffer of a CUDA context (for cuMemcpy, or a torch tensor built
 * on it); NULL for NULL or a buffer of another backend. */
FLASHCL_API void *flashcl_buffer_cuda_ptr(const flashcl_buffer *buf);

#ifdef __cplusplus
}
#endif
#endif /* FLASHCL_CUDA_H */
