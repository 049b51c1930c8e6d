/* The few CUDA driver calls the interop and kernel tests make themselves (cuda_test_util.c),
 * reached through dlopen like the library does, so that the tests build without cuda.h and run
 * (skipping) without a driver. The types are the driver's ABI on 64-bit Linux. */
#ifndef FLASHCL_TEST_CUDA_DRIVER_H
#define FLASHCL_TEST_CUDA_DRIVER_H

#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

typedef int td_result;                   /* CUresult: 0 is CUDA_SUCCESS */
typedef int td_device;                   /* CUdevice */
typedef void *td_context;                /* CUcontext */
typedef void *td_stream;                 /* CUstream */
typedef unsigned long long td_deviceptr; /* CUdeviceptr */

#define TD_POINTER_ATTRIBUTE_DEVICE_ORDINAL 9 /* CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL */
#define TD_STREAM_NON_BLOCKING 1u             /* CU_STREAM_NON_BLOCKING */

/* X(member, symbol, parameters) */
#define TD_FUNCTIONS(X)                                                                         \
    X(Init, "cuInit", (unsigned flags))                                                         \
    X(DeviceGet, "cuDeviceGet", (td_device * device, int ordinal))                              \
    X(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", (td_context * ctx, td_device device)) \
    X(DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", (td_device device))              \
    X(CtxPushCurrent, "cuCtxPushCurrent_v2", (td_context ctx))                                  \
    X(CtxPopCurrent, "cuCtxPopCurrent_v2", (td_context * ctx))                                  \
    X(CtxSynchronize, "cuCtxSynchronize", (void))                                               \
    X(MemAlloc, "cuMemAlloc_v2", (td_deviceptr * p, size_t bytes))                              \
    X(MemFree, "cuMemFree_v2", (td_deviceptr p))                                                \
    X(MemcpyHtoD, "cuMemcpyHtoD_v2", (td_deviceptr dst, const void *src, size_t bytes))         \
    X(MemcpyDtoH, "cuMemcpyDtoH_v2", (void *dst, td_deviceptr src, size_t bytes))               \
    X(PointerGetAttribute, "cuPointerGetAttribute", (void *data, int attribute, td_deviceptr p)) \
    X(StreamCreate, "cuStreamCreate", (td_stream * stream, unsigned flags))                     \
    X(StreamSynchronize, "cuStreamSynchronize", (td_stream stream))                             \
    X(StreamDestroy, "cuStreamDestroy_v2", (td_stream stream))

typedef struct td_api {
#define TD_MEMBER_(member, symbol, params) td_result (*member) params;
    TD_FUNCTIONS(TD_MEMBER_)
#undef TD_MEMBER_
} td_api;

/* Loads libcuda.so.1 and initialises it. Returns 0 and writes why into `why` when there is no
 * usable driver. */
static inline int td_load(td_api *api, char *why, size_t why_size) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(why, why_size, "no CUDA driver (libcuda.so.1: %s)", dlerror());
        return 0;
    }
#define TD_RESOLVE_(member, symbol, params)                                                     \
    {                                                                                           \
        void *address = dlsym(lib, symbol);                                                     \
        if (!address) {                                                                         \
            snprintf(why, why_size, "the CUDA driver lacks %s", symbol);                        \
            return 0;                                                                           \
        }                                                                                       \
        memcpy(&api->member, &address, sizeof address);                                         \
    }
    TD_FUNCTIONS(TD_RESOLVE_)
#undef TD_RESOLVE_
    if (api->Init(0) != 0) {
        snprintf(why, why_size, "cuInit failed: no usable CUDA device");
        return 0;
    }
    return 1;
}

#endif
