/* cl/attention_merge.cl — merges of partial results: the split-KV merge (f32 scratch) and
 * flashcl_attention_merge's kernel. Part of the attention program; needs attention_common.cl. */

/* Combines the split-KV partials of one row (one work-group per row, rows ordered (b, h, i)):
 * parts are f32 in scratch, o at part_o[at.z + split·at.x + row·D], lse at
 * part_lse[at.w + split·at.y + row]. lse = M + log Σ exp(lse_s - M) and
 * o = Σ exp(lse_s - lse)·o_s.
 * The work-items split both the head dim (float4 columns) and the splits. Each reads the lse and
 * o of its splits in one round of loads (FC_ATTN_MERGE_ILP splits at a time) and keeps a running
 * (m, sum, acc) over them; the split groups are then combined in a fixed order (deterministic).
 * One round of loads instead of three dependent ones (the lse max, the lse sum, then o) took
 * 1.2-1.7 us off a decode call on an H200 and an H100 (bench/results/2026-11-27-session26.md).
 * Columns beyond the work-group (a 256-wide head on fewer than 64 items) take several rounds.
 * dims: Sq, Hq, D, nsplit; out: o dtype, 1 when lse is written.
 * Work-group: FC_ATTN_SPLIT_WG items on GPUs; with FC_ATTN_GENERIC (CPUs) any power of two up
 * to it, as the host finds the kernel allows (Rusticl on llvmpipe reports 32 for every kernel). */
