/* Attention on tensors past 2^31 elements (4.4 GB a tensor), where 32-bit element or byte
 * offsets would wrap: prefill with q, k, v and o of 2.18G elements each (B1040 S2048 H8 D128
 * f16, lse on), and a decode call whose k and v hold 2.21G elements each (B1 Sq1 Sk270000
 * Hq64 Hkv32 D256 bf16, GQA 2:1, a left window that masks the first 70000 keys, lse on).
 * Sampled query rows, among them those on either side of q's element 2^31 and the last batch,
 * are compared with host_ref_attention under attention_check.h's tolerances, and none may keep
 * its poison. GPUs with 24 GB or more only; elsewhere the test skips with the reason. */
#include "attention_check.h"
#include "large_tensors.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define ATTENTION_LARGE_DEVICE_BYTES 24000000000ull
#define ATTENTION_LARGE_HOST_BYTES 16000000000ull

static flashcl_context *g_ctx;

typedef struct large_case {
    flashcl_dtype dt;
    int64_t B, Sq, Sk, Hq, Hkv, D;
    int window_left;
    uint64_t seed; /* q, k, v take seed, seed + 1, seed + 2 */
} large_case;

/* Element strides of a packed BSHD tensor [B, S, H, D]. */
static void bshd(int64_t S, int64_t H, int64_t D, int64_t st[4])
{
    st[0] = S * H * D, st[1] = H * D, st[2] = D, st[3] = 1;
}

/* Checks query row (b, i, h) of o and lse against host_ref_attention on that row alone. */
static uint64_t check_row(const large_case *c, const flashcl_buffer *ob, const flashcl_buffer *lb,
                          int64_t b, int64_t i, int64_t h)
{
    const int64_t D = c->D, Sk = c->Sk, kh = h / (c->Hq / c->Hkv);
    int64_t qst[4], kst[4];
    bshd(c->Sq, c->Hq, D, qst);
    bshd(Sk, c->Hkv, D, kst);
    float *q = malloc((size_t)D * sizeof(float)), *got = malloc((size_t)D * sizeof(float));
    float *k = malloc((size_t)(Sk * D) * sizeof(float)), *v = malloc((size_t)(Sk * D) * sizeof(float));
    double *ref = malloc((size_t)D * sizeof(double)), ref_lse;
    assert_true(q && got && k && v && ref);
    for (int64_t d = 0; d < D; d++)
        q[d] = lt_value(c->dt, c->seed, (uint64_t)(b * qst[0] + i * qst[1] + h * qst[2] + d), -1, 1);
    for (int64_t j = 0; j < Sk; j++)
        for (int64_t d = 0; d < D; d++) {
            const uint64_t at = (uint64_t)(b * kst[0] + j * kst[1] + kh * kst[2] + d);
            k[j * D + d] = lt_value(c->dt, c->seed + 1, at, -1, 1);
            v[j * D + d] = lt_value(c->dt, c->seed + 2, at, -1, 1);
        }
    /* The row alone: one batch, one query, one head. A window aligns bottom-right, so the row
     * keeps its mask only where Sq is 1 (the decode case; prefill here has none). */
    assert_true(c->Sq == 1 || c->window_left < 0);
    host_ref_attention_problem p = {0};
    p.batch = 1, p.seqlen_q = 1, p.seqlen_k = Sk, p.heads_q = 1, p.heads_kv = 1, p.head_dim = D;
    p.q_strides[0] = p.q_strides[1] = p.q_strides[2] = D, p.q_strides[3] = 1;
    p.k_strides[0] = Sk * D, p.k_strides[1] = D, p.k_strides[2] = D, p.k_strides[3] = 1;
    for (int a = 0; a < 4; a++) p.v_strides[a] = p.k_strides[a];
    p.scale = 1.0 / sqrt((double)D);
    p.window_left = c->window_left, p.window_right = -1;
    const int64_t ost[4] = {D, D, D, 1}, lst[3] = {1, 1, 1};
    host_ref_attention(&p, q, k, v, ref, ost, &ref_lse, lst);

    uint64_t poisoned, bad = 0;
    float lse;
    lt_read(ob, c->dt, (uint64_t)(b * qst[0] + i * qst[1] + h * qst[2]), (uint64_t)D, got, &poisoned);
    const double allowance = ta_p_rounding_allowance(g_ctx, c->dt, 1.0); /* v in [-1, 1] */
    for (int64_t d = 0; d < D; d++)
        if (!tu_value_ok(c->dt, got[d], ref[d], 1e-5 + 1e-5 * fabs(ref[d]) + allowance)) {
            if (bad++ < 3)
                printf("  b%lld i%lld h%lld d%lld: got %.8g ref %.10g\n", (long long)b,
                       (long long)i, (long long)h, (long long)d, got[d], ref[d]);
        }
    uint64_t lse_poisoned;
    lt_read(lb, FLASHCL_F32, (uint64_t)((b * c->Hq + h) * c->Sq + i), 1, &lse, &lse_poisoned);
    if (!(fabs(lse - ref_lse) <= 1e-5 + 2e-6 * fabs(ref_lse))) {
        printf("  b%lld i%lld h%lld: lse %.8g ref %.10g\n", (long long)b, (long long)i,
               (long long)h, lse, ref_lse);
        bad++;
    }
    free(q), free(got), free(k), free(v), free(ref);
    return bad + poisoned + lse_poisoned;
}

