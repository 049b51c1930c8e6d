/* flashcl_softmax argument validation: one test per rule. Each fills x's and y's buffers with
 * a pattern, makes the call, expects FLASHCL_INVALID_ARGUMENT with a message that names the
 * argument (a token "x", "y", "ctx", "params"...) and a word about the problem, and reads both
 * buffers back unchanged: a rejected call writes nothing. The valid edge cases next to each
 * rule (exact-fit views, disjoint views in one buffer, in place, params NULL) must succeed, so
 * that validation is not stricter than the API. */
#include "test_util.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static flashcl_context *g_ctx;

enum { ROWS = 4, COLS = 8, BUF_BYTES = 4096 };

static flashcl_buffer *g_xb, *g_yb;       /* 4096 bytes each */
static flashcl_buffer *g_exact;           /* exactly ROWS*COLS f32 */
static unsigned char g_xpat[BUF_BYTES], g_ypat[BUF_BYTES];

static void reset_buffers(void)
{
    /* x holds finite inputs (so a call that runs would produce numbers), y the poison */
    tu_rng rng;
    tu_rng_seed(&rng, 99);
    for (size_t i = 0; i < BUF_BYTES / 4; i++)
        host_ref_store(FLASHCL_F32, g_xpat, i, (float)tu_rng_uniform(&rng, -4, 4));
    tu_poison(g_ypat, BUF_BYTES, FLASHCL_F32);
    assert_int_equal(flashcl_buffer_write(g_xb, 0, g_xpat, BUF_BYTES), FLASHCL_SUCCESS);
    assert_int_equal(flashcl_buffer_write(g_yb, 0, g_ypat, BUF_BYTES), FLASHCL_SUCCESS);
    assert_int_equal(flashcl_buffer_write(g_exact, 0, g_xpat, ROWS * COLS * 4),
                     FLASHCL_SUCCESS);
}

static void check_unchanged(const char *what)
{
    unsigned char got[BUF_BYTES];
    assert_int_equal(flashcl_buffer_read(g_yb, 0, got, BUF_BYTES), FLASHCL_SUCCESS);
    if (memcmp(got, g_ypat, BUF_BYTES) != 0)
        fail_msg("%s: rejected, but y's buffer was written", what);
    assert_int_equal(flashcl_buffer_read(g_xb, 0, got, BUF_BYTES), FLASHCL_SUCCESS);
    if (memcmp(got, g_xpat, BUF_BYTES) != 0)
        fail_msg("%s: rejected, but x's buffer was written", what);
    assert_int_equal(flashcl_buffer_read(g_exact, 0, got, ROWS * COLS * 4), FLASHCL_SUCCESS);
    if (memcmp(got, g_xpat, ROWS * COLS * 4) != 0)
        fail_msg("%s: rejected, but a buffer was written", what);
}

/* `tok` appears in `msg` as a token: not inside a longer identifier, case-insensitive. */
static int has_token(const char *msg, const char *tok)
{
    size_t n = strlen(tok);
    for (const char *p = msg; *p; p++) {
        if (strncasecmp(p, tok, n) != 0)
            continue;
        int before_ok = p == msg || !(isalnum((unsigned char)p[-1]) || p[-1] == '_');
        int after_ok = !(isalnum((unsigned char)p[n]) || p[n] == '_');
        if (before_ok && after_ok)
            return 1;
    }
    return 0;
}

static int has_word(const char *msg, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = msg; *p; p++)
        if (strncasecmp(p, word, n) == 0)
            return 1;
    return 0;
}

#define LIST(...) ((const char *const[]){__VA_ARGS__, NULL})

/* One rejected call: status, message (names one of `names` as a token and contains one of
 * `words`), and nothing written. */
