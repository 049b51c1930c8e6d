/* The on-disk program binary cache, through the API's cache_dir option and the environment:
 * - a fresh folder: the first context compiles (from_cache 0) and leaves *.bin files named by
 *   a hash (and no temporary files); the next context loads them (from_cache 1);
 * - damaged entries (truncated to half, truncated to 0, garbage in the middle, a foreign file
 *   of random bytes under the right name): the next context notices, compiles
 *   (from_cache 0), computes correctly, and rewrites the entry so the one after loads it;
 * - cache_dir "": nothing written anywhere (HOME and XDG_CACHE_HOME point at an empty temp
 *   folder), from_cache 0 every time;
 * - an unusable folder (a path under a regular file): contexts still work;
 * - the default locations: $FLASHCL_CACHE_DIR, then $XDG_CACHE_HOME/flashcl, then
 *   $HOME/.cache/flashcl;
 * - several threads creating contexts on one fresh folder at once.
 * Every context also runs a softmax checked against host_ref. */
#include "test_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_FILES 64

typedef struct file_list {
    int n;
    char path[MAX_FILES][1024];
    long size[MAX_FILES];
} file_list;

static void collect(const char *dir, file_list *out, int bins_only);

static char *g_home; /* a fake HOME / XDG_CACHE_HOME so nothing reaches the user's */

/* Files flashcl put where its default cache would be, under the fake HOME: the OpenCL driver
 * may keep caches of its own there, which are none of our business. */
static int flashcl_files_in_home(char *first, size_t n)
{
    char p[1024];
    int count = 0;
    const char *sub[2] = {"flashcl", ".cache/flashcl"};
    for (int i = 0; i < 2; i++) {
        snprintf(p, sizeof p, "%s/%s", g_home, sub[i]);
        struct stat st;
        if (lstat(p, &st) != 0)
            continue;
        file_list l;
        memset(&l, 0, sizeof l);
        collect(p, &l, 0);
        if (count == 0 && first)
            snprintf(first, n, "%s%s", p, l.n ? "/..." : "");
        count += l.n > 0 ? l.n : 1;
    }
    return count;
}


static void collect(const char *dir, file_list *out, int bins_only)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(p, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            collect(p, out, bins_only);
            continue;
        }
        size_t n = strlen(e->d_name);
        int is_bin = n > 4 && !strcmp(e->d_name + n - 4, ".bin");
        if (bins_only && !is_bin)
            continue;
        if (out->n < MAX_FILES) {
            snprintf(out->path[out->n], sizeof out->path[0], "%s", p);
            out->size[out->n] = (long)st.st_size;
            out->n++;
        }
    }
    closedir(d);
}

static file_list list_bins(const char *dir)
{
    file_list l;
    memset(&l, 0, sizeof l);
    collect(dir, &l, 1);
    return l;
}

static file_list list_all(const char *dir)
{
    file_list l;
    memset(&l, 0, sizeof l);
    collect(dir, &l, 0);
    return l;
}

/* A context on `dir` (NULL: default resolution), its from_cache, and a correct softmax. */
static int open_check(const char *dir, int expect_from_cache)
{
    flashcl_context *ctx = NULL;
    flashcl_status st = tu_context_create(dir, &ctx);
    if (st != FLASHCL_SUCCESS)
        fail_msg("context_create(cache_dir \"%s\"): %s: %s", dir ? dir : "(null)",
                 flashcl_status_string(st), flashcl_last_error());
    int from_cache = -1;
    double seconds = -1;
    assert_int_equal(flashcl_context_build_info(ctx, &from_cache, &seconds), FLASHCL_SUCCESS);
    assert_true(seconds >= 0.0);
    if (expect_from_cache >= 0 && from_cache != expect_from_cache)
        fail_msg("cache_dir \"%s\": from_cache %d, expected %d", dir ? dir : "(null)",
                 from_cache, expect_from_cache);

    tu_softmax_case c = {0};
    c.xt = FLASHCL_F32;
    c.yt = FLASHCL_F16;
    c.rows = 9;
    c.cols = 300;
    c.special = 1;
    tu_softmax_check(ctx, &c, tu_base_seed() + 5, NULL);
    c.xt = FLASHCL_BF16;
    c.yt = FLASHCL_F32;
    c.rows = 2;
    c.cols = 70000;
    c.log = 1;
    tu_softmax_check(ctx, &c, tu_base_seed() + 6, NULL);
    flashcl_context_destroy(ctx);
    return from_cache;
}

