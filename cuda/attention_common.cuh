/* Pieces shared by the attention kernels: the mask of a packed row, a block's key range, the
 * score transform, and the epilogue that writes o and lse (or the split-KV partials). */
#pragma once

#include "attention_shared.h"
#include "common.cuh"

static_assert(sizeof(fc_attention_args) == FC_ATTENTION_ARGS_BYTES, "host and device layouts differ");
static_assert(sizeof(fc_merge_part) == FC_MERGE_PART_BYTES, "host and device layouts differ");
static_assert(sizeof(fc_merge_args) == FC_MERGE_ARGS_BYTES, "host and device layouts differ");

#define FC_LN2 0.69314718055994530942f

/* The keys a query may see, [lo, hi] (empty when hi < lo): bottom-right aligned, so query i
 * sits at key position diag = i + Sk - Sq; causal hides keys after it, the window keys further
 * than window_left before or window_right after it. */
struct key_range {
    int64_t lo, hi;
};

FC_DEVICE key_range visible_keys(const fc_attention_args &a, int64_t i) {
    const int64_t diag = i + a.seqlen_k - a.seqlen_q;
    key_range r;
    r.lo = a.window_left >= 0 ? diag - a.window_left : 0;
    r.hi = a.causal ? diag : (a.window_right >= 0 ? diag + a.window_right : a.seqlen_k - 1);
    if (r.lo < 0) r.lo = 0;
    if (r.hi > a.seqlen_k - 1) r.hi = a.seqlen_k - 1;
    return r;
}

/* The key blocks a block of packed rows [r0, r0 + rows) must visit within its split, and the
 * range every one of its rows sees (a key block inside it needs no mask). Visible ranges grow
 * with the query index, so the first and last rows bound them. */
struct block_keys {
    int64_t first_block, last_block; /* inclusive; last < first: nothing visible */
    int64_t all_lo, all_hi;          /* keys visible to every row of the block */
};

FC_DEVICE block_keys plan_keys(const fc_attention_args &a, int64_t r0, int rows, int keys) {
    const int64_t packed = a.seqlen_q * a.group;
    const int64_t r1 = min(r0 + rows, packed) - 1;
    const key_range first = visible_keys(a, r0 / a.group), last = visible_keys(a, r1 / a.group);
    const int64_t split_lo = (int64_t)blockIdx.y * a.keys_per_split;
    const int64_t split_hi = min(split_lo + a.keys_per_split, a.seqlen_k) - 1;
    const int64_t lo = max(first.lo, split_lo), hi = min(last.hi, split_hi);
    block_keys b;
    b.first_block = lo / keys;
    b.last_block = hi >= lo ? hi / keys : b.first_block - 1;
    b.all_lo = last.lo;
    b.all_hi = first.hi;
    return b;
}

/* A raw q·k score to the log2 domain: scale·log2(e) folded into one multiply, or the softcap
 * (tanh) first. Masked scores are -inf. */
FC_DEVICE float score_log2(const fc_attention_args &a, float qk) {
    if (a.softcap > 0.0f) return a.softcap * tanhf(qk * a.scale / a.softcap) * 1.4426950408889634f;
    return qk * a.scale_log2;
}

/* One online-softmax step for a row whose new scores (log2 domain) have maximum `tile_max`:
 * returns the factor that rescales the old sum and accumulator, and updates m. A row that has
 * seen only -inf keeps m = -inf and gets factor 0 (exp2 of -inf), never NaN. */
FC_DEVICE float online_rescale(float &m, float tile_max, float &sub) {
    const float m_new = fmaxf(m, tile_max);
    sub = m_new == -INFINITY ? 0.0f : m_new;
    const float alpha = exp2f(m - sub);
    m = m_new;
    return alpha;
}

/* Where packed row R of block (b, kv_head) lives: query index and query head. */
FC_DEVICE void unpack_row(const fc_attention_args &a, int64_t R, int kv_head, int64_t &i, int64_t &h) {
    i = R / a.group;
    h = (int64_t)kv_head * a.group + R % a.group;
}

/* Writes one finished value pair of a row: to o (dtype DT) when not split, else to the f32
 * partial. d and d + 1 < head_dim are checked by the caller. */
template <int DT>
FC_DEVICE void store_o(const fc_attention_args &a, int64_t b, int64_t i, int64_t h, int d, float v) {
    if (a.splits > 1) {
        float *p = reinterpret_cast<float *>(a.o_part);
        p[((((int64_t)blockIdx.y * a.batch + b) * a.heads_q + h) * a.seqlen_q + i) * a.head_dim + d] = v;
        return;
    }
    char *p = reinterpret_cast<char *>(a.o) +
              (b * a.o_strides[0] + i * a.o_strides[1] + h * a.o_strides[2] + d) * dtype_io<DT>::bytes;
    store_one(p, DT, v);
}

/* Writes a row's lse (natural log) to lse, or to the split-KV partial. */
FC_DEVICE void store_lse_value(const fc_attention_args &a, int64_t b, int64_t i, int64_t h, float lse) {
    if (a.splits > 1) {
        float *p = reinterpret_cast<float *>(a.lse_part);
        p[(((int64_t)blockIdx.y * a.batch + b) * a.heads_q + h) * a.seqlen_q + i] = lse;
    } else if (a.lse) {
        reinterpret_cast<float *>(a.lse)[b * a.lse_strides[0] + h * a.lse_strides[1] + i * a.lse_strides[2]] = lse;
    }
}
/* The same from the log2-domain max and the row sum (-inf when nothing was visible). */
FC_DEVICE void store_lse(const fc_attention_args &a, int64_t b, int64_t i, int64_t h, float m, float l) {
    store_lse_value(a, b, i, h, l > 0.0f ? (m + log2f(l)) * FC_LN2 : -INFINITY);
}

/* Blocks run heaviest first: with a causal mask the last row blocks see the most keys. The
 * (batch, kv head) pairs take their row blocks one pair after another, so that the blocks running
 * at once share K/V in L2; the last a.tail_heads pairs instead interleave theirs, all their
 * heaviest row blocks before any lighter one, so the grid ends on the lightest blocks of
 * several pairs rather than on whole pairs' mix of heavy and light ones (idle SMs while a few
 * heavy blocks finish; the host's count: src/attention_tail.h). x: the row block's index in
 * that order (the block index, or a persistent kernel's tile); I: the integer type of the
 * arithmetic (int64_t, or int where the host bounds the counts: the persistent kernels). */
template <typename I>
FC_DEVICE void block_position_of(const fc_attention_args &a, int rows, I x, I &r0, I &b, int &kv_head) {
    const I packed = (I)(a.seqlen_q * a.group);
    const I row_blocks = (packed + rows - 1) / rows;
    const I pairs_in_order = (I)(a.batch * a.heads_kv - a.tail_heads);
    const I tail = (I)a.tail_heads, heads_kv = (I)a.heads_kv;
    I bh, from_last;
    if (x < pairs_in_order * row_blocks) {
        bh = x / row_blocks;
        from_last = x % row_blocks;
    } else {
        const I t = x - pairs_in_order * row_blocks;
        bh = pairs_in_order + t % tail;
        from_last = t / tail;
    }
    r0 = (row_blocks - 1 - from_last) * rows;
    b = bh / heads_kv;
    kv_head = (int)(bh % heads_kv);
}

/* The position of this block (blockIdx.x): the kernels with a block per row block. */
FC_DEVICE void block_position(const fc_attention_args &a, int rows, int64_t &r0, int64_t &b, int &kv_head) {
    block_position_of<int64_t>(a, rows, blockIdx.x, r0, b, kv_head);
}
