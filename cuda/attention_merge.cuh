/* The merge of partial attention results over disjoint key sets (split-KV inside the library,
 * flashcl_attention_merge outside): o = sum_p exp(lse_p - lse) o_p, lse = log sum_p exp(lse_p).
 *
 * Block (row, s) of FC_MERGE_THREADS merges dims 32 s .. 32 s + 31 of output row (b, i, h): a
 * decode shape has few rows (32), so the dims are spread over blocks too. The block reduces the
 * parts' lse (max, then sum of exponentials) and writes each part's weight and row address to
 * shared memory, CHUNK parts at a time; then warp w takes parts w, w + WARPS, ... and lane l
 * accumulates dim 32 s + l of them, UNROLL parts per step. With weights and addresses already in
 * shared memory a lane's UNROLL loads are independent and all in flight at once: merging 66
 * splits of 32 rows took 10.6 us as a chain of dependent loads and 128-thread blocks, one per
 * row (H100, 2026-11-22). The warps' sums meet in shared memory in a fixed order and each warp
 * adds its parts in a fixed order, so every run gives the same bits. A part whose lse is -inf
 * contributes nothing, even when its o holds NaN; a row whose parts are all -inf gets o = 0 and
 * lse = -inf.
 *
 * On sm_90 the split-KV merge is launched as a programmatic dependent of the forward kernel
 * (src/cuda/attention.c): its blocks may start before the forward kernel has finished, and
 * griddepcontrol.wait holds them until the forward kernel's results are visible. Launched the
 * ordinary way the wait returns at once. Its blocks let the kernel after it (the next call's
 * decode kernel, itself a programmatic dependent that waits) be scheduled as they finish. */
#pragma once

#include "attention_common.cuh"

template <int PT>
__device__ void attention_merge(const fc_merge_args &a) {
    constexpr int WARPS = FC_MERGE_THREADS / 32, CHUNK = FC_MERGE_THREADS, UNROLL = 8;
    __shared__ float slots_max[WARPS], slots_sum[WARPS];
    __shared__ float weights[CHUNK];
    __shared__ const char *rows[CHUNK];
    __shared__ float partial[WARPS][32];
    const int64_t row = blockIdx.x;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t dim = (int64_t)blockIdx.y * 32 + lane;
    const int64_t h = row % a.heads, i = row / a.heads % a.seqlen_q, b = row / a.heads / a.seqlen_q;
    const fc_merge_part *descs = reinterpret_cast<const fc_merge_part *>(a.part_descs);
    const int bytes = a.regular_o ? 4 : dtype_io<PT>::bytes;
    auto part_lse = [&](int p) -> float {
        if (a.regular_o)
            return reinterpret_cast<const float *>(a.regular_lse)[((p * a.batch + b) * a.heads + h) * a.seqlen_q + i];
        const fc_merge_part &d = descs[p];
        return reinterpret_cast<const float *>(d.lse)[b * d.lse_strides[0] + h * d.lse_strides[1] + i * d.lse_strides[2]];
    };
    auto part_row = [&](int p) -> const char * {
        if (a.regular_o)
            return reinterpret_cast<const char *>(a.regular_o) +
                   (((p * a.batch + b) * a.heads + h) * a.seqlen_q + i) * a.head_dim * 4;
        const fc_merge_part &d = descs[p];
        return reinterpret_cast<const char *>(d.o) +
               (b * d.o_strides[0] + i * d.o_strides[1] + h * d.o_strides[2]) * dtype_io<PT>::bytes;
    };
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif

    /* Each thread keeps the lse of its first part: with at most FC_MERGE_THREADS parts (split-KV
     * always) the lse are read from memory once. */
    const float first_lse = threadIdx.x < a.parts ? part_lse(threadIdx.x) : -INFINITY;
    float m = first_lse;
    for (int p = threadIdx.x + FC_MERGE_THREADS; p < a.parts; p += FC_MERGE_THREADS)
        m = fmaxf(m, part_lse(p));
    m = block_max<FC_MERGE_THREADS>(m, slots_max);
    float sum = 0.0f;
    if (m != -INFINITY) {
        sum = expf(first_lse - m);
        for (int p = threadIdx.x + FC_MERGE_THREADS; p < a.parts; p += FC_MERGE_THREADS)
            sum += expf(part_lse(p) - m);
    }
    sum = block_sum<FC_MERGE_THREADS>(sum, slots_sum);
    const float lse = m == -INFINITY ? -INFINITY : m + logf(sum);

    float acc = 0.0f;
    for (int base = 0; m != -INFINITY && base < a.parts; base += CHUNK) {
        const int n = a.parts - base < CHUNK ? a.parts - base : CHUNK;
        __syncthreads(); /* the previous chunk's weights and rows are no longer read */
        if (threadIdx.x < n) {
            weights[threadIdx.x] =
                expf((base == 0 ? first_lse : part_lse(base + threadIdx.x)) - lse); /* 0: -inf */
            rows[threadIdx.x] = part_row(base + threadIdx.x);
        }
        __syncthreads();
        for (int p0 = warp; p0 < n; p0 += WARPS * UNROLL) {
            float x[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; u++) {
                const int p = p0 + u * WARPS;
                x[u] = p < n && weights[p] != 0.0f && dim < a.head_dim
                           ? (a.regular_o ? *reinterpret_cast<const float *>(rows[p] + dim * 4)
                                          : dtype_io<PT>::load(rows[p] + dim * bytes))
                           : 0.0f;
            }
#pragma unroll
            for (int u = 0; u < UNROLL; u++) {
                const int p = p0 + u * WARPS;
                const float w = p < n ? weights[p] : 0.0f;
                acc = w != 0.0f ? fmaf(w, x[u], acc) : acc;
            }
        }
    }
    partial[warp][lane] = acc;
    __syncthreads();
    if (warp == 0 && dim < a.head_dim) {
        float o = 0.0f;
#pragma unroll
        for (int w = 0; w < WARPS; w++) o += partial[w][lane];
        store_one(reinterpret_cast<char *>(a.o) +
                      (b * a.o_strides[0] + i * a.o_strides[1] + h * a.o_strides[2] + dim) * (a.o_dtype == FC_F32 ? 4 : 2),
                  a.o_dtype, o);
    }
    if (a.lse && blockIdx.y == 0 && threadIdx.x == 0)
        reinterpret_cast<float *>(a.lse)[b * a.lse_strides[0] + h * a.lse_strides[1] + i * a.lse_strides[2]] = lse;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    /* Only now: the next call's decode kernel (a programmatic dependent) is scheduled as these
     * blocks end, onto SMs that are nearly free. Let in at the start, its blocks took whatever
     * room the merge left and doubled up on some SMs: B8 Sk8192 decode went from 0.104 to
     * 0.120 ms (H100, 2026-11-22). */
    asm volatile("griddepcontrol.launch_dependents;");
#endif
}
