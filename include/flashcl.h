/* flashcl: softmax and fused attention on any OpenCL device (and CUDA on NVIDIA).
 *
 * Every function returns a flashcl_status; on failure flashcl_last_error() holds a message
 * that names what was wrong, and nothing was written to any output. All symbols are prefixed
 * flashcl_ / FLASHCL_. This header needs neither OpenCL nor CUDA headers. */
#ifndef FLASHCL_H
#define FLASHCL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32) && defined(FLASHCL_SHARED_BUILD)
#define FLASHCL_API __declspec(dllexport)
#elif defined(__GNUC__)
#define FLASHCL_API __attribute__((visibility("default")))
#else
#define FLASHCL_API
#endif

#define FLASHCL_VERSION_MAJOR 0
#define FLASHCL_VERSION_MINOR 1
#define FLASHCL_VERSION_PATCH 0

/* The status table: X(name, message). One list generates the enum, the names and the
 * messages so they never drift apart. New codes go at the end. */
#define FLASHCL_STATUS_TABLE(X)                                                               \
    X(FLASHCL_SUCCESS, "success")                                                             \
    X(FLASHCL_INVALID_ARGUMENT, "invalid argument")                                           \
    X(FLASHCL_UNSUPPORTED, "unsupported on this device or backend")                           \
    X(FLASHCL_DEVICE_NOT_FOUND, "device not found")                                           \
    X(FLASHCL_BUILD_FAILED, "kernel build failed")                                            \
    X(FLASHCL_OUT_OF_MEMORY, "out of memory")                                                 \
    X(FLASHCL_BACKEND_ERROR, "backend runtime error")

typedef enum flashcl_status {
#define FLASHCL_STATUS_ENUM_(name, message) name,
    FLASHCL_STATUS_TABLE(FLASHCL_STATUS_ENUM_)
#undef FLASHCL_STATUS_ENUM_
} flashcl_status;

/* Short constant text for a status ("invalid argument"); "unknown status" for values outside
 * the enum. Never NULL. */
FLASHCL_API const char *flashcl_status_string(flashcl_status status);

/* The detail of the last failure on the calling thread: which argument, which shape, the
 * build log. Never NULL; "" when the thread has seen no failure. Valid until the next flashcl
 * call on the same thread. */
FLASHCL_API const char *flashcl_last_error(void);

typedef enum flashcl_backend {
    FLASHCL_BACKEND_AUTO = 0,
    FLASHCL_BACKEND_OPENCL,
    FLASHCL_BACKEND_CUDA
} flashcl_backend;

typedef enum flashcl_dtype { FLASHCL_F32 = 0, FLASHCL_F16, FLASHCL_BF16 } flashcl_dtype;

/* Bits of flashcl_device_info.features. */
#define FLASHCL_FEATURE_SUBGROUPS 0x1u    /* sub-group reductions (khr, intel or NVIDIA PTX) */
#define FLASHCL_FEATURE_MATRIX_UNITS 0x2u /* tensor cores / XMX / MFMA reachable by kernels */
#define FLASHCL_FEATURE_FP16_ARITH 0x4u   /* cl_khr_fp16 (storage never needs it) */
#define FLASHCL_FEATURE_GPU 0x8u          /* the device is a GPU (not a CPU or accelerator) */

typedef struct flashcl_device_info {
    flashcl_backend backend;
    char name[256], vendor[128], platform[128], driver[128];
    size_t global_mem_bytes, local_mem_bytes;
    int compute_units;
    int subgroup_size;          /* 0 when the device exposes none */
    unsigned features;          /* FLASHCL_FEATURE_* bits */
} flashcl_device_info;

/* Every device flashcl can use, OpenCL and CUDA, in a stable order (platform order, then
 * device order). Writes at most `capacity` entries to `out` (which may be NULL when capacity is
 * 0) and the total number of devices to *count. Zero devices is a success with *count = 0. */
