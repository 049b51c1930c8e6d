/* The CUDA backend's attention: forward (tensor cores for f16/bf16 with 16-byte aligned rows and
 * head_dim % 8 == 0 -- a decode kernel for at most 16 packed query rows, the prefill kernel
 * otherwise: wgmma on compute capability 9.0 (persistent for unmasked calls at every D and
 * short causal ones), mma.sync elsewhere -- f32 prefill on tensor cores at f32 accuracy
 * (3xTF32), true-f32 SIMT for the rest) with split-KV when the
 * problem has too few blocks to fill the GPU (decode: few queries, long keys), and the merge of
 * partial results. */
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"
#include "../attention_tail.h"
#include "../error.h"
#include "../text.h"

_Static_assert(sizeof(fc_attention_args) == FC_ATTENTION_ARGS_BYTES, "attention args layout");
_Static_assert(sizeof(fc_merge_part) == FC_MERGE_PART_BYTES, "merge part layout");
_Static_assert(sizeof(fc_merge_args) == FC_MERGE_ARGS_BYTES, "merge args layout");

#define FC_MAX_SPLITS 64
#define FC_MAX_FORCED_SPLITS 1024 /* FLASHCL_CUDA_ATTENTION_SPLITS, for measurements */

static size_t dtype_bytes(flashcl_dtype dt) { return dt == FLASHCL_F32 ? 4 : 2; }
static uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

static CUdeviceptr device_address(const void *mem, size_t offset) {
    return mem ? ((const fc_cuda_buffer *)mem)->pointer + offset : 0;
}

/* Rows of a [B, S, H, D] view start 16-byte aligned: what cp.async and the paired stores need. */
static int rows_16b_aligned(CUdeviceptr address, const int64_t strides[4], size_t bytes) {
    int i;
    if (address % 16) return 0;
    for (i = 0; i < 3; i++)
        if (((uint64_t)strides[i] * bytes) % 16) return 0;
    return 1;
}

/* Launches f on ctx's stream, with `dependent` as a programmatic dependent of the kernel queued
 * before it where the device allows (fc_cuda_launch). Only kernels that begin with
 * griddepcontrol.wait are launched dependent: the split-KV merge (behind the forward kernel) and
 * the decode kernel (behind the previous call's merge, or whatever the caller queued). On an
 * H100 (2026-11-22, f16) dependent launches took B1 Hkv4 Sk65536 decode from 0.0586 to 0.0553 ms
 * and B8 Hkv8 Sk8192 from 0.1051 to 0.1000. */
static flashcl_status launch(fc_cuda_context *ctx, CUfunction f, uint64_t gx, unsigned gy,
                                unsigned threads, unsigned smem, void *args, const char *what,
                                int dependent) {
    if (gx > 0x7fffffffu)
        return fc_fail(FLASHCL_UNSUPPORTED, "%s: %llu blocks is over the grid limit", what,
                       (unsigned long long)gx);
    return fc_cuda_launch(ctx, f, (unsigned)gx, gy, threads, smem, args, dependent, what);
}

/* Merges `parts` split-KV partials that the forward kernel left in scratch (f32, regular layout)
 * into the caller's o and lse. */
static flashcl_status merge_splits(fc_cuda_context *ctx, const fc_attention_args *a,
                                   const fc_attention_desc *d) {
    fc_merge_args m;
    memset(&m, 0, sizeof m);
    m.regular_o = a->o_part;
    m.regular_lse = a->lse_part;
    m.o = a->o;
    m.lse = a->lse;
    memcpy(m.o_strides, d->o_strides, sizeof m.o_strides);
    memcpy(m.lse_strides, d->lse_strides, sizeof m.lse_strides);
    m.batch = d->batch, m.seqlen_q = d->seqlen_q, m.heads = d->heads_q, m.head_dim = d->head_dim;
    m.parts = a->splits;
    m.part_dtype = FLASHCL_F32;
    m.o_dtype = (int32_t)d->dtype;
    return launch(ctx, ctx->kernels.attention_merge[FLASHCL_F32],
                     (uint64_t)(d->batch * d->seqlen_q * d->heads_q),
                     (unsigned)ceil_div((uint64_t)d->head_dim, 32), FC_MERGE_THREADS, 0, &m,
                     "split-KV merge", 1);
}

