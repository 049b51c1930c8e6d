/* The CUDA backend's attention paths, each against host_ref_attention (double): tensor cores
 * (f16 / bf16, several head_dim paddings, GQA packing, causal bottom-right, window, softcap;
 * on compute capability 9.0 both the wgmma prefill kernel, forced through every configuration
 * of its own case table, and the mma.sync one, under FLASHCL_CUDA_ATTENTION_NO_WGMMA=1),
 * f32 prefill and decode on tensor cores by 3xTF32 (both head-dim classes, each
 * configuration), the SIMT kernel (f32 at D > 128 and unaligned f32, and 16-bit layouts the
 * tensor-core kernel refuses),
 * split-KV decode,
 * the decode kernel (at most 16 packed rows, warps streaming their own keys), lse, the
 * fallback configurations (forced here), the causal tail order of the blocks (forced counts),
 * and flashcl_attention_merge of two halves of the keys. The main suite (FLASHCL_BACKEND=cuda
 * ctest) covers the API at large; this test makes sure each CUDA kernel is reached. Without a
 * CUDA device it prints "SKIP: ..." and exits 77. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "../../cuda/attention_shared.h" /* FC_ATTENTION_WGMMA_CONFIGS */
#include "attention_ref.h"
#include "flashcl.h"
#include "host_ref.h"

static flashcl_context *g_ctx;
static int g_have_wgmma;             /* the device runs the wgmma kernels (compute capability 9.0) */
static char g_no_wgmma_reason[512];  /* else why not */

typedef struct at_case {
    flashcl_dtype dt;
    int64_t B, Sq, Sk, Hq, Hkv, D;
    int causal, window_left, window_right;
    float softcap;
    int pad;         /* extra elements per head row (breaks 16-byte alignment when odd) */
    int with_lse;
    const char *what;
    const char *config; /* FLASHCL_CUDA_ATTENTION_CONFIG for this case (fallbacks), or NULL */
} at_case;

/* A packed-but-padded BSHD view: strides [S*H*(D+pad), H*(D+pad), D+pad, 1]. */
static void bshd(const at_case *c, int64_t S, int64_t H, flashcl_buffer *buf, flashcl_tensor *t,
                 size_t offset_elems) {
    const int64_t row = c->D + c->pad;
    memset(t, 0, sizeof *t);
    t->buffer = buf, t->dtype = c->dt, t->ndim = 4, t->offset = offset_elems * host_ref_dtype_size(c->dt);
    t->shape[0] = c->B, t->shape[1] = S, t->shape[2] = H, t->shape[3] = c->D;
    t->strides[0] = S * H * row, t->strides[1] = H * row, t->strides[2] = row, t->strides[3] = 1;
}

static size_t elems(const at_case *c, int64_t S, int64_t H) {
    return (size_t)(c->B * S * H * (c->D + c->pad));
}

static flashcl_buffer *upload(const void *data, size_t bytes) {
    flashcl_buffer *b = NULL;
    assert_int_equal(flashcl_buffer_create(g_ctx, bytes, &b), FLASHCL_SUCCESS);
    assert_int_equal(flashcl_buffer_write(b, 0, data, bytes), FLASHCL_SUCCESS);
    return b;
}

/* Random tensor in [-1, 1), rounded to dtype; f holds the rounded values as floats. */
static void *random_tensor(const at_case *c, size_t n, float *f, uint64_t *seed) {
    void *img = calloc(n, host_ref_dtype_size(c->dt));
    assert_non_null(img);
    for (size_t i = 0; i < n; i++) {
        *seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
        f[i] = host_ref_round(c->dt, (float)((double)(*seed >> 11) / 4503599627370496.0 - 1.0));
        host_ref_store(c->dt, img, i, f[i]);
    }
    return img;
}

static void check_value(const at_case *c, const char *name, float got, double ref, double e) {
    float lo = (float)(ref - e), hi = (float)(ref + e);
    if (ref == -INFINITY ? got == -INFINITY
                         : host_ref_round(c->dt, lo) <= got && got <= host_ref_round(c->dt, hi))
        return;
    fail_msg("%s (%s %lldx%lldx%lldx%lldx%lldx%lld causal %d window %d/%d softcap %g): %s = %.9g, "
             "reference %.9g",
             c->what, host_ref_dtype_name(c->dt), (long long)c->B, (long long)c->Sq,
             (long long)c->Sk, (long long)c->Hq, (long long)c->Hkv, (long long)c->D, c->causal,
             c->window_left, c->window_right, (double)c->softcap, name, (double)got, ref);
}

/* Runs the case (optionally as two halves of the keys merged with flashcl_attention_merge) and
 * compares o and lse with the double reference. */
