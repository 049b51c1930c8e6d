/* The pingpong wgmma schedule of attention_wgmma.cuh (PIPE = 2) made persistent, for calls
 * without a window: a grid of at most one block per SM, each block walking its share of the
 * row blocks ("tiles": tile x, then x + gridDim.x, ...) instead of one block per tile. What it buys is the seam between two tiles: with a block per tile, every tile
 * begins by waiting for its Q and first K/V copies and ends with both warpgroups idle while the
 * last P·V and the epilogue run, with nothing to overlap them but another block, which the
 * ring's shared memory leaves no room for. Here the ring does not stop at the end of a tile: its
 * stages run on into the next tile's, so K and V of the next tile stream in during the last
 * bursts of this one, and the next tile's Q is copied while this one's last P·V and epilogue
 * run.
 *
 * Without a mask every tile of a block visits the same key blocks (those of the block's split,
 * blockIdx.y), n of them (CAUSAL: see below), and stages, bursts and turns are those of the
 * pingpong schedule (see attention_wgmma.cuh) counted across tiles: a tile of n key blocks owns
 * n + 1 consecutive global stages. Stage i of a tile holds K(last - i) (i < n)
 * and V(last - i + 1) (i >= 1); burst i issues S of block last - i and P·V of block last - i + 1.
 * Global stage G lives in ring slot G % 3 and completes phase G / 3 of the slot's `full` and
 * `empty` barriers; the two warpgroups' turns alternate on through the tiles. Each thread copies
 * its share of every stage in order, through a cursor that steps from one tile to the next,
 * after burst G - 2 and once both warpgroups have released stage G - 3's slot. Q has one buffer:
 * the next tile's Q is copied once every warp has finished its last S = Q·Kᵀ of this tile
 * (`q_empty`, one arrival a warp) and is announced on `q_full` when it lands. The epilogue
 * stores o and lse straight from registers: the ring and Q stay in use.
 *
 * The tile arithmetic is 32-bit (the host takes this kernel only where tiles, packed rows and
 * keys fit in int): the per-tile code runs once every few microseconds, out of a cold
 * instruction cache, and 64-bit divisions made it long enough to stall the warps (ncu:
 * no-instruction stalls).
 *
 * CAUSAL (wgmma_d128pppc; Sq <= Sk, one split, so every tile has n >= 1): each tile visits its
 * own key blocks (persistent_keys_of), and tiles go to blocks in a snake order
 * (persistent_tile_index), which balances a pair's heavy-to-light row blocks over rounds. It
 * gains on short causal rows and loses on long ones, so the host takes it for causal rows of at
 * most 1024 keys (H100 f16 D128, TF/s vs wgmma_d128pp: S512 175-179 vs 167-170, S1024 255-259
 * vs 253-255, S4096 365 vs 407, S16384 317 vs 487; bench/results/2026-11-25-h100-s9-persistent-
 * causal-short.txt and -causal-dropped.txt). The order is not the whole of the loss: tiles drawn
 * from an atomic queue in the hardware's order ran 3-10 % slower than wgmma_d128pp at every
 * causal length (-queue-dropped.txt), so the causal burst loop itself (per-tile key blocks, the
 * diagonal mask, 255 registers) loses on long rows; that is where to look next. */
#pragma once

#include "attention_wgmma_primitives.cuh"

/* Where tile x lies: its first packed row and its (batch, kv head). */
struct persistent_tile {
    int r0, b, kv_head;
};

FC_DEVICE persistent_tile persistent_tile_at(const fc_attention_args &a, int rows, int x) {
    persistent_tile t;
    block_position_of<int>(a, rows, x, t.r0, t.b, t.kv_head);
    return t;
}

/* The k-th tile of this block. CAUSAL: rounds of gridDim.x tiles walked forward in even rounds
 * and backward in odd ones ("snake"), so that where a pair's row blocks come heaviest first, a
 * block that took a heavy tile in one round takes a light one in the next; else in order. */
template <bool CAUSAL> FC_DEVICE int persistent_tile_index(int k) {
    const int grid = (int)gridDim.x, c = (int)blockIdx.x;
    return k * grid + (CAUSAL && (k & 1) ? grid - 1 - c : c);
}

