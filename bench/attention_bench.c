/* The attention suite: for each device, one table row per shape x dtype. flashcl's fused
 * attention forward (BSHD, inputs uniform [-1, 1]) is timed and checked on sampled output rows
 * against host_ref; the unfused baseline a user would otherwise write runs on the same queue
 * and the same inputs: CLBlast SGEMM S = scale·Q·Kᵀ per (batch, head), a masked row softmax
 * over the materialised f32 scores (attention_baseline.cl), CLBlast SGEMM O = P·V. f16/bf16
 * inputs are converted to f32 for the SGEMMs and the output back, inside the baseline's time.
 * Without CLBlast at build time the baseline columns show "-". */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attention_ref.h"
#include "host_ref.h"
#include "suite.h"

#ifdef FLASHCL_BENCH_HAVE_CLBLAST
#include <clblast_c.h>
#endif

#define GIB ((double)((size_t)1 << 30))
#define ATTN_SAMPLES 8

/* ---- the suites -------------------------------------------------------------------------- */

static void add_suite_shape(bench_options *o, int64_t b, int64_t hq, int64_t hkv, int64_t sq,
                            int64_t sk, int64_t d, int causal)
{
    if (o->nattn_shapes == BENCH_MAX_SHAPES)
        return;
    const bench_attn_shape s = {b, hq, hkv, sq, sk, d, causal};
    o->attn_shapes[o->nattn_shapes++] = s;
}

void bench_attention_suite(bench_options *o, int full)
{
    o->nattn_shapes = 0;
    if (!full) {
        /* Small: the whole suite takes well under a minute on a 2-core CPU through PoCL. */
        add_suite_shape(o, 1, 4, 4, 256, 256, 64, 0);
        add_suite_shape(o, 1, 4, 4, 256, 256, 64, 1);
        add_suite_shape(o, 1, 8, 8, 512, 512, 128, 1);
        add_suite_shape(o, 1, 32, 4, 1, 2048, 128, 0);
    } else {
        /* The FlashAttention grid: B·S = 16384 tokens, H·D = 2048, non-causal and causal. */
        static const int64_t dims[] = {64, 128};
        static const int64_t seqs[] = {512, 1024, 2048, 4096, 8192, 16384};
        for (int di = 0; di < 2; di++)
            for (int si = 0; si < 6; si++)
                for (int c = 0; c < 2; c++)
                    add_suite_shape(o, 16384 / seqs[si], 2048 / dims[di], 2048 / dims[di],
                                    seqs[si], seqs[si], dims[di], c);
        /* Decode: one query token against a long KV cache, GQA 32/4. */
        static const int64_t batches[] = {1, 8};
        static const int64_t kv[] = {4096, 16384, 65536, 131072};
        for (int bi = 0; bi < 2; bi++)
            for (int ki = 0; ki < 4; ki++)
                add_suite_shape(o, batches[bi], 32, 4, 1, kv[ki], 128, 0);
    }
}

/* ---- rows -------------------------------------------------------------------------------- */

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

static double tolerance(flashcl_dtype dtype)
{
    return dtype == FLASHCL_F32 ? 1e-4 : dtype == FLASHCL_F16 ? 2e-3 : 1.6e-2;
}

static void shape_name(const bench_attn_shape *s, char *out, size_t size)
{
    if (s->heads_q == s->heads_kv && s->seqlen_q == s->seqlen_k)
        snprintf(out, size, "B%lld H%lld S%lld D%lld", (long long)s->batch,
                 (long long)s->heads_q, (long long)s->seqlen_q, (long long)s->head_dim);
    else
        snprintf(out, size, "B%lld H%lld/%lld Sq%lld Sk%lld D%lld", (long long)s->batch,
                 (long long)s->heads_q, (long long)s->heads_kv, (long long)s->seqlen_q,
                 (long long)s->seqlen_k, (long long)s->head_dim);
}

/* Keys visible to query i: all, or (causal, bottom-right aligned) j <= i + Sk - Sq. */
static int64_t visible_keys(const bench_attn_shape *s, int64_t i)
{
    if (!s->causal)
        return s->seqlen_k;
    const int64_t n = i + s->seqlen_k - s->seqlen_q + 1;
    return n < 0 ? 0 : (n > s->seqlen_k ? s->seqlen_k : n);
}

/* 4·B·Hq·Sq·Sk·D, halved when causal with Sq = Sk (the FlashAttention convention); for other
 * causal shapes scaled by the fraction of visible (query, key) pairs. */
static double attention_flops(const bench_attn_shape *s)
{
    double f = 4.0 * (double)s->batch * (double)s->heads_q * (double)s->seqlen_q *
               (double)s->seqlen_k * (double)s->head_dim;
    if (s->causal && s->seqlen_q == s->seqlen_k) {
        f *= 0.5;
    } else if (s->causal) {
        double pairs = 0.0;
        for (int64_t i = 0; i < s->seqlen_q; i++)
            pairs += (double)visible_keys(s, i);
        f *= pairs / ((double)s->seqlen_q * (double)s->seqlen_k);
    }
    return f;
}

/* ---- inputs and the error column ---------------------------------------------------------- */

static void fill_uniform(void *data, flashcl_dtype dtype, size_t count, uint64_t seed)
{
    /* xorshift64*, 24 random bits: uniform in [-1, 1), never all zeros. */
    uint64_t s = seed ? seed : 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < count; i++) {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        const uint64_t r = s * 0x2545f4914f6cdd1dull;
        const float u = (float)(r >> 40) * (1.0f / 16777216.0f);
        host_ref_store(dtype, data, i, 2.0f * u - 1.0f);
    }
}

/* The sampled output rows: first, last and six spread between, over (b, h, i). */
typedef struct attn_samples {
    int n;
    int64_t b[ATTN_SAMPLES], h[ATTN_SAMPLES], i[ATTN_SAMPLES];
    double *ref;                     /* n x D, from host_ref on the dtype-rounded inputs */
} attn_samples;

static size_t o_index(const bench_attn_shape *s, int64_t b, int64_t i, int64_t h)
{
    return (size_t)(((b * s->seqlen_q + i) * s->heads_q + h) * s->head_dim);
}