static void expect_invalid(const char *what, const flashcl_softmax_params *p,
                           const flashcl_tensor *x, const flashcl_tensor *y,
                           const char *const *names, const char *const *words)
{
    reset_buffers();
    flashcl_status st = flashcl_softmax(g_ctx, p, x, y);
    const char *msg = flashcl_last_error();
    if (st != FLASHCL_INVALID_ARGUMENT)
        fail_msg("%s: got %s (%s), expected INVALID_ARGUMENT", what, flashcl_status_string(st),
                 msg);
    assert_non_null(msg);
    print_message("  %-44s -> \"%s\"\n", what, msg);
    if (!*msg)
        fail_msg("%s: no message", what);
    int named = 0, worded = 0;
    for (size_t i = 0; names[i]; i++)
        named |= has_token(msg, names[i]);
    for (size_t i = 0; words[i]; i++)
        worded |= has_word(msg, words[i]);
    if (!named)
        fail_msg("%s: the message \"%s\" does not name the argument (%s...)", what, msg,
                 names[0]);
    if (!worded)
        fail_msg("%s: the message \"%s\" does not say what is wrong (%s...)", what, msg,
                 words[0]);
    check_unchanged(what);
}

/* The same with another context argument. */
static void expect_invalid_ctx(const char *what, flashcl_context *ctx, const flashcl_tensor *x,
                               const flashcl_tensor *y, const char *const *names,
                               const char *const *words)
{
    flashcl_context *saved = g_ctx;
    g_ctx = ctx;
    expect_invalid(what, NULL, x, y, names, words);
    g_ctx = saved;
}

static void expect_ok(const char *what, const flashcl_softmax_params *p,
                      const flashcl_tensor *x, const flashcl_tensor *y)
{
    reset_buffers();
    flashcl_status st = flashcl_softmax(g_ctx, p, x, y);
    if (st != FLASHCL_SUCCESS)
        fail_msg("%s: valid call rejected: %s: %s", what, flashcl_status_string(st),
                 flashcl_last_error());
    assert_int_equal(flashcl_finish(g_ctx), FLASHCL_SUCCESS);
}

#define X_NAMES LIST("x", "input")
#define Y_NAMES LIST("y", "output")
#define XY_NAMES LIST("x", "y", "input", "output")
#define W_NULL LIST("null", "missing")
#define W_SHAPE LIST("shape", "rows", "cols", "column", "positive", "> 0", "empty", "zero", "size")
#define W_STRIDE LIST("stride", "contiguous")
#define W_EXTENT LIST("buffer", "past", "bound", "exceed", "fit", "large", "end", "range", \
                      "overflow", "size")

static void test_null_pointers(void **state)
{
    (void)state;
    flashcl_tensor x = tu_view2d(g_xb, FLASHCL_F32, ROWS, COLS);
    flashcl_tensor y = tu_view2d(g_yb, FLASHCL_F32, ROWS, COLS);
    expect_invalid_ctx("NULL ctx", NULL, &x, &y, LIST("ctx", "context"), W_NULL);
    expect_invalid("NULL x", NULL, NULL, &y, X_NAMES, W_NULL);
    expect_invalid("NULL y", NULL, &x, NULL, Y_NAMES, W_NULL);
    flashcl_tensor xn = x, yn = y;
    xn.buffer = NULL;
    yn.buffer = NULL;
    expect_invalid("x.buffer NULL", NULL, &xn, &y, X_NAMES, LIST("buffer"));
    expect_invalid("y.buffer NULL", NULL, &x, &yn, Y_NAMES, LIST("buffer"));
}

static void test_nonpositive_sizes(void **state)
{
    (void)state;
    const int64_t bad[] = {0, -1, INT64_MIN};
    for (size_t i = 0; i < 3; i++) {
        char what[64];
        flashcl_tensor x = tu_view2d(g_xb, FLASHCL_F32, bad[i], COLS);
        flashcl_tensor y = tu_view2d(g_yb, FLASHCL_F32, bad[i], COLS);
        snprintf(what, sizeof what, "rows = %lld", (long long)bad[i]);
        expect_invalid(what, NULL, &x, &y, XY_NAMES, W_SHAPE);
        x = tu_view2d(g_xb, FLASHCL_F32, ROWS, bad[i]);
        y = tu_view2d(g_yb, FLASHCL_F32, ROWS, bad[i]);
        x.strides[0] = y.strides[0] = COLS;
        snprintf(what, sizeof what, "cols = %lld", (long long)bad[i]);
        expect_invalid(what, NULL, &x, &y, XY_NAMES, W_SHAPE);
    }
}

