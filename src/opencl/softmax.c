/* Host side of cl/softmax.cl, cl/softmax_cooperative.cl and cl/softmax_ordered.cl: build
 * options per device, kernel creation, and the launch of the variant softmax_plan.c chose for
 * one validated request. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../error.h"
#include "../text.h"
#include "softmax_plan.h"
#include "split_state.h"

/* ---- tuning per device ------------------------------------------------------------------------ */

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
    int ordered;            /* FC_ORDERED: the ticket-ordered split row */
    cl_ulong l2_budget[2];  /* [16-bit input]: bytes the ordered split reads between a slice's
                               two reads */
    cl_ulong ordered_slice[2]; /* [16-bit input]: the input bytes of its slices */
    int rows_vector;        /* FC_ROWS_VECTOR: a row per work-item in float16 values (CPUs) */
    size_t rows_vector_wg;  /* its work-group size */
    const char *cl_std;     /* "" or a -cl-std= that unlocks sub-group functions */
} fc_softmax_tuning;

static size_t fc_floor_pow2(size_t v)
{
    size_t p = 1;
    while (p * 2 <= v) p *= 2;
    return p;
}

/* A pure function of the device, so the options (at build time) and the launch limits (at
 * kernel creation, also for a program loaded from the cache) always agree. */
static void fc_softmax_tune(const fc_cl_device *dev, fc_softmax_tuning *t)
{
    size_t dev_wg = dev->max_work_group_size ? dev->max_work_group_size : 64;
    memset(t, 0, sizeof *t);
    t->sg = dev->subgroups;
    t->sg_size = dev->subgroup_size > 0 ? dev->subgroup_size : 32;
    t->stream_unroll = 4;
    t->cl_std = "";
    if (dev->is_gpu) {
        t->aligned_kernels = 1;
        /* 4 chunks (64 bytes) per work-item: ~40 registers, so a compute unit keeps 1-2
         * thousand work-items and ~100 KiB in flight (H200: 2 and 8 chunks were slower). */
        t->max_wg = fc_floor_pow2(dev_wg < 1024 ? dev_wg : 1024);
        t->rir_chunks = 4;
        t->rir_group_wg = 128;
        t->resident_items = 2048;
        t->chunked_wg = 512;
        t->split_wg = 256;
        t->coop_wg = 1024; /* the largest; softmax_plan.c starts at 128 */
        t->coop = (dev->vendor == FC_VENDOR_NVIDIA || dev->vendor == FC_VENDOR_AMD) &&
                  dev->compute_units >= 2 &&
                  dev->has_int64_atomics;
        /* A sixth of an H100's 50 MB L2 per direction (the reads between a slice's two reads
         * and as many writes). A probe re-reading S MiB while writing S MiB evict-first kept
         * the re-reads at the write rate up to S = 8 and lost them past 16; the ordered split
         * measured best at 6-8 MiB (H100, 2026-11-25, % of copy, 12 MiB -> 8: 64 x 1M f16
         * 67.7 -> 73.0, 128 x 512K f16 67.5 -> 74.3, 32 x 2M f16 67.9 -> 70.4, f32 68.1 ->
         * 72.4; 16 MiB and more lost to 12 (bench/results/2026-11-25-h100-session12.md). NVIDIA's
         * OpenCL reports a 4224 KiB global memory cache for an H100 (not its L2), so the
         * figure is not taken from the device. */
        t->ordered = (dev->vendor == FC_VENDOR_NVIDIA || dev->vendor == FC_VENDOR_AMD) &&
                     dev->has_int64_atomics;
        t->l2_budget[0] = t->l2_budget[1] = (cl_ulong)8 << 20;
        t->ordered_slice[0] = t->ordered_slice[1] = 32768;
        /* An H200 (HBM3e, 4.8 TB/s against the H100's 3.35, the same 50 MB L2) runs 16-bit
         * rows best with slices of 64 KiB and 32 MiB between a slice's reads. % of copy, NVIDIA
         * OpenCL, 2026-11-26, against 32 KiB / 8 MiB in the same call: 8 x 8M f16 54.2 -> 59.9,
         * 16 x 4M 55.7 -> 59.9, 32 x 2M 58.0 -> 60.3, 64 x 1M 59.7 -> 59.9, bf16 alike
         * (bench/results/2026-11-26-h200-s17-opencl-ordered-h200-tuning.txt); slices of 48 or
         * 96 KiB and budgets of 24-48 MiB fell between (-s17-ordered-sweeps.txt). f32 rows keep
         * 32 KiB / 8 MiB there, and an H100 loses with 64 KiB / 16 MiB (64 x 1M f16 62.8 %
         * against 73.0, session 12), so the figures are the H200's alone. */
        if (dev->vendor == FC_VENDOR_NVIDIA && strstr(dev->info.name, "H200")) {
            t->l2_budget[1] = (cl_ulong)32 << 20;
            t->ordered_slice[1] = 65536;
        }
    } else {
        /* CPUs (PoCL): work-items are loop iterations vectorised across lanes; a few hundred
         * per work-group keep private arrays in cache. No cooperative path: CPU threads give
         * no guarantee that a waiting work-group lets its partners run. */
        t->max_wg = fc_floor_pow2(dev_wg < 256 ? dev_wg : 256);
        t->rir_chunks = 4;
        t->rir_group_wg = 64;
        t->resident_items = 256;
        t->chunked_wg = 128;
        t->split_wg = 128;
        t->coop_wg = 0;
        t->coop = 0;
        /* PoCL runs each started work-group to completion on a thread of its own, which is all
         * the ordered split needs (cl/softmax_ordered.cl); AUTO does not pick it on CPUs, but a
         * forced SPLIT_ROW runs it, so the tests reach it. */
        t->ordered = dev->vendor == FC_VENDOR_POCL && dev->has_int64_atomics;
        t->l2_budget[0] = t->l2_budget[1] = (cl_ulong)1 << 20;
        t->ordered_slice[0] = t->ordered_slice[1] = 32768;
        /* PoCL: a row per work-item in float16 values (cl/softmax_rows_vector.cl), a few rows
         * per work-group (a work-group is one task of PoCL's thread pool). 2-core AVX-512
         * machine, 2026-11-22, f32 / f16 / bf16 ms against the kernels above: 4096x1024 2.02 /
         * 2.42 / 3.14 against 13.1 / 9.3 / 11.8; 64x65536 1.34 / 1.92 / 2.98 against 9.8 / 12.8
         * / 16.8. Not Rusticl: llvmpipe ends every loop of an invocation after 65535 passes in
         * all (see discovery.c), which one work-item walking a long row would exceed. */
        t->rows_vector = dev->vendor == FC_VENDOR_POCL;
        t->rows_vector_wg = 4;
    }
    /* Oclgrind (a GPU by its device type) runs work-groups one after another or each on a
     * thread of its own: the ordered split is safe there, and its checks should see it. */
    if (strstr(dev->info.name, "Oclgrind")) {
        t->ordered = dev->has_int64_atomics;
        t->rows_vector = 1; /* and the CPU kernel, which AUTO then takes */
        t->rows_vector_wg = 4;
    }
    if (t->sg == FC_SG_NV_PTX && t->max_wg < 32) t->sg = FC_SG_NONE; /* warps must be whole */
    if (t->rir_group_wg > t->max_wg) t->rir_group_wg = t->max_wg;
    if (t->chunked_wg > t->max_wg) t->chunked_wg = t->max_wg;
    if (t->split_wg > t->max_wg) t->split_wg = t->max_wg;
    if (t->coop_wg > t->max_wg) t->coop_wg = t->max_wg;
    t->coop_elems = 32;
    t->coop_elems16 = t->sg == FC_SG_NV_PTX ? 64 : 32; /* see fc_coop_elems */
    /* f16 conversions: NVIDIA's vload/vstore_half are scalar and its compiler accepts PTX cvt;
     * CPUs take vload_half4 / vstore_half4_rte, which PoCL vectorises (2-core AVX-512 machine,
     * 2026-11-22, f16 softmax: 4096x1024 5.9 ms against 18.2 with the integer code, 64x65536
     * 6.7 against 24.5; the scalar vload_half alone gained nothing); other GPUs integer code on
     * the bits (not measured with the built-ins). */
    t->half_impl = t->sg == FC_SG_NV_PTX ? 2 : dev->is_gpu ? 1 : 3;
    /* FC_FAST_EXP (NVIDIA): the per-element exp as ex2.approx of x log2 e, 2 instructions
     * against the ~8 of OpenCL's exp, for the 16-bit programs only (fc_cl_softmax_options),
     * where the kernels run out of issue slots before memory bandwidth. The f32 programs wait
     * on memory and keep exp's accuracy. FLASHCL_SOFTMAX_NO_FAST_EXP=1 turns it off (A/B).
     * (An earlier, compensated variant cost as much as exp and changed nothing.) */
    t->fast_exp = t->sg == FC_SG_NV_PTX && !fc_env_flag("FLASHCL_SOFTMAX_NO_FAST_EXP");
    /* Exps that only join a sum or end in an f16 output as ex2.approx.ftz (cl/softmax_exp.h
     * says why that is exact), and those that end in a bf16 output as the .ftz ex2 of the
     * argument shifted by 64, scaled back by 2^-64: two instructions an element fewer. H100
     * (2026-11-25), % of copy bandwidth against neither, same call: 4096x32768 f16 82.6-83.1
     * vs 76.8, 1024x131072 f16 81.7-82.0 vs 75.5-75.8, bf16 (shift) 78.4 vs 75.9 and 77.7-77.8
     * vs 75.1; 64x1M / 8x8M f16 +1 point; short rows within noise. FLASHCL_SOFTMAX_NO_FTZ=1
     * and FLASHCL_SOFTMAX_NO_EXP_SHIFT=1 turn them off (A/B). */
    t->exp_ftz = t->fast_exp && !fc_env_flag("FLASHCL_SOFTMAX_NO_FTZ");
    t->exp_shift = t->exp_ftz && !fc_env_flag("FLASHCL_SOFTMAX_NO_EXP_SHIFT");
    t->nv_sleep = 0;
    if (t->sg == FC_SG_NV_PTX) t->nv_sleep = dev->nv_compute_major >= 7;
    /* st.global.cs through inline PTX, as the CUDA kernels' second pass stores (cuda/softmax.cuh). */
    t->stream_stores = t->sg == FC_SG_NV_PTX;
    /* Measured on an H100: 16384 x 1024 bf16 80% of copy bandwidth against 73% without,
     * 4096 x 32768 bf16 59% against 55% (FLASHCL_SOFTMAX_NO_CVT2=1 turns it off, for A/B). */
    t->nv_cvt2 = t->sg == FC_SG_NV_PTX && dev->nv_compute_major >= 8 &&
                 !fc_env_flag("FLASHCL_SOFTMAX_NO_CVT2");
    /* cl_khr_subgroups functions are declared for OpenCL C 2.0+ only. */
    if (t->sg == FC_SG_KHR) {
        int major = dev->opencl_c_major;
        t->cl_std = major >= 3 ? "-cl-std=CL3.0" : major == 2 ? "-cl-std=CL2.0" : "";
    }
}

