/* flashcl_attention_merge: (1) partial results computed by flashcl_attention_forward over
 * disjoint key ranges (1-8 parts), merged, must equal attention over all keys; (2) synthetic
 * partials with rows whose lse are partly or all -inf, against host_ref_attention_merge, with
 * part counts that need several chained launches (up to 13). Parts share one dtype, the output
 * may have another; layouts and offsets vary per tensor.
 *
 * Tolerances: the merge computes in f32. (1) o within 1e-5 + 1e-5·|ref| of full attention, plus
 * the rounding of the parts themselves (half an ulp of their dtype, values |o| <= 1), then the
 * output dtype's rounding (tu_value_ok); lse within 1e-5 + 2e-6·|ref|. (2) o within
 * 2e-6 + 2e-6·|ref| before the output rounding, lse within 2e-6 + 2e-6·|ref|; rows whose parts
 * are all -inf must be exactly 0 and -inf, whatever the part count: 257 and 300 parts cover a
 * CUDA merge block walking more parts than it has threads and the OpenCL merge's long chains of
 * launches (whose running result must not re-round an exponent per launch). */
#include "attention_check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static flashcl_context *g_ctx;

static flashcl_tensor view(flashcl_buffer *b, flashcl_dtype dt, size_t off, int ndim,
                           const int64_t *shape, const int64_t *st)
{
    flashcl_tensor t;
    memset(&t, 0, sizeof t);
    t.buffer = b;
    t.dtype = dt;
    t.offset = off * host_ref_dtype_size(dt);
    t.ndim = ndim;
    for (int i = 0; i < ndim; i++)
        t.shape[i] = shape[i], t.strides[i] = st[i];
    return t;
}

/* One [B, S, H, D] tensor (o) and its [B, H, S] lse, in their own buffers. */
typedef struct part {
    flashcl_buffer *ob, *lb;
    flashcl_tensor o, lse;
    size_t on, ln;
} part;

static part make_part(flashcl_dtype dt, const int64_t shape[4], ta_layout layout, size_t off,
                      int lse_padded)
{
    part p;
    int64_t st[4], lst[3];
    size_t n;
    const size_t es = host_ref_dtype_size(dt);
    ta_strides(layout, shape[0], shape[1], shape[2], shape[3], st, &n);
    p.on = n + off;
    if (lse_padded) /* gaps after every row and every batch */
        lst[1] = shape[1] + 2, lst[0] = shape[2] * lst[1] + 3, lst[2] = 1;
    else
        lst[0] = shape[2] * shape[1], lst[1] = shape[1], lst[2] = 1;
    p.ln = (size_t)(shape[0] * lst[0]) + 1;
    unsigned char *zero = calloc(p.on * es + p.ln * 4, 1);
    assert_non_null(zero);
    tu_poison(zero, p.on * es, dt);
    tu_poison(zero + p.on * es, p.ln * 4, FLASHCL_F32);
    p.ob = ta_buffer(g_ctx, zero, p.on * es);
    p.lb = ta_buffer(g_ctx, zero + p.on * es, p.ln * 4);
    free(zero);
    const int64_t lshape[3] = {shape[0], shape[2], shape[1]};
    p.o = view(p.ob, dt, off, 4, shape, st);
    p.lse = view(p.lb, FLASHCL_F32, 1, 3, lshape, lst);
    return p;
}

static void free_part(part *p)
{
    flashcl_buffer_destroy(p->ob);
    flashcl_buffer_destroy(p->lb);
}

/* Reads a [B, S, H, D] view into packed doubles (BSHD) and an lse view into packed [B, H, S]. */
static void read_part(const part *p, double *o, double *lse)
{
    const flashcl_tensor *t = &p->o;
    const size_t es = host_ref_dtype_size(t->dtype);
    unsigned char *img = malloc(p->on * es);
    float *limg = malloc(p->ln * 4);
    assert_non_null(img);
    assert_non_null(limg);
    assert_int_equal(flashcl_buffer_read(p->ob, 0, img, p->on * es), FLASHCL_SUCCESS);
    assert_int_equal(flashcl_buffer_read(p->lb, 0, limg, p->ln * 4), FLASHCL_SUCCESS);
    const int64_t B = t->shape[0], S = t->shape[1], H = t->shape[2], D = t->shape[3];
    const size_t off = t->offset / es;
    for (int64_t b = 0; b < B; b++)
        for (int64_t s = 0; s < S; s++)
            for (int64_t h = 0; h < H; h++) {
                for (int64_t d = 0; d < D; d++)
                    o[((b * S + s) * H + h) * D + d] = host_ref_load(
                        t->dtype, img,
                        off + (size_t)(b * t->strides[0] + s * t->strides[1] +
                                       h * t->strides[2] + d));
                if (lse)
                    lse[(b * H + h) * S + s] =
                        limg[1 + b * p->lse.strides[0] + h * p->lse.strides[1] +
                             s * p->lse.strides[2]];
            }
    free(img);
    free(limg);
}

