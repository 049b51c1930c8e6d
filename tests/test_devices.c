/* Device discovery and device selection: flashcl_list_devices, the context options
 * (device_index, device_match, backend) and the environment overrides FLASHCL_DEVICE and
 * FLASHCL_BACKEND. The environment variables the user set for the run are saved at start and
 * cleared for the tests that check the options themselves. */
#include "test_util.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static flashcl_device_info *g_devs;
static size_t g_count;
static char *g_env_device, *g_env_backend;

static void clear_env(void)
{
    unsetenv("FLASHCL_DEVICE");
    unsetenv("FLASHCL_BACKEND");
}

static flashcl_context_options opts(int index, const char *match)
{
    flashcl_context_options o;
    memset(&o, 0, sizeof o);
    o.backend = FLASHCL_BACKEND_AUTO;
    o.device_index = index;
    o.device_match = match;
    o.cache_dir = tu_cache_dir();
    return o;
}

static int has_cuda_device(void)
{
    for (size_t i = 0; i < g_count; i++)
        if (g_devs[i].backend == FLASHCL_BACKEND_CUDA)
            return 1;
    return 0;
}

static void check_info(const flashcl_device_info *d)
{
    assert_true(d->name[0] != '\0');
    assert_non_null(memchr(d->name, '\0', sizeof d->name));
    assert_non_null(memchr(d->vendor, '\0', sizeof d->vendor));
    assert_non_null(memchr(d->platform, '\0', sizeof d->platform));
    assert_non_null(memchr(d->driver, '\0', sizeof d->driver));
    assert_true(d->compute_units > 0);
    assert_true(d->local_mem_bytes > 0);
    assert_true(d->global_mem_bytes > 0);
    assert_true(d->subgroup_size >= 0);
    assert_true(d->backend == FLASHCL_BACKEND_OPENCL || d->backend == FLASHCL_BACKEND_CUDA);
}

static void test_list_devices(void **state)
{
    (void)state;
    size_t count = 12345;
    assert_int_equal(flashcl_list_devices(NULL, 0, &count), FLASHCL_SUCCESS);
    assert_int_equal(count, g_count);

    /* capacity larger than needed: count unchanged, entries past it untouched */
    size_t cap = g_count + 2;
    flashcl_device_info *a = calloc(cap, sizeof *a), *b = calloc(cap, sizeof *b);
    assert_non_null(a);
    assert_non_null(b);
    memset(a, 0x5c, cap * sizeof *a);
    assert_int_equal(flashcl_list_devices(a, cap, &count), FLASHCL_SUCCESS);
    assert_int_equal(count, g_count);
    for (size_t i = 0; i < g_count; i++)
        check_info(&a[i]);
    const unsigned char *tail = (const unsigned char *)&a[g_count];
    for (size_t i = 0; i < 2 * sizeof *a; i++)
        assert_int_equal(tail[i], 0x5c);

    /* stable order: a second call gives the same list */
    assert_int_equal(flashcl_list_devices(b, cap, &count), FLASHCL_SUCCESS);
    assert_int_equal(count, g_count);
    for (size_t i = 0; i < g_count; i++) {
        assert_string_equal(a[i].name, b[i].name);
        assert_string_equal(a[i].platform, b[i].platform);
        assert_int_equal(a[i].compute_units, b[i].compute_units);
        assert_int_equal(a[i].backend, b[i].backend);
    }

    /* capacity smaller than the count: writes that many, still reports the total */
    if (g_count >= 1) {
        memset(b, 0x5c, cap * sizeof *b);
        assert_int_equal(flashcl_list_devices(b, 1, &count), FLASHCL_SUCCESS);
        assert_int_equal(count, g_count);
        assert_string_equal(b[0].name, a[0].name);
        const unsigned char *t = (const unsigned char *)&b[1];
        for (size_t i = 0; i < sizeof *b; i++)
            assert_int_equal(t[i], 0x5c);
    }
    free(a);
    free(b);
}

static void test_list_devices_bad_args(void **state)
{
    (void)state;
    flashcl_device_info one;
    assert_int_equal(flashcl_list_devices(NULL, 0, NULL), FLASHCL_INVALID_ARGUMENT);
    assert_true(strlen(flashcl_last_error()) > 0);
    assert_int_equal(flashcl_list_devices(&one, 1, NULL), FLASHCL_INVALID_ARGUMENT);
    assert_true(strlen(flashcl_last_error()) > 0);
    size_t count;
    /* out NULL with a nonzero capacity */
    assert_int_equal(flashcl_list_devices(NULL, 4, &count), FLASHCL_INVALID_ARGUMENT);
    assert_true(strlen(flashcl_last_error()) > 0);
}

