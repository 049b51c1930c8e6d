/* The one-warpgroup wgmma schedule of attention_wgmma.cuh (PIPE = 0: S, softmax and P·V of a key
 * block in turn, several blocks per SM overlapping each other) made persistent, for calls without
 * a window: a grid of the blocks the GPU holds at once, each walking its share of the row blocks
 * ("tiles": tile x, then x + gridDim.x, ...; CAUSAL, in the snake order of
 * persistent_tile_index). What it buys at short rows (D 64, S 512: four key blocks a tile) is
 * the seam between two tiles: with a block per tile, each tile starts by waiting for its Q and
 * first K/V copies, and ends with an epilogue through shared memory behind two block barriers.
 * Here the ring of two K/V slots runs on from one tile into the next, so the next tile's first
 * K/V streams in during this tile's last key block, and the next tile's Q is copied once every
 * warp is past this tile's last S = Q·Kᵀ, during its last softmax, P·V and epilogue; o and lse
 * are stored straight from registers (persistent_store_rows), as the ring is still in use.
 *
 * Stages: tile k of this block visits key blocks last, last - 1, ..., last - n + 1 of the
 * block's split: unmasked, the same for every tile, with no mask but the key tail (the first
 * block walked); CAUSAL (Sq <= Sk, one split, so n >= 1), each tile its own
 * (persistent_keys_of), the diagonal blocks walked first and masked. The stages are numbered on
 * through the tiles (G); stage G holds K and V of one key block in slot G % 2. At the top of
 * stage G each thread waits for its own copies (stage G, and the tile's Q at a tile's first
 * stage), makes them visible to wgmma's async proxy, and one __syncthreads publishes everyone's
 * and certifies that every warp is past stage G - 1's products, so stage G + 1 may be copied
 * into the other slot. Tile arithmetic is 32-bit, as in the two-warpgroup persistent kernel
 * (the host bounds the counts: persistent_kinds): with 64-bit divisions in the Q copy and the
 * epilogue the unmasked kernel was only 1 % faster than wgmma_d64w1b3 at S512, with them 32-bit
 * 15 % (cuda/attention_shared.h has the figures). */
#pragma once

#include "attention_wgmma_persistent.cuh"

