/* The CUDA backend's devices, contexts, streams and buffers, and its entry in the backend table.
 * Contexts run in the device's primary context (the one the CUDA runtime, and so PyTorch, uses)
 * on a non-blocking stream of their own, or on a caller's stream (flashcl_cuda.h). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"
#include "split_state.h"
#include "../error.h"

/* The fatbinary holds code for compute capability 8.0 and newer (cmake/cuda.cmake); older
 * devices are not listed, so AUTO falls back to OpenCL on them. */
#define FC_CUDA_MIN_MAJOR 8

/* ---- devices ------------------------------------------------------------------------------ */

int fc_cuda_device_attribute(const fc_cu_api *cu, CUdevice device,
                             CUdevice_attribute attribute) {
    int value = 0;
    if (cu->DeviceGetAttribute(&value, attribute, device) != CUDA_SUCCESS) return 0;
    return value;
}

/* The fatbinary's code objects come from the toolkit whose cuda.h we were compiled with; a
 * driver of an older major release cannot load them (and cannot JIT its PTX). Its devices are
 * not listed, so AUTO falls back to OpenCL instead of failing in cuModuleLoadData. */
static int driver_can_load_our_kernels(const fc_cu_api *cu) {
    int version = 0;
    return cu->DriverGetVersion(&version) == CUDA_SUCCESS && version / 1000 >= CUDA_VERSION / 1000;
}

/* The ordinal of the `index`-th usable device, or -1; *count receives how many are usable. */
static int usable_ordinal(const fc_cu_api *cu, int index, int *count) {
    int n = 0, ordinal, found = -1, usable = 0;
    if (!driver_can_load_our_kernels(cu) || cu->DeviceGetCount(&n) != CUDA_SUCCESS) n = 0;
    for (ordinal = 0; ordinal < n; ordinal++) {
        CUdevice device;
        if (cu->DeviceGet(&device, ordinal) != CUDA_SUCCESS) continue;
        if (fc_cuda_device_attribute(cu, device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR) <
            FC_CUDA_MIN_MAJOR)
            continue;
        if (usable == index) found = ordinal;
        usable++;
    }
    if (count) *count = usable;
    return found;
}