static const char *base_name(const char *path)
{
    const char *b = strrchr(path, '/');
    return b ? b + 1 : path;
}

/* Leftovers of an atomic write (temp file + rename) that did not complete. */
static int is_temp_name(const char *path)
{
    const char *b = base_name(path);
    size_t n = strlen(b);
    return strstr(b, "tmp") || strstr(b, "TMP") || (n && b[n - 1] == '~') || b[0] == '.';
}

static int is_hex_name(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = strlen(base) - 4; /* without ".bin" */
    if (n < 16)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!strchr("0123456789abcdefABCDEF", base[i]))
            return 0;
    return 1;
}

/* A fresh folder populated by one context; returns it (malloc'ed). */
static char *populated_dir(file_list *bins)
{
    char *dir = tu_make_temp_dir("cachetest");
    assert_non_null(dir);
    assert_int_equal(list_all(dir).n, 0);
    open_check(dir, 0);
    *bins = list_bins(dir);
    if (bins->n < 1)
        fail_msg("no *.bin file in %s after the first context", dir);
    file_list all = list_all(dir);
    for (int i = 0; i < all.n; i++)
        if (is_temp_name(all.path[i]))
            fail_msg("a temporary file was left behind: %s", all.path[i]);
    for (int i = 0; i < bins->n; i++) {
        if (!is_hex_name(bins->path[i]))
            fail_msg("cache file name is not a hash: %s", bins->path[i]);
        assert_true(bins->size[i] > 0);
    }
    return dir;
}

static void write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static void test_fresh_then_cached(void **state)
{
    (void)state;
    file_list bins;
    char *dir = populated_dir(&bins);
    open_check(dir, 1);
    open_check(dir, 1);
    file_list again = list_bins(dir);
    assert_int_equal(again.n, bins.n); /* loading does not add entries */
    tu_remove_tree(dir);
    free(dir);
}

typedef enum damage { TRUNC_HALF, TRUNC_ZERO, GARBAGE_MIDDLE, FOREIGN } damage;

static void damage_file(const char *path, long size, damage how, tu_rng *rng)
{
    switch (how) {
    case TRUNC_HALF: assert_int_equal(truncate(path, size / 2), 0); break;
    case TRUNC_ZERO: assert_int_equal(truncate(path, 0), 0); break;
    case GARBAGE_MIDDLE: {
        int fd = open(path, O_WRONLY);
        assert_true(fd >= 0);
        unsigned char junk[64];
        for (size_t i = 0; i < sizeof junk; i++)
            junk[i] = (unsigned char)tu_rng_next(rng);
        long at = size / 2 > 32 ? size / 2 - 32 : 0;
        size_t n = (size_t)(size - at < 64 ? size - at : 64);
        assert_int_equal(pwrite(fd, junk, n, at), (ssize_t)n);
        assert_int_equal(close(fd), 0);
        break;
    }
    case FOREIGN: {
        size_t n = 4096 + (size_t)tu_rng_below(rng, 4096);
        unsigned char *junk = malloc(n);
        assert_non_null(junk);
        for (size_t i = 0; i < n; i++)
            junk[i] = (unsigned char)tu_rng_next(rng);
        write_file(path, junk, n);
        free(junk);
        break;
    }
    }
}

