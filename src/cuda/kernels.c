/* Loads the fatbinary that cmake/cuda.cmake compiled from cuda/ and embedded in the library, and
 * looks up every kernel by its extern "C" name. The driver picks the image for the device (a
 * cubin for sm_80/86/89/90a, else the compute_90 PTX, JIT-compiled once and cached by the
 * driver in ~/.nv/ComputeCache). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda_internal.h"
#include "../error.h"
#include "../text.h"

/* generated/flashcl_cuda_fatbin.c */
extern const unsigned char fc_cuda_fatbin[];
extern const size_t fc_cuda_fatbin_size;

static const char *const fc_dtype_suffix[FC_CUDA_DTYPES] = {"f32", "f16", "bf16"};

static const char *const fc_row_config_names[FC_ROW_CONFIG_COUNT] = {
#define FC_ROW_CONFIG_NAME_(name, group, items, block) #name,
    FC_SOFTMAX_ROW_CONFIGS(FC_ROW_CONFIG_NAME_)
#undef FC_ROW_CONFIG_NAME_
};

static double now_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static flashcl_status get_function(fc_cuda_context *ctx, CUfunction *out, const char *name) {
    CUresult r = fc_cu()->ModuleGetFunction(out, ctx->module, name);
    if (r != CUDA_SUCCESS)
        return fc_fail(r == CUDA_ERROR_OUT_OF_MEMORY ? FLASHCL_OUT_OF_MEMORY : FLASHCL_BACKEND_ERROR,
                       "cuModuleGetFunction(%s) failed: %s (%d)", name, fc_cu_error_name(r),
                       (int)r);
    return FLASHCL_SUCCESS;
}

/* The resident split kernel parks up to FC_SOFTMAX_RESIDENT_MAX_SMEM_PARTS parts of a chunk in
 * dynamic shared memory (32 KiB each): opt in to as many as the device's blocks can hold, and
 * record how many blocks fit per SM with each count, for the host to size cooperative grids. */
static flashcl_status size_resident_kernel(fc_cuda_context *ctx, int dt) {
    fc_cuda_kernels *k = &ctx->kernels;
    const size_t part_bytes = (size_t)FC_SOFTMAX_RESIDENT_THREADS * FC_SOFTMAX_RESIDENT_ITEMS * 4;
    const size_t static_reserve = 1024; /* the kernel's own __shared__ variables */
    int parts, max_parts = 0;
    CUresult r;
    if (ctx->info.local_mem_bytes > static_reserve)
        max_parts = (int)((ctx->info.local_mem_bytes - static_reserve) / part_bytes);
    if (max_parts > FC_SOFTMAX_RESIDENT_MAX_SMEM_PARTS) max_parts = FC_SOFTMAX_RESIDENT_MAX_SMEM_PARTS;
    if (max_parts > 0) {
        r = fc_cu()->FuncSetAttribute(k->softmax_resident[dt],
                                      CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                      (int)(max_parts * part_bytes));
        if (r != CUDA_SUCCESS) max_parts = 0; /* registers only, still correct */
    }
    k->softmax_resident_max_parts = max_parts;
    for (parts = 0; parts <= FC_SOFTMAX_RESIDENT_MAX_SMEM_PARTS; parts++) {
        int *blocks = &k->softmax_resident_blocks_per_sm[dt][parts];
        *blocks = 0;
        if (parts > max_parts) continue;
        r = fc_cu()->OccupancyMaxActiveBlocksPerMultiprocessor(
            blocks, k->softmax_resident[dt], FC_SOFTMAX_RESIDENT_THREADS, parts * part_bytes);
        if (r != CUDA_SUCCESS) return fc_cu_fail(r, "cuOccupancyMaxActiveBlocksPerMultiprocessor");
    }
    return FLASHCL_SUCCESS;
}

/* The staged kernel takes all the shared memory a block may have, less room for its own
 * __shared__ variables, and runs one block per SM; a device where it cannot leaves it unused
 * (the other plans cover every shape). So do the 8.x devices after 8.0, whose cubins hold an
 * empty kernel (cuda/softmax_staged.cuh). */
