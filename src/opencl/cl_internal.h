/* Internal types of the OpenCL backend, shared by its files. */
#ifndef FLASHCL_CL_INTERNAL_H
#define FLASHCL_CL_INTERNAL_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>
#include <threads.h>

#include "../backend.h"
#include "../split_regions.h"

typedef enum fc_vendor {
    FC_VENDOR_NVIDIA,
    FC_VENDOR_AMD,
    FC_VENDOR_INTEL,
    FC_VENDOR_POCL,      /* PoCL, whatever hardware it drives */
    FC_VENDOR_OTHER
} fc_vendor;

/* Which mechanism the kernels use for reductions inside a work-group (cl/portability.h). */
typedef enum fc_subgroup_kind {
    FC_SG_NONE = 0,      /* local-memory fallback */
    FC_SG_KHR,           /* cl_khr_subgroups (or OpenCL 3.0 __opencl_c_subgroups) */
    FC_SG_INTEL,         /* cl_intel_subgroups */
    FC_SG_NV_PTX         /* NVIDIA inline PTX shfl.sync, warp of 32 */
} fc_subgroup_kind;

typedef struct fc_cl_device {
    cl_platform_id platform;
    cl_device_id device;
    flashcl_device_info info;   /* what flashcl_list_devices reports */
    fc_vendor vendor;
    fc_subgroup_kind subgroups;
    int subgroup_size;          /* lanes the kernels may assume for FC_SG_*; 0 for NONE */
    int is_gpu;
    size_t max_work_group_size;
    size_t local_mem_bytes;
    cl_uint compute_units;
    cl_uint mem_base_align_bytes;
    cl_ulong max_alloc_bytes;
    char driver_version[128];
    char device_version[128];
    int opencl_c_major;         /* of CL_DEVICE_OPENCL_C_VERSION; 1 when unknown */
    int has_int64_atomics;      /* cl_khr_int64_base_atomics */
    int nv_compute_major;       /* NVIDIA compute capability major; 0 when unknown */
    long loop_limit;            /* loop passes one work-item may make in all, summed over every
                                   loop of the kernel, before the driver silently ends its
                                   loops (discovery.c); 0: no such limit */
} fc_cl_device;

/* A kernel family's kernels are built as several programs that the driver compiles
 * concurrently (program.c's table), each holding one part of them: the per-dtype parts are the
 * flashcl_dtype codes (softmax: input dtype; attention: q/k/v dtype, GPUs only). */
#define FC_DTYPE_COUNT 3
enum { FC_PART_F32 = 0, FC_PART_F16 = 1, FC_PART_BF16 = 2, FC_PART_ALL_DTYPES = 3 };
/* Attention's other parts: the merge kernels, and the tiled decode kernels (built only when
 * FLASHCL_ATTENTION_DECODE_LEGACY is set or the device needs them, see attention_kernels.c). */
enum { FC_ATTN_PART_MERGE = 4, FC_ATTN_PART_TILED_DECODE = 5 };
/* Most programs one context builds (program.c checks its table against it). */
#define FC_CL_MAX_PROGRAMS 16

/* Kernels of the softmax programs (cl/softmax.cl), indexed [input dtype][output dtype], and the
 * launch limits softmax.c derived from the build options and from the kernels themselves. */
#define FC_SOFTMAX_WG_KINDS 9
#define FC_HELD_KINDS 5 /* rows_held's elements per work-item: 8, 16, 32, 12, 24 */