static void test_context_device_info(void **state)
{
    (void)state;
    clear_env();
    for (size_t i = 0; i < g_count; i++) {
        flashcl_context_options o = opts((int)i, NULL);
        flashcl_context *ctx = NULL;
        flashcl_status st = flashcl_context_create(&o, &ctx);
        if (st == FLASHCL_BUILD_FAILED || st == FLASHCL_UNSUPPORTED) {
            /* a listed device flashcl cannot compile for: say so, but it must say why */
            print_message("device %zu (%s): %s: %s\n", i, g_devs[i].name,
                          flashcl_status_string(st), flashcl_last_error());
            assert_true(strlen(flashcl_last_error()) > 0);
            continue;
        }
        if (st != FLASHCL_SUCCESS)
            fail_msg("device %zu: %s: %s", i, flashcl_status_string(st), flashcl_last_error());
        flashcl_device_info info;
        memset(&info, 0x5c, sizeof info);
        assert_int_equal(flashcl_context_device(ctx, &info), FLASHCL_SUCCESS);
        check_info(&info);
        assert_string_equal(info.name, g_devs[i].name);
        assert_string_equal(info.platform, g_devs[i].platform);
        assert_int_equal(info.compute_units, g_devs[i].compute_units);
        assert_int_equal(flashcl_context_device(ctx, NULL), FLASHCL_INVALID_ARGUMENT);
        assert_int_equal(flashcl_finish(ctx), FLASHCL_SUCCESS);
        int from_cache = -1;
        double seconds = -1;
        assert_int_equal(flashcl_context_build_info(ctx, &from_cache, &seconds),
                         FLASHCL_SUCCESS);
        assert_true(from_cache == 0 || from_cache == 1);
        assert_true(seconds >= 0.0);
        assert_int_equal(flashcl_context_build_info(ctx, NULL, NULL), FLASHCL_SUCCESS);
        flashcl_context_destroy(ctx);
    }
    flashcl_context_destroy(NULL); /* ignored */
}

static void test_default_device(void **state)
{
    (void)state;
    clear_env();
    flashcl_context *ctx = NULL;
    flashcl_status st = flashcl_context_create(NULL, &ctx); /* opts NULL: default cache */
    if (st != FLASHCL_SUCCESS)
        fail_msg("context_create(NULL): %s: %s", flashcl_status_string(st),
                 flashcl_last_error());
    flashcl_device_info info;
    assert_int_equal(flashcl_context_device(ctx, &info), FLASHCL_SUCCESS);
    int listed = 0;
    for (size_t i = 0; i < g_count; i++)
        listed |= !strcmp(info.name, g_devs[i].name);
    assert_true(listed);
    /* AUTO prefers CUDA where a CUDA device works, else a GPU over a CPU */
    if (has_cuda_device())
        assert_int_equal(info.backend, FLASHCL_BACKEND_CUDA);
    for (size_t i = 0; i < g_count; i++)
        if (g_devs[i].features & FLASHCL_FEATURE_GPU)
            assert_true(info.features & FLASHCL_FEATURE_GPU);
    flashcl_context_destroy(ctx);
    /* index -1 is "best": the same choice */
    flashcl_context_options o = opts(-1, NULL);
    assert_int_equal(flashcl_context_create(&o, &ctx), FLASHCL_SUCCESS);
    flashcl_device_info info2;
    assert_int_equal(flashcl_context_device(ctx, &info2), FLASHCL_SUCCESS);
    assert_string_equal(info.name, info2.name);
    flashcl_context_destroy(ctx);
    /* NULL out */
    assert_int_equal(flashcl_context_create(&o, NULL), FLASHCL_INVALID_ARGUMENT);
}

static void test_bad_device_index(void **state)
{
    (void)state;
    clear_env();
    const int bad[] = {(int)g_count, (int)g_count + 7, 1 << 30};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        flashcl_context_options o = opts(bad[i], NULL);
        flashcl_context *ctx = (flashcl_context *)&o; /* must not be used */
        flashcl_status st = flashcl_context_create(&o, &ctx);
        if (st != FLASHCL_DEVICE_NOT_FOUND)
            fail_msg("device_index %d of %zu: %s, expected DEVICE_NOT_FOUND", bad[i], g_count,
                     flashcl_status_string(st));
        assert_true(strlen(flashcl_last_error()) > 0);
    }
    /* negative indices other than -1 are not "best" */
    flashcl_context_options o = opts(-2, NULL);
    flashcl_context *ctx = NULL;
    flashcl_status st = flashcl_context_create(&o, &ctx);
    assert_true(st == FLASHCL_INVALID_ARGUMENT || st == FLASHCL_DEVICE_NOT_FOUND);
    assert_true(strlen(flashcl_last_error()) > 0);
}

static void lower(char *s)
{
    for (; *s; s++)
        *s = (char)tolower((unsigned char)*s);
}