/* The key blocks tile rows [r0, r0 + rows) visit in this block's split (plan_keys for the calls
 * this kernel takes: no window; causal only with Sq <= Sk and one split, so n >= 1) and the last
 * key all of its rows see (a key block past it needs the mask). */
struct persistent_keys {
    int last, n, all_hi;
};

FC_DEVICE persistent_keys persistent_keys_of(const fc_attention_args &a, int r0, int rows, int keys) {
    const int packed = (int)(a.seqlen_q * a.group), sk = (int)a.seqlen_k, sq = (int)a.seqlen_q;
    const int split_lo = (int)blockIdx.y * (int)a.keys_per_split;
    const int split_hi = min(split_lo + (int)a.keys_per_split, sk) - 1;
    int hi = split_hi, first_hi = sk - 1;
    if (a.causal) {
        hi = min(hi, (min(r0 + rows, packed) - 1) / a.group + sk - sq);
        first_hi = min(first_hi, r0 / a.group + sk - sq);
    }
    persistent_keys k;
    k.last = hi / keys;
    k.n = k.last - split_lo / keys + 1;
    k.all_hi = first_hi;
    return k;
}

/* Where a copy cursor on tile x finds its K and V rows, and (CAUSAL) the key blocks the tile
 * visits: both persistent kernels' cursors step on to a new tile through this. Unmasked, last and
 * n stay the split's. */
template <bool CAUSAL, int ROWS, int KEYS>
FC_DEVICE void persistent_aim(const fc_attention_args &a, int x, const char *&k_rows,
                              const char *&v_rows, int &last, int &n) {
    const persistent_tile tile = persistent_tile_at(a, ROWS, x);
    const kv_sources src = kv_sources_of(a, tile.b, tile.kv_head);
    if constexpr (CAUSAL) {
        const persistent_keys keys = persistent_keys_of(a, tile.r0, ROWS, KEYS);
        last = keys.last, n = keys.n;
    }
    k_rows = src.k, v_rows = src.v;
}

/* This thread's copies (cp.async, not committed) of tile x's Q: ROWS packed rows into the
 * 128B-swizzled tile at smem. The thread index is read afresh: otherwise the compiler keeps this
 * thread's chunk offsets live through every tile's bursts, and spills them. */
template <int ROWS, int DP, int THREADS>
FC_DEVICE void persistent_load_q(const fc_attention_args &a, unsigned char *smem, int x) {
    constexpr int CHUNKS = DP / 8;
    const persistent_tile tile = persistent_tile_at(a, ROWS, x);
    const int packed = (int)(a.seqlen_q * a.group), group = a.group;
    unsigned tid;
    asm volatile("mov.u32 %0, %%tid.x;\n" : "=r"(tid));
    const char *q = reinterpret_cast<const char *>(a.q) +
                    ((int64_t)tile.b * a.q_strides[0] + (int64_t)tile.kv_head * group * a.q_strides[2]) * 2;
#pragma unroll
    for (int it = 0; it < ROWS * CHUNKS / THREADS; it++) {
        const int idx = it * THREADS + (int)tid, r = idx / CHUNKS, c = idx % CHUNKS;
        const int R = tile.r0 + r, i = R / group, h = R - i * group;
        const bool ok = R < packed && c * 8 < a.head_dim;
        const char *src = q + ((int64_t)i * a.q_strides[1] + (int64_t)h * a.q_strides[2]) * 2 + c * 16;
        cp_async16(smem + sw128_offset<ROWS>(r, c), ok ? src : reinterpret_cast<const char *>(a.q), ok);
    }
}

/* o and lse of warp `warp`'s 16 rows of tile x (of `rows` packed rows), normalised, straight
 * from registers (mma's accumulator layout), with 32-bit row arithmetic. */
