/* Buffers and OpenCL interop: create/write/read round trips with offsets, every argument
 * error (and that a failed read leaves the destination untouched), ordering of writes with
 * enqueued work, contexts destroyed with live buffers, and the flashcl_opencl.h interop:
 * a context adopted from the caller's own cl_context/device/queue, wrapped cl_mems, and the
 * cl objects of a normal context used to enqueue the caller's own commands in order. */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "flashcl_opencl.h"

static flashcl_context *g_ctx;

/* y (f32, rows x cols, contiguous) against host_ref of x. */
static void check_f32_softmax(const float *x, const float *y, int64_t rows, int64_t cols)
{
    double *ref = malloc((size_t)cols * sizeof(double));
    assert_non_null(ref);
    for (int64_t r = 0; r < rows; r++) {
        host_ref_softmax_row(x + r * cols, ref, cols, 1.0f, 0);
        for (int64_t j = 0; j < cols; j++)
            if (!tu_value_ok(FLASHCL_F32, y[r * cols + j], ref[j], tu_softmax_tol(ref[j], 0)))
                fail_msg("row %d col %d: got %.9g, ref %.12g", (int)r, (int)j,
                         (double)y[r * cols + j], ref[j]);
    }
    free(ref);
}

static void fill(float *x, size_t n, uint64_t seed)
{
    tu_rng rng;
    tu_rng_seed(&rng, seed);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)tu_rng_uniform(&rng, -8, 8);
}

