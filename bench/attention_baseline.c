/* The unfused attention baseline a user would otherwise write, on the suite's queue and
 * inputs: CLBlast SGEMM S = scale·Q·Kᵀ per (batch, head), a masked row softmax over the
 * materialised f32 scores (attention_baseline.cl), CLBlast SGEMM O = P·V. f16/bf16 inputs
 * are converted to f32 for the SGEMMs and the output back, inside the baseline's time.
 * Without CLBlast at build time the baseline columns show "-". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention_suite.h"
#include "host_ref.h"

#ifdef FLASHCL_BENCH_HAVE_CLBLAST
#include <clblast_c.h>

#define GIB ((double)((size_t)1 << 30))

/* bench_cl_fail, which also counts a buffer too large to create as out of memory. */
static flashcl_status cl_fail(const char *what, cl_int err)
{
    const flashcl_status st = bench_cl_fail(what, err);
    return err == CL_INVALID_BUFFER_SIZE ? FLASHCL_OUT_OF_MEMORY : st;
}

static flashcl_status clblast_fail(const char *what, CLBlastStatusCode code)
{
    bench_set_error("%s: CLBlast status %d", what, (int)code);
    if (code == CLBlastOpenCLOutOfResources || code == CLBlastOpenCLOutOfHostMemory ||
        (int)code == CL_MEM_OBJECT_ALLOCATION_FAILURE)
        return FLASHCL_OUT_OF_MEMORY;
    return FLASHCL_BACKEND_ERROR;
}

static flashcl_status ensure_program(attn_run *r, flashcl_dtype dtype)
{
    if (r->program[dtype])
        return FLASHCL_SUCCESS;
    flashcl_status st;
    cl_program p = bench_build_program(r->clctx, r->dev, dtype, r->wg, "baseline's", &st);
    if (!p)
        return st;
    cl_int err;
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

void attn_release_baseline(attn_run *r)
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

void attn_measure_baseline(attn_run *r, attn_launch *L, const attn_samples *sm, attn_row *row)
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
            fprintf(stderr, "flashcl-bench: attention baseline unavailable: %s\n",
                    bench_kernels_error());
        }
        row->base = st == FLASHCL_OUT_OF_MEMORY ? BASE_OOM : BASE_ERROR;
        snprintf(row->base_note, sizeof row->base_note, "%.150s", bench_kernels_error());
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
        bench_set_error("host memory");
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
                                      attn_o_index(s, sm->b[n], sm->i[n], sm->h[n]) * esz, D * esz,
                                      got + (size_t)n * D * esz, 0, NULL, NULL);
        if (err == CL_SUCCESS) {
            double abs_err;
            attn_compare(sm, (int64_t)D, L->dtype, got, &abs_err, &row->base_err_over_tol);
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
                 st == FLASHCL_OUT_OF_MEMORY ? "out of memory" : "error",
                 bench_kernels_error());
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

void attn_release_baseline(attn_run *r)
{
    (void)r;
}

void attn_measure_baseline(attn_run *r, attn_launch *L, const attn_samples *sm, attn_row *row)
{
    (void)r;
    (void)L;
    (void)sm;
    snprintf(row->base_note, sizeof row->base_note, "built without CLBlast");
}

#endif