typedef struct fc_softmax_kernels {
    cl_kernel rows_in_registers[FC_DTYPE_COUNT][FC_DTYPE_COUNT];
    cl_kernel online_chunked[FC_DTYPE_COUNT][FC_DTYPE_COUNT];
    cl_kernel split_row_partials[FC_DTYPE_COUNT];                 /* by input dtype */
    cl_kernel split_row_normalize[FC_DTYPE_COUNT][FC_DTYPE_COUNT];
    cl_kernel split_row_cooperative[FC_DTYPE_COUNT][FC_DTYPE_COUNT]; /* NULL when not built */
    /* rows_held 8, 16, 32, 12 and 24 elements (fc_held_kinds in softmax.c; 32 and 24 for 16-bit
     * inputs, 12 for f32 ones: NULL otherwise) */
    cl_kernel rows_held[FC_HELD_KINDS][FC_DTYPE_COUNT][FC_DTYPE_COUNT];
    /* The same two kinds for rows that start 16-byte aligned only (vec 1; GPUs, else NULL:
     * FC_ALIGNED_KERNELS in cl/softmax.cl) */
    cl_kernel rows_held_aligned[FC_HELD_KINDS][FC_DTYPE_COUNT][FC_DTYPE_COUNT];
    cl_kernel split_row_cooperative_aligned[FC_DTYPE_COUNT][FC_DTYPE_COUNT];
    cl_kernel split_row_ordered[FC_DTYPE_COUNT][FC_DTYPE_COUNT]; /* NULL when not built */
    cl_kernel split_row_pipelined[FC_DTYPE_COUNT][FC_DTYPE_COUNT]; /* NULL when not built */
    /* 16-bit inputs held as bits, 64 and 128 elements a work-item (aligned rows; FC_COOP_BITS:
     * NULL when not built) */
    cl_kernel split_row_cooperative_bits[2][FC_DTYPE_COUNT][FC_DTYPE_COUNT];
    cl_kernel rows_vector[FC_DTYPE_COUNT][FC_DTYPE_COUNT];       /* CPUs only; else NULL */
    unsigned rir_chunks;                 /* 16-byte chunks per work-item (FC_RIR_CHUNKS) */
    unsigned coop_elems[FC_DTYPE_COUNT]; /* FC_COOP_ELEMS by input dtype: cooperative floats
                                            per item */
    size_t rir_max_wg;                   /* largest team / work-group (a power of two) */
    size_t rir_group_wg;                 /* work-group size when several short rows share one */
    size_t chunked_wg, split_wg, coop_wg;
    size_t resident_items;               /* work-items a compute unit keeps in flight (estimate) */
    int coop;                            /* split_row_cooperative kernels exist */
    int coop_bits;                       /* split_row_cooperative_bits kernels exist */
    int probe_built[FC_DTYPE_COUNT];     /* by input dtype: its cooperative kernels answer the
                                            residency probe (FC_RESIDENT_PROBE) */
    size_t pipe_wg;                      /* largest work-group of split_row_pipelined (0: not
                                            built); its slices hold at most pipe_floats floats */
    unsigned pipe_floats;
    size_t held_max_wg;                  /* largest team of rows_held 8/12/16 (a power of two) */
    size_t held32_max_wg;                /* largest team of rows_held32/24; 0: not usable */
    size_t ordered_wg;                   /* work-group of split_row_ordered */
    unsigned stream_unroll;              /* FC_STREAM_UNROLL */
    cl_ulong l2_budget[2];               /* ordered split, [16-bit input]: bytes read between a
                                            slice's two reads */
    cl_ulong ordered_slice[2];           /* ordered split, [16-bit input]: a slice's input bytes */
    int ordered;                         /* split_row_ordered kernels exist */
    int rows_vector_built;               /* rows_vector kernels exist */
    size_t rows_vector_wg;               /* work-group of rows_vector (one row per work-item) */
    /* Per input dtype (one program each): the smallest CL_KERNEL_WORK_GROUP_SIZE of each kind
     * of kernel, and whether that dtype's kernels exist; the limits above cover them all. */
    size_t kernel_wg[FC_DTYPE_COUNT][FC_SOFTMAX_WG_KINDS];
    int part_ready[FC_DTYPE_COUNT];
} fc_softmax_kernels;

