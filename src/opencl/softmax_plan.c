/* Variant choice for the OpenCL softmax: which kernel runs a validated request, with which
 * work-group, team and slices.
 *
 * AUTO, as chosen since the bandwidth work of issue #2 (cap16 = what a work-group holds as
 * floats: kernel limit x 16 elements, 4096 on NVIDIA's OpenCL where kernels report 256):
 *   cols <= 256                      -> rows held, 8 elements per work-item (team <= a warp;
 *                                       16-bit input on GPUs 16, where held in 16-byte
 *                                       chunks; FLASHCL_SOFTMAX_SHORT_ELEMS8=1: 8)
 *   cols <= cap16                    -> rows held, 16 elements per work-item (16-bit input:
 *                                       32, up to twice cap16; FLASHCL_SOFTMAX_NO_HELD32=1: 16);
 *                                       12 (16-bit: 24) where a fourth chunk would be empty
 *   16-bit cols <= raw cap (8192)    -> rows in registers as raw 16-byte chunks
 *   longer rows, on GPUs that built it:
 *     a row in at most one slice per compute unit (64 for 16-bit input past 4 rows) -> coop. split
 *                                       row: slices held in registers, one read, one write;
 *                                       aligned 16-bit rows of whole chunks held as their bits
 *                                       where built (NVIDIA), 64 or 128 a work-item;
 *                                       f32 rows of more than 32 slices of 128 work-items
 *                                       in groups of 256 instead, pipelined where that
 *                                       leaves 32 or more (a group parks one slice in local
 *                                       memory while it loads the next)
 *     otherwise                      -> ticket-ordered split row (one HBM read + one L2
 *                                       re-read + one write, any number of rows)
 *   otherwise the legacy choice below.
 * FLASHCL_SOFTMAX_LEGACY=1 restores the choice made before the rows held and the ordered split
 * (for A/B measurements; its cooperative split row is today's kernel, where a row fits):
 *   cols <= raw cap, and rows >= 2 x compute units or cols <= 8192 -> rows in registers (raw)
 *   rows >= 2 x compute units                                     -> online chunked
 *   few long rows -> cooperative split row (f32 input, where built), else the 3-pass split row.
 * FLASHCL_SOFTMAX_NO_COOP=1 leaves the cooperative split row out (then the ordered split);
 * FLASHCL_SOFTMAX_NO_SHIFT=1 runs its rows that do not start on a 16-byte chunk element by
 * element instead of in their shifted layout (cl/softmax_cooperative.cl);
 * FLASHCL_SOFTMAX_COOP_WG=n (32 or more) sets its smallest work-group (tuning; 128 by default;
 * no widening or narrowing);
 * FLASHCL_SOFTMAX_COOP_PROBE=1 lets its rows have as many slices as the kernel's groups that
 * the residency probe finds resident at once (softmax_resident.c), not only one a compute unit,
 * where the context was also created with it set (only then are the kernels built with the
 * probe's branch: FC_RESIDENT_PROBE, softmax_tuning.c), and AUTO then takes it for rows of
 * more slices than compute units whatever their count. It stays off: on an H100 (2026-12-07) it
 * found 660 groups resident and ran 8x8388608 f16 in 512 slices at 0.168 ms against the ordered
 * split's 0.140, 16x4194304 f16 in 256 at 0.132-0.133 against 0.130
 * (bench/results/2026-12-07-session46.md);
 * FLASHCL_SOFTMAX_COOP_RESIDENT=n assumes n a compute unit without a probe: for A/B only, as a
 * count the device does not have hangs the launch (both off by default; fc_coop_room);
 * FLASHCL_SOFTMAX_NO_BITS=1 holds its 16-bit rows as floats (cl/softmax_cooperative.cl);
 * FLASHCL_SOFTMAX_PIPE_SLICES=n pipelines rows of n slices or more (0: never; 32 by default),
 * FLASHCL_SOFTMAX_PIPE_GROUPS=n launches n groups a compute unit for it (4).
 * FLASHCL_SOFTMAX_L2_BUDGET_KB=N overrides the ordered split's cache budget (8192 on GPUs, 32768
 * for 16-bit input on an H200: the input bytes read between a slice's two reads, as many
 * written); FLASHCL_SOFTMAX_ORDERED_SLICE_KB=N and FLASHCL_SOFTMAX_ORDERED_WG=n its slices'
 * input bytes (32; 64 for 16-bit input on an H200) and a smaller work-group (tuning; the H100
 * sweep of session 12 kept 32 KiB and 256; softmax.c has the H200's).
 * FLASHCL_SOFTMAX_TRACE=1 prints each call's plan on stderr, and the kernels' work-group limits
 * when a context creates them (softmax.c).
 * Forced variants run whenever they can: ROW_IN_REGISTERS takes rows held or raw (UNSUPPORTED
 * past the raw cap); SPLIT_ROW takes the cooperative split row where built and a row fits,
 * else the ordered split where built (legacy: cooperative or 3-pass). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "../error.h"
#include "../text.h"
#include "softmax_plan.h"

static size_t fc_ceil_pow2(size_t v)
{
    size_t p = 1;
    while (p < v) p *= 2;
    return p;
}


/* A team of work-items holding a row of `cols` elements, `items` each, in one work-group of at
 * most max_wg; 0 when the row does not fit. */