/* The first usable kernel of a set whose head-dim pad covers head_dim, or NULL; the one named
 * `forced` (FLASHCL_CUDA_ATTENTION_CONFIG, for measurements) instead when it is in the set and
 * fits. Persistent kernels only of the kinds in `persistent_ok` (bit p - 1 for kind p). */
static const fc_cuda_attention_kernel *first_fit(const fc_cuda_attention_kernel *set, int count,
                                                 int stride, int64_t head_dim,
                                                 const char *forced, int persistent_ok) {
    const fc_cuda_attention_kernel *found = NULL;
    int c;
    for (c = 0; c < count; c++) {
        const fc_cuda_attention_kernel *k = &set[c * stride];
        if (!k->usable || k->pad < head_dim ||
            (k->persistent && !(persistent_ok & (1 << (k->persistent - 1)))))
            continue;
        if (forced && !strcmp(forced, k->config)) return k;
        if (!found) found = k;
    }
    return found;
}

/* Whether FLASHCL_CUDA_ATTENTION_CONFIG names a wgmma configuration ("wgmma_..."). */
static int forces_wgmma(const char *forced) { return forced && !strncmp(forced, "wgmma_", 6); }

/* Whether this device can run any wgmma kernel (compute capability 9.0, enough shared memory). */
static int have_wgmma(const fc_cuda_context *ctx) {
    int c, dt;
    for (c = 0; c < FC_WGMMA_CONFIG_COUNT; c++)
        for (dt = 0; dt < 2; dt++)
            if (ctx->kernels.attention_wgmma[c][dt].usable) return 1;
    return 0;
}

/* The kinds of persistent wgmma kernel (cuda/attention_wgmma_persistent.cuh) that may take this
 * call, as first_fit's mask: none with a window, or with tile, row or key counts past their
 * 32-bit arithmetic; kind 1 (wgmma_d64w1b3_persistent, wgmma_d128ppp) for unmasked calls; kind 2
 * (wgmma_d64w1k64_persistent_causal, wgmma_d128pppc) for causal calls where every row sees a key
 * (Sq <= Sk; split causal calls leave that kernel once the splits are known) and Sk <= 1024
 * (2048 at D <= 64: see choose_kernel) -- beyond, its static tile order balances the uneven
 * causal row blocks worse than the hardware's block order: H100, f16, D 128, causal, TF/s
 * against wgmma_d128pp in the same run (2026-11-25) S512 179 vs 170, S1024 259 vs 255, S2048
 * 332 vs 341, S4096 365 vs 407 -- or when forced. A forced persistent configuration a call may
 * not take gives way to the first other one of its family that fits. */
static int persistent_kinds(const fc_attention_desc *d, const fc_attention_args *a, int forced) {
    const int64_t limit = (int64_t)1 << 30;
    if (d->window_left >= 0 || d->window_right >= 0 || d->seqlen_q * a->group >= limit ||
        d->seqlen_k >= limit || d->seqlen_q * a->group * d->batch * d->heads_kv >= limit)
        return 0;
    if (!d->causal) return 1 | (forced ? 2 : 0);
    return d->seqlen_q <= d->seqlen_k && (forced || d->seqlen_k <= (d->head_dim <= 64 ? 2048 : 1024))
               ? 2
               : 0;
}

/* The forward kernel for this call: tensor cores when the dtype is 16-bit and the rows allow
 * 16-byte copies -- the decode kernel when all packed rows fit its 16 (unless
 * FLASHCL_CUDA_ATTENTION_NO_DECODE asks for a prefill kernel, for comparisons), else Hopper's
 * wgmma kernel on compute capability 9.0 (unless FLASHCL_CUDA_ATTENTION_NO_WGMMA), else the
 * mma.sync prefill kernel --, f32 on tensor cores by 3xTF32 under the same conditions (its
 * decode and prefill kernels alike), and the SIMT kernel, which takes any layout, for the rest. A
 * forced configuration (FLASHCL_CUDA_ATTENTION_CONFIG) of the wgmma family skips the decode
 * kernel and overrides NO_WGMMA; one of another family skips the wgmma kernels. */
