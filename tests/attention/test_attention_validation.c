/* Every argument rule of flashcl_attention_forward and flashcl_attention_merge
 * (src/api_attention.c and the view rules of src/validate.c): each broken argument must return
 * FLASHCL_INVALID_ARGUMENT (head_dim over 256: FLASHCL_UNSUPPORTED) with a message, and leave
 * every output buffer exactly as it was (they are poisoned before each call). */
#include "attention_check.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static flashcl_context *g_ctx;

enum { B = 2, SQ = 5, SK = 7, HQ = 4, HKV = 2, D = 8 };

/* One valid problem: q, k, v, o, lse in their own buffers (o and lse poisoned), and a spare
 * buffer for views that must overlap or belong elsewhere. */
typedef struct fixture {
    flashcl_buffer *qb, *kb, *vb, *ob, *lb;
    flashcl_tensor q, k, v, o, lse;
    flashcl_attention_params params;
    unsigned char o_img[B * SQ * HQ * 512 * 4];
    float l_img[B * HQ * SQ + 8];
} fixture;

static flashcl_tensor t4(flashcl_buffer *b, int64_t s0, int64_t s1, int64_t s2, int64_t s3)
{
    flashcl_tensor t;
    memset(&t, 0, sizeof t);
    t.buffer = b;
    t.dtype = FLASHCL_F32;
    t.ndim = 4;
    t.shape[0] = s0, t.shape[1] = s1, t.shape[2] = s2, t.shape[3] = s3;
    t.strides[3] = 1, t.strides[2] = s3, t.strides[1] = s2 * s3, t.strides[0] = s1 * s2 * s3;
    return t;
}

static fixture *fixture_new(void)
{
    static fixture f;
    float in[B * SK * HQ * 512];
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++)
        in[i] = (float)((i % 13) + 1) * 0.1f;
    f.qb = ta_buffer(g_ctx, in, sizeof in);
    f.kb = ta_buffer(g_ctx, in, sizeof in);
    f.vb = ta_buffer(g_ctx, in, sizeof in);
    tu_poison(f.o_img, sizeof f.o_img, FLASHCL_F32);
    tu_poison(f.l_img, sizeof f.l_img, FLASHCL_F32);
    f.ob = ta_buffer(g_ctx, f.o_img, sizeof f.o_img);
    f.lb = ta_buffer(g_ctx, f.l_img, sizeof f.l_img);
    f.q = t4(f.qb, B, SQ, HQ, D);
    f.k = t4(f.kb, B, SK, HKV, D);
    f.v = t4(f.vb, B, SK, HKV, D);
    f.o = t4(f.ob, B, SQ, HQ, D);
    memset(&f.lse, 0, sizeof f.lse);
    f.lse.buffer = f.lb;
    f.lse.dtype = FLASHCL_F32;
    f.lse.ndim = 3;
    f.lse.shape[0] = B, f.lse.shape[1] = HQ, f.lse.shape[2] = SQ;
    f.lse.strides[0] = HQ * SQ, f.lse.strides[1] = SQ, f.lse.strides[2] = 1;
    f.params = ta_default_params();
    return &f;
}

static void fixture_free(fixture *f)
{
    flashcl_buffer_destroy(f->qb), flashcl_buffer_destroy(f->kb), flashcl_buffer_destroy(f->vb);
    flashcl_buffer_destroy(f->ob), flashcl_buffer_destroy(f->lb);
}

/* The outputs hold exactly what they held before the call. */
static void assert_untouched(const fixture *f, const char *what)
{
    static unsigned char o_now[sizeof f->o_img];
    static float l_now[sizeof f->l_img / sizeof(float)];
    assert_int_equal(flashcl_buffer_read(f->ob, 0, o_now, sizeof o_now), FLASHCL_SUCCESS);
    assert_int_equal(flashcl_buffer_read(f->lb, 0, l_now, sizeof l_now), FLASHCL_SUCCESS);
    if (memcmp(o_now, f->o_img, sizeof o_now) || memcmp(l_now, f->l_img, sizeof l_now))
        fail_msg("%s: an output changed", what);
}

static void expect(const fixture *f, flashcl_status got, flashcl_status want, const char *what)
{
    if (got != want)
        fail_msg("%s: got %s (%s), expected %s", what, flashcl_status_string(got),
                 flashcl_last_error(), flashcl_status_string(want));
    if (!*flashcl_last_error())
        fail_msg("%s: no message", what);
    assert_untouched(f, what);
}

#define FORWARD(f, p, q, k, v, o, l) flashcl_attention_forward(g_ctx, p, q, k, v, o, l)
/* Runs forward with a copy of the fixture's tensors after `mutate`, expecting `want`. */
#define CASE(want, what, mutate)                                                               \
    do {                                                                                       \
        flashcl_tensor q = f->q, k = f->k, v = f->v, o = f->o, lse = f->lse;                   \
        flashcl_attention_params p = f->params;                                                \
        flashcl_tensor *lp = &lse;                                                             \
        mutate;                                                                                \
        expect(f, FORWARD(f, &p, &q, &k, &v, &o, lp), want, what);                            \
        (void)lp;                                                                              \
    } while (0)

