/* Every softmax variant forced through params.variant: ROW_IN_REGISTERS, ONLINE_CHUNKED and
 * SPLIT_ROW (again without the cooperative split rows, once more through the pipelined one, with
 * 16-bit rows held as bits and as floats, and once with the legacy choices,
 * FLASHCL_SOFTMAX_LEGACY=1) x all 9 dtype
 * pairs x cols in {1, 2, 3, 127, 1000, 1023, 1025, 4097, 65537, 1<<20} x rows {1, 3, 17} (at
 * most 1.2M elements a case: 1<<20 runs with one row; two rows for three of the pairs),
 * layouts and special rows drawn at random per case as in test_softmax_auto. A forced variant
 * may return FLASHCL_UNSUPPORTED only for ROW_IN_REGISTERS with cols > TU_RIR_GUARANTEED_COLS
 * (test_util.h), and must then leave the output untouched; any other UNSUPPORTED fails. */
#include <stdlib.h>

#include "test_util.h"

static flashcl_context *g_ctx;

static const int64_t k_cols[] = {1, 2, 3, 127, 1000, 1023, 1025, 4097, 65537, 1 << 20};
static const int64_t k_rows[] = {1, 3, 17};
#define ELEM_BUDGET ((int64_t)1200000)

static void run_variant(flashcl_softmax_variant v)
{
    int n = 0, unsupported = 0;
    for (int pair = 0; pair < 9; pair++) {
        for (size_t ci = 0; ci < sizeof k_cols / sizeof k_cols[0]; ci++) {
            for (size_t ri = 0; ri < sizeof k_rows / sizeof k_rows[0]; ri++) {
                int64_t cols = k_cols[ci], rows = k_rows[ri];
                if (rows * cols > ELEM_BUDGET)
                    continue;
                uint64_t seed = tu_base_seed() ^ ((uint64_t)v << 56) ^ ((uint64_t)pair << 48) ^
                                ((uint64_t)ci << 40) ^ ((uint64_t)ri << 32);
                tu_rng rng;
                tu_rng_seed(&rng, seed);
                tu_softmax_case c = {0};
                c.xt = tu_pairs[pair][0];
                c.yt = tu_pairs[pair][1];
                c.rows = rows;
                c.cols = cols;
                c.variant = v;
                c.allow_unsupported =
                    v == FLASHCL_SOFTMAX_ROW_IN_REGISTERS && cols > TU_RIR_GUARANTEED_COLS;
                tu_randomize_layout(&c, &rng);
                if (tu_softmax_check(g_ctx, &c, seed, NULL) == FLASHCL_UNSUPPORTED)
                    unsupported++;
                n++;
            }
        }
        if (pair % 4 == 0) {
            /* two long rows */
            tu_softmax_case c = {0};
            c.xt = tu_pairs[pair][0];
            c.yt = tu_pairs[pair][1];
            c.rows = 2;
            c.cols = 1 << 20;
            c.variant = v;
            c.allow_unsupported = v == FLASHCL_SOFTMAX_ROW_IN_REGISTERS;
            c.x_pad = 1;
            c.log = pair == 4;
            c.scale = -1.5f;
            if (tu_softmax_check(g_ctx, &c, tu_base_seed() + (uint64_t)pair, NULL) ==
                FLASHCL_UNSUPPORTED)
                unsupported++;
            n++;
        }
    }
    print_message("  %d cases, %d unsupported\n", n, unsupported);
}

static void test_row_in_registers(void **state)
{
    (void)state;
    run_variant(FLASHCL_SOFTMAX_ROW_IN_REGISTERS);
}

static void test_online_chunked(void **state)
{
    (void)state;
    run_variant(FLASHCL_SOFTMAX_ONLINE_CHUNKED);
}

static void test_split_row(void **state)
{
    (void)state;
    run_variant(FLASHCL_SOFTMAX_SPLIT_ROW);
}

/* SPLIT_ROW again with the cooperative split rows left out (read at every call):
 * FLASHCL_SOFTMAX_NO_COOP=1 on OpenCL, where forced SPLIT_ROW takes the cooperative kernel on
 * GPUs whenever a row fits, so this is what reaches the ordered split at every size there (CPUs,
 * which have no cooperative kernel, run the ordered split both times);
 * FLASHCL_CUDA_SOFTMAX_SPLIT_HELD=0 on CUDA, which brings back the staged, resident and
 * two-kernel splits. */
