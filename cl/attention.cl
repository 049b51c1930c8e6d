/* cl/attention.cl — fused attention forward (flash attention) and the merge of partial results:
 * the overview, and the entry point that includes the parts for a standalone compile.
 *
 *   o = softmax(scale·q·kᵀ + mask)·v per (batch, query head), never materialising Sq×Sk.
 *
 * One work-group owns a tile of BM query rows of one (batch, kv head): the rows are the G query
 * heads that share the kv head times the Sq queries, head-major (row = g·Sq + i), so a decode
 * step's GQA heads all reuse the same key loads, and prefill tiles are plain runs of queries.
 * Key tiles of BN keys stream through local memory; per tile:
 *   1. S = Q·Kᵀ: the head dimension goes in chunks of DC through local memory (Q and K chunk
 *      side by side); each work-item accumulates a TM×TN micro-tile of S in registers, reading
 *      float4s of Q and K (a GEMM register tiling: TM+TN loads feed TM·TN FMAs).
 *   2. Online softmax: scores are scaled into log2 units (scale·log2 e folded into one
 *      multiplier), soft-capped, masked (only tiles that touch a mask boundary pay for it), the
 *      row max is reduced over the C work-items sharing a row (warp shuffles on NVIDIA, local
 *      memory elsewhere), and the accumulator and row sum are rescaled by exp2(m_old - m_new).
 *      A row max of -inf is used as 0, so exp2(-inf - -inf) never makes a NaN.
 *   3. O += P·V: P goes through local memory; V streams in chunks of VC keys; each work-item
 *      owns TM rows × (DP/C) dims of O, again as float4 register tiles.
 * The output is normalised once at the end; lse = (m + log2 l)·ln 2.
 *
 * Global loads run one stage ahead of the compute (software pipelining through registers),
 * so that a chunk's loads are in flight while the previous chunk is multiplied.
 *
 * The same body runs split-KV (decode): the work-group's split index restricts the keys to
 * [split·keys_per_split, ...), and the normalised partial o and its lse go to f32 scratch;
 * fc_attn_split_merge combines them. fc_attn_merge merges user-provided partial results.
 *
 * Geometry: a tuple C,R,TM,TN,DC,VC per kernel (C work-items share a row, R row groups, so the
 * work-group is R·C items, BM = R·TM rows, BN = C·TN keys). The host chooses them per device
 * (src/opencl/attention_plan.c) and passes them with -D; a tuple whose C is 0 disables the kernel.
 * Two families: prefill (large query tiles) and decode (small tiles for G·Sq of a few rows,
 * with split-KV). Kernels exist per family, dtype and padded head dim DP (64, 128, 256): the
 * head dim D itself is a run-time argument (chunks and stores are guarded), DP sizes the O
 * registers. With FC_ATTN_GENERIC (CPUs) one kernel per family takes dtype and DP at run time.
 *
 * Decode shapes normally run fc_attn_decode_keys_* instead (cl/attention_decode.cl: key-parallel
 * scores, V straight from global memory; same arguments and split-KV partials), and for f32 on
 * NVIDIA sm80+ its cp.async form fc_attn_decode_async*_ (cl/attention_decode_async.cl); the tiled
 * decode family stays as the A/B reference (FLASHCL_ATTENTION_DECODE_LEGACY=1). CPU devices
 * run every shape on the CPU kernels (cl/attention_cpu.cl: a work-item of float16 vectors, no
 * local memory) and keep the generic kernels for A/B and for the tests that force a family or
 * switch the CPU kernels off (they are how CI exercises the GPUs' code on PoCL).
 *
 * Files (CMakeLists.txt's FLASHCL_ATTENTION_PROGRAM concatenates them in this order when the
 * library embeds the program; this file is only for standalone compiles such as CI's clang):
 *   ptx_async.h           cp.async wrappers (NVIDIA inline PTX; empty elsewhere)
 *   attention_common.cl   tuples, storage types, index helpers, key ranges, row reductions
 *   attention_forward.cl  the tiled forward kernel (prefill, legacy decode)
 *   attention_decode.cl   the key-parallel split-KV decode kernel
 *   attention_decode_async.cl  its f32 form fed by cp.async (NVIDIA sm80+, FC_ATTN_ASYNC)
 *   attention_cpu.cl      the CPUs' kernels: a work-item of float16 vectors (FC_ATTN_CPU)
 *   attention_merge.cl    the split-KV merge and flashcl_attention_merge's kernel
 * NVIDIA GPUs (compute capability 8.0+) also get a program of its own, ptx_async.h +
 * attention_common.cl + attention_mma.cl: the same forward on tensor cores through inline PTX, which the host prefers
 * for f16/bf16 with D <= 128 (src/opencl/attention_mma.c). */
#ifndef FLASHCL_EMBEDDED
#include "portability.h"
#include "dtype.h"
#include "ptx_async.h"
#include "attention_common.cl"
#include "attention_forward.cl"
#include "attention_decode.cl"
#include "attention_decode_async.cl"
#include "attention_cpu.cl"
#include "attention_merge.cl"
#endif

