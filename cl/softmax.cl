/* cl/softmax.cl — softmax / log-softmax over the last dimension of a strided 2-D view.
 *
 *   x [rows, cols] (row stride x_stride elements, first element at x_off) -> y (same shape)
 *   s = x * scale (in f32);  y = exp(s - m) / d   or   y = (s - m) - log(d)
 *   m = max(s), d = sum(exp(s - m)), accumulated in f32.
 *
 * Special values follow torch: -inf entries give 0 (log: -inf); a row holding NaN or +inf, or
 * nothing but -inf, comes out all NaN (this falls out of the arithmetic: fmax skips NaN but the
 * NaN reaches d through exp; +inf - +inf is NaN; an all -inf row has m = -inf and s - m = NaN).
 *
 * Variants (src/opencl/softmax_plan.c picks one):
 *   softmax_rows_in_registers_X_Y — a team of `team` work-items holds a row in private
 *       memory as raw 16-byte chunks: one read, one write. Several teams share a work-group
 *       when rows are short.
 *   softmax_rows_held8_X_Y, softmax_rows_held16_X_Y — the same with 8 or 16 elements per
 *       work-item held as floats: one conversion and one exp per element;
 *       softmax_rows_held32_X_Y (16-bit X only) with 32, as many bytes per work-item as 16
 *       f32 elements; softmax_rows_held12_X_Y (f32 X) and softmax_rows_held24_X_Y (16-bit X)
 *       with three chunks of those four, for rows that leave the fourth empty.
 *   softmax_online_chunked_X_Y — a work-group per row of any length: pass 1 streams the row
 *       keeping an online (m, d) per item, pass 2 re-reads it (from the cache) and writes.
 *   softmax_split_row_partials_X + softmax_split_row_normalize_X_Y — few long rows: each
 *       work-group reduces one slice of a row to (m, d); then each work-group merges its row's
 *       partials in a fixed order and normalises its slice.
 *   softmax_split_row_cooperative_X_Y (FC_COOP, GPUs only, cl/softmax_cooperative.cl) — split
 *       row in one kernel: each slice stays in registers while the row's work-groups exchange
 *       (m, d) through atomics; softmax_split_row_cooperative_bits64/128_X_Y (16-bit X on
 *       NVIDIA, cl/softmax_cooperative_bits.cl) holds the slices as their bits, and
 *       softmax_split_row_pipelined_X_Y (cl/softmax_pipelined.cl) parks one slice in local
 *       memory while it loads the next, for rows of many slices.
 *   softmax_split_row_ordered_X_Y (FC_ORDERED, cl/softmax_ordered.cl) — split row in one
 *       kernel whose work-groups are ordered by tickets so that a slice's second read hits
 *       the cache.
 * X, Y in f32, f16, bf16: every (input, output) pair is instantiated in cl/softmax_kernels.cl,
 * for the input dtypes FC_DTYPES selects (cl/dtype.h). On GPUs the rows held and the
 * cooperative split row also come as *_aligned twins for rows that start 16-byte aligned
 * (FC_ALIGNED_KERNELS, there).
 *
 * Elements move in 16-byte chunks of n = 4 (f32) or 8 (f16, bf16) input elements: work-item
 * `i` of a team of `w` takes elements n*(i + k*w) .. +n-1 for k = 0, 1, ... With `vec` set (row
 * starts and strides of x and y are multiples of n elements) a chunk is one vector access;
 * otherwise one access per element. */
#ifndef FLASHCL_EMBEDDED
#include "portability.h"
#include "dtype.h"
#include "softmax_exp.h"
#endif

/* 16-byte chunks each work-item holds in rows_in_registers: 16 f32 or 32 f16/bf16 elements. */
#ifndef FC_RIR_CHUNKS
#define FC_RIR_CHUNKS 4
#endif
/* Chunks each work-item loads per step of the streaming loops (loads in flight). */
#ifndef FC_STREAM_UNROLL
#define FC_STREAM_UNROLL 4
#endif
/* 1: build softmax_split_row_cooperative_* (needs 64-bit global atomics). */
#ifndef FC_COOP
#define FC_COOP 0
#endif
/* 1 (NVIDIA sm_70+): waiting work-groups of the cooperative split row sleep between polls,
 * leaving the memory system to the groups that still load. */
#ifndef FC_NV_SLEEP
#define FC_NV_SLEEP 0
#endif