static void run_case(const at_case *c, int merge_halves) {
    const size_t nq = elems(c, c->Sq, c->Hq), nk = elems(c, c->Sk, c->Hkv);
    const size_t es = host_ref_dtype_size(c->dt), nl = (size_t)(c->B * c->Hq * c->Sq);
    float *qf = malloc(nq * 4), *kf = malloc(nk * 4), *vf = malloc(nk * 4), *lse = malloc(nl * 4);
    double *oref = calloc(nq, sizeof *oref), *lref = calloc(nl, sizeof *lref);
    void *o_img = malloc(nq * es);
    uint64_t seed = 99;
    void *qi = random_tensor(c, nq, qf, &seed), *ki = random_tensor(c, nk, kf, &seed),
         *vi = random_tensor(c, nk, vf, &seed);
    flashcl_buffer *qb = upload(qi, nq * es), *kb = upload(ki, nk * es), *vb = upload(vi, nk * es);
    flashcl_buffer *ob = NULL, *lb = NULL;
    flashcl_tensor q, k, v, o, l;
    flashcl_attention_params p = {0.0f, c->causal, c->window_left, c->window_right, c->softcap};
    host_ref_attention_problem pr;
    int64_t lse_strides[3] = {c->Hq * c->Sq, c->Sq, 1};

    assert_int_equal(flashcl_buffer_create(g_ctx, nq * es, &ob), FLASHCL_SUCCESS);
    assert_int_equal(flashcl_buffer_create(g_ctx, nl * 4, &lb), FLASHCL_SUCCESS);
    { /* poisoned (all bits set: NaN in every dtype), so that an unwritten value fails */
        void *poison = malloc(nq * es > nl * 4 ? nq * es : nl * 4);
        assert_non_null(poison);
        memset(poison, 0xff, nq * es > nl * 4 ? nq * es : nl * 4);
        assert_int_equal(flashcl_buffer_write(ob, 0, poison, nq * es), FLASHCL_SUCCESS);
        assert_int_equal(flashcl_buffer_write(lb, 0, poison, nl * 4), FLASHCL_SUCCESS);
        free(poison);
    }
    bshd(c, c->Sq, c->Hq, qb, &q, 0), bshd(c, c->Sk, c->Hkv, kb, &k, 0);
    bshd(c, c->Sk, c->Hkv, vb, &v, 0), bshd(c, c->Sq, c->Hq, ob, &o, 0);
    memset(&l, 0, sizeof l);
    l.buffer = lb, l.dtype = FLASHCL_F32, l.ndim = 3;
    l.shape[0] = c->B, l.shape[1] = c->Hq, l.shape[2] = c->Sq;
    memcpy(l.strides, lse_strides, sizeof lse_strides);

    if (!merge_halves) {
        flashcl_status st = flashcl_attention_forward(g_ctx, &p, &q, &k, &v, &o, c->with_lse ? &l : NULL);
        if (st != FLASHCL_SUCCESS) fail_msg("%s: %s", c->what, flashcl_last_error());
    } else { /* keys [0, half) and [half, Sk) separately, each with its lse, then merged */
        const int64_t half = c->Sk / 2;
        flashcl_buffer *parts_o = NULL, *parts_l = NULL;
        flashcl_tensor po[2], pl[2];
        void *po_img = malloc(2 * nq * es);
        float *po_f = malloc(2 * nq * 4), *pl_f = malloc(2 * nl * 4);
        const float *o_parts[2], *l_parts[2];
        assert_int_equal(flashcl_buffer_create(g_ctx, 2 * nq * es, &parts_o), FLASHCL_SUCCESS);
        assert_int_equal(flashcl_buffer_create(g_ctx, 2 * nl * 4, &parts_l), FLASHCL_SUCCESS);
        for (int h = 0; h < 2; h++) {
            flashcl_tensor kh = k, vh = v;
            bshd(c, c->Sq, c->Hq, parts_o, &po[h], (size_t)h * nq);
            pl[h] = l, pl[h].buffer = parts_l, pl[h].offset = (size_t)h * nl * 4;
            kh.shape[1] = vh.shape[1] = h ? c->Sk - half : half;
            kh.offset = vh.offset = (size_t)(h ? half : 0) * (size_t)k.strides[1] * es;
            if (flashcl_attention_forward(g_ctx, &p, &q, &kh, &vh, &po[h], &pl[h]) != FLASHCL_SUCCESS)
                fail_msg("%s, half %d: %s", c->what, h, flashcl_last_error());
        }
        if (flashcl_attention_merge(g_ctx, 2, po, pl, &o, c->with_lse ? &l : NULL) != FLASHCL_SUCCESS)
            fail_msg("merge: %s", flashcl_last_error());
        /* The oracle merges the partials the device produced (their 16-bit rounding included). */
        assert_int_equal(flashcl_buffer_read(parts_o, 0, po_img, 2 * nq * es), FLASHCL_SUCCESS);
        assert_int_equal(flashcl_buffer_read(parts_l, 0, pl_f, 2 * nl * 4), FLASHCL_SUCCESS);
        for (size_t i = 0; i < 2 * nq; i++) po_f[i] = host_ref_load(c->dt, po_img, i);
        o_parts[0] = po_f, o_parts[1] = po_f + nq, l_parts[0] = pl_f, l_parts[1] = pl_f + nl;
        host_ref_attention_merge(c->B, c->Sq, c->Hq, c->D, 2, o_parts, q.strides, l_parts,
                                 lse_strides, oref, lref);
        flashcl_buffer_destroy(parts_o);
        flashcl_buffer_destroy(parts_l);
        free(po_img), free(po_f), free(pl_f);
    }
    assert_int_equal(flashcl_buffer_read(ob, 0, o_img, nq * es), FLASHCL_SUCCESS);
    if (c->with_lse) assert_int_equal(flashcl_buffer_read(lb, 0, lse, nl * 4), FLASHCL_SUCCESS);

    if (!merge_halves) {
        memset(&pr, 0, sizeof pr);
        pr.batch = c->B, pr.seqlen_q = c->Sq, pr.seqlen_k = c->Sk, pr.heads_q = c->Hq;
        pr.heads_kv = c->Hkv, pr.head_dim = c->D;
        memcpy(pr.q_strides, q.strides, sizeof pr.q_strides);
        memcpy(pr.k_strides, k.strides, sizeof pr.k_strides);
        memcpy(pr.v_strides, v.strides, sizeof pr.v_strides);
        pr.scale = (double)(1.0f / sqrtf((float)c->D)); /* the library's default, in f32 */
        pr.causal = c->causal, pr.window_left = c->window_left, pr.window_right = c->window_right;
        pr.softcap = c->softcap;
        host_ref_attention(&pr, qf, kf, vf, oref, q.strides, lref, lse_strides);
    }
    /* tensor cores round P to the storage type before P·V: at most u·max|v| more (v in [-1, 1)),
     * u = 2^-11 (f16), 2^-8 (bf16); the SIMT kernel keeps P in f32 */
    const double p_allowance = host_ref_narrowing_roundoff(c->dt);
    for (size_t i = 0; i < nq; i++) {
        if ((int64_t)(i % (size_t)(c->D + c->pad)) >= c->D) continue; /* padding */
        check_value(c, "o", host_ref_load(c->dt, o_img, i), oref[i],
                    4e-5 + 4e-5 * fabs(oref[i]) + p_allowance);
    }
    if (c->with_lse) {
        at_case f32 = *c;
        f32.dt = FLASHCL_F32;
        for (size_t i = 0; i < nl; i++)
            check_value(&f32, "lse", lse[i], lref[i], 4e-5 + 2e-6 * fabs(lref[i]));
    }
    flashcl_buffer_destroy(qb), flashcl_buffer_destroy(kb), flashcl_buffer_destroy(vb);
    flashcl_buffer_destroy(ob), flashcl_buffer_destroy(lb);
    free(qf), free(kf), free(vf), free(lse), free(oref), free(lref), free(o_img);
    free(qi), free(ki), free(vi);
}