static void test_round_trip(void **state)
{
    (void)state;
    const size_t n = 1000;
    unsigned char src[1000], dst[1000], want[1000];
    for (size_t i = 0; i < n; i++)
        src[i] = (unsigned char)(i * 37 + 11);
    flashcl_buffer *b = NULL;
    assert_int_equal(flashcl_buffer_create(g_ctx, n, &b), FLASHCL_SUCCESS);
    assert_non_null(b);
    assert_int_equal(flashcl_buffer_size(b), n);
    assert_int_equal(flashcl_buffer_write(b, 0, src, n), FLASHCL_SUCCESS);
    memset(dst, 0, n);
    assert_int_equal(flashcl_buffer_read(b, 0, dst, n), FLASHCL_SUCCESS);
    assert_memory_equal(dst, src, n);

    /* a partial write at an odd offset, partial reads at offsets */
    unsigned char patch[17];
    memset(patch, 0xee, sizeof patch);
    assert_int_equal(flashcl_buffer_write(b, 333, patch, sizeof patch), FLASHCL_SUCCESS);
    memcpy(want, src, n);
    memcpy(want + 333, patch, sizeof patch);
    assert_int_equal(flashcl_buffer_read(b, 0, dst, n), FLASHCL_SUCCESS);
    assert_memory_equal(dst, want, n);
    memset(dst, 0, n);
    assert_int_equal(flashcl_buffer_read(b, 329, dst, 25), FLASHCL_SUCCESS);
    assert_memory_equal(dst, want + 329, 25);
    /* the last byte exactly */
    assert_int_equal(flashcl_buffer_read(b, n - 1, dst, 1), FLASHCL_SUCCESS);
    assert_int_equal(dst[0], want[n - 1]);
    assert_int_equal(flashcl_buffer_write(b, n - 1, patch, 1), FLASHCL_SUCCESS);
    flashcl_buffer_destroy(b);

    /* a one-byte buffer, and a large one */
    assert_int_equal(flashcl_buffer_create(g_ctx, 1, &b), FLASHCL_SUCCESS);
    assert_int_equal(flashcl_buffer_size(b), 1);
    flashcl_buffer_destroy(b);
    size_t big = (size_t)48 << 20;
    unsigned char *hb = malloc(big), *hr = malloc(big);
    assert_non_null(hb);
    assert_non_null(hr);
    for (size_t i = 0; i < big; i++)
        hb[i] = (unsigned char)(i ^ (i >> 9));
    assert_int_equal(flashcl_buffer_create(g_ctx, big, &b), FLASHCL_SUCCESS);
    assert_int_equal(flashcl_buffer_write(b, 0, hb, big), FLASHCL_SUCCESS);
    assert_int_equal(flashcl_buffer_read(b, 0, hr, big), FLASHCL_SUCCESS);
    assert_memory_equal(hb, hr, big);
    flashcl_buffer_destroy(b);
    free(hb);
    free(hr);
    flashcl_buffer_destroy(NULL); /* ignored */
    assert_int_equal(flashcl_buffer_size(NULL), 0);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    flashcl_buffer *b = NULL, *sentinel = (flashcl_buffer *)&b;
    unsigned char buf[64];

    flashcl_buffer *out = sentinel;
    assert_int_equal(flashcl_buffer_create(g_ctx, 0, &out), FLASHCL_INVALID_ARGUMENT);
    assert_true(strlen(flashcl_last_error()) > 0);
    assert_ptr_equal(out, sentinel); /* *out not written on failure */
    assert_int_equal(flashcl_buffer_create(NULL, 16, &out), FLASHCL_INVALID_ARGUMENT);
    assert_true(strlen(flashcl_last_error()) > 0);
    assert_int_equal(flashcl_buffer_create(g_ctx, 16, NULL), FLASHCL_INVALID_ARGUMENT);
    assert_true(strlen(flashcl_last_error()) > 0);

    /* absurd sizes: not a success, and not a crash */
    flashcl_status st = flashcl_buffer_create(g_ctx, SIZE_MAX, &out);
    assert_true(st == FLASHCL_OUT_OF_MEMORY || st == FLASHCL_INVALID_ARGUMENT);
    assert_true(strlen(flashcl_last_error()) > 0);
    st = flashcl_buffer_create(g_ctx, SIZE_MAX / 2, &out);
    assert_true(st == FLASHCL_OUT_OF_MEMORY || st == FLASHCL_INVALID_ARGUMENT);

    assert_int_equal(flashcl_buffer_create(g_ctx, 64, &b), FLASHCL_SUCCESS);
    memset(buf, 0x11, sizeof buf);
    assert_int_equal(flashcl_buffer_write(b, 0, buf, 64), FLASHCL_SUCCESS);

    /* out-of-range (offset, bytes) for a 64-byte buffer, overflowing sums included. The host
     * side has 128 bytes; a claimed length beyond that must be rejected before any copy. */
    unsigned char junk[128];
    memset(junk, 0x77, sizeof junk);
    const size_t bad[][2] = {{0, 65},       {1, 64},       {64, 1},       {63, 2},
                             {65, 1},       {64, 64},       {SIZE_MAX, 2}, {2, SIZE_MAX},
                             {SIZE_MAX, SIZE_MAX}, {SIZE_MAX - 10, 20}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        st = flashcl_buffer_write(b, bad[i][0], junk, bad[i][1]);
        if (st != FLASHCL_INVALID_ARGUMENT)
            fail_msg("write(offset %zu, bytes %zu) into 64 bytes: %s", bad[i][0], bad[i][1],
                     flashcl_status_string(st));
        assert_true(strlen(flashcl_last_error()) > 0);
    }
    unsigned char check[64];
    assert_int_equal(flashcl_buffer_read(b, 0, check, 64), FLASHCL_SUCCESS);
    assert_memory_equal(check, buf, 64); /* nothing was written */

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        unsigned char dst[128];
        memset(dst, 0x5a, sizeof dst);
        st = flashcl_buffer_read(b, bad[i][0], dst, bad[i][1]);
        if (st != FLASHCL_INVALID_ARGUMENT)
            fail_msg("read(offset %zu, bytes %zu) from 64 bytes: %s", bad[i][0], bad[i][1],
                     flashcl_status_string(st));
        assert_true(strlen(flashcl_last_error()) > 0);
        for (size_t k = 0; k < sizeof dst; k++)
            if (dst[k] != 0x5a)
                fail_msg("a rejected read(offset %zu, bytes %zu) wrote to the destination",
                         bad[i][0], bad[i][1]);
    }

    /* NULL pointers */
    assert_int_equal(flashcl_buffer_write(NULL, 0, buf, 4), FLASHCL_INVALID_ARGUMENT);
    assert_int_equal(flashcl_buffer_write(b, 0, NULL, 4), FLASHCL_INVALID_ARGUMENT);
    assert_true(strlen(flashcl_last_error()) > 0);
    assert_int_equal(flashcl_buffer_read(NULL, 0, buf, 4), FLASHCL_INVALID_ARGUMENT);
    assert_int_equal(flashcl_buffer_read(b, 0, NULL, 4), FLASHCL_INVALID_ARGUMENT);
    assert_true(strlen(flashcl_last_error()) > 0);

    assert_int_equal(flashcl_buffer_read(b, 0, check, 64), FLASHCL_SUCCESS);
    assert_memory_equal(check, buf, 64);
    flashcl_buffer_destroy(b);
}

