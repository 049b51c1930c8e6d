/* Internal to the suites (softmax_bench.c, attention_bench.c, setup.c): one device's state and the
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
/* Removes a folder and everything in it (the --cold cache folder). */
void bench_remove_tree(const char *dir);
/* An OpenCL context on the same GPU as a context of another backend, or NULL. */
flashcl_context *bench_open_opencl_twin(const flashcl_device_info *info);
/* Fills run->rep->copy_gbps from the copy kernel on run->cl_owner. */
void bench_measure_copy(device_run *run);

#endif
