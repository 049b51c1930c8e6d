/* Shared helpers of the flashcl test suite (see test_util.h). */
#include "test_util.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const flashcl_dtype tu_pairs[9][2] = {
    {FLASHCL_F32, FLASHCL_F32},  {FLASHCL_F32, FLASHCL_F16},  {FLASHCL_F32, FLASHCL_BF16},
    {FLASHCL_F16, FLASHCL_F32},  {FLASHCL_F16, FLASHCL_F16},  {FLASHCL_F16, FLASHCL_BF16},
    {FLASHCL_BF16, FLASHCL_F32}, {FLASHCL_BF16, FLASHCL_F16}, {FLASHCL_BF16, FLASHCL_BF16},
};

/* ---- temporary files ------------------------------------------------------------------------ */

char *tu_make_temp_dir(const char *tag)
{
    const char *base = getenv("TMPDIR");
    if (!base || !*base)
        base = "/tmp";
    size_t n = strlen(base) + strlen(tag) + 32;
    char *path = malloc(n);
    if (!path)
        return NULL;
    snprintf(path, n, "%s/flashcl-%s-XXXXXX", base, tag);
    if (!mkdtemp(path)) {
        fprintf(stderr, "mkdtemp(%s): %s\n", path, strerror(errno));
        free(path);
        return NULL;
    }
    return path;
}

void tu_remove_tree(const char *path)
{
    struct stat st;
    if (!path || lstat(path, &st) != 0)
        return;
    if (S_ISDIR(st.st_mode)) {
        chmod(path, 0700); /* a test may have made it read-only */
        DIR *d = opendir(path);
        if (d) {
            struct dirent *e;
            while ((e = readdir(d)) != NULL) {
                if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                    continue;
                size_t n = strlen(path) + strlen(e->d_name) + 2;
                char *child = malloc(n);
                if (!child)
                    continue;
                snprintf(child, n, "%s/%s", path, e->d_name);
                tu_remove_tree(child);
                free(child);
            }
            closedir(d);
        }
        rmdir(path);
    } else {
        unlink(path);
    }
}

/* ---- context ---------------------------------------------------------------------------------- */

static char *g_temp_cache;

static void remove_temp_cache(void)
{
    tu_remove_tree(g_temp_cache);
    free(g_temp_cache);
    g_temp_cache = NULL;
}

const char *tu_cache_dir(void)
{
    const char *env = getenv("FLASHCL_TEST_CACHE_DIR");
    if (env && *env) {
        mkdir(env, 0777); /* the library may create it too; EEXIST is fine */
        return env;
    }
    if (!g_temp_cache) {
        g_temp_cache = tu_make_temp_dir("cache");
        if (!g_temp_cache)
            return ""; /* no cache rather than the user's */
        atexit(remove_temp_cache);
    }
    return g_temp_cache;
}

void tu_skip_if_no_device(flashcl_status st)
{
    if (st == FLASHCL_DEVICE_NOT_FOUND) {
        printf("SKIP: no OpenCL device: %s\n", flashcl_last_error());
        fflush(stdout);
        exit(TU_SKIP_CODE);
    }
}

int tu_probe_is_opencl(flashcl_status st, flashcl_context *probe, const char *what_is_missing)
{
    flashcl_device_info dev;
    tu_skip_if_no_device(st);
    if (st != FLASHCL_SUCCESS) {
        fprintf(stderr, "FAIL: flashcl_context_create: %s: %s\n", flashcl_status_string(st),
                flashcl_last_error());
        exit(1);
    }
    st = flashcl_context_device(probe, &dev);
    flashcl_context_destroy(probe);
    if (st != FLASHCL_SUCCESS) {
        fprintf(stderr, "FAIL: flashcl_context_device: %s: %s\n", flashcl_status_string(st),
                flashcl_last_error());
        exit(1);
    }
    if (dev.backend == FLASHCL_BACKEND_OPENCL) return 1;
    printf("SKIP: the context is on the %s backend, whose kernels are compiled ahead of time "
           "(%s)\n",
           dev.backend == FLASHCL_BACKEND_CUDA ? "CUDA" : "non-OpenCL", what_is_missing);
    fflush(stdout);
    return 0;
}

flashcl_status tu_context_create(const char *cache_dir, flashcl_context **out)
{
    flashcl_context_options o;
    memset(&o, 0, sizeof o);
    o.backend = FLASHCL_BACKEND_AUTO;
    o.device_index = -1;
    o.device_match = NULL;
    o.cache_dir = cache_dir;
    return flashcl_context_create(&o, out);
}

