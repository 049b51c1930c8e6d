/* CUDA interop: softmax on caller-owned device memory. The test allocates with the driver API
 * itself (dlopen, tests/cuda/cuda_driver.h), uploads with cuMemcpyHtoD, wraps the memory with
 * flashcl_buffer_wrap_cuda, runs flashcl_softmax on a stream of its own set with
 * flashcl_context_set_cuda_stream, waits on that stream, downloads with cuMemcpyDtoH and checks
 * every element against host_ref (unaligned rows too, which the split-held kernel holds in their
 * shifted layout). Also the context's device (the CUDA backend, its kernels loaded, not
 * compiled), the memory flashcl_buffer_wrap_cuda refuses, and switching between the test's
 * stream, flashcl's own and the legacy default stream. The softmax kernels' own checks (the
 * split-held kernels agreeing bit for bit, chains of dependent launches) are in
 * test_cuda_softmax_kernels.c; the helpers and the setup both use, in cuda_test_util.c. Without a
 * CUDA device it prints "SKIP: ..." and exits 77. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_test_util.h"
#include "flashcl_cuda.h"

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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_device_info),
        cmocka_unit_test(test_softmax_on_wrapped_memory),
        cmocka_unit_test(test_wrap_rejects_bad_memory),
        cmocka_unit_test(test_stream_switching),
    };
    if (!cuda_test_setup()) return 77;
    return cuda_test_finish(cmocka_run_group_tests(tests, NULL, NULL));
}
