/* host_ref: naive attention and the merge of partial attention results, in double — the oracle
 * of the attention tests. Inputs are floats already rounded to the storage dtype by the caller;
 * every tensor is addressed through explicit element strides, so any layout works. */
#ifndef FLASHCL_ATTENTION_REF_H
#define FLASHCL_ATTENTION_REF_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The problem, indexed like the public API: q [B, Sq, Hq, D], k and v [B, Sk, Hkv, D],
 * o [B, Sq, Hq, D]; strides in elements in that order ([batch, seq, head, dim]). */
typedef struct host_ref_attention_problem {
    int64_t batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim;
    int64_t q_strides[4], k_strides[4], v_strides[4];
    double scale;                   /* used as given (the caller applies the 1/sqrt(D) default) */
    int causal;                     /* bottom-right aligned: key j visible iff j <= i + Sk - Sq */
    int window_left, window_right;  /* -1 = unbounded, same alignment as causal */
    double softcap;                 /* 0 = off; else score -> softcap * tanh(score / softcap) */
} host_ref_attention_problem;

/* Whether key j is visible to query i under the problem's causal flag and window. */
int host_ref_attention_visible(const host_ref_attention_problem *p, int64_t i, int64_t j);

/* o[b, i, h, :] = sum_j softmax_j(s_ij) v[b, j, h / (Hq / Hkv), :] with
 * s_ij = softcap(scale · q·k) over the visible keys, all in double. o is written with o_strides
 * ([batch, seq, head, dim]); lse (may be NULL) [B, Hq, Sq] with lse_strides receives the natural
 * log-sum-exp of the visible s_ij. A row with no visible key gets o = 0 and lse = -inf. */
void host_ref_attention(const host_ref_attention_problem *p, const float *q, const float *k,
                        const float *v, double *o, const int64_t o_strides[4], double *lse,
                        const int64_t lse_strides[3]);

/* Merges `parts` partial results of the same rows: o_parts[p] has o_strides (shared by all
 * parts, [batch, seq, head, dim]) and lse_parts[p] has lse_strides ([batch, head, seq]).
 * lse = log sum_p exp(lse_p), o = sum_p exp(lse_p - lse) o_p; a row whose partial lse are all
 * -inf gets o = 0 and lse = -inf. Output o and lse use the same strides; lse may be NULL. */
void host_ref_attention_merge(int64_t batch, int64_t seqlen_q, int64_t heads, int64_t head_dim,
                              int64_t parts, const float *const *o_parts,
                              const int64_t o_strides[4], const float *const *lse_parts,
                              const int64_t lse_strides[3], double *o, double *lse);

#ifdef __cplusplus
}
#endif
#endif
