/* cl/softmax_cooperative.cl — the cooperative split row (GPUs with 64-bit global atomics):
 * rows too long for one work-group, each cut into slices held in the registers of as many
 * work-groups, which exchange their slices' (m, d) through atomics; one read and one write per
 * element, in one launch.
 *
 * What a group does besides its elements (the ticket, the merges, the exchange) is paid once
 * per slice, and 16-bit slices carry half the bytes of f32 ones: on an H100 the 16-bit kernel
 * was issue-bound (ncu on NVIDIA OpenCL's own PTX, run through the CUDA driver, 2026-11-25:
 * 4096 x 32768 f16 at 65 % of issue slots, 30 instructions an element where the element work
 * is ~9: the rest reductions, barriers, branches and index arithmetic). So on NVIDIA the exps
 * need no reduction first, the merges are warp butterflies with one barrier each, and one warp
 * gathers the row: 4096 x 32768 f16 / bf16 went from 82 / 78 % of copy bandwidth to 90 / 90 %,
 * 1024 x 131072 from 81 / 77 % to 87 / 87 % (bench/results/2026-11-25-h100-session11.md). */
#ifndef FLASHCL_EMBEDDED
#include "softmax_kernels.cl" /* and through it softmax.cl */
#endif

#if FC_COOP /* 64-bit atomics, fc_wait_word and fc_md_pack: softmax.cl */

/* A row too long for one work-group is cut into `slices` slices of at most
 * get_local_size(0) * FC_COOP_ELEMS elements, one work-group each, held in registers as floats
 * (as in rows_held): each group publishes its slice's (m, d), waits until every slice of its row
 * has published, merges them in slice order (so every group of a row computes identical bits)
 * and writes its slice from registers: one read and one write per element. The exps are kept
 * relative to each work-item's own max and rescaled once by e^(m_own - M) / D at the store.
 *
 * Why waiting cannot deadlock: a group takes a ticket (an atomic counter) only once it runs,
 * and the ticket, not get_group_id, says which row and slice it does. Tickets are handed out in
 * the order groups start, so the rows before the newest one are complete sets of started
 * groups, which finish without waiting for anyone not yet running; only the newest row can be
 * waiting for groups that have not started, and they start as soon as finished groups free
 * room. That needs room for `slices` groups at once: the host keeps slices <= compute units (or,
 * with FLASHCL_SOFTMAX_COOP_PROBE=1, <= the groups of the kernel its probe found resident at once:
 * fc_resident_probe, src/opencl/softmax_resident.c) and
 * enables this only on GPUs whose resident work-groups run independently (NVIDIA, AMD). Small
 * groups (from 128 work-items, softmax_plan.c) let several share a compute unit, so one group's
 * wait overlaps another's loads.
 *
 * state[0] is the ticket counter, state[1 + r * slices + s] the published (m, d) of slice s of
 * row r (fc_md_pack), state[1 + rows * slices + r] the number of row r's slices published; they
 * are 0 when the launch starts (fc_clear_previous). 0 is never a published value:
 * m = +0 means d >= 1. Everything exchanged between groups goes through atomics, so no ordering
 * between different words is relied on. */
/* Rows of more slices than this wait on an arrival count (see below). */
#define FC_COOP_POLL_SLOTS 32
#if FC_COOP_POLL_SLOTS > 32
#error "FC_COOP_POLL_SLOTS: the first warp gathers up to this many slices, a lane each"
#endif
/* Floats each work-item holds: 32, and 64 in NVIDIA's 16-bit programs (softmax.c; 64 measured
 * slower there in session 4, 59% of copy bandwidth against 73% for 4096 x 32768 f16, and faster
 * once the kernel's reductions were trimmed in session 11: 92.6% against 90.3%). A first try at
 * holding 16-bit slices as raw chunks (fc_reg_*: three conversions an element, the max among
 * them) measured slower (H100, 2026-11-25, 4096 x 32768 f16 61 % of copy against 76.8);
 * cl/softmax_cooperative_bits.cl, with a packed max and two conversions, is faster and takes the
 * aligned 16-bit rows on NVIDIA. */
#ifndef FC_COOP_ELEMS
#define FC_COOP_ELEMS 32
#endif

#if defined(FC_HAVE_WARP_STEPS)
/* fc_team_merge over the work-group with one barrier: each warp merges on its own, then the
 * items that need the result (all with `everyone`, else only the first) merge the warps'
 * results in warp order, so all of them get the same bits. Uses scratch[0 .. width / 16); the
 * caller orders earlier reads of it before the call. */
