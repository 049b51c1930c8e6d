/* CUDA interop: softmax on caller-owned device memory. The test allocates with the driver API
 * itself (dlopen, tests/cuda/cuda_driver.h), uploads with cuMemcpyHtoD, wraps the memory with
 * flashcl_buffer_wrap_cuda, runs flashcl_softmax on a stream of its own set with
 * flashcl_context_set_cuda_stream, waits on that stream, downloads with cuMemcpyDtoH and checks
 * every element against host_ref (unaligned rows too, which the split-held kernel holds in their
 * shifted layout); the split-held softmax as clusters and as tickets, holding 16-bit inputs as
 * bits or as f32, must agree bit for bit. Without a CUDA device it prints "SKIP: ..." and exits 77. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "cuda_driver.h"
#include "flashcl.h"
#include "flashcl_cuda.h"
#include "host_ref.h"

static td_api cu;
static td_device g_device;
static td_context g_primary;   /* the device's primary context: the one flashcl uses */
static td_stream g_stream;     /* the test's own stream, handed to flashcl */
static flashcl_context *g_ctx;

/* ---- driver helpers (every call checked) ----------------------------------------------------- */

static void push(void) { assert_int_equal(cu.CtxPushCurrent(g_primary), 0); }
static void pop(void) {
    td_context c;
    assert_int_equal(cu.CtxPopCurrent(&c), 0);
}

static td_deviceptr device_alloc(size_t bytes) {
    td_deviceptr p = 0;
    push();
    assert_int_equal(cu.MemAlloc(&p, bytes), 0);
    pop();
    return p;
}

static void device_free(td_deviceptr p) {
    push();
    assert_int_equal(cu.MemFree(p), 0); /* fails if flashcl freed it */
    pop();
}

/* cuMemcpyHtoD from pageable memory returns once the data is staged, not when it has landed,
 * and it runs on the legacy stream, which flashcl's work on the test's non-blocking stream is
 * not ordered after: without the wait, the tail of an upload (y's poison) could land after the
 * kernel wrote there (seen on an H200: the last rows read back as poison now and then). */
static void upload(td_deviceptr dst, const void *src, size_t bytes) {
    push();
    assert_int_equal(cu.MemcpyHtoD(dst, src, bytes), 0);
    assert_int_equal(cu.CtxSynchronize(), 0);
    pop();
}

static void download(void *dst, td_deviceptr src, size_t bytes) {
    push();
    assert_int_equal(cu.MemcpyDtoH(dst, src, bytes), 0);
    pop();
}

static flashcl_buffer *wrap(td_deviceptr p, size_t bytes) {
    flashcl_buffer *b = NULL;
    flashcl_status st = flashcl_buffer_wrap_cuda(g_ctx, (void *)(uintptr_t)p, bytes, &b);
    if (st != FLASHCL_SUCCESS) fail_msg("flashcl_buffer_wrap_cuda: %s", flashcl_last_error());
    return b;
}

/* ---- checking: the stored value must be the dtype's rounding of some real within the f32
 * tolerance of the double reference (the rule of tests/test_util.h) ---------------------------- */

static float bound(double v, int up) {
    float f = (float)v;
    if (up && (double)f < v) f = nextafterf(f, INFINITY);
    if (!up && (double)f > v) f = nextafterf(f, -INFINITY);
    return f;
}

static int value_ok(flashcl_dtype dt, float got, double ref, int log) {
    double e = log ? 1e-5 + ldexp(fabs(ref), -20) : 1e-5 * fabs(ref) + 1e-20;
    if (isnan(ref)) return isnan(got);
    if (isinf(ref)) return got == ref;
    if (ref == 0.0) return got == 0.0f;
    return host_ref_round(dt, bound(ref - e, 0)) <= got && got <= host_ref_round(dt, bound(ref + e, 1));
}

/* Every element of y (rows x cols, row stride `stride`, starting at element `offset` of x_host and
 * `y_offset` of y_host) against host_ref's softmax of x; `what` names the case in a failure. */
static void check_rows(flashcl_dtype xt, const void *x_host, flashcl_dtype yt, const void *y_host,
                       int64_t rows, int64_t cols, int64_t stride, size_t offset, size_t y_offset,
                       float scale, int log, const char *what) {
    float *row = malloc((size_t)cols * sizeof *row);
    double *ref = malloc((size_t)cols * sizeof *ref);
    assert_non_null(row);
    assert_non_null(ref);
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t j = 0; j < cols; j++)
            row[j] = host_ref_load(xt, x_host, offset + (size_t)(r * stride + j));
        host_ref_softmax_row(row, ref, cols, scale, log);
        for (int64_t j = 0; j < cols; j++) {
            const float got = host_ref_load(yt, y_host, y_offset + (size_t)(r * stride + j));
            if (!value_ok(yt, got, ref[j], log))
                fail_msg("%s: y[%lld][%lld] = %.9g, reference %.9g", what, (long long)r,
                         (long long)j, (double)got, ref[j]);
        }
    }
    free(row), free(ref);
}

/* ---- one softmax case on wrapped memory ------------------------------------------------------ */

typedef struct sm_case {
    flashcl_dtype xt, yt;
    int64_t rows, cols, pad; /* row stride = cols + pad, for x and y */
    size_t offset;           /* view offset in elements (1: rows not 16-byte aligned) */
    float scale;
    int log, in_place, special;
    flashcl_softmax_variant variant;
    size_t y_shift; /* y's view starts this many elements later than x's (not in place) */
} sm_case;