/* Floats a work-item of the cooperative split row holds in the program of `part` (its
 * FC_COOP_ELEMS, and what the plan assumes for that input dtype): 32, and 64 for 16-bit input on
 * NVIDIA, whose slices are then twice as long (fewer per row, half the fixed cost a byte).
 * H100, 2026-11-25, % of copy, 32 -> 64 (bench/results/2026-11-25-h100-session12.md):
 * 1024x131072 f16 87.7 -> 90.0, 4096x32768 f16 90.3 -> 92.6, 256x262144 f16 70.7 -> 83.7;
 * f32 with 64 fell to 56-63 (its program is capped at 64 registers), 48 lay between. */
static unsigned fc_coop_elems(const fc_softmax_tuning *t, int part)
{
    return part == FC_PART_F16 || part == FC_PART_BF16 ? t->coop_elems16 : t->coop_elems;
}

void fc_cl_softmax_options(const fc_cl_device *dev, int part, char *out, size_t out_size)
{
    static const char *const sg_define[] = {"FC_SG_NONE", "FC_SG_KHR", "FC_SG_INTEL",
                                            "FC_SG_NV_PTX"};
    fc_softmax_tuning t;
    fc_softmax_tune(dev, &t);
    /* NVIDIA: the f32 program's kernels capped at 64 registers (more work-groups per SM). H100,
     * 2026-11-22: 64x1M f32 81% of copy bandwidth against 71% (the cooperative split row at 128
     * slices), others within 1.2 points; the 16-bit programs measured slower capped (16384x1024
     * f16 72% against 82%), so they keep the compiler's choice. */
    const char *extra =
        t.sg == FC_SG_NV_PTX && part == FC_PART_F32 ? "-cl-nv-maxrregcount=64 " : "";
    snprintf(out, out_size,
             "%s%s -D%s -DFC_SG_SIZE=%d -DFC_MAX_WG=%zu -DFC_RIR_CHUNKS=%u "
             "-DFC_STREAM_UNROLL=%u -DFC_COOP=%d -DFC_COOP_ELEMS=%u "
             "-DFC_HALF_IMPL=%u -DFC_FAST_EXP=%d -DFC_NV_SLEEP=%d -DFC_ORDERED=%d "
             "-DFC_STREAM_STORES=%d -DFC_NV_CVT2=%d -DFC_ROWS_VECTOR=%d -DFC_DTYPES=%d "
             "-DFC_EXP_FTZ=%d -DFC_EXP_SHIFT=%d -DFC_ALIGNED_KERNELS=%d",
             extra, t.cl_std, sg_define[t.sg], t.sg_size, t.max_wg, t.rir_chunks, t.stream_unroll,
             t.coop, fc_coop_elems(&t, part), t.half_impl,
             t.fast_exp && (part == FC_PART_F16 || part == FC_PART_BF16), t.nv_sleep, t.ordered,
             t.stream_stores, t.nv_cvt2, t.rows_vector,
             part == FC_PART_ALL_DTYPES ? 7 : 1 << part, t.exp_ftz, t.exp_shift,
             t.aligned_kernels);
}

