/* cl/dtype.h — loads and stores of the storage types, widened to / narrowed from float.
 *
 * Storage codes match flashcl_dtype: 0 = f32, 1 = f16, 2 = bf16. The kernels call these with a
 * literal code; after inlining, every switch folds away. f16 and bf16 need no cl_khr_fp16: they
 * move as ushort bits and convert in integer code (or NVIDIA's PTX cvt). Stores round to
 * nearest even and keep NaN a NaN; values too large for the type become inf.
 *
 * Kernels address a row through a pointer to its first element (fc_row: 64-bit, since
 * rows * row_stride may exceed 2^31) and elements within it by a 32-bit index, which keeps the
 * per-element address arithmetic to one instruction.
 *
 * Bulk data moves in chunks of 16 bytes: FC_CHUNK(dt) elements (4 f32 or 8 f16/bf16) at an
 * index that is a multiple of FC_CHUNK(dt) of a 16-byte aligned row: one vector access. A
 * chunk stays in a uint4 of raw bits until it is used, so 16-bit data occupies half the
 * registers (and a work-item keeps as many bytes in flight as with f32). */
#ifndef FC_DTYPE_H
#define FC_DTYPE_H

#ifndef FLASHCL_EMBEDDED
#include "portability.h"
#endif

#define FC_F32 0
#define FC_F16 1
#define FC_BF16 2

/* Storage dtypes whose kernels this build instantiates: a bit mask over the codes above (bit 0
 * f32, 1 f16, 2 bf16); softmax kernels go by input dtype, attention kernels by q/k/v dtype. The
 * library builds one program per dtype (src/opencl/program.c) so that the driver compiles them
 * concurrently; a standalone compile gets every dtype. FC_WITH_F32(x) etc. are x when that
 * dtype is selected and nothing otherwise (for instantiations inside macros). */
#ifndef FC_DTYPES
#define FC_DTYPES 7
#endif
#if FC_DTYPES & 1
#define FC_WITH_F32(x) x
#else
#define FC_WITH_F32(x)
#endif
#if FC_DTYPES & 2
#define FC_WITH_F16(x) x
#else
#define FC_WITH_F16(x)
#endif
#if FC_DTYPES & 4
#define FC_WITH_BF16(x) x
#else
#define FC_WITH_BF16(x)
#endif
/* PAIR(XN, XT, XD, YN, YT, YD) for every (input, output) storage pair of the selected input
 * dtypes: N the name suffix, T the OpenCL C storage type, D the code above. */
#define FC_EACH_OUTPUT(PAIR, XN, XT, XD)                                                       \
    PAIR(XN, XT, XD, f32, float, FC_F32)                                                       \
    PAIR(XN, XT, XD, f16, half, FC_F16)                                                        \
    PAIR(XN, XT, XD, bf16, ushort, FC_BF16)
#define FC_EACH_PAIR(PAIR)                                                                     \
    FC_WITH_F32(FC_EACH_OUTPUT(PAIR, f32, float, FC_F32))                                      \
    FC_WITH_F16(FC_EACH_OUTPUT(PAIR, f16, half, FC_F16))                                       \
    FC_WITH_BF16(FC_EACH_OUTPUT(PAIR, bf16, ushort, FC_BF16))

/* Elements of a 16-byte chunk. */
#define FC_CHUNK(dt) ((dt) == FC_F32 ? 4u : 8u)

/* f16 <-> f32: 1 = integer code on the bits (every device), 2 = NVIDIA inline PTX cvt, 3 = the
 * vload_half / vstore_half_rte built-ins on private copies of the bits, four at a time where a
 * chunk is converted (CPUs: PoCL turns vload_half4 into one vector conversion, where the integer
 * code ran element by element). */
#ifndef FC_HALF_IMPL
#define FC_HALF_IMPL 1
#endif

/* ---- bit conversions -------------------------------------------------------------------------- */
FC_INLINE float fc_bf16_to_float(uint b)
{
    return as_float(b << 16);
}