static void test_ndim(void **state)
{
    (void)state;
    const int bad[] = {0, 1, 3, 4, 5, -1};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char what[64];
        flashcl_tensor x = tu_view2d(g_xb, FLASHCL_F32, ROWS, COLS);
        flashcl_tensor y = tu_view2d(g_yb, FLASHCL_F32, ROWS, COLS);
        x.shape[2] = x.shape[3] = 1;
        x.strides[2] = x.strides[3] = 1;
        x.ndim = bad[i];
        snprintf(what, sizeof what, "x.ndim = %d", bad[i]);
        expect_invalid(what, NULL, &x, &y, X_NAMES, LIST("ndim", "dimension", "2-d", "2d", "rank"));
        x.ndim = 2;
        y.ndim = bad[i];
        snprintf(what, sizeof what, "y.ndim = %d", bad[i]);
        expect_invalid(what, NULL, &x, &y, Y_NAMES, LIST("ndim", "dimension", "2-d", "2d", "rank"));
    }
}

static void test_shape_mismatch(void **state)
{
    (void)state;
    flashcl_tensor x = tu_view2d(g_xb, FLASHCL_F32, ROWS, COLS);
    flashcl_tensor y = tu_view2d(g_yb, FLASHCL_F32, ROWS, COLS - 1);
    y.strides[0] = COLS;
    expect_invalid("y cols != x cols", NULL, &x, &y, XY_NAMES,
                   LIST("shape", "match", "differ", "same"));
    y = tu_view2d(g_yb, FLASHCL_F32, ROWS - 1, COLS);
    expect_invalid("y rows != x rows", NULL, &x, &y, XY_NAMES,
                   LIST("shape", "match", "differ", "same"));
    y = tu_view2d(g_yb, FLASHCL_F32, COLS, ROWS); /* transposed */
    expect_invalid("y transposed", NULL, &x, &y, XY_NAMES,
                   LIST("shape", "match", "differ", "same"));
}

static void test_strides(void **state)
{
    (void)state;
    const int64_t bad_last[] = {0, 2, -1};
    for (size_t i = 0; i < 3; i++) {
        char what[64];
        flashcl_tensor x = tu_view2d(g_xb, FLASHCL_F32, ROWS, COLS);
        flashcl_tensor y = tu_view2d(g_yb, FLASHCL_F32, ROWS, COLS);
        x.strides[1] = bad_last[i];
        snprintf(what, sizeof what, "x.strides[1] = %lld", (long long)bad_last[i]);
        expect_invalid(what, NULL, &x, &y, X_NAMES, W_STRIDE);
        x.strides[1] = 1;
        y.strides[1] = bad_last[i];
        snprintf(what, sizeof what, "y.strides[1] = %lld", (long long)bad_last[i]);
        expect_invalid(what, NULL, &x, &y, Y_NAMES, W_STRIDE);
    }
    const int64_t bad_row[] = {COLS - 1, 1, 0, -COLS};
    for (size_t i = 0; i < 4; i++) {
        char what[64];
        flashcl_tensor x = tu_view2d(g_xb, FLASHCL_F32, ROWS, COLS);
        flashcl_tensor y = tu_view2d(g_yb, FLASHCL_F32, ROWS, COLS);
        x.strides[0] = bad_row[i];
        snprintf(what, sizeof what, "x.strides[0] = %lld < cols", (long long)bad_row[i]);
        expect_invalid(what, NULL, &x, &y, X_NAMES, W_STRIDE);
        x.strides[0] = COLS;
        y.strides[0] = bad_row[i];
        snprintf(what, sizeof what, "y.strides[0] = %lld < cols", (long long)bad_row[i]);
        expect_invalid(what, NULL, &x, &y, Y_NAMES, W_STRIDE);
    }
    /* valid: different row strides for x and y, large strides */
    flashcl_tensor x = tu_view2d(g_xb, FLASHCL_F32, ROWS, COLS);
    flashcl_tensor y = tu_view2d(g_yb, FLASHCL_F32, ROWS, COLS);
    x.strides[0] = COLS + 3;
    y.strides[0] = 3 * COLS + 1;
    expect_ok("different row strides", NULL, &x, &y);
}