/* ---- kernels ----------------------------------------------------------------------------------- */

static const char *const fc_dtype_suffix[FC_DTYPE_COUNT] = {"f32", "f16", "bf16"};

/* Kinds of kernel whose work-group limits the launches share (kernel_wg's second index). */
enum { FC_WG_RIR, FC_WG_HELD, FC_WG_CHUNKED, FC_WG_SPLIT, FC_WG_COOP, FC_WG_ORDERED,
       FC_WG_HELD32, FC_WG_VECTOR };

static flashcl_status fc_create_kernel(fc_cl_context *ctx, cl_program program, cl_kernel *out,
                                       size_t *max_wg, const char *base, int xd, int yd)
{
    char name[96], what[128];
    cl_int err;
    size_t wg = 0;
    if (yd < 0)
        snprintf(name, sizeof name, "%s_%s", base, fc_dtype_suffix[xd]);
    else
        snprintf(name, sizeof name, "%s_%s_%s", base, fc_dtype_suffix[xd], fc_dtype_suffix[yd]);
    *out = clCreateKernel(program, name, &err);
    if (err != CL_SUCCESS) {
        *out = NULL;
        snprintf(what, sizeof what, "clCreateKernel(%s)", name);
        return fc_cl_fail(err, what);
    }
    /* The kernel's own limit (registers, local memory) may be below the device's. */
    err = clGetKernelWorkGroupInfo(*out, ctx->dev.device, CL_KERNEL_WORK_GROUP_SIZE, sizeof wg,
                                   &wg, NULL);
    if (err != CL_SUCCESS) {
        snprintf(what, sizeof what, "clGetKernelWorkGroupInfo(%s)", name);
        return fc_cl_fail(err, what);
    }
    if (wg < *max_wg) *max_wg = wg;
    return FLASHCL_SUCCESS;
}