/* Row r of the input: random in [-8, 8), or with `special` rows of torch's special cases. */
static void fill_row(float *row, int64_t cols, int64_t r, int special, uint64_t *seed) {
    for (int64_t j = 0; j < cols; j++) {
        *seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
        row[j] = (float)((double)(*seed >> 11) / 9007199254740992.0 * 16.0 - 8.0);
    }
    if (!special) return;
    switch (r % 7) {
    case 1: for (int64_t j = 1; j < cols; j += 3) row[j] = -INFINITY; break;
    case 2: for (int64_t j = 0; j < cols; j++) row[j] = -INFINITY; break;
    case 3: row[cols / 2] = NAN; break;
    case 4: row[cols - 1] = INFINITY; break;
    case 5: for (int64_t j = 0; j < cols; j++) row[j] = (j % 2 ? -0.75f : 0.5f) * 1e30f; break;
    case 6: for (int64_t j = 0; j < cols; j++) row[j] = 1000.0f + row[j] / 8.0f; break;
    default: break;
    }
}

static void run_case(const sm_case *c) {
    const size_t xs = host_ref_dtype_size(c->xt), ys = host_ref_dtype_size(c->yt);
    const int64_t stride = c->cols + c->pad;
    const size_t elems = c->offset + c->y_shift + (size_t)(stride * (c->rows - 1) + c->cols);
    unsigned char *x_host = malloc(elems * xs), *y_host = malloc(elems * ys);
    float *row = malloc((size_t)c->cols * sizeof *row);
    char what[128];
    uint64_t seed = 12345;
    td_deviceptr x_dev, y_dev = 0;
    flashcl_buffer *xb, *yb;
    flashcl_tensor x, y;
    flashcl_softmax_params params = {c->scale, c->log, c->variant};
    flashcl_status st;
    assert_non_null(x_host);
    assert_non_null(y_host);
    memset(x_host, 0x7f, elems * xs); /* padding: huge values a stray read would show */
    for (int64_t r = 0; r < c->rows; r++) {
        fill_row(row, c->cols, r, c->special, &seed);
        for (int64_t j = 0; j < c->cols; j++)
            host_ref_store(c->xt, x_host, c->offset + (size_t)(r * stride + j), row[j]);
    }
    x_dev = device_alloc(elems * xs);
    upload(x_dev, x_host, elems * xs);
    xb = wrap(x_dev, elems * xs);
    yb = xb;
    if (!c->in_place) {
        y_dev = device_alloc(elems * ys);
        memset(y_host, 0xff, elems * ys); /* poison (NaN in every dtype): unwritten values fail */
        upload(y_dev, y_host, elems * ys);
        yb = wrap(y_dev, elems * ys);
    }
    memset(&x, 0, sizeof x);
    x.buffer = xb, x.offset = c->offset * xs, x.dtype = c->xt, x.ndim = 2;
    x.shape[0] = c->rows, x.shape[1] = c->cols, x.strides[0] = stride, x.strides[1] = 1;
    y = x;
    y.buffer = yb, y.dtype = c->yt, y.offset = (c->offset + c->y_shift) * ys;

    st = flashcl_softmax(g_ctx, &params, &x, &y);
    if (st != FLASHCL_SUCCESS) fail_msg("flashcl_softmax: %s", flashcl_last_error());
    /* flashcl ran on the test's stream: waiting on it, not on flashcl, must be enough. */
    assert_int_equal(cu.StreamSynchronize(g_stream), 0);
    flashcl_buffer_destroy(xb);
    if (!c->in_place) flashcl_buffer_destroy(yb);
    download(y_host, c->in_place ? x_dev : y_dev, elems * ys);

    snprintf(what, sizeof what, "%s->%s %lldx%lld variant %d log %d", host_ref_dtype_name(c->xt),
             host_ref_dtype_name(c->yt), (long long)c->rows, (long long)c->cols, (int)c->variant,
             c->log);
    check_rows(c->xt, x_host, c->yt, y_host, c->rows, c->cols, stride, c->offset,
               c->offset + c->y_shift, c->scale, c->log, what);
    /* Nothing outside y's rows written: the poison (or in place, x's padding) is still there. */
    for (size_t e = 0; e < elems; e++) {
        const size_t first = c->offset + (c->in_place ? 0 : c->y_shift);
        if (e >= first && (int64_t)((e - first) % (size_t)stride) < c->cols &&
            (int64_t)((e - first) / (size_t)stride) < c->rows)
            continue;
        for (size_t b = 0; b < ys; b++)
            if (y_host[e * ys + b] != (c->in_place ? x_host[e * xs + b] : 0xff))
                fail_msg("%s: element %zu of y's buffer, outside its rows, was written", what, e);
    }
    device_free(x_dev); /* the buffers are gone; the memory must still be the test's */
    if (!c->in_place) device_free(y_dev);
    free(x_host), free(y_host), free(row);
}

/* ---- tests ------------------------------------------------------------------------------------ */

/* One link of a softmax chain: y = softmax(x * scale) over rows x cols (contiguous) of dtype dt
 * on wrapped memory, the variant given. */
static void chain_call(flashcl_buffer *xb, flashcl_buffer *yb, flashcl_dtype dt, int64_t rows,
                       int64_t cols, float scale, flashcl_softmax_variant variant) {
    flashcl_softmax_params params = {scale, 0, variant};
    flashcl_tensor x, y;
    flashcl_status st;
    memset(&x, 0, sizeof x);
    x.buffer = xb, x.dtype = dt, x.ndim = 2;
    x.shape[0] = rows, x.shape[1] = cols, x.strides[0] = cols, x.strides[1] = 1;
    y = x;
    y.buffer = yb;
    st = flashcl_softmax(g_ctx, &params, &x, &y);
    if (st != FLASHCL_SUCCESS) fail_msg("flashcl_softmax (chain): %s", flashcl_last_error());
}