/* (1): forward over key ranges, merge, compare with forward's reference over all keys. */
static void check_split_merge(int nparts, flashcl_dtype in_dt, flashcl_dtype out_dt,
                              uint64_t seed)
{
    const int64_t B = 2, Sq = 9, Hq = 4, Hkv = 2, D = 40;
    const int64_t Sk = 60 + 17 * nparts;
    tu_rng rng;
    tu_rng_seed(&rng, seed);
    int64_t qst[4], kst[4];
    size_t qn, kn;
    ta_strides(TA_BSHD, B, Sq, Hq, D, qst, &qn);
    ta_strides(TA_BHSD, B, Sk, Hkv, D, kst, &kn);
    const size_t es = host_ref_dtype_size(in_dt);
    unsigned char *qi = malloc(qn * es), *ki = malloc(kn * es), *vi = malloc(kn * es);
    float *qf = malloc(qn * 4), *kf = malloc(kn * 4), *vf = malloc(kn * 4);
    assert_true(qi && ki && vi && qf && kf && vf);
    const int64_t qshape[4] = {B, Sq, Hq, D}, kshape[4] = {B, Sk, Hkv, D};
    ta_fill(in_dt, qi, qf, 0, qshape, qst, -1.5, 1.5, &rng);
    ta_fill(in_dt, ki, kf, 0, kshape, kst, -1.5, 1.5, &rng);
    ta_fill(in_dt, vi, vf, 0, kshape, kst, -1.0, 1.0, &rng);
    flashcl_buffer *qb = ta_buffer(g_ctx, qi, qn * es), *kb = ta_buffer(g_ctx, ki, kn * es),
                   *vb = ta_buffer(g_ctx, vi, kn * es);
    flashcl_tensor q = view(qb, in_dt, 0, 4, qshape, qst);

    part parts[8];
    flashcl_tensor o_parts[8], lse_parts[8];
    int64_t start = 0;
    for (int p = 0; p < nparts; p++) {
        /* contiguous key ranges of random length, at least one key each */
        int64_t len = p == nparts - 1 ? Sk - start
                                      : 1 + (int64_t)tu_rng_below(
                                                &rng, (uint64_t)(Sk - start - (nparts - p)) / 2 +
                                                          1);
        int64_t ksub[4] = {B, len, Hkv, D};
        flashcl_tensor k = view(kb, in_dt, (size_t)(start * kst[1]), 4, ksub, kst);
        flashcl_tensor v = view(vb, in_dt, (size_t)(start * kst[1]), 4, ksub, kst);
        parts[p] = make_part(in_dt, qshape, (ta_layout)(p % 3), (size_t)(p % 2), p % 2);
        flashcl_status st = flashcl_attention_forward(g_ctx, NULL, &q, &k, &v, &parts[p].o,
                                                      &parts[p].lse);
        if (st != FLASHCL_SUCCESS)
            fail_msg("forward of part %d: %s", p, flashcl_last_error());
        o_parts[p] = parts[p].o, lse_parts[p] = parts[p].lse;
        start += len;
    }
    assert_int_equal(start, Sk);
    part out = make_part(out_dt, qshape, TA_PADDED, 3, 1);
    flashcl_status st = flashcl_attention_merge(g_ctx, (size_t)nparts, o_parts, lse_parts,
                                                &out.o, &out.lse);
    if (st != FLASHCL_SUCCESS)
        fail_msg("merge of %d parts: %s", nparts, flashcl_last_error());

    host_ref_attention_problem pr;
    memset(&pr, 0, sizeof pr);
    pr.batch = B, pr.seqlen_q = Sq, pr.seqlen_k = Sk, pr.heads_q = Hq, pr.heads_kv = Hkv;
    pr.head_dim = D;
    memcpy(pr.q_strides, qst, sizeof qst);
    memcpy(pr.k_strides, kst, sizeof kst);
    memcpy(pr.v_strides, kst, sizeof kst);
    pr.scale = 1.0 / sqrt((double)D);
    pr.window_left = pr.window_right = -1;
    const size_t rows = (size_t)(B * Sq * Hq);
    double *oref = malloc(rows * (size_t)D * sizeof(double));
    double *lref = malloc(rows * sizeof(double));
    double *got = malloc(rows * (size_t)D * sizeof(double));
    double *lgot = malloc(rows * sizeof(double));
    assert_true(oref && lref && got && lgot);
    const int64_t ro[4] = {Sq * Hq * D, Hq * D, D, 1}, rl[3] = {Hq * Sq, Sq, 1};
    host_ref_attention(&pr, qf, kf, vf, oref, ro, lref, rl);
    read_part(&out, got, lgot);
    size_t bad = 0;
    for (size_t i = 0; i < rows * (size_t)D; i++) {
        double e = 1e-5 + 1e-5 * fabs(oref[i]) + host_ref_narrowing_roundoff(in_dt);
        if (!tu_value_ok(out_dt, (float)got[i], oref[i], e)) {
            if (bad++ < 5)
                print_error("o[%zu] = %.9g, expected %.9g\n", i, got[i], oref[i]);
        }
    }
    for (size_t i = 0; i < rows; i++)
        if (!(fabs(lgot[i] - lref[i]) <= 1e-5 + 2e-6 * fabs(lref[i]))) {
            if (bad++ < 10)
                print_error("lse[%zu] = %.9g, expected %.9g\n", i, lgot[i], lref[i]);
        }
    if (bad)
        fail_msg("merge of %d %s parts into %s: %zu wrong", nparts, host_ref_dtype_name(in_dt),
                 host_ref_dtype_name(out_dt), bad);
    for (int p = 0; p < nparts; p++)
        free_part(&parts[p]);
    free_part(&out);
    flashcl_buffer_destroy(qb), flashcl_buffer_destroy(kb), flashcl_buffer_destroy(vb);
    free(qi), free(ki), free(vi), free(qf), free(kf), free(vf);
    free(oref), free(lref), free(got), free(lgot);
}

