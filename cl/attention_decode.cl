/* cl/attention_decode.cl — key-parallel split-KV decode: few query rows (the G query heads of
 * one kv head times Sq <= a few) against the keys of one split. Part of the attention program;
 * needs attention_common.cl.
 *
 * Why not the tiled forward kernel: with 8 rows and a 32-key tile it streams K and V through
 * local memory twice per key (store, then read by every row group) behind four barriers per 32
 * keys, so 16-bit decode ran no faster than f32. Here each key block costs three barriers and K
 * passes through local memory once; V never does:
 *   1. K block (BK keys x the head dim) arrives coalesced (16-byte vectors) in registers one
 *      block ahead, is converted to f32 once and stored to local memory.
 *   2. Scores: work-item (key kk, part kh) reads its key's slice of K and the matching Q slice
 *      (the same address for a whole warp: a broadcast) and accumulates all RT rows: RT·4 FMAs
 *      per float4 of K. The KH = WG / BK partial sums go to local memory.
 *   3. Softmax: RT teams of SC = WG / RT work-items, one per row, sum the partials of their
 *      BK / SC keys, scale / softcap / mask, reduce the block max (warp shuffles on NVIDIA),
 *      write P (key-major, so that step 4 reads RT probabilities of a key as float4s) and the
 *      row's rescale factor, and keep a share of the row sum.
 *   4. P·V: key group kg of VL lanes owns VD4 float4 columns of O for all RT rows; it reads V
 *      rows straight from global memory (fetched with the first K, later right after the
 *      previous block's P·V, so a one-block split has Q, K and V in flight at once) and P by
 *      broadcast, RT·4 FMAs per float4 of V. The groups' accumulators are added once at the end.
 * All key groups rescale by the same per-row factor (step 3 publishes it), so their accumulators
 * stay relative to one running max and merge by plain addition.
 *
 * Geometry: (WG, RT, KB) per padded head-dim class: WG work-items, RT query rows per work-group
 * (a multiple of 4), KB keys per block for 16-bit storage. f32 blocks over heads wider than 64
 * hold KB / 2 keys, so that their K takes the registers of a 16-bit block at 128; at 64 and
 * below they hold KB, the same registers again, twice the bytes in flight (H200 f32 D64 decode
 * B1 Hq32 Hkv4 Sk65536: 0.0599 ms against 0.0703 with KB / 2; D128 blocks of KB keys ran slower,
 * 0.161 against 0.107). WG, RT, KB powers of two with BK <= WG
 * (the host checks the rest, see src/opencl/attention_decode.c). A tuple whose WG is 0 disables
 * the kernel. GPUs also build a four-row form (fc_attn_decode_keys4_*, tuples FC_ATTN_K4_*) for
 * groups of at most 4 query rows: half the accumulators, fewer registers, more work-groups a
 * compute unit. */

#ifndef FC_ATTN_K64
#define FC_ATTN_K64 (128, 8, 64)
#endif
#ifndef FC_ATTN_K128
#define FC_ATTN_K128 (128, 8, 64)
#endif
#ifndef FC_ATTN_K256
#define FC_ATTN_K256 (128, 8, 32)
#endif
/* The four-row form (fc_attn_decode_keys4_*): tiles of 4 rows for groups of at most 4 query rows
 * (src/opencl/attention_decode.c); WG 0 leaves a class out. */
#ifndef FC_ATTN_K4_64
#define FC_ATTN_K4_64 (128, 4, 64)
#endif
#ifndef FC_ATTN_K4_128
#define FC_ATTN_K4_128 (128, 4, 64)
#endif
#ifndef FC_ATTN_K4_256
#define FC_ATTN_K4_256 (0, 4, 32)
#endif
#define FC_ATTN_KPICK0_(wg, rt, kb) wg
#define FC_ATTN_KPICK1_(wg, rt, kb) rt
#define FC_ATTN_KPICK2_(wg, rt, kb) kb
#define FC_ATTN_KWG_OF(t) FC_ATTN_KPICK0_ t
#define FC_ATTN_KRT_OF(t) FC_ATTN_KPICK1_ t
#define FC_ATTN_KKB_OF(t) FC_ATTN_KPICK2_ t
#define FC_ATTN_KWG1_OF(t) FC_ATTN_MAX2(FC_ATTN_KWG_OF(t), 1)