static void test_forward_paths(void **state) {
    static const at_case cases[] = {
        /* dt, B, Sq, Sk, Hq, Hkv, D, causal, wl, wr, softcap, pad, lse, what, config */
        {FLASHCL_F16, 2, 37, 100, 4, 2, 64, 1, -1, -1, 0, 0, 1, "tensor cores d64, causal Sq<Sk", NULL},
        {FLASHCL_BF16, 1, 130, 70, 2, 2, 128, 1, -1, -1, 0, 0, 1, "tensor cores d128, Sq>Sk", NULL},
        {FLASHCL_F16, 1, 65, 200, 3, 1, 32, 0, 20, 5, 0, 0, 1, "tensor cores d32, window, MQA", NULL},
        {FLASHCL_BF16, 1, 33, 90, 2, 1, 72, 0, -1, -1, 30.0f, 0, 1, "tensor cores d96 pad, softcap", NULL},
        {FLASHCL_F16, 1, 20, 64, 2, 2, 256, 1, 16, -1, 0, 0, 1, "tensor cores d256, causal window", NULL},
        {FLASHCL_BF16, 1, 9, 40, 2, 1, 192, 0, -1, -1, 0, 0, 0, "tensor cores d192", NULL},
        {FLASHCL_BF16, 2, 1, 3000, 8, 2, 128, 0, -1, -1, 0, 0, 1, "split-KV decode", NULL},
        {FLASHCL_F16, 1, 4, 2500, 4, 4, 64, 1, -1, -1, 0, 0, 1, "split-KV causal decode", NULL},
        {FLASHCL_F32, 2, 21, 50, 4, 2, 40, 1, -1, -1, 0, 1, 1, "SIMT f32 (unaligned rows)", NULL},
        {FLASHCL_F32, 2, 21, 50, 4, 2, 40, 1, -1, -1, 0, 0, 1, "tf32x3 d64 (D 40), causal GQA", NULL},
        {FLASHCL_F32, 1, 70, 300, 2, 1, 128, 0, 30, 7, 0, 0, 1, "tf32x3 d128, window", NULL},
        {FLASHCL_F32, 1, 33, 2000, 2, 2, 100, 1, -1, -1, 15.0f, 0, 1, "tf32x3 split-KV, softcap", NULL},
        {FLASHCL_F32, 1, 12, 4, 4, 1, 64, 1, -1, -1, 0, 0, 1, "tf32x3: rows with no visible key", NULL},
        {FLASHCL_F32, 1, 40, 130, 2, 2, 96, 0, -1, -1, 0, 0, 1, "tf32x3 fallback d128k16", "tf32_d128k16"},
        {FLASHCL_F32, 1, 5, 700, 2, 1, 256, 0, 100, 100, 10.0f, 0, 1, "SIMT f32 d256 split", NULL},
        /* f32 decode shapes (at most 16 packed rows) on the decode kernel by 3xTF32 */
        {FLASHCL_F32, 1, 1, 5000, 32, 4, 128, 0, -1, -1, 0, 0, 1, "tf32x3 decode d128, GQA 8:1", NULL},
        {FLASHCL_F32, 2, 3, 2999, 4, 1, 128, 1, -1, -1, 0, 0, 1, "tf32x3 decode, 12 rows, causal", NULL},
        {FLASHCL_F32, 1, 1, 5, 4, 1, 64, 0, -1, -1, 0, 0, 1, "tf32x3 decode Sk 5: idle warps", NULL},
        {FLASHCL_F32, 1, 2, 700, 4, 1, 80, 0, 50, 0, 20.0f, 0, 1, "tf32x3 decode D 80, window, softcap", NULL},
        {FLASHCL_F32, 1, 1, 3000, 16, 1, 64, 0, -1, -1, 0, 0, 1, "tf32x3 decode d64, GQA 16:1", NULL},
        {FLASHCL_F32, 1, 4, 64, 4, 4, 32, 1, -1, -1, 0, 0, 0, "tf32x3 decode d32, MHA, causal", NULL},
        {FLASHCL_F32, 1, 1, 2000, 8, 1, 96, 0, -1, -1, 0, 0, 1, "tf32x3 decode fallback d128k16",
         "tf32_decode_d128k16"},
        {FLASHCL_F16, 1, 17, 33, 2, 1, 20, 0, -1, -1, 0, 0, 1, "SIMT fallback: D % 8 != 0", NULL},
        {FLASHCL_BF16, 1, 17, 33, 2, 2, 64, 1, -1, -1, 0, 3, 1, "SIMT fallback: unaligned rows", NULL},
        {FLASHCL_F16, 1, 1, 5000, 32, 4, 128, 0, -1, -1, 0, 0, 1, "decode d128, GQA 8:1", NULL},
        {FLASHCL_BF16, 1, 2, 999, 16, 2, 256, 1, -1, -1, 0, 0, 1, "decode d256, 16 rows, causal", NULL},
        {FLASHCL_F16, 1, 1, 5, 4, 1, 64, 0, -1, -1, 0, 0, 1, "decode Sk 5: warps with no keys", NULL},
        {FLASHCL_F16, 1, 3, 700, 2, 1, 80, 0, 50, 0, 20.0f, 0, 1, "decode D 80, window, softcap", NULL},
        {FLASHCL_BF16, 1, 1, 64, 8, 8, 32, 1, -1, -1, 0, 0, 0, "decode d32 (d64 kernel), MHA", NULL},
        /* the decode epilogue's row-slot counts: all 16 rows, and an odd count */
        {FLASHCL_F16, 1, 2, 4001, 16, 2, 128, 1, -1, -1, 0, 0, 1, "decode d128, 16 rows, causal", NULL},
        {FLASHCL_BF16, 1, 1, 2999, 7, 1, 128, 0, -1, -1, 0, 0, 1, "decode d128, GQA 7:1", NULL},
        {FLASHCL_F16, 1, 1, 3000, 16, 1, 64, 0, -1, -1, 0, 0, 1, "decode d64, GQA 16:1", NULL},
        {FLASHCL_F16, 1, 17, 100, 1, 1, 64, 1, -1, -1, 0, 0, 1, "17 packed rows: prefill kernel", NULL},
        {FLASHCL_BF16, 1, 20, 3000, 2, 1, 64, 0, -1, -1, 0, 0, 1, "prefill kernel, split-KV", NULL},
        {FLASHCL_F16, 1, 40, 100, 2, 1, 256, 1, -1, -1, 0, 0, 1, "fallback d256k16", "d256k16"},
        {FLASHCL_F16, 1, 8, 8, 1, 1, 64, 1, 0, -1, 0, 0, 1, "window 0: diagonal only", NULL},
        {FLASHCL_BF16, 1, 12, 4, 1, 1, 64, 1, -1, -1, 0, 0, 1, "rows with no visible key", NULL},
    };
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (cases[i].config) setenv("FLASHCL_CUDA_ATTENTION_CONFIG", cases[i].config, 1);
        run_case(&cases[i], 0);
        unsetenv("FLASHCL_CUDA_ATTENTION_CONFIG");
    }
}