static void test_offsets(void **state)
{
    (void)state;
    flashcl_tensor x = tu_view2d(g_xb, FLASHCL_F32, ROWS, COLS);
    flashcl_tensor y = tu_view2d(g_yb, FLASHCL_F32, ROWS, COLS);
    const size_t bad32[] = {1, 2, 3, 6};
    for (size_t i = 0; i < 4; i++) {
        char what[64];
        x.offset = bad32[i];
        snprintf(what, sizeof what, "f32 x.offset = %zu", bad32[i]);
        expect_invalid(what, NULL, &x, &y, X_NAMES, LIST("offset", "align", "multiple"));
        x.offset = 0;
        y.offset = bad32[i];
        snprintf(what, sizeof what, "f32 y.offset = %zu", bad32[i]);
        expect_invalid(what, NULL, &x, &y, Y_NAMES, LIST("offset", "align", "multiple"));
        y.offset = 0;
    }
    flashcl_tensor yh = tu_view2d(g_yb, FLASHCL_F16, ROWS, COLS);
    yh.offset = 3;
    expect_invalid("f16 y.offset = 3", NULL, &x, &yh, Y_NAMES,
                   LIST("offset", "align", "multiple"));
    flashcl_tensor xb = tu_view2d(g_xb, FLASHCL_BF16, ROWS, COLS);
    xb.offset = 1;
    expect_invalid("bf16 x.offset = 1", NULL, &xb, &y, X_NAMES,
                   LIST("offset", "align", "multiple"));
    /* valid: offsets that are multiples of the element size but of nothing larger */
    xb.offset = 2;
    yh.offset = 6;
    expect_ok("f16/bf16 offsets 2 and 6", NULL, &xb, &yh);
    x.offset = 4;
    y.offset = 12;
    expect_ok("f32 offsets 4 and 12", NULL, &x, &y);
}

static void test_view_past_buffer(void **state)
{
    (void)state;
    /* g_exact holds exactly ROWS x COLS f32 */
    flashcl_tensor x = tu_view2d(g_exact, FLASHCL_F32, ROWS, COLS);
    flashcl_tensor y = tu_view2d(g_yb, FLASHCL_F32, ROWS, COLS);
    expect_ok("x fits its buffer exactly", NULL, &x, &y);
    flashcl_tensor yx = tu_view2d(g_exact, FLASHCL_F32, ROWS, COLS);
    flashcl_tensor xx = tu_view2d(g_xb, FLASHCL_F32, ROWS, COLS);
    expect_ok("y fits its buffer exactly", NULL, &xx, &yx);
    /* the last row needs only cols elements, not a whole stride */
    flashcl_tensor x2 = tu_view2d(g_exact, FLASHCL_F32, 2, COLS);
    flashcl_tensor y2 = tu_view2d(g_yb, FLASHCL_F32, 2, COLS);
    x2.strides[0] = ROWS * COLS - COLS;
    expect_ok("stride reaching exactly the end", NULL, &x2, &y2);

    x.offset = 4;
    expect_invalid("x one element past its buffer (offset)", NULL, &x, &y, X_NAMES, W_EXTENT);
    x.offset = 0;
    x.shape[0] = ROWS + 1;
    y.shape[0] = ROWS + 1;
    expect_invalid("x one row past its buffer", NULL, &x, &y, X_NAMES, W_EXTENT);
    x = tu_view2d(g_exact, FLASHCL_F32, ROWS, COLS);
    y = tu_view2d(g_yb, FLASHCL_F32, ROWS, COLS);
    x.strides[0] = COLS + 1;
    expect_invalid("x stride runs past its buffer", NULL, &x, &y, X_NAMES, W_EXTENT);
    x = tu_view2d(g_exact, FLASHCL_F16, ROWS, 2 * COLS + 1);
    y = tu_view2d(g_yb, FLASHCL_F16, ROWS, 2 * COLS + 1);
    expect_invalid("f16 x past its buffer by one element", NULL, &x, &y, X_NAMES, W_EXTENT);
    x = tu_view2d(g_xb, FLASHCL_F32, ROWS, COLS);
    y = tu_view2d(g_exact, FLASHCL_F32, ROWS, COLS);
    y.offset = ROWS * COLS * 4;
    expect_invalid("y starts at its buffer's end", NULL, &x, &y, Y_NAMES, W_EXTENT);
    y.offset = (size_t)1 << 40;
    expect_invalid("y offset far past its buffer", NULL, &x, &y, Y_NAMES, W_EXTENT);
}