FLASHCL_API flashcl_status flashcl_list_devices(flashcl_device_info *out, size_t capacity,
                                                size_t *count);

typedef struct flashcl_context flashcl_context;
typedef struct flashcl_buffer flashcl_buffer;

typedef struct flashcl_context_options {
    flashcl_backend backend;    /* AUTO: CUDA if a CUDA device is usable, else the best OpenCL GPU,
                                   else any OpenCL device (PoCL on a CPU) */
    int device_index;           /* index into flashcl_list_devices, or -1 for "best" */
    const char *device_match;   /* case-insensitive substring of the device name, or NULL */
    const char *cache_dir;      /* NULL: default per-user cache; "": no binary cache */
} flashcl_context_options;

/* Opens a device and compiles (or loads from the binary cache) the kernels for it. opts may be
 * NULL (AUTO, best device, default cache). The environment variables FLASHCL_BACKEND
 * (opencl|cuda) and FLASHCL_DEVICE (an index or a name substring) override the options, so any
 * program can be pointed at another device; FLASHCL_CACHE_DIR overrides the cache folder.
 * On success *out owns the device queue until flashcl_context_destroy. */
FLASHCL_API flashcl_status flashcl_context_create(const flashcl_context_options *opts,
                                                  flashcl_context **out);

/* Waits for enqueued work, releases every buffer still alive in the context and the context
 * itself. NULL is ignored. */
FLASHCL_API void flashcl_context_destroy(flashcl_context *ctx);

/* Describes the device the context runs on. */
FLASHCL_API flashcl_status flashcl_context_device(const flashcl_context *ctx,
                                                  flashcl_device_info *out);

/* How the context got its kernels: *from_cache is 1 when every program binary was loaded from
 * the on-disk cache (no compiler ran), 0 when something was compiled; *seconds is the time
 * spent creating the programs. Either pointer may be NULL. */
FLASHCL_API flashcl_status flashcl_context_build_info(const flashcl_context *ctx, int *from_cache,
                                                      double *seconds);

/* Blocks until all work enqueued on the context so far has finished. */
FLASHCL_API flashcl_status flashcl_finish(flashcl_context *ctx);

/* Allocates `bytes` (> 0) of device memory owned by the context. Contents are undefined. */
FLASHCL_API flashcl_status flashcl_buffer_create(flashcl_context *ctx, size_t bytes,
                                                 flashcl_buffer **out);

/* Releases a buffer (for wrapped memory, only flashcl's reference). NULL is ignored. */
FLASHCL_API void flashcl_buffer_destroy(flashcl_buffer *buf);

/* The buffer's size in bytes; 0 for NULL. */
FLASHCL_API size_t flashcl_buffer_size(const flashcl_buffer *buf);

/* Copies `bytes` from host memory into the buffer at byte `offset`. Ordered after the work
 * already enqueued on the context; returns once src may be reused. */
FLASHCL_API flashcl_status flashcl_buffer_write(flashcl_buffer *buf, size_t offset,
                                                const void *src, size_t bytes);

/* Copies `bytes` from the buffer at byte `offset` to host memory, after all work enqueued so
 * far on the context has finished. Returns once dst holds the data. */
FLASHCL_API flashcl_status flashcl_buffer_read(const flashcl_buffer *buf, size_t offset,
                                               void *dst, size_t bytes);

/* A strided view of a buffer. Strides are in elements; the last dimension is contiguous
 * (strides[ndim-1] == 1). */
typedef struct flashcl_tensor {
    flashcl_buffer *buffer;
    size_t offset;              /* bytes */
    flashcl_dtype dtype;
    int ndim;
    int64_t shape[4];
    int64_t strides[4];
} flashcl_tensor;

/* How a softmax is laid out on the device. AUTO (the default) picks from the shape and the
 * device; the others force one variant, for tests and benchmarks, and return
 * FLASHCL_UNSUPPORTED where that variant cannot run the shape on this device. */
