/* The attention checker (see attention_check.h). */
#include "attention_check.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        fail_msg("out of host memory (%zu bytes)", n);
    return p;
}

flashcl_attention_params ta_default_params(void)
{
    flashcl_attention_params p;
    memset(&p, 0, sizeof p);
    p.window_left = p.window_right = -1;
    return p;
}

ta_case ta_new_case(flashcl_dtype dt, int64_t batch, int64_t seqlen_q, int64_t seqlen_k,
                    int64_t heads_q, int64_t heads_kv, int64_t head_dim)
{
    ta_case c;
    memset(&c, 0, sizeof c);
    c.dtype = dt;
    c.batch = batch;
    c.seqlen_q = seqlen_q;
    c.seqlen_k = seqlen_k;
    c.heads_q = heads_q;
    c.heads_kv = heads_kv;
    c.head_dim = head_dim;
    c.lse_mode = 1;
    c.params = ta_default_params();
    return c;
}

int ta_large(void)
{
    const char *v = getenv("FLASHCL_TEST_LARGE");
    return v && *v && strcmp(v, "0") != 0;
}

int ta_cpu_kernels_device(flashcl_context *ctx)
{
    flashcl_device_info info;
    assert_int_equal(flashcl_context_device(ctx, &info), FLASHCL_SUCCESS);
    if (info.backend != FLASHCL_BACKEND_OPENCL) return 0;
    if (strstr(info.name, "Oclgrind")) return 1;
    return !(info.features & FLASHCL_FEATURE_GPU) && !strstr(info.name, "llvmpipe");
}

void ta_skip_repeat_without_cpu_kernels(flashcl_context *ctx)
{
    const char *v = getenv("FLASHCL_ATTENTION_NO_CPU_KERNELS");
    if (v && *v && strcmp(v, "0") != 0 && !ta_cpu_kernels_device(ctx)) {
        printf("SKIP: FLASHCL_ATTENTION_NO_CPU_KERNELS=1 changes nothing on this device (it has "
               "no CPU attention kernels): the run without it covered these kernels\n");
        flashcl_context_destroy(ctx);
        exit(77);
    }
}

static const char *layout_name(ta_layout l)
{
    switch (l) {
    case TA_BSHD: return "bshd";
    case TA_BHSD: return "bhsd";
    case TA_PADDED: return "padded";
    case TA_KV_PACKED: return "kvpacked";
    case TA_BROADCAST: return "broadcast";
    default: return "?";
    }
}

const char *ta_case_str(const ta_case *c)
{
    static char buf[512];
    snprintf(buf, sizeof buf,
             "%s B=%" PRId64 " Sq=%" PRId64 " Sk=%" PRId64 " Hq=%" PRId64 " Hkv=%" PRId64
             " D=%" PRId64 " q=%s+%zu kv=%s+%zu o=%s+%zu lse=%d scale=%g causal=%d window=%d,%d"
             " softcap=%g params_null=%d",
             host_ref_dtype_name(c->dtype), c->batch, c->seqlen_q, c->seqlen_k, c->heads_q,
             c->heads_kv, c->head_dim, layout_name(c->q_layout), c->q_off,
             layout_name(c->kv_layout), c->kv_off, layout_name(c->o_layout), c->o_off,
             c->lse_mode, (double)c->params.scale, c->params.causal, c->params.window_left,
             c->params.window_right, (double)c->params.softcap, c->params_null);
    return buf;
}

void ta_strides(ta_layout layout, int64_t B, int64_t S, int64_t H, int64_t D, int64_t st[4],
                size_t *elems)
{
    int64_t row = D, pos;
    st[3] = 1;
    switch (layout) {
    case TA_BHSD:
        st[1] = D, st[2] = S * D, st[0] = H * S * D;
        *elems = (size_t)(B * H * S * D);
        return;
    case TA_PADDED:
        row = D + 3;             /* every head row padded */
        pos = H * row + 5;       /* and every position */
        st[2] = row, st[1] = pos, st[0] = S * pos + 7;
        *elems = (size_t)(B * st[0]);
        return;
    case TA_KV_PACKED:
        st[2] = D, st[1] = 2 * H * D, st[0] = S * 2 * H * D;
        *elems = (size_t)(B * st[0]);
        return;
    case TA_BROADCAST:
        st[2] = D, st[1] = H * D, st[0] = 0;
        *elems = (size_t)(S * H * D);
        return;
    default:
        st[2] = D, st[1] = H * D, st[0] = S * H * D;
        *elems = (size_t)(B * S * H * D);
        return;
    }
}

