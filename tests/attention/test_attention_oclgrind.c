/* One small case of every attention kernel — prefill (f32 and f16, plain and causal with a
 * window), key-parallel decode (bf16, f16, f32) and the tiled decode kernel
 * (FLASHCL_ATTENTION_DECODE_LEGACY) with split-KV and the split merge, the two CPU kernels
 * (where the device has them: CPUs, and Oclgrind), and
 * flashcl_attention_merge with a chained launch — checked against host_ref, small enough to run
 * under the Oclgrind simulator (out-of-bounds accesses, data races, uninitialised reads) in
 * about a minute. CTest runs it natively and, when oclgrind is installed, as
 * test_attention_oclgrind_sim (and _sim_wide, with wider decode work-groups). */
#include "attention_check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static flashcl_context *g_ctx;

static ta_case small_case(flashcl_dtype dt, int64_t sq, int64_t sk, int64_t d)
{
    ta_case c = ta_new_case(dt, 1, sq, sk, 2, 1, d);
    c.q_layout = TA_PADDED;
    c.kv_layout = TA_KV_PACKED;
    c.o_off = 1;
    return c;
}

static void test_prefill(void **state)
{
    (void)state;
    ta_case c = small_case(FLASHCL_F32, 20, 37, 24);
    setenv("FLASHCL_ATTENTION_FAMILY", "prefill", 1);
    setenv("FLASHCL_ATTENTION_SPLITS", "1", 1);
    ta_check(g_ctx, &c, tu_base_seed() + 1);
    c = small_case(FLASHCL_F16, 37, 20, 13);
    c.params.causal = 1;
    c.params.window_left = 5;
    c.params.softcap = 3.0f;
    c.lse_mode = 2;
    ta_check(g_ctx, &c, tu_base_seed() + 2);
}

static void test_decode_split(void **state)
{
    (void)state;
    ta_case c = small_case(FLASHCL_BF16, 2, 150, 40);
    c.heads_q = 4;
    c.params.causal = 1;
    setenv("FLASHCL_ATTENTION_FAMILY", "decode", 1);
    setenv("FLASHCL_ATTENTION_SPLITS", "3", 1);
    ta_check(g_ctx, &c, tu_base_seed() + 3); /* key-parallel decode kernel */
    {   /* the tiled decode kernel it replaced, built by a context made with the switch set */
        flashcl_context *legacy = NULL;
        setenv("FLASHCL_ATTENTION_DECODE_LEGACY", "1", 1);
        assert_int_equal(tu_context_create(tu_cache_dir(), &legacy), FLASHCL_SUCCESS);
        ta_check(legacy, &c, tu_base_seed() + 3);
        unsetenv("FLASHCL_ATTENTION_DECODE_LEGACY");
        flashcl_context_destroy(legacy);
    }
    /* a full GQA group of 8 in f16 and f32 (blocks of 16 and 8 keys), softcap, unaligned K */
    c = small_case(FLASHCL_F16, 1, 70, 38);
    c.heads_q = 8;
    c.params.softcap = 5.0f;
    c.kv_layout = TA_KV_PACKED;
    ta_check(g_ctx, &c, tu_base_seed() + 5);
    c.dtype = FLASHCL_F32;
    c.params.window_left = 20;
    ta_check(g_ctx, &c, tu_base_seed() + 6);
}

/* The CPU kernels (Oclgrind builds them too). fc_attn_rows_vector: a tile of 16 lanes with rows
 * past the last, a head dim that ends inside a 16-element chunk, key blocks cut short, causal
 * with a window and softcap, lse; then a GQA decode step through split-KV and the split merge.
 * fc_attn_decode_vector: the same decode step, a masked MHA case with unaligned rows, and two kv
 * heads a work-item. */
static void test_cpu_kernels(void **state)
{
    (void)state;
    if (!ta_cpu_kernels_device(g_ctx)) {
        printf("CPU kernels: not on this device (built for CPU devices and Oclgrind)\n");
        return;
    }
    setenv("FLASHCL_ATTENTION_FAMILY", "rows_vector", 1);
    setenv("FLASHCL_ATTENTION_SPLITS", "1", 1);
    ta_case c = small_case(FLASHCL_F32, 19, 27, 21);
    c.params.causal = 1;
    c.params.window_left = 6;
    c.params.softcap = 4.0f;
    c.lse_mode = 2;
    ta_check(g_ctx, &c, tu_base_seed() + 7);
    setenv("FLASHCL_ATTENTION_SPLITS", "2", 1);
    c = small_case(FLASHCL_BF16, 1, 45, 16);
    c.heads_q = 4;
    c.lse_mode = 1;
    ta_check(g_ctx, &c, tu_base_seed() + 8);
    setenv("FLASHCL_ATTENTION_FAMILY", "decode_vector", 1);
    ta_check(g_ctx, &c, tu_base_seed() + 9);
    setenv("FLASHCL_ATTENTION_SPLITS", "1", 1);
    c = small_case(FLASHCL_F16, 3, 30, 37);
    c.params.causal = 1;
    c.params.window_left = 4;
    c.lse_mode = 2;
    ta_check(g_ctx, &c, tu_base_seed() + 10);
    /* two kv heads a work-item (BSHD): GQA 2:1, so 4 rows, through two splits */
    c = ta_new_case(FLASHCL_F32, 1, 1, 40, 4, 2, 24);
    c.lse_mode = 1;
    setenv("FLASHCL_ATTENTION_CPU_HEADS", "2", 1);
    setenv("FLASHCL_ATTENTION_SPLITS", "2", 1);
    ta_check(g_ctx, &c, tu_base_seed() + 11);
    unsetenv("FLASHCL_ATTENTION_CPU_HEADS");
}