/* Keys per block (the geometry note above). */
#define FC_ATTN_KBK(DT, KB, DP) ((DT) == FC_ATTN_F32 && (DP) > 64 ? (KB) / 2 : (KB))

/* float4 columns of O per work-item in step 4: one up to a 128-wide head, then two. */
#define FC_ATTN_KVD4(DP) ((DP) >= 256 ? 2 : 1)

/* Register bounds over this build's tuples (f32 K at a head dim of 64: four elements a vector):
 * K slots (16-byte vectors), V slots (float4 columns), rows, softmax keys per work-item. */
#define FC_ATTN_KSL_F(dp, t) (((FC_ATTN_KKB_OF(t) * (dp)) / ((dp) > 64 ? 8 : 4) + FC_ATTN_KWG1_OF(t) - 1) / FC_ATTN_KWG1_OF(t))
#define FC_ATTN_KVSL_F(dp, t) (((FC_ATTN_KKB_OF(t) * (dp)) / 4 + FC_ATTN_KWG1_OF(t) - 1) / FC_ATTN_KWG1_OF(t))
#define FC_ATTN_KRT_F(dp, t) FC_ATTN_KRT_OF(t)
#define FC_ATTN_KKPI_F(dp, t) ((FC_ATTN_KKB_OF(t) * FC_ATTN_KRT_OF(t)) / FC_ATTN_KWG1_OF(t))
/* (a disabled tuple, WG 0, bounds nothing: the host passes some with WG 0) */
#define FC_ATTN_KON(F, dp, t) (FC_ATTN_KWG_OF(t) > 0 ? F(dp, t) : 1)
#define FC_ATTN_KMAX3(F, t64, t128, t256)                                                      \
    FC_ATTN_MAX2(FC_ATTN_KON(F, 64, t64),                                                      \
                 FC_ATTN_MAX2(FC_ATTN_KON(F, 128, t128), FC_ATTN_KON(F, 256, t256)))
#define FC_ATTN_KMAX(F)                                                                        \
    FC_ATTN_MAX2(FC_ATTN_KMAX3(F, FC_ATTN_K64, FC_ATTN_K128, FC_ATTN_K256),                    \
                 FC_ATTN_KMAX3(F, FC_ATTN_K4_64, FC_ATTN_K4_128, FC_ATTN_K4_256))
#define FC_ATTN_KSL_MAX FC_ATTN_KMAX(FC_ATTN_KSL_F)
#define FC_ATTN_KVSL_MAX FC_ATTN_KMAX(FC_ATTN_KVSL_F)
#define FC_ATTN_KRT_MAX FC_ATTN_KMAX(FC_ATTN_KRT_F)
#define FC_ATTN_KKPI_MAX FC_ATTN_KMAX(FC_ATTN_KKPI_F)

/* Local memory in float4s (src/opencl/attention_decode.c computes the same): K block (rows
 * padded by one float4, so the lanes of a warp, each reading its own key, hit different banks)
 * or, at the end, the key groups' accumulators; Q; score partials; P; then floats: the rows'
 * rescale factors and maxima and one float per work-item (row max and row sum reductions). */
#define FC_ATTN_KSMEM4(BK, DP, WG, RT)                                                         \
    (FC_ATTN_MAX2((BK) * ((DP) / 4 + 1), (WG) * (RT) * FC_ATTN_KVD4(DP)) +                      \
     FC_ATTN_KTAIL4(BK, DP, WG, RT))
/* What follows the first region in both forms (the cp.async one, attention_decode_async.cl,
 * puts its ring there): Q, score partials, P, rescale factors, row maxima, one float per
 * work-item. FC_ATTN_KEYS_OPENING lays it out. */
#define FC_ATTN_KTAIL4(BK, DP, WG, RT)                                                         \
    ((RT) * ((DP) / 4) + ((WG) + (BK)) * (RT) / 4 + (2 * (RT) + (WG) + 3) / 4)