/* Writes are ordered with enqueued work: rewriting x right after a softmax that reads it
 * must not change that softmax's result. */
static void test_ordering(void **state)
{
    (void)state;
    const int64_t rows = 64, cols = 4097;
    const size_t n = (size_t)(rows * cols), bytes = n * sizeof(float);
    float *x1 = malloc(bytes), *x2 = malloc(bytes), *y1 = malloc(bytes), *y2 = malloc(bytes);
    assert_non_null(x1);
    assert_non_null(x2);
    assert_non_null(y1);
    assert_non_null(y2);
    fill(x1, n, 1);
    fill(x2, n, 2);
    flashcl_buffer *xb, *yb1, *yb2;
    assert_int_equal(flashcl_buffer_create(g_ctx, bytes, &xb), FLASHCL_SUCCESS);
    assert_int_equal(flashcl_buffer_create(g_ctx, bytes, &yb1), FLASHCL_SUCCESS);
    assert_int_equal(flashcl_buffer_create(g_ctx, bytes, &yb2), FLASHCL_SUCCESS);
    flashcl_tensor x = tu_view2d(xb, FLASHCL_F32, rows, cols);
    flashcl_tensor t1 = tu_view2d(yb1, FLASHCL_F32, rows, cols);
    flashcl_tensor t2 = tu_view2d(yb2, FLASHCL_F32, rows, cols);
    for (int round = 0; round < 3; round++) {
        assert_int_equal(flashcl_buffer_write(xb, 0, x1, bytes), FLASHCL_SUCCESS);
        assert_int_equal(flashcl_softmax(g_ctx, NULL, &x, &t1), FLASHCL_SUCCESS);
        assert_int_equal(flashcl_buffer_write(xb, 0, x2, bytes), FLASHCL_SUCCESS);
        assert_int_equal(flashcl_softmax(g_ctx, NULL, &x, &t2), FLASHCL_SUCCESS);
        /* reuse the host source right away: the write returned, so it may be reused */
        memset(x2, 0, bytes);
        fill(x2, n, 2);
        assert_int_equal(flashcl_buffer_read(yb1, 0, y1, bytes), FLASHCL_SUCCESS);
        assert_int_equal(flashcl_buffer_read(yb2, 0, y2, bytes), FLASHCL_SUCCESS);
        check_f32_softmax(x1, y1, rows, cols);
        check_f32_softmax(x2, y2, rows, cols);
    }
    assert_int_equal(flashcl_finish(g_ctx), FLASHCL_SUCCESS);
    flashcl_buffer_destroy(xb);
    flashcl_buffer_destroy(yb1);
    flashcl_buffer_destroy(yb2);
    free(x1);
    free(x2);
    free(y1);
    free(y2);
}

static void test_destroy_context_with_live_buffers(void **state)
{
    (void)state;
    for (int round = 0; round < 3; round++) {
        flashcl_context *ctx = NULL;
        assert_int_equal(tu_context_create(tu_cache_dir(), &ctx), FLASHCL_SUCCESS);
        flashcl_buffer *b[5];
        for (int i = 0; i < 5; i++)
            assert_int_equal(flashcl_buffer_create(ctx, 4096 * (size_t)(i + 1), &b[i]),
                             FLASHCL_SUCCESS);
        flashcl_buffer_destroy(b[1]); /* one released by the user, the rest by the context */
        flashcl_buffer_destroy(b[3]);
        if (round == 1) {
            /* with work still in flight */
            float x[256];
            fill(x, 256, 7);
            assert_int_equal(flashcl_buffer_write(b[0], 0, x, sizeof x), FLASHCL_SUCCESS);
            flashcl_tensor tx = tu_view2d(b[0], FLASHCL_F32, 4, 64);
            flashcl_tensor ty = tu_view2d(b[2], FLASHCL_F32, 4, 64);
            assert_int_equal(flashcl_softmax(ctx, NULL, &tx, &ty), FLASHCL_SUCCESS);
        }
        flashcl_context_destroy(ctx);
    }
}

