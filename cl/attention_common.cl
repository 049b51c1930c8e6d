/* cl/attention_common.cl — what the attention kernels share: the geometry tuples and their
 * register bounds, storage types (f32/f16/bf16 loads and stores), index helpers, visible-key
 * ranges and row reductions. Part of the attention program (see cl/attention.cl). */

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
/* The most splits the split merge merges (its work-group, FC_ATTN_SPLIT_WG, is with it in
 * attention_merge.cl; flashcl_attention_merge's kernel runs at any work-group size). */
#ifndef FC_ATTN_MAX_SPLITS
#define FC_ATTN_MAX_SPLITS 256
#endif

/* Which kernels this build instantiates, a bit mask (default: all); the library splits them
 * into programs that its driver compiles concurrently (src/opencl/program.c), and leaves out the
 * tiled decode kernels where nothing runs them. FC_DTYPES (cl/dtype.h) selects the dtypes of
 * the per-dtype kernels; the generic and the merge kernels take their dtypes at run time. */
#define FC_ATTN_KIND_PREFILL 1      /* tiled forward, prefill tiles (attention_forward.cl) */
#define FC_ATTN_KIND_DECODE_TILES 2 /* tiled forward, decode tiles (the legacy decode kernel) */
#define FC_ATTN_KIND_DECODE_KEYS 4  /* key-parallel decode (attention_decode.cl) */
#define FC_ATTN_KIND_MERGE 8        /* split-KV merge and flashcl_attention_merge's kernel */
#ifndef FC_ATTN_KINDS
#define FC_ATTN_KINDS 15
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

/* The forward kernels' arguments, the same for every kernel (tiled, key-parallel decode,
 * tensor-core), geometry and dtype.
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
 *   aligned        bit 0 q, 1 k, 2 v, 3 o: rows start 4-element aligned (vector accesses);
 *                  bit 5: k rows start 16-byte aligned (the decode kernel's K loads)
 *   in_dtype       dtype of q, k, v (read by the generic kernels; the others have it built in)
 *   tail           how many of the last (batch, kv head) pairs interleave their tiles (0: none;
 *                  see FC_ATTN_PLACE) */
#define FC_ATTN_FORWARD_PARAMS                                                                 \
    __global const uchar *q, __global const uchar *k, __global const uchar *v,                \
        __global uchar *o, __global float *lse, long4 qs, long4 ks, long4 vs, long4 os,        \
        long4 ls, int4 dims, int4 grid, int4 mask, float2 score, long2 split_stride,           \
        int aligned, int in_dtype, int tail
#define FC_ATTN_FORWARD_ARGS                                                                   \
    q, k, v, o, lse, qs, ks, vs, os, ls, dims, grid, mask, score, split_stride, aligned, tail

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

/* Where a forward work-group works. The flat group id runs over tiles fastest (reversed when
 * `reverse`, so that causal tiles with the most keys start first), then (batch, kv head), then
 * key splits [kb, ke); except that the last `tail` (batch, kv head) pairs of a split interleave
 * their tiles, every pair's first tile before any pair's second, so that a causal grid ends on
 * the lightest tiles of several pairs rather than on a mix of heavy and light ones that leaves
 * compute units idle behind the last heavy tiles (src/attention_tail.h). A tile is BM packed
 * rows (row = g·Sq + i). Its key range [j_begin, j_end] and the part of it every row sees
 * [full_lo, full_hi] (no mask needed there) are
 * bounded by its first and last queries, since lo and hi grow with the query index; a tile
 * that spans two heads holds queries 0 and Sq - 1. */
typedef struct fc_attn_place {
    int split, b, kvh, rows, r0, r_last, off, kb, ke;
    long j_begin, j_end, full_lo, full_hi;
} fc_attn_place;

/* Declares and fills `fc_attn_place P` for a work-group of BM rows. A macro, not a function
 * returning the struct: LLVM's inliner then adds noalias scope intrinsics that Oclgrind's
 * interpreter does not know. */
#define FC_ATTN_PLACE(P, dims, grid, mask, BM, reverse, tail)                                  \
    fc_attn_place P;                                                                           \
    {                                                                                          \
        const ulong2 s_pos_ = fc_attn_divmod64(get_group_id(0), (ulong)(grid).x * (grid).y);   \
        const ulong in_order_ = (ulong)((grid).y - (tail)) * (ulong)(grid).x;                  \
        int bh_, from_first_;                                                                  \
        if (s_pos_.y < in_order_) {                                                            \
            const ulong2 t_ = fc_attn_divmod64(s_pos_.y, (ulong)(grid).x);                     \
            bh_ = (int)t_.x;                                                                   \
            from_first_ = (int)t_.y;                                                           \
        } else {                                                                               \
            const ulong2 t_ = fc_attn_divmod64(s_pos_.y - in_order_, (ulong)(tail));           \
            bh_ = (grid).y - (tail) + (int)t_.y;                                               \
            from_first_ = (int)t_.x;                                                           \
        }                                                                                      \
        const int2 b_kvh_ = fc_attn_divmod(bh_, (grid).z);                                     \
        const int tile_ = (reverse) ? (grid).x - 1 - from_first_ : from_first_;                \
        P.split = (int)s_pos_.x;                                                               \
        P.b = b_kvh_.x;                                                                        \
        P.kvh = b_kvh_.y;                                                                      \
        P.rows = (dims).w * (dims).x;                                                          \
        P.r0 = tile_ * (BM);                                                                   \
        P.r_last = min(P.r0 + (BM), P.rows) - 1;                                               \
        P.off = (dims).y - (dims).x;                                                           \
        P.kb = P.split * (grid).w;                                                             \
        P.ke = (int)min((long)P.kb + (grid).w, (long)(dims).y);                                \
        const int2 gi0_ = fc_attn_divmod(P.r0, (dims).x);                                      \
        const int2 gi1_ = fc_attn_divmod(P.r_last, (dims).x);                                  \
        const int i_min_ = gi0_.x == gi1_.x ? gi0_.y : 0;                                      \
        const int i_max_ = gi0_.x == gi1_.x ? gi1_.y : (dims).x - 1;                           \
        P.j_begin = fc_attn_lo(i_min_, P.off, (mask).x, P.kb);                                 \
        P.j_end = fc_attn_hi(i_max_, P.off, (mask).y, P.ke);                                   \
        P.full_lo = fc_attn_lo(i_max_, P.off, (mask).x, P.kb);                                 \
        P.full_hi = fc_attn_hi(i_min_, P.off, (mask).y, P.ke);                                 \
    }

/* The keys packed row r of a place may see, as (lo, hi); (1, 0) when none or past the last
 * row, which masks every key. */
#define FC_ATTN_ROW_KEYS(P, r, Sq, mask)                                                       \
    fc_attn_row_keys((r), (Sq), (P).rows, (P).off, (P).kb, (P).ke, (mask))
FC_INLINE int2 fc_attn_row_keys(int r, int Sq, int rows, int off, int kb, int ke, int4 mask)
{
    const int qi = fc_attn_divmod(r, Sq).y;
    const long lo = fc_attn_lo(qi, off, mask.x, kb), hi = fc_attn_hi(qi, off, mask.y, ke);
    return r >= rows || hi < lo ? (int2)(1, 0) : (int2)((int)lo, (int)hi);
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
