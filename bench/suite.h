/* Internal to the suites (softmax_bench.c, attention_*.c, setup.c): one device's state and the
 * launch callbacks' data. */
#ifndef FLASHCL_BENCH_SUITE_H
#define FLASHCL_BENCH_SUITE_H

#include "bench.h"

#define MIB ((size_t)1 << 20)
/* A batch long enough that launch overhead and timer resolution vanish on fast GPUs. */
#define TARGET_BATCH_S 0.003
/* Per measurement; keeps the full suite on a small CPU within minutes. */
#define BUDGET_S 8.0

typedef struct device_run {
    const bench_options *opts;
    bench_device_report *rep;
    flashcl_context *ctx;
    cl_context clctx;
    cl_device_id dev;
    cl_command_queue queue;      /* NULL when no OpenCL context could be had */
    /* The flashcl context that owns clctx/queue: ctx itself when it is an OpenCL context; for
     * a context of another backend (CUDA), an OpenCL "twin" on the same GPU, so that the copy
     * kernel and the naive baseline still run on that hardware. */
    flashcl_context *cl_owner;
    flashcl_context *twin;       /* owned here when not NULL */
    cl_command_queue ctx_queue;  /* ctx's own queue, for markers; NULL when ctx is not OpenCL */
    bench_kernels kernels;
    int have_kernels;
    int naive_broken;            /* the naive program failed to build: say so once */
    size_t max_alloc;
} device_run;

/* What the launch callbacks need: buffer sets rotated by iteration number. */
typedef struct launch_state {
    device_run *run;
    int sets;
    flashcl_tensor x[BENCH_MAX_SETS], y[BENCH_MAX_SETS];
    flashcl_softmax_params params;
    flashcl_buffer *row_max, *row_sum;
    size_t copy_bytes;
} launch_state;

/* setup.c */
/* The progress line on stderr: rewritten in place on a terminal, plain lines otherwise. */
void bench_progress_show(const bench_options *o, int done, int total, const char *what);
void bench_progress_clear(void);
/* Creates the benchmarked context (twice: first and cached; see setup.c). cache_dir receives
 * the private cache folder made for --cold, or "". */
flashcl_status bench_open_context(const flashcl_context_options *base, int cold,
                                  bench_device_report *rep, flashcl_context **out,
                                  char *cache_dir, size_t cache_dir_size);
/* The progress and the tally of a command's run over its devices. */
typedef struct bench_device_loop {
    int index;               /* the device's index in the list; -1 when --device names it */
    int done, total;         /* progress: rows done, rows in all */
    int fails, errors;       /* rows over tolerance, rows with errors: the callbacks add them */
} bench_device_loop;
/* Measures device i of the command on copts; returns BENCH_EXIT_OK or BENCH_EXIT_FAIL. */
typedef int (*bench_device_fn)(void *suite, int i, const flashcl_context_options *copts,
                               bench_device_loop *loop);
/* The reports of a command, one per device it covers (every one with --all-devices, else
 * 1): calloc'd, `size` bytes each, *ndev of them; NULL after saying why. */
void *bench_device_reports(const bench_options *o, size_t size, int *ndev);
/* Calls fn for each of the ndev devices, per_device rows each. Returns BENCH_EXIT_FAIL when
 * any call did. */
int bench_run_devices(const bench_options *o, int ndev, int per_device, bench_device_fn fn,
                      void *suite, bench_device_loop *loop);
/* Adds one row's status to the tally; returns 1 when it is a failure or an error. */
int bench_tally_row(bench_device_loop *loop, bench_row_status status);
/* Opens the device of copts (bench_open_context, progress shown), fills rep->opened, info and
 * index. On failure: rep->error set and printed, loop->done advanced by per_device, the cache
 * folder removed; returns the status. */
flashcl_status bench_start_device(const bench_options *o, const flashcl_context_options *copts,
                                  bench_device_report *rep, flashcl_context **ctx,
                                  char *cache_dir, size_t cache_dir_size,
                                  bench_device_loop *loop, int per_device);
/* A row that could not be measured: its status and note from st and detail ("out of
 * memory (detail)", "unsupported: detail", "error: <status>: detail"). */
void bench_row_failed(bench_row_status *status, char *note, size_t note_size, flashcl_status st,
                      const char *detail);
/* The banner's first two lines: device, vendor | platform | driver. */
void bench_print_device_head(const bench_device_report *rep);
/* The closing line on stderr when rows failed or had errors. */
void bench_print_failures(int fails, int errors);
/* Removes a folder and everything in it (the --cold cache folder). */
void bench_remove_tree(const char *dir);
/* An OpenCL context on the same GPU as a context of another backend, or NULL. */
flashcl_context *bench_open_opencl_twin(const flashcl_device_info *info);
/* The copy kernel as a bench_time launch: x[s] into y[s] of the state's rotation (s the
 * iteration modulo its sets), copy_bytes each. */
flashcl_status bench_launch_copy(void *user, long iteration);
/* Fills run->rep->copy_gbps from the copy kernel on run->cl_owner. */
void bench_measure_copy(device_run *run);

#endif