static flashcl_status compute_refs(const bench_attn_shape *s, flashcl_dtype dtype,
                                   const void *qh, const void *kh, const void *vh, float scale,
                                   attn_samples *out)
{
    const int64_t D = s->head_dim, rows = s->batch * s->heads_q * s->seqlen_q;
    memset(out, 0, sizeof *out);
    for (int k = 0; k < ATTN_SAMPLES; k++) {
        const int64_t t = rows <= ATTN_SAMPLES ? k : (rows - 1) * k / (ATTN_SAMPLES - 1);
        if (t >= rows)
            break;
        const int64_t i = t % s->seqlen_q, h = (t / s->seqlen_q) % s->heads_q,
                      b = t / (s->seqlen_q * s->heads_q);
        if (out->n > 0 && out->b[out->n - 1] == b && out->h[out->n - 1] == h &&
            out->i[out->n - 1] == i)
            continue;
        out->b[out->n] = b;
        out->h[out->n] = h;
        out->i[out->n] = i;
        out->n++;
    }
    out->ref = calloc((size_t)(out->n * D), sizeof *out->ref);
    float *q = malloc((size_t)D * sizeof *q);
    float *k = malloc((size_t)(s->seqlen_k * D) * sizeof *k);
    float *v = malloc((size_t)(s->seqlen_k * D) * sizeof *v);
    flashcl_status st = FLASHCL_SUCCESS;
    if (!out->ref || !q || !k || !v) {
        st = FLASHCL_OUT_OF_MEMORY;
        goto done;
    }
    for (int n = 0; n < out->n; n++) {
        const int64_t b = out->b[n], h = out->h[n], i = out->i[n];
        const int64_t hk = h / (s->heads_q / s->heads_kv), nvis = visible_keys(s, i);
        if (nvis == 0)
            continue; /* no visible key: zeros */
        const size_t qoff = o_index(s, b, i, h);
        for (int64_t d = 0; d < D; d++)
            q[d] = host_ref_load(dtype, qh, qoff + (size_t)d);
        for (int64_t j = 0; j < nvis; j++) {
            const size_t off = (size_t)(((b * s->seqlen_k + j) * s->heads_kv + hk) * D);
            for (int64_t d = 0; d < D; d++) {
                k[j * D + d] = host_ref_load(dtype, kh, off + (size_t)d);
                v[j * D + d] = host_ref_load(dtype, vh, off + (size_t)d);
            }
        }
        /* The row as a problem of its own: one query against its visible keys. */
        host_ref_attention_problem p;
        memset(&p, 0, sizeof p);
        p.batch = p.seqlen_q = p.heads_q = p.heads_kv = 1;
        p.seqlen_k = nvis;
        p.head_dim = D;
        const int64_t qs[4] = {D, D, D, 1}, ks[4] = {nvis * D, D, D, 1};
        memcpy(p.q_strides, qs, sizeof qs);
        memcpy(p.k_strides, ks, sizeof ks);
        memcpy(p.v_strides, ks, sizeof ks);
        p.scale = (double)scale;
        p.window_left = p.window_right = -1;
        host_ref_attention(&p, q, k, v, out->ref + n * D, qs, NULL, NULL);
    }
done:
    free(q);
    free(k);
    free(v);
    return st;
}

/* Compares got (n x D elements of dtype, the sampled rows in order) with the references. */
static void compare(const attn_samples *sm, int64_t D, flashcl_dtype dtype, const void *got,
                    double *max_abs, double *over_tol)
{
    const double tol = tolerance(dtype);
    double worst = 0.0, ratio = 0.0;
    for (size_t e = 0; e < (size_t)(sm->n * D); e++) {
        const double g = host_ref_load(dtype, got, e), r = sm->ref[e];
        double err = fabs(g - r), q = err / (tol + tol * fabs(r));
        if (isnan(g) || isinf(g))
            err = q = INFINITY;
        if (err > worst)
            worst = err;
        if (q > ratio)
            ratio = q;
    }
    *max_abs = worst;
    *over_tol = ratio;
}

/* ---- flashcl ------------------------------------------------------------------------------ */

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

static flashcl_status launch_flashcl(void *user, long iteration)
{
    attn_launch *L = user;
    (void)iteration;
    return flashcl_attention_forward(L->run->ctx, &L->params, &L->q, &L->k, &L->v, &L->o, NULL);
}

static flashcl_status read_flashcl_samples(const attn_launch *L, const attn_samples *sm,
                                           unsigned char *buf)
{
    const size_t esz = host_ref_dtype_size(L->dtype), row = (size_t)L->s.head_dim * esz;
    for (int n = 0; n < sm->n; n++) {
        const size_t off = o_index(&L->s, sm->b[n], sm->i[n], sm->h[n]) * esz;
        const flashcl_status st = flashcl_buffer_read(L->o.buffer, off, buf + (size_t)n * row,
                                                      row);
        if (st != FLASHCL_SUCCESS)
            return st;
    }
    return FLASHCL_SUCCESS;
}

/* ---- the unfused baseline ----------------------------------------------------------------- */

#ifdef FLASHCL_BENCH_HAVE_CLBLAST

/* bench_cl_embedded.c, generated by bench/embed.cmake. */
extern const char *const bench_cl_sources[];
extern const size_t bench_cl_source_count;

static char attn_error[8192]; /* the baseline's last failure */

static flashcl_status cl_fail(const char *what, cl_int err)
{
    snprintf(attn_error, sizeof attn_error, "%s: %s (%d)", what, bench_cl_error_name(err),
             (int)err);
    if (err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_RESOURCES ||
        err == CL_OUT_OF_HOST_MEMORY || err == CL_INVALID_BUFFER_SIZE)
        return FLASHCL_OUT_OF_MEMORY;
    return FLASHCL_BACKEND_ERROR;
}

static flashcl_status clblast_fail(const char *what, CLBlastStatusCode code)
{
    snprintf(attn_error, sizeof attn_error, "%s: CLBlast status %d", what, (int)code);
    if (code == CLBlastOpenCLOutOfResources || code == CLBlastOpenCLOutOfHostMemory ||
        (int)code == CL_MEM_OBJECT_ALLOCATION_FAILURE)
        return FLASHCL_OUT_OF_MEMORY;
    return FLASHCL_BACKEND_ERROR;
}

