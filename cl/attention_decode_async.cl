/* cl/attention_decode_async.cl — the key-parallel decode kernel (cl/attention_decode.cl) for f32
 * storage on NVIDIA GPUs of compute capability 8.0 and up, with K and V blocks streamed into a
 * ring of local memory by cp.async (cl/ptx_async.h) instead of through registers. Part of the
 * attention program; needs attention_common.cl and attention_decode.cl.
 *
 * Why: the register-fed kernel holds the next K block and this block's V in registers (64 a
 * work-item) and NVIDIA's compiler takes 246-255 registers for it, so two work-groups of four
 * warps share a compute unit; each then waits out its own chain of loads, barriers and FMAs,
 * about 3.2 us a 32-key block (bench/results/2026-11-27-session28.md). Here the copies need no
 * registers: 104 a work-item, four work-groups a compute unit, and the next block is in flight
 * for the whole of this block's math. H200, B1 Hq32 Hkv4 Sk65536 D128 f32: 0.0862 ms against
 * 0.1064 (bench/results/2026-11-27-session29.md).
 *
 * Per block of BK keys, the register-fed kernel's steps 2-4 (its fc_attn_keys_* helpers for the
 * scores with Q broadcast from local memory and the rows' online softmax with warp shuffles;
 * P·V here), with K [BK][DP4 + 1] and V [BK][DP4] read from the block's slot. SL slots: block
 * n + SL - 1 is issued at the top of block n, once the barrier there shows every work-item done
 * with the slot it reuses.
 *
 * Geometry (WG, RT, BK, SL) per padded head-dim class and form (8 query rows a work-group, or 4
 * for groups of at most 4 rows, which the host leaves out unless tuned in): the host
 * (src/opencl/attention_decode_async.c) checks the divisibility rules and local memory, and takes
 * these kernels only for f32 with k and v rows 16-byte aligned and a head dim that is a multiple
 * of 4. WG 0 leaves a kernel out. */

#if defined(FC_ATTN_ASYNC) && defined(FC_SG_NV_PTX) && !defined(FC_ATTN_GENERIC) &&             \
    (FC_ATTN_KINDS & FC_ATTN_KIND_DECODE_KEYS)

#ifndef FC_ATTN_A64
#define FC_ATTN_A64 (128, 8, 32, 2)
#endif
#ifndef FC_ATTN_A128
#define FC_ATTN_A128 (128, 8, 16, 2)
#endif
#ifndef FC_ATTN_A256
#define FC_ATTN_A256 (0, 8, 8, 2)
#endif
#ifndef FC_ATTN_A4_64
#define FC_ATTN_A4_64 (0, 4, 16, 2)
#endif
#ifndef FC_ATTN_A4_128
#define FC_ATTN_A4_128 (0, 4, 16, 2)
#endif
#define FC_ATTN_APICK0_(wg, rt, bk, sl) wg
#define FC_ATTN_APICK1_(wg, rt, bk, sl) rt
#define FC_ATTN_APICK2_(wg, rt, bk, sl) bk
#define FC_ATTN_APICK3_(wg, rt, bk, sl) sl
#define FC_ATTN_AWG_OF(t) FC_ATTN_APICK0_ t

/* Register bound of the accumulators: rows, over every tuple (the shared steps' bounds are
 * attention_decode.cl's FC_ATTN_KRT_BOUND and FC_ATTN_KKPI_BOUND). */
#define FC_ATTN_ART_F(t) (FC_ATTN_APICK0_ t > 0 ? FC_ATTN_APICK1_ t : 1)
#define FC_ATTN_ART_MAX                                                                        \
    FC_ATTN_MAX2(FC_ATTN_MAX2(FC_ATTN_ART_F(FC_ATTN_A64), FC_ATTN_ART_F(FC_ATTN_A128)),        \
                 FC_ATTN_MAX2(FC_ATTN_ART_F(FC_ATTN_A256),                                     \
                              FC_ATTN_MAX2(FC_ATTN_ART_F(FC_ATTN_A4_64),                       \
                                           FC_ATTN_ART_F(FC_ATTN_A4_128))))

/* Local memory in float4s (src/opencl/attention_decode_async.c computes the same): SL slots of
 * K [BK][DP4 + 1] and V [BK][DP4] (or, at the end, the key groups' accumulators), then the
 * register-fed kernel's tail (FC_ATTN_KTAIL4: Q, score partials, P, per-row and per-item
 * floats). */
#define FC_ATTN_ASLOT4(BK, DP) ((BK) * ((DP) / 4 + 1) + (BK) * ((DP) / 4))
#define FC_ATTN_ASMEM4(BK, DP, WG, RT, SL)                                                     \
    (FC_ATTN_MAX2((SL) * FC_ATTN_ASLOT4(BK, DP), (WG) * (RT)) + FC_ATTN_KTAIL4(BK, DP, WG, RT))

/* One work-group: RT query rows of one (batch, kv head) against the keys of one split. Same
 * arguments, grid order and outputs as fc_attn_decode_keys. */
