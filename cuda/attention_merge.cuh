/* The merge of partial attention results over disjoint key sets (split-KV inside the library,
 * flashcl_attention_merge outside): o = sum_p exp(lse_p - lse) o_p, lse = log sum_p exp(lse_p).
 *
 * One block of FC_MERGE_THREADS per output row (b, i, h). The block first reduces the parts'
 * lse (max, then sum of exponentials); then warp w takes parts w, w + 4, ... and each lane
 * accumulates dims lane, lane + 32, ... of them, so that every lane has DL independent loads per
 * part in flight instead of one dependent chain over all parts (a decode shape merges 64 splits
 * of 32 rows: the chain was most of its time). The warps' sums meet in shared memory in a fixed
 * order, so every run gives the same bits. A part whose lse is -inf contributes nothing, even
 * when its o holds NaN; a row whose parts are all -inf gets o = 0 and lse = -inf. */
#pragma once

#include "attention_common.cuh"

template <int PT, int DL>
__device__ void attention_merge(const fc_merge_args &a) {
    constexpr int WARPS = FC_MERGE_THREADS / 32;
    __shared__ float slots_max[WARPS], slots_sum[WARPS];
    __shared__ float partial[WARPS][DL * 32];
    const int64_t row = blockIdx.x;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t h = row % a.heads, i = row / a.heads % a.seqlen_q, b = row / a.heads / a.seqlen_q;
    const fc_merge_part *descs = reinterpret_cast<const fc_merge_part *>(a.part_descs);
    auto part_lse = [&](int p) -> float {
        if (a.regular_o)
            return reinterpret_cast<const float *>(a.regular_lse)[((p * a.batch + b) * a.heads + h) * a.seqlen_q + i];
        const fc_merge_part &d = descs[p];
        return reinterpret_cast<const float *>(d.lse)[b * d.lse_strides[0] + h * d.lse_strides[1] + i * d.lse_strides[2]];
    };
    auto part_o = [&](int p, int64_t dim) -> float {
        if (a.regular_o)
            return reinterpret_cast<const float *>(a.regular_o)[(((p * a.batch + b) * a.heads + h) * a.seqlen_q + i) * a.head_dim + dim];
        const fc_merge_part &d = descs[p];
        return dtype_io<PT>::load(reinterpret_cast<const char *>(d.o) +
                                  (b * d.o_strides[0] + i * d.o_strides[1] + h * d.o_strides[2] + dim) * dtype_io<PT>::bytes);
    };

    float m = -INFINITY;
    for (int p = threadIdx.x; p < a.parts; p += FC_MERGE_THREADS) m = fmaxf(m, part_lse(p));
    m = block_max<FC_MERGE_THREADS>(m, slots_max);
    float sum = 0.0f;
    if (m != -INFINITY)
        for (int p = threadIdx.x; p < a.parts; p += FC_MERGE_THREADS) sum += expf(part_lse(p) - m);
    sum = block_sum<FC_MERGE_THREADS>(sum, slots_sum);
    const float lse = m == -INFINITY ? -INFINITY : m + logf(sum);

    float acc[DL];
#pragma unroll
    for (int j = 0; j < DL; j++) acc[j] = 0.0f;
    if (m != -INFINITY)
        for (int p = warp; p < a.parts; p += WARPS) {
            const float w = expf(part_lse(p) - lse); /* 0 for a part with lse = -inf */
            float x[DL];
#pragma unroll
            for (int j = 0; j < DL; j++) x[j] = lane + 32 * j < a.head_dim ? part_o(p, lane + 32 * j) : 0.0f;
#pragma unroll
            for (int j = 0; j < DL; j++) acc[j] = w != 0.0f ? fmaf(w, x[j], acc[j]) : acc[j];
        }
#pragma unroll
    for (int j = 0; j < DL; j++) partial[warp][lane + 32 * j] = acc[j];
    __syncthreads();
    for (int64_t dim = threadIdx.x; dim < a.head_dim; dim += FC_MERGE_THREADS) {
        float o = 0.0f;
#pragma unroll
        for (int w = 0; w < WARPS; w++) o += partial[w][dim];
        store_one(reinterpret_cast<char *>(a.o) +
                      (b * a.o_strides[0] + i * a.o_strides[1] + h * a.o_strides[2] + dim) * (a.o_dtype == FC_F32 ? 4 : 2),
                  a.o_dtype, o);
    }
    if (a.lse && threadIdx.x == 0)
        reinterpret_cast<float *>(a.lse)[b * a.lse_strides[0] + h * a.lse_strides[1] + i * a.lse_strides[2]] = lse;
}
