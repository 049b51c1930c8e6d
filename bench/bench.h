/* flashcl-bench: shared types and the functions its files offer each other.
 *
 * main.c           command line, dispatch
 * devices.c        `devices`, device descriptions and helpers around flashcl_device_info
 * timing.c         batches of launches timed with queue markers (host clock as fallback)
 * kernels.c        the bench's own OpenCL programs: copy and the naive three-pass softmax
 * softmax_bench.c  the softmax suite: per device, per shape x dtype x variant
 * attention_bench.c the attention suite: flashcl_attention_forward, per shape x dtype
 * attention_baseline.c its unfused CLBlast GEMM + softmax + GEMM baseline (with CLBlast)
 * attention_json.c its --json report (attention_suite.h: the suite's internal types)
 * setup.c          per device: progress line, contexts, OpenCL twin, copy bandwidth
 * accuracy.c       random inputs, the error column against host_ref
 * json.c           the --json report, and the JSON writers the attention report shares
 */
#ifndef FLASHCL_BENCH_H
#define FLASHCL_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "flashcl.h"
#include "flashcl_opencl.h"

#define BENCH_MAX_SHAPES 64
#define BENCH_MAX_VARIANTS 4
#define BENCH_MAX_SETS 8 /* input/output buffer pairs rotated so caches do not flatter */

/* Exit codes: 0 all good, 1 something failed (a FAIL row, an error), 2 bad command line. */
enum { BENCH_EXIT_OK = 0, BENCH_EXIT_FAIL = 1, BENCH_EXIT_USAGE = 2 };

typedef struct bench_shape {
    int64_t rows, cols;
} bench_shape;

/* One attention problem, BSHD: q [batch, seqlen_q, heads_q, head_dim], k and v
 * [batch, seqlen_k, heads_kv, head_dim]. */
typedef struct bench_attn_shape {
    int64_t batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim;
    int causal;
} bench_attn_shape;

typedef struct bench_options {
    const char *device;      /* --device: an index or a name substring; NULL = default */
    int all_devices;
    flashcl_dtype dtypes[3];
    int ndtypes;
    bench_shape shapes[BENCH_MAX_SHAPES];
    int nshapes;
    flashcl_softmax_variant variants[BENCH_MAX_VARIANTS];
    int nvariants;
    const char *suite;       /* "default" or "full" (only names the run in the report) */
    int log;                 /* log-softmax */
    int reps;                /* timed batches per measurement (median taken) */
    int naive;               /* measure the naive baseline */
    int quiet;               /* no progress line */
    int cold;                /* first context against a fresh cache folder: always compiles */
    int reuse_output;        /* --reuse-output: every call writes one output buffer */
    const char *json_path;
    /* attention */
    bench_attn_shape attn_shapes[BENCH_MAX_SHAPES];
    int nattn_shapes;
    int causal;              /* --causal: every shape causal */
    int baseline;            /* the unfused CLBlast baseline (default on) */
    int argc;                /* the command line, for the report */
    char **argv;
} bench_options;

/* How one table row ended. */
typedef enum bench_row_status {
    BENCH_ROW_OK = 0,
    BENCH_ROW_FAIL,          /* ran, but the error is over tolerance */
    BENCH_ROW_OOM,           /* buffers could not be allocated: reported, not a failure */
    BENCH_ROW_UNSUPPORTED,   /* a forced variant the device cannot run: not a failure */
    BENCH_ROW_ERROR          /* the library or the runtime failed */
} bench_row_status;

typedef struct bench_row {
    bench_shape shape;
    flashcl_dtype dtype;
    flashcl_softmax_variant variant;
    bench_row_status status;
    char note[256];          /* why, for rows that are not OK */
    double ms;               /* median per call */
    double gbps;             /* rows*cols*(in+out bytes) / time */
    double pct_copy;         /* gbps as % of the copy kernel's; < 0 when unknown */
    double copy_same_ms;     /* the copy kernel moving this row's bytes (its x into its y, the
                                same buffer rotation); < 0 when not measured */
    double pct_copy_same;    /* copy_same_ms / ms as %: what the row's launches leave of the
                                device's bandwidth; < 0 when not measured */
    double naive_ms;         /* < 0 when not measured */
    double speedup;          /* naive_ms / ms; < 0 when unknown */
    double max_abs_err;      /* over the sampled rows */
    double err_over_tol;     /* max of |y-ref| / (atol + rtol*|ref|); > 1 is FAIL */
    int batch, reps, sets;   /* how it was measured */
    int used_events;         /* 1: device timestamps, 0: host clock */
} bench_row;

typedef struct bench_device_report {
    int index;                       /* in flashcl_list_devices; -1 when unknown */
    flashcl_device_info info;
    int opened;                      /* a context was created */
    char error[512];                 /* why not, or what went wrong outside the rows */
    double ctx_cold_s, ctx_warm_s;   /* wall time of flashcl_context_create */
    int cold_from_cache, warm_from_cache;
    double cold_build_s, warm_build_s; /* flashcl_context_build_info seconds */
    double copy_gbps;                /* 0 when unknown */
    size_t copy_bytes;               /* size of each copy buffer */
    int baselines_on_opencl_twin;    /* a CUDA context: copy and naive ran through OpenCL */
    bench_row *rows;
    int nrows;
} bench_device_report;

