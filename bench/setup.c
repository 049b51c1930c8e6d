/* Per-device setup for the suites: the progress line, the devices a command covers, creating
 * the context (first and cached), an OpenCL twin for contexts of other backends, and the copy
 * bandwidth. */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "suite.h"

/* ---- progress line on stderr -------------------------------------------------------------- */

static int progress_tty = -1;

void bench_progress_show(const bench_options *o, int done, int total, const char *what)
{
    if (o->quiet)
        return;
    if (progress_tty < 0)
        progress_tty = isatty(STDERR_FILENO);
    /* A terminal gets one line rewritten in place; a log gets plain lines. */
    if (progress_tty)
        fprintf(stderr, "\r\033[K[%d/%d] %s ...", done, total, what);
    else
        fprintf(stderr, "[%d/%d] %s ...\n", done, total, what);
    fflush(stderr);
}

void bench_progress_clear(void)
{
    if (progress_tty > 0) {
        fprintf(stderr, "\r\033[K");
        fflush(stderr);
    }
}

flashcl_status bench_launch_copy(void *user, long iteration)
{
    launch_state *ls = user;
    const int s = (int)(iteration % ls->sets);
    return bench_copy_enqueue(&ls->run->kernels, ls->run->queue,
                              flashcl_buffer_cl_mem(ls->x[s].buffer),
                              flashcl_buffer_cl_mem(ls->y[s].buffer), ls->copy_bytes);
}

/* ---- context creation, first and cached ---------------------------------------------------- */

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

void bench_remove_tree(const char *dir)
{
    nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS); /* children first, links not followed */
}

/* Creates the context twice: the second creation loads what the first stored in the binary
 * cache (warm: every later run), and is the context benchmarked. The first compiles only when
 * the cache does not hold this device's kernels yet; with --cold it gets a fresh, private
 * cache folder so that it always compiles (a first run's cost). Not the default: compiling
 * every kernel takes seconds on GPU drivers but can take many minutes through PoCL. */
flashcl_status bench_open_context(const flashcl_context_options *base, int cold,
                                   bench_device_report *rep, flashcl_context **out,
                                   char *cache_dir, size_t cache_dir_size)
{
    flashcl_context_options opts = *base;
    cache_dir[0] = '\0';
    if (cold) {
        const char *tmp = getenv("TMPDIR");
        snprintf(cache_dir, cache_dir_size, "%s/flashcl-bench-cache-XXXXXX",
                 tmp && *tmp ? tmp : "/tmp");
        if (mkdtemp(cache_dir))
            opts.cache_dir = cache_dir;
        else
            cache_dir[0] = '\0'; /* the default cache, then: "cold" may load from it */
    }

    flashcl_context *first = NULL;
    double t0 = bench_now();
    flashcl_status st = flashcl_context_create(&opts, &first);
    rep->ctx_cold_s = bench_now() - t0;
    if (st != FLASHCL_SUCCESS)
        return st;
    flashcl_context_build_info(first, &rep->cold_from_cache, &rep->cold_build_s);
    flashcl_context_destroy(first);

    t0 = bench_now();
    st = flashcl_context_create(&opts, out);
    rep->ctx_warm_s = bench_now() - t0;
    if (st != FLASHCL_SUCCESS)
        return st;
    flashcl_context_build_info(*out, &rep->warm_from_cache, &rep->warm_build_s);
    return FLASHCL_SUCCESS;
}

/* ---- the devices of a command ------------------------------------------------------------- */

void *bench_device_reports(const bench_options *o, size_t size, int *ndev)
{
    size_t count = 1;
    if (o->all_devices) {
        flashcl_status st = flashcl_list_devices(NULL, 0, &count);
        if (st != FLASHCL_SUCCESS) {
            fprintf(stderr, "flashcl-bench: listing devices failed: %s: %s\n",
                    flashcl_status_string(st), flashcl_last_error());
            return NULL;
        }
        if (count == 0) {
            fprintf(stderr, "flashcl-bench: no devices\n");
            return NULL;
        }
    }
    void *reports = calloc(count, size);
    if (!reports)
        fprintf(stderr, "flashcl-bench: out of host memory\n");
    *ndev = (int)count;
    return reports;
}