/* A kernel and, with `aligned` (FC_ALIGNED_KERNELS), its `base`_aligned twin for rows that start
 * 16-byte aligned; max_wg receives the smaller limit of the two. */
static flashcl_status fc_create_kernel_twins(fc_cl_context *ctx, cl_program program,
                                             cl_kernel *plain, cl_kernel *twin, int aligned,
                                             size_t *max_wg, const char *base, int xd, int yd)
{
    char name[80];
    flashcl_status st = fc_create_kernel(ctx, program, plain, max_wg, base, xd, yd);
    if (st != FLASHCL_SUCCESS || !aligned) return st;
    snprintf(name, sizeof name, "%s_aligned", base);
    return fc_create_kernel(ctx, program, twin, max_wg, name, xd, yd);
}

/* The kernels of one input dtype; wg[kind] receives their smallest work-group limits. */
static flashcl_status fc_create_input_kernels(fc_cl_context *ctx, cl_program program,
                                              const fc_softmax_tuning *t, int xd, size_t *wg)
{
    fc_softmax_kernels *k = &ctx->softmax;
    flashcl_status st;
    int yd, kind;
    for (kind = 0; kind < FC_SOFTMAX_WG_KINDS; kind++) wg[kind] = SIZE_MAX;
    st = fc_create_kernel(ctx, program, &k->split_row_partials[xd], &wg[FC_WG_SPLIT],
                          "softmax_split_row_partials", xd, -1);
    for (yd = 0; yd < FC_DTYPE_COUNT && st == FLASHCL_SUCCESS; yd++) {
        st = fc_create_kernel(ctx, program, &k->rows_in_registers[xd][yd], &wg[FC_WG_RIR],
                              "softmax_rows_in_registers", xd, yd);
        if (st == FLASHCL_SUCCESS)
            st = fc_create_kernel(ctx, program, &k->online_chunked[xd][yd], &wg[FC_WG_CHUNKED],
                                  "softmax_online_chunked", xd, yd);
        if (st == FLASHCL_SUCCESS)
            st = fc_create_kernel(ctx, program, &k->split_row_normalize[xd][yd],
                                  &wg[FC_WG_SPLIT], "softmax_split_row_normalize", xd, yd);
        if (st == FLASHCL_SUCCESS)
            st = fc_create_kernel_twins(ctx, program, &k->rows_held[0][xd][yd],
                                        &k->rows_held_aligned[0][xd][yd], t->aligned_kernels,
                                        &wg[FC_WG_HELD], "softmax_rows_held8", xd, yd);
        if (st == FLASHCL_SUCCESS)
            st = fc_create_kernel_twins(ctx, program, &k->rows_held[1][xd][yd],
                                        &k->rows_held_aligned[1][xd][yd], t->aligned_kernels,
                                        &wg[FC_WG_HELD], "softmax_rows_held16", xd, yd);
        if (st == FLASHCL_SUCCESS && xd != FLASHCL_F32)
            st = fc_create_kernel_twins(ctx, program, &k->rows_held[2][xd][yd],
                                        &k->rows_held_aligned[2][xd][yd], t->aligned_kernels,
                                        &wg[FC_WG_HELD32], "softmax_rows_held32", xd, yd);
        if (st == FLASHCL_SUCCESS && t->coop)
            st = fc_create_kernel_twins(ctx, program, &k->split_row_cooperative[xd][yd],
                                        &k->split_row_cooperative_aligned[xd][yd],
                                        t->aligned_kernels, &wg[FC_WG_COOP],
                                        "softmax_split_row_cooperative", xd, yd);
        if (st == FLASHCL_SUCCESS && t->ordered)
            st = fc_create_kernel(ctx, program, &k->split_row_ordered[xd][yd],
                                  &wg[FC_WG_ORDERED], "softmax_split_row_ordered", xd, yd);
        if (st == FLASHCL_SUCCESS && t->rows_vector)
            st = fc_create_kernel(ctx, program, &k->rows_vector[xd][yd], &wg[FC_WG_VECTOR],
                                  "softmax_rows_vector", xd, yd);
    }
    return st;
}

static size_t fc_min(size_t a, size_t b) { return a < b ? a : b; }

/* Sets the launch limits from the tuning and the kernels of every input dtype created so far
 * (so, once every part is created, from all of them, in whatever order they came). Fails when
 * NVIDIA's warp shuffles would not get a whole warp. */