/* 1 (NVIDIA sm_80+, inline PTX): two floats narrow to a packed f16x2 / bf16x2 word in one
 * cvt.rn instruction (round to nearest even, inf on overflow, NaN stays NaN) instead of two
 * conversions and a merge, which on 16-bit outputs costs memory-bound kernels issue slots; and
 * one float to bf16 in one cvt.rn.bf16.f32 (the element-by-element stores). */
#ifndef FC_NV_CVT2
#define FC_NV_CVT2 0
#endif

#if FC_NV_CVT2 && defined(FC_SG_NV_PTX)
/* Round to nearest even; a NaN becomes the canonical NaN (0x7fff), as cvt.rn.bf16x2.f32 gives
 * the chunk stores (fc_pack2). */
FC_INLINE uint fc_float_to_bf16(float f)
{
    uint b;
    FC_ASM("{ .reg .b16 t; cvt.rn.bf16.f32 t, %1; cvt.u32.u16 %0, t; }" : "=r"(b) : "f"(f));
    return b;
}
#else
/* Round to nearest even on the 16 dropped bits; a NaN keeps its sign and top payload and gets
 * the quiet bit, so it can never round into an infinity. */
FC_INLINE uint fc_float_to_bf16(float f)
{
    const uint u = as_uint(f);
    if (isnan(f))
        return (u >> 16) | 0x0040u;
    return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}
#endif

#if FC_HALF_IMPL == 2
FC_INLINE float fc_half_to_float(uint h)
{
    float f;
    FC_ASM("{ .reg .b16 t; cvt.u16.u32 t, %1; cvt.f32.f16 %0, t; }" : "=f"(f) : "r"(h));
    return f;
}

FC_INLINE uint fc_float_to_half(float f)
{
    uint h;
    FC_ASM("{ .reg .b16 t; cvt.rn.f16.f32 t, %1; cvt.u32.u16 %0, t; }" : "=r"(h) : "f"(f));
    return h;
}
#elif FC_HALF_IMPL == 3
FC_INLINE float fc_half_to_float(uint h)
{
    const ushort bits = (ushort)h;
    return vload_half(0, (const __private half *)&bits);
}

FC_INLINE uint fc_float_to_half(float f)
{
    ushort bits;
    vstore_half_rte(f, 0, (__private half *)&bits);
    return bits;
}
#else
FC_INLINE float fc_half_to_float(uint h)
{
    const uint sign = (h & 0x8000u) << 16, em = h & 0x7fffu;
    if (em >= 0x7c00u) /* inf, NaN (payload kept) */
        return as_float(sign | 0x7f800000u | ((em & 0x3ffu) << 13));
    if (em >= 0x0400u) /* normal: rebias the exponent by 127 - 15 */
        return as_float(sign | ((em << 13) + 0x38000000u));
    return as_float(sign | as_uint((float)em * 5.9604644775390625e-8f)); /* em * 2^-24, exact */
}

/* Round to nearest even; NaN stays NaN (quiet); |f| >= 65520 becomes inf. */
FC_INLINE uint fc_float_to_half(float f)
{
    const uint u = as_uint(f), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u)
        return sign | 0x7e00u | ((a >> 13) & 0x3ffu);
    if (a >= 0x477ff000u)
        return sign | 0x7c00u;
    if (a >= 0x38800000u) { /* normal half */
        const uint r = a - 0x38000000u;
        return sign | ((r + 0x0fffu + ((r >> 13) & 1u)) >> 13);
    }
    if (a <= 0x33000000u) /* <= 2^-25 rounds to zero */
        return sign;
    /* subnormal half: k = mantissa (with implicit bit) >> (126 - exponent), rounded */
    const uint shift = 126u - (a >> 23), m = (a & 0x7fffffu) | 0x800000u;
    return sign | ((m + (1u << (shift - 1)) - 1u + ((m >> shift) & 1u)) >> shift);
}
#endif

/* Storage bits of one element <-> float. */
FC_INLINE float fc_from_bits(const int dt, uint bits)
{
    return dt == FC_F32 ? as_float(bits) : dt == FC_F16 ? fc_half_to_float(bits)
                                                          : fc_bf16_to_float(bits);
}

FC_INLINE uint fc_to_bits(const int dt, float v)
{
    return dt == FC_F32 ? as_uint(v) : dt == FC_F16 ? fc_float_to_half(v) : fc_float_to_bf16(v);
}

