/* Layouts, exhaustively on a few shapes: for cols in {3, 1000, 4097} (17 rows) and all 9 dtype
 * pairs, every combination of x row pad {0, 3} x y row pad {0, 5} x x offset {0, 1 element} x
 * y offset {0, 3 elements}, with scale {0, 0.37, -1.5} x log {0, 1} cycling through them; and
 * in place (x and y the same view) for the 3 same-dtype pairs x pad {0, 3} x offset {0, 2} x
 * all 6 scale/log pairs. Plus: params NULL, and an exact-fit buffer (no tail) everywhere odd.
 * Checks as in test_util.h. */
#include "test_util.h"

static flashcl_context *g_ctx;

static const int64_t k_cols[] = {3, 1000, 4097};
static const float k_scales[3] = {0.0f, 0.37f, -1.5f};

static void run_shape(int64_t cols)
{
    int n = 0;
    for (int pair = 0; pair < 9; pair++) {
        for (int combo = 0; combo < 16; combo++) {
            tu_softmax_case c = {0};
            c.xt = tu_pairs[pair][0];
            c.yt = tu_pairs[pair][1];
            c.rows = 17;
            c.cols = cols;
            c.x_pad = (combo & 1) ? 3 : 0;
            c.y_pad = (combo & 2) ? 5 : 0;
            c.x_off = (combo & 4) ? 1 : 0;
            c.y_off = (combo & 8) ? 3 : 0;
            c.tail = (combo + pair) % 2 ? 0 : 4;
            int sl = (combo + pair) % 6;
            c.scale = k_scales[sl % 3];
            c.log = sl / 3;
            c.special = combo % 3 == 0;
            c.kind_offset = combo;
            tu_softmax_check(g_ctx, &c,
                             tu_base_seed() + (uint64_t)(cols * 1000 + pair * 16 + combo), NULL);
            n++;
        }
        if (tu_pairs[pair][0] != tu_pairs[pair][1])
            continue;
        for (int combo = 0; combo < 24; combo++) {
            tu_softmax_case c = {0};
            c.xt = c.yt = tu_pairs[pair][0];
            c.rows = 17;
            c.cols = cols;
            c.in_place = 1;
            c.x_pad = (combo & 1) ? 3 : 0;
            c.x_off = (combo & 2) ? 2 : 0;
            c.scale = k_scales[(combo / 4) % 3];
            c.log = combo / 12;
            c.tail = combo % 3 ? 0 : 8;
            c.special = combo % 2;
            c.kind_offset = combo;
            tu_softmax_check(g_ctx, &c,
                             tu_base_seed() + 7 + (uint64_t)(cols * 1000 + pair * 24 + combo),
                             NULL);
            n++;
        }
    }
    print_message("  cols=%d: %d cases\n", (int)cols, n);
}

static void test_cols_3(void **state)
{
    (void)state;
    run_shape(k_cols[0]);
}

static void test_cols_1000(void **state)
{
    (void)state;
    run_shape(k_cols[1]);
}

static void test_cols_4097(void **state)
{
    (void)state;
    run_shape(k_cols[2]);
}

static void test_params_null(void **state)
{
    (void)state;
    for (int pair = 0; pair < 9; pair++) {
        tu_softmax_case c = {0};
        c.xt = tu_pairs[pair][0];
        c.yt = tu_pairs[pair][1];
        c.rows = 5;
        c.cols = 777;
        c.params_null = 1;
        c.special = 1;
        c.kind_offset = pair;
        tu_softmax_check(g_ctx, &c, tu_base_seed() + 31 * (uint64_t)pair, NULL);
    }
}

int main(void)
{
    g_ctx = tu_context_or_skip();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cols_3),
        cmocka_unit_test(test_cols_1000),
        cmocka_unit_test(test_cols_4097),
        cmocka_unit_test(test_params_null),
    };
    int failures = cmocka_run_group_tests(tests, NULL, NULL);
    flashcl_context_destroy(g_ctx);
    return tu_exit_code(failures);
}