static int fc_plan_team(fc_plan *p, fc_plan_kind kind, size_t items, size_t max_wg,
                        size_t group_wg, int64_t cols)
{
    size_t team;
    if ((uint64_t)cols > (uint64_t)max_wg * items) return 0;
    team = fc_ceil_pow2((size_t)((cols + (int64_t)items - 1) / (int64_t)items));
    p->kind = kind;
    p->team = (unsigned)team;
    p->wg = team > group_wg ? team : group_wg;
    if (p->wg > max_wg) p->wg = max_wg;
    return 1;
}

/* Rows in registers as raw chunks: 0 if a row does not fit one work-group. */
static int fc_plan_rir(fc_plan *p, const fc_softmax_kernels *k, flashcl_dtype x_dtype,
                       int64_t cols)
{
    return fc_plan_team(p, FC_PLAN_RIR, k->rir_chunks * fc_chunk_elems(x_dtype), k->rir_max_wg,
                        k->rir_group_wg, cols);
}

/* Whether rows that do not start on a 16-byte chunk take their shifted layout (rows held and
 * the cooperative split row: cl/softmax.cl, cl/softmax_cooperative.cl), up to a chunk - 1 more
 * columns; FLASHCL_SOFTMAX_NO_SHIFT=1 leaves them element by element (A/B). */
static int fc_shifted(const fc_softmax_desc *desc)
{
    return !fc_softmax_rows_aligned(desc) && !fc_env_flag("FLASHCL_SOFTMAX_NO_SHIFT");
}

/* Longer rows held four chunks per work-item (16 f32 elements, 32 16-bit ones) in a team
 * that leaves every work-item's fourth chunk empty (cols <= 3/4 of the team's elements) take the
 * kernel of three chunks instead (12 or 24, same team), which neither loads, exps nor stores
 * the empty one: the four-chunk kernels ran them about as slowly as rows that fill them. H200,
 * NVIDIA OpenCL, ms, four chunks -> three, same call (bench/results/2026-11-26-session23.md):
 * f32 32768x300 0.0335 -> 0.0257, 16384x640 0.0361 -> 0.0279, 8192x1500 0.0401 -> 0.0301,
 * 4096x3000 0.0439 -> 0.0336; f16 32768x300 0.0244 -> 0.0190, 16384x640 0.0213 -> 0.0159,
 * 4096x5000 0.0443 -> 0.0361, 8192x4097 0.0816 -> 0.0653; every other shape within 1 %.
 * FLASHCL_SOFTMAX_NO_HELD3=1 keeps four (A/B). */
static void fc_plan_held_three(fc_plan *p, int64_t cols)
{
    if ((uint64_t)cols * 4 <= (uint64_t)p->team * p->elems * 3 &&
        !fc_env_flag("FLASHCL_SOFTMAX_NO_HELD3"))
        p->elems = p->elems / 4 * 3;
}

/* Rows held as floats: `short_elems` (8, or 16 for 16-bit input: fc_plan_held) per work-item
 * for rows of up to 256 columns (short rows: more work-items, more loads in flight), else 16;
 * 16-bit input 32 where built (the bytes per work-item of 16 f32 elements); those two three
 * quarters as many where the row leaves a chunk empty (fc_plan_held_three). */
static int fc_plan_held_cols(fc_plan *p, const fc_softmax_kernels *k, flashcl_dtype x_dtype,
                             int64_t cols, unsigned short_elems)
{
    if (cols > 32 * 8 && x_dtype != FLASHCL_F32 && k->held32_max_wg &&
        !fc_env_flag("FLASHCL_SOFTMAX_NO_HELD32") &&
        fc_plan_team(p, FC_PLAN_HELD, 32, k->held32_max_wg, k->rir_group_wg, cols)) {
        p->elems = 32;
    } else {
        const unsigned elems = cols <= 32 * 8 ? short_elems : 16;
        if (!fc_plan_team(p, FC_PLAN_HELD, elems, k->held_max_wg, k->rir_group_wg, cols))
            return 0;
        p->elems = elems;
    }
    if (p->elems == 4 * fc_chunk_elems(x_dtype)) fc_plan_held_three(p, cols);
    return 1;
}

/* Rows held, 16-bit shifted rows (fc_shifted) planned a chunk - 1 longer where that fits and
 * holds no more than the row's own plan or the row is longer than 4096 columns; else (and f32
 * rows, unless only the shifted plan fits) element by element, in the element layout
 * (fc_held_load_lanes). H200, NVIDIA OpenCL, 2026-11-26, ms, against element accesses in the
 * same call (torch beside): 8192x4097 f16 0.082 against 0.146 (torch 0.116); 16384x1001 f16
 * 0.0247 against 0.0673 (0.0333); but 32768x127 (a team twice as wide shifted) f16 0.0226
 * against 0.0161 (bench/results/2026-11-26-h200-s17-shifted-register-rows.txt). Once the
 * element layout came (session 18), f32 rows did better in it than shifted: 16384x513 0.0295
 * against 0.0324, 8192x2049 0.0621 against 0.0670, 8192x4097 0.1050 against 0.1078, while
 * 16-bit ones still gain from the shift (16384x1001 f16 0.0243 against 0.0311)
 * (bench/results/2026-11-26-h200-s18-element-layout.txt). */
