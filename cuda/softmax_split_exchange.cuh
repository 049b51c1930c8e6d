/* How the blocks of the split-held kernels (softmax_split_held.cuh, softmax_split_held_ring.cuh)
 * share a row: tickets drawn from a counter, each slice's (m, d) published as one 64-bit word
 * with the row's arrival count, and the row's (M, D) gathered from those words in a fixed order,
 * all on the split state (src/cuda/split_state.c) that each launch's blocks clear for the next.
 * Included by softmax_split_held.cuh. */
#pragma once

/* (m, d) as one 64-bit word, m's bits high: never 0 once published (m = +0 means d >= 1). */
FC_DEVICE unsigned long long md_pack(float m, float d) {
    return ((unsigned long long)__float_as_uint(m) << 32) | __float_as_uint(d);
}
FC_DEVICE float2 md_unpack(unsigned long long w) {
    return make_float2(__uint_as_float((unsigned)(w >> 32)), __uint_as_float((unsigned)w));
}
FC_DEVICE void store_word(unsigned long long *p, unsigned long long v) {
    asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
FC_DEVICE unsigned long long load_word(const unsigned long long *p) {
    unsigned long long v;
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}
/* The word at p once it is at least `least` (1: published; n: a count reached n). */
FC_DEVICE unsigned long long wait_word(const unsigned long long *p, unsigned long long least) {
    unsigned long long v;
    while ((v = load_word(p)) < least) __nanosleep(64);
    return v;
}

/* Zeroes this block's share of the words the previous launch used in the other region of the
 * split state (src/cuda/split_state.c): per words from block index * per on, of `words`. */
template <int TPB> FC_DEVICE void clear_previous(const fc_softmax_args &a) {
    unsigned long long *other = reinterpret_cast<unsigned long long *>(a.clear);
    const uint64_t block = (uint64_t)blockIdx.y * gridDim.x + blockIdx.x;
    const uint64_t begin = block * a.clear_per;
    const uint64_t end = min((uint64_t)a.clear_words, begin + a.clear_per);
    for (uint64_t i = begin + threadIdx.x; i < end; i += TPB) other[i] = 0ull;
}

/* The split state's layout (a.counters, 64-bit words): [0] the ticket counter,
 * [1 + r * slices + s] the word of slice s of row r, [1 + rows * slices + r] row r's arrival
 * count, [1 + rows * slices + rows + r] row r's merged (M, D) where one block merges it (the
 * merged pipelined kernel's rows). */
FC_DEVICE unsigned long long *row_words(unsigned long long *state, int slices, int row) {
    return state + 1 + (int64_t)row * slices;
}
FC_DEVICE unsigned long long *row_arrivals(unsigned long long *state, int64_t rows, int slices,
                                           int row) {
    return state + 1 + rows * slices + row;
}
FC_DEVICE unsigned long long *row_merged(unsigned long long *state, int64_t rows, int slices,
                                         int row) {
    return state + 1 + rows * (slices + 1) + row;
}

/* This block's (m, d) to slots[slice], and the block counted in at the row's arrival count
 * (thread 0 only, which gets the count from before it; the other threads get 0). */
FC_DEVICE unsigned long long publish_slice(unsigned long long *slots, unsigned long long *arrived,
                                           int slice, float2 md) {
    unsigned long long before = 0;
    if (threadIdx.x == 0) {
        store_word(slots + slice, md_pack(md.x, md.y));
        before = atomicAdd(arrived, 1ull);
    }
    return before;
}

/* The row's `slices` words merged by every thread of the block, thread i taking words i,
 * i + TPB, ..., each waited for in turn, then in block_merge's fixed tree: the row's (M, D) in
 * thread 0. */
template <int TPB>
FC_DEVICE float2 merge_words(const unsigned long long *slots, int slices, float2 *warp_slots) {
    float m = -INFINITY, d = 0.0f;
    for (int i = threadIdx.x; i < slices; i += TPB) {
        const float2 q = md_unpack(wait_word(slots + i, 1ull));
        stats_merge(m, d, q.x, q.y);
    }
    block_merge<TPB>(m, d, warp_slots, false);
    return make_float2(m, d);
}

/* The row's (M, D), for every thread, once all its `slices` slices are published: thread 0
 * polls the row's arrival count, then the row's words are waited for, each in turn, and merged
 * in a fixed order, so that every block of the row gets the same bits:
 *   - rows of at most FC_SPLIT_HELD_WARP_GATHER_SLICES slices: warp 0's lanes, lane i taking
 *     i, i + 32, ..., then across the warp;
 *   - longer rows: every thread of the block, thread i taking i, i + TPB, ..., then
 *     block_merge's fixed tree. With warp 0 alone a row of 512 slices (8 x 8388608 16-bit, in
 *     the pipelined kernel) cost 16 dependent L2 round trips a lane between a block's loads,
 *     against two a thread here; the block's merge costs a barrier more, which rows of few
 *     slices lose to.
 * Both kernels, one-ticket and pipelined, take the same form for the same row length, so they
 * give the same bits. H100, 2026-12-06, ms, block form for every row against warp 0 for every
 * row, two rounds (bench/results/2026-12-06-h100-s38-gather.txt): 8x8388608 f16 (512 slices)
 * 0.1099-0.1103 against 0.1227-0.1228, bf16 0.1109-0.1114 against 0.1241-0.1252; 16x4194304 f32
 * (512) 0.2070-0.2079 against 0.2279-0.2290, f16 (256) 0.1042-0.1045 against 0.1066-0.1072;
 * 64x1048576 f32 (128) level (0.1933-0.1938 against 0.1945-0.1949), f16 (64) 0.1021-0.1023
 * against 0.1004-0.1008; rows of 8 to 32 slices 1-5 % slower (256x262144 bf16 0.1083-0.1095
 * against 0.1039-0.1044). Loading a thread's words several at a time, or copying them to shared
 * memory by cp.async, made ptxas spill at the pipelined kernel's 64-register cap. */
#define FC_SPLIT_HELD_WARP_GATHER_SLICES 128
template <int TPB>
FC_DEVICE float2 gather_row_stats(const unsigned long long *slots,
                                  const unsigned long long *arrived, int slices,
                                  float2 *warp_slots, float2 *row_stats) {
    if (threadIdx.x == 0) wait_word(arrived, (unsigned long long)slices);
    __syncthreads();
    if (slices <= FC_SPLIT_HELD_WARP_GATHER_SLICES) { /* uniform across the block */
        if (threadIdx.x < 32) {
            float m = -INFINITY, d = 0.0f;
            for (int i = threadIdx.x; i < slices; i += 32) {
                const float2 q = md_unpack(wait_word(slots + i, 1ull));
                stats_merge(m, d, q.x, q.y);
            }
            warp_merge<32>(m, d);
            if (threadIdx.x == 0) *row_stats = make_float2(m, d);
        }
    } else {
        const float2 r = merge_words<TPB>(slots, slices, warp_slots);
        if (threadIdx.x == 0) *row_stats = r;
    }
    __syncthreads();
    return *row_stats;
}

/* The row's (M, D) from the words its slices publish: this block's (m, d) goes to
 * slots[slice] and the block counts itself in at the row's arrival count, which thread 0 polls
 * until the row is complete; then warp 0 gathers the row's `slices` words, lane i taking
 * i, i + 32, ..., each waited for in turn (no order between a word and the count is relied
 * on), and merges them in that fixed order, then across the warp, so that every block of the
 * row gets the same bits. Every access is relaxed, at gpu scope: no data but the words
 * themselves is exchanged. Measured on an H100 (2026-11-25, ms, against this form's
 * 1024 x 131072 f16 0.204-0.206 and 64 x 1M f16 0.115-0.116): release/acquire on the count and
 * no waiting on the words 0.210-0.213 and 0.119-0.120; the words loaded two at a time before
 * either is waited for 0.212-0.215 and 0.113-0.114; warp 0's lanes each waiting for a word with
 * no count, as the OpenCL kernel does for up to 32 slices, 0.226 (f32: 0.431 against 0.386). */
template <int TPB>
FC_DEVICE float2 row_stats_from_words(unsigned long long *slots, unsigned long long *arrived,
                                      int slice, int slices, float2 md, float2 *warp_slots,
                                      float2 *row_stats) {
    publish_slice(slots, arrived, slice, md);
    return gather_row_stats<TPB>(slots, arrived, slices, warp_slots, row_stats);
}

/* The next ticket of the split state, for every thread of the block: thread 0 draws it into
 * `ticket` and calls drawn(ticket) before the block's barrier. */
template <typename F>
FC_DEVICE int draw_ticket(unsigned long long *state, unsigned *ticket, F drawn) {
    if (threadIdx.x == 0) {
        const unsigned t = (unsigned)atomicAdd(state, 1ull);
        *ticket = t;
        drawn((int)t);
    }
    __syncthreads();
    return (int)*ticket;
}
/* The same with nothing to call: the ticketed kernels' draw. */
FC_DEVICE int draw_ticket(unsigned long long *state, unsigned *ticket) {
    return draw_ticket(state, ticket, [](int) {});
}

/* Loads ticket t's slice into held and publishes its block's (m, d), even for a row of one slice
 * (one word and one count more, but no second path): the thread's own max in m; returns, to
 * thread 0, the row's arrival count from before it (publish_slice). */
template <int TPB, typename H>
FC_DEVICE unsigned long long take_slice(H &held, const fc_softmax_args &a,
                                        unsigned long long *state, int slices, int t, float &m,
                                        float2 *warp_slots) {
    const int row = t / slices, slice = t - row * slices;
    const float d = held.sum(a, row, slice, m);
    float bm = m, bd = d;
    block_merge<TPB>(bm, bd, warp_slots, false);
    return publish_slice(row_words(state, slices, row), row_arrivals(state, a.rows, slices, row),
                         slice, make_float2(bm, bd));
}
