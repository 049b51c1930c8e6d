/* What the attention kernels (cuda/attention*.cuh, CUDA C++) and their host side
 * (src/cuda/attention.c, C99) must agree on. Plain C, fixed-width members, wide to narrow. */
#ifndef FLASHCL_CUDA_ATTENTION_SHARED_H
#define FLASHCL_CUDA_ATTENTION_SHARED_H

#include <stdint.h>

/* The forward kernels' by-value argument. Rows of a block are "packed GQA" rows: for one batch
 * entry and one kv head, row r is query i = r / group of query head kv_head * group + r % group,
 * so all the query heads that share a kv head share its K/V tiles. */
typedef struct fc_attention_args {
    uint64_t q, k, v, o, lse;       /* device addresses (offsets applied); lse 0: not wanted */
    uint64_t o_part, lse_part;      /* split-KV: f32 partials [split][B][Hq][Sq][D], [..][Sq] */
    int64_t q_strides[4], k_strides[4], v_strides[4], o_strides[4]; /* [b, s, h, d] elements */
    int64_t lse_strides[3];         /* [b, h, s] */
    int64_t batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim;
    int64_t keys_per_split;         /* a multiple of the kernel's key block */
    float scale_log2;               /* scale * log2(e): scores go to exp2 directly */
    float softcap;                  /* 0: off; else s = softcap * tanh(scale * qk / softcap) */
    float scale;                    /* for softcap */
    int32_t causal, window_left, window_right;
    int32_t group;                  /* heads_q / heads_kv */
    int32_t splits;                 /* 1: write o (and lse); >1: write the f32 partials */
    int32_t tail_heads;             /* 0, or the last (batch, kv head) pairs whose row blocks run
                                       heaviest first across all of them (block_position) */
} fc_attention_args;
#define FC_ATTENTION_ARGS_BYTES 304

/* A partial result for the merge kernel: o [B, Sq, H, D] (dtype of the merge) and f32 lse
 * [B, H, Sq], each with its own strides. */
typedef struct fc_merge_part {
    uint64_t o, lse;
    int64_t o_strides[4];
    int64_t lse_strides[3];
    int64_t reserved;
} fc_merge_part;
#define FC_MERGE_PART_BYTES 80

/* The merge kernel's argument: `parts` descriptors in device memory, or (internal split-KV) a
 * regular array of f32 partials in fc_attention_args' layout when regular_o != 0. */
typedef struct fc_merge_args {
    uint64_t part_descs;            /* device array of fc_merge_part, or 0 */
    uint64_t regular_o, regular_lse;/* split-KV partials: [part][B][H][Sq][D] and [part][B][H][Sq] */
    uint64_t o, lse;                /* outputs; lse 0: not wanted */
    int64_t o_strides[4], lse_strides[3];
    int64_t batch, seqlen_q, heads, head_dim;
    int32_t parts;
    int32_t part_dtype;             /* flashcl_dtype of the o parts (f32 for split-KV) */
    int32_t o_dtype;
    int32_t reserved;
} fc_merge_args;
#define FC_MERGE_ARGS_BYTES 144

/* Tensor-core forward (f16/bf16): blocks of FC_ATTENTION_TC_WARPS warps, each warp owning
 * `mtiles` tiles of 16 packed rows (64·mtiles rows per block), key blocks of `keys`.
 * X(name, head_dim_pad, keys, mtiles): the host takes the first whose pad covers head_dim.
 * mtiles = 2 halves the shared-memory reads per mma; D > 128 cannot hold two tiles' O, and
 * from D = 96 on, 64-key blocks would spill registers with two tiles (ptxas, sm_90a). A later
 * configuration of the same pad is a fallback where the first does not fit (d256k16: 99 KB of
 * shared memory on sm_86/89); FLASHCL_CUDA_ATTENTION_CONFIG=name forces one (measurements). On
 * an H100 (2026-11-22), 32-key blocks at D = 64 and one tile per warp at D = 64 and 128 were
 * slower than these. */
