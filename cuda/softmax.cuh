/* Softmax kernels: row in registers, resident split, online chunked, the two-kernel split, and
 * the staged (softmax_staged.cuh) and split-held (softmax_split_held.cuh; their exchange in
 * softmax_split_exchange.cuh, the ring form in softmax_split_held_ring.cuh) kernels.
 *
 * Numbers follow torch.softmax / torch.log_softmax: s = x * scale rounded to f32 first (never
 * contracted into a later subtraction: with |x| ~ 1e30 that would cost the whole result),
 * m = max s, d = sum exp(s - m) in f32, y = exp(s - m) / d or (s - m) - log d. Special values
 * need no branches: fmaxf ignores NaN but exp(NaN - m) makes d NaN; +inf makes m = +inf and
 * exp(inf - inf) = NaN; an all -inf row has d = 0 so 0 * (1/0) and -inf + inf are NaN; a -inf
 * entry of an ordinary row gives exp(-inf) = 0 and log -inf. The per-element exp is
 * softmax_exp: expf for f32 inputs, ex2.approx for 16-bit ones (see there); for 16-bit inputs
 * softmax_exp_summed (terms that only join a sum) and softmax_exp_stored (terms stored as a
 * known dtype) take the cheaper .ftz forms where those give the same result.
 *
 * Layout of a row slice in registers: thread t of a group of G threads owns NV vectors of VEC
 * consecutive columns; vector k starts at column origin + (k * G + t) * VEC, so one load
 * instruction of the group covers G * 16 contiguous bytes. All loads of a thread are issued
 * before any value is used, so NV loads per thread are in flight at once.
 *
 * 16-bit rows not aligned for 16-byte loads (vec_ok false) take the element layout instead:
 * value e of vector k is column origin + k * G * VEC + e * G + t, so that each element load or
 * store of the group covers G consecutive elements (a warp's 32 16-bit stores: two 32-byte
 * sectors) rather than G elements 16 bytes apart, which made every store instruction write
 * parts of 16 sectors. H200, 2026-11-26, ms, against the vector layout's element path in the
 * same call (torch.softmax beside): 32768x127 f16 0.0096 against 0.0182 (0.0109), 32768x255 f16
 * 0.0161 against 0.0321 (0.0160); f32 gained nothing (32768x127 0.0138 against 0.0137) or lost
 * (32768x255 0.0232 against 0.0216), so f32 keeps the vector layout (element_lanes).
 * load_slice takes it where element_lanes says (unless LANES is false: kernels at their
 * register cap, the resident and staged ones, where the second path made ptxas spill);
 * store_slice only when told (`lanes`), since what decides it is how x was loaded. Rows in it
 * are never shifted (a shifted row is loaded as vectors), so it has no `low` bound. */
#pragma once

#include "common.cuh"
#include "softmax_shared.h"

static_assert(sizeof(fc_softmax_args) == FC_SOFTMAX_ARGS_BYTES, "host and device layouts differ");

/* Row r of a view with base address `base`, `stride` elements between rows of `bytes` each. */
FC_DEVICE char *row_ptr(uint64_t base, int64_t row, int64_t stride, int bytes) {
    return reinterpret_cast<char *>(base) + row * stride * bytes;
}

/* Whether load_slice holds DT's values in the element layout (see the top): 16-bit rows that
 * are not aligned for 16-byte loads. */
template <int DT> FC_DEVICE bool element_lanes(bool vec_ok) { return DT != FC_F32 && !vec_ok; }

/* Loads NV vectors (see the layout above) of the columns [origin, limit) into v, scaled;
 * columns at or past `limit` read as -inf, which changes neither the max nor the sum. One base
 * pointer per thread and compile-time offsets keep the address arithmetic out of the registers.
 * With LOW, columns before `low` (< VEC, so only a thread's first vector can hold any) read as
 * -inf too and are not touched: the shifted layout (shifted_row), whose `row` is the 16-byte
 * boundary at or before the real row, `low` the columns between the two. */