static flashcl_status ensure_program(attn_run *r, flashcl_dtype dtype)
{
    if (r->program[dtype])
        return FLASHCL_SUCCESS;
    cl_int err;
    cl_program p = clCreateProgramWithSource(r->clctx, (cl_uint)bench_cl_source_count,
                                             (const char **)bench_cl_sources, NULL, &err);
    if (!p)
        return cl_fail("clCreateProgramWithSource", err);
    char options[128];
    snprintf(options, sizeof options, "-DBENCH_DTYPE=%d -DBENCH_WG=%zu", (int)dtype, r->wg);
    err = clBuildProgram(p, 1, &r->dev, options, NULL, NULL);
    if (err != CL_SUCCESS) {
        int n = snprintf(attn_error, sizeof attn_error,
                         "building the baseline's %s kernels failed: %s; log:\n",
                         bench_dtype_name(dtype), bench_cl_error_name(err));
        if (n > 0 && (size_t)n < sizeof attn_error)
            clGetProgramBuildInfo(p, r->dev, CL_PROGRAM_BUILD_LOG,
                                  sizeof attn_error - (size_t)n - 1, attn_error + n, NULL);
        attn_error[sizeof attn_error - 1] = '\0';
        clReleaseProgram(p);
        return FLASHCL_BUILD_FAILED;
    }
    cl_kernel a = clCreateKernel(p, "attn_to_f32", &err);
    cl_kernel b = a ? clCreateKernel(p, "attn_from_f32", &err) : NULL;
    cl_kernel c = b ? clCreateKernel(p, "attn_softmax_rows", &err) : NULL;
    if (!c) {
        if (a)
            clReleaseKernel(a);
        if (b)
            clReleaseKernel(b);
        clReleaseProgram(p);
        return cl_fail("clCreateKernel", err);
    }
    r->program[dtype] = p;
    r->to_f32[dtype] = a;
    r->from_f32[dtype] = b;
    r->softmax[dtype] = c;
    return FLASHCL_SUCCESS;
}

static void release_programs(attn_run *r)
{
    for (int d = 0; d < 3; d++) {
        if (r->to_f32[d])
            clReleaseKernel(r->to_f32[d]);
        if (r->from_f32[d])
            clReleaseKernel(r->from_f32[d]);
        if (r->softmax[d])
            clReleaseKernel(r->softmax[d]);
        if (r->program[d])
            clReleaseProgram(r->program[d]);
    }
}

static flashcl_status enqueue_convert(attn_run *r, cl_kernel kern, cl_mem src, cl_mem dst,
                                      size_t n, const char *what)
{
    const cl_ulong un = n;
    const size_t local = r->wg, global = (n + local - 1) / local * local;
    cl_int err = clSetKernelArg(kern, 0, sizeof src, &src);
    err |= clSetKernelArg(kern, 1, sizeof dst, &dst);
    err |= clSetKernelArg(kern, 2, sizeof un, &un);
    if (err != CL_SUCCESS)
        return cl_fail(what, err);
    err = clEnqueueNDRangeKernel(r->queue, kern, 1, NULL, &global, &local, 0, NULL, NULL);
    return err == CL_SUCCESS ? FLASHCL_SUCCESS : cl_fail(what, err);
}

static flashcl_status launch_baseline(void *user, long iteration)
{
    attn_launch *L = user;
    attn_run *r = L->run;
    const bench_attn_shape *s = &L->s;
    const int cvt = L->dtype != FLASHCL_F32;
    const flashcl_dtype dt = L->dtype;
    flashcl_status st = FLASHCL_SUCCESS;
    (void)iteration;
    if (cvt) {
        st = enqueue_convert(r, r->to_f32[dt], flashcl_buffer_cl_mem(L->q.buffer), L->q32, L->nq,
                             "attn_to_f32(q)");
        if (st == FLASHCL_SUCCESS)
            st = enqueue_convert(r, r->to_f32[dt], flashcl_buffer_cl_mem(L->k.buffer), L->k32,
                                 L->nk, "attn_to_f32(k)");
        if (st == FLASHCL_SUCCESS)
            st = enqueue_convert(r, r->to_f32[dt], flashcl_buffer_cl_mem(L->v.buffer), L->v32,
                                 L->nk, "attn_to_f32(v)");
        if (st != FLASHCL_SUCCESS)
            return st;
    }
    const size_t D = (size_t)s->head_dim, sq = (size_t)s->seqlen_q, sk = (size_t)s->seqlen_k;
    const size_t ldq = (size_t)s->heads_q * D, ldk = (size_t)s->heads_kv * D;
    /* S[b, h] = scale · Q[b, :, h, :] · K[b, :, h / g, :]ᵀ  (Sq x Sk, row-major) */
    CLBlastStatusCode c = CLBlastSgemmBatched(
        CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeYes, sq, sk, D, L->alphas,
        L->q32, L->off, ldq, L->k32, L->off + L->nb, ldk, L->zeros, L->scores,
        L->off + 2 * L->nb, sk, L->nb, &r->queue, NULL);
    if (c != CLBlastSuccess)
        return clblast_fail("CLBlastSgemmBatched(Q·Kᵀ)", c);
    /* P = softmax(S) per row, causal mask inside */
    cl_kernel km = r->softmax[dt];
    const cl_uint usq = (cl_uint)sq, usk = (cl_uint)sk;
    const cl_int causal = s->causal ? 1 : 0;
    cl_int err = clSetKernelArg(km, 0, sizeof L->scores, &L->scores);
    err |= clSetKernelArg(km, 1, sizeof usq, &usq);
    err |= clSetKernelArg(km, 2, sizeof usk, &usk);
    err |= clSetKernelArg(km, 3, sizeof causal, &causal);
    if (err != CL_SUCCESS)
        return cl_fail("clSetKernelArg(attn_softmax_rows)", err);
    const size_t local = r->wg, global = L->nb * sq * local;
    err = clEnqueueNDRangeKernel(r->queue, km, 1, NULL, &global, &local, 0, NULL, NULL);
    if (err != CL_SUCCESS)
        return cl_fail("clEnqueueNDRangeKernel(attn_softmax_rows)", err);
    /* O[b, :, h, :] = P[b, h] · V[b, :, h / g, :] */
    c = CLBlastSgemmBatched(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeNo, sq,
                            D, sk, L->ones, L->scores, L->off + 3 * L->nb, sk, L->v32,
                            L->off + 4 * L->nb, ldk, L->zeros, L->o32, L->off + 5 * L->nb, ldq,
                            L->nb, &r->queue, NULL);
    if (c != CLBlastSuccess)
        return clblast_fail("CLBlastSgemmBatched(P·V)", c);
    if (cvt)
        return enqueue_convert(r, r->from_f32[dt], L->o32, L->o_out, L->nq, "attn_from_f32(o)");
    return FLASHCL_SUCCESS;
}

static cl_mem make_buffer(attn_run *r, size_t bytes, flashcl_status *st)
{
    if (*st != FLASHCL_SUCCESS)
        return NULL;
    cl_int err = CL_SUCCESS;
    cl_mem m = clCreateBuffer(r->clctx, CL_MEM_READ_WRITE, bytes, NULL, &err);
    if (!m)
        *st = cl_fail("clCreateBuffer", err == CL_SUCCESS ? CL_MEM_OBJECT_ALLOCATION_FAILURE : err);
    return m;
}

static void release_mem(cl_mem *m)
{
    if (*m)
        clReleaseMemObject(*m);
    *m = NULL;
}

