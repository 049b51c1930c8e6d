/* cl/softmax_pipelined.cl — the cooperative split row, pipelined (GPUs with 64-bit global
 * atomics and FC_PIPE_FLOATS floats of local memory a work-group): for rows of many slices,
 * where every row ends in a wait for its slowest slice and HBM idles while the groups wait.
 *
 * A work-group draws tickets until they run out. It loads, reduces and publishes the slice of
 * its new ticket while the slice of its previous ticket is parked in local memory, and only then
 * waits for the parked slice's row and stores that slice: so a group has a load in flight
 * whenever it waits, and a compute unit holds twice the slices it holds in registers. The same
 * form as the CUDA backend's split_held_pipelined (cuda/softmax_split_held.cuh), which made
 * 64 x 1M f32 13 % faster there (bench/results/2026-11-25-h200-session14.md).
 *
 * Values, exps and stores are the cooperative split row's (cl/softmax_cooperative.cl), over the
 * same slices: every element gets the same bits from both kernels.
 *
 * Why waiting cannot deadlock: every ticket a group draws is published before that group waits
 * for anything, and a group waits only for the row of its parked ticket, after drawing a later
 * one. Take the newest drawn ticket T: every row before T's is fully drawn, so fully published,
 * and its waiters go on. A group waiting for T's row holds two of its tickets (or all of its
 * tickets are drawn), so if every running group waited there the row would have at least as many
 * drawn tickets as running groups. The host keeps slices <= compute units and launches at least
 * that many groups, each of which fits a compute unit: the row is complete, and the waits end.
 * (The residency probe, FLASHCL_SOFTMAX_COOP_PROBE, does not raise that bound here: it is taken
 * for the cooperative kernels only, softmax_plan.c's fc_plan_pipe.)
 *
 * Local memory: parked[q * width + lid] holds quad q of work-item lid's slice, so each item
 * reads back only what it wrote and no barrier guards it. The parked slice is stored straight
 * from there (fc_parked_store), not exchanged with the registers of the new one: an exchange
 * loop had NVIDIA's compiler hold both slices in registers (160 against the cooperative
 * kernel's 96 for 16-bit slices, 96 against 64 for f32: ptxas on the driver's PTX). */
#ifndef FLASHCL_EMBEDDED
#include "softmax_cooperative.cl" /* and through it softmax.cl */
#endif

#if FC_COOP && defined(FC_PIPE_FLOATS) && FC_PIPE_FLOATS > 0

/* fc_held_store (softmax.cl) of the slice this work-item parked. */
FC_INLINE void fc_parked_store(const int xdt, const int ydt, const __local float4 *parked,
                               const uint elems, __global void *yrow, uint begin, uint end,
                               uint lane, uint team, int vec, int lanes, int log_mode, float m,
                               float factor, float log_d, uint low)
{
    const uint n = FC_CHUNK(xdt), chunks = elems / n;
#pragma unroll
    for (uint c = 0; c < chunks; ++c) {
        const float4 s0 = parked[c * (n / 4) * team + lane];
        const float4 s1 = n == 8 ? parked[(c * (n / 4) + 1) * team + lane] : s0;
        fc_held_store_chunk(xdt, ydt, s0, s1, c, yrow, begin, end, lane, team, vec, lanes,
                            log_mode, m, factor, log_d, low);
    }
}

FC_INLINE void fc_split_row_pipelined(const int xdt, const int ydt, const __global void *x,
                                      ulong x_off, ulong x_stride, __global void *y, ulong y_off,
                                      ulong y_stride, ulong rows, uint cols, uint slice_len,
                                      uint slices, float scale, int log_mode, int vec,
                                      volatile __global ulong *state, __local float *scratch,
                                      __local ulong *ticket, __local float4 *parked)
{
    const uint lid = get_local_id(0), width = get_local_size(0), elems = FC_COOP_ELEMS;
    const uint n = FC_CHUNK(xdt);
    const ulong tickets = rows * slices;
    float4 v[FC_HELD_MAX / 4];
    ulong held = 0;         /* the parked slice's ticket, */
    int holding = 0;        /* when there is one */
    float m_held = 0.0f;    /* and this item's max over it (its exps' reference) */

    for (;;) {
        /* The ticket word is rewritten only after a barrier that follows every read of it: the
         * slice merge's or the row gather's, below. */
        const ulong t = fc_draw_ticket(state, ticket, lid);
        float m_new = 0.0f;
        if (t < tickets) {
            const fc_coop_slice s =
                fc_coop_slice_of(t, slices, slice_len, cols, x_off, x_stride, vec, n);
            m_new = fc_held_load(xdt, v, elems, fc_row(xdt, x, x_off + s.row * x_stride - s.head),
                                 s.begin, s.end, lid, width, scale, vec != 0, s.head);
            const float d_new = fc_held_exp_sum(ydt, v, elems, fc_md_ref(m_new), log_mode);
            fc_coop_publish(state, rows, s.row, s.slice, slices,
                            fc_slice_md((float2)(m_new, d_new), 0, lid, width, scratch), lid);
        }
        if (holding) {
            const fc_coop_slice s =
                fc_coop_slice_of(held, slices, slice_len, cols, x_off, x_stride, vec, n);
            const ulong y_at = y_off + s.row * y_stride;
            const int y_vec = fc_shift_y_vec(vec, y_at, s.head, ydt, n);
            const float2 md = fc_coop_row_md(state, rows, s.row, slices, lid, width, scratch);
            fc_parked_store(xdt, ydt, parked, elems, fc_row_w(ydt, y, y_at - s.head), s.begin,
                            s.end, lid, width, y_vec, vec == 0, log_mode, md.x,
                            fc_coop_factor(m_held, md), log(md.y), s.head);
        }
        if (t >= tickets)
            break;
        /* the new slice to its place (this item's own, read back above or never) */
#pragma unroll
        for (uint q = 0; q < elems / 4; ++q)
            parked[q * width + lid] = v[q];
        held = t;
        holding = 1;
        m_held = m_new;
    }
}

/* One kernel per dtype pair, every layout (vec 0, 1 or 2). */
#define FC_PIPE_KERNEL(XN, XT, XD, YN, YT, YD)                                                 \
    __kernel void softmax_split_row_pipelined_##XN##_##YN(FC_PTR_ARGS(XT, YT), FC_COOP_PARAMS) \
    {                                                                                          \
        FC_COOP_PROLOGUE;                                                                      \
        __local float4 parked[FC_PIPE_FLOATS / 4];                                             \
        fc_split_row_pipelined(XD, YD, x, x_off, x_stride, y, y_off, y_stride, rows, cols,     \
                               slice_len, slices, scale, log_mode, vec, state + state_off,     \
                               scratch, &ticket, parked);                                      \
    }

FC_EACH_PAIR(FC_PIPE_KERNEL)
#endif /* FC_COOP && FC_PIPE_FLOATS */
