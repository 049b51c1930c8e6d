/* cl/softmax_kernels.cl — the kernels of cl/softmax.cl: rows in registers, rows held, online
 * chunked and the two-kernel split row, for every (input, output) storage pair of the input
 * dtypes FC_DTYPES selects (cl/dtype.h), and the *_aligned switch the cooperative split row
 * (cl/softmax_cooperative.cl) uses too. */
#ifndef FLASHCL_EMBEDDED
#include "softmax.cl"
#endif

/* FC_ALIGNED_KERNELS (GPUs): the rows held and the cooperative split row are compiled once more
 * as *_aligned kernels, with vec the literal 1, for rows that start 16-byte aligned (the usual
 * case), so that the code of the other two layouts (element and shifted: vec 0 and 2, which the
 * plain kernels take) is not in them. With all three in one kernel, aligned rows ran 2-16 %
 * slower through NVIDIA's OpenCL; with the twins they run as fast as before the other layouts
 * came (H200, 2026-11-26, ms, one kernel for all three / the twins / 25bc249, the commit before
 * the shifted layout: cooperative 4096x32768 f16 0.181 / 0.159 / 0.160, 16384x12288 f16 0.329 /
 * 0.288 / 0.292, 1024x131072 f16 0.193 / 0.167 / 0.169; rows held 32768x128 bf16 0.0094 /
 * 0.0085 / 0.0085; bench/results/2026-11-26-h200-s20-aligned-kernels.txt). */
#ifndef FC_ALIGNED_KERNELS
#define FC_ALIGNED_KERNELS 0
#endif
#if FC_ALIGNED_KERNELS
#define FC_IF_ALIGNED_KERNELS(x) x
#else
#define FC_IF_ALIGNED_KERNELS(x)
#endif

#define FC_ROWS_HELD_KERNEL_AS(NAME, E, XN, XT, XD, YN, YT, YD, VEC)                           \
    __kernel void NAME##_##XN##_##YN(FC_PTR_ARGS(XT, YT), ulong rows, uint cols, float scale,  \
                                     int log_mode, uint team, int vec)                         \
    {                                                                                          \
        __local float scratch[FC_MAX_WG];                                                      \
        (void)vec;                                                                             \
        fc_rows_held(XD, YD, E, x, x_off, x_stride, y, y_off, y_stride, rows, cols, scale,     \
                     log_mode, team, VEC, scratch);                                            \
    }
#define FC_ROWS_HELD_KERNEL(E, XN, XT, XD, YN, YT, YD)                                         \
    FC_ROWS_HELD_KERNEL_AS(softmax_rows_held##E, E, XN, XT, XD, YN, YT, YD, vec)               \
    FC_IF_ALIGNED_KERNELS(FC_ROWS_HELD_KERNEL_AS(softmax_rows_held##E##_aligned, E, XN, XT,    \
                                                 XD, YN, YT, YD, 1))
#define FC_SOFTMAX_PAIR(XN, XT, XD, YN, YT, YD)                                                \
    __kernel void softmax_rows_in_registers_##XN##_##YN(FC_PTR_ARGS(XT, YT), ulong rows,        \
                                                        uint cols, float scale, int log_mode,  \
                                                        uint team, int vec)                    \
    {                                                                                          \
        __local float scratch[FC_MAX_WG];                                                      \
        fc_rows_in_registers(XD, YD, x, x_off, x_stride, y, y_off, y_stride, rows, cols, scale, \
                             log_mode, team, vec, scratch);                                    \
    }                                                                                          \
    __kernel void softmax_online_chunked_##XN##_##YN(FC_PTR_ARGS(XT, YT), ulong rows,           \
                                                     uint cols, float scale, int log_mode,     \
                                                     int vec)                                  \
    {                                                                                          \
        __local float scratch[FC_MAX_WG];                                                      \
        fc_online_chunked(XD, YD, x, x_off, x_stride, y, y_off, y_stride, rows, cols, scale,   \
                          log_mode, vec, scratch);                                             \
    }                                                                                          \
    __kernel void softmax_split_row_normalize_##XN##_##YN(                                     \
        FC_PTR_ARGS(XT, YT), uint cols, uint slice_len, uint slices, float scale,              \
        int log_mode, int vec, __global const float2 *partials)                                \
    {                                                                                          \
        __local float scratch[FC_MAX_WG];                                                      \
        fc_split_row_normalize(XD, YD, x, x_off, x_stride, y, y_off, y_stride, cols,           \
                               slice_len, slices, scale, log_mode, vec, partials, scratch);    \
    }                                                                                          \
    FC_ROWS_HELD_KERNEL(8, XN, XT, XD, YN, YT, YD)                                           \
    FC_ROWS_HELD_KERNEL(16, XN, XT, XD, YN, YT, YD)

#define FC_SPLIT_PARTIALS(XN, XT, XD)                                                          \
    __kernel void softmax_split_row_partials_##XN(__global const XT *x, ulong x_off,           \
                                                  ulong x_stride, uint cols, uint slice_len,   \
                                                  uint slices, float scale, int vec,           \
                                                  __global float2 *partials)                   \
    {                                                                                          \
        __local float scratch[FC_MAX_WG];                                                      \
        fc_split_row_partials(XD, x, x_off, x_stride, cols, slice_len, slices, scale, vec,     \
                              partials, scratch);                                              \
    }

#define FC_SOFTMAX_FROM(XN, XT, XD)                                                            \
    FC_SOFTMAX_PAIR(XN, XT, XD, f32, float, FC_F32)                                            \
    FC_SOFTMAX_PAIR(XN, XT, XD, f16, half, FC_F16)                                             \
    FC_SOFTMAX_PAIR(XN, XT, XD, bf16, ushort, FC_BF16)                                         \
    FC_SPLIT_PARTIALS(XN, XT, XD)

/* Rows held E elements per work-item for every output dtype: 32 for 16-bit inputs only (64 bytes
 * per work-item, as f32 has at 16); three chunks instead of four, 12 for f32 inputs and 24 for
 * 16-bit ones, for rows that leave each work-item's fourth chunk empty (softmax_plan.c,
 * fc_plan_held_three). */
#define FC_HELD_FROM(E, XN, XT, XD)                                                            \
    FC_ROWS_HELD_KERNEL(E, XN, XT, XD, f32, float, FC_F32)                                     \
    FC_ROWS_HELD_KERNEL(E, XN, XT, XD, f16, half, FC_F16)                                      \
    FC_ROWS_HELD_KERNEL(E, XN, XT, XD, bf16, ushort, FC_BF16)

FC_WITH_F32(FC_SOFTMAX_FROM(f32, float, FC_F32))
FC_WITH_F16(FC_SOFTMAX_FROM(f16, half, FC_F16))
FC_WITH_BF16(FC_SOFTMAX_FROM(bf16, ushort, FC_BF16))
FC_WITH_F32(FC_HELD_FROM(12, f32, float, FC_F32))
FC_WITH_F16(FC_HELD_FROM(32, f16, half, FC_F16))
FC_WITH_BF16(FC_HELD_FROM(32, bf16, ushort, FC_BF16))
FC_WITH_F16(FC_HELD_FROM(24, f16, half, FC_F16))
FC_WITH_BF16(FC_HELD_FROM(24, bf16, ushort, FC_BF16))