/* 16 bytes of a row as raw bits: four f32 or eight 16-bit elements (n: how many exist, the head
 * dim need not be a multiple of the vector; aligned: the host found every row 16-byte aligned). */
FC_INLINE uint4 fc_attn_load16_raw(const int dt, const __global uchar *p, ulong i, int n,
                                   int aligned)
{
    if (dt == FC_ATTN_F32)
        return fc_attn_load4_raw(dt, p, i, n, aligned);
    if (n >= 8)
        return aligned ? ((const __global uint4 *)p)[i >> 3]
                       : as_uint4(vload8(0, (const __global ushort *)p + i));
    const __global ushort *h = (const __global ushort *)p + i;
    uint w[4];
    for (int e = 0; e < 4; e++)
        w[e] = (2 * e < n ? (uint)h[2 * e] : 0u) | (2 * e + 1 < n ? (uint)h[2 * e + 1] << 16 : 0u);
    return (uint4)(w[0], w[1], w[2], w[3]);
}

/* Two 16-bit elements per word -> four floats. f16 uses PTX cvt on NVIDIA (one instruction an
 * element, FC_HALF_IMPL 2), the exact integer conversion elsewhere. */
FC_INLINE float4 fc_attn_pair2_to_float4(const int dt, uint2 w)
{
#if FC_HALF_IMPL == 2
    if (dt == FC_ATTN_F16)
        return (float4)(fc_half_to_float(w.x & 0xffffu), fc_half_to_float(w.x >> 16),
                        fc_half_to_float(w.y & 0xffffu), fc_half_to_float(w.y >> 16));
#endif
    return fc_attn_raw_to_float4(dt, (uint4)(w, 0u, 0u));
}

/* ---- the steps both forms share (this kernel and its cp.async form, attention_decode_async.cl).
 * Register arrays are bounded by FC_ATTN_KRT_BOUND rows and FC_ATTN_KKPI_BOUND softmax keys a
 * work-item (the cp.async form's host checks its tuples against them). */
#define FC_ATTN_KRT_BOUND FC_ATTN_MAX2(FC_ATTN_KRT_MAX, 8)
#define FC_ATTN_KKPI_BOUND FC_ATTN_MAX2(FC_ATTN_KKPI_MAX, 4)

/* Q of rows r0.. of the tile into Ql [RT][DP4] as f32, zeros past the rows or the head dim
 * (published by the first block's barrier). A macro: as an inline function it cost NVIDIA's
 * compiler 6 more registers in the four-row kernel (clang + ptxas). */
#define FC_ATTN_KEYS_LOAD_Q(Ql, DT, WG, RT, DP4)                                               \
    FC_ATTN_UNROLL for (int n_ = 0; n_ < ((RT) * (DP4) + (WG) - 1) / (WG); n_++) {             \
        const int e_ = lid + n_ * (WG), r_ = e_ / (DP4), d_ = 4 * (e_ % (DP4)), row_ = r0 + r_; \
        if (e_ < (RT) * (DP4)) {                                                               \
            const int2 gq_ = fc_attn_divmod(min(row_, rows - 1), Sq);                          \
            const ulong at_ = fc_attn_row(qs, b, gq_.y, kvh * G + gq_.x) + d_;                 \
            Ql[e_] = fc_attn_raw_to_float4(                                                    \
                DT, row_ < rows && d_ < D ? fc_attn_load4_raw(DT, q, at_, D - d_, aligned & 1) \
                                          : (uint4)(0u));                                      \
        }                                                                                      \
    }

/* The opening both forms share, after the first `first4` float4s of smem (K block or ring):
 * the local layout of FC_ATTN_KTAIL4 (Ql, Sl, Pl, Al, Ml, red), the tile's place (split, b,
 * kvh, rows, r0, ke, its keys j_begin..j_stop, rt_active rows that do arithmetic), step 3's row
 * keys (row_lo, row_hi) and its running state (m, l_part). Uses lid, sr, Sq, dims, grid, mask,
 * tail, RT, BK, WG, DP4. A macro, as FC_ATTN_KEYS_LOAD_Q is. */