/* devices.c */
const char *bench_dtype_name(flashcl_dtype dtype);
const char *bench_variant_name(flashcl_softmax_variant variant);
const char *bench_backend_name(flashcl_backend backend);
/* Feature bits as words ("gpu subgroups fp16"), or "none". */
void bench_feature_words(unsigned features, char *out, size_t size);
/* "1.5 GiB", "48 KiB". */
void bench_format_bytes(double bytes, char *out, size_t size);
int bench_cmd_devices(void);

/* timing.c */
double bench_now(void);      /* monotonic seconds */
/* Enqueues launch number `iteration` (the number rotates buffer sets). Returns a status. */
typedef flashcl_status (*bench_launch_fn)(void *user, long iteration);
typedef struct bench_timing {
    double ms;               /* median time per launch */
    double min_ms, max_ms;
    int batch, reps;
    int used_events;         /* every batch was timed by device timestamps */
} bench_timing;
/* Warms up with `warmup` launches, sizes a batch to take about target_batch_s, then times
 * `reps` batches (fewer if they would exceed budget_s) and keeps the median. `queue` may be
 * NULL (host clock only). */
flashcl_status bench_time(flashcl_context *ctx, cl_command_queue queue, bench_launch_fn launch,
                          void *user, int warmup, int reps, double target_batch_s,
                          double budget_s, bench_timing *out);

/* kernels.c: the bench's own programs, built for one context's device. */
typedef struct bench_kernels {
    cl_context context;
    cl_device_id device;
    size_t wg;                       /* work-group size of the naive row reductions */
    cl_program program[3];           /* by flashcl_dtype; built on first use */
    cl_kernel row_max[3], row_sum[3], normalize[3];
    cl_kernel copy;                  /* from program[FLASHCL_F32] */
} bench_kernels;
flashcl_status bench_kernels_init(bench_kernels *k, cl_context context, cl_device_id device);
void bench_kernels_release(bench_kernels *k);
/* dst = src, `bytes` a multiple of 16. */
flashcl_status bench_copy_enqueue(bench_kernels *k, cl_command_queue queue, cl_mem src,
                                  cl_mem dst, size_t bytes);
/* Naive three-pass softmax of packed [rows, cols] x into y; row_max and row_sum hold `rows`
 * floats each. */
flashcl_status bench_naive_enqueue(bench_kernels *k, cl_command_queue queue, flashcl_dtype dtype,
                                   cl_mem x, cl_mem y, cl_mem row_max, cl_mem row_sum,
                                   int64_t rows, int64_t cols, int log);
/* The message of the bench's last OpenCL failure (build log included). */
const char *bench_kernels_error(void);
/* Sets that message. */
void bench_set_error(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
/* Records a failed OpenCL call (`what`) as that message; out-of-memory errors map onto
 * FLASHCL_OUT_OF_MEMORY, the rest onto FLASHCL_BACKEND_ERROR. */
flashcl_status bench_cl_fail(const char *what, cl_int err);
/* Builds the bench's embedded sources for dtype with work-group size wg; NULL on failure,
 * with *st set and the message (build log included; "building the <whose> ... kernels
 * failed") kept for bench_kernels_error. */
cl_program bench_build_program(cl_context context, cl_device_id device, flashcl_dtype dtype,
                               size_t wg, const char *whose, flashcl_status *st);
const char *bench_cl_error_name(cl_int err);
/* The work-group size of the bench's row kernels: the largest power of two up to 256 that
 * the device accepts. */
size_t bench_device_wg(cl_device_id device);
/* Size of the device's last-level cache as OpenCL reports it (0 when unknown), and its
 * largest single allocation. */
size_t bench_device_cache_bytes(cl_device_id device);
size_t bench_device_max_alloc(cl_device_id device);

/* softmax_bench.c */
int bench_cmd_softmax(const bench_options *opts);

/* attention_bench.c */
/* Fills opts->attn_shapes with the default or the full suite. */
void bench_attention_suite(bench_options *opts, int full);
int bench_cmd_attention(const bench_options *opts);

/* json.c: writes the report to path via path.tmp and a rename. Returns 0 on success. */
int bench_write_json(const char *path, const bench_options *opts,
                     const bench_device_report *reports, int nreports);
/* The pieces every --json report shares: a string literal (escaped), a number (%.6g; null
 * when not finite), a row status word; path.tmp opened for writing (tmp receives its name;
 * NULL after saying why) and, once written, closed and renamed to path (0 on success, else
 * -1 after saying why); the report's date (UTC) and command line. */
void bench_json_string(FILE *f, const char *s);
void bench_json_number(FILE *f, double value);
const char *bench_row_status_word(bench_row_status s);
FILE *bench_json_open(const char *path, char *tmp, size_t tmp_size);
int bench_json_close(FILE *f, const char *tmp, const char *path);
void bench_json_run_info(const bench_options *opts, char *date, size_t date_size,
                         char *cmdline, size_t cmdline_size);

#endif