/* Back-to-back calls, each reading what the call before it wrote, nothing between them: on
 * compute capability 9.0+ the softmax kernels are launched as programmatic dependents of the
 * kernel before (src/cuda/softmax.c), and the short 16-bit rows ask L2 for their input before
 * they wait for it. Such a chain of LINKS calls between two buffers must end in the bits of the
 * same chain with the stream drained after every call, each of whose links is checked against
 * host_ref. The scale (cols / 4) keeps the inputs of later links spread, so that a link that
 * read its input early (the buffer's previous contents: another link's output, or the first
 * poison) would differ. Shapes: short rows (the f16 and bf16 ones prefetch), longer register
 * rows, the online chunked variant, the split-held kernel, a few long rows as AUTO runs
 * them, and rows of more slices than SMs (the cooperative pipelined kernel). */
static void test_dependent_launch_chain(void **state) {
    enum { LINKS = 7 };
    static const struct {
        flashcl_dtype dt;
        int64_t rows, cols;
        flashcl_softmax_variant variant;
    } shapes[] = {{FLASHCL_F16, 32768, 128, FLASHCL_SOFTMAX_AUTO},
                  {FLASHCL_BF16, 20000, 500, FLASHCL_SOFTMAX_AUTO},
                  {FLASHCL_F32, 32768, 128, FLASHCL_SOFTMAX_AUTO},
                  {FLASHCL_F32, 4099, 1000, FLASHCL_SOFTMAX_AUTO},
                  {FLASHCL_F16, 300, 20000, FLASHCL_SOFTMAX_ONLINE_CHUNKED},
                  {FLASHCL_F32, 7, 65536, FLASHCL_SOFTMAX_SPLIT_ROW},
                  {FLASHCL_F32, 3, 1000003, FLASHCL_SOFTMAX_AUTO},
                  /* 147 slices of 16384 a row, more than the SMs, and more tickets than
                   * blocks fit (8 x 147 against 4 x 132 on an H100/H200): the pipelined
                   * split-held kernel in a cooperative launch, after dependents and before one */
                  {FLASHCL_BF16, 8, 2400000, FLASHCL_SOFTMAX_AUTO}};
    (void)state;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const flashcl_dtype dt = shapes[i].dt;
        const int64_t rows = shapes[i].rows, cols = shapes[i].cols;
        const size_t es = host_ref_dtype_size(dt), elems = (size_t)(rows * cols),
                     bytes = elems * es;
        const float scale = (float)cols / 4.0f;
        unsigned char *first = malloc(bytes), *stepped = malloc(bytes), *next = malloc(bytes),
                      *chained = malloc(bytes), *poison = malloc(bytes);
        float *row = malloc((size_t)cols * sizeof *row);
        uint64_t seed = 777 + i;
        td_deviceptr dev[2];
        flashcl_buffer *buf[2];
        char what[96];
        assert_non_null(first), assert_non_null(stepped), assert_non_null(next);
        assert_non_null(chained), assert_non_null(poison), assert_non_null(row);
        for (int64_t r = 0; r < rows; r++) {
            fill_row(row, cols, r, 0, &seed);
            for (int64_t j = 0; j < cols; j++)
                host_ref_store(dt, first, (size_t)(r * cols + j), row[j]);
        }
        for (size_t e = 0; e < elems; e++) host_ref_store(dt, poison, e, (float)(e % 97) - 48.0f);
        for (int b = 0; b < 2; b++) dev[b] = device_alloc(bytes), buf[b] = wrap(dev[b], bytes);

        /* drained after every link, each link checked */
        upload(dev[0], first, bytes);
        upload(dev[1], poison, bytes);
        memcpy(stepped, first, bytes);
        for (int k = 0; k < LINKS; k++) {
            chain_call(buf[k % 2], buf[(k + 1) % 2], dt, rows, cols, scale, shapes[i].variant);
            assert_int_equal(cu.StreamSynchronize(g_stream), 0);
            download(next, dev[(k + 1) % 2], bytes);
            snprintf(what, sizeof what, "chain %s %lldx%lld link %d", host_ref_dtype_name(dt),
                     (long long)rows, (long long)cols, k);
            check_rows(dt, stepped, dt, next, rows, cols, cols, 0, 0, scale, 0, what);
            memcpy(stepped, next, bytes);
        }
        /* back to back */
        upload(dev[0], first, bytes);
        upload(dev[1], poison, bytes);
        for (int k = 0; k < LINKS; k++)
            chain_call(buf[k % 2], buf[(k + 1) % 2], dt, rows, cols, scale, shapes[i].variant);
        assert_int_equal(cu.StreamSynchronize(g_stream), 0);
        download(chained, dev[LINKS % 2], bytes);
        for (size_t e = 0; e < elems; e++)
            if (memcmp(chained + e * es, stepped + e * es, es) != 0)
                fail_msg("chain %s %lldx%lld: back-to-back element %zu is %.9g, drained %.9g",
                         host_ref_dtype_name(dt), (long long)rows, (long long)cols, e,
                         (double)host_ref_load(dt, chained, e),
                         (double)host_ref_load(dt, stepped, e));
        for (int b = 0; b < 2; b++) flashcl_buffer_destroy(buf[b]), device_free(dev[b]);
        free(first), free(stepped), free(next), free(chained), free(poison), free(row);
    }
}

static void test_device_info(void **state) {
    flashcl_device_info info;
    int from_cache = 0;
    double seconds = -1;
    (void)state;
    assert_int_equal(flashcl_context_device(g_ctx, &info), FLASHCL_SUCCESS);
    assert_int_equal(info.backend, FLASHCL_BACKEND_CUDA);
    assert_string_equal(info.vendor, "NVIDIA");
    assert_string_equal(info.platform, "CUDA");
    assert_int_equal(info.subgroup_size, 32);
    assert_true(info.compute_units > 0 && info.global_mem_bytes > 0 && info.local_mem_bytes > 0);
    assert_int_equal(flashcl_context_build_info(g_ctx, &from_cache, &seconds), FLASHCL_SUCCESS);
    assert_int_equal(from_cache, 1); /* ahead-of-time fatbinary: nothing compiled */
    assert_true(seconds >= 0);
}

