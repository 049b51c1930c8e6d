/* host_ref: naive attention in double (scores, mask, softcap, softmax, ·v, lse) and the merge of
 * partial results. Written from the definitions, independent of the kernels. */
#include "attention_ref.h"

#include <math.h>
#include <stdlib.h>

int host_ref_attention_visible(const host_ref_attention_problem *p, int64_t i, int64_t j)
{
    /* Bottom-right alignment: query i sits at key position i + Sk - Sq. */
    int64_t diag = i + p->seqlen_k - p->seqlen_q;
    if (j < 0 || j >= p->seqlen_k)
        return 0;
    if (p->causal && j > diag)
        return 0;
    if (p->window_left >= 0 && j < diag - p->window_left)
        return 0;
    if (p->window_right >= 0 && j > diag + p->window_right)
        return 0;
    return 1;
}

void host_ref_attention(const host_ref_attention_problem *p, const float *q, const float *k,
                        const float *v, double *o, const int64_t o_strides[4], double *lse,
                        const int64_t lse_strides[3])
{
    const int64_t group = p->heads_q / p->heads_kv, D = p->head_dim;
    double *s = malloc((size_t)(p->seqlen_k > 0 ? p->seqlen_k : 1) * sizeof *s);
    double *acc = malloc((size_t)D * sizeof *acc);
    if (!s || !acc) {
        free(s);
        free(acc);
        abort(); /* the oracle cannot run; tests are sized far below this */
    }
    for (int64_t b = 0; b < p->batch; b++)
        for (int64_t h = 0; h < p->heads_q; h++) {
            const int64_t hk = h / group;
            for (int64_t i = 0; i < p->seqlen_q; i++) {
                const float *qr = q + b * p->q_strides[0] + i * p->q_strides[1] +
                                  h * p->q_strides[2];
                double *orow = o + b * o_strides[0] + i * o_strides[1] + h * o_strides[2];
                double m = -INFINITY, sum = 0.0;
                int64_t visible = 0;
                /* scores of the visible keys, and their maximum */
                for (int64_t j = 0; j < p->seqlen_k; j++) {
                    if (!host_ref_attention_visible(p, i, j)) {
                        s[j] = -INFINITY;
                        continue;
                    }
                    const float *kr = k + b * p->k_strides[0] + j * p->k_strides[1] +
                                      hk * p->k_strides[2];
                    double dot = 0.0;
                    for (int64_t d = 0; d < D; d++)
                        dot += (double)qr[d] * (double)kr[d];
                    dot *= p->scale;
                    if (p->softcap > 0.0)
                        dot = p->softcap * tanh(dot / p->softcap);
                    s[j] = dot;
                    if (dot > m)
                        m = dot;
                    visible++;
                }
                for (int64_t d = 0; d < D; d++)
                    acc[d] = 0.0;
                if (visible > 0) {
                    for (int64_t j = 0; j < p->seqlen_k; j++) {
                        if (s[j] == -INFINITY)
                            continue;
                        const float *vr = v + b * p->v_strides[0] + j * p->v_strides[1] +
                                          hk * p->v_strides[2];
                        double w = exp(s[j] - m);
                        sum += w;
                        for (int64_t d = 0; d < D; d++)
                            acc[d] += w * (double)vr[d];
                    }
                }
                for (int64_t d = 0; d < D; d++)
                    orow[d] = visible > 0 ? acc[d] / sum : 0.0;
                if (lse)
                    lse[b * lse_strides[0] + h * lse_strides[1] + i * lse_strides[2]] =
                        visible > 0 ? m + log(sum) : -INFINITY;
            }
        }
    free(s);
    free(acc);
}

void host_ref_attention_merge(int64_t batch, int64_t seqlen_q, int64_t heads, int64_t head_dim,
                              int64_t parts, const float *const *o_parts,
                              const int64_t o_strides[4], const float *const *lse_parts,
                              const int64_t lse_strides[3], double *o, double *lse)
{
    for (int64_t b = 0; b < batch; b++)
        for (int64_t h = 0; h < heads; h++)
            for (int64_t i = 0; i < seqlen_q; i++) {
                const int64_t lo = b * lse_strides[0] + h * lse_strides[1] + i * lse_strides[2];
                const int64_t oo = b * o_strides[0] + i * o_strides[1] + h * o_strides[2];
                double m = -INFINITY, sum = 0.0;
                for (int64_t p = 0; p < parts; p++)
                    if ((double)lse_parts[p][lo] > m)
                        m = lse_parts[p][lo];
                if (m != -INFINITY)
                    for (int64_t p = 0; p < parts; p++)
                        sum += exp((double)lse_parts[p][lo] - m);
                for (int64_t d = 0; d < head_dim; d++) {
                    double acc = 0.0;
                    if (m != -INFINITY)
                        for (int64_t p = 0; p < parts; p++)
                            acc += exp((double)lse_parts[p][lo] - m) / sum *
                                   (double)o_parts[p][oo + d];
                    o[oo + d] = acc;
                }
                if (lse)
                    lse[lo] = m == -INFINITY ? -INFINITY : m + log(sum);
            }
}