#define FC_ATTN_KEYS_OPENING(smem, first4)                                                     \
    __local float4 *Ql = (smem) + (first4);                                                    \
    __local float *Sl = (__local float *)(Ql + RT * DP4); /* [KH][RT][BK] */                   \
    __local float *Pl = Sl + WG * RT;                      /* [BK][RT] */                      \
    __local float *Al = Pl + BK * RT;                      /* [RT] rescale factors */          \
    __local float *Ml = Al + RT;                           /* [RT] row maxima (end) */         \
    __local float *red = Ml + RT;                          /* [WG] */                          \
    /* which tile (in order: decode tiles cost the same) and split, and the tile's keys */     \
    FC_ATTN_PLACE(pl, dims, grid, mask, RT, 0, tail)                                           \
    const int split = pl.split, b = pl.b, kvh = pl.kvh, rows = pl.rows, r0 = pl.r0;            \
    const int ke = pl.ke;                                                                      \
    const int rt_active = min(RT, rows - r0); /* rows past it do no arithmetic */              \
    const long j_begin = pl.j_begin, j_end = pl.j_end;                                         \
    const long j_stop = j_end >= j_begin ? j_end : -1; /* no visible key: no block */          \
    /* step 3's row: its visible keys ([1, 0] when none or past the last row) and state */     \
    const int2 step3_keys = FC_ATTN_ROW_KEYS(pl, r0 + sr, Sq, mask);                           \
    const int row_lo = step3_keys.x, row_hi = step3_keys.y;                                    \
    float m = -INFINITY, l_part = 0.0f;

/* Step 2: partial scores of key kk over part kh of the head dim (DH4 float4s) for the RT rows,
 * from K [BK][DP4 + 1] and Q [RT][DP4] in local memory, into Sl [BK / WG parts][RT][BK]. */
FC_INLINE void fc_attn_keys_scores(__local const float4 *Kl, __local const float4 *Ql,
                                   __local float *Sl, int kk, int kh, int rt_active,
                                   const int RT, const int BK, const int DP4, const int DH4)
{
    float s[FC_ATTN_KRT_BOUND];
    FC_ATTN_UNROLL for (int r = 0; r < RT; r++) s[r] = 0.0f;
    FC_ATTN_UNROLL for (int k4 = 0; k4 < DH4; k4++) {
        const float4 kf = Kl[kk * (DP4 + 1) + kh * DH4 + k4];
        FC_ATTN_UNROLL for (int r = 0; r < RT; r++) {
            if (r < rt_active) { /* uniform: no divergence */
                const float4 qf = Ql[r * DP4 + kh * DH4 + k4];
                s[r] = fma(qf.x, kf.x, fma(qf.y, kf.y, fma(qf.z, kf.z, fma(qf.w, kf.w, s[r]))));
            }
        }
    }
    FC_ATTN_UNROLL for (int r = 0; r < RT; r++) Sl[(kh * RT + r) * BK + kk] = s[r];
}

/* Step 3: online softmax of row sr over keys sc, sc + SC, ... of the block at j0 (KH partial
 * sums each): P [BK][RT] and the row's rescale factor Al[sr]; *m and *l_part (this work-item's
 * share of the row sum) move on. The row max is reduced by warp shuffles (`shuffle`: SC <= 32
 * consecutive lanes) or through `red` and one barrier. */