static void run_damage(damage how)
{
    tu_rng rng;
    tu_rng_seed(&rng, tu_base_seed() + (uint64_t)how);
    file_list bins;
    char *dir = populated_dir(&bins);
    for (int i = 0; i < bins.n; i++)
        damage_file(bins.path[i], bins.size[i], how, &rng);
    open_check(dir, 0); /* noticed, compiled, correct */
    file_list after = list_bins(dir);
    assert_true(after.n >= 1);
    open_check(dir, 1); /* the entry was rewritten valid */
    tu_remove_tree(dir);
    free(dir);
}

static void test_truncated_half(void **state)
{
    (void)state;
    run_damage(TRUNC_HALF);
}

static void test_truncated_zero(void **state)
{
    (void)state;
    run_damage(TRUNC_ZERO);
}

static void test_garbage_in_middle(void **state)
{
    (void)state;
    run_damage(GARBAGE_MIDDLE);
}

static void test_foreign_file(void **state)
{
    (void)state;
    run_damage(FOREIGN);
}

/* An entry with one byte appended: intact up to its end, but not what was stored. */
static void test_extended_by_one_byte(void **state)
{
    (void)state;
    file_list bins;
    char *dir = populated_dir(&bins);
    FILE *f = fopen(bins.path[0], "ab");
    assert_non_null(f);
    fputc(0x42, f);
    fclose(f);
    open_check(dir, 0);
    open_check(dir, 1);
    tu_remove_tree(dir);
    free(dir);
}

static void test_no_cache(void **state)
{
    (void)state;
    char first[1100];
    assert_int_equal(flashcl_files_in_home(NULL, 0), 0);
    assert_int_equal(open_check("", 0), 0);
    assert_int_equal(open_check("", 0), 0);
    if (flashcl_files_in_home(first, sizeof first))
        fail_msg("cache_dir \"\" wrote %s", first);
}

static void test_unwritable_dir(void **state)
{
    (void)state;
    char *dir = tu_make_temp_dir("cacheunw");
    assert_non_null(dir);
    char file[1024], sub[1100];
    snprintf(file, sizeof file, "%s/afile", dir);
    write_file(file, "x", 1);
    snprintf(sub, sizeof sub, "%s/sub", file);
    open_check(sub, 0);
    open_check(sub, 0);
    /* the folder is a regular file itself */
    open_check(file, 0);
    tu_remove_tree(dir);
    free(dir);
}

static void test_default_locations(void **state)
{
    (void)state;
    /* $FLASHCL_CACHE_DIR */
    char *d1 = tu_make_temp_dir("cacheenv");
    assert_non_null(d1);
    setenv("FLASHCL_CACHE_DIR", d1, 1);
    open_check(NULL, 0);
    assert_true(list_bins(d1).n >= 1);
    open_check(NULL, 1);
    unsetenv("FLASHCL_CACHE_DIR");
    assert_int_equal(flashcl_files_in_home(NULL, 0), 0);

    /* $XDG_CACHE_HOME/flashcl */
    char *d2 = tu_make_temp_dir("cachexdg");
    assert_non_null(d2);
    setenv("XDG_CACHE_HOME", d2, 1);
    open_check(NULL, 0);
    char p[1024];
    snprintf(p, sizeof p, "%s/flashcl", d2);
    if (list_bins(p).n < 1)
        fail_msg("no *.bin under $XDG_CACHE_HOME/flashcl (%s)", p);
    open_check(NULL, 1);

    /* $HOME/.cache/flashcl */
    unsetenv("XDG_CACHE_HOME");
    open_check(NULL, 0);
    snprintf(p, sizeof p, "%s/.cache/flashcl", g_home);
    if (list_bins(p).n < 1)
        fail_msg("no *.bin under $HOME/.cache/flashcl (%s)", p);
    open_check(NULL, 1);
    tu_remove_tree(p);
    snprintf(p, sizeof p, "%s/.cache", g_home);
    tu_remove_tree(p);
    setenv("XDG_CACHE_HOME", g_home, 1);

    /* an explicit folder wins over the environment */
    setenv("FLASHCL_CACHE_DIR", d1, 1);
    char *d3 = tu_make_temp_dir("cacheexp");
    assert_non_null(d3);
    open_check(d3, 0);
    assert_true(list_bins(d3).n >= 1);
    unsetenv("FLASHCL_CACHE_DIR");

    tu_remove_tree(d1);
    tu_remove_tree(d2);
    tu_remove_tree(d3);
    free(d1);
    free(d2);
    free(d3);
}