static void test_split_row_without_cooperative(void **state)
{
    (void)state;
    setenv("FLASHCL_SOFTMAX_NO_COOP", "1", 1);
    setenv("FLASHCL_CUDA_SOFTMAX_SPLIT_HELD", "0", 1);
    run_variant(FLASHCL_SOFTMAX_SPLIT_ROW);
    unsetenv("FLASHCL_SOFTMAX_NO_COOP");
    unsetenv("FLASHCL_CUDA_SOFTMAX_SPLIT_HELD");
}

/* Many rows through the variants meant for few long rows, and the reverse. */
static void test_unusual_shapes(void **state)
{
    (void)state;
    const flashcl_softmax_variant vs[3] = {FLASHCL_SOFTMAX_ROW_IN_REGISTERS,
                                           FLASHCL_SOFTMAX_ONLINE_CHUNKED,
                                           FLASHCL_SOFTMAX_SPLIT_ROW};
    /* 12288 and 10000 columns (bf16 input): rows whose cooperative slices of 128 work-items
     * are 75 and 61 % filled, where NVIDIA's programs take groups of 64 instead
     * (src/opencl/softmax_plan.c, fc_plan_coop) */
    const int64_t shapes[][2] = {{300, 1000}, {2000, 33}, {20000, 2}, {5, 4096},
                                 {64, 8192},  {7, 12288},  {3, 20000}, {6, 10000}};
    for (int vi = 0; vi < 3; vi++) {
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            tu_softmax_case c = {0};
            c.xt = si % 2 ? FLASHCL_BF16 : FLASHCL_F32;
            c.yt = si % 3 ? FLASHCL_F16 : FLASHCL_F32;
            c.rows = shapes[si][0];
            c.cols = shapes[si][1];
            c.variant = vs[vi];
            c.allow_unsupported =
                vs[vi] == FLASHCL_SOFTMAX_ROW_IN_REGISTERS && c.cols > TU_RIR_GUARANTEED_COLS;
            c.special = 1;
            c.y_pad = 1;
            c.scale = 0.37f;
            c.log = (int)si % 2;
            tu_softmax_check(g_ctx, &c, tu_base_seed() + (uint64_t)(vi * 16 + (int)si), NULL);
        }
    }
}

/* Short 16-bit rows (up to 512 columns): OpenCL on GPUs holds those of up to 256 columns 16
 * elements a work-item in 16-byte chunks and 8 in the element layout (src/opencl/softmax_plan.c,
 * fc_plan_held), CUDA in groups of 16 or 32 values a thread (src/cuda/softmax_plan.c,
 * fc_cuda_row_config_for). Lengths that fill a team and lengths that do not, rows that start
 * 16-byte aligned (offset 0, pad a multiple of 8 elements), rows that do not (an odd offset: the
 * shifted layout where it holds no more, the element layout where it would), AUTO and forced
 * rows in registers, f16 and bf16 in and out. */
static void test_short_16bit_rows(void **state)
{
    (void)state;
    const int64_t cols[] = {8, 64, 100, 127, 128, 160, 200, 255, 256, 300, 384, 512};
    int n = 0;
    for (size_t ci = 0; ci < sizeof cols / sizeof cols[0]; ci++) {
        for (int layout = 0; layout < 2; layout++) {
            tu_softmax_case c = {0};
            c.xt = ci % 2 ? FLASHCL_BF16 : FLASHCL_F16;
            c.yt = layout ? FLASHCL_F32 : c.xt;
            c.rows = 1500 + (int64_t)ci;
            c.cols = cols[ci];
            c.x_pad = layout ? 3 : 8 - cols[ci] % 8;
            c.x_off = layout ? 1 : 0;
            c.y_pad = 1;
            c.variant = ci % 3 ? FLASHCL_SOFTMAX_AUTO : FLASHCL_SOFTMAX_ROW_IN_REGISTERS;
            c.special = 1;
            c.kind_offset = (int)ci;
            c.scale = layout ? -0.61f : 1.3f;
            c.log = (int)(ci + (size_t)layout) % 2;
            tu_softmax_check(g_ctx, &c, tu_base_seed() + 9000 + (uint64_t)(ci * 2 + (size_t)layout),
                             NULL);
            n++;
        }
    }
    print_message("  %d short 16-bit cases\n", n);
}

