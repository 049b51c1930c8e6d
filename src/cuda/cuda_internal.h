/* Internal types of the CUDA backend, shared by its files (context.c, kernels.c, softmax.c,
 * attention.c). Needs cuda.h (types only, see driver.h). */
#ifndef FLASHCL_CUDA_INTERNAL_H
#define FLASHCL_CUDA_INTERNAL_H

#include <threads.h>

#include "driver.h"
#include "interop.h"
#include "../../cuda/attention_shared.h"
#include "../../cuda/softmax_shared.h"
#include "../split_regions.h"

#define FC_CUDA_DTYPES 3 /* f32, f16, bf16: indexed by flashcl_dtype */

/* Row-in-registers configurations, indexed like FC_SOFTMAX_ROW_CONFIGS. */
enum {
#define FC_ROW_CONFIG_ENUM_(name, group, items, block) FC_ROW_CONFIG_##name,
    FC_SOFTMAX_ROW_CONFIGS(FC_ROW_CONFIG_ENUM_)
#undef FC_ROW_CONFIG_ENUM_
    FC_ROW_CONFIG_COUNT
};

/* Attention configurations, indexed like FC_ATTENTION_TC_CONFIGS, FC_ATTENTION_TC_DECODE_CONFIGS,
 * FC_ATTENTION_WGMMA_CONFIGS, FC_ATTENTION_TF32_CONFIGS, FC_ATTENTION_TF32_DECODE_CONFIGS and
 * FC_ATTENTION_SIMT_CONFIGS. */
enum {
#define FC_TC_CONFIG_ENUM_(name, pad, keys, mtiles) FC_TC_CONFIG_##name,
    FC_ATTENTION_TC_CONFIGS(FC_TC_CONFIG_ENUM_)
#undef FC_TC_CONFIG_ENUM_
    FC_TC_CONFIG_COUNT
};
enum {
#define FC_TC_DECODE_CONFIG_ENUM_(name, pad, keys, stages) FC_TC_DECODE_CONFIG_##name,
    FC_ATTENTION_TC_DECODE_CONFIGS(FC_TC_DECODE_CONFIG_ENUM_)
#undef FC_TC_DECODE_CONFIG_ENUM_
    FC_TC_DECODE_CONFIG_COUNT
};
enum {
#define FC_WGMMA_CONFIG_ENUM_(name, pad, keys, wgs, pipe, blocks) FC_WGMMA_CONFIG_##name,
    FC_ATTENTION_WGMMA_CONFIGS(FC_WGMMA_CONFIG_ENUM_)
#undef FC_WGMMA_CONFIG_ENUM_
    FC_WGMMA_CONFIG_COUNT
};
enum {
#define FC_TF32_CONFIG_ENUM_(name, pad, keys) FC_TF32_CONFIG_##name,
    FC_ATTENTION_TF32_CONFIGS(FC_TF32_CONFIG_ENUM_)
#undef FC_TF32_CONFIG_ENUM_
    FC_TF32_CONFIG_COUNT
};
enum {
#define FC_TF32_DECODE_CONFIG_ENUM_(name, pad, keys, stages) FC_TF32_DECODE_CONFIG_##name,
    FC_ATTENTION_TF32_DECODE_CONFIGS(FC_TF32_DECODE_CONFIG_ENUM_)
#undef FC_TF32_DECODE_CONFIG_ENUM_
    FC_TF32_DECODE_CONFIG_COUNT
};
enum {
#define FC_SIMT_CONFIG_ENUM_(name, pad) FC_SIMT_CONFIG_##name,
    FC_ATTENTION_SIMT_CONFIGS(FC_SIMT_CONFIG_ENUM_)
#undef FC_SIMT_CONFIG_ENUM_
    FC_SIMT_CONFIG_COUNT
};

/* One attention forward kernel: its geometry (head-dim pad, packed rows and keys per block,
 * threads) and the dynamic shared memory it runs with; not usable when the device cannot give
 * that much (the configuration is then skipped). */
typedef struct fc_cuda_attention_kernel {
    const char *config;         /* the configuration's name, e.g. "d128" */
    CUfunction function;
    unsigned smem_bytes;
    int pad, rows, keys, threads;
    int usable;
    int blocks_per_sm;          /* blocks one SM holds at once (occupancy API); 0 if unusable */
    int persistent;             /* walks row blocks in a grid of at most blocks_per_sm per SM:
                                   1 for unmasked calls only, 2 causal ones too (no window) */
} fc_cuda_attention_kernel;