#define FC_ATTENTION_TC_CONFIGS(X) \
    X(d32, 32, 64, 2)              \
    X(d64, 64, 64, 2)              \
    X(d96, 96, 32, 2)              \
    X(d128, 128, 32, 2)            \
    X(d192, 192, 32, 1)            \
    X(d256, 256, 32, 1)            \
    X(d256k16, 256, 16, 1)
#define FC_ATTENTION_TC_WARPS 4
#define FC_ATTENTION_TC_THREADS (32 * FC_ATTENTION_TC_WARPS)

/* f32 forward on tensor cores at f32 accuracy (cuda/attention_tc_tf32x3.cuh, 3xTF32): blocks of
 * FC_ATTENTION_TC_WARPS warps of 16 packed rows (64 a block), key blocks of `keys`.
 * X(name, head_dim_pad, keys): the host takes the first whose pad covers head_dim and whose
 * shared memory the device gives (tf32_d128: 99 KiB, past sm_86/89's limit, where d128k16
 * takes its calls); FLASHCL_CUDA_ATTENTION_CONFIG=name forces one. H200, TF/s: D64 S2048 40.4
 * with 32 keys against 35.1 with 64; D128 S4096 35.7 with 32 keys, 35.6 with 16
 * (bench/results/2026-11-27-session30.md). */
#define FC_ATTENTION_TF32_CONFIGS(X) \
    X(tf32_d64, 64, 32)              \
    X(tf32_d128, 128, 32)            \
    X(tf32_d128k16, 128, 16)
#define FC_ATTENTION_TF32_ROWS (16 * FC_ATTENTION_TC_WARPS)

/* f32 decode on tensor cores by 3xTF32: the decode kernel (cuda/attention_tc_decode.cuh) with
 * the f32 prefill kernel's key block. X(name, head_dim_pad, keys, stages) as
 * FC_ATTENTION_TC_DECODE_CONFIGS (f32 rows padded by 4); the host takes the first whose pad covers
 * head_dim and whose shared memory the device gives, for f32 calls of at most 16 packed rows a kv
 * head. tf32_decode_d128 (110 KiB) leaves room for two blocks an SM on sm90, d128k16 (143 KiB)
 * for one: H200, B1 Hq32 Hkv4 Sk65536 D128, 3.0 TB/s of K and V with 64 splits (two blocks an SM)
 * against 2.3 for d128k16 at one block an SM and 0.9 for the SIMT kernel
 * (bench/results/2026-11-27-session31.md). */
#define FC_ATTENTION_TF32_DECODE_CONFIGS(X) \
    X(tf32_decode_d64, 64, 16, 3)          \
    X(tf32_decode_d128, 128, 8, 3)         \
    X(tf32_decode_d128k16, 128, 16, 2)