static void test_softmax_on_wrapped_memory(void **state) {
    static const sm_case cases[] = {
        /* xt, yt, rows, cols, pad, offset, scale, log, in_place, special, variant, y_shift */
        {FLASHCL_F32, FLASHCL_F32, 37, 1000, 0, 0, 1.0f, 0, 0, 0, FLASHCL_SOFTMAX_AUTO, 0},
        {FLASHCL_F32, FLASHCL_F32, 14, 777, 3, 1, 0.5f, 1, 0, 1, FLASHCL_SOFTMAX_AUTO, 0},
        {FLASHCL_F16, FLASHCL_BF16, 64, 4096, 8, 0, 0.125f, 1, 0, 0, FLASHCL_SOFTMAX_AUTO, 0},
        {FLASHCL_BF16, FLASHCL_F32, 129, 33, 0, 0, 1.0f, 0, 0, 1, FLASHCL_SOFTMAX_AUTO, 0},
        {FLASHCL_F16, FLASHCL_F16, 100, 2048, 0, 0, 1.0f, 0, 1, 1, FLASHCL_SOFTMAX_AUTO, 0},
        {FLASHCL_F32, FLASHCL_F16, 7, 1, 0, 0, 1.0f, 0, 0, 0, FLASHCL_SOFTMAX_AUTO, 0},
        {FLASHCL_F32, FLASHCL_F32, 5, 40000, 0, 0, 1.0f, 0, 0, 1, FLASHCL_SOFTMAX_AUTO, 0},
        {FLASHCL_F32, FLASHCL_F32, 9, 30000, 0, 0, 1.0f, 1, 0, 1, FLASHCL_SOFTMAX_ROW_IN_REGISTERS, 0},
        {FLASHCL_BF16, FLASHCL_F16, 3, 100000, 5, 3, 2.0f, 0, 0, 1, FLASHCL_SOFTMAX_ONLINE_CHUNKED, 0},
        {FLASHCL_F32, FLASHCL_BF16, 4, 70001, 0, 0, 1.0f, 1, 0, 1, FLASHCL_SOFTMAX_SPLIT_ROW, 0},
        {FLASHCL_F16, FLASHCL_F32, 2, 3000000, 0, 0, 1.0f, 0, 0, 0, FLASHCL_SOFTMAX_SPLIT_ROW, 0},
        {FLASHCL_F32, FLASHCL_F32, 300, 50, 0, 0, -1.0f, 0, 1, 1, FLASHCL_SOFTMAX_SPLIT_ROW, 0},
        /* the staged kernel: a row per chunk over several rounds (next item in flight), with a
         * partial last vector; many chunks per row, in place; several rounds of chunks */
        {FLASHCL_F16, FLASHCL_F16, 396, 30003, 5, 0, 1.0f, 0, 0, 1, FLASHCL_SOFTMAX_AUTO, 0},
        {FLASHCL_F16, FLASHCL_F32, 290, 24000, 0, 0, 0.5f, 1, 0, 0, FLASHCL_SOFTMAX_AUTO, 0},
        {FLASHCL_BF16, FLASHCL_BF16, 3, 50003, 5, 0, 1.0f, 1, 0, 1, FLASHCL_SOFTMAX_AUTO, 0},
        {FLASHCL_F32, FLASHCL_F32, 6, 300001, 3, 0, 0.5f, 0, 1, 1, FLASHCL_SOFTMAX_AUTO, 0},
        {FLASHCL_BF16, FLASHCL_F16, 200, 40000, 0, 0, 1.0f, 0, 0, 1, FLASHCL_SOFTMAX_SPLIT_ROW, 0},
        {FLASHCL_F32, FLASHCL_BF16, 150, 70000, 0, 0, 1.0f, 1, 0, 1, FLASHCL_SOFTMAX_AUTO, 0},
        /* chunks longer than the staged kernel's buffers (the rest read twice): two buffers,
         * one buffer */
        {FLASHCL_F32, FLASHCL_F32, 2, 4000001, 3, 0, 1.0f, 0, 0, 1, FLASHCL_SOFTMAX_AUTO, 0},
        {FLASHCL_F16, FLASHCL_BF16, 2, 9000000, 0, 0, 1.0f, 1, 0, 0, FLASHCL_SOFTMAX_AUTO, 0},
        {FLASHCL_F32, FLASHCL_F32, 2, 8388608, 0, 0, 1.0f, 0, 1, 1, FLASHCL_SOFTMAX_AUTO, 0},
        /* f32 rows of more slices than the pipelined grid (611 of 8192 on a 132-SM GPU at 4
         * blocks an SM: the merged kernel), log-softmax with special rows, into bf16 */
        {FLASHCL_F32, FLASHCL_BF16, 3, 5005312, 0, 0, 0.5f, 1, 0, 1, FLASHCL_SOFTMAX_AUTO, 0},
        /* 16-bit register rows with 32 items per thread (b128x32, b256x32) */
        {FLASHCL_BF16, FLASHCL_BF16, 70, 4000, 0, 0, 1.0f, 0, 0, 1, FLASHCL_SOFTMAX_AUTO, 0},
        {FLASHCL_F16, FLASHCL_F16, 70, 8192, 0, 0, 1.0f, 1, 0, 1, FLASHCL_SOFTMAX_ROW_IN_REGISTERS, 0},
        /* split-held slices: 16 per row (ticketed), 8 and 5 (a cluster per row, the last with a
         * tail) */
        {FLASHCL_F16, FLASHCL_F16, 9, 131072, 0, 0, 1.0f, 0, 0, 1, FLASHCL_SOFTMAX_AUTO, 0},
        {FLASHCL_BF16, FLASHCL_F16, 11, 65536, 0, 0, 1.0f, 1, 0, 1, FLASHCL_SOFTMAX_AUTO, 0},
        {FLASHCL_F32, FLASHCL_BF16, 8, 32771, 2, 1, 0.5f, 1, 0, 1, FLASHCL_SOFTMAX_AUTO, 0},
        /* 16-bit rows of 8193..32768 columns held whole as their bits (one slice, no
         * exchange): the wide kernel past 16384 columns (full rows; rows that leave most
         * threads without a vector, in place), the 256-thread one up to 16384 */
        {FLASHCL_F16, FLASHCL_F16, 13, 32768, 0, 0, 1.0f, 0, 0, 1, FLASHCL_SOFTMAX_AUTO, 0},
        {FLASHCL_BF16, FLASHCL_BF16, 5, 16392, 8, 0, 1.0f, 0, 1, 1, FLASHCL_SOFTMAX_AUTO, 0},
        {FLASHCL_F16, FLASHCL_F32, 21, 16384, 0, 0, 0.25f, 1, 0, 1, FLASHCL_SOFTMAX_AUTO, 0},
        {FLASHCL_BF16, FLASHCL_F16, 4, 8200, 0, 0, -1.0f, 0, 0, 1, FLASHCL_SOFTMAX_AUTO, 0},
        /* the split-held bits kernel's max taken on the bits (scale >= 0: the max, below: the
         * min), with each output dtype: negative scales, a bf16 and an f16 row of slices */
        {FLASHCL_F16, FLASHCL_BF16, 7, 65536, 0, 0, -0.7f, 0, 0, 1, FLASHCL_SOFTMAX_AUTO, 0},
        {FLASHCL_BF16, FLASHCL_F32, 6, 98304, 8, 0, -2.5f, 1, 0, 1, FLASHCL_SOFTMAX_AUTO, 0},
        {FLASHCL_F16, FLASHCL_F16, 5, 49160, 0, 0, 3.0f, 0, 1, 1, FLASHCL_SOFTMAX_AUTO, 0},
        /* rows of 16..31 slices of 16384, which take the narrow blocks (37 and 62 slices of
         * 8192, the last partly filled) */
        {FLASHCL_F16, FLASHCL_F16, 5, 300000, 0, 0, 1.0f, 0, 0, 1, FLASHCL_SOFTMAX_AUTO, 0},
        {FLASHCL_BF16, FLASHCL_F32, 3, 507000, 8, 0, 0.5f, 1, 0, 1, FLASHCL_SOFTMAX_AUTO, 0},
        /* split-held rows that do not start 16-byte aligned, in their shifted layout: 50257
         * columns put row r's start r elements (mod 8) past a boundary, so 9 rows take every
         * head; a view offset, log, f32 out; f32 rows (heads mod 4) into f16; in place; y
         * shifted against x (its vector stores misaligned: element stores) */
        {FLASHCL_F16, FLASHCL_F16, 9, 50257, 0, 0, 1.0f, 0, 0, 1, FLASHCL_SOFTMAX_AUTO, 0},
        {FLASHCL_BF16, FLASHCL_F32, 9, 50257, 0, 1, 0.5f, 1, 0, 1, FLASHCL_SOFTMAX_AUTO, 0},
        {FLASHCL_F32, FLASHCL_F16, 6, 40001, 3, 1, -1.0f, 0, 0, 1, FLASHCL_SOFTMAX_AUTO, 0},
        {FLASHCL_F16, FLASHCL_F16, 5, 70001, 0, 3, 1.0f, 0, 1, 1, FLASHCL_SOFTMAX_AUTO, 0},
        {FLASHCL_F16, FLASHCL_BF16, 9, 50257, 0, 0, 2.0f, 1, 0, 1, FLASHCL_SOFTMAX_AUTO, 3},
        {FLASHCL_F32, FLASHCL_F32, 5, 65539, 0, 2, 1.0f, 0, 0, 1, FLASHCL_SOFTMAX_SPLIT_ROW, 1},
        /* the same in the register rows: 32001 columns (every head in 9 rows), odd short rows
         * with a pad, an offset and y shifted against x, in place (127 columns: element by
         * element, their shift would double the configuration); 32767 16-bit columns, which no
         * configuration covers shifted */
        {FLASHCL_BF16, FLASHCL_F32, 9, 32001, 0, 0, 1.0f, 0, 0, 1, FLASHCL_SOFTMAX_AUTO, 0},
        {FLASHCL_F32, FLASHCL_BF16, 17, 1001, 2, 1, 0.5f, 1, 0, 1, FLASHCL_SOFTMAX_AUTO, 3},
        {FLASHCL_F16, FLASHCL_F16, 33, 127, 0, 5, -1.0f, 0, 1, 1, FLASHCL_SOFTMAX_AUTO, 0},
        {FLASHCL_F16, FLASHCL_F16, 5, 32767, 0, 1, 1.0f, 0, 0, 1, FLASHCL_SOFTMAX_AUTO, 0},
    };
    const size_t n = sizeof cases / sizeof cases[0], unaligned = 10;
    (void)state;
    for (size_t i = 0; i < n; i++) run_case(&cases[i]);
    /* the unaligned cases again element by element (FLASHCL_CUDA_SOFTMAX_NO_SHIFT=1: the path
     * of the short rows that their shift would not fit, src/cuda/softmax.c, run_rows) */
    setenv("FLASHCL_CUDA_SOFTMAX_NO_SHIFT", "1", 1);
    for (size_t i = n - unaligned; i < n; i++) run_case(&cases[i]);
    unsetenv("FLASHCL_CUDA_SOFTMAX_NO_SHIFT");
}

