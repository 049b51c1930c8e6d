/* Attention forward on tensor cores for decode shapes: at most 16 packed query rows
 * (Sq·group <= 16, e.g. one token of 8 GQA heads) against long keys; f16 / bf16 on mma.sync
 * m16n8k16, f32 by 3xTF32 (attention_tc_tf32x3.cuh's key block). Reading K and V once at
 * full bandwidth is the whole job (evict-first in L2, the first blocks prefetched into L2 before
 * the programmatic-dependent wait), so the block's 4 warps do not share tiles: each warp streams
 * its own key blocks (the block's blocks taken in turn, w, w + 4, ...) through a private ring of
 * STAGES shared-memory slots filled by cp.async, so that STAGES - 1 K/V tiles per warp are in
 * flight while it computes on one; no block-wide barrier in the loop. Each warp runs the same
 * 16-row mma tile as the prefill kernel (Q in registers, P from registers) over its keys; at
 * the end the 4 partial (max, sum, o) of every row are merged through shared memory. Split-KV
 * (blockIdx.y) spreads the keys over enough blocks to fill the GPU, as for the prefill kernel.
 *
 * Why f32 here: decode shapes fill at most 16 of the f32 prefill kernel's 64 rows, and the SIMT
 * kernel that took them read K and V at 0.7-1.0 TB/s on an H200 (B1-8 Hq32 Hkv4 D128), a
 * quarter of what NVIDIA's OpenCL path reaches with its key-parallel FMA kernel. */
#pragma once

#include <type_traits>

#include "attention_tc_tf32x3.cuh"