static void test_device_match(void **state)
{
    (void)state;
    clear_env();
    /* the first device's full name, in another case, and a piece of it */
    char name[256], piece[8];
    snprintf(name, sizeof name, "%s", g_devs[0].name);
    lower(name);
    flashcl_context_options o = opts(-1, name);
    flashcl_context *ctx = NULL;
    flashcl_status st = flashcl_context_create(&o, &ctx);
    if (st != FLASHCL_SUCCESS)
        fail_msg("device_match \"%s\": %s: %s", name, flashcl_status_string(st),
                 flashcl_last_error());
    flashcl_device_info info;
    assert_int_equal(flashcl_context_device(ctx, &info), FLASHCL_SUCCESS);
    assert_string_equal(info.name, g_devs[0].name);
    flashcl_context_destroy(ctx);

    size_t n = strlen(g_devs[0].name);
    if (n >= 6) {
        memcpy(piece, g_devs[0].name + n / 2 - 2, 4);
        piece[4] = '\0';
        o = opts(-1, piece);
        assert_int_equal(flashcl_context_create(&o, &ctx), FLASHCL_SUCCESS);
        assert_int_equal(flashcl_context_device(ctx, &info), FLASHCL_SUCCESS);
        assert_non_null(strstr(info.name, piece));
        flashcl_context_destroy(ctx);
    }

    o = opts(-1, "no-such-device-xq7z");
    ctx = NULL;
    st = flashcl_context_create(&o, &ctx);
    assert_int_equal(st, FLASHCL_DEVICE_NOT_FOUND);
    /* the message names what was asked and what there is */
    assert_non_null(strstr(flashcl_last_error(), "'no-such-device-xq7z'"));
    assert_non_null(strstr(flashcl_last_error(), g_devs[0].name));
}

static void test_env_device(void **state)
{
    (void)state;
    clear_env();
    flashcl_context *ctx = NULL;
    flashcl_device_info info;
    /* FLASHCL_DEVICE=<last index> picks that device */
    char idx[16];
    snprintf(idx, sizeof idx, "%zu", g_count - 1);
    setenv("FLASHCL_DEVICE", idx, 1);
    flashcl_status st = flashcl_context_create(NULL, &ctx);
    if (st == FLASHCL_SUCCESS) {
        assert_int_equal(flashcl_context_device(ctx, &info), FLASHCL_SUCCESS);
        assert_string_equal(info.name, g_devs[g_count - 1].name);
        flashcl_context_destroy(ctx);
    } else {
        /* only acceptable if that device cannot run flashcl at all */
        assert_true(st == FLASHCL_BUILD_FAILED || st == FLASHCL_UNSUPPORTED);
    }

    /* FLASHCL_DEVICE=0 overrides the options (here an index out of range) */
    setenv("FLASHCL_DEVICE", "0", 1);
    flashcl_context_options o = opts((int)g_count + 3, NULL);
    st = flashcl_context_create(&o, &ctx);
    if (st != FLASHCL_SUCCESS)
        fail_msg("FLASHCL_DEVICE=0: %s: %s", flashcl_status_string(st), flashcl_last_error());
    assert_int_equal(flashcl_context_device(ctx, &info), FLASHCL_SUCCESS);
    assert_string_equal(info.name, g_devs[0].name);
    flashcl_context_destroy(ctx);

    /* a name substring */
    setenv("FLASHCL_DEVICE", g_devs[0].name, 1);
    st = flashcl_context_create(NULL, &ctx);
    assert_int_equal(st, FLASHCL_SUCCESS);
    assert_int_equal(flashcl_context_device(ctx, &info), FLASHCL_SUCCESS);
    assert_string_equal(info.name, g_devs[0].name);
    flashcl_context_destroy(ctx);

    /* an index out of range, and a name that matches nothing */
    snprintf(idx, sizeof idx, "%zu", g_count + 5);
    setenv("FLASHCL_DEVICE", idx, 1);
    assert_int_equal(flashcl_context_create(NULL, &ctx), FLASHCL_DEVICE_NOT_FOUND);
    assert_true(strlen(flashcl_last_error()) > 0);
    setenv("FLASHCL_DEVICE", "no-such-device-xq7z", 1);
    assert_int_equal(flashcl_context_create(NULL, &ctx), FLASHCL_DEVICE_NOT_FOUND);
    assert_true(strlen(flashcl_last_error()) > 0);
    clear_env();
}