/* ---- OpenCL interop ------------------------------------------------------------------------- */

typedef struct user_cl {
    cl_platform_id platform;
    cl_device_id device;
    cl_context context;
    cl_command_queue queue;
} user_cl;

static int user_cl_open(user_cl *u)
{
    cl_uint np = 0;
    memset(u, 0, sizeof *u);
    if (clGetPlatformIDs(0, NULL, &np) != CL_SUCCESS || np == 0)
        return 0;
    cl_platform_id *ps = calloc(np, sizeof *ps);
    assert_non_null(ps);
    assert_int_equal(clGetPlatformIDs(np, ps, NULL), CL_SUCCESS);
    for (cl_uint i = 0; i < np && !u->device; i++) {
        cl_device_id d;
        cl_uint nd = 0;
        if (clGetDeviceIDs(ps[i], CL_DEVICE_TYPE_ALL, 1, &d, &nd) == CL_SUCCESS && nd > 0) {
            u->platform = ps[i];
            u->device = d;
        }
    }
    free(ps);
    if (!u->device)
        return 0;
    cl_int err;
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)u->platform,
                                     0};
    u->context = clCreateContext(props, 1, &u->device, NULL, NULL, &err);
    assert_int_equal(err, CL_SUCCESS);
    u->queue = clCreateCommandQueue(u->context, u->device, 0, &err);
    assert_int_equal(err, CL_SUCCESS);
    return 1;
}

static cl_uint refcount_ctx(cl_context c)
{
    cl_uint n = 0;
    assert_int_equal(clGetContextInfo(c, CL_CONTEXT_REFERENCE_COUNT, sizeof n, &n, NULL),
                     CL_SUCCESS);
    return n;
}

static cl_uint refcount_queue(cl_command_queue q)
{
    cl_uint n = 0;
    assert_int_equal(clGetCommandQueueInfo(q, CL_QUEUE_REFERENCE_COUNT, sizeof n, &n, NULL),
                     CL_SUCCESS);
    return n;
}

static cl_uint refcount_mem(cl_mem m)
{
    cl_uint n = 0;
    assert_int_equal(clGetMemObjectInfo(m, CL_MEM_REFERENCE_COUNT, sizeof n, &n, NULL),
                     CL_SUCCESS);
    return n;
}

/* A driver drops the references its finished commands held on a worker thread, some time
 * after the command completed (Rusticl does), so a count is polled down for up to 5 s. It
 * can only fall while nothing new is enqueued, so the wait cannot hide an extra reference of
 * flashcl's: that one never goes away and the count stays above `want`. */
static cl_uint refcount_mem_settled(cl_mem m, cl_uint want)
{
    cl_uint n = refcount_mem(m);
    for (int i = 0; i < 500 && n > want; i++) {
        struct timespec ten_ms = {0, 10 * 1000 * 1000};
        nanosleep(&ten_ms, NULL);
        n = refcount_mem(m);
    }
    return n;
}

