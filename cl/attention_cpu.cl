/* cl/attention_cpu.cl — fused attention for CPUs, in explicit 16-wide vectors (FC_ATTN_CPU:
 * built for CPU devices, and Oclgrind to check them). Part of the attention program; needs
 * attention_common.cl.
 *
 * Why kernels of their own: a CPU runtime such as PoCL runs a work-group as a loop over its
 * work-items on one thread, and the GPU-shaped tiled kernels (teams of work-items, local-memory
 * reductions, barriers, dtype and head dim read at run time) become scalar code there: about
 * 8 % of the FMA peak of a 2-core AVX-512 machine for prefill, and 4 % of its copy bandwidth for
 * decode. Here one work-item (a work-group of one) owns a tile of packed rows (row = g·Sq + i, as
 * in every forward kernel) of one (batch, kv head) and one split's keys, and its vectors are
 * float16s, which the CPU compiler maps onto SIMD registers:
 *
 * fc_attn_rows_vector: 16 rows, the 16 lanes. Qᵀ and Oᵀ are DP float16s in private memory (Qᵀ[d]
 *   holds element d of every row), so that S = Q·Kᵀ for a block of KB keys is, per head-dim
 *   element, one Qᵀ load and KB vector FMAs against a key element broadcast to every lane, and
 *   O += P·V is one Oᵀ load, KB FMAs and one store: no horizontal sums, and K and V rows are each
 *   read once per 16 rows, 16 elements at a time (vload16 / vload_half16, bf16 by a shift).
 *   Each block of KB keys: scale (and softcap), mask the lanes whose row does not see a key (only
 *   blocks that touch a mask boundary pay for it, as in the other kernels), the online softmax
 *   per lane with exp2 (a row max of -inf used as 0), Oᵀ rescaled only when some lane's max moved.
 *
 * fc_attn_decode_vector: at most 8 rows of each of `heads` kv heads (decode: G·Sq rows a kv
 *   head), head-dim elements in the lanes. With few rows the lanes of the kernel above would
 *   mostly idle (MHA decode: one row of 16); here a key's K and V rows are loaded once as DP / 16
 *   float16s and every row takes its score as DP / 16 FMAs and one horizontal sum, and O += p·V
 *   as DP / 16 FMAs. Several kv heads a work-item keep BSHD's K and V one stream through memory.
 *
 * Both normalise once at the end; lse = (m + log2 l)·ln 2; a row with no visible key gets zeros
 * and lse = -inf. Split-KV partials go to f32 scratch exactly as the other kernels' (the host's
 * split merge combines them). Lanes are named, not indexed (.s0 ... .sf), and the key steps are
 * written out rather than unrolled loops, so the file is plain OpenCL C 1.2 whatever the compiler
 * unrolls. */

#if defined(FC_ATTN_CPU) && FC_ATTN_CPU

#define FC_RV_ROWS 16  /* rows per work-item: the lanes of a float16 */
#define FC_RV_KEYS 8   /* keys per block */
#define FC_RV_DMAX 256 /* the largest head dim (padded to 16) */
/* STEP(t) for each key t of a block, written out rather than a loop with an unroll hint: s[],
 * kc[] and vc[] then index with constants and live in vector registers whatever the compiler
 * unrolls. */
#define FC_RV_EACH_KEY(STEP) STEP(0) STEP(1) STEP(2) STEP(3) STEP(4) STEP(5) STEP(6) STEP(7)

/* Elements i .. i + 15 of a row as floats, of which the first n (<= 16) exist; the others 0. */
FC_INLINE float16 fc_rv_load16(const int dt, const __global uchar *p, ulong i, int n)
{
    if (n >= 16) {
        if (dt == FC_ATTN_F32)
            return vload16(0, (const __global float *)p + i);
        if (dt == FC_ATTN_F16)
            return vload_half16(0, (const __global half *)p + i);
        return as_float16(convert_uint16(vload16(0, (const __global ushort *)p + i)) << 16);
    }
    float part[16];
    for (int e = 0; e < 16; e++)
        part[e] = e < n ? fc_attn_load1(dt, p, i + (ulong)e) : 0.0f;
    return vload16(0, part);
}

/* Elements col .. col + 15 (n of them real) of the K or V rows of keys j0 .. j0 + KB - 1 of a
 * head (row j at head + j·stride), for the first nk keys; the others 0. */