/* The split-held kernels: a call after one whose blocks cleared the state for it and a call
 * after the host cleared it (FLASHCL_CUDA_SOFTMAX_HOST_CLEAR=1, src/cuda/split_state.c) must
 * give the same bits, special rows, log-softmax, negative scales and row tails included, for
 * each kernel: the one AUTO takes (for aligned f32 rows of few slices the narrow one, 4096
 * columns a slice; for 16-bit rows whose last slice of 16384 would be at most half full, 40000
 * and 49160 columns here, the narrow one holding 8192 as bits), the one-ticket f32-held one in
 * blocks of 256 (FLASHCL_CUDA_SOFTMAX_NO_HELD_BITS=1 and FLASHCL_CUDA_SOFTMAX_NO_NARROW=1; also
 * what rows whose length is not a multiple of a 16-byte vector get), the one-ticket bits-held
 * one in blocks of 256 (NO_NARROW=1) and the pipelined one
 * (FLASHCL_CUDA_SOFTMAX_PIPELINE_SLICES=1), on launches of fewer slices than its grid holds and
 * of more (its blocks then take several tickets each), and its ring form
 * (FLASHCL_CUDA_SOFTMAX_PIPELINE_RING=1 too; where three ring blocks fit an SM), which must
 * match the pipelined kernel bit for bit on every shape. Each is checked against host_ref. The
 * pipelined kernel computes the one-ticket kernels' expressions over the same slices, so it
 * must match them bit for bit: the f32-held one for f32 inputs, the bits-held one in blocks of
 * 256 for 16-bit ones. Holders of 16-bit inputs over other slices sum over different trees, so
 * they may differ from it in the last bits. Rows of more slices than SMs take only the
 * pipelined kernel (cooperatively) and are checked against host_ref alone. */