/* Times and checks the baseline on L's inputs; fills the row's baseline fields. */
static void measure_baseline(attn_run *r, attn_launch *L, const attn_samples *sm, attn_row *row)
{
    const bench_attn_shape *s = &L->s;
    const bench_device_report *rep = &r->dev_rep->rep;
    const int cvt = L->dtype != FLASHCL_F32;
    const size_t esz = host_ref_dtype_size(L->dtype);
    row->score_bytes = (double)L->nb * (double)s->seqlen_q * (double)s->seqlen_k * 4.0;
    row->base_extra_bytes = cvt ? (double)(2 * L->nq + 2 * L->nk) * 4.0 + (double)(L->nq * esz)
                                : (double)L->nq * 4.0;
    if (!r->opts->baseline || !r->queue || r->broken) {
        snprintf(row->base_note, sizeof row->base_note, "%s",
                 !r->opts->baseline ? "--no-baseline"
                 : r->broken        ? "baseline kernels failed to build"
                                    : "no OpenCL queue");
        return;
    }
    char sz[32];
    bench_format_bytes(row->score_bytes, sz, sizeof sz);
    if (row->score_bytes > 8.0 * GIB ||
        (rep->info.global_mem_bytes && row->score_bytes > (double)rep->info.global_mem_bytes / 4)) {
        row->base = BASE_SKIPPED;
        snprintf(row->base_note, sizeof row->base_note, "skipped (%s)", sz);
        return;
    }
    if (r->max_alloc && row->score_bytes > (double)r->max_alloc) {
        row->base = BASE_OOM;
        snprintf(row->base_note, sizeof row->base_note,
                 "out of memory (%s scores over the device's largest allocation)", sz);
        return;
    }
    flashcl_status st = ensure_program(r, L->dtype);
    if (st != FLASHCL_SUCCESS) {
        if (st == FLASHCL_BUILD_FAILED) {
            r->broken = 1;
            bench_progress_clear();
            fprintf(stderr, "flashcl-bench: attention baseline unavailable: %s\n", attn_error);
        }
        row->base = st == FLASHCL_OUT_OF_MEMORY ? BASE_OOM : BASE_ERROR;
        snprintf(row->base_note, sizeof row->base_note, "%.150s", attn_error);
        return;
    }

    /* Offsets (elements) of each (b, h) GEMM: Q·Kᵀ (a, b, c), then P·V (a, b, c). */
    const size_t nb = L->nb, D = (size_t)s->head_dim;
    L->off = malloc(6 * nb * sizeof *L->off);
    L->alphas = malloc(nb * sizeof *L->alphas);
    L->ones = malloc(nb * sizeof *L->ones);
    L->zeros = malloc(nb * sizeof *L->zeros);
    if (!L->off || !L->alphas || !L->ones || !L->zeros) {
        st = FLASHCL_OUT_OF_MEMORY;
        snprintf(attn_error, sizeof attn_error, "host memory");
        goto done;
    }
    const size_t group = (size_t)(s->heads_q / s->heads_kv);
    for (size_t t = 0; t < nb; t++) {
        const size_t b = t / (size_t)s->heads_q, h = t % (size_t)s->heads_q, hk = h / group;
        const size_t qo = b * (size_t)s->seqlen_q * (size_t)s->heads_q * D + h * D;
        const size_t ko = b * (size_t)s->seqlen_k * (size_t)s->heads_kv * D + hk * D;
        const size_t so = t * (size_t)s->seqlen_q * (size_t)s->seqlen_k;
        L->off[t] = qo;
        L->off[nb + t] = ko;
        L->off[2 * nb + t] = so;
        L->off[3 * nb + t] = so;
        L->off[4 * nb + t] = ko;
        L->off[5 * nb + t] = qo;
        L->alphas[t] = L->params.scale;
        L->ones[t] = 1.0f;
        L->zeros[t] = 0.0f;
    }
    L->scores = make_buffer(r, (size_t)row->score_bytes, &st);
    L->o32 = make_buffer(r, L->nq * 4, &st);
    if (cvt) {
        L->q32 = make_buffer(r, L->nq * 4, &st);
        L->k32 = make_buffer(r, L->nk * 4, &st);
        L->v32 = make_buffer(r, L->nk * 4, &st);
        L->o_out = make_buffer(r, L->nq * esz, &st);
    } else {
        L->q32 = flashcl_buffer_cl_mem(L->q.buffer);
        L->k32 = flashcl_buffer_cl_mem(L->k.buffer);
        L->v32 = flashcl_buffer_cl_mem(L->v.buffer);
        clRetainMemObject(L->q32);
        clRetainMemObject(L->k32);
        clRetainMemObject(L->v32);
        L->o_out = L->o32;
        clRetainMemObject(L->o_out);
    }
    bench_timing t;
    if (st == FLASHCL_SUCCESS)
        st = bench_time(r->ctx, r->queue, launch_baseline, L, 1, r->opts->reps, TARGET_BATCH_S,
                        BUDGET_S, &t);
    if (st == FLASHCL_SUCCESS) {
        unsigned char *got = malloc((size_t)sm->n * D * esz);
        cl_int err = got ? CL_SUCCESS : CL_OUT_OF_HOST_MEMORY;
        for (int n = 0; n < sm->n && err == CL_SUCCESS; n++)
            err = clEnqueueReadBuffer(r->queue, L->o_out, CL_TRUE,
                                      o_index(s, sm->b[n], sm->i[n], sm->h[n]) * esz, D * esz,
                                      got + (size_t)n * D * esz, 0, NULL, NULL);
        if (err == CL_SUCCESS) {
            double abs_err;
            compare(sm, (int64_t)D, L->dtype, got, &abs_err, &row->base_err_over_tol);
            row->base = BASE_OK;
            row->base_ms = t.ms;
            if (row->ms > 0)
                row->speedup = t.ms / row->ms;
        } else {
            st = cl_fail("clEnqueueReadBuffer(baseline o)", err);
        }
        free(got);
    }
done:
    if (st != FLASHCL_SUCCESS) {
        row->base = st == FLASHCL_OUT_OF_MEMORY ? BASE_OOM : BASE_ERROR;
        snprintf(row->base_note, sizeof row->base_note, "%s: %.130s",
                 st == FLASHCL_OUT_OF_MEMORY ? "out of memory" : "error", attn_error);
    }
    /* Work still queued may use the buffers: drain before releasing them. */
    flashcl_finish(r->ctx);
    release_mem(&L->scores);
    release_mem(&L->o32);
    release_mem(&L->q32);
    release_mem(&L->k32);
    release_mem(&L->v32);
    release_mem(&L->o_out);
    free(L->off);
    free(L->alphas);
    free(L->ones);
    free(L->zeros);
    L->off = NULL;
    L->alphas = L->ones = L->zeros = NULL;
}