static void run_large(const large_case *c, const int64_t (*rows)[3], int nrows)
{
    const uint64_t nq = (uint64_t)(c->B * c->Sq * c->Hq * c->D);
    const uint64_t nk = (uint64_t)(c->B * c->Sk * c->Hkv * c->D);
    const uint64_t nl = (uint64_t)(c->B * c->Hq * c->Sq);
    printf("attention %s B%lld Sq%lld Sk%lld Hq%lld Hkv%lld D%lld window_left %d: q %.2fG, k %.2fG "
           "elements\n",
           host_ref_dtype_name(c->dt), (long long)c->B, (long long)c->Sq, (long long)c->Sk,
           (long long)c->Hq, (long long)c->Hkv, (long long)c->D, c->window_left, nq / 1e9,
           nk / 1e9);
    fflush(stdout);
    flashcl_buffer *qb = lt_filled_buffer(g_ctx, c->dt, nq, c->seed, -1, 1);
    flashcl_buffer *kb = lt_filled_buffer(g_ctx, c->dt, nk, c->seed + 1, -1, 1);
    flashcl_buffer *vb = lt_filled_buffer(g_ctx, c->dt, nk, c->seed + 2, -1, 1);
    flashcl_buffer *ob = lt_poisoned_buffer(g_ctx, c->dt, nq);
    flashcl_buffer *lb = lt_poisoned_buffer(g_ctx, FLASHCL_F32, nl);
    flashcl_tensor q = {qb, 0, c->dt, 4, {c->B, c->Sq, c->Hq, c->D}, {0}};
    flashcl_tensor k = {kb, 0, c->dt, 4, {c->B, c->Sk, c->Hkv, c->D}, {0}};
    bshd(c->Sq, c->Hq, c->D, q.strides);
    bshd(c->Sk, c->Hkv, c->D, k.strides);
    flashcl_tensor v = k, o = q;
    v.buffer = vb, o.buffer = ob;
    const flashcl_tensor lse = {lb, 0, FLASHCL_F32, 3, {c->B, c->Hq, c->Sq},
                                {c->Hq * c->Sq, c->Sq, 1}};
    flashcl_attention_params params = ta_default_params();
    params.window_left = c->window_left;
    flashcl_status st = flashcl_attention_forward(g_ctx, &params, &q, &k, &v, &o, &lse);
    if (st == FLASHCL_SUCCESS) st = flashcl_finish(g_ctx);
    uint64_t bad = 0;
    if (st == FLASHCL_SUCCESS)
        for (int r = 0; r < nrows; r++) bad += check_row(c, ob, lb, rows[r][0], rows[r][1], rows[r][2]);
    flashcl_buffer_destroy(qb), flashcl_buffer_destroy(kb), flashcl_buffer_destroy(vb);
    flashcl_buffer_destroy(ob), flashcl_buffer_destroy(lb);
    if (st != FLASHCL_SUCCESS)
        fail_msg("flashcl_attention_forward: %s: %s", flashcl_status_string(st),
                 flashcl_last_error());
    printf("  %d query rows checked, %llu values out of tolerance or never written\n", nrows,
           (unsigned long long)bad);
    assert_int_equal(bad, 0);
}

static void test_prefill_past_2_31(void **state)
{
    (void)state;
    const large_case c = {FLASHCL_F16, 1040, 2048, 2048, 8, 8, 128, -1, tu_base_seed() + 10};
    /* q's element 2^31 is (b 1024, i 0, h 0) */
    static const int64_t rows[][3] = {{0, 0, 0},       {1039, 2047, 7}, {1024, 0, 0},
                                      {1023, 2047, 7}, {520, 1000, 3},  {1039, 0, 5}};
    run_large(&c, rows, 6);
}

static void test_decode_past_2_31(void **state)
{
    (void)state;
    const large_case c = {FLASHCL_BF16, 1, 1, 270000, 64, 32, 256, 200000, tu_base_seed() + 20};
    /* kv heads 0, 0, 16, 31; keys from 262144 on lie past k's element 2^31, and the window
     * leaves keys 69999.. visible */
    static const int64_t rows[][3] = {{0, 0, 0}, {0, 0, 1}, {0, 0, 33}, {0, 0, 63}};
    run_large(&c, rows, 4);
}

int main(void)
{
    g_ctx = tu_context_or_skip();
    lt_require_gpu_memory(g_ctx, ATTENTION_LARGE_DEVICE_BYTES, ATTENTION_LARGE_HOST_BYTES);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prefill_past_2_31),
        cmocka_unit_test(test_decode_past_2_31),
    };
    int failures = cmocka_run_group_tests(tests, NULL, NULL);
    flashcl_context_destroy(g_ctx);
    return tu_exit_code(failures);
}