/* Rows held three chunks a work-item instead of four: OpenCL takes 12 elements (f32 input) or
 * 24 (16-bit) where a row leaves each work-item's fourth chunk empty (src/opencl/softmax_plan.c,
 * fc_plan_held_three). Lengths on both sides of each switch (f32: 384 | 385, 768 | 769, 1536 |
 * 1537, 3072 | 3073; 16-bit: 384 | 385, 768 | 769, 6144 | 6145) and inside it (300, 640, 1500,
 * 3000, 5000), rows that start 16-byte aligned and rows that do not (element layout, or shifted
 * for 16-bit input where that holds no more), every output dtype, AUTO and forced rows in
 * registers. */
static void test_three_chunk_rows(void **state)
{
    (void)state;
    const int64_t cols32[] = {300, 384, 385, 640, 768, 769, 1500, 1536, 1537, 3000, 3072, 3073};
    const int64_t cols16[] = {300, 384, 385, 640, 768, 769, 1500, 3000, 5000, 6144, 6145};
    int n = 0, unsupported = 0;
    for (int half = 0; half < 2; half++) {
        const int64_t *cols = half ? cols16 : cols32;
        const size_t count = half ? sizeof cols16 / sizeof cols16[0]
                                  : sizeof cols32 / sizeof cols32[0];
        for (size_t ci = 0; ci < count; ci++) {
            for (int layout = 0; layout < 2; layout++) {
                tu_softmax_case c = {0};
                c.xt = !half ? FLASHCL_F32 : ci % 2 ? FLASHCL_BF16 : FLASHCL_F16;
                c.yt = tu_pairs[(ci + (size_t)layout) % 9][1];
                c.rows = 200 + (int64_t)(ci * 7) % 61;
                c.cols = cols[ci];
                c.x_pad = layout ? 3 : (8 - cols[ci] % 8) % 8;
                c.x_off = layout ? 1 : 0;
                c.y_pad = layout ? 1 : c.x_pad;
                c.variant = ci % 3 ? FLASHCL_SOFTMAX_AUTO : FLASHCL_SOFTMAX_ROW_IN_REGISTERS;
                /* (devices with small work-groups, as Rusticl's llvmpipe, may refuse forced
                 * rows in registers past TU_RIR_GUARANTEED_COLS, leaving y untouched) */
                c.allow_unsupported = c.variant == FLASHCL_SOFTMAX_ROW_IN_REGISTERS &&
                                      c.cols > TU_RIR_GUARANTEED_COLS;
                c.special = 1;
                c.kind_offset = (int)ci;
                c.scale = layout ? 0.83f : -1.1f;
                c.log = (int)(ci + (size_t)layout) % 2;
                if (tu_softmax_check(g_ctx, &c,
                                     tu_base_seed() + 9500 + (uint64_t)(half * 64) +
                                         (uint64_t)(ci * 2 + (size_t)layout),
                                     NULL) == FLASHCL_UNSUPPORTED)
                    unsupported++;
                n++;
            }
        }
    }
    print_message("  %d three-chunk cases, %d unsupported\n", n, unsupported);
}

/* The split rows' synchronisation words are not zeroed by the host before each launch: each
 * launch clears the words the launch before it used (src/opencl/split_state.c,
 * src/cuda/split_state.c), and the host clears them only when a launch is too small to. Large,
 * small and medium SPLIT_ROW calls in turn, in f32 and 16-bit, through the cooperative and the
 * ordered split (2 KiB slices: many words a launch) on OpenCL, the split-held kernel on CUDA
 * (in the last round the host clears every region there), each checked: a word left over from
 * an earlier launch would hand out wrong tickets or (m, d) values. */