#else /* no CLBlast */

static void release_programs(attn_run *r)
{
    (void)r;
}

static void measure_baseline(attn_run *r, attn_launch *L, const attn_samples *sm, attn_row *row)
{
    (void)r;
    (void)L;
    (void)sm;
    snprintf(row->base_note, sizeof row->base_note, "built without CLBlast");
}

#endif

/* ---- one shape x dtype -------------------------------------------------------------------- */

static void print_header(void)
{
    printf("%-27s %-5s %-6s %10s %8s %7s %18s %9s %8s %9s %7s  %s\n", "shape", "dtype", "mask",
           "ms", "TFLOP/s", "GB/s", "baseline ms", "scores", "speedup", "max|err|", "err/tol",
           "check");
}

static void print_row(const attn_row *r)
{
    char shape[64];
    shape_name(&r->shape, shape, sizeof shape);
    printf("%-27s %-5s %-6s ", shape, bench_dtype_name(r->dtype),
           r->shape.causal ? "causal" : "none");
    if (r->status != BENCH_ROW_OK && r->status != BENCH_ROW_FAIL) {
        printf("%s\n", r->note);
        fflush(stdout);
        return;
    }
    char gbps[16] = "-", base[48] = "-", scores[32] = "-", speed[16] = "-";
    if (r->gbps >= 0)
        snprintf(gbps, sizeof gbps, "%.1f", r->gbps);
    if (r->base == BASE_OK)
        snprintf(base, sizeof base, "%.4f", r->base_ms);
    else if (r->base == BASE_SKIPPED)
        snprintf(base, sizeof base, "%.40s", r->base_note);
    else if (r->base == BASE_OOM)
        snprintf(base, sizeof base, "out of memory");
    else if (r->base == BASE_ERROR)
        snprintf(base, sizeof base, "error");
    if (r->base != BASE_NONE)
        bench_format_bytes(r->score_bytes, scores, sizeof scores);
    if (r->speedup >= 0)
        snprintf(speed, sizeof speed, "%.2fx", r->speedup);
    printf("%10.4f %8.3f %7s %18s %9s %8s %9.2e %7.3f  %s", r->ms, r->tflops, gbps, base, scores,
           speed, r->max_abs_err, r->err_over_tol, r->status == BENCH_ROW_OK ? "ok" : "FAIL");
    if (r->base == BASE_OK && r->base_err_over_tol > 1.0)
        printf("  (baseline over tolerance: err/tol %.3g)", r->base_err_over_tol);
    printf("\n");
    if (r->base == BASE_ERROR || (r->base == BASE_OOM && strlen(r->base_note) > 14))
        printf("    baseline: %s\n", r->base_note);
    fflush(stdout);
}

static void row_failed(attn_row *r, flashcl_status st, const char *detail)
{
    if (st == FLASHCL_OUT_OF_MEMORY) {
        r->status = BENCH_ROW_OOM;
        snprintf(r->note, sizeof r->note, "out of memory%s%s%s", *detail ? " (" : "", detail,
                 *detail ? ")" : "");
    } else if (st == FLASHCL_UNSUPPORTED) {
        r->status = BENCH_ROW_UNSUPPORTED;
        snprintf(r->note, sizeof r->note, "unsupported: %s", detail);
    } else {
        r->status = BENCH_ROW_ERROR;
        snprintf(r->note, sizeof r->note, "error: %s: %s", flashcl_status_string(st), detail);
    }
}

