/* Decode-shaped attention: few queries (Sq 1-4) against long key sequences (up to 20000 here,
 * 65536 with FLASHCL_TEST_LARGE=1), GQA/MQA groups, every dtype, lse on and off. The library
 * picks the key-parallel decode kernel and split-KV for these on its own; the same shapes also
 * run with the split count forced (FLASHCL_ATTENTION_SPLITS), including more splits than key
 * tiles and few enough that work-groups walk long key ranges, and a few on the tiled decode
 * kernel (FLASHCL_ATTENTION_DECODE_LEGACY) and with the GPUs' geometry. */
#include "attention_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static flashcl_context *g_ctx;

static ta_case decode_case(flashcl_dtype dt, int64_t b, int64_t sq, int64_t sk, int64_t hq,
                           int64_t hkv, int64_t d)
{
    return ta_new_case(dt, b, sq, sk, hq, hkv, d);
}

static void test_decode_auto(void **state)
{
    (void)state;
    /* {B, Sq, Sk, Hq, Hkv, D} */
    static const int64_t shapes[][6] = {
        {1, 1, 20000, 8, 1, 128}, {2, 1, 5000, 8, 2, 64},  {1, 2, 3000, 4, 4, 256},
        {1, 4, 12000, 16, 2, 80}, {3, 1, 777, 6, 3, 96},   {1, 3, 4097, 32, 4, 128},
        {1, 1, 1, 8, 1, 64},      {1, 1, 65, 2, 1, 16},    {2, 4, 1500, 8, 8, 192},
    };
    uint64_t seed = tu_base_seed() + 500;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const int64_t *s = shapes[i];
        ta_case c = decode_case((flashcl_dtype)(i % 3), s[0], s[1],
                                ta_large() ? s[2] * 3 : s[2], s[3], s[4], s[5]);
        c.lse_mode = (int)(i % 3);
        c.params.causal = (int)(i % 2); /* Sq <= Sk: causal hides the last Sq - 1 keys */
        c.kv_layout = (ta_layout)(i % 4);
        ta_check(g_ctx, &c, seed++);
    }
    if (ta_large()) { /* the benchmark's decode shape */
        ta_case c = decode_case(FLASHCL_F16, 1, 1, 65536, 32, 4, 128);
        ta_check(g_ctx, &c, seed++);
    }
}

static void test_decode_forced_splits(void **state)
{
    (void)state;
    static const char *const splits[] = {"1", "2", "5", "64", "300"};
    uint64_t seed = tu_base_seed() + 600;
    for (int sp = 0; sp < 5; sp++)
        for (int dt = 0; dt < 3; dt++) {
            ta_case c = decode_case((flashcl_dtype)dt, 1, 1 + dt, 2500 + 37 * sp, 8, 2,
                                    dt == 2 ? 160 : 64);
            c.params.window_left = sp == 3 ? 700 : -1; /* splits left of the window: empty */
            c.params.softcap = dt == 1 ? 4.0f : 0.0f;
            c.lse_mode = 1 + sp % 2;
            setenv("FLASHCL_ATTENTION_SPLITS", splits[sp], 1);
            ta_check(g_ctx, &c, seed++);
        }
    unsetenv("FLASHCL_ATTENTION_SPLITS");
}

/* Causal with more queries than keys: the top Sq - Sk rows see nothing (zeros, lse -inf), also
 * when split. */
static void test_causal_more_queries_than_keys(void **state)
{
    (void)state;
    uint64_t seed = tu_base_seed() + 700;
    static const int64_t shapes[][2] = {{4, 1}, {4, 3}, {16, 5}, {200, 70}};
    for (size_t i = 0; i < 4; i++)
        for (int split = 0; split < 2; split++) {
            ta_case c = decode_case((flashcl_dtype)((i + (size_t)split) % 3), 2, shapes[i][0],
                                    shapes[i][1], 4, 1, 32);
            c.params.causal = 1;
            c.lse_mode = 1;
            if (split)
                setenv("FLASHCL_ATTENTION_SPLITS", "3", 1);
            ta_check(g_ctx, &c, seed++);
            unsetenv("FLASHCL_ATTENTION_SPLITS");
        }
}

/* Few splits, so that work-groups walk 512 keys or more: on NVIDIA OpenCL the two-warp
 * tensor-core kernel with the deeper ring (cl/attention_mma.cl, _ring), here and on the CUDA
 * backend whichever kernel the device takes. Key counts off the ring's blocks, a window that
 * leaves fewer visible blocks than the ring copies ahead, causal rows, softcap, MHA, lse, both
 * 16-bit dtypes and both head-dim classes; FLASHCL_ATTENTION_NO_ASYNC=1 runs one case on the
 * two-slot kernel against the same reference. */
