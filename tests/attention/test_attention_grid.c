/* The randomized attention grid: every head dim with every dtype, unequal sequence lengths both
 * ways, and a fixed-seed random sample over batch, GQA groups, lengths, head dims, dtypes,
 * layouts (BSHD, BHSD, padded, k/v interleaved, k/v shared by all batches; mixed per tensor),
 * masks, softcap, scale and lse, each checked element by element against host_ref_attention
 * (see attention_check.h for the tolerances). FLASHCL_TEST_LARGE=1 raises the sizes (GPUs). */
#include "attention_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static flashcl_context *g_ctx;

static const int64_t k_lengths[] = {1, 2, 7, 16, 31, 64, 100, 128, 129, 257, 512, 1000};
static const int64_t k_dims[] = {16, 32, 64, 80, 96, 128, 160, 192, 256};
static const int64_t k_groups[] = {1, 2, 4, 8};
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* Work of a case in multiply-adds (the reference does the same in double). */
static double work(const ta_case *c)
{
    return 2.0 * (double)(c->batch * c->heads_q * c->seqlen_q) * (double)c->seqlen_k *
           (double)c->head_dim;
}

static void random_layouts(ta_case *c, tu_rng *rng)
{
    c->q_layout = (ta_layout)tu_rng_below(rng, 3);
    c->kv_layout = (ta_layout)tu_rng_below(rng, 5); /* any, broadcast over batches included */
    c->o_layout = (ta_layout)tu_rng_below(rng, 3);
    c->q_off = tu_rng_below(rng, 2) ? (size_t)tu_rng_below(rng, 5) : 0;
    c->kv_off = tu_rng_below(rng, 2) ? (size_t)tu_rng_below(rng, 5) : 0;
    c->o_off = tu_rng_below(rng, 2) ? (size_t)tu_rng_below(rng, 5) : 0;
    c->lse_mode = (int)tu_rng_below(rng, 3);
}

/* Random options: scale, causal, windows, softcap (about half the cases keep each default). */
static void random_params(ta_case *c, tu_rng *rng)
{
    static const float scales[] = {0.0f, 0.0f, 0.05f, -0.11f, 0.3f};
    static const int windows[] = {-1, -1, -1, 0, 1, 5, 40, 300};
    c->params = ta_default_params();
    c->params.scale = scales[tu_rng_below(rng, COUNT(scales))];
    c->params.causal = (int)tu_rng_below(rng, 2);
    c->params.window_left = windows[tu_rng_below(rng, COUNT(windows))];
    c->params.window_right = windows[tu_rng_below(rng, COUNT(windows))];
    c->params.softcap = tu_rng_below(rng, 4) == 0 ? 2.5f : 0.0f;
    c->params_null = c->params.scale == 0.0f && !c->params.causal &&
                     c->params.window_left < 0 && c->params.window_right < 0 &&
                     c->params.softcap == 0.0f && tu_rng_below(rng, 2);
}

/* Every head dim (and a few odd ones) with every dtype, random layouts and options. */
static void test_every_head_dim(void **state)
{
    (void)state;
    static const int64_t odd[] = {1, 5, 33, 255};
    tu_rng rng;
    tu_rng_seed(&rng, tu_base_seed() + 1);
    for (size_t di = 0; di < COUNT(k_dims) + COUNT(odd); di++)
        for (int dt = 0; dt < 3; dt++) {
            ta_case c;
            memset(&c, 0, sizeof c);
            c.dtype = (flashcl_dtype)dt;
            c.head_dim = di < COUNT(k_dims) ? k_dims[di] : odd[di - COUNT(k_dims)];
            c.batch = 1 + (int64_t)tu_rng_below(&rng, 2);
            c.heads_kv = 1 + (int64_t)tu_rng_below(&rng, 2);
            c.heads_q = c.heads_kv * k_groups[tu_rng_below(&rng, 3)];
            c.seqlen_q = ta_large() ? 300 : 37;
            c.seqlen_k = ta_large() ? 700 : 75;
            random_layouts(&c, &rng);
            random_params(&c, &rng);
            ta_check(g_ctx, &c, tu_rng_next(&rng));
        }
}