static void test_overflowing_sizes(void **state)
{
    (void)state;
    const int64_t big = (int64_t)1 << 62;
    struct {
        int64_t rows, cols, stride;
        size_t offset;
    } cases[] = {
        {1, big, big, 0},
        {2, big, big, 0},
        {big, 4, 4, 0},
        {4, 4, big, 0},
        {INT64_MAX, 1, 1, 0},
        {3, INT64_MAX, INT64_MAX, 0},
        {(int64_t)1 << 31, (int64_t)1 << 31, (int64_t)1 << 31, 0},
        {ROWS, COLS, COLS, SIZE_MAX - 3},             /* offset + bytes wraps */
        {ROWS, COLS, COLS, SIZE_MAX - 4095},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char what[128];
        flashcl_tensor x = tu_view2d(g_xb, FLASHCL_F32, cases[i].rows, cases[i].cols);
        flashcl_tensor y = tu_view2d(g_yb, FLASHCL_F32, cases[i].rows, cases[i].cols);
        x.strides[0] = y.strides[0] = cases[i].stride;
        x.offset = cases[i].offset;
        snprintf(what, sizeof what, "x [%lld, %lld] stride %lld offset %zu",
                 (long long)cases[i].rows, (long long)cases[i].cols,
                 (long long)cases[i].stride, cases[i].offset);
        expect_invalid(what, NULL, &x, &y, XY_NAMES, W_EXTENT);
        /* the same on y only (x valid when it fits) */
        if (cases[i].offset) {
            x.offset = 0;
            y.offset = cases[i].offset;
            snprintf(what, sizeof what, "y offset %zu", cases[i].offset);
            expect_invalid(what, NULL, &x, &y, Y_NAMES, W_EXTENT);
        }
    }
}

static void test_dtype(void **state)
{
    (void)state;
    const int bad[] = {7, 3, -1};
    for (size_t i = 0; i < 3; i++) {
        char what[64];
        flashcl_tensor x = tu_view2d(g_xb, FLASHCL_F32, ROWS, COLS);
        flashcl_tensor y = tu_view2d(g_yb, FLASHCL_F32, ROWS, COLS);
        x.dtype = (flashcl_dtype)bad[i];
        snprintf(what, sizeof what, "x.dtype = %d", bad[i]);
        expect_invalid(what, NULL, &x, &y, X_NAMES, LIST("dtype", "type"));
        x.dtype = FLASHCL_F32;
        y.dtype = (flashcl_dtype)bad[i];
        snprintf(what, sizeof what, "y.dtype = %d", bad[i]);
        expect_invalid(what, NULL, &x, &y, Y_NAMES, LIST("dtype", "type"));
    }
}

