/* The OpenCL backend's contexts and buffers, and its entry in the backend table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl_internal.h"
#include "../error.h"

static flashcl_status cl_list_devices(flashcl_device_info *out, size_t capacity, size_t *count) {
    fc_cl_device *devices;
    size_t n, i;
    flashcl_status st = fc_cl_discover(&devices, &n);
    if (st != FLASHCL_SUCCESS) return st;
    for (i = 0; i < n; i++)
        if (*count + i < capacity) out[*count + i] = devices[i].info;
    *count += n;
    free(devices);
    return FLASHCL_SUCCESS;
}

static void cl_context_destroy(void *opaque) {
    fc_cl_context *ctx = opaque;
    if (!ctx) return;
    if (ctx->queue) clFinish(ctx->queue);
    fc_cl_release_programs(ctx);
    if (ctx->scratch) clReleaseMemObject(ctx->scratch);
    if (ctx->split_state) clReleaseMemObject(ctx->split_state);
    if (ctx->attention_scratch) clReleaseMemObject(ctx->attention_scratch);
    if (ctx->queue) clReleaseCommandQueue(ctx->queue);
    if (ctx->context) clReleaseContext(ctx->context);
    mtx_destroy(&ctx->launch_lock);
    free(ctx);
}

static flashcl_status context_alloc(fc_cl_context **out) {
    fc_cl_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return fc_fail(FLASHCL_OUT_OF_MEMORY, "out of host memory");
    if (mtx_init(&ctx->launch_lock, mtx_plain) != thrd_success) {
        free(ctx);
        return fc_fail(FLASHCL_BACKEND_ERROR, "mtx_init failed");
    }
    *out = ctx;
    return FLASHCL_SUCCESS;
}

static flashcl_status cl_context_create(int index, const char *cache_dir, void **out) {
    fc_cl_device *devices;
    size_t n;
    fc_cl_context *ctx = NULL;
    cl_int err;
    flashcl_status st = fc_cl_discover(&devices, &n);
    if (st != FLASHCL_SUCCESS) return st;
    if (index < 0 || (size_t)index >= n) {
        free(devices);
        return fc_fail(FLASHCL_DEVICE_NOT_FOUND, "OpenCL device %d does not exist (%zu found)",
                       index, n);
    }
    st = context_alloc(&ctx);
    if (st != FLASHCL_SUCCESS) {
        free(devices);
        return st;
    }
    ctx->dev = devices[index];
    free(devices);

    {
        cl_context_properties props[] = {CL_CONTEXT_PLATFORM,
                                         (cl_context_properties)ctx->dev.platform, 0};
        ctx->context = clCreateContext(props, 1, &ctx->dev.device, NULL, NULL, &err);
        if (err != CL_SUCCESS) {
            st = fc_cl_fail(err, "clCreateContext");
            cl_context_destroy(ctx);
            return st;
        }
    }
    /* Profiling on: the bench times flashcl's work with marker events on this queue. */
    ctx->queue =
        clCreateCommandQueue(ctx->context, ctx->dev.device, CL_QUEUE_PROFILING_ENABLE, &err);
    if (err != CL_SUCCESS) {
        st = fc_cl_fail(err, "clCreateCommandQueue");
        cl_context_destroy(ctx);
        return st;
    }
    st = fc_cl_build_programs(ctx, cache_dir);
    if (st != FLASHCL_SUCCESS) {
        cl_context_destroy(ctx);
        return st;
    }
    *out = ctx;
    return FLASHCL_SUCCESS;
}

flashcl_status fc_cl_context_adopt(cl_context context, cl_device_id device,
                                   cl_command_queue queue, const char *cache_dir, void **out) {
    fc_cl_context *ctx = NULL;
    cl_context queue_context = NULL;
    cl_device_id queue_device = NULL;
    cl_command_queue_properties props = 0;
    cl_platform_id platform = NULL;
    cl_int err;
    flashcl_status st;

    err = clGetCommandQueueInfo(queue, CL_QUEUE_CONTEXT, sizeof queue_context, &queue_context,
                                NULL);
    if (err == CL_SUCCESS)
        err = clGetCommandQueueInfo(queue, CL_QUEUE_DEVICE, sizeof queue_device, &queue_device,
                                    NULL);
    if (err == CL_SUCCESS)
        err = clGetCommandQueueInfo(queue, CL_QUEUE_PROPERTIES, sizeof props, &props, NULL);
    if (err != CL_SUCCESS)
        return fc_fail(FLASHCL_INVALID_ARGUMENT, "queue is not a valid cl_command_queue: %s",
                       fc_cl_error_name(err));
    if (queue_context != context)
        return fc_fail(FLASHCL_INVALID_ARGUMENT, "queue does not belong to context");
    if (queue_device != device)
        return fc_fail(FLASHCL_INVALID_ARGUMENT, "queue does not belong to device");
    if (props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE)
        return fc_fail(FLASHCL_INVALID_ARGUMENT,
                       "queue is out-of-order; flashcl needs an in-order queue");
    err = clGetDeviceInfo(device, CL_DEVICE_PLATFORM, sizeof platform, &platform, NULL);
    if (err != CL_SUCCESS)
        return fc_fail(FLASHCL_INVALID_ARGUMENT, "device is not a valid cl_device_id: %s",
                       fc_cl_error_name(err));

    st = context_alloc(&ctx);
    if (st != FLASHCL_SUCCESS) return st;
    st = fc_cl_describe(platform, device, &ctx->dev);
    if (st != FLASHCL_SUCCESS) {
        cl_context_destroy(ctx);
        return st;
    }
    clRetainContext(context);
    ctx->context = context;
    clRetainCommandQueue(queue);
    ctx->queue = queue;
    st = fc_cl_build_programs(ctx, cache_dir);
    if (st != FLASHCL_SUCCESS) {
        cl_context_destroy(ctx);
        return st;
    }
    *out = ctx;
    return FLASHCL_SUCCESS;
}