/* Kernels of the attention programs (created and released by attention_kernels.c): the
 * forward kernel per family (0 prefill: large query tiles; 1 decode: small query tiles for few
 * queries and split-KV), padded head-dim class (64, 128, 256) and dtype, each with the geometry
 * it was compiled for; a NULL kernel is a class this device cannot run, or (decode tiles) one
 * not built. Plus the two merge kernels. */
#define FC_ATTN_FAMILIES 2
#define FC_ATTN_DIM_CLASSES 3
typedef struct fc_attention_kernels {
    cl_kernel forward[FC_ATTN_FAMILIES][FC_ATTN_DIM_CLASSES][FC_DTYPE_COUNT];
    struct fc_attention_tile {
        int columns;          /* C: work-items sharing one query row (0: disabled) */
        int row_groups;       /* R: the work-group is R·C items */
        int rows_per_item;    /* TM: BM = R·TM query rows per work-group */
        int keys_per_item;    /* TN: BN = C·TN keys per tile */
        int dim_chunk;        /* DC: head-dim chunk of the Q·Kᵀ phase */
        int v_chunk;          /* VC: keys per V chunk of the P·V phase */
    } tile[FC_ATTN_FAMILIES][FC_ATTN_DIM_CLASSES];
    /* Key-parallel decode (cl/attention_decode.cl), per form (a GQA group of 8 rows a
     * work-group, or 4 rows for groups of at most 4), padded head-dim class and dtype. */
#define FC_ATTN_KEYS_FORMS 2
    cl_kernel decode_keys[FC_ATTN_KEYS_FORMS][FC_ATTN_DIM_CLASSES][FC_DTYPE_COUNT];
    struct fc_attention_keys_tile {
        int work_group;       /* WG (0: disabled) */
        int rows;             /* RT: query rows per work-group */
        int keys;             /* KB: keys per block for 16-bit storage (f32: see the kernel) */
    } keys_tile[FC_ATTN_KEYS_FORMS][FC_ATTN_DIM_CLASSES];
    /* The same forms fed by cp.async (cl/attention_decode_async.cl; f32 on NVIDIA sm80+),
     * per class; NULL where not built. */
    cl_kernel decode_async[FC_ATTN_KEYS_FORMS][FC_ATTN_DIM_CLASSES];
    struct fc_attention_async_tile {
        int work_group;       /* WG (0: disabled) */
        int rows;             /* RT: query rows per work-group, as the form's */
        int keys;             /* BK: keys per block (per slot) */
        int slots;            /* SL: blocks in the ring, SL - 1 in flight */
    } async_tile[FC_ATTN_KEYS_FORMS][FC_ATTN_DIM_CLASSES];
    /* Tensor-core forward (cl/attention_mma.cl, its own program, NVIDIA only), per class
     * (padded head dim 64, 128) and 16-bit dtype (f16, bf16); NULL where not built. */
#define FC_ATTN_MMA_CLASSES 2
    cl_kernel mma[FC_ATTN_MMA_CLASSES][2];
    cl_kernel mma_w2[FC_ATTN_MMA_CLASSES][2]; /* two warps: few rows per kv head (decode) */
    cl_kernel mma_ring[FC_ATTN_MMA_CLASSES][2]; /* ... with a deeper ring: long key ranges */
    cl_kernel mma_f32[FC_ATTN_MMA_CLASSES]; /* f32 by 3xTF32 (attention_mma_tf32x3.cl) */
    int mma_warps;              /* warps per work-group the mma kernels were built for */
    /* CPUs (cl/attention_cpu.cl; NULL where not built, both or neither): */
    cl_kernel rows_vector;      /* 16 rows a work-item in float16 lanes */
    cl_kernel decode_vector;    /* up to 8 rows of each of several kv heads, head dim in lanes */
    cl_kernel split_merge;      /* split-KV partials (f32 scratch) -> o, lse */
    size_t split_merge_wg;      /* its work-group (attention_merge.c) */
    cl_kernel merge;            /* up to 4 partial (o, lse) -> o, lse (flashcl_attention_merge) */
    size_t merge_wg;            /* its work-group: fc_attn_merge_wg, or less where the kernel's
                                   own limit is lower */
    int tiled_decode;           /* the tiled decode kernels were built (their own program) */
} fc_attention_kernels;

