/* Attention forward with f32 FMAs (true f32: no TF32 anywhere).
 *
 * The SIMT kernel is the f32 path and the fallback for every case the tensor-core kernel does
 * not take (a head_dim that is not a multiple of 8, rows not 16-byte aligned): element loads with
 * any strides, any head_dim up to DP. A block of 4 warps owns 16 packed rows (4 per warp); per key
 * block of 32 keys lane j computes the scores of key j for its warp's 4 rows (K in shared memory
 * with a padded row, so the 32 lanes hit 32 banks), the online softmax uses warp shuffles, and
 * O += P·V walks the 32 keys with the probabilities broadcast by shuffles, lane l owning dims
 * l, l + 32, ... of each row. The merge of partial results is in attention_merge.cuh. */
#pragma once

#include "attention_common.cuh"

template <int DT, int DP>
__device__ void attention_simt(const fc_attention_args &a) {
    constexpr int ROWS = FC_ATTENTION_SIMT_ROWS, KEYS = FC_ATTENTION_SIMT_KEYS;
    constexpr int THREADS = FC_ATTENTION_SIMT_THREADS, RPW = ROWS / (THREADS / 32), DL = DP / 32;
    constexpr int BYTES = dtype_io<DT>::bytes;
    extern __shared__ float fsmem[];
    float *q_tile = fsmem;                        /* [ROWS][DP] */
    float *k_tile = q_tile + ROWS * DP;           /* [KEYS][DP + 1]: column reads conflict-free */
    float *v_tile = k_tile + KEYS * (DP + 1);     /* [KEYS][DP] */
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int head_dim = (int)a.head_dim;

    int64_t r0, b;
    int kv_head;
    block_position(a, ROWS, r0, b, kv_head);
    const int64_t packed = a.seqlen_q * a.group;
    const block_keys plan = plan_keys(a, r0, ROWS, KEYS);

    for (int idx = threadIdx.x; idx < ROWS * DP; idx += THREADS) {
        const int r = idx / DP, d = idx % DP;
        int64_t i, h;
        unpack_row(a, r0 + r, kv_head, i, h);
        float x = 0.0f;
        if (r0 + r < packed && d < head_dim)
            x = dtype_io<DT>::load(reinterpret_cast<const char *>(a.q) +
                                   (b * a.q_strides[0] + i * a.q_strides[1] + h * a.q_strides[2] + d) * BYTES);
        q_tile[idx] = x;
    }

    int64_t qi[RPW], qh[RPW];
    key_range seen[RPW];
    float m[RPW], l[RPW], o[RPW][DL];
#pragma unroll
    for (int r = 0; r < RPW; r++) {
        unpack_row(a, r0 + warp * RPW + r, kv_head, qi[r], qh[r]);
        seen[r] = visible_keys(a, qi[r]);
        m[r] = -INFINITY, l[r] = 0.0f;
#pragma unroll
        for (int j = 0; j < DL; j++) o[r][j] = 0.0f;
    }
    const char *k_base = reinterpret_cast<const char *>(a.k) + (b * a.k_strides[0] + kv_head * a.k_strides[2]) * BYTES;
    const char *v_base = reinterpret_cast<const char *>(a.v) + (b * a.v_strides[0] + kv_head * a.v_strides[2]) * BYTES;

    for (int64_t blk = plan.last_block; blk >= plan.first_block; blk--) {
        const int64_t n0 = blk * KEYS;
        __syncthreads(); /* the previous block's K and V (and, first time, Q) are settled */
        for (int idx = threadIdx.x; idx < KEYS * DP; idx += THREADS) {
            const int n = idx / DP, d = idx % DP;
            const bool ok = n0 + n < a.seqlen_k && d < head_dim;
            k_tile[n * (DP + 1) + d] = ok ? dtype_io<DT>::load(k_base + ((n0 + n) * a.k_strides[1] + d) * BYTES) : 0.0f;
            v_tile[idx] = ok ? dtype_io<DT>::load(v_base + ((n0 + n) * a.v_strides[1] + d) * BYTES) : 0.0f;
        }
        __syncthreads();

        float x[RPW];
#pragma unroll
        for (int r = 0; r < RPW; r++) x[r] = 0.0f;
        const float *q_rows = q_tile + warp * RPW * DP, *k_row = k_tile + lane * (DP + 1);
        for (int d = 0; d < DP; d++) {
            const float kv = k_row[d];
#pragma unroll
            for (int r = 0; r < RPW; r++) x[r] = fmaf(q_rows[r * DP + d], kv, x[r]);
        }
        const int64_t key = n0 + lane;
        const bool masked = n0 < plan.all_lo || n0 + KEYS - 1 > plan.all_hi;
#pragma unroll
        for (int r = 0; r < RPW; r++) {
            float s = score_log2(a, x[r]);
            if (masked && (key < seen[r].lo || key > seen[r].hi)) s = -INFINITY;
            float sub;
            const float alpha = online_rescale(m[r], warp_max<32>(s), sub);
            x[r] = exp2f(s - sub);
            l[r] = l[r] * alpha + x[r]; /* this lane's share; summed over lanes at the end */
#pragma unroll
            for (int j = 0; j < DL; j++) o[r][j] *= alpha;
        }
        for (int n = 0; n < KEYS; n++) {
            const float *v_row = v_tile + n * DP + lane;
#pragma unroll
            for (int r = 0; r < RPW; r++) {
                const float p = __shfl_sync(0xffffffffu, x[r], n);
#pragma unroll
                for (int j = 0; j < DL; j++) o[r][j] = fmaf(p, v_row[32 * j], o[r][j]);
            }
        }
    }

#pragma unroll
    for (int r = 0; r < RPW; r++) {
        const float sum = warp_sum<32>(l[r]);
        const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
        if (r0 + warp * RPW + r >= packed) continue;
#pragma unroll
        for (int j = 0; j < DL; j++)
            if (lane + 32 * j < head_dim) store_o<DT>(a, b, qi[r], qh[r], lane + 32 * j, o[r][j] * inv);
        if (lane == 0) store_lse(a, b, qi[r], qh[r], m[r], sum);
    }
}