FC_INLINE void fc_attn_keys_softmax(__local const float *Sl, __local float *Pl,
                                    __local float *Al, __local float *red, float *m,
                                    float *l_part, int j0, int row_lo, int row_hi, float2 score,
                                    int lid, int sr, int sc, const int RT, const int BK,
                                    const int KH, const int SC, const int KPI, const int shuffle)
{
    float x[FC_ATTN_KKPI_BOUND];
    float mx = -INFINITY;
    FC_ATTN_UNROLL for (int t = 0; t < KPI; t++) {
        const int key = sc + SC * t, j = j0 + key;
        float s = 0.0f;
        FC_ATTN_UNROLL for (int h = 0; h < KH; h++) s += Sl[(h * RT + sr) * BK + key];
        s = score.y != 0.0f ? score.y * tanh(score.x * s) : score.x * s;
        x[t] = j < row_lo || j > row_hi ? -INFINITY : s;
        mx = fmax(mx, x[t]);
    }
    if (shuffle) {
#if FC_ATTN_SHUFFLE
        for (int o_ = SC >> 1; o_ > 0; o_ >>= 1) mx = fmax(mx, fc_attn_shuffle_xor(mx, (uint)o_));
#endif
    } else {
        red[lid] = mx;
        barrier(CLK_LOCAL_MEM_FENCE);
        FC_ATTN_UNROLL for (int c = 0; c < SC; c++) mx = fmax(mx, red[sr * SC + c]);
    }
    const float m_new = fmax(*m, mx);
    const float m_ref = m_new == -INFINITY ? 0.0f : m_new; /* no NaN from -inf - -inf */
    const float alpha = exp2(*m - m_ref);                  /* 0 while nothing was seen */
    float sum = 0.0f;
    *m = m_new;
    FC_ATTN_UNROLL for (int t = 0; t < KPI; t++) {
        const float p = exp2(x[t] - m_ref);
        sum += p;
        Pl[(sc + SC * t) * RT + sr] = p;
    }
    *l_part = *l_part * alpha + sum;
    if (sc == 0)
        Al[sr] = alpha;
}

/* The end: rows r0.. of the tile add the KG key groups' accumulators (accl [KG][RT][DP4]) and
 * their row-sum shares (red [RT][SC]), normalise once, and store o (or the split's partial)
 * and lse (natural log, from the row maxima Ml in log2 units). */
FC_INLINE void fc_attn_keys_store(__local const float4 *accl, __local const float *red,
                                  __local const float *Ml, __global uchar *o,
                                  __global float *lse, long4 os, long4 ls, long2 split_stride,
                                  int split, int b, int kvh, int G, int Sq, int D, int r0,
                                  int rows, int out_dt, int has_lse, int aligned, int lid,
                                  const int WG, const int RT, const int DP4, const int KG,
                                  const int SC)
{
    FC_ATTN_UNROLL for (int n = 0; n < (RT * DP4 + WG - 1) / WG; n++) {
        const int e = lid + n * WG, r = e / DP4, d4 = e % DP4, row = r0 + r;
        if (e < RT * DP4 && row < rows) {
            float4 a = accl[r * DP4 + d4];
            for (int g = 1; g < KG; g++) a += accl[(g * RT + r) * DP4 + d4];
            float l = 0.0f;
            for (int c = 0; c < SC; c++) l += red[r * SC + c];
            const int2 gq = fc_attn_divmod(row, Sq);
            const int qi = gq.y, h = kvh * G + gq.x, d = 4 * d4;
            const float inv = l > 0.0f ? 1.0f / l : 0.0f; /* no visible key: zeros */
            const ulong orow = fc_attn_row(os, b, qi, h) + (ulong)((long)split * split_stride.x);
            if (d < D)
                fc_attn_store4(out_dt, o, orow + d, D - d, aligned & 8, a * inv);
            if (has_lse && d4 == 0)
                lse[fc_attn_row(ls, b, h, qi) + (ulong)((long)split * split_stride.y)] =
                    l > 0.0f ? (Ml[r] + log2(l)) * FC_ATTN_LN2 : -INFINITY;
        }
    }
}

/* One work-group: RT query rows of one (batch, kv head) against the keys of one split. Same
 * arguments, grid order and outputs as fc_attn_forward_tile (cl/attention_forward.cl). DT and
 * DP are literals in the per-dtype kernels, run-time values in the generic one. */