/* One answer of the residency probe (softmax_resident.c): `groups` work-groups of `kernel` of
 * `wg` work-items can be resident at once; kernel NULL: an empty slot. */
#define FC_RESIDENT_SLOTS 32
typedef struct fc_resident_slot {
    cl_kernel kernel;
    size_t wg;
    uint64_t groups;
} fc_resident_slot;

typedef struct fc_cl_context {
    fc_cl_device dev;
    cl_context context;
    cl_command_queue queue;
    cl_program programs[FC_CL_MAX_PROGRAMS]; /* by program.c's table; NULL: not built */
    fc_softmax_kernels softmax;
    fc_attention_kernels attention;
    int built_from_cache;       /* 1 when every program binary came from the disk cache */
    double build_seconds;       /* time spent creating the programs (compile or load) */
    mtx_t launch_lock;          /* clSetKernelArg + enqueue must not interleave across threads */
    cl_mem scratch;             /* grows on demand for split-row partials (under launch_lock) */
    size_t scratch_bytes;
    cl_mem split_state;         /* two regions of 64-bit words used by alternate split-row
                                   launches (split_state.c) */
    fc_split_regions split_regions; /* their bookkeeping (under launch_lock) */
    cl_mem attention_scratch;   /* split-KV partials (o, lse), grown under launch_lock */
    size_t attention_scratch_bytes;
    fc_resident_slot resident[FC_RESIDENT_SLOTS]; /* probed answers (under launch_lock) */
    unsigned resident_next;     /* the slot the next answer takes */
} fc_cl_context;

/* discovery.c */
/* Enumerates every OpenCL device in stable order. *out is malloc'ed (free it); NULL when 0. */
flashcl_status fc_cl_discover(fc_cl_device **out, size_t *count);
/* Fills dev (vendor, limits, features, info) for one device of a platform. */
flashcl_status fc_cl_describe(cl_platform_id platform, cl_device_id device, fc_cl_device *dev);

/* errors.c: the symbolic name of an OpenCL error code ("CL_OUT_OF_RESOURCES"). */
const char *fc_cl_error_name(cl_int err);
/* Maps an OpenCL error to a flashcl status with a message naming the failed call. */
flashcl_status fc_cl_fail(cl_int err, const char *what);

/* program.c: builds (or loads from the cache) the programs, concurrently, and creates the
 * kernels. */
flashcl_status fc_cl_build_programs(fc_cl_context *ctx, const char *cache_dir);
void fc_cl_release_programs(fc_cl_context *ctx);

/* program_build.c: one program. */
typedef struct fc_program_source {
    const char *name;                /* in messages */
    const char *const *sources;      /* concatenated in order */
    size_t count;
    const char *options;             /* the whole option line */
} fc_program_source;
/* Builds src for ctx's device into *out: from the binary cache in cache_dir when load_cached
 * and a verified binary is there (*from_cache = 1), else from the sources, storing the binary
 * in the cache; cache_dir NULL: no cache. Safe to run concurrently for different programs of
 * one context: it only reads ctx->dev and ctx->context. */
flashcl_status fc_cl_program_build(fc_cl_context *ctx, const fc_program_source *src,
                                   const char *cache_dir, int load_cached, cl_program *out,
                                   int *from_cache);

/* cache.c: binary cache. The key hashes everything that determines the binary. */
typedef struct fc_cache_key {
    char hex[33];               /* 128-bit FNV-1a of device, driver, options, source */
} fc_cache_key;
void fc_cache_make_key(fc_cache_key *key, const fc_cl_device *dev, const char *options,
                       const char *const *sources, size_t nsources);
/* Resolves the cache folder: explicit dir, else $FLASHCL_CACHE_DIR, else $XDG_CACHE_HOME/flashcl,
 * else $HOME/.cache/flashcl. Returns 0 (and "" in out) when caching is off. */
