/* host_ref: plain C reference implementations with double accumulation. Written from the
 * IEEE 754 definitions, independent of the library's kernels: it is the oracle. */
#include "host_ref.h"

#include <math.h>
#include <string.h>

/* ---- bit casts ------------------------------------------------------------------------------ */

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* ---- binary16 --------------------------------------------------------------------------------
 * 1 sign, 5 exponent (bias 15), 10 fraction bits. Smallest normal 2^-14, smallest subnormal
 * 2^-24, largest finite 65504. */

float host_ref_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t frac = h & 0x3ffu;
    if (exp == 0x1fu) /* inf or NaN; the fraction (payload) moves to the top of f32's */
        return f32_from_bits(sign | 0x7f800000u | (frac << 13));
    if (exp == 0) {
        /* zero or subnormal: frac * 2^-24, exact in float */
        float v = (float)frac * 0x1p-24f;
        return sign ? -v : v;
    }
    return f32_from_bits(sign | ((exp + 112u) << 23) | (frac << 13));
}

/* Rounds the integer significand `m` right by `shift` bits, to nearest, ties to even. */
static uint32_t round_shift_rne(uint32_t m, unsigned shift)
{
    uint32_t q = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1u);
    uint32_t halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (q & 1u)))
        q++;
    return q;
}

uint16_t host_ref_float_to_half(float f)
{
    uint32_t u = f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;

    if (a > 0x7f800000u) /* NaN: keep the top payload bits, force quiet so it stays NaN */
        return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    /* 65520 = 0x477ff000 is halfway between 65504 and 2^16 and rounds (to even) up: inf */
    if (a >= 0x477ff000u)
        return (uint16_t)(sign | 0x7c00u);
    if (a >= 0x38800000u) { /* >= 2^-14: normal half */
        uint32_t exp = (a >> 23) - 112u;
        uint32_t sig = (exp << 10) | ((a & 0x7fffffu) >> 13);
        uint32_t rem = a & 0x1fffu;
        /* a carry out of the fraction correctly bumps the exponent */
        if (rem > 0x1000u || (rem == 0x1000u && (sig & 1u)))
            sig++;
        return (uint16_t)(sign | sig);
    }
    /* subnormal half (or zero): the result is round(|f| / 2^-24) */
    if (a <= 0x33000000u) /* <= 2^-25: rounds to 0 (2^-25 itself is a tie, to even 0) */
        return sign;
    {
        uint32_t exp = a >> 23; /* 102 .. 112 */
        uint32_t m = (a & 0x7fffffu) | 0x800000u;
        /* |f| = m * 2^(exp - 150); / 2^-24 = m * 2^(exp - 126) */
        uint32_t q = round_shift_rne(m, 126u - exp);
        return (uint16_t)(sign | q); /* q == 0x400 is the smallest normal: still right */
    }
}

/* ---- bfloat16: the top half of a binary32 ------------------------------------------------- */

float host_ref_bf16_to_float(uint16_t b)
{
    return f32_from_bits((uint32_t)b << 16);
}

