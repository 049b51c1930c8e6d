/* One small case of every softmax variant (row-in-registers: held 8, 12 and 16 per work-item
 * for f32 input, 24 and 32 for 16-bit input, and the legacy raw chunks; online-chunked;
 * split-row: ordered where built, else 3-pass; the CPU kernel with a row per work-item, which
 * AUTO takes on PoCL and Oclgrind) with two dtype pairs (f32 -> f32 and bf16 -> f16), padded
 * strides, offsets and special rows, checked against host_ref: small enough to run under the
 * Oclgrind simulator (which reports out-of-bounds accesses, races and uninitialised reads) in
 * well under a minute; CTest runs it both natively and, when oclgrind is installed, as
 * test_softmax_oclgrind_sim. */
#include <stdlib.h>

#include "test_util.h"

static flashcl_context *g_ctx;

static void run(flashcl_softmax_variant v, int64_t rows, int64_t cols)
{
    for (int pi = 0; pi < 2; pi++) {
        tu_softmax_case c = {0};
        c.xt = pi ? FLASHCL_BF16 : FLASHCL_F32;
        c.yt = pi ? FLASHCL_F16 : FLASHCL_F32;
        c.rows = rows;
        c.cols = cols;
        c.variant = v;
        c.x_pad = 3;
        c.y_pad = 1;
        c.x_off = 1;
        c.y_off = 2;
        c.tail = 0;
        c.scale = pi ? -1.5f : 0.0f;
        c.log = pi;
        c.special = 1;
        c.kind_offset = 1;
        tu_softmax_check(g_ctx, &c, tu_base_seed() + (uint64_t)(v * 2 + pi), NULL);
    }
}

/* 300 columns: three chunks a work-item (held 12 / 24); 400: all four (held 16 / 32). */
static void test_row_in_registers(void **state)
{
    (void)state;
    run(FLASHCL_SOFTMAX_ROW_IN_REGISTERS, 5, 300);
    run(FLASHCL_SOFTMAX_ROW_IN_REGISTERS, 4, 400);
}

static void test_online_chunked(void **state)
{
    (void)state;
    run(FLASHCL_SOFTMAX_ONLINE_CHUNKED, 5, 1500);
}

static void test_split_row(void **state)
{
    (void)state;
    run(FLASHCL_SOFTMAX_SPLIT_ROW, 2, 5000);
    /* The ordered split row (where built) with a cache budget below a row: its partial and
     * normalise items alternate and rows are normalised from their last slice back. */
    setenv("FLASHCL_SOFTMAX_L2_BUDGET_KB", "16", 1);
    run(FLASHCL_SOFTMAX_SPLIT_ROW, 3, 20000);
    unsetenv("FLASHCL_SOFTMAX_L2_BUDGET_KB");
}

/* Short rows (rows held 8 per work-item) and the legacy raw-chunk rows in registers. */
static void test_short_rows_and_legacy(void **state)
{
    (void)state;
    run(FLASHCL_SOFTMAX_ROW_IN_REGISTERS, 9, 100);
    setenv("FLASHCL_SOFTMAX_LEGACY", "1", 1);
    run(FLASHCL_SOFTMAX_ROW_IN_REGISTERS, 5, 300);
    unsetenv("FLASHCL_SOFTMAX_LEGACY");
}

/* AUTO: on PoCL and Oclgrind the row-per-work-item vector kernel (cl/softmax_rows_vector.cl),
 * 300 columns so that the last 12 take its padded tail; f32 softmax keeps exp in y between
 * passes, also in place. */
static void in_place(flashcl_dtype dt, int64_t rows, int64_t cols, int64_t x_pad, int log,
                     int special, uint64_t seed)
{
    tu_softmax_case c = {0};
    c.xt = c.yt = dt;
    c.rows = rows;
    c.cols = cols;
    c.in_place = 1;
    c.x_pad = x_pad;
    c.log = log;
    c.special = special;
    tu_softmax_check(g_ctx, &c, tu_base_seed() + seed, NULL);
}

static void test_rows_vector(void **state)
{
    (void)state;
    run(FLASHCL_SOFTMAX_AUTO, 5, 300);
    in_place(FLASHCL_F32, 4, 300, 5, 0, 1, 98);
}

static void test_in_place(void **state)
{
    (void)state;
    in_place(FLASHCL_F16, 3, 257, 2, 1, 0, 99);
}

int main(void)
{
    g_ctx = tu_context_or_skip();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_row_in_registers),
        cmocka_unit_test(test_online_chunked),
        cmocka_unit_test(test_split_row),
        cmocka_unit_test(test_short_rows_and_legacy),
        cmocka_unit_test(test_rows_vector),
        cmocka_unit_test(test_in_place),
    };
    int failures = cmocka_run_group_tests(tests, NULL, NULL);
    flashcl_context_destroy(g_ctx);
    return tu_exit_code(failures);
}