template <int DT, int DT8>
FC_DEVICE void persistent_store_rows(const fc_attention_args &a, int rows, int x, int warp, int g,
                                     int t, float (&o)[DT8][4], const float (&m)[2], float (&l)[2]) {
    const persistent_tile tile = persistent_tile_at(a, rows, x);
    const int packed = (int)(a.seqlen_q * a.group), group = a.group;
    char *o_base = reinterpret_cast<char *>(a.o);
#pragma unroll
    for (int h = 0; h < 2; h++) {
        l[h] = row_group_sum(l[h]);
        const float inv = row_normaliser(l[h]);
        const int R = tile.r0 + warp * 16 + g + 8 * h, i = R / group;
        const int qh = tile.kv_head * group + (R - i * group);
        if (R >= packed) continue;
        if (a.splits > 1) {
            float *p = reinterpret_cast<float *>(a.o_part) +
                       ((((int64_t)blockIdx.y * a.batch + tile.b) * a.heads_q + qh) * a.seqlen_q + i) * a.head_dim;
#pragma unroll
            for (int j = 0; j < DT8; j++) {
                const int d = j * 8 + 2 * t;
                if (d < a.head_dim)
                    *reinterpret_cast<float2 *>(p + d) = make_float2(o[j][2 * h] * inv, o[j][2 * h + 1] * inv);
            }
        } else {
            char *p = o_base + ((int64_t)tile.b * a.o_strides[0] + (int64_t)i * a.o_strides[1] +
                                (int64_t)qh * a.o_strides[2]) * 2;
#pragma unroll
            for (int j = 0; j < DT8; j++) {
                const int d = j * 8 + 2 * t;
                if (d < a.head_dim)
                    *reinterpret_cast<unsigned *>(p + d * 2) = pack_pair<DT>(o[j][2 * h] * inv, o[j][2 * h + 1] * inv);
            }
        }
        if (t == 0) store_lse(a, tile.b, i, qh, m[h], l[h]);
    }
}

