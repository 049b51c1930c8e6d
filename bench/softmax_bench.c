/* The softmax suite: for each device, the context creation cost (first and cached), the copy
 * kernel's bandwidth (the device's ceiling), then one table row per shape x dtype x variant:
 * time, GB/s, % of copy, % of a copy of the same bytes (OpenCL contexts), speedup over the
 * naive three-pass kernels, error against host_ref. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accuracy.h"
#include "host_ref.h"
#include "suite.h"

static flashcl_status launch_flashcl(void *user, long iteration)
{
    launch_state *ls = user;
    const int s = (int)(iteration % ls->sets);
    return flashcl_softmax(ls->run->ctx, &ls->params, &ls->x[s], &ls->y[s]);
}

static flashcl_status launch_naive(void *user, long iteration)
{
    launch_state *ls = user;
    const int s = (int)(iteration % ls->sets);
    return bench_naive_enqueue(&ls->run->kernels, ls->run->queue, ls->x[s].dtype,
                               flashcl_buffer_cl_mem(ls->x[s].buffer),
                               flashcl_buffer_cl_mem(ls->y[s].buffer),
                               flashcl_buffer_cl_mem(ls->row_max),
                               flashcl_buffer_cl_mem(ls->row_sum), ls->x[s].shape[0],
                               ls->x[s].shape[1], ls->params.log);
}


/* ---- one shape x dtype ------------------------------------------------------------------- */

static void print_header(void)
{
    printf("%-15s %-5s %-8s %10s %8s %6s %6s %10s %8s %9s %7s  %s\n", "shape", "dtype",
           "variant", "ms", "GB/s", "%copy", "%same", "naive ms", "speedup", "max|err|",
           "err/tol", "check");
}

static void print_row(const bench_row *r)
{
    char shape[48];
    snprintf(shape, sizeof shape, "%lldx%lld", (long long)r->shape.rows,
             (long long)r->shape.cols);
    printf("%-15s %-5s %-8s ", shape, bench_dtype_name(r->dtype), bench_variant_name(r->variant));
    if (r->status != BENCH_ROW_OK && r->status != BENCH_ROW_FAIL) {
        printf("%s\n", r->note);
        fflush(stdout);
        return;
    }
    char pct[16] = "-", same[16] = "-", naive[24] = "-", speed[16] = "-";
    if (r->pct_copy >= 0)
        snprintf(pct, sizeof pct, "%.1f%%", r->pct_copy);
    if (r->pct_copy_same >= 0)
        snprintf(same, sizeof same, "%.1f%%", r->pct_copy_same);
    if (r->naive_ms >= 0)
        snprintf(naive, sizeof naive, "%.4f", r->naive_ms);
    if (r->speedup >= 0)
        snprintf(speed, sizeof speed, "%.2fx", r->speedup);
    printf("%10.4f %8.1f %6s %6s %10s %8s %9.2e %7.3f  %s\n", r->ms, r->gbps, pct, same, naive,
           speed, r->max_abs_err, r->err_over_tol, r->status == BENCH_ROW_OK ? "ok" : "FAIL");
    fflush(stdout);
}

/* How many buffer pairs to rotate so that the working set of a cycle exceeds the cache.
 * At least 256 MiB: drivers report anything from L1 to L2 as "global memory cache" (NVIDIA's
 * OpenCL says a few MiB where the H100's L2 is 50 MB), and GPU L2s reach 60+ MB.
 * torch_softmax.py applies the same rule. */
static int pick_sets(const device_run *run, size_t pair_bytes)
{
    size_t cache = run->queue ? bench_device_cache_bytes(run->dev) : 0;
    size_t target = 4 * cache > 256 * MIB ? 4 * cache : 256 * MIB;
    size_t sets = (target + pair_bytes - 1) / pair_bytes;
    if (sets > BENCH_MAX_SETS)
        sets = BENCH_MAX_SETS;
    while (sets > 1 && sets * pair_bytes > run->rep->info.global_mem_bytes / 2)
        sets--;
    return sets < 1 ? 1 : (int)sets;
}

