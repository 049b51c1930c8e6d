/* Per-device setup for the softmax suite: the progress line, creating the context (first
 * and cached), an OpenCL twin for contexts of other backends, and the copy bandwidth. */
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

static flashcl_status launch_copy(void *user, long iteration)
{
    launch_state *ls = user;
    (void)iteration;
    return bench_copy_enqueue(&ls->run->kernels, ls->run->queue,
                              flashcl_buffer_cl_mem(ls->x[0].buffer),
                              flashcl_buffer_cl_mem(ls->y[0].buffer), ls->copy_bytes);
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
            st = bench_time(run->cl_owner, run->queue, launch_copy, &ls, 2, run->opts->reps,
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