static flashcl_status size_staged_kernel(fc_cuda_context *ctx, int dt) {
    fc_cuda_kernels *k = &ctx->kernels;
    const size_t static_reserve = 1024;
    size_t smem = 0;
    CUresult r;
    k->softmax_staged_blocks_per_sm[dt] = 0;
    if (ctx->cc_major == 8 && ctx->cc_minor > 0) return FLASHCL_SUCCESS;
    if (ctx->info.local_mem_bytes > static_reserve)
        smem = (ctx->info.local_mem_bytes - static_reserve) / 1024 * 1024;
    if (smem == 0) return FLASHCL_SUCCESS;
    if (fc_cu()->FuncSetAttribute(k->softmax_staged[dt],
                                  CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                  (int)smem) != CUDA_SUCCESS)
        return FLASHCL_SUCCESS;
    r = fc_cu()->OccupancyMaxActiveBlocksPerMultiprocessor(
        &k->softmax_staged_blocks_per_sm[dt], k->softmax_staged[dt], FC_SOFTMAX_STAGED_THREADS,
        smem);
    if (r != CUDA_SUCCESS) return fc_cu_fail(r, "cuOccupancyMaxActiveBlocksPerMultiprocessor");
    k->softmax_staged_smem = (unsigned)smem; /* the same for every dtype */
    return FLASHCL_SUCCESS;
}

/* How many blocks of the split-held kernels an SM holds at once (static shared memory only).
 *
 * The pipelined ones park a slice in 32 KiB of shared memory per block, and run
 * FC_SOFTMAX_SPLIT_HELD_BLOCKS_PER_SM blocks an SM (their register cap). They ask for the
 * smallest shared-memory carveout that holds that many blocks, and leave the rest of the SM's
 * 256 KiB to L1: the slices' loads go through L1, and the carveout that leaves it only 28 KiB
 * (the largest, which this kernel asked for before) cost 1-8 % on every pipelined shape. H100,
 * 2026-12-06, compare_torch.py, ms, two rounds, this carveout (about 61 % there) against the
 * largest (bench/results/2026-12-06-h100-s41-carveout.txt): 8x8388608 f16 0.1031-0.1027
 * against 0.1108-0.1109, bf16 0.1041-0.1035 against 0.1120-0.1120, f32 0.2288-0.2279 against
 * 0.2316-0.2320; 16x4194304 f16 0.0968-0.0968 against 0.1039-0.1040, f32 0.1970-0.1962
 * against 0.2056-0.2059; 64x1048576 f16 0.0946-0.0944 against 0.0998-0.1000; 6x6000000 f32
 * 0.1283-0.1281 against 0.1377-0.1396. 72 % and the driver's own choice time as this does.
 * The carveout is only a hint: where the occupancy it gives falls short of the blocks wanted,
 * the largest one is asked for instead, and the occupancy query says what the driver grants
 * either way. */
/* The percentage of the SM's largest shared memory that `blocks` blocks of f need (their
 * static shared memory, `dynamic` bytes and the driver's reservation per block), rounded up;
 * the largest where the sizes cannot be read. */
