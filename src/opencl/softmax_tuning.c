/* Tuning per device for the softmax programs (cl/softmax.cl and the files built with it): the
 * figures fc_softmax_tune picks and the -D options fc_cl_softmax_options writes from them. */
#include <stdio.h>
#include <string.h>

#include "../text.h"
#include "softmax_tuning.h"

void fc_softmax_tune(const fc_cl_device *dev, fc_softmax_tuning *t)
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
        /* PoCL on a CPU reduces through local memory even where it reports cl_khr_subgroups
         * (PoCL 5 does; 3.1, which CI runs, does not): its sub-groups are not SIMD lanes of a
         * core but work-items of the work-group loop, so they buy nothing over the tree, and the
         * suite had never run through that path. On the lent GPU machine's host (16-core Xeon,
         * PoCL 5, 2026-12-06) test_softmax_validation took 22 s (1.2 s on PoCL 3.1) and
         * test_softmax_auto did not finish within 300 s; whether the sub-group path is why was
         * not established there (no device time left), so this keeps PoCL on the path CI
         * tests. The attention program uses no sub-groups off NVIDIA either. */
        if (dev->vendor == FC_VENDOR_POCL) t->sg = FC_SG_NONE;
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
    /* The pipelined cooperative split row parks a slice of up to 8192 floats (32 KiB) beside
     * the scratch of a work-group of max_wg floats (cl/softmax_pipelined.cl). */
    if (t->coop) {
        const unsigned parked = 8192;
        if (dev->local_mem_bytes >= (parked + t->max_wg) * sizeof(float) + 64)
            t->pipe_floats = parked;
    }
    t->coop_elems16 = t->sg == FC_SG_NV_PTX ? 64 : 32; /* see fc_coop_elems */
    /* The cooperative split row holding 16-bit input as its bits, 64 or 128 elements a
     * work-item (cl/softmax_cooperative_bits.cl, which says why): NVIDIA, whose packed max
     * comes from PTX; softmax_plan.c decides where it runs. */
    t->coop_bits = t->coop && t->sg == FC_SG_NV_PTX;
    /* The probe's rows == 0 branch only in programs built for it, so that the kernels everyone
     * else runs are the ones measured (cl/softmax_cooperative.cl, FC_COOP_PROBE_BRANCH). */
    t->resident_probe = t->coop && fc_env_flag("FLASHCL_SOFTMAX_COOP_PROBE");
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
unsigned fc_coop_elems(const fc_softmax_tuning *t, int part)
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
             "-DFC_EXP_FTZ=%d -DFC_EXP_SHIFT=%d -DFC_ALIGNED_KERNELS=%d -DFC_PIPE_FLOATS=%u "
             "-DFC_COOP_BITS=%d -DFC_RESIDENT_PROBE=%d",
             extra, t.cl_std, sg_define[t.sg], t.sg_size, t.max_wg, t.rir_chunks, t.stream_unroll,
             t.coop, fc_coop_elems(&t, part), t.half_impl,
             t.fast_exp && (part == FC_PART_F16 || part == FC_PART_BF16), t.nv_sleep, t.ordered,
             t.stream_stores, t.nv_cvt2, t.rows_vector,
             part == FC_PART_ALL_DTYPES ? 7 : 1 << part, t.exp_ftz, t.exp_shift,
             t.aligned_kernels, t.pipe_floats, part != FC_PART_F32 && t.coop_bits,
             t.resident_probe);
}
