/* One context used from 4 threads at once: each thread runs softmax on its own buffers many
 * times (different shapes, dtypes, variants, in place or not), interleaved with buffer
 * creation, writes, reads and flashcl_finish, and checks every result against host_ref.
 * Failures are collected per thread (cmocka asserts are not thread-safe) and reported by the
 * main thread. */
#include "test_util.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static flashcl_context *g_ctx;

enum { THREADS = 4, ITERS = 40 };

typedef struct worker {
    int id;
    int failures;
    int runs;
    char first_error[512];
} worker;

static void fail_worker(worker *w, const char *fmt, const char *a, const char *b)
{
    if (w->failures++ == 0)
        snprintf(w->first_error, sizeof w->first_error, fmt, a, b);
}

static void *work(void *arg)
{
    worker *w = arg;
    tu_rng rng;
    tu_rng_seed(&rng, tu_base_seed() + 1000 * (uint64_t)w->id);
    const flashcl_softmax_variant vs[4] = {
        FLASHCL_SOFTMAX_AUTO, FLASHCL_SOFTMAX_ROW_IN_REGISTERS, FLASHCL_SOFTMAX_ONLINE_CHUNKED,
        FLASHCL_SOFTMAX_SPLIT_ROW};
    const flashcl_dtype dts[3] = {FLASHCL_F32, FLASHCL_F16, FLASHCL_BF16};
    for (int it = 0; it < ITERS; it++) {
        int64_t rows = 1 + (int64_t)tu_rng_below(&rng, 40);
        int64_t cols = 1 + (int64_t)tu_rng_below(&rng, it % 5 == 0 ? 20000 : 3000);
        flashcl_dtype xt = dts[tu_rng_below(&rng, 3)];
        flashcl_dtype yt = dts[tu_rng_below(&rng, 3)];
        int in_place = xt == yt && tu_rng_below(&rng, 3) == 0;
        flashcl_softmax_variant v = vs[(w->id + it) % 4];
        if (v == FLASHCL_SOFTMAX_ROW_IN_REGISTERS && cols > TU_RIR_GUARANTEED_COLS)
            v = FLASHCL_SOFTMAX_AUTO;
        int log = (int)tu_rng_below(&rng, 2);
        size_t esx = host_ref_dtype_size(xt), esy = host_ref_dtype_size(yt);
        size_t n = (size_t)(rows * cols);

        unsigned char *xh = malloc(n * esx), *yh = malloc(n * esy);
        float *row = malloc((size_t)cols * sizeof(float));
        double *ref = malloc((size_t)cols * sizeof(double));
        if (!xh || !yh || !row || !ref) {
            fail_worker(w, "%s%s", "out of memory", "");
            break;
        }
        for (int64_t r = 0; r < rows; r++) {
            tu_fill_row(row, cols,
                        (tu_row_kind)(tu_rng_below(&rng, 4) ? TU_ROW_RANDOM
                                                            : tu_rng_below(&rng, TU_ROW_KIND_COUNT)),
                        0, 0, &rng);
            for (int64_t j = 0; j < cols; j++)
                host_ref_store(xt, xh, (size_t)(r * cols + j), row[j]);
        }
        flashcl_buffer *xb = NULL, *yb = NULL;
        flashcl_status st = flashcl_buffer_create(g_ctx, n * esx, &xb);
        if (st == FLASHCL_SUCCESS && !in_place)
            st = flashcl_buffer_create(g_ctx, n * esy, &yb);
        if (st == FLASHCL_SUCCESS)
            st = flashcl_buffer_write(xb, 0, xh, n * esx);
        if (st != FLASHCL_SUCCESS) {
            fail_worker(w, "buffer setup: %s: %s", flashcl_status_string(st),
                        flashcl_last_error());
            goto next;
        }
        flashcl_tensor x = {0}, y = {0};
        x.buffer = xb;
        x.dtype = xt;
        x.ndim = 2;
        x.shape[0] = rows;
        x.shape[1] = cols;
        x.strides[0] = cols;
        x.strides[1] = 1;
        y = x;
        if (!in_place) {
            y.buffer = yb;
            y.dtype = yt;
        }
        flashcl_softmax_params p = {0};
        p.log = log;
        p.variant = v;
        p.scale = it % 3 == 0 ? -1.5f : 0.0f;
        st = flashcl_softmax(g_ctx, &p, &x, &y);
        if (st != FLASHCL_SUCCESS) {
            fail_worker(w, "softmax: %s: %s", flashcl_status_string(st), flashcl_last_error());
            goto next;
        }
        if (it % 7 == 0 && flashcl_finish(g_ctx) != FLASHCL_SUCCESS)
            fail_worker(w, "finish: %s%s", flashcl_last_error(), "");
        st = flashcl_buffer_read(in_place ? xb : yb, 0, yh, n * esy);
        if (st != FLASHCL_SUCCESS) {
            fail_worker(w, "read: %s: %s", flashcl_status_string(st), flashcl_last_error());
            goto next;
        }
        for (int64_t r = 0; r < rows; r++) {
            for (int64_t j = 0; j < cols; j++)
                row[j] = host_ref_load(xt, xh, (size_t)(r * cols + j));
            host_ref_softmax_row(row, ref, cols, p.scale, log);
            for (int64_t j = 0; j < cols; j++) {
                float got = host_ref_load(yt, yh, (size_t)(r * cols + j));
                if (!tu_value_ok(yt, got, ref[j], tu_softmax_tol(ref[j], log))) {
                    char detail[256];
                    snprintf(detail, sizeof detail,
                             "iter %d rows=%d cols=%d %s->%s variant=%d log=%d in_place=%d: "
                             "[%d,%d] got %.9g ref %.12g",
                             it, (int)rows, (int)cols, host_ref_dtype_name(xt),
                             host_ref_dtype_name(yt), (int)v, log, in_place, (int)r, (int)j,
                             (double)got, ref[j]);
                    fail_worker(w, "%s%s", detail, "");
                    r = rows;
                    break;
                }
            }
        }
        w->runs++;
    next:
        flashcl_buffer_destroy(xb);
        flashcl_buffer_destroy(yb);
        free(xh);
        free(yh);
        free(row);
        free(ref);
    }
    return NULL;
}