template <int DT, int DP, int KEYS, int STAGES>
__device__ void attention_tc_decode(const fc_attention_args &a) {
    constexpr bool F32 = DT == FC_F32;
    constexpr int ES = F32 ? 4 : 2; /* bytes an element */
    /* Shared-memory rows: 16-bit rows padded by 8 elements, f32 rows by 4 (both 16 bytes);
     * the loaders count 16-bit units, two an f32 element. */
    using elem = typename std::conditional<F32, float, uint16_t>::type;
    using layout = typename std::conditional<F32, f32_padded_layout<DP>, padded_layout<DP>>::type;
    constexpr int UNITS = F32 ? 2 * DP : DP;
    constexpr int WARPS = FC_ATTENTION_TC_WARPS, THREADS = 32 * WARPS, ROWS = 16;
    constexpr int STRIDE = F32 ? DP + 4 : DP + 8, NT = KEYS / 8, DT8 = DP / 8, KD = DP / 16;
    constexpr int SLOT = 2 * KEYS * STRIDE; /* one ring slot: K then V */
    constexpr bool QREG = DP <= 128;
    extern __shared__ __align__(16) uint16_t smem[];
    elem *q_tile = reinterpret_cast<elem *>(smem), *ring = q_tile + ROWS * STRIDE;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    elem *my_ring = ring + warp * STAGES * SLOT;
    const int units = F32 ? 2 * (int)a.head_dim : (int)a.head_dim;

    int64_t r0, b;
    int kv_head;
    block_position(a, ROWS, r0, b, kv_head);
    const int64_t packed = a.seqlen_q * a.group;
    const block_keys plan = plan_keys(a, r0, ROWS, KEYS);
    const kv_sources src = kv_sources_of<ES>(a, b, kv_head);
    auto q_row = [&](int r, bool &ok) { return q_row_address<ES>(a, r0 + r, b, kv_head, ok); };
    /* The first key of this warp's i-th key block (walked from the last down), and the block's
     * K/V loads into its ring slot. */
    const int64_t blocks = plan.last_block - plan.first_block + 1;
    const int64_t mine = blocks > warp ? (blocks - 1 - warp) / WARPS + 1 : 0;
    auto block_key = [&](int64_t i) { return (plan.last_block - warp - i * WARPS) * KEYS; };
    auto load_block = [&](int64_t i) {
        if (i < mine) {
            const int64_t n0 = block_key(i);
            elem *slot = my_ring + (int)(i % STAGES) * SLOT;
            load_rows<KEYS, UNITS, 32, layout, true>(slot, units, src.k + n0 * src.k_step, src.k_step,
                                                     a.seqlen_k - n0, lane);
            load_rows<KEYS, UNITS, 32, layout, true>(slot + KEYS * STRIDE, units, src.v + n0 * src.v_step,
                                                     src.v_step, a.seqlen_k - n0, lane);
        }
        cp_async_commit(); /* empty groups keep every thread's count aligned with i */
    };

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    /* Launched as a programmatic dependent (src/cuda/attention.c), the block may start while the
     * kernel before it is finishing. Meanwhile it asks L2 for its warps' first key blocks, which
     * also puts twice the ring's bytes in flight at the start (a gain without the overlap too).
     * Every write reaches memory through L2, so a line fetched now that the kernel before
     * writes later (a KV-cache append) is still read as written. Only warps with at least four
     * times that many blocks prefetch: with 8 blocks a warp (Sk 16384, 32 splits) the prefetch
     * cost 0.4 us of 14 (H200). */
    constexpr int PREFETCH = FC_ATTENTION_TC_DECODE_PREFETCH_BYTES / (2 * KEYS * DP * ES); /* K + V blocks */
    for (int64_t i = 0; mine >= 4 * PREFETCH && i < PREFETCH; i++) {
        const int64_t n0 = block_key(i);
        prefetch_rows_l2<KEYS, UNITS, 32>(src.k + n0 * src.k_step, src.k_step, a.seqlen_k - n0, units, lane);
        prefetch_rows_l2<KEYS, UNITS, 32>(src.v + n0 * src.v_step, src.v_step, a.seqlen_k - n0, units, lane);
    }
    /* Then wait for that kernel (which may have written q, k or v, or still read o), and let
     * the split-KV merge be scheduled -- it waits for this grid's results itself. Without
     * splits the next kernel would be the next call's decode kernel, let in only as this one
     * ends (early, its blocks would crowd onto the SMs this grid leaves room on). */
    asm volatile("griddepcontrol.wait;" ::: "memory");
    if (a.splits > 1) asm volatile("griddepcontrol.launch_dependents;");
#endif
    load_tile<ROWS, UNITS, THREADS, layout>(q_tile, units, reinterpret_cast<const char *>(a.q), q_row,
                                            threadIdx.x);
    cp_async_commit();
#pragma unroll
    for (int i = 0; i < STAGES - 1; i++) load_block(i);
    cp_async_wait<STAGES - 1>(); /* Q has landed */
    __syncthreads();

    /* Q in registers: raw f32 A fragments (f32), or ldmatrix fragments (16-bit, D <= 128; past
     * that, read again for each block) */
    using q_frags = typename std::conditional<F32, float[DT8][4], unsigned[QREG ? KD : 1][4]>::type;
    q_frags qa;
    const unsigned q_frag = smem_u32(q_tile + (lane % 16) * STRIDE + (lane / 16) * 8);
    if constexpr (F32) {
        tf32_load_q<DP>(qa, reinterpret_cast<const float *>(q_tile), g, t);
    } else if constexpr (QREG) {
#pragma unroll
        for (int kk = 0; kk < KD; kk++) ldmatrix_x4(qa[kk], q_frag + kk * 16 * 2);
    }

    float o[DT8][4];
#pragma unroll
    for (int j = 0; j < DT8; j++) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

    for (int64_t i = 0; i < mine; i++) {
        load_block(i + STAGES - 1);
        cp_async_wait<STAGES - 1>(); /* block i has landed (this lane's copies) */
        __syncwarp();                /* ... and every lane's */
        const elem *slot = my_ring + (int)(i % STAGES) * SLOT;
        const int64_t n0 = block_key(i);
        const bool masked = n0 < plan.all_lo || n0 + KEYS - 1 > plan.all_hi;
        if constexpr (F32) {
            tf32x3_key_block<DP, KEYS>(a, qa, slot, o, m, l, masked, r0, n0, g, t);
        } else {
            const unsigned k_frag = smem_u32(slot + ((lane / 16) * 8 + lane % 8) * STRIDE + ((lane / 8) % 2) * 8);
            const unsigned v_frag = smem_u32(slot + KEYS * STRIDE + (((lane / 8) % 2) * 8 + lane % 8) * STRIDE + (lane / 16) * 8);
            float s[NT][4];
#pragma unroll
            for (int n = 0; n < NT; n++) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < KD; kk++) {
                unsigned qs[4];
                if constexpr (QREG) {
#pragma unroll
                    for (int x = 0; x < 4; x++) qs[x] = qa[kk][x];
                } else {
                    ldmatrix_x4(qs, q_frag + kk * 16 * 2);
                }
#pragma unroll
                for (int n = 0; n < NT; n += 2) {
                    unsigned kb[4];
                    ldmatrix_x4(kb, k_frag + (n * 8 * STRIDE + kk * 16) * 2);
                    mma16816<DT>(s[n], qs, kb[0], kb[1]);
                    mma16816<DT>(s[n + 1], qs, kb[2], kb[3]);
                }
            }
            online_softmax_tile(a, s, o, m, l, masked, r0, n0, g, t);
#pragma unroll
            for (int kk = 0; kk < KEYS / 16; kk++) {
                unsigned p[4];
                probabilities_as_a<DT>(p, s, kk);
#pragma unroll
                for (int j = 0; j < DT8; j += 2) {
                    unsigned vb[4];
                    ldmatrix_x4_trans(vb, v_frag + (kk * 16 * STRIDE + j * 8) * 2);
                    mma16816<DT>(o[j], p, vb[0], vb[1]);
                    mma16816<DT>(o[j + 1], p, vb[2], vb[3]);
                }
            }
        }
        __syncwarp(); /* every lane is done with this slot before it is refilled */
    }
    cp_async_wait<0>();
    __syncthreads(); /* the ring is free: it holds the warps' partials now */

    /* Each warp's partial rows: m (log2 domain), l (full row sum) and unnormalised o, f32. A
     * row takes PSTRIDE = DP + 8 floats: with DP the 8 row groups of a warp's float2 stores all
     * fell into the same 8 banks (8-way conflicts, 0.54 us of the epilogue on an H200); with the
     * pad a store takes the 2 wavefronts that its 64 words need. */
    constexpr int PSTRIDE = DP + 8;
    static_assert(WARPS * ROWS * (PSTRIDE + 2) * 4 <= WARPS * STAGES * SLOT * ES, "partials fit the ring");
    float *part_o = reinterpret_cast<float *>(ring);   /* [WARPS][ROWS][PSTRIDE] */
    float *part_ml = part_o + WARPS * ROWS * PSTRIDE;  /* [WARPS][ROWS][2] */
