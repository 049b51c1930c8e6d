/* cl/attention_forward.cl — the tiled forward kernel (prefill and legacy decode tiles): one
 * work-group owns a tile of query rows, K and V tiles stream through local memory (see the
 * overview in cl/attention.cl). Part of the attention program; needs attention_common.cl. */


/* Local memory of one work-group, in float4s. Q chunk + K chunk (S phase) share the space
 * with P + V chunk (P·V phase); when one chunk holds the whole head dim (DC >= DP, decode
 * tiles), Q is loaded once and keeps a region of its own. The reduction scratch (TM floats per
 * work-item, none with shuffles) comes last. Rows of the Q/K chunks and of P carry one float4
 * of padding, so the work-items of a warp that read different rows hit different banks. */
#define FC_ATTN_KS4(DC) ((DC) / 4 + 1)
#define FC_ATTN_PS4(C, TN) ((C) * (TN) / 4 + 1)
#define FC_ATTN_PV4(DP, C, R, TM, TN, VC) ((R) * (TM) * FC_ATTN_PS4(C, TN) + (VC) * ((DP) / 4))
#define FC_ATTN_SMEM4(QRES, DP, C, R, TM, TN, DC, VC)                                        \
    ((QRES) ? (R) * (TM) * FC_ATTN_KS4(DC) +                                                  \
                  FC_ATTN_MAX2((C) * (TN) * FC_ATTN_KS4(DC), FC_ATTN_PV4(DP, C, R, TM, TN, VC)) \
            : FC_ATTN_MAX2(((R) * (TM) + (C) * (TN)) * FC_ATTN_KS4(DC),                       \
                           FC_ATTN_PV4(DP, C, R, TM, TN, VC))) +                              \
        (FC_ATTN_SHUFFLE ? 0 : ((TM) * (R) * (C) + 3) / 4)

/* Global loads are staged in registers one step ahead (software pipelining): while a chunk is
 * computed from local memory, the next chunk's loads are in flight. Slots per work-item: a
 * Q chunk (QS), a K chunk (KS) or a V chunk (VS). */
#define FC_ATTN_CEIL(a, b) (((a) + (b) - 1) / (b))
#define FC_ATTN_QS_(C, R, TM, DC) FC_ATTN_CEIL((R) * (TM) * ((DC) / 4), (R) * (C))
#define FC_ATTN_KS_(C, R, TN, DC) FC_ATTN_CEIL((C) * (TN) * ((DC) / 4), (R) * (C))
#define FC_ATTN_VS_(DP, C, R, VC) FC_ATTN_CEIL((VC) * ((DP) / 4), (R) * (C))
#define FC_ATTN_QS_F(dp, t)                                                                    \
    (FC_ATTN_C_OF(t) > 0 ? FC_ATTN_QS_(FC_ATTN_C_OF(t), FC_ATTN_R_OF(t), FC_ATTN_TM_OF(t),     \
                                       FC_ATTN_DC_OF(t)) : 0)
#define FC_ATTN_SLOTS_F(dp, t)                                                                 \
    (FC_ATTN_C_OF(t) > 0                                                                       \
         ? FC_ATTN_MAX2(FC_ATTN_QS_F(dp, t) + FC_ATTN_KS_(FC_ATTN_C_OF(t), FC_ATTN_R_OF(t),    \
                                                           FC_ATTN_TN_OF(t), FC_ATTN_DC_OF(t)), \
                        FC_ATTN_VS_(dp, FC_ATTN_C_OF(t), FC_ATTN_R_OF(t), FC_ATTN_VC_OF(t)))   \
         : 0)
#define FC_ATTN_QS_MAX FC_ATTN_MAX_OVER_TUPLES(FC_ATTN_QS_F)
#define FC_ATTN_SLOTS_MAX FC_ATTN_MAX_OVER_TUPLES(FC_ATTN_SLOTS_F)

/* The inner products, as macros so that the body exists in two forms: every row slice live
 * (SKIP = 0: prefill, no branch in the hot loop) or skipping dead slices (SKIP tests i: decode
 * tiles, which are often larger than G·Sq).
 * S += Q·Kᵀ over one head-dim chunk: per float4 of the chunk, TN keys and TM rows from local
 * memory feed TM·TN·4 FMAs. */
