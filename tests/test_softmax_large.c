/* Softmax on tensors past 2^31 and 2^32 elements (8-9 GB a tensor), where 32-bit element or
 * byte offsets would wrap: one short row per work-group (4194305 x 1024 f16), rows split across
 * work-groups (33000 x 131072 f16), and long f32 rows in log-softmax with a scale (520 x
 * 4194304). Sampled rows (the first, last, middle, and those on either side of elements 2^31,
 * 2^32 and 2^33) are compared with host_ref_softmax_row under the suite's tolerances
 * (test_util.h), and no element of them may keep its poison. GPUs with 24 GB or more only;
 * elsewhere the test skips with the reason. */
#include "large_tensors.h"

#include <stdio.h>
#include <stdlib.h>

#define SOFTMAX_LARGE_DEVICE_BYTES 24000000000ull
#define SOFTMAX_LARGE_HOST_BYTES 16000000000ull

static flashcl_context *g_ctx;

/* Rows to check: first, second, middle, last, and those around elements 2^31..2^33. */
static int sample_rows(int64_t rows, int64_t cols, int64_t *out)
{
    int n = 0;
    const int64_t picks[] = {0, 1, rows / 2, rows - 1};
    for (size_t i = 0; i < sizeof picks / sizeof picks[0]; i++) out[n++] = picks[i];
    for (int sh = 31; sh <= 33; sh++) {
        const int64_t r = (int64_t)(((uint64_t)1 << sh) / (uint64_t)cols);
        for (int64_t d = -1; d <= 1; d++)
            if (r + d >= 0 && r + d < rows) out[n++] = r + d;
    }
    return n;
}

static void check_large(flashcl_dtype dt, int64_t rows, int64_t cols, float scale, int log,
                        uint64_t seed)
{
    const uint64_t elems = (uint64_t)rows * (uint64_t)cols;
    printf("softmax %s %lld x %lld (%.2fG elements)%s%s\n", host_ref_dtype_name(dt),
           (long long)rows, (long long)cols, elems / 1e9, log ? ", log" : "",
           scale != 1.0f ? ", scaled" : "");
    fflush(stdout);
    flashcl_buffer *xb = lt_filled_buffer(g_ctx, dt, elems, seed, -8.0, 8.0);
    flashcl_buffer *yb = lt_poisoned_buffer(g_ctx, dt, elems);
    const flashcl_tensor x = tu_view2d(xb, dt, rows, cols), y = tu_view2d(yb, dt, rows, cols);
    const flashcl_softmax_params params = {scale, log, FLASHCL_SOFTMAX_AUTO};
    flashcl_status st = flashcl_softmax(g_ctx, &params, &x, &y);
    if (st == FLASHCL_SUCCESS) st = flashcl_finish(g_ctx);
    if (st != FLASHCL_SUCCESS) {
        flashcl_buffer_destroy(xb); /* 17 GB the next case needs */
        flashcl_buffer_destroy(yb);
        fail_msg("flashcl_softmax: %s: %s", flashcl_status_string(st), flashcl_last_error());
    }

    int64_t sample[16];
    const int ns = sample_rows(rows, cols, sample);
    float *xr = malloc((size_t)cols * sizeof(float)), *yr = malloc((size_t)cols * sizeof(float));
    double *ref = malloc((size_t)cols * sizeof(double));
    assert_true(xr && yr && ref);
    uint64_t bad = 0;
    for (int i = 0; i < ns; i++) {
        const int64_t r = sample[i];
        uint64_t poisoned;
        for (int64_t c = 0; c < cols; c++)
            xr[c] = lt_value(dt, seed, (uint64_t)(r * cols + c), -8.0, 8.0);
        host_ref_softmax_row(xr, ref, cols, scale, log);
        lt_read(yb, dt, (uint64_t)(r * cols), (uint64_t)cols, yr, &poisoned);
        for (int64_t c = 0; c < cols; c++) {
            if (tu_value_ok(dt, yr[c], ref[c], tu_softmax_tol(ref[c], log))) continue;
            if (bad++ < 5)
                printf("  row %lld col %lld: x=%.9g got=%.9g ref=%.12g\n", (long long)r,
                       (long long)c, xr[c], yr[c], ref[c]);
        }
        if (poisoned) fail_msg("row %lld: %llu elements never written", (long long)r,
                               (unsigned long long)poisoned);
    }
    printf("  %d rows checked, %llu elements out of tolerance\n", ns, (unsigned long long)bad);
    assert_int_equal(bad, 0);
    free(xr), free(yr), free(ref);
    flashcl_buffer_destroy(xb);
    flashcl_buffer_destroy(yb);
}

static void test_short_rows_past_2_32(void **state)
{
    (void)state;
    check_large(FLASHCL_F16, 4194305, 1024, 1.0f, 0, tu_base_seed() + 1);
}

static void test_split_rows_past_2_32(void **state)
{
    (void)state;
    check_large(FLASHCL_F16, 33000, 131072, 1.0f, 0, tu_base_seed() + 2);
}

static void test_long_f32_rows_past_2_31(void **state)
{
    (void)state;
    check_large(FLASHCL_F32, 520, 4194304, 0.5f, 1, tu_base_seed() + 3);
}

int main(void)
{
    g_ctx = tu_context_or_skip();
    lt_require_gpu_memory(g_ctx, SOFTMAX_LARGE_DEVICE_BYTES, SOFTMAX_LARGE_HOST_BYTES);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_short_rows_past_2_32),
        cmocka_unit_test(test_split_rows_past_2_32),
        cmocka_unit_test(test_long_f32_rows_past_2_31),
    };
    int failures = cmocka_run_group_tests(tests, NULL, NULL);
    flashcl_context_destroy(g_ctx);
    return tu_exit_code(failures);
}
