/* cl/softmax_ordered.cl — the ticket-ordered split row: rows too long for one work-group's
 * registers, read twice with the second read meant to hit the L2 cache, in one launch.
 *
 * A row is cut into `slices` slices. Each slice is two work items: a partial item (stream the
 * slice, publish its (m, d)) and a normalise item (merge the row's published (m, d), re-read the
 * slice, write it). A work-group takes a ticket (an atomic counter) when it starts, and the
 * ticket, not get_group_id, says which item it does. Items are ordered so that a slice's
 * normalise item comes `lag` partial items after its partial item: the first `lag` tickets are
 * partial items 0 .. lag-1, then normalise item i and partial item lag + i alternate, then the
 * remaining normalise items (partial and normalise items are numbered row by row, slice by
 * slice). Between a slice's two reads the device reads about `lag` slices more, which the host
 * keeps within what the L2 cache holds; the alternation keeps partial items running while
 * normalise items wait, so no row boundary drains the device.
 *
 * Why waiting cannot deadlock: a normalise item waits only for the partial items of its row
 * (which never wait) or for its row's first normalise item. With lag >= slices all of these
 * hold smaller tickets, so they have started (tickets are taken by running groups), and the
 * smallest unfinished ticket never waits for a larger one. Any device whose started
 * work-groups keep running (GPUs, CPU runtimes with a thread per work-group) finishes.
 *
 * With `reverse`, normalise items take their row's slices from the last one back: for rows
 * longer than the cache, the slices read last are the likeliest to be there still.
 *
 * state[0] is the ticket counter; state[1 + r * slices + s] the published (m, d) of slice s of
 * row r, state[1 + rows * slices + r] row r's merged (m, d) (fc_md_pack); they are 0 when the
 * launch starts (fc_clear_previous in softmax.cl; 0 is never a published value). The row's
 * first normalise item merges the partials in slice order and publishes the result, which the
 * row's other normalise items wait for (an earlier ticket): all of a row's slices are
 * normalised by identical bits. */
#ifndef FLASHCL_EMBEDDED
#include "softmax_pipelined.cl" /* and through it softmax.cl */
#endif

/* 1: build softmax_split_row_ordered_* (needs 64-bit global atomics). */
#ifndef FC_ORDERED
#define FC_ORDERED 0
#endif

#if FC_ORDERED /* 64-bit atomics and fc_wait_word: softmax.cl */

/* The item of ticket t, as (index, normalise?) over `total` partial and `total` normalise
 * items (see the order above). */
FC_INLINE ulong fc_ordered_item(ulong t, ulong total, ulong lag, int *normalize)
{
    if (t < lag) {
        *normalize = 0;
        return t;
    }
    const ulong q = t - lag, paired = 2 * (total - lag);
    if (q < paired) {
        *normalize = (q & 1) == 0;
        return (q & 1) ? lag + q / 2 : q / 2;
    }
    *normalize = 1;
    return total - lag + (q - paired);
}

FC_INLINE void fc_split_row_ordered(const int xdt, const int ydt, const __global void *x,
                                    ulong x_off, ulong x_stride, __global void *y, ulong y_off,
                                    ulong y_stride, ulong rows, uint cols, uint slice_len,
                                    uint slices, ulong lag, int reverse, float scale,
                                    int log_mode, int vec, volatile __global ulong *state,
                                    __local float *scratch, __local ulong *ticket,
                                    __local ulong *row_md)
{
    const uint lid = get_local_id(0), width = get_local_size(0);
    int normalize;
    const ulong item =
        fc_ordered_item(fc_draw_ticket(state, ticket, lid), rows * slices, lag, &normalize);
    const ulong row = item / slices;
    uint slice = (uint)(item % slices);
    if (normalize && reverse)
        slice = slices - 1 - slice;
    const uint begin = slice * slice_len, end = min(cols, begin + slice_len);
    const __global void *xrow = fc_row(xdt, x, x_off + row * x_stride);
    volatile __global ulong *row_slots = state + 1 + row * slices;

    if (!normalize) { /* uniform across the group */
        const float2 md = fc_team_merge(fc_stream_md(xdt, xrow, begin, end, scale, vec, lid, width),
                                        width, scratch);
        if (lid == 0)
            atom_xchg(&row_slots[slice], fc_md_pack(md));
        return;
    }
    volatile __global ulong *row_word = state + 1 + rows * slices + row;
    float2 md = (float2)(-INFINITY, 0.0f);
    if (item % slices == 0) {
        /* The row's first normalise item merges its partials: lane i takes slices i, i + width,
         * ... in order, waiting for each to be published; then it publishes the row's (m, d). */
        for (uint i = lid; i < slices; i += width)
            md = fc_md_merge(md, fc_md_unpack(fc_wait_word(&row_slots[i], 1, 100)));
        md = fc_team_merge(md, width, scratch);
        if (lid == 0)
            atom_xchg(row_word, fc_md_pack(md));
    } else {
        /* The others wait for that one (an earlier ticket): one word to poll, not `slices`. */
        if (lid == 0)
            *row_md = fc_wait_word(row_word, 1, 100);
        barrier(CLK_LOCAL_MEM_FENCE);
        md = fc_md_unpack(*row_md);
    }
    /* Evict-first stores (NVIDIA): the output must not push out the input still to re-read. */
    fc_stream_normalize_as(xdt, ydt, xrow, fc_row_w(ydt, y, y_off + row * y_stride), begin, end,
                           scale, md, log_mode, vec, lid, width, 1);
}

#define FC_ORDERED_PAIR(XN, XT, XD, YN, YT, YD)                                                \
    __kernel void softmax_split_row_ordered_##XN##_##YN(                                       \
        FC_PTR_ARGS(XT, YT), ulong rows, uint cols, uint slice_len, uint slices, ulong lag,    \
        int reverse, float scale, int log_mode, int vec, volatile __global ulong *state,        \
        ulong state_off, ulong clear_off, uint clear_words, uint clear_per)                    \
    {                                                                                          \
        __local float scratch[FC_MAX_WG];                                                      \
        __local ulong ticket, row_md;                                                          \
        fc_clear_previous(state + clear_off, clear_words, clear_per);                          \
        fc_split_row_ordered(XD, YD, x, x_off, x_stride, y, y_off, y_stride, rows, cols,       \
                             slice_len, slices, lag, reverse, scale, log_mode, vec,            \
                             state + state_off, scratch, &ticket, &row_md);                    \
    }

FC_EACH_PAIR(FC_ORDERED_PAIR)
#endif /* FC_ORDERED */
