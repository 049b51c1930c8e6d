/* cl/attention.cl — fused attention forward (flash attention) and the merge of partial results.
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
 * (src/opencl/attention.c) and passes them with -D; a tuple whose C is 0 disables the kernel.
 * Two families: prefill (large query tiles) and decode (small tiles for G·Sq of a few rows,
 * with split-KV). Kernels exist per family, dtype and padded head dim DP (64, 128, 256): the
 * head dim D itself is a run-time argument (chunks and stores are guarded), DP sizes the O
 * registers. With FC_ATTN_GENERIC (CPUs) one kernel per family takes dtype and DP at run time. */
#ifndef FLASHCL_EMBEDDED
#include "portability.h"
#include "dtype.h"
#endif

/* ---- tunables: (C,R,TM,TN,DC,VC) per kernel family --------------------------------------
 * Parenthesised tuples (OpenCL C 1.2 front ends such as NVIDIA's have no variadic macros):
 * FC_ATTN_PICK2_ FC_ATTN_P128 expands to the third field. */
#ifndef FC_ATTN_P64
#define FC_ATTN_P64 (16, 16, 8, 4, 32, 16)
#endif
#ifndef FC_ATTN_P128
#define FC_ATTN_P128 (16, 16, 8, 4, 32, 16)
#endif
#ifndef FC_ATTN_P256
#define FC_ATTN_P256 (16, 16, 4, 4, 32, 8)
#endif
#ifndef FC_ATTN_D64
#define FC_ATTN_D64 (16, 8, 1, 2, 64, 32)
#endif
#ifndef FC_ATTN_D128
#define FC_ATTN_D128 (32, 4, 2, 1, 128, 32)
#endif
#ifndef FC_ATTN_D256
#define FC_ATTN_D256 (32, 4, 2, 1, 128, 16)
#endif
/* Work-group sizes of the merge kernels (powers of two) and the most splits one merges
 * (FC_ATTN_SPLIT_WG is with the split merge below). */
#ifndef FC_ATTN_MERGE_WG
#define FC_ATTN_MERGE_WG 64
#endif
#ifndef FC_ATTN_MAX_SPLITS
#define FC_ATTN_MAX_SPLITS 256
#endif

#define FC_ATTN_PICK0_(c, r, tm, tn, dc, vc) c
#define FC_ATTN_PICK1_(c, r, tm, tn, dc, vc) r
#define FC_ATTN_PICK2_(c, r, tm, tn, dc, vc) tm
#define FC_ATTN_PICK3_(c, r, tm, tn, dc, vc) tn
#define FC_ATTN_PICK4_(c, r, tm, tn, dc, vc) dc
#define FC_ATTN_PICK5_(c, r, tm, tn, dc, vc) vc
#define FC_ATTN_C_OF(t) FC_ATTN_PICK0_ t
#define FC_ATTN_R_OF(t) FC_ATTN_PICK1_ t
#define FC_ATTN_TM_OF(t) FC_ATTN_PICK2_ t
#define FC_ATTN_TN_OF(t) FC_ATTN_PICK3_ t
#define FC_ATTN_DC_OF(t) FC_ATTN_PICK4_ t
#define FC_ATTN_VC_OF(t) FC_ATTN_PICK5_ t
#define FC_ATTN_MAX2(a, b) ((a) > (b) ? (a) : (b))
#define FC_ATTN_MAX6(a, b, c, d, e, f) \
    FC_ATTN_MAX2(FC_ATTN_MAX2(FC_ATTN_MAX2(a, b), FC_ATTN_MAX2(c, d)), FC_ATTN_MAX2(e, f))
/* O dims per work-item in float4s: DP / (4·C) (a disabled tuple counts 0). */
#define FC_ATTN_TD4_OF(dp, t)                                                                  \
    (FC_ATTN_C_OF(t) > 0 ? (dp) / (4 * FC_ATTN_MAX2(FC_ATTN_C_OF(t), 1)) : 0)

/* Register arrays are sized for the largest tuple of this build. Every index into them is a
 * compile-time constant once the body is inlined with literal geometry and its loops unrolled,
 * so they live in registers and the unused tail vanishes. */