FC_INLINE void fc_attn_decode_async(
    __global const uchar *q, __global const uchar *k, __global const uchar *v,
    __global uchar *o, __global float *lse, long4 qs, long4 ks, long4 vs, long4 os, long4 ls,
    int4 dims, int4 grid, int4 mask, float2 score, long2 split_stride, int aligned,
    int tail, __local float4 *smem, const int DP, const int WG, const int RT, const int BK,
    const int SL)
{
    const int DT = FC_ATTN_F32;
    const int DP4 = DP / 4, KS4 = DP4 + 1, SLOT4 = FC_ATTN_ASLOT4(BK, DP);
    const int KH = WG / BK, DH4 = DP4 / KH;          /* scores: parts per key, their float4s */
    const int SC = WG / RT, KPI = BK / SC;           /* softmax: team size, keys per item */
    const int VL = DP4, KG = WG / VL, KPG = BK / KG; /* P·V: lanes per key, key groups */
    const int CKP = WG / DP4, CPK = BK / CKP;        /* copies: keys per pass, passes */
    const int Sq = dims.x, D = dims.z, G = dims.w, out_dt = mask.z, has_lse = mask.w;
    const int lid = (int)get_local_id(0);
    const int kk = lid % BK, kh = lid / BK;
    const int sr = lid / SC, sc = lid % SC;
    const int vl = lid % VL, kg = lid / VL;

    __local float4 *ring = smem; /* also the accumulators at the end */
    FC_ATTN_KEYS_OPENING(smem, FC_ATTN_MAX2(SL * SLOT4, WG * RT))
    float4 acc[FC_ATTN_ART_MAX];
    FC_ATTN_UNROLL for (int r = 0; r < RT; r++) acc[r] = (float4)(0.0f);

    /* Copies: work-item lid moves float4 column cd4 of keys ck0, ck0 + CKP, ... of K and of V.
     * Its addresses advance by constants: per-copy offsets kept across the loop would cost
     * the registers this kernel exists to save. Columns past the head dim and keys past the
     * split are zero-filled. */
    const int cd4 = lid % DP4, ck0 = lid / DP4;
    const uint cbytes = (uint)(4 * max(0, min(4, D - 4 * cd4)));
    const __global uchar *k_col =
        k + 4 * (fc_attn_row(ks, b, 0, kvh) + (ulong)((long)ck0 * ks.y) + (ulong)(4 * cd4));
    const __global uchar *v_col =
        v + 4 * (fc_attn_row(vs, b, 0, kvh) + (ulong)((long)ck0 * vs.y) + (ulong)(4 * cd4));
    const long ksb = 4 * ks.y, vsb = 4 * vs.y; /* bytes per key */
    const uint k_dst = fc_async_smem(ring) + 16u * (uint)(ck0 * KS4 + cd4);
    const uint v_dst = fc_async_smem(ring) + 16u * (uint)(BK * KS4 + ck0 * DP4 + cd4);
#define FC_ATTN_ASYNC_ISSUE(J0, S)                                                              \
    {                                                                                          \
        const __global uchar *kp = k_col + (J0) * ksb, *vp = v_col + (J0) * vsb;               \
        const int jc = (int)(J0) + ck0;                                                        \
        FC_ATTN_UNROLL for (int n = 0; n < CPK; n++) {                                         \
            const uint bytes = jc + n * CKP < ke ? cbytes : 0u;                                \
            fc_async_cp16(k_dst + 16u * (uint)((S) * SLOT4 + n * CKP * KS4),                   \
                          bytes ? kp + n * CKP * ksb : k_col, bytes);                          \
            fc_async_cp16(v_dst + 16u * (uint)((S) * SLOT4 + n * CKP * DP4),                   \
                          bytes ? vp + n * CKP * vsb : v_col, bytes);                          \
        }                                                                                      \
    }

    /* The first SL - 1 blocks in flight (a group each, empty past the last block, so that the
     * wait below always counts SL - 2 younger groups) while Q arrives. */
    long j0l = j_begin / BK * BK;
    FC_ATTN_UNROLL for (int s = 0; s < SL - 1; s++) {
        if (j0l + s * BK <= j_stop)
            FC_ATTN_ASYNC_ISSUE(j0l + s * BK, s)
        fc_async_commit();
    }

    FC_ATTN_KEYS_LOAD_Q(Ql, DT, WG, RT, DP4) /* (uses lid, r0, rows, Sq, qs, b, kvh, G, D) */

    int slot = 0;
    for (; j0l <= j_stop; j0l += BK) {
        const int j0 = (int)j0l;
        /* 1. this block's copies landed (each work-item's own, then everyone's), and every
         *    work-item is done with the previous block: its slot takes block n + SL - 1 */
        fc_async_wait(SL - 2);
        barrier(CLK_LOCAL_MEM_FENCE);
        {
            const long jn = j0l + (SL - 1) * BK;
            const int sn = slot == 0 ? SL - 1 : slot - 1;
            if (jn <= j_stop)
                FC_ATTN_ASYNC_ISSUE(jn, sn)
            fc_async_commit();
        }
        __local const float4 *Kl = ring + slot * SLOT4;
        __local const float4 *Vl = Kl + BK * KS4;

        /* 2. partial scores of key kk over this item's part of the head dim */
        fc_attn_keys_scores(Kl, Ql, Sl, kk, kh, rt_active, RT, BK, DP4, DH4);
        barrier(CLK_LOCAL_MEM_FENCE);

        /* 3. online softmax of row sr over this item's keys sc, sc + SC, ... (shuffles) */
        fc_attn_keys_softmax(Sl, Pl, Al, red, &m, &l_part, j0, row_lo, row_hi, score, lid, sr,
                             sc, RT, BK, KH, SC, KPI, 1);
        barrier(CLK_LOCAL_MEM_FENCE);

        /* 4. O = O·alpha + P·V over this group's keys kg, kg + KG, ... */
        FC_ATTN_UNROLL for (int r = 0; r < RT; r++) acc[r] *= Al[r];
        FC_ATTN_UNROLL for (int n = 0; n < KPG; n++) {
            const int key = kg + KG * n;
            const float4 vf = Vl[key * DP4 + vl];
            FC_ATTN_UNROLL for (int r4 = 0; r4 < RT / 4; r4++) {
                const float4 p4 = ((__local float4 *)Pl)[key * (RT / 4) + r4];
                FC_ATTN_UNROLL for (int e = 0; e < 4; e++) {
                    const int r = 4 * r4 + e;
                    const float p = e == 0 ? p4.x : e == 1 ? p4.y : e == 2 ? p4.z : p4.w;
                    if (r < rt_active)
                        acc[r] = fma((float4)(p), vf, acc[r]);
                }
            }
        }
        slot = slot == SL - 1 ? 0 : slot + 1;
    }
#undef FC_ATTN_ASYNC_ISSUE

    /* ---- add the key groups' accumulators and the row sums, normalise once, store ---- */
    fc_async_wait(0); /* (only empty groups can be pending) */
    barrier(CLK_LOCAL_MEM_FENCE); /* the ring, P and red are free */
    FC_ATTN_UNROLL for (int r = 0; r < RT; r++) ring[(kg * RT + r) * DP4 + vl] = acc[r];
    red[lid] = l_part;
    if (sc == 0)
        Ml[sr] = m;
    barrier(CLK_LOCAL_MEM_FENCE);
    fc_attn_keys_store(ring, red, Ml, o, lse, os, ls, split_stride, split, b, kvh, G, Sq, D, r0,
                       rows, out_dt, has_lse, aligned, lid, WG, RT, DP4, KG, SC);
}