static int carveout_for(CUfunction f, CUdevice device, int blocks, unsigned dynamic) {
    int shared = 0;
    const int per_sm = fc_cuda_device_attribute(
        fc_cu(), device, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
    const int reserved = fc_cuda_device_attribute(
        fc_cu(), device, CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK);
    if (fc_cu()->FuncGetAttribute(&shared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f) !=
            CUDA_SUCCESS ||
        per_sm <= 0)
        return CU_SHAREDMEM_CARVEOUT_MAX_SHARED;
    const long need = (long)blocks * (shared + (long)dynamic + reserved);
    const long percent = (100 * need + per_sm - 1) / per_sm;
    return percent >= 100 ? CU_SHAREDMEM_CARVEOUT_MAX_SHARED : (int)percent;
}

/* FLASHCL_CUDA_SOFTMAX_PIPELINED_CARVEOUT=n (a percentage 0-100, or -1 for the driver's own
 * choice) replaces the carveout asked for, for A/B runs; -2 or unset: carveout_for's. */
static int forced_carveout(void) {
    const char *v = getenv("FLASHCL_CUDA_SOFTMAX_PIPELINED_CARVEOUT");
    char *end;
    const long n = v && *v ? strtol(v, &end, 10) : -2;
    return v && *v && *end == '\0' && n >= -1 && n <= 100 ? (int)n : -2;
}

/* blocks_per_sm of a pipelined kernel f of `threads` a block that wants `wanted` blocks an SM
 * with `dynamic` bytes of dynamic shared memory a block (the ring's; 0 for the others), its
 * carveout set. */
static CUresult size_pipelined_kernel(CUfunction f, CUdevice device, int threads, int wanted,
                                      unsigned dynamic, int *blocks_per_sm) {
    const int forced = forced_carveout();
    const int carveout = forced >= -1 ? forced : carveout_for(f, device, wanted, dynamic);
    CUresult r;
    /* a refused hint changes nothing but the occupancy, which the query below reads */
    (void)fc_cu()->FuncSetAttribute(f, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
                                    carveout);
    r = fc_cu()->OccupancyMaxActiveBlocksPerMultiprocessor(blocks_per_sm, f, threads, dynamic);
    if (r != CUDA_SUCCESS || forced >= -1 || *blocks_per_sm >= wanted ||
        carveout == CU_SHAREDMEM_CARVEOUT_MAX_SHARED)
        return r;
    (void)fc_cu()->FuncSetAttribute(f, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
                                    CU_SHAREDMEM_CARVEOUT_MAX_SHARED);
    return fc_cu()->OccupancyMaxActiveBlocksPerMultiprocessor(blocks_per_sm, f, threads, dynamic);
}

/* The ring kernel: its dynamic shared memory allowed (past the default 48 KiB a block), then
 * sized as the pipelined ones. A GPU whose SM cannot hold one ring block (less than 64 KiB of
 * shared memory a block) gets 0 blocks an SM, and the host never picks the ring there. */
static CUresult size_ring_kernel(fc_cuda_context *ctx, int dt) {
    fc_cuda_kernels *k = &ctx->kernels;
    CUfunction f = k->softmax_split_held_ring[dt];
    /* a slot: 8 vectors of 16 bytes a thread (64 16-bit values or 32 f32 ones) */
    const unsigned smem = FC_SOFTMAX_SPLIT_HELD_RING_SLOTS * FC_SOFTMAX_SPLIT_HELD_THREADS * 8 * 16u;
    k->softmax_split_held_ring_smem = smem;
    k->softmax_split_held_ring_blocks_per_sm[dt] = 0;
    if (fc_cu()->FuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                  (int)smem) != CUDA_SUCCESS)
        return CUDA_SUCCESS; /* not this GPU: the pipelined kernel stays */
    return size_pipelined_kernel(f, ctx->device, FC_SOFTMAX_SPLIT_HELD_THREADS,
                                 FC_SOFTMAX_SPLIT_HELD_RING_BLOCKS_PER_SM, smem,
                                 &k->softmax_split_held_ring_blocks_per_sm[dt]);
}