int fc_cache_dir(const char *requested, char *out, size_t out_size);
/* Loads a verified binary; returns a malloc'ed buffer or NULL when missing or damaged. */
unsigned char *fc_cache_load(const char *dir, const fc_cache_key *key, size_t *size);
/* Stores a binary atomically (temp file + rename). Failure is not an error: returns 0/1. */
int fc_cache_store(const char *dir, const fc_cache_key *key, const unsigned char *data,
                   size_t size);

/* Every kernel family has these hooks for program.c's table; `part` is the table entry's
 * (FC_PART_*, FC_ATTN_PART_*). wanted: whether the device builds that part (NULL: always);
 * options: the -D options of its program; create_kernels: its kernels from the built program
 * (called on the thread that creates the context, after every program is built);
 * release_kernels: releases them (also after a partial or failed creation). */

/* softmax.c (owns cl/softmax.cl's host side); one program per input dtype */
void fc_cl_softmax_options(const fc_cl_device *dev, int part, char *out, size_t out_size);
flashcl_status fc_cl_softmax_create_kernels(fc_cl_context *ctx, cl_program program, int part);
void fc_cl_softmax_release_kernels(fc_cl_context *ctx, int part);
/* Chooses the variant (or takes the forced one) and enqueues it. desc is already validated. */
flashcl_status fc_cl_softmax(void *ctx, const fc_softmax_desc *desc);

/* softmax_resident.c: how many work-groups of `kernel` (a cooperative split-row kernel: it
 * probes itself when launched with rows == 0, fc_resident_probe in cl/softmax.cl) of `wg`
 * work-items can be resident at once, at least; probed once per kernel and size, then from the
 * context's slots. Takes launch_lock (the caller must not hold it) and waits for the queue. */
flashcl_status fc_softmax_resident(fc_cl_context *ctx, cl_kernel kernel, size_t wg,
                                   uint64_t *groups);
/* Forgets every answer (the kernels they were about are being released). */
void fc_softmax_resident_forget(fc_cl_context *ctx);

/* attention*.c (cl/attention.cl's host side: attention_plan.c, attention.c and the others), same
 * shape as softmax.c */
int fc_cl_attention_wanted(const fc_cl_device *dev, int part);
void fc_cl_attention_options(const fc_cl_device *dev, int part, char *out, size_t out_size);
flashcl_status fc_cl_attention_create_kernels(fc_cl_context *ctx, cl_program program, int part);
void fc_cl_attention_release_kernels(fc_cl_context *ctx, int part);
flashcl_status fc_cl_attention_forward(void *ctx, const fc_attention_desc *desc);
flashcl_status fc_cl_attention_merge(void *ctx, const fc_attention_merge_desc *desc);
/* attention_mma.c (cl/attention_mma.cl's host side), the same hooks; built only on NVIDIA GPUs
 * of compute capability 8.0 and up (part is unused: one program). */
int fc_cl_attention_mma_wanted(const fc_cl_device *dev, int part);
void fc_cl_attention_mma_options(const fc_cl_device *dev, int part, char *out, size_t out_size);
flashcl_status fc_cl_attention_mma_create_kernels(fc_cl_context *ctx, cl_program program,
                                                  int part);
void fc_cl_attention_mma_release_kernels(fc_cl_context *ctx, int part);

/* context.c */
extern const fc_backend fc_opencl_backend;
flashcl_status fc_cl_context_adopt(cl_context context, cl_device_id device,
                                   cl_command_queue queue, const char *cache_dir, void **out);
flashcl_status fc_cl_buffer_wrap(void *ctx, cl_mem mem, size_t *size, void **out_mem);
cl_mem fc_cl_buffer_mem(void *mem);
void fc_cl_context_objects(const void *ctx, cl_context *context, cl_device_id *device,
                           cl_command_queue *queue);

#endif