template <int DT, int G, int NV, bool LOW = false, bool LANES = true>
FC_DEVICE void load_slice(const char *row, int64_t origin, int64_t limit, int t, bool vec_ok,
                          float scale, float *v, int64_t low = 0) {
    constexpr int VEC = dtype_io<DT>::vec, BYTES = dtype_io<DT>::bytes;
    const int64_t first = origin + (int64_t)t * VEC; /* this thread's first column */
    const int64_t room = limit - first;               /* columns left from there (may be < 0) */
    const int64_t lead = LOW ? low - first : 0;       /* columns before low from there */
    const bool first_whole = !LOW || lead <= 0;       /* vector 0 has none of them */
    if (LANES && element_lanes<DT>(vec_ok)) { /* the element layout (see the top) */
        const char *q = row + (origin + t) * BYTES;
        const int64_t span = limit - origin - t; /* columns from this lane's first on */
#pragma unroll
        for (int k = 0; k < NV; k++)
#pragma unroll
            for (int e = 0; e < VEC; e++) {
                const int c = (k * VEC + e) * G;
                v[k * VEC + e] =
                    c < span ? __fmul_rn(dtype_io<DT>::load(q + c * BYTES), scale) : -INFINITY;
            }
        return;
    }
    const char *p = row + first * BYTES;
    uint4 raw[NV];
#pragma unroll
    for (int k = 0; k < NV; k++) /* first every full, aligned vector: the loads overlap */
        if (vec_ok && k * G * VEC + VEC <= room && (k > 0 || first_whole))
            raw[k] = *reinterpret_cast<const uint4 *>(p + k * G * VEC * BYTES);
#pragma unroll
    for (int k = 0; k < NV; k++) {
        float *o = v + k * VEC;
        if (vec_ok && k * G * VEC + VEC <= room && (k > 0 || first_whole)) {
            dtype_io<DT>::unpack(raw[k], o);
#pragma unroll
            for (int e = 0; e < VEC; e++) o[e] = __fmul_rn(o[e], scale);
        } else { /* the row's tail or (LOW) head, or a row start that is not 16-byte aligned */
#pragma unroll
            for (int e = 0; e < VEC; e++) {
                const int c = k * G * VEC + e;
                o[e] = c < room && (k > 0 || !LOW || c >= lead)
                           ? __fmul_rn(dtype_io<DT>::load(p + c * BYTES), scale)
                           : -INFINITY;
            }
        }
    }
}

/* Stores a slice in the same layout to y of dtype YT (known at compile time here: the caller
 * switches on the runtime output dtype once, outside the unrolled loops); with LOW, columns
 * before `low` (< VEC) are left alone (load_slice). */
template <int YT, int VEC, int G, int NV, bool STREAMING, bool LOW = false>
FC_DEVICE void store_slice_as(char *row, int64_t origin, int64_t limit, int t, bool vec_ok,
                              bool lanes, const float *v, int64_t low = 0) {
    constexpr int BYTES = YT == FC_F32 ? 4 : 2;
    if (lanes) { /* v holds the element layout (see the top) */
        char *q = row + (origin + t) * BYTES;
        const int64_t span = limit - origin - t;
#pragma unroll
        for (int i = 0; i < NV * VEC; i++) {
            const int c = i * G;
            if (c < span) store_one(q + c * BYTES, YT, v[i]);
        }
        return;
    }
    const int64_t first = origin + (int64_t)t * VEC;
    const int64_t room = limit - first;
    const int64_t lead = LOW ? low - first : 0;
    const bool first_whole = !LOW || lead <= 0;
    char *p = row + first * BYTES;
#pragma unroll
    for (int k = 0; k < NV; k++) {
        if (vec_ok && k * G * VEC + VEC <= room && (k > 0 || first_whole)) {
            store_vec<VEC, STREAMING>(p + k * G * VEC * BYTES, YT, v + k * VEC);
        } else {
#pragma unroll
            for (int e = 0; e < VEC; e++) {
                const int c = k * G * VEC + e;
                if (c < room && (k > 0 || !LOW || c >= lead))
                    store_one(p + c * BYTES, YT, v[k * VEC + e]);
            }
        }
    }
}

template <int VEC, int G, int NV, bool STREAMING, bool LOW = false>
FC_DEVICE void store_slice(char *row, int64_t origin, int64_t limit, int t, int y_dt,
                           bool vec_ok, bool lanes, const float *v, int64_t low = 0) {
    if (y_dt == FC_F32)
        store_slice_as<FC_F32, VEC, G, NV, STREAMING, LOW>(row, origin, limit, t, vec_ok, lanes,
                                                           v, low);
    else if (y_dt == FC_F16)
        store_slice_as<FC_F16, VEC, G, NV, STREAMING, LOW>(row, origin, limit, t, vec_ok, lanes,
                                                           v, low);
    else
        store_slice_as<FC_BF16, VEC, G, NV, STREAMING, LOW>(row, origin, limit, t, vec_ok, lanes,
                                                            v, low);
}

/* The shifted layout of a row whose start is not 16-byte aligned: columns counted from the
 * 16-byte boundary at or before it, so that every whole vector in the row is aligned for
 * 16-byte loads and stores. row_head gives the columns between that boundary and the row
 * (0 .. 16 / bytes - 1): the row's columns are then [head, head + cols). shifted_row returns
 * the boundary and sets `head`. */