/* Hopper warpgroup-MMA forward (cuda/attention_wgmma.cuh; sm_90a cubin only, launched on
 * compute capability 9.0 alone): blocks of `wgs` warpgroups of 128 threads, each warpgroup
 * owning 64 packed rows, key blocks of `keys`; `pipe` 1 overlaps the softmax of one key block
 * with the P·V product of the one before; `blocks` is the launch bound's blocks per SM, which caps
 * the registers (255 with 1). X(name, head_dim_pad, keys, wgs, pipe, blocks); the host takes the
 * first whose pad covers head_dim, before the tensor-core prefill configurations, unless
 * FLASHCL_CUDA_ATTENTION_NO_WGMMA is set; FLASHCL_CUDA_ATTENTION_CONFIG=name forces one.
 * H100, f16, 2026-11-22 (TF/s against torch's FlashAttention-2 backend in the same run,
 * bench/results/2026-11-22-h100-session6.md):
 *   D = 64: one warpgroup per block, three blocks per SM (166 registers, no spill) is what closed
 *   the short-sequence gap -- B32 S512 244.6 (0.94x) against 208.6 (0.80x) with two blocks per SM
 *   (183 registers), S1024 causal 0.98x vs 0.85x, S4096 336.7 vs 311.1 -- and won on every point
 *   of the grid; two warpgroups per block and the overlapped softmax (220 registers, two blocks)
 *   were slower. Key blocks of 64 at four blocks per SM (wgmma_d64w1k64) win on the shortest
 *   causal rows alone (S512 causal 1.04x vs 0.97x) and lose from S2048 on: the host takes them
 *   for causal calls with seqlen_k <= 1024 (choose_kernel in src/cuda/attention.c).
 *   D = 128: two warpgroups, one block per SM; the overlapped softmax gains 1-4 % (S512 273.0 vs
 *   262.9, S4096 causal 364.7 vs 352.0); one warpgroup per block lost everywhere (S4096 349.5
 *   with 64-key blocks vs 421.5). The pingpong schedule on top of it (pipe 2, wgmma_d128pp: the
 *   warpgroups take turns to issue, a ring of three slots, mbarriers instead of a __syncthreads
 *   per key block) gains 3-9 % more: S512 283.2 vs 268.4, S1024 368.9 vs 345.4, S4096 460.8 vs
 *   421.5, S8192 causal 434.7 vs 402.2 (2026-11-22, session 7). Named barriers for the turns
 *   (bar.sync / bar.arrive, as FlashAttention-3) measured about as fast but make racecheck
 *   report the epilogue's staging tile as racing. wgmma_d128p and wgmma_d128 stay for A/B.
 *   The same schedule at D = 64 (two warpgroups, one block per SM, 218 registers) lost to
 *   wgmma_d64w1b3 everywhere (S512 192.2 vs 243.5, S16384 310.9 vs 344.3); 64-key blocks at two
 *   blocks per SM spill. Also slower than wgmma_d128pp, S512 causal included (163.6 there):
 *   64-key blocks with pingpong (S512 248.0 vs 284.2, causal 149.3), and one warpgroup with
 *   64-key blocks at two blocks per SM (S512 255.4, causal 164.4 with the overlap). A per-warp
 *   epilogue (each warp staging its rows in a freed ring slot, no block barrier, so one
 *   warpgroup's epilogue overlaps the other's last products) measured the same as the block-wide
 *   one (S512 283-284 vs 283-287 TF/s, S1024 366-370 vs 367-369) and was not kept.
 *   Pipe 3 (wgmma_d128ppp, cuda/attention_wgmma_persistent.cuh) is the pingpong schedule made
 *   persistent -- one block per SM walking row blocks, its K/V ring and the next Q running on
 *   across them -- for calls without a causal mask or a window (others skip it: src/cuda/
 *   attention.c, persistent_fits). H100, f16, non-causal, against wgmma_d128pp in the same run
 *   (2026-11-25, bench/ab_attention_configs.py): S512 319-321 vs 280-282 (FA2 273-275), S1024
 *   396-397 vs 360, S2048 445-450 vs 413, S4096 466-480 vs 431-444, S8192 484-487 vs 435-457,
 *   S16384 473-477 vs 439-450. At D = 64 the same kernel (two warpgroups, one block per SM)
 *   lost to wgmma_d64w1b3 (S512 218-221 vs 246, S4096 295-299 vs 333) and was not kept. Pipe 4
 *   (wgmma_d128pppc) is its causal instantiation (per-tile key blocks, a snake order of tiles),
 *   taken for causal calls with Sq <= Sk <= 1024 and one split (persistent_kinds).
 *   Pipe 5 (wgmma_d64w1b3_persistent, cuda/attention_wgmma_persistent_w1.cuh) is wgmma_d64w1b3
 *   made persistent (three one-warpgroup blocks per SM walking row blocks, the K/V ring and the
 *   next Q running on across them; 168 registers, no spill), for unmasked calls at D <= 64;
 *   masked ones keep wgmma_d64w1b3 (or wgmma_d64w1k64). With the per-row-block arithmetic of both
 *   persistent kernels made 32-bit (ncu had the integer pipe busiest at 48 % issue), H100, f16,
 *   non-causal, TF/s against wgmma_d64w1b3 and FA2 in the same run (2026-12-06, session 37):
 *   S512 282-285 vs 244-247 (FA2 242-254), S2048 338-350 vs 303-309, S8192 370-385 vs 305-322;
 *   wgmma_d128ppp S512 328-330 (FA2 285-288). Pipe 6 (wgmma_d64w1k64_persistent_causal) is the
 *   same kernel for causal calls too, with 64-key blocks at four blocks per SM (128 registers,
 *   no spill) as wgmma_d64w1k64: the host takes it for causal calls at D <= 64 with
 *   Sq <= Sk <= 2048 and one split (choose_kernel in src/cuda/attention.c has the figures). */