template <int DT, int DP, int KEYS, bool CAUSAL>
__device__ void attention_wgmma_persistent_w1(const fc_attention_args &a) {
    constexpr int THREADS = 128, ROWS = 64, NT = KEYS / 8, DT8 = DP / 8;
    constexpr unsigned Q_BYTES = ROWS * DP * 2, KV_BYTES = KEYS * DP * 2, SLOT = 2 * KV_BYTES;
    static_assert(DP % 64 == 0 && (KEYS == 64 || KEYS == 128) && (DP == 64 || DP == 128), "wgmma shapes");
    unsigned base;
    unsigned char *smem = wgmma_smem(base);
    unsigned char *ring = smem + Q_BYTES;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int packed = (int)(a.seqlen_q * a.group);
    const int tiles = (packed + ROWS - 1) / ROWS * (int)(a.batch * a.heads_kv);
    /* Unmasked: every tile visits this split's key blocks (CAUSAL: each its own, found per tile
     * by persistent_keys_of; n >= 1 for every tile, as Sq <= Sk). */
    const persistent_keys split = persistent_keys_of(a, 0, ROWS, KEYS);
    const int split_n = CAUSAL ? 1 : split.n, split_last = CAUSAL ? 0 : split.last;
    const bool tail_masked = split_last * KEYS + KEYS - 1 > split.all_hi; /* a key tail */
    if (split_n <= 0 || (int)blockIdx.x >= tiles) return; /* (the host launches neither) */

    const uint64_t q_desc = wgmma_desc(base, 16, 1024);
    const uint64_t k_desc = wgmma_desc(base + Q_BYTES, 16, 1024);
    const uint64_t v_desc = wgmma_desc(base + Q_BYTES + KV_BYTES, KEYS * 128, 1024);

    /* The copy cursor: the stage to copy next is key block last - fill_j of this block's tile
     * fill_k, whose K and V rows start at fill_k_rows and fill_v_rows (the row steps are read
     * from the arguments where used: fewer live registers, no spill at three blocks per SM). */
    int fill_k = 0, fill_j = 0, fill_n = split_n, fill_last = split_last;
    const char *fill_k_rows, *fill_v_rows;
    auto aim = [&]() {
        persistent_aim<CAUSAL, ROWS, KEYS>(a, persistent_tile_index<CAUSAL>(fill_k), fill_k_rows,
                                           fill_v_rows, fill_last, fill_n);
    };
    auto fill_left = [&]() { return persistent_tile_index<CAUSAL>(fill_k) < tiles; };
    /* This thread's copies of the cursor's stage into `slot`, one commit group; the cursor steps
     * on (to the next tile after a tile's last key block). */
    auto fill_next = [&](unsigned slot) {
        const int64_t n0 = (int64_t)(fill_last - fill_j) * KEYS;
        const int64_t k_step = a.k_strides[1] * 2, v_step = a.v_strides[1] * 2;
        load_rows<KEYS, DP, THREADS, sw128_layout>(ring + slot * SLOT, (int)a.head_dim,
                                                   fill_k_rows + n0 * k_step, k_step,
                                                   a.seqlen_k - n0, threadIdx.x);
        load_rows<KEYS, DP, THREADS, sw128_layout>(ring + slot * SLOT + KV_BYTES, (int)a.head_dim,
                                                   fill_v_rows + n0 * v_step, v_step,
                                                   a.seqlen_k - n0, threadIdx.x);
        cp_async_commit();
        if (++fill_j == fill_n) {
            fill_j = 0;
            fill_k++;
            if (fill_left()) aim();
        }
    };

    persistent_load_q<ROWS, DP, THREADS>(a, smem, persistent_tile_index<CAUSAL>(0));
    aim();
    fill_next(0); /* stage 0, with the first Q in its commit group */

    unsigned G = 0; /* the global stage */
    for (int k = 0, x = persistent_tile_index<CAUSAL>(0); x < tiles;
         x = persistent_tile_index<CAUSAL>(++k)) {
        int n = split_n, last = split_last, all_hi = 0, w0 = 0;
        if constexpr (CAUSAL) { /* this tile's key blocks, the keys all its rows see, its rows */
            const int r0 = persistent_tile_at(a, ROWS, x).r0;
            const persistent_keys keys = persistent_keys_of(a, r0, ROWS, KEYS);
            n = keys.n, last = keys.last, all_hi = keys.all_hi, w0 = r0 + warp * 16;
        }
        float o[DT8][4];
#pragma unroll
        for (int j = 0; j < DT8; j++) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
        float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

        for (int j = 0; j < n; j++, G++) {
            const unsigned slot = G & 1u;
            cp_async_wait<0>();         /* stage G (and at j = 0 this tile's Q): this thread's */
            fence_proxy_async_shared(); /* ... visible to wgmma's reads */
            __syncthreads();            /* ... everyone's; every warp is past stage G - 1 */
            if (fill_left()) fill_next(slot ^ 1u);

            float s[NT][4];
            wgmma_fence();
            wgmma_issue_scores<DT, DP, ROWS, KEYS>(s, q_desc, k_desc, slot * SLOT);
            wgmma_wait<0>();
            wgmma_fence_operands(s);
            if (j == n - 1) { /* every warp past this tile's last S: the next Q may land */
                const int next = persistent_tile_index<CAUSAL>(k + 1);
                if (next < tiles) {
                    __syncthreads();
                    persistent_load_q<ROWS, DP, THREADS>(a, smem, next);
                    cp_async_commit();
                }
            }
            /* Masked: unmasked, the key tail (the first block walked); CAUSAL, the blocks past
             * the keys every row of the tile sees (the diagonal ones, walked first). */
            const bool masked = CAUSAL ? (last - j) * KEYS + KEYS - 1 > all_hi : j == 0 && tail_masked;
            online_softmax_tile(a, s, o, m, l, masked, (int64_t)w0, (int64_t)(last - j) * KEYS, g, t);

            unsigned p[KEYS / 16][4];
#pragma unroll
            for (int kk = 0; kk < KEYS / 16; kk++) probabilities_as_a<DT>(p[kk], s, kk);
            wgmma_fence();
            wgmma_issue_pv<DT, DP, KEYS>(o, p, v_desc, slot * SLOT);
            wgmma_wait<0>();
            wgmma_fence_operands(o);
            wgmma_fence_operands(p);
        }
        persistent_store_rows<DT>(a, ROWS, x, warp, g, t, o, m, l);
    }
}