static void test_split_state_reuse(void **state)
{
    (void)state;
    const int64_t shapes[][2] = {{64, 65537}, {1, 1000}, {5, 65537}, {2, 4097}};
    setenv("FLASHCL_SOFTMAX_ORDERED_SLICE_KB", "2", 1);
    for (int round = 0; round < 4; round++) {
        if (round == 2) setenv("FLASHCL_SOFTMAX_NO_COOP", "1", 1);
        if (round == 3) setenv("FLASHCL_CUDA_SOFTMAX_HOST_CLEAR", "1", 1);
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            tu_softmax_case c = {0};
            c.xt = (round + (int)si) % 2 ? FLASHCL_F16 : FLASHCL_F32;
            c.yt = c.xt;
            c.rows = shapes[si][0];
            c.cols = shapes[si][1];
            c.variant = FLASHCL_SOFTMAX_SPLIT_ROW;
            c.log = round == 1;
            tu_softmax_check(g_ctx, &c, tu_base_seed() + (uint64_t)(round * 8 + (int)si), NULL);
        }
    }
    unsetenv("FLASHCL_SOFTMAX_NO_COOP");
    unsetenv("FLASHCL_SOFTMAX_ORDERED_SLICE_KB");
    unsetenv("FLASHCL_CUDA_SOFTMAX_HOST_CLEAR");
}

/* The pipelined cooperative split row (cl/softmax_pipelined.cl), which AUTO takes only for rows
 * of 33 slices or more with more tickets than its groups, reached here from 2 slices with one
 * group a compute unit (FLASHCL_SOFTMAX_PIPE_SLICES=2, FLASHCL_SOFTMAX_PIPE_GROUPS=1, read at
 * every call) so that each group draws many tickets: every forced SPLIT_ROW case above, and
 * shapes of many short-sliced rows, each against host_ref and, bit for bit, against the
 * cooperative kernel (the same slices and formulas: FLASHCL_SOFTMAX_PIPE_SLICES=0). Devices
 * without the kernel (CPUs) run their split rows both times, which must agree too. 16-bit rows
 * are held as floats here (FLASHCL_SOFTMAX_NO_BITS=1), as the pipelined kernel holds them. */
static void test_pipelined_split_rows(void **state)
{
    (void)state;
    const int64_t shapes[][2] = {{300, 4097}, {41, 65537}, {3, 1 << 20}, {257, 8193}, {96, 20000}};
    setenv("FLASHCL_SOFTMAX_NO_BITS", "1", 1);
    setenv("FLASHCL_SOFTMAX_PIPE_SLICES", "2", 1);
    setenv("FLASHCL_SOFTMAX_PIPE_GROUPS", "1", 1);
    run_variant(FLASHCL_SOFTMAX_SPLIT_ROW);
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        for (int half = 0; half < 2; half++) {
            tu_softmax_case c = {0};
            uint64_t hash[2];
            const uint64_t seed = tu_base_seed() + 9700 + (uint64_t)(si * 2 + (size_t)half);
            c.xt = half ? (si % 2 ? FLASHCL_BF16 : FLASHCL_F16) : FLASHCL_F32;
            c.yt = si % 3 == 0 ? FLASHCL_F32 : si % 3 == 1 ? FLASHCL_F16 : FLASHCL_BF16;
            c.rows = shapes[si][0];
            c.cols = shapes[si][1];
            c.variant = FLASHCL_SOFTMAX_SPLIT_ROW;
            c.special = (int)si % 2;
            c.x_off = si == 3 ? 3 : 0; /* unaligned rows: the shifted layout */
            c.x_pad = si == 4 ? 5 : 0;
            c.log = half;
            c.scale = si == 2 ? -0.7f : 1.3f;
            for (int run = 0; run < 2; run++) {
                setenv("FLASHCL_SOFTMAX_PIPE_SLICES", run ? "0" : "2", 1);
                tu_softmax_check(g_ctx, &c, seed, &hash[run]);
            }
            assert_true(hash[0] == hash[1]);
        }
    }
    unsetenv("FLASHCL_SOFTMAX_PIPE_SLICES");
    unsetenv("FLASHCL_SOFTMAX_PIPE_GROUPS");
    unsetenv("FLASHCL_SOFTMAX_NO_BITS");
}