static void test_interop_adopt(void **state)
{
    (void)state;
    user_cl u;
    if (!user_cl_open(&u)) {
        print_message("no OpenCL device for the interop test\n");
        skip();
    }
    cl_uint ctx_refs = refcount_ctx(u.context), q_refs = refcount_queue(u.queue);

    flashcl_context *fc = NULL, *sentinel = (flashcl_context *)&u;
    flashcl_context *out = sentinel;
    assert_int_equal(flashcl_context_create_from_cl(NULL, u.device, u.queue, &out),
                     FLASHCL_INVALID_ARGUMENT);
    assert_true(strlen(flashcl_last_error()) > 0);
    assert_int_equal(flashcl_context_create_from_cl(u.context, NULL, u.queue, &out),
                     FLASHCL_INVALID_ARGUMENT);
    assert_int_equal(flashcl_context_create_from_cl(u.context, u.device, NULL, &out),
                     FLASHCL_INVALID_ARGUMENT);
    assert_int_equal(flashcl_context_create_from_cl(u.context, u.device, u.queue, NULL),
                     FLASHCL_INVALID_ARGUMENT);
    assert_ptr_equal(out, sentinel);

    /* an out-of-order queue is rejected (when the platform can make one at all) */
    {
        cl_int err;
        cl_command_queue ooo = clCreateCommandQueue(
            u.context, u.device, CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, &err);
        if (err == CL_SUCCESS && ooo) {
            flashcl_context *bad = NULL;
            flashcl_status st = flashcl_context_create_from_cl(u.context, u.device, ooo, &bad);
            if (st == FLASHCL_SUCCESS) {
                flashcl_context_destroy(bad);
                fail_msg("an out-of-order queue was accepted");
            }
            assert_true(st == FLASHCL_INVALID_ARGUMENT || st == FLASHCL_UNSUPPORTED);
            assert_true(strlen(flashcl_last_error()) > 0);
            clReleaseCommandQueue(ooo);
        }
    }

    /* adopt and destroy with no work in between: flashcl's references come and go exactly
     * (once commands have run, a driver may hold references of its own, e.g. PoCL keeps one
     * on the queue for its last command, so exact counts are only checked here) */
    flashcl_status st = flashcl_context_create_from_cl(u.context, u.device, u.queue, &fc);
    if (st != FLASHCL_SUCCESS)
        fail_msg("create_from_cl: %s: %s", flashcl_status_string(st), flashcl_last_error());
    assert_true(refcount_ctx(u.context) > ctx_refs); /* retained */
    assert_true(refcount_queue(u.queue) > q_refs);
    flashcl_context_destroy(fc);
    assert_int_equal(refcount_ctx(u.context), ctx_refs);
    assert_int_equal(refcount_queue(u.queue), q_refs);

    st = flashcl_context_create_from_cl(u.context, u.device, u.queue, &fc);
    assert_int_equal(st, FLASHCL_SUCCESS);

    cl_context c2 = NULL;
    cl_device_id d2 = NULL;
    cl_command_queue q2 = NULL;
    assert_int_equal(flashcl_context_cl_objects(fc, &c2, &d2, &q2), FLASHCL_SUCCESS);
    assert_ptr_equal(c2, u.context);
    assert_ptr_equal(d2, u.device);
    assert_ptr_equal(q2, u.queue);
    flashcl_device_info info;
    assert_int_equal(flashcl_context_device(fc, &info), FLASHCL_SUCCESS);
    assert_true(info.name[0] != '\0');
    assert_int_equal(info.backend, FLASHCL_BACKEND_OPENCL);

    /* the user's cl_mems, wrapped */
    const int64_t rows = 33, cols = 1000;
    const size_t n = (size_t)(rows * cols), bytes = n * sizeof(float);
    float *x = malloc(bytes), *x2 = malloc(bytes), *y = malloc(bytes);
    assert_non_null(x);
    assert_non_null(x2);
    assert_non_null(y);
    fill(x, n, 11);
    fill(x2, n, 12);
    cl_int err;
    cl_mem xm = clCreateBuffer(u.context, CL_MEM_READ_WRITE, bytes, NULL, &err);
    assert_int_equal(err, CL_SUCCESS);
    cl_mem ym = clCreateBuffer(u.context, CL_MEM_READ_WRITE, bytes + 64, NULL, &err);
    assert_int_equal(err, CL_SUCCESS);
    assert_int_equal(clEnqueueWriteBuffer(u.queue, xm, CL_TRUE, 0, bytes, x, 0, NULL, NULL),
                     CL_SUCCESS);

    flashcl_buffer *xb = NULL, *yb = NULL;
    assert_int_equal(flashcl_buffer_wrap_cl(fc, NULL, &xb), FLASHCL_INVALID_ARGUMENT);
    assert_int_equal(flashcl_buffer_wrap_cl(NULL, xm, &xb), FLASHCL_INVALID_ARGUMENT);
    assert_int_equal(flashcl_buffer_wrap_cl(fc, xm, NULL), FLASHCL_INVALID_ARGUMENT);
    assert_int_equal(flashcl_buffer_wrap_cl(fc, xm, &xb), FLASHCL_SUCCESS);
    assert_int_equal(flashcl_buffer_wrap_cl(fc, ym, &yb), FLASHCL_SUCCESS);
    assert_int_equal(refcount_mem(xm), 2); /* flashcl retains */
    assert_int_equal(flashcl_buffer_size(xb), bytes);
    assert_int_equal(flashcl_buffer_size(yb), bytes + 64);
    assert_ptr_equal(flashcl_buffer_cl_mem(xb), xm);
    assert_ptr_equal(flashcl_buffer_cl_mem(yb), ym);
    assert_null(flashcl_buffer_cl_mem(NULL));

    flashcl_tensor tx = tu_view2d(xb, FLASHCL_F32, rows, cols);
    flashcl_tensor ty = tu_view2d(yb, FLASHCL_F32, rows, cols);
    assert_int_equal(flashcl_softmax(fc, NULL, &tx, &ty), FLASHCL_SUCCESS);
    /* the user's own read on the same in-order queue sees the result */
    assert_int_equal(clEnqueueReadBuffer(u.queue, ym, CL_TRUE, 0, bytes, y, 0, NULL, NULL),
                     CL_SUCCESS);
    check_f32_softmax(x, y, rows, cols);

    /* the user's non-blocking write, then flashcl's softmax and read: in queue order */
    assert_int_equal(clEnqueueWriteBuffer(u.queue, xm, CL_FALSE, 0, bytes, x2, 0, NULL, NULL),
                     CL_SUCCESS);
    assert_int_equal(flashcl_softmax(fc, NULL, &tx, &ty), FLASHCL_SUCCESS);
    memset(y, 0, bytes);
    assert_int_equal(flashcl_buffer_read(yb, 0, y, bytes), FLASHCL_SUCCESS);
    check_f32_softmax(x2, y, rows, cols);

    /* releasing flashcl's references leaves the user's objects alive. A driver may hold one
     * of its own while a kernel of the context still has the buffer as an argument (Rusticl
     * does, until the kernel is released), and one a finished command held can linger: the
     * destroy must drop the count by at least flashcl's one, and it settles to at most 2 (the
     * user's and a kernel argument's), then exactly 1 once the context is gone. */
    assert_int_equal(clFinish(u.queue), CL_SUCCESS);
    cl_uint xm_refs = refcount_mem(xm);
    flashcl_buffer_destroy(xb);
    assert_true(refcount_mem(xm) < xm_refs);
    assert_in_range(refcount_mem_settled(xm, 2), 1, 2);
    /* yb is left for flashcl_context_destroy to release */
    flashcl_context_destroy(fc);
    assert_int_equal(clFinish(u.queue), CL_SUCCESS);
    assert_int_equal(refcount_mem_settled(xm, 1), 1);
    assert_int_equal(refcount_mem_settled(ym, 1), 1);
    /* reference counts of the context and queue: flashcl's own references are gone (the
     * driver's internal ones, e.g. for completed commands, may linger: at most that many) */
    if (refcount_ctx(u.context) > ctx_refs + 2 || refcount_queue(u.queue) > q_refs)
        print_message("note: after flashcl_context_destroy: context refs %u (was %u + 2 "
                      "cl_mems), queue refs %u (was %u)\n",
                      refcount_ctx(u.context), ctx_refs, refcount_queue(u.queue), q_refs);
    assert_int_equal(clEnqueueReadBuffer(u.queue, ym, CL_TRUE, 0, bytes, y, 0, NULL, NULL),
                     CL_SUCCESS);
    check_f32_softmax(x2, y, rows, cols);
    assert_int_equal(clFinish(u.queue), CL_SUCCESS);
    assert_int_equal(clReleaseMemObject(xm), CL_SUCCESS);
    assert_int_equal(clReleaseMemObject(ym), CL_SUCCESS);
    assert_int_equal(refcount_ctx(u.context), ctx_refs);
    assert_int_equal(clReleaseCommandQueue(u.queue), CL_SUCCESS);
    assert_int_equal(clReleaseContext(u.context), CL_SUCCESS);
    free(x);
    free(x2);
    free(y);
}