/* The forward cases through the default choice (on Hopper: the wgmma kernel wherever it
 * applies), and on Hopper once more with FLASHCL_CUDA_ATTENTION_NO_WGMMA=1, so that the
 * mma.sync prefill kernel stays covered there too. */
static void test_forward_paths_all(void **state) {
    test_forward_paths(state);
    if (!g_have_wgmma) return;
    setenv("FLASHCL_CUDA_ATTENTION_NO_WGMMA", "1", 1);
    test_forward_paths(state);
    unsetenv("FLASHCL_CUDA_ATTENTION_NO_WGMMA");
}

/* The wgmma kernel (cuda/attention_wgmma.cuh), forced through every configuration whose pad
 * covers the case's head_dim. Blocks of 64 or 128 packed rows and 64 or 128 keys: the cases
 * cross one and several row and key blocks with tails, rows past the packed ones (a warpgroup with no row), GQA / MQA packing,
 * causal with Sq < Sk, = Sk and > Sk (rows with no visible key), windows, softcap, padded row
 * strides, head_dim below the pad, split-KV partials and the merge of halves. */
static void test_wgmma_paths(void **state) {
    static const at_case cases[] = {
        /* dt, B, Sq, Sk, Hq, Hkv, D, causal, wl, wr, softcap, pad, lse, what, config */
        {FLASHCL_F16, 2, 37, 100, 4, 2, 64, 1, -1, -1, 0, 0, 1, "wgmma d64, causal Sq<Sk, GQA 2:1", NULL},
        {FLASHCL_BF16, 2, 37, 100, 4, 2, 64, 1, -1, -1, 0, 0, 1, "wgmma d64 bf16, causal Sq<Sk", NULL},
        {FLASHCL_BF16, 1, 130, 70, 2, 2, 128, 1, -1, -1, 0, 0, 1, "wgmma d128, causal Sq>Sk", NULL},
        {FLASHCL_F16, 1, 130, 70, 2, 2, 128, 1, -1, -1, 0, 0, 1, "wgmma d128 f16, causal Sq>Sk", NULL},
        {FLASHCL_F16, 1, 65, 200, 3, 1, 32, 0, 20, 5, 0, 0, 1, "wgmma D 32 (d64), window, MQA", NULL},
        {FLASHCL_BF16, 1, 33, 90, 2, 1, 72, 0, -1, -1, 30.0f, 0, 1, "wgmma D 72 (d128), softcap", NULL},
        {FLASHCL_F16, 1, 300, 300, 2, 2, 128, 1, -1, -1, 0, 0, 1, "wgmma d128, causal Sq=Sk, 3 blocks", NULL},
        {FLASHCL_BF16, 1, 257, 513, 4, 1, 64, 0, -1, -1, 0, 0, 1, "wgmma d64, MQA 4:1, key tail of 1", NULL},
        {FLASHCL_F16, 1, 1000, 1000, 2, 1, 128, 1, -1, -1, 0, 0, 1, "wgmma d128, causal 1000, GQA", NULL},
        {FLASHCL_BF16, 1, 1000, 1000, 2, 2, 64, 1, -1, -1, 0, 0, 0, "wgmma d64, causal 1000, no lse", NULL},
        {FLASHCL_BF16, 2, 200, 600, 2, 2, 96, 0, 100, 50, 0, 0, 1, "wgmma D 96 (d128), window 100/50", NULL},
        {FLASHCL_F16, 1, 300, 700, 2, 2, 128, 0, 64, -1, 0, 0, 1, "wgmma d128, left window only", NULL},
        {FLASHCL_F16, 1, 20, 3000, 2, 1, 64, 0, -1, -1, 0, 0, 1, "wgmma d64, split-KV", NULL},
        {FLASHCL_BF16, 1, 50, 4000, 4, 4, 128, 1, -1, -1, 0, 0, 1, "wgmma d128, causal split-KV", NULL},
        {FLASHCL_F16, 1, 8, 8, 1, 1, 64, 1, 0, -1, 0, 0, 1, "wgmma window 0: diagonal only", NULL},
        {FLASHCL_BF16, 1, 12, 4, 1, 1, 64, 1, -1, -1, 0, 0, 1, "wgmma rows with no visible key", NULL},
        {FLASHCL_F16, 1, 1, 5, 4, 1, 64, 0, -1, -1, 0, 0, 1, "wgmma decode shape (4 packed rows)", NULL},
        {FLASHCL_F16, 2, 77, 129, 8, 2, 128, 1, -1, -1, 50.0f, 8, 1, "wgmma d128, padded rows, softcap", NULL},
        {FLASHCL_BF16, 1, 64, 64, 1, 1, 40, 1, -1, -1, 0, 8, 1, "wgmma D 40 (d64), padded rows", NULL},
        {FLASHCL_F16, 1, 129, 1, 2, 1, 128, 0, -1, -1, 0, 0, 1, "wgmma Sk 1", NULL},
        {FLASHCL_BF16, 3, 5, 300, 6, 3, 128, 0, -1, -1, 0, 0, 1, "wgmma 10 packed rows per block", NULL},
        {FLASHCL_F16, 1, 129, 129, 2, 2, 64, 1, -1, -1, 0, 0, 1, "wgmma d64, causal 129", NULL},
        {FLASHCL_BF16, 1, 200, 260, 4, 2, 120, 0, -1, -1, 0, 0, 1, "wgmma D 120 (d128), GQA", NULL},
        {FLASHCL_BF16, 8, 300, 300, 8, 4, 128, 1, -1, -1, 0, 0, 1,
         "wgmma d128, causal GQA, 160 blocks (more than an H100's SMs)", NULL},
    };
    static const at_case halves[] = {
        {FLASHCL_F16, 1, 5, 300, 4, 2, 64, 0, -1, -1, 0, 0, 1, "wgmma merge f16", NULL},
        {FLASHCL_BF16, 1, 70, 500, 2, 1, 128, 1, -1, -1, 0, 0, 1, "wgmma merge bf16 causal", NULL},
    };
    (void)state;
    if (!g_have_wgmma) {
        printf("SKIP: wgmma cases: %s\n", g_no_wgmma_reason);
        return;
    }
    static const struct {
        const char *name;
        int pad;
    } configs[] = {
#define WGMMA_CONFIG_(name, pad, keys, wgs, pipe, blocks) {#name, pad},
        FC_ATTENTION_WGMMA_CONFIGS(WGMMA_CONFIG_)
#undef WGMMA_CONFIG_
    };
    for (size_t c = 0; c < sizeof configs / sizeof configs[0]; c++) {
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            if (cases[i].D > configs[c].pad) continue;
            setenv("FLASHCL_CUDA_ATTENTION_CONFIG", configs[c].name, 1);
            printf("%s: %s\n", configs[c].name, cases[i].what);
            run_case(&cases[i], 0);
        }
        for (size_t i = 0; i < sizeof halves / sizeof halves[0]; i++) {
            if (halves[i].D > configs[c].pad) continue;
            setenv("FLASHCL_CUDA_ATTENTION_CONFIG", configs[c].name, 1);
            printf("%s: %s\n", configs[c].name, halves[i].what);
            run_case(&halves[i], 1);
        }
    }
    unsetenv("FLASHCL_CUDA_ATTENTION_CONFIG");
}

