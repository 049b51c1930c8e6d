/* Without a usable CUDA driver the library still loads and lists its OpenCL devices, lists no
 * CUDA device, refuses a CUDA context with DEVICE_NOT_FOUND, and the CUDA interop entry points
 * answer instead of crashing. CTest points FLASHCL_CUDA_DRIVER at a library that does not exist,
 * which makes the backend behave as on a machine without the NVIDIA driver; run by hand, main
 * sets the same before the first flashcl call. (No OpenCL context is created: on PoCL that
 * compiles the programs, far too slow for a check of device listing.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "flashcl.h"
#include "flashcl_cuda.h"

static void test_lists_no_cuda_device(void **state) {
    flashcl_device_info info[64];
    size_t n = 0, i;
    (void)state;
    assert_int_equal(flashcl_list_devices(info, 64, &n), FLASHCL_SUCCESS);
    assert_string_equal(flashcl_last_error(), "");
    for (i = 0; i < n && i < 64; i++) {
        printf("device %zu: %s (%s)\n", i, info[i].name, info[i].platform);
        assert_int_not_equal(info[i].backend, FLASHCL_BACKEND_CUDA);
    }
}

static void test_cuda_context_not_found(void **state) {
    flashcl_context_options o = {FLASHCL_BACKEND_CUDA, -1, NULL, ""};
    flashcl_context *ctx = NULL;
    (void)state;
    assert_int_equal(flashcl_context_create(&o, &ctx), FLASHCL_DEVICE_NOT_FOUND);
    assert_null(ctx);
    assert_true(strlen(flashcl_last_error()) > 0);
}

static void test_interop_entry_points_answer(void **state) {
    flashcl_buffer *b = NULL;
    int dummy;
    (void)state;
    assert_int_equal(flashcl_buffer_wrap_cuda(NULL, &dummy, sizeof dummy, &b),
                     FLASHCL_INVALID_ARGUMENT);
    assert_null(b);
    assert_int_equal(flashcl_context_set_cuda_stream(NULL, NULL), FLASHCL_INVALID_ARGUMENT);
    assert_null(flashcl_buffer_cuda_ptr(NULL));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lists_no_cuda_device),
        cmocka_unit_test(test_cuda_context_not_found),
        cmocka_unit_test(test_interop_entry_points_answer),
    };
    int failures;
    if (!getenv("FLASHCL_CUDA_DRIVER"))
        setenv("FLASHCL_CUDA_DRIVER", "/nonexistent/flashcl-test/libcuda.so.1", 1);
    unsetenv("FLASHCL_BACKEND"); /* the checks choose their backends themselves */
    unsetenv("FLASHCL_DEVICE");
    failures = cmocka_run_group_tests(tests, NULL, NULL);
    return failures == 77 ? 1 : failures;
}