static flashcl_status size_split_held_kernel(fc_cuda_context *ctx, int dt) {
    fc_cuda_kernels *k = &ctx->kernels;
    CUresult r = fc_cu()->OccupancyMaxActiveBlocksPerMultiprocessor(
        &k->softmax_split_held_blocks_per_sm[dt], k->softmax_split_held[dt],
        FC_SOFTMAX_SPLIT_HELD_THREADS, 0);
    if (r == CUDA_SUCCESS)
        r = fc_cu()->OccupancyMaxActiveBlocksPerMultiprocessor(
            &k->softmax_split_held_shifted_blocks_per_sm[dt], k->softmax_split_held_shifted[dt],
            FC_SOFTMAX_SPLIT_HELD_THREADS, 0);
    if (r == CUDA_SUCCESS && k->softmax_split_held_bits[dt])
        r = fc_cu()->OccupancyMaxActiveBlocksPerMultiprocessor(
            &k->softmax_split_held_bits_blocks_per_sm[dt], k->softmax_split_held_bits[dt],
            FC_SOFTMAX_SPLIT_HELD_THREADS, 0);
    if (r == CUDA_SUCCESS)
        r = size_pipelined_kernel(k->softmax_split_held_pipelined[dt], ctx->device,
                                  FC_SOFTMAX_SPLIT_HELD_THREADS,
                                  FC_SOFTMAX_SPLIT_HELD_BLOCKS_PER_SM, 0,
                                  &k->softmax_split_held_pipelined_blocks_per_sm[dt]);
    if (r == CUDA_SUCCESS && k->softmax_split_held_pipelined_merged[dt])
        r = size_pipelined_kernel(k->softmax_split_held_pipelined_merged[dt], ctx->device,
                                  FC_SOFTMAX_SPLIT_HELD_THREADS,
                                  FC_SOFTMAX_SPLIT_HELD_BLOCKS_PER_SM, 0,
                                  &k->softmax_split_held_pipelined_merged_blocks_per_sm[dt]);
    if (r == CUDA_SUCCESS && dt == FLASHCL_F32)
        r = size_pipelined_kernel(k->softmax_split_held_pipelined_merged_prefetch_f32,
                                  ctx->device, FC_SOFTMAX_SPLIT_HELD_THREADS,
                                  FC_SOFTMAX_SPLIT_HELD_BLOCKS_PER_SM, 0,
                                  &k->softmax_split_held_pipelined_merged_prefetch_blocks_per_sm);
    if (r == CUDA_SUCCESS)
        r = size_pipelined_kernel(k->softmax_split_held_pipelined_merged_deep[dt], ctx->device,
                                  FC_SOFTMAX_SPLIT_HELD_DEEP_THREADS,
                                  FC_SOFTMAX_SPLIT_HELD_DEEP_BLOCKS_PER_SM, 0,
                                  &k->softmax_split_held_pipelined_merged_deep_blocks_per_sm[dt]);
    if (r == CUDA_SUCCESS) r = size_ring_kernel(ctx, dt);
    if (r == CUDA_SUCCESS && k->softmax_split_held_wide[dt])
        r = fc_cu()->OccupancyMaxActiveBlocksPerMultiprocessor(
            &k->softmax_split_held_wide_blocks_per_sm[dt], k->softmax_split_held_wide[dt],
            FC_SOFTMAX_SPLIT_HELD_WIDE_THREADS, 0);
    if (r == CUDA_SUCCESS && k->softmax_split_held_narrow[dt])
        r = fc_cu()->OccupancyMaxActiveBlocksPerMultiprocessor(
            &k->softmax_split_held_narrow_blocks_per_sm[dt], k->softmax_split_held_narrow[dt],
            FC_SOFTMAX_SPLIT_HELD_NARROW_THREADS, 0);
    if (r == CUDA_SUCCESS && k->softmax_split_held_narrow_shifted[dt])
        r = fc_cu()->OccupancyMaxActiveBlocksPerMultiprocessor(
            &k->softmax_split_held_narrow_shifted_blocks_per_sm[dt],
            k->softmax_split_held_narrow_shifted[dt], FC_SOFTMAX_SPLIT_HELD_NARROW_THREADS, 0);
    if (r != CUDA_SUCCESS)
        return fc_cu_fail(r, "cuOccupancyMaxActiveBlocksPerMultiprocessor(split-held softmax kernel)");
    return FLASHCL_SUCCESS;
}