static void test_four_threads_one_context(void **state)
{
    (void)state;
    pthread_t t[THREADS];
    worker w[THREADS];
    for (int i = 0; i < THREADS; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].id = i;
        assert_int_equal(pthread_create(&t[i], NULL, work, &w[i]), 0);
    }
    int failures = 0;
    for (int i = 0; i < THREADS; i++) {
        assert_int_equal(pthread_join(t[i], NULL), 0);
        if (w[i].failures)
            print_error("thread %d: %d failures, first: %s\n", i, w[i].failures,
                        w[i].first_error);
        failures += w[i].failures;
    }
    assert_int_equal(failures, 0);
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(w[i].runs, ITERS);
    assert_int_equal(flashcl_finish(g_ctx), FLASHCL_SUCCESS);
}

/* Argument errors on one thread do not disturb the messages or results of the others. */
static void *fail_loop(void *arg)
{
    int *bad = arg;
    for (int i = 0; i < 2000; i++) {
        if (flashcl_softmax(g_ctx, NULL, NULL, NULL) != FLASHCL_INVALID_ARGUMENT ||
            flashcl_last_error()[0] == '\0')
            (*bad)++;
    }
    return NULL;
}

static void test_errors_while_working(void **state)
{
    (void)state;
    pthread_t t[2];
    int bad[2] = {0, 0};
    worker w;
    memset(&w, 0, sizeof w);
    w.id = 9;
    assert_int_equal(pthread_create(&t[0], NULL, fail_loop, &bad[0]), 0);
    assert_int_equal(pthread_create(&t[1], NULL, fail_loop, &bad[1]), 0);
    work(&w);
    assert_int_equal(pthread_join(t[0], NULL), 0);
    assert_int_equal(pthread_join(t[1], NULL), 0);
    if (w.failures)
        fail_msg("%s", w.first_error);
    assert_int_equal(bad[0] + bad[1], 0);
}

int main(void)
{
    g_ctx = tu_context_or_skip();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_four_threads_one_context),
        cmocka_unit_test(test_errors_while_working),
    };
    int failures = cmocka_run_group_tests(tests, NULL, NULL);
    flashcl_context_destroy(g_ctx);
    return tu_exit_code(failures);
}
