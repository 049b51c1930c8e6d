/* cl/attention_mma_tf32x3.cl — f32 attention forward on NVIDIA tensor cores at f32 accuracy
 * (3xTF32). Part of the tensor-core program (after attention_mma.cl, whose exp2 it uses; NVIDIA
 * sm80+ only, inline PTX).
 *
 * Why: the portable FMA kernel runs f32 at 29 TF/s on an H200, whose f32 FMA peak is about 67,
 * while its TF32 tensor cores do about 495. TF32 alone keeps 10 mantissa bits, too few for f32
 * results, so each operand is split into a TF32 "big" part and what is left ("small", in TF32
 * too), and a·b is taken as big·big + big·small + small·big: three mma.sync.m16n8k8 whose sum
 * misses only small·small and the small parts' truncation, about 2^-21 of |a·b| each, against
 * f32's 2^-24 per FMA. Both products (S = Q·Kᵀ and P·V) are computed this way. The tensor
 * cores accumulate with truncation, so a block's P·V is summed apart (6-12 mma steps) and added
 * to O in f32, with the rescale in the same FMA: accumulated across 4096 keys inside the mma,
 * the error had grown to 8.4e-7 (2.3e-6 at 16384 keys); summed per block it is 1.6-3e-8, under
 * the FMA kernel's 5.6-7e-8 on the same inputs (bench host_ref check, H200). Measured on an
 * H200 (bench/results/2026-11-27-session30.md and -session31.md): D128 S4096 42.4 TF/s against
 * the FMA kernel's 28.8, D64 S2048 54.8 against 26.6. Measured and dropped: the scores in two
 * mma chains (8 % slower at D128: registers, not the chains' latency, bound it: 255 and 16
 * bytes spilled).
 *
 * The schedule is the f16 kernel's (attention_mma.cl): a work-group of 4 warps owns 64 packed
 * rows, each warp 16; Q goes through local memory once into registers (raw f32 A fragments,
 * split again for each block: keeping both parts would double them); K and V blocks stream
 * through a two-slot ring with cp.async; blocks are walked from the last visible one down so
 * only the first ones pay for the mask.
 *
 * Fragments of m16n8k8 (g = lane / 4, t = lane % 4): A (16x8) a0 = (g, t), a1 = (g + 8, t),
 * a2 = (g, t + 4), a3 = (g + 8, t + 4); B (8x8) b0 = (t, g), b1 = (t + 4, g); C (16x8)
 * c0, c1 = (g, 2t), (g, 2t + 1), c2, c3 the same at row g + 8. The scores' C layout is not the
 * A layout P·V needs, so P·V sums its 8 keys in another order: A's column t is key 2t and
 * column t + 4 key 2t + 1 (a = (c0, c2, c1, c3)), and V's B fragment takes the same keys
 * (b0 = V[2t][g], b1 = V[2t + 1][g]). No shuffles.
 *
 * Local memory: f32 rows padded by 4 floats (stride ≡ 4 mod 32 banks), so that every fragment
 * load of Q, K (row g, column t: bank 4g + t) and V (row 2t, column g: bank 8t + g) touches 32
 * different banks. Q [64][DP + 4] at first, then 2 × (K, V) [KEYS][DP + 4] over the same
 * bytes: 34-35 KiB at KEYS 32 for DP 64 and 16 for DP 128 (NVIDIA's OpenCL allows 48 KiB).
 *
 * The host sends only f32 calls of D <= 128, D a multiple of 4, every q, k, v and o row 16-byte
 * aligned (src/opencl/attention_mma.c). o (final rows or split-KV partials, both f32) is
 * written from the accumulators in pairs: four threads fill a 32-byte sector. */

#define FC_TF32_WARPS 4
#define FC_TF32_STRIDE(DP) ((DP) + 4)
#define FC_TF32_NT_MAX 4 /* score tiles of 8 keys a block: KEYS <= 32 */
#define FC_TF32_SMEM(DP, KEYS)                                                                 \
    FC_ATTN_MAX2(16 * FC_TF32_WARPS * FC_TF32_STRIDE(DP), 4 * (KEYS) * FC_TF32_STRIDE(DP))