uint16_t host_ref_float_to_bf16(float f)
{
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep sign and top payload, force quiet */
        return (uint16_t)((u >> 16) | 0x0040u);
    /* round to nearest even on the low 16 bits; overflow carries into inf naturally and
     * subnormals round like any other value since the exponent field is shared */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* ---- dtypes --------------------------------------------------------------------------------- */

double host_ref_narrowing_roundoff(flashcl_dtype dtype)
{
    return dtype == FLASHCL_F16 ? 0x1p-11 : dtype == FLASHCL_BF16 ? 0x1p-8 : 0.0;
}

size_t host_ref_dtype_size(flashcl_dtype dtype)
{
    switch (dtype) {
    case FLASHCL_F32: return 4;
    case FLASHCL_F16: return 2;
    case FLASHCL_BF16: return 2;
    }
    return 0;
}

const char *host_ref_dtype_name(flashcl_dtype dtype)
{
    switch (dtype) {
    case FLASHCL_F32: return "f32";
    case FLASHCL_F16: return "f16";
    case FLASHCL_BF16: return "bf16";
    }
    return "?";
}

float host_ref_load(flashcl_dtype dtype, const void *data, size_t index)
{
    const unsigned char *p = (const unsigned char *)data;
    switch (dtype) {
    case FLASHCL_F32: {
        float f;
        memcpy(&f, p + index * 4, 4);
        return f;
    }
    case FLASHCL_F16: {
        uint16_t h;
        memcpy(&h, p + index * 2, 2);
        return host_ref_half_to_float(h);
    }
    case FLASHCL_BF16: {
        uint16_t b;
        memcpy(&b, p + index * 2, 2);
        return host_ref_bf16_to_float(b);
    }
    }
    return NAN;
}

void host_ref_store(flashcl_dtype dtype, void *data, size_t index, float value)
{
    unsigned char *p = (unsigned char *)data;
    switch (dtype) {
    case FLASHCL_F32:
        memcpy(p + index * 4, &value, 4);
        break;
    case FLASHCL_F16: {
        uint16_t h = host_ref_float_to_half(value);
        memcpy(p + index * 2, &h, 2);
        break;
    }
    case FLASHCL_BF16: {
        uint16_t b = host_ref_float_to_bf16(value);
        memcpy(p + index * 2, &b, 2);
        break;
    }
    }
}

float host_ref_round(flashcl_dtype dtype, float value)
{
    switch (dtype) {
    case FLASHCL_F32: return value;
    case FLASHCL_F16: return host_ref_half_to_float(host_ref_float_to_half(value));
    case FLASHCL_BF16: return host_ref_bf16_to_float(host_ref_float_to_bf16(value));
    }
    return NAN;
}

/* ---- softmax -------------------------------------------------------------------------------- */

/* s_j = x_j * scale, rounded to float as the kernels compute it. */
static float scaled(const float *x, int64_t j, float scale)
{
    volatile float s = x[j] * scale; /* volatile: no wider evaluation, no contraction */
    return s;
}

static void fill_nan(double *y, int64_t cols)
{
    for (int64_t j = 0; j < cols; j++)
        y[j] = NAN;
}

/* torch semantics for the special cases, shared by both implementations: a NaN or +inf
 * anywhere, or no entry above -inf, makes the whole row NaN. Returns 1 when it did that. */
static int special_row(const float *x, double *y, int64_t cols, float scale)
{
    int any_finite = 0;
    for (int64_t j = 0; j < cols; j++) {
        float s = scaled(x, j, scale);
        if (isnan(s) || (isinf(s) && s > 0)) {
            fill_nan(y, cols);
            return 1;
        }
        if (!isinf(s))
            any_finite = 1;
    }
    if (!any_finite) {
        fill_nan(y, cols);
        return 1;
    }
    return 0;
}

static void finish_row(const float *x, double *y, int64_t cols, float scale, int log_,
                       double m, double d)
{
    double log_d = log(d);
    for (int64_t j = 0; j < cols; j++) {
        float s = scaled(x, j, scale);
        if (isinf(s)) { /* -inf: the only infinity left here */
            y[j] = log_ ? -INFINITY : 0.0;
            continue;
        }
        double t = (double)s - m;
        y[j] = log_ ? t - log_d : exp(t) / d;
    }
}

void host_ref_softmax_row(const float *x, double *y, int64_t cols, float scale, int log_)
{
    if (cols <= 0)
        return;
    if (scale == 0.0f)
        scale = 1.0f;
    if (special_row(x, y, cols, scale))
        return;

    /* pass 1: the max (finite: +inf and NaN were handled, and one entry is above -inf) */
    double m = -INFINITY;
    for (int64_t j = 0; j < cols; j++) {
        double s = scaled(x, j, scale);
        if (s > m)
            m = s;
    }
    /* pass 2: the denominator; -inf entries contribute exp(-inf) = 0 */
    double d = 0.0;
    for (int64_t j = 0; j < cols; j++)
        d += exp((double)scaled(x, j, scale) - m);
    /* pass 3 */
    finish_row(x, y, cols, scale, log_, m, d);
}

void host_ref_softmax_row_online(const float *x, double *y, int64_t cols, float scale,
                                 int log_)
{
    if (cols <= 0)
        return;
    if (scale == 0.0f)
        scale = 1.0f;
    if (special_row(x, y, cols, scale))
        return;

    /* one pass keeping (m, d): d is the sum of exp(s - m) over the entries seen so far */
    double m = -INFINITY, d = 0.0;
    for (int64_t j = 0; j < cols; j++) {
        double s = scaled(x, j, scale);
        if (s == -INFINITY)
            continue; /* contributes 0 and cannot raise the max */
        if (s > m) {
            /* the max grows: rescale what was summed against the old max */
            d = (m == -INFINITY ? 0.0 : d * exp(m - s)) + 1.0;
            m = s;
        } else {
            d += exp(s - m);
        }
    }
    finish_row(x, y, cols, scale, log_, m, d);
}