typedef struct create_arg {
    const char *dir;
    flashcl_status status;
    char error[512];
} create_arg;

static void *create_thread(void *p)
{
    create_arg *a = p;
    flashcl_context *ctx = NULL;
    a->status = tu_context_create(a->dir, &ctx);
    snprintf(a->error, sizeof a->error, "%s", flashcl_last_error());
    flashcl_context_destroy(ctx);
    return NULL;
}

static void test_concurrent_creation(void **state)
{
    (void)state;
    char *dir = tu_make_temp_dir("cacheconc");
    assert_non_null(dir);
    enum { N = 3 };
    pthread_t t[N];
    create_arg a[N];
    for (int i = 0; i < N; i++) {
        memset(&a[i], 0, sizeof a[i]);
        a[i].dir = dir;
        assert_int_equal(pthread_create(&t[i], NULL, create_thread, &a[i]), 0);
    }
    for (int i = 0; i < N; i++) {
        assert_int_equal(pthread_join(t[i], NULL), 0);
        if (a[i].status != FLASHCL_SUCCESS)
            fail_msg("thread %d: %s: %s", i, flashcl_status_string(a[i].status), a[i].error);
    }
    open_check(dir, 1);
    file_list all = list_all(dir);
    for (int i = 0; i < all.n; i++)
        if (is_temp_name(all.path[i]))
            fail_msg("a temporary file was left behind: %s", all.path[i]);
    tu_remove_tree(dir);
    free(dir);
}

int main(void)
{
    g_home = tu_make_temp_dir("home");
    if (!g_home)
        return 1;
    /* PoCL keeps its own kernel cache under $XDG_CACHE_HOME or $HOME: pin it where it is, so
     * that the fake HOME below does not make every compile cold */
    if (!getenv("POCL_CACHE_DIR")) {
        char pocl[1024];
        const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
        if (xdg && *xdg)
            snprintf(pocl, sizeof pocl, "%s/pocl/kcache", xdg);
        else
            snprintf(pocl, sizeof pocl, "%s/.cache/pocl/kcache", home ? home : "/tmp");
        setenv("POCL_CACHE_DIR", pocl, 1);
    }
    setenv("HOME", g_home, 1);
    setenv("XDG_CACHE_HOME", g_home, 1);
    unsetenv("FLASHCL_CACHE_DIR");
    /* skip cleanly without a device (cache off for this probe) */
    flashcl_context *probe = NULL;
    const flashcl_status st = tu_context_create("", &probe);
    if (!tu_probe_is_opencl(st, probe, "no kernel cache; FLASHCL_BACKEND=opencl tests the cache")) {
        tu_remove_tree(g_home);
        free(g_home);
        return 77;
    }
    if (flashcl_files_in_home(NULL, 0) != 0) {
        fprintf(stderr, "FAIL: cache_dir \"\" wrote into $HOME\n");
        return 1;
    }

    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fresh_then_cached),
        cmocka_unit_test(test_truncated_half),
        cmocka_unit_test(test_truncated_zero),
        cmocka_unit_test(test_garbage_in_middle),
        cmocka_unit_test(test_foreign_file),
        cmocka_unit_test(test_extended_by_one_byte),
        cmocka_unit_test(test_no_cache),
        cmocka_unit_test(test_unwritable_dir),
        cmocka_unit_test(test_default_locations),
        cmocka_unit_test(test_concurrent_creation),
    };
    int failures = cmocka_run_group_tests(tests, NULL, NULL);
    tu_remove_tree(g_home);
    free(g_home);
    return tu_exit_code(failures);
}
