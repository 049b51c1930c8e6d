/* cl/softmax_rows_vector.cl — softmax / log-softmax with one work-item per row and explicit
 * 16-wide vectors: the CPU variant (FC_ROWS_VECTOR, built for CPU devices only).
 *
 * A CPU runtime such as PoCL runs a work-group as a loop over its work-items on one thread and
 * vectorises across work-items only where it can prove that safe; the GPU-shaped kernels in
 * softmax.cl (teams of work-items, local-memory reductions, barriers) leave it scalar code and
 * loop bookkeeping. Here a work-item walks its own row with float16 values, so every operation
 * (the loads with their conversions, max, exp, the sums, the stores) is one 16-lane vector
 * operation that the compiler maps onto the CPU's SIMD registers, and nothing is shared:
 *   pass 1  m = max(s) over the row (s = x * scale);
 *   pass 2  d = sum(exp(s - m)); softmax into an f32 y keeps exp(s - m) in y;
 *   pass 3  y = exp(s - m) / d (read back from y, or private memory, where pass 2 kept it, else
 *           recomputed from x),
 *           or y = (s - m) - log(d).
 * A row's three passes run back to back on one core, so passes 2 and 3 read it from that core's
 * cache when it fits there (a 4096-column f32 row is 16 KiB). The lanes keep separate partial
 * maxima and compensated sums, combined in a fixed order: bitwise the same result on every run. The last
 * cols % 16 elements go through the same vector code, padded with -inf (neutral for max and
 * sum), and only the valid lanes are stored.
 *
 * Special values come out as in softmax.cl (the same arithmetic): fmax skips NaN but exp
 * carries it into d; +inf - +inf and -inf - -inf are NaN. In place (x and y the same view) is
 * safe: each pass reads an element before it writes it, and pass 3 reads y only where pass 2
 * wrote it. */
#ifndef FLASHCL_EMBEDDED
#include "softmax_ordered.cl" /* and through it softmax.cl: the program's files in order */
#endif

#ifndef FC_ROWS_VECTOR
#define FC_ROWS_VECTOR 0
#endif

#if FC_ROWS_VECTOR

/* The longest row whose exponentials a work-item keeps in private memory for a 16-bit output
 * (see fc_rows_vector): 256 KiB, a core's L2, which covers the vocabularies of GPT-2 (50257) and
 * of Llama 2 (32000). Against 4096 (2-core AVX-512 EPYC, PoCL 3.1, ms, min of 11-15 alternating
 * runs in one process): 64 x 65536 f16 1.72 against 2.21, 256 x 16384 f16 1.90 against 2.48
 * (16384: 1.91), 512 x 8192 bf16 2.58 against 3.28; rows of up to 4096 columns level (4096 x 1024
 * f16 1.62 against 1.60), and so are longer ones, which recompute (16 x 262144 bf16 2.70). */
#define FC_RV_KEPT 65536

/* 16 elements j .. j + 15 of a row as floats. */
FC_INLINE float16 fc_vload16(const int dt, const __global void *row, uint j)
{
    if (dt == FC_F32)
        return vload16(0, (const __global float *)row + j);
    if (dt == FC_F16)
        return vload_half16(0, (const __global half *)row + j);
    return as_float16(convert_uint16(vload16(0, (const __global ushort *)row + j)) << 16);
}

/* bf16 bits of 16 floats: fc_float_to_bf16 (cl/dtype.h) lane by lane, as vector operations. */
FC_INLINE ushort16 fc_float16_to_bf16(float16 f)
{
    const uint16 u = as_uint16(f);
    const uint16 rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    const uint16 quiet_nan = (u >> 16) | 0x0040u;
    return convert_ushort16(select(rounded, quiet_nan, as_uint16(isnan(f))));
}

FC_INLINE void fc_vstore16(const int dt, __global void *row, uint j, float16 v)
{
    if (dt == FC_F32)
        vstore16(v, 0, (__global float *)row + j);
    else if (dt == FC_F16)
        vstore_half16_rte(v, 0, (__global half *)row + j);
    else
        vstore16(fc_float16_to_bf16(v), 0, (__global ushort *)row + j);
}

/* s = x * scale for elements j .. j + 15, -inf for those at or past `cols` (after the scaling,
 * which may be negative). */
FC_INLINE float16 fc_row_s16(const int dt, const __global void *row, uint j, uint cols,
                             float scale)
{
    if (j + 16 <= cols)
        return fc_vload16(dt, row, j) * scale;
    float s[16];
    for (uint i = 0; i < 16; i++)
        s[i] = j + i < cols ? fc_load(dt, row, j + i) * scale : -INFINITY;
    return vload16(0, s);
}

