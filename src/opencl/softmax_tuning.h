/* The softmax programs' tuning per device (softmax_tuning.c): work-group sizes, which kernels a
 * device gets, the -D options they are built with. softmax.c creates and launches the kernels
 * from the same figures. */
#ifndef FLASHCL_OPENCL_SOFTMAX_TUNING_H
#define FLASHCL_OPENCL_SOFTMAX_TUNING_H

#include <stddef.h>

#include "cl_internal.h"

typedef struct fc_softmax_tuning {
    fc_subgroup_kind sg;
    int sg_size;
    size_t max_wg;          /* largest work-group of any softmax kernel (sizes __local arrays) */
    unsigned rir_chunks, stream_unroll, coop_elems, coop_elems16, half_impl;
    int fast_exp;           /* FC_FAST_EXP: PTX ex2-based exp (NVIDIA) */
    int exp_ftz;            /* FC_EXP_FTZ: its .ftz form where that is exact */
    int exp_shift;          /* FC_EXP_SHIFT: with it, a shifted .ftz form for bf16 outputs */
    int nv_sleep;           /* FC_NV_SLEEP: nanosleep while waiting (NVIDIA sm_70+) */
    int stream_stores;      /* FC_STREAM_STORES: evict-first stores in the ordered split */
    int nv_cvt2;            /* FC_NV_CVT2: paired f16x2/bf16x2 narrowing (NVIDIA sm_80+) */
    int aligned_kernels;    /* FC_ALIGNED_KERNELS: rows held and the cooperative split row also
                               compiled for aligned rows alone (GPUs; cl/softmax.cl) */
    size_t rir_group_wg;    /* work-group size when teams are smaller than one */
    size_t resident_items;  /* work-items one compute unit runs at once (an estimate) */
    size_t chunked_wg, split_wg, coop_wg;
    int coop;
    int coop_bits;          /* FC_COOP_BITS: the cooperative split row holding 16-bit input as
                               its bits (cl/softmax_cooperative_bits.cl) */
    int resident_probe;     /* FC_RESIDENT_PROBE: the cooperative kernels answer the residency
                               probe (FLASHCL_SOFTMAX_COOP_PROBE=1 when the program is built) */
    unsigned pipe_floats;   /* FC_PIPE_FLOATS: floats a work-group of the pipelined cooperative
                               split row parks in local memory (0: not built) */
    int ordered;            /* FC_ORDERED: the ticket-ordered split row */
    cl_ulong l2_budget[2];  /* [16-bit input]: bytes the ordered split reads between a slice's
                               two reads */
    cl_ulong ordered_slice[2]; /* [16-bit input]: the input bytes of its slices */
    int rows_vector;        /* FC_ROWS_VECTOR: a row per work-item in float16 values (CPUs) */
    size_t rows_vector_wg;  /* its work-group size */
    const char *cl_std;     /* "" or a -cl-std= that unlocks sub-group functions */
} fc_softmax_tuning;

/* The largest power of two <= v (1 for 0). */
static inline size_t fc_floor_pow2(size_t v)
{
    size_t p = 1;
    while (p * 2 <= v) p *= 2;
    return p;
}

/* A pure function of the device, so that the options (at build time) and the launch limits (at
 * kernel creation, also for a program loaded from the cache) always agree. */
void fc_softmax_tune(const fc_cl_device *dev, fc_softmax_tuning *t);

/* Floats a work-item of the cooperative split row holds in the program of `part`. */
unsigned fc_coop_elems(const fc_softmax_tuning *t, int part);

#endif