#define FC_ATTN_MAX_OVER_TUPLES(F)                                                            \
    FC_ATTN_MAX2(1, FC_ATTN_MAX6(F(64, FC_ATTN_P64), F(128, FC_ATTN_P128),                     \
                                 F(256, FC_ATTN_P256), F(64, FC_ATTN_D64),                     \
                                 F(128, FC_ATTN_D128), F(256, FC_ATTN_D256)))
#define FC_ATTN_TM_F(dp, t) FC_ATTN_TM_OF(t)
#define FC_ATTN_TN_F(dp, t) FC_ATTN_TN_OF(t)
#define FC_ATTN_TM_MAX FC_ATTN_MAX_OVER_TUPLES(FC_ATTN_TM_F)
#define FC_ATTN_TN_MAX FC_ATTN_MAX_OVER_TUPLES(FC_ATTN_TN_F)
#define FC_ATTN_TD4_MAX FC_ATTN_MAX_OVER_TUPLES(FC_ATTN_TD4_OF)

#ifndef FC_INLINE
#define FC_INLINE static inline __attribute__((always_inline))
#endif

/* Row statistics are reduced over the C work-items of a row with warp shuffles where the
 * lanes are known to be consecutive and 32 wide (NVIDIA inline PTX, which its OpenCL driver
 * accepts); elsewhere through local memory. */
#if defined(FC_SG_NV_PTX)
#define FC_ATTN_SHUFFLE 1
FC_INLINE float fc_attn_shuffle_xor(float v, uint mask)
{
    float r;
    __asm__ volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;"
                     : "=f"(r)
                     : "f"(v), "r"(mask));
    return r;
}
#else
#define FC_ATTN_SHUFFLE 0
#endif

/* Full unrolling turns the register arrays into registers on GPUs; on CPUs (FC_ATTN_GENERIC)
 * it only multiplies the code PoCL has to compile. */
#if defined(FC_ATTN_GENERIC)
#define FC_ATTN_UNROLL
#else
#define FC_ATTN_UNROLL _Pragma("unroll")
#endif

#define FC_ATTN_LN2 0.6931471805599453f

/* ---- storage types -----------------------------------------------------------------------
 * Codes as flashcl_dtype: 0 f32, 1 f16, 2 bf16. f16 moves through vload_half/vstore_half
 * (core OpenCL, no cl_khr_fp16), bf16 is the top half of an f32. Element indices are 64-bit.
 * The four-element forms take `n`, how many of the four exist (the head dim need not be a
 * multiple of 4), and `aligned`, which the host sets per tensor when every row starts on a
 * 4-element boundary (offset and strides multiples of 4): then one vector access moves them;
 * otherwise vload4/vload_half4 do with element alignment only. */
#define FC_ATTN_F32 0
#define FC_ATTN_F16 1
#define FC_ATTN_BF16 2

FC_INLINE float fc_attn_load1(const int dt, const __global uchar *p, ulong i)
{
    if (dt == FC_ATTN_F32)
        return ((const __global float *)p)[i];
    if (dt == FC_ATTN_F16)
        return vload_half(0, (const __global half *)p + i);
    return as_float((uint)((const __global ushort *)p)[i] << 16);
}