/* Allocates up to `want` pairs of packed [rows, cols] buffers in ctx and uploads x_host into
 * each input. Fewer pairs than asked is still a measurement, once one exists. With
 * --reuse-output every set's output is set 0's: one output buffer, written by every call, which
 * stays in the cache when it fits there (torch.softmax's caching allocator does that to its
 * output, so this is how to compare with torch measured that way). */
static flashcl_status alloc_sets(flashcl_context *ctx, launch_state *ls, int want,
                                 bench_shape shape, flashcl_dtype dtype, const void *x_host,
                                 size_t bytes)
{
    for (int s = 0; s < want; s++) {
        const int own_y = s == 0 || !ls->run->opts->reuse_output;
        flashcl_buffer *xb = NULL, *yb = own_y ? NULL : ls->y[0].buffer;
        flashcl_status st = flashcl_buffer_create(ctx, bytes, &xb);
        if (st == FLASHCL_SUCCESS && own_y)
            st = flashcl_buffer_create(ctx, bytes, &yb);
        if (st == FLASHCL_SUCCESS)
            st = flashcl_buffer_write(xb, 0, x_host, bytes);
        if (st != FLASHCL_SUCCESS) {
            flashcl_buffer_destroy(xb);
            if (own_y)
                flashcl_buffer_destroy(yb);
            return s > 0 ? FLASHCL_SUCCESS : st;
        }
        const flashcl_tensor t = {xb, 0, dtype, 2, {shape.rows, shape.cols, 0, 0},
                                  {shape.cols, 1, 0, 0}};
        ls->x[s] = t;
        ls->y[s] = t;
        ls->y[s].buffer = yb;
        ls->sets = s + 1;
    }
    return FLASHCL_SUCCESS;
}

static void free_sets(launch_state *ls)
{
    for (int s = 0; s < ls->sets; s++) {
        flashcl_buffer_destroy(ls->x[s].buffer);
        if (s == 0 || ls->y[s].buffer != ls->y[0].buffer) /* --reuse-output shares set 0's */
            flashcl_buffer_destroy(ls->y[s].buffer);
    }
    flashcl_buffer_destroy(ls->row_max);
    flashcl_buffer_destroy(ls->row_sum);
    ls->sets = 0;
    ls->row_max = ls->row_sum = NULL;
}

/* The naive baseline on the same data: on ctx's own buffers, or for a context of another
 * backend on a copy of them in the OpenCL twin. Returns the median ms, or -1. */
static double measure_naive(device_run *run, const launch_state *ls, bench_shape shape,
                            flashcl_dtype dtype, const void *x_host, size_t bytes)
{
    launch_state nls = *ls;
    flashcl_status st = FLASHCL_SUCCESS;
    bench_timing t;
    if (run->twin) {
        memset(&nls, 0, sizeof nls);
        nls.run = run;
        nls.params = ls->params;
        st = alloc_sets(run->cl_owner, &nls, ls->sets, shape, dtype, x_host, bytes);
    }
    nls.row_max = nls.row_sum = NULL;
    if (st == FLASHCL_SUCCESS)
        st = flashcl_buffer_create(run->cl_owner, (size_t)shape.rows * sizeof(float),
                                   &nls.row_max);
    if (st == FLASHCL_SUCCESS)
        st = flashcl_buffer_create(run->cl_owner, (size_t)shape.rows * sizeof(float),
                                   &nls.row_sum);
    if (st == FLASHCL_SUCCESS)
        st = bench_time(run->cl_owner, run->queue, launch_naive, &nls, nls.sets,
                        run->opts->reps, TARGET_BATCH_S, BUDGET_S, &t);
    if (st == FLASHCL_BUILD_FAILED) {
        run->naive_broken = 1;
        bench_progress_clear();
        fprintf(stderr, "flashcl-bench: naive baseline unavailable: %s\n",
                bench_kernels_error());
    }
    flashcl_buffer_destroy(nls.row_max);
    flashcl_buffer_destroy(nls.row_sum);
    nls.row_max = nls.row_sum = NULL;
    if (run->twin)
        free_sets(&nls);
    return st == FLASHCL_SUCCESS ? t.ms : -1.0;
}

