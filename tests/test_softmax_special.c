/* Special values through every variant (AUTO and the three forced ones) x all 9 dtype pairs x
 * cols {1, 2, 3, 127, 1025, 4097} x (scale, log) in {(1, 0), (0 = 1, 1), (-1.5, 0),
 * (0.37, 1)}: 9 rows, one of each kind (random, -inf entries, all -inf, a NaN, a +inf, ~1e30,
 * ~1000, constant, wide range), so that torch's semantics hold in every kernel: -inf entries
 * give 0 (log: -inf), rows with NaN or +inf or all -inf give NaN rows, huge magnitudes stay
 * exact. Also 65537 columns for three pairs, and a few single-row cases where the special
 * value sits at the very start or end of a long row. */
#include "test_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static flashcl_context *g_ctx;

static const flashcl_softmax_variant k_variants[4] = {
    FLASHCL_SOFTMAX_AUTO, FLASHCL_SOFTMAX_ROW_IN_REGISTERS, FLASHCL_SOFTMAX_ONLINE_CHUNKED,
    FLASHCL_SOFTMAX_SPLIT_ROW};
static const int64_t k_cols[] = {1, 2, 3, 127, 1025, 4097};
static const struct {
    float scale;
    int log;
} k_sl[4] = {{1.0f, 0}, {0.0f, 1}, {-1.5f, 0}, {0.37f, 1}};

static void run_variant(int vi)
{
    for (int pair = 0; pair < 9; pair++)
        for (size_t ci = 0; ci < sizeof k_cols / sizeof k_cols[0]; ci++)
            for (int s = 0; s < 4; s++) {
                tu_softmax_case c = {0};
                c.xt = tu_pairs[pair][0];
                c.yt = tu_pairs[pair][1];
                c.rows = TU_ROW_KIND_COUNT;
                c.cols = k_cols[ci];
                c.variant = k_variants[vi];
                c.allow_unsupported = k_variants[vi] == FLASHCL_SOFTMAX_ROW_IN_REGISTERS &&
                                      c.cols > TU_RIR_GUARANTEED_COLS;
                c.special = 1;
                c.kind_offset = 0;
                c.scale = k_sl[s].scale;
                c.log = k_sl[s].log;
                c.x_pad = s % 2;
                c.y_pad = (s / 2) * 3;
                tu_softmax_check(g_ctx, &c,
                                 tu_base_seed() ^ ((uint64_t)vi << 40 | (uint64_t)pair << 32 |
                                                   (uint64_t)ci << 8 | (uint64_t)s),
                                 NULL);
            }
    const int big_pairs[3] = {0, 5, 6};
    for (int p = 0; p < 3; p++)
        for (int s = 0; s < 4; s += 3) {
            tu_softmax_case c = {0};
            c.xt = tu_pairs[big_pairs[p]][0];
            c.yt = tu_pairs[big_pairs[p]][1];
            c.rows = TU_ROW_KIND_COUNT;
            c.cols = 65537;
            c.variant = k_variants[vi];
            c.allow_unsupported = k_variants[vi] == FLASHCL_SOFTMAX_ROW_IN_REGISTERS;
            c.special = 1;
            c.scale = k_sl[s].scale;
            c.log = k_sl[s].log;
            tu_softmax_check(g_ctx, &c, tu_base_seed() + (uint64_t)(vi * 8 + p * 2 + s), NULL);
        }
}

static void test_auto(void **state)
{
    (void)state;
    run_variant(0);
}

static void test_row_in_registers(void **state)
{
    (void)state;
    run_variant(1);
}

static void test_online_chunked(void **state)
{
    (void)state;
    run_variant(2);
}

static void test_split_row(void **state)
{
    (void)state;
    run_variant(3);
}

/* A special value at the first or last position of a long row, in each variant: the edges of
 * chunks and work-groups. Built directly, one row each. */
static void test_special_at_edges(void **state)
{
    (void)state;
    const int64_t cols = 70001;
    const float specials[4] = {NAN, INFINITY, -INFINITY, 1e30f};
    float *x = malloc((size_t)cols * sizeof(float));
    float *y = malloc((size_t)cols * sizeof(float));
    double *ref = malloc((size_t)cols * sizeof(double));
    assert_non_null(x);
    assert_non_null(y);
    assert_non_null(ref);
    flashcl_buffer *xb, *yb;
    assert_int_equal(flashcl_buffer_create(g_ctx, (size_t)cols * 4, &xb), FLASHCL_SUCCESS);
    assert_int_equal(flashcl_buffer_create(g_ctx, (size_t)cols * 4, &yb), FLASHCL_SUCCESS);
    flashcl_tensor tx = {0}, ty = {0};
    tx.buffer = xb;
    tx.dtype = FLASHCL_F32;
    tx.ndim = 2;
    tx.shape[0] = 1;
    tx.shape[1] = cols;
    tx.strides[0] = cols;
    tx.strides[1] = 1;
    ty = tx;
    ty.buffer = yb;
    tu_rng rng;
    tu_rng_seed(&rng, tu_base_seed() + 77);
    for (int vi = 0; vi < 4; vi++) {
        if (k_variants[vi] == FLASHCL_SOFTMAX_ROW_IN_REGISTERS)
            continue; /* 70001 columns: not its shape */
        for (int si = 0; si < 4; si++)
            for (int at_end = 0; at_end < 2; at_end++)
                for (int log = 0; log < 2; log++) {
                    tu_fill_row(x, cols, TU_ROW_RANDOM, 0, 0, &rng);
                    x[at_end ? cols - 1 : 0] = specials[si];
                    assert_int_equal(flashcl_buffer_write(xb, 0, x, (size_t)cols * 4),
                                     FLASHCL_SUCCESS);
                    flashcl_softmax_params p = {0};
                    p.log = log;
                    p.variant = k_variants[vi];
                    flashcl_status st = flashcl_softmax(g_ctx, &p, &tx, &ty);
                    if (st != FLASHCL_SUCCESS)
                        fail_msg("variant %d: %s: %s", vi, flashcl_status_string(st),
                                 flashcl_last_error());
                    assert_int_equal(flashcl_buffer_read(yb, 0, y, (size_t)cols * 4),
                                     FLASHCL_SUCCESS);
                    host_ref_softmax_row(x, ref, cols, 1.0f, log);
                    for (int64_t j = 0; j < cols; j++)
                        if (!tu_value_ok(FLASHCL_F32, y[j], ref[j], tu_softmax_tol(ref[j], log)))
                            fail_msg("variant %d special %g at %s log=%d: col %d got %.9g "
                                     "ref %.12g",
                                     vi, (double)specials[si], at_end ? "end" : "start", log,
                                     (int)j, (double)y[j], ref[j]);
                }
    }
    flashcl_buffer_destroy(xb);
    flashcl_buffer_destroy(yb);
    free(x);
    free(y);
    free(ref);
}

int main(void)
{
    g_ctx = tu_context_or_skip();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_auto),
        cmocka_unit_test(test_row_in_registers),
        cmocka_unit_test(test_online_chunked),
        cmocka_unit_test(test_split_row),
        cmocka_unit_test(test_special_at_edges),
    };
    int failures = cmocka_run_group_tests(tests, NULL, NULL);
    flashcl_context_destroy(g_ctx);
    return tu_exit_code(failures);
}