FC_INLINE void fc_rv_load_keys(const int dt, const __global uchar *p, ulong head, long stride,
                               long j0, int nk, int col, int n, __private float16 *out)
{
#define FC_RV_LOAD(t)                                                                          \
    out[t] = (t) < nk ? fc_rv_load16(dt, p, head + (ulong)((j0 + (t)) * stride) + (ulong)col, n) \
                      : (float16)(0.0f);
    FC_RV_EACH_KEY(FC_RV_LOAD)
#undef FC_RV_LOAD
}

/* One step per head-dim element of a 16-element chunk: STEP(e, lane) with lane the chunk's
 * element e as a named component (.s0 ... .sf). */
#define FC_RV_EACH_LANE(STEP)                                                                  \
    STEP(0, s0) STEP(1, s1) STEP(2, s2) STEP(3, s3) STEP(4, s4) STEP(5, s5) STEP(6, s6)       \
    STEP(7, s7) STEP(8, s8) STEP(9, s9) STEP(10, sa) STEP(11, sb) STEP(12, sc) STEP(13, sd)   \
    STEP(14, se) STEP(15, sf)

__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void fc_attn_rows_vector(
    FC_ATTN_FORWARD_PARAMS)
{
    FC_ATTN_PLACE(pl, dims, grid, mask, FC_RV_ROWS, 1, tail)
    const int Sq = dims.x, D = dims.z, G = dims.w, dt = in_dtype;
    const int chunks = (D + 15) / 16;
    const ulong k_head = fc_attn_row(ks, pl.b, 0, pl.kvh), v_head = fc_attn_row(vs, pl.b, 0, pl.kvh);
    float16 qT[FC_RV_DMAX], oT[FC_RV_DMAX];
    __private float *qf = (__private float *)qT;
    int lo_of[FC_RV_ROWS], hi_of[FC_RV_ROWS];

    /* Qᵀ (zero past the head dim and for rows past the last), Oᵀ = 0, each lane's keys */
    for (int d = 0; d < chunks * 16; d++)
        qT[d] = oT[d] = (float16)(0.0f);
    for (int r = 0; r < FC_RV_ROWS; r++) {
        const int row = pl.r0 + r;
        const int2 keys = FC_ATTN_ROW_KEYS(pl, row, Sq, mask);
        lo_of[r] = keys.x;
        hi_of[r] = keys.y;
        if (row < pl.rows) {
            const int2 gq = fc_attn_divmod(row, Sq);
            const ulong q_row = fc_attn_row(qs, pl.b, gq.y, pl.kvh * G + gq.x);
            for (int d = 0; d < D; d++)
                qf[d * FC_RV_ROWS + r] = fc_attn_load1(dt, q, q_row + (ulong)d);
        }
    }
    const int16 lo = vload16(0, lo_of), hi = vload16(0, hi_of);

    float16 m = (float16)(-INFINITY), l = (float16)(0.0f);
    for (long j0 = pl.j_begin; j0 <= pl.j_end; j0 += FC_RV_KEYS) {
        const int nk = (int)min((long)FC_RV_KEYS, pl.j_end - j0 + 1);
        float16 s[FC_RV_KEYS];
#define FC_RV_ZERO(t) s[t] = (float16)(0.0f);
        FC_RV_EACH_KEY(FC_RV_ZERO)
#undef FC_RV_ZERO

        /* ---- S = Q·Kᵀ for the block: per chunk of 16 head-dim elements ---- */
        for (int c = 0; c < chunks; c++) {
            const int n = min(16, D - 16 * c);
            float16 kc[FC_RV_KEYS];
            fc_rv_load_keys(dt, k, k_head, ks.y, j0, nk, 16 * c, n, kc);
#define FC_RV_S_STEP(e, lane)                                                                  \
    {                                                                                          \
        const float16 qv = qT[16 * c + (e)];                                                   \
        s[0] = fma(qv, (float16)(kc[0].lane), s[0]);                                           \
        s[1] = fma(qv, (float16)(kc[1].lane), s[1]);                                           \
        s[2] = fma(qv, (float16)(kc[2].lane), s[2]);                                           \
        s[3] = fma(qv, (float16)(kc[3].lane), s[3]);                                           \
        s[4] = fma(qv, (float16)(kc[4].lane), s[4]);                                           \
        s[5] = fma(qv, (float16)(kc[5].lane), s[5]);                                           \
        s[6] = fma(qv, (float16)(kc[6].lane), s[6]);                                           \
        s[7] = fma(qv, (float16)(kc[7].lane), s[7]);                                           \
    }
            FC_RV_EACH_LANE(FC_RV_S_STEP)
#undef FC_RV_S_STEP
        }

        /* ---- scale, softcap, mask, online softmax per lane ---- */
        const int full = j0 >= pl.full_lo && j0 + FC_RV_KEYS - 1 <= pl.full_hi;
        float16 mx = (float16)(-INFINITY);
#define FC_RV_SCORE(t)                                                                         \
    {                                                                                          \
        float16 x = score.y != 0.0f ? score.y * tanh(score.x * s[t]) : score.x * s[t];         \
        if (!full) {                                                                           \
            const int16 j = (int16)((int)j0 + (t));                                            \
            x = select(x, (float16)(-INFINITY),                                                \
                       (j < lo) | (j > hi) | (int16)((t) >= nk ? -1 : 0));                     \
        }                                                                                      \
        s[t] = x;                                                                              \
        mx = fmax(mx, x);                                                                      \
    }
        FC_RV_EACH_KEY(FC_RV_SCORE)
#undef FC_RV_SCORE
        const float16 m_new = fmax(m, mx);
        const float16 m_ref = select(m_new, (float16)(0.0f), m_new == (float16)(-INFINITY));
        const float16 alpha = exp2(m - m_ref); /* 0 while nothing was seen */
        float16 sum = (float16)(0.0f);
#define FC_RV_EXP(t)                                                                           \
    s[t] = exp2(s[t] - m_ref);                                                                 \
    sum += s[t];
        FC_RV_EACH_KEY(FC_RV_EXP)
#undef FC_RV_EXP
        l = l * alpha + sum;
        m = m_new;
        const int rescale = any(alpha != (float16)(1.0f));

        /* ---- O += P·V: per chunk of 16 head-dim elements ---- */
        for (int c = 0; c < chunks; c++) {
            const int n = min(16, D - 16 * c);
            float16 vc[FC_RV_KEYS];
            fc_rv_load_keys(dt, v, v_head, vs.y, j0, nk, 16 * c, n, vc);
#define FC_RV_PV_STEP(e, lane)                                                                 \
    {                                                                                          \
        float16 acc = rescale ? oT[16 * c + (e)] * alpha : oT[16 * c + (e)];                   \
        acc = fma(s[0], (float16)(vc[0].lane), acc);                                           \
        acc = fma(s[1], (float16)(vc[1].lane), acc);                                           \
        acc = fma(s[2], (float16)(vc[2].lane), acc);                                           \
        acc = fma(s[3], (float16)(vc[3].lane), acc);                                           \
        acc = fma(s[4], (float16)(vc[4].lane), acc);                                           \
        acc = fma(s[5], (float16)(vc[5].lane), acc);                                           \
        acc = fma(s[6], (float16)(vc[6].lane), acc);                                           \
        acc = fma(s[7], (float16)(vc[7].lane), acc);                                           \
        oT[16 * c + (e)] = acc;                                                                \
    }
            FC_RV_EACH_LANE(FC_RV_PV_STEP)
#undef FC_RV_PV_STEP
        }
    }

    /* ---- normalise once and store each row ---- */
    float inv_of[FC_RV_ROWS], lse_of[FC_RV_ROWS];
    vstore16(select(1.0f / l, (float16)(0.0f), l <= 0.0f), 0, inv_of); /* no visible key: zeros */
    vstore16(select((m + log2(l)) * FC_ATTN_LN2, (float16)(-INFINITY), l <= 0.0f), 0, lse_of);
    const __private float *of = (const __private float *)oT;
    const int out_dt = mask.z;
    for (int r = 0; r < FC_RV_ROWS; r++) {
        const int row = pl.r0 + r;
        if (row >= pl.rows) break;
        const int2 gq = fc_attn_divmod(row, Sq);
        const int qi = gq.y, h = pl.kvh * G + gq.x;
        const ulong orow = fc_attn_row(os, pl.b, qi, h) + (ulong)((long)pl.split * split_stride.x);
        for (int d = 0; d < D; d += 4) {
            const float4 ov = (float4)(of[d * FC_RV_ROWS + r], of[(d + 1) * FC_RV_ROWS + r],
                                       of[(d + 2) * FC_RV_ROWS + r], of[(d + 3) * FC_RV_ROWS + r]);
            fc_attn_store4(out_dt, o, orow + (ulong)d, D - d, aligned & 8, ov * inv_of[r]);
        }
        if (mask.w)
            lse[fc_attn_row(ls, pl.b, h, qi) + (ulong)((long)pl.split * split_stride.y)] = lse_of[r];
    }
}