static flashcl_status cl_context_device(const void *opaque, flashcl_device_info *out) {
    const fc_cl_context *ctx = opaque;
    *out = ctx->dev.info;
    return FLASHCL_SUCCESS;
}

static void cl_build_info(const void *opaque, int *from_cache, double *seconds) {
    const fc_cl_context *ctx = opaque;
    if (from_cache) *from_cache = ctx->built_from_cache;
    if (seconds) *seconds = ctx->build_seconds;
}

static flashcl_status cl_finish(void *opaque) {
    fc_cl_context *ctx = opaque;
    cl_int err = clFinish(ctx->queue);
    return err == CL_SUCCESS ? FLASHCL_SUCCESS : fc_cl_fail(err, "clFinish");
}

static flashcl_status cl_buffer_create(void *opaque, size_t bytes, void **out) {
    fc_cl_context *ctx = opaque;
    cl_int err;
    cl_mem mem;
    if (bytes > ctx->dev.max_alloc_bytes)
        return fc_fail(FLASHCL_OUT_OF_MEMORY,
                       "buffer of %zu bytes exceeds the device's largest allocation (%llu bytes)",
                       bytes, (unsigned long long)ctx->dev.max_alloc_bytes);
    mem = clCreateBuffer(ctx->context, CL_MEM_READ_WRITE, bytes, NULL, &err);
    if (err != CL_SUCCESS) return fc_cl_fail(err, "clCreateBuffer");
    *out = mem;
    return FLASHCL_SUCCESS;
}

static void cl_buffer_release(void *opaque, void *mem) {
    (void)opaque;
    if (mem) clReleaseMemObject((cl_mem)mem);
}

static flashcl_status cl_buffer_write(void *opaque, void *mem, size_t offset, const void *src,
                                      size_t bytes) {
    fc_cl_context *ctx = opaque;
    cl_int err = clEnqueueWriteBuffer(ctx->queue, (cl_mem)mem, CL_TRUE, offset, bytes, src, 0,
                                      NULL, NULL);
    return err == CL_SUCCESS ? FLASHCL_SUCCESS : fc_cl_fail(err, "clEnqueueWriteBuffer");
}

static flashcl_status cl_buffer_read(void *opaque, void *mem, size_t offset, void *dst,
                                     size_t bytes) {
    fc_cl_context *ctx = opaque;
    cl_int err = clEnqueueReadBuffer(ctx->queue, (cl_mem)mem, CL_TRUE, offset, bytes, dst, 0,
                                     NULL, NULL);
    return err == CL_SUCCESS ? FLASHCL_SUCCESS : fc_cl_fail(err, "clEnqueueReadBuffer");
}

flashcl_status fc_cl_buffer_wrap(void *opaque, cl_mem mem, size_t *size, void **out) {
    fc_cl_context *ctx = opaque;
    cl_context owner = NULL;
    size_t bytes = 0;
    cl_int err = clGetMemObjectInfo(mem, CL_MEM_CONTEXT, sizeof owner, &owner, NULL);
    if (err == CL_SUCCESS) err = clGetMemObjectInfo(mem, CL_MEM_SIZE, sizeof bytes, &bytes, NULL);
    if (err != CL_SUCCESS)
        return fc_fail(FLASHCL_INVALID_ARGUMENT, "mem is not a valid cl_mem: %s",
                       fc_cl_error_name(err));
    if (owner != ctx->context)
        return fc_fail(FLASHCL_INVALID_ARGUMENT,
                       "mem belongs to another cl_context than the flashcl context's");
    clRetainMemObject(mem);
    *size = bytes;
    *out = mem;
    return FLASHCL_SUCCESS;
}

cl_mem fc_cl_buffer_mem(void *mem) { return (cl_mem)mem; }

void fc_cl_context_objects(const void *opaque, cl_context *context, cl_device_id *device,
                           cl_command_queue *queue) {
    const fc_cl_context *ctx = opaque;
    if (context) *context = ctx->context;
    if (device) *device = ctx->dev.device;
    if (queue) *queue = ctx->queue;
}

const fc_backend fc_opencl_backend = {
    .name = "opencl",
    .kind = FLASHCL_BACKEND_OPENCL,
    .list_devices = cl_list_devices,
    .context_create = cl_context_create,
    .context_destroy = cl_context_destroy,
    .context_device = cl_context_device,
    .finish = cl_finish,
    .build_info = cl_build_info,
    .buffer_create = cl_buffer_create,
    .buffer_release = cl_buffer_release,
    .buffer_write = cl_buffer_write,
    .buffer_read = cl_buffer_read,
    .softmax = fc_cl_softmax,
    .attention_forward = fc_cl_attention_forward,
    .attention_merge = fc_cl_attention_merge,
};
