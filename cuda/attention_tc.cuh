/* Attention forward on tensor cores (f16 / bf16 storage, f32 accumulation): FlashAttention-2's
 * schedule with mma.sync.m16n8k16, ldmatrix and cp.async.
 *
 * A block of 4 warps owns 64·MT packed rows (GQA: the query heads of one kv head share its K/V
 * tiles); each warp owns MT tiles of 16 rows. Every K and V fragment a warp loads from shared
 * memory feeds MT mmas: with MT = 2 the loop is bound by the tensor cores, not by ldmatrix.
 * Per key block: S = Q·Kᵀ in registers, online softmax with exp2 (scale folded into one FMA),
 * and O += P·V with P kept in registers: the S accumulators are laid out exactly as the A
 * operand of the next mma wants them, P rounded to the storage type as FlashAttention does.
 * Key blocks are walked from the last visible one down, so the blocks that straddle the causal
 * diagonal or the end of the keys come first and only they pay for the mask.
 *
 * Shared memory: Q [ROWS][DP] and a ring of two slots of K [KEYS][DP] + V [KEYS][DP] (16-bit),
 * rows padded by 16 bytes so that the 8 rows an ldmatrix reads fall into 8 different bank
 * groups. K and V of the next block stream into the other slot during the whole of this one,
 * with one barrier per key block. Q stays in registers where they allow (QREG), else it is
 * re-read from shared memory.
 * Global rows must be 16-byte aligned (the host checks; other layouts use the SIMT kernel). */
#pragma once

#include <type_traits>

#include "attention_tc_tf32x3.cuh"

/* DT = FC_F32 (MT 1) is the f32 form by 3xTF32 (attention_tc_tf32x3.cuh): f32 rows padded by 4,
 * Q's raw A fragments and tf32x3_key_block for each key block, o stored as pairs. */