static const fc_cuda_attention_kernel *choose_kernel(const fc_cuda_context *ctx,
                                                     const fc_attention_desc *d,
                                                     const fc_attention_args *a, int *decode) {
    const fc_cuda_kernels *k = &ctx->kernels;
    const size_t bytes = dtype_bytes(d->dtype);
    const fc_cuda_attention_kernel *kernel = NULL;
    const char *forced = getenv("FLASHCL_CUDA_ATTENTION_CONFIG");
    const int force_wgmma = forces_wgmma(forced);
    const int rows16 = /* every q, k, v and o row: what the tensor-core kernels' copies need */
        rows_16b_aligned(a->q, a->q_strides, bytes) && rows_16b_aligned(a->k, a->k_strides, bytes) &&
        rows_16b_aligned(a->v, a->v_strides, bytes) && rows_16b_aligned(a->o, a->o_strides, bytes);
    *decode = 0;
    if (forced && !*forced) forced = NULL; /* set but empty: nothing forced */
    if (d->dtype != FLASHCL_F32 && d->head_dim % 8 == 0 && rows16) {
        if (!force_wgmma && d->seqlen_q * a->group <= FC_ATTENTION_TC_DECODE_ROWS &&
            !fc_env_flag("FLASHCL_CUDA_ATTENTION_NO_DECODE")) {
            kernel = first_fit(&k->attention_tc_decode[0][d->dtype - 1], FC_TC_DECODE_CONFIG_COUNT,
                               2, d->head_dim, forced, 0);
            *decode = kernel != NULL;
        }
        if (!kernel &&
            (force_wgmma || (!forced && !fc_env_flag("FLASHCL_CUDA_ATTENTION_NO_WGMMA")))) {
            /* Short causal rows at D <= 64 take 64-key blocks: their diagonal blocks mask half
             * as many keys (H100, f16, causal, TF/s against 128-key blocks: B32 H32 S512 157.2
             * vs 146.4, B16 S1024 204.7 vs 203.0; slower from S2048 on: 246.9 vs 259.4). Where
             * persistent_kinds allows, up to 2048 keys, in the persistent kernel of 64-key
             * blocks (H100, f16, 2026-12-06, against wgmma_d64w1k64 then wgmma_d64w1b3: S512
             * 174-176 vs 161-163, S1024 225-235 vs 206-217, S2048 271 vs 261; S4096 299-301 vs
             * 306-308, S16384 308-313 vs 332-335, where it stays off). */
            const fc_cuda_attention_kernel *short_causal =
                &k->attention_wgmma[FC_WGMMA_CONFIG_wgmma_d64w1k64][d->dtype - 1];
            const fc_cuda_attention_kernel *short_causal_persistent =
                &k->attention_wgmma[FC_WGMMA_CONFIG_wgmma_d64w1k64_persistent_causal][d->dtype - 1];
            if (!forced && d->causal && d->head_dim <= 64) {
                if ((persistent_kinds(d, a, 0) & 2) && short_causal_persistent->usable)
                    kernel = short_causal_persistent;
                else if (d->seqlen_k <= 1024 && short_causal->usable)
                    kernel = short_causal;
            }
            if (!kernel)
                kernel = first_fit(&k->attention_wgmma[0][d->dtype - 1], FC_WGMMA_CONFIG_COUNT,
                                   2, d->head_dim, forced,
                                   persistent_kinds(d, a, forced != NULL));
        }
        if (!kernel)
            kernel = first_fit(&k->attention_tc[0][d->dtype - 1], FC_TC_CONFIG_COUNT, 2, d->head_dim,
                               forced, 0);
    }
    /* f32 on tensor cores at f32 accuracy (3xTF32) where the rows allow 16-byte copies: the
     * decode kernel where a kv head's packed rows fit its 16 (warps walking keys apart), else the
     * prefill kernel; FLASHCL_CUDA_ATTENTION_NO_TF32=1 keeps the SIMT kernel (A/B runs). */
    if (!kernel && d->dtype == FLASHCL_F32 && d->head_dim % 4 == 0 && rows16 &&
        !fc_env_flag("FLASHCL_CUDA_ATTENTION_NO_TF32")) {
        if (d->seqlen_q * a->group > FC_ATTENTION_TC_DECODE_ROWS)
            kernel = first_fit(k->attention_tf32, FC_TF32_CONFIG_COUNT, 1, d->head_dim, forced, 0);
        else if (!fc_env_flag("FLASHCL_CUDA_ATTENTION_NO_DECODE")) {
            kernel = first_fit(k->attention_tf32_decode, FC_TF32_DECODE_CONFIG_COUNT, 1,
                               d->head_dim, forced, 0);
            *decode = kernel != NULL;
        }
    }
    if (!kernel)
        kernel = first_fit(&k->attention_simt[0][d->dtype], FC_SIMT_CONFIG_COUNT, FC_CUDA_DTYPES,
                           d->head_dim, forced, 0);
    return kernel;
}