FC_DEVICE int64_t row_head(const char *row, int bytes) {
    return (int64_t)((reinterpret_cast<uintptr_t>(row) & 15u) / (unsigned)bytes);
}

FC_DEVICE const char *shifted_row(const char *row, int bytes, int64_t &head) {
    head = row_head(row, bytes);
    return row - head * bytes;
}

/* Whether y at p (a row of y in x's shifted layout) suits store_vec's stores of VEC values of
 * y_bytes each: aligned to their size, up to 16 bytes. */
template <int VEC> FC_DEVICE bool vector_store_aligned(const char *p, int y_bytes) {
    const unsigned align = VEC * y_bytes < 16 ? VEC * y_bytes : 16;
    return reinterpret_cast<uintptr_t>(p) % align == 0;
}

/* The max of a row slice held by a group of G threads (G <= 32: a sub-warp butterfly; else the
 * whole block). `slots`: shared scratch for block-wide groups. */
template <int G> FC_DEVICE float group_max(float v, float *slots) {
    if constexpr (G <= 32) return warp_max<G>(v);
    else return block_max<G>(v, slots);
}
template <int G> FC_DEVICE float group_sum(float v, float *slots) {
    if constexpr (G <= 32) return warp_sum<G>(v);
    else return block_sum<G>(v, slots);
}

/* exp(x) of the per-element terms (x = s - m <= 0, or NaN), by the input dtype DT. f32 inputs:
 * expf, within ~1 ulp. 16-bit inputs: ex2.approx(x * log2 e), 2 instructions against expf's ~8;
 * the rounding of x * log2 e costs at most 2.6e-6 relative at |x| = 80 (below the tests' 1e-5,
 * and far below what the 16-bit inputs carry). There the instructions were the limit: 16-bit
 * 4096 x 32768 rows went from 77% to 90-91% of copy bandwidth (H100, 2026-11-22), while f32,
 * twice the bytes per value, stays memory bound either way. -inf gives +0, NaN NaN, 0 exactly 1;
 * results below 2^-126 are kept (no .ftz). */
template <int DT> FC_DEVICE float softmax_exp(float x) {
    if constexpr (DT == FC_F32) {
        return expf(x);
    } else {
        float r;
        asm("ex2.approx.f32 %0, %1;" : "=f"(r) : "f"(x * 1.4426950408889634f));
        return r;
    }
}

/* exp(x) (x = s - m <= 0, or NaN) for a term that only joins a sum. 16-bit inputs take
 * ex2.approx.ftz: 2 instructions against softmax_exp's 5 (ptxas wraps the non-.ftz form in
 * subnormal handling), and exact here: every such sum holds a term of exactly 1 (its own max's,
 * ex2 of 0) or adds to one that does, so a term below 2^-126 changes nothing in f32. The same
 * argument as the OpenCL kernels' FC_EXP_SUM (cl/softmax_exp.h). */
template <int DT> FC_DEVICE float softmax_exp_summed(float x) {
    if constexpr (DT == FC_F32) return expf(x);
    else return fast_exp2(x * 1.4426950408889634f);
}

/* exp(x) for a term that is stored, times a factor <= 1, as YT. 16-bit inputs: f16 outputs take
 * the .ftz form (a value below 2^-126 rounds to 0 in f16 either way); bf16 outputs, which keep
 * subnormals down to 2^-133, the .ftz form on the exponent shifted up by 64 and an exact multiply
 * by 2^-64 after it (3 instructions; relative error up to 2.6e-6 from the rounding of the shifted
 * argument, far below bf16's 3.9e-3; arguments below -190 give 0, as they round to 0 in bf16);
 * f32 outputs softmax_exp, which keeps every subnormal torch gives. */
template <int DT, int YT> FC_DEVICE float softmax_exp_stored(float x) {
    if constexpr (DT == FC_F32 || YT == FC_F32) {
        return softmax_exp<DT>(x);
    } else if constexpr (YT == FC_F16) {
        return softmax_exp_summed<DT>(x);
    } else {
        return __fmul_rn(fast_exp2(fmaf(x, 1.4426950408889634f, 64.0f)),
                         5.42101086242752217e-20f); /* 2^-64 */
    }
}

/* This thread's sum of exp(v - s) in a fixed order. Softmax replaces v by the exponentials
 * (they are the numerators); log-softmax keeps v (it needs s - m later). */