/* Whether a forced wgmma configuration runs here: on anything but compute capability 9.0 the
 * library refuses it (FLASHCL_UNSUPPORTED, with the reason) rather than quietly taking another
 * kernel. Returns 0 when the probe itself went wrong. */
static int probe_wgmma(void) {
    enum { N = 8, D = 64 };
    uint16_t zeros[2 * N * D];
    flashcl_buffer *buf = NULL;
    flashcl_tensor t[4];
    flashcl_attention_params p = {0.0f, 0, -1, -1, 0.0f};
    flashcl_status st;
    memset(zeros, 0, sizeof zeros);
    if (flashcl_buffer_create(g_ctx, sizeof zeros, &buf) != FLASHCL_SUCCESS ||
        flashcl_buffer_write(buf, 0, zeros, sizeof zeros) != FLASHCL_SUCCESS) {
        fprintf(stderr, "wgmma probe: %s\n", flashcl_last_error());
        flashcl_buffer_destroy(buf);
        return 0;
    }
    for (int i = 0; i < 4; i++) { /* q, k, v: the first half (zeros); o: the second */
        memset(&t[i], 0, sizeof t[i]);
        t[i].buffer = buf, t[i].dtype = FLASHCL_F16, t[i].ndim = 4;
        t[i].offset = i == 3 ? N * D * 2 : 0;
        t[i].shape[0] = 1, t[i].shape[1] = N, t[i].shape[2] = 1, t[i].shape[3] = D;
        t[i].strides[0] = N * D, t[i].strides[1] = D, t[i].strides[2] = D, t[i].strides[3] = 1;
    }
    setenv("FLASHCL_CUDA_ATTENTION_CONFIG", "wgmma_d64w1b3", 1);
    st = flashcl_attention_forward(g_ctx, &p, &t[0], &t[1], &t[2], &t[3], NULL);
    unsetenv("FLASHCL_CUDA_ATTENTION_CONFIG");
    flashcl_buffer_destroy(buf);
    g_have_wgmma = st == FLASHCL_SUCCESS;
    if (st == FLASHCL_UNSUPPORTED)
        snprintf(g_no_wgmma_reason, sizeof g_no_wgmma_reason, "%s", flashcl_last_error());
    else if (st != FLASHCL_SUCCESS) {
        fprintf(stderr, "wgmma probe: flashcl_attention_forward: %s\n", flashcl_last_error());
        return 0;
    }
    return 1;
}