#ifndef FC_ATTN_SPLIT_WG
#define FC_ATTN_SPLIT_WG 256
#endif
#define FC_ATTN_MERGE_ILP 8 /* a power of two */
#if defined(FC_ATTN_GENERIC)
#define FC_ATTN_SPLIT_ATTR
#define FC_ATTN_SPLIT_N ((int)get_local_size(0))
#else
#define FC_ATTN_SPLIT_ATTR __attribute__((reqd_work_group_size(FC_ATTN_SPLIT_WG, 1, 1)))
#define FC_ATTN_SPLIT_N FC_ATTN_SPLIT_WG
#endif
#if FC_ATTN_KINDS & FC_ATTN_KIND_MERGE
__kernel FC_ATTN_SPLIT_ATTR void fc_attn_split_merge(
    __global const float *part_o, __global const float *part_lse, long4 at, int4 dims,
    __global uchar *o, long4 os, __global float *lse, long4 ls, int2 out)
{
    __local float gm[FC_ATTN_SPLIT_WG];
    __local float gs[FC_ATTN_SPLIT_WG];
    __local float4 part[FC_ATTN_SPLIT_WG];
    const int N = FC_ATTN_SPLIT_N;
    const int Sq = dims.x, H = dims.y, D = dims.z, nsplit = dims.w;
    const int lid = (int)get_local_id(0);
    const ulong row = get_group_id(0);
    const ulong2 bh_qi = fc_attn_divmod64(row, (ulong)Sq);
    const ulong2 b_h = fc_attn_divmod64(bh_qi.x, (ulong)H);
    const int qi = (int)bh_qi.y, h = (int)b_h.y, b = (int)b_h.x;
    const int d4n = (D + 3) / 4;
    int cols = 1;
    while (cols < d4n)
        cols <<= 1;
    const int cw = min(cols, N), groups = N / cw, grp = lid / cw;
    const long row_at = at.z + (long)row * D, split_at = at.x;
    const ulong orow = fc_attn_row(os, b, qi, h);
    float M = -INFINITY, S = 0.0f;
    for (int cb = 0; cb < cols; cb += cw) {
        const int c4 = cb + lid % cw;
        float m = -INFINITY, sum = 0.0f;
        float4 acc = (float4)(0.0f);
        for (int s0 = grp; s0 < nsplit; s0 += FC_ATTN_MERGE_ILP * groups) {
            float lp[FC_ATTN_MERGE_ILP];
            float4 ov[FC_ATTN_MERGE_ILP];
            FC_ATTN_UNROLL for (int u = 0; u < FC_ATTN_MERGE_ILP; u++) {
                const int s = s0 + u * groups;
                const long base = row_at + (long)s * split_at + 4 * c4;
                lp[u] = s < nsplit ? part_lse[at.w + (long)s * at.y + (long)row] : -INFINITY;
                ov[u] = s < nsplit && c4 < d4n
                            ? (4 * c4 + 4 <= D
                                   ? vload4(0, part_o + base)
                                   : (float4)(part_o[base],
                                              4 * c4 + 1 < D ? part_o[base + 1] : 0.0f,
                                              4 * c4 + 2 < D ? part_o[base + 2] : 0.0f, 0.0f))
                            : (float4)(0.0f);
            }
            float mx = m;
            FC_ATTN_UNROLL for (int u = 0; u < FC_ATTN_MERGE_ILP; u++) mx = fmax(mx, lp[u]);
            if (mx == -INFINITY) continue; /* nothing yet: no factor to take */
            const float f = exp(m - mx);   /* m = -inf: 0 */
            sum *= f;
            acc *= f;
            FC_ATTN_UNROLL for (int u = 0; u < FC_ATTN_MERGE_ILP; u++) {
                const float e = exp(lp[u] - mx);
                sum += e;
                acc += e * ov[u];
            }
            m = mx;
        }
        gm[lid] = m;
        gs[lid] = sum;
        part[lid] = acc;
        barrier(CLK_LOCAL_MEM_FENCE);
        if (grp == 0) {
            M = m;
            for (int g = 1; g < groups; g++) M = fmax(M, gm[g * cw + lid]);
            S = 0.0f;
            float4 a = (float4)(0.0f);
            if (M != -INFINITY)
                for (int g = 0; g < groups; g++) {
                    const float f = exp(gm[g * cw + lid] - M);
                    S += f * gs[g * cw + lid];
                    a += f * part[g * cw + lid];
                }
            if (c4 < d4n)
                fc_attn_store4(out.x, o, orow + 4 * c4, D - 4 * c4, 0,
                               a * (S > 0.0f ? 1.0f / S : 0.0f));
        }
        if (cb + cw < cols) /* the next round reuses the arrays (uniform) */
            barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (out.y && lid == 0)
        lse[fc_attn_row(ls, b, h, qi)] = S > 0.0f ? M + log(S) : -INFINITY;
}

/* Merges up to four partial results (o_k with strides os_k, lse_k with ls_k, dtype dt.k) of the
 * same rows into o / lse; the host chains launches for more parts, passing the running result
 * as part 0 of the next. A running result is f32 o not yet normalised, o_acc = sum_p
 * exp(lse_p - m) o_p, with the pair (m, s = sum_p exp(lse_p - m)) where an lse would be: m is
 * always one of the parts' own lse, so a chain of launches rounds only o_acc and s once per
 * launch, never an exponent (a running lse re-rounded per launch put 2.6e-5 relative error on
 * 300 parts). dims: Sq, H, D, number of parts; out: o dtype, lse written, part 0 is a running
 * result, write a running result. */
/* Any work-group size (no local memory, no barrier): some implementations limit a kernel below
 * the host's usual 64 (Rusticl on llvmpipe reports 32), and the host launches what it allows. */
__kernel void fc_attn_merge(
    __global const uchar *o0, long4 os0, __global const float *l0, long4 ls0,
    __global const uchar *o1, long4 os1, __global const float *l1, long4 ls1,
    __global const uchar *o2, long4 os2, __global const float *l2, long4 ls2,
    __global const uchar *o3, long4 os3, __global const float *l3, long4 ls3, int4 dt,
    int4 dims, __global uchar *o, long4 os, __global float *lse, long4 ls, int4 out)
{
    const int Sq = dims.x, H = dims.y, D = dims.z, n = dims.w;
    const ulong row = get_group_id(0);
    const ulong2 bh_qi = fc_attn_divmod64(row, (ulong)Sq);
    const ulong2 b_h = fc_attn_divmod64(bh_qi.x, (ulong)H);
    const int qi = (int)bh_qi.y, h = (int)b_h.y, b = (int)b_h.x;
    float lp[4], w[4];
    const ulong l0_at = fc_attn_row(ls0, b, h, qi);
    lp[0] = l0[l0_at];                         /* a running result: its m */
    const float s0 = out.z ? l0[l0_at + 1] : 1.0f; /* ... and its s */
    lp[1] = n > 1 ? l1[fc_attn_row(ls1, b, h, qi)] : -INFINITY;
    lp[2] = n > 2 ? l2[fc_attn_row(ls2, b, h, qi)] : -INFINITY;
    lp[3] = n > 3 ? l3[fc_attn_row(ls3, b, h, qi)] : -INFINITY;
    const float mx = fmax(fmax(lp[0], lp[1]), fmax(lp[2], lp[3]));
    float sum = 0.0f;
    for (int p = 0; p < 4; p++) {
        w[p] = mx == -INFINITY || p >= n ? 0.0f : exp(lp[p] - mx);
        sum += p == 0 ? s0 * w[p] : w[p];
    }
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    const ulong r0 = fc_attn_row(os0, b, qi, h), r1 = fc_attn_row(os1, b, qi, h);
    const ulong r2 = fc_attn_row(os2, b, qi, h), r3 = fc_attn_row(os3, b, qi, h);
    const ulong orow = fc_attn_row(os, b, qi, h);
    for (int d = (int)get_local_id(0); d < D; d += (int)get_local_size(0)) {
        /* parts of zero weight are not read: their o may be anything (e.g. never written) */
        float a = w[0] > 0.0f ? w[0] * fc_attn_load1(dt.x, o0, r0 + d) : 0.0f;
        if (w[1] > 0.0f) a = fma(w[1], fc_attn_load1(dt.y, o1, r1 + d), a);
        if (w[2] > 0.0f) a = fma(w[2], fc_attn_load1(dt.z, o2, r2 + d), a);
        if (w[3] > 0.0f) a = fma(w[3], fc_attn_load1(dt.w, o3, r3 + d), a);
        fc_attn_store1(out.x, o, orow + d, out.w ? a : a * inv);
    }
    if (out.y && get_local_id(0) == 0) {
        const ulong at = fc_attn_row(ls, b, h, qi);
        if (out.w) {
            lse[at] = mx;
            lse[at + 1] = sum;
        } else {
            lse[at] = sum > 0.0f ? mx + log(sum) : -INFINITY;
        }
    }
}
#endif /* FC_ATTN_KINDS & FC_ATTN_KIND_MERGE */