/* The copy kernel moving the row's bytes on the row's own buffers, launched as flashcl's calls
 * are (one per call, the same rotation), so that %same separates what the launches cost --
 * inter-kernel gaps, ramp-up and tail, which a short call pays as much as a long one -- from what
 * the softmax kernel costs: a 64 MiB call pays them, the 512 MiB copy behind %copy hardly. Only
 * for OpenCL contexts: a CUDA context's launches are another API's (compare_torch.py sets them
 * beside a torch copy_ of the same bytes). Returns the median ms, or -1. */
static double measure_copy_same(device_run *run, launch_state *ls, size_t bytes)
{
    bench_timing t;
    if (!run->ctx_queue || run->twin || !run->have_kernels)
        return -1.0;
    ls->copy_bytes = bytes;
    if (bench_time(run->ctx, run->ctx_queue, bench_launch_copy, ls, ls->sets, run->opts->reps,
                   TARGET_BATCH_S, BUDGET_S, &t) != FLASHCL_SUCCESS)
        return -1.0;
    return t.ms;
}

/* Runs every variant of one shape x dtype, appending rows to the report. */
static void bench_shape_dtype(device_run *run, bench_shape shape, flashcl_dtype dtype)
{
    const bench_options *o = run->opts;
    bench_device_report *rep = run->rep;
    const size_t esz = host_ref_dtype_size(dtype);
    const size_t elems = (size_t)shape.rows * (size_t)shape.cols;
    const size_t bytes = elems * esz;
    bench_row base;
    memset(&base, 0, sizeof base);
    base.shape = shape;
    base.dtype = dtype;
    base.naive_ms = base.speedup = base.pct_copy = -1.0;
    base.copy_same_ms = base.pct_copy_same = -1.0;
    launch_state ls;
    memset(&ls, 0, sizeof ls);
    ls.run = run;
    ls.params.scale = 1.0f;
    ls.params.log = o->log;
    void *x_host = NULL;
    flashcl_status st = FLASHCL_SUCCESS;
    char detail[256] = "";

    if ((run->max_alloc && bytes > run->max_alloc) ||
        (rep->info.global_mem_bytes && 2 * bytes > rep->info.global_mem_bytes)) {
        char need[32], cap[32];
        bench_format_bytes((double)bytes, need, sizeof need);
        bench_format_bytes((double)(run->max_alloc && bytes > run->max_alloc
                                        ? run->max_alloc
                                        : rep->info.global_mem_bytes),
                           cap, sizeof cap);
        snprintf(detail, sizeof detail, "%s per buffer; the device allows %s%s", need, cap,
                 run->max_alloc && bytes > run->max_alloc ? " per buffer" : " in all");
        st = FLASHCL_OUT_OF_MEMORY;
        goto fail_all;
    }
    x_host = malloc(bytes);
    if (!x_host) {
        st = FLASHCL_OUT_OF_MEMORY;
        goto fail_all;
    }
    bench_fill_random(x_host, dtype, elems, 0x5eed0000ull ^ (uint64_t)shape.rows * 1000003u ^
                                                (uint64_t)shape.cols ^ (uint64_t)dtype << 40);
    st = alloc_sets(run->ctx, &ls, pick_sets(run, 2 * bytes), shape, dtype, x_host, bytes);
    if (st != FLASHCL_SUCCESS) {
        if (st != FLASHCL_OUT_OF_MEMORY)
            snprintf(detail, sizeof detail, "%s", flashcl_last_error());
        goto fail_all;
    }

    /* The baseline, measured once for all variants of this shape; failing does not fail
     * the row (it shows as "-"). */
    if (o->naive && run->have_kernels && !run->naive_broken)
        base.naive_ms = measure_naive(run, &ls, shape, dtype, x_host, bytes);
    base.copy_same_ms = measure_copy_same(run, &ls, bytes);

    for (int v = 0; v < o->nvariants; v++) {
        bench_row r = base;
        r.variant = o->variants[v];
        r.sets = ls.sets;
        ls.params.variant = o->variants[v];
        bench_timing t;
        st = bench_time(run->ctx, run->ctx_queue, launch_flashcl, &ls, ls.sets, o->reps,
                        TARGET_BATCH_S, BUDGET_S, &t);
        if (st == FLASHCL_SUCCESS)
            st = bench_check_output(ls.y[0].buffer, x_host, dtype, shape.rows, shape.cols,
                                    o->log, &r.max_abs_err, &r.err_over_tol);
        if (st != FLASHCL_SUCCESS) {
            bench_row_failed(&r.status, r.note, sizeof r.note, st, flashcl_last_error());
        } else {
            r.ms = t.ms;
            r.batch = t.batch;
            r.reps = t.reps;
            r.used_events = t.used_events;
            r.gbps = (double)(2 * bytes) / (t.ms * 1e-3) / 1e9;
            if (rep->copy_gbps > 0)
                r.pct_copy = 100.0 * r.gbps / rep->copy_gbps;
            if (r.copy_same_ms > 0)
                r.pct_copy_same = 100.0 * r.copy_same_ms / r.ms;
            if (r.naive_ms >= 0)
                r.speedup = r.naive_ms / r.ms;
            r.status = r.err_over_tol <= 1.0 ? BENCH_ROW_OK : BENCH_ROW_FAIL;
        }
        rep->rows[rep->nrows++] = r;
        bench_progress_clear();
        print_row(&r);
    }
    goto cleanup;

fail_all:
    for (int v = 0; v < o->nvariants; v++) {
        bench_row r = base;
        r.variant = o->variants[v];
        bench_row_failed(&r.status, r.note, sizeof r.note, st, detail);
        rep->rows[rep->nrows++] = r;
        bench_progress_clear();
        print_row(&r);
    }
cleanup:
    free_sets(&ls);
    free(x_host);
}