/* softmax kernels of input dtype `dt` */
static flashcl_status get_softmax_kernels(fc_cuda_context *ctx, int dt) {
    fc_cuda_kernels *k = &ctx->kernels;
    const char *sfx = fc_dtype_suffix[dt];
    char name[96];
    flashcl_status st = FLASHCL_SUCCESS;
    int c;
    for (c = 0; c < FC_ROW_CONFIG_COUNT && st == FLASHCL_SUCCESS; c++) {
        snprintf(name, sizeof name, "fc_softmax_rows_%s_%s", fc_row_config_names[c], sfx);
        st = get_function(ctx, &k->softmax_rows[c][dt], name);
    }
#define FC_GET_(field, prefix)                                                                 \
    if (st == FLASHCL_SUCCESS) {                                                               \
        snprintf(name, sizeof name, prefix "_%s", sfx);                                        \
        st = get_function(ctx, &k->field[dt], name);                                           \
    }
    FC_GET_(softmax_resident, "fc_softmax_resident")
    FC_GET_(softmax_chunked, "fc_softmax_chunked")
    FC_GET_(softmax_split_stats, "fc_softmax_split_stats")
    FC_GET_(softmax_split_normalize, "fc_softmax_split_normalize")
    FC_GET_(softmax_staged, "fc_softmax_staged")
    FC_GET_(softmax_split_held, "fc_softmax_split_held")
    FC_GET_(softmax_split_held_shifted, "fc_softmax_split_held_shifted")
    if (dt != FLASHCL_F32) FC_GET_(softmax_split_held_bits, "fc_softmax_split_held_bits")
    FC_GET_(softmax_split_held_pipelined, "fc_softmax_split_held_pipelined")
    FC_GET_(softmax_split_held_pipelined_merged, "fc_softmax_split_held_pipelined_merged")
    if (st == FLASHCL_SUCCESS && dt == FLASHCL_F32)
        st = get_function(ctx, &k->softmax_split_held_pipelined_merged_prefetch_f32,
                          "fc_softmax_split_held_pipelined_merged_prefetch_f32");
    FC_GET_(softmax_split_held_pipelined_merged_deep,
            "fc_softmax_split_held_pipelined_merged_deep")
    FC_GET_(softmax_split_held_ring, "fc_softmax_split_held_ring")
    FC_GET_(softmax_split_held_narrow, "fc_softmax_split_held_narrow")
    if (dt != FLASHCL_F32)
        FC_GET_(softmax_split_held_narrow_shifted, "fc_softmax_split_held_narrow_shifted")
    if (dt != FLASHCL_F32) FC_GET_(softmax_split_held_wide, "fc_softmax_split_held_wide")
#undef FC_GET_
    if (st == FLASHCL_SUCCESS) st = size_resident_kernel(ctx, dt);
    if (st == FLASHCL_SUCCESS) st = size_split_held_kernel(ctx, dt);
    if (st != FLASHCL_SUCCESS) return st;
    return size_staged_kernel(ctx, dt);
}

/* Shared memory of the attention kernels (cuda/attention_tc.cuh, attention_tc_decode.cuh, both
 * also in their f32 form, and attention_simt.cuh), as they lay it out; the wgmma kernels' is
 * FC_ATTENTION_WGMMA_SMEM. A row of the tensor-core kernels' tiles: 16-bit elements padded by
 * 8, f32 (elem_bytes 4) by 4, 16 bytes either way. */
static int tc_row_bytes(int pad, int elem_bytes) {
    return (pad + (elem_bytes == 4 ? 4 : 8)) * elem_bytes;
}
static unsigned tc_smem(int pad, int keys, int rows, int elem_bytes) {
    return (unsigned)((rows + 2 * 2 * keys) * tc_row_bytes(pad, elem_bytes)); /* Q, 2 K+V slots */
}
/* The decode kernel's: Q, then the warps' rings, which later hold the partials. */
static unsigned tc_decode_smem(int pad, int keys, int stages, int elem_bytes) {
    const int warps = FC_ATTENTION_TC_WARPS, rows = FC_ATTENTION_TC_DECODE_ROWS;
    const int row = tc_row_bytes(pad, elem_bytes);
    const unsigned ring = (unsigned)(warps * stages * 2 * keys * row);
    const unsigned partials = (unsigned)(warps * rows * (pad + 8 + 2) * 4); /* padded rows, m, l */
    return (unsigned)(rows * row) + (ring > partials ? ring : partials);
}
static unsigned simt_smem(int pad) {
    return (unsigned)((FC_ATTENTION_SIMT_ROWS * pad + FC_ATTENTION_SIMT_KEYS * (pad + 1) +
                       FC_ATTENTION_SIMT_KEYS * pad) * 4);
}

