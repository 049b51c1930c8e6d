/* host_ref itself: the oracle has to be right before it can judge the kernels.
 * - f16/bf16 conversions: exhaustive round trips, hand-picked rounding cases (ties to even,
 *   overflow, subnormals, NaN), and a brute-force "nearest, ties to even" check on millions of
 *   floats (plus, where the compiler has _Float16, its own conversion as a second oracle);
 * - softmax: torch's special-value semantics on explicit rows, known values, and the three-pass
 *   and online implementations agreeing on random rows. No device needed. */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float ffrom(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* ---- conversions ---------------------------------------------------------------------------- */

static void test_half_roundtrip_exhaustive(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 0x10000u; h++) {
        float f = host_ref_half_to_float((uint16_t)h);
        int is_nan = ((h & 0x7c00u) == 0x7c00u) && (h & 0x3ffu);
        if (is_nan) {
            assert_true(isnan(f));
            assert_true(isnan(host_ref_half_to_float(host_ref_float_to_half(f))));
            continue;
        }
        assert_int_equal(host_ref_float_to_half(f), h);
    }
    /* values of a few encodings */
    assert_true(host_ref_half_to_float(0x3c00) == 1.0f);
    assert_true(host_ref_half_to_float(0xc000) == -2.0f);
    assert_true(host_ref_half_to_float(0x7bff) == 65504.0f);
    assert_true(host_ref_half_to_float(0x0001) == 0x1p-24f);
    assert_true(host_ref_half_to_float(0x03ff) == 1023 * 0x1p-24f);
    assert_true(host_ref_half_to_float(0x0400) == 0x1p-14f);
    assert_true(host_ref_half_to_float(0x7c00) == INFINITY);
    assert_true(host_ref_half_to_float(0xfc00) == -INFINITY);
    assert_true(signbit(host_ref_half_to_float(0x8000)) && host_ref_half_to_float(0x8000) == 0);
}