void ta_fill(flashcl_dtype dt, void *img, float *f, size_t off, const int64_t shape[4],
             const int64_t st[4], double lo, double hi, tu_rng *rng)
{
    for (int64_t b = 0; b < shape[0]; b++)
        for (int64_t s = 0; s < shape[1]; s++)
            for (int64_t h = 0; h < shape[2]; h++)
                for (int64_t d = 0; d < shape[3]; d++) {
                    size_t i = off + (size_t)(b * st[0] + s * st[1] + h * st[2] + d);
                    float v;
                    do
                        v = host_ref_round(dt, (float)tu_rng_uniform(rng, lo, hi));
                    while (v == 0.0f);
                    host_ref_store(dt, img, i, v);
                    f[i] = v;
                }
}

flashcl_buffer *ta_buffer(flashcl_context *ctx, const void *src, size_t bytes)
{
    flashcl_buffer *buf = NULL;
    flashcl_status st = flashcl_buffer_create(ctx, bytes, &buf);
    if (st != FLASHCL_SUCCESS)
        fail_msg("flashcl_buffer_create(%zu): %s: %s", bytes, flashcl_status_string(st),
                 flashcl_last_error());
    st = flashcl_buffer_write(buf, 0, src, bytes);
    assert_int_equal(st, FLASHCL_SUCCESS);
    return buf;
}

static flashcl_tensor tensor(flashcl_buffer *buf, flashcl_dtype dt, size_t off_elems, int ndim,
                             const int64_t *shape, const int64_t *st)
{
    flashcl_tensor t;
    memset(&t, 0, sizeof t);
    t.buffer = buf;
    t.dtype = dt;
    t.offset = off_elems * host_ref_dtype_size(dt);
    t.ndim = ndim;
    for (int i = 0; i < ndim; i++)
        t.shape[i] = shape[i], t.strides[i] = st[i];
    return t;
}

/* Marks the elements of a [n0, n1, n2, n3] view (strides st, offset off) in `mask`. */
static void mark_view(unsigned char *mask, size_t off, const int64_t n[4], const int64_t st[4])
{
    for (int64_t a = 0; a < n[0]; a++)
        for (int64_t b = 0; b < n[1]; b++)
            for (int64_t c = 0; c < n[2]; c++)
                for (int64_t d = 0; d < n[3]; d++)
                    mask[off + (size_t)(a * st[0] + b * st[1] + c * st[2] + d * st[3])] = 1;
}

/* Counts the elements of the output image outside `mask` that differ from `before`. */
static size_t changed_outside(const unsigned char *mask, const void *before, const void *after,
                              size_t elems, size_t es)
{
    size_t n = 0;
    for (size_t i = 0; i < elems; i++)
        if (!mask[i] && memcmp((const char *)before + i * es, (const char *)after + i * es, es))
            n++;
    return n;
}

/* What tensor cores add to o's error for 16-bit storage (the CUDA backend, and OpenCL on devices
 * with matrix units: NVIDIA's, through inline PTX): they take P·V with the probabilities P
 * rounded to the storage type, as FlashAttention does, while the row sums keep them unrounded;
 * |sum_j (p~_j - p_j) v_j| / l <= u * max|v| with u the unit roundoff (2^-11 for f16, 2^-8 for
 * bf16). 0 for f32 and for the FMA kernels, which keep P in f32. */
double ta_p_rounding_allowance(flashcl_context *ctx, flashcl_dtype dt, double max_abs_v)
{
    flashcl_device_info info;
    if (dt == FLASHCL_F32 || flashcl_context_device(ctx, &info) != FLASHCL_SUCCESS ||
        (info.backend != FLASHCL_BACKEND_CUDA && !(info.features & FLASHCL_FEATURE_MATRIX_UNITS)))
        return 0.0;
    return host_ref_narrowing_roundoff(dt) * max_abs_v;
}