/* The kernels of the module, by input dtype. */
typedef struct fc_cuda_kernels {
    CUfunction softmax_rows[FC_ROW_CONFIG_COUNT][FC_CUDA_DTYPES];
    CUfunction softmax_resident[FC_CUDA_DTYPES];
    CUfunction softmax_chunked[FC_CUDA_DTYPES];
    CUfunction softmax_split_stats[FC_CUDA_DTYPES];
    CUfunction softmax_split_normalize[FC_CUDA_DTYPES];
    /* Blocks of the resident kernel one SM holds at once with p parts in shared memory
     * (occupancy API); times the SM count it bounds the cooperative grid. 0 past max_parts. */
    int softmax_resident_blocks_per_sm[FC_CUDA_DTYPES][FC_SOFTMAX_RESIDENT_MAX_SMEM_PARTS + 1];
    int softmax_resident_max_parts; /* shared-memory parts this device's blocks can hold */
    CUfunction softmax_staged[FC_CUDA_DTYPES];
    unsigned softmax_staged_smem;   /* dynamic shared memory it may use per block; 0: unusable */
    int softmax_staged_blocks_per_sm[FC_CUDA_DTYPES]; /* at that much shared memory */
    CUfunction softmax_split_held[FC_CUDA_DTYPES];
    /* Blocks of the split-held kernel one SM holds at once (occupancy API); times the SM count
     * it caps the slices of a row, which must all be running together. */
    int softmax_split_held_blocks_per_sm[FC_CUDA_DTYPES];
    /* The same kernel over rows that do not start 16-byte aligned, laid out from the 16-byte
     * boundary before each row (cuda/softmax.cuh, shifted_row), and its blocks per SM; 16-bit
     * inputs held as their bits (slices of 16384 columns). */
    CUfunction softmax_split_held_shifted[FC_CUDA_DTYPES];
    int softmax_split_held_shifted_blocks_per_sm[FC_CUDA_DTYPES];
    /* The same kernel for 16-bit inputs held as their bits (twice the columns a slice; NULL
     * for f32), and its blocks per SM. */
    CUfunction softmax_split_held_bits[FC_CUDA_DTYPES];
    int softmax_split_held_bits_blocks_per_sm[FC_CUDA_DTYPES];
    /* The pipelined split-held kernel (inputs held as their bits, every dtype): a grid of at
     * most blocks_per_sm per SM whose blocks take tickets until they run out. */
    CUfunction softmax_split_held_pipelined[FC_CUDA_DTYPES];
    int softmax_split_held_pipelined_blocks_per_sm[FC_CUDA_DTYPES];
    /* The same for rows of more slices than its grid has blocks, where the block that completes
     * a row merges the row's (max, sum) once for all (cuda/softmax_split_held.cuh); every
     * dtype. */
    CUfunction softmax_split_held_pipelined_merged[FC_CUDA_DTYPES];
    int softmax_split_held_pipelined_merged_blocks_per_sm[FC_CUDA_DTYPES];
    /* The merged kernel with the stall prefetch (f32 only, as a.prefetch tickets ahead:
     * cuda/softmax_split_held.cuh) and its blocks per SM. */
    CUfunction softmax_split_held_pipelined_merged_prefetch_f32;
    int softmax_split_held_pipelined_merged_prefetch_blocks_per_sm;
    /* The merged kernel in deep blocks (FC_SOFTMAX_SPLIT_HELD_DEEP_THREADS threads of
     * DEEP_ITEMS f32 or DEEP_BITS_ITEMS 16-bit values, cuda/softmax_split_held.cuh, every
     * dtype) and its blocks per SM. */
    CUfunction softmax_split_held_pipelined_merged_deep[FC_CUDA_DTYPES];
    int softmax_split_held_pipelined_merged_deep_blocks_per_sm[FC_CUDA_DTYPES];
    /* The ring form of the pipelined kernel (cuda/softmax_split_held_ring.cuh, every dtype),
     * its blocks per SM with its ring of softmax_split_held_ring_smem bytes of dynamic shared
     * memory a block. */
    CUfunction softmax_split_held_ring[FC_CUDA_DTYPES];
    int softmax_split_held_ring_blocks_per_sm[FC_CUDA_DTYPES];
    unsigned softmax_split_held_ring_smem;
    /* The wide one-ticket kernel for 16-bit inputs held as their bits
     * (FC_SOFTMAX_SPLIT_HELD_WIDE_THREADS a block, NULL for f32) and its blocks per SM. */
    CUfunction softmax_split_held_wide[FC_CUDA_DTYPES];
    int softmax_split_held_wide_blocks_per_sm[FC_CUDA_DTYPES];
    /* ... and the narrow form (blocks of 128: slices of 4096 f32 columns as floats, 8192 16-bit
     * ones as their bits) */
    CUfunction softmax_split_held_narrow[FC_CUDA_DTYPES];
    int softmax_split_held_narrow_blocks_per_sm[FC_CUDA_DTYPES];
    /* ... and its shifted form for 16-bit inputs held as their bits (NULL for f32) */
    CUfunction softmax_split_held_narrow_shifted[FC_CUDA_DTYPES];
    int softmax_split_held_narrow_shifted_blocks_per_sm[FC_CUDA_DTYPES];
    fc_cuda_attention_kernel attention_tc[FC_TC_CONFIG_COUNT][2];        /* [config][f16, bf16] */
    fc_cuda_attention_kernel attention_tc_decode[FC_TC_DECODE_CONFIG_COUNT][2];
    fc_cuda_attention_kernel attention_wgmma[FC_WGMMA_CONFIG_COUNT][2]; /* usable on cc 9.0 only */
    fc_cuda_attention_kernel attention_tf32[FC_TF32_CONFIG_COUNT];     /* f32 by 3xTF32 */
    fc_cuda_attention_kernel attention_tf32_decode[FC_TF32_DECODE_CONFIG_COUNT]; /* ... decode */
    fc_cuda_attention_kernel attention_simt[FC_SIMT_CONFIG_COUNT][FC_CUDA_DTYPES];
    CUfunction attention_merge[FC_CUDA_DTYPES];                       /* by the parts' dtype */
    /* The driver has cuLaunchKernelEx and the loaded image was compiled for compute_90 or later
     * (compute capability 9.0+ devices): the decode and merge kernels and the softmax kernels
     * that src/cuda/softmax.c launches through its `launch` then begin with griddepcontrol.wait
     * and may be launched as programmatic dependents (fc_cuda_launch). */
    int sm90_launch;
} fc_cuda_kernels;