static void test_decode_long_ranges(void **state)
{
    (void)state;
    /* {B, Sq, Sk, Hq, Hkv, D} */
    static const int64_t shapes[][6] = {
        {1, 1, 3001, 8, 1, 128}, {2, 2, 1537, 8, 4, 64}, {1, 4, 2049, 4, 1, 128},
        {1, 1, 777, 16, 16, 128}, {1, 3, 1100, 8, 2, 96}, {3, 1, 2000, 6, 3, 64},
    };
    static const char *const splits[] = {"1", "2"};
    uint64_t seed = tu_base_seed() + 900;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int sp = 0; sp < 2; sp++) {
            const int64_t *s = shapes[i];
            ta_case c = decode_case(i % 2 ? FLASHCL_BF16 : FLASHCL_F16, s[0], s[1], s[2], s[3],
                                    s[4], s[5]);
            c.params.causal = (int)((i + (size_t)sp) % 2);
            c.params.window_left = i == 1 && sp == 0 ? 40 : -1; /* 2-3 blocks of 32 visible */
            c.params.softcap = i == 2 ? 8.0f : 0.0f;
            c.lse_mode = (int)((i + (size_t)sp) % 3);
            c.kv_layout = (ta_layout)(i % 4);
            setenv("FLASHCL_ATTENTION_SPLITS", splits[sp], 1);
            ta_check(g_ctx, &c, seed++);
        }
    {
        ta_case c = decode_case(FLASHCL_F16, 1, 1, 3001, 8, 1, 128);
        setenv("FLASHCL_ATTENTION_NO_ASYNC", "1", 1);
        setenv("FLASHCL_ATTENTION_SPLITS", "2", 1);
        ta_check(g_ctx, &c, seed++);
        unsetenv("FLASHCL_ATTENTION_NO_ASYNC");
    }
    unsetenv("FLASHCL_ATTENTION_SPLITS");
}

/* Groups of at most 4 query rows a (batch, kv head) (MHA, GQA up to 4:1, Sq x group <= 4): GPUs
 * run them on the key-parallel kernel's four-row form (f32 on NVIDIA, where 16-bit takes the
 * tensor cores), every head-dim class (256 keeps the eight-row form), split and not; each case
 * also with FLASHCL_ATTENTION_NO_KEYS4=1, the eight-row form, against the same reference. */
static void test_decode_four_rows(void **state)
{
    (void)state;
    /* {B, Sq, Sk, Hq, Hkv, D} */
    static const int64_t shapes[][6] = {
        {2, 1, 3001, 8, 8, 128}, {1, 2, 5000, 4, 2, 96}, {3, 1, 1234, 6, 2, 64},
        {1, 4, 2049, 4, 4, 128}, {1, 1, 777, 4, 1, 256}, {1, 1, 65, 2, 2, 16},
    };
    uint64_t seed = tu_base_seed() + 1000;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int dt = 0; dt < 3; dt++)
            for (int eight = 0; eight < 2; eight++) {
                const int64_t *s = shapes[i];
                ta_case c = decode_case((flashcl_dtype)dt, s[0], s[1], s[2], s[3], s[4], s[5]);
                c.params.causal = (int)((i + (size_t)dt) % 2);
                c.params.softcap = i == 2 ? 6.0f : 0.0f;
                c.lse_mode = (int)((i + (size_t)dt) % 3);
                c.kv_layout = (ta_layout)((i + (size_t)dt) % 4);
                if (i == 1) setenv("FLASHCL_ATTENTION_SPLITS", "5", 1);
                if (eight) setenv("FLASHCL_ATTENTION_NO_KEYS4", "1", 1);
                ta_check(g_ctx, &c, seed + i * 3 + (uint64_t)dt); /* same inputs both forms */
                unsetenv("FLASHCL_ATTENTION_NO_KEYS4");
                unsetenv("FLASHCL_ATTENTION_SPLITS");
            }
}

/* f32 decode through the key-parallel kernel's cp.async form (NVIDIA sm80+ builds it; it takes
 * f32 calls whose k and v rows are 16-byte aligned) and, with FLASHCL_ATTENTION_NO_ASYNC=1,
 * through the register-fed form, against one reference: every class (D 32 to 256), keys fewer
 * than a block, a tile whose rows run out mid-tile, and the padded layout the cp.async form
 * declines. A second context is created with its four-row form tuned in (the library leaves it
 * out), so that groups of at most 4 rows take it too. Where
 * the cp.async form is not built, both runs take the same kernel. */