flashcl_status ta_check(flashcl_context *ctx, const ta_case *c, uint64_t seed)
{
    const flashcl_dtype dt = c->dtype;
    const size_t es = host_ref_dtype_size(dt);
    const int64_t B = c->batch, Sq = c->seqlen_q, Sk = c->seqlen_k, Hq = c->heads_q,
                  Hkv = c->heads_kv, D = c->head_dim;
    int64_t qst[4], kst[4], ost[4], lst[3];
    size_t qn, kn, on, ln = 0, lse_off = 0;
    tu_rng rng;
    tu_rng_seed(&rng, seed);

    ta_strides(c->q_layout, B, Sq, Hq, D, qst, &qn);
    ta_strides(c->kv_layout, B, Sk, Hkv, D, kst, &kn);
    ta_strides(c->o_layout >= TA_KV_PACKED ? TA_BSHD : c->o_layout, B, Sq, Hq, D, ost, &on);
    qn += c->q_off + 4, on += c->o_off + 4; /* a tail after the view: writes there are caught */
    /* k and v: separate buffers, or one interleaved buffer with v H·D elements after k */
    const size_t v_off = c->kv_layout == TA_KV_PACKED ? c->kv_off + (size_t)(Hkv * D) : c->kv_off;
    kn += c->kv_off + 4;
    if (c->lse_mode == 1)
        lst[0] = Hq * Sq, lst[1] = Sq, lst[2] = 1, ln = (size_t)(B * Hq * Sq) + 2;
    else if (c->lse_mode == 2) /* padded rows and batches, offset */
        lse_off = 3, lst[1] = Sq + 3, lst[0] = Hq * lst[1] + 1, lst[2] = 1,
        ln = lse_off + (size_t)(B * lst[0]) + 2;

    /* inputs: poison everywhere (read by mistake, it turns a row into NaN), then the views */
    unsigned char *qi = xmalloc(qn * es), *ki = xmalloc(kn * es), *vi = xmalloc(kn * es);
    float *qf = xmalloc(qn * sizeof(float)), *kf = xmalloc(kn * sizeof(float)),
          *vf = xmalloc(kn * sizeof(float));
    tu_poison(qi, qn * es, dt), tu_poison(ki, kn * es, dt), tu_poison(vi, kn * es, dt);
    const int64_t qshape[4] = {B, Sq, Hq, D}, kshape[4] = {B, Sk, Hkv, D};
    ta_fill(dt, qi, qf, c->q_off, qshape, qst, -1.5, 1.5, &rng);
    ta_fill(dt, ki, kf, c->kv_off, kshape, kst, -1.5, 1.5, &rng);
    int packed = c->kv_layout == TA_KV_PACKED;
    /* packed: v lives in k's buffer image */
    ta_fill(dt, packed ? ki : vi, packed ? kf : vf, v_off, kshape, kst, -1.0, 1.0, &rng);

    flashcl_buffer *qb = ta_buffer(ctx, qi, qn * es), *kb = ta_buffer(ctx, ki, kn * es);
    flashcl_buffer *vb = packed ? kb : ta_buffer(ctx, vi, kn * es);
    unsigned char *o_before = xmalloc(on * es), *o_after = xmalloc(on * es);
    tu_poison(o_before, on * es, dt);
    flashcl_buffer *ob = ta_buffer(ctx, o_before, on * es);
    float *l_before = NULL, *l_after = NULL;
    flashcl_buffer *lb = NULL;
    if (c->lse_mode) {
        l_before = xmalloc(ln * 4), l_after = xmalloc(ln * 4);
        tu_poison(l_before, ln * 4, FLASHCL_F32);
        lb = ta_buffer(ctx, l_before, ln * 4);
    }

    flashcl_tensor q = tensor(qb, dt, c->q_off, 4, qshape, qst);
    flashcl_tensor k = tensor(kb, dt, c->kv_off, 4, kshape, kst);
    flashcl_tensor v = tensor(vb, dt, v_off, 4, kshape, kst);
    flashcl_tensor o = tensor(ob, dt, c->o_off, 4, qshape, ost);
    const int64_t lshape[3] = {B, Hq, Sq};
    flashcl_tensor lse = c->lse_mode ? tensor(lb, FLASHCL_F32, lse_off, 3, lshape, lst) : q;
    flashcl_status st = flashcl_attention_forward(ctx, c->params_null ? NULL : &c->params, &q,
                                                  &k, &v, &o, c->lse_mode ? &lse : NULL);
    if (st != FLASHCL_SUCCESS && !(st == FLASHCL_UNSUPPORTED && c->allow_unsupported))
        fail_msg("%s: flashcl_attention_forward: %s: %s", ta_case_str(c),
                 flashcl_status_string(st), flashcl_last_error());
    assert_int_equal(flashcl_buffer_read(ob, 0, o_after, on * es), FLASHCL_SUCCESS);
    if (lb)
        assert_int_equal(flashcl_buffer_read(lb, 0, l_after, ln * 4), FLASHCL_SUCCESS);

    if (st != FLASHCL_SUCCESS) { /* nothing may have been written */
        if (memcmp(o_before, o_after, on * es) || (lb && memcmp(l_before, l_after, ln * 4)))
            fail_msg("%s: %s but the output changed", ta_case_str(c), flashcl_status_string(st));
    } else {
        host_ref_attention_problem p;
        memset(&p, 0, sizeof p);
        p.batch = B, p.seqlen_q = Sq, p.seqlen_k = Sk, p.heads_q = Hq, p.heads_kv = Hkv;
        p.head_dim = D;
        memcpy(p.q_strides, qst, sizeof qst);
        memcpy(p.k_strides, kst, sizeof kst);
        memcpy(p.v_strides, kst, sizeof kst);
        p.scale = c->params.scale != 0.0f && !c->params_null ? (double)c->params.scale
                                                             : 1.0 / sqrt((double)D);
        if (!c->params_null) {
            p.causal = c->params.causal;
            p.window_left = c->params.window_left, p.window_right = c->params.window_right;
            p.softcap = c->params.softcap;
        } else {
            p.window_left = p.window_right = -1;
        }
        /* the reference writes o packed BSHD and lse packed [B, H, S] */
        const int64_t ro[4] = {Sq * Hq * D, Hq * D, D, 1}, rl[3] = {Hq * Sq, Sq, 1};
        double *oref = xmalloc((size_t)(B * Sq * Hq * D) * sizeof(double));
        double *lref = xmalloc((size_t)(B * Hq * Sq) * sizeof(double));
        host_ref_attention(&p, qf + c->q_off, kf + c->kv_off, (packed ? kf : vf) + v_off, oref,
                           ro, lref, rl);

        unsigned char *omask = calloc(on, 1);
        assert_non_null(omask);
        mark_view(omask, c->o_off, qshape, ost);
        size_t bad = changed_outside(omask, o_before, o_after, on, es), shown = 0;
        if (bad)
            fail_msg("%s: %zu o elements outside the view changed", ta_case_str(c), bad);
        double worst = 0.0;
        const double p_allowance = ta_p_rounding_allowance(ctx, dt, 1.0); /* v in [-1, 1] */
        for (int64_t b = 0; b < B; b++)
            for (int64_t s = 0; s < Sq; s++)
                for (int64_t h = 0; h < Hq; h++)
                    for (int64_t d = 0; d < D; d++) {
                        size_t i = c->o_off + (size_t)(b * ost[0] + s * ost[1] + h * ost[2] + d);
                        double ref = oref[b * ro[0] + s * ro[1] + h * ro[2] + d];
                        float got = host_ref_load(dt, o_after, i);
                        double e = 1e-5 + 1e-5 * fabs(ref) + p_allowance;
                        if (fabs(got - ref) > worst && !isnan(got))
                            worst = fabs(got - ref);
                        if (!tu_value_ok(dt, got, ref, e) || tu_is_poison(dt, o_after, i)) {
                            if (shown++ < 5)
                                print_error("o[%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64
                                            "] = %.9g, expected %.9g\n",
                                            b, s, h, d, (double)got, ref);
                            bad++;
                        }
                    }
        if (bad)
            fail_msg("%s: %zu o elements wrong (max |err| %.3g)", ta_case_str(c), bad, worst);
        if (getenv("FLASHCL_TEST_VERBOSE")) /* how close the passing cases come */
            printf("ok  max|err| %.3g  %s\n", worst, ta_case_str(c));
        if (lb) {
            unsigned char *lmask = calloc(ln, 1);
            assert_non_null(lmask);
            const int64_t ln4[4] = {B, Hq, Sq, 1}, ls4[4] = {lst[0], lst[1], lst[2], 1};
            mark_view(lmask, lse_off, ln4, ls4);
            bad = changed_outside(lmask, l_before, l_after, ln, 4);
            if (bad)
                fail_msg("%s: %zu lse elements outside the view changed", ta_case_str(c), bad);
            for (int64_t b = 0; b < B; b++)
                for (int64_t h = 0; h < Hq; h++)
                    for (int64_t s = 0; s < Sq; s++) {
                        double ref = lref[b * rl[0] + h * rl[1] + s];
                        float got =
                            l_after[lse_off + (size_t)(b * lst[0] + h * lst[1] + s * lst[2])];
                        int ok = isinf(ref) ? got == (float)ref
                                            : fabs(got - ref) <= 1e-5 + 2e-6 * fabs(ref);
                        if (!ok) {
                            if (shown++ < 5)
                                print_error("lse[%" PRId64 ",%" PRId64 ",%" PRId64
                                            "] = %.9g, expected %.9g\n",
                                            b, h, s, (double)got, ref);
                            bad++;
                        }
                    }
            if (bad)
                fail_msg("%s: %zu lse elements wrong", ta_case_str(c), bad);
            free(lmask);
        }
        free(omask);
        free(oref);
        free(lref);
    }
    flashcl_buffer_destroy(qb), flashcl_buffer_destroy(kb), flashcl_buffer_destroy(ob);
    if (!packed)
        flashcl_buffer_destroy(vb);
    if (lb)
        flashcl_buffer_destroy(lb);
    free(qi), free(ki), free(vi), free(qf), free(kf), free(vf);
    free(o_before), free(o_after), free(l_before), free(l_after);
    return st;
}