/* A buffer: device memory flashcl allocated, or caller memory it only refers to. */
typedef struct fc_cuda_buffer {
    CUdeviceptr pointer;
    size_t bytes;
    int owned;                  /* 0: wrapped caller memory, never freed by flashcl */
} fc_cuda_buffer;

typedef struct fc_cuda_context {
    int ordinal;                /* CUDA device ordinal */
    CUdevice device;
    CUcontext primary;          /* the device's primary context, retained: shared with the
                                   runtime API and so with PyTorch, CuPy ... */
    flashcl_device_info info;
    int sm_count;
    int cc_major, cc_minor;     /* compute capability */
    int cooperative;            /* cooperative launches supported */
    CUstream own_stream;        /* non-blocking, created by flashcl */
    CUstream stream;            /* where work goes: own_stream or the caller's (under lock) */
    CUevent switch_event;       /* orders a newly set stream after the previous one */
    CUmodule module;
    fc_cuda_kernels kernels;
    double load_seconds;        /* cuModuleLoadData and the function lookups */
    mtx_t lock;                 /* guards stream and scratch, and makes an operation's launches
                                   (which share scratch) one unit */
    CUdeviceptr scratch;        /* split partials and counters; grows on demand */
    size_t scratch_bytes;
    /* The split-held softmax's state (split_state.c): two regions of 64-bit words used by
     * alternate launches, and their bookkeeping. Under lock. */
    CUdeviceptr split_state;
    fc_split_regions split_regions;
} fc_cuda_context;

/* context.c */
/* The device's value of `attribute`, 0 where the driver cannot give it. */
int fc_cuda_device_attribute(const fc_cu_api *cu, CUdevice device, CUdevice_attribute attribute);
/* Makes the context's primary context current on the calling thread (any thread may call into
 * flashcl) and restores the previous one. Every driver call sits between the two. */
flashcl_status fc_cuda_enter(fc_cuda_context *ctx);
void fc_cuda_leave(fc_cuda_context *ctx);
/* At least `bytes` of scratch device memory; call with ctx->lock held, inside enter/leave. */
flashcl_status fc_cuda_scratch(fc_cuda_context *ctx, size_t bytes, CUdeviceptr *out);

/* kernels.c: loads the embedded fatbinary as ctx->module and looks up every kernel. */
flashcl_status fc_cuda_load_kernels(fc_cuda_context *ctx);
void fc_cuda_unload_kernels(fc_cuda_context *ctx);
/* Whether fc_cuda_launch launches dependents as such on ctx (see there). */
int fc_cuda_dependent_launches(const fc_cuda_context *ctx);
/* Launches f on ctx's stream (a gx x gy grid of 1-D blocks, `args` its one parameter): with
 * `dependent`, where kernels.sm90_launch and FLASHCL_CUDA_NO_PDL is unset, as a programmatic
 * dependent of the kernel queued before it (cuLaunchKernelEx): its blocks may be scheduled once
 * every block of that kernel has reached griddepcontrol.launch_dependents (or ended), and each
 * waits in griddepcontrol.wait, before touching memory, until that kernel has finished and its
 * writes are visible -- the order of an ordinary launch without the gap between the two kernels.
 * Only kernels that call griddepcontrol.wait before touching memory may be launched dependent
 * (cuda/common.cuh, dependent_launch_enter). Else an ordinary cuLaunchKernel. A failure is
 * raised with a message that names the entry point, `what` (the kernel) and the grid. */
flashcl_status fc_cuda_launch(fc_cuda_context *ctx, CUfunction f, unsigned gx, unsigned gy,
                              unsigned threads, unsigned smem, void *args, int dependent,
                              const char *what);

/* softmax.c and attention.c: the operations (descriptors already validated by src/api*.c). */
flashcl_status fc_cuda_softmax(void *ctx, const fc_softmax_desc *desc);
flashcl_status fc_cuda_attention_forward(void *ctx, const fc_attention_desc *desc);
flashcl_status fc_cuda_attention_merge(void *ctx, const fc_attention_merge_desc *desc);

#endif