/* The cl objects of a context flashcl made: the caller enqueues its own commands on flashcl's
 * queue and they order with flashcl's work. */
static void test_interop_cl_objects(void **state)
{
    (void)state;
    cl_context c = NULL;
    cl_device_id d = NULL;
    cl_command_queue q = NULL;
    flashcl_device_info info;
    assert_int_equal(flashcl_context_device(g_ctx, &info), FLASHCL_SUCCESS);
    if (info.backend != FLASHCL_BACKEND_OPENCL) {
        assert_int_equal(flashcl_context_cl_objects(g_ctx, &c, &d, &q), FLASHCL_UNSUPPORTED);
        skip();
    }
    assert_int_equal(flashcl_context_cl_objects(g_ctx, &c, &d, &q), FLASHCL_SUCCESS);
    assert_non_null(c);
    assert_non_null(d);
    assert_non_null(q);
    assert_int_equal(flashcl_context_cl_objects(g_ctx, NULL, NULL, NULL), FLASHCL_SUCCESS);
    assert_int_equal(flashcl_context_cl_objects(NULL, &c, &d, &q), FLASHCL_INVALID_ARGUMENT);

    char name[256] = "";
    assert_int_equal(clGetDeviceInfo(d, CL_DEVICE_NAME, sizeof name, name, NULL), CL_SUCCESS);
    assert_non_null(strstr(name, info.name) ? name : strstr(info.name, name));

    const int64_t rows = 5, cols = 3000;
    const size_t n = (size_t)(rows * cols), bytes = n * sizeof(float);
    float *x = malloc(bytes), *y = malloc(bytes);
    assert_non_null(x);
    assert_non_null(y);
    fill(x, n, 21);
    flashcl_buffer *xb, *yb;
    assert_int_equal(flashcl_buffer_create(g_ctx, bytes, &xb), FLASHCL_SUCCESS);
    assert_int_equal(flashcl_buffer_create(g_ctx, bytes, &yb), FLASHCL_SUCCESS);
    cl_mem xm = flashcl_buffer_cl_mem(xb);
    assert_non_null(xm);
    size_t sz = 0;
    assert_int_equal(clGetMemObjectInfo(xm, CL_MEM_SIZE, sizeof sz, &sz, NULL), CL_SUCCESS);
    assert_true(sz >= bytes);
    cl_context mc = NULL;
    assert_int_equal(clGetMemObjectInfo(xm, CL_MEM_CONTEXT, sizeof mc, &mc, NULL), CL_SUCCESS);
    assert_ptr_equal(mc, c);

    assert_int_equal(clEnqueueWriteBuffer(q, xm, CL_FALSE, 0, bytes, x, 0, NULL, NULL),
                     CL_SUCCESS);
    flashcl_tensor tx = tu_view2d(xb, FLASHCL_F32, rows, cols);
    flashcl_tensor ty = tu_view2d(yb, FLASHCL_F32, rows, cols);
    assert_int_equal(flashcl_softmax(g_ctx, NULL, &tx, &ty), FLASHCL_SUCCESS);
    assert_int_equal(clEnqueueReadBuffer(q, flashcl_buffer_cl_mem(yb), CL_TRUE, 0, bytes, y, 0,
                                         NULL, NULL),
                     CL_SUCCESS);
    check_f32_softmax(x, y, rows, cols);
    flashcl_buffer_destroy(xb);
    flashcl_buffer_destroy(yb);
    free(x);
    free(y);
}

int main(void)
{
    g_ctx = tu_context_or_skip();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_ordering),
        cmocka_unit_test(test_destroy_context_with_live_buffers),
        cmocka_unit_test(test_interop_adopt),
        cmocka_unit_test(test_interop_cl_objects),
    };
    int failures = cmocka_run_group_tests(tests, NULL, NULL);
    flashcl_context_destroy(g_ctx);
    return tu_exit_code(failures);
}
