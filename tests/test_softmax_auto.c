/* flashcl_softmax with the default variant choice (AUTO): all 9 (x, y) dtype pairs x
 * cols in {1, 2, 3, 127, 1000, 1023, 1025, 4097, 65536, 65537, 1<<20} x rows in {1, 3, 17, 300,
 * 20000} (65536: the longest row whose exponentials the CPU kernel keeps, cl/softmax_rows_vector.cl)
 * (combinations above 3.2M elements left out: 20000 rows only for small cols, 2 x 1<<20 at
 * most), each with a layout drawn at random from a per-case seed: row pads (0 or odd) on x and
 * y, element offsets, an exact-fit or padded buffer end, scale 0 / 0.37 / -1.5, log on/off, in
 * place, and special rows (-inf entries, all -inf, NaN, +inf, ~1e30, ~1000, constant, wide).
 * Every output element is checked against host_ref on the dtype-rounded input and every byte
 * outside the output view must keep its poison (see test_util.h for the tolerances). */
#include "test_util.h"

#include <stdio.h>

static flashcl_context *g_ctx;

static const int64_t k_cols[] = {1, 2, 3, 127, 1000, 1023, 1025, 4097, 65536, 65537, 1 << 20};
static const int64_t k_rows[] = {1, 3, 17, 300, 20000};
#define ELEM_BUDGET ((int64_t)3200000)

static void run_pair(int pair)
{
    int n = 0;
    for (size_t ci = 0; ci < sizeof k_cols / sizeof k_cols[0]; ci++) {
        for (size_t ri = 0; ri < sizeof k_rows / sizeof k_rows[0]; ri++) {
            int64_t cols = k_cols[ci], rows = k_rows[ri];
            if (rows * cols > ELEM_BUDGET)
                continue;
            uint64_t seed = tu_base_seed() ^ ((uint64_t)pair << 48) ^ ((uint64_t)ci << 40) ^
                            ((uint64_t)ri << 32);
            tu_rng rng;
            tu_rng_seed(&rng, seed);
            tu_softmax_case c = {0};
            c.xt = tu_pairs[pair][0];
            c.yt = tu_pairs[pair][1];
            c.rows = rows;
            c.cols = cols;
            c.variant = FLASHCL_SOFTMAX_AUTO;
            tu_randomize_layout(&c, &rng);
            tu_softmax_check(g_ctx, &c, seed, NULL);
            n++;
        }
    }
    print_message("  %s -> %s: %d cases\n", host_ref_dtype_name(tu_pairs[pair][0]),
                  host_ref_dtype_name(tu_pairs[pair][1]), n);
}

#define PAIR_TEST(i)                                                                          \
    static void test_pair_##i(void **state)                                                   \
    {                                                                                         \
        (void)state;                                                                          \
        run_pair(i);                                                                          \
    }
PAIR_TEST(0)
PAIR_TEST(1)
PAIR_TEST(2)
PAIR_TEST(3)
PAIR_TEST(4)
PAIR_TEST(5)
PAIR_TEST(6)
PAIR_TEST(7)
PAIR_TEST(8)

int main(void)
{
    g_ctx = tu_context_or_skip();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pair_0), cmocka_unit_test(test_pair_1),
        cmocka_unit_test(test_pair_2), cmocka_unit_test(test_pair_3),
        cmocka_unit_test(test_pair_4), cmocka_unit_test(test_pair_5),
        cmocka_unit_test(test_pair_6), cmocka_unit_test(test_pair_7),
        cmocka_unit_test(test_pair_8),
    };
    int failures = cmocka_run_group_tests(tests, NULL, NULL);
    flashcl_context_destroy(g_ctx);
    return tu_exit_code(failures);
}