template <int DT, int N> FC_DEVICE float thread_exp_sum(float *v, float s, bool log) {
    float d = 0.0f;
    if (!log) {
#pragma unroll
        for (int i = 0; i < N; i++) v[i] = softmax_exp<DT>(v[i] - s), d += v[i];
    } else {
#pragma unroll
        for (int i = 0; i < N; i++) d += softmax_exp_summed<DT>(v[i] - s);
    }
    return d;
}

/* The same over a row slice held by a group, given the slice's max m: the group's sum. */
template <int DT, int G, int N>
FC_DEVICE float exp_and_sum(float *v, float m, bool log, float *slots) {
    return group_sum<G>(thread_exp_sum<DT, N>(v, subtrahend(m), log), slots);
}

/* Final values: softmax multiplies the exponentials by `factor` (1/d, or for a chunk of a split
 * row e^(m_chunk - m) / d); log-softmax computes (v - m) - log d. */
template <int N>
FC_DEVICE void finish_values(float *v, bool log, float m, float factor, float log_d) {
    const float s = subtrahend(m);
#pragma unroll
    for (int i = 0; i < N; i++) v[i] = log ? (v[i] - s) - log_d : v[i] * factor;
}

/* ---- row in registers: one read, one write --------------------------------------------------- */

/* Groups of G threads each own one row (with a.shifted in its shifted layout, the host having
 * picked a configuration that covers it); a block holds BLOCK / G groups. Deliberately no row
 * loop: with one, ptxas keeps loop state beside the 32 values and spills at the 64-register cap,
 * so the grid covers the rows instead (2-D when it exceeds gridDim.x). Rows past the end inside
 * a block are processed as empty, so every lane takes part in every shuffle and barrier. */
template <int DT, int G, int N, int BLOCK>
__device__ void softmax_rows(const fc_softmax_args &a) {
    constexpr int VEC = dtype_io<DT>::vec, NV = N / VEC, GROUPS = BLOCK / G;
    __shared__ float max_slots[32], sum_slots[32];
    const int64_t block = (int64_t)blockIdx.y * gridDim.x + blockIdx.x;
    if (block * GROUPS >= a.rows) return; /* uniform across the block */
    const int t = threadIdx.x % G;
    const bool log = a.log != 0;
    const int64_t row = block * GROUPS + threadIdx.x / G;
    const int64_t cols = row < a.rows ? a.cols : 0;
    /* Launched as a programmatic dependent (src/cuda/softmax.c): the block's rows are asked of
     * L2 while the kernel before this one ends, then it waits for that kernel. */
    if (a.prefetch)
        prefetch_l2(row_ptr(a.x, row, a.x_stride, dtype_io<DT>::bytes), cols * dtype_io<DT>::bytes,
                    t, G);
    dependent_launch_enter();
    float v[N];
    /* Shifted rows (a.shifted) count their columns from the 16-byte boundary before them: head
     * columns lie before the row, [head, head + cols) is the row. Else head is 0. Worked out
     * again for the store rather than kept through the reductions. */
    /* x loads as vectors (aligned, or shifted); else the element layout, which the store must
     * then follow */
    const bool x_vec = a.x_vec_ok || a.shifted;
    const auto head_of = [&]() -> int {
        return a.shifted && row < a.rows
                   ? (int)row_head(row_ptr(a.x, row, a.x_stride, dtype_io<DT>::bytes),
                                   dtype_io<DT>::bytes)
                   : 0;
    };
    {
        /* thread 0's first vector, shifted, starts before the row: it is loaded whole (the
         * 16-byte block holding the row's first element lies in the row's allocation) and its
         * elements before the row are set to -inf, which keeps the per-vector bounds logic out
         * of the loads (with it the f32 x32 configurations spilled on sm_89) */
        const int head = head_of();
        load_slice<DT, G, NV>(
            row_ptr(a.x, row, a.x_stride, dtype_io<DT>::bytes) - head * dtype_io<DT>::bytes, 0,
            cols + head, t, x_vec, a.scale, v);
        if (t == 0) {
#pragma unroll
            for (int e = 0; e < VEC; e++) v[e] = e < head ? -INFINITY : v[e];
        }
    }
    float m = -INFINITY;
#pragma unroll
    for (int i = 0; i < N; i++) m = fmaxf(m, v[i]);
    m = group_max<G>(m, max_slots);
    const float d = exp_and_sum<DT, G, N>(v, m, log, sum_slots);
    finish_values<N>(v, log, m, 1.0f / d, log ? logf(d) : 0.0f);
    /* y in x's layout: shifted, its vector stores need the boundary x's head puts before y's row
     * aligned for them (it is when x and y share offset and stride), else element stores */
    const int head = head_of(), y_bytes = a.y_dtype == FC_F32 ? 4 : 2;
    char *y_row = row_ptr(a.y, row, a.y_stride, y_bytes) - head * y_bytes;
    const bool y_ok = a.shifted ? vector_store_aligned<VEC>(y_row, y_bytes) : a.y_vec_ok != 0;
    store_slice<VEC, G, NV, false, true>(y_row, 0, cols + head, t, a.y_dtype, y_ok,
                                         element_lanes<DT>(x_vec), v, head);
}