static flashcl_status fc_set_limits(fc_cl_context *ctx, const fc_softmax_tuning *t)
{
    fc_softmax_kernels *k = &ctx->softmax;
    size_t wg[FC_SOFTMAX_WG_KINDS];
    int kind, xd;
    for (kind = 0; kind < FC_SOFTMAX_WG_KINDS; kind++) {
        wg[kind] = SIZE_MAX;
        for (xd = 0; xd < FC_DTYPE_COUNT; xd++)
            if (k->part_ready[xd] && k->kernel_wg[xd][kind] < wg[kind])
                wg[kind] = k->kernel_wg[xd][kind];
    }
    /* Work-group sizes: powers of two within both the tuning and every kernel's own limit. */
    k->rir_chunks = t->rir_chunks;
    for (xd = 0; xd < FC_DTYPE_COUNT; xd++) /* each input dtype has its own program */
        k->coop_elems[xd] = fc_coop_elems(t, xd);
    k->rir_max_wg = fc_floor_pow2(fc_min(wg[FC_WG_RIR], t->max_wg));
    k->rir_group_wg = t->rir_group_wg;
    k->resident_items = t->resident_items;
    k->chunked_wg = fc_floor_pow2(fc_min(wg[FC_WG_CHUNKED], t->chunked_wg));
    k->split_wg = fc_floor_pow2(fc_min(wg[FC_WG_SPLIT], t->split_wg));
    k->coop_wg = t->coop ? fc_floor_pow2(fc_min(wg[FC_WG_COOP], t->coop_wg)) : 0;
    k->coop = t->coop;
    k->held_max_wg = fc_floor_pow2(fc_min(wg[FC_WG_HELD], t->max_wg));
    /* rows_held32 exists in the 16-bit programs only (SIZE_MAX here without one: unused then,
     * the plan takes it for 16-bit input alone); a team must still be a whole warp. */
    k->held32_max_wg = fc_floor_pow2(fc_min(wg[FC_WG_HELD32], t->max_wg));
    if (k->held32_max_wg < 32) k->held32_max_wg = 0;
    k->ordered_wg = t->ordered ? fc_floor_pow2(fc_min(wg[FC_WG_ORDERED], t->split_wg)) : 0;
    k->ordered = t->ordered;
    k->rows_vector_built = t->rows_vector;
    k->rows_vector_wg =
        t->rows_vector ? fc_floor_pow2(fc_min(wg[FC_WG_VECTOR], t->rows_vector_wg)) : 0;
    k->stream_unroll = t->stream_unroll;
    memcpy(k->l2_budget, t->l2_budget, sizeof k->l2_budget);
    memcpy(k->ordered_slice, t->ordered_slice, sizeof k->ordered_slice);
    if (t->sg == FC_SG_NV_PTX &&
        (k->rir_max_wg < 32 || k->held_max_wg < 32 || k->chunked_wg < 32 || k->split_wg < 32 ||
         (t->coop && k->coop_wg < 32) || (t->ordered && k->ordered_wg < 32)))
        return fc_fail(FLASHCL_UNSUPPORTED,
                       "softmax kernels on '%s' cannot run a full 32-lane warp per work-group",
                       ctx->dev.info.name);
    return FLASHCL_SUCCESS;
}

/* FLASHCL_SOFTMAX_TRACE=1: the work-group limits the driver reported for one part's kernels
 * (the smallest over each kind's kernels) and the launch limits they give, on stderr.
 * NVIDIA's driver (580, H100) reports 256 for every kernel, a 10-register copy kernel included,
 * though it launches work-groups of 1024; taking 1024 where the registers allow (all programs
 * capped at 64) measured slower on every shape it changed (bench/results, session 10), so the
 * reported limit stays the rule. */
static void fc_trace_limits(const fc_cl_context *ctx, int part)
{
    static const char *const kinds[FC_SOFTMAX_WG_KINDS] = {
        "rows_in_registers", "rows_held8/16", "online_chunked", "split_row",
        "split_row_cooperative", "split_row_ordered", "rows_held32", "rows_vector"};
    const fc_softmax_kernels *k = &ctx->softmax;
    int xd, kind;
    for (xd = 0; xd < FC_DTYPE_COUNT; xd++) {
        if ((part != FC_PART_ALL_DTYPES && part != xd) || !k->part_ready[xd]) continue;
        fprintf(stderr, "flashcl softmax (opencl): %s kernels' work-group limits:",
                fc_dtype_suffix[xd]);
        for (kind = 0; kind < FC_SOFTMAX_WG_KINDS; kind++)
            if (k->kernel_wg[xd][kind] != SIZE_MAX)
                fprintf(stderr, " %s %zu", kinds[kind], k->kernel_wg[xd][kind]);
        fputc('\n', stderr);
    }
    fprintf(stderr,
            "flashcl softmax (opencl): launch limits: rows_in_registers %zu, rows_held %zu, "
            "rows_held32 %zu, cooperative %zu, ordered %zu\n",
            k->rir_max_wg, k->held_max_wg, k->held32_max_wg, k->coop_wg, k->ordered_wg);
}