FC_INLINE float fc_max4(float4 v)
{
    return fmax(fmax(v.x, v.y), fmax(v.z, v.w));
}

FC_INLINE float fc_sum4(float4 v)
{
    return (v.x + v.y) + (v.z + v.w);
}

/* -inf for the elements at or past `end`: neutral for the max and the sum of exp. Applied
 * after scaling, which may be negative. */
FC_INLINE float4 fc_mask4(float4 s, uint j, uint end)
{
    if (j + 4 <= end)
        return s;
    s.x = j < end ? s.x : -INFINITY;
    s.y = j + 1 < end ? s.y : -INFINITY;
    s.z = j + 2 < end ? s.z : -INFINITY;
    s.w = -INFINITY;
    return s;
}

/* -inf for the elements before `low` (elements j .. j + 3): what a shifted row's layout puts
 * before the row (the cooperative split row). */
FC_INLINE float4 fc_mask_below4(float4 s, uint j, uint low)
{
    s.x = j < low ? -INFINITY : s.x;
    s.y = j + 1 < low ? -INFINITY : s.y;
    s.z = j + 2 < low ? -INFINITY : s.z;
    s.w = j + 3 < low ? -INFINITY : s.w;
    return s;
}

/* s = x * scale for quad h (elements j + 4h ..) of a chunk at element j; -inf past `end`
 * unless the caller knows the chunk is complete. */
FC_INLINE float4 fc_quad_s(const int dt, uint4 raw, uint h, float scale, uint j, uint end,
                           int complete)
{
    const float4 s = fc_chunk_quad(dt, raw, h) * scale;
    return complete ? s : fc_mask4(s, j + 4 * h, end);
}

/* A complete chunk: no bounds checks. */
FC_INLINE uint4 fc_chunk_load_all(const int dt, const __global void *row, uint j, int vec)
{
    return fc_chunk_load(dt, row, j, j + FC_CHUNK(dt), vec);
}

/* The normalised value of s given the row's merged (m, d). (s - m) comes first: exact for
 * nearby values, so large inputs (~1000) lose nothing. */
FC_INLINE float4 fc_normalize4(const int ydt, float4 s, float m, float inv_d, float log_d,
                               int log_mode)
{
    return log_mode ? (s - m) - log_d : FC_EXP_OUT(ydt, s - m) * inv_d;
}

/* ---- streaming (online chunked, split row, cooperative tail) ---------------------------------
 * A work-group walks elements [begin, end) of a row (begin a multiple of FC_CHUNK), each
 * work-item FC_STREAM_UNROLL chunks per step; all loads of a step are issued before any use, and
 * all steps but the last need no bounds checks. */
FC_INLINE int fc_stream_load(const int dt, uint4 *raw, const __global void *row, uint j0,
                             uint end, int vec, uint width)
{
    const uint n = FC_CHUNK(dt);
    const int complete = j0 + n * width * (FC_STREAM_UNROLL - 1) + n <= end;
    if (complete) {
#pragma unroll
        for (uint u = 0; u < FC_STREAM_UNROLL; ++u)
            raw[u] = fc_chunk_load_all(dt, row, j0 + n * width * u, vec);
    } else {
#pragma unroll
        for (uint u = 0; u < FC_STREAM_UNROLL; ++u)
            raw[u] = fc_chunk_load(dt, row, j0 + n * width * u, end, vec);
    }
    return complete;
}

/* (m, d) of this work-item's share of [begin, end): one rescale of d per step. */
FC_INLINE float2 fc_stream_md(const int dt, const __global void *row, uint begin, uint end,
                              float scale, int vec, uint lid, uint width)
{
    const uint n = FC_CHUNK(dt);
    float m = -INFINITY, d = 0.0f;
    for (uint j0 = begin + n * lid; j0 < end; j0 += n * width * FC_STREAM_UNROLL) {
        uint4 raw[FC_STREAM_UNROLL];
        const int complete = fc_stream_load(dt, raw, row, j0, end, vec, width);
        float block_max = -INFINITY;
#pragma unroll
        for (uint u = 0; u < FC_STREAM_UNROLL; ++u)
            for (uint h = 0; h < n / 4; ++h)
                block_max = fmax(block_max, fc_max4(fc_quad_s(dt, raw[u], h, scale,
                                                              j0 + n * width * u, end, complete)));
        const float mx = fmax(m, block_max), ref = fc_md_ref(mx);
        float block_sum = 0.0f;
#pragma unroll
        for (uint u = 0; u < FC_STREAM_UNROLL; ++u)
            for (uint h = 0; h < n / 4; ++h)
                block_sum += fc_sum4(FC_EXP_SUM(
                    fc_quad_s(dt, raw[u], h, scale, j0 + n * width * u, end, complete) - ref));
        d = d * exp(m - ref) + block_sum;
        m = mx;
    }
    return (float2)(m, d);
}