static void test_decode_async(void **state)
{
    (void)state;
    /* {B, Sq, Sk, Hq, Hkv, D, splits (0: the planner's), window_left} */
    static const int64_t cases[][8] = {
        {1, 1, 9000, 8, 1, 128, 0, -1},  {2, 1, 4097, 16, 2, 64, 0, -1},
        {1, 3, 2500, 8, 2, 96, 5, -1},   {2, 1, 3001, 8, 8, 128, 0, 700},
        {1, 2, 1777, 4, 2, 80, 3, -1},   {1, 1, 100, 8, 1, 32, 0, -1},
        {1, 1, 5, 8, 1, 64, 0, -1},      {3, 1, 1500, 6, 3, 128, 9, -1},
        {1, 4, 6001, 8, 4, 128, 40, 999}, {2, 2, 333, 16, 4, 64, 0, 50},
        {1, 1, 3000, 8, 1, 256, 0, -1},  {1, 2, 999, 8, 2, 200, 6, -1},
    };
    uint64_t seed = tu_base_seed() + 1200;
    flashcl_context *rows4 = NULL;
    setenv("FLASHCL_ATTENTION_TILES", "A4_64=64,4,16,2;A4_128=64,4,16,2", 1);
    flashcl_status st = tu_context_create(tu_cache_dir(), &rows4);
    unsetenv("FLASHCL_ATTENTION_TILES");
    assert_int_equal(st, FLASHCL_SUCCESS);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int run = 0; run < 4; run++) { /* cp.async, register-fed; then on rows4 */
            const int64_t *s = cases[i];
            char splits[16];
            ta_case c = decode_case(FLASHCL_F32, s[0], s[1], s[2], s[3], s[4], s[5]);
            c.params.causal = (int)(i % 2);
            c.params.window_left = (int)s[7];
            c.params.softcap = i % 4 == 3 ? 5.0f : 0.0f;
            c.lse_mode = (int)(i % 3);
            c.kv_layout = (ta_layout)(i % TA_LAYOUT_COUNT);
            if (s[6]) {
                snprintf(splits, sizeof splits, "%d", (int)s[6]);
                setenv("FLASHCL_ATTENTION_SPLITS", splits, 1);
            }
            if (run % 2) setenv("FLASHCL_ATTENTION_NO_ASYNC", "1", 1);
            ta_check(run < 2 ? g_ctx : rows4, &c, seed + i); /* same inputs every run */
            unsetenv("FLASHCL_ATTENTION_NO_ASYNC");
            unsetenv("FLASHCL_ATTENTION_SPLITS");
        }
    flashcl_context_destroy(rows4);
}

/* Many splits through the split merge kernel: 7 to 130 partials a row, on NVIDIA OpenCL over
 * the ring kernel (20 and 66 splits), the two-slot kernel (short splits), the four-warp kernel
 * (16 query rows a group) and the key-parallel kernel's two forms (f32); windows that leave
 * whole splits without a visible key (their partials -inf). */
static void test_decode_many_splits(void **state)
{
    (void)state;
    /* {B, Sq, Sk, Hq, Hkv, D, splits, window_left} */
    static const int64_t cases[][8] = {
        {1, 1, 12000, 8, 1, 128, 20, -1}, {2, 1, 40000, 8, 2, 64, 66, -1},
        {1, 2, 3001, 8, 4, 128, 20, -1},  {1, 16, 9000, 8, 2, 64, 17, -1},
        {1, 1, 5000, 4, 1, 128, 7, -1},   {1, 1, 12000, 8, 1, 128, 20, 1500},
        {2, 3, 11000, 6, 3, 96, 24, 300}, {1, 1, 20000, 8, 8, 128, 130, -1},
    };
    uint64_t seed = tu_base_seed() + 1100;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const int64_t *s = cases[i];
        char splits[16];
        ta_case c = decode_case(i % 3 == 2 ? FLASHCL_F32 : i % 2 ? FLASHCL_BF16 : FLASHCL_F16,
                                s[0], s[1], s[2], s[3], s[4], s[5]);
        c.params.causal = (int)(i % 2);
        c.params.window_left = (int)s[7];
        c.lse_mode = (int)(i % 3);
        c.kv_layout = (ta_layout)(i % 4);
        snprintf(splits, sizeof splits, "%d", (int)s[6]);
        setenv("FLASHCL_ATTENTION_SPLITS", splits, 1);
        ta_check(g_ctx, &c, seed++);
    }
    unsetenv("FLASHCL_ATTENTION_SPLITS");
}

/* The tiled decode kernel behind FLASHCL_ATTENTION_DECODE_LEGACY=1 (the A/B reference, built
 * only by a context created with the variable set), and the key-parallel kernel with the GPUs'
 * geometry (128 work-items, 8 rows, 64-key blocks: two parts per key, teams of 16, four key
 * groups), which CPUs otherwise run with smaller groups. */