/* ---- resident split: rows longer than a block spread over co-resident blocks, read once ------ */

/* The row's (max, sum) from its `chunks` partials, partial i being load(i), merged in a fixed
 * order (lane l takes partials l, l+32, ...; then a butterfly) so that every warp of every block
 * gets the same bits, wherever the partials are kept. */
template <typename Load> FC_DEVICE void merge_stats(int chunks, Load load, float &m, float &d) {
    m = -INFINITY, d = 0.0f;
    for (int i = threadIdx.x & 31; i < chunks; i += 32) {
        const float2 q = load(i);
        stats_merge(m, d, q.x, q.y);
    }
    warp_merge<32>(m, d);
}

/* merge_stats over partials in global memory. Loads bypass L1 (ld.cg): L1 is not coherent with
 * other SMs' writes. */
FC_DEVICE void merge_partials(const float2 *p, int chunks, float &m, float &d) {
    merge_stats(chunks, [p](int i) { return __ldcg(p + i); }, m, d);
}

/* The (max, sum) of a whole row from the blocks that hold its chunks: this block publishes its
 * chunk's (m, d) as row_partials[chunk], counts itself in at the row's arrival counter, and
 * thread 0 waits (napping `nap` ns between polls) until all `chunks` have arrived; then warp 0
 * merges them in a fixed order, so that every block of the row gets the same bits. Requires
 * that every chunk of the row is running or done while any of them waits. `row_stats`: shared
 * memory, free until the next barrier after this returns. */
FC_DEVICE float2 exchange_row_stats(float2 *row_partials, int chunk, int chunks, unsigned *counter,
                                    float m, float d, float2 *row_stats, unsigned nap) {
    if (threadIdx.x == 0) {
        __stcg(row_partials + chunk, make_float2(m, d));
        add_release_gpu(counter, 1u); /* publishes the partial above */
        while (load_acquire_gpu(counter) < (unsigned)chunks) __nanosleep(nap);
    }
    __syncthreads(); /* extends thread 0's acquire to the block */
    if (threadIdx.x < 32) {
        float rm, rd;
        merge_partials(row_partials, chunks, rm, rd);
        if (threadIdx.x == 0) *row_stats = make_float2(rm, rd);
    }
    __syncthreads();
    return *row_stats;
}

/* Softmax's factor for a chunk whose exponentials are relative to its own max m, given the row's
 * (rm, rd): e^(m - rm) / rd. A chunk of only -inf holds zeros; its factor must be 0, not
 * e^(0 - rm), which can be inf. */
FC_DEVICE float chunk_factor(float m, float rm, float rd) {
    const float rescale = m == -INFINITY ? 0.0f : expf(m - subtrahend(rm));
    return __fmul_rn(rescale, 1.0f / rd);
}

/* A part of a chunk parked in shared memory: each thread keeps its own N values there (as
 * float4, thread-interleaved so that the accesses are conflict-free) and only it reads them. */
template <int TPB, int N> FC_DEVICE void park(float4 *parts, int p, const float *v) {
#pragma unroll
    for (int j = 0; j < N / 4; j++)
        parts[(p * (N / 4) + j) * TPB + threadIdx.x] = make_float4(v[4 * j], v[4 * j + 1], v[4 * j + 2], v[4 * j + 3]);
}
template <int TPB, int N> FC_DEVICE void unpark(const float4 *parts, int p, float *v) {
#pragma unroll
    for (int j = 0; j < N / 4; j++) {
        const float4 f = parts[(p * (N / 4) + j) * TPB + threadIdx.x];
        v[4 * j] = f.x, v[4 * j + 1] = f.y, v[4 * j + 2] = f.z, v[4 * j + 3] = f.w;
    }
}

/* Each block holds one chunk of a row on chip: a.smem_parts parts of TPB * N columns parked in
 * dynamic shared memory, then one part in registers. The chunks of a row exchange their
 * (max, sum) through global memory and wait for one another, then normalise what they hold, so
 * the row is read once however long it is, as long as all its chunks fit on the GPU at once.
 * Launched cooperatively (all blocks resident, so the waits finish) with a grid that is a
 * multiple of a.chunks, so that every row's chunks run in the same round of the item loop. */