/* Pass 2: re-reads [begin, end) and writes it normalised by the row's (m, d); `streaming`
 * (a literal) asks for evict-first stores where the device has them (FC_STREAM_STORES). */
FC_INLINE void fc_stream_normalize_as(const int xdt, const int ydt, const __global void *xrow,
                                      __global void *yrow, uint begin, uint end, float scale,
                                      float2 md, int log_mode, int vec, uint lid, uint width,
                                      const int streaming)
{
    const uint n = FC_CHUNK(xdt);
    const float inv_d = 1.0f / md.y, log_d = log(md.y);
    for (uint j0 = begin + n * lid; j0 < end; j0 += n * width * FC_STREAM_UNROLL) {
        uint4 raw[FC_STREAM_UNROLL];
        fc_stream_load(xdt, raw, xrow, j0, end, vec, width);
#pragma unroll
        for (uint u = 0; u < FC_STREAM_UNROLL; ++u) {
            const uint j = j0 + n * width * u;
            const float4 q0 = fc_normalize4(ydt, fc_chunk_quad(xdt, raw[u], 0) * scale, md.x,
                                            inv_d, log_d, log_mode);
            const float4 q1 = n == 8 ? fc_normalize4(ydt, fc_chunk_quad(xdt, raw[u], 1) * scale,
                                                     md.x, inv_d, log_d, log_mode)
                                     : q0;
            fc_chunk_store_as(xdt, ydt, yrow, j, end, q0, q1, vec, streaming);
        }
    }
}

FC_INLINE void fc_stream_normalize(const int xdt, const int ydt, const __global void *xrow,
                                   __global void *yrow, uint begin, uint end, float scale,
                                   float2 md, int log_mode, int vec, uint lid, uint width)
{
    fc_stream_normalize_as(xdt, ydt, xrow, yrow, begin, end, scale, md, log_mode, vec, lid, width,
                           0);
}

/* ---- registers: the shared core of rows_in_registers and the cooperative split row ---------
 * A work-item holds `chunks` chunks of a row (or slice): chunk c at element
 * begin + n * (lane + c * team), n = FC_CHUNK. Chunk c is complete for every lane of the team
 * when begin + n * team * (c + 1) <= end, a test the whole team agrees on, so only the last
 * chunk pays for bounds checks. */
#define FC_REG_J(c) (begin + n * (lane + (c) * team))
#define FC_REG_COMPLETE(c) (begin + n * team * ((c) + 1) <= end)

/* `all` (a literal): the caller knows every chunk is complete. Elements before `low` (< n, so
 * only in a chunk at element 0: a shifted row's first, see fc_shift_head) are not read. */
FC_INLINE void fc_reg_load(const int dt, uint4 *raw, const uint chunks, const __global void *row,
                           uint begin, uint end, uint lane, uint team, int vec, const int all,
                           uint low)
{
    const uint n = FC_CHUNK(dt);
#pragma unroll
    for (uint c = 0; c < chunks; ++c)
        raw[c] = c == 0 && FC_REG_J(0) < low ? fc_chunk_gather(dt, row, 0u, low, end)
                 : all || FC_REG_COMPLETE(c) ? fc_chunk_load_all(dt, row, FC_REG_J(c), vec)
                                             : fc_chunk_load(dt, row, FC_REG_J(c), end, vec);
}

FC_INLINE float fc_reg_max(const int dt, const uint4 *raw, const uint chunks, float scale,
                           uint begin, uint end, uint lane, uint team)
{
    const uint n = FC_CHUNK(dt);
    float m = -INFINITY;
#pragma unroll
    for (uint c = 0; c < chunks; ++c)
        for (uint h = 0; h < n / 4; ++h)
            m = fmax(m, fc_max4(fc_quad_s(dt, raw[c], h, scale, FC_REG_J(c), end,
                                          FC_REG_COMPLETE(c))));
    return m;
}