flashcl_context *tu_context_or_skip(void)
{
    flashcl_context *ctx = NULL;
    flashcl_status st = tu_context_create(tu_cache_dir(), &ctx);
    tu_skip_if_no_device(st);
    if (st != FLASHCL_SUCCESS || !ctx) {
        fprintf(stderr, "FAIL: flashcl_context_create: %s: %s\n", flashcl_status_string(st),
                flashcl_last_error());
        exit(1);
    }
    flashcl_device_info info;
    if (flashcl_context_device(ctx, &info) == FLASHCL_SUCCESS)
        printf("device: %s (%s, %s), seed %" PRIu64 "\n", info.name, info.platform,
               info.driver, tu_base_seed());
    fflush(stdout);
    return ctx;
}

int tu_exit_code(int failures)
{
    return failures == 0 ? 0 : 1;
}

/* ---- random ----------------------------------------------------------------------------------- */

uint64_t tu_base_seed(void)
{
    const char *env = getenv("FLASHCL_TEST_SEED");
    if (env && *env)
        return strtoull(env, NULL, 0);
    return 0x5eedf1a5c1ull;
}

void tu_rng_seed(tu_rng *rng, uint64_t seed)
{
    rng->state = seed ^ 0x9e3779b97f4a7c15ull;
}

uint64_t tu_rng_next(tu_rng *rng)
{
    uint64_t z = (rng->state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double tu_rng_uniform(tu_rng *rng, double lo, double hi)
{
    double u = (double)(tu_rng_next(rng) >> 11) * 0x1p-53;
    return lo + (hi - lo) * u;
}

uint64_t tu_rng_below(tu_rng *rng, uint64_t n)
{
    return n ? tu_rng_next(rng) % n : 0;
}

/* ---- poison ----------------------------------------------------------------------------------- */

uint32_t tu_poison_bits(flashcl_dtype dtype)
{
    switch (dtype) {
    case FLASHCL_F32: return 0x7fc0deadu;
    case FLASHCL_F16: return 0xfe7fu;
    case FLASHCL_BF16: return 0xffadu;
    }
    return 0xa5a5a5a5u;
}

uint32_t tu_element_bits(flashcl_dtype dtype, const void *data, size_t index)
{
    const unsigned char *p = data;
    if (host_ref_dtype_size(dtype) == 4) {
        uint32_t v;
        memcpy(&v, p + index * 4, 4);
        return v;
    }
    uint16_t h;
    memcpy(&h, p + index * 2, 2);
    return h;
}

void tu_poison(void *p, size_t bytes, flashcl_dtype dtype)
{
    size_t es = host_ref_dtype_size(dtype);
    uint32_t bits = tu_poison_bits(dtype);
    unsigned char *b = p;
    size_t n = bytes / es;
    for (size_t i = 0; i < n; i++) {
        if (es == 4) {
            memcpy(b + i * 4, &bits, 4);
        } else {
            uint16_t h = (uint16_t)bits;
            memcpy(b + i * 2, &h, 2);
        }
    }
    memset(b + n * es, 0xa5, bytes - n * es);
}

int tu_is_poison(flashcl_dtype dtype, const void *data, size_t index)
{
    return tu_element_bits(dtype, data, index) == tu_poison_bits(dtype);
}

/* ---- values ----------------------------------------------------------------------------------- */

void tu_fill_row(float *row, int64_t cols, tu_row_kind kind, double lo, double hi,
                 tu_rng *rng)
{
    if (lo == 0.0 && hi == 0.0) {
        lo = -8.0;
        hi = 8.0;
    }
    for (int64_t j = 0; j < cols; j++) {
        switch (kind) {
        case TU_ROW_HUGE: {
            double v = tu_rng_uniform(rng, 0.5, 1.0) * 1e30;
            row[j] = (float)((tu_rng_next(rng) & 1) ? v : -v);
            break;
        }
        case TU_ROW_NEAR_1000: row[j] = (float)(1000.0 + tu_rng_uniform(rng, -1.0, 1.0)); break;
        case TU_ROW_CONSTANT: row[j] = 5.0f; break;
        case TU_ROW_WIDE: row[j] = (float)tu_rng_uniform(rng, -60.0, 60.0); break;
        case TU_ROW_ALL_NEG_INF: row[j] = -INFINITY; break;
        default: row[j] = (float)tu_rng_uniform(rng, lo, hi); break;
        }
    }
    if (kind == TU_ROW_SOME_NEG_INF)
        for (int64_t j = 1; j < cols; j += 3)
            row[j] = -INFINITY;
    if (kind == TU_ROW_ONE_NAN)
        row[tu_rng_below(rng, (uint64_t)cols)] = NAN;
    if (kind == TU_ROW_ONE_POS_INF)
        row[tu_rng_below(rng, (uint64_t)cols)] = INFINITY;
}

double tu_softmax_tol(double ref, int log)
{
    if (log)
        return 1e-5 + 0x1p-20 * fabs(ref);
    return 1e-5 * fabs(ref) + 1e-20;
}

/* Ordered integer key of a dtype's bit pattern (+0 and -0 both 0), and back. */
static int64_t bits_key(flashcl_dtype dt, uint32_t bits)
{
    uint32_t sign = host_ref_dtype_size(dt) == 4 ? 0x80000000u : 0x8000u;
    int64_t mag = (int64_t)(bits & (sign - 1u));
    return (bits & sign) ? -mag : mag;
}

static float key_value(flashcl_dtype dt, int64_t key)
{
    uint32_t sign = host_ref_dtype_size(dt) == 4 ? 0x80000000u : 0x8000u;
    uint32_t bits = key < 0 ? (sign | (uint32_t)(-key)) : (uint32_t)key;
    unsigned char buf[4];
    if (host_ref_dtype_size(dt) == 4) {
        memcpy(buf, &bits, 4);
    } else {
        uint16_t h = (uint16_t)bits;
        memcpy(buf, &h, 2);
    }
    return host_ref_load(dt, buf, 0);
}

static uint32_t float_bits_in(flashcl_dtype dt, float v)
{
    unsigned char buf[4];
    host_ref_store(dt, buf, 0, v);
    return tu_element_bits(dt, buf, 0);
}

int tu_value_ok(flashcl_dtype dt, float got, double ref, double e)
{
    if (isnan(ref))
        return isnan(got);
    if (isnan(got))
        return 0;
    if (isinf(ref))
        return got == ref;
    if (ref == 0.0)
        return got == 0.0f;
    /* got must be the round-to-nearest of some r in [ref - e, ref + e]: its rounding interval
     * [midpoint with the next value below, midpoint with the next value above] must meet it. */
    if (host_ref_round(dt, got) != got)
        return 0; /* cannot happen for a loaded element; defensive */
    int64_t k = bits_key(dt, float_bits_in(dt, got));
    float below = key_value(dt, k - 1), above = key_value(dt, k + 1);
    double lo_mid, hi_mid;
    if (isinf(got)) /* inf is the rounding of everything past the overflow threshold */
        return host_ref_round(dt, (float)(got > 0 ? ref + e : ref - e)) == got;
    lo_mid = isinf(below) ? -INFINITY : ((double)got + (double)below) / 2.0;
    hi_mid = isinf(above) ? INFINITY : ((double)got + (double)above) / 2.0;
    if (isinf(below) || isinf(above)) {
        /* the largest finite value: its interval reaches max + ulp/2 on that side */
        double ulp = isinf(above) ? (double)got - (double)below : (double)above - (double)got;
        if (isinf(above))
            hi_mid = (double)got + ulp / 2.0;
        else
            lo_mid = (double)got - ulp / 2.0;
    }
    return lo_mid <= ref + e && hi_mid >= ref - e;
}

/* ---- the softmax checker ---------------------------------------------------------------------- */

static const char *variant_name(flashcl_softmax_variant v)
{
    switch (v) {
    case FLASHCL_SOFTMAX_AUTO: return "auto";
    case FLASHCL_SOFTMAX_ROW_IN_REGISTERS: return "row-in-registers";
    case FLASHCL_SOFTMAX_ONLINE_CHUNKED: return "online-chunked";
    case FLASHCL_SOFTMAX_SPLIT_ROW: return "split-row";
    }
    return "variant?";
}

const char *tu_case_str(const tu_softmax_case *c)
{
    static char buf[512];
    snprintf(buf, sizeof buf,
             "%s->%s rows=%" PRId64 " cols=%" PRId64 " x_pad=%" PRId64 " y_pad=%" PRId64
             " x_off=%zu y_off=%zu tail=%zu scale=%g log=%d in_place=%d variant=%s special=%d"
             "(+%d) params_null=%d",
             host_ref_dtype_name(c->xt), host_ref_dtype_name(c->yt), c->rows, c->cols, c->x_pad,
             c->in_place ? c->x_pad : c->y_pad, c->x_off, c->in_place ? c->x_off : c->y_off,
             c->tail, (double)c->scale, c->log, c->in_place, variant_name(c->variant),
             c->special, c->kind_offset, c->params_null);
    return buf;
}

void tu_randomize_layout(tu_softmax_case *c, tu_rng *rng)
{
    static const float scales[3] = {0.0f, 0.37f, -1.5f};
    static const int64_t pads[4] = {0, 1, 3, 17};
    c->x_pad = pads[tu_rng_below(rng, 4)];
    c->y_pad = pads[tu_rng_below(rng, 4)];
    c->x_off = tu_rng_below(rng, 2) ? (size_t)(1 + tu_rng_below(rng, 3)) : 0;
    c->y_off = tu_rng_below(rng, 2) ? (size_t)(1 + tu_rng_below(rng, 3)) : 0;
    c->tail = tu_rng_below(rng, 2) ? 8 : 0;
    c->scale = scales[tu_rng_below(rng, 3)];
    c->log = (int)tu_rng_below(rng, 2);
    c->in_place = c->xt == c->yt && tu_rng_below(rng, 3) == 0;
    c->special = (int)tu_rng_below(rng, 2);
    c->kind_offset = (int)tu_rng_below(rng, TU_ROW_KIND_COUNT);
}

static uint64_t fnv1a(const unsigned char *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        fail_msg("out of host memory (%zu bytes)", n);
    return p;
}

flashcl_status tu_softmax_check(flashcl_context *ctx, const tu_softmax_case *c, uint64_t seed,
                                uint64_t *hash)
{
    const flashcl_dtype xt = c->xt, yt = c->in_place ? c->xt : c->yt;
    const size_t esx = host_ref_dtype_size(xt), esy = host_ref_dtype_size(yt);
    const int64_t rows = c->rows, cols = c->cols;
    const int64_t xs = cols + c->x_pad;
    const int64_t ys = c->in_place ? xs : cols + c->y_pad;
    const size_t x_off = c->x_off, y_off = c->in_place ? c->x_off : c->y_off;
    const size_t x_elems = x_off + (size_t)((rows - 1) * xs + cols) + c->tail;
    const size_t y_elems = y_off + (size_t)((rows - 1) * ys + cols) + c->tail;
    const size_t x_bytes = x_elems * esx, y_bytes = y_elems * esy;
    tu_rng rng;
    tu_rng_seed(&rng, seed);

    /* input: poison everywhere, then the view's rows */
    unsigned char *xh = xmalloc(x_bytes);
    tu_poison(xh, x_bytes, xt);
    float *row = xmalloc((size_t)cols * sizeof(float));
    for (int64_t r = 0; r < rows; r++) {
        tu_row_kind kind = c->special
                               ? (tu_row_kind)((r + c->kind_offset) % TU_ROW_KIND_COUNT)
                               : TU_ROW_RANDOM;
        tu_fill_row(row, cols, kind, c->lo, c->hi, &rng);
        for (int64_t j = 0; j < cols; j++)
            host_ref_store(xt, xh, x_off + (size_t)(r * xs + j), row[j]);
    }

    flashcl_buffer *xb = NULL, *yb = NULL;
    flashcl_status st = flashcl_buffer_create(ctx, x_bytes, &xb);
    if (st != FLASHCL_SUCCESS)
        fail_msg("buffer_create(x, %zu): %s: %s", x_bytes, flashcl_status_string(st),
                 flashcl_last_error());
    st = flashcl_buffer_write(xb, 0, xh, x_bytes);
    assert_int_equal(st, FLASHCL_SUCCESS);

    unsigned char *before; /* what the output buffer held before the call */
    if (c->in_place) {
        yb = xb;
        before = xh;
    } else {
        before = xmalloc(y_bytes);
        tu_poison(before, y_bytes, yt);
        st = flashcl_buffer_create(ctx, y_bytes, &yb);
        if (st != FLASHCL_SUCCESS)
            fail_msg("buffer_create(y, %zu): %s: %s", y_bytes, flashcl_status_string(st),
                     flashcl_last_error());
        st = flashcl_buffer_write(yb, 0, before, y_bytes);
        assert_int_equal(st, FLASHCL_SUCCESS);
    }

    flashcl_tensor x, y;
    memset(&x, 0, sizeof x);
    x.buffer = xb;
    x.offset = x_off * esx;
    x.dtype = xt;
    x.ndim = 2;
    x.shape[0] = rows;
    x.shape[1] = cols;
    x.strides[0] = xs;
    x.strides[1] = 1;
    memset(&y, 0, sizeof y);
    y.buffer = yb;
    y.offset = y_off * esy;
    y.dtype = yt;
    y.ndim = 2;
    y.shape[0] = rows;
    y.shape[1] = cols;
    y.strides[0] = ys;
    y.strides[1] = 1;

    flashcl_softmax_params p;
    memset(&p, 0, sizeof p);
    p.scale = c->scale;
    p.log = c->log;
    p.variant = c->variant;
    st = flashcl_softmax(ctx, c->params_null ? NULL : &p, &x, c->in_place ? &x : &y);
    char msg[512]; /* the message is valid only until the next flashcl call */
    snprintf(msg, sizeof msg, "%s", flashcl_last_error());

    unsigned char *out = xmalloc(y_bytes);
    flashcl_status rst = flashcl_buffer_read(yb, 0, out, y_bytes);
    if (rst != FLASHCL_SUCCESS)
        fail_msg("buffer_read: %s: %s [%s]", flashcl_status_string(rst), flashcl_last_error(),
                 tu_case_str(c));

    if (st != FLASHCL_SUCCESS) {
        if (!(st == FLASHCL_UNSUPPORTED && c->allow_unsupported))
            fail_msg("flashcl_softmax returned %s: %s [%s]", flashcl_status_string(st), msg,
                     tu_case_str(c));
        if (memcmp(out, before, y_bytes) != 0)
            fail_msg("flashcl_softmax returned UNSUPPORTED but wrote the output [%s]",
                     tu_case_str(c));
        if (msg[0] == '\0')
            fail_msg("UNSUPPORTED without a message [%s]", tu_case_str(c));
        goto done;
    }

    /* every element of the view against the reference */
    {
        double *ref = xmalloc((size_t)cols * sizeof(double));
        long bad = 0;
        for (int64_t r = 0; r < rows; r++) {
            for (int64_t j = 0; j < cols; j++)
                row[j] = host_ref_load(xt, xh, x_off + (size_t)(r * xs + j));
            host_ref_softmax_row(row, ref, cols, c->scale, c->log);
            for (int64_t j = 0; j < cols; j++) {
                size_t yi = y_off + (size_t)(r * ys + j);
                float got = host_ref_load(yt, out, yi);
                int ok;
                if (!c->in_place && tu_is_poison(yt, out, yi))
                    ok = 0; /* never written */
                else
                    ok = tu_value_ok(yt, got, ref[j], tu_softmax_tol(ref[j], c->log));
                if (!ok) {
                    if (bad < 8)
                        print_error("  row %" PRId64 " col %" PRId64 ": x=%.9g got=%.9g "
                                    "(bits 0x%x) ref=%.12g tol=%.3g%s\n",
                                    r, j, (double)row[j], (double)got,
                                    (unsigned)tu_element_bits(yt, out, yi), ref[j],
                                    tu_softmax_tol(ref[j], c->log),
                                    tu_is_poison(yt, out, yi) ? " (poison: not written)" : "");
                    bad++;
                }
                /* mark the element as expected, so that the memcmp below sees only the rest */
                memcpy(before + yi * esy, out + yi * esy, esy);
            }
        }
        free(ref);
        if (bad)
            fail_msg("%ld wrong output elements [%s] seed=0x%" PRIx64, bad, tu_case_str(c),
                     seed);
    }

    /* bytes outside the output view (padding, offsets, tail; for in place also x's) */
    if (memcmp(out, before, y_bytes) != 0) {
        size_t i = 0;
        while (i < y_bytes && out[i] == before[i])
            i++;
        fail_msg("byte %zu of the output buffer (outside the view) was written: 0x%02x, "
                 "expected 0x%02x [%s]",
                 i, out[i], before[i], tu_case_str(c));
    }

done:
    if (hash)
        *hash = fnv1a(out, y_bytes);
    free(out);
    if (!c->in_place)
        free(before);
    free(row);
    free(xh);
    if (!c->in_place)
        flashcl_buffer_destroy(yb);
    flashcl_buffer_destroy(xb);
    return st;
}

flashcl_tensor tu_view2d(flashcl_buffer *b, flashcl_dtype dt, int64_t rows, int64_t cols)
{
    flashcl_tensor t;
    memset(&t, 0, sizeof t);
    t.buffer = b;
    t.dtype = dt;
    t.ndim = 2;
    t.shape[0] = rows;
    t.shape[1] = cols;
    t.strides[0] = cols;
    t.strides[1] = 1;
    return t;
}