template <int DT, int TPB, int N>
__device__ void softmax_resident(const fc_softmax_args &a) {
    constexpr int VEC = dtype_io<DT>::vec, NV = N / VEC, PART = TPB * N;
    extern __shared__ float4 parts[];
    __shared__ float max_slots[32], sum_slots[32];
    __shared__ float2 row_stats;
    const bool log = a.log != 0;
    const int items = (int)(a.rows * a.chunks); /* the host keeps it below 2^31 */
    const int y_bytes = a.y_dtype == FC_F32 ? 4 : 2;
    float2 *partials = reinterpret_cast<float2 *>(a.partials);
    unsigned *counters = reinterpret_cast<unsigned *>(a.counters);
    /* 32-bit item arithmetic: at 64 registers every pair saved keeps ptxas from spilling. */
    for (int item = blockIdx.x; item < items; item += gridDim.x) {
        const int row = item / a.chunks;
        const int chunk = item % a.chunks;
        const int64_t origin = (int64_t)chunk * a.chunk_cols;
        const int64_t limit = min(origin + a.chunk_cols, a.cols);
        const char *x_row = row_ptr(a.x, row, a.x_stride, dtype_io<DT>::bytes);
        const int64_t own = origin + (int64_t)a.smem_parts * PART; /* the register part */
        float v[N], w[N];
        float m = -INFINITY;
        for (int p = 0; p < a.smem_parts; p++) {
            load_slice<DT, TPB, NV, false, false>(x_row, origin + (int64_t)p * PART, limit,
                                                  threadIdx.x, a.x_vec_ok, a.scale, w);
#pragma unroll
            for (int i = 0; i < N; i++) m = fmaxf(m, w[i]);
            park<TPB, N>(parts, p, w);
        }
        load_slice<DT, TPB, NV, false, false>(x_row, own, limit, threadIdx.x, a.x_vec_ok, a.scale,
                                              v);
#pragma unroll
        for (int i = 0; i < N; i++) m = fmaxf(m, v[i]);
        m = block_max<TPB>(m, max_slots);
        /* This chunk's sum of exp(s - m), parts first; softmax keeps the exponentials. expf
         * whatever the dtype (thread_exp_sum<FC_F32>): with softmax_exp's ex2 the 16-bit
         * kernels spill at this kernel's 64-register cap (ptxas, sm_90a). */
        const float sub = subtrahend(m);
        float d = 0.0f;
        for (int p = 0; p < a.smem_parts; p++) {
            unpark<TPB, N>(parts, p, w);
            d += thread_exp_sum<FC_F32, N>(w, sub, log);
            if (!log) park<TPB, N>(parts, p, w);
        }
        d += thread_exp_sum<FC_F32, N>(v, sub, log);
        d = block_sum<TPB>(d, sum_slots);
        const float2 r = exchange_row_stats(partials + (item - chunk), chunk, a.chunks,
                                            counters + row, m, d, &row_stats, 100);
        const float rm = r.x, rd = r.y;
        const float factor = chunk_factor(m, rm, rd), log_d = log ? logf(rd) : 0.0f;
        char *y_row = row_ptr(a.y, row, a.y_stride, y_bytes);
        for (int p = 0; p < a.smem_parts; p++) {
            unpark<TPB, N>(parts, p, w);
            finish_values<N>(w, log, rm, factor, log_d);
            store_slice<VEC, TPB, NV, false>(y_row, origin + (int64_t)p * PART, limit, threadIdx.x,
                                             a.y_dtype, a.y_vec_ok, false, w);
        }
        finish_values<N>(v, log, rm, factor, log_d);
        store_slice<VEC, TPB, NV, false>(y_row, own, limit, threadIdx.x, a.y_dtype, a.y_vec_ok,
                                         false, v);
        __syncthreads(); /* row_stats and the slots are reused by the next item */
    }
}

/* ---- streaming: any row length, the row read twice ------------------------------------------- */

/* One step of a thread's online (max, sum): N more values (one exp per value plus one). */
template <int DT, int N> FC_DEVICE void online_step(float &m, float &d, const float *v) {
    float M = m;
#pragma unroll
    for (int i = 0; i < N; i++) M = fmaxf(M, v[i]);
    const float s = subtrahend(M);
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < N; i++) sum += softmax_exp_summed<DT>(v[i] - s);
    d = __fadd_rn(__fmul_rn(d, expf(m - s)), sum);
    m = M;
}

/* Pass 1 over the columns [c0, c1): each thread keeps an online (max, sum) over its vectors,
 * UV vectors per step; then the block merges. */