/* sum(exp(s - ref)); with `keep` (f32 only: an exp fits where its input was) the exps replace
 * the raw data, so the output pass needs no second exp. */
FC_INLINE float fc_reg_sum(const int dt, uint4 *raw, const uint chunks, float scale, float ref,
                           int keep, uint begin, uint end, uint lane, uint team)
{
    const uint n = FC_CHUNK(dt);
    float d = 0.0f;
#pragma unroll
    for (uint c = 0; c < chunks; ++c)
        for (uint h = 0; h < n / 4; ++h) {
            const float4 s = fc_quad_s(dt, raw[c], h, scale, FC_REG_J(c), end,
                                       FC_REG_COMPLETE(c)) - ref;
            const float4 e = dt == FC_F32 && keep ? FC_EXP(s) : FC_EXP_SUM(s);
            d += fc_sum4(e);
            if (dt == FC_F32 && keep)
                raw[c] = as_uint4(e);
        }
    return d;
}

/* Writes the held elements normalised by the row's (m, d); `kept` as in fc_reg_sum. */
FC_INLINE void fc_reg_store(const int xdt, const int ydt, const uint4 *raw, const uint chunks,
                            __global void *yrow, float scale, float2 md, int log_mode, int kept,
                            uint begin, uint end, uint lane, uint team, int vec)
{
    const uint n = FC_CHUNK(xdt);
    const float inv_d = 1.0f / md.y, log_d = log(md.y);
#pragma unroll
    for (uint c = 0; c < chunks; ++c) {
        float4 q[2];
        for (uint h = 0; h < n / 4; ++h)
            q[h] = xdt == FC_F32 && kept
                       ? as_float4(raw[c]) * inv_d
                       : fc_normalize4(ydt, fc_chunk_quad(xdt, raw[c], h) * scale, md.x, inv_d,
                                       log_d, log_mode);
        fc_chunk_store(xdt, ydt, yrow, FC_REG_J(c), end, q[0], n == 8 ? q[1] : q[0], vec);
    }
}

/* ---- row in registers --------------------------------------------------------------------- */

/* A team of `team` work-items holds a row, FC_RIR_CHUNKS chunks each; a work-group holds
 * get_local_size(0) / team rows. All items take part in the reductions, also those past the
 * last row (no early return). */
FC_INLINE void fc_rows_in_registers(const int xdt, const int ydt, const __global void *x,
                                    ulong x_off, ulong x_stride, __global void *y, ulong y_off,
                                    ulong y_stride, ulong rows, uint cols, float scale,
                                    int log_mode, uint team, int vec, __local float *scratch)
{
    const uint lid = get_local_id(0), lane = lid & (team - 1u);
    const ulong row = (ulong)get_group_id(0) * (get_local_size(0) / team) + lid / team;
    const uint end = row < rows ? cols : 0u;
    uint4 raw[FC_RIR_CHUNKS];

    fc_reg_load(xdt, raw, FC_RIR_CHUNKS, fc_row(xdt, x, x_off + row * x_stride), 0, end, lane,
                team, vec, 0, 0u);
    const float m = fc_team_max(fc_reg_max(xdt, raw, FC_RIR_CHUNKS, scale, 0, end, lane, team),
                                team, scratch);
    const float d = fc_team_sum(fc_reg_sum(xdt, raw, FC_RIR_CHUNKS, scale, m, !log_mode, 0, end,
                                           lane, team),
                                team, scratch);
    fc_reg_store(xdt, ydt, raw, FC_RIR_CHUNKS, fc_row_w(ydt, y, y_off + row * y_stride), scale,
                 (float2)(m, d), log_mode, !log_mode, 0, end, lane, team, vec);
}

/* ---- the shifted layout (the host's vec == 2) ------------------------------------------------
 * Rows that do not start 16-byte aligned, in the rows held and the cooperative split row: a
 * row's columns are counted from the chunk boundary at or before it, `head` elements before the
 * row, so that every whole chunk is one 16-byte access (the host plans the row n - 1 longer).
 * Only the first chunk of a row reaches before it, and its loads and stores skip those elements
 * (fc_reg_load, fc_held_store), which hold -inf. x_at and y_at are the row's first elements. */