/* ---- one device -------------------------------------------------------------------------- */

static void print_banner(const device_run *run, const char *cache_dir)
{
    const bench_device_report *rep = run->rep;
    const flashcl_device_info *d = &rep->info;
    bench_print_device_head(rep);
    /* "cold" only when the first creation really compiled; else it is just the first. */
    printf("   context create: %s %.3f s (%s, programs %.3f s), then %.3f s (%s, programs "
           "%.3f s)%s\n",
           rep->cold_from_cache ? "first" : "cold", rep->ctx_cold_s,
           rep->cold_from_cache ? "from cache" : "compiled", rep->cold_build_s, rep->ctx_warm_s,
           rep->warm_from_cache ? "from cache" : "compiled", rep->warm_build_s,
           cache_dir[0] ? " [fresh cache folder]" : "");
    if (rep->copy_gbps > 0) {
        char sz[32];
        bench_format_bytes((double)rep->copy_bytes, sz, sizeof sz);
        printf("   copy bandwidth: %.1f GB/s (%scopy kernel, 2 x %s, read + write counted)\n",
               rep->copy_gbps, run->twin ? "OpenCL " : "", sz);
    } else {
        printf("   copy bandwidth: unknown%s%s\n", rep->error[0] ? ": " : "", rep->error);
    }
    printf("   %s over the last dimension, uniform [-8, 8] inputs, output dtype = input "
           "dtype;\n   time: median of %d batches per row; GB/s counts rows*cols*(in+out) "
           "bytes once\n",
           run->opts->log ? "log_softmax" : "softmax", run->opts->reps);
    printf("   buffers: inputs rotate through sets larger than the cache; outputs %s\n",
           run->opts->reuse_output ? "one buffer for every call (--reuse-output)"
                                   : "rotate with them");
    if (run->ctx_queue && !run->twin)
        printf("   %%same: the copy kernel moving a row's bytes, one launch per call as flashcl's "
               "(its time / flashcl's):\n   what the launches leave; %%copy is of the copy "
               "bandwidth above\n");
    if (!run->ctx_queue)
        printf("   %s context: flashcl timed by the host clock around batches;\n   %s\n",
               bench_backend_name(d->backend),
               run->twin ? "copy and naive columns from an OpenCL context on the same GPU"
                         : "no OpenCL context on this GPU: no copy or naive columns");
    printf("\n");
}

/* What bench_run_devices hands run_device. */
typedef struct softmax_cmd {
    const bench_options *o;
    bench_device_report *reports;
} softmax_cmd;