template <int DT, int TPB, int UV>
FC_DEVICE void stream_stats(const char *row, int64_t c0, int64_t c1, bool vec_ok, float scale,
                            float &m, float &d, float2 *slots) {
    constexpr int VEC = dtype_io<DT>::vec, STEP = TPB * UV * VEC;
    m = -INFINITY, d = 0.0f;
    for (int64_t base = c0; base < c1; base += STEP) {
        float v[UV * VEC];
        load_slice<DT, TPB, UV>(row, base, c1, threadIdx.x, vec_ok, scale, v);
        online_step<DT, UV * VEC>(m, d, v);
    }
    block_merge<TPB>(m, d, slots);
}

/* Pass 2: y = exp(s - m) / d, or (s - m) - log d, over [c0, c1). Stores are evict-first so that
 * the input, which pass 2 may still find in L2, is what stays there. */
template <int DT, int TPB, int UV, bool LANES = true>
FC_DEVICE void stream_normalize(const char *x_row, char *y_row, int64_t c0, int64_t c1,
                                const fc_softmax_args &a, float m, float d) {
    constexpr int VEC = dtype_io<DT>::vec, STEP = TPB * UV * VEC;
    const float s = subtrahend(m), inv_d = 1.0f / d, log_d = logf(d);
    for (int64_t base = c0; base < c1; base += STEP) {
        float v[UV * VEC];
        load_slice<DT, TPB, UV, false, LANES>(x_row, base, c1, threadIdx.x, a.x_vec_ok, a.scale,
                                              v);
#pragma unroll
        for (int i = 0; i < UV * VEC; i++)
            v[i] = a.log ? (v[i] - s) - log_d : softmax_exp<DT>(v[i] - s) * inv_d;
        store_slice<VEC, TPB, UV, true>(y_row, base, c1, threadIdx.x, a.y_dtype, a.y_vec_ok,
                                        LANES && element_lanes<DT>(a.x_vec_ok), v);
    }
}

/* Online chunked: one block per row, both passes. */
template <int DT, int TPB, int UV>
__device__ void softmax_chunked(const fc_softmax_args &a) {
    __shared__ float2 slots[32];
    const int y_bytes = a.y_dtype == FC_F32 ? 4 : 2;
    for (int64_t row = blockIdx.x; row < a.rows; row += gridDim.x) {
        const char *x_row = row_ptr(a.x, row, a.x_stride, dtype_io<DT>::bytes);
        float m, d;
        stream_stats<DT, TPB, UV>(x_row, 0, a.cols, a.x_vec_ok, a.scale, m, d, slots);
        stream_normalize<DT, TPB, UV>(x_row, row_ptr(a.y, row, a.y_stride, y_bytes),
                                      0, a.cols, a, m, d);
        __syncthreads(); /* slots are reused by the next row */
    }
}

/* Two-kernel split, kernel 1: the (max, sum) of each (row, chunk). */
template <int DT, int TPB, int UV>
__device__ void softmax_split_stats(const fc_softmax_args &a) {
    __shared__ float2 slots[32];
    float2 *partials = reinterpret_cast<float2 *>(a.partials);
    const int64_t items = a.rows * a.chunks;
    for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
        const int64_t row = item / a.chunks, c0 = (item % a.chunks) * a.chunk_cols;
        float m, d;
        stream_stats<DT, TPB, UV>(row_ptr(a.x, row, a.x_stride, dtype_io<DT>::bytes), c0,
                                  min(c0 + a.chunk_cols, a.cols), a.x_vec_ok, a.scale, m, d, slots);
        if (threadIdx.x == 0) partials[item] = make_float2(m, d);
        __syncthreads();
    }
}

/* Kernel 2: merge the row's partials, normalise the chunk. Items run in the reverse order of
 * kernel 1, so the first chunks re-read are the last ones kernel 1 left in L2. */
template <int DT, int TPB, int UV>
__device__ void softmax_split_normalize(const fc_softmax_args &a) {
    __shared__ float2 row_stats;
    const float2 *partials = reinterpret_cast<const float2 *>(a.partials);
    const int64_t items = a.rows * a.chunks;
    const int y_bytes = a.y_dtype == FC_F32 ? 4 : 2;
    for (int64_t i = blockIdx.x; i < items; i += gridDim.x) {
        const int64_t item = items - 1 - i;
        const int64_t row = item / a.chunks, c0 = (item % a.chunks) * a.chunk_cols;
        if (threadIdx.x < 32) {
            float m, d;
            merge_partials(partials + row * a.chunks, a.chunks, m, d);
            if (threadIdx.x == 0) row_stats = make_float2(m, d);
        }
        __syncthreads();
        const float m = row_stats.x, d = row_stats.y;
        stream_normalize<DT, TPB, UV>(row_ptr(a.x, row, a.x_stride, dtype_io<DT>::bytes),
                                      row_ptr(a.y, row, a.y_stride, y_bytes), c0,
                                      min(c0 + a.chunk_cols, a.cols), a, m, d);
        __syncthreads();
    }
}

