/* cl/attention_mma.cl — attention forward on NVIDIA tensor cores from OpenCL (f16 / bf16
 * storage, f32 accumulation). A program of its own, built only for NVIDIA GPUs of compute
 * capability 8.0 and up: NVIDIA's OpenCL driver has no matrix extension, but it passes inline
 * PTX through, and mma.sync.m16n8k16, ldmatrix and cp.async work there (probed on an H100).
 * Needs attention_common.cl (index helpers, key ranges, FC_ATTN_FORWARD_PARAMS). The f32
 * kernel of the same program (attention_mma_tf32x3.cl) shares its opening, Q and K/V copies,
 * softmax step and f32 stores (fc_mma_load_*, FC_MMA_*).
 *
 * The schedule is FlashAttention-2's, as in cuda/attention_tc.cuh: a work-group of WARPS warps
 * (FC_MMA_WARPS, or 2 in the _w2 kernels) owns 16·WARPS packed rows (head-major, as every OpenCL
 * attention kernel packs them: row = g·Sq + i), each warp 16 of them. Q is copied once into local
 * memory and from there into registers (A fragments); K and V blocks of KEYS keys stream through a
 * two-slot ring of local memory with cp.async, the next block's copy in flight during this block's
 * math, one barrier per block. The _ring kernels (two warps, for decode) load Q straight into
 * registers and keep SLOTS - 1 blocks' copies in flight in a deeper ring of smaller blocks.
 * Per block: S = Q·Kᵀ (ldmatrix for K), online softmax on the accumulators with exp2 (scale
 * folded into one FMA), O += P·V with P taken from the S accumulators as the A operand (their
 * layouts coincide) rounded to the storage type, V through ldmatrix.trans. Blocks are walked
 * from the last visible one down, so the ones that straddle the causal diagonal or the end of the
 * keys come first and only they pay for the mask.
 *
 * Local memory (16-bit elements, rows padded by 8 so that the 8 rows one ldmatrix phase reads
 * fall into different banks): Q [ROWS][DP + 8] at first, then the ring of 2 × (K, V)
 * [KEYS][DP + 8] over the same bytes (Q lives in registers by then), then o's 16-bit rows on
 * the way out. NVIDIA's OpenCL allows 48 KiB, which sets KEYS: 64 at DP 64, 32 at DP 128 (the
 * _ring kernels: SLOTS × (K, V) of half those keys, no Q).
 *
 * The host only sends shapes that fit: D a multiple of 8 and at most 128, every q, k, v and o
 * row 16-byte aligned (offset and strides multiples of 8 elements). Split-KV partials (f32)
 * are written straight from the accumulators, like the tiled kernel's. */

#ifndef FC_MMA_WARPS
#define FC_MMA_WARPS 4
#endif
/* (DP, KEYS) of the two kernels; arrays are sized for the larger. */
#define FC_MMA_DP_MAX 128
#define FC_MMA_KEYS_MAX 64
#define FC_MMA_STRIDE(DP) ((DP) + 8)
#define FC_MMA_SMEM(DP, KEYS, WARPS)                                                           \
    FC_ATTN_MAX2(16 * (WARPS) * FC_MMA_STRIDE(DP), 4 * (KEYS) * FC_MMA_STRIDE(DP))

/* ---- PTX wrappers -------------------------------------------------------------------------- */

/* cp.async and local addresses: cl/ptx_async.h (fc_async_*). */

FC_INLINE uint4 fc_mma_ldmatrix(uint address)
{
    uint a, b, c, d;
    __asm__ volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                     : "=r"(a), "=r"(b), "=r"(c), "=r"(d)
                     : "r"(address));
    return (uint4)(a, b, c, d);
}
FC_INLINE uint4 fc_mma_ldmatrix_trans(uint address)
{
    uint a, b, c, d;
    __asm__ volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                     : "=r"(a), "=r"(b), "=r"(c), "=r"(d)
                     : "r"(address));
    return (uint4)(a, b, c, d);
}