static void bench_shape_dtype(attn_run *run, const bench_attn_shape *s, flashcl_dtype dtype,
                              attn_row *row)
{
    const bench_device_report *rep = &run->dev_rep->rep;
    const size_t esz = host_ref_dtype_size(dtype);
    attn_launch L;
    memset(&L, 0, sizeof L);
    L.run = run;
    L.s = *s;
    L.dtype = dtype;
    L.params.scale = 1.0f / sqrtf((float)s->head_dim);
    L.params.causal = s->causal;
    L.params.window_left = L.params.window_right = -1;
    L.nq = (size_t)(s->batch * s->seqlen_q * s->heads_q * s->head_dim);
    L.nk = (size_t)(s->batch * s->seqlen_k * s->heads_kv * s->head_dim);
    L.nb = (size_t)(s->batch * s->heads_q);
    memset(row, 0, sizeof *row);
    row->shape = *s;
    row->dtype = dtype;
    row->gbps = row->base_ms = row->base_err_over_tol = row->speedup = -1.0;
    void *qh = NULL, *kh = NULL, *vh = NULL;
    unsigned char *got = NULL;
    attn_samples sm;
    memset(&sm, 0, sizeof sm);
    char detail[256] = "";
    flashcl_status st = FLASHCL_SUCCESS;

    const double qbytes = (double)L.nq * (double)esz, kbytes = (double)L.nk * (double)esz;
    const double biggest = qbytes > kbytes ? qbytes : kbytes;
    if ((run->max_alloc && biggest > (double)run->max_alloc) ||
        (rep->info.global_mem_bytes && 2 * (qbytes + kbytes) > (double)rep->info.global_mem_bytes)) {
        char need[32];
        bench_format_bytes(2 * (qbytes + kbytes), need, sizeof need);
        snprintf(detail, sizeof detail, "q, k, v, o take %s", need);
        st = FLASHCL_OUT_OF_MEMORY;
        goto fail;
    }
    qh = malloc(L.nq * esz);
    kh = malloc(L.nk * esz);
    vh = malloc(L.nk * esz);
    if (!qh || !kh || !vh) {
        snprintf(detail, sizeof detail, "host memory");
        st = FLASHCL_OUT_OF_MEMORY;
        goto fail;
    }
    const uint64_t seed = 0xa77e0000ull ^ (uint64_t)s->seqlen_k * 1000003u ^
                          (uint64_t)s->seqlen_q << 20 ^ (uint64_t)s->head_dim << 44 ^
                          (uint64_t)dtype << 60;
    fill_uniform(qh, dtype, L.nq, seed ^ 0x1111);
    fill_uniform(kh, dtype, L.nk, seed ^ 0x2222);
    fill_uniform(vh, dtype, L.nk, seed ^ 0x3333);

    flashcl_buffer *bufs[4] = {NULL, NULL, NULL, NULL};
    const size_t sizes[4] = {L.nq * esz, L.nk * esz, L.nk * esz, L.nq * esz};
    const void *hosts[3] = {qh, kh, vh};
    for (int i = 0; i < 4 && st == FLASHCL_SUCCESS; i++) {
        st = flashcl_buffer_create(run->ctx, sizes[i], &bufs[i]);
        if (st == FLASHCL_SUCCESS && i < 3)
            st = flashcl_buffer_write(bufs[i], 0, hosts[i], sizes[i]);
    }
    const flashcl_tensor qt = {bufs[0], 0, dtype, 4,
                               {s->batch, s->seqlen_q, s->heads_q, s->head_dim},
                               {s->seqlen_q * s->heads_q * s->head_dim, s->heads_q * s->head_dim,
                                s->head_dim, 1}};
    const flashcl_tensor kt = {bufs[1], 0, dtype, 4,
                               {s->batch, s->seqlen_k, s->heads_kv, s->head_dim},
                               {s->seqlen_k * s->heads_kv * s->head_dim,
                                s->heads_kv * s->head_dim, s->head_dim, 1}};
    L.q = qt;
    L.o = qt;
    L.o.buffer = bufs[3];
    L.k = kt;
    L.v = kt;
    L.v.buffer = bufs[2];
    if (st != FLASHCL_SUCCESS) {
        snprintf(detail, sizeof detail, "%s", flashcl_last_error());
        goto fail;
    }

    bench_timing t;
    st = bench_time(run->ctx, run->queue, launch_flashcl, &L, 1, run->opts->reps, TARGET_BATCH_S,
                    BUDGET_S, &t);
    if (st == FLASHCL_SUCCESS)
        st = compute_refs(s, dtype, qh, kh, vh, L.params.scale, &sm);
    got = st == FLASHCL_SUCCESS ? malloc((size_t)(sm.n * s->head_dim) * esz) : NULL;
    if (st == FLASHCL_SUCCESS && !got)
        st = FLASHCL_OUT_OF_MEMORY;
    if (st == FLASHCL_SUCCESS)
        st = read_flashcl_samples(&L, &sm, got);
    if (st != FLASHCL_SUCCESS) {
        snprintf(detail, sizeof detail, "%s", flashcl_last_error());
        goto fail;
    }
    compare(&sm, s->head_dim, dtype, got, &row->max_abs_err, &row->err_over_tol);
    row->ms = t.ms;
    row->batch = t.batch;
    row->reps = t.reps;
    row->used_events = t.used_events;
    row->tflops = attention_flops(s) / (t.ms * 1e-3) / 1e12;
    if (s->seqlen_q == 1)
        row->gbps = 2.0 * kbytes / (t.ms * 1e-3) / 1e9;
    row->status = row->err_over_tol <= 1.0 ? BENCH_ROW_OK : BENCH_ROW_FAIL;

    measure_baseline(run, &L, &sm, row);
    goto cleanup;

fail:
    row_failed(row, st, detail);
cleanup:
    flashcl_buffer_destroy(L.q.buffer);
    flashcl_buffer_destroy(L.k.buffer);
    flashcl_buffer_destroy(L.v.buffer);
    flashcl_buffer_destroy(L.o.buffer);
    free(sm.ref);
    free(got);
    free(qh);
    free(kh);
    free(vh);
}

/* ---- one device --------------------------------------------------------------------------- */

static void print_banner(const attn_run *run, const char *cache_dir)
{
    const bench_device_report *rep = &run->dev_rep->rep;
    const flashcl_device_info *d = &rep->info;
    char idx[16] = "?";
    if (rep->index >= 0)
        snprintf(idx, sizeof idx, "%d", rep->index);
    printf("== device %s: %s (%s)\n", idx, d->name, bench_backend_name(d->backend));
    printf("   vendor: %s | platform: %s | driver: %s\n", d->vendor, d->platform, d->driver);
    printf("   context create: %s %.3f s (%s), then %.3f s (%s)%s\n",
           rep->cold_from_cache ? "first" : "cold", rep->ctx_cold_s,
           rep->cold_from_cache ? "from cache" : "compiled", rep->ctx_warm_s,
           rep->warm_from_cache ? "from cache" : "compiled",
           cache_dir[0] ? " [fresh cache folder]" : "");
    printf("   attention forward, BSHD, inputs uniform [-1, 1], scale 1/sqrt(D); time: median "
           "of %d batches;\n   TFLOP/s = 4*B*Hq*Sq*Sk*D/t (causal: halved for Sq = Sk, else the "
           "visible fraction);\n   GB/s (decode, Sq = 1) = K+V bytes/t\n",
           run->opts->reps);
#ifdef FLASHCL_BENCH_HAVE_CLBLAST
    if (!run->opts->baseline)
        printf("   baseline: off (--no-baseline)\n");
    else if (!run->queue)
        printf("   baseline: none (the context has no OpenCL queue)\n");
    else
        printf("   baseline: unfused on the same queue: CLBlast SgemmBatched S = scale*Q*K^T per "
               "(b, h), masked row\n   softmax kernel, CLBlast SgemmBatched O = P*V; f16/bf16: "
               "q, k, v converted to f32 buffers\n   and o back to the dtype, inside its time; "
               "'scores' = its B*Hq*Sq*Sk f32 buffer\n");
#else
    printf("   baseline: none (flashcl-bench was built without CLBlast)\n");
#endif
    printf("\n");
}