/* ---- fc_attn_decode_vector: head-dim elements in the lanes ---- */
#define FC_DV_ROWS 8 /* rows of one kv head per work-item */

/* Sum and max of the 16 lanes, lane by lane in a fixed order (deterministic). Written with
 * named lanes rather than .lo / .hi halves, whose shuffles Oclgrind 21.10's uninitialised-value
 * tracking mistook for reads of uninitialised lanes. */
FC_INLINE float fc_dv_hsum(float16 v)
{
    return ((v.s0 + v.s1) + (v.s2 + v.s3)) + ((v.s4 + v.s5) + (v.s6 + v.s7)) +
           (((v.s8 + v.s9) + (v.sa + v.sb)) + ((v.sc + v.sd) + (v.se + v.sf)));
}
FC_INLINE float fc_dv_hmax(float16 v)
{
    return fmax(fmax(fmax(fmax(v.s0, v.s1), fmax(v.s2, v.s3)), fmax(fmax(v.s4, v.s5), fmax(v.s6, v.s7))),
                fmax(fmax(fmax(v.s8, v.s9), fmax(v.sa, v.sb)), fmax(fmax(v.sc, v.sd), fmax(v.se, v.sf))));
}

/* A row of D elements from element i, as `chunks` float16s (zero past D). */
FC_INLINE void fc_dv_load_row(const int dt, const __global uchar *p, ulong i, int D, int chunks,
                              __private float16 *out)
{
    for (int c = 0; c < chunks; c++)
        out[c] = fc_rv_load16(dt, p, i + (ulong)(16 * c), min(16, D - 16 * c));
}

