/* Inputs and the error column: random rows in the dtype, and sampled rows of the output
 * compared with host_ref (double accumulation) computed on the same dtype-rounded inputs. */
#include <math.h>
#include <stdlib.h>

#include "accuracy.h"
#include "host_ref.h"

void bench_fill_uniform(void *data, flashcl_dtype dtype, size_t count, uint64_t seed,
                        float limit)
{
    /* xorshift64*: fast and reproducible; 24 random bits make a float in [0, 1) exactly. */
    uint64_t s = seed ? seed : 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < count; i++) {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        const uint64_t r = s * 0x2545f4914f6cdd1dull;
        const float u = (float)(r >> 40) * (1.0f / 16777216.0f);
        host_ref_store(dtype, data, i, 2.0f * limit * u - limit);
    }
}

void bench_fill_random(void *data, flashcl_dtype dtype, size_t count, uint64_t seed)
{
    /* The range [-8, 8] gives rows whose exponentials span e^16: enough to expose a missing
     * max subtraction, and never all zeros, which would hide a broken kernel. */
    bench_fill_uniform(data, dtype, count, seed, 8.0f);
}

void bench_tolerance(flashcl_dtype dtype, int log, double *atol, double *rtol)
{
    /* rtol: a few roundings of the output dtype (f32 also absorbs exp's few ulp and the
     * f32 accumulation over millions of terms). atol: what is left for outputs near 0 —
     * softmax outputs underflow there, log-softmax outputs are differences of O(10) values. */
    switch (dtype) {
    case FLASHCL_F32:
        *rtol = 1e-4;
        *atol = log ? 1e-5 : 1e-6;
        break;
    case FLASHCL_F16:
        *rtol = 2e-3; /* f16 rounding is 2^-11 relative */
        *atol = log ? 1e-3 : 1e-5;
        break;
    default:
        *rtol = 1.6e-2; /* bf16 rounding is 2^-8 relative */
        *atol = log ? 1e-2 : 1e-5;
        break;
    }
}

/* Rows checked: the first, the last and six spread between (all rows of small inputs). */
static int sample_rows(int64_t rows, int64_t *out)
{
    int n = 0;
    if (rows <= BENCH_SAMPLED_ROWS) {
        for (int64_t r = 0; r < rows; r++)
            out[n++] = r;
        return n;
    }
    for (int i = 0; i < BENCH_SAMPLED_ROWS; i++) {
        const int64_t r = (rows - 1) * i / (BENCH_SAMPLED_ROWS - 1);
        if (n == 0 || out[n - 1] != r)
            out[n++] = r;
    }
    return n;
}

flashcl_status bench_check_output(const flashcl_buffer *y, const void *x_host,
                                  flashcl_dtype dtype, int64_t rows, int64_t cols, int log,
                                  double *max_abs_err, double *err_over_tol)
{
    const size_t esz = host_ref_dtype_size(dtype);
    const size_t n = (size_t)cols;
    float *x = malloc(n * sizeof *x);
    double *ref = malloc(n * sizeof *ref);
    void *yraw = malloc(n * esz);
    flashcl_status st = FLASHCL_SUCCESS;
    double atol, rtol, worst = 0.0, worst_ratio = 0.0;
    int64_t picked[BENCH_SAMPLED_ROWS];
    const int npicked = sample_rows(rows, picked);

    if (!x || !ref || !yraw) {
        st = FLASHCL_OUT_OF_MEMORY;
        goto done;
    }
    bench_tolerance(dtype, log, &atol, &rtol);
    for (int p = 0; p < npicked; p++) {
        const size_t first = (size_t)picked[p] * n;
        st = flashcl_buffer_read(y, first * esz, yraw, n * esz);
        if (st != FLASHCL_SUCCESS)
            goto done;
        for (size_t j = 0; j < n; j++)
            x[j] = host_ref_load(dtype, x_host, first + j);
        host_ref_softmax_row(x, ref, cols, 1.0f, log);
        for (size_t j = 0; j < n; j++) {
            const double got = host_ref_load(dtype, yraw, j);
            double err, ratio;
            if (isnan(ref[j]) || isinf(ref[j])) {
                /* Special values must match exactly (NaN with NaN, -inf with -inf). */
                const int same = isnan(ref[j]) ? isnan(got) : got == ref[j];
                err = same ? 0.0 : INFINITY;
                ratio = err;
            } else if (isnan(got)) {
                err = ratio = INFINITY;
            } else {
                err = fabs(got - ref[j]);
                ratio = err / (atol + rtol * fabs(ref[j]));
            }
            if (err > worst)
                worst = err;
            if (ratio > worst_ratio)
                worst_ratio = ratio;
        }
    }
done:
    *max_abs_err = worst;
    *err_over_tol = worst_ratio;
    free(x);
    free(ref);
    free(yraw);
    return st;
}
