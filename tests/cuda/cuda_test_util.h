/* The helpers shared by the CUDA interop and kernel tests (test_cuda_interop.c,
 * test_cuda_softmax_kernels.c), which were one file until it passed the ~600 lines a file keeps
 * to. They keep the names they had there. The tests reach the driver through dlopen
 * (cuda_driver.h), so they build without cuda.h and skip without a driver.
 *
 * cuda_test_setup creates flashcl's CUDA context (g_ctx) on its first CUDA device, finds that
 * device's primary context, and hands flashcl a non-blocking stream of the test's own
 * (g_stream), which every test's work then runs on. Without a usable driver or CUDA device it
 * prints "SKIP: ..." and returns 0: main then exits 77. Any other failure prints the reason and
 * exits 1. cuda_test_finish gives flashcl its own stream back and releases everything. */
#ifndef FLASHCL_TEST_CUDA_TEST_UTIL_H
#define FLASHCL_TEST_CUDA_TEST_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "cuda_driver.h"
#include "flashcl.h"
#include "host_ref.h"

extern td_api cu;
extern td_stream g_stream; /* the test's own stream, handed to flashcl */
extern flashcl_context *g_ctx;

/* ---- driver calls on the device's primary context, every one checked (cmocka asserts) ------- */

td_deviceptr device_alloc(size_t bytes);
void device_free(td_deviceptr p); /* fails if flashcl freed it */
/* Waits for the copy to land (see cuda_test_util.c). */
void upload(td_deviceptr dst, const void *src, size_t bytes);
void download(void *dst, td_deviceptr src, size_t bytes);
/* flashcl_buffer_wrap_cuda of the whole range, or the test fails. */
flashcl_buffer *wrap(td_deviceptr p, size_t bytes);

/* ---- inputs and checking ---------------------------------------------------------------------- */

/* Every element of y (rows x cols, row stride `stride`, starting at element `offset` of x_host and
 * `y_offset` of y_host) against host_ref's softmax of x; `what` names the case in a failure. The
 * stored value must be the dtype's rounding of some real within the f32 tolerance of the double
 * reference (the rule of tests/test_util.h). */
void check_rows(flashcl_dtype xt, const void *x_host, flashcl_dtype yt, const void *y_host,
                int64_t rows, int64_t cols, int64_t stride, size_t offset, size_t y_offset,
                float scale, int log, const char *what);

/* Row r of the input: random in [-8, 8), or with `special` rows of torch's special cases. */
void fill_row(float *row, int64_t cols, int64_t r, int special, uint64_t *seed);

/* ---- setup ------------------------------------------------------------------------------------ */

/* 1: ready; 0: no CUDA driver or device (printed "SKIP: ..."): main returns 77. */
int cuda_test_setup(void);
/* After cmocka_run_group_tests: releases what setup made and returns main's exit code (the
 * failures, but 1 where 77 of them would read as a skip). */
int cuda_test_finish(int failures);

#endif