static int fc_plan_held_as(fc_plan *p, const fc_softmax_kernels *k, const fc_softmax_desc *desc,
                           unsigned short_elems)
{
    const int64_t extra = (int64_t)fc_chunk_elems(desc->x_dtype) - 1;
    fc_plan shifted = *p;
    const int own = fc_plan_held_cols(p, k, desc->x_dtype, desc->cols, short_elems);
    if (fc_shifted(desc) &&
        fc_plan_held_cols(&shifted, k, desc->x_dtype, desc->cols + extra, short_elems) &&
        (!own || (desc->x_dtype != FLASHCL_F32 &&
                  (desc->cols > 4096 ||
                   (uint64_t)shifted.team * shifted.elems == (uint64_t)p->team * p->elems)))) {
        shifted.shifted = 1;
        *p = shifted;
        return 1;
    }
    return own;
}

/* fc_plan_held_as with 8 elements a work-item for rows of up to 256 columns, but 16 for 16-bit
 * input on GPUs (`gpu`), the bytes per work-item of f32's 8, where the row is held in 16-byte
 * chunks (aligned rows, or shifted ones); in the element layout 16 elements are 16 scalar
 * accesses a work-item, and 8 stay faster. H100, NVIDIA OpenCL, 2026-11-26, ms, 8 -> 16 in the
 * same call (outputs rotated / one output reused, bench/results/2026-11-26-session22.md):
 * f16 65536x100 (shifted) 0.0209 -> 0.0159 / 0.0206 -> 0.0146, 32768x160 0.0152 -> 0.0128 /
 * 0.0149 -> 0.0120, 32768x200 0.0154 -> 0.0136 / 0.0150 -> 0.0124, 65536x128 0.0150 -> 0.0150 /
 * 0.0133 -> 0.0121, 32768x256 0.0149 -> 0.0150 / 0.0126 -> 0.0121, 65536x64 0.0093 -> 0.0091 /
 * 0.0079 -> 0.0079, bf16 alike or better; in the element layout 32768x127 f16 0.0111 -> 0.0160,
 * 32768x255 0.0179 -> 0.0196. f32 stays at 8 (65536x128 0.0263 -> 0.0267).
 * FLASHCL_SOFTMAX_SHORT_ELEMS8=1 keeps 16-bit rows at 8 (A/B). */
static int fc_plan_held(fc_plan *p, const fc_softmax_kernels *k, const fc_softmax_desc *desc,
                        int gpu)
{
    if (gpu && desc->x_dtype != FLASHCL_F32 && desc->cols <= 32 * 8 &&
        !fc_env_flag("FLASHCL_SOFTMAX_SHORT_ELEMS8")) {
        fc_plan wide = *p;
        if (fc_plan_held_as(&wide, k, desc, 16) &&
            (wide.shifted || fc_softmax_rows_aligned(desc))) {
            *p = wide;
            return 1;
        }
    }
    return fc_plan_held_as(p, k, desc, 8);
}

/* Online chunked: a work-group per row, up to a few times what the device runs at once (the
 * groups loop over the remaining rows). */
static void fc_plan_chunked(fc_plan *p, const fc_cl_device *dev, const fc_softmax_kernels *k,
                            int64_t rows)
{
    uint64_t groups = (uint64_t)dev->compute_units *
                      (k->resident_items > k->chunked_wg ? k->resident_items / k->chunked_wg : 1) * 8;
    if (groups > (uint64_t)rows) groups = (uint64_t)rows;
    p->kind = FC_PLAN_CHUNKED;
    p->wg = k->chunked_wg;
    p->groups = (size_t)groups;
}

/* Rows cut into about `slices` slices of a multiple of `unit` elements. */
static void fc_plan_slices(fc_plan *p, fc_plan_kind kind, size_t wg, uint64_t cols,
                           uint64_t slices, uint64_t unit)
{
    uint64_t len = (cols + slices - 1) / slices;
    len = (len + unit - 1) / unit * unit;
    p->kind = kind;
    p->wg = wg;
    p->slice_len = len;
    p->slices = (unsigned)((cols + len - 1) / len);
}

/* Split row: slices of at least a few loads per work-item, enough groups to fill the device. */
static void fc_plan_split(fc_plan *p, const fc_cl_device *dev, const fc_softmax_kernels *k,
                          int64_t rows, int64_t cols)
{
    const uint64_t ucols = (uint64_t)cols;
    const uint64_t unit = 8u * (uint64_t)k->split_wg; /* a chunk per work-item (any dtype) */
    const uint64_t min_len = unit * 4 * 2;
    const uint64_t target_groups = (uint64_t)dev->compute_units * (dev->is_gpu ? 8 : 2);
    uint64_t slices = (target_groups + (uint64_t)rows - 1) / (uint64_t)rows;
    uint64_t max_slices = (ucols + min_len - 1) / min_len;
    if (slices > max_slices) slices = max_slices;
    if (slices < 1) slices = 1;
    fc_plan_slices(p, FC_PLAN_SPLIT, k->split_wg, ucols, slices, unit);
}