/* The context options for the run's device i, and its index in the device list. */
static void select_device(const bench_options *o, int i, flashcl_context_options *copts,
                          int *index)
{
    memset(copts, 0, sizeof *copts);
    copts->backend = FLASHCL_BACKEND_AUTO;
    copts->device_index = -1;
    *index = -1;
    if (o->all_devices) {
        copts->device_index = i;
        *index = i;
    } else if (o->device) {
        char *end;
        errno = 0;
        const long idx = strtol(o->device, &end, 10);
        if (*o->device && !*end && !errno && idx >= 0 && idx <= 1000000) {
            copts->device_index = (int)idx;
            *index = (int)idx;
        } else {
            copts->device_match = o->device;
        }
    }
}

int bench_run_devices(const bench_options *o, int ndev, int per_device, bench_device_fn fn,
                      void *suite, bench_device_loop *loop)
{
    memset(loop, 0, sizeof *loop);
    loop->total = ndev * per_device;
    int rc = BENCH_EXIT_OK;
    for (int i = 0; i < ndev; i++) {
        flashcl_context_options copts;
        select_device(o, i, &copts, &loop->index);
        if (fn(suite, i, &copts, loop) != BENCH_EXIT_OK)
            rc = BENCH_EXIT_FAIL;
    }
    return rc;
}

int bench_tally_row(bench_device_loop *loop, bench_row_status status)
{
    loop->fails += status == BENCH_ROW_FAIL;
    loop->errors += status == BENCH_ROW_ERROR;
    return status == BENCH_ROW_FAIL || status == BENCH_ROW_ERROR;
}

flashcl_status bench_start_device(const bench_options *o, const flashcl_context_options *copts,
                                  bench_device_report *rep, flashcl_context **ctx,
                                  char *cache_dir, size_t cache_dir_size,
                                  bench_device_loop *loop, int per_device)
{
    rep->index = loop->index;
    bench_progress_show(o, loop->done, loop->total, "creating contexts");
    flashcl_status st = bench_open_context(copts, o->cold, rep, ctx, cache_dir, cache_dir_size);
    bench_progress_clear();
    if (st != FLASHCL_SUCCESS) {
        snprintf(rep->error, sizeof rep->error, "cannot open device: %s: %s",
                 flashcl_status_string(st), flashcl_last_error());
        fprintf(stderr, "flashcl-bench: %s\n", rep->error);
        loop->done += per_device;
        if (cache_dir[0])
            bench_remove_tree(cache_dir);
        return st;
    }
    rep->opened = 1;
    flashcl_context_device(*ctx, &rep->info);
    if (rep->index < 0) { /* opened by name: find its place in the list for the report */
        flashcl_device_info all[64];
        size_t n = 0;
        if (flashcl_list_devices(all, 64, &n) == FLASHCL_SUCCESS)
            for (size_t i = 0; i < n && i < 64; i++)
                if (!strcmp(all[i].name, rep->info.name) && all[i].backend == rep->info.backend) {
                    rep->index = (int)i;
                    break;
                }
    }
    return FLASHCL_SUCCESS;
}

void bench_row_failed(bench_row_status *status, char *note, size_t note_size, flashcl_status st,
                      const char *detail)
{
    if (st == FLASHCL_OUT_OF_MEMORY) {
        *status = BENCH_ROW_OOM;
        snprintf(note, note_size, "out of memory%s%s%s", *detail ? " (" : "", detail,
                 *detail ? ")" : "");
    } else if (st == FLASHCL_UNSUPPORTED) {
        *status = BENCH_ROW_UNSUPPORTED;
        snprintf(note, note_size, "unsupported: %s", detail);
    } else {
        *status = BENCH_ROW_ERROR;
        snprintf(note, note_size, "error: %s: %s", flashcl_status_string(st), detail);
    }
}

void bench_print_device_head(const bench_device_report *rep)
{
    const flashcl_device_info *d = &rep->info;
    char idx[16] = "?";
    if (rep->index >= 0)
        snprintf(idx, sizeof idx, "%d", rep->index);
    printf("== device %s: %s (%s)\n", idx, d->name, bench_backend_name(d->backend));
    printf("   vendor: %s | platform: %s | driver: %s\n", d->vendor, d->platform, d->driver);
}

