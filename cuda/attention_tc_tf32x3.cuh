/* f32 attention on tensor cores at f32 accuracy (3xTF32): the pieces that the tensor-core
 * prefill kernel (attention_tc.cuh, DT = FC_F32) and the decode kernel (attention_tc_decode.cuh)
 * run for f32; the CUDA form of cl/attention_mma_tf32x3.cl, which says why and measures it. In
 * short:
 *
 * - Each operand is split into a TF32 big part and the rest in TF32 (small), and
 *   a·b = big·big + big·small + small·big: three mma.sync.m16n8k8 a product.
 * - A block's P·V is summed apart and added to O in f32, with the online-softmax rescale, in
 *   one FMA. The tensor cores accumulate with truncation; summed over all keys inside the mma,
 *   the error grew with the keys.
 * - Each warp owns 16 rows. Q is copied once into shared memory and from there into registers
 *   as raw f32 A fragments, split again for each key block.
 * - P comes from the score accumulators without shuffles: P·V sums each 8 keys in the order the
 *   C fragment holds them (A column t is key 2t, column t + 4 key 2t + 1), and V's B fragment
 *   reads the same keys.
 * - f32 rows are padded by 4 floats, so that every fragment load touches 32 banks.
 *
 * In the prefill kernel: Q [64][DP + 4] and two slots of K, V [KEYS][DP + 4], f32. CUDA allows
 * more than OpenCL's 48 KiB, hence larger key blocks. Global rows must be 16-byte aligned and
 * the head dim a multiple of 4 (the host checks; the SIMT kernel takes the rest). */
#pragma once

#include "attention_tc_primitives.cuh"

/* x as TF32 big and small parts, as f32 bits: big is x rounded to nearest TF32 by an integer
 * add and mask, small is x - big (exact in f32) truncated to TF32. cvt.rna.tf32.f32 costs ptxas
 * four instructions a rounding, and this kernel is bound by instruction issue: the integer form
 * took an H200 from 35.7 to 47.2 TF/s at D128 S4096 (cl/attention_mma_tf32x3.cl says why it is
 * exact enough; bench/results/2026-11-27-session31.md). */
FC_DEVICE void tf32_split(float x, unsigned &big, unsigned &small) {
    big = (__float_as_uint(x) + 0x1000u) & 0xffffe000u;
    small = __float_as_uint(x - __uint_as_float(big)) & 0xffffe000u;
}

/* d += a·b for one 16x8x8 TF32 tile: A row-major 16x8, B column-major 8x8, f32 accumulators. */
FC_DEVICE void mma1688_tf32(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* d += A·B to about f32 accuracy; A split once by the caller, B (b0, b1) split here. The small
 * products go first, then big·big. */
FC_DEVICE void mma1688_x3(float (&d)[4], const unsigned (&a_big)[4], const unsigned (&a_small)[4],
                          float b0, float b1) {
    unsigned b0_big, b0_small, b1_big, b1_small;
    tf32_split(b0, b0_big, b0_small);
    tf32_split(b1, b1_big, b1_small);
    mma1688_tf32(d, a_small, b0_big, b1_big);
    mma1688_tf32(d, a_big, b0_small, b1_small);
    mma1688_tf32(d, a_big, b0_big, b1_big);
}

/* Four A-fragment values split into their big and small parts. */
FC_DEVICE void tf32_split4(float x0, float x1, float x2, float x3, unsigned (&big)[4],
                           unsigned (&small)[4]) {
    tf32_split(x0, big[0], small[0]);
    tf32_split(x1, big[1], small[1]);
    tf32_split(x2, big[2], small[2]);
    tf32_split(x3, big[3], small[3]);
}

/* f32 rows of DP elements padded by 4: chunk c (16 bytes) of row r, in bytes. Used with the
 * 16-bit loaders as rows of 2·DP 16-bit units (the loaders count chunks of 8 such units). */
template <int DP> struct f32_padded_layout {
    template <int ROWS> static FC_DEVICE int offset(int r, int c) { return (r * (DP + 4) + c * 4) * 4; }
};

/* Q's A fragments of one warp's 16 rows, raw f32, from a tile of f32 rows padded by 4: rows g and
 * g + 8 at dims kk·8 + t and kk·8 + t + 4 (split again for each key block: keeping both parts
 * would double them). */
template <int DP>
FC_DEVICE void tf32_load_q(float (&qa)[DP / 8][4], const float *rows16, int g, int t) {
    constexpr int STRIDE = DP + 4;
    const float *qr = rows16 + g * STRIDE + t;
#pragma unroll
    for (int kk = 0; kk < DP / 8; kk++) {
        qa[kk][0] = qr[kk * 8];
        qa[kk][1] = qr[8 * STRIDE + kk * 8];
        qa[kk][2] = qr[kk * 8 + 4];
        qa[kk][3] = qr[8 * STRIDE + kk * 8 + 4];
    }
}

/* One key block for one warp's 16 rows (packed rows w0..w0+15, keys n0..n0+KEYS-1), from a slot
 * of K then V rows (f32, padded by 4): S = Q·Kᵀ, the online softmax, and O = alpha·O + P·V with
 * the block's P·V summed apart. The prefill kernel (attention_tc.cuh, DT = FC_F32) and the decode
 * kernel (attention_tc_decode.cuh) run it. */
template <int DP, int KEYS>
FC_DEVICE void tf32x3_key_block(const fc_attention_args &a, const float (&qa)[DP / 8][4],
                                const float *slot, float (&o)[DP / 8][4], float (&m)[2],
                                float (&l)[2], bool masked, int64_t w0, int64_t n0, int g, int t) {
    constexpr int STRIDE = DP + 4, NT = KEYS / 8, DT8 = DP / 8;
    const float *kt = slot + g * STRIDE + t;
    const float *vt = slot + KEYS * STRIDE + 2 * t * STRIDE + g;

    /* S = Q·Kᵀ: B fragment (n, kk) is K[n·8 + g][kk·8 + t] and 4 dims on. */
    float s[NT][4];
#pragma unroll
    for (int n = 0; n < NT; n++) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < DT8; kk++) {
        unsigned a_big[4], a_small[4];
        tf32_split4(qa[kk][0], qa[kk][1], qa[kk][2], qa[kk][3], a_big, a_small);
#pragma unroll
        for (int n = 0; n < NT; n++)
            mma1688_x3(s[n], a_big, a_small, kt[n * 8 * STRIDE + kk * 8],
                       kt[n * 8 * STRIDE + kk * 8 + 4]);
    }

    float alpha[2];
    online_softmax_scores(a, s, m, l, alpha, masked, w0, n0, g, t);

    /* O = alpha·O + P·V, the block's P·V summed apart. A = (c0, c2, c1, c3) of score tile kk;
     * B = V[kk·8 + 2t] and the key after it, at dim j·8 + g. */
    unsigned p_big[NT][4], p_small[NT][4];
#pragma unroll
    for (int kk = 0; kk < NT; kk++)
        tf32_split4(s[kk][0], s[kk][2], s[kk][1], s[kk][3], p_big[kk], p_small[kk]);
#pragma unroll
    for (int j = 0; j < DT8; j++) {
        float pv[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int kk = 0; kk < NT; kk++)
            mma1688_x3(pv, p_big[kk], p_small[kk], vt[kk * 8 * STRIDE + j * 8],
                       vt[(kk * 8 + 1) * STRIDE + j * 8]);
#pragma unroll
        for (int e = 0; e < 4; e++) o[j][e] = fmaf(o[j][e], alpha[e / 2], pv[e]);
    }
}
