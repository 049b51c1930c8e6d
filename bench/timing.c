/* Timing: batches of launches between two queue markers.
 *
 * The library's queue has CL_QUEUE_PROFILING_ENABLE, so a marker before and after a batch
 * gives device timestamps: END(first) to END(second) covers exactly the batch's execution on
 * the in-order queue, with no host round trip in it. Where a driver has no profiling data for
 * markers (or gives nonsense), the host monotonic clock around batch + finish stands in; it
 * includes one launch latency per batch, which the batch size makes small. The median over
 * batches is reported: robust to a stray slow batch (clock ramp, a display refresh). */
#include <math.h>
#include <stdlib.h>
#include <time.h>

#include "bench.h"

double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int compare_doubles(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Device seconds between the end of `first` and the end of `second`; < 0 when unavailable. */
static double event_seconds(cl_event first, cl_event second)
{
    cl_ulong t0 = 0, t1 = 0;
    if (clGetEventProfilingInfo(first, CL_PROFILING_COMMAND_END, sizeof t0, &t0, NULL) !=
            CL_SUCCESS ||
        clGetEventProfilingInfo(second, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL) !=
            CL_SUCCESS)
        return -1.0;
    if (t1 <= t0)
        return -1.0;
    return (double)(t1 - t0) * 1e-9;
}

/* Runs one batch of n launches starting at *iteration; returns host seconds and, through
 * *device_s, device seconds (< 0 when the markers gave none). */
static flashcl_status run_batch(flashcl_context *ctx, cl_command_queue queue,
                                bench_launch_fn launch, void *user, long *iteration, int n,
                                double *host_s, double *device_s)
{
    cl_event before = NULL, after = NULL;
    flashcl_status st = FLASHCL_SUCCESS;
    *device_s = -1.0;
    const double t0 = bench_now();
    if (queue && clEnqueueMarkerWithWaitList(queue, 0, NULL, &before) != CL_SUCCESS)
        before = NULL;
    for (int i = 0; i < n && st == FLASHCL_SUCCESS; i++)
        st = launch(user, (*iteration)++);
    if (queue && before && clEnqueueMarkerWithWaitList(queue, 0, NULL, &after) != CL_SUCCESS)
        after = NULL;
    const flashcl_status fin = flashcl_finish(ctx);
    *host_s = bench_now() - t0;
    if (st == FLASHCL_SUCCESS)
        st = fin;
    if (st == FLASHCL_SUCCESS && before && after) {
        const double d = event_seconds(before, after);
        /* Device time can only be shorter than the host's view of the same batch; anything
         * else is a driver quirk, and the host clock is the safer number. */
        if (d > 0.0 && d <= *host_s * 1.05 + 1e-4)
            *device_s = d;
    }
    if (before)
        clReleaseEvent(before);
    if (after)
        clReleaseEvent(after);
    return st;
}

flashcl_status bench_time(flashcl_context *ctx, cl_command_queue queue, bench_launch_fn launch,
                          void *user, int warmup, int reps, double target_batch_s,
                          double budget_s, bench_timing *out)
{
    long iteration = 0;
    double host_s, device_s;
    flashcl_status st;

    /* Warm-up: first launches pay for lazy kernel compilation (PoCL), first-touch page
     * mapping and clock ramp-up. One launch per buffer set also fills every output. */
    if (warmup < 1)
        warmup = 1;
    for (int i = 0; i < warmup; i++)
        if ((st = launch(user, iteration++)) != FLASHCL_SUCCESS)
            return st;
    if ((st = flashcl_finish(ctx)) != FLASHCL_SUCCESS)
        return st;

    /* Size the batch. One launch timed alone is dominated by launch latency for small
     * kernels, so estimate again with the first guess and size from that. */
    int batch = 1;
    double per_launch = 0.0;
    for (int pass = 0; pass < 2; pass++) {
        if ((st = run_batch(ctx, queue, launch, user, &iteration, batch, &host_s, &device_s)) !=
            FLASHCL_SUCCESS)
            return st;
        per_launch = (device_s > 0.0 ? device_s : host_s) / batch;
        if (per_launch <= 0.0)
            per_launch = 1e-7;
        const double want = ceil(target_batch_s / per_launch);
        const int next = want > 100000.0 ? 100000 : (want < 1.0 ? 1 : (int)want);
        if (next <= batch)
            break;
        batch = next;
    }

    /* Slow devices (a CPU on the full suite) would take minutes: cap the total. */
    if (reps < 1)
        reps = 1;
    const double per_batch = per_launch * batch;
    if (per_batch * reps > budget_s) {
        const int fit = (int)(budget_s / per_batch);
        reps = fit < 1 ? 1 : fit;
    }

    double *times = malloc((size_t)reps * sizeof *times);
    if (!times)
        return FLASHCL_OUT_OF_MEMORY;
    int all_events = 1;
    for (int r = 0; r < reps; r++) {
        st = run_batch(ctx, queue, launch, user, &iteration, batch, &host_s, &device_s);
        if (st != FLASHCL_SUCCESS) {
            free(times);
            return st;
        }
        if (device_s <= 0.0)
            all_events = 0;
        times[r] = (device_s > 0.0 ? device_s : host_s) / batch;
    }
    qsort(times, (size_t)reps, sizeof *times, compare_doubles);
    out->ms = 1e3 * (reps % 2 ? times[reps / 2] : 0.5 * (times[reps / 2 - 1] + times[reps / 2]));
    out->min_ms = 1e3 * times[0];
    out->max_ms = 1e3 * times[reps - 1];
    out->batch = batch;
    out->reps = reps;
    out->used_events = all_events;
    free(times);
    return FLASHCL_SUCCESS;
}