/* Two 16-bit elements (lo at the lower address) as one word. */
FC_INLINE uint fc_pack2(const int dt, float lo, float hi)
{
#if FC_NV_CVT2 && defined(FC_SG_NV_PTX)
    uint r;
    if (dt == FC_F16)
        FC_ASM("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    else
        FC_ASM("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
#else
    return fc_to_bits(dt, lo) | (fc_to_bits(dt, hi) << 16);
#endif
}

/* ---- rows and single elements ----------------------------------------------------------------- */
FC_INLINE const __global void *fc_row(const int dt, const __global void *p, ulong at)
{
    return (const __global uchar *)p + at * (dt == FC_F32 ? 4 : 2);
}

FC_INLINE __global void *fc_row_w(const int dt, __global void *p, ulong at)
{
    return (__global uchar *)p + at * (dt == FC_F32 ? 4 : 2);
}

FC_INLINE uint fc_load_bits(const int dt, const __global void *row, uint i)
{
    return dt == FC_F32 ? ((const __global uint *)row)[i] : ((const __global ushort *)row)[i];
}

FC_INLINE float fc_load(const int dt, const __global void *row, uint i)
{
    return fc_from_bits(dt, fc_load_bits(dt, row, i));
}

FC_INLINE void fc_store(const int dt, __global void *row, uint i, float v)
{
    if (dt == FC_F32)
        ((__global float *)row)[i] = v;
    else
        ((__global ushort *)row)[i] = (ushort)fc_to_bits(dt, v);
}

/* ---- 16-byte chunks of raw bits ---------------------------------------------------------------- */
FC_INLINE uint fc_word(uint4 r, uint w)
{
    return w == 0 ? r.x : w == 1 ? r.y : w == 2 ? r.z : r.w;
}

FC_INLINE uint4 fc_set_word(uint4 r, uint w, uint v)
{
    if (w == 0) r.x = v;
    else if (w == 1) r.y = v;
    else if (w == 2) r.z = v;
    else r.w = v;
    return r;
}

/* Element e (a literal) of a chunk, as float. 16-bit elements: even ones in the low half. */
FC_INLINE float fc_chunk_elem(const int dt, uint4 r, uint e)
{
    if (dt == FC_F32)
        return as_float(fc_word(r, e));
    const uint w = fc_word(r, e >> 1);
    if (dt == FC_BF16)
        return as_float((e & 1) ? (w & 0xffff0000u) : (w << 16));
    return fc_half_to_float((e & 1) ? (w >> 16) : (w & 0xffffu));
}

/* Elements 4h .. 4h+3 of a chunk. */
FC_INLINE float4 fc_chunk_quad(const int dt, uint4 r, uint h)
{
#if FC_HALF_IMPL == 3
    if (dt == FC_F16) {
        const uint2 w = h ? r.zw : r.xy;
        return vload_half4(0, (const __private half *)&w);
    }
#endif
    return (float4)(fc_chunk_elem(dt, r, 4 * h), fc_chunk_elem(dt, r, 4 * h + 1),
                    fc_chunk_elem(dt, r, 4 * h + 2), fc_chunk_elem(dt, r, 4 * h + 3));
}

/* The chunk at element j (a multiple of FC_CHUNK(dt)), one load per element: only elements
 * lo <= j + e < end are read, the others are 0 bits (lo is 0 but for the first chunk of a row in
 * its shifted layout, whose elements before the row are not read: cl/softmax.cl). */
FC_INLINE uint4 fc_chunk_gather(const int dt, const __global void *row, uint j, uint lo, uint end)
{
    const uint n = FC_CHUNK(dt);
    uint4 r = (uint4)(0u);
    for (uint e = 0; e < n; ++e) {
        if (j + e >= lo && j + e < end) {
            const uint bits = fc_load_bits(dt, row, j + e);
            if (dt == FC_F32)
                r = fc_set_word(r, e, bits);
            else
                r = fc_set_word(r, e >> 1, fc_word(r, e >> 1) | (bits << (16 * (e & 1))));
        }
    }
    return r;
}

/* The chunk at element j (a multiple of FC_CHUNK(dt)): one 16-byte load with `vec`, else one
 * load per element. Only elements before `end` are read; the others are 0 bits. */
FC_INLINE uint4 fc_chunk_load(const int dt, const __global void *row, uint j, uint end, int vec)
{
    const uint n = FC_CHUNK(dt);
    if (vec && j + n <= end)
        return ((const __global uint4 *)row)[j / n];
    return fc_chunk_gather(dt, row, j, 0u, end);
}

/* 1 (NVIDIA PTX only): the 16-byte stores of fc_chunk_store_as(..., streaming = 1) are
 * st.global.cs (evict first), so that input a kernel is about to re-read keeps its place in
 * the L2 cache. Off by default; fc_chunk_store never streams. */
#ifndef FC_STREAM_STORES
#define FC_STREAM_STORES 0
#endif

FC_INLINE void fc_store16(__global uint4 *p, uint4 v, const int streaming)
{
#if FC_STREAM_STORES && defined(FC_SG_NV_PTX)
    if (streaming) {
        FC_ASM volatile("st.global.cs.v4.u32 [%0], {%1, %2, %3, %4};"
                        :
                        : "l"((ulong)p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
                        : "memory");
        return;
    }
#endif
    *p = v;
}

/* Stores the n = FC_CHUNK(xdt) values (q0, and q1 when n is 8) as ydt one element at a time,
 * value e at element j + e * step of a row (step 1: a chunk; the team width: the element layout
 * of cl/softmax.cl, fc_held_store), only those at lo <= j + e * step < end (lo: as in
 * fc_chunk_gather). */
FC_INLINE void fc_chunk_scatter(const int xdt, const int ydt, __global void *row, uint j,
                                uint step, uint lo, uint end, float4 q0, float4 q1)
{
    const uint n = FC_CHUNK(xdt);
    const float v[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
    for (uint e = 0; e < n; ++e)
        if (j + e * step >= lo && j + e * step < end)
            fc_store(ydt, row, j + e * step, v[e]);
}

/* Stores n = FC_CHUNK(xdt) values (q0, and q1 when n is 8) as ydt at element j of a row; with
 * `vec` in 16-byte vector stores (streaming ones with `streaming`, see FC_STREAM_STORES), else
 * (or near `end`) element by element. */
FC_INLINE void fc_chunk_store_as(const int xdt, const int ydt, __global void *row, uint j,
                                 uint end, float4 q0, float4 q1, int vec, const int streaming)
{
    const uint n = FC_CHUNK(xdt);
    if (vec && j + n <= end) {
        if (ydt == FC_F32) {
            fc_store16((__global uint4 *)row + j / 4, as_uint4(q0), streaming);
            if (n == 8)
                fc_store16((__global uint4 *)row + j / 4 + 1, as_uint4(q1), streaming);
        } else {
#if FC_HALF_IMPL == 3
            if (ydt == FC_F16) { /* four conversions at a time (see FC_HALF_IMPL) */
                uint4 w;
                vstore_half4_rte(q0, 0, (__private half *)&w);
                if (n == 8) {
                    vstore_half4_rte(q1, 1, (__private half *)&w);
                    fc_store16((__global uint4 *)row + j / 8, w, streaming);
                } else {
                    ((__global uint2 *)row)[j / 4] = w.xy;
                }
                return;
            }
#endif
            const uint2 w0 = (uint2)(fc_pack2(ydt, q0.x, q0.y), fc_pack2(ydt, q0.z, q0.w));
            if (n == 8) {
                fc_store16((__global uint4 *)row + j / 8,
                           (uint4)(w0, fc_pack2(ydt, q1.x, q1.y), fc_pack2(ydt, q1.z, q1.w)),
                           streaming);
            } else {
                ((__global uint2 *)row)[j / 4] = w0;
            }
        }
        return;
    }
    fc_chunk_scatter(xdt, ydt, row, j, 1u, 0u, end, q0, q1);
}

FC_INLINE void fc_chunk_store(const int xdt, const int ydt, __global void *row, uint j, uint end,
                              float4 q0, float4 q1, int vec)
{
    fc_chunk_store_as(xdt, ydt, row, j, end, q0, q1, vec, 0);
}

#endif /* FC_DTYPE_H */