/* The order blocks take their (row block, batch, kv head) positions in (block_position, the
 * causal tail order): the heuristic takes the tail only on grids larger than these cases, so the
 * tail count is forced -- a part of the pairs (both halves of the mapping), all of them, and one
 * -- on the default kernel (wgmma on compute capability 9.0), the mma.sync kernel and the SIMT
 * kernel (f32). Each must equal the reference as without the order. */
static void test_tail_order(void **state) {
    static const at_case cases[] = {
        /* dt, B, Sq, Sk, Hq, Hkv, D, causal, wl, wr, softcap, pad, lse, what, config */
        {FLASHCL_F16, 2, 300, 300, 6, 3, 128, 1, -1, -1, 0, 0, 1, "tail order d128, GQA 2:1", NULL},
        {FLASHCL_BF16, 3, 200, 260, 2, 2, 64, 1, -1, -1, 0, 0, 1, "tail order d64, causal Sq<Sk", NULL},
        {FLASHCL_F32, 2, 70, 70, 3, 3, 32, 1, -1, -1, 0, 0, 1, "tail order f32 (SIMT)", NULL},
    };
    static const char *const tails[] = {"4", "100", "1"};
    (void)state;
    for (int no_wgmma = 0; no_wgmma < 2; no_wgmma++) {
        if (no_wgmma) setenv("FLASHCL_CUDA_ATTENTION_NO_WGMMA", "1", 1);
        for (size_t t = 0; t < sizeof tails / sizeof tails[0]; t++) {
            setenv("FLASHCL_CUDA_ATTENTION_TAIL_HEADS", tails[t], 1);
            for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
                printf("%s, tail %s%s\n", cases[i].what, tails[t], no_wgmma ? ", no wgmma" : "");
                run_case(&cases[i], 0);
            }
        }
    }
    unsetenv("FLASHCL_CUDA_ATTENTION_TAIL_HEADS");
    unsetenv("FLASHCL_CUDA_ATTENTION_NO_WGMMA");
}