/* The slices of a row that the cooperative kernels' first warp gathers (FC_COOP_POLL_SLOTS in
 * cl/softmax_cooperative.cl). */
#define FC_COOP_GATHER_SLOTS 32

/* The elements a work-item of the cooperative split row holds of a 16-bit row as its bits
 * (cl/softmax_cooperative_bits.cl, which gives the figures), or 0 where the row is held as
 * floats: bits where built, for rows whose x and y start 16-byte aligned and whose length is a
 * multiple of a chunk; 64 elements a work-item, or 128 for rows that would
 * take more slices of 128 x 64 than the first warp gathers (FC_COOP_GATHER_SLOTS; H200, f16,
 * 2026-11-26, ms, 64 -> 128: 64x1M (128 -> 64 slices, then no longer the ordered split's)
 * 0.105 -> 0.094, 128x524288 (64 -> 32) 0.0902 -> 0.0890; with 32 slices or fewer 128 loses:
 * 256x262144 0.0799 -> 0.0869, 1024x131072 0.1436 -> 0.1565). FLASHCL_SOFTMAX_NO_BITS=1 holds
 * them as floats (A/B, tests); FLASHCL_SOFTMAX_BITS_ELEMS=64|128 sets the elements (tuning). */
static unsigned fc_coop_bits(const fc_softmax_kernels *k, const fc_softmax_desc *desc)
{
    const long forced = fc_env_long("FLASHCL_SOFTMAX_BITS_ELEMS", 0);
    if (!k->coop_bits || desc->x_dtype == FLASHCL_F32 || desc->cols % 8 != 0 ||
        !fc_softmax_rows_aligned(desc) || fc_env_flag("FLASHCL_SOFTMAX_NO_BITS"))
        return 0;
    if (forced == 64 || forced == 128) return (unsigned)forced;
    return ((uint64_t)desc->cols + 128 * 64 - 1) / (128 * 64) > FC_COOP_GATHER_SLOTS ? 128 : 64;
}

void fc_coop_room_init(fc_coop_room *room, fc_cl_context *ctx)
{
    const long per_unit = fc_env_long("FLASHCL_SOFTMAX_COOP_RESIDENT", 0);
    room->per_unit = per_unit > 0 ? (uint64_t)per_unit : 0;
    room->probe = !room->per_unit && fc_env_flag("FLASHCL_SOFTMAX_COOP_PROBE") ? ctx : NULL;
    room->status = FLASHCL_SUCCESS;
}

/* The work-groups of the cooperative kernel for `bits` and row layout `vec` (fc_coop_kernel; the
 * layout fc_cl_softmax launches with: 2 when the plan is shifted) of wg work-items that
 * may count as resident at once, for a row of `slices` slices; *from says whence. One a compute
 * unit when that is enough or nothing in `room` raises it; else FLASHCL_SOFTMAX_COOP_RESIDENT's
 * count or the probe's (which fails into room->status), a probe that finds fewer than one a
 * compute unit leaving that bound (it can only count short). */
static uint64_t fc_coop_resident(fc_coop_room *room, const fc_cl_device *dev,
                                 const fc_softmax_kernels *k, const fc_softmax_desc *desc,
                                 unsigned bits, int vec, size_t wg, uint64_t slices,
                                 fc_resident_source *from)
{
    const uint64_t units = dev->compute_units;
    uint64_t probed = 0;
    *from = FC_RESIDENT_UNITS;
    if (slices <= units || !room || room->status != FLASHCL_SUCCESS) return units;
    if (room->per_unit) {
        *from = FC_RESIDENT_ASSUMED;
        return room->per_unit * units;
    }
    /* only kernels built with the probe's branch may be launched as the probe */
    if (!room->probe || !k->probe_built[desc->x_dtype]) return units;
    room->status = fc_softmax_resident(
        room->probe,
        fc_coop_kernel(k, bits, (int)desc->x_dtype, (int)desc->y_dtype, vec), wg, &probed);
    if (room->status != FLASHCL_SUCCESS || probed <= units) return units;
    *from = FC_RESIDENT_PROBED;
    return probed;
}

/* Cooperative split row: a slice of at most coop_elems elements per work-item in
 * registers (cl/softmax.cl), as many slices as that takes; 0 when they would exceed the groups
 * resident at once (the no-deadlock condition): one a compute unit, or what `room` allows
 * (fc_coop_resident). Work-groups of 128, or the smallest larger power of two
 * whose slices fit: small groups let several share a compute unit, so one group's wait overlaps
 * another's loads (measured on an H100, f32 4096 x 32768: 98% of copy bandwidth with 128, 91%
 * with 256 or more; more slices per row than compute units measured slower, 64 x 1M f32: 57%
 * against 67%). FLASHCL_SOFTMAX_COOP_WG=n (32 or more) sets the starting size and turns off the
 * widening and narrowing below (tuning). A row that fits one group gets the smallest group that
 * holds it. */