template <int DT, int DP, int KEYS, int MT>
__device__ void attention_tc(const fc_attention_args &a) {
    constexpr bool F32 = DT == FC_F32;
    static_assert(!F32 || MT == 1, "the f32 form owns one tile of 16 rows a warp");
    constexpr int ES = F32 ? 4 : 2; /* bytes an element */
    /* the loaders count 16-bit units, two an f32 element */
    using elem = typename std::conditional<F32, float, uint16_t>::type;
    using layout = typename std::conditional<F32, f32_padded_layout<DP>, padded_layout<DP>>::type;
    constexpr int UNITS = F32 ? 2 * DP : DP;
    constexpr int WARPS = FC_ATTENTION_TC_WARPS, THREADS = 32 * WARPS, ROWS = 16 * MT * WARPS;
    constexpr int STRIDE = F32 ? DP + 4 : DP + 8, NT = KEYS / 8, DT8 = DP / 8, KD = DP / 16;
    constexpr bool QREG = MT * DP <= 128; /* Q fragments in registers: MT·DP/4 of them */
    extern __shared__ __align__(16) uint16_t smem[];
    constexpr int SLOT = 2 * KEYS * STRIDE; /* one ring slot: K then V */
    elem *q_tile = reinterpret_cast<elem *>(smem), *ring = q_tile + ROWS * STRIDE;
    const int units = F32 ? 2 * (int)a.head_dim : (int)a.head_dim;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;

    int64_t r0, b;
    int kv_head;
    block_position(a, ROWS, r0, b, kv_head);
    const block_keys plan = plan_keys(a, r0, ROWS, KEYS);
    const int64_t w0 = r0 + warp * 16 * MT; /* this warp's first packed row */

    float o[MT][DT8][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int j = 0; j < DT8; j++) o[mt][j][0] = o[mt][j][1] = o[mt][j][2] = o[mt][j][3] = 0.0f;
    float m[MT][2], l[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; mt++) m[mt][0] = m[mt][1] = -INFINITY, l[mt][0] = l[mt][1] = 0.0f;

    /* Per-thread ldmatrix bases. Q (A, 16x16): lanes 0-15 address rows 0-15 at column 0, lanes
     * 16-31 the same rows at column 8, giving a0..a3 of mma's row-major A. K (B, two 16x8
     * tiles): lane l addresses key (l/16)*8 + l%8 at dim ((l/8)%2)*8: rows of K are columns of
     * B, so the plain load yields b0, b1 of key tiles n and n + 1. V (B through .trans): lane l
     * addresses key ((l/8)%2)*8 + l%8 at dim (l/16)*8; transposing puts keys along k. */
    const unsigned q_frag = smem_u32(q_tile + (warp * 16 * MT + lane % 16) * STRIDE + (lane / 16) * 8);
    const unsigned k_frag0 = smem_u32(ring + ((lane / 16) * 8 + lane % 8) * STRIDE + ((lane / 8) % 2) * 8);
    const unsigned v_frag0 = smem_u32(ring + KEYS * STRIDE + (((lane / 8) % 2) * 8 + lane % 8) * STRIDE + (lane / 16) * 8);

    const kv_sources src = kv_sources_of<ES>(a, b, kv_head);
    auto q_row = [&](int r, bool &ok) { return q_row_address<ES>(a, r0 + r, b, kv_head, ok); };
    auto load_kv = [&](int64_t n0, int slot) { /* K and V rows [n0, n0 + KEYS) into a slot */
        elem *dst = ring + slot * SLOT;
        load_rows<KEYS, UNITS, THREADS, layout>(dst, units, src.k + n0 * src.k_step, src.k_step, a.seqlen_k - n0,
                                                threadIdx.x);
        load_rows<KEYS, UNITS, THREADS, layout>(dst + KEYS * STRIDE, units, src.v + n0 * src.v_step, src.v_step,
                                                a.seqlen_k - n0, threadIdx.x);
        cp_async_commit();
    };

    /* Q in registers: raw f32 A fragments (f32), or ldmatrix fragments (16-bit, where QREG) */
    using q_frags =
        typename std::conditional<F32, float[DT8][4], unsigned[QREG ? MT : 1][QREG ? KD : 1][4]>::type;
    q_frags qa;
    if (plan.last_block >= plan.first_block) {
        load_tile<ROWS, UNITS, THREADS, layout>(q_tile, units, reinterpret_cast<const char *>(a.q), q_row,
                                                threadIdx.x);
        load_kv(plan.last_block * KEYS, 0);
    }

    int slot = 0;
    for (int64_t blk = plan.last_block; blk >= plan.first_block; blk--, slot ^= 1) {
        const int64_t n0 = blk * KEYS;
        cp_async_wait<0>(); /* K/V(blk) (and, first time, Q) have landed: this thread's copies */
        __syncthreads();    /* ... everyone's, and every warp is done with the other slot */
        if (blk > plan.first_block) load_kv(n0 - KEYS, slot ^ 1); /* streams during this block */
        if constexpr (F32) {
            if (blk == plan.last_block) tf32_load_q<DP>(qa, q_tile + warp * 16 * STRIDE, g, t);
            const bool masked = n0 < plan.all_lo || n0 + KEYS - 1 > plan.all_hi;
            tf32x3_key_block<DP, KEYS>(a, qa, ring + slot * SLOT, o[0], m[0], l[0], masked, w0, n0, g, t);
        } else {
            if constexpr (QREG) {
                if (blk == plan.last_block) {
#pragma unroll
                    for (int mt = 0; mt < MT; mt++)
#pragma unroll
                        for (int kk = 0; kk < KD; kk++) ldmatrix_x4(qa[mt][kk], q_frag + (mt * 16 * STRIDE + kk * 16) * 2);
                }
            }
            const unsigned k_frag = k_frag0 + slot * SLOT * 2, v_frag = v_frag0 + slot * SLOT * 2;

            /* S = Q·Kᵀ for this warp's rows and the block's KEYS keys. */
            float s[MT][NT][4];
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int n = 0; n < NT; n++) s[mt][n][0] = s[mt][n][1] = s[mt][n][2] = s[mt][n][3] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < KD; kk++) {
                unsigned qs[MT][4];
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    if constexpr (QREG) {
#pragma unroll
                        for (int x = 0; x < 4; x++) qs[mt][x] = qa[mt][kk][x];
                    } else {
                        ldmatrix_x4(qs[mt], q_frag + (mt * 16 * STRIDE + kk * 16) * 2);
                    }
                }
#pragma unroll
                for (int n = 0; n < NT; n += 2) {
                    unsigned kb[4];
                    ldmatrix_x4(kb, k_frag + (n * 8 * STRIDE + kk * 16) * 2);
#pragma unroll
                    for (int mt = 0; mt < MT; mt++) {
                        mma16816<DT>(s[mt][n], qs[mt], kb[0], kb[1]);
                        mma16816<DT>(s[mt][n + 1], qs[mt], kb[2], kb[3]);
                    }
                }
            }

            /* The f32 branch's twin, on purpose: one predicate above the branch made the 16-bit
             * d64/d32 kernels 1 % slower (H200, FLASHCL_CUDA_ATTENTION_NO_WGMMA, non-causal
             * B8 H64 S2048 D32 181.6 against 183.6-184.2 TF/s, B4 H32 S4096 D64 283.8 against
             * 286.7; bench/results/2026-11-27-h200-s33-masked-hoist.txt). */
            const bool masked = n0 < plan.all_lo || n0 + KEYS - 1 > plan.all_hi;
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
                online_softmax_tile(a, s[mt], o[mt], m[mt], l[mt], masked, w0 + mt * 16, n0, g, t);

#pragma unroll
            for (int kk = 0; kk < KEYS / 16; kk++) {
                unsigned p[MT][4];
#pragma unroll
                for (int mt = 0; mt < MT; mt++) probabilities_as_a<DT>(p[mt], s[mt], kk);
#pragma unroll
                for (int j = 0; j < DT8; j += 2) {
                    unsigned vb[4];
                    ldmatrix_x4_trans(vb, v_frag + (kk * 16 * STRIDE + j * 8) * 2);
#pragma unroll
                    for (int mt = 0; mt < MT; mt++) {
                        mma16816<DT>(o[mt][j], p[mt], vb[0], vb[1]);
                        mma16816<DT>(o[mt][j + 1], p[mt], vb[2], vb[3]);
                    }
                }
            }
        }
    }

    if (F32 || a.splits > 1) { /* f32 o, or f32 partials for the split-KV merge: pairs from registers */
#pragma unroll
        for (int mt = 0; mt < MT; mt++) store_tile<DT>(a, w0 + mt * 16, b, kv_head, o[mt], m[mt], l[mt], g, t);
        return;
    }
    if constexpr (!F32) {
        /* o through shared memory (Q's tile, free now), so that it leaves in 16-byte row chunks
         * rather than in 4-byte pairs that half-fill every memory sector. */
        __syncthreads(); /* every warp is done with Q's tile */
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
            stage_o_tile<DT, DT8, STRIDE>(a, q_tile, warp * 16 * MT + mt * 16, r0, b, kv_head, o[mt], m[mt], l[mt], g,
                                          t);
        __syncthreads();
        copy_out_rows<DP, ROWS, THREADS>(a, q_tile, r0, b, kv_head);
    }
}
