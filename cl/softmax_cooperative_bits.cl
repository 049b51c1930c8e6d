/* cl/softmax_cooperative_bits.cl — the cooperative split row for 16-bit input held as its
 * storage bits, two elements to a register (FC_COOP_BITS: NVIDIA), for rows whose x and y start
 * 16-byte aligned and whose length is a multiple of a chunk (8 elements), so that every chunk
 * lies wholly inside its slice or wholly past its end: softmax_split_row_cooperative_bits64_X_Y
 * (64 elements a work-item, 32 registers of bits) and _bits128_X_Y (128, for rows that would
 * otherwise take more than 32 slices: softmax_plan.c).
 *
 * The float-held kernel (softmax_cooperative.cl) converts each element once and keeps its exp:
 * 64 floats a work-item, 96 registers in NVIDIA's 16-bit programs, 5 groups of 128 on a compute
 * unit. Held as bits, the same 64 elements take a third of that; the price is a second
 * conversion and a second exp per element, at the store. H200, NVIDIA OpenCL, 2026-11-26, % of
 * copy, floats -> bits64: 4096x32768 f16 80.3 -> 90.9, bf16 79.9 -> 90.0, 1024x131072 f16 76.5
 * -> 88.4, 8192x16384 f16 82.7 -> 91.9, 256x262144 f16 70.2 -> 79.0; bits128 for 64x1M f16 (64
 * slices, against the ordered split's 60.0): 67.8 (bench/results/2026-11-26-session25.md).
 * The max is taken on the bits two at a time (max.f16x2 / max.bf16x2 skip NaN as fmax does)
 * and widened once: rounding is monotonic, so max(x) * scale (min(x) * scale for scale < 0) is
 * exactly the max of the scaled values. The CUDA backend's held_bits
 * (cuda/softmax_split_held.cuh) is the same idea.
 *
 * Ticket, exchange and store formulas are the cooperative kernel's (fc_coop_*), so its
 * no-deadlock argument holds here unchanged. The sums take FC_EXP_SUM's exps where the float
 * kernel keeps FC_EXP_OUT's, so d may differ from its d in the last bits. */
#ifndef FLASHCL_EMBEDDED
#include "softmax_cooperative.cl" /* and through it softmax.cl */
#endif

#if FC_COOP && defined(FC_COOP_BITS) && FC_COOP_BITS

/* The most elements a work-item holds (the wider kernel's). */
#define FC_COOP_BITS_MAX 128