static int fc_plan_coop(fc_plan *p, const fc_cl_device *dev, const fc_softmax_kernels *k,
                        const fc_softmax_desc *desc, fc_coop_room *room)
{
    const long wg_asked = fc_env_long("FLASHCL_SOFTMAX_COOP_WG", 0);
    const flashcl_dtype x_dtype = desc->x_dtype;
    /* Rows that do not start on a chunk run in their shifted layout (fc_shifted). H200, NVIDIA OpenCL,
     * 2026-11-26, ms against element accesses in the same call: 4096x50257 f16 0.332 against
     * 0.850 (torch 0.350), bf16 0.338 against 1.022, f32 0.427 against 0.524; 512x50257 f16
     * 0.050 against 0.140 (torch 0.053) (bench/results/2026-11-26-h200-s17-shifted-rows.txt). */
    const int shifted = fc_shifted(desc);
    const int vec = fc_softmax_layout(desc, shifted); /* as fc_cl_softmax launches */
    const uint64_t ucols = (uint64_t)desc->cols + (shifted ? fc_chunk_elems(x_dtype) - 1 : 0);
    const unsigned bits = fc_coop_bits(k, desc);
    const uint64_t elems = bits ? bits : k->coop_elems[x_dtype];
    size_t wg = wg_asked >= 32 ? fc_ceil_pow2((size_t)wg_asked) : 128;
    uint64_t slices;
    fc_resident_source from;
    if (!k->coop || fc_env_flag("FLASHCL_SOFTMAX_NO_COOP")) return 0;
    if (wg > k->coop_wg) wg = k->coop_wg;
    for (;;) {
        slices = (ucols + wg * elems - 1) / (wg * elems);
        if (slices <= fc_coop_resident(room, dev, k, desc, bits, vec, wg, slices, &from)) break;
        if (wg * 2 > k->coop_wg) return 0;
        wg *= 2;
    }
    /* f32 rows of more slices than the first warp gathers (FC_COOP_GATHER_SLOTS) wait on an
     * arrival count instead, which costs more than larger groups do: wider groups while they
     * fit. H200, NVIDIA OpenCL, 2026-11-26, f32 ms, 128 -> 256 work-items: 256x262144 (64 -> 32
     * slices) 0.165 -> 0.152, 512x262144 0.318 -> 0.292, 128x524288 (128 -> 64, then
     * pipelined) 0.184 -> 0.166; rows of 32 slices or fewer lose with 256 (1024x131072 0.2771
     * -> 0.2788, 300x100000 0.069 -> 0.074). 16-bit slices of 256 x 64 elements lost: 64x1M
     * f16 0.106 (ordered) -> 0.120, 128x524288 f16 0.098 -> 0.110
     * (bench/results/2026-11-26-session24.md). */
    while (wg_asked < 32 && x_dtype == FLASHCL_F32 && slices > FC_COOP_GATHER_SLOTS &&
           wg * 2 <= k->coop_wg && wg * 2 <= 256) { /* 256: the size measured */
        const uint64_t wider = (ucols + wg * 2 * elems - 1) / (wg * 2 * elems);
        /* past the compute units, fewer wider groups may fit than half as many narrow ones */
        if (wider > fc_coop_resident(room, dev, k, desc, bits, vec, wg * 2, wider, &from)) break;
        wg *= 2;
        slices = wider;
    }
    /* 16-bit slices of 64 elements a work-item (NVIDIA's programs) are issue-bound: a group
     * pays for every element it could hold, so a row that fills its slices only in part runs
     * at the speed of a full one. Groups of 64 where that fills the slices clearly better (by
     * more than 5 points). H100, NVIDIA OpenCL, 2026-11-26, f16, ms, 128 -> 64 in the same call:
     * 16384x12288 (75 % -> 100 % filled) 0.331 -> 0.282, 16384x10000 (61 -> 81 %) 0.308 ->
     * 0.262, 32768x9000 (55 -> 73 %) 0.584 -> 0.499, 2048x20000 (81 -> 98 %) 0.073 -> 0.0665;
     * on rows that fill either size, 64 was 0-1.5 % slower (8192x16384 0.188 -> 0.191,
     * 1024x131072 0.196 -> 0.199), and f32 (32 elements, memory-bound) 2-3 % slower
     * (bench/results/2026-11-26-h100-s20-coop-wg64.txt). H200, f16 (bf16 alike): 16384x12288
     * 0.287 -> 0.226, 16384x10000 0.285 -> 0.226, 32768x9000 0.562 -> 0.442, 2048x20000 0.064
     * -> 0.057; full rows within 0.5 % (bench/results/2026-11-26-h200-s21-coop-wg64-landed.txt).
     * The bits kernel at 64 a work-item takes the same rule, measured only against the floats:
     * 16384x12288 f16 (groups of 64) 0.2258 -> 0.2103 on an H200, 0.2798 -> 0.2828 on an H100
     * (bench/results/2026-11-26-session25.md); groups of 128 there are untried. */
    if (wg_asked < 32 && x_dtype != FLASHCL_F32 && elems == 64 && wg == 128 && slices > 1) {
        const uint64_t slices64 = (ucols + 64 * elems - 1) / (64 * elems);
        const double fill128 = (double)ucols / (double)(slices * 128 * elems);
        const double fill64 = (double)ucols / (double)(slices64 * 64 * elems);
        if (fill64 > fill128 + 0.05 &&
            slices64 <= fc_coop_resident(room, dev, k, desc, bits, vec, 64, slices64, &from)) {
            wg = 64;
            slices = slices64;
        }
    }
    if (slices == 1) {
        const size_t need = fc_ceil_pow2((size_t)((ucols + elems - 1) / elems));
        wg = need < 32 ? 32 : need;
        if (wg > k->coop_wg) wg = k->coop_wg;
    }
    /* Balanced slices, each starting on a 16-byte chunk (at most 8 elements). */
    fc_plan_slices(p, FC_PLAN_COOP, wg, ucols, slices, 8);
    p->shifted = shifted;
    p->bits = bits;
    /* the bound the slices met (answered before: no second probe), for the trace */
    p->resident = fc_coop_resident(room, dev, k, desc, bits, vec, wg, p->slices, &p->resident_from);
    return !room || room->status == FLASHCL_SUCCESS;
}

