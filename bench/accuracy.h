/* Inputs and the error column of flashcl-bench (accuracy.c). */
#ifndef FLASHCL_BENCH_ACCURACY_H
#define FLASHCL_BENCH_ACCURACY_H

#include <stddef.h>
#include <stdint.h>

#include "flashcl.h"

#define BENCH_SAMPLED_ROWS 8

/* count elements of dtype, uniform in [-limit, limit), reproducible from seed. */
void bench_fill_uniform(void *data, flashcl_dtype dtype, size_t count, uint64_t seed,
                        float limit);
/* count elements of dtype, uniform in [-8, 8), reproducible from seed. */
void bench_fill_random(void *data, flashcl_dtype dtype, size_t count, uint64_t seed);

/* An output element passes when |y - ref| <= atol + rtol*|ref|. */
void bench_tolerance(flashcl_dtype dtype, int log, double *atol, double *rtol);

/* Reads ~8 sampled rows (first and last included) of packed [rows, cols] output y, computes
 * host_ref_softmax_row on the same rows of the dtype-rounded host input x_host, and reports
 * the largest |y - ref| and the largest |y - ref| / (atol + rtol*|ref|). */
flashcl_status bench_check_output(const flashcl_buffer *y, const void *x_host,
                                  flashcl_dtype dtype, int64_t rows, int64_t cols, int log,
                                  double *max_abs_err, double *err_over_tol);

#endif