static void test_split_held_kernels_agree(void **state) {
    static const struct {
        flashcl_dtype xt, yt;
        int64_t rows, cols;
        int log;
        float scale;
        int other_plans; /* 1: rows too long for the one-ticket kernels on some GPUs */
    } shapes[] = {{FLASHCL_F16, FLASHCL_F16, 7, 65536, 0, 1.0f, 0},
                  {FLASHCL_F32, FLASHCL_F32, 7, 65537, 1, 1.0f, 0},
                  {FLASHCL_BF16, FLASHCL_BF16, 3, 40000, 0, 1.0f, 0},
                  {FLASHCL_F32, FLASHCL_F32, 4, 49153, 1, 1.0f, 0},
                  {FLASHCL_F16, FLASHCL_F32, 5, 131072, 1, -0.5f, 0},
                  {FLASHCL_BF16, FLASHCL_F16, 4, 49160, 0, 2.0f, 0},
                  {FLASHCL_F16, FLASHCL_BF16, 3, 1048576, 0, 1.0f, 0},
                  {FLASHCL_BF16, FLASHCL_F32, 2, 40001, 1, 1.0f, 0}, /* cols % 8: f32-held only */
                  /* more slices than the pipelined grid's blocks (at most 4 per SM) */
                  {FLASHCL_F16, FLASHCL_F16, 200, 65536, 0, 1.0f, 0},
                  {FLASHCL_F32, FLASHCL_F32, 150, 65536, 1, 1.0f, 0},
                  {FLASHCL_F32, FLASHCL_BF16, 97, 73728, 0, 0.5f, 0},
                  {FLASHCL_F32, FLASHCL_F32, 6, 40000, 0, 1.0f, 0},
                  /* pipelined under AUTO too (at least 32 slices), several tickets a block */
                  {FLASHCL_F16, FLASHCL_F16, 12, 1048576, 1, 1.0f, 0},
                  {FLASHCL_F32, FLASHCL_F32, 20, 300000, 0, -2.0f, 0},
                  /* more slices a row than SMs: only the pipelined kernel, launched
                   * cooperatively; the f32-held and AUTO's other plans are not split-held */
                  {FLASHCL_F16, FLASHCL_F16, 2, 8388608, 0, 1.0f, 1},
                  {FLASHCL_BF16, FLASHCL_F32, 3, 4194304, 1, 0.75f, 1}, /* scaled path */
                  {FLASHCL_F32, FLASHCL_F32, 2, 4194304, 0, 1.0f, 1},
                  /* 1024 slices a row: the merged pipelined kernel (more slices than its grid
                   * has blocks), the ring past twice its grid's (three blocks an SM) */
                  {FLASHCL_F32, FLASHCL_F32, 2, 8388608, 1, 1.0f, 1},
                  /* 1024 16-bit slices a row: more than the pipelined kernel takes (4 blocks an
                   * SM), so AUTO's ring kernel where 3 ring blocks fit an SM */
                  {FLASHCL_F16, FLASHCL_F16, 1, 16777216, 0, 1.0f, 1},
                  /* 130 narrow slices of 4096 (AUTO's one-ticket kernel on a GPU of at least
                   * 130 SMs): past 128 slices a row, gather_row_stats' block form there too */
                  {FLASHCL_F32, FLASHCL_F32, 2, 532480, 1, 1.0f, 1}};
    (void)state;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const flashcl_dtype xt = shapes[s].xt, yt = shapes[s].yt;
        const int64_t rows = shapes[s].rows, cols = shapes[s].cols;
        const size_t n = (size_t)(rows * cols);
        const size_t x_bytes = n * host_ref_dtype_size(xt), y_bytes = n * host_ref_dtype_size(yt);
        unsigned char *x_host = malloc(x_bytes), *y_first = malloc(y_bytes);
        unsigned char *y_host = malloc(y_bytes), *y_bits = malloc(y_bytes);
        unsigned char *y_pipelined = malloc(y_bytes);
        float *row = malloc((size_t)cols * sizeof *row);
        char what[96];
        flashcl_softmax_params params = {shapes[s].scale, shapes[s].log, FLASHCL_SOFTMAX_AUTO};
        flashcl_buffer *xb = NULL, *yb = NULL;
        flashcl_tensor x, y;
        uint64_t seed = 777;
        assert_true(x_host && y_first && y_host && y_bits && y_pipelined && row);
        for (int64_t r = 0; r < rows; r++) {
            fill_row(row, cols, r, 1, &seed);
            for (int64_t j = 0; j < cols; j++) host_ref_store(xt, x_host, (size_t)(r * cols + j), row[j]);
        }
        assert_int_equal(flashcl_buffer_create(g_ctx, x_bytes, &xb), FLASHCL_SUCCESS);
        assert_int_equal(flashcl_buffer_create(g_ctx, y_bytes, &yb), FLASHCL_SUCCESS);
        assert_int_equal(flashcl_buffer_write(xb, 0, x_host, x_bytes), FLASHCL_SUCCESS);
        memset(&x, 0, sizeof x);
        x.buffer = xb, x.dtype = xt, x.ndim = 2;
        x.shape[0] = rows, x.shape[1] = cols, x.strides[0] = cols, x.strides[1] = 1;
        y = x;
        y.buffer = yb, y.dtype = yt;
        snprintf(what, sizeof what, "%s->%s %lldx%lld scale %g%s", host_ref_dtype_name(xt),
                 host_ref_dtype_name(yt), (long long)rows, (long long)cols,
                 (double)shapes[s].scale, shapes[s].log ? " log" : "");
        /* kernel 0: AUTO's, 1: f32-held (256), 2: bits-held (256), 3: pipelined, 4: its ring
         * form; clear 0: by the kernels, 1: the host */
        for (int pass = 0; pass < 10; pass++) {
            const int kernel = pass / 2, host_clears = pass % 2;
            static const char *const names[] = {"AUTO's", "f32-held", "bits-held", "pipelined",
                                                "ring"};
            unsigned char *out = host_clears ? y_host : y_first;
            memset(out, 0x5a, y_bytes);
            assert_int_equal(flashcl_buffer_write(yb, 0, out, y_bytes), FLASHCL_SUCCESS); /* poison */
            if (host_clears) setenv("FLASHCL_CUDA_SOFTMAX_HOST_CLEAR", "1", 1);
            if (kernel == 1) setenv("FLASHCL_CUDA_SOFTMAX_NO_HELD_BITS", "1", 1);
            if (kernel == 1 || kernel == 2) setenv("FLASHCL_CUDA_SOFTMAX_NO_NARROW", "1", 1);
            if (kernel >= 3) setenv("FLASHCL_CUDA_SOFTMAX_PIPELINE_SLICES", "1", 1);
            if (kernel == 4) setenv("FLASHCL_CUDA_SOFTMAX_PIPELINE_RING", "1", 1);
            if (flashcl_softmax(g_ctx, &params, &x, &y) != FLASHCL_SUCCESS)
                fail_msg("flashcl_softmax: %s", flashcl_last_error());
            unsetenv("FLASHCL_CUDA_SOFTMAX_HOST_CLEAR");
            unsetenv("FLASHCL_CUDA_SOFTMAX_NO_HELD_BITS");
            unsetenv("FLASHCL_CUDA_SOFTMAX_NO_NARROW");
            unsetenv("FLASHCL_CUDA_SOFTMAX_PIPELINE_SLICES");
            unsetenv("FLASHCL_CUDA_SOFTMAX_PIPELINE_RING");
            assert_int_equal(flashcl_buffer_read(yb, 0, out, y_bytes), FLASHCL_SUCCESS);
            if (!host_clears) continue;
            if (memcmp(y_first, y_host, y_bytes) != 0)
                fail_msg("%s: the split-held kernel's bits differ after kernel and host "
                         "clearing (%s)", what, names[kernel]);
            check_rows(xt, x_host, yt, y_first, rows, cols, cols, 0, 0, shapes[s].scale,
                       shapes[s].log, what);
            /* the one-ticket kernel of the pipelined one's holder: bits-held in blocks of 256
             * for 16-bit inputs (where the rows allow, else f32-held as both fall back to),
             * f32-held for f32 ones */
            if (kernel == (xt == FLASHCL_F32 ? 1 : 2)) memcpy(y_bits, y_host, y_bytes);
            if (kernel == 3 && !shapes[s].other_plans && memcmp(y_bits, y_host, y_bytes) != 0)
                fail_msg("%s: the pipelined kernel's bits differ from the one-ticket kernel's",
                         what);
            if (kernel == 3) memcpy(y_pipelined, y_host, y_bytes);
            if (kernel == 4 && memcmp(y_pipelined, y_host, y_bytes) != 0)
                fail_msg("%s: the ring kernel's bits differ from the pipelined kernel's", what);
        }
        flashcl_buffer_destroy(xb);
        flashcl_buffer_destroy(yb);
        free(x_host), free(y_first), free(y_host), free(y_bits), free(y_pipelined), free(row);
    }
}

