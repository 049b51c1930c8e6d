/* Masks and score options: causal with Sq = Sk, Sq < Sk and Sq > Sk (whose top rows see no key:
 * zeros and lse = -inf), sliding windows (left, right, both, combined with causal, empty), softcap,
 * negative and tiny scales, and the same masked problems forced through every kernel family (the
 * CPU kernels too, where the device has them) and through split-KV (FLASHCL_ATTENTION_FAMILY /
 * FLASHCL_ATTENTION_SPLITS, read at every call), so that diagonal tiles, skipped tiles and splits
 * without visible keys are all exercised; and causal problems under every order of the
 * work-groups' tiles (forced tail counts). */
#include "attention_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static flashcl_context *g_ctx;

static ta_case base_case(flashcl_dtype dt, int64_t sq, int64_t sk, int64_t d)
{
    return ta_new_case(dt, 2, sq, sk, 2, 1, d);
}

static void test_causal_shapes(void **state)
{
    (void)state;
    static const int64_t shapes[][2] = {{1, 1},   {64, 64},  {129, 129}, {100, 300},
                                        {7, 500}, {300, 100}, {129, 31}, {1000, 64}};
    uint64_t seed = tu_base_seed() + 100;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int dt = 0; dt < 3; dt++) {
            ta_case c = base_case((flashcl_dtype)dt, shapes[i][0], shapes[i][1], dt == 1 ? 64 : 96);
            c.params.causal = 1;
            c.lse_mode = 1 + (int)(i % 2);
            ta_check(g_ctx, &c, seed++);
        }
}

static void test_windows(void **state)
{
    (void)state;
    /* {window_left, window_right, causal} */
    static const int w[][3] = {{0, 0, 0},   {3, -1, 0}, {-1, 3, 0},  {10, 20, 0},  {64, 64, 0},
                               {5, 7, 1},   {100, -1, 1}, {0, -1, 1}, {-1, 0, 0}, {2000, 2000, 0},
                               {1, 1, 0}};
    static const int64_t shapes[][2] = {{150, 150}, {40, 300}, {300, 40}};
    uint64_t seed = tu_base_seed() + 200;
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++)
        for (size_t s = 0; s < 3; s++) {
            ta_case c = base_case((flashcl_dtype)((i + s) % 3), shapes[s][0], shapes[s][1], 64);
            c.params.window_left = w[i][0];
            c.params.window_right = w[i][1];
            c.params.causal = w[i][2];
            ta_check(g_ctx, &c, seed++);
        }
}

static void test_softcap_and_scale(void **state)
{
    (void)state;
    static const float caps[] = {0.0f, 0.5f, 5.0f, 50.0f};
    static const float scales[] = {0.0f, 1.0f, -0.2f, 1e-4f, 2.0f};
    uint64_t seed = tu_base_seed() + 300;
    for (size_t i = 0; i < 4; i++)
        for (size_t j = 0; j < 5; j++) {
            ta_case c = base_case((flashcl_dtype)((i + j) % 3), 70, 130, 128);
            c.params.softcap = caps[i];
            c.params.scale = scales[j];
            c.params.causal = (int)(j % 2);
            ta_check(g_ctx, &c, seed++);
        }
}

/* The families a test forces: the tiled prefill and decode kernels everywhere, and the two CPU
 * kernels where the device has them (else said once, on stdout). */
static int family_count(void)
{
    static int said;
    if (ta_cpu_kernels_device(g_ctx)) return 4;
    if (!said) printf("no rows_vector or decode_vector family: not built for this device\n");
    said = 1;
    return 2;
}

/* The masked problems again through each family and with split-KV forced. */
static void test_forced_variants(void **state)
{
    (void)state;
    static const char *const families[] = {"prefill", "decode", "rows_vector", "decode_vector"};
    static const char *const splits[] = {"1", "3", "7"};
    static const int64_t shapes[][2] = {{33, 300}, {300, 33}, {3, 900}};
    uint64_t seed = tu_base_seed() + 400;
    const int nf = family_count();
    for (int f = 0; f < nf; f++)
        for (int sp = 0; sp < 3; sp++)
            for (int s = 0; s < 3; s++) {
                ta_case c = base_case((flashcl_dtype)((f + sp + s) % 3), shapes[s][0],
                                      shapes[s][1], s == 2 ? 256 : 48);
                c.heads_q = 4;
                c.heads_kv = s == 2 ? 1 : 2;
                c.params.causal = (sp + s) % 2;
                c.params.window_left = s == 1 ? 20 : -1;
                c.params.softcap = sp == 2 ? 3.0f : 0.0f;
                c.lse_mode = 1 + (f + s) % 2;
                setenv("FLASHCL_ATTENTION_FAMILY", families[f], 1);
                setenv("FLASHCL_ATTENTION_SPLITS", splits[sp], 1);
                ta_check(g_ctx, &c, seed++);
            }
    unsetenv("FLASHCL_ATTENTION_FAMILY");
    unsetenv("FLASHCL_ATTENTION_SPLITS");
}

/* The order work-groups take their tiles in (the causal tail order: the last pairs of (batch,
 * kv head) interleave their tiles): the library takes it on grids larger than these, so the
 * count of tail pairs is forced (one, part of the six pairs, all; none is every other test),
 * through both families and with split-KV, on either backend (each reads its own variable). */
static void test_tail_order(void **state)
{
    (void)state;
    static const char *const tails[] = {"1", "4", "100"};
    static const char *const families[] = {"prefill", "decode", "rows_vector", "decode_vector"};
    static const char *const splits[] = {"1", "3"};
    static const int64_t shapes[][3] = {{200, 200, 64}, {130, 170, 32}}; /* Sq, Sk, D */
    uint64_t seed = tu_base_seed() + 500;
    const int nf = family_count();
    for (size_t t = 0; t < sizeof tails / sizeof tails[0]; t++)
        for (int f = 0; f < nf; f++)
            for (int sp = 0; sp < 2; sp++) {
                const size_t s = (t + (size_t)f + (size_t)sp) % 2;
                ta_case c = ta_new_case((flashcl_dtype)((t + (size_t)f) % 3), 3, shapes[s][0],
                                        shapes[s][1], 4, 2, shapes[s][2]);
                c.params.causal = 1;
                c.lse_mode = 1 + (int)((t + (size_t)sp) % 2);
                setenv("FLASHCL_ATTENTION_TAIL_HEADS", tails[t], 1);
                setenv("FLASHCL_CUDA_ATTENTION_TAIL_HEADS", tails[t], 1);
                setenv("FLASHCL_ATTENTION_FAMILY", families[f], 1);
                setenv("FLASHCL_ATTENTION_SPLITS", splits[sp], 1);
                ta_check(g_ctx, &c, seed++);
            }
    unsetenv("FLASHCL_ATTENTION_TAIL_HEADS");
    unsetenv("FLASHCL_CUDA_ATTENTION_TAIL_HEADS");
    unsetenv("FLASHCL_ATTENTION_FAMILY");
    unsetenv("FLASHCL_ATTENTION_SPLITS");
}

int main(void)
{
    g_ctx = tu_context_or_skip();
    ta_skip_repeat_without_cpu_kernels(g_ctx);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_causal_shapes),
        cmocka_unit_test(test_windows),
        cmocka_unit_test(test_softcap_and_scale),
        cmocka_unit_test(test_forced_variants),
        cmocka_unit_test(test_tail_order),
    };
    int failures = cmocka_run_group_tests(tests, NULL, NULL);
    flashcl_context_destroy(g_ctx);
    return tu_exit_code(failures);
}