static void test_forward_rules(void **state)
{
    (void)state;
    fixture *f = fixture_new();
    const flashcl_status INV = FLASHCL_INVALID_ARGUMENT;
    /* the valid baseline runs */
    {
        flashcl_tensor q = f->q, k = f->k, v = f->v, o = f->o, lse = f->lse;
        assert_int_equal(flashcl_attention_forward(g_ctx, &f->params, &q, &k, &v, &o, &lse),
                         FLASHCL_SUCCESS);
        assert_int_equal(flashcl_buffer_read(f->ob, 0, f->o_img, sizeof f->o_img), FLASHCL_SUCCESS);
        assert_int_equal(flashcl_buffer_read(f->lb, 0, f->l_img, sizeof f->l_img), FLASHCL_SUCCESS);
    }
    expect(f, flashcl_attention_forward(NULL, NULL, &f->q, &f->k, &f->v, &f->o, NULL), INV,
           "ctx NULL");
    expect(f, FORWARD(f, NULL, NULL, &f->k, &f->v, &f->o, NULL), INV, "q NULL");
    expect(f, FORWARD(f, NULL, &f->q, NULL, &f->v, &f->o, NULL), INV, "k NULL");
    expect(f, FORWARD(f, NULL, &f->q, &f->k, NULL, &f->o, NULL), INV, "v NULL");
    expect(f, FORWARD(f, NULL, &f->q, &f->k, &f->v, NULL, NULL), INV, "o NULL");
    /* views */
    CASE(INV, "q buffer NULL", q.buffer = NULL);
    CASE(INV, "k bad dtype", k.dtype = (flashcl_dtype)7);
    CASE(INV, "v ndim 3", v.ndim = 3);
    CASE(INV, "o shape 0", o.shape[1] = 0);
    CASE(INV, "q negative shape", q.shape[0] = -1);
    CASE(INV, "k last stride 2", k.strides[3] = 2);
    CASE(INV, "v negative stride", v.strides[1] = -1);
    CASE(INV, "q misaligned offset", q.offset = 2);
    CASE(INV, "k past its buffer", k.offset = flashcl_buffer_size(f->kb) - 4);
    CASE(INV, "o past its buffer", o.strides[0] = 1 << 20);
    CASE(INV, "q extent overflows", q.strides[0] = INT64_MAX / 2);
    /* dtypes and shapes */
    CASE(INV, "k dtype differs", k.dtype = FLASHCL_F16);
    CASE(INV, "v dtype differs", v.dtype = FLASHCL_BF16);
    CASE(INV, "o dtype differs", o.dtype = FLASHCL_F16);
    CASE(INV, "k batch differs", k.shape[0] = 1);
    CASE(INV, "k head_dim differs", k.shape[3] = D / 2);
    CASE(INV, "v seqlen differs from k", v.shape[1] = SK - 1);
    CASE(INV, "v heads differ from k", v.shape[2] = 1);
    CASE(INV, "o seqlen differs from q", o.shape[1] = SQ - 1);
    CASE(INV, "o heads differ from q", o.shape[2] = HQ / 2);
    CASE(INV, "heads_q not a multiple of heads_kv", k.shape[2] = 3; v.shape[2] = 3;
         k.strides[1] = v.strides[1] = 3 * D; k.strides[0] = v.strides[0] = SK * 3 * D);
    /* outputs: injective, apart from the inputs and from each other */
    CASE(INV, "o not injective", o.strides[2] = 0);
    CASE(INV, "o overlaps q", o.buffer = f->qb);
    CASE(INV, "o overlaps k", o.buffer = f->kb);
    CASE(INV, "o overlaps v", o.buffer = f->vb);
    CASE(INV, "o overlaps lse", lse.buffer = f->ob);
    CASE(INV, "lse overlaps q", lse.buffer = f->qb);
    CASE(INV, "lse overlaps k", lse.buffer = f->kb);
    CASE(INV, "lse overlaps v", lse.buffer = f->vb);
    CASE(INV, "lse dtype f16", lse.dtype = FLASHCL_F16);
    CASE(INV, "lse ndim 4", lse.ndim = 4);
    CASE(INV, "lse batch", lse.shape[0] = 1);
    CASE(INV, "lse heads", lse.shape[1] = HKV);
    CASE(INV, "lse seqlen", lse.shape[2] = SK);
    CASE(INV, "lse not injective", lse.strides[1] = 0);
    CASE(INV, "lse past its buffer", lse.offset = flashcl_buffer_size(f->lb) - 4);
    /* params */
    CASE(INV, "scale NaN", p.scale = NAN);
    CASE(INV, "scale inf", p.scale = INFINITY);
    CASE(INV, "window_left -2", p.window_left = -2);
    CASE(INV, "window_right -5", p.window_right = -5);
    CASE(INV, "softcap negative", p.softcap = -1.0f);
    CASE(INV, "softcap NaN", p.softcap = NAN);
    CASE(INV, "softcap inf", p.softcap = INFINITY);
    /* a buffer of another context */
    {
        flashcl_context *other = NULL;
        flashcl_buffer *ob = NULL;
        assert_int_equal(tu_context_create(tu_cache_dir(), &other), FLASHCL_SUCCESS);
        assert_int_equal(flashcl_buffer_create(other, flashcl_buffer_size(f->qb), &ob),
                         FLASHCL_SUCCESS);
        CASE(INV, "q of another context", q.buffer = ob);
        flashcl_buffer_destroy(ob);
        flashcl_context_destroy(other);
    }
    fixture_free(f);
}