/* x as TF32 (big, small) parts, as f32 bits: big is x rounded to TF32 (to nearest, ties away:
 * half the unit of the 13 dropped bits added to the bit pattern, whose carry moves into the
 * exponent as it should, then the dropped bits cleared); x - big is exact in f32 and small is it
 * truncated to TF32, which is what the tensor cores read of it anyway. Truncation adds at most
 * 2^-21 of |x|, the order of the small·small product 3xTF32 leaves out. Why not cvt.rna.tf32.f32:
 * ptxas makes it four instructions (an inf/NaN test and a select around the add and the mask),
 * and this kernel is bound by instruction issue, not by the tensor cores: splitting with the
 * integer form cut the hot loop from 13.7 to 9.4 instructions an mma (clang + ptxas sm_90a) and
 * took the H200 from 35.0 to 42.4 TF/s at D128 and from 43.6 to 54.8 at D64, with the same errors
 * (bench/results/2026-11-27-session31.md). inf and NaN give NaN small parts either way, so their
 * products stay NaN. */
FC_INLINE uint2 fc_tf32_split(float x)
{
    const uint big = (as_uint(x) + 0x1000u) & 0xffffe000u;
    return (uint2)(big, as_uint(x - as_float(big)) & 0xffffe000u);
}

/* acc += A·B for one 16x8x8 TF32 tile. */
FC_INLINE float4 fc_mma_1688(float4 acc, uint4 a, uint b0, uint b1)
{
    float c0 = acc.x, c1 = acc.y, c2 = acc.z, c3 = acc.w;
    __asm__("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, "
            "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
            : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3)
            : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b0), "r"(b1));
    return (float4)(c0, c1, c2, c3);
}

/* An A fragment split once for the several B fragments it meets. */
typedef struct {
    uint4 big, small;
} fc_tf32_a;

FC_INLINE fc_tf32_a fc_tf32_split_a(float4 a)
{
    const uint2 x = fc_tf32_split(a.x), y = fc_tf32_split(a.y), z = fc_tf32_split(a.z),
                w = fc_tf32_split(a.w);
    fc_tf32_a r;
    r.big = (uint4)(x.x, y.x, z.x, w.x);
    r.small = (uint4)(x.y, y.y, z.y, w.y);
    return r;
}

/* acc += A·B for one 16x8x8 tile to about f32 accuracy: the small products first, then
 * big·big. */
FC_INLINE float4 fc_mma_1688_x3(float4 acc, fc_tf32_a a, float b0, float b1)
{
    const uint2 p = fc_tf32_split(b0), r = fc_tf32_split(b1);
    acc = fc_mma_1688(fc_mma_1688(acc, a.small, p.x, r.x), a.big, p.y, r.y);
    return fc_mma_1688(acc, a.big, p.x, r.x);
}

