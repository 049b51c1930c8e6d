/* Internal to the attention suite (attention_bench.c, attention_baseline.c,
 * attention_json.c): its rows, one device's state, the launch data, the sampled rows. */
#ifndef FLASHCL_BENCH_ATTENTION_SUITE_H
#define FLASHCL_BENCH_ATTENTION_SUITE_H

#include "suite.h"

#define ATTN_SAMPLES 8

typedef enum base_state {
    BASE_NONE = 0, /* not measured: "-" (no CLBlast, --no-baseline, no OpenCL queue) */
    BASE_OK,
    BASE_SKIPPED,  /* the score buffer is too large to try */
    BASE_OOM,
    BASE_ERROR
} base_state;

typedef struct attn_row {
    bench_attn_shape shape;
    flashcl_dtype dtype;
    bench_row_status status;
    char note[256];
    double ms, tflops, gbps;         /* gbps < 0 when not a decode shape */
    double max_abs_err, err_over_tol;
    int batch, reps, used_events;
    base_state base;
    char base_note[160];
    double base_ms, base_err_over_tol, speedup; /* < 0 when unknown */
    double score_bytes, base_extra_bytes;       /* the f32 scores; f32 copies and the output */
} attn_row;

typedef struct attn_device {
    bench_device_report rep;         /* device, context creation (its rows are unused) */
    attn_row *rows;
    int nrows;
} attn_device;

typedef struct attn_run {
    const bench_options *opts;
    attn_device *dev_rep;
    flashcl_context *ctx;
    cl_context clctx;
    cl_device_id dev;
    cl_command_queue queue;          /* NULL when the context is not OpenCL */
    size_t max_alloc;
    size_t wg;
    cl_program program[3];           /* the bench's kernels per dtype, built on first use */
    cl_kernel to_f32[3], from_f32[3], softmax[3];
    int broken;                      /* building them failed: the baseline is off */
} attn_run;

/* The sampled output rows: first, last and six spread between, over (b, h, i). */
typedef struct attn_samples {
    int n;
    int64_t b[ATTN_SAMPLES], h[ATTN_SAMPLES], i[ATTN_SAMPLES];
    double *ref;                     /* n x D, from host_ref on the dtype-rounded inputs */
} attn_samples;

typedef struct attn_launch {
    attn_run *run;
    bench_attn_shape s;
    flashcl_dtype dtype;
    flashcl_attention_params params;
    flashcl_tensor q, k, v, o;
    /* the baseline */
    cl_mem q32, k32, v32, o32, scores, o_out; /* q32..v32 and o_out alias the dtype buffers
                                                 for f32 */
    size_t nq, nk;                   /* elements of q (and o), of k (and v) */
    size_t nb;                       /* batch x heads_q GEMMs per call */
    size_t *off;                     /* 6 x nb offsets: a, b, c of the two GEMMs */
    float *alphas, *ones, *zeros;
} attn_launch;

/* attention_bench.c */
/* The error column's tolerance: |err| <= tol + tol*|ref|. */
double attn_tolerance(flashcl_dtype dtype);
/* Element offset of o[b, i, h, 0] (BSHD, contiguous). */
size_t attn_o_index(const bench_attn_shape *s, int64_t b, int64_t i, int64_t h);
/* Compares got (n x D elements of dtype, the sampled rows in order) with the references. */
void attn_compare(const attn_samples *sm, int64_t D, flashcl_dtype dtype, const void *got,
                  double *max_abs, double *over_tol);

/* attention_baseline.c: the unfused baseline (CLBlast GEMM, masked softmax, GEMM). */
/* Times and checks the baseline on L's inputs; fills the row's baseline fields. */
void attn_measure_baseline(attn_run *r, attn_launch *L, const attn_samples *sm, attn_row *row);
/* Releases the baseline's programs and kernels. */
void attn_release_baseline(attn_run *r);

/* attention_json.c: the --json report. Returns 0 on success. */
int attn_write_json(const char *path, const bench_options *o, const attn_device *devs, int ndev);

#endif
