/* The choice of a softmax variant and its launch geometry (softmax_plan.c), for the launcher in
 * softmax.c. */
#ifndef FLASHCL_OPENCL_SOFTMAX_PLAN_H
#define FLASHCL_OPENCL_SOFTMAX_PLAN_H

#include "cl_internal.h"

typedef enum fc_plan_kind {
    FC_PLAN_RIR,     /* softmax_rows_in_registers: raw 16-byte chunks in registers */
    FC_PLAN_HELD,    /* softmax_rows_held8/12/16/24/32: the row in registers as floats */
    FC_PLAN_CHUNKED, /* softmax_online_chunked */
    FC_PLAN_SPLIT,   /* softmax_split_row_partials + softmax_split_row_normalize */
    FC_PLAN_COOP,    /* softmax_split_row_cooperative */
    FC_PLAN_ORDERED, /* softmax_split_row_ordered */
    FC_PLAN_VECTOR,  /* softmax_rows_vector: a row per work-item in 16-wide vectors (CPUs) */
    FC_PLAN_PIPE     /* softmax_split_row_pipelined */
} fc_plan_kind;

/* Where a plan's count of resident work-groups comes from (fc_coop_room). */
typedef enum fc_resident_source {
    FC_RESIDENT_UNITS,   /* one a compute unit: the default bound */
    FC_RESIDENT_PROBED,  /* the residency probe (FLASHCL_SOFTMAX_COOP_PROBE=1) */
    FC_RESIDENT_ASSUMED  /* FLASHCL_SOFTMAX_COOP_RESIDENT=n a compute unit (A/B only: unsafe) */
} fc_resident_source;

typedef struct fc_plan {
    fc_plan_kind kind;
    size_t wg;              /* work-group size */
    size_t groups;          /* online chunked, pipelined: grid size (work-groups loop over rows
                               or tickets) */
    unsigned team;          /* rows in registers / held: work-items per row */
    unsigned elems;         /* rows held: elements per work-item (8, 12, 16, 24 or 32) */
    cl_ulong slice_len;     /* split rows: elements per slice (a multiple of a chunk per item) */
    unsigned slices;        /* split rows: slices per row */
    cl_ulong lag;           /* ordered: partial items between a slice's two items (>= slices) */
    int reverse;            /* ordered: normalise a row's slices from the last one back */
    int shifted;            /* cooperative: rows not 16-byte aligned, in their shifted layout
                               (cl/softmax_cooperative.cl; the kernel's vec = 2) */
    unsigned bits;          /* cooperative: 16-bit slices held as bits, this many elements a
                               work-item (64 or 128; cl/softmax_cooperative_bits.cl), or 0 */
    uint64_t resident;      /* cooperative, pipelined: the work-groups counted on being resident
                               at once, which bounds slices (fc_coop_room) */
    fc_resident_source resident_from; /* and where that count came from */
} fc_plan;

static inline size_t fc_dtype_bytes(flashcl_dtype dt)
{
    return dt == FLASHCL_F32 ? 4 : 2;
}

/* Elements of the 16-byte chunks kernels move (FC_CHUNK in cl/dtype.h). */
static inline size_t fc_chunk_elems(flashcl_dtype dt)
{
    return 16 / fc_dtype_bytes(dt);
}

/* Whether every row of x and y starts on a 16-byte chunk (buffers start aligned), which the
 * kernels' 16-byte accesses need; else they go element by element, or shifted (fc_plan). */
static inline int fc_softmax_rows_aligned(const fc_softmax_desc *desc)
{
    const uint64_t chunk = fc_chunk_elems(desc->x_dtype);
    const uint64_t x_off = desc->x_offset / fc_dtype_bytes(desc->x_dtype);
    const uint64_t y_off = desc->y_offset / fc_dtype_bytes(desc->y_dtype);
    return x_off % chunk == 0 && y_off % chunk == 0 &&
           (desc->rows == 1 || ((uint64_t)desc->x_row_stride % chunk == 0 &&
                                (uint64_t)desc->y_row_stride % chunk == 0));
}

/* The row layout a plan launches its kernels with (`vec`): 2 for a plan in the shifted layout
 * (fc_plan.shifted), else 1 where every row starts on a chunk, 0 element by element. */
static inline int fc_softmax_layout(const fc_softmax_desc *desc, int shifted)
{
    return shifted ? 2 : fc_softmax_rows_aligned(desc);
}

/* The kernel for rows in layout `vec` (softmax.c's; 2: shifted): the aligned twin for vec 1
 * where it was built. */
static inline cl_kernel fc_layout_kernel(cl_kernel plain, cl_kernel aligned, int vec)
{
    return vec == 1 && aligned ? aligned : plain;
}

/* The kernel a cooperative plan held as `bits` (0: as floats) launches for rows in layout
 * `vec`. */
static inline cl_kernel fc_coop_kernel(const fc_softmax_kernels *k, unsigned bits, int xd, int yd,
                                       int vec)
{
    if (bits) return k->split_row_cooperative_bits[bits == 128][xd][yd];
    return fc_layout_kernel(k->split_row_cooperative[xd][yd],
                            k->split_row_cooperative_aligned[xd][yd], vec);
}

/* How many work-groups of the cooperative split row may count as resident at once, the bound on
 * a row's slices (the no-deadlock condition, cl/softmax_cooperative.cl): one a compute unit,
 * unless the environment asks for more (fc_coop_room_init: FLASHCL_SOFTMAX_COOP_PROBE=1 probes
 * the kernel, FLASHCL_SOFTMAX_COOP_RESIDENT=n assumes n a compute unit). The plan asks only for
 * rows of more slices than compute units. */
typedef struct fc_coop_room {
    fc_cl_context *probe;   /* the context whose kernels are probed (softmax_resident.c), or
                               NULL: no probe */
    uint64_t per_unit;      /* FLASHCL_SOFTMAX_COOP_RESIDENT's n, or 0 */
    flashcl_status status;  /* a failed probe's, with the message set: the plan's answer */
} fc_coop_room;

/* Reads the environment for fc_softmax_choose_plan; `ctx` is where probes run. */
void fc_coop_room_init(fc_coop_room *room, fc_cl_context *ctx);

/* Fills *p for one validated request; FLASHCL_UNSUPPORTED when a forced variant cannot run the
 * shape (with the message set), or a failed probe's status. room: what may raise the bound on
 * cooperative slices (NULL: one group a compute unit). */
flashcl_status fc_softmax_choose_plan(const fc_cl_context *ctx, const fc_softmax_desc *desc,
                                      fc_coop_room *room, fc_plan *p);

#endif
