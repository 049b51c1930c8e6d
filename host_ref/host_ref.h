/* host_ref: plain C reference implementations with double accumulation — the oracle every
 * test and the bench's error column compare against. Independent of the library's code. */
#ifndef FLASHCL_HOST_REF_H
#define FLASHCL_HOST_REF_H

#include <stddef.h>
#include <stdint.h>

#include "flashcl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Storage conversions. Stores round to nearest even; NaN stays NaN, overflow gives inf. */
float host_ref_half_to_float(uint16_t h);
uint16_t host_ref_float_to_half(float f);
float host_ref_bf16_to_float(uint16_t b);
uint16_t host_ref_float_to_bf16(float f);
size_t host_ref_dtype_size(flashcl_dtype dtype);
/* The unit roundoff of narrowing an f32 value to a 16-bit `dtype`: 2^-11 (f16), 2^-8 (bf16);
 * 0 for f32, which kernels keep as computed. Tolerances for 16-bit intermediates scale by it. */
double host_ref_narrowing_roundoff(flashcl_dtype dtype);
/* Element `index` of a packed array of `dtype`, widened to float. */
float host_ref_load(flashcl_dtype dtype, const void *data, size_t index);
/* Rounds `value` to `dtype` and stores it as element `index`. */
void host_ref_store(flashcl_dtype dtype, void *data, size_t index, float value);
/* `value` rounded to `dtype` (round to nearest even) and widened back to float. */
float host_ref_round(flashcl_dtype dtype, float value);
/* "f32", "f16", "bf16"; "?" for anything else. */
const char *host_ref_dtype_name(flashcl_dtype dtype);

/* Three-pass softmax (or log-softmax) of one row: y[j] = exp(s_j - max) / sum, with
 * s_j = x[j] * scale computed in float (as the kernels do), everything after in double.
 * Special values follow torch.softmax: -inf entries give 0 (log: -inf); a row containing NaN
 * or +inf, or all -inf, gives all NaN. */
void host_ref_softmax_row(const float *x, double *y, int64_t cols, float scale, int log);

/* The same function computed the way the kernels do, with a scalar online (max, denominator)
 * recurrence in double: checks the algorithm separately from the kernels. */
void host_ref_softmax_row_online(const float *x, double *y, int64_t cols, float scale, int log);

#ifdef __cplusplus
}
#endif
#endif