/* The pipelined cooperative split row (cl/softmax_pipelined.cl) for a cooperative plan of f32
 * input whose groups fill the parked slice (FC_PIPE_FLOATS: groups of 256 x 32 floats), with at
 * least FLASHCL_SOFTMAX_PIPE_SLICES slices a row (32 by default; 0: never; set, it also takes
 * 16-bit input and smaller groups: tests, A/B) and more tickets than the work-groups it
 * launches: compute units x FLASHCL_SOFTMAX_PIPE_GROUPS (4 by default), never fewer than the
 * slices of a row (the no-deadlock condition there). H200, NVIDIA OpenCL, 2026-11-26, f32 ms,
 * cooperative -> pipelined, groups of 256: 64x1M 0.198 -> 0.153, 128x524288 0.169 -> 0.149,
 * 256x262144 (32 slices) 0.154 -> 0.137, 512x262144 0.292 -> 0.269, 20x1M 0.068 -> 0.055
 * (H100, the kernel's first form: 64x1M 0.223 -> 0.209, 20x1M 0.080 -> 0.072). Groups of 128
 * lose pipelined (1024x131072, 32 slices: 0.278 -> 0.338, 0.293 with 6 groups a compute unit;
 * 4096x32768 0.269 -> 0.293 at best), and so do 16-bit slices (groups of 128 x 64 floats, 128
 * registers against the cooperative kernel's 96: 64x1M f16 0.110 against the ordered split's
 * 0.106, 128x524288 f16 0.108 against the cooperative 0.097); 2 or 3 groups a compute unit
 * lose to 4, 5 to 8 tie (bench/results/2026-11-26-session24.md). Plans held as bits are not
 * pipelined: both forms tried lost to the cooperative bits kernel (64x1M f16 0.093 -> 0.102 and
 * 0.111 ms on an H200; branch bits-pipelined, bench/results/2026-11-26-session25.md).
 * Rows of more slices than compute units (which only FLASHCL_SOFTMAX_COOP_PROBE or _RESIDENT
 * give) are not pipelined: the pipelined kernel's no-deadlock bound (cl/softmax_pipelined.cl)
 * counts one group a compute unit, and its groups, which park a slice in local memory, were never
 * probed: fewer of them may fit at once than of the cooperative kernel's the probe counted. */
static int fc_plan_pipe(fc_plan *p, const fc_cl_device *dev, const fc_softmax_kernels *k,
                        flashcl_dtype x_dtype, int64_t rows)
{
    /* set (LONG_MIN: not), it also takes any dtype and size */
    const long asked = fc_env_long("FLASHCL_SOFTMAX_PIPE_SLICES", LONG_MIN);
    const long from = asked == LONG_MIN ? 32 : asked;
    const long per_asked = fc_env_long("FLASHCL_SOFTMAX_PIPE_GROUPS", 0);
    const size_t per = per_asked > 0 ? (size_t)per_asked : 4;
    const size_t groups = (size_t)dev->compute_units * per;
    const size_t parked = p->wg * k->coop_elems[x_dtype];
    if (!k->pipe_wg || from <= 0 || p->kind != FC_PLAN_COOP || p->bits || p->slices < 2 ||
        p->slices > dev->compute_units ||
        p->slices < (unsigned)from || p->wg > k->pipe_wg || parked > k->pipe_floats ||
        groups < p->slices || (uint64_t)rows * p->slices <= groups)
        return 0;
    if (asked == LONG_MIN && (x_dtype != FLASHCL_F32 || parked < k->pipe_floats)) return 0;
    p->kind = FC_PLAN_PIPE;
    p->groups = groups;
    return 1;
}

/* Ordered split row: slices of about 32 KiB of input (two streaming steps of the work-group;
 * the device's figure per input width, softmax.c), and a lag that keeps the bytes read between
 * a slice's two reads within the cache budget (but at least a row: the no-deadlock condition,
 * see cl/softmax_ordered.cl). A row longer than the budget is normalised from its end back, the
 * part read last first. */