/* acc += A·B for one 16x8x16 tile (A row-major 16x16 as a0..a3, B column-major as b0, b1). */
FC_INLINE float4 fc_mma_16816(const int DT, float4 acc, uint4 a, uint b0, uint b1)
{
    float c0 = acc.x, c1 = acc.y, c2 = acc.z, c3 = acc.w;
    if (DT == FC_ATTN_F16)
        __asm__("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
                "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3)
                : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b0), "r"(b1));
    else
        __asm__("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
                "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3)
                : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b0), "r"(b1));
    return (float4)(c0, c1, c2, c3);
}

/* Two floats as a 16-bit pair of dtype DT, first in the low half, rounded to nearest even. */
FC_INLINE uint fc_mma_pack(const int DT, float lo, float hi)
{
    uint r;
    if (DT == FC_ATTN_F16)
        __asm__("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    else
        __asm__("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

/* 2^x on the special-function unit (relative error ~2^-22; -inf gives +0). */
FC_INLINE float fc_mma_exp2(float x)
{
    float y;
    __asm__("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

/* ---- the kernel body ------------------------------------------------------------------------ */

/* Copies KEYS rows of K or V starting at key j0 into a ring half: rows of DP elements of ES
 * bytes (2, or 4 for the f32 kernel), STRIDE elements apart in local memory, in chunks of 16
 * bytes. Rows at or past `ke` and chunks at or past the head dim are zero-filled, so padded dims
 * add nothing to a dot product and missing keys carry no NaN into P·V. */
FC_INLINE void fc_mma_load_rows(__local uchar *tile, __global const uchar *base, ulong head,
                                long step, int j0, int ke, int D, int lid, const int ES,
                                const int STRIDE, const int DP, const int KEYS,
                                const int THREADS)
{
    const int PER = 16 / ES, CHUNKS = DP / PER;
#pragma unroll
    for (int it = 0; it < KEYS * CHUNKS / THREADS; it++) {
        const int idx = it * THREADS + lid, r = idx / CHUNKS, c = idx % CHUNKS;
        const int ok = j0 + r < ke && c * PER < D;
        const __global uchar *src =
            ok ? base + ES * (head + (ulong)((long)(j0 + r) * step) + (ulong)(c * PER)) : base;
        __local const void *dst = ES == 2 ? (__local const void *)((__local const ushort *)tile +
                                                                   r * STRIDE + c * PER)
                                          : (__local const void *)((__local const float *)tile +
                                                                   r * STRIDE + c * PER);
        fc_async_cp16(fc_async_smem(dst), src, ok ? 16u : 0u);
    }
}

/* Copies block j0's K and V rows into one ring slot: K, then V KEYS rows on. */
FC_INLINE void fc_mma_load_block(__local uchar *slot, __global const uchar *k,
                                 __global const uchar *v, ulong k_head, ulong v_head,
                                 long k_step, long v_step, int j0, int ke, int D, int lid,
                                 const int ES, const int STRIDE, const int DP, const int KEYS,
                                 const int THREADS)
{
    fc_mma_load_rows(slot, k, k_head, k_step, j0, ke, D, lid, ES, STRIDE, DP, KEYS, THREADS);
    fc_mma_load_rows(slot + ES * KEYS * STRIDE, v, v_head, v_step, j0, ke, D, lid, ES, STRIDE,
                     DP, KEYS, THREADS);
}

/* Copies the tile's ROWS packed rows of Q (rows past `rows` and chunks past the head dim as
 * zeros) into local memory, rows STRIDE elements of ES bytes apart, and waits for every
 * work-item's copies. */
FC_INLINE void fc_mma_load_q(__local uchar *tile, __global const uchar *q, long4 qs, int b,
                             int kvh, int G, int r0, int rows, int Sq, int D, int lid,
                             const int ES, const int STRIDE, const int DP, const int ROWS,
                             const int THREADS)
{
    const int PER = 16 / ES, CHUNKS = DP / PER;
#pragma unroll
    for (int it = 0; it < ROWS * CHUNKS / THREADS; it++) {
        const int idx = it * THREADS + lid, r = idx / CHUNKS, c = idx % CHUNKS;
        const int2 gi = fc_attn_divmod(r0 + r, Sq);
        const int ok = r0 + r < rows && c * PER < D;
        const __global uchar *src =
            ok ? q + ES * (fc_attn_row(qs, b, gi.y, kvh * G + gi.x) + (ulong)(c * PER)) : q;
        __local const void *dst = ES == 2 ? (__local const void *)((__local const ushort *)tile +
                                                                   r * STRIDE + c * PER)
                                          : (__local const void *)((__local const float *)tile +
                                                                   r * STRIDE + c * PER);
        fc_async_cp16(fc_async_smem(dst), src, ok ? 16u : 0u);
    }
    fc_async_commit();
    fc_async_wait(0);
    barrier(CLK_LOCAL_MEM_FENCE);
}

/* The opening both tensor-core kernels share: which tile and split (reversed: causal tiles with
 * the most keys start first), its keys and block range, this thread's two rows (h = 0: row gq,
 * h = 1: row gq + 8 of the warp's 16) with the keys each may see (an empty range [1, 0] masks
 * every key), their m and l, and the output accumulators at zero. */
#define FC_MMA_OPENING(ROWS, KEYS)                                                             \
    FC_ATTN_PLACE(pl, dims, grid, mask, ROWS, 1, tail)                                         \
    const int split = pl.split, b = pl.b, kvh = pl.kvh, rows = pl.rows, r0 = pl.r0, ke = pl.ke; \
    const long j_begin = pl.j_begin, j_end = pl.j_end;                                         \
    const long full_lo = pl.full_lo, full_hi = pl.full_hi;                                     \
    const int first_block = (int)(j_begin / (KEYS));                                           \
    const int last_block = j_end >= j_begin ? (int)(j_end / (KEYS)) : first_block - 1;         \
    int row_lo[2], row_hi[2];                                                                  \
    float m[2], l[2];                                                                          \
    _Pragma("unroll") for (int h = 0; h < 2; h++)                                              \
    {                                                                                          \
        const int2 keys = FC_ATTN_ROW_KEYS(pl, r0 + warp * 16 + gq + 8 * h, Sq, mask);         \
        row_lo[h] = keys.x;                                                                    \
        row_hi[h] = keys.y;                                                                    \
        m[h] = -INFINITY;                                                                      \
        l[h] = 0.0f;                                                                           \
    }                                                                                          \
    float4 acc[FC_MMA_DP_MAX / 8];                                                             \
    _Pragma("unroll") for (int j = 0; j < FC_MMA_DP_MAX / 8; j++) acc[j] = (float4)(0.0f);

/* The online-softmax step of one block on a warp's score tiles s[0..NT) (accumulator layout:
 * rows gq (.x, .y) and gq + 8 (.z, .w) at keys n0 + n·8 + 2·tq + (0, 1)): the score transform
 * unless folded, the mask on diagonal and edge blocks only, the rows' new max (a row's keys are
 * spread over the 4 lanes of its group), m and l rescaled, alpha[] set for the accumulators,
 * and the tiles turned into probabilities with exp2 (scale folded into one FMA). A macro, so
 * that the arrays stay in registers (as functions of array pointers they did not, in clang). */
#define FC_MMA_SOFTMAX_STEP(s, NT, NT_MAX, n0, KEYS)                                           \
    {                                                                                          \
        if (!fold) {                                                                           \
            _Pragma("unroll") for (int n = 0; n < (NT); n++) s[n] =                            \
                score.y != 0.0f ? score.y * tanh(score.x * s[n]) : score.x * s[n];             \
        }                                                                                      \
        if (!((n0) >= full_lo && (n0) + (KEYS)-1 <= full_hi)) {                                \
            _Pragma("unroll") for (int n = 0; n < (NT); n++)                                   \
            {                                                                                  \
                const int j = (n0) + n * 8 + 2 * tq;                                           \
                if (j < row_lo[0] || j > row_hi[0]) s[n].x = -INFINITY;                        \
                if (j + 1 < row_lo[0] || j + 1 > row_hi[0]) s[n].y = -INFINITY;                \
                if (j < row_lo[1] || j > row_hi[1]) s[n].z = -INFINITY;                        \
                if (j + 1 < row_lo[1] || j + 1 > row_hi[1]) s[n].w = -INFINITY;                \
            }                                                                                  \
        }                                                                                      \
        float mx[2] = {-INFINITY, -INFINITY};                                                  \
        _Pragma("unroll") for (int n = 0; n < (NT_MAX); n++)                                   \
        {                                                                                      \
            if (n < (NT)) {                                                                    \
                mx[0] = fmax(mx[0], fmax(s[n].x, s[n].y));                                     \
                mx[1] = fmax(mx[1], fmax(s[n].z, s[n].w));                                     \
            }                                                                                  \
        }                                                                                      \
        _Pragma("unroll") for (int h = 0; h < 2; h++)                                          \
        {                                                                                      \
            mx[h] = fmax(mx[h], fc_attn_shuffle_xor(mx[h], 1u));                               \
            mx[h] = fmax(mx[h], fc_attn_shuffle_xor(mx[h], 2u));                               \
            const float m_new = fmax(m[h], mx[h] * c);                                         \
            sub[h] = m_new == -INFINITY ? 0.0f : m_new; /* nothing seen yet: factor 0 */       \
            alpha[h] = fc_mma_exp2(m[h] - sub[h]);                                             \
            m[h] = m_new;                                                                      \
            l[h] *= alpha[h];                                                                  \
        }                                                                                      \
        _Pragma("unroll") for (int n = 0; n < (NT); n++)                                       \
        {                                                                                      \
            s[n].x = fc_mma_exp2(fma(s[n].x, c, -sub[0]));                                     \
            s[n].y = fc_mma_exp2(fma(s[n].y, c, -sub[0]));                                     \
            s[n].z = fc_mma_exp2(fma(s[n].z, c, -sub[1]));                                     \
            s[n].w = fc_mma_exp2(fma(s[n].w, c, -sub[1]));                                     \
            l[0] += s[n].x + s[n].y;                                                           \
            l[1] += s[n].z + s[n].w;                                                           \
        }                                                                                      \
    }

/* After the last block: each row's l summed over its 4 lanes, inv[] = 1 / l (0 where no key
 * was visible: zeros), and the row's lse stored by its first lane. */
#define FC_MMA_FINISH_ROWS()                                                                   \
    _Pragma("unroll") for (int h = 0; h < 2; h++)                                              \
    {                                                                                          \
        l[h] += fc_attn_shuffle_xor(l[h], 1u);                                                 \
        l[h] += fc_attn_shuffle_xor(l[h], 2u);                                                 \
        inv[h] = l[h] > 0.0f ? 1.0f / l[h] : 0.0f;                                             \
        const int r = r0 + warp * 16 + gq + 8 * h;                                             \
        if (r < rows && tq == 0 && has_lse) {                                                  \
            const int2 gi = fc_attn_divmod(r, Sq);                                             \
            lse[fc_attn_row(ls, b, kvh * G + gi.x, gi.y) +                                     \
                (ulong)((long)split * split_stride.y)] =                                       \
                l[h] > 0.0f ? (m[h] + log2(l[h])) * FC_ATTN_LN2 : -INFINITY;                   \
        }                                                                                      \
    }

/* Split-KV partials or f32 o: pairs straight from the accumulators (four lanes fill a 32-byte
 * sector). */
#define FC_MMA_STORE_F32()                                                                     \
    _Pragma("unroll") for (int h = 0; h < 2; h++)                                              \
    {                                                                                          \
        const int r = r0 + warp * 16 + gq + 8 * h;                                             \
        if (r >= rows) continue;                                                               \
        const int2 gi = fc_attn_divmod(r, Sq);                                                 \
        __global float *row = (__global float *)o + fc_attn_row(os, b, gi.y, kvh * G + gi.x) + \
                              (ulong)((long)split * split_stride.x);                           \
        _Pragma("unroll") for (int j = 0; j < DT8; j++)                                        \
        {                                                                                      \
            const int d = j * 8 + 2 * tq;                                                      \
            if (d < D) vstore2(h ? acc[j].zw * inv[1] : acc[j].xy * inv[0], 0, row + d);       \
        }                                                                                      \
    }

FC_INLINE void fc_mma_forward(__global const uchar *q, __global const uchar *k,
                              __global const uchar *v, __global uchar *o, __global float *lse,
                              long4 qs, long4 ks, long4 vs, long4 os, long4 ls, int4 dims,
                              int4 grid, int4 mask, float2 score, long2 split_stride,
                              int tail, __local ushort *smem, const int DT, const int DP,
                              const int KEYS, const int WARPS, const int SLOTS)
{
    const int STRIDE = FC_MMA_STRIDE(DP), NT = KEYS / 8, DT8 = DP / 8, KD = DP / 16;
    const int THREADS = 32 * WARPS, ROWS = 16 * WARPS;
    const int SLOT = 2 * KEYS * STRIDE; /* one ring slot: K then V */
    const int RING = SLOTS > 2;         /* Q straight into registers, SLOTS - 1 blocks ahead */
    const int Sq = dims.x, D = dims.z, G = dims.w, out_dt = mask.z, has_lse = mask.w;
    const int lid = (int)get_local_id(0), warp = lid / 32, lane = lid % 32;
    const int gq = lane / 4, tq = lane % 4; /* mma's row group and thread in the group */

    FC_MMA_OPENING(ROWS, KEYS)

    /* Per-thread ldmatrix addresses (bytes in the shared window). Q (A, 16x16): lanes 0-15
     * address rows 0-15 at column 0, lanes 16-31 the same rows at column 8: a0..a3. K (B, two
     * 16x8 tiles): lane l addresses key (l/16)·8 + l%8 at dim ((l/8)%2)·8, so the plain load
     * gives b0, b1 of key tiles n and n + 1 (rows of K are columns of B). V (B through .trans):
     * lane l addresses key ((l/8)%2)·8 + l%8 at dim (l/16)·8; the transpose puts keys along k. */
    const uint q_frag = fc_async_smem(smem + (warp * 16 + lane % 16) * STRIDE + (lane / 16) * 8);
    const uint k_frag0 =
        fc_async_smem(smem + ((lane / 16) * 8 + lane % 8) * STRIDE + ((lane / 8) % 2) * 8);
    const uint v_frag0 = fc_async_smem(smem + KEYS * STRIDE +
                                     (((lane / 8) % 2) * 8 + lane % 8) * STRIDE + (lane / 16) * 8);

    const ulong k_head = fc_attn_row(ks, b, 0, kvh), v_head = fc_attn_row(vs, b, 0, kvh);
    uint4 qa[FC_MMA_DP_MAX / 16];
    if (last_block >= first_block && RING) {
        /* Q straight from global memory into A fragments (a0 / a1: rows gq / gq + 8 at dims
         * 2tq, 2tq + 1 of each 16; a2 / a3 the same rows 8 dims on), with the first SLOTS - 1
         * blocks' copies in flight behind it, one copy group each. */
        ulong q_row[2];
        int q_ok[2];
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int r = r0 + warp * 16 + gq + 8 * h;
            const int2 gi = fc_attn_divmod(min(r, rows - 1), Sq);
            q_ok[h] = r < rows;
            q_row[h] = fc_attn_row(qs, b, gi.y, kvh * G + gi.x);
        }
#pragma unroll
        for (int kk = 0; kk < KD; kk++) {
            uint w[4];
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int h = e & 1, d = kk * 16 + (e >> 1) * 8 + 2 * tq;
                w[e] = q_ok[h] && d < D ? *(__global const uint *)(q + 2 * (q_row[h] + (ulong)d))
                                        : 0u;
            }
            qa[kk] = (uint4)(w[0], w[1], w[2], w[3]);
        }
#pragma unroll
        for (int i = 0; i < SLOTS - 1; i++) {
            if (last_block - i >= first_block)
                fc_mma_load_block((__local uchar *)(smem + i * SLOT), k, v, k_head, v_head, ks.y,
                                  vs.y, (last_block - i) * KEYS, ke, D, lid, 2, STRIDE, DP, KEYS,
                                  THREADS);
            fc_async_commit();
        }
    } else if (last_block >= first_block) {
        /* Q once, through local memory into A fragments; then the ring takes the bytes. */
        fc_mma_load_q((__local uchar *)smem, q, qs, b, kvh, G, r0, rows, Sq, D, lid, 2, STRIDE, DP,
                      ROWS, THREADS);
#pragma unroll
        for (int kk = 0; kk < KD; kk++) qa[kk] = fc_mma_ldmatrix(q_frag + kk * 32);
        barrier(CLK_LOCAL_MEM_FENCE); /* every warp holds its Q: the ring may overwrite it */
        fc_mma_load_block((__local uchar *)smem, k, v, k_head, v_head, ks.y, vs.y,
                          last_block * KEYS, ke, D, lid, 2, STRIDE, DP, KEYS, THREADS);
        fc_async_commit();
    }

    /* Without softcap and with a positive scale the scores stay raw: max(raw)·c is the max of
     * the scaled ones, and each probability is exp2(fma(s, c, -m)). Otherwise they are
     * transformed first (softcap·tanh(...) or a negative scale) and c = 1. */
    const int fold = score.y == 0.0f && score.x > 0.0f;
    const float c = fold ? score.x : 1.0f;
    int slot = 0;
    for (int blk = last_block; blk >= first_block;
         blk--, slot = RING ? (slot + 1 == SLOTS ? 0 : slot + 1) : slot ^ 1) {
        const int n0 = blk * KEYS;
        if (RING) {
            /* SLOTS - 1 groups are pending, blk's the oldest. Once every warp is done with the
             * slot before this one, it takes block blk - (SLOTS - 1). A group is committed even
             * when empty, so that the count stays exact. */
            fc_async_wait(SLOTS - 2);
            barrier(CLK_LOCAL_MEM_FENCE);
            if (blk - (SLOTS - 1) >= first_block)
                fc_mma_load_block((__local uchar *)(smem + (slot == 0 ? SLOTS - 1 : slot - 1) *
                                                                   SLOT),
                                  k, v, k_head, v_head, ks.y, vs.y, n0 - (SLOTS - 1) * KEYS, ke, D,
                                  lid, 2, STRIDE, DP, KEYS, THREADS);
            fc_async_commit();
        } else {
            fc_async_wait(0);         /* this thread's copies of K/V(blk) have landed */
            barrier(CLK_LOCAL_MEM_FENCE); /* ... everyone's, and the other slot is free */
            if (blk > first_block) {      /* the next block streams in during this one */
                fc_mma_load_block((__local uchar *)(smem + (slot ^ 1) * SLOT), k, v, k_head,
                                  v_head, ks.y, vs.y, n0 - KEYS, ke, D, lid, 2, STRIDE, DP, KEYS,
                                  THREADS);
                fc_async_commit();
            }
        }
        const uint k_frag = k_frag0 + (uint)(slot * SLOT * 2);
        const uint v_frag = v_frag0 + (uint)(slot * SLOT * 2);

        /* S = Q·Kᵀ: this warp's 16 rows by the block's KEYS keys. */
        float4 s[FC_MMA_KEYS_MAX / 8];
#pragma unroll
        for (int n = 0; n < FC_MMA_KEYS_MAX / 8; n++) s[n] = (float4)(0.0f);
#pragma unroll
        for (int kk = 0; kk < KD; kk++)
#pragma unroll
            for (int n = 0; n < NT; n += 2) {
                const uint4 kf = fc_mma_ldmatrix(k_frag + (uint)((n * 8 * STRIDE + kk * 16) * 2));
                s[n] = fc_mma_16816(DT, s[n], qa[kk], kf.x, kf.y);
                s[n + 1] = fc_mma_16816(DT, s[n + 1], qa[kk], kf.z, kf.w);
            }

        /* Online softmax (scores to probabilities, m, l and alpha updated). */
        float sub[2], alpha[2];
        FC_MMA_SOFTMAX_STEP(s, NT, FC_MMA_KEYS_MAX / 8, n0, KEYS)
#pragma unroll
        for (int j = 0; j < DT8; j++) {
            acc[j].xy *= alpha[0];
            acc[j].zw *= alpha[1];
        }

        /* O += P·V, 16 keys at a time; P rounded to the storage type (the row sums l keep the
         * unrounded values: o's error grows by at most the unit roundoff times max|v|). */
#pragma unroll
        for (int kk = 0; kk < KEYS / 16; kk++) {
            const uint4 p = (uint4)(fc_mma_pack(DT, s[2 * kk].x, s[2 * kk].y),
                                    fc_mma_pack(DT, s[2 * kk].z, s[2 * kk].w),
                                    fc_mma_pack(DT, s[2 * kk + 1].x, s[2 * kk + 1].y),
                                    fc_mma_pack(DT, s[2 * kk + 1].z, s[2 * kk + 1].w));
#pragma unroll
            for (int j = 0; j < DT8; j += 2) {
                const uint4 vf =
                    fc_mma_ldmatrix_trans(v_frag + (uint)((kk * 16 * STRIDE + j * 8) * 2));
                acc[j] = fc_mma_16816(DT, acc[j], p, vf.x, vf.y);
                acc[j + 1] = fc_mma_16816(DT, acc[j + 1], p, vf.z, vf.w);
            }
        }
    }

    /* ---- normalise and store ---- */
    float inv[2];
    FC_MMA_FINISH_ROWS()
    if (out_dt == FC_ATTN_F32) { /* split-KV partials */
        FC_MMA_STORE_F32()
        return;
    }
    /* 16-bit o leaves through local memory in 16-byte row chunks (pairs from the registers
     * would half-fill every memory sector). */
    barrier(CLK_LOCAL_MEM_FENCE); /* every warp is done with the ring */
#pragma unroll
    for (int h = 0; h < 2; h++) {
        __local uint *dst = (__local uint *)(smem + (warp * 16 + gq + 8 * h) * STRIDE) + tq;
#pragma unroll
        for (int j = 0; j < DT8; j++)
            dst[j * 4] = h ? fc_mma_pack(DT, acc[j].z * inv[1], acc[j].w * inv[1])
                           : fc_mma_pack(DT, acc[j].x * inv[0], acc[j].y * inv[0]);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    {
        const int CHUNKS = DP / 8;
        for (int idx = lid; idx < ROWS * CHUNKS; idx += THREADS) {
            const int r = idx / CHUNKS, cc = idx % CHUNKS;
            if (r0 + r >= rows || cc * 8 >= D) continue;
            const int2 gi = fc_attn_divmod(r0 + r, Sq);
            const ulong e = fc_attn_row(os, b, gi.y, kvh * G + gi.x) + (ulong)(cc * 8);
            *(__global uint4 *)(o + 2 * e) = *(__local const uint4 *)(smem + r * STRIDE + cc * 8);
        }
    }
}

#define FC_MMA_KERNEL_SLOTS(name, DT, DP, KEYS, WARPS, SLOTS, SMEM)                             \
    __kernel __attribute__((reqd_work_group_size(32 * (WARPS), 1, 1))) void name(              \
        FC_ATTN_FORWARD_PARAMS)                                                                \
    {                                                                                          \
        __local ushort smem[SMEM] __attribute__((aligned(16)));                                \
        (void)aligned, (void)in_dtype;                                                         \
        fc_mma_forward(q, k, v, o, lse, qs, ks, vs, os, ls, dims, grid, mask, score,          \
                       split_stride, tail, smem, DT, DP, KEYS, WARPS, SLOTS);                  \
    }
#define FC_MMA_KERNEL(name, DT, DP, KEYS, WARPS)                                                \
    FC_MMA_KERNEL_SLOTS(name, DT, DP, KEYS, WARPS, 2, FC_MMA_SMEM(DP, KEYS, WARPS))
FC_MMA_KERNEL(fc_attn_mma_d64_f16, FC_ATTN_F16, 64, 64, FC_MMA_WARPS)
FC_MMA_KERNEL(fc_attn_mma_d64_bf16, FC_ATTN_BF16, 64, 64, FC_MMA_WARPS)
FC_MMA_KERNEL(fc_attn_mma_d128_f16, FC_ATTN_F16, 128, 32, FC_MMA_WARPS)
FC_MMA_KERNEL(fc_attn_mma_d128_bf16, FC_ATTN_BF16, 128, 32, FC_MMA_WARPS)
/* Two warps, for calls whose packed rows per kv head fit 32 (decode: GQA 8 at Sq 1 to 4, MHA):
 * with four warps, two or three of them computed rows that do not exist while every warp shared
 * the K/V copies. H200, NVIDIA OpenCL, f16, ms against four warps in the same call: Hq32 Hkv4
 * D128 Sq1 Sk65536 0.0500 against 0.0549 (K+V at 2686 GB/s against 2446), B8 Sk8192 0.0480
 * against 0.0549, Sk131072 0.0855 against 0.0939, Sk16384 0.0190 against 0.0224; Sq4 (32 rows)
 * 0.0524 against 0.0569; Hq32 Hkv32 Sk16384 0.0812 against 0.0996; prefill unchanged. More
 * splits than the default lost at B8 Sk8192 (0.0700 with 128)
 * (bench/results/2026-11-26-h200-s20-opencl-decode-warps.txt). */
FC_MMA_KERNEL(fc_attn_mma_d64_f16_w2, FC_ATTN_F16, 64, 64, 2)
FC_MMA_KERNEL(fc_attn_mma_d64_bf16_w2, FC_ATTN_BF16, 64, 64, 2)
FC_MMA_KERNEL(fc_attn_mma_d128_f16_w2, FC_ATTN_F16, 128, 32, 2)
FC_MMA_KERNEL(fc_attn_mma_d128_bf16_w2, FC_ATTN_BF16, 128, 32, 2)
/* Two warps with a ring of FC_MMA_RING_SLOTS slots of half the keys (16 at DP 128, 32 at 64):
 * SLOTS - 1 blocks' copies in flight instead of one, Q straight into registers so that no
 * local memory waits for it. The host takes them where a work-group walks 512 keys or more,
 * and sets the slots (src/opencl/attention_mma.c). Measured against the two-slot kernel in
 * bench/results/2026-11-27-session26.md. */
#ifndef FC_MMA_RING_SLOTS
#define FC_MMA_RING_SLOTS 4
#endif
#if FC_MMA_RING_SLOTS < 3 || FC_MMA_RING_SLOTS > 5
#error "FC_MMA_RING_SLOTS: 3 to 5 (cp.async.wait_group counts up to 3; 48 KiB of local memory)"
#endif
#define FC_MMA_RING_SMEM(DP, KEYS) (FC_MMA_RING_SLOTS * 2 * (KEYS) * FC_MMA_STRIDE(DP))
FC_MMA_KERNEL_SLOTS(fc_attn_mma_d64_f16_ring, FC_ATTN_F16, 64, 32, 2, FC_MMA_RING_SLOTS,
                    FC_MMA_RING_SMEM(64, 32))
FC_MMA_KERNEL_SLOTS(fc_attn_mma_d64_bf16_ring, FC_ATTN_BF16, 64, 32, 2, FC_MMA_RING_SLOTS,
                    FC_MMA_RING_SMEM(64, 32))
FC_MMA_KERNEL_SLOTS(fc_attn_mma_d128_f16_ring, FC_ATTN_F16, 128, 16, 2, FC_MMA_RING_SLOTS,
                    FC_MMA_RING_SMEM(128, 16))
FC_MMA_KERNEL_SLOTS(fc_attn_mma_d128_bf16_ring, FC_ATTN_BF16, 128, 16, 2, FC_MMA_RING_SLOTS,
                    FC_MMA_RING_SMEM(128, 16))