static void test_overlap(void **state)
{
    (void)state;
    /* x and y in one buffer, overlapping without being the same view */
    flashcl_tensor x = tu_view2d(g_xb, FLASHCL_F32, ROWS, COLS);
    flashcl_tensor y = tu_view2d(g_xb, FLASHCL_F32, ROWS, COLS);
    const char *const *w = LIST("overlap", "alias", "same");
    y.offset = 4;
    expect_invalid("y shifted by one element", NULL, &x, &y, XY_NAMES, w);
    y.offset = COLS * 4;
    expect_invalid("y shifted by one row", NULL, &x, &y, XY_NAMES, w);
    y.offset = (ROWS - 1) * COLS * 4 + 4 * (COLS - 1); /* only the last element shared */
    expect_invalid("y sharing x's last element", NULL, &x, &y, XY_NAMES, w);
    y.offset = 0;
    y.strides[0] = COLS + 1;
    expect_invalid("same start, different stride", NULL, &x, &y, XY_NAMES, w);
    y = tu_view2d(g_xb, FLASHCL_F32, ROWS, COLS);
    x.offset = 8 * 4;
    expect_invalid("x inside y", NULL, &x, &y, XY_NAMES, w);

    /* the same bytes seen with another dtype is not "the same view" */
    x = tu_view2d(g_xb, FLASHCL_F32, ROWS, COLS);
    flashcl_tensor yh = tu_view2d(g_xb, FLASHCL_F16, ROWS, COLS);
    expect_invalid("same buffer/offset/shape, f32 -> f16", NULL, &x, &yh, XY_NAMES,
                   LIST("dtype", "overlap", "in place", "in-place", "alias", "same"));
    flashcl_tensor xb = tu_view2d(g_xb, FLASHCL_BF16, ROWS, COLS);
    flashcl_tensor yf = tu_view2d(g_xb, FLASHCL_F16, ROWS, COLS);
    expect_invalid("same buffer/offset/shape, bf16 -> f16", NULL, &xb, &yf, XY_NAMES,
                   LIST("dtype", "overlap", "in place", "in-place", "alias", "same"));

    /* valid: disjoint views of one buffer, and a view with itself (in place) */
    x = tu_view2d(g_xb, FLASHCL_F32, ROWS, COLS);
    y = tu_view2d(g_xb, FLASHCL_F32, ROWS, COLS);
    y.offset = ROWS * COLS * 4;
    expect_ok("disjoint views in one buffer", NULL, &x, &y);
    expect_ok("in place", NULL, &x, &x);
    flashcl_tensor x_copy = x; /* a different descriptor describing the same view */
    expect_ok("in place (two equal descriptors)", NULL, &x, &x_copy);
}

static void test_params(void **state)
{
    (void)state;
    flashcl_tensor x = tu_view2d(g_xb, FLASHCL_F32, ROWS, COLS);
    flashcl_tensor y = tu_view2d(g_yb, FLASHCL_F32, ROWS, COLS);
    flashcl_softmax_params p;
    memset(&p, 0, sizeof p);
    p.variant = (flashcl_softmax_variant)99;
    expect_invalid("params.variant = 99", &p, &x, &y, LIST("variant", "params"),
                   LIST("variant", "unknown", "invalid"));
    p.variant = (flashcl_softmax_variant)-1;
    expect_invalid("params.variant = -1", &p, &x, &y, LIST("variant", "params"),
                   LIST("variant", "unknown", "invalid"));

    memset(&p, 0, sizeof p);
    const float bad_scales[3] = {NAN, INFINITY, -INFINITY};
    for (int i = 0; i < 3; i++) {
        char what[64];
        p.scale = bad_scales[i];
        snprintf(what, sizeof what, "params.scale = %g", (double)bad_scales[i]);
        expect_invalid(what, &p, &x, &y, LIST("scale", "params"),
                       LIST("finite", "nan", "inf", "invalid"));
    }

    /* params NULL: scale 1, plain softmax */
    tu_softmax_case c;
    memset(&c, 0, sizeof c);
    c.xt = c.yt = FLASHCL_F32;
    c.rows = 7;
    c.cols = 100;
    c.params_null = 1;
    tu_softmax_check(g_ctx, &c, tu_base_seed(), NULL);
    c.xt = FLASHCL_BF16;
    c.yt = FLASHCL_F16;
    c.special = 1;
    c.rows = 9;
    tu_softmax_check(g_ctx, &c, tu_base_seed() + 1, NULL);
}