static int run_device(const bench_options *o, const bench_attn_shape *shapes, int nshapes,
                      const flashcl_context_options *copts, attn_device *dr, int *done,
                      int total)
{
    bench_device_report *rep = &dr->rep;
    attn_run run;
    memset(&run, 0, sizeof run);
    run.opts = o;
    run.dev_rep = dr;
    char cache_dir[512];
    const int per_device = nshapes * o->ndtypes;

    bench_progress_show(o, *done, total, "creating contexts");
    flashcl_status st = bench_open_context(copts, o->cold, rep, &run.ctx, cache_dir,
                                           sizeof cache_dir);
    bench_progress_clear();
    if (st != FLASHCL_SUCCESS) {
        snprintf(rep->error, sizeof rep->error, "cannot open device: %s: %s",
                 flashcl_status_string(st), flashcl_last_error());
        fprintf(stderr, "flashcl-bench: %s\n", rep->error);
        *done += per_device;
        if (cache_dir[0])
            bench_remove_tree(cache_dir);
        return BENCH_EXIT_FAIL;
    }
    rep->opened = 1;
    flashcl_context_device(run.ctx, &rep->info);
    if (flashcl_context_cl_objects(run.ctx, &run.clctx, &run.dev, &run.queue) ==
        FLASHCL_SUCCESS) {
        run.max_alloc = bench_device_max_alloc(run.dev);
        size_t max_wg = 0;
        if (clGetDeviceInfo(run.dev, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof max_wg, &max_wg,
                            NULL) != CL_SUCCESS ||
            max_wg == 0)
            max_wg = 64;
        run.wg = 1;
        while (run.wg * 2 <= max_wg && run.wg < 256)
            run.wg *= 2;
    } else {
        run.queue = NULL; /* another backend: host clock, no baseline */
    }
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
    print_banner(&run, cache_dir);
    print_header();
    fflush(stdout);

    dr->rows = calloc((size_t)per_device, sizeof *dr->rows);
    if (!dr->rows) {
        snprintf(rep->error, sizeof rep->error, "out of host memory");
    } else {
        for (int si = 0; si < nshapes; si++)
            for (int d = 0; d < o->ndtypes; d++) {
                char what[96], name[64];
                shape_name(&shapes[si], name, sizeof name);
                snprintf(what, sizeof what, "%s%s %s", name, shapes[si].causal ? " causal" : "",
                         bench_dtype_name(o->dtypes[d]));
                bench_progress_show(o, ++*done, total, what);
                attn_row *row = &dr->rows[dr->nrows++];
                bench_shape_dtype(&run, &shapes[si], o->dtypes[d], row);
                bench_progress_clear();
                print_row(row);
            }
    }
    bench_progress_clear();
    printf("\n");

    release_programs(&run);
    flashcl_context_destroy(run.ctx);
    if (cache_dir[0])
        bench_remove_tree(cache_dir);

    int rc = dr->rows ? BENCH_EXIT_OK : BENCH_EXIT_FAIL;
    for (int i = 0; i < dr->nrows; i++)
        if (dr->rows[i].status == BENCH_ROW_FAIL || dr->rows[i].status == BENCH_ROW_ERROR)
            rc = BENCH_EXIT_FAIL;
    return rc;
}

/* ---- the --json report -------------------------------------------------------------------- */

static void jstr(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p == '\n')
            fputs("\\n", f);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

/* A number; null when not finite or a "not measured" negative sentinel (opt). */
static void jnum(FILE *f, double v, int opt)
{
    if (!isfinite(v) || (opt && v < 0))
        fputs("null", f);
    else
        fprintf(f, "%.6g", v);
}

static const char *row_status_word(bench_row_status s)
{
    switch (s) {
    case BENCH_ROW_OK: return "ok";
    case BENCH_ROW_FAIL: return "fail";
    case BENCH_ROW_OOM: return "out_of_memory";
    case BENCH_ROW_UNSUPPORTED: return "unsupported";
    case BENCH_ROW_ERROR: return "error";
    }
    return "?";
}

static const char *base_word(base_state b)
{
    switch (b) {
    case BASE_NONE: return "not_measured";
    case BASE_OK: return "ok";
    case BASE_SKIPPED: return "skipped";
    case BASE_OOM: return "out_of_memory";
    case BASE_ERROR: return "error";
    }
    return "?";
}

static void write_row(FILE *f, const attn_row *r)
{
    const bench_attn_shape *s = &r->shape;
    fprintf(f, "        {\"batch\": %lld, \"heads_q\": %lld, \"heads_kv\": %lld, \"seqlen_q\": %lld, "
               "\"seqlen_k\": %lld, \"head_dim\": %lld, \"causal\": %s, \"dtype\": ",
            (long long)s->batch, (long long)s->heads_q, (long long)s->heads_kv,
            (long long)s->seqlen_q, (long long)s->seqlen_k, (long long)s->head_dim,
            s->causal ? "true" : "false");
    jstr(f, bench_dtype_name(r->dtype));
    fputs(", \"status\": ", f);
    jstr(f, row_status_word(r->status));
    if (r->status != BENCH_ROW_OK && r->status != BENCH_ROW_FAIL) {
        fputs(", \"note\": ", f);
        jstr(f, r->note);
        fputs("}", f);
        return;
    }
    fputs(",\n         \"ms\": ", f);
    jnum(f, r->ms, 0);
    fputs(", \"tflops\": ", f);
    jnum(f, r->tflops, 0);
    fputs(", \"kv_gbps\": ", f);
    jnum(f, r->gbps, 1);
    fputs(", \"max_abs_err\": ", f);
    jnum(f, r->max_abs_err, 0);
    fputs(", \"err_over_tol\": ", f);
    jnum(f, r->err_over_tol, 0);
    fputs(", \"tolerance\": ", f);
    jnum(f, tolerance(r->dtype), 0);
    fprintf(f, ", \"batch_launches\": %d, \"reps\": %d, \"timer\": \"%s\",\n         "
               "\"baseline\": {\"status\": \"%s\"",
            r->batch, r->reps, r->used_events ? "device" : "host", base_word(r->base));
    if (r->base != BASE_NONE) {
        fputs(", \"score_bytes\": ", f);
        jnum(f, r->score_bytes, 0);
        fputs(", \"extra_bytes\": ", f);
        jnum(f, r->base_extra_bytes, 0);
        fprintf(f, ", \"inputs_converted_to_f32\": %s",
                r->dtype != FLASHCL_F32 ? "true" : "false");
    }
    if (r->base == BASE_OK) {
        fputs(", \"ms\": ", f);
        jnum(f, r->base_ms, 0);
        fputs(", \"err_over_tol\": ", f);
        jnum(f, r->base_err_over_tol, 0);
    }
    if (r->base_note[0]) {
        fputs(", \"note\": ", f);
        jstr(f, r->base_note);
    }
    fputs("}, \"speedup_vs_baseline\": ", f);
    jnum(f, r->speedup, 1);
    fputs("}", f);
}