/* Private float16s of Q (and as many of O) one work-item holds: rows x chunks of 16 elements. */
#define FC_DV_SLOTS 256

/* The extra argument `heads`: kv heads per work-item (the host's grid counts (batch, group of
 * `heads` kv heads) pairs in grid.y and groups per batch in grid.z). Packed rows are head-major
 * within the group: row (hh, r) is row r of kv head kvh0 + hh, rows = heads x the tile's rows a
 * head. In BSHD the K (and V) rows of one key for consecutive kv heads are adjacent, so the
 * block's loop visits key by key and head by head within a key: one stream through memory,
 * where a work-item per kv head would jump H·D elements from key to key (a page or more at
 * once: the hardware prefetcher does not follow). */
__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void fc_attn_decode_vector(
    FC_ATTN_FORWARD_PARAMS, int heads)
{
    FC_ATTN_PLACE(pl, dims, grid, mask, FC_DV_ROWS, 0, tail)
    const int Sq = dims.x, D = dims.z, G = dims.w, dt = in_dtype;
    const int chunks = (D + 15) / 16, per_head = min(FC_DV_ROWS, pl.rows - pl.r0);
    const int nr = heads * per_head, kvh0 = pl.kvh * heads;
    float16 qv[FC_DV_SLOTS], ov[FC_DV_SLOTS]; /* [row][chunk] */
    float m[FC_DV_SLOTS / 4], l[FC_DV_SLOTS / 4], xs[FC_DV_SLOTS / 4][16];
    int lo[FC_DV_SLOTS / 4], hi[FC_DV_SLOTS / 4];

    /* Q rows (zero past the head dim), O = 0, each row's keys (they depend on the query only) */
    for (int r = 0; r < nr; r++) {
        const int hh = r / per_head, row = pl.r0 + r % per_head;
        const int2 gq = fc_attn_divmod(row, Sq), keys = FC_ATTN_ROW_KEYS(pl, row, Sq, mask);
        const ulong q_row = fc_attn_row(qs, pl.b, gq.y, (kvh0 + hh) * G + gq.x);
        fc_dv_load_row(dt, q, q_row, D, chunks, qv + r * chunks);
        for (int c = 0; c < chunks; c++)
            ov[r * chunks + c] = (float16)(0.0f);
        m[r] = -INFINITY;
        l[r] = 0.0f;
        lo[r] = keys.x;
        hi[r] = keys.y;
    }

    /* Blocks of 16 keys. Scores key by key, and within a key head by head (the order of memory
     * in BSHD), into xs[row][key]; then per row the 16 scores as one float16, so that the scale,
     * the mask, the block max and the exps are vector operations, and the running max, sum and O
     * are rescaled once per block; then O += p·V in the scores' order. */
    for (long j0 = pl.j_begin; j0 <= pl.j_end; j0 += 16) {
        const int nk = (int)min(16L, pl.j_end - j0 + 1);
        for (int t = 0; t < nk; t++)
            for (int hh = 0; hh < heads; hh++) {
                float16 kc[FC_RV_DMAX / 16];
                fc_dv_load_row(dt, k, fc_attn_row(ks, pl.b, (int)(j0 + t), kvh0 + hh), D, chunks, kc);
                for (int r = hh * per_head; r < (hh + 1) * per_head; r++) {
                    float16 dot = (float16)(0.0f);
                    for (int c = 0; c < chunks; c++)
                        dot = fma(qv[r * chunks + c], kc[c], dot);
                    xs[r][t] = fc_dv_hsum(dot);
                }
            }
        const int16 j = (int16)((int)j0) + (int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        for (int r = 0; r < nr; r++) {
            const int16 hidden = (j < (int16)(lo[r])) | (j > (int16)(hi[r])) | (j >= (int16)((int)j0 + nk));
            if (all(hidden)) { /* no key of the block for this row: nothing to add */
                for (int t = 0; t < 16; t++)
                    xs[r][t] = 0.0f;
                continue;
            }
            for (int t = nk; t < 16; t++)
                xs[r][t] = 0.0f; /* scores of keys past the block: masked below */
            float16 x = vload16(0, xs[r]);
            x = score.y != 0.0f ? score.y * tanh(score.x * x) : score.x * x;
            x = select(x, (float16)(-INFINITY), hidden);
            const float m_new = fmax(m[r], fc_dv_hmax(x)); /* finite: a key is visible */
            if (m_new > m[r]) {
                const float alpha = exp2(m[r] - m_new); /* 0 for the row's first keys */
                for (int c = 0; c < chunks; c++)
                    ov[r * chunks + c] *= alpha;
                l[r] *= alpha;
                m[r] = m_new;
            }
            const float16 p = exp2(x - (float16)(m_new));
            l[r] += fc_dv_hsum(p);
            vstore16(p, 0, xs[r]); /* now the probabilities */
        }
        for (int t = 0; t < nk; t++)
            for (int hh = 0; hh < heads; hh++) {
                float16 vc[FC_RV_DMAX / 16];
                fc_dv_load_row(dt, v, fc_attn_row(vs, pl.b, (int)(j0 + t), kvh0 + hh), D, chunks, vc);
                for (int r = hh * per_head; r < (hh + 1) * per_head; r++)
                    if (xs[r][t] != 0.0f)
                        for (int c = 0; c < chunks; c++)
                            ov[r * chunks + c] = fma((float16)(xs[r][t]), vc[c], ov[r * chunks + c]);
            }
    }

    /* ---- normalise once and store each row ---- */
    const int out_dt = mask.z;
    for (int r = 0; r < nr; r++) {
        const int hh = r / per_head, row = pl.r0 + r % per_head;
        const int2 gq = fc_attn_divmod(row, Sq);
        const int qi = gq.y, h = (kvh0 + hh) * G + gq.x;
        const ulong orow = fc_attn_row(os, pl.b, qi, h) + (ulong)((long)pl.split * split_stride.x);
        const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f; /* no visible key: zeros */
        float of[16];
        for (int c = 0; c < chunks; c++) {
            vstore16(ov[r * chunks + c] * inv, 0, of);
            for (int e = 0; e < 16 && 16 * c + e < D; e += 4)
                fc_attn_store4(out_dt, o, orow + (ulong)(16 * c + e), D - 16 * c - e, aligned & 8,
                               vload4(0, of + e));
        }
        if (mask.w)
            lse[fc_attn_row(ls, pl.b, h, qi) + (ulong)((long)pl.split * split_stride.y)] =
                l[r] > 0.0f ? (m[r] + log2(l[r])) * FC_ATTN_LN2 : -INFINITY;
    }
}

#endif
