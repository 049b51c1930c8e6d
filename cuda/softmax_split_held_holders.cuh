/* The split-held softmax kernels' holders (cuda/softmax_split_held.cuh): what a thread holds
 * of its block's slice, held_floats or held_bits, and the passes over it (load and sum, store).
 * Included by softmax_split_held.cuh. */
#pragma once

#include "softmax_split_exchange.cuh"

/* What a thread holds of its block's slice, and the two things done with it: sum() loads it and
 * returns the thread's sum of exponentials against its own max (that max in m), store() writes
 * it normalised with the row's (max, sum) r. Two holders, with the same expressions per value
 * (for 16-bit inputs their slices differ, and so do their sums' trees and the last bits of d):
 *
 * held_floats keeps every value as f32 (any dtype): v is s = x * scale, then for softmax
 * e = exp(s - m_own) in place (one exp per element), stored as e * e^(m_own - m) / d.
 *
 * held_bits keeps the inputs as their storage bits, 16 bytes a vector, and recomputes s (and e)
 * from them in each pass: for 16-bit inputs a block holds twice the columns of a held_floats
 * block in the same registers; for f32 inputs the same columns with the same expressions (one
 * exp more per element, at the store), as bits the pipelined kernel can park in shared memory
 * and store from there (store_parked). A block's life has a fixed part that moves no data
 * (ticket, then two block reductions and the exchange, before the exchange became published
 * words; ~3 us on an H100 under ncu), and with f32-held 16-bit slices of 8192 columns it was
 * ~40 % of it: ncu measured 1024x131072 f16 at 61.6 % of DRAM bandwidth against f32's 78.2 %
 * with the same kernel, whose slices move twice the bytes per block. */
template <int DT, int TPB, int ITEMS, bool SHIFTED = false> struct held_floats {
    static constexpr int COLS = TPB * ITEMS;
    float v[ITEMS];
    int head; /* SHIFTED: the row's columns before it in the shifted layout (sum() sets it) */

    /* SHIFTED (rows not 16-byte aligned): slice s covers columns [s COLS, (s + 1) COLS) of the
     * row's shifted layout (shifted_row), so every whole vector is a 16-byte load and store;
     * the host plans slices over cols + 16 / bytes - 1 columns. Else the row's own columns, with
     * element loads where x_vec_ok says the rows are not aligned. */
    FC_DEVICE float sum(const fc_softmax_args &a, int row, int slice, float &m) {
        constexpr int NV = ITEMS / dtype_io<DT>::vec;
        const char *x_row = row_ptr(a.x, row, a.x_stride, dtype_io<DT>::bytes);
        if constexpr (SHIFTED) {
            int64_t h;
            const char *base = shifted_row(x_row, dtype_io<DT>::bytes, h);
            head = (int)h;
            load_slice<DT, TPB, NV, true>(base, slice * (int64_t)COLS, a.cols + h, threadIdx.x,
                                          true, a.scale, v, h);
        } else {
            load_slice<DT, TPB, NV>(x_row, slice * (int64_t)COLS, a.cols, threadIdx.x, a.x_vec_ok,
                                    a.scale, v);
        }
        m = -INFINITY;
#pragma unroll
        for (int i = 0; i < ITEMS; i++) m = fmaxf(m, v[i]);
        return thread_exp_sum<DT, ITEMS>(v, subtrahend(m), a.log != 0);
    }

    FC_DEVICE void store(const fc_softmax_args &a, int row, int slice, float m, float2 r) {
        constexpr int VEC = dtype_io<DT>::vec, NV = ITEMS / VEC;
        const bool log = a.log != 0;
        const int y_bytes = a.y_dtype == FC_F32 ? 4 : 2;
        finish_values<ITEMS>(v, log, r.x, log ? 0.0f : chunk_factor(m, r.x, r.y),
                             log ? logf(r.y) : 0.0f);
        char *y_row = row_ptr(a.y, row, a.y_stride, y_bytes);
        if constexpr (SHIFTED) {
            /* y in x's shifted layout: its vector stores need the boundary that x's head puts
             * before y's row aligned for them (as it is when x and y have one element offset and
             * stride), else it stores element by element */
            char *base = y_row - (int64_t)head * y_bytes;
            store_slice<VEC, TPB, NV, false, true>(base, slice * (int64_t)COLS, a.cols + head,
                                                   threadIdx.x, a.y_dtype,
                                                   vector_store_aligned<VEC>(base, y_bytes),
                                                   false, v, head);
        } else {
            store_slice<VEC, TPB, NV, false>(y_row, slice * (int64_t)COLS, a.cols, threadIdx.x,
                                             a.y_dtype, a.y_vec_ok,
                                             element_lanes<DT>(a.x_vec_ok), v);
        }
    }
};

