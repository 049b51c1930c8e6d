/* The OpenCL interop entry points (include/flashcl_opencl.h). */
#include "flashcl_opencl.h"

#include "error.h"
#include "handles.h"
#include "opencl/cl_internal.h"

flashcl_status flashcl_context_create_from_cl(cl_context context, cl_device_id device,
                                              cl_command_queue queue, flashcl_context **out) {
    void *impl = NULL;
    flashcl_status st;
    fc_clear_error();
    if (!context) return fc_fail(FLASHCL_INVALID_ARGUMENT, "context is NULL");
    if (!device) return fc_fail(FLASHCL_INVALID_ARGUMENT, "device is NULL");
    if (!queue) return fc_fail(FLASHCL_INVALID_ARGUMENT, "queue is NULL");
    if (!out) return fc_fail(FLASHCL_INVALID_ARGUMENT, "out is NULL");
    st = fc_cl_context_adopt(context, device, queue, NULL, &impl);
    if (st != FLASHCL_SUCCESS) return st;
    return fc_context_wrap(&fc_opencl_backend, impl, out);
}

flashcl_status flashcl_buffer_wrap_cl(flashcl_context *ctx, cl_mem mem, flashcl_buffer **out) {
    void *handle = NULL;
    size_t size = 0;
    flashcl_status st;
    fc_clear_error();
    if (!ctx) return fc_fail(FLASHCL_INVALID_ARGUMENT, "ctx is NULL");
    if (!mem) return fc_fail(FLASHCL_INVALID_ARGUMENT, "mem is NULL");
    if (!out) return fc_fail(FLASHCL_INVALID_ARGUMENT, "out is NULL");
    if (ctx->backend != &fc_opencl_backend)
        return fc_fail(FLASHCL_UNSUPPORTED, "ctx is a %s context, not an OpenCL one",
                       ctx->backend->name);
    st = fc_cl_buffer_wrap(ctx->impl, mem, &size, &handle);
    if (st != FLASHCL_SUCCESS) return st;
    if (size == 0) {
        ctx->backend->buffer_release(ctx->impl, handle);
        return fc_fail(FLASHCL_INVALID_ARGUMENT, "mem has size 0");
    }
    return fc_buffer_register(ctx, handle, size, out);
}

cl_mem flashcl_buffer_cl_mem(const flashcl_buffer *buf) {
    if (!buf || buf->ctx->backend != &fc_opencl_backend) return NULL;
    return fc_cl_buffer_mem(buf->mem);
}

flashcl_status flashcl_context_cl_objects(const flashcl_context *ctx, cl_context *context,
                                          cl_device_id *device, cl_command_queue *queue) {
    fc_clear_error();
    if (!ctx) return fc_fail(FLASHCL_INVALID_ARGUMENT, "ctx is NULL");
    if (ctx->backend != &fc_opencl_backend)
        return fc_fail(FLASHCL_UNSUPPORTED, "ctx is a %s context, not an OpenCL one",
                       ctx->backend->name);
    fc_cl_context_objects(ctx->impl, context, device, queue);
    return FLASHCL_SUCCESS;
}