static int run_device(void *suite, int slot, const flashcl_context_options *copts,
                      bench_device_loop *loop)
{
    const bench_options *o = ((softmax_cmd *)suite)->o;
    bench_device_report *rep = &((softmax_cmd *)suite)->reports[slot];
    device_run run;
    memset(&run, 0, sizeof run);
    run.opts = o;
    run.rep = rep;
    char cache_dir[512];
    const int per_device = o->nshapes * o->ndtypes;

    if (bench_start_device(o, copts, rep, &run.ctx, cache_dir, sizeof cache_dir, loop,
                           per_device) != FLASHCL_SUCCESS)
        return BENCH_EXIT_FAIL;
    if (flashcl_context_cl_objects(run.ctx, &run.clctx, &run.dev, &run.queue) ==
        FLASHCL_SUCCESS) {
        run.cl_owner = run.ctx;
        run.ctx_queue = run.queue;
        run.max_alloc = bench_device_max_alloc(run.dev);
    } else {
        /* Not OpenCL (CUDA): flashcl is timed by the host clock around batches, and the copy
         * kernel and naive baseline run on an OpenCL context of the same GPU, if any. */
        run.queue = NULL;
        bench_progress_show(o, loop->done, loop->total, "opening an OpenCL twin");
        run.twin = bench_open_opencl_twin(&rep->info);
        bench_progress_clear();
        if (run.twin &&
            flashcl_context_cl_objects(run.twin, &run.clctx, &run.dev, &run.queue) ==
                FLASHCL_SUCCESS) {
            run.cl_owner = run.twin;
            rep->baselines_on_opencl_twin = 1;
        } else {
            flashcl_context_destroy(run.twin);
            run.twin = NULL;
            run.queue = NULL;
        }
    }
    if (run.cl_owner) {
        bench_kernels_init(&run.kernels, run.clctx, run.dev);
        run.have_kernels = 1;
    }
    if (run.have_kernels) {
        bench_progress_show(o, loop->done, loop->total, "copy bandwidth");
        bench_measure_copy(&run);
        bench_progress_clear();
    }
    print_banner(&run, cache_dir);
    print_header();
    fflush(stdout);

    rep->rows = calloc((size_t)(per_device * o->nvariants), sizeof *rep->rows);
    if (!rep->rows) {
        snprintf(rep->error, sizeof rep->error, "out of host memory");
    } else {
        for (int s = 0; s < o->nshapes; s++)
            for (int d = 0; d < o->ndtypes; d++) {
                char what[96];
                snprintf(what, sizeof what, "%lldx%lld %s", (long long)o->shapes[s].rows,
                         (long long)o->shapes[s].cols, bench_dtype_name(o->dtypes[d]));
                bench_progress_show(o, ++loop->done, loop->total, what);
                bench_shape_dtype(&run, o->shapes[s], o->dtypes[d]);
            }
    }
    bench_progress_clear();
    printf("\n");

    if (run.have_kernels)
        bench_kernels_release(&run.kernels);
    flashcl_context_destroy(run.twin);
    flashcl_context_destroy(run.ctx);
    if (cache_dir[0])
        bench_remove_tree(cache_dir);

    int rc = rep->rows ? BENCH_EXIT_OK : BENCH_EXIT_FAIL;
    for (int i = 0; i < rep->nrows; i++)
        if (bench_tally_row(loop, rep->rows[i].status))
            rc = BENCH_EXIT_FAIL;
    return rc;
}

/* ---- the command ------------------------------------------------------------------------- */

int bench_cmd_softmax(const bench_options *o)
{
    int ndev = 0;
    softmax_cmd cmd = {o, bench_device_reports(o, sizeof *cmd.reports, &ndev)};
    if (!cmd.reports)
        return BENCH_EXIT_FAIL;
    bench_device_loop loop;
    int rc = bench_run_devices(o, ndev, o->nshapes * o->ndtypes, run_device, &cmd, &loop);
    if (o->json_path && bench_write_json(o->json_path, o, cmd.reports, ndev) != 0)
        rc = BENCH_EXIT_FAIL;
    for (int i = 0; i < ndev; i++)
        free(cmd.reports[i].rows);
    free(cmd.reports);
    bench_print_failures(loop.fails, loop.errors);
    return rc;
}