/* head_dim 512 is valid but no backend runs it: UNSUPPORTED, outputs untouched. */
static void test_head_dim_512(void **state)
{
    (void)state;
    fixture *f = fixture_new();
    flashcl_tensor q = t4(f->qb, B, SQ, HQ, 512), k = t4(f->kb, B, SK, HKV, 512);
    flashcl_tensor v = t4(f->vb, B, SK, HKV, 512), o = t4(f->ob, B, SQ, HQ, 512);
    expect(f, flashcl_attention_forward(g_ctx, NULL, &q, &k, &v, &o, &f->lse),
           FLASHCL_UNSUPPORTED, "head_dim 512");
    fixture_free(f);
}

static void test_merge_rules(void **state)
{
    (void)state;
    fixture *f = fixture_new();
    const flashcl_status INV = FLASHCL_INVALID_ARGUMENT;
    /* two parts: q's buffer as part 0 (o view), k's as part 1; lse parts in v's buffer */
    flashcl_tensor parts[2] = {t4(f->qb, B, SQ, HQ, D), t4(f->kb, B, SQ, HQ, D)};
    flashcl_tensor lparts[2] = {f->lse, f->lse};
    lparts[0].buffer = lparts[1].buffer = f->vb;
    lparts[1].offset = 1024;
#define MERGE(n, op, lp, o, l) flashcl_attention_merge(g_ctx, n, op, lp, o, l)
#define MCASE(what, mutate)                                                                    \
    do {                                                                                       \
        flashcl_tensor op[2] = {parts[0], parts[1]}, lp[2] = {lparts[0], lparts[1]};           \
        flashcl_tensor o = f->o, lse = f->lse;                                                 \
        size_t n = 2;                                                                          \
        mutate;                                                                                \
        expect(f, MERGE(n, op, lp, &o, &lse), INV, what);                                      \
    } while (0)
    expect(f, flashcl_attention_merge(NULL, 2, parts, lparts, &f->o, &f->lse), INV, "ctx NULL");
    expect(f, MERGE(2, NULL, lparts, &f->o, &f->lse), INV, "o_parts NULL");
    expect(f, MERGE(2, parts, NULL, &f->o, &f->lse), INV, "lse_parts NULL");
    expect(f, MERGE(2, parts, lparts, NULL, &f->lse), INV, "o NULL");
    MCASE("parts 0", n = 0);
    MCASE("parts 4097", n = 4097);
    MCASE("o not injective", o.strides[1] = 0);
    MCASE("o bad ndim", o.ndim = 2);
    MCASE("lse dtype", lse.dtype = FLASHCL_BF16);
    MCASE("lse shape", lse.shape[2] = 1);
    MCASE("lse not injective", lse.strides[2] = 0);
    MCASE("o overlaps lse", lse.buffer = f->ob);
    MCASE("part shape differs", op[1].shape[3] = D / 2);
    MCASE("part dtypes differ", op[1].dtype = FLASHCL_F16);
    MCASE("part past its buffer", op[1].offset = flashcl_buffer_size(f->kb) - 4);
    MCASE("o overlaps a part", op[1].buffer = f->ob);
    MCASE("lse overlaps a part", op[0].buffer = f->lb);
    MCASE("lse part dtype", lp[1].dtype = FLASHCL_F16);
    MCASE("lse part shape", lp[0].shape[1] = 1);
    MCASE("o overlaps an lse part", lp[1].buffer = f->ob);
    MCASE("lse overlaps an lse part", lp[0].buffer = f->lb);
    /* a valid merge for contrast: o and lse change */
    assert_int_equal(MERGE(2, parts, lparts, &f->o, &f->lse), FLASHCL_SUCCESS);
    fixture_free(f);
}

int main(void)
{
    g_ctx = tu_context_or_skip();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forward_rules),
        cmocka_unit_test(test_head_dim_512),
        cmocka_unit_test(test_merge_rules),
    };
    int failures = cmocka_run_group_tests(tests, NULL, NULL);
    flashcl_context_destroy(g_ctx);
    return tu_exit_code(failures);
}
