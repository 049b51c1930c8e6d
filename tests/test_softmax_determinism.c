/* Bitwise reproducibility on one device: the same input run twice (and once more on a second
 * context of the same device) gives identical output bytes, for every variant and for shapes
 * where work is split across work-groups (1<<20 and 65537 columns) or across many rows. Each
 * run is also checked against host_ref. Plus large shapes that the other tests skip for time:
 * 20000 rows x 1000 and 8 rows x 1<<20 under AUTO. */
#include "test_util.h"

static flashcl_context *g_ctx, *g_ctx2;

static const flashcl_softmax_variant k_variants[4] = {
    FLASHCL_SOFTMAX_AUTO, FLASHCL_SOFTMAX_ROW_IN_REGISTERS, FLASHCL_SOFTMAX_ONLINE_CHUNKED,
    FLASHCL_SOFTMAX_SPLIT_ROW};
static const int64_t k_shapes[][2] = {{2, 1 << 20}, {3, 65537}, {300, 1000}, {20000, 3},
                                      {17, 4097}, {9, 4096}};

static void run_variant(int vi)
{
    for (size_t si = 0; si < sizeof k_shapes / sizeof k_shapes[0]; si++) {
        for (int pi = 0; pi < 2; pi++) {
            tu_softmax_case c = {0};
            c.xt = pi ? FLASHCL_BF16 : FLASHCL_F32;
            c.yt = pi ? FLASHCL_F16 : FLASHCL_F32;
            c.rows = k_shapes[si][0];
            c.cols = k_shapes[si][1];
            c.variant = k_variants[vi];
            c.allow_unsupported = k_variants[vi] == FLASHCL_SOFTMAX_ROW_IN_REGISTERS &&
                                  c.cols > TU_RIR_GUARANTEED_COLS;
            c.log = (int)si % 2;
            c.scale = pi ? 0.37f : 0.0f;
            c.special = (int)si % 3 == 0;
            uint64_t seed = tu_base_seed() + (uint64_t)(vi * 100 + (int)si * 2 + pi);
            uint64_t h1 = 0, h2 = 0, h3 = 0;
            if (tu_softmax_check(g_ctx, &c, seed, &h1) == FLASHCL_UNSUPPORTED)
                continue;
            tu_softmax_check(g_ctx, &c, seed, &h2);
            tu_softmax_check(g_ctx2, &c, seed, &h3);
            if (h1 != h2 || h1 != h3)
                fail_msg("not reproducible: %s (hashes %llx %llx %llx)", tu_case_str(&c),
                         (unsigned long long)h1, (unsigned long long)h2,
                         (unsigned long long)h3);
        }
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

static void test_large(void **state)
{
    (void)state;
    tu_softmax_case c = {0};
    c.xt = FLASHCL_F16;
    c.yt = FLASHCL_F32;
    c.rows = 20000;
    c.cols = 1000;
    c.x_pad = 1;
    tu_softmax_check(g_ctx, &c, tu_base_seed() + 901, NULL);
    c.xt = FLASHCL_F32;
    c.yt = FLASHCL_BF16;
    c.rows = 8;
    c.cols = 1 << 20;
    c.x_pad = 0;
    c.log = 1;
    tu_softmax_check(g_ctx, &c, tu_base_seed() + 902, NULL);
}

int main(void)
{
    g_ctx = tu_context_or_skip();
    g_ctx2 = tu_context_or_skip();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_auto),
        cmocka_unit_test(test_row_in_registers),
        cmocka_unit_test(test_online_chunked),
        cmocka_unit_test(test_split_row),
        cmocka_unit_test(test_large),
    };
    int failures = cmocka_run_group_tests(tests, NULL, NULL);
    flashcl_context_destroy(g_ctx2);
    flashcl_context_destroy(g_ctx);
    return tu_exit_code(failures);
}