void bench_print_failures(int fails, int errors)
{
    if (fails || errors)
        fprintf(stderr, "flashcl-bench: %d row(s) over tolerance, %d row(s) with errors\n",
                fails, errors);
}

/* An OpenCL context on the device `info` describes (same name), for a context of another
 * backend; NULL when there is none. Failing here only costs the copy and naive columns. */
flashcl_context *bench_open_opencl_twin(const flashcl_device_info *info)
{
    flashcl_device_info all[64];
    size_t n = 0;
    if (flashcl_list_devices(all, 64, &n) != FLASHCL_SUCCESS)
        return NULL;
    for (size_t i = 0; i < n && i < 64; i++) {
        if (all[i].backend != FLASHCL_BACKEND_OPENCL || strcmp(all[i].name, info->name))
            continue;
        flashcl_context_options opts;
        memset(&opts, 0, sizeof opts);
        opts.backend = FLASHCL_BACKEND_OPENCL;
        opts.device_index = (int)i;
        flashcl_context *twin = NULL;
        if (flashcl_context_create(&opts, &twin) == FLASHCL_SUCCESS)
            return twin;
    }
    return NULL;
}

/* ---- copy bandwidth ---------------------------------------------------------------------- */

void bench_measure_copy(device_run *run)
{
    bench_device_report *rep = run->rep;
    const int gpu = (rep->info.features & FLASHCL_FEATURE_GPU) != 0;
    /* Far larger than any cache (GPU L2s reach 100+ MB), small enough for any device. */
    size_t bytes = gpu ? 512 * MIB : 256 * MIB;
    if (run->max_alloc && bytes > run->max_alloc)
        bytes = run->max_alloc;
    if (rep->info.global_mem_bytes && bytes > rep->info.global_mem_bytes / 8)
        bytes = rep->info.global_mem_bytes / 8;
    const size_t granule = 16 * run->kernels.wg;
    launch_state ls;
    memset(&ls, 0, sizeof ls);
    ls.run = run;
    ls.sets = 1;
    for (; bytes >= 16 * MIB; bytes /= 2) {
        bytes = bytes / granule * granule;
        flashcl_buffer *a = NULL, *b = NULL;
        if (flashcl_buffer_create(run->cl_owner, bytes, &a) != FLASHCL_SUCCESS ||
            flashcl_buffer_create(run->cl_owner, bytes, &b) != FLASHCL_SUCCESS) {
            flashcl_buffer_destroy(a);
            continue;
        }
        /* Write the source: untouched host-backed memory (PoCL on a CPU) can read as the
         * kernel's shared zero page and flatter the number. */
        static unsigned char chunk[4 * 1048576];
        memset(chunk, 0xa5, sizeof chunk);
        flashcl_status st = FLASHCL_SUCCESS;
        for (size_t off = 0; off < bytes && st == FLASHCL_SUCCESS; off += sizeof chunk)
            st = flashcl_buffer_write(a, off, chunk,
                                      bytes - off < sizeof chunk ? bytes - off : sizeof chunk);
        bench_timing t;
        if (st == FLASHCL_SUCCESS) {
            ls.x[0].buffer = a;
            ls.y[0].buffer = b;
            ls.copy_bytes = bytes;
            st = bench_time(run->cl_owner, run->queue, bench_launch_copy, &ls, 2, run->opts->reps,
                            TARGET_BATCH_S, BUDGET_S, &t);
        }
        flashcl_buffer_destroy(a);
        flashcl_buffer_destroy(b);
        if (st == FLASHCL_SUCCESS) {
            rep->copy_gbps = 2.0 * (double)bytes / (t.ms * 1e-3) / 1e9;
            rep->copy_bytes = bytes;
            return;
        }
        if (st != FLASHCL_OUT_OF_MEMORY) {
            snprintf(rep->error, sizeof rep->error, "copy kernel failed: %s",
                     bench_kernels_error());
            return;
        }
    }
}