/* The larger (is_max) or smaller of two pairs of 16-bit values, pair by pair, NaN skipped. */
FC_INLINE uint fc_bits_pair_extreme(const int dt, const int is_max, uint a, uint b)
{
#if defined(FC_SG_NV_PTX)
    uint r;
    if (dt == FC_F16 && is_max)
        FC_ASM("max.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    else if (dt == FC_F16)
        FC_ASM("min.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    else if (is_max)
        FC_ASM("max.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    else
        FC_ASM("min.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    return r;
#else
    /* widened, compared, and the winners' bits kept */
    const uint4 wa = (uint4)(a, 0u, 0u, 0u), wb = (uint4)(b, 0u, 0u, 0u);
    const float a0 = fc_chunk_elem(dt, wa, 0), a1 = fc_chunk_elem(dt, wa, 1);
    const float b0 = fc_chunk_elem(dt, wb, 0), b1 = fc_chunk_elem(dt, wb, 1);
    const int take_b0 = is_max ? (isnan(a0) || b0 > a0) : (isnan(a0) || b0 < a0);
    const int take_b1 = is_max ? (isnan(a1) || b1 > a1) : (isnan(a1) || b1 < a1);
    return ((take_b0 ? b : a) & 0xffffu) | ((take_b1 ? b : a) & 0xffff0000u);
#endif
}

/* Whether chunk c of this work-item lies in [begin, end) (`all`: every chunk does). */
#define FC_BITS_INSIDE(c) (all || FC_REG_J(c) < end)

/* The scaled max of the held elements (-inf when the work-item holds none). */
FC_INLINE float fc_bits_max(const int dt, const uint4 *raw, const uint chunks, float scale,
                            uint begin, uint end, uint lane, uint team, const int all)
{
    const uint n = 8, none_max = dt == FC_F16 ? 0xfc00fc00u : 0xff80ff80u; /* -inf pairs */
    const uint none_min = dt == FC_F16 ? 0x7c007c00u : 0x7f807f80u;       /* +inf pairs */
    const int is_max = scale >= 0.0f;
    const uint none = is_max ? none_max : none_min;
    uint4 acc = (uint4)(none);
    if (!(begin + n * lane < end))
        return -INFINITY;
#pragma unroll
    for (uint c = 0; c < chunks; ++c)
        if (FC_BITS_INSIDE(c)) {
            acc.x = fc_bits_pair_extreme(dt, is_max, acc.x, raw[c].x);
            acc.y = fc_bits_pair_extreme(dt, is_max, acc.y, raw[c].y);
            acc.z = fc_bits_pair_extreme(dt, is_max, acc.z, raw[c].z);
            acc.w = fc_bits_pair_extreme(dt, is_max, acc.w, raw[c].w);
        }
    const uint p = fc_bits_pair_extreme(dt, is_max, fc_bits_pair_extreme(dt, is_max, acc.x, acc.y),
                                        fc_bits_pair_extreme(dt, is_max, acc.z, acc.w));
    const uint4 w = (uint4)(p, 0u, 0u, 0u);
    const float lo = fc_chunk_elem(dt, w, 0), hi = fc_chunk_elem(dt, w, 1);
    return (is_max ? fmax(lo, hi) : fmin(lo, hi)) * scale;
}

/* `elems` (a literal, a multiple of 8): the elements a work-item holds. */
FC_INLINE void fc_split_row_cooperative_bits(const int xdt, const int ydt, const uint elems,
                                             const __global void *x, ulong x_off,
                                             ulong x_stride, __global void *y, ulong y_off,
                                             ulong y_stride, ulong rows, uint cols,
                                             uint slice_len, uint slices, float scale,
                                             int log_mode, volatile __global ulong *state,
                                             __local float *scratch, __local ulong *ticket)
{
    const uint lid = get_local_id(0), width = get_local_size(0), chunks = elems / 8;
    const uint n = 8, lane = lid, team = width;
    const fc_coop_slice s = fc_coop_slice_of(fc_draw_ticket(state, ticket, lid), slices,
                                             slice_len, cols, x_off, x_stride, 1, n);
    const uint begin = s.begin, end = s.end;
    const int all = begin + width * elems <= end;
    const __global void *xrow = fc_row(xdt, x, x_off + s.row * x_stride);
    uint4 raw[FC_COOP_BITS_MAX / 8];

#pragma unroll
    for (uint c = 0; c < chunks; ++c)
        raw[c] = FC_BITS_INSIDE(c) ? fc_chunk_load_all(xdt, xrow, FC_REG_J(c), 1) : (uint4)(0u);
    const float m_own = fc_bits_max(xdt, raw, chunks, scale, begin, end, lane, team, all);
    const float ref = fc_md_ref(m_own);
    float d_own = 0.0f;
#pragma unroll
    for (uint c = 0; c < chunks; ++c)
        if (FC_BITS_INSIDE(c))
            for (uint h = 0; h < 2; ++h)
                d_own += fc_sum4(FC_EXP_SUM(fc_chunk_quad(xdt, raw[c], h) * scale - ref));

    float2 md = fc_slice_md((float2)(m_own, d_own), slices == 1, lid, width, scratch);
    if (slices > 1) {
        fc_coop_publish(state, rows, s.row, s.slice, slices, md, lid);
        md = fc_coop_row_md(state, rows, s.row, slices, lid, width, scratch);
    }
    const float factor = fc_coop_factor(m_own, md), log_d = log(md.y);
    __global void *yrow = fc_row_w(ydt, y, y_off + s.row * y_stride);
#pragma unroll
    for (uint c = 0; c < chunks; ++c)
        if (FC_BITS_INSIDE(c)) {
            float4 s0 = fc_chunk_quad(xdt, raw[c], 0) * scale;
            float4 s1 = fc_chunk_quad(xdt, raw[c], 1) * scale;
            if (!log_mode) {
                s0 = FC_EXP_OUT(ydt, s0 - ref);
                s1 = FC_EXP_OUT(ydt, s1 - ref);
            }
            fc_held_store_chunk(xdt, ydt, s0, s1, c, yrow, begin, end, lane, team, 1, 0,
                                log_mode, md.x, factor, log_d, 0u);
        }
}

#define FC_COOP_BITS_KERNEL(E, XN, XT, XD, YN, YT, YD)                                         \
    __kernel void softmax_split_row_cooperative_bits##E##_##XN##_##YN(FC_PTR_ARGS(XT, YT),     \
                                                                      FC_COOP_PARAMS)          \
    {                                                                                          \
        FC_COOP_PROLOGUE;                                                                      \
        (void)vec;                                                                             \
        fc_split_row_cooperative_bits(XD, YD, E, x, x_off, x_stride, y, y_off, y_stride, rows, \
                                      cols, slice_len, slices, scale, log_mode,                \
                                      state + state_off, scratch, &ticket);                    \
    }
#define FC_COOP_BITS_TO(E, XN, XT, XD)                                                         \
    FC_COOP_BITS_KERNEL(E, XN, XT, XD, f32, float, FC_F32)                                     \
    FC_COOP_BITS_KERNEL(E, XN, XT, XD, f16, half, FC_F16)                                      \
    FC_COOP_BITS_KERNEL(E, XN, XT, XD, bf16, ushort, FC_BF16)
#define FC_COOP_BITS_FROM(XN, XT, XD)                                                          \
    FC_COOP_BITS_TO(64, XN, XT, XD)                                                            \
    FC_COOP_BITS_TO(128, XN, XT, XD)

FC_WITH_F16(FC_COOP_BITS_FROM(f16, half, FC_F16))
FC_WITH_BF16(FC_COOP_BITS_FROM(bf16, ushort, FC_BF16))
#endif /* FC_COOP && FC_COOP_BITS */