static void test_env_backend(void **state)
{
    (void)state;
    clear_env();
    flashcl_context *ctx = NULL;
    flashcl_device_info info;

    setenv("FLASHCL_BACKEND", "opencl", 1);
    int have_opencl = 0;
    for (size_t i = 0; i < g_count; i++)
        have_opencl |= g_devs[i].backend == FLASHCL_BACKEND_OPENCL;
    flashcl_status st = flashcl_context_create(NULL, &ctx);
    if (have_opencl) {
        if (st != FLASHCL_SUCCESS)
            fail_msg("FLASHCL_BACKEND=opencl: %s: %s", flashcl_status_string(st),
                     flashcl_last_error());
        assert_int_equal(flashcl_context_device(ctx, &info), FLASHCL_SUCCESS);
        assert_int_equal(info.backend, FLASHCL_BACKEND_OPENCL);
        flashcl_context_destroy(ctx);
    } else {
        assert_int_equal(st, FLASHCL_DEVICE_NOT_FOUND);
    }

    setenv("FLASHCL_BACKEND", "cuda", 1);
    st = flashcl_context_create(NULL, &ctx);
    if (has_cuda_device()) {
        assert_int_equal(st, FLASHCL_SUCCESS);
        assert_int_equal(flashcl_context_device(ctx, &info), FLASHCL_SUCCESS);
        assert_int_equal(info.backend, FLASHCL_BACKEND_CUDA);
        flashcl_context_destroy(ctx);
    } else {
        if (st != FLASHCL_DEVICE_NOT_FOUND && st != FLASHCL_UNSUPPORTED)
            fail_msg("FLASHCL_BACKEND=cuda without CUDA: %s, expected DEVICE_NOT_FOUND or "
                     "UNSUPPORTED",
                     flashcl_status_string(st));
        assert_true(strlen(flashcl_last_error()) > 0);
    }

    setenv("FLASHCL_BACKEND", "bogus", 1);
    st = flashcl_context_create(NULL, &ctx);
    if (st != FLASHCL_INVALID_ARGUMENT)
        fail_msg("FLASHCL_BACKEND=bogus: %s, expected INVALID_ARGUMENT",
                 flashcl_status_string(st));
    assert_non_null(strstr(flashcl_last_error(), "bogus"));
    clear_env();

    /* the option itself: an unknown backend value */
    flashcl_context_options o = opts(-1, NULL);
    o.backend = (flashcl_backend)42;
    assert_int_equal(flashcl_context_create(&o, &ctx), FLASHCL_INVALID_ARGUMENT);
    assert_true(strlen(flashcl_last_error()) > 0);
    o.backend = FLASHCL_BACKEND_OPENCL;
    if (have_opencl) {
        assert_int_equal(flashcl_context_create(&o, &ctx), FLASHCL_SUCCESS);
        flashcl_context_destroy(ctx);
    }
}

int main(void)
{
    g_env_device = getenv("FLASHCL_DEVICE") ? strdup(getenv("FLASHCL_DEVICE")) : NULL;
    g_env_backend = getenv("FLASHCL_BACKEND") ? strdup(getenv("FLASHCL_BACKEND")) : NULL;

    /* the context the rest of the suite would use: skip cleanly without a device */
    flashcl_context *ctx = tu_context_or_skip();
    flashcl_context_destroy(ctx);
    clear_env();
    /* contexts made with opts NULL use the default cache: keep it out of ~/.cache */
    setenv("FLASHCL_CACHE_DIR", tu_cache_dir(), 1);

    if (flashcl_list_devices(NULL, 0, &g_count) != FLASHCL_SUCCESS || g_count == 0) {
        fprintf(stderr, "FAIL: a context opened but flashcl_list_devices lists no device: %s\n",
                flashcl_last_error());
        return 1;
    }
    g_devs = calloc(g_count, sizeof *g_devs);
    size_t n = 0;
    if (!g_devs || flashcl_list_devices(g_devs, g_count, &n) != FLASHCL_SUCCESS ||
        n != g_count)
        return 1;
    for (size_t i = 0; i < g_count; i++)
        printf("device %zu: %s | %s | %s | %s | %d CUs\n", i, g_devs[i].name, g_devs[i].vendor,
               g_devs[i].platform, g_devs[i].driver, g_devs[i].compute_units);

    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_list_devices),
        cmocka_unit_test(test_list_devices_bad_args),
        cmocka_unit_test(test_context_device_info),
        cmocka_unit_test(test_default_device),
        cmocka_unit_test(test_bad_device_index),
        cmocka_unit_test(test_device_match),
        cmocka_unit_test(test_env_device),
        cmocka_unit_test(test_env_backend),
    };
    int failures = cmocka_run_group_tests(tests, NULL, NULL);
    if (g_env_device)
        setenv("FLASHCL_DEVICE", g_env_device, 1);
    if (g_env_backend)
        setenv("FLASHCL_BACKEND", g_env_backend, 1);
    free(g_devs);
    free(g_env_device);
    free(g_env_backend);
    return tu_exit_code(failures);
}
