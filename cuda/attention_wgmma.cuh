/* Attention forward on Hopper's warpgroup MMA (sm_90a only; f16 / bf16 storage, f32
 * accumulation): the same semantics and schedule as attention_tc.cuh (FlashAttention-2 with the
 * key blocks walked from the last visible one down), with wgmma.mma_async instead of
 * mma.sync + ldmatrix. Every other architecture compiles the kernels to an empty body
 * (cuda/attention_kernels.cuh) and the host launches them only on compute capability 9.0.
 *
 * A block of WGS warpgroups (128 threads each) owns 64·WGS packed rows (GQA packing as in
 * attention_tc.cuh); warpgroup w owns rows [64w, 64w + 64), its warp w' (of 4) rows 16w' ..
 * 16w' + 15 of those: thread (warp = threadIdx.x / 32, lane = 4g + t) holds, for every 8-key or
 * 8-dim slice j, rows warp·16 + g and + 8 at columns 8j + 2t, + 1 -- mma.sync's layout per
 * 16-row tile (attention_wgmma_primitives.cuh), so the online softmax, the P rounding and the
 * epilogue of attention_tc are reused unchanged on one 16-row tile per thread.
 *
 * Per key block of KEYS keys:
 *   S = Q·Kᵀ   DP/16 wgmma m64n{KEYS}k16, Q (A) and K (B) from shared memory, both K-major;
 *   softmax    online_softmax_tile on S's registers (mask only on blocks that need one);
 *   O += P·V   KEYS/16 wgmma m64n{DP}k16, P (A) from registers rounded to DT, V (B) from shared
 *              memory N-major (imm-trans-b = 1).
 * Each product is one commit group waited on at once (wgmma_wait<0>) before its accumulators
 * are read; wgmma_fence before each group orders the register writes (S's first slice
 * overwrites instead of accumulating, so S needs no zeroing).
 *
 * PIPE = 1 overlaps the two (FlashAttention-3's intra-warpgroup pipelining): S of the next block
 * (blk - 1) and P·V of this one are issued together, wgmma_wait<1> waits for S alone, and its
 * online softmax runs while the tensor cores do P·V; o is rescaled by the new factor once P·V is
 * done (online_softmax_scores + rescale_o, the two halves of online_softmax_tile). K(blk - 1)
 * must then be in shared memory with V(blk), so K and V of a block are copied at different
 * times, into the K and the V half of the block's slot: each handoff below makes V(blk) and
 * K(blk - 1) ready and starts V(blk - 1) and K(blk - 2). The first block's P·V (the last issued)
 * is peeled off the loop: a wgmma under a branch makes ptxas serialize every wgmma (C7520).
 *
 * Shared memory (1024-byte aligned inside the dynamic allocation, whose size the host pads by
 * 1024): Q [ROWS][DP], then a ring of two slots of K [KEYS][DP] + V [KEYS][DP], all in the
 * 128B-swizzled layout. Every thread copies its share with cp.async; K and V of the next block
 * stream into the other slot during the whole of this one. The handoff per block: each thread
 * waits for its own copies (cp.async.wait_group 0), makes them visible to the async proxy that
 * wgmma reads through (fence.proxy.async), then one __syncthreads publishes everyone's and
 * certifies that every warpgroup's wgmmas on the other slot are done (each waited for them).
 * Global rows must be 16-byte aligned and head_dim a multiple of 8 (the host checks, as for
 * attention_tc); dims past head_dim and keys past seqlen_k are zero-filled. */
#pragma once

#include "attention_wgmma_primitives.cuh"