/* One batch, two query heads sharing one kv head, random layouts, default params but `causal`. */
static ta_case two_head_case(flashcl_dtype dt, int64_t sq, int64_t sk, int64_t d, int causal,
                             tu_rng *rng)
{
    ta_case c = ta_new_case(dt, 1, sq, sk, 2, 1, d);
    random_layouts(&c, rng); /* lse mode included */
    c.params.causal = causal;
    return c;
}

/* Unequal lengths both ways, with and without the causal mask (bottom-right aligned). */
static void test_unequal_lengths(void **state)
{
    (void)state;
    static const int64_t pairs[][2] = {{1, 1000}, {1000, 1}, {7, 129}, {129, 7}, {100, 257},
                                       {257, 100}, {2, 64}, {64, 2}, {31, 512}, {512, 31}};
    tu_rng rng;
    tu_rng_seed(&rng, tu_base_seed() + 2);
    for (size_t i = 0; i < COUNT(pairs); i++)
        for (int causal = 0; causal < 2; causal++) {
            const flashcl_dtype dt = (flashcl_dtype)tu_rng_below(&rng, 3);
            const int64_t d = k_dims[tu_rng_below(&rng, COUNT(k_dims))];
            ta_case c = two_head_case(dt, pairs[i][0], pairs[i][1], d, causal, &rng);
            ta_check(g_ctx, &c, tu_rng_next(&rng));
        }
}

/* Prefill tiles over long key ranges, every dtype and head-dim class: a driver that ends a
 * kernel's loops early (Mesa llvmpipe after 65535 passes: 328 keys for one prefill tile at
 * D 256, 1088 at D 64) needs the library to split the keys (the decode shapes are in
 * test_attention_decode). */
static void test_long_keys(void **state)
{
    (void)state;
    static const int64_t shapes[][3] = {{64, 2500, 64}, {37, 2333, 128}, {40, 3000, 256},
                                        {100, 4100, 96}};
    tu_rng rng;
    tu_rng_seed(&rng, tu_base_seed() + 4);
    for (size_t i = 0; i < COUNT(shapes); i++)
        for (int dt = 0; dt < 3; dt++) {
            ta_case c = two_head_case((flashcl_dtype)dt, shapes[i][0], shapes[i][1],
                                      shapes[i][2], (int)((i + (size_t)dt) % 2), &rng);
            ta_check(g_ctx, &c, tu_rng_next(&rng));
        }
}

/* f32 through NVIDIA's tensor cores (3xTF32: cl/attention_mma_tf32x3.cl for prefill-family calls,
 * cuda/attention_tc_tf32x3.cuh for more than 16 packed rows a kv head; head dims up to 128 that
 * are multiples of 4, with 16-byte aligned rows) and, with FLASHCL_ATTENTION_NO_TF32=1 /
 * FLASHCL_CUDA_ATTENTION_NO_TF32=1, through the FMA (SIMT) kernel, against one reference: both head-dim
 * classes with padded dims, rows that end mid-tile, keys that end mid-block, GQA, masks,
 * softcap, a negative scale, forced key splits (the kernel then writes f32 partials), long key
 * ranges (the tensor cores' truncating accumulation must not pile up over the blocks), and
 * offsets that leave rows unaligned (the FMA kernel takes those). Where the tensor-core kernel
 * is not built, both runs take the FMA kernel. */