#define FC_ATTN_S_CHUNK(SKIP)                                                                  \
    {                                                                                          \
        FC_ATTN_UNROLL for (int k4 = 0; k4 < DC4; k4++) {                                     \
            float4 kf[FC_ATTN_TN_MAX];                                                         \
            FC_ATTN_UNROLL for (int t = 0; t < TN; t++)                                       \
                kf[t] = Kl[(t * C + col) * KS4 + k4]; /* key t·C + col */                     \
            FC_ATTN_UNROLL for (int i = 0; i < TM; i++) {                                     \
                if (!(SKIP)) { /* no break: loops with one exit unroll everywhere */           \
                    const float4 qf = Ql[(i * R + rg) * KS4 + k4];                             \
                    FC_ATTN_UNROLL for (int t = 0; t < TN; t++)                               \
                        s[i][t] = fma(qf.x, kf[t].x, fma(qf.y, kf[t].y,                        \
                                  fma(qf.z, kf[t].z, fma(qf.w, kf[t].w, s[i][t]))));           \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
    }
/* O += P·V over one chunk of VC keys: per 4 keys, TM float4s of P and 4·TD4 float4s of V feed
 * 16·TM·TD4 FMAs. */
#define FC_ATTN_PV_CHUNK(SKIP)                                                                 \
    {                                                                                          \
        FC_ATTN_UNROLL for (int kk4 = 0; kk4 < VC / 4; kk4++) {                               \
            float4 pf[FC_ATTN_TM_MAX];                                                         \
            FC_ATTN_UNROLL for (int i = 0; i < TM; i++)                                       \
                pf[i] = SKIP ? (float4)(0.0f) : Pl[(i * R + rg) * PS4 + vc * (VC / 4) + kk4];  \
            FC_ATTN_UNROLL for (int e = 0; e < 4; e++) {                                      \
                float4 vf[FC_ATTN_TD4_MAX];                                                    \
                FC_ATTN_UNROLL for (int sd = 0; sd < TD4; sd++)                               \
                    vf[sd] = Vl[(kk4 * 4 + e) * DP4 + sd * C + col]; /* this item's dims */   \
                FC_ATTN_UNROLL for (int i = 0; i < TM; i++) {                                 \
                    if (!(SKIP)) {                                                             \
                        const float p = e == 0 ? pf[i].x : e == 1 ? pf[i].y                    \
                                      : e == 2 ? pf[i].z : pf[i].w;                            \
                        FC_ATTN_UNROLL for (int sd = 0; sd < TD4; sd++)                       \
                            acc[i][sd] = fma((float4)(p), vf[sd], acc[i][sd]);                 \
                    }                                                                          \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
    }

/* One work-group: BM query rows of one (batch, kv head) against the keys of one split.
 * DT (input dtype) and DP (padded head dim) are literals in the per-dtype kernels; the generic
 * kernels (CPUs) pass run-time values, trading speed for far less code to compile. QRES: Q
 * stays in local memory for the whole key loop (needs DC >= DP). ROWSKIP: decode tiles. */
FC_INLINE void fc_attn_forward_tile(
    __global const uchar *q, __global const uchar *k, __global const uchar *v,
    __global uchar *o, __global float *lse, long4 qs, long4 ks, long4 vs, long4 os, long4 ls,
    int4 dims, int4 grid, int4 mask, float2 score, long2 split_stride, int aligned,
    int tail, __local float4 *smem, const int DT, const int DP, const int QRES,
    const int ROWSKIP, const int C, const int R, const int TM, const int TN, const int DC,
    const int VC)
{
    const int WG = R * C, BM = R * TM, BN = C * TN, TD4 = DP / (4 * C);
    const int DC4 = DC / 4, KS4 = FC_ATTN_KS4(DC), PS4 = FC_ATTN_PS4(C, TN), DP4 = DP / 4;
    const int QS = QRES ? 0 : FC_ATTN_QS_(C, R, TM, DC), KS = FC_ATTN_KS_(C, R, TN, DC);
    const int VS = FC_ATTN_VS_(DP, C, R, VC);
    const int Sq = dims.x, D = dims.z, G = dims.w, out_dt = mask.z, has_lse = mask.w;
    const int lid = (int)get_local_id(0), col = lid % C, rg = lid / C;

    __local float4 *Ql = smem;
    __local float4 *Kl = smem + BM * KS4;                        /* after Q, in both layouts */
    __local float4 *Pl = smem + (QRES ? BM * KS4 : 0);           /* P·V phase */
    __local float4 *Vl = Pl + BM * PS4;
    __local float *red = (__local float *)(smem + (QRES ? BM * KS4 + FC_ATTN_MAX2(BN * KS4,
                                                   BM * PS4 + VC * DP4)
                                                        : FC_ATTN_MAX2((BM + BN) * KS4,
                                                                       BM * PS4 + VC * DP4)));
    __local float *Pf = (__local float *)Pl;
    (void)red; /* unused with shuffles */

    /* Which tile and split, its keys and the keys every row sees. */
    FC_ATTN_PLACE(pl, dims, grid, mask, BM, 1, tail)
    const int split = pl.split, b = pl.b, kvh = pl.kvh, rows = pl.rows, r0 = pl.r0, ke = pl.ke;
    const long j_begin = pl.j_begin, j_end = pl.j_end, full_lo = pl.full_lo, full_hi = pl.full_hi;
    const long j_stop = j_end >= j_begin ? j_end : -1; /* no visible key: no tile */
    /* Row slices i with no valid row in the whole tile (decode tiles larger than G·Sq) skip
     * their arithmetic when ROWSKIP: the condition is the same for every work-item, so nothing
     * diverges. */
    const int tm_active = min(TM, (rows - r0 + R - 1) / R);

    /* This work-item's rows: r = i·R + rg (neighbouring row groups read neighbouring rows). */
    int row_lo[FC_ATTN_TM_MAX], row_hi[FC_ATTN_TM_MAX];
    float m[FC_ATTN_TM_MAX], l[FC_ATTN_TM_MAX];
    float4 acc[FC_ATTN_TM_MAX][FC_ATTN_TD4_MAX];
    float s[FC_ATTN_TM_MAX][FC_ATTN_TN_MAX];
    FC_ATTN_UNROLL for (int i = 0; i < TM; i++) {
        const int2 keys = FC_ATTN_ROW_KEYS(pl, r0 + i * R + rg, Sq, mask);
        row_lo[i] = keys.x;
        row_hi[i] = keys.y;
        m[i] = -INFINITY;
        l[i] = 0.0f;
        FC_ATTN_UNROLL for (int sd = 0; sd < TD4; sd++)
            acc[i][sd] = (float4)(0.0f);
    }

    /* Where each Q row this work-item loads starts (the row -> (head, query) division is done
     * once, not per chunk); -1 past the last row. */
    const int qslots = QRES ? FC_ATTN_QS_(C, R, TM, DC) : QS;
    long q_row[FC_ATTN_QS_MAX];
    FC_ATTN_UNROLL for (int n = 0; n < qslots; n++) {
        const int r = r0 + (lid + n * WG) / DC4;
        const int2 gq = fc_attn_divmod(r, Sq);
        q_row[n] = lid + n * WG < BM * DC4 && r < rows
                       ? (long)fc_attn_row(qs, b, gq.y, kvh * G + gq.x) : -1;
    }
    const ulong k_head = fc_attn_row(ks, b, 0, kvh), v_head = fc_attn_row(vs, b, 0, kvh);
    const int nch = (D + DC - 1) / DC;

    if (QRES) { /* the whole of Q, once (the first stage's barrier publishes it) */
        FC_ATTN_UNROLL for (int n = 0; n < qslots; n++) {
            const int e = lid + n * WG, d4 = e % DC4, d = 4 * d4;
            if (e < BM * DC4)
                Ql[e / DC4 * KS4 + d4] = fc_attn_raw_to_float4(
                    DT, q_row[n] >= 0 && d < D ? fc_attn_load4_raw(DT, q, (ulong)q_row[n] + d,
                                                                   D - d, aligned & 1)
                                               : (uint4)(0u));
        }
    }

    /* The stage loop: per key tile, nch S chunks (phase < nch), then nv V chunks. `stage`
     * holds the loads of the current stage, fetched during the previous one. */
    uint4 stage[FC_ATTN_SLOTS_MAX]; /* raw bits: converted at the commit */
    long j0l = j_begin / BN * BN;
    int phase = 0;
#define FC_ATTN_FETCH(J0, PH)                                                                  \
    if ((PH) < nch) { /* Q chunk and K chunk PH */                                             \
        const int d0_ = (PH) * DC;                                                             \
        FC_ATTN_UNROLL for (int n = 0; n < QS; n++) {                                          \
            const int e = lid + n * WG, d = d0_ + 4 * (e % DC4);                               \
            stage[n] = q_row[n] >= 0 && d < D                                                  \
                           ? fc_attn_load4_raw(DT, q, (ulong)q_row[n] + d, D - d, aligned & 1) \
                           : (uint4)(0u);                                                      \
        }                                                                                      \
        FC_ATTN_UNROLL for (int n = 0; n < KS; n++) {                                          \
            const int e = lid + n * WG, d = d0_ + 4 * (e % DC4), j = (J0) + e / DC4;           \
            stage[QS + n] = e < BN * DC4 && j < ke && d < D                                    \
                                ? fc_attn_load4_raw(DT, k, k_head + (ulong)((long)j * ks.y) + d, \
                                                    D - d, aligned & 2)                        \
                                : (uint4)(0u);                                                 \
        }                                                                                      \
    } else { /* V chunk PH - nch */                                                            \
        FC_ATTN_UNROLL for (int n = 0; n < VS; n++) {                                          \
            const int e = lid + n * WG, d = 4 * (e % DP4);                                     \
            const int j = (J0) + ((PH) - nch) * VC + e / DP4;                                  \
            stage[n] = e < VC * DP4 && j < ke && d < D                                         \
                           ? fc_attn_load4_raw(DT, v, v_head + (ulong)((long)j * vs.y) + d,    \
                                               D - d, aligned & 4)                             \
                           : (uint4)(0u);                                                      \
        }                                                                                      \
    }
    if (j0l <= j_stop) {
        FC_ATTN_FETCH(j0l, 0)
    }
    while (j0l <= j_stop) {
        const int j0 = (int)j0l;
        const int nv = (min(BN, ke - j0) + VC - 1) / VC; /* chunks past the keys are all 0 */

        /* commit the staged loads to local memory */
        barrier(CLK_LOCAL_MEM_FENCE); /* everyone is done with what is there */
        if (phase < nch) {
            FC_ATTN_UNROLL for (int n = 0; n < QS; n++) {
                const int e = lid + n * WG;
                if (e < BM * DC4)
                    Ql[e / DC4 * KS4 + e % DC4] = fc_attn_raw_to_float4(DT, stage[n]);
            }
            FC_ATTN_UNROLL for (int n = 0; n < KS; n++) {
                const int e = lid + n * WG;
                if (e < BN * DC4)
                    Kl[e / DC4 * KS4 + e % DC4] = fc_attn_raw_to_float4(DT, stage[QS + n]);
            }
        } else {
            FC_ATTN_UNROLL for (int n = 0; n < VS; n++) {
                const int e = lid + n * WG;
                if (e < VC * DP4)
                    Vl[e] = fc_attn_raw_to_float4(DT, stage[n]);
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);

        /* fetch the next stage: the next chunk of this tile, or the first of the next tile */
        const int last = phase + 1 == nch + nv;
        const long next_j0 = last ? j0l + BN : j0l;
        const int next_phase = last ? 0 : phase + 1;
        if (next_j0 <= j_stop) {
            FC_ATTN_FETCH(next_j0, next_phase)
        }

        if (phase < nch) {
            /* ---- 1. S += Q·Kᵀ over this head-dim chunk ---- */
            if (phase == 0) {
                FC_ATTN_UNROLL for (int i = 0; i < TM; i++)
                    FC_ATTN_UNROLL for (int t = 0; t < TN; t++)
                        s[i][t] = 0.0f;
            }
            if (ROWSKIP) /* decode tiles: skip the dead row slices */
                FC_ATTN_S_CHUNK(i >= tm_active)
            else /* prefill tiles: no branch in the hot loop */
                FC_ATTN_S_CHUNK(0)
            if (phase == nch - 1) {
                /* ---- 2. online softmax: scale, softcap, mask, row max, rescale ---- */
                const int full = j0l >= full_lo && j0l + BN - 1 <= full_hi;
                float mx[FC_ATTN_TM_MAX];
                FC_ATTN_UNROLL for (int i = 0; i < TM; i++) {
                    mx[i] = -INFINITY;
                    FC_ATTN_UNROLL for (int t = 0; t < TN; t++) {
                        float x = score.y != 0.0f ? score.y * tanh(score.x * s[i][t])
                                                  : score.x * s[i][t];
                        const int j = j0 + t * C + col;
                        if (!full && (j < row_lo[i] || j > row_hi[i]))
                            x = -INFINITY;
                        s[i][t] = x;
                        mx[i] = fmax(mx[i], x);
                    }
                }
                FC_ATTN_ROW_REDUCE(FC_ATTN_OP_MAX, mx, TM, C, WG, red, lid)
                /* P overwrites the K chunk (and Q): every work-item must be past its S reads
                 * (with the local-memory reduction its barrier already says so). */
                if (FC_ATTN_SHUFFLE)
                    barrier(CLK_LOCAL_MEM_FENCE);
                FC_ATTN_UNROLL for (int i = 0; i < TM; i++) {
                    const float m_new = fmax(m[i], mx[i]);
                    const float m_ref = m_new == -INFINITY ? 0.0f : m_new;
                    const float alpha = exp2(m[i] - m_ref); /* 0 while nothing was seen */
                    m[i] = m_new;
                    float sum = 0.0f;
                    FC_ATTN_UNROLL for (int t = 0; t < TN; t++) {
                        const float p = exp2(s[i][t] - m_ref);
                        sum += p;
                        Pf[(i * R + rg) * PS4 * 4 + t * C + col] = p;
                    }
                    l[i] = l[i] * alpha + sum; /* this work-item's share of the row sum */
                    FC_ATTN_UNROLL for (int sd = 0; sd < TD4; sd++)
                        acc[i][sd] *= alpha;
                }
            }
        } else {
            /* ---- 3. O += P·V over this chunk of VC keys ---- */
            const int vc = phase - nch;
            if (ROWSKIP)
                FC_ATTN_PV_CHUNK(i >= tm_active)
            else
                FC_ATTN_PV_CHUNK(0)
        }
        j0l = next_j0;
        phase = next_phase;
    }
#undef FC_ATTN_FETCH

    /* ---- normalise once and store ---- */
    FC_ATTN_ROW_REDUCE(FC_ATTN_OP_SUM, l, TM, C, WG, red, lid)
    FC_ATTN_UNROLL for (int i = 0; i < TM; i++) {
        const int r = r0 + i * R + rg;
        if (r < rows) {
            const int2 gq = fc_attn_divmod(r, Sq);
            const int qi = gq.y, h = kvh * G + gq.x;
            const float inv = l[i] > 0.0f ? 1.0f / l[i] : 0.0f; /* no visible key: zeros */
            const ulong orow = fc_attn_row(os, b, qi, h) + (ulong)((long)split * split_stride.x);
            FC_ATTN_UNROLL for (int sd = 0; sd < TD4; sd++) {
                const int d = 4 * (sd * C + col);
                if (d < D)
                    fc_attn_store4(out_dt, o, orow + d, D - d, aligned & 8, acc[i][sd] * inv);
            }
            if (has_lse && col == 0)
                lse[fc_attn_row(ls, b, h, qi) + (ulong)((long)split * split_stride.y)] =
                    l[i] > 0.0f ? (m[i] + log2(l[i])) * FC_ATTN_LN2 : -INFINITY;
        }
    }
}

/* Per-dtype kernels for one family and head-dim class (GPUs), or generic kernels with the
 * dtype and the padded head dim decided at run time (FC_ATTN_GENERIC: CPUs, where compile time
 * matters more than registers). `t` is a geometry tuple. */
#define FC_ATTN_KERNEL(name, DT, DP, SKIP, t)                                                 \
    FC_ATTN_KERNEL_(name, DT, DP, SKIP, FC_ATTN_C_OF(t), FC_ATTN_R_OF(t), FC_ATTN_TM_OF(t),   \
                    FC_ATTN_TN_OF(t), FC_ATTN_DC_OF(t), FC_ATTN_VC_OF(t))
#define FC_ATTN_KERNEL_(name, DT, DP, SKIP, C, R, TM, TN, DC, VC)                             \
    __kernel __attribute__((reqd_work_group_size((C) * (R), 1, 1))) void name(                  \
        FC_ATTN_FORWARD_PARAMS)                                                                \
    {                                                                                          \
        __local float4 smem[FC_ATTN_SMEM4((DC) >= (DP), DP, C, R, TM, TN, DC, VC)];            \
        (void)in_dtype;                                                                        \
        fc_attn_forward_tile(FC_ATTN_FORWARD_ARGS, smem, DT, DP, (DC) >= (DP), SKIP, C, R, TM, \
                             TN, DC, VC);                                                      \
    }
#define FC_ATTN_KERNEL_ANY(name, SKIP, t)                                                     \
    FC_ATTN_KERNEL_ANY_(name, SKIP, FC_ATTN_C_OF(t), FC_ATTN_R_OF(t), FC_ATTN_TM_OF(t),       \
                        FC_ATTN_TN_OF(t), FC_ATTN_DC_OF(t), FC_ATTN_VC_OF(t))
#define FC_ATTN_KERNEL_ANY_(name, SKIP, C, R, TM, TN, DC, VC)                                 \
    __kernel __attribute__((reqd_work_group_size((C) * (R), 1, 1))) void name(                  \
        FC_ATTN_FORWARD_PARAMS)                                                                \
    {                                                                                          \
        __local float4 smem[FC_ATTN_SMEM4(0, 256, C, R, TM, TN, DC, VC)];                      \
        const int dp = (dims.z + 4 * (C) - 1) / (4 * (C)) * (4 * (C));                        \
        fc_attn_forward_tile(FC_ATTN_FORWARD_ARGS, smem, in_dtype, dp, 0, SKIP, C, R, TM, TN, \
                             DC, VC);                                                          \
    }
#define FC_ATTN_KERNELS_DTYPES(family, DP, SKIP, t)                                           \
    FC_WITH_F32(FC_ATTN_KERNEL(fc_attn_##family##_d##DP##_f32, FC_ATTN_F32, DP, SKIP, t))      \
    FC_WITH_F16(FC_ATTN_KERNEL(fc_attn_##family##_d##DP##_f16, FC_ATTN_F16, DP, SKIP, t))      \
    FC_WITH_BF16(FC_ATTN_KERNEL(fc_attn_##family##_d##DP##_bf16, FC_ATTN_BF16, DP, SKIP, t))

#if defined(FC_ATTN_GENERIC)
/* Generic kernels take the geometry of the 256 class, which bounds every head dim. */
#if FC_ATTN_C_OF(FC_ATTN_P256) > 0 && (FC_ATTN_KINDS & FC_ATTN_KIND_PREFILL)
FC_ATTN_KERNEL_ANY(fc_attn_prefill_any, 0, FC_ATTN_P256)
#endif
#if FC_ATTN_C_OF(FC_ATTN_D256) > 0 && (FC_ATTN_KINDS & FC_ATTN_KIND_DECODE_TILES)
FC_ATTN_KERNEL_ANY(fc_attn_decode_any, 1, FC_ATTN_D256)
#endif
#else
#if FC_ATTN_KINDS & FC_ATTN_KIND_PREFILL
#if FC_ATTN_C_OF(FC_ATTN_P64) > 0
FC_ATTN_KERNELS_DTYPES(prefill, 64, 0, FC_ATTN_P64)
#endif
#if FC_ATTN_C_OF(FC_ATTN_P128) > 0
FC_ATTN_KERNELS_DTYPES(prefill, 128, 0, FC_ATTN_P128)
#endif
#if FC_ATTN_C_OF(FC_ATTN_P256) > 0
FC_ATTN_KERNELS_DTYPES(prefill, 256, 0, FC_ATTN_P256)
#endif
#endif
#if FC_ATTN_KINDS & FC_ATTN_KIND_DECODE_TILES
#if FC_ATTN_C_OF(FC_ATTN_D64) > 0
FC_ATTN_KERNELS_DTYPES(decode, 64, 1, FC_ATTN_D64)
#endif
#if FC_ATTN_C_OF(FC_ATTN_D128) > 0
FC_ATTN_KERNELS_DTYPES(decode, 128, 1, FC_ATTN_D128)
#endif
#if FC_ATTN_C_OF(FC_ATTN_D256) > 0
FC_ATTN_KERNELS_DTYPES(decode, 256, 1, FC_ATTN_D256)
#endif
#endif
#endif