/* Stores the lanes of v for elements j .. min(j + 16, cols) - 1. */
FC_INLINE void fc_row_store16(const int dt, __global void *row, uint j, uint cols, float16 v)
{
    if (j + 16 <= cols) {
        fc_vstore16(dt, row, j, v);
        return;
    }
    float o[16];
    vstore16(v, 0, o);
    for (uint i = 0; j + i < cols; i++)
        fc_store(dt, row, j + i, o[i]);
}

/* Lane maxima and sums combined in a fixed order (through a private copy: Oclgrind's
 * uninitialised-value check misreads .lo / .hi halves of 16-wide vectors). */
FC_INLINE float fc_max16(float16 v)
{
    float l[16];
    vstore16(v, 0, l);
    float m = l[0];
    for (int i = 1; i < 16; i++)
        m = fmax(m, l[i]);
    return m;
}

FC_INLINE float fc_sum16(float16 v)
{
    float l[16];
    vstore16(v, 0, l);
    float a = 0.0f, b = 0.0f, c = 0.0f, d = 0.0f;
    for (int i = 0; i < 16; i += 4) {
        a += l[i];
        b += l[i + 1];
        c += l[i + 2];
        d += l[i + 3];
    }
    return (a + b) + (c + d);
}

FC_INLINE void fc_rows_vector(const int xdt, const int ydt, const __global void *x, ulong x_off,
                              ulong x_stride, __global void *y, ulong y_off, ulong y_stride,
                              ulong rows, uint cols, float scale, int log_mode)
{
    const ulong row = get_global_id(0);
    if (row >= rows)
        return;
    const __global void *xr = fc_row(xdt, x, x_off + row * x_stride);
    __global void *yr = fc_row_w(ydt, y, y_off + row * y_stride);
    /* Softmax into f32 keeps exp(s - m) in y between passes 2 and 3 (one exp per element).
     * 16-bit outputs would round it: rows of up to FC_RV_KEPT columns keep it in private memory
     * (the core's cache) instead, and longer rows recompute it from x in pass 3. The exp
     * is about a third of the kernel's time: 4096 x 1024 f16 took 1.60 ms against 2.26 with pass 3
     * recomputing it (2-core AVX-512 EPYC, PoCL 3.1, min of 15 alternating runs in one process,
     * bench/results/2026-12-06-session36.md). */
    const int keep = !log_mode && ydt == FC_F32;
    const int kept = !log_mode && !keep && cols <= FC_RV_KEPT;
    float16 e_kept[FC_RV_KEPT / 16];

    float16 m16 = (float16)(-INFINITY);
    for (uint j = 0; j < cols; j += 16)
        m16 = fmax(m16, fc_row_s16(xdt, xr, j, cols, scale));
    const float m = fc_max16(m16);

    /* Compensated (Kahan) sums: a lane adds up to cols / 16 terms, and once its sum is large
     * the smallest terms would otherwise round away (1M columns lost 3% of d in a test). */
    float16 d16 = (float16)(0.0f), lost16 = (float16)(0.0f);
    for (uint j = 0; j < cols; j += 16) {
        const float16 e = exp(fc_row_s16(xdt, xr, j, cols, scale) - m);
        const float16 term = e - lost16, sum = d16 + term;
        lost16 = (sum - d16) - term;
        d16 = sum;
        if (keep)
            fc_row_store16(FC_F32, yr, j, cols, e);
        else if (kept)
            e_kept[j / 16] = e;
    }
    const float d = fc_sum16(d16) - fc_sum16(lost16);

    if (log_mode) {
        const float log_d = log(d);
        for (uint j = 0; j < cols; j += 16)
            fc_row_store16(ydt, yr, j, cols, (fc_row_s16(xdt, xr, j, cols, scale) - m) - log_d);
    } else {
        const float inv_d = 1.0f / d;
        for (uint j = 0; j < cols; j += 16) {
            const float16 e = keep   ? fc_row_s16(FC_F32, yr, j, cols, 1.0f)
                              : kept ? e_kept[j / 16]
                                     : exp(fc_row_s16(xdt, xr, j, cols, scale) - m);
            fc_row_store16(ydt, yr, j, cols, e * inv_d);
        }
    }
}

#define FC_ROWS_VECTOR_PAIR(XN, XT, XD, YN, YT, YD)                                            \
    __kernel void softmax_rows_vector_##XN##_##YN(FC_PTR_ARGS(XT, YT), ulong rows, uint cols,  \
                                                  float scale, int log_mode)                   \
    {                                                                                          \
        fc_rows_vector(XD, YD, x, x_off, x_stride, y, y_off, y_stride, rows, cols, scale,      \
                       log_mode);                                                              \
    }

FC_EACH_PAIR(FC_ROWS_VECTOR_PAIR)
#endif /* FC_ROWS_VECTOR */