static void test_f32_tensor_cores(void **state)
{
    (void)state;
    /* {B, Sq, Sk, Hq, Hkv, D, splits (0: the planner's), q offset} */
    static const int64_t cases[][8] = {
        {1, 100, 257, 4, 2, 64, 0, 0},   {2, 65, 129, 2, 1, 128, 0, 0},
        {1, 77, 1000, 3, 3, 20, 0, 0},   {1, 64, 31, 8, 2, 36, 0, 0},
        {1, 130, 130, 2, 2, 100, 0, 0},  {2, 16, 700, 4, 1, 96, 3, 0},
        {1, 200, 4100, 2, 1, 128, 0, 0}, {1, 97, 6000, 2, 2, 64, 0, 0},
        {1, 33, 500, 2, 2, 128, 0, 1},   {1, 129, 129, 2, 2, 80, 5, 0},
        {3, 7, 64, 2, 2, 16, 0, 0},      {1, 300, 100, 2, 1, 68, 0, 0},
    };
    tu_rng rng;
    tu_rng_seed(&rng, tu_base_seed() + 5);
    for (size_t i = 0; i < COUNT(cases); i++) {
        const int64_t *s = cases[i];
        const uint64_t seed = tu_rng_next(&rng);
        ta_case c = ta_new_case(FLASHCL_F32, s[0], s[1], s[2], s[3], s[4], s[5]);
        c.params.causal = (int)(i % 2);
        c.params.window_left = i % 5 == 4 ? 90 : -1;
        c.params.softcap = i % 4 == 3 ? 4.0f : 0.0f;
        c.params.scale = i % 6 == 5 ? -0.07f : 0.0f;
        c.lse_mode = (int)(i % 3);
        c.kv_layout = (ta_layout)(i % TA_LAYOUT_COUNT);
        c.q_layout = (ta_layout)(i % 3);
        c.q_off = (size_t)s[7];
        for (int run = 0; run < 2; run++) { /* tensor cores, then the FMA kernel */
            char splits[16];
            if (s[6]) {
                snprintf(splits, sizeof splits, "%d", (int)s[6]);
                setenv("FLASHCL_ATTENTION_SPLITS", splits, 1);
            }
            if (run) { /* either backend's switch */
                setenv("FLASHCL_ATTENTION_NO_TF32", "1", 1);
                setenv("FLASHCL_CUDA_ATTENTION_NO_TF32", "1", 1);
            }
            ta_check(g_ctx, &c, seed); /* same inputs both runs */
            unsetenv("FLASHCL_ATTENTION_NO_TF32");
            unsetenv("FLASHCL_CUDA_ATTENTION_NO_TF32");
            unsetenv("FLASHCL_ATTENTION_SPLITS");
        }
    }
}

/* The random sample over the whole grid, bounded in work per case. */
static void test_random_grid(void **state)
{
    (void)state;
    const int cases = ta_large() ? 150 : 200;
    const double budget = ta_large() ? 6e8 : 2e8; /* multiply-adds of one case */
    tu_rng rng;
    tu_rng_seed(&rng, tu_base_seed() + 3);
    for (int n = 0; n < cases; n++) {
        ta_case c;
        do {
            memset(&c, 0, sizeof c);
            c.dtype = (flashcl_dtype)tu_rng_below(&rng, 3);
            c.batch = 1 + (int64_t)tu_rng_below(&rng, 3);
            c.heads_kv = 1 + (int64_t)tu_rng_below(&rng, 3);
            c.heads_q = c.heads_kv * k_groups[tu_rng_below(&rng, COUNT(k_groups))];
            c.seqlen_q = k_lengths[tu_rng_below(&rng, COUNT(k_lengths))];
            c.seqlen_k = k_lengths[tu_rng_below(&rng, COUNT(k_lengths))];
            c.head_dim = k_dims[tu_rng_below(&rng, COUNT(k_dims))];
            if (ta_large() && tu_rng_below(&rng, 4) == 0)
                c.seqlen_q *= 4, c.seqlen_k *= 4;
        } while (work(&c) > budget);
        random_layouts(&c, &rng);
        random_params(&c, &rng);
        ta_check(g_ctx, &c, tu_rng_next(&rng));
    }
}

int main(void)
{
    g_ctx = tu_context_or_skip();
    ta_skip_repeat_without_cpu_kernels(g_ctx);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_head_dim),
        cmocka_unit_test(test_unequal_lengths),
        cmocka_unit_test(test_long_keys),
        cmocka_unit_test(test_f32_tensor_cores),
        cmocka_unit_test(test_random_grid),
    };
    int failures = cmocka_run_group_tests(tests, NULL, NULL);
    flashcl_context_destroy(g_ctx);
    return tu_exit_code(failures);
}
