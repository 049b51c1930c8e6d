/* The CUDA interop entry points (include/flashcl_cuda.h). Always compiled: without the CUDA
 * backend they still exist and report FLASHCL_UNSUPPORTED, so programs link either way. */
#include "flashcl_cuda.h"

#include "error.h"
#include "handles.h"
#ifdef FLASHCL_HAVE_CUDA
#include "cuda/interop.h"
#endif

#ifdef FLASHCL_HAVE_CUDA
static flashcl_status require_cuda_context(const flashcl_context *ctx) {
    if (ctx->backend != &fc_cuda_backend)
        return fc_fail(FLASHCL_UNSUPPORTED, "ctx is a %s context, not a CUDA one",
                       ctx->backend->name);
    return FLASHCL_SUCCESS;
}
#else
static flashcl_status require_cuda_context(const flashcl_context *ctx) {
    (void)ctx;
    return fc_fail(FLASHCL_UNSUPPORTED,
                   "this libflashcl was built without the CUDA backend (FLASHCL_CUDA=OFF, or "
                   "no CUDA toolkit when it was configured)");
}
#endif

flashcl_status flashcl_buffer_wrap_cuda(flashcl_context *ctx, void *device_ptr, size_t bytes,
                                        flashcl_buffer **out) {
    flashcl_status st;
    fc_clear_error();
    if (!ctx) return fc_fail(FLASHCL_INVALID_ARGUMENT, "ctx is NULL");
    if (!device_ptr) return fc_fail(FLASHCL_INVALID_ARGUMENT, "device_ptr is NULL");
    if (bytes == 0) return fc_fail(FLASHCL_INVALID_ARGUMENT, "bytes is 0");
    if (!out) return fc_fail(FLASHCL_INVALID_ARGUMENT, "out is NULL");
    st = require_cuda_context(ctx);
    if (st != FLASHCL_SUCCESS) return st;
#ifdef FLASHCL_HAVE_CUDA
    {
        void *handle = NULL;
        st = fc_cuda_buffer_wrap(ctx->impl, device_ptr, bytes, &handle);
        if (st != FLASHCL_SUCCESS) return st;
        return fc_buffer_register(ctx, handle, bytes, out);
    }
#else
    return st;
#endif
}

flashcl_status flashcl_context_set_cuda_stream(flashcl_context *ctx, void *stream) {
    flashcl_status st;
    fc_clear_error();
    if (!ctx) return fc_fail(FLASHCL_INVALID_ARGUMENT, "ctx is NULL");
    st = require_cuda_context(ctx);
    if (st != FLASHCL_SUCCESS) return st;
#ifdef FLASHCL_HAVE_CUDA
    return fc_cuda_set_stream(ctx->impl, stream);
#else
    (void)stream;
    return st;
#endif
}

void *flashcl_buffer_cuda_ptr(const flashcl_buffer *buf) {
#ifdef FLASHCL_HAVE_CUDA
    if (buf && buf->ctx->backend == &fc_cuda_backend) return fc_cuda_buffer_pointer(buf->mem);
#else
    (void)buf;
#endif
    return NULL;
}
