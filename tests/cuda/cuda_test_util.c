/* The helpers shared by test_cuda_interop.c and test_cuda_softmax_kernels.c (cuda_test_util.h):
 * the driver calls on caller-owned device memory, the checker against host_ref, the inputs, and
 * the setup that hands flashcl the test's own stream. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_test_util.h"
#include "flashcl_cuda.h"

td_api cu;
static td_device g_device;
static td_context g_primary;   /* the device's primary context: the one flashcl uses */
td_stream g_stream;            /* the test's own stream, handed to flashcl */
flashcl_context *g_ctx;

/* ---- driver helpers (every call checked) ----------------------------------------------------- */

static void push(void) { assert_int_equal(cu.CtxPushCurrent(g_primary), 0); }
static void pop(void) {
    td_context c;
    assert_int_equal(cu.CtxPopCurrent(&c), 0);
}

td_deviceptr device_alloc(size_t bytes) {
    td_deviceptr p = 0;
    push();
    assert_int_equal(cu.MemAlloc(&p, bytes), 0);
    pop();
    return p;
}

void device_free(td_deviceptr p) {
    push();
    assert_int_equal(cu.MemFree(p), 0); /* fails if flashcl freed it */
    pop();
}

/* cuMemcpyHtoD from pageable memory returns once the data is staged, not when it has landed,
 * and it runs on the legacy stream, which flashcl's work on the test's non-blocking stream is
 * not ordered after: without the wait, the tail of an upload (y's poison) could land after the
 * kernel wrote there (seen on an H200: the last rows read back as poison now and then). */
void upload(td_deviceptr dst, const void *src, size_t bytes) {
    push();
    assert_int_equal(cu.MemcpyHtoD(dst, src, bytes), 0);
    assert_int_equal(cu.CtxSynchronize(), 0);
    pop();
}

void download(void *dst, td_deviceptr src, size_t bytes) {
    push();
    assert_int_equal(cu.MemcpyDtoH(dst, src, bytes), 0);
    pop();
}

flashcl_buffer *wrap(td_deviceptr p, size_t bytes) {
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
void check_rows(flashcl_dtype xt, const void *x_host, flashcl_dtype yt, const void *y_host,
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

/* Row r of the input: random in [-8, 8), or with `special` rows of torch's special cases. */
void fill_row(float *row, int64_t cols, int64_t r, int special, uint64_t *seed) {
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

/* ---- setup ------------------------------------------------------------------------------------ */

/* flashcl's first CUDA device, and the test's handles for the same device. */
int cuda_test_setup(void) {
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

/* Gives flashcl its own stream back, releases what cuda_test_setup made, and returns main's exit
 * code: the failures, but 1 where 77 of them would read as a skip. */
int cuda_test_finish(int failures) {
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