FC_INLINE void fc_attn_decode_keys(
    __global const uchar *q, __global const uchar *k, __global const uchar *v,
    __global uchar *o, __global float *lse, long4 qs, long4 ks, long4 vs, long4 os, long4 ls,
    int4 dims, int4 grid, int4 mask, float2 score, long2 split_stride, int aligned,
    int tail, __local float4 *smem, const int DT, const int DP, const int WG, const int RT,
    const int KB)
{
    const int BK = FC_ATTN_KBK(DT, KB, DP);           /* keys per block */
    const int EPV = DT == FC_ATTN_F32 ? 4 : 8;       /* elements per 16-byte vector */
    const int DP4 = DP / 4, DPV = DP / EPV, KS4 = DP4 + 1;
    const int KH = WG / BK, DH4 = DP4 / KH;           /* step 2: parts per key, their float4s */
    const int SC = WG / RT, KPI = BK / SC;            /* step 3: team size, keys per item */
    const int VD4 = FC_ATTN_KVD4(DP), VL = DP4 / VD4; /* step 4: columns per item, lanes/key */
    const int KG = WG / VL, KPG = BK / KG;            /* step 4: key groups, keys per group */
    const int KSL = (BK * DPV + WG - 1) / WG, VSL = KPG * VD4;
    const int shuffle = FC_ATTN_SHUFFLE && SC <= 32;
    const int Sq = dims.x, D = dims.z, G = dims.w, out_dt = mask.z, has_lse = mask.w;
    const int lid = (int)get_local_id(0);
    const int kk = lid % BK, kh = lid / BK; /* step 2 */
    const int sr = lid / SC, sc = lid % SC; /* step 3 */
    const int vl = lid % VL, kg = lid / VL; /* step 4 */

    __local float4 *Kl = smem; /* also the accumulators at the end */
    FC_ATTN_KEYS_OPENING(smem, FC_ATTN_MAX2(BK * KS4, WG * RT * VD4))
    float4 acc[FC_ATTN_KRT_MAX][2];
    FC_ATTN_UNROLL for (int r = 0; r < RT; r++)
        FC_ATTN_UNROLL for (int sd = 0; sd < VD4; sd++)
            acc[r][sd] = (float4)(0.0f);

    const ulong k_head = fc_attn_row(ks, b, 0, kvh), v_head = fc_attn_row(vs, b, 0, kvh);
    uint4 kst[FC_ATTN_KSL_MAX]; /* K of the next block, raw */
    /* V of this block, raw, in step 4's layout: four f32 words or four 16-bit halves in two
     * words (separate arrays, so that 16-bit V takes two registers a slot, not four) */
    uint4 vst[FC_ATTN_KVSL_MAX];
    uint2 vst16[FC_ATTN_KVSL_MAX];
#define FC_ATTN_FETCH_K(J0)                                                                    \
    FC_ATTN_UNROLL for (int n = 0; n < KSL; n++) {                                             \
        const int e = lid + n * WG, j = (J0) + e / DPV, d = EPV * (e % DPV);                   \
        kst[n] = e < BK * DPV && j < ke && d < D                                               \
                     ? fc_attn_load16_raw(DT, k, k_head + (ulong)((long)j * ks.y) + d, D - d,  \
                                          aligned & 32)                                        \
                     : (uint4)(0u);                                                            \
    }
#define FC_ATTN_FETCH_V(J0)                                                                    \
    FC_ATTN_UNROLL for (int n = 0; n < KPG; n++) {                                             \
        const int j = (J0) + kg + KG * n;                                                      \
        FC_ATTN_UNROLL for (int sd = 0; sd < VD4; sd++) {                                      \
            const int d = 4 * (sd * VL + vl);                                                  \
            const uint4 raw = j < ke && d < D                                                  \
                                  ? fc_attn_load4_raw(DT, v, v_head + (ulong)((long)j * vs.y) \
                                                                 + d, D - d, aligned & 4)      \
                                  : (uint4)(0u);                                               \
            if (DT == FC_ATTN_F32)                                                             \
                vst[n * VD4 + sd] = raw;                                                       \
            else                                                                               \
                vst16[n * VD4 + sd] = raw.xy;                                                  \
        }                                                                                      \
    }
    long j0l = j_begin / BK * BK;
    if (j0l <= j_stop) { /* the first block's K and V, in flight while Q arrives */
        FC_ATTN_FETCH_K(j0l)
        FC_ATTN_FETCH_V(j0l)
    }

    FC_ATTN_KEYS_LOAD_Q(Ql, DT, WG, RT, DP4) /* (uses lid, r0, rows, Sq, qs, b, kvh, G, D) */

    for (; j0l <= j_stop; j0l += BK) {
        const int j0 = (int)j0l;
        /* 1. commit K (its readers passed the previous block's step-3 barrier) */
        FC_ATTN_UNROLL for (int n = 0; n < KSL; n++) {
            const int e = lid + n * WG;
            if (e < BK * DPV) {
                __local float4 *dst = Kl + (e / DPV) * KS4 + (e % DPV) * (EPV / 4);
                if (DT == FC_ATTN_F32) {
                    dst[0] = as_float4(kst[n]);
                } else {
                    dst[0] = fc_attn_pair2_to_float4(DT, kst[n].xy);
                    dst[1] = fc_attn_pair2_to_float4(DT, kst[n].zw);
                }
            }
        }
        /* the next block's K: in flight during steps 2-4 */
        if (j0l + BK <= j_stop) {
            FC_ATTN_FETCH_K(j0l + BK)
        }
        barrier(CLK_LOCAL_MEM_FENCE);

        /* 2. partial scores of key kk over this item's part of the head dim */
        fc_attn_keys_scores(Kl, Ql, Sl, kk, kh, rt_active, RT, BK, DP4, DH4);
        barrier(CLK_LOCAL_MEM_FENCE);

        /* 3. online softmax of row sr over this item's keys sc, sc + SC, ... */
        fc_attn_keys_softmax(Sl, Pl, Al, red, &m, &l_part, j0, row_lo, row_hi, score, lid, sr,
                             sc, RT, BK, KH, SC, KPI, shuffle);
        barrier(CLK_LOCAL_MEM_FENCE);

        /* 4. O = O·alpha + P·V over this group's keys kg, kg + KG, ... */
        FC_ATTN_UNROLL for (int r = 0; r < RT; r++) {
            const float a = Al[r];
            FC_ATTN_UNROLL for (int sd = 0; sd < VD4; sd++) acc[r][sd] *= a;
        }
        FC_ATTN_UNROLL for (int n = 0; n < KPG; n++) {
            const int key = kg + KG * n;
            float4 vf[2];
            FC_ATTN_UNROLL for (int sd = 0; sd < VD4; sd++)
                vf[sd] = DT == FC_ATTN_F32 ? as_float4(vst[n * VD4 + sd])
                                           : fc_attn_pair2_to_float4(DT, vst16[n * VD4 + sd]);
            FC_ATTN_UNROLL for (int r4 = 0; r4 < RT / 4; r4++) {
                const float4 p4 = ((__local float4 *)Pl)[key * (RT / 4) + r4];
                FC_ATTN_UNROLL for (int e = 0; e < 4; e++) {
                    const int r = 4 * r4 + e;
                    const float p = e == 0 ? p4.x : e == 1 ? p4.y : e == 2 ? p4.z : p4.w;
                    if (r < rt_active) {
                        FC_ATTN_UNROLL for (int sd = 0; sd < VD4; sd++)
                            acc[r][sd] = fma((float4)(p), vf[sd], acc[r][sd]);
                    }
                }
            }
        }
        /* the next block's V, once this block's is consumed */
        if (j0l + BK <= j_stop) {
            FC_ATTN_FETCH_V(j0l + BK)
        }
    }
#undef FC_ATTN_FETCH_K
#undef FC_ATTN_FETCH_V

    /* ---- add the key groups' accumulators and the row sums, normalise once, store ---- */
    barrier(CLK_LOCAL_MEM_FENCE); /* K block, P and red are free */
    FC_ATTN_UNROLL for (int r = 0; r < RT; r++)
        FC_ATTN_UNROLL for (int sd = 0; sd < VD4; sd++)
            Kl[(kg * RT + r) * DP4 + sd * VL + vl] = acc[r][sd];
    red[lid] = l_part;
    if (sc == 0)
        Ml[sr] = m;
    barrier(CLK_LOCAL_MEM_FENCE);
    fc_attn_keys_store(Kl, red, Ml, o, lse, os, ls, split_stride, split, b, kvh, G, Sq, D, r0, rows,
                       out_dt, has_lse, aligned, lid, WG, RT, DP4, KG, SC);
}