FC_INLINE float2 fc_group_merge(float2 md, uint lid, uint width, int everyone,
                                __local float *scratch)
{
    md = fc_warp_merge(md);
    if ((lid & 31u) == 0) {
        scratch[2 * (lid >> 5)] = md.x;
        scratch[2 * (lid >> 5) + 1] = md.y;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (everyone || lid == 0) {
        md = (float2)(scratch[0], scratch[1]);
        for (uint w = 1; w < (width >> 5); ++w)
            md = fc_md_merge(md, (float2)(scratch[2 * w], scratch[2 * w + 1]));
    }
    return md;
}
#endif

/* The slice's (m, d) from each work-item's own (m, d): in the first work-item, and in all of
 * them with `everyone`. */
FC_INLINE float2 fc_slice_md(float2 own, int everyone, uint lid, uint width,
                             __local float *scratch)
{
#if defined(FC_HAVE_WARP_STEPS)
    return fc_group_merge(own, lid, width, everyone, scratch);
#else
    (void)everyone;
    (void)lid;
    return fc_team_merge(own, width, scratch);
#endif
}

/* Publishes slice `slice` of row `row` (its (m, d) in the first work-item's md) and, for rows of
 * more than FC_COOP_POLL_SLOTS slices, counts it in the row's arrivals. */
FC_INLINE void fc_coop_publish(volatile __global ulong *state, ulong rows, ulong row, uint slice,
                               uint slices, float2 md, uint lid)
{
    if (lid == 0) {
        atom_xchg(&state[1 + row * slices + slice], fc_md_pack(md));
        if (slices > FC_COOP_POLL_SLOTS)
            atom_inc(&state[1 + rows * slices + row]);
    }
}

/* The row's (M, D), once every slice of it has published: merged in slice order, so every
 * work-item of every group of the row gets identical bits. The caller orders its earlier reads
 * of scratch before the call. */
FC_INLINE float2 fc_coop_row_md(volatile __global ulong *state, ulong rows, ulong row,
                                uint slices, uint lid, uint width, __local float *scratch)
{
    volatile __global ulong *row_slots = state + 1 + row * slices;
    float2 md = (float2)(-INFINITY, 0.0f);
    if (slices > FC_COOP_POLL_SLOTS) {
        /* Many slices: one word per group (the row's arrival count) is polled until the row
         * looks complete, instead of every slot by a lane each, which measured slower for
         * 64 x 1M (67% against 70% of copy bandwidth) but faster for few slices (4096 x
         * 32768 f32: 98% against 94%). The count only spares the slots the polling: they are
         * still read (and waited for) one by one below, so nothing depends on the order in
         * which the two become visible. */
        if (lid == 0)
            fc_wait_word(state + 1 + rows * slices + row, slices, 200);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
#if defined(FC_HAVE_WARP_STEPS)
    if (slices <= FC_COOP_POLL_SLOTS) {
        /* The first warp gathers (lane i waits for slice i), merges across itself and hands
         * (M, D) to the others through local memory: one barrier. (Every item gathering, as
         * below, and a team merge measured 3-7 points of copy bandwidth slower on 16-bit
         * slices; every warp gathering on its own, with no barrier, far slower: 32 x 4 pollers
         * a row.) */
        if (lid < 32u) {
            if (lid < slices)
                md = fc_md_unpack(fc_wait_word(&row_slots[lid], 1, 200));
            md = fc_warp_merge(md);
            if (lid == 0) {
                scratch[0] = md.x;
                scratch[1] = md.y;
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        return (float2)(scratch[0], scratch[1]);
    }
#endif
    /* lane i waits for slices i, i + width, ... (past FC_COOP_POLL_SLOTS slices after the
     * arrival barrier, which orders the first item's earlier reads of scratch before the merge's
     * writes) */
    for (uint i = lid; i < slices; i += width)
        md = fc_md_merge(md, fc_md_unpack(fc_wait_word(&row_slots[i], 1, 200)));
    return fc_slice_md(md, 1, lid, width, scratch);
}

/* Where ticket t's slice lies: ticket t is slice t % slices of row t / slices. In the shifted
 * layout (vec == 2: fc_shift_head in softmax.cl, the slices planned over cols + n - 1) `head`
 * elements of the row's layout come before its first column; [begin, end) is the slice in that
 * layout, and only the first chunk of slice 0's first item reaches before the row. */
typedef struct fc_coop_slice {
    ulong row;
    uint slice, head, begin, end;
} fc_coop_slice;

FC_INLINE fc_coop_slice fc_coop_slice_of(ulong t, uint slices, uint slice_len, uint cols,
                                         ulong x_off, ulong x_stride, int vec, uint n)
{
    fc_coop_slice s;
    s.row = t / slices;
    s.head = fc_shift_head(vec, x_off + s.row * x_stride, n);
    s.slice = (uint)(t % slices);
    s.begin = s.slice * slice_len;
    s.end = min(cols + s.head, s.begin + slice_len);
    return s;
}

/* The factor a work-item's exps (taken against its own max m_own) are stored with: e^(m_own -
 * M) / D for the row's (M, D). Items of only -inf hold zeros: their factor must be 0, not
 * e^(0 - M), which may be inf. An all -inf row has D = 0: 0 * (1 / 0) is NaN, as torch gives. */
FC_INLINE float fc_coop_factor(float m_own, float2 md)
{
    const float rescale = m_own == -INFINITY ? 0.0f : exp(m_own - fc_md_ref(md.x));
    return rescale * (1.0f / md.y);
}

FC_INLINE void fc_split_row_cooperative(const int xdt, const int ydt, const __global void *x,
                                        ulong x_off, ulong x_stride, __global void *y,
                                        ulong y_off, ulong y_stride, ulong rows, uint cols,
                                        uint slice_len, uint slices, float scale, int log_mode,
                                        int vec, volatile __global ulong *state,
                                        __local float *scratch, __local ulong *ticket)
{
    const uint lid = get_local_id(0), width = get_local_size(0), elems = FC_COOP_ELEMS;
    const uint n = FC_CHUNK(xdt);
    const fc_coop_slice s = fc_coop_slice_of(fc_draw_ticket(state, ticket, lid), slices,
                                             slice_len, cols, x_off, x_stride, vec, n);
    const ulong y_at = y_off + s.row * y_stride;
    const int y_vec = fc_shift_y_vec(vec, y_at, s.head, ydt, n);
    float4 v[FC_HELD_MAX / 4];

    /* The exps are taken against this work-item's own max, so no reduction stands between the
     * loads and the exps; the store rescales them by e^(m_own - M) / D. */
    const float m_own =
        fc_held_load(xdt, v, elems, fc_row(xdt, x, x_off + s.row * x_stride - s.head), s.begin,
                     s.end, lid, width, scale, vec != 0, s.head);
    const float d_own = fc_held_exp_sum(ydt, v, elems, fc_md_ref(m_own), log_mode);
    /* The slice's (m, d), needed by every item only when the row is one slice (else by the
     * first, which publishes it). */
    float2 md = fc_slice_md((float2)(m_own, d_own), slices == 1, lid, width, scratch);
    if (slices > 1) {
        fc_coop_publish(state, rows, s.row, s.slice, slices, md, lid);
        md = fc_coop_row_md(state, rows, s.row, slices, lid, width, scratch);
    }
    fc_held_store(xdt, ydt, v, elems, fc_row_w(ydt, y, y_at - s.head), s.begin, s.end, lid,
                  width, y_vec, vec == 0, log_mode, md.x, fc_coop_factor(m_own, md), log(md.y),
                  s.head);
}

/* The parameters of the cooperative kernels (and the pipelined ones, softmax_pipelined.cl)
 * after FC_PTR_ARGS: the launch's words are state + state_off; clear_* name the words of the
 * launch before, which this one zeroes (fc_clear_previous). */
#define FC_COOP_PARAMS                                                                         \
    ulong rows, uint cols, uint slice_len, uint slices, float scale, int log_mode, int vec,    \
        volatile __global ulong *state, ulong state_off, ulong clear_off, uint clear_words,    \
        uint clear_per

/* In programs built with FC_RESIDENT_PROBE=1 (FLASHCL_SOFTMAX_COOP_PROBE=1 when they are built:
 * softmax_tuning.c), a launch with rows == 0 is the residency probe (fc_resident_probe in
 * softmax.cl; the host never launches a real call without rows). The probe is a branch of the
 * kernel itself, not a kernel of its own, so that it gets the real kernel's registers and local
 * memory, and so as many groups at once. Other programs leave it out, so that their kernels
 * stay the code that was measured. */
#ifndef FC_RESIDENT_PROBE
#define FC_RESIDENT_PROBE 0
#endif
#if FC_RESIDENT_PROBE
#define FC_COOP_PROBE_BRANCH                                                                   \
    if (rows == 0) {                                                                           \
        fc_resident_probe(state + state_off);                                                  \
        return;                                                                                \
    }
#else
#define FC_COOP_PROBE_BRANCH
#endif

/* What every such kernel starts with: its local words (the group's merge scratch and ticket),
 * the residency probe where built, and the zeroing of the launch before's words. */
#define FC_COOP_PROLOGUE                                                                       \
    __local float scratch[FC_MAX_WG];                                                          \
    __local ulong ticket;                                                                      \
    FC_COOP_PROBE_BRANCH                                                                       \
    fc_clear_previous(state + clear_off, clear_words, clear_per)

/* The plain kernel takes every layout (vec 0, 1 or 2); the _aligned one rows that start 16-byte
 * aligned alone (FC_ALIGNED_KERNELS, softmax.cl). */
#define FC_COOP_KERNEL_AS(NAME, XN, XT, XD, YN, YT, YD, VEC)                                   \
    __kernel void NAME##_##XN##_##YN(FC_PTR_ARGS(XT, YT), FC_COOP_PARAMS)                      \
    {                                                                                          \
        FC_COOP_PROLOGUE;                                                                      \
        (void)vec;                                                                             \
        fc_split_row_cooperative(XD, YD, x, x_off, x_stride, y, y_off, y_stride, rows, cols,   \
                                 slice_len, slices, scale, log_mode, VEC, state + state_off,   \
                                 scratch, &ticket);                                            \
    }
#define FC_COOP_KERNEL(XN, XT, XD, YN, YT, YD)                                                 \
    FC_COOP_KERNEL_AS(softmax_split_row_cooperative, XN, XT, XD, YN, YT, YD, vec)              \
    FC_IF_ALIGNED_KERNELS(FC_COOP_KERNEL_AS(softmax_split_row_cooperative_aligned, XN, XT, XD, \
                                            YN, YT, YD, 1))

FC_EACH_PAIR(FC_COOP_KERNEL)
#endif /* FC_COOP */