FC_INLINE uint fc_shift_head(int vec, ulong x_at, uint n)
{
    return vec == 2 ? (uint)(x_at % n) : 0u;
}

/* Whether y's row takes 16-byte stores: aligned rows (vec 1), or in x's shifted layout where
 * x's head leaves y's row aligned for them (always when x and y share an element offset and
 * stride); else element stores. */
FC_INLINE int fc_shift_y_vec(int vec, ulong y_at, uint head, const int ydt, uint n)
{
    return vec == 1 || (vec == 2 && (y_at - head) % (ydt == FC_F32 ? 4u : n) == 0);
}

/* ---- rows held as floats (rows_held8/12/16/24/32, and the cooperative split row) ----------
 * As above, but each work-item holds `elems` (8, 12, 16, 24 or 32, a literal) elements as scaled
 * floats, converted once, with the exps kept in place: 16-bit data pays one conversion and one
 * exp per element (the raw-bits kernel above pays three and two, which made it compute-bound on
 * 16-bit data). 16 floats is the register footprint of the raw kernel on f32; 8 serves short
 * rows with twice the work-items (more loads in flight for the same bytes). */
#if defined(FC_COOP_ELEMS) && FC_COOP_ELEMS > 32 /* the cooperative split's (NVIDIA, 16-bit) */
#define FC_HELD_MAX FC_COOP_ELEMS
#else
#define FC_HELD_MAX 32
#endif

/* Loads this work-item's elements of [begin, end) as s = x * scale (-inf past end) into v
 * (quad q = elements 4 (q % (n / 4)) .. of chunk q / (n / 4)); returns their max. All loads are
 * issued before any conversion. `all` (a literal): every chunk of the team is complete, so no
 * bounds test or mask is compiled in. */
FC_INLINE float fc_held_load_as(const int dt, float4 *v, const uint elems,
                                const __global void *row, uint begin, uint end, uint lane,
                                uint team, float scale, int vec, const int all, uint low)
{
    const uint n = FC_CHUNK(dt), chunks = elems / n;
    uint4 raw[FC_HELD_MAX / 4];
    fc_reg_load(dt, raw, chunks, row, begin, end, lane, team, vec, all, low);
    float m = -INFINITY;
#pragma unroll
    for (uint c = 0; c < chunks; ++c)
        for (uint h = 0; h < n / 4; ++h) {
            float4 s = fc_quad_s(dt, raw[c], h, scale, FC_REG_J(c), end, all || FC_REG_COMPLETE(c));
            if (c == 0 && FC_REG_J(0) < low)
                s = fc_mask_below4(s, 4 * h, low);
            v[c * (n / 4) + h] = s;
            m = fmax(m, fc_max4(s));
        }
    return m;
}

/* The element layout of rows not aligned for 16-byte accesses (vec 0): element e of chunk c is
 * FC_LANE_J(c, e), so that each element access of a team covers `team` consecutive elements (a
 * warp's 32 16-bit stores: two 32-byte sectors) rather than `team` elements n apart, which made
 * every store instruction write parts of 16 sectors (H200 NVIDIA OpenCL, 32768x127 f16 0.0164 ms
 * against torch's 0.0105). Values are held as in fc_held_load_as (quad q: elements 4 (q % (n /
 * 4)) .. of chunk q / (n / 4)); fc_held_store writes them back in this layout when told. */
#define FC_LANE_J(c, e) (begin + n * team * (c) + team * (e) + lane)

FC_INLINE float fc_held_load_lanes(const int dt, float4 *v, const uint elems,
                                   const __global void *row, uint begin, uint end, uint lane,
                                   uint team, float scale)
{
    const uint n = FC_CHUNK(dt), chunks = elems / n;
    float m = -INFINITY;
#pragma unroll
    for (uint c = 0; c < chunks; ++c)
        for (uint h = 0; h < n / 4; ++h) {
            float s[4];
            for (uint i = 0; i < 4; ++i) {
                const uint j = FC_LANE_J(c, 4 * h + i);
                s[i] = j < end ? fc_load(dt, row, j) * scale : -INFINITY;
            }
            v[c * (n / 4) + h] = (float4)(s[0], s[1], s[2], s[3]);
            m = fmax(m, fc_max4(v[c * (n / 4) + h]));
        }
    return m;
}