#define FC_ATTENTION_WGMMA_CONFIGS(X)    \
    X(wgmma_d64w1b3_persistent, 64, 128, 1, 5, 3) \
    X(wgmma_d64w1b3, 64, 128, 1, 0, 3)   \
    X(wgmma_d128ppp, 128, 128, 2, 3, 1)  \
    X(wgmma_d128pppc, 128, 128, 2, 4, 1) \
    X(wgmma_d128pp, 128, 128, 2, 2, 1)   \
    X(wgmma_d128p, 128, 128, 2, 1, 1)    \
    X(wgmma_d128, 128, 128, 2, 0, 1)     \
    X(wgmma_d64w1k64, 64, 64, 1, 0, 4)   \
    X(wgmma_d64w1k64_persistent_causal, 64, 64, 1, 6, 4)
#define FC_ATTENTION_WGMMA_ROWS_PER_WG 64
#define FC_ATTENTION_WGMMA_WG_THREADS 128
/* Dynamic shared memory of a configuration: Q, the ring slots of K + V (16-bit; three with the
 * pingpong schedule, pipe 2, else two), and 1024 bytes of slack for aligning the start to the
 * 1024-byte swizzle atoms. */
#define FC_ATTENTION_WGMMA_SLOTS(pipe) ((pipe) >= 2 && (pipe) <= 4 ? 3 : 2) /* 5, 6: two */
#define FC_ATTENTION_WGMMA_SMEM(pad, keys, wgs, pipe) \
    ((FC_ATTENTION_WGMMA_ROWS_PER_WG * (wgs) + FC_ATTENTION_WGMMA_SLOTS(pipe) * 2 * (keys)) * (pad) * 2 + 1024)

/* Tensor-core decode (f16/bf16, at most 16 packed rows): 4 warps, each streaming its own key
 * blocks of `keys` through a ring of `stages` shared-memory slots. X(name, head_dim_pad, keys,
 * stages); sized for two blocks per SM on sm90 (one for d256). Rings of 2 and 4 slots at D = 128
 * measured no better on an H100. */
#define FC_ATTENTION_TC_DECODE_CONFIGS(X) \
    X(d64, 64, 32, 3)                     \
    X(d128, 128, 16, 3)                   \
    X(d256, 256, 16, 2)
#define FC_ATTENTION_TC_DECODE_ROWS 16
/* Bytes of K + V per warp that the decode kernel asks L2 for before its programmatic-dependent
 * wait (cuda/attention_tc_decode.cuh). sm_90 only: 132 SMs x 4 warps x 32 KiB is a third of
 * an H100's or H200's 50 MB of L2, and it was measured nowhere else (an RTX 3090 has 6 MB).
 * H200, B1 Hq32 Hkv4 Sk65536 D128 f16: 39.5 us without, 38.7 with 64 KiB, 38.5 with 32 KiB
 * (2026-11-26). */
#ifndef FC_ATTENTION_TC_DECODE_PREFETCH_BYTES
#define FC_ATTENTION_TC_DECODE_PREFETCH_BYTES 32768
#endif

/* SIMT forward, true f32 (and the fallback for any layout, alignment or head_dim of any dtype):
 * 4 warps, 16 packed rows per block (4 per warp), key blocks of 32 (one per lane). */
#define FC_ATTENTION_SIMT_CONFIGS(X) \
    X(d64, 64)                       \
    X(d128, 128)                     \
    X(d256, 256)
#define FC_ATTENTION_SIMT_THREADS 128
#define FC_ATTENTION_SIMT_ROWS 16
#define FC_ATTENTION_SIMT_KEYS 32

#define FC_MERGE_THREADS 256 /* a block per (output row, 32 dims) */

#endif