/* The persistent wgmma kernels (cuda/attention_wgmma_persistent.cuh: wgmma_d128ppp for unmasked
 * calls, wgmma_d128pppc for causal ones too, in a snake order of row blocks; and
 * cuda/attention_wgmma_persistent_w1.cuh, wgmma_d64w1b3_persistent and, causal too,
 * wgmma_d64w1k64_persistent_causal at D <= 64) walk several row
 * blocks per block, their ring of K/V stages and the next Q running on from one row block into
 * the next: each forced, on grids of 1, 2, 3 and 7 blocks
 * (FLASHCL_CUDA_ATTENTION_PERSISTENT_BLOCKS), so that every block walks many -- with one key
 * block (two stages a row block) and several, key tails, causal row blocks of different lengths
 * with Sq = Sk and Sq < Sk, GQA / MQA packing, rows past the packed ones, padded head dims,
 * softcap and split-KV partials. Calls a kernel does not take (causal on wgmma_d128ppp, causal
 * with Sq > Sk, causal split-KV, a window) must still be right: another kernel takes them. */
static void test_persistent_walks(void **state) {
    static const at_case cases[] = {
        /* dt, B, Sq, Sk, Hq, Hkv, D, causal, wl, wr, softcap, pad, lse, what, config */
        {FLASHCL_F16, 3, 400, 150, 4, 2, 128, 0, -1, -1, 0, 0, 1, "GQA, key tail of 22", NULL},
        {FLASHCL_BF16, 2, 300, 512, 6, 3, 128, 0, -1, -1, 0, 0, 0,
         "GQA, four whole key blocks, no lse", NULL},
        {FLASHCL_F16, 4, 100, 100, 2, 2, 64, 0, -1, -1, 0, 0, 1,
         "D 64 (pad 128), one key block a row block", NULL},
        {FLASHCL_BF16, 2, 257, 700, 4, 1, 48, 0, -1, -1, 20.0f, 0, 1,
         "D 48 (pad 128), MQA, softcap", NULL},
        {FLASHCL_BF16, 3, 333, 150, 4, 2, 64, 0, -1, -1, 0, 0, 1, "D 64, GQA, key tail of 22", NULL},
        {FLASHCL_F16, 2, 200, 512, 3, 3, 32, 0, -1, -1, 0, 0, 0,
         "D 32 (pad 64), four whole key blocks, no lse", NULL},
        {FLASHCL_BF16, 1, 24, 5000, 8, 2, 64, 0, -1, -1, 0, 0, 1, "D 64, split-KV", NULL},
        {FLASHCL_F16, 2, 300, 300, 4, 2, 64, 1, -1, -1, 0, 0, 1, "D 64, causal Sq = Sk, GQA", NULL},
        {FLASHCL_BF16, 3, 130, 457, 2, 2, 40, 1, -1, -1, 15.0f, 0, 1,
         "D 40 (pad 64), causal Sq < Sk, key tail, softcap", NULL},
        {FLASHCL_F16, 1, 30, 4000, 8, 2, 64, 1, -1, -1, 0, 0, 1,
         "D 64, causal split-KV: another kernel", NULL},
        {FLASHCL_F16, 1, 40, 3000, 4, 2, 128, 0, -1, -1, 0, 0, 1, "split-KV", NULL},
        {FLASHCL_BF16, 2, 300, 300, 4, 2, 128, 1, -1, -1, 0, 0, 1, "causal Sq = Sk, GQA", NULL},
        {FLASHCL_F16, 3, 200, 457, 2, 2, 96, 1, -1, -1, 0, 0, 1,
         "D 96, causal Sq < Sk, key tail", NULL},
        {FLASHCL_F16, 2, 129, 129, 8, 1, 128, 1, -1, -1, 30.0f, 0, 1,
         "causal MQA 8:1, softcap", NULL},
        {FLASHCL_BF16, 2, 150, 100, 4, 2, 128, 1, -1, -1, 0, 0, 1,
         "causal Sq > Sk: another kernel", NULL},
        {FLASHCL_F16, 1, 50, 4000, 4, 4, 128, 1, -1, -1, 0, 0, 1,
         "causal split-KV: another kernel", NULL},
        {FLASHCL_F16, 1, 200, 300, 2, 2, 128, 0, 64, 10, 0, 0, 1, "window: another kernel", NULL},
    };
    static const struct {
        const char *name;
        int pad; /* unmasked cases of a larger head_dim go to another kernel: not run here */
    } configs[] = {{"wgmma_d128ppp", 128},
                   {"wgmma_d128pppc", 128},
                   {"wgmma_d64w1b3_persistent", 64},
                   {"wgmma_d64w1k64_persistent_causal", 64}};
    static const char *const grids[] = {"1", "2", "3", "7"};
    (void)state;
    if (!g_have_wgmma) {
        printf("SKIP: persistent wgmma cases: %s\n", g_no_wgmma_reason);
        return;
    }
    for (size_t c = 0; c < sizeof configs / sizeof configs[0]; c++) {
        setenv("FLASHCL_CUDA_ATTENTION_CONFIG", configs[c].name, 1);
        for (size_t gi = 0; gi < sizeof grids / sizeof grids[0]; gi++) {
            setenv("FLASHCL_CUDA_ATTENTION_PERSISTENT_BLOCKS", grids[gi], 1);
            for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
                if (cases[i].D > configs[c].pad && !cases[i].causal && cases[i].window_left < 0)
                    continue;
                printf("%s: %s, %s blocks\n", configs[c].name, cases[i].what, grids[gi]);
                run_case(&cases[i], 0);
            }
        }
    }
    unsetenv("FLASHCL_CUDA_ATTENTION_PERSISTENT_BLOCKS");
    unsetenv("FLASHCL_CUDA_ATTENTION_CONFIG");
}