/* The tiled and key-parallel kernels and their switches are the OpenCL backend's. */
static int skip_unless_opencl(const char *what)
{
    flashcl_device_info dev;
    assert_int_equal(flashcl_context_device(g_ctx, &dev), FLASHCL_SUCCESS);
    if (dev.backend == FLASHCL_BACKEND_OPENCL) return 0;
    printf("SKIP %s: the OpenCL backend's decode kernels; this context is on the CUDA backend\n",
           what);
    return 1;
}

static void test_decode_legacy_and_gpu_geometry(void **state)
{
    (void)state;
    if (skip_unless_opencl("test_decode_legacy_and_gpu_geometry")) {
        skip();
        return;
    }
    static const int64_t shapes[][6] = {
        {1, 1, 3000, 8, 1, 128}, {2, 2, 999, 8, 2, 64}, {1, 1, 1234, 4, 1, 200}};
    uint64_t seed = tu_base_seed() + 800;
    flashcl_context *gpu_like = NULL, *legacy = NULL;
    setenv("FLASHCL_ATTENTION_TILES", "K256=128,8,64", 1);
    flashcl_status st = tu_context_create(tu_cache_dir(), &gpu_like);
    unsetenv("FLASHCL_ATTENTION_TILES");
    assert_int_equal(st, FLASHCL_SUCCESS);
    setenv("FLASHCL_ATTENTION_DECODE_LEGACY", "1", 1);
    st = tu_context_create(tu_cache_dir(), &legacy);
    unsetenv("FLASHCL_ATTENTION_DECODE_LEGACY");
    assert_int_equal(st, FLASHCL_SUCCESS);
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int dt = 0; dt < 3; dt++) {
            const int64_t *s = shapes[i];
            ta_case c = decode_case((flashcl_dtype)dt, s[0], s[1], s[2], s[3], s[4], s[5]);
            c.params.causal = dt == 1;
            c.lse_mode = 1 + dt % 2;
            c.kv_layout = (ta_layout)((i + (size_t)dt) % 4);
            setenv("FLASHCL_ATTENTION_SPLITS", dt == 2 ? "7" : "3", 1);
            ta_check(gpu_like, &c, seed++);
            setenv("FLASHCL_ATTENTION_DECODE_LEGACY", "1", 1);
            ta_check(legacy, &c, seed++);
            unsetenv("FLASHCL_ATTENTION_DECODE_LEGACY");
        }
    unsetenv("FLASHCL_ATTENTION_SPLITS");
    flashcl_context_destroy(gpu_like);
    flashcl_context_destroy(legacy);
}

/* A context built without the tiled decode kernels refuses the switch rather than quietly
 * running the key-parallel kernel in their place (an A/B measurement would time the wrong
 * kernel); prefill-shaped calls are unaffected. */
static void test_decode_legacy_needs_it_at_creation(void **state)
{
    (void)state;
    if (skip_unless_opencl("test_decode_legacy_needs_it_at_creation")) {
        skip();
        return;
    }
    ta_case c = decode_case(FLASHCL_F16, 1, 1, 500, 8, 1, 64);
    c.allow_unsupported = 1; /* ta_check then checks that nothing was written */
    setenv("FLASHCL_ATTENTION_DECODE_LEGACY", "1", 1);
    flashcl_status st = ta_check(g_ctx, &c, tu_base_seed() + 900);
    assert_int_equal(st, FLASHCL_UNSUPPORTED);
    c.seqlen_q = 300; /* prefill-shaped */
    c.allow_unsupported = 0;
    ta_check(g_ctx, &c, tu_base_seed() + 901);
    unsetenv("FLASHCL_ATTENTION_DECODE_LEGACY");
}

int main(void)
{
    g_ctx = tu_context_or_skip();
    ta_skip_repeat_without_cpu_kernels(g_ctx);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode_auto),
        cmocka_unit_test(test_decode_forced_splits),
        cmocka_unit_test(test_causal_more_queries_than_keys),
        cmocka_unit_test(test_decode_long_ranges),
        cmocka_unit_test(test_decode_four_rows),
        cmocka_unit_test(test_decode_many_splits),
        cmocka_unit_test(test_decode_async),
        cmocka_unit_test(test_decode_legacy_and_gpu_geometry),
        cmocka_unit_test(test_decode_legacy_needs_it_at_creation),
    };
    int failures = cmocka_run_group_tests(tests, NULL, NULL);
    flashcl_context_destroy(g_ctx);
    return tu_exit_code(failures);
}