static void describe(const fc_cu_api *cu, CUdevice device, flashcl_device_info *info) {
    int version = 0;
    size_t bytes = 0;
    memset(info, 0, sizeof *info);
    info->backend = FLASHCL_BACKEND_CUDA;
    if (cu->DeviceGetName(info->name, (int)sizeof info->name, device) != CUDA_SUCCESS)
        snprintf(info->name, sizeof info->name, "CUDA device");
    snprintf(info->vendor, sizeof info->vendor, "NVIDIA");
    snprintf(info->platform, sizeof info->platform, "CUDA");
    cu->DriverGetVersion(&version);
    snprintf(info->driver, sizeof info->driver, "CUDA %d.%d (sm_%d%d)", version / 1000,
             version % 1000 / 10,
             fc_cuda_device_attribute(cu, device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
             fc_cuda_device_attribute(cu, device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR));
    if (cu->DeviceTotalMem(&bytes, device) == CUDA_SUCCESS) info->global_mem_bytes = bytes;
    /* What one block may use after opting in (cuFuncSetAttribute), not the 48 KiB default. */
    info->local_mem_bytes = (size_t)fc_cuda_device_attribute(
        cu, device, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
    info->compute_units =
        fc_cuda_device_attribute(cu, device, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    info->subgroup_size = 32;
    info->features = FLASHCL_FEATURE_SUBGROUPS | FLASHCL_FEATURE_MATRIX_UNITS |
                     FLASHCL_FEATURE_FP16_ARITH | FLASHCL_FEATURE_GPU;
}

/* No driver, or no usable device, is not an error: the backend simply has no devices. */
static flashcl_status cuda_list_devices(flashcl_device_info *out, size_t capacity,
                                        size_t *count) {
    const fc_cu_api *cu = fc_cu();
    int usable = 0, i;
    if (!cu) return FLASHCL_SUCCESS;
    usable_ordinal(cu, -1, &usable);
    for (i = 0; i < usable; i++) {
        CUdevice device;
        int ordinal = usable_ordinal(cu, i, NULL);
        if (*count + (size_t)i >= capacity) continue;
        if (ordinal < 0 || cu->DeviceGet(&device, ordinal) != CUDA_SUCCESS) {
            memset(&out[*count + i], 0, sizeof out[0]);
            out[*count + i].backend = FLASHCL_BACKEND_CUDA;
            continue;
        }
        describe(cu, device, &out[*count + i]);
    }
    *count += (size_t)usable;
    return FLASHCL_SUCCESS;
}

/* ---- contexts ------------------------------------------------------------------------------ */

flashcl_status fc_cuda_enter(fc_cuda_context *ctx) {
    FC_CU_CHECK(fc_cu()->CtxPushCurrent(ctx->primary), "cuCtxPushCurrent");
    return FLASHCL_SUCCESS;
}

void fc_cuda_leave(fc_cuda_context *ctx) {
    CUcontext popped;
    (void)ctx;
    fc_cu()->CtxPopCurrent(&popped);
}

static CUstream current_stream(fc_cuda_context *ctx) {
    CUstream stream;
    mtx_lock(&ctx->lock);
    stream = ctx->stream;
    mtx_unlock(&ctx->lock);
    return stream;
}

static void cuda_context_destroy(void *opaque) {
    fc_cuda_context *ctx = opaque;
    const fc_cu_api *cu = fc_cu();
    if (!ctx) return;
    /* (A caller's stream set with flashcl_context_set_cuda_stream is the caller's to wait for;
     * flashcl_context_destroy has already called finish on it.) */
    if (ctx->primary && fc_cuda_enter(ctx) == FLASHCL_SUCCESS) {
        if (ctx->own_stream) {
            cu->StreamSynchronize(ctx->own_stream);
            cu->StreamDestroy(ctx->own_stream);
        }
        if (ctx->switch_event) cu->EventDestroy(ctx->switch_event);
        if (ctx->scratch) cu->MemFree(ctx->scratch);
        fc_cuda_split_state_free(ctx);
        fc_cuda_unload_kernels(ctx);
        fc_cuda_leave(ctx);
    }
    if (ctx->primary) cu->DevicePrimaryCtxRelease(ctx->device);
    mtx_destroy(&ctx->lock);
    free(ctx);
}

static flashcl_status cuda_context_create(int index, const char *cache_dir, void **out) {
    const fc_cu_api *cu = fc_cu();
    fc_cuda_context *ctx;
    flashcl_status st;
    CUresult r;
    int usable = 0;
    (void)cache_dir; /* nothing to cache: the kernels are compiled ahead of time */
    if (!cu)
        return fc_fail(FLASHCL_DEVICE_NOT_FOUND, "no CUDA device: %s",
                       fc_cu_unavailable_reason());
    ctx = calloc(1, sizeof *ctx);
    if (!ctx) return fc_fail(FLASHCL_OUT_OF_MEMORY, "out of host memory");
    if (mtx_init(&ctx->lock, mtx_plain) != thrd_success) {
        free(ctx);
        return fc_fail(FLASHCL_BACKEND_ERROR, "mtx_init failed");
    }
    ctx->ordinal = usable_ordinal(cu, index, &usable);
    if (ctx->ordinal < 0) {
        int version = 0;
        cu->DriverGetVersion(&version);
        cuda_context_destroy(ctx);
        return fc_fail(FLASHCL_DEVICE_NOT_FOUND,
                       "CUDA device %d does not exist (%d usable: compute capability 8.0+, and a "
                       "driver for CUDA %d.x or newer; this one is CUDA %d.%d)",
                       index, usable, CUDA_VERSION / 1000, version / 1000, version % 1000 / 10);
    }
    r = cu->DeviceGet(&ctx->device, ctx->ordinal);
    if (r != CUDA_SUCCESS) {
        cuda_context_destroy(ctx);
        return fc_cu_fail(r, "cuDeviceGet");
    }
    describe(cu, ctx->device, &ctx->info);
    ctx->sm_count = ctx->info.compute_units;
    ctx->cc_major =
        fc_cuda_device_attribute(cu, ctx->device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    ctx->cc_minor =
        fc_cuda_device_attribute(cu, ctx->device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    ctx->cooperative =
        fc_cuda_device_attribute(cu, ctx->device, CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH);
    r = cu->DevicePrimaryCtxRetain(&ctx->primary, ctx->device);
    if (r != CUDA_SUCCESS) {
        ctx->primary = NULL;
        cuda_context_destroy(ctx);
        return fc_cu_fail(r, "cuDevicePrimaryCtxRetain");
    }
    st = fc_cuda_enter(ctx);
    if (st != FLASHCL_SUCCESS) {
        cuda_context_destroy(ctx);
        return st;
    }
    r = cu->StreamCreate(&ctx->own_stream, CU_STREAM_NON_BLOCKING);
    if (r != CUDA_SUCCESS) {
        ctx->own_stream = NULL;
        st = fc_cu_fail(r, "cuStreamCreate");
    } else {
        ctx->stream = ctx->own_stream;
        r = cu->EventCreate(&ctx->switch_event, CU_EVENT_DISABLE_TIMING);
        if (r != CUDA_SUCCESS) {
            ctx->switch_event = NULL;
            st = fc_cu_fail(r, "cuEventCreate");
        } else {
            st = fc_cuda_load_kernels(ctx);
        }
    }
    fc_cuda_leave(ctx);
    if (st != FLASHCL_SUCCESS) {
        cuda_context_destroy(ctx);
        return st;
    }
    *out = ctx;
    return FLASHCL_SUCCESS;
}

static flashcl_status cuda_context_device(const void *opaque, flashcl_device_info *out) {
    *out = ((const fc_cuda_context *)opaque)->info;
    return FLASHCL_SUCCESS;
}

/* Nothing is compiled at run time (the fatbinary was built by nvcc with the library), so the
 * kernels always come "from cache"; the time is what loading the module took. */
static void cuda_build_info(const void *opaque, int *from_cache, double *seconds) {
    const fc_cuda_context *ctx = opaque;
    if (from_cache) *from_cache = 1;
    if (seconds) *seconds = ctx->load_seconds;
}

static flashcl_status cuda_finish(void *opaque) {
    fc_cuda_context *ctx = opaque;
    flashcl_status st = fc_cuda_enter(ctx);
    CUresult r;
    if (st != FLASHCL_SUCCESS) return st;
    r = fc_cu()->StreamSynchronize(current_stream(ctx));
    fc_cuda_leave(ctx);
    return r == CUDA_SUCCESS ? FLASHCL_SUCCESS : fc_cu_fail(r, "cuStreamSynchronize");
}

flashcl_status fc_cuda_scratch(fc_cuda_context *ctx, size_t bytes, CUdeviceptr *out) {
    const fc_cu_api *cu = fc_cu();
    CUresult r;
    if (bytes > ctx->scratch_bytes) {
        /* Kernels still queued may use the old scratch: wait for them before freeing it. */
        if (ctx->scratch) {
            r = cu->StreamSynchronize(ctx->stream);
            if (r != CUDA_SUCCESS) return fc_cu_fail(r, "cuStreamSynchronize");
            cu->MemFree(ctx->scratch);
            ctx->scratch = 0;
            ctx->scratch_bytes = 0;
        }
        if (bytes < ((size_t)1 << 20)) bytes = (size_t)1 << 20; /* few regrowths */
        r = cu->MemAlloc(&ctx->scratch, bytes);
        if (r != CUDA_SUCCESS) {
            ctx->scratch = 0;
            return fc_cu_fail(r, "cuMemAlloc (split-row scratch)");
        }
        ctx->scratch_bytes = bytes;
    }
    *out = ctx->scratch;
    return FLASHCL_SUCCESS;
}

/* ---- buffers ------------------------------------------------------------------------------- */

static flashcl_status cuda_buffer_create(void *opaque, size_t bytes, void **out) {
    fc_cuda_context *ctx = opaque;
    fc_cuda_buffer *buf = calloc(1, sizeof *buf);
    flashcl_status st;
    CUresult r;
    if (!buf) return fc_fail(FLASHCL_OUT_OF_MEMORY, "out of host memory");
    st = fc_cuda_enter(ctx);
    if (st != FLASHCL_SUCCESS) {
        free(buf);
        return st;
    }
    r = fc_cu()->MemAlloc(&buf->pointer, bytes);
    fc_cuda_leave(ctx);
    if (r != CUDA_SUCCESS) {
        free(buf);
        return fc_cu_fail(r, "cuMemAlloc");
    }
    buf->bytes = bytes;
    buf->owned = 1;
    *out = buf;
    return FLASHCL_SUCCESS;
}

static void cuda_buffer_release(void *opaque, void *mem) {
    fc_cuda_context *ctx = opaque;
    fc_cuda_buffer *buf = mem;
    if (!buf) return;
    if (buf->owned && fc_cuda_enter(ctx) == FLASHCL_SUCCESS) {
        /* Work already enqueued may still read or write it (OpenCL defers the release the same
         * way); cuMemFree itself does not wait for a non-blocking stream. */
        fc_cu()->StreamSynchronize(current_stream(ctx));
        fc_cu()->MemFree(buf->pointer);
        fc_cuda_leave(ctx);
    }
    free(buf);
}

/* Copies are enqueued on the context's stream (ordered with its work) and then waited for:
 * the API promises that src may be reused / dst holds the data on return. */
static flashcl_status cuda_buffer_write(void *opaque, void *mem, size_t offset, const void *src,
                                        size_t bytes) {
    fc_cuda_context *ctx = opaque;
    const fc_cuda_buffer *buf = mem;
    CUstream stream = current_stream(ctx);
    flashcl_status st = fc_cuda_enter(ctx);
    CUresult r;
    if (st != FLASHCL_SUCCESS) return st;
    r = fc_cu()->MemcpyHtoDAsync(buf->pointer + offset, src, bytes, stream);
    if (r == CUDA_SUCCESS) r = fc_cu()->StreamSynchronize(stream);
    fc_cuda_leave(ctx);
    return r == CUDA_SUCCESS ? FLASHCL_SUCCESS : fc_cu_fail(r, "cuMemcpyHtoDAsync");
}

static flashcl_status cuda_buffer_read(void *opaque, void *mem, size_t offset, void *dst,
                                       size_t bytes) {
    fc_cuda_context *ctx = opaque;
    const fc_cuda_buffer *buf = mem;
    CUstream stream = current_stream(ctx);
    flashcl_status st = fc_cuda_enter(ctx);
    CUresult r;
    if (st != FLASHCL_SUCCESS) return st;
    r = fc_cu()->MemcpyDtoHAsync(dst, buf->pointer + offset, bytes, stream);
    if (r == CUDA_SUCCESS) r = fc_cu()->StreamSynchronize(stream);
    fc_cuda_leave(ctx);
    return r == CUDA_SUCCESS ? FLASHCL_SUCCESS : fc_cu_fail(r, "cuMemcpyDtoHAsync");
}

/* ---- interop (src/api_cuda.c) --------------------------------------------------------------- */

flashcl_status fc_cuda_buffer_wrap(void *opaque, void *device_ptr, size_t bytes, void **out) {
    fc_cuda_context *ctx = opaque;
    const fc_cu_api *cu = fc_cu();
    CUdeviceptr pointer = (CUdeviceptr)(uintptr_t)device_ptr, base = 0;
    size_t extent = 0;
    int ordinal = -1;
    fc_cuda_buffer *buf;
    CUresult r;
    flashcl_status st = fc_cuda_enter(ctx);
    if (st != FLASHCL_SUCCESS) return st;
    r = cu->PointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, pointer);
    if (r != CUDA_SUCCESS) {
        fc_cuda_leave(ctx);
        return fc_fail(FLASHCL_INVALID_ARGUMENT,
                       "device_ptr %p is not CUDA memory (cuPointerGetAttribute: %s)",
                       device_ptr, fc_cu_error_name(r));
    }
    /* The allocation's extent, where the driver knows it (cuMemAlloc, cudaMalloc, managed). */
    r = cu->MemGetAddressRange(&base, &extent, pointer);
    fc_cuda_leave(ctx);
    if (ordinal != ctx->ordinal)
        return fc_fail(FLASHCL_INVALID_ARGUMENT,
                       "device_ptr %p is memory of CUDA device %d, the context runs on device %d",
                       device_ptr, ordinal, ctx->ordinal);
    if (r == CUDA_SUCCESS && (pointer - base > extent || bytes > extent - (pointer - base)))
        return fc_fail(FLASHCL_INVALID_ARGUMENT,
                       "[device_ptr, device_ptr + %zu) extends past its allocation of %zu bytes "
                       "(device_ptr is %llu bytes into it)",
                       bytes, extent, (unsigned long long)(pointer - base));
    buf = calloc(1, sizeof *buf);
    if (!buf) return fc_fail(FLASHCL_OUT_OF_MEMORY, "out of host memory");
    buf->pointer = pointer;
    buf->bytes = bytes;
    buf->owned = 0;
    *out = buf;
    return FLASHCL_SUCCESS;
}

flashcl_status fc_cuda_set_stream(void *opaque, void *stream_handle) {
    fc_cuda_context *ctx = opaque;
    const fc_cu_api *cu = fc_cu();
    CUstream stream = stream_handle ? (CUstream)stream_handle : ctx->own_stream;
    CUresult r = CUDA_SUCCESS;
    const char *failed = NULL;
    flashcl_status st = fc_cuda_enter(ctx);
    if (st != FLASHCL_SUCCESS) return st;
    /* A real stream must belong to this context (the two special handles, the legacy and the
     * per-thread default stream, belong to whichever context is current: ours). */
    if (stream != CU_STREAM_LEGACY && stream != CU_STREAM_PER_THREAD) {
        CUcontext owner = NULL;
        r = cu->StreamGetCtx(stream, &owner);
        if (r != CUDA_SUCCESS || owner != ctx->primary) {
            fc_cuda_leave(ctx);
            if (r != CUDA_SUCCESS)
                return fc_fail(FLASHCL_INVALID_ARGUMENT, "stream %p is not a valid CUstream (%s)",
                               stream_handle, fc_cu_error_name(r));
            return fc_fail(FLASHCL_INVALID_ARGUMENT,
                           "stream %p belongs to another CUDA context than device %d's primary "
                           "context",
                           stream_handle, ctx->ordinal);
        }
    }
    mtx_lock(&ctx->lock);
    if (stream != ctx->stream) {
        /* Work enqueued before the switch stays ahead of work enqueued after it. */
        r = cu->EventRecord(ctx->switch_event, ctx->stream);
        if (r != CUDA_SUCCESS) failed = "cuEventRecord";
        else if ((r = cu->StreamWaitEvent(stream, ctx->switch_event, 0)) != CUDA_SUCCESS)
            failed = "cuStreamWaitEvent";
        else ctx->stream = stream;
    }
    mtx_unlock(&ctx->lock);
    fc_cuda_leave(ctx);
    return failed ? fc_cu_fail(r, failed) : FLASHCL_SUCCESS;
}

void *fc_cuda_buffer_pointer(const void *mem) {
    return (void *)(uintptr_t)((const fc_cuda_buffer *)mem)->pointer;
}

const fc_backend fc_cuda_backend = {
    .name = "cuda",
    .kind = FLASHCL_BACKEND_CUDA,
    .list_devices = cuda_list_devices,
    .context_create = cuda_context_create,
    .context_destroy = cuda_context_destroy,
    .context_device = cuda_context_device,
    .finish = cuda_finish,
    .build_info = cuda_build_info,
    .buffer_create = cuda_buffer_create,
    .buffer_release = cuda_buffer_release,
    .buffer_write = cuda_buffer_write,
    .buffer_read = cuda_buffer_read,
    .softmax = fc_cuda_softmax,
    .attention_forward = fc_cuda_attention_forward,
    .attention_merge = fc_cuda_attention_merge,
};