static void fc_plan_ordered(fc_plan *p, const fc_softmax_kernels *k, flashcl_dtype x_dtype,
                            int64_t rows, int64_t cols)
{
    const uint64_t xb = fc_dtype_bytes(x_dtype), ucols = (uint64_t)cols;
    const long budget_kb = fc_env_long("FLASHCL_SOFTMAX_L2_BUDGET_KB", 0);
    const long slice_kb = fc_env_long("FLASHCL_SOFTMAX_ORDERED_SLICE_KB", 0);
    const long wg_env = fc_env_long("FLASHCL_SOFTMAX_ORDERED_WG", 0);
    const int wide = x_dtype != FLASHCL_F32; /* 16-bit input: its own slices and budget */
    const uint64_t slice_bytes = slice_kb > 0 ? (uint64_t)slice_kb << 10 : k->ordered_slice[wide];
    const size_t wg_asked = wg_env >= 32 ? fc_ceil_pow2((size_t)wg_env) : k->ordered_wg;
    const size_t wg = wg_asked < k->ordered_wg ? wg_asked : k->ordered_wg;
    uint64_t unit = (uint64_t)wg * fc_chunk_elems(x_dtype) * k->stream_unroll;
    if (unit * xb > slice_bytes) unit = (uint64_t)wg * fc_chunk_elems(x_dtype);
    const uint64_t target = unit * (slice_bytes / (unit * xb) > 0 ? slice_bytes / (unit * xb) : 1);
    uint64_t budget = k->l2_budget[wide], lag;
    if (budget_kb > 0) budget = (uint64_t)budget_kb << 10;
    fc_plan_slices(p, FC_PLAN_ORDERED, wg, ucols, (ucols + target - 1) / target, unit);
    lag = budget / (p->slice_len * xb);
    if (lag < p->slices) lag = p->slices;
    if (lag > (uint64_t)rows * p->slices) lag = (uint64_t)rows * p->slices;
    p->lag = lag;
    p->reverse = (uint64_t)p->slices * p->slice_len * xb > budget;
}

/* The choice made before the ordered split and the rows held as floats. */
static flashcl_status fc_choose_legacy(const fc_cl_context *ctx, const fc_softmax_desc *desc,
                                       fc_plan *p)
{
    const fc_cl_device *dev = &ctx->dev;
    const fc_softmax_kernels *k = &ctx->softmax;
    const int64_t rows = desc->rows, cols = desc->cols;
    /* The cooperative split row (where built and a row fits on the device), for f32 input:
     * measured on an H200 it beat the 3-pass split for f32 (64 x 1M: 219 vs 249 us) but lost
     * for f16 (276 vs 141 us). That was its first form, which streamed what did not fit its
     * registers; the kernel now holds every slice (session 4). */
    const int coop = desc->x_dtype == FLASHCL_F32;
    /* Rows needed before one work-group per row keeps every compute unit busy. */
    const int64_t fill_rows = (int64_t)dev->compute_units * (dev->is_gpu ? 2 : 4);

    switch (desc->variant) {
    case FLASHCL_SOFTMAX_ROW_IN_REGISTERS:
        if (fc_plan_rir(p, k, desc->x_dtype, cols)) return FLASHCL_SUCCESS;
        return fc_fail(FLASHCL_UNSUPPORTED,
                       "softmax ROW_IN_REGISTERS: a row of %lld columns does not fit in one "
                       "work-group's registers on '%s' (at most %zu work-items x %zu elements)",
                       (long long)cols, dev->info.name, k->rir_max_wg,
                       k->rir_chunks * fc_chunk_elems(desc->x_dtype));
    case FLASHCL_SOFTMAX_ONLINE_CHUNKED:
        fc_plan_chunked(p, dev, k, rows);
        return FLASHCL_SUCCESS;
    case FLASHCL_SOFTMAX_SPLIT_ROW:
        if (!coop || !fc_plan_coop(p, dev, k, desc, NULL))
            fc_plan_split(p, dev, k, rows, cols);
        return FLASHCL_SUCCESS;
    default:
        break;
    }

    /* AUTO. Rows that fit a work-group: one read, one write, unless so few rows that most of
     * the device would idle while there is much to do (then spread each row over groups). */
    if (fc_plan_rir(p, k, desc->x_dtype, cols) && (rows >= fill_rows || cols <= 8192))
        return FLASHCL_SUCCESS;
    /* Enough rows for the device: a work-group per row; pass 2 mostly re-reads from the cache
     * (measured on an H200: faster than the cooperative split row for 4096 x 32768 and
     * 1024 x 131072). Few long rows: spread each row over work-groups. */
    if (rows >= fill_rows) {
        fc_plan_chunked(p, dev, k, rows);
        return FLASHCL_SUCCESS;
    }
    if (!coop || !fc_plan_coop(p, dev, k, desc, NULL))
        fc_plan_split(p, dev, k, rows, cols);
    return FLASHCL_SUCCESS;
}