static void test_forced_registers_unsupported_for_long_rows(void **state) {
    flashcl_buffer *b = NULL;
    flashcl_tensor x;
    flashcl_softmax_params p = {1.0f, 0, FLASHCL_SOFTMAX_ROW_IN_REGISTERS};
    (void)state;
    assert_int_equal(flashcl_buffer_create(g_ctx, 4 * 65536, &b), FLASHCL_SUCCESS);
    assert_non_null(flashcl_buffer_cuda_ptr(b));
    memset(&x, 0, sizeof x);
    x.buffer = b, x.dtype = FLASHCL_F32, x.ndim = 2;
    x.shape[0] = 1, x.shape[1] = 65536, x.strides[0] = 65536, x.strides[1] = 1;
    assert_int_equal(flashcl_softmax(g_ctx, &p, &x, &x), FLASHCL_UNSUPPORTED);
    assert_true(strlen(flashcl_last_error()) > 0);
    flashcl_buffer_destroy(b);
}

static void test_wrap_rejects_bad_memory(void **state) {
    flashcl_buffer *b = NULL;
    static float host_memory[64];
    td_deviceptr p = device_alloc(4096);
    (void)state;
    assert_int_equal(flashcl_buffer_wrap_cuda(g_ctx, host_memory, sizeof host_memory, &b),
                     FLASHCL_INVALID_ARGUMENT);
    assert_int_equal(flashcl_buffer_wrap_cuda(g_ctx, (void *)(uintptr_t)p, 8192, &b),
                     FLASHCL_INVALID_ARGUMENT); /* past the allocation */
    assert_int_equal(flashcl_buffer_wrap_cuda(g_ctx, NULL, 16, &b), FLASHCL_INVALID_ARGUMENT);
    assert_int_equal(flashcl_buffer_wrap_cuda(g_ctx, (void *)(uintptr_t)p, 0, &b),
                     FLASHCL_INVALID_ARGUMENT);
    assert_null(b);
    /* Inside the allocation, at an offset: fine; the pointer comes back unchanged. */
    assert_int_equal(flashcl_buffer_wrap_cuda(g_ctx, (void *)(uintptr_t)(p + 1024), 3072, &b),
                     FLASHCL_SUCCESS);
    assert_ptr_equal(flashcl_buffer_cuda_ptr(b), (void *)(uintptr_t)(p + 1024));
    assert_int_equal(flashcl_buffer_size(b), 3072);
    flashcl_buffer_destroy(b);
    device_free(p);
}

