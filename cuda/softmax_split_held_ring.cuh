/* The ring form of the pipelined split-held kernel (softmax_split_held.cuh), for rows longer than
 * the pipelined kernels take. Included by softmax.cuh after it.
 *
 * Between the moment a block of the pipelined kernel parks a slice and the moment it waits for
 * that slice's row, its grid loads one slice a block, about as many bytes as the GPU holds in
 * registers (528 blocks x 32 KiB on an H100, 16.5 MB), so a row of more slices than its grid
 * has blocks could deadlock there (the host keeps to that, or twice that less one for the merged
 * form). Here a block parks up to FC_SOFTMAX_SPLIT_HELD_RING_SLOTS (two) slices in a ring of
 * dynamic shared memory besides the one in its registers, and waits only when the ring is full,
 * for its oldest parked slice's row: rows of up to three times its grid's blocks (a 16-bit row
 * of up to ~19M columns on an H100) stay one read and one write. Three blocks fit an SM (the
 * ring is 64 KiB a block) where the pipelined kernel runs four, which made the ring 4-9 %
 * slower on every row the pipelined kernels take, even 8x8388608, whose rows wait longest
 * there; the host gives it only the longer rows (softmax_plan_held.c, ring_suits).
 *
 * Why it cannot deadlock: a block that waits holds the newest slice in registers (published)
 * and two parked ones (published), and waits only for the oldest one's row. Were every running
 * block waiting on a row not wholly drawn, every block's three tickets would be slices of the
 * newest row: more than 3 x grid slices a row, which the host excludes
 * (fc_cuda_plan_split_held: at most 3 x grid - 1; the grid cooperative, so that all of it
 * runs at once). bench/probes/split_held_protocol/protocol.py's `deep` form checks this
 * protocol exhaustively on small grids: deadlock-free up to 3 x grid slices, deadlocked at one
 * more. The row's (M, D) is gathered from its words as the pipelined kernel gathers it
 * (gather_row_stats), so the ring gives the same bits as the other split-held kernels.
 *
 * Each thread reads back only its own places of a slot (park / store_parked), so a slot is
 * refilled with no barrier after it is stored from. */
#pragma once

template <int TPB, typename H> __device__ void softmax_split_held_ring(const fc_softmax_args &a) {
    static_assert(FC_SOFTMAX_SPLIT_HELD_RING_SLOTS == 2, "the ring below is written for two");
    extern __shared__ uint4 ring[]; /* two slots of H::NV * TPB vectors */
    constexpr int SLOT = H::NV * TPB;
    __shared__ float2 warp_slots[32];
    __shared__ float2 row_stats;
    __shared__ unsigned ticket;
    unsigned long long *state = reinterpret_cast<unsigned long long *>(a.counters);
    clear_previous<TPB>(a);
    /* 32-bit ticket arithmetic: the host keeps rows * slices + blocks below 2^31. */
    const int slices = a.chunks, total = (int)(a.rows * slices);
    const auto draw = [&]() { return draw_ticket(state, &ticket); };
    H held;
    /* ticket t's slice into held (take_slice); returns the thread's own max */
    const auto take = [&](int t) {
        float m;
        take_slice<TPB>(held, a, state, slices, t, m, warp_slots);
        return m;
    };
    /* parked ticket p (with this thread's max pm over it) stored from `slot` once its row is
     * complete */
    const auto store_parked = [&](int p, float pm, const uint4 *slot) {
        const int row = p / slices, slice = p - row * slices;
        const float2 r = gather_row_stats<TPB>(row_words(state, slices, row),
                                               row_arrivals(state, a.rows, slices, row), slices,
                                               warp_slots, &row_stats);
        H::store_parked(a, row, slice, pm, r, slot);
    };
    /* The ring, oldest first: tickets p0 (in slot `oldest`) and p1 (in the other slot), with
     * this thread's max over each; `parked` of them hold a slice. */
    int p0 = 0, p1 = 0, parked = 0, oldest = 0;
    float pm0 = 0.0f, pm1 = 0.0f;
    for (int t = draw(); t < total; t = draw()) {
        const float m = take(t);
        if (parked < 2) { /* room: park without waiting */
            held.park(ring + (oldest ^ parked) * SLOT);
            if (parked == 0) p0 = t, pm0 = m;
            else p1 = t, pm1 = m;
            parked++;
        } else { /* full: the oldest stored once its row is complete, its slot takes t */
            store_parked(p0, pm0, ring + oldest * SLOT);
            held.park(ring + oldest * SLOT);
            p0 = p1, pm0 = pm1, p1 = t, pm1 = m;
            oldest ^= 1;
        }
    }
    /* the tickets ran out: the ring drained oldest first */
    if (parked > 0) store_parked(p0, pm0, ring + oldest * SLOT);
    if (parked > 1) store_parked(p1, pm1, ring + (oldest ^ 1) * SLOT);
}

/* Three blocks an SM (FC_SOFTMAX_SPLIT_HELD_RING_BLOCKS_PER_SM): the ring's 64 KiB a block in
 * dynamic shared memory (the host sets the size, src/cuda/kernels.c), 85 registers a thread. */
#define FC_SPLIT_HELD_RING_KERNEL(dt_name, DT, unused)                                         \
    FC_SPLIT_HELD_ENTRY(split_held_ring, dt_name, FC_SOFTMAX_SPLIT_HELD_THREADS,               \
                        FC_SOFTMAX_SPLIT_HELD_RING_BLOCKS_PER_SM, softmax_split_held_ring,     \
                        FC_HELD_BITS(DT))
FC_SOFTMAX_FOR_DTYPES(FC_SPLIT_HELD_RING_KERNEL, 0)