/* ---- the exported kernels: extern "C" names the host looks up ---------------------------------- */
/* Launch bounds cap registers at 64 per thread (1024 threads' worth per SM): enough for 32 values
 * plus addresses, and at least 1024 resident threads per SM to keep loads in flight. The row
 * kernels of 16 values a thread are capped at 40 (1536 threads a SM; no spills): f32 took 63-64
 * under the cap of 64 and its rows that fill part of a group ran latency-bound at half occupancy.
 * H200, ms, same call (bench/results/2026-11-26-session23.md): f32 32768x300 0.0267 -> 0.0247
 * (torch 0.0246), 8192x1500 0.0299 -> 0.0276, 4096x3000 0.0319 -> 0.0283, 32768x384 0.0283 ->
 * 0.0280, others of 257..4096 columns within 1 %. The same for the 8-value kernels (32 registers
 * instead of 36 for f32) was mixed: 32768x160 0.0169 -> 0.0163, 16384x77 0.0072 -> 0.0066, but
 * 32768x127 0.0137 -> 0.0144 and 32768x128 0.0114 -> 0.0116; not taken. */

#define FC_SOFTMAX_FOR_DTYPES(M, ...) \
    M(f32, FC_F32, __VA_ARGS__) M(f16, FC_F16, __VA_ARGS__) M(bf16, FC_BF16, __VA_ARGS__)

#define FC_ROWS_KERNEL(dt_name, DT, name, G, N, BLOCK)                                         \
    extern "C" __global__ void __launch_bounds__(BLOCK, (N == 16 ? 1536 : 1024) / BLOCK)        \
        fc_softmax_rows_##name##_##dt_name(fc_softmax_args a) {                                 \
        softmax_rows<DT, G, N, BLOCK>(a);                                                       \
    }
#define FC_ROWS_KERNELS(name, G, N, BLOCK) FC_SOFTMAX_FOR_DTYPES(FC_ROWS_KERNEL, name, G, N, BLOCK)
FC_SOFTMAX_ROW_CONFIGS(FC_ROWS_KERNELS)

/* Streaming kernels take 16 values per thread and step whatever the dtype. */
#define FC_STREAM_ARGS(DT) DT, FC_SOFTMAX_STREAM_THREADS, FC_SOFTMAX_STREAM_VALUES / dtype_io<DT>::vec

#define FC_OTHER_KERNELS(dt_name, DT, unused)                                                  \
    extern "C" __global__ void __launch_bounds__(FC_SOFTMAX_RESIDENT_THREADS, 2)                \
        fc_softmax_resident_##dt_name(fc_softmax_args a) {                                      \
        softmax_resident<DT, FC_SOFTMAX_RESIDENT_THREADS, FC_SOFTMAX_RESIDENT_ITEMS>(a);        \
    }                                                                                           \
    extern "C" __global__ void __launch_bounds__(FC_SOFTMAX_STREAM_THREADS, 2)                  \
        fc_softmax_chunked_##dt_name(fc_softmax_args a) {                                       \
        dependent_launch_enter();                                                               \
        softmax_chunked<FC_STREAM_ARGS(DT)>(a);                                                 \
    }                                                                                           \
    extern "C" __global__ void __launch_bounds__(FC_SOFTMAX_STREAM_THREADS, 2)                  \
        fc_softmax_split_stats_##dt_name(fc_softmax_args a) {                                   \
        dependent_launch_enter();                                                               \
        softmax_split_stats<FC_STREAM_ARGS(DT)>(a);                                             \
    }                                                                                           \
    extern "C" __global__ void __launch_bounds__(FC_SOFTMAX_STREAM_THREADS, 2)                  \
        fc_softmax_split_normalize_##dt_name(fc_softmax_args a) {                               \
        dependent_launch_enter();                                                               \
        softmax_split_normalize<FC_STREAM_ARGS(DT)>(a);                                         \
    }
FC_SOFTMAX_FOR_DTYPES(FC_OTHER_KERNELS, 0)

#include "softmax_staged.cuh"
#include "softmax_split_held.cuh"
#include "softmax_split_held_ring.cuh"