static void test_half_rounding_cases(void **state)
{
    (void)state;
    struct {
        float f;
        uint16_t h;
    } cases[] = {
        {0.0f, 0x0000},
        {-0.0f, 0x8000},
        {1.0f, 0x3c00},
        {1.0f + 0x1p-11f, 0x3c00},          /* tie between 1 and 1+2^-10: even (1) */
        {1.0f + 3 * 0x1p-11f, 0x3c02},      /* tie between 1+2^-10 and 1+2^-9: even */
        {1.0f + 0x1p-11f + 0x1p-20f, 0x3c01}, /* just above the tie */
        {65504.0f, 0x7bff},
        {65519.99f, 0x7bff},
        {65520.0f, 0x7c00},                 /* tie with 2^16: rounds to even = overflow */
        {1e30f, 0x7c00},
        {-1e30f, 0xfc00},
        {INFINITY, 0x7c00},
        {-INFINITY, 0xfc00},
        {0x1p-24f, 0x0001},                 /* smallest subnormal */
        {0x1p-25f, 0x0000},                 /* tie with 0: even (0) */
        {-0x1p-25f, 0x8000},
        {0x1.000002p-25f, 0x0001},          /* just above the tie */
        {3 * 0x1p-25f, 0x0002},             /* tie between 1 and 2 quanta: even (2) */
        {5 * 0x1p-25f, 0x0002},             /* tie between 2 and 3 quanta: even (2) */
        {1023.5f * 0x1p-24f, 0x0400},       /* tie between the largest subnormal and 2^-14 */
        {0x1p-14f, 0x0400},
        {1e-10f, 0x0000},
        {0.1f, 0x2e66},
        {-1000.7f, 0xe3d1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint16_t h = host_ref_float_to_half(cases[i].f);
        if (h != cases[i].h)
            fail_msg("float_to_half(%a) = 0x%04x, expected 0x%04x", (double)cases[i].f, h,
                     cases[i].h);
    }
    assert_true(isnan(host_ref_half_to_float(host_ref_float_to_half(NAN))));
    assert_true(isnan(host_ref_half_to_float(host_ref_float_to_half(-NAN))));
    /* a signalling NaN whose payload sits only in the low bits must stay NaN, not become inf */
    assert_true(isnan(host_ref_half_to_float(host_ref_float_to_half(ffrom(0x7f800001u)))));
}

/* Value of a 16-bit encoding given by its ordered key (-mag for negative encodings). */
static double val16(int bf16, int32_t key)
{
    uint16_t h = key < 0 ? (uint16_t)(0x8000u | (uint32_t)-key) : (uint16_t)key;
    return bf16 ? host_ref_bf16_to_float(h) : host_ref_half_to_float(h);
}

/* Checks that `h` is the nearest 16-bit value to f (ties to even) by comparing distances to
 * its neighbours in double arithmetic: an independent formulation of the rounding rule. */
static void check_nearest(float f, uint16_t h, int bf16)
{
    double got = bf16 ? host_ref_bf16_to_float(h) : host_ref_half_to_float(h);
    if (isnan(f)) {
        if (!isnan(got))
            fail_msg("NaN %08x -> 0x%04x is not NaN", fbits(f), h);
        return;
    }
    const int32_t inf_mag = bf16 ? 0x7f80 : 0x7c00;
    int32_t mag = h & 0x7fff;
    int32_t k = (h & 0x8000u) ? -mag : mag;
    double v = f;
    if (isnan(got) || ((h & 0x8000u) != 0) != (signbit(f) != 0))
        fail_msg("%a -> 0x%04x: wrong sign or NaN", v, h);
    double maxv = val16(bf16, inf_mag - 1), ulp_max = maxv - val16(bf16, inf_mag - 2);
    if (mag == inf_mag) {
        if (!(fabs(v) >= maxv + ulp_max / 2))
            fail_msg("%a -> inf but below the overflow threshold", v);
        return;
    }
    double lo = val16(bf16, k - 1), hi = val16(bf16, k + 1);
    if (isinf(hi))
        hi = maxv + ulp_max; /* the next value if the exponent went on */
    if (isinf(lo))
        lo = -maxv - ulp_max;
    double dg = fabs(v - got), dlo = fabs(v - lo), dhi = fabs(v - hi);
    if (dg > dlo || dg > dhi)
        fail_msg("%a -> 0x%04x (%a) is not the nearest (neighbours %a, %a)", v, h, got, lo, hi);
    if ((dg == dlo || dg == dhi) && (mag & 1))
        fail_msg("%a -> 0x%04x: a tie not rounded to even", v, h);
}

static void test_half_nearest_bruteforce(void **state)
{
    (void)state;
    tu_rng rng;
    tu_rng_seed(&rng, tu_base_seed() ^ 0x16);
    /* every float with a stride that visits all exponents and many mantissas */
    for (uint64_t u = 0; u <= 0xffffffffull; u += 4093) {
        float f = ffrom((uint32_t)u);
        check_nearest(f, host_ref_float_to_half(f), 0);
    }
    /* dense around the interesting regions: subnormal, normal boundary, overflow, ties */
    for (int i = 0; i < 2000000; i++) {
        uint32_t u = (uint32_t)tu_rng_next(&rng);
        switch (i % 4) {
        case 0: u = 0x33000000u + (u % 0x05800000u); break; /* 2^-25 .. 2^-14 */
        case 1: u = 0x477f0000u + (u % 0x20000u); break;    /* around 65504 .. 65536 */
        case 2: u = (u & 0xffffe000u) | 0x1000u; break;     /* exact ties */
        default: break;
        }
        if (tu_rng_next(&rng) & 1)
            u |= 0x80000000u;
        float f = ffrom(u);
        check_nearest(f, host_ref_float_to_half(f), 0);
    }
#if defined(__FLT16_MAX__)
    /* the compiler's own conversion as a second, independent oracle */
    for (uint64_t u = 0; u <= 0xffffffffull; u += 997) {
        float f = ffrom((uint32_t)u);
        volatile _Float16 c = (_Float16)f;
        _Float16 cc = c;
        uint16_t ch;
        memcpy(&ch, &cc, 2);
        uint16_t h = host_ref_float_to_half(f);
        if (isnan(f))
            assert_true(isnan(host_ref_half_to_float(h)));
        else if (h != ch)
            fail_msg("float_to_half(%a) = 0x%04x, _Float16 gives 0x%04x", (double)f, h, ch);
    }
#endif
}

static void test_bf16(void **state)
{
    (void)state;
    for (uint32_t b = 0; b < 0x10000u; b++) {
        float f = host_ref_bf16_to_float((uint16_t)b);
        assert_int_equal(fbits(f), b << 16);
        if (!isnan(f))
            assert_int_equal(host_ref_float_to_bf16(f), b);
        else
            assert_true(isnan(host_ref_bf16_to_float(host_ref_float_to_bf16(f))));
    }
    struct {
        uint32_t f;
        uint16_t b;
    } cases[] = {
        {0x3f808000u, 0x3f80}, /* tie, even below */
        {0x3f818000u, 0x3f82}, /* tie, even above */
        {0x3f808001u, 0x3f81},
        {0x7f7fffffu, 0x7f80}, /* FLT_MAX overflows to inf */
        {0x7f7f7fffu, 0x7f7f},
        {0x00008000u, 0x0000}, /* subnormal tie to even 0 */
        {0x00018000u, 0x0002},
        {0x0000c000u, 0x0001},
        {0xff800000u, 0xff80},
        {0x80000000u, 0x8000},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        assert_int_equal(host_ref_float_to_bf16(ffrom(cases[i].f)), cases[i].b);
    assert_true(isnan(host_ref_bf16_to_float(host_ref_float_to_bf16(ffrom(0x7f800001u)))));
    assert_true(isnan(host_ref_bf16_to_float(host_ref_float_to_bf16(ffrom(0xff800001u)))));

    tu_rng rng;
    tu_rng_seed(&rng, tu_base_seed() ^ 0xbf);
    for (uint64_t u = 0; u <= 0xffffffffull; u += 4093) {
        float f = ffrom((uint32_t)u);
        check_nearest(f, host_ref_float_to_bf16(f), 1);
    }
    for (int i = 0; i < 1000000; i++) {
        uint32_t u = (uint32_t)tu_rng_next(&rng);
        if (i & 1)
            u = (u & 0xffff0000u) | 0x8000u; /* exact ties */
        float f = ffrom(u);
        check_nearest(f, host_ref_float_to_bf16(f), 1);
    }
}

static void test_load_store(void **state)
{
    (void)state;
    unsigned char buf[64];
    const flashcl_dtype dts[3] = {FLASHCL_F32, FLASHCL_F16, FLASHCL_BF16};
    assert_int_equal(host_ref_dtype_size(FLASHCL_F32), 4);
    assert_int_equal(host_ref_dtype_size(FLASHCL_F16), 2);
    assert_int_equal(host_ref_dtype_size(FLASHCL_BF16), 2);
    for (int d = 0; d < 3; d++) {
        memset(buf, 0x5a, sizeof buf);
        host_ref_store(dts[d], buf, 3, 1.5f);
        assert_true(host_ref_load(dts[d], buf, 3) == 1.5f);
        /* neighbours untouched */
        size_t es = host_ref_dtype_size(dts[d]);
        for (size_t i = 0; i < sizeof buf; i++)
            if (i < 3 * es || i >= 4 * es)
                assert_int_equal(buf[i], 0x5a);
        host_ref_store(dts[d], buf, 0, 0.1f);
        assert_true(host_ref_load(dts[d], buf, 0) == host_ref_round(dts[d], 0.1f));
        host_ref_store(dts[d], buf, 1, -INFINITY);
        assert_true(host_ref_load(dts[d], buf, 1) == -INFINITY);
        host_ref_store(dts[d], buf, 2, NAN);
        assert_true(isnan(host_ref_load(dts[d], buf, 2)));
    }
    assert_true(host_ref_round(FLASHCL_F16, 1e30f) == INFINITY);
    assert_true(host_ref_round(FLASHCL_BF16, 1e30f) != INFINITY);
    assert_string_equal(host_ref_dtype_name(FLASHCL_BF16), "bf16");
}

/* ---- softmax reference ------------------------------------------------------------------------ */

typedef void (*row_fn)(const float *, double *, int64_t, float, int);

static void expect_row(row_fn fn, const float *x, int64_t n, float scale, int log,
                       const double *want)
{
    double y[16];
    fn(x, y, n, scale, log);
    for (int64_t j = 0; j < n; j++) {
        if (isnan(want[j])) {
            if (!isnan(y[j]))
                fail_msg("col %d: got %.17g, want NaN", (int)j, y[j]);
        } else if (isinf(want[j]) || want[j] == 0.0) {
            if (y[j] != want[j])
                fail_msg("col %d: got %.17g, want %.17g exactly", (int)j, y[j], want[j]);
        } else if (fabs(y[j] - want[j]) > 1e-12 * (1 + fabs(want[j]))) {
            fail_msg("col %d: got %.17g, want %.17g", (int)j, y[j], want[j]);
        }
    }
}

static void softmax_semantics(row_fn fn)
{
    const double N = NAN, I = INFINITY;
    {
        float x[3] = {1, 2, 3};
        double w[3] = {0.090030573170380462, 0.24472847105479764, 0.66524095577481774};
        expect_row(fn, x, 3, 1.0f, 0, w);
        expect_row(fn, x, 3, 0.0f, 0, w); /* scale 0 means 1 */
        double wl[3] = {-2.4076059644443806, -1.4076059644443806, -0.40760596444438063};
        expect_row(fn, x, 3, 1.0f, 1, wl);
        double wr[3] = {w[2], w[1], w[0]}; /* scale -1 mirrors */
        expect_row(fn, x, 3, -1.0f, 0, wr);
    }
    {
        float x[1] = {123.0f};
        double one = 1.0, zero = 0.0;
        expect_row(fn, x, 1, 1.0f, 0, &one);
        expect_row(fn, x, 1, 1.0f, 1, &zero);
        float ninf[1] = {-INFINITY};
        double nan1 = N;
        expect_row(fn, ninf, 1, 1.0f, 0, &nan1);
    }
    {
        float x[3] = {-INFINITY, 0.0f, -INFINITY};
        double w[3] = {0.0, 1.0, 0.0}, wl[3] = {-I, 0.0, -I};
        expect_row(fn, x, 3, 1.0f, 0, w);
        expect_row(fn, x, 3, 1.0f, 1, wl);
        double wn[3] = {N, N, N}; /* scale < 0 turns -inf into +inf */
        expect_row(fn, x, 3, -2.0f, 0, wn);
    }
    {
        float all[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
        double w[4] = {N, N, N, N};
        expect_row(fn, all, 4, 1.0f, 0, w);
        expect_row(fn, all, 4, 1.0f, 1, w);
        float nan_row[4] = {1, NAN, 2, -INFINITY};
        expect_row(fn, nan_row, 4, 1.0f, 0, w);
        expect_row(fn, nan_row, 4, 1.0f, 1, w);
        float inf_row[4] = {1, INFINITY, 2, 3};
        expect_row(fn, inf_row, 4, 1.0f, 0, w);
        expect_row(fn, inf_row, 4, 1.0f, 1, w);
    }
    {
        float big[3] = {1e30f, -1e30f, 5e29f};
        double w[3] = {1.0, 0.0, 0.0};
        expect_row(fn, big, 3, 1.0f, 0, w);
        double wl[3] = {0.0, (double)-1e30f - 1e30f, (double)5e29f - (double)1e30f};
        expect_row(fn, big, 3, 1.0f, 1, wl);
        float thousand[2] = {1000.0f, 1000.0f};
        double h[2] = {0.5, 0.5}, hl[2] = {-0.69314718055994531, -0.69314718055994531};
        expect_row(fn, thousand, 2, 1.0f, 0, h);
        expect_row(fn, thousand, 2, 1.0f, 1, hl);
    }
    {
        /* s = x * scale is rounded to float before the double math */
        float x[2] = {0.1f, 0.0f};
        float s = 0.1f * 0.37f;
        double d = exp((double)s) + 1.0;
        double w[2] = {exp((double)s) / d, 1.0 / d};
        expect_row(fn, x, 2, 0.37f, 0, w);
    }
}

static void test_softmax_semantics_three_pass(void **state)
{
    (void)state;
    softmax_semantics(host_ref_softmax_row);
}

static void test_softmax_semantics_online(void **state)
{
    (void)state;
    softmax_semantics(host_ref_softmax_row_online);
}

static void test_softmax_three_pass_vs_online(void **state)
{
    (void)state;
    tu_rng rng;
    tu_rng_seed(&rng, tu_base_seed() ^ 0x0711);
    const int64_t sizes[] = {1, 2, 3, 17, 127, 1000, 4097, 65537};
    const float scales[] = {1.0f, 0.37f, -1.5f};
    float *x = malloc(65537 * sizeof(float));
    double *a = malloc(65537 * sizeof(double)), *b = malloc(65537 * sizeof(double));
    assert_non_null(x);
    assert_non_null(a);
    assert_non_null(b);
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        for (int kind = 0; kind < TU_ROW_KIND_COUNT; kind++) {
            for (int log = 0; log < 2; log++) {
                int64_t n = sizes[si];
                float scale = scales[(si + (size_t)kind) % 3];
                tu_fill_row(x, n, (tu_row_kind)kind, 0, 0, &rng);
                host_ref_softmax_row(x, a, n, scale, log);
                host_ref_softmax_row_online(x, b, n, scale, log);
                double sum = 0.0;
                for (int64_t j = 0; j < n; j++) {
                    if (isnan(a[j]) || isnan(b[j])) {
                        if (!(isnan(a[j]) && isnan(b[j])))
                            fail_msg("n=%d kind=%d col %d: %.17g vs %.17g", (int)n, kind,
                                     (int)j, a[j], b[j]);
                        continue;
                    }
                    double tol = 1e-12 * (log ? 1.0 + fabs(a[j]) : fabs(a[j])) + 1e-300;
                    if (!(a[j] == b[j] || fabs(a[j] - b[j]) <= tol))
                        fail_msg("n=%d kind=%d log=%d col %d: three-pass %.17g, online %.17g",
                                 (int)n, kind, log, (int)j, a[j], b[j]);
                    sum += log ? exp(a[j]) : a[j];
                }
                if (!isnan(a[0]) && fabs(sum - 1.0) > 1e-9)
                    fail_msg("n=%d kind=%d log=%d: probabilities sum to %.17g", (int)n, kind,
                             log, sum);
            }
        }
    }
    free(x);
    free(a);
    free(b);
}

/* The suite's comparison rule itself (tu_value_ok): it must reject what it is meant to. */
static void test_checker(void **state)
{
    (void)state;
    const double e5 = 1e-5;
    /* f32: |got - ref| <= e + half an ulp */
    assert_true(tu_value_ok(FLASHCL_F32, 0.5f, 0.5, tu_softmax_tol(0.5, 0)));
    assert_true(tu_value_ok(FLASHCL_F32, 0.5f * (1 + 5e-6f), 0.5, tu_softmax_tol(0.5, 0)));
    assert_false(tu_value_ok(FLASHCL_F32, 0.5f * (1 + 2e-5f), 0.5, tu_softmax_tol(0.5, 0)));
    assert_false(tu_value_ok(FLASHCL_F32, 1e-7f, 2e-7, tu_softmax_tol(2e-7, 0)));
    assert_true(tu_value_ok(FLASHCL_F32, -3.25f, -3.25001, tu_softmax_tol(-3.25, 1)));
    assert_false(tu_value_ok(FLASHCL_F32, -3.25f, -3.2502, tu_softmax_tol(-3.25, 1)));
    /* f16: the nearest value (ulp 0.5 at 1000) of something within e */
    assert_true(tu_value_ok(FLASHCL_F16, 1000.5f, 1000.7, 1000.7 * e5));
    assert_false(tu_value_ok(FLASHCL_F16, 1001.0f, 1000.7, 1000.7 * e5));
    assert_false(tu_value_ok(FLASHCL_F16, 1000.0f, 1000.7, 1000.7 * e5));
    assert_true(tu_value_ok(FLASHCL_F16, 1000.5f, 1000.75, 1000.7 * e5)); /* tie: either */
    assert_true(tu_value_ok(FLASHCL_F16, 1001.0f, 1000.75, 1000.7 * e5));
    /* bf16: truncation toward zero fails, nearest passes */
    assert_true(tu_value_ok(FLASHCL_BF16, -1004.0f, -1003.5, tu_softmax_tol(-1003.5, 1)));
    assert_false(tu_value_ok(FLASHCL_BF16, -1000.0f, -1003.5, tu_softmax_tol(-1003.5, 1)));
    /* f16 subnormals: 3e-8 rounds to one quantum (2^-24), not to 0 */
    assert_true(tu_value_ok(FLASHCL_F16, 0x1p-24f, 3e-8, tu_softmax_tol(3e-8, 0)));
    assert_false(tu_value_ok(FLASHCL_F16, 0.0f, 3e-8, tu_softmax_tol(3e-8, 0)));
    /* overflow edges of f16 */
    assert_true(tu_value_ok(FLASHCL_F16, 65504.0f, 65510.0, 0.0));
    assert_false(tu_value_ok(FLASHCL_F16, INFINITY, 65510.0, 0.0));
    assert_true(tu_value_ok(FLASHCL_F16, -INFINITY, -1e30, tu_softmax_tol(-1e30, 1)));
    assert_false(tu_value_ok(FLASHCL_F16, -65504.0f, -1e30, tu_softmax_tol(-1e30, 1)));
    /* special values: exact */
    assert_true(tu_value_ok(FLASHCL_F32, NAN, NAN, 0.0));
    assert_false(tu_value_ok(FLASHCL_F32, 1.0f, NAN, 0.0));
    assert_false(tu_value_ok(FLASHCL_F32, NAN, 1.0, 1.0));
    assert_true(tu_value_ok(FLASHCL_BF16, -INFINITY, -INFINITY, 0.0));
    assert_false(tu_value_ok(FLASHCL_F32, -3e38f, -INFINITY, 0.0));
    assert_false(tu_value_ok(FLASHCL_F32, INFINITY, -INFINITY, 0.0));
    assert_true(tu_value_ok(FLASHCL_F32, 0.0f, 0.0, tu_softmax_tol(0.0, 0)));
    assert_false(tu_value_ok(FLASHCL_F32, 1e-30f, 0.0, tu_softmax_tol(0.0, 0)));
    /* the poison patterns are NaNs and distinct from what a store of NaN gives */
    unsigned char buf[4];
    for (int d = 0; d < 3; d++) {
        tu_poison(buf, 4, (flashcl_dtype)d);
        assert_true(isnan(host_ref_load((flashcl_dtype)d, buf, 0)));
        assert_true(tu_is_poison((flashcl_dtype)d, buf, 0));
        host_ref_store((flashcl_dtype)d, buf, 0, NAN);
        assert_false(tu_is_poison((flashcl_dtype)d, buf, 0));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_half_roundtrip_exhaustive),
        cmocka_unit_test(test_half_rounding_cases),
        cmocka_unit_test(test_half_nearest_bruteforce),
        cmocka_unit_test(test_bf16),
        cmocka_unit_test(test_load_store),
        cmocka_unit_test(test_softmax_semantics_three_pass),
        cmocka_unit_test(test_softmax_semantics_online),
        cmocka_unit_test(test_softmax_three_pass_vs_online),
        cmocka_unit_test(test_checker),
    };
    return tu_exit_code(cmocka_run_group_tests(tests, NULL, NULL));
}