/* Per-dtype kernels per head-dim class (GPUs), or one generic kernel (FC_ATTN_GENERIC: CPUs)
 * with the dtype and the padded head dim (64, 128 or 256) decided at run time. */
#define FC_ATTN_DECODE_KEYS(name, DT, DP, t)                                                  \
    FC_ATTN_DECODE_KEYS_(name, DT, DP, FC_ATTN_KWG_OF(t), FC_ATTN_KRT_OF(t), FC_ATTN_KKB_OF(t))
#define FC_ATTN_DECODE_KEYS_(name, DT, DP, WG, RT, KB)                                        \
    __kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void name(FC_ATTN_FORWARD_PARAMS) \
    {                                                                                          \
        __local float4 smem[FC_ATTN_KSMEM4(FC_ATTN_KBK(DT, KB, DP), DP, WG, RT)];          \
        (void)in_dtype;                                                                        \
        fc_attn_decode_keys(FC_ATTN_FORWARD_ARGS, smem, DT, DP, WG, RT, KB);                  \
    }
/* form: keys (eight rows) or keys4 (the four-row form) */
#define FC_ATTN_DECODE_KEYS_DTYPES(form, DP, t)                                               \
    FC_WITH_F32(FC_ATTN_DECODE_KEYS(fc_attn_decode_##form##_d##DP##_f32, FC_ATTN_F32, DP, t)) \
    FC_WITH_F16(FC_ATTN_DECODE_KEYS(fc_attn_decode_##form##_d##DP##_f16, FC_ATTN_F16, DP, t)) \
    FC_WITH_BF16(FC_ATTN_DECODE_KEYS(fc_attn_decode_##form##_d##DP##_bf16, FC_ATTN_BF16, DP, t))

#if !(FC_ATTN_KINDS & FC_ATTN_KIND_DECODE_KEYS)
/* not in this build */
#elif defined(FC_ATTN_GENERIC)
#if FC_ATTN_KWG_OF(FC_ATTN_K256) > 0
#define FC_ATTN_DECODE_KEYS_ANY_(WG, RT, KB)                                                  \
    __kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void fc_attn_decode_keys_any(     \
        FC_ATTN_FORWARD_PARAMS)                                                                \
    {                                                                                          \
        __local float4 smem[FC_ATTN_KSMEM4(KB, 256, WG, RT)];                                  \
        const int dp = dims.z <= 64 ? 64 : dims.z <= 128 ? 128 : 256;                          \
        fc_attn_decode_keys(FC_ATTN_FORWARD_ARGS, smem, in_dtype, dp, WG, RT, KB);            \
    }
#define FC_ATTN_DECODE_KEYS_ANY(t)                                                            \
    FC_ATTN_DECODE_KEYS_ANY_(FC_ATTN_KWG_OF(t), FC_ATTN_KRT_OF(t), FC_ATTN_KKB_OF(t))
FC_ATTN_DECODE_KEYS_ANY(FC_ATTN_K256)
#endif
#else
#if FC_ATTN_KWG_OF(FC_ATTN_K4_64) > 0
FC_ATTN_DECODE_KEYS_DTYPES(keys4, 64, FC_ATTN_K4_64)
#endif
#if FC_ATTN_KWG_OF(FC_ATTN_K4_128) > 0
FC_ATTN_DECODE_KEYS_DTYPES(keys4, 128, FC_ATTN_K4_128)
#endif
#if FC_ATTN_KWG_OF(FC_ATTN_K4_256) > 0
FC_ATTN_DECODE_KEYS_DTYPES(keys4, 256, FC_ATTN_K4_256)
#endif
#if FC_ATTN_KWG_OF(FC_ATTN_K64) > 0
FC_ATTN_DECODE_KEYS_DTYPES(keys, 64, FC_ATTN_K64)
#endif
#if FC_ATTN_KWG_OF(FC_ATTN_K128) > 0
FC_ATTN_DECODE_KEYS_DTYPES(keys, 128, FC_ATTN_K128)
#endif
#if FC_ATTN_KWG_OF(FC_ATTN_K256) > 0
FC_ATTN_DECODE_KEYS_DTYPES(keys, 256, FC_ATTN_K256)
#endif
#endif