/* fc_held_load_as, with the complete case (the usual one: team-sized multiples) compiled on
 * its own: per element, the bounds-tested form costs a select and each chunk a branch. Elements
 * before `low` (< FC_CHUNK: only in a chunk at element 0, the first of a shifted row) are not
 * read and hold -inf. Without `vec`, the element layout (fc_held_load_lanes). */
FC_INLINE float fc_held_load(const int dt, float4 *v, const uint elems, const __global void *row,
                             uint begin, uint end, uint lane, uint team, float scale, int vec,
                             uint low)
{
    if (!vec)
        return fc_held_load_lanes(dt, v, elems, row, begin, end, lane, team, scale);
    if (begin + team * elems <= end)
        return fc_held_load_as(dt, v, elems, row, begin, end, lane, team, scale, vec, 1, low);
    return fc_held_load_as(dt, v, elems, row, begin, end, lane, team, scale, vec, 0, low);
}

/* sum(exp(v - ref)); unless log_mode the exps replace v (to be written as ydt). */
FC_INLINE float fc_held_exp_sum(const int ydt, float4 *v, const uint elems, float ref,
                                int log_mode)
{
    float d = 0.0f;
#pragma unroll
    for (uint q = 0; q < elems / 4; ++q) {
        const float4 e = FC_EXP_OUT(ydt, v[q] - ref);
        d += fc_sum4(e);
        if (!log_mode)
            v[q] = e;
    }
    return d;
}

/* Writes the held elements: softmax v * factor (v holds exps), log-softmax (v - m) - log_d.
 * Elements before `low` (< FC_CHUNK, so only in a chunk at element 0: the first of a row in its
 * shifted layout, see fc_shift_head) are not written. `lanes`: v holds the element layout
 * (fc_held_load_lanes: x was loaded without vec), written element by element in it. */
/* Chunk c of fc_held_store, its values s0 (and s1: 16-bit chunks hold 8) given. */
FC_INLINE void fc_held_store_chunk(const int xdt, const int ydt, float4 s0, float4 s1, uint c,
                                   __global void *yrow, uint begin, uint end, uint lane,
                                   uint team, int vec, int lanes, int log_mode, float m,
                                   float factor, float log_d, uint low)
{
    const uint n = FC_CHUNK(xdt);
    const float4 q0 = log_mode ? (s0 - m) - log_d : s0 * factor;
    const float4 q1 = log_mode ? (s1 - m) - log_d : s1 * factor;
    if (lanes)
        fc_chunk_scatter(xdt, ydt, yrow, FC_LANE_J(c, 0), team, 0u, end, q0, q1);
    else if (FC_REG_J(c) < low)
        fc_chunk_scatter(xdt, ydt, yrow, 0u, 1u, low, end, q0, q1);
    else
        fc_chunk_store(xdt, ydt, yrow, FC_REG_J(c), end, q0, q1, vec);
}

FC_INLINE void fc_held_store(const int xdt, const int ydt, const float4 *v, const uint elems,
                             __global void *yrow, uint begin, uint end, uint lane, uint team,
                             int vec, int lanes, int log_mode, float m, float factor, float log_d,
                             uint low)
{
    const uint n = FC_CHUNK(xdt), chunks = elems / n;
#pragma unroll
    for (uint c = 0; c < chunks; ++c)
        fc_held_store_chunk(xdt, ydt, v[c * (n / 4)], n == 8 ? v[c * (n / 4) + 1] : v[c * (n / 4)],
                            c, yrow, begin, end, lane, team, vec, lanes, log_mode, m, factor,
                            log_d, low);
}