#define FC_ATTN_DECODE_ASYNC_(name, DP, WG, RT, BK, SL)                                         \
    __kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void name(FC_ATTN_FORWARD_PARAMS) \
    {                                                                                          \
        __local float4 smem[FC_ATTN_ASMEM4(BK, DP, WG, RT, SL)];                               \
        (void)in_dtype;                                                                        \
        fc_attn_decode_async(FC_ATTN_FORWARD_ARGS, smem, DP, WG, RT, BK, SL);                   \
    }
#define FC_ATTN_DECODE_ASYNC(name, DP, t)                                                       \
    FC_ATTN_DECODE_ASYNC_(name, DP, FC_ATTN_APICK0_ t, FC_ATTN_APICK1_ t, FC_ATTN_APICK2_ t,    \
                         FC_ATTN_APICK3_ t)

/* form: async (eight rows) or async4 (four); f32 only */
#if FC_ATTN_AWG_OF(FC_ATTN_A64) > 0
FC_WITH_F32(FC_ATTN_DECODE_ASYNC(fc_attn_decode_async_d64_f32, 64, FC_ATTN_A64))
#endif
#if FC_ATTN_AWG_OF(FC_ATTN_A128) > 0
FC_WITH_F32(FC_ATTN_DECODE_ASYNC(fc_attn_decode_async_d128_f32, 128, FC_ATTN_A128))
#endif
#if FC_ATTN_AWG_OF(FC_ATTN_A256) > 0
FC_WITH_F32(FC_ATTN_DECODE_ASYNC(fc_attn_decode_async_d256_f32, 256, FC_ATTN_A256))
#endif
#if FC_ATTN_AWG_OF(FC_ATTN_A4_64) > 0
FC_WITH_F32(FC_ATTN_DECODE_ASYNC(fc_attn_decode_async4_d64_f32, 64, FC_ATTN_A4_64))
#endif
#if FC_ATTN_AWG_OF(FC_ATTN_A4_128) > 0
FC_WITH_F32(FC_ATTN_DECODE_ASYNC(fc_attn_decode_async4_d128_f32, 128, FC_ATTN_A4_128))
#endif

#endif