flashcl_status fc_cuda_attention_forward(void *opaque, const fc_attention_desc *d) {
    fc_cuda_context *ctx = opaque;
    const fc_cuda_attention_kernel *kernel;
    fc_attention_args a;
    int decode;
    uint64_t row_blocks, blocks, splits = 1, keys_per_split, min_split_keys;
    CUdeviceptr scratch;
    flashcl_status st;

    memset(&a, 0, sizeof a);
    a.q = device_address(d->q_mem, d->q_offset);
    a.k = device_address(d->k_mem, d->k_offset);
    a.v = device_address(d->v_mem, d->v_offset);
    a.o = device_address(d->o_mem, d->o_offset);
    a.lse = device_address(d->lse_mem, d->lse_offset);
    memcpy(a.q_strides, d->q_strides, sizeof a.q_strides);
    memcpy(a.k_strides, d->k_strides, sizeof a.k_strides);
    memcpy(a.v_strides, d->v_strides, sizeof a.v_strides);
    memcpy(a.o_strides, d->o_strides, sizeof a.o_strides);
    memcpy(a.lse_strides, d->lse_strides, sizeof a.lse_strides);
    a.batch = d->batch, a.seqlen_q = d->seqlen_q, a.seqlen_k = d->seqlen_k;
    a.heads_q = d->heads_q, a.heads_kv = d->heads_kv, a.head_dim = d->head_dim;
    a.scale = d->scale;
    a.scale_log2 = d->scale * 1.4426950408889634f;
    a.softcap = d->softcap;
    a.causal = d->causal, a.window_left = d->window_left, a.window_right = d->window_right;
    a.group = (int32_t)(d->heads_q / d->heads_kv);

    if (forces_wgmma(getenv("FLASHCL_CUDA_ATTENTION_CONFIG")) && !have_wgmma(ctx))
        return fc_fail(FLASHCL_UNSUPPORTED,
                       "FLASHCL_CUDA_ATTENTION_CONFIG=%s: the wgmma attention kernels run only on "
                       "compute capability 9.0 devices (%s is %d.%d)",
                       getenv("FLASHCL_CUDA_ATTENTION_CONFIG"), ctx->info.name, ctx->cc_major,
                       ctx->cc_minor);
    kernel = choose_kernel(ctx, d, &a, &decode);
    if (!kernel)
        return fc_fail(FLASHCL_UNSUPPORTED,
                       "no CUDA attention kernel fits head_dim %lld in this device's %zu bytes of "
                       "shared memory per block",
                       (long long)d->head_dim, ctx->info.local_mem_bytes);

    /* Split the keys when the (row block, batch, kv head) blocks would leave SMs idle: decode
     * shapes (Sq <= 16) and long keys. Each split gives every warp that walks keys on its own
     * (the decode kernel's 4) at least two key blocks. The decode kernel takes as many splits
     * as give every SM at most one block: on an H100 (2026-11-22, f16, D 128) B1 Hkv4 Sk65536 ran
     * in 52.1 us with 33 splits (132 blocks) against 53.0 with 66 and 55.8 with 48, and B8 Hkv8
     * Sk8192 in 95.3 us with 2 (128 blocks) against 104.0 with 3 (192: some SMs get two). The
     * f32 decode kernel, whose warps are busier with its three products a multiply, takes as
     * many as fill every block an SM holds (two on an H200): B1 Hq32 Hkv4 Sk65536 D128 3.0 TB/s
     * with 66 splits against 2.0 with 33 (2026-11-27, bench/results/2026-11-27-session31.md). */
    row_blocks = ceil_div((uint64_t)(d->seqlen_q * a.group), (uint64_t)kernel->rows);
    blocks = row_blocks * (uint64_t)(d->batch * d->heads_kv);
    min_split_keys = 2 * (uint64_t)kernel->keys * (decode ? FC_ATTENTION_TC_WARPS : 1);
    if (blocks < 2 * (uint64_t)ctx->sm_count && (uint64_t)d->seqlen_k > min_split_keys) {
        uint64_t most = ceil_div((uint64_t)d->seqlen_k, min_split_keys);
        const uint64_t decode_slots =
            (uint64_t)ctx->sm_count *
            (d->dtype == FLASHCL_F32 && kernel->blocks_per_sm > 1 ? (uint64_t)kernel->blocks_per_sm
                                                                  : 1);
        splits = decode ? decode_slots / blocks : ceil_div(2 * (uint64_t)ctx->sm_count, blocks);
        if (splits < 1) splits = 1;
        if (splits > most) splits = most;
        if (splits > FC_MAX_SPLITS) splits = FC_MAX_SPLITS;
    }
    {
        /* A forced split count (FLASHCL_CUDA_ATTENTION_SPLITS, for A/B measurements). */
        const long forced_splits = fc_env_long("FLASHCL_CUDA_ATTENTION_SPLITS", 0);
        if (forced_splits > 0)
            splits = forced_splits > FC_MAX_FORCED_SPLITS ? FC_MAX_FORCED_SPLITS
                                                          : (uint64_t)forced_splits;
    }
    if (kernel->persistent == 2 && d->causal && splits > 1) {
        /* Split causal calls leave some row blocks no key of a split: the same schedule without
         * persistence (the same rows and keys per block) takes them. */
        kernel = &ctx->kernels.attention_wgmma[kernel->pad == 64 ? FC_WGMMA_CONFIG_wgmma_d64w1k64
                                                                 : FC_WGMMA_CONFIG_wgmma_d128pp]
                                              [d->dtype - 1];
    }
    keys_per_split = ceil_div(ceil_div((uint64_t)d->seqlen_k, splits), (uint64_t)kernel->keys) *
                     (uint64_t)kernel->keys;
    splits = ceil_div((uint64_t)d->seqlen_k, keys_per_split);
    a.keys_per_split = (int64_t)keys_per_split;
    a.splits = (int32_t)splits;
    /* The causal tail order (src/attention_tail.h), sized by the kernel's occupancy. H100, f16,
     * causal, TF/s against the pair-after-pair order in the same process (2026-11-25): D 64 S512
     * 158-160 vs 154-155, S4096 301-305 vs 290-295; D 128 S1024 249.5 vs 243, S2048 337-338 vs
     * 322-323, S4096 400 vs 380-382, S8192 423-448 vs 407; S16384 (16 pairs, all in the tail
     * either way) unchanged. */
    a.tail_heads = (int32_t)fc_attention_tail_pairs(
        d, (int64_t)row_blocks, (int64_t)ctx->sm_count * kernel->blocks_per_sm, (int64_t)splits,
        "FLASHCL_CUDA_ATTENTION_NO_TAIL_ORDER", "FLASHCL_CUDA_ATTENTION_TAIL_HEADS");

    st = fc_cuda_enter(ctx);
    if (st != FLASHCL_SUCCESS) return st;
    mtx_lock(&ctx->lock);
    if (splits > 1) {
        const uint64_t rows_total = splits * (uint64_t)(d->batch * d->heads_q * d->seqlen_q);
        st = fc_cuda_scratch(ctx, rows_total * ((uint64_t)d->head_dim + 1) * 4, &scratch);
        a.o_part = scratch;
        a.lse_part = scratch + rows_total * (uint64_t)d->head_dim * 4;
    }
    if (kernel->persistent) {
        /* At most the blocks the GPU holds at once, which walk all the row blocks; fewer with
         * FLASHCL_CUDA_ATTENTION_PERSISTENT_BLOCKS=n (tests: many row blocks per block). */
        uint64_t most = (uint64_t)ctx->sm_count * (uint64_t)kernel->blocks_per_sm;
        const long forced_blocks = fc_env_long("FLASHCL_CUDA_ATTENTION_PERSISTENT_BLOCKS", 0);
        if (forced_blocks > 0 && (uint64_t)forced_blocks < most) most = (uint64_t)forced_blocks;
        if (blocks > most) blocks = most;
    }
    if (st == FLASHCL_SUCCESS)
        st = launch(ctx, kernel->function, blocks, (unsigned)splits, (unsigned)kernel->threads,
                       kernel->smem_bytes, &a, decode ? "attention decode" : "attention forward",
                       decode);
    if (st == FLASHCL_SUCCESS && splits > 1) st = merge_splits(ctx, &a, d);
    mtx_unlock(&ctx->lock);
    fc_cuda_leave(ctx);
    return st;
}