typedef enum flashcl_softmax_variant {
    FLASHCL_SOFTMAX_AUTO = 0,
    FLASHCL_SOFTMAX_ROW_IN_REGISTERS, /* one read, one write: rows that fit a work-group */
    FLASHCL_SOFTMAX_ONLINE_CHUNKED,   /* pass 1 keeps (max, sum), pass 2 normalises: any length */
    FLASHCL_SOFTMAX_SPLIT_ROW         /* long rows spread over many work-groups, then merged */
} flashcl_softmax_variant;

typedef struct flashcl_softmax_params {
    float scale;                /* inputs are multiplied by scale first; 0 means 1 */
    int log;                    /* nonzero: log-softmax */
    flashcl_softmax_variant variant; /* added after api.md: AUTO (0) unless forced */
} flashcl_softmax_params;

/* Softmax (or log-softmax) over the last dimension of a 2-D view x [rows, cols] into y of the
 * same shape; x and y may have different dtypes and row strides. x and y may be the same view
 * (in place), but may not otherwise overlap. params may be NULL (scale 1, softmax). Results
 * match torch.softmax / torch.log_softmax including special values, and are bitwise
 * reproducible on one device. The work is enqueued; flashcl_finish or a buffer read waits. */
FLASHCL_API flashcl_status flashcl_softmax(flashcl_context *ctx,
                                           const flashcl_softmax_params *params,
                                           const flashcl_tensor *x, const flashcl_tensor *y);

typedef struct flashcl_attention_params {
    float scale;                /* 0 means 1/sqrt(head_dim) */
    int causal;                 /* bottom-right aligned when seqlen_q != seqlen_k */
    int window_left, window_right; /* sliding window in keys; -1 = unbounded */
    float softcap;              /* 0 = off; else scores become softcap*tanh(scores/softcap) */
} flashcl_attention_params;

/* Fused attention forward: o = softmax(scale·q·kᵀ + mask)·v without materialising the scores.
 * q [B, Sq, Hq, D], k and v [B, Sk, Hkv, D], o [B, Sq, Hq, D] — any strides with a contiguous
 * last dimension, so BSHD and BHSD layouts both work; Hq a multiple of Hkv (GQA/MQA: query head
 * h reads kv head h / (Hq/Hkv)). q, k, v and o share one dtype. lse, if not NULL, is f32
 * [B, Hq, Sq] and receives the natural-log log-sum-exp of the final scores per query row.
 * Causal masks and windows align bottom-right (key j visible to query i iff
 * j <= i + Sk - Sq). A row with no visible key outputs zeros and lse = -inf. o may not overlap
 * q, k, v or lse. params may be NULL. */
FLASHCL_API flashcl_status flashcl_attention_forward(flashcl_context *ctx,
                                                     const flashcl_attention_params *params,
                                                     const flashcl_tensor *q,
                                                     const flashcl_tensor *k,
                                                     const flashcl_tensor *v,
                                                     const flashcl_tensor *o,
                                                     const flashcl_tensor *lse);

/* Merges `parts` partial attention results of the same queries over disjoint key sets (split-KV,
 * several calls, several devices): o_parts[i] [B, Sq, H, D] with lse_parts[i] f32 [B, H, Sq]
 * into o [B, Sq, H, D] (and lse, if not NULL). o[i] = sum_p exp(lse_p - lse) · o_p with
 * lse = log sum_p exp(lse_p). Rows whose partial lse are all -inf merge to zeros and -inf.
 * All o_parts share one dtype; o may have another. o and lse may not overlap any input. */
FLASHCL_API flashcl_status flashcl_attention_merge(flashcl_context *ctx, size_t parts,
                                                   const flashcl_tensor *o_parts,
                                                   const flashcl_tensor *lse_parts,
                                                   const flashcl_tensor *o,
                                                   const flashcl_tensor *lse);

#ifdef __cplusplus
}
#endif
#endif /* FLASHCL_H */