static void test_foreign_buffer(void **state)
{
    (void)state;
    /* a buffer of another context */
    flashcl_context *other = NULL;
    assert_int_equal(tu_context_create(tu_cache_dir(), &other), FLASHCL_SUCCESS);
    flashcl_buffer *ob = NULL;
    assert_int_equal(flashcl_buffer_create(other, BUF_BYTES, &ob), FLASHCL_SUCCESS);
    unsigned char pat[BUF_BYTES];
    tu_poison(pat, BUF_BYTES, FLASHCL_F32);
    assert_int_equal(flashcl_buffer_write(ob, 0, pat, BUF_BYTES), FLASHCL_SUCCESS);
    flashcl_tensor x = tu_view2d(g_xb, FLASHCL_F32, ROWS, COLS);
    flashcl_tensor y = tu_view2d(ob, FLASHCL_F32, ROWS, COLS);
    expect_invalid("y.buffer of another context", NULL, &x, &y, Y_NAMES,
                   LIST("context", "buffer"));
    unsigned char got[BUF_BYTES];
    assert_int_equal(flashcl_buffer_read(ob, 0, got, BUF_BYTES), FLASHCL_SUCCESS);
    assert_memory_equal(got, pat, BUF_BYTES);
    flashcl_tensor xo = tu_view2d(ob, FLASHCL_F32, ROWS, COLS);
    y = tu_view2d(g_yb, FLASHCL_F32, ROWS, COLS);
    expect_invalid("x.buffer of another context", NULL, &xo, &y, X_NAMES,
                   LIST("context", "buffer"));
    flashcl_buffer_destroy(ob);
    flashcl_context_destroy(other);
}

static void test_unused_dims_ignored(void **state)
{
    (void)state;
    flashcl_tensor x = tu_view2d(g_xb, FLASHCL_F32, ROWS, COLS);
    flashcl_tensor y = tu_view2d(g_yb, FLASHCL_F32, ROWS, COLS);
    x.shape[2] = x.shape[3] = -5;
    x.strides[2] = x.strides[3] = 0;
    y.shape[2] = 1 << 20;
    y.strides[3] = -1;
    expect_ok("shape[2..3] / strides[2..3] of a 2-D view ignored", NULL, &x, &y);
}

int main(void)
{
    g_ctx = tu_context_or_skip();
    if (flashcl_buffer_create(g_ctx, BUF_BYTES, &g_xb) != FLASHCL_SUCCESS ||
        flashcl_buffer_create(g_ctx, BUF_BYTES, &g_yb) != FLASHCL_SUCCESS ||
        flashcl_buffer_create(g_ctx, ROWS * COLS * 4, &g_exact) != FLASHCL_SUCCESS) {
        fprintf(stderr, "buffer_create: %s\n", flashcl_last_error());
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_null_pointers),
        cmocka_unit_test(test_nonpositive_sizes),
        cmocka_unit_test(test_ndim),
        cmocka_unit_test(test_shape_mismatch),
        cmocka_unit_test(test_strides),
        cmocka_unit_test(test_offsets),
        cmocka_unit_test(test_view_past_buffer),
        cmocka_unit_test(test_overflowing_sizes),
        cmocka_unit_test(test_dtype),
        cmocka_unit_test(test_overlap),
        cmocka_unit_test(test_params),
        cmocka_unit_test(test_foreign_buffer),
        cmocka_unit_test(test_unused_dims_ignored),
    };
    int failures = cmocka_run_group_tests(tests, NULL, NULL);
    flashcl_context_destroy(g_ctx);
    return tu_exit_code(failures);
}