#pragma unroll
    for (int h = 0; h < 2; h++) {
        l[h] = row_group_sum(l[h]);
        const int row = g + 8 * h;
#pragma unroll
        for (int j = 0; j < DT8; j++)
            *reinterpret_cast<float2 *>(part_o + (warp * ROWS + row) * PSTRIDE + j * 8 + 2 * t) =
                make_float2(o[j][2 * h], o[j][2 * h + 1]);
        if (t == 0) part_ml[(warp * ROWS + row) * 2] = m[h], part_ml[(warp * ROWS + row) * 2 + 1] = l[h];
    }
    __syncthreads();

    /* Merge, weights 2^(m_w - M): each thread takes dims (d, d + 1) of every STEP-th row, as
     * many rows as hold queries (NK row slots; GQA 8 fills half of the 16). Two unrolled passes:
     * the merge itself with no branch, so that the compiler overlaps the rows' shared-memory
     * loads and exp2s, then the stores. One warp per scheduler cannot hide latency: as a loop
     * over all 16 rows with a branch per row, 64-bit row arithmetic, an integer division and
     * log2f on the lse lanes, this took 2.0 us of a 39 us Sk 65536 call; branch-free over all
     * 16 rows 1.4 us, over the 8 filled ones 0.9 us (H200). The decode kernel runs only where
     * every packed row fits its 16, so rows are small ints and (row + 0.5) / group rounds down
     * to the exact quotient (group <= 16). */
    constexpr int PAIRS = DP / 2, STEP = THREADS / PAIRS, PER = ROWS / STEP;
    static_assert(THREADS % PAIRS == 0 && ROWS % STEP == 0 && PER % 4 == 0, "each thread merges whole pairs");
    const int d = (threadIdx.x % PAIRS) * 2, row_first = threadIdx.x / PAIRS;
    const int valid_rows = (int)min(packed - r0, (int64_t)ROWS), group = a.group;
    auto merge_rows = [&](auto row_slots) {
        constexpr int NK = decltype(row_slots)::value;
        float xs[NK], ys[NK], lses[NK];
#pragma unroll
        for (int k = 0; k < NK; k++) {
            const int row = row_first + k * STEP;
            float2 ml[WARPS], ow[WARPS];
            float big = -INFINITY;
#pragma unroll
            for (int w = 0; w < WARPS; w++) {
                ml[w] = *reinterpret_cast<const float2 *>(part_ml + (w * ROWS + row) * 2);
                ow[w] = *reinterpret_cast<const float2 *>(part_o + (w * ROWS + row) * PSTRIDE + d);
                big = fmaxf(big, ml[w].x);
            }
            const float sub = big == -INFINITY ? 0.0f : big;
            float sum = 0.0f, x = 0.0f, y = 0.0f;
#pragma unroll
            for (int w = 0; w < WARPS; w++) {
                const float wt = fast_exp2(ml[w].x - sub);
                sum += wt * ml[w].y;
                x += wt * ow[w].x, y += wt * ow[w].y;
            }
            const float inv = sum > 0.0f ? __fdividef(1.0f, sum) : 0.0f;
            xs[k] = x * inv, ys[k] = y * inv;
            lses[k] = sum > 0.0f ? (big + __log2f(sum)) * FC_LN2 : -INFINITY;
        }
        const float inv_group = __fdividef(1.0f, (float)group);
#pragma unroll
        for (int k = 0; k < NK; k++) {
            const int row = row_first + k * STEP, packed_row = (int)r0 + row;
            if (row >= valid_rows || d >= a.head_dim) continue;
            const int qi = (int)(((float)packed_row + 0.5f) * inv_group);
            const int qh = kv_head * group + (packed_row - qi * group);
            store_o_pair<DT>(a, b, qi, qh, d, xs[k], ys[k]);
            if (d == 0) store_lse_value(a, b, qi, qh, lses[k]);
        }
    };
    const int slots = (valid_rows + STEP - 1) / STEP; /* the same in every thread */
    if (slots <= PER / 4) merge_rows(fc_count<PER / 4>());
    else if (slots <= PER / 2) merge_rows(fc_count<PER / 2>());
    else merge_rows(fc_count<PER>());
}