FC_INLINE void fc_rows_held(const int xdt, const int ydt, const uint elems, const __global void *x,
                            ulong x_off, ulong x_stride, __global void *y, ulong y_off,
                            ulong y_stride, ulong rows, uint cols, float scale, int log_mode,
                            uint team, int vec, __local float *scratch)
{
    const uint begin = 0, lid = get_local_id(0), lane = lid & (team - 1u);
    const ulong row = (ulong)get_group_id(0) * (get_local_size(0) / team) + lid / team;
    const ulong x_at = x_off + row * x_stride, y_at = y_off + row * y_stride;
    const uint n = FC_CHUNK(xdt);
    /* vec == 2: the shifted layout (fc_shift_head), the team sized for cols + n - 1; only lane
     * 0's first chunk reaches before the row */
    const uint head = row < rows ? fc_shift_head(vec, x_at, n) : 0u;
    const int y_vec = fc_shift_y_vec(vec, y_at, head, ydt, n);
    const uint end = row < rows ? cols + head : 0u;
    float4 v[FC_HELD_MAX / 4];

    float m = fc_held_load(xdt, v, elems, fc_row(xdt, x, x_at - head), begin, end, lane, team,
                           scale, vec != 0, head);
    m = fc_team_max(m, team, scratch);
    /* exp(v - m), not exp(v - fc_md_ref(m)): an all -inf row must give NaN. */
    const float d = fc_team_sum(fc_held_exp_sum(ydt, v, elems, m, log_mode), team, scratch);
    fc_held_store(xdt, ydt, v, elems, fc_row_w(ydt, y, y_at - head), begin, end, lane, team,
                  y_vec, vec == 0, log_mode, m, 1.0f / d, log(d), head);
}

/* ---- online chunked: work-groups loop over rows, one row at a time ------------------------- */
FC_INLINE void fc_online_chunked(const int xdt, const int ydt, const __global void *x, ulong x_off,
                                 ulong x_stride, __global void *y, ulong y_off, ulong y_stride,
                                 ulong rows, uint cols, float scale, int log_mode, int vec,
                                 __local float *scratch)
{
    const uint lid = get_local_id(0), width = get_local_size(0);
    for (ulong row = get_group_id(0); row < rows; row += get_num_groups(0)) {
        const __global void *xrow = fc_row(xdt, x, x_off + row * x_stride);
        float2 md = fc_stream_md(xdt, xrow, 0, cols, scale, vec, lid, width);
        md = fc_team_merge(md, width, scratch);
        fc_stream_normalize(xdt, ydt, xrow, fc_row_w(ydt, y, y_off + row * y_stride), 0, cols,
                            scale, md, log_mode, vec, lid, width);
    }
}

/* ---- split row: partial (m, d) per slice, then normalise ----------------------------------- */

/* Group g reduces slice g % slices of row g / slices into partials[g]. */
FC_INLINE void fc_split_row_partials(const int xdt, const __global void *x, ulong x_off,
                                     ulong x_stride, uint cols, uint slice_len, uint slices,
                                     float scale, int vec, __global float2 *partials,
                                     __local float *scratch)
{
    const uint lid = get_local_id(0), width = get_local_size(0);
    const ulong g = get_group_id(0), row = g / slices;
    const uint begin = (uint)(g % slices) * slice_len, end = min(cols, begin + slice_len);
    float2 md = fc_stream_md(xdt, fc_row(xdt, x, x_off + row * x_stride), begin, end, scale, vec,
                             lid, width);
    md = fc_team_merge(md, width, scratch);
    if (lid == 0)
        partials[g] = md;
}

/* Groups run in reverse slice order: the slices the partial pass read last are the likeliest
 * to still be in the cache. Every group of a row merges the same partials in the same order,
 * so all slices of a row are normalised by identical (m, d). */
FC_INLINE void fc_split_row_normalize(const int xdt, const int ydt, const __global void *x,
                                      ulong x_off, ulong x_stride, __global void *y, ulong y_off,
                                      ulong y_stride, uint cols, uint slice_len, uint slices,
                                      float scale, int log_mode, int vec,
                                      const __global float2 *partials, __local float *scratch)
{
    const uint lid = get_local_id(0), width = get_local_size(0);
    const ulong g = get_num_groups(0) - 1 - get_group_id(0), row = g / slices;
    const uint begin = (uint)(g % slices) * slice_len, end = min(cols, begin + slice_len);
    float2 md = (float2)(-INFINITY, 0.0f);
    for (uint i = lid; i < slices; i += width)
        md = fc_md_merge(md, partials[row * slices + i]);
    md = fc_team_merge(md, width, scratch);
    fc_stream_normalize(xdt, ydt, fc_row(xdt, x, x_off + row * x_stride),
                        fc_row_w(ydt, y, y_off + row * y_stride), begin, end, scale, md,
                        log_mode, vec, lid, width);
}

#define FC_PTR_ARGS(XT, YT)                                                                    \
    __global const XT *x, ulong x_off, ulong x_stride, __global YT *y, ulong y_off,            \
        ulong y_stride

/* (m, d) as one 64-bit word (m's bits high, d's low), for the split-row kernels that exchange
 * it through 64-bit atomics (here and in softmax_ordered.cl). */
