/* The CUDA driver API, reached at run time through dlopen("libcuda.so.1") and dlsym, so that
 * libflashcl links against no CUDA library, needs no toolkit at run time, and loads (listing no
 * CUDA devices) on machines without an NVIDIA driver. cuda.h is included for its types only;
 * nothing in flashcl calls a cu* symbol directly (the linker would refuse: -lcuda is absent). */
#ifndef FLASHCL_CUDA_DRIVER_H
#define FLASHCL_CUDA_DRIVER_H

#include <cuda.h>

#include "../backend.h"

/* Every entry point flashcl uses: X(member, exported symbol, parameter list). Versioned symbols
 * are named explicitly (cuMemAlloc_v2 ...): the unversioned exports keep their old 32-bit ABI.
 * The _ptsz variants are never used: flashcl passes explicit streams. */
#define FC_CU_REQUIRED(X)                                                                      \
    X(Init, "cuInit", (unsigned int flags))                                                    \
    X(DriverGetVersion, "cuDriverGetVersion", (int *version))                                  \
    X(GetErrorName, "cuGetErrorName", (CUresult error, const char **name))                     \
    X(DeviceGetCount, "cuDeviceGetCount", (int *count))                                        \
    X(DeviceGet, "cuDeviceGet", (CUdevice * device, int ordinal))                              \
    X(DeviceGetName, "cuDeviceGetName", (char *name, int length, CUdevice device))             \
    X(DeviceGetAttribute, "cuDeviceGetAttribute",                                              \
      (int *value, CUdevice_attribute attribute, CUdevice device))                             \
    X(DeviceTotalMem, "cuDeviceTotalMem_v2", (size_t * bytes, CUdevice device))               \
    X(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", (CUcontext * context, CUdevice device)) \
    X(DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", (CUdevice device))              \
    X(CtxPushCurrent, "cuCtxPushCurrent_v2", (CUcontext context))                              \
    X(CtxPopCurrent, "cuCtxPopCurrent_v2", (CUcontext * context))                              \
    X(StreamCreate, "cuStreamCreate", (CUstream * stream, unsigned int flags))                 \
    X(StreamDestroy, "cuStreamDestroy_v2", (CUstream stream))                                  \
    X(StreamSynchronize, "cuStreamSynchronize", (CUstream stream))                             \
    X(StreamWaitEvent, "cuStreamWaitEvent", (CUstream stream, CUevent event, unsigned int flags)) \
    X(StreamGetCtx, "cuStreamGetCtx", (CUstream stream, CUcontext * context))                  \
    X(EventCreate, "cuEventCreate", (CUevent * event, unsigned int flags))                     \
    X(EventRecord, "cuEventRecord", (CUevent event, CUstream stream))                          \
    X(EventDestroy, "cuEventDestroy_v2", (CUevent event))                                      \
    X(MemAlloc, "cuMemAlloc_v2", (CUdeviceptr * pointer, size_t bytes))                        \
    X(MemFree, "cuMemFree_v2", (CUdeviceptr pointer))                                          \
    X(MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2",                                                 \
      (CUdeviceptr dst, const void *src, size_t bytes, CUstream stream))                       \
    X(MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2",                                                 \
      (void *dst, CUdeviceptr src, size_t bytes, CUstream stream))                             \
    X(MemsetD32Async, "cuMemsetD32Async",                                                      \
      (CUdeviceptr dst, unsigned int value, size_t count, CUstream stream))                    \
    X(MemGetAddressRange, "cuMemGetAddressRange_v2",                                           \
      (CUdeviceptr * base, size_t * bytes, CUdeviceptr pointer))                               \
    X(PointerGetAttribute, "cuPointerGetAttribute",                                            \
      (void *data, CUpointer_attribute attribute, CUdeviceptr pointer))                        \
    X(ModuleLoadData, "cuModuleLoadData", (CUmodule * module, const void *image))              \
    X(ModuleUnload, "cuModuleUnload", (CUmodule module))                                       \
    X(ModuleGetFunction, "cuModuleGetFunction",                                                \
      (CUfunction * function, CUmodule module, const char *name))                              \
    X(FuncGetAttribute, "cuFuncGetAttribute",                                                  \
      (int *value, CUfunction_attribute attribute, CUfunction function))                       \
    X(FuncSetAttribute, "cuFuncSetAttribute",                                                  \
      (CUfunction function, CUfunction_attribute attribute, int value))                        \
    X(OccupancyMaxActiveBlocksPerMultiprocessor, "cuOccupancyMaxActiveBlocksPerMultiprocessor", \
      (int *blocks, CUfunction function, int block_size, size_t dynamic_smem))                 \
    X(LaunchKernel, "cuLaunchKernel",                                                          \
      (CUfunction function, unsigned int grid_x, unsigned int grid_y, unsigned int grid_z,     \
       unsigned int block_x, unsigned int block_y, unsigned int block_z,                       \
       unsigned int dynamic_smem, CUstream stream, void **params, void **extra))               \
    X(LaunchCooperativeKernel, "cuLaunchCooperativeKernel",                                    \
      (CUfunction function, unsigned int grid_x, unsigned int grid_y, unsigned int grid_z,     \
       unsigned int block_x, unsigned int block_y, unsigned int block_z,                       \
       unsigned int dynamic_smem, CUstream stream, void **params))

/* Entry points flashcl uses when the driver has them and does without otherwise (NULL then):
 * cuLaunchKernelEx (CUDA 12.0) launches kernels as programmatic dependents (fc_cuda_launch). */
#define FC_CU_OPTIONAL(X)                                                                      \
    X(LaunchKernelEx, "cuLaunchKernelEx",                                                      \
      (const CUlaunchConfig *config, CUfunction function, void **params, void **extra))

/* The loaded entry points: fc_cu()->MemAlloc(&p, n) reads like the driver call it makes. */
typedef struct fc_cu_api {
#define FC_CU_MEMBER_(member, symbol, params) CUresult (*member) params;
    FC_CU_REQUIRED(FC_CU_MEMBER_)
    FC_CU_OPTIONAL(FC_CU_MEMBER_)
#undef FC_CU_MEMBER_
} fc_cu_api;

/* The driver, loaded and initialised once per process (thread-safe). NULL when it cannot be
 * used: no libcuda.so.1, a symbol missing (a driver older than CUDA 11), or cuInit failed (no
 * device, driver/kernel mismatch). fc_cu_unavailable_reason() then says why, for messages.
 * The environment variable FLASHCL_CUDA_DRIVER names another library to load instead (tests use
 * a path that does not exist to see the library behave as on a machine without a driver). */
const fc_cu_api *fc_cu(void);
const char *fc_cu_unavailable_reason(void);

/* "CUDA_ERROR_OUT_OF_MEMORY" for a result code (never NULL). */
const char *fc_cu_error_name(CUresult result);

/* Maps a failed driver call to a status and a message: "cuMemAlloc failed:
 * CUDA_ERROR_OUT_OF_MEMORY (2)". Out of memory becomes FLASHCL_OUT_OF_MEMORY, anything else
 * FLASHCL_BACKEND_ERROR. */
flashcl_status fc_cu_fail(CUresult result, const char *call);

/* Checks a driver call: on failure returns fc_cu_fail(result, "cuXxx") from the enclosing
 * function. For calls that need no cleanup on failure. */
#define FC_CU_CHECK(call_expr, call_name)                                                      \
    do {                                                                                       \
        CUresult fc_cu_result_ = (call_expr);                                                  \
        if (fc_cu_result_ != CUDA_SUCCESS) return fc_cu_fail(fc_cu_result_, call_name);        \
    } while (0)

#endif