flashcl_status fc_cuda_attention_merge(void *opaque, const fc_attention_merge_desc *d) {
    fc_cuda_context *ctx = opaque;
    fc_merge_part *parts = calloc(d->parts, sizeof *parts);
    const size_t desc_bytes = d->parts * sizeof *parts;
    fc_merge_args m;
    CUdeviceptr scratch;
    CUresult r;
    flashcl_status st;
    size_t p;
    if (!parts) return fc_fail(FLASHCL_OUT_OF_MEMORY, "out of host memory");
    for (p = 0; p < d->parts; p++) {
        parts[p].o = device_address(d->o_part_mems[p], d->o_part_offsets[p]);
        parts[p].lse = device_address(d->lse_part_mems[p], d->lse_part_offsets[p]);
        memcpy(parts[p].o_strides, d->o_part_strides[p], sizeof parts[p].o_strides);
        memcpy(parts[p].lse_strides, d->lse_part_strides[p], sizeof parts[p].lse_strides);
    }
    memset(&m, 0, sizeof m);
    m.o = device_address(d->o_mem, d->o_offset);
    m.lse = device_address(d->lse_mem, d->lse_offset);
    memcpy(m.o_strides, d->o_strides, sizeof m.o_strides);
    memcpy(m.lse_strides, d->lse_strides, sizeof m.lse_strides);
    m.batch = d->batch, m.seqlen_q = d->seqlen_q, m.heads = d->heads, m.head_dim = d->head_dim;
    m.parts = (int32_t)d->parts;
    m.part_dtype = (int32_t)d->o_part_dtype;
    m.o_dtype = (int32_t)d->o_dtype;

    st = fc_cuda_enter(ctx);
    if (st != FLASHCL_SUCCESS) {
        free(parts);
        return st;
    }
    mtx_lock(&ctx->lock);
    st = fc_cuda_scratch(ctx, desc_bytes, &scratch);
    if (st == FLASHCL_SUCCESS) {
        /* From pageable memory the copy is staged before the call returns, so `parts` may be
         * freed right after; the kernel that reads it is ordered behind it on the stream. */
        r = fc_cu()->MemcpyHtoDAsync(scratch, parts, desc_bytes, ctx->stream);
        if (r != CUDA_SUCCESS) st = fc_cu_fail(r, "cuMemcpyHtoDAsync (merge descriptors)");
    }
    if (st == FLASHCL_SUCCESS) {
        m.part_descs = scratch;
        st = launch(ctx, ctx->kernels.attention_merge[d->o_part_dtype],
                       (uint64_t)(d->batch * d->seqlen_q * d->heads),
                       (unsigned)ceil_div((uint64_t)d->head_dim, 32), FC_MERGE_THREADS, 0, &m,
                       "attention merge", 0);
    }
    mtx_unlock(&ctx->lock);
    fc_cuda_leave(ctx);
    free(parts);
    return st;
}