/* Back to flashcl's own stream, and onto the legacy default stream: reads and writes through
 * flashcl stay ordered with its work on each. */
static void test_stream_switching(void **state) {
    float in[256], out[256];
    flashcl_buffer *b = NULL;
    void *const streams[] = {NULL, FLASHCL_CUDA_STREAM_LEGACY, g_stream};
    (void)state;
    for (int i = 0; i < 256; i++) in[i] = (float)i;
    assert_int_equal(flashcl_buffer_create(g_ctx, sizeof in, &b), FLASHCL_SUCCESS);
    for (size_t s = 0; s < 3; s++) {
        assert_int_equal(flashcl_context_set_cuda_stream(g_ctx, streams[s]), FLASHCL_SUCCESS);
        assert_int_equal(flashcl_buffer_write(b, 0, in, sizeof in), FLASHCL_SUCCESS);
        memset(out, 0, sizeof out);
        assert_int_equal(flashcl_buffer_read(b, 0, out, sizeof out), FLASHCL_SUCCESS);
        assert_memory_equal(in, out, sizeof in);
        assert_int_equal(flashcl_finish(g_ctx), FLASHCL_SUCCESS);
    }
    flashcl_buffer_destroy(b);
}

/* ---- setup ------------------------------------------------------------------------------------ */

/* flashcl's first CUDA device, and the test's handles for the same device. */
static int setup(void) {
    char why[256];
    size_t n = 0;
    flashcl_device_info info[64];
    flashcl_context_options o = {FLASHCL_BACKEND_CUDA, -1, NULL, ""};
    flashcl_buffer *probe = NULL;
    int ordinal = -1;
    flashcl_status st;
    unsetenv("FLASHCL_BACKEND"); /* this test chooses its device itself */
    unsetenv("FLASHCL_DEVICE");
    if (!td_load(&cu, why, sizeof why)) {
        printf("SKIP: %s\n", why);
        return 0;
    }
    st = flashcl_list_devices(info, 64, &n);
    if (st != FLASHCL_SUCCESS) {
        fprintf(stderr, "flashcl_list_devices: %s\n", flashcl_last_error());
        exit(1);
    }
    st = flashcl_context_create(&o, &g_ctx);
    if (st == FLASHCL_DEVICE_NOT_FOUND) {
        printf("SKIP: no CUDA device for flashcl: %s\n", flashcl_last_error());
        return 0;
    }
    if (st != FLASHCL_SUCCESS) {
        fprintf(stderr, "flashcl_context_create(CUDA): %s\n", flashcl_last_error());
        exit(1);
    }
    /* Which CUDA ordinal flashcl chose: ask the driver about memory flashcl allocated. */
    if (flashcl_buffer_create(g_ctx, 256, &probe) != FLASHCL_SUCCESS ||
        cu.PointerGetAttribute(&ordinal, TD_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                               (td_deviceptr)(uintptr_t)flashcl_buffer_cuda_ptr(probe)) != 0 ||
        cu.DeviceGet(&g_device, ordinal) != 0 ||
        cu.DevicePrimaryCtxRetain(&g_primary, g_device) != 0) {
        fprintf(stderr, "cannot find the device of flashcl's context: %s\n", flashcl_last_error());
        exit(1);
    }
    flashcl_buffer_destroy(probe);
    if (cu.CtxPushCurrent(g_primary) != 0 || cu.StreamCreate(&g_stream, TD_STREAM_NON_BLOCKING) != 0) {
        fprintf(stderr, "cuStreamCreate failed\n");
        exit(1);
    }
    {
        td_context c;
        cu.CtxPopCurrent(&c);
    }
    if (flashcl_context_set_cuda_stream(g_ctx, g_stream) != FLASHCL_SUCCESS) {
        fprintf(stderr, "flashcl_context_set_cuda_stream: %s\n", flashcl_last_error());
        exit(1);
    }
    printf("device: CUDA ordinal %d\n", ordinal);
    return 1;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_device_info),
        cmocka_unit_test(test_softmax_on_wrapped_memory),
        cmocka_unit_test(test_split_held_kernels_agree),
        cmocka_unit_test(test_forced_registers_unsupported_for_long_rows),
        cmocka_unit_test(test_wrap_rejects_bad_memory),
        cmocka_unit_test(test_stream_switching),
        cmocka_unit_test(test_dependent_launch_chain),
    };
    int failures;
    if (!setup()) return 77;
    failures = cmocka_run_group_tests(tests, NULL, NULL);
    flashcl_context_set_cuda_stream(g_ctx, NULL);
    flashcl_context_destroy(g_ctx);
    cu.CtxPushCurrent(g_primary);
    cu.StreamDestroy(g_stream);
    {
        td_context c;
        cu.CtxPopCurrent(&c);
    }
    cu.DevicePrimaryCtxRelease(g_device);
    return failures == 77 ? 1 : failures;
}