template <int DT, int DP, int KEYS, bool CAUSAL>
__device__ void attention_wgmma_persistent(const fc_attention_args &a) {
    constexpr int WGS = 2, THREADS = 128 * WGS, ROWS = 64 * WGS, NT = KEYS / 8, DT8 = DP / 8;
    constexpr int STAGES = 3;
    constexpr unsigned Q_BYTES = ROWS * DP * 2, KV_BYTES = KEYS * DP * 2, SLOT = 2 * KV_BYTES;
    static_assert(DP % 64 == 0 && KEYS == 128 && (DP == 64 || DP == 128), "wgmma shapes");
    unsigned base;
    unsigned char *smem = wgmma_smem(base);
    unsigned char *ring = smem + Q_BYTES;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int wg = threadIdx.x / 128;
    const int packed = (int)(a.seqlen_q * a.group);
    const int tiles = (packed + ROWS - 1) / ROWS * (int)(a.batch * a.heads_kv);

    /* Unmasked: every tile visits this split's key blocks (CAUSAL: each its own, found per tile
     * by persistent_keys_of). */
    const persistent_keys split = persistent_keys_of(a, 0, ROWS, KEYS);
    const int split_last = CAUSAL ? 0 : split.last, split_n = CAUSAL ? 1 : split.n;
    const bool tail_masked = split_last * KEYS + KEYS - 1 > split.all_hi; /* a key tail */

    /* full[3], empty[3], turn[2], q_full, q_empty */
    __shared__ uint64_t barriers[2 * STAGES + 4];
    const unsigned full = smem_u32(&barriers[0]), empty = smem_u32(&barriers[STAGES]);
    const unsigned turns = smem_u32(&barriers[2 * STAGES]);
    const unsigned q_full = smem_u32(&barriers[2 * STAGES + 2]);
    const unsigned q_empty = smem_u32(&barriers[2 * STAGES + 3]);
    if (threadIdx.x == 0) {
        pingpong_barriers_init<STAGES, THREADS>(full, empty, turns);
        mbar_init(q_full, THREADS);
        mbar_init(q_empty, THREADS / 32);
    }
    __syncthreads();
    if (split_n <= 0 || (int)blockIdx.x >= tiles) return; /* (the host launches neither) */

    float o[DT8][4], m[2], l[2];
    const uint64_t q_desc = wgmma_desc(base + wg * 64 * 128, 16, 1024);
    const uint64_t k_desc = wgmma_desc(base + Q_BYTES, 16, 1024);
    const uint64_t v_desc = wgmma_desc(base + Q_BYTES + KV_BYTES, KEYS * 128, 1024);

    /* This thread's copies of tile x's Q, announced on q_full when they land. */
    auto load_q = [&](int x) {
        persistent_load_q<ROWS, DP, THREADS>(a, smem, x);
        cp_async_mbar_arrive(q_full);
        cp_async_commit();
    };

    /* The copy cursor: the tile whose stage fill_j is the next to copy, where its K and V rows
     * start, and `filled`, the stages copied so far (the next one's global index). */
    int fill_k_index = 0, fill_j = 0, filled = 0; /* the cursor's tile: the block's k-th */
    auto fill_x = [&]() { return persistent_tile_index<CAUSAL>(fill_k_index); };
    int fill_last = split_last, fill_n = split_n;
    const char *fill_k, *fill_v;
    auto aim = [&]() { /* the cursor's K and V sources (and key blocks) */
        persistent_aim<CAUSAL, ROWS, KEYS>(a, fill_x(), fill_k, fill_v, fill_last, fill_n);
    };
    aim();
    /* This thread's copies of the cursor's stage, announced on its slot's `full` barrier; then
     * the cursor steps on (to the next tile after a tile's last stage). */
    auto fill_next = [&]() {
        const unsigned slot = (unsigned)(filled % STAGES);
        const int64_t k_step = a.k_strides[1] * 2, v_step = a.v_strides[1] * 2;
        if (fill_j < fill_n) {
            const int64_t n0 = (int64_t)(fill_last - fill_j) * KEYS;
            load_rows<KEYS, DP, THREADS, sw128_layout>(ring + slot * SLOT, (int)a.head_dim,
                                                       fill_k + n0 * k_step, k_step,
                                                       a.seqlen_k - n0, threadIdx.x);
        }
        if (fill_j >= 1) {
            const int64_t n0 = (int64_t)(fill_last - fill_j + 1) * KEYS;
            load_rows<KEYS, DP, THREADS, sw128_layout>(ring + slot * SLOT + KV_BYTES,
                                                       (int)a.head_dim, fill_v + n0 * v_step,
                                                       v_step, a.seqlen_k - n0, threadIdx.x);
        }
        cp_async_mbar_arrive(full + 8 * slot);
        cp_async_commit();
        filled++;
        if (++fill_j > fill_n) {
            fill_j = 0;
            fill_k_index++;
            if (fill_x() < tiles) aim();
        }
    };
    auto slot_of = [&](int G) { return (unsigned)(G % STAGES); };
    auto wait_full = [&](int G) {
        mbar_wait(full + 8 * slot_of(G), (unsigned)(G / STAGES) & 1u);
        fence_proxy_async_shared(); /* the landed copies, to wgmma's async proxy */
    };
    auto release = [&](int G) { warp_arrive(empty + 8 * slot_of(G)); }; /* its products done */
    /* After burst G: stage G + 2 (if any tile is left) into the slot of stage G - 1, once both
     * warpgroups have left it. */
    auto refill = [&]() {
        if (fill_x() >= tiles) return;
        if (filled >= STAGES) {
            const int old = filled - STAGES;
            mbar_wait(empty + 8 * slot_of(old), (unsigned)(old / STAGES) & 1u);
        }
        fill_next();
    };
    /* Burst G waits for phase G of this warpgroup's turn barrier (see attention_wgmma.cuh). */
    auto my_turn = [&](int G) { mbar_wait(turns + 8 * wg, (unsigned)G & 1u); };
    auto pass_turn = [&]() { warp_arrive(turns + 8 * (wg ^ 1)); };
    /* This warp's last S of the tile is done: Q may be overwritten. */
    auto q_done = [&]() { warp_arrive(q_empty); };
    auto issue_scores = [&](float (&s)[NT][4], unsigned slot) {
        wgmma_issue_scores<DT, DP, ROWS, KEYS>(s, q_desc, k_desc, slot * SLOT);
    };
    auto issue_pv = [&](const unsigned (&p)[KEYS / 16][4], unsigned slot) {
        wgmma_issue_pv<DT, DP, KEYS>(o, p, v_desc, slot * SLOT);
    };
    /* Prologue: the first tile's Q and stages 0 and 1 (a tile has n + 1 >= 2). */
    load_q(fill_x());
    fill_next();
    fill_next();
    if (wg == 1) pass_turn(); /* warpgroup 0 issues first */

    unsigned p[KEYS / 16][4];
    float s[NT][4], alpha[2];
    int G = 0;            /* the global index of this tile's stage 0 */
    for (int k = 0, x = persistent_tile_index<CAUSAL>(0); x < tiles;
         x = persistent_tile_index<CAUSAL>(++k)) {
#pragma unroll
        for (int j = 0; j < DT8; j++) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
        m[0] = m[1] = -INFINITY;
        l[0] = l[1] = 0.0f;
        int n = split_n, last = split_last;
        if constexpr (CAUSAL) {
            const persistent_keys keys =
                persistent_keys_of(a, persistent_tile_at(a, ROWS, x).r0, ROWS, KEYS);
            n = keys.n, last = keys.last;
        }
        /* Whether key block blk has keys some row of the tile may not see: unmasked, the key
         * tail alone (the first block walked); CAUSAL, also the diagonal ones, which are among
         * the first two walked (recomputed where asked: registers are scarce). */
        auto masked = [&](int blk) {
            if constexpr (!CAUSAL) return blk == split_last && tail_masked;
            const int r0 = persistent_tile_at(a, ROWS, x).r0;
            return blk * KEYS + KEYS - 1 > persistent_keys_of(a, r0, ROWS, KEYS).all_hi;
        };
        auto warp_row = [&]() { /* this warp's first packed row (the mask's rows) */
            if constexpr (!CAUSAL) return (int64_t)0; /* unused: no row-dependent mask */
            return (int64_t)persistent_tile_at(a, ROWS, x).r0 + warp * 16;
        };
        mbar_wait(q_full, (unsigned)k & 1u); /* tile k's Q: phase k of q_full */
        fence_proxy_async_shared();

        /* Burst 0: S(last) alone (o is zero: nothing to rescale). */
        wait_full(G);
        my_turn(G);
        wgmma_fence();
        issue_scores(s, slot_of(G));
        pass_turn();
        wgmma_wait<0>();
        wgmma_fence_operands(s);
        if (n == 1) q_done();
        release(G);
        online_softmax_scores(a, s, m, l, alpha, masked(last), warp_row(), (int64_t)last * KEYS,
                              g, t);
#pragma unroll
        for (int kk = 0; kk < KEYS / 16; kk++) probabilities_as_a<DT>(p[kk], s, kk);
        refill();

        for (int i = 1; i < n; i++) {
            const int blk = last - i, Gi = G + i; /* S of blk, P·V of blk + 1 */
            wait_full(Gi);
            my_turn(Gi);
            wgmma_fence();
            issue_scores(s, slot_of(Gi));
            issue_pv(p, slot_of(Gi));
            pass_turn();
            wgmma_wait<1>(); /* S(blk); P·V may still run */
            wgmma_fence_operands(s);
            if (i == n - 1) q_done();
            online_softmax_scores(a, s, m, l, alpha, CAUSAL && i == 1 && masked(blk), warp_row(),
                                  (int64_t)blk * KEYS, g, t);
            wgmma_wait<0>();
            wgmma_fence_operands(o);
            wgmma_fence_operands(p);
            release(Gi);
            rescale_o(o, alpha);
#pragma unroll
            for (int kk = 0; kk < KEYS / 16; kk++) probabilities_as_a<DT>(p[kk], s, kk);
            refill();
        }

        /* Burst n: P·V of the first block alone (peeled: no wgmma under a branch). */
        const int Gn = G + n;
        wait_full(Gn);
        my_turn(Gn);
        wgmma_fence();
        issue_pv(p, slot_of(Gn));
        pass_turn();
        wgmma_wait<0>();
        wgmma_fence_operands(o);
        wgmma_fence_operands(p);
        release(Gn);
        refill();
        G = Gn + 1;

        /* The next tile's Q, once every warp is past its last S of this one. */
        const int next = persistent_tile_index<CAUSAL>(k + 1);
        if (next < tiles) {
            mbar_wait(q_empty, (unsigned)k & 1u);
            load_q(next);
        }
        persistent_store_rows<DT>(a, ROWS, x, warp, g, t, o, m, l);
    }
}