flashcl_status fc_cl_softmax_create_kernels(fc_cl_context *ctx, cl_program program, int part)
{
    fc_softmax_kernels *k = &ctx->softmax;
    fc_softmax_tuning t;
    flashcl_status st = FLASHCL_SUCCESS;
    int xd;

    fc_softmax_tune(&ctx->dev, &t);
    for (xd = 0; xd < FC_DTYPE_COUNT && st == FLASHCL_SUCCESS; xd++) {
        if (part != FC_PART_ALL_DTYPES && part != xd) continue;
        st = fc_create_input_kernels(ctx, program, &t, xd, k->kernel_wg[xd]);
        k->part_ready[xd] = st == FLASHCL_SUCCESS;
    }
    if (st == FLASHCL_SUCCESS) st = fc_set_limits(ctx, &t);
    if (st == FLASHCL_SUCCESS && fc_env_flag("FLASHCL_SOFTMAX_TRACE")) fc_trace_limits(ctx, part);
    if (st != FLASHCL_SUCCESS) fc_cl_softmax_release_kernels(ctx, part);
    return st;
}

void fc_cl_softmax_release_kernels(fc_cl_context *ctx, int part)
{
    fc_softmax_kernels *k = &ctx->softmax;
    int xd, yd;
    for (xd = 0; xd < FC_DTYPE_COUNT; xd++) {
        if (part != FC_PART_ALL_DTYPES && part != xd) continue;
        if (k->split_row_partials[xd]) clReleaseKernel(k->split_row_partials[xd]);
        k->split_row_partials[xd] = NULL;
        for (yd = 0; yd < FC_DTYPE_COUNT; yd++) {
            cl_kernel *pair[] = {
                &k->rows_in_registers[xd][yd],   &k->rows_held[0][xd][yd],
                &k->rows_held[1][xd][yd],        &k->rows_held[2][xd][yd],
                &k->online_chunked[xd][yd],
                &k->split_row_normalize[xd][yd], &k->split_row_cooperative[xd][yd],
                &k->split_row_ordered[xd][yd],   &k->rows_vector[xd][yd],
                &k->rows_held_aligned[0][xd][yd], &k->rows_held_aligned[1][xd][yd],
                &k->rows_held_aligned[2][xd][yd], &k->split_row_cooperative_aligned[xd][yd]};
            size_t i;
            for (i = 0; i < sizeof pair / sizeof pair[0]; i++) {
                if (*pair[i]) clReleaseKernel(*pair[i]);
                *pair[i] = NULL;
            }
        }
        k->part_ready[xd] = 0;
    }
}

/* ---- launch --------------------------------------------------------------------------------- */

/* Grows ctx->scratch to at least `bytes` (under launch_lock). Kernels already enqueued keep the
 * old buffer alive through their own reference. */
static flashcl_status fc_scratch_reserve(fc_cl_context *ctx, size_t bytes)
{
    cl_int err;
    cl_mem mem;
    if (ctx->scratch && ctx->scratch_bytes >= bytes) return FLASHCL_SUCCESS;
    bytes = (bytes + 65535) / 65536 * 65536;
    mem = clCreateBuffer(ctx->context, CL_MEM_READ_WRITE, bytes, NULL, &err);
    if (err != CL_SUCCESS) return fc_cl_fail(err, "clCreateBuffer(softmax scratch)");
    if (ctx->scratch) clReleaseMemObject(ctx->scratch);
    ctx->scratch = mem;
    ctx->scratch_bytes = bytes;
    return FLASHCL_SUCCESS;
}

typedef struct fc_arg {
    size_t size;
    const void *value;
} fc_arg;
#define FC_ARG(v) {sizeof(v), &(v)}

static flashcl_status fc_launch(fc_cl_context *ctx, cl_kernel kernel, const fc_arg *args,
                                cl_uint nargs, size_t groups, size_t wg)
{
    char name[96] = "softmax", what[160];
    const char *call = "clSetKernelArg";
    size_t global = groups * wg;
    cl_int err = CL_SUCCESS;
    cl_uint i;
    for (i = 0; i < nargs && err == CL_SUCCESS; i++)
        err = clSetKernelArg(kernel, i, args[i].size, args[i].value);
    if (err == CL_SUCCESS) {
        call = "clEnqueueNDRangeKernel";
        err = clEnqueueNDRangeKernel(ctx->queue, kernel, 1, NULL, &global, &wg, 0, NULL, NULL);
    }
    if (err == CL_SUCCESS) return FLASHCL_SUCCESS;
    clGetKernelInfo(kernel, CL_KERNEL_FUNCTION_NAME, sizeof name, name, NULL);
    snprintf(what, sizeof what, "%s(%s)", call, name);
    return fc_cl_fail(err, what);
}

/* The kernel for rows in layout `vec`: the aligned twin for vec 1 where it was built. */
static cl_kernel fc_layout_kernel(cl_kernel plain, cl_kernel aligned, cl_int vec)
{
    return vec == 1 && aligned ? aligned : plain;
}