/* Round to nearest even on the 16 dropped bits; a NaN stays a (quiet) NaN. */
FC_INLINE ushort fc_attn_to_bf16(float f)
{
    const uint u = as_uint(f);
    return isnan(f) ? (ushort)((u >> 16) | 0x40u)
                    : (ushort)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

FC_INLINE void fc_attn_store1(const int dt, __global uchar *p, ulong i, float v)
{
    if (dt == FC_ATTN_F32)
        ((__global float *)p)[i] = v;
    else if (dt == FC_ATTN_F16)
        vstore_half_rte(v, 0, (__global half *)p + i);
    else
        ((__global ushort *)p)[i] = fc_attn_to_bf16(v);
}

/* f16 bits -> f32, exact for every value, with integer arithmetic: normals re-biased (exponent
 * + 112), subnormals as m·2^-24 (normal in f32, so no denormal flush can touch them), inf/NaN
 * rebuilt. vloada_half4 compiles to four 16-bit loads on some drivers (NVIDIA); one 8-byte
 * load plus this keeps the loads vectorised. `u` holds one f16 per component. */
FC_INLINE float4 fc_attn_half4_to_float4(uint4 u)
{
    const uint4 a = u & 0x7fffu;
    const float4 normal = as_float4((a << 13) + (uint4)(112u << 23));
    const float4 sub = convert_float4(a) * 0x1p-24f;
    const float4 special = as_float4((uint4)(0x7f800000u) | (a << 13)); /* inf, NaN */
    float4 f = select(normal, sub, a < (uint4)(0x400u));
    f = select(f, special, a >= (uint4)(0x7c00u));
    return as_float4(as_uint4(f) | ((u & 0x8000u) << 16));
}

/* Four consecutive elements as raw storage bits, converted later by fc_attn_raw_to_float4: the
 * pipelined loads then sit in registers untouched until they are committed to local memory.
 * Any instruction on a loaded value (even a widening, which some drivers emit as inline
 * assembly) would make the work-item wait for the load right there, before the compute that
 * was meant to hide it. f32: four words; f16/bf16: four halves packed in .xy (a bit-cast, no
 * conversion). Missing elements (n < 4) are 0. */
FC_INLINE uint4 fc_attn_load4_raw(const int dt, const __global uchar *p, ulong i, int n,
                                  int aligned)
{
    /* The aligned forms index a vector pointer with i / 4: written as the same address as the
     * unaligned form, a compiler may merge both paths into scalar loads. */
    if (dt == FC_ATTN_F32) {
        if (n >= 4)
            return aligned ? ((const __global uint4 *)p)[i >> 2]
                           : vload4(0, (const __global uint *)p + i);
        const __global uint *w = (const __global uint *)p + i;
        return (uint4)(n > 0 ? w[0] : 0u, n > 1 ? w[1] : 0u, n > 2 ? w[2] : 0u, 0u);
    }
    if (n >= 4) {
        const uint2 h = aligned ? ((const __global uint2 *)p)[i >> 2]
                                : as_uint2(vload4(0, (const __global ushort *)p + i));
        return (uint4)(h, 0u, 0u);
    }
    const __global ushort *h = (const __global ushort *)p + i;
    return (uint4)((n > 0 ? (uint)h[0] : 0u) | (n > 1 ? (uint)h[1] << 16 : 0u),
                   n > 2 ? (uint)h[2] : 0u, 0u, 0u);
}

FC_INLINE float4 fc_attn_raw_to_float4(const int dt, uint4 raw)
{
    if (dt == FC_ATTN_F32)
        return as_float4(raw);
    const uint4 u = (uint4)(raw.x & 0xffffu, raw.x >> 16, raw.y & 0xffffu, raw.y >> 16);
    if (dt == FC_ATTN_F16)
        return fc_attn_half4_to_float4(u);
    return as_float4(u << 16);
}

FC_INLINE void fc_attn_store4(const int dt, __global uchar *p, ulong i, int n, int aligned,
                              float4 v)
{
    if (n >= 4 && dt == FC_ATTN_F32) {
        if (aligned)
            ((__global float4 *)p)[i >> 2] = v;
        else
            vstore4(v, 0, (__global float *)p + i);
    } else if (n >= 4 && dt == FC_ATTN_F16) {
        if (aligned)
            vstorea_half4_rte(v, i >> 2, (__global half *)p);
        else
            vstore_half4_rte(v, 0, (__global half *)p + i);
    } else if (n >= 4) {
        const ushort4 u = (ushort4)(fc_attn_to_bf16(v.x), fc_attn_to_bf16(v.y),
                                    fc_attn_to_bf16(v.z), fc_attn_to_bf16(v.w));
        if (aligned)
            ((__global ushort4 *)p)[i >> 2] = u;
        else
            vstore4(u, 0, (__global ushort *)p + i);
    } else { /* the last 1..3 elements of a row */
        if (n > 0) fc_attn_store1(dt, p, i, v.x);
        if (n > 1) fc_attn_store1(dt, p, i + 1, v.y);
        if (n > 2) fc_attn_store1(dt, p, i + 2, v.z);
    }
}

/* Element offset of row (batch b, position s, head h) of a tensor with strides st
 * (x = batch, y = seq, z = head, w = the view's own offset). 64-bit: products pass 2^31. */
FC_INLINE ulong fc_attn_row(long4 st, int b, int s, int h)
{
    return (ulong)(st.w + (long)b * st.x + (long)s * st.y + (long)h * st.z);
}

/* Quotient and remainder of x >= 0 by y > 0. */
FC_INLINE int2 fc_attn_divmod(int x, int y)
{
    const int q = x / y;
    return (int2)(q, x - q * y);
}
FC_INLINE ulong2 fc_attn_divmod64(ulong x, ulong y)
{
    const ulong q = x / y;
    return (ulong2)(q, x - q * y);
}

/* Visible keys of query i, within the split [kb, ke): [lo, hi] (empty when hi < lo). Bottom-
 * right alignment: query i sits at key diag = i + Sk - Sq. wl / wr: window bounds, -1 =
 * unbounded (causal arrives as wr = 0). Computed in 64 bits: windows may be near INT_MAX. */
FC_INLINE long fc_attn_lo(long i, int off, int wl, int kb)
{
    return wl >= 0 ? max(i + off - wl, (long)kb) : (long)kb;
}
FC_INLINE long fc_attn_hi(long i, int off, int wr, int ke)
{
    return wr >= 0 ? min(i + off + wr, (long)ke - 1) : (long)ke - 1;
}

/* Row reductions over the C consecutive work-items that share a row, for all TM rows of a
 * work-item at once (so that the local-memory fallback costs one barrier, not one per row).
 * `red` holds TM·WG floats. Sums run in a fixed order: results are deterministic. */
#define FC_ATTN_OP_MAX(a, b) fmax((a), (b))
#define FC_ATTN_OP_SUM(a, b) ((a) + (b))
#if FC_ATTN_SHUFFLE
#define FC_ATTN_ROW_REDUCE(OP, v, TM, C, WG, red, lid)                                         \
    FC_ATTN_UNROLL for (int i_ = 0; i_ < (TM); i_++)                                          \
        for (int o_ = (C) >> 1; o_ > 0; o_ >>= 1)                                             \
            v[i_] = OP(v[i_], fc_attn_shuffle_xor(v[i_], (uint)o_));
#else
#define FC_ATTN_ROW_REDUCE(OP, v, TM, C, WG, red, lid)                                         \
    {                                                                                          \
        FC_ATTN_UNROLL for (int i_ = 0; i_ < (TM); i_++) red[i_ * (WG) + (lid)] = v[i_];     \
        barrier(CLK_LOCAL_MEM_FENCE);                                                          \
        const int base_ = (lid) - (lid) % (C);                                                 \
        FC_ATTN_UNROLL for (int i_ = 0; i_ < (TM); i_++) {                                    \
            v[i_] = red[i_ * (WG) + base_];                                                    \
            for (int c_ = 1; c_ < (C); c_++)                                                   \
                v[i_] = OP(v[i_], red[i_ * (WG) + base_ + c_]);                                \
        }                                                                                      \
    }
#endif

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

/* The forward kernels' arguments (same for every geometry and dtype).
 *   q, k, v, o     tensors; o is the user's output, or f32 scratch for split-KV partials
 *   lse            f32 [B, Hq, Sq] (may be NULL when mask.w == 0)
 *   qs..ls         element strides (batch, seq, head) and view offset (w), lse: (b, h, seq)
 *   dims           Sq, Sk, D, G = Hq / Hkv
 *   grid           row tiles per kv head, B·Hkv, Hkv, keys per split
 *   mask           window_left, window_right (causal folded in: -1 = unbounded), out dtype,
 *                  1 when lse is written
 *   score          x, y: scores become y·tanh(x·s) when y != 0 (softcap), else x·s; both
 *                  carry log2 e so that the softmax runs on exp2
 *   split_stride   element distance between splits' partials in o and lse
 *   aligned        bit 0 q, 1 k, 2 v, 3 o: rows start 4-element aligned (vector accesses)
 *   in_dtype       dtype of q, k, v (read by the generic kernels; the others have it built in) */
#define FC_ATTN_FORWARD_PARAMS                                                                 \
    __global const uchar *q, __global const uchar *k, __global const uchar *v,                \
        __global uchar *o, __global float *lse, long4 qs, long4 ks, long4 vs, long4 os,        \
        long4 ls, int4 dims, int4 grid, int4 mask, float2 score, long2 split_stride,           \
        int aligned, int in_dtype
#define FC_ATTN_FORWARD_ARGS                                                                   \
    q, k, v, o, lse, qs, ks, vs, os, ls, dims, grid, mask, score, split_stride, aligned

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
    __local float4 *smem, const int DT, const int DP, const int QRES, const int ROWSKIP,
    const int C, const int R, const int TM, const int TN, const int DC, const int VC)
{
    const int WG = R * C, BM = R * TM, BN = C * TN, TD4 = DP / (4 * C);
    const int DC4 = DC / 4, KS4 = FC_ATTN_KS4(DC), PS4 = FC_ATTN_PS4(C, TN), DP4 = DP / 4;
    const int QS = QRES ? 0 : FC_ATTN_QS_(C, R, TM, DC), KS = FC_ATTN_KS_(C, R, TN, DC);
    const int VS = FC_ATTN_VS_(DP, C, R, VC);
    const int Sq = dims.x, Sk = dims.y, D = dims.z, G = dims.w;
    const int ntiles = grid.x, BH = grid.y, Hkv = grid.z, kps = grid.w;
    const int wl = mask.x, wr = mask.y, out_dt = mask.z, has_lse = mask.w;
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

    /* Which tile: the flat group id runs over tiles fastest (reversed, so that causal tiles
     * with the most keys start first), then (batch, kv head), then splits. */
    const ulong gid = get_group_id(0);
    const ulong2 t_rest = fc_attn_divmod64(gid, (ulong)ntiles);
    const int tile = ntiles - 1 - (int)t_rest.y;
    const ulong2 s_bh = fc_attn_divmod64(t_rest.x, (ulong)BH);
    const int bh = (int)s_bh.y, split = (int)s_bh.x;
    const int2 b_kvh = fc_attn_divmod(bh, Hkv);
    const int b = b_kvh.x, kvh = b_kvh.y;
    const int rows = G * Sq, r0 = tile * BM, r_last = min(r0 + BM, rows) - 1;
    const int off = Sk - Sq;
    const int kb = split * kps, ke = (int)min((long)kb + kps, (long)Sk);

    /* Key range of the whole tile and the part of it visible to every row (no mask needed).
     * lo and hi grow with the query index, so the tile's first and last queries bound them;
     * a tile that spans two heads holds queries 0 and Sq - 1. */
    const int2 gi0 = fc_attn_divmod(r0, Sq), gi1 = fc_attn_divmod(r_last, Sq);
    const int i_min = gi0.x == gi1.x ? gi0.y : 0, i_max = gi0.x == gi1.x ? gi1.y : Sq - 1;
    const long j_begin = fc_attn_lo(i_min, off, wl, kb), j_end = fc_attn_hi(i_max, off, wr, ke);
    const long full_lo = fc_attn_lo(i_max, off, wl, kb), full_hi = fc_attn_hi(i_min, off, wr, ke);
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
        const int r = r0 + i * R + rg, qi = fc_attn_divmod(r, Sq).y;
        const long lo = fc_attn_lo(qi, off, wl, kb), hi = fc_attn_hi(qi, off, wr, ke);
        const int empty = r >= rows || hi < lo;
        row_lo[i] = empty ? 1 : (int)lo;    /* empty: [1, 0] masks every key */
        row_hi[i] = empty ? 0 : (int)hi;
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
    FC_ATTN_KERNEL(fc_attn_##family##_d##DP##_f32, FC_ATTN_F32, DP, SKIP, t)                   \
    FC_ATTN_KERNEL(fc_attn_##family##_d##DP##_f16, FC_ATTN_F16, DP, SKIP, t)                   \
    FC_ATTN_KERNEL(fc_attn_##family##_d##DP##_bf16, FC_ATTN_BF16, DP, SKIP, t)

#if defined(FC_ATTN_GENERIC)
/* Generic kernels take the geometry of the 256 class, which bounds every head dim. */
#if FC_ATTN_C_OF(FC_ATTN_P256) > 0
FC_ATTN_KERNEL_ANY(fc_attn_prefill_any, 0, FC_ATTN_P256)
#endif
#if FC_ATTN_C_OF(FC_ATTN_D256) > 0
FC_ATTN_KERNEL_ANY(fc_attn_decode_any, 1, FC_ATTN_D256)
#endif
#else
#if FC_ATTN_C_OF(FC_ATTN_P64) > 0
FC_ATTN_KERNELS_DTYPES(prefill, 64, 0, FC_ATTN_P64)
#endif
#if FC_ATTN_C_OF(FC_ATTN_P128) > 0
FC_ATTN_KERNELS_DTYPES(prefill, 128, 0, FC_ATTN_P128)
#endif
#if FC_ATTN_C_OF(FC_ATTN_P256) > 0
FC_ATTN_KERNELS_DTYPES(prefill, 256, 0, FC_ATTN_P256)
#endif
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

/* ---- merges -------------------------------------------------------------------------------- */

/* Combines the split-KV partials of one row (one work-group per row, rows ordered (b, h, i)):
 * parts are f32 in scratch, o at part_o[at.z + split·at.x + row·D], lse at
 * part_lse[at.w + split·at.y + row]. lse = M + log Σ exp(lse_s - M) and
 * o = Σ exp(lse_s - lse)·o_s.
 * The work-items split both the head dim (float4 columns) and the splits, so that many loads
 * are in flight; the column partial sums are then added in a fixed order (deterministic).
 * dims: Sq, Hq, D, nsplit; out: o dtype, 1 when lse is written. */
#ifndef FC_ATTN_SPLIT_WG
#define FC_ATTN_SPLIT_WG 256
#endif
__kernel __attribute__((reqd_work_group_size(FC_ATTN_SPLIT_WG, 1, 1))) void fc_attn_split_merge(
    __global const float *part_o, __global const float *part_lse, long4 at, int4 dims,
    __global uchar *o, long4 os, __global float *lse, long4 ls, int2 out)
{
    __local float scratch[FC_ATTN_SPLIT_WG];
    __local float w[FC_ATTN_MAX_SPLITS];
    __local float4 part[FC_ATTN_SPLIT_WG];
    const int Sq = dims.x, H = dims.y, D = dims.z, nsplit = dims.w;
    const int lid = (int)get_local_id(0);
    const ulong row = get_group_id(0);
    const ulong2 bh_qi = fc_attn_divmod64(row, (ulong)Sq);
    const ulong2 b_h = fc_attn_divmod64(bh_qi.x, (ulong)H);
    const int qi = (int)bh_qi.y, h = (int)b_h.y, b = (int)b_h.x;

    /* weights: w_s = exp(lse_s - M) */
    float mx = -INFINITY;
    for (int s = lid; s < nsplit; s += FC_ATTN_SPLIT_WG)
        mx = fmax(mx, part_lse[at.w + (long)s * at.y + (long)row]);
    scratch[lid] = mx;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int k = FC_ATTN_SPLIT_WG / 2; k > 0; k >>= 1) {
        if (lid < k)
            scratch[lid] = fmax(scratch[lid], scratch[lid + k]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    mx = scratch[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    float sum = 0.0f;
    for (int s = lid; s < nsplit; s += FC_ATTN_SPLIT_WG) {
        const float ls_ = part_lse[at.w + (long)s * at.y + (long)row];
        const float e = mx == -INFINITY ? 0.0f : exp(ls_ - mx);
        w[s] = e;
        sum += e;
    }
    scratch[lid] = sum;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int k = FC_ATTN_SPLIT_WG / 2; k > 0; k >>= 1) {
        if (lid < k)
            scratch[lid] += scratch[lid + k];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    sum = scratch[0];
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;

    /* columns of 4 dims × groups of splits */
    const int d4n = (D + 3) / 4;
    int cols = 1;
    while (cols < d4n)
        cols <<= 1;
    const int groups = FC_ATTN_SPLIT_WG / cols, c4 = lid % cols, grp = lid / cols;
    float4 a = (float4)(0.0f);
    if (c4 < d4n)
        for (int s = grp; s < nsplit; s += groups) {
            const long base = at.z + (long)s * at.x + (long)row * D + 4 * c4;
            a += w[s] * (4 * c4 + 4 <= D ? vload4(0, part_o + base)
                                         : (float4)(part_o[base],
                                                    4 * c4 + 1 < D ? part_o[base + 1] : 0.0f,
                                                    4 * c4 + 2 < D ? part_o[base + 2] : 0.0f,
                                                    0.0f));
        }
    part[lid] = a;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (grp == 0 && c4 < d4n) {
        for (int g = 1; g < groups; g++)
            a += part[g * cols + c4];
        const ulong orow = fc_attn_row(os, b, qi, h);
        fc_attn_store4(out.x, o, orow + 4 * c4, D - 4 * c4, 0, a * inv);
    }
    if (out.y && lid == 0)
        lse[fc_attn_row(ls, b, h, qi)] = sum > 0.0f ? mx + log(sum) : -INFINITY;
}

/* Merges up to four partial results (o_k with strides os_k, lse_k with ls_k, dtype dt.k) of the
 * same rows into o / lse; the host chains launches for more parts, passing the running result
 * (f32) as part 0 of the next. dims: Sq, H, D, number of parts; out: o dtype, lse written. */
__kernel __attribute__((reqd_work_group_size(FC_ATTN_MERGE_WG, 1, 1))) void fc_attn_merge(
    __global const uchar *o0, long4 os0, __global const float *l0, long4 ls0,
    __global const uchar *o1, long4 os1, __global const float *l1, long4 ls1,
    __global const uchar *o2, long4 os2, __global const float *l2, long4 ls2,
    __global const uchar *o3, long4 os3, __global const float *l3, long4 ls3, int4 dt,
    int4 dims, __global uchar *o, long4 os, __global float *lse, long4 ls, int2 out)
{
    const int Sq = dims.x, H = dims.y, D = dims.z, n = dims.w;
    const ulong row = get_group_id(0);
    const ulong2 bh_qi = fc_attn_divmod64(row, (ulong)Sq);
    const ulong2 b_h = fc_attn_divmod64(bh_qi.x, (ulong)H);
    const int qi = (int)bh_qi.y, h = (int)b_h.y, b = (int)b_h.x;
    float lp[4], w[4];
    lp[0] = l0[fc_attn_row(ls0, b, h, qi)];
    lp[1] = n > 1 ? l1[fc_attn_row(ls1, b, h, qi)] : -INFINITY;
    lp[2] = n > 2 ? l2[fc_attn_row(ls2, b, h, qi)] : -INFINITY;
    lp[3] = n > 3 ? l3[fc_attn_row(ls3, b, h, qi)] : -INFINITY;
    const float mx = fmax(fmax(lp[0], lp[1]), fmax(lp[2], lp[3]));
    float sum = 0.0f;
    for (int p = 0; p < 4; p++) {
        w[p] = mx == -INFINITY || p >= n ? 0.0f : exp(lp[p] - mx);
        sum += w[p];
    }
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    const ulong r0 = fc_attn_row(os0, b, qi, h), r1 = fc_attn_row(os1, b, qi, h);
    const ulong r2 = fc_attn_row(os2, b, qi, h), r3 = fc_attn_row(os3, b, qi, h);
    const ulong orow = fc_attn_row(os, b, qi, h);
    for (int d = (int)get_local_id(0); d < D; d += FC_ATTN_MERGE_WG) {
        /* parts of zero weight are not read: their o may be anything (e.g. never written) */
        float a = w[0] > 0.0f ? w[0] * fc_attn_load1(dt.x, o0, r0 + d) : 0.0f;
        if (w[1] > 0.0f) a = fma(w[1], fc_attn_load1(dt.y, o1, r1 + d), a);
        if (w[2] > 0.0f) a = fma(w[2], fc_attn_load1(dt.z, o2, r2 + d), a);
        if (w[3] > 0.0f) a = fma(w[3], fc_attn_load1(dt.w, o3, r3 + d), a);
        fc_attn_store1(out.x, o, orow + d, a * inv);
    }
    if (out.y && get_local_id(0) == 0)
        lse[fc_attn_row(ls, b, h, qi)] = sum > 0.0f ? mx + log(sum) : -INFINITY;
}