static void test_merge(void **state)
{
    (void)state;
    /* Five parts of one row block: one launch of four, then a chained one. */
    enum { PARTS = 5, S = 3, H = 2, D = 6 };
    const int64_t shape[4] = {1, S, H, D}, st[4] = {S * H * D, H * D, D, 1};
    const int64_t lshape[3] = {1, H, S}, lst[3] = {H * S, S, 1};
    float o_img[PARTS][S * H * D], l_img[PARTS][H * S];
    const float *op[PARTS], *lp[PARTS];
    flashcl_buffer *ob[PARTS], *lb[PARTS];
    flashcl_tensor o_parts[PARTS], l_parts[PARTS];
    tu_rng rng;
    tu_rng_seed(&rng, tu_base_seed() + 4);
    for (int p = 0; p < PARTS; p++) {
        for (int i = 0; i < S * H * D; i++)
            o_img[p][i] = (float)tu_rng_uniform(&rng, -1.0, 1.0);
        for (int i = 0; i < H * S; i++) /* row 0 of head 0: every part -inf */
            l_img[p][i] = i == 0 ? -INFINITY : (float)tu_rng_uniform(&rng, -5.0, 5.0);
        ob[p] = ta_buffer(g_ctx, o_img[p], sizeof o_img[p]);
        lb[p] = ta_buffer(g_ctx, l_img[p], sizeof l_img[p]);
        memset(&o_parts[p], 0, sizeof o_parts[p]);
        memset(&l_parts[p], 0, sizeof l_parts[p]);
        o_parts[p].buffer = ob[p], o_parts[p].dtype = FLASHCL_F32, o_parts[p].ndim = 4;
        l_parts[p].buffer = lb[p], l_parts[p].dtype = FLASHCL_F32, l_parts[p].ndim = 3;
        memcpy(o_parts[p].shape, shape, sizeof shape), memcpy(o_parts[p].strides, st, sizeof st);
        memcpy(l_parts[p].shape, lshape, sizeof lshape);
        memcpy(l_parts[p].strides, lst, sizeof lst);
        op[p] = o_img[p], lp[p] = l_img[p];
    }
    float out_img[S * H * D], lout_img[H * S];
    tu_poison(out_img, sizeof out_img, FLASHCL_F32);
    tu_poison(lout_img, sizeof lout_img, FLASHCL_F32);
    flashcl_buffer *oo = ta_buffer(g_ctx, out_img, sizeof out_img);
    flashcl_buffer *lo = ta_buffer(g_ctx, lout_img, sizeof lout_img);
    flashcl_tensor o = o_parts[0], lse = l_parts[0];
    o.buffer = oo, lse.buffer = lo;
    assert_int_equal(flashcl_attention_merge(g_ctx, PARTS, o_parts, l_parts, &o, &lse),
                     FLASHCL_SUCCESS);
    assert_int_equal(flashcl_buffer_read(oo, 0, out_img, sizeof out_img), FLASHCL_SUCCESS);
    assert_int_equal(flashcl_buffer_read(lo, 0, lout_img, sizeof lout_img), FLASHCL_SUCCESS);
    double oref[S * H * D], lref[H * S];
    host_ref_attention_merge(1, S, H, D, PARTS, op, st, lp, lst, oref, lref);
    for (int i = 0; i < S * H * D; i++)
        if (!tu_value_ok(FLASHCL_F32, out_img[i], oref[i], 2e-6 + 2e-6 * fabs(oref[i])))
            fail_msg("merged o[%d] = %.9g, expected %.9g", i, (double)out_img[i], oref[i]);
    for (int i = 0; i < H * S; i++)
        if (isinf(lref[i]) ? lout_img[i] != (float)lref[i]
                           : fabs(lout_img[i] - lref[i]) > 2e-6 + 2e-6 * fabs(lref[i]))
            fail_msg("merged lse[%d] = %.9g, expected %.9g", i, (double)lout_img[i], lref[i]);
    for (int p = 0; p < PARTS; p++)
        flashcl_buffer_destroy(ob[p]), flashcl_buffer_destroy(lb[p]);
    flashcl_buffer_destroy(oo), flashcl_buffer_destroy(lo);
}

int main(void)
{
    g_ctx = tu_context_or_skip();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prefill),
        cmocka_unit_test(test_decode_split),
        cmocka_unit_test(test_cpu_kernels),
        cmocka_unit_test(test_merge),
    };
    int failures = cmocka_run_group_tests(tests, NULL, NULL);
    unsetenv("FLASHCL_ATTENTION_FAMILY");
    unsetenv("FLASHCL_ATTENTION_SPLITS");
    flashcl_context_destroy(g_ctx);
    return tu_exit_code(failures);
}