/* Enqueues rows [0, n) of one batch whose first row is at element x_off / y_off. */
static flashcl_status fc_enqueue_batch(fc_cl_context *ctx, const fc_softmax_desc *desc,
                                       const fc_plan *p, cl_ulong n, cl_ulong x_off,
                                       cl_ulong y_off, cl_int vec)
{
    const fc_softmax_kernels *k = &ctx->softmax;
    const int xd = (int)desc->x_dtype, yd = (int)desc->y_dtype;
    cl_mem x = (cl_mem)desc->x_mem, y = (cl_mem)desc->y_mem;
    cl_ulong x_stride = (cl_ulong)desc->x_row_stride, y_stride = (cl_ulong)desc->y_row_stride;
    cl_uint cols = (cl_uint)desc->cols, team = p->team, slices = p->slices;
    cl_uint slice_len = (cl_uint)p->slice_len;
    cl_float scale = desc->scale;
    cl_int log_mode = desc->log ? 1 : 0;
    flashcl_status st;

    switch (p->kind) {
    case FC_PLAN_RIR: {
        const fc_arg args[] = {FC_ARG(x), FC_ARG(x_off), FC_ARG(x_stride), FC_ARG(y),
                               FC_ARG(y_off), FC_ARG(y_stride), FC_ARG(n), FC_ARG(cols),
                               FC_ARG(scale), FC_ARG(log_mode), FC_ARG(team), FC_ARG(vec)};
        const size_t rows_per_group = p->wg / p->team;
        return fc_launch(ctx, k->rows_in_registers[xd][yd], args, 12,
                         (size_t)((n + rows_per_group - 1) / rows_per_group), p->wg);
    }
    case FC_PLAN_HELD: {
        const fc_arg args[] = {FC_ARG(x),     FC_ARG(x_off), FC_ARG(x_stride), FC_ARG(y),
                               FC_ARG(y_off), FC_ARG(y_stride), FC_ARG(n),      FC_ARG(cols),
                               FC_ARG(scale), FC_ARG(log_mode), FC_ARG(team),   FC_ARG(vec)};
        const size_t rows_per_group = p->wg / p->team;
        const int e = p->elems == 8 ? 0 : p->elems == 16 ? 1 : 2;
        return fc_launch(ctx, fc_layout_kernel(k->rows_held[e][xd][yd],
                                               k->rows_held_aligned[e][xd][yd], vec),
                         args, 12,
                         (size_t)((n + rows_per_group - 1) / rows_per_group), p->wg);
    }
    case FC_PLAN_CHUNKED: {
        const fc_arg args[] = {FC_ARG(x),     FC_ARG(x_off),    FC_ARG(x_stride), FC_ARG(y),
                               FC_ARG(y_off), FC_ARG(y_stride), FC_ARG(n),        FC_ARG(cols),
                               FC_ARG(scale), FC_ARG(log_mode), FC_ARG(vec)};
        return fc_launch(ctx, k->online_chunked[xd][yd], args, 11, p->groups, p->wg);
    }
    case FC_PLAN_SPLIT: { /* two launches; the queue is in order (context.c refuses others) */
        const size_t groups = (size_t)n * p->slices;
        cl_mem partials;
        st = fc_scratch_reserve(ctx, groups * 2 * sizeof(cl_float));
        partials = ctx->scratch;
        if (st == FLASHCL_SUCCESS) {
            const fc_arg args[] = {FC_ARG(x),      FC_ARG(x_off),     FC_ARG(x_stride),
                                   FC_ARG(cols),   FC_ARG(slice_len), FC_ARG(slices),
                                   FC_ARG(scale),  FC_ARG(vec),       FC_ARG(partials)};
            st = fc_launch(ctx, k->split_row_partials[xd], args, 9, groups, p->wg);
        }
        if (st == FLASHCL_SUCCESS) {
            const fc_arg args[] = {FC_ARG(x),        FC_ARG(x_off),     FC_ARG(x_stride),
                                   FC_ARG(y),        FC_ARG(y_off),     FC_ARG(y_stride),
                                   FC_ARG(cols),     FC_ARG(slice_len), FC_ARG(slices),
                                   FC_ARG(scale),    FC_ARG(log_mode),  FC_ARG(vec),
                                   FC_ARG(partials)};
            st = fc_launch(ctx, k->split_row_normalize[xd][yd], args, 13, groups, p->wg);
        }
        return st;
    }
    case FC_PLAN_COOP: {
        const size_t groups = (size_t)n * p->slices;
        fc_split_state s;
        st = fc_split_state_acquire(ctx, 1 + groups + (size_t)n, groups, p->wg, &s);
        if (st == FLASHCL_SUCCESS) {
            const fc_arg args[] = {FC_ARG(x),           FC_ARG(x_off),       FC_ARG(x_stride),
                                   FC_ARG(y),           FC_ARG(y_off),       FC_ARG(y_stride),
                                   FC_ARG(n),           FC_ARG(cols),        FC_ARG(slice_len),
                                   FC_ARG(slices),      FC_ARG(scale),       FC_ARG(log_mode),
                                   FC_ARG(vec),         FC_ARG(s.buffer),    FC_ARG(s.state_off),
                                   FC_ARG(s.clear_off), FC_ARG(s.clear_words),
                                   FC_ARG(s.clear_per)};
            st = fc_launch(ctx,
                           fc_layout_kernel(k->split_row_cooperative[xd][yd],
                                            k->split_row_cooperative_aligned[xd][yd], vec),
                           args, 18, groups, p->wg);
        }
        if (st == FLASHCL_SUCCESS) fc_split_state_commit(ctx, &s);
        return st;
    }
    case FC_PLAN_ORDERED: {
        const size_t items = (size_t)n * p->slices;
        const cl_ulong lag = p->lag < items ? p->lag : (cl_ulong)items; /* a batch may be short */
        const cl_int reverse = p->reverse;
        fc_split_state s;
        st = fc_split_state_acquire(ctx, 1 + items + (size_t)n, 2 * items, p->wg, &s);
        if (st == FLASHCL_SUCCESS) {
            const fc_arg args[] = {FC_ARG(x),           FC_ARG(x_off),       FC_ARG(x_stride),
                                   FC_ARG(y),           FC_ARG(y_off),       FC_ARG(y_stride),
                                   FC_ARG(n),           FC_ARG(cols),        FC_ARG(slice_len),
                                   FC_ARG(slices),      FC_ARG(lag),         FC_ARG(reverse),
                                   FC_ARG(scale),       FC_ARG(log_mode),    FC_ARG(vec),
                                   FC_ARG(s.buffer),    FC_ARG(s.state_off), FC_ARG(s.clear_off),
                                   FC_ARG(s.clear_words), FC_ARG(s.clear_per)};
            st = fc_launch(ctx, k->split_row_ordered[xd][yd], args, 20, 2 * items, p->wg);
        }
        if (st == FLASHCL_SUCCESS) fc_split_state_commit(ctx, &s);
        return st;
    }
    case FC_PLAN_VECTOR: {
        const fc_arg args[] = {FC_ARG(x),     FC_ARG(x_off),    FC_ARG(x_stride), FC_ARG(y),
                               FC_ARG(y_off), FC_ARG(y_stride), FC_ARG(n),        FC_ARG(cols),
                               FC_ARG(scale), FC_ARG(log_mode)};
        return fc_launch(ctx, k->rows_vector[xd][yd], args, 10,
                         (size_t)((n + p->wg - 1) / p->wg), p->wg);
    }
    }
    return fc_fail(FLASHCL_BACKEND_ERROR, "softmax: unknown plan");
}