FC_INLINE void fc_tf32_forward(__global const uchar *q, __global const uchar *k,
                               __global const uchar *v, __global uchar *o, __global float *lse,
                               long4 qs, long4 ks, long4 vs, long4 os, long4 ls, int4 dims,
                               int4 grid, int4 mask, float2 score, long2 split_stride, int tail,
                               __local float *smem, const int DP, const int KEYS)
{
    const int STRIDE = FC_TF32_STRIDE(DP), NT = KEYS / 8, DT8 = DP / 8;
    const int THREADS = 32 * FC_TF32_WARPS, ROWS = 16 * FC_TF32_WARPS;
    const int SLOT = 2 * KEYS * STRIDE; /* one ring slot: K then V */
    const int Sq = dims.x, D = dims.z, G = dims.w, has_lse = mask.w;
    const int lid = (int)get_local_id(0), warp = lid / 32, lane = lid % 32;
    const int gq = lane / 4, tq = lane % 4;

    FC_MMA_OPENING(ROWS, KEYS) /* attention_mma.cl */

    const ulong k_head = fc_attn_row(ks, b, 0, kvh), v_head = fc_attn_row(vs, b, 0, kvh);
    /* Q's A fragments, raw f32: qa[kk] = rows (gq, gq + 8) at dims kk·8 + tq and + 4. */
    float4 qa[FC_MMA_DP_MAX / 8];
    if (last_block >= first_block) {
        fc_mma_load_q((__local uchar *)smem, q, qs, b, kvh, G, r0, rows, Sq, D, lid, 4, STRIDE, DP,
                      ROWS, THREADS);
        {
            __local const float *qr = smem + (warp * 16 + gq) * STRIDE + tq;
#pragma unroll
            for (int kk = 0; kk < DT8; kk++)
                qa[kk] = (float4)(qr[kk * 8], qr[8 * STRIDE + kk * 8], qr[kk * 8 + 4],
                                  qr[8 * STRIDE + kk * 8 + 4]);
        }
        barrier(CLK_LOCAL_MEM_FENCE); /* every warp holds its Q: the ring may overwrite it */
        fc_mma_load_block((__local uchar *)smem, k, v, k_head, v_head, ks.y, vs.y,
                          last_block * KEYS, ke, D, lid, 4, STRIDE, DP, KEYS, THREADS);
        fc_async_commit();
    }

    /* Raw scores with the scale folded into the exp2 (as in attention_mma.cl) unless softcap
     * or a negative scale asks for the transform first. */
    const int fold = score.y == 0.0f && score.x > 0.0f;
    const float c = fold ? score.x : 1.0f;
    int slot = 0;
    for (int blk = last_block; blk >= first_block; blk--, slot ^= 1) {
        const int n0 = blk * KEYS;
        fc_async_wait(0);             /* this thread's copies of K/V(blk) have landed */
        barrier(CLK_LOCAL_MEM_FENCE); /* ... everyone's, and the other slot is free */
        if (blk > first_block) {
            fc_mma_load_block((__local uchar *)(smem + (slot ^ 1) * SLOT), k, v, k_head, v_head,
                              ks.y, vs.y, n0 - KEYS, ke, D, lid, 4, STRIDE, DP, KEYS, THREADS);
            fc_async_commit();
        }
        __local const float *kt = smem + slot * SLOT + gq * STRIDE + tq;
        __local const float *vt = smem + slot * SLOT + KEYS * STRIDE + 2 * tq * STRIDE + gq;

        /* S = Q·Kᵀ: B fragment (n, kk) is K[n·8 + gq][kk·8 + tq] and 4 dims on. */
        float4 s[FC_TF32_NT_MAX];
#pragma unroll
        for (int n = 0; n < FC_TF32_NT_MAX; n++) s[n] = (float4)(0.0f);
#pragma unroll
        for (int kk = 0; kk < DT8; kk++) {
            const fc_tf32_a a = fc_tf32_split_a(qa[kk]);
#pragma unroll
            for (int n = 0; n < NT; n++)
                s[n] = fc_mma_1688_x3(s[n], a, kt[n * 8 * STRIDE + kk * 8],
                                      kt[n * 8 * STRIDE + kk * 8 + 4]);
        }

        float sub[2], alpha[2]; /* online softmax (attention_mma.cl) */
        FC_MMA_SOFTMAX_STEP(s, NT, FC_TF32_NT_MAX, n0, KEYS)

        /* O = alpha·O + P·V, the block's P·V summed apart (a few truncating steps), then
         * added in f32 with the rescale: the tensor cores' truncation does not pile up over
         * the keys. 8 keys a step: A = (c0, c2, c1, c3) of score tile kk, B = V[kk·8 + 2tq]
         * and the key after it, at dim j·8 + gq. */
        uint4 p_big[FC_TF32_NT_MAX], p_small[FC_TF32_NT_MAX];
#pragma unroll
        for (int kk = 0; kk < NT; kk++) {
            const fc_tf32_a pk = fc_tf32_split_a((float4)(s[kk].x, s[kk].z, s[kk].y, s[kk].w));
            p_big[kk] = pk.big;
            p_small[kk] = pk.small;
        }
#pragma unroll
        for (int j = 0; j < DT8; j++) {
            float4 pv = (float4)(0.0f);
#pragma unroll
            for (int kk = 0; kk < NT; kk++) {
                fc_tf32_a pk;
                pk.big = p_big[kk];
                pk.small = p_small[kk];
                pv = fc_mma_1688_x3(pv, pk, vt[kk * 8 * STRIDE + j * 8],
                                    vt[(kk * 8 + 1) * STRIDE + j * 8]);
            }
            acc[j] = (float4)(fma(acc[j].xy, (float2)(alpha[0]), pv.xy),
                              fma(acc[j].zw, (float2)(alpha[1]), pv.zw));
        }
    }

    /* ---- normalise and store ---- */
    float inv[2];
    FC_MMA_FINISH_ROWS()
    FC_MMA_STORE_F32()
}

#define FC_TF32_KERNEL(name, DP, KEYS)                                                          \
    __kernel __attribute__((reqd_work_group_size(32 * FC_TF32_WARPS, 1, 1))) void name(        \
        FC_ATTN_FORWARD_PARAMS)                                                                \
    {                                                                                          \
        __local float smem[FC_TF32_SMEM(DP, KEYS)] __attribute__((aligned(16)));               \
        (void)aligned, (void)in_dtype;                                                         \
        fc_tf32_forward(q, k, v, o, lse, qs, ks, vs, os, ls, dims, grid, mask, score,         \
                        split_stride, tail, smem, DP, KEYS);                                   \
    }
FC_TF32_KERNEL(fc_attn_mma_d64_f32, 64, 32)
FC_TF32_KERNEL(fc_attn_mma_d128_f32, 128, 16)