static flashcl_status fc_choose_plan(const fc_cl_context *ctx, const fc_softmax_desc *desc,
                                     fc_coop_room *room, fc_plan *p)
{
    const fc_cl_device *dev = &ctx->dev;
    const fc_softmax_kernels *k = &ctx->softmax;
    const int64_t rows = desc->rows, cols = desc->cols;
    memset(p, 0, sizeof *p);
    if (fc_env_flag("FLASHCL_SOFTMAX_LEGACY")) return fc_choose_legacy(ctx, desc, p);

    switch (desc->variant) {
    case FLASHCL_SOFTMAX_ROW_IN_REGISTERS:
        if (fc_plan_held(p, k, desc, dev->is_gpu) || fc_plan_rir(p, k, desc->x_dtype, cols))
            return FLASHCL_SUCCESS;
        return fc_choose_legacy(ctx, desc, p); /* its message */
    case FLASHCL_SOFTMAX_SPLIT_ROW:
        if (fc_plan_coop(p, dev, k, desc, room)) {
            fc_plan_pipe(p, dev, k, desc->x_dtype, rows);
            return FLASHCL_SUCCESS;
        }
        if (!k->ordered) return fc_choose_legacy(ctx, desc, p);
        fc_plan_ordered(p, k, desc->x_dtype, rows, cols);
        return FLASHCL_SUCCESS;
    case FLASHCL_SOFTMAX_ONLINE_CHUNKED:
        return fc_choose_legacy(ctx, desc, p);
    default:
        break;
    }
    /* AUTO. PoCL (and Oclgrind, to check it): a row per work-item in 16-wide vectors
     * (cl/softmax_rows_vector.cl) as soon as every compute unit gets a row and a row fills a
     * vector; fewer rows keep the split kernels, which spread a row over several, and rows of
     * under 16 columns the kernels below (2-core AVX-512, 20000 x 7 f32 0.37 ms against 0.49;
     * from 17 columns on the vector kernel wins, 20000 x 17 f32 0.57 against 1.56).
     * FLASHCL_SOFTMAX_NO_ROWS_VECTOR=1 turns it off (A/B). */
    if (k->rows_vector_built && rows >= (int64_t)dev->compute_units && cols >= 16 &&
        !fc_env_flag("FLASHCL_SOFTMAX_NO_ROWS_VECTOR")) {
        p->kind = FC_PLAN_VECTOR;
        p->wg = k->rows_vector_wg;
        return FLASHCL_SUCCESS;
    }
    /* Rows that fit a work-group: one read, one write (the legacy choice's caveat about
     * few rows only matters past 8192 columns, beyond the 16-element cap on NVIDIA), held as
     * floats. Short f16 rows took the raw chunks until session 10 (held measured 0.0193 ms
     * against 0.0123 for 32768 x 128 f16 on an H100 in session 7); with today's kernels held
     * is the faster, 0.0091-0.0095 ms against 0.0096-0.0104 in five A/B pairs (H100,
     * 2026-11-25, bench/results/2026-11-25-h100-s10-opencl-softmax-ftz-ab.txt), and on PoCL
     * (2-core machine, 20000 x 7 f16, the rows under 16 columns it runs here) 1.01 ms against
     * 3.78-3.99. */
    if ((cols <= 8192 || rows >= (int64_t)dev->compute_units * (dev->is_gpu ? 2 : 4)) &&
        (fc_plan_held(p, k, desc, dev->is_gpu) || fc_plan_rir(p, k, desc->x_dtype, cols)))
        return FLASHCL_SUCCESS;
    /* Longer rows on a GPU: held in registers by cooperating work-groups, one read. 16-bit rows
     * of more than 64 slices measured faster through the ordered split (H100, 2026-11-25, % of
     * copy bandwidth, 64 x 1M f16 with 64 floats a work-item: 73.4 against 67.3 at 128 slices
     * of 128 items and 66.4 at 64 of 256); at 64 slices the cooperative one is faster (128 x
     * 524288 f16: 78.0 against 74.4; the limit was 32 slices before the kernel's reductions
     * were trimmed in session 11). Up to 4 rows it is faster at any count, as the ordered
     * split's 32 KiB slices leave most of the device idle (H100, 2026-11-25, ms, cooperative
     * against ordered: 3 x 1000003 f16 0.030 vs 0.041, 4 x 1M 0.0163-0.0165 vs 0.0188-0.0191,
     * 2 x 1M 0.0139 vs 0.0153; from 16 rows the ordered split wins, 16 x 1M 0.0387 vs 0.0442).
     * Rows of more slices than compute units, which only the A/B switches
     * FLASHCL_SOFTMAX_COOP_PROBE and _RESIDENT allow, take it whatever their count: it is what
     * those switches measure. */
    if (dev->is_gpu && fc_plan_coop(p, dev, k, desc, room) &&
        (fc_plan_pipe(p, dev, k, desc->x_dtype, rows) || desc->x_dtype == FLASHCL_F32 ||
         p->slices <= 64 || rows <= 4 || !k->ordered || p->slices > dev->compute_units))
        return FLASHCL_SUCCESS;
    memset(p, 0, sizeof *p);
    if (k->ordered && dev->is_gpu) {
        fc_plan_ordered(p, k, desc->x_dtype, rows, cols);
        return FLASHCL_SUCCESS;
    }
    return fc_choose_legacy(ctx, desc, p);
}

flashcl_status fc_softmax_choose_plan(const fc_cl_context *ctx, const fc_softmax_desc *desc,
                                      fc_coop_room *room, fc_plan *p)
{
    const flashcl_status st = fc_choose_plan(ctx, desc, room, p);
    return room && room->status != FLASHCL_SUCCESS ? room->status : st;
}