flashcl_status fc_cl_softmax(void *vctx, const fc_softmax_desc *desc)
{
    fc_cl_context *ctx = (fc_cl_context *)vctx;
    const cl_ulong x_off = desc->x_offset / fc_dtype_bytes(desc->x_dtype);
    const cl_ulong y_off = desc->y_offset / fc_dtype_bytes(desc->y_dtype);
    const cl_ulong x_stride = (cl_ulong)desc->x_row_stride, y_stride = (cl_ulong)desc->y_row_stride;
    const cl_ulong rows = (cl_ulong)desc->rows;
    /* 16-byte chunk accesses need every row of x and y to start at a multiple of a chunk; rows
     * held and the cooperative split row run unaligned rows in their shifted layout instead
     * (vec = 2). */
    cl_int vec = fc_softmax_rows_aligned(desc);
    cl_ulong batch, row0;
    fc_plan p;
    flashcl_status st;

    /* Kernels index within a row in 32 bits (one instruction per address). */
    if (desc->cols > ((int64_t)1 << 31))
        return fc_fail(FLASHCL_UNSUPPORTED, "softmax: rows of %lld columns exceed 2^31",
                       (long long)desc->cols);
    st = fc_softmax_choose_plan(ctx, desc, &p);
    if (st != FLASHCL_SUCCESS) return st;
    if (p.shifted) vec = 2; /* rows held or the cooperative split row, shifted */
    if (fc_env_flag("FLASHCL_SOFTMAX_TRACE")) {
        static const char *const names[] = {"rows_in_registers", "rows_held", "online_chunked",
                                            "split_row", "split_row_cooperative",
                                            "split_row_ordered", "rows_vector"};
        fprintf(stderr,
                "flashcl softmax (opencl): %lld x %lld -> %s, work-group %zu, team %u, elems %u, "
                "slices %u of %llu, lag %llu%s\n",
                (long long)desc->rows, (long long)desc->cols, names[p.kind], p.wg, p.team,
                p.elems, p.slices, (unsigned long long)p.slice_len, (unsigned long long)p.lag,
                p.shifted ? ", shifted rows" : "");
    }

    /* Launches stay below 2^31 work-items; chunked work-groups loop over rows. */
    if (p.kind == FC_PLAN_RIR || p.kind == FC_PLAN_HELD)
        batch = (cl_ulong)(INT_MAX / p.wg) * (p.wg / p.team);
    else if (p.kind == FC_PLAN_VECTOR)
        batch = (cl_ulong)(INT_MAX / p.wg) * p.wg;
    else if (p.kind == FC_PLAN_ORDERED)
        batch = (cl_ulong)(INT_MAX / p.wg / p.slices / 2);
    else if (p.kind == FC_PLAN_CHUNKED)
        batch = rows;
    else
        batch = (cl_ulong)(INT_MAX / p.wg / p.slices);
    if (batch == 0) batch = 1;

    mtx_lock(&ctx->launch_lock);
    for (row0 = 0; row0 < rows && st == FLASHCL_SUCCESS; row0 += batch) {
        const cl_ulong count = rows - row0 < batch ? rows - row0 : batch;
        st = fc_enqueue_batch(ctx, desc, &p, count, x_off + row0 * x_stride, y_off + row0 * y_stride,
                              vec);
    }
    mtx_unlock(&ctx->launch_lock);
    return st;
}
