/* Building an OpenCL context's programs, which run on several threads at once:
 * - FLASHCL_BUILD_THREADS=1 (one after the other), 2, 64 (more than programs), the default and
 *   a value that is no count all give a working context (a softmax checked against host_ref);
 * - a program that fails to build (FLASHCL_TEST_BREAK_PROGRAMS, a test hook that makes its
 *   source hit an #error) fails the context with FLASHCL_BUILD_FAILED and a message that names
 *   the program and holds its build log, although the failure happened on another thread;
 * - when two fail, the message is about the first in the library's program table whatever
 *   thread finished first (softmax_f16 comes before softmax_bf16);
 * - after failures, contexts work again (nothing half-built is left behind in the cache).
 * Always the OpenCL backend: only it builds programs. */
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const g_threads[] = {"1", "2", "64", "", "many"};

static flashcl_status open_opencl(flashcl_context **ctx)
{
    flashcl_context_options o;
    memset(&o, 0, sizeof o);
    o.backend = FLASHCL_BACKEND_OPENCL;
    o.device_index = -1;
    o.cache_dir = tu_cache_dir();
    return flashcl_context_create(&o, ctx);
}

static void check_softmax(flashcl_context *ctx, uint64_t seed)
{
    tu_softmax_case c;
    memset(&c, 0, sizeof c);
    c.xt = FLASHCL_BF16;
    c.yt = FLASHCL_F16;
    c.rows = 5;
    c.cols = 333;
    tu_softmax_check(ctx, &c, seed, NULL);
}

static void test_thread_counts(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof g_threads / sizeof g_threads[0]; i++) {
        flashcl_context *ctx = NULL;
        setenv("FLASHCL_BUILD_THREADS", g_threads[i], 1);
        flashcl_status st = open_opencl(&ctx);
        unsetenv("FLASHCL_BUILD_THREADS");
        if (st != FLASHCL_SUCCESS)
            fail_msg("FLASHCL_BUILD_THREADS=\"%s\": %s: %s", g_threads[i],
                     flashcl_status_string(st), flashcl_last_error());
        check_softmax(ctx, tu_base_seed() + i);
        flashcl_context_destroy(ctx);
    }
}

/* Creates a context with `broken` programs failing; expects the failure to be about `named`. */
static void expect_failure(const char *broken, const char *named, const char *threads)
{
    flashcl_context *ctx = NULL;
    setenv("FLASHCL_TEST_BREAK_PROGRAMS", broken, 1);
    setenv("FLASHCL_BUILD_THREADS", threads, 1);
    flashcl_status st = open_opencl(&ctx);
    unsetenv("FLASHCL_TEST_BREAK_PROGRAMS");
    unsetenv("FLASHCL_BUILD_THREADS");
    const char *msg = flashcl_last_error();
    char expect[64];
    snprintf(expect, sizeof expect, "building the %s kernels", named);
    if (st != FLASHCL_BUILD_FAILED)
        fail_msg("broken %s, %s threads: %s (%s)", broken, threads, flashcl_status_string(st),
                 msg);
    assert_null(ctx);
    if (!strstr(msg, expect))
        fail_msg("broken %s, %s threads: the message does not say \"%s\": %s", broken, threads,
                 expect, msg);
    if (!strstr(msg, "build log") || !strstr(msg, "FC_TEST_BREAK"))
        fail_msg("broken %s, %s threads: no build log in the message: %s", broken, threads, msg);
}

static void test_failure_reaches_the_caller(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof g_threads / sizeof g_threads[0]; i++) {
        expect_failure("softmax_bf16", "softmax_bf16", g_threads[i]);
        expect_failure("softmax_bf16,softmax_f16", "softmax_f16", g_threads[i]);
    }
    expect_failure("nothing,softmax_f32", "softmax_f32", "");
}

static void test_works_after_failures(void **state)
{
    (void)state;
    flashcl_context *ctx = NULL;
    expect_failure("softmax_f32,softmax_f16,softmax_bf16", "softmax_f32", "");
    flashcl_status st = open_opencl(&ctx);
    if (st != FLASHCL_SUCCESS)
        fail_msg("after failures: %s: %s", flashcl_status_string(st), flashcl_last_error());
    check_softmax(ctx, tu_base_seed() + 100);
    flashcl_context_destroy(ctx);
}

int main(void)
{
    flashcl_context *probe = NULL;
    const flashcl_status st = open_opencl(&probe); /* also fills the cache for the others */
    /* FLASHCL_BACKEND overrides the options */
    if (!tu_probe_is_opencl(st, probe, "no program builds; FLASHCL_BACKEND=opencl tests them"))
        return 77;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_thread_counts),
        cmocka_unit_test(test_failure_reaches_the_caller),
        cmocka_unit_test(test_works_after_failures),
    };
    return tu_exit_code(cmocka_run_group_tests(tests, NULL, NULL));
}