static void test_merge_of_halves(void **state) {
    static const at_case cases[] = {
        {FLASHCL_F16, 1, 5, 300, 4, 2, 64, 0, -1, -1, 0, 0, 1, "merge f16", NULL},
        {FLASHCL_F32, 2, 3, 77, 2, 1, 24, 0, -1, -1, 0, 0, 0, "merge f32, no lse", NULL},
    };
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i], 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forward_paths_all),
        cmocka_unit_test(test_wgmma_paths),
        cmocka_unit_test(test_tail_order),
        cmocka_unit_test(test_persistent_walks),
        cmocka_unit_test(test_merge_of_halves),
    };
    flashcl_context_options o = {FLASHCL_BACKEND_CUDA, -1, NULL, ""};
    flashcl_status st;
    int failures;
    unsetenv("FLASHCL_BACKEND");
    unsetenv("FLASHCL_DEVICE");
    unsetenv("FLASHCL_CUDA_ATTENTION_CONFIG"); /* the cases set these themselves */
    unsetenv("FLASHCL_CUDA_ATTENTION_NO_DECODE");
    unsetenv("FLASHCL_CUDA_ATTENTION_NO_WGMMA");
    unsetenv("FLASHCL_CUDA_ATTENTION_TAIL_HEADS");
    unsetenv("FLASHCL_CUDA_ATTENTION_NO_TAIL_ORDER");
    st = flashcl_context_create(&o, &g_ctx);
    if (st == FLASHCL_DEVICE_NOT_FOUND) {
        printf("SKIP: no CUDA device: %s\n", flashcl_last_error());
        return 77;
    }
    if (st != FLASHCL_SUCCESS) {
        fprintf(stderr, "flashcl_context_create(CUDA): %s\n", flashcl_last_error());
        return 1;
    }
    if (!probe_wgmma()) {
        flashcl_context_destroy(g_ctx);
        return 1;
    }
    failures = cmocka_run_group_tests(tests, NULL, NULL);
    flashcl_context_destroy(g_ctx);
    return failures == 77 ? 1 : failures;
}
