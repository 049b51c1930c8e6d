/* The attention suite: for each device, one table row per shape x dtype. flashcl's fused
 * attention forward (BSHD, inputs uniform [-1, 1]) is timed and checked on sampled output rows
 * against host_ref; the unfused baseline (attention_baseline.c) runs on the same queue and the
 * same inputs. The --json report is attention_json.c's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accuracy.h"
#include "attention_ref.h"
#include "attention_suite.h"
#include "host_ref.h"

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

double attn_tolerance(flashcl_dtype dtype)
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

/* ---- the error column ----------------------------------------------------------------------- */

size_t attn_o_index(const bench_attn_shape *s, int64_t b, int64_t i, int64_t h)
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
        const size_t qoff = attn_o_index(s, b, i, h);
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
void attn_compare(const attn_samples *sm, int64_t D, flashcl_dtype dtype, const void *got,
                  double *max_abs, double *over_tol)
{
    const double tol = attn_tolerance(dtype);
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
        const size_t off = attn_o_index(&L->s, sm->b[n], sm->i[n], sm->h[n]) * esz;
        const flashcl_status st = flashcl_buffer_read(L->o.buffer, off, buf + (size_t)n * row,
                                                      row);
        if (st != FLASHCL_SUCCESS)
            return st;
    }
    return FLASHCL_SUCCESS;
}

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
    bench_fill_uniform(qh, dtype, L.nq, seed ^ 0x1111, 1.0f);
    bench_fill_uniform(kh, dtype, L.nk, seed ^ 0x2222, 1.0f);
    bench_fill_uniform(vh, dtype, L.nk, seed ^ 0x3333, 1.0f);

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
    attn_compare(&sm, s->head_dim, dtype, got, &row->max_abs_err, &row->err_over_tol);
    row->ms = t.ms;
    row->batch = t.batch;
    row->reps = t.reps;
    row->used_events = t.used_events;
    row->tflops = attention_flops(s) / (t.ms * 1e-3) / 1e12;
    if (s->seqlen_q == 1)
        row->gbps = 2.0 * kbytes / (t.ms * 1e-3) / 1e9;
    row->status = row->err_over_tol <= 1.0 ? BENCH_ROW_OK : BENCH_ROW_FAIL;

    attn_measure_baseline(run, &L, &sm, row);
    goto cleanup;

fail:
    bench_row_failed(&row->status, row->note, sizeof row->note, st, detail);
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
    bench_print_device_head(rep);
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

/* What bench_run_devices hands run_device. */
typedef struct attn_cmd {
    const bench_options *o;
    const bench_attn_shape *shapes;
    int nshapes;
    attn_device *devs;
} attn_cmd;

static int run_device(void *suite, int slot, const flashcl_context_options *copts,
                      bench_device_loop *loop)
{
    const attn_cmd *cmd = suite;
    const bench_options *o = cmd->o;
    const bench_attn_shape *shapes = cmd->shapes;
    const int nshapes = cmd->nshapes;
    attn_device *dr = &cmd->devs[slot];
    bench_device_report *rep = &dr->rep;
    attn_run run;
    memset(&run, 0, sizeof run);
    run.opts = o;
    run.dev_rep = dr;
    char cache_dir[512];
    const int per_device = nshapes * o->ndtypes;

    if (bench_start_device(o, copts, rep, &run.ctx, cache_dir, sizeof cache_dir, loop,
                           per_device) != FLASHCL_SUCCESS)
        return BENCH_EXIT_FAIL;
    if (flashcl_context_cl_objects(run.ctx, &run.clctx, &run.dev, &run.queue) ==
        FLASHCL_SUCCESS) {
        run.max_alloc = bench_device_max_alloc(run.dev);
        run.wg = bench_device_wg(run.dev);
    } else {
        run.queue = NULL; /* another backend: host clock, no baseline */
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
                bench_progress_show(o, ++loop->done, loop->total, what);
                attn_row *row = &dr->rows[dr->nrows++];
                bench_shape_dtype(&run, &shapes[si], o->dtypes[d], row);
                bench_progress_clear();
                print_row(row);
            }
    }
    bench_progress_clear();
    printf("\n");

    attn_release_baseline(&run);
    flashcl_context_destroy(run.ctx);
    if (cache_dir[0])
        bench_remove_tree(cache_dir);

    int rc = dr->rows ? BENCH_EXIT_OK : BENCH_EXIT_FAIL;
    for (int i = 0; i < dr->nrows; i++)
        if (bench_tally_row(loop, dr->rows[i].status))
            rc = BENCH_EXIT_FAIL;
    return rc;
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

    int ndev = 0;
    attn_cmd cmd = {o, shapes, nshapes, bench_device_reports(o, sizeof *cmd.devs, &ndev)};
    if (!cmd.devs)
        return BENCH_EXIT_FAIL;
    bench_device_loop loop;
    int rc = bench_run_devices(o, ndev, nshapes * o->ndtypes, run_device, &cmd, &loop);
    if (o->json_path && attn_write_json(o->json_path, o, cmd.devs, ndev) != 0)
        rc = BENCH_EXIT_FAIL;
    for (int i = 0; i < ndev; i++)
        free(cmd.devs[i].rows);
    free(cmd.devs);
    bench_print_failures(loop.fails, loop.errors);
    return rc;
}