template <int DT, int TPB, int ITEMS, bool SHIFTED = false> struct held_bits {
    static constexpr int VEC = dtype_io<DT>::vec, NV = ITEMS / VEC, COLS = TPB * ITEMS;
    static_assert(NV * VEC == ITEMS, "held_bits holds whole 16-byte vectors");
    static_assert(!SHIFTED || DT != FC_F32, "the shifted form holds 16-bit inputs");
    /* SHIFTED (16-bit rows that do not start 16-byte aligned, or whose length is not a multiple
     * of VEC): the slices cover the row's shifted layout (shifted_row), columns [0, cols + head)
     * counted from the 16-byte boundary at or before the row, so that every vector is one
     * 16-byte load. The row's first vector may begin before it and its last one end past it;
     * sum() overwrites those elements' bits with the infinity whose scaled value is -inf, which
     * leaves the max and the sum as they are, and the stores skip them (element by element in
     * those two vectors, and wherever y's shifted layout is not aligned for vector stores). */
    /* Vector k: columns origin + (k * TPB + t) * VEC .. + VEC (load_slice's layout). The host
     * takes these kernels only for rows whose x and y start 16-byte aligned and whose length is
     * a multiple of VEC, so that a vector lies wholly inside the row or wholly past its end:
     * no element-wise path, whose loads ptxas would schedule side by side and spill; passes skip
     * the vectors past the end rather than select -inf for them, which made ptxas keep 64 such
     * constants in registers and spill (f16, sm_90a). */
    uint4 raw[NV];

    /* Columns of the row (its shifted layout's, head columns before it) from this thread's
     * first one in `slice` on (may be <= 0). */
    static FC_DEVICE int64_t room_of(const fc_softmax_args &a, int slice, int head = 0) {
        return a.cols + head - (slice * (int64_t)COLS + (int64_t)threadIdx.x * VEC);
    }
    /* The columns x's row r has before it in its shifted layout (0 unless SHIFTED). */
    static FC_DEVICE int head_of(const fc_softmax_args &a, int row) {
        if constexpr (SHIFTED)
            return (int)row_head(row_ptr(a.x, row, a.x_stride, dtype_io<DT>::bytes),
                                 dtype_io<DT>::bytes);
        return 0;
    }
    /* SHIFTED: the bits of a vector whose elements [lo, hi) are loaded from e and the others
     * are `pad`. */
    static FC_DEVICE uint4 part_bits(const unsigned short *e, int lo, int hi, unsigned pad) {
        unsigned u[VEC];
#pragma unroll
        for (int i = 0; i < VEC; i++) u[i] = i >= lo && i < hi ? (unsigned)e[i] : pad;
        return make_uint4(u[0] | u[1] << 16, u[2] | u[3] << 16, u[4] | u[5] << 16, u[6] | u[7] << 16);
    }
    static FC_DEVICE bool inside(int k, int64_t room) { return k * TPB * VEC < room; }

    /* f(k, scaled values s of vector k) for every vector inside the row, in order, the bits of
     * vector k being bits(k). Vectors past the row are skipped by every pass: as -inf
     * (load_slice's value there) they would leave the max, the sum (+0) and the stores as they
     * are. */
    template <typename B, typename F>
    static FC_DEVICE void each_vector(B bits, int64_t room, float scale, F f) {
        /* 16-bit inputs at scale 1, softmax's usual case, skip the multiply: x * 1 is x, bit
         * for bit (the kernels round to nearest without flushing subnormals), so only the
         * instructions change. The branch is uniform across the grid. Not for f32, whose
         * merged pipelined kernel then spilled 8 bytes at its 64-register cap (sm_90a). For
         * 16-bit inputs it is what keeps the merged pipelined kernel from spilling: with the
         * scaled path alone it spills 12 bytes there (f16 and bf16, sm_90a, nvcc 13), with
         * both 0 (see the kernel's instances). */
        if (DT != FC_F32 && scale == 1.0f) each_vector_scaled<false>(bits, room, scale, f);
        else each_vector_scaled<true>(bits, room, scale, f);
    }
    template <bool SCALED, typename B, typename F>
    static FC_DEVICE void each_vector_scaled(B bits, int64_t room, float scale, F f) {
#pragma unroll
        for (int k = 0; k < NV; k++) {
            if (!inside(k, room)) continue;
            float o[VEC];
            dtype_io<DT>::unpack(bits(k), o);
            if constexpr (SCALED) {
#pragma unroll
                for (int e = 0; e < VEC; e++) o[e] = __fmul_rn(o[e], scale);
            }
            f(k, o);
        }
    }

    /* 16-bit inputs: the max (MAX) or min of the held values, taken on the bits two at a time
     * (max.f16x2 / max.bf16x2 skip NaN as fmaxf does) and widened once; -inf (MAX) or +inf when
     * the thread holds nothing. Rounding is monotonic, so max(x) * scale for scale >= 0, or
     * min(x) * scale below, is exactly the max of the scaled values, without a widening and a
     * multiply per element. */
    template <bool MAX> FC_DEVICE float packed_extreme(int64_t room) const {
        constexpr bool F16 = DT == FC_F16;
        constexpr unsigned none = MAX ? (F16 ? 0xfc00fc00u : 0xff80ff80u)   /* -inf, -inf */
                                      : (F16 ? 0x7c007c00u : 0x7f807f80u);  /* +inf, +inf */
        unsigned acc[4] = {none, none, none, none};
#pragma unroll
        for (int k = 0; k < NV; k++) {
            if (!inside(k, room)) continue;
            const unsigned w[4] = {raw[k].x, raw[k].y, raw[k].z, raw[k].w};
#pragma unroll
            for (int i = 0; i < 4; i++) acc[i] = pair_extreme<MAX, F16>(acc[i], w[i]);
        }
        const unsigned p = pair_extreme<MAX, F16>(pair_extreme<MAX, F16>(acc[0], acc[1]),
                                                  pair_extreme<MAX, F16>(acc[2], acc[3]));
        float o[VEC];
        dtype_io<DT>::unpack(make_uint4(p, p, p, p), o);
        return MAX ? fmaxf(o[0], o[1]) : fminf(o[0], o[1]);
    }
    template <bool MAX, bool F16> static FC_DEVICE unsigned pair_extreme(unsigned a, unsigned b) {
        unsigned r;
        if constexpr (MAX && F16) asm("max.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
        else if constexpr (MAX) asm("max.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
        else if constexpr (F16) asm("min.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
        else asm("min.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
        return r;
    }

    FC_DEVICE float sum(const fc_softmax_args &a, int row, int slice, float &m) {
        const int head = head_of(a, row);
        const int64_t room = room_of(a, slice, head);
        const uint4 *p = reinterpret_cast<const uint4 *>(
            row_ptr(a.x, row, a.x_stride, dtype_io<DT>::bytes) +
            (a.cols - room) * dtype_io<DT>::bytes);
        const bool first_part = SHIFTED && slice == 0 && threadIdx.x == 0 && head > 0;
#pragma unroll
        for (int k = 0; k < NV; k++) /* whole vectors (SHIFTED: those wholly in the row) */
            raw[k] = inside(k, room) && (!SHIFTED || (k * TPB * VEC + VEC <= room &&
                                                      (k > 0 || !first_part)))
                         ? p[k * TPB]
                         : make_uint4(0u, 0u, 0u, 0u);
        if constexpr (SHIFTED) {
            /* The row's first and last vectors, element by element (no load outside the row),
             * padded with the infinity that scales to -inf (the host never passes scale 0). */
            const unsigned pad = a.scale >= 0.0f ? (DT == FC_F16 ? 0xfc00u : 0xff80u)
                                                 : (DT == FC_F16 ? 0x7c00u : 0x7f80u);
            const unsigned short *e16 = reinterpret_cast<const unsigned short *>(p);
            if (first_part) raw[0] = part_bits(e16, head, room < VEC ? (int)room : VEC, pad);
            const int64_t last = (room - 1) / (TPB * VEC); /* the vector holding the row's end */
            const int end = (int)(room - last * TPB * VEC);
            if (room > 0 && last < NV && end < VEC && !(first_part && last == 0)) {
                const uint4 w = part_bits(e16 + last * TPB * VEC, 0, end, pad);
#pragma unroll
                for (int k = 0; k < NV; k++)
                    if (k == last) raw[k] = w;
            }
        }
        const auto mine = [&](int k) { return raw[k]; };
        m = -INFINITY;
        if constexpr (DT == FC_F32) {
            each_vector(mine, room, a.scale, [&](int, float(&o)[VEC]) {
#pragma unroll
                for (int e = 0; e < VEC; e++) m = fmaxf(m, o[e]);
            });
        } else {
            m = a.scale >= 0.0f ? __fmul_rn(packed_extreme<true>(room), a.scale)
                                : __fmul_rn(packed_extreme<false>(room), a.scale);
        }
        const float s = subtrahend(m); /* thread_exp_sum's terms, in its order */
        float d = 0.0f;
        each_vector(mine, room, a.scale, [&](int, float(&o)[VEC]) {
#pragma unroll
            for (int e = 0; e < VEC; e++) d += softmax_exp_summed<DT>(o[e] - s);
        });
        return d;
    }

    /* The held bits to this thread's places in `parked` (vector k at k * TPB + thread: a warp's
     * 16-byte stores are contiguous), where store_parked finds them. */
    FC_DEVICE void park(uint4 *parked) const {
#pragma unroll
        for (int k = 0; k < NV; k++) parked[k * TPB + threadIdx.x] = raw[k];
    }

    /* Writes slice `slice` of `row` normalised with the row's (max, sum) r; m is the thread's
     * own max from sum(). store() takes the values from the registers, store_parked() from this
     * thread's places in `parked`. */
    FC_DEVICE void store(const fc_softmax_args &a, int row, int slice, float m, float2 r) const {
        store_from([&](int k) { return raw[k]; }, a, row, slice, m, r);
    }
    static FC_DEVICE void store_parked(const fc_softmax_args &a, int row, int slice, float m,
                                       float2 r, const uint4 *parked) {
        store_from([&](int k) { return parked[k * TPB + threadIdx.x]; }, a, row, slice, m, r);
    }

    template <typename B>
    static FC_DEVICE void store_from(B bits, const fc_softmax_args &a, int row, int slice,
                                     float m, float2 r) {
        char *y = row_ptr(a.y, row, a.y_stride, a.y_dtype == FC_F32 ? 4 : 2);
        if (a.y_dtype == FC_F32) store_as<FC_F32>(bits, a, y, row, slice, m, r);
        else if (a.y_dtype == FC_F16) store_as<FC_F16>(bits, a, y, row, slice, m, r);
        else store_as<FC_BF16>(bits, a, y, row, slice, m, r);
    }

    /* finish_values' expressions on e = exp(s - m_own) (softmax) or s (log), vector by vector. */
    template <int YT, typename B>
    static FC_DEVICE void store_as(B bits, const fc_softmax_args &a, char *y, int row, int slice,
                                   float m, float2 r) {
        constexpr int YBYTES = YT == FC_F32 ? 4 : 2;
        const bool log = a.log != 0;
        const float factor = log ? 0.0f : chunk_factor(m, r.x, r.y);
        const float log_d = log ? logf(r.y) : 0.0f;
        const float s_own = subtrahend(m), s_row = subtrahend(r.x);
        const int head = head_of(a, row);
        const int64_t room = room_of(a, slice, head);
        char *p = y + (a.cols - room) * YBYTES; /* this thread's first vector, as in sum() */
        /* SHIFTED: y in x's shifted layout, vector stores where its boundary allows them */
        const bool y_ok = !SHIFTED || vector_store_aligned<VEC>(y - (int64_t)head * YBYTES, YBYTES);
        each_vector(bits, room, a.scale, [&](int k, float(&o)[VEC]) {
#pragma unroll
            for (int e = 0; e < VEC; e++)
                o[e] = log ? (o[e] - s_row) - log_d : softmax_exp_stored<DT, YT>(o[e] - s_own) * factor;
            char *q = p + k * TPB * VEC * YBYTES;
            if constexpr (SHIFTED) {
                /* the vector's columns [lo, hi) that lie in the row */
                const int64_t left = room - (int64_t)k * TPB * VEC;
                const int lo = slice == 0 && threadIdx.x == 0 && k == 0 ? head : 0;
                const int hi = left < VEC ? (int)left : VEC;
                if (!y_ok || lo > 0 || hi < VEC) {
#pragma unroll
                    for (int e = 0; e < VEC; e++)
                        if (e >= lo && e < hi) store_one(q + e * YBYTES, YT, o[e]);
                    return;
                }
            }
            store_vec<VEC, false>(q, YT, o);
        });
    }
};