/* Looks up one attention kernel and opts it in to its shared memory; a device that cannot give
 * that much leaves it unusable (other configurations or the SIMT kernel take its shapes). */
static flashcl_status get_attention_kernel(fc_cuda_context *ctx, fc_cuda_attention_kernel *k,
                                           const char *name, const char *config, unsigned smem,
                                           int pad, int rows, int keys, int threads) {
    flashcl_status st = get_function(ctx, &k->function, name);
    if (st != FLASHCL_SUCCESS) return st;
    k->config = config;
    k->smem_bytes = smem;
    k->pad = pad, k->rows = rows, k->keys = keys, k->threads = threads;
    k->persistent = 0;
    k->usable = smem <= ctx->info.local_mem_bytes &&
                fc_cu()->FuncSetAttribute(k->function,
                                          CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                          (int)smem) == CUDA_SUCCESS;
    k->blocks_per_sm = 0;
    if (k->usable) {
        CUresult r = fc_cu()->OccupancyMaxActiveBlocksPerMultiprocessor(
            &k->blocks_per_sm, k->function, threads, smem);
        if (r != CUDA_SUCCESS)
            return fc_cu_fail(r, "cuOccupancyMaxActiveBlocksPerMultiprocessor(attention kernel)");
    }
    return FLASHCL_SUCCESS;
}