/* The cooperative split row holding 16-bit rows as their bits (cl/softmax_cooperative_bits.cl),
 * which NVIDIA's OpenCL takes for 16-bit rows that start 16-byte aligned with a length of whole
 * chunks (src/opencl/softmax_plan.c): one slice (rows of 1000 and 4096 columns, some work-items
 * holding nothing), a few slices with a partial last one, slices of 64 and of 128 elements a
 * work-item (more than 32 slices of 8192: 300000 columns), aligned strides and offsets, in
 * place, every output dtype, negative scales (the packed min), log, special rows; forced
 * SPLIT_ROW and AUTO. Each case runs held as bits and, once more, as floats
 * (FLASHCL_SOFTMAX_NO_BITS=1, read at every call), each against host_ref. Other devices run
 * their own plans both times. */
static void test_bits_split_rows(void **state)
{
    (void)state;
    const int64_t shapes[][2] = {{17, 1000}, {300, 4096}, {41, 20000}, {5, 65544},
                                 {2, 300000}, {1, 1 << 20}, {64, 16384}, {3, 131072}};
    int n = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        for (int form = 0; form < 2; form++) {
            tu_softmax_case c = {0};
            const uint64_t seed = tu_base_seed() + 9800 + (uint64_t)(si * 2 + (size_t)form);
            c.xt = (si + (size_t)form) % 2 ? FLASHCL_BF16 : FLASHCL_F16;
            c.yt = tu_pairs[(si * 2 + (size_t)form) % 9][1];
            c.rows = shapes[si][0];
            c.cols = shapes[si][1];
            c.variant = form ? FLASHCL_SOFTMAX_AUTO : FLASHCL_SOFTMAX_SPLIT_ROW;
            c.special = (int)(si + (size_t)form) % 2;
            c.kind_offset = (int)si;
            c.x_pad = si % 3 == 1 ? 8 : 0;
            c.x_off = si % 4 == 2 ? 16 : 0;
            c.y_pad = si % 3 == 2 ? 24 : 0;
            c.in_place = si == 3 && form;
            if (c.in_place) c.yt = c.xt;
            c.log = (int)(si + (size_t)form) % 3 == 0;
            c.scale = si % 3 == 0 ? -0.8f : si % 3 == 1 ? 1.7f : 0.0f;
            for (int floats = 0; floats < 2; floats++) {
                if (floats) setenv("FLASHCL_SOFTMAX_NO_BITS", "1", 1);
                tu_softmax_check(g_ctx, &c, seed, NULL);
                n++;
            }
            unsetenv("FLASHCL_SOFTMAX_NO_BITS");
        }
    }
    print_message("  %d cases held as bits and as floats\n", n);
}

/* FLASHCL_SOFTMAX_LEGACY=1 restores the variant choice from before the rows held as floats and
 * the ordered split row (softmax_plan.c): the raw-chunk rows in registers for every row that
 * fits, and the cooperative or 3-pass split row, which the tests above no longer reach where
 * the ordered split is built. The variable is read at every call. */
static void test_legacy_choices(void **state)
{
    (void)state;
    setenv("FLASHCL_SOFTMAX_LEGACY", "1", 1);
    run_variant(FLASHCL_SOFTMAX_ROW_IN_REGISTERS);
    run_variant(FLASHCL_SOFTMAX_SPLIT_ROW);
    test_unusual_shapes(state);
    unsetenv("FLASHCL_SOFTMAX_LEGACY");
}

int main(void)
{
    g_ctx = tu_context_or_skip();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_row_in_registers),
        cmocka_unit_test(test_online_chunked),
        cmocka_unit_test(test_split_row),
        cmocka_unit_test(test_split_row_without_cooperative),
        cmocka_unit_test(test_unusual_shapes),
        cmocka_unit_test(test_short_16bit_rows),
        cmocka_unit_test(test_three_chunk_rows),
        cmocka_unit_test(test_split_state_reuse),
        cmocka_unit_test(test_pipelined_split_rows),
        cmocka_unit_test(test_bits_split_rows),
        cmocka_unit_test(test_legacy_choices),
    };
    int failures = cmocka_run_group_tests(tests, NULL, NULL);
    flashcl_context_destroy(g_ctx);
    return tu_exit_code(failures);
}