static void test_merge_of_forward_parts(void **state)
{
    (void)state;
    uint64_t seed = tu_base_seed() + 800;
    for (int n = 1; n <= 8; n++)
        check_split_merge(n, (flashcl_dtype)(n % 3), (flashcl_dtype)((n + 1) % 3), seed++);
}

/* (2): synthetic partials with -inf rows. */
static void check_synthetic(int nparts, flashcl_dtype in_dt, flashcl_dtype out_dt, int with_lse,
                            uint64_t seed)
{
    const int64_t B = 2, S = 5, H = 3, D = 19;
    const int64_t shape[4] = {B, S, H, D};
    const size_t rows = (size_t)(B * S * H), es = host_ref_dtype_size(in_dt);
    tu_rng rng;
    tu_rng_seed(&rng, seed);
    part *parts = calloc((size_t)nparts, sizeof *parts);
    flashcl_tensor *o_parts = calloc((size_t)nparts, sizeof *o_parts);
    flashcl_tensor *lse_parts = calloc((size_t)nparts, sizeof *lse_parts);
    float **of = calloc((size_t)nparts, sizeof *of), **lf = calloc((size_t)nparts, sizeof *lf);
    assert_true(parts && o_parts && lse_parts && of && lf);
    const int64_t pst[4] = {S * H * D, H * D, D, 1}, lst[3] = {H * S, S, 1};
    for (int p = 0; p < nparts; p++) {
        parts[p] = make_part(in_dt, shape, (ta_layout)(p % 3), (size_t)(p % 3), p % 2);
        /* values: packed mirrors for the reference, written through the part's own layout */
        of[p] = malloc(rows * (size_t)D * 4), lf[p] = malloc(rows * 4);
        assert_true(of[p] && lf[p]);
        unsigned char *img = malloc(parts[p].on * es);
        float *limg = malloc(parts[p].ln * 4);
        assert_true(img && limg);
        tu_poison(img, parts[p].on * es, in_dt);
        tu_poison(limg, parts[p].ln * 4, FLASHCL_F32);
        const flashcl_tensor *t = &parts[p].o, *l = &parts[p].lse;
        for (int64_t b = 0; b < B; b++)
            for (int64_t s = 0; s < S; s++)
                for (int64_t h = 0; h < H; h++) {
                    const int64_t row = (b * S + s) * H + h;
                    /* row kinds: row % 4 == 0 all parts -inf; == 1 part 0 -inf; else finite */
                    float lv = (float)tu_rng_uniform(&rng, -30.0, 30.0);
                    if (row % 4 == 0 || (row % 4 == 1 && p == 0))
                        lv = -INFINITY;
                    lf[p][(b * H + h) * S + s] = lv;
                    limg[l->offset / 4 + (size_t)(b * l->strides[0] + h * l->strides[1] +
                                               s * l->strides[2])] = lv;
                    for (int64_t d = 0; d < D; d++) {
                        float v = host_ref_round(in_dt, (float)tu_rng_uniform(&rng, -2.0, 2.0));
                        of[p][row * D + d] = v;
                        size_t at = t->offset / es + (size_t)(b * t->strides[0] +
                                                              s * t->strides[1] +
                                                              h * t->strides[2] + d);
                        host_ref_store(in_dt, img, at, v);
                    }
                }
        assert_int_equal(flashcl_buffer_write(parts[p].ob, 0, img, parts[p].on * es),
                         FLASHCL_SUCCESS);
        assert_int_equal(flashcl_buffer_write(parts[p].lb, 0, limg, parts[p].ln * 4),
                         FLASHCL_SUCCESS);
        free(img), free(limg);
        o_parts[p] = parts[p].o, lse_parts[p] = parts[p].lse;
    }
    part out = make_part(out_dt, shape, TA_BHSD, 2, 0);
    flashcl_status st = flashcl_attention_merge(g_ctx, (size_t)nparts, o_parts, lse_parts, &out.o,
                                                with_lse ? &out.lse : NULL);
    if (st != FLASHCL_SUCCESS)
        fail_msg("merge of %d parts: %s", nparts, flashcl_last_error());
    double *oref = malloc(rows * (size_t)D * sizeof(double));
    double *lref = malloc(rows * sizeof(double));
    double *got = malloc(rows * (size_t)D * sizeof(double));
    double *lgot = malloc(rows * sizeof(double));
    assert_true(oref && lref && got && lgot);
    host_ref_attention_merge(B, S, H, D, nparts, (const float *const *)of, pst,
                             (const float *const *)lf, lst, oref, lref);
    read_part(&out, got, lgot);
    size_t bad = 0;
    for (size_t i = 0; i < rows * (size_t)D; i++)
        if (!tu_value_ok(out_dt, (float)got[i], oref[i], 2e-6 + 2e-6 * fabs(oref[i]))) {
            if (bad++ < 5)
                print_error("o[%zu] = %.9g, expected %.9g\n", i, got[i], oref[i]);
        }
    for (size_t i = 0; i < rows && with_lse; i++) {
        int ok = isinf(lref[i]) ? lgot[i] == lref[i]
                                : fabs(lgot[i] - lref[i]) <= 2e-6 + 2e-6 * fabs(lref[i]);
        if (!ok && bad++ < 10)
            print_error("lse[%zu] = %.9g, expected %.9g\n", i, lgot[i], lref[i]);
    }
    if (!with_lse) { /* lse not requested: its buffer stays poisoned */
        float *limg = malloc(out.ln * 4);
        assert_non_null(limg);
        assert_int_equal(flashcl_buffer_read(out.lb, 0, limg, out.ln * 4), FLASHCL_SUCCESS);
        for (size_t i = 0; i < out.ln; i++)
            if (!tu_is_poison(FLASHCL_F32, limg, i))
                bad++;
        free(limg);
    }
    if (bad)
        fail_msg("synthetic merge of %d %s parts into %s (lse %d): %zu wrong", nparts,
                 host_ref_dtype_name(in_dt), host_ref_dtype_name(out_dt), with_lse, bad);
    for (int p = 0; p < nparts; p++) {
        free_part(&parts[p]);
        free(of[p]), free(lf[p]);
    }
    free_part(&out);
    free(parts), free(o_parts), free(lse_parts), free(of), free(lf);
    free(oref), free(lref), free(got), free(lgot);
}

static void test_merge_synthetic(void **state)
{
    (void)state;
    static const int counts[] = {1, 2, 3, 4, 5, 7, 8, 13};
    uint64_t seed = tu_base_seed() + 900;
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
        for (int dt = 0; dt < 3; dt++)
            check_synthetic(counts[i], (flashcl_dtype)dt, (flashcl_dtype)((dt + i) % 3),
                            (int)((i + (size_t)dt) % 4 != 3), seed++);
}

/* More parts than a CUDA merge block has threads (256): the merge walks them in chunks. */
static void test_merge_many_parts(void **state)
{
    (void)state;
    uint64_t seed = tu_base_seed() + 950;
    check_synthetic(300, FLASHCL_F32, FLASHCL_F32, 1, seed);
    check_synthetic(257, FLASHCL_BF16, FLASHCL_F16, 0, seed + 1);
}

int main(void)
{
    g_ctx = tu_context_or_skip();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_merge_of_forward_parts),
        cmocka_unit_test(test_merge_synthetic),
        cmocka_unit_test(test_merge_many_parts),
    };
    int failures = cmocka_run_group_tests(tests, NULL, NULL);
    flashcl_context_destroy(g_ctx);
    return tu_exit_code(failures);
}