template <int DT, int DP, int KEYS, int WGS, int PIPE>
__device__ void attention_wgmma(const fc_attention_args &a) {
    constexpr int THREADS = 128 * WGS, ROWS = 64 * WGS, NT = KEYS / 8, DT8 = DP / 8;
    constexpr unsigned Q_BYTES = ROWS * DP * 2, KV_BYTES = KEYS * DP * 2, SLOT = 2 * KV_BYTES;
    constexpr int STRIDE = DP + 8; /* the epilogue's staging rows, as attention_tc's */
    static_assert(DP % 64 == 0 && (KEYS == 64 || KEYS == 128) && (DP == 64 || DP == 128), "wgmma shapes");
    static_assert(ROWS * STRIDE * 2 <= Q_BYTES + 2 * SLOT, "the staging tile fits the allocation");
    static_assert(PIPE != 2 || WGS == 2, "the pingpong schedule takes turns between two warpgroups");
    unsigned base;
    unsigned char *smem = wgmma_smem(base);
    unsigned char *ring = smem + Q_BYTES;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int wg = threadIdx.x / 128;

    int64_t r0, b;
    int kv_head;
    block_position(a, ROWS, r0, b, kv_head);
    const block_keys plan = plan_keys(a, r0, ROWS, KEYS);
    const int64_t w0 = r0 + warp * 16; /* this warp's first packed row */

    float o[DT8][4];
#pragma unroll
    for (int j = 0; j < DT8; j++) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

    /* Descriptors of slot 0 and of this warpgroup's 64 rows of Q; the k-th 16-wide slice and the
     * slot are byte offsets added (>> 4) to the start address. */
    const uint64_t q_desc = wgmma_desc(base + wg * 64 * 128, 16, 1024);
    const uint64_t k_desc = wgmma_desc(base + Q_BYTES, 16, 1024);
    const uint64_t v_desc = wgmma_desc(base + Q_BYTES + KV_BYTES, KEYS * 128, 1024);

    const kv_sources src = kv_sources_of(a, b, kv_head);
    auto q_row = [&](int r, bool &ok) { return q_row_address(a, r0 + r, b, kv_head, ok); };
    auto load_q = [&]() {
        load_tile<ROWS, DP, THREADS, sw128_layout>(smem, (int)a.head_dim,
                                                   reinterpret_cast<const char *>(a.q), q_row,
                                                   threadIdx.x);
    };
    /* K or V rows [blk * KEYS, blk * KEYS + KEYS) into the K or the V half of a slot. */
    auto load_k = [&](int64_t blk, unsigned slot) {
        const int64_t n0 = blk * KEYS;
        load_rows<KEYS, DP, THREADS, sw128_layout>(ring + slot * SLOT, (int)a.head_dim,
                                                   src.k + n0 * src.k_step, src.k_step,
                                                   a.seqlen_k - n0, threadIdx.x);
    };
    auto load_v = [&](int64_t blk, unsigned slot) {
        const int64_t n0 = blk * KEYS;
        load_rows<KEYS, DP, THREADS, sw128_layout>(ring + slot * SLOT + KV_BYTES, (int)a.head_dim,
                                                   src.v + n0 * src.v_step, src.v_step,
                                                   a.seqlen_k - n0, threadIdx.x);
    };
    /* S = Q·Kᵀ for this warpgroup's rows and the keys in `slot`; O += P·V with its V. */
    auto issue_scores = [&](float (&s)[NT][4], unsigned slot) {
        wgmma_issue_scores<DT, DP, ROWS, KEYS>(s, q_desc, k_desc, slot * SLOT);
    };
    auto issue_pv = [&](const unsigned (&p)[KEYS / 16][4], unsigned slot) {
        wgmma_issue_pv<DT, DP, KEYS>(o, p, v_desc, slot * SLOT);
    };
    /* Whether block blk has keys some row of this block may not see. */
    auto is_masked = [&](int64_t blk) {
        const int64_t n0 = blk * KEYS;
        return n0 < plan.all_lo || n0 + KEYS - 1 > plan.all_hi;
    };

    if constexpr (PIPE == 2) {
        /* Pingpong: burst i (0 <= i <= n, n key blocks, walked from the last) issues S of block
         * last - i (i < n) and P·V of block last - i + 1 (i >= 1); its operands, K(last - i)
         * and V(last - i + 1), are stage i of the ring, in slot i % 3. The two warpgroups take
         * turns to issue their bursts (each waits on its `turn` mbarrier, on which every warp
         * of the other arrives once it has issued), so one warpgroup's softmax runs
         * while the tensor cores do the other's products, and they drift half a burst apart:
         * no __syncthreads in the loop. Instead every thread's copies of a stage arrive on the
         * stage's `full` mbarrier when they land (cp.async.mbarrier.arrive), and each warp
         * arrives on its `empty` mbarrier once its products on the stage are done. Stage i + 2
         * is copied after burst i into the slot of stage i - 1, which both warpgroups have left
         * by then even half a burst apart (three slots, so nobody waits on the lagging one). */
        constexpr int STAGES = 3;
        __shared__ uint64_t barriers[2 * STAGES + 2]; /* full[3], empty[3], turn[2] */
        const unsigned full = smem_u32(&barriers[0]), empty = smem_u32(&barriers[STAGES]);
        const unsigned turns = smem_u32(&barriers[2 * STAGES]);
        if (threadIdx.x == 0) pingpong_barriers_init<STAGES, THREADS>(full, empty, turns);
        __syncthreads();
        const int64_t last = plan.last_block;
        const int n = (int)(last - plan.first_block + 1);
        if (n > 0) {
            /* This thread's copies of stage i, announced on full[i % 3] when they land. */
            auto fill = [&](int i) {
                const unsigned slot = (unsigned)(i % STAGES);
                if (i < n) load_k(last - i, slot);
                if (i >= 1) load_v(last - i + 1, slot);
                cp_async_mbar_arrive(full + 8 * slot);
                cp_async_commit();
            };
            auto wait_full = [&](int i) {
                mbar_wait(full + 8 * (i % STAGES), (unsigned)(i / STAGES) & 1u);
                fence_proxy_async_shared(); /* the landed copies, to wgmma's async proxy */
            };
            auto release = [&](int i) { /* this warp's products on stage i are done */
                warp_arrive(empty + 8 * (i % STAGES));
            };
            /* After burst i: stage i + 2 into the slot of stage i - 1, once both have left it. */
            auto refill = [&](int i) {
                if (i + 2 > n) return;
                if (i >= 1) mbar_wait(empty + 8 * ((i - 1) % STAGES), (unsigned)((i - 1) / STAGES) & 1u);
                fill(i + 2);
            };
            /* Burst i waits for phase i of this warpgroup's turn barrier: the other warpgroup's
             * burst i - 1 (warpgroup 0) or i (warpgroup 1) has been issued. */
            auto my_turn = [&](int i) { mbar_wait(turns + 8 * wg, (unsigned)i & 1u); };
            auto pass_turn = [&]() { warp_arrive(turns + 8 * (wg ^ 1)); };
            unsigned p[KEYS / 16][4];
            float s[NT][4], alpha[2];

            load_q();
            cp_async_commit();
            fill(0);
            fill(1); /* n >= 1: stage 1 holds V(last) */
            cp_async_wait<2>(); /* Q */
            fence_proxy_async_shared();
            __syncthreads();
            if (wg == 1) pass_turn(); /* warpgroup 0 issues first */

            /* Burst 0: S(last) alone (o is still zero: nothing to rescale). */
            wait_full(0);
            my_turn(0);
            wgmma_fence();
            issue_scores(s, 0);
            pass_turn();
            wgmma_wait<0>();
            wgmma_fence_operands(s);
            release(0);
            online_softmax_scores(a, s, m, l, alpha, is_masked(last), w0, last * KEYS, g, t);
#pragma unroll
            for (int kk = 0; kk < KEYS / 16; kk++) probabilities_as_a<DT>(p[kk], s, kk);
            refill(0);

            for (int i = 1; i < n; i++) {
                const int64_t blk = last - i; /* S of this block, P·V of blk + 1 */
                const unsigned slot = (unsigned)(i % STAGES);
                wait_full(i);
                my_turn(i);
                wgmma_fence();
                issue_scores(s, slot);
                issue_pv(p, slot);
                pass_turn();
                wgmma_wait<1>(); /* S(blk); P·V may still run */
                wgmma_fence_operands(s);
                online_softmax_scores(a, s, m, l, alpha, is_masked(blk), w0, blk * KEYS, g, t);
                wgmma_wait<0>();
                wgmma_fence_operands(o);
                wgmma_fence_operands(p);
                release(i);
                rescale_o(o, alpha);
#pragma unroll
                for (int kk = 0; kk < KEYS / 16; kk++) probabilities_as_a<DT>(p[kk], s, kk);
                refill(i);
            }

            /* Burst n: P·V of the first block alone (peeled: no wgmma under a branch). */
            wait_full(n);
            my_turn(n);
            wgmma_fence();
            issue_pv(p, (unsigned)(n % STAGES));
            pass_turn();
            wgmma_wait<0>();
            wgmma_fence_operands(o);
            wgmma_fence_operands(p);
            /* Warpgroup 1's last pass completes a phase of turn[0] that nobody waits for. */
        }
    } else if constexpr (PIPE == 1) {
        /* K and V of a block are copied at different times here, into the K and the V half of
         * the block's slot (slot_of): K(blk - 1) must be there when block blk's P·V is issued,
         * V(blk) by then too. */
        auto slot_of = [&](int64_t blk) { return (unsigned)((plan.last_block - blk) & 1); };
        if (plan.last_block >= plan.first_block) {
            unsigned p[KEYS / 16][4]; /* P of the block whose P·V is next, rounded to DT */
            float s[NT][4], alpha[2];
            /* Prologue: S and P of the last block (o is still zero: nothing to rescale). */
            load_q();
            load_k(plan.last_block, 0);
            cp_async_commit();
            load_v(plan.last_block, 0);
            if (plan.last_block > plan.first_block) load_k(plan.last_block - 1, 1);
            cp_async_commit();
            cp_async_wait<1>(); /* Q and K(last) */
            fence_proxy_async_shared();
            __syncthreads();
            wgmma_fence();
            issue_scores(s, 0);
            wgmma_wait<0>();
            wgmma_fence_operands(s);
            online_softmax_scores(a, s, m, l, alpha, is_masked(plan.last_block), w0,
                                  plan.last_block * KEYS, g, t);
#pragma unroll
            for (int kk = 0; kk < KEYS / 16; kk++) probabilities_as_a<DT>(p[kk], s, kk);

            /* Block blk > first: S(blk - 1) = Q·Kᵀ and O += P(blk)·V(blk) are issued together, and
             * the softmax of S(blk - 1) runs while the tensor cores do P·V; o is rescaled by its
             * factor once P·V is done. The first block (issued last) has P·V alone; it is peeled
             * off so that no wgmma sits in a branch, which would make ptxas serialize them all. */
            auto wait_block = [&]() { /* V(blk) and K(blk - 1) copied; see below */
                cp_async_wait<0>();         /* this thread's copies */
                fence_proxy_async_shared(); /* ... visible to wgmma's reads */
                __syncthreads();            /* ... everyone's; every warpgroup is past block
                                               blk + 1, so V(blk + 1) and K(blk) are not read */
            };
            for (int64_t blk = plan.last_block; blk > plan.first_block; blk--) {
                wait_block();
                load_v(blk - 1, slot_of(blk - 1));
                if (blk - 2 >= plan.first_block) load_k(blk - 2, slot_of(blk - 2));
                cp_async_commit();

                wgmma_fence();
                issue_scores(s, slot_of(blk - 1));
                issue_pv(p, slot_of(blk));
                wgmma_wait<1>(); /* S(blk - 1); P·V may still run */
                wgmma_fence_operands(s);
                online_softmax_scores(a, s, m, l, alpha, is_masked(blk - 1), w0, (blk - 1) * KEYS,
                                      g, t);
                wgmma_wait<0>();
                wgmma_fence_operands(o);
                wgmma_fence_operands(p);
                rescale_o(o, alpha);
#pragma unroll
                for (int kk = 0; kk < KEYS / 16; kk++) probabilities_as_a<DT>(p[kk], s, kk);
            }
            wait_block();
            wgmma_fence();
            issue_pv(p, slot_of(plan.first_block));
            wgmma_wait<0>();
            wgmma_fence_operands(o);
            wgmma_fence_operands(p);
        }
    } else {
        if (plan.last_block >= plan.first_block) {
            load_q();
            load_k(plan.last_block, 0);
            load_v(plan.last_block, 0);
            cp_async_commit();
        }

        unsigned slot = 0;
        for (int64_t blk = plan.last_block; blk >= plan.first_block; blk--, slot ^= 1) {
            cp_async_wait<0>();         /* K/V(blk) (and, first time, Q): this thread's copies */
            fence_proxy_async_shared(); /* ... visible to wgmma's reads */
            __syncthreads();            /* ... everyone's; every warpgroup is done with the other slot */
            if (blk > plan.first_block) { /* K/V(blk - 1) stream during this block */
                load_k(blk - 1, slot ^ 1);
                load_v(blk - 1, slot ^ 1);
                cp_async_commit();
            }

            float s[NT][4];
            wgmma_fence();
            issue_scores(s, slot);
            wgmma_wait<0>();
            wgmma_fence_operands(s);
            online_softmax_tile(a, s, o, m, l, is_masked(blk), w0, blk * KEYS, g, t);

            unsigned p[KEYS / 16][4];
#pragma unroll
            for (int kk = 0; kk < KEYS / 16; kk++) probabilities_as_a<DT>(p[kk], s, kk);
            wgmma_fence();
            issue_pv(p, slot);
            wgmma_wait<0>();
            wgmma_fence_operands(o);
            wgmma_fence_operands(p);
        }
    }

    if (a.splits > 1) { /* f32 partials for the split-KV merge: pairs straight from registers */
        store_tile<DT>(a, w0, b, kv_head, o, m, l, g, t);
        return;
    }
    /* o through shared memory (rows of STRIDE elements from the start of the allocation: Q and
     * the ring are free once every warpgroup is past its last wgmma and no copy is in flight). */
    uint16_t *stage = reinterpret_cast<uint16_t *>(smem);
    __syncthreads();
    stage_o_tile<DT, DT8, STRIDE>(a, stage, warp * 16, r0, b, kv_head, o, m, l, g, t);
    __syncthreads();
    copy_out_rows<DP, ROWS, THREADS>(a, stage, r0, b, kv_head);
}