static int write_json(const char *path, const bench_options *o, const attn_device *devs,
                      int ndev)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) {
        fprintf(stderr, "flashcl-bench: --json path too long\n");
        return -1;
    }
    FILE *f = fopen(tmp, "w");
    if (!f) {
        perror(tmp);
        return -1;
    }
    char date[32] = "";
    const time_t now = time(NULL);
    struct tm utc;
    if (gmtime_r(&now, &utc))
        strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &utc);
    char cmdline[4096];
    size_t used = 0;
    cmdline[0] = '\0';
    for (int i = 0; i < o->argc && used < sizeof cmdline; i++)
        used += (size_t)snprintf(cmdline + used, sizeof cmdline - used, "%s%s", i ? " " : "",
                                 o->argv[i]);
    fprintf(f, "{\n  \"tool\": \"flashcl-bench\",\n  \"flashcl_version\": \"%d.%d.%d\",\n"
               "  \"benchmark\": \"attention\",\n  \"suite\": ",
            FLASHCL_VERSION_MAJOR, FLASHCL_VERSION_MINOR, FLASHCL_VERSION_PATCH);
    jstr(f, o->suite);
    fputs(",\n  \"date\": ", f);
    jstr(f, date);
    fputs(",\n  \"command_line\": ", f);
    jstr(f, cmdline);
    fprintf(f, ",\n  \"reps\": %d,\n  \"input\": \"uniform [-1, 1], BSHD contiguous, scale "
               "1/sqrt(D)\",\n  \"flops\": \"4*B*Hq*Sq*Sk*D; causal: halved for Sq = Sk, else "
               "times the visible fraction of (query, key) pairs\",\n"
               "  \"baseline\": \"%s\",\n  \"devices\": [",
            o->reps,
#ifdef FLASHCL_BENCH_HAVE_CLBLAST
            o->baseline ? "CLBlast SgemmBatched + masked row softmax + SgemmBatched, f32 "
                          "(f16/bf16 converted, inside its time)"
                        : "off"
#else
            "none (built without CLBlast)"
#endif
    );
    for (int d = 0; d < ndev; d++) {
        const bench_device_report *rep = &devs[d].rep;
        char feats[128];
        bench_feature_words(rep->info.features, feats, sizeof feats);
        fprintf(f, "%s\n    {\"index\": %d, \"name\": ", d ? "," : "", rep->index);
        jstr(f, rep->info.name);
        fputs(", \"vendor\": ", f);
        jstr(f, rep->info.vendor);
        fputs(", \"platform\": ", f);
        jstr(f, rep->info.platform);
        fputs(", \"driver\": ", f);
        jstr(f, rep->info.driver);
        fputs(", \"backend\": ", f);
        jstr(f, bench_backend_name(rep->info.backend));
        fprintf(f, ",\n     \"compute_units\": %d, \"global_mem_bytes\": %lld, "
                   "\"local_mem_bytes\": %lld, \"subgroup_size\": %d, \"features\": ",
                rep->info.compute_units, (long long)rep->info.global_mem_bytes,
                (long long)rep->info.local_mem_bytes, rep->info.subgroup_size);
        jstr(f, feats);
        fprintf(f, ", \"opened\": %s", rep->opened ? "true" : "false");
        if (rep->error[0]) {
            fputs(", \"error\": ", f);
            jstr(f, rep->error);
        }
        if (rep->opened) {
            fputs(",\n     \"context_create\": {\"cold_s\": ", f);
            jnum(f, rep->ctx_cold_s, 0);
            fprintf(f, ", \"cold_from_cache\": %s, \"warm_s\": ",
                    rep->cold_from_cache ? "true" : "false");
            jnum(f, rep->ctx_warm_s, 0);
            fprintf(f, ", \"warm_from_cache\": %s}", rep->warm_from_cache ? "true" : "false");
        }
        fputs(",\n     \"results\": [", f);
        for (int i = 0; i < devs[d].nrows; i++) {
            fputs(i ? ",\n" : "\n", f);
            write_row(f, &devs[d].rows[i]);
        }
        fputs(devs[d].nrows ? "\n     ]}" : "]}", f);
    }
    fputs("\n  ]\n}\n", f);
    const int write_failed = ferror(f);
    if (fclose(f) != 0 || write_failed) {
        fprintf(stderr, "flashcl-bench: writing %s failed\n", tmp);
        remove(tmp);
        return -1;
    }
    if (rename(tmp, path) != 0) {
        perror(path);
        remove(tmp);
        return -1;
    }
    return 0;
}

/* ---- the command -------------------------------------------------------------------------- */

int bench_cmd_attention(const bench_options *o)
{
    /* --causal makes every shape causal; the duplicates that leaves are dropped. */
    bench_attn_shape shapes[BENCH_MAX_SHAPES];
    int nshapes = 0;
    for (int i = 0; i < o->nattn_shapes; i++) {
        bench_attn_shape s = o->attn_shapes[i];
        if (o->causal)
            s.causal = 1;
        int dup = 0;
        for (int j = 0; j < nshapes && !dup; j++)
            dup = !memcmp(&shapes[j], &s, sizeof s);
        if (!dup)
            shapes[nshapes++] = s;
    }

    flashcl_context_options base;
    memset(&base, 0, sizeof base);
    base.backend = FLASHCL_BACKEND_AUTO;
    base.device_index = -1;
    int ndev = 1;
    size_t count = 0;
    if (o->all_devices) {
        flashcl_status st = flashcl_list_devices(NULL, 0, &count);
        if (st != FLASHCL_SUCCESS) {
            fprintf(stderr, "flashcl-bench: listing devices failed: %s: %s\n",
                    flashcl_status_string(st), flashcl_last_error());
            return BENCH_EXIT_FAIL;
        }
        if (count == 0) {
            fprintf(stderr, "flashcl-bench: no devices\n");
            return BENCH_EXIT_FAIL;
        }
        ndev = (int)count;
    }
    attn_device *devs = calloc((size_t)ndev, sizeof *devs);
    if (!devs) {
        fprintf(stderr, "flashcl-bench: out of host memory\n");
        return BENCH_EXIT_FAIL;
    }

    int rc = BENCH_EXIT_OK, done = 0;
    const int total = ndev * nshapes * o->ndtypes;
    for (int i = 0; i < ndev; i++) {
        flashcl_context_options copts = base;
        devs[i].rep.index = -1;
        if (o->all_devices) {
            copts.device_index = i;
            devs[i].rep.index = i;
        } else if (o->device) {
            char *end;
            errno = 0;
            const long idx = strtol(o->device, &end, 10);
            if (*o->device && !*end && !errno && idx >= 0 && idx <= 1000000) {
                copts.device_index = (int)idx;
                devs[i].rep.index = (int)idx;
            } else {
                copts.device_match = o->device;
            }
        }
        if (run_device(o, shapes, nshapes, &copts, &devs[i], &done, total) != BENCH_EXIT_OK)
            rc = BENCH_EXIT_FAIL;
    }

    if (o->json_path && write_json(o->json_path, o, devs, ndev) != 0)
        rc = BENCH_EXIT_FAIL;
    int fails = 0, errors = 0;
    for (int i = 0; i < ndev; i++) {
        for (int r = 0; r < devs[i].nrows; r++) {
            fails += devs[i].rows[r].status == BENCH_ROW_FAIL;
            errors += devs[i].rows[r].status == BENCH_ROW_ERROR;
        }
        free(devs[i].rows);
    }
    free(devs);
    if (fails || errors)
        fprintf(stderr, "flashcl-bench: %d row(s) over tolerance, %d row(s) with errors\n",
                fails, errors);
    return rc;
}