FC_INLINE ulong fc_md_pack(float2 md)
{
    return ((ulong)as_uint(md.x) << 32) | (ulong)as_uint(md.y);
}

FC_INLINE float2 fc_md_unpack(ulong w)
{
    return (float2)(as_float((uint)(w >> 32)), as_float((uint)w));
}

#if FC_COOP || FC_ORDERED
#pragma OPENCL EXTENSION cl_khr_int64_base_atomics : enable

/* The value of a word other work-groups publish or count up, once it is at least `least`: 1
 * waits for a published word (both split-row kernels publish only nonzero words), n for a count
 * to reach n; with FC_NV_SLEEP, `pause_ns` between polls. */
FC_INLINE ulong fc_wait_word(volatile __global ulong *word, ulong least, uint pause_ns)
{
    ulong w;
    while ((w = atom_add(word, (ulong)0)) < least) {
#if FC_NV_SLEEP
        FC_ASM volatile("nanosleep.u32 %0;" : : "r"(pause_ns));
#else
        (void)pause_ns;
#endif
    }
    return w;
}

/* The residency probe (fc_resident_probe): a group takes the count as settled once this many
 * reads in a row saw one value, and stops after FC_PROBE_MAX_READS reads whatever it saw. */
#define FC_PROBE_STEADY_READS 2048u
#define FC_PROBE_MAX_READS (1u << 18)

/* What a cooperative kernel does when launched with rows == 0 (FC_COOP_PROLOGUE,
 * softmax_cooperative.cl): probe[0] (0 at the start) counts the groups that started; probe[1]
 * (the host's ULONG max) receives the minimum over groups of the last count each read, once it
 * stopped moving. That is at most how many of the kernel's groups were resident at once, so the
 * host may count on that many (src/opencl/softmax_resident.c): take the group whose last read
 * came first; every group that read counted had started and, not having made its own last read
 * yet, not exited, so they were all resident together. A slow start can make it come out short,
 * never long. The same kernel and work-group as a real launch, so the same registers and local
 * memory a group. The other work-items wait at the barrier, so the whole group stays resident
 * while the first watches: a device that frees a finished wave's registers early would admit
 * groups the real kernel does not get. Nothing waits for another group, and the reads are
 * bounded: the probe cannot hang. Only base 64-bit atomics (no atom_min: the extended ones). */
FC_INLINE void fc_resident_probe(volatile __global ulong *probe)
{
    if (get_local_id(0) == 0) {
        ulong seen = atom_inc(&probe[0]) + 1, low;
        uint steady = 0;
        for (uint reads = 0; reads < FC_PROBE_MAX_READS && steady < FC_PROBE_STEADY_READS;
             ++reads) {
            const ulong now = atom_add(&probe[0], (ulong)0);
            steady = now == seen ? steady + 1 : 0;
            seen = now;
#if FC_NV_SLEEP
            FC_ASM volatile("nanosleep.u32 %0;" : : "r"(100));
#endif
        }
        low = atom_add(&probe[1], (ulong)0);
        while (seen < low) {
            const ulong was = atom_cmpxchg(&probe[1], low, seen);
            if (was == low)
                break;
            low = was;
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
}

/* The next ticket of state[0] (each split-row launch's counter), drawn by the first work-item
 * and handed to the group through `ticket`. The caller reads it before its next barrier, after
 * which the next draw may overwrite it. */
FC_INLINE ulong fc_draw_ticket(volatile __global ulong *state, __local ulong *ticket, uint lid)
{
    if (lid == 0)
        *ticket = atom_inc(&state[0]);
    barrier(CLK_LOCAL_MEM_FENCE);
    return *ticket;
}

/* The split-row kernels' words live in two regions that alternate between launches
 * (src/opencl/split_state.c): each launch's work-groups zero, `per` words each (the host's
 * division: a division here cost the 16-bit cooperative split a point of copy bandwidth), the
 * `words` words that the launch before used in the other region, so the next finds them 0. */
FC_INLINE void fc_clear_previous(volatile __global ulong *other, uint words, uint per)
{
    const uint begin = (uint)get_group_id(0) * per, end = min(words, begin + per);
    for (uint i = begin + (uint)get_local_id(0); i < end; i += (uint)get_local_size(0))
        other[i] = 0;
}
#endif