static flashcl_status get_attention_kernels(fc_cuda_context *ctx) {
    fc_cuda_kernels *k = &ctx->kernels;
    flashcl_status st = FLASHCL_SUCCESS;
    char name[96];
    int dt;
#define FC_GET_TC_(cfg, pad, keys, mtiles)                                                     \
    for (dt = FLASHCL_F16; dt <= FLASHCL_BF16 && st == FLASHCL_SUCCESS; dt++) {                \
        const int rows = 16 * (mtiles) * FC_ATTENTION_TC_WARPS;                                \
        snprintf(name, sizeof name, "fc_attention_tc_" #cfg "_%s", fc_dtype_suffix[dt]);       \
        st = get_attention_kernel(ctx, &k->attention_tc[FC_TC_CONFIG_##cfg][dt - 1], name,    \
                                  #cfg, tc_smem(pad, keys, rows, 2), pad, rows, keys,          \
                                  FC_ATTENTION_TC_THREADS);                                    \
    }
    FC_ATTENTION_TC_CONFIGS(FC_GET_TC_)
#undef FC_GET_TC_
#define FC_GET_TC_DECODE_(cfg, pad, keys, stages)                                              \
    for (dt = FLASHCL_F16; dt <= FLASHCL_BF16 && st == FLASHCL_SUCCESS; dt++) {                \
        snprintf(name, sizeof name, "fc_attention_tc_decode_" #cfg "_%s", fc_dtype_suffix[dt]); \
        st = get_attention_kernel(ctx, &k->attention_tc_decode[FC_TC_DECODE_CONFIG_##cfg][dt - 1], \
                                  name, #cfg, tc_decode_smem(pad, keys, stages, 2), pad,       \
                                  FC_ATTENTION_TC_DECODE_ROWS, keys, FC_ATTENTION_TC_THREADS); \
    }
    FC_ATTENTION_TC_DECODE_CONFIGS(FC_GET_TC_DECODE_)
#undef FC_GET_TC_DECODE_
    /* The wgmma kernels are empty outside the sm_90a cubin, which only a compute capability 9.0
     * device loads: elsewhere they are looked up (every image has them) but never usable. */
#define FC_GET_WGMMA_(cfg, pad, keys, wgs, pipe, blocks)                                                 \
    for (dt = FLASHCL_F16; dt <= FLASHCL_BF16 && st == FLASHCL_SUCCESS; dt++) {                \
        fc_cuda_attention_kernel *kw = &k->attention_wgmma[FC_WGMMA_CONFIG_##cfg][dt - 1];    \
        snprintf(name, sizeof name, "fc_attention_" #cfg "_%s", fc_dtype_suffix[dt]);          \
        st = get_attention_kernel(ctx, kw, name, #cfg, FC_ATTENTION_WGMMA_SMEM(pad, keys, wgs, pipe), \
                                  pad, FC_ATTENTION_WGMMA_ROWS_PER_WG * (wgs), keys,           \
                                  FC_ATTENTION_WGMMA_WG_THREADS * (wgs));                      \
        kw->persistent = (pipe) == 4 || (pipe) == 6 ? 2 : (pipe) >= 3 ? 1 : 0; /* 1: unmasked, 2: causal */ \
        if (!(ctx->cc_major == 9 && ctx->cc_minor == 0)) kw->usable = 0;                        \
    }
    FC_ATTENTION_WGMMA_CONFIGS(FC_GET_WGMMA_)
#undef FC_GET_WGMMA_
#define FC_GET_TF32_(cfg, pad, keys)                                                           \
    if (st == FLASHCL_SUCCESS)                                                                 \
        st = get_attention_kernel(ctx, &k->attention_tf32[FC_TF32_CONFIG_##cfg],               \
                                  "fc_attention_" #cfg "_f32", #cfg,                           \
                                  tc_smem(pad, keys, FC_ATTENTION_TF32_ROWS, 4), pad,          \
                                  FC_ATTENTION_TF32_ROWS, keys, FC_ATTENTION_TC_THREADS);
    FC_ATTENTION_TF32_CONFIGS(FC_GET_TF32_)
#undef FC_GET_TF32_
#define FC_GET_TF32_DECODE_(cfg, pad, keys, stages)                                            \
    if (st == FLASHCL_SUCCESS)                                                                 \
        st = get_attention_kernel(ctx, &k->attention_tf32_decode[FC_TF32_DECODE_CONFIG_##cfg],  \
                                  "fc_attention_" #cfg "_f32", #cfg,                           \
                                  tc_decode_smem(pad, keys, stages, 4), pad,                   \
                                  FC_ATTENTION_TC_DECODE_ROWS, keys, FC_ATTENTION_TC_THREADS);
    FC_ATTENTION_TF32_DECODE_CONFIGS(FC_GET_TF32_DECODE_)
#undef FC_GET_TF32_DECODE_
#define FC_GET_SIMT_(cfg, pad)                                                                 \
    for (dt = 0; dt < FC_CUDA_DTYPES && st == FLASHCL_SUCCESS; dt++) {                         \
        snprintf(name, sizeof name, "fc_attention_simt_" #cfg "_%s", fc_dtype_suffix[dt]);     \
        st = get_attention_kernel(ctx, &k->attention_simt[FC_SIMT_CONFIG_##cfg][dt], name,    \
                                  #cfg, simt_smem(pad), pad, FC_ATTENTION_SIMT_ROWS,           \
                                  FC_ATTENTION_SIMT_KEYS, FC_ATTENTION_SIMT_THREADS);          \
    }
    FC_ATTENTION_SIMT_CONFIGS(FC_GET_SIMT_)
#undef FC_GET_SIMT_
    for (dt = 0; dt < FC_CUDA_DTYPES && st == FLASHCL_SUCCESS; dt++) {
        snprintf(name, sizeof name, "fc_attention_merge_%s", fc_dtype_suffix[dt]);
        st = get_function(ctx, &k->attention_merge[dt], name);
    }
    if (st == FLASHCL_SUCCESS) {
        /* The PTX version the loaded code came from (90 for the sm_90a cubin and the compute_90
         * PTX; 80 where a build with other FLASHCL_CUDA_ARCHS / _PTX gave sm_80 code to this
         * device): below 90 the kernels have no griddepcontrol.wait. One
         * module, one image: any kernel tells. */
        int ptx = 0;
        k->sm90_launch =
            fc_cu()->LaunchKernelEx != NULL && ctx->cc_major >= 9 &&
            fc_cu()->FuncGetAttribute(&ptx, CU_FUNC_ATTRIBUTE_PTX_VERSION,
                                      k->attention_merge[FLASHCL_F32]) == CUDA_SUCCESS &&
            ptx >= 90;
    }
    return st;
}

flashcl_status fc_cuda_load_kernels(fc_cuda_context *ctx) {
    double start = now_seconds();
    flashcl_status st = FLASHCL_SUCCESS;
    int dt;
    CUresult r = fc_cu()->ModuleLoadData(&ctx->module, fc_cuda_fatbin);
    if (r != CUDA_SUCCESS) {
        ctx->module = NULL;
        /* Typical causes: a device newer than the cubins with a driver too old for the PTX
         * (CUDA_ERROR_UNSUPPORTED_PTX_VERSION), or a driver older than the nvcc that built us. */
        return fc_fail(FLASHCL_BACKEND_ERROR,
                       "cuModuleLoadData failed: %s (%d) loading flashcl's %zu-byte CUDA "
                       "fatbinary (sm_80/86/89/90a, compute_90 PTX) on %s; "
                       "FLASHCL_BACKEND=opencl avoids the CUDA backend",
                       fc_cu_error_name(r), (int)r, fc_cuda_fatbin_size, ctx->info.name);
    }
    for (dt = 0; dt < FC_CUDA_DTYPES && st == FLASHCL_SUCCESS; dt++)
        st = get_softmax_kernels(ctx, dt);
    if (st == FLASHCL_SUCCESS) st = get_attention_kernels(ctx);
    if (st != FLASHCL_SUCCESS) {
        fc_cuda_unload_kernels(ctx);
        return st;
    }
    ctx->load_seconds = now_seconds() - start;
    return FLASHCL_SUCCESS;
}

void fc_cuda_unload_kernels(fc_cuda_context *ctx) {
    if (ctx->module) fc_cu()->ModuleUnload(ctx->module);
    ctx->module = NULL;
}

int fc_cuda_dependent_launches(const fc_cuda_context *ctx) {
    return ctx->kernels.sm90_launch && !fc_env_flag("FLASHCL_CUDA_NO_PDL");
}

flashcl_status fc_cuda_launch(fc_cuda_context *ctx, CUfunction f, unsigned gx, unsigned gy,
                              unsigned threads, unsigned smem, void *args, int dependent,
                              const char *what) {
    CUlaunchConfig config;
    CUlaunchAttribute attribute;
    void *params[1];
    CUresult r;
    params[0] = args;
    dependent = dependent && fc_cuda_dependent_launches(ctx);
    if (!dependent) {
        r = fc_cu()->LaunchKernel(f, gx, gy, 1, threads, 1, 1, smem, ctx->stream, params, NULL);
    } else {
        memset(&attribute, 0, sizeof attribute);
        attribute.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attribute.value.programmaticStreamSerializationAllowed = 1;
        memset(&config, 0, sizeof config);
        config.gridDimX = gx, config.gridDimY = gy, config.gridDimZ = 1;
        config.blockDimX = threads, config.blockDimY = 1, config.blockDimZ = 1;
        config.sharedMemBytes = smem;
        config.hStream = ctx->stream;
        config.attrs = &attribute;
        config.numAttrs = 1;
        r = fc_cu()->LaunchKernelEx(&config, f, params, NULL);
    }
    if (r == CUDA_SUCCESS) return FLASHCL_SUCCESS;
    return fc_fail(r == CUDA_ERROR_OUT_OF_MEMORY ? FLASHCL_OUT_OF_MEMORY : FLASHCL_BACKEND_ERROR,
                   "%s(%s, %u x %u blocks of %u%s) failed: %s (%d)",
                   dependent ? "cuLaunchKernelEx" : "cuLaunchKernel", what, gx, gy, threads,
                   dependent ? ", programmatic dependent" : "", fc_cu_error_name(r), (int)r);
}
