/* The CUDA softmax kernels through flashcl, on the test's own stream (cuda_test_util.c's setup,
 * shared with test_cuda_interop.c). The split-held softmax as clusters and as tickets, holding
 * 16-bit inputs as bits or as f32, in its pipelined, merged and ring forms, must agree bit for
 * bit, whether its blocks or the host cleared its state (forced with the FLASHCL_CUDA_SOFTMAX_*
 * switches, each set around one call and unset after it); ROW_IN_REGISTERS forced on rows too
 * long for it is refused; and chains of back-to-back calls, each reading the output of the call
 * before it (programmatic dependent launches on compute capability 9.0+), must end in the bits of
 * the same chain drained after every call. Every result is checked against host_ref. Without a CUDA
 * device it prints "SKIP: ..." and exits 77. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_test_util.h"
#include "flashcl_cuda.h"

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
 * of more (its blocks then take several tickets each), its ring form
 * (FLASHCL_CUDA_SOFTMAX_PIPELINE_RING=1 too; where three ring blocks fit an SM), which must
 * match the pipelined kernel bit for bit on every shape, and its merged form on every row of
 * every dtype (FLASHCL_CUDA_SOFTMAX_PIPELINE_MERGED=2 too; FLASHCL_CUDA_SOFTMAX_STALL_PREFETCH=0
 * and, for f32, =100: the merged kernel's stall-prefetch form), which must match it bit for bit
 * on rows of more than 128 slices: the pipelined kernel gathers their words in the merged kernel's
 * tree (merge_words), shorter rows in warp 0's (FC_SPLIT_HELD_WARP_GATHER_SLICES,
 * cuda/softmax_split_exchange.cuh); and the merged form in deep blocks
 * (FLASHCL_CUDA_SOFTMAX_DEEP=2: slices of 11264 f32 or 22528 16-bit columns, other sums). Each
 * is checked against host_ref. The pipelined kernel computes the one-ticket kernels'
 * expressions over the same slices, so it must match them bit for bit: the f32-held one for
 * f32 inputs, the bits-held one in blocks of 256 for 16-bit ones. Holders of 16-bit inputs
 * over other slices sum over different trees, so they may differ from it in the last bits. Rows
 * of more slices than SMs take only the pipelined kernel (cooperatively) and are checked
 * against host_ref alone. */
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
                  /* 1024 slices a row, more than the pipelined kernel takes (4 blocks an SM):
                   * AUTO's merged pipelined kernel (up to twice the grid's blocks less one,
                   * 1055 on 132 SMs; the ring past that and up to two slices a ring block) */
                  {FLASHCL_F32, FLASHCL_F32, 2, 8388608, 1, 1.0f, 1},
                  {FLASHCL_F16, FLASHCL_F16, 1, 16777216, 0, 1.0f, 1},
                  /* 672 slices a row: AUTO's ring kernel where 3 ring blocks fit an SM (at
                   * most two slices a ring block, 792 on 132 SMs) */
                  {FLASHCL_F32, FLASHCL_F32, 1, 5500000, 0, 1.0f, 1},
                  /* 1099 slices of 8192, past the merged kernel's 1055: AUTO's merged kernel in
                   * deep blocks (800 slices of 11264; deep_suits), which every form this test
                   * forces but the f32-held one (kernel 1) gives way to as well */
                  {FLASHCL_F32, FLASHCL_F32, 1, 9000000, 1, 1.0f, 1},
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
        /* the slices of a row held as bits (16384 16-bit columns, 8192 f32 ones: the pipelined
         * kernels' slices) */
        const int64_t slices = (cols + (xt == FLASHCL_F32 ? 8191 : 16383)) /
                               (xt == FLASHCL_F32 ? 8192 : 16384);
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
         * form, 5: its merged form (without the stall prefetch), 6: the merged form with the
         * stall prefetch (f32; 16-bit rows take 5's kernel again), 7: the merged form in deep
         * blocks (FLASHCL_CUDA_SOFTMAX_DEEP=2; slices of 11264 f32 or 22528 16-bit columns, so
         * checked against host_ref alone); clear 0: by the kernels, 1: the host */
        for (int pass = 0; pass < 16; pass++) {
            const int kernel = pass / 2, host_clears = pass % 2;
            static const char *const names[] = {"AUTO's", "f32-held", "bits-held", "pipelined",
                                                "ring", "merged", "merged, stall prefetch",
                                                "merged, deep blocks"};
            unsigned char *out = host_clears ? y_host : y_first;
            memset(out, 0x5a, y_bytes);
            assert_int_equal(flashcl_buffer_write(yb, 0, out, y_bytes), FLASHCL_SUCCESS); /* poison */
            if (host_clears) setenv("FLASHCL_CUDA_SOFTMAX_HOST_CLEAR", "1", 1);
            if (kernel == 1) setenv("FLASHCL_CUDA_SOFTMAX_NO_HELD_BITS", "1", 1);
            if (kernel == 1 || kernel == 2) setenv("FLASHCL_CUDA_SOFTMAX_NO_NARROW", "1", 1);
            if (kernel >= 3) setenv("FLASHCL_CUDA_SOFTMAX_PIPELINE_SLICES", "1", 1);
            if (kernel == 4) setenv("FLASHCL_CUDA_SOFTMAX_PIPELINE_RING", "1", 1);
            if (kernel >= 5) setenv("FLASHCL_CUDA_SOFTMAX_PIPELINE_MERGED", "2", 1);
            if (kernel >= 5)
                setenv("FLASHCL_CUDA_SOFTMAX_STALL_PREFETCH", kernel == 6 ? "100" : "0", 1);
            if (kernel == 7) setenv("FLASHCL_CUDA_SOFTMAX_DEEP", "2", 1);
            if (flashcl_softmax(g_ctx, &params, &x, &y) != FLASHCL_SUCCESS)
                fail_msg("flashcl_softmax: %s", flashcl_last_error());
            unsetenv("FLASHCL_CUDA_SOFTMAX_HOST_CLEAR");
            unsetenv("FLASHCL_CUDA_SOFTMAX_NO_HELD_BITS");
            unsetenv("FLASHCL_CUDA_SOFTMAX_NO_NARROW");
            unsetenv("FLASHCL_CUDA_SOFTMAX_PIPELINE_SLICES");
            unsetenv("FLASHCL_CUDA_SOFTMAX_PIPELINE_RING");
            unsetenv("FLASHCL_CUDA_SOFTMAX_PIPELINE_MERGED");
            unsetenv("FLASHCL_CUDA_SOFTMAX_STALL_PREFETCH");
            unsetenv("FLASHCL_CUDA_SOFTMAX_DEEP");
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
            if ((kernel == 5 || kernel == 6) && slices > 128 &&
                memcmp(y_pipelined, y_host, y_bytes) != 0)
                fail_msg("%s: the %s kernel's bits differ from the pipelined kernel's", what,
                         names[kernel]);
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_held_kernels_agree),
        cmocka_unit_test(test_forced_registers_unsupported_for_long_rows),
        cmocka_unit_test(test_dependent_launch_chain),
    };
    if (!cuda_test_setup()) return 77;
    return cuda_test_finish(cmocka_run_group_tests(tests, NULL, NULL));
}
