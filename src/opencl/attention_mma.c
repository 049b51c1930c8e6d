/* Host side of the tensor-core attention program (cl/attention_mma.cl, and its f32 kernels by
 * 3xTF32 in cl/attention_mma_tf32x3.cl): whether a device gets it, its build options, its
 * kernels, and which forward calls it takes. The launch itself is
 * attention.c's (same arguments as the tiled kernel, including split-KV). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention_internal.h"
#include "../text.h"

/* Head-dim classes of the kernels (padded head dim, keys per block) and the warps per
 * work-group: 16 query rows per warp. Keys per block as local memory allows (48 KiB on NVIDIA:
 * two ring slots of K and V, 64 keys at 64 dims, 32 at 128). */
static const int fc_mma_dim[FC_ATTN_MMA_CLASSES] = {64, 128};
static const int fc_mma_keys[FC_ATTN_MMA_CLASSES] = {64, 32};
static const int fc_mma_ring_keys[FC_ATTN_MMA_CLASSES] = {32, 16}; /* the _ring kernels' */
/* The f32 kernels' (f32 rows: half the keys in the same local memory) and warps. */
static const int fc_mma_f32_keys[FC_ATTN_MMA_CLASSES] = {32, 16};
#define FC_MMA_F32_WARPS 4 /* FC_TF32_WARPS */
#define FC_MMA_DEFAULT_WARPS 4
#define FC_MMA_W2_WARPS 2 /* the _w2 kernels' (cl/attention_mma.cl) */

/* NVIDIA GPUs from compute capability 8.0 (cp.async, bf16 mma) through the PTX pass-through
 * of NVIDIA's OpenCL driver. FLASHCL_ATTENTION_NO_MMA=1 leaves the program out (A/B runs). */
int fc_cl_attention_mma_wanted(const fc_cl_device *dev, int part)
{
    (void)part;
    return dev->vendor == FC_VENDOR_NVIDIA && dev->is_gpu && dev->subgroups == FC_SG_NV_PTX &&
           dev->nv_compute_major >= 8 && dev->local_mem_bytes >= 36864 &&
           !fc_env_flag("FLASHCL_ATTENTION_NO_MMA");
}

/* Slots of the _ring kernels' ring: 4, 3 on the GPUs of the table below, or
 * FLASHCL_ATTENTION_MMA_RING_SLOTS (3 to 5) for measurements. The depth that streams best
 * depends on the memory behind the same 132 compute units, which OpenCL does not report, so
 * measured GPUs are named, as CLBlast's tuning tables name them. f16 decode, same calls:
 *   H200: 4 slots 7-9 % faster than the two-slot kernel on long decode, 3 slots 2-10 % slower
 *         than 4 (bench/results/2026-11-27-session27.md, section 1);
 *   H100 80GB HBM3: 3 slots 1-4 % faster than 4 on all 11 decode shapes measured, 2 % slower
 *         to 1 % faster than the two-slot kernel (2026-11-27-session26.md, section 4). */
#define FC_MMA_RING_DEFAULT_SLOTS 4
static const struct {
    const char *name_part; /* a substring of CL_DEVICE_NAME */
    int slots;
} fc_mma_ring_slots_by_name[] = {{"H100", 3}};

static int ring_slots(const fc_cl_device *dev)
{
    const long forced = fc_env_long("FLASHCL_ATTENTION_MMA_RING_SLOTS", 0);
    int s = FC_MMA_RING_DEFAULT_SLOTS;
    size_t i;
    for (i = 0; i < sizeof fc_mma_ring_slots_by_name / sizeof fc_mma_ring_slots_by_name[0]; i++)
        if (strstr(dev->info.name, fc_mma_ring_slots_by_name[i].name_part))
            s = fc_mma_ring_slots_by_name[i].slots;
    return forced >= 3 && forced <= 5 ? (int)forced : s; /* else this GPU's default */
}

/* Warps per work-group: 4, or FLASHCL_ATTENTION_MMA_WARPS (1, 2, 4 or 8) for measurements. */
static int mma_warps(void)
{
    const long w = fc_env_long("FLASHCL_ATTENTION_MMA_WARPS", FC_MMA_DEFAULT_WARPS);
    return w == 1 || w == 2 || w == 4 || w == 8 ? (int)w : FC_MMA_DEFAULT_WARPS;
}

void fc_cl_attention_mma_options(const fc_cl_device *dev, int part, char *out, size_t out_size)
{
    (void)part;
    snprintf(out, out_size, "-DFC_SG_NV_PTX -DFC_MMA_WARPS=%d -DFC_MMA_RING_SLOTS=%d",
             mma_warps(), ring_slots(dev));
}

flashcl_status fc_cl_attention_mma_create_kernels(fc_cl_context *ctx, cl_program program,
                                                  int part)
{
    fc_attention_kernels *ak = &ctx->attention;
    static const char *const dt_name[2] = {"f16", "bf16"};
    int c, dt;
    (void)part;
    ak->mma_warps = mma_warps();
    for (c = 0; c < FC_ATTN_MMA_CLASSES; c++)
        for (dt = 0; dt < 2; dt++) {
            static const char *const form[3] = {"", "_w2", "_ring"}; /* the last two: 2 warps */
            int f;
            for (f = 0; f < 3; f++) {
                char name[64];
                cl_kernel *k = f == 2 ? &ak->mma_ring[c][dt] : f ? &ak->mma_w2[c][dt]
                                                                  : &ak->mma[c][dt];
                const int warps = f ? FC_MMA_W2_WARPS : ak->mma_warps;
                flashcl_status st;
                snprintf(name, sizeof name, "fc_attn_mma_d%d_%s%s", fc_mma_dim[c], dt_name[dt],
                         form[f]);
                /* too many registers for the work-group: the tiled kernel takes these calls
                 * (or, for the two-warp kernel, the other one) */
                st = fc_attn_create_kernel_for_wg(ctx, program, name, (size_t)(32 * warps), k);
                if (st != FLASHCL_SUCCESS) return st;
            }
        }
    for (c = 0; c < FC_ATTN_MMA_CLASSES; c++) { /* f32 by 3xTF32 (attention_mma_tf32x3.cl) */
        char name[64];
        flashcl_status st;
        snprintf(name, sizeof name, "fc_attn_mma_d%d_f32", fc_mma_dim[c]);
        st = fc_attn_create_kernel_for_wg(ctx, program, name, (size_t)(32 * FC_MMA_F32_WARPS),
                                          &ak->mma_f32[c]);
        if (st != FLASHCL_SUCCESS) return st;
    }
    return FLASHCL_SUCCESS;
}

void fc_cl_attention_mma_release_kernels(fc_cl_context *ctx, int part)
{
    int c, dt;
    (void)part;
    for (c = 0; c < FC_ATTN_MMA_CLASSES; c++)
        for (dt = 0; dt < 2; dt++) {
            if (ctx->attention.mma[c][dt]) clReleaseKernel(ctx->attention.mma[c][dt]);
            if (ctx->attention.mma_w2[c][dt]) clReleaseKernel(ctx->attention.mma_w2[c][dt]);
            if (ctx->attention.mma_ring[c][dt]) clReleaseKernel(ctx->attention.mma_ring[c][dt]);
            ctx->attention.mma[c][dt] = NULL;
            ctx->attention.mma_w2[c][dt] = NULL;
            ctx->attention.mma_ring[c][dt] = NULL;
        }
    for (c = 0; c < FC_ATTN_MMA_CLASSES; c++) {
        if (ctx->attention.mma_f32[c]) clReleaseKernel(ctx->attention.mma_f32[c]);
        ctx->attention.mma_f32[c] = NULL;
    }
}

/* Whether every q, k, v and o row starts 16-byte aligned: what cp.async and the 16-byte o stores
 * of the tensor-core kernels need (8 16-bit elements, 4 f32). */
static int rows_16b_aligned(const fc_cl_context *ctx, const fc_attention_desc *d)
{
    const int64_t elems = 16 / (int64_t)fc_attn_dtype_bytes(d->dtype);
    return fc_attn_rows_aligned(ctx, d->q_offset, d->dtype, d->q_strides, 3, elems) &&
           fc_attn_rows_aligned(ctx, d->k_offset, d->dtype, d->k_strides, 3, elems) &&
           fc_attn_rows_aligned(ctx, d->v_offset, d->dtype, d->v_strides, 3, elems) &&
           fc_attn_rows_aligned(ctx, d->o_offset, d->dtype, d->o_strides, 3, elems);
}

/* f32 calls: the 3xTF32 kernel for prefill-family calls (decode keeps the key-parallel kernels,
 * whose cp.async form streams K and V at 78-83 % of copy), where every row is 16-byte aligned
 * and the head dim a multiple of 4 (cp.async chunks), unless FLASHCL_ATTENTION_NO_TF32=1
 * asks for the FMA kernel (A/B runs). */
static int pick_f32(const fc_cl_context *ctx, const fc_attention_desc *d, int prefill,
                    fc_attn_mma_choice *out)
{
    const int c = d->head_dim <= 64 ? 0 : 1;
    const cl_kernel kernel = ctx->attention.mma_f32[c];
    if (!prefill || !kernel || d->head_dim > 128 || d->head_dim % 4 != 0 ||
        fc_env_flag("FLASHCL_ATTENTION_NO_TF32") || !rows_16b_aligned(ctx, d))
        return 0;
    memset(out, 0, sizeof *out);
    out->kernel = kernel;
    out->wg = (size_t)(32 * FC_MMA_F32_WARPS);
    out->rows = 16 * FC_MMA_F32_WARPS;
    out->keys = fc_mma_f32_keys[c];
    return 1;
}

int fc_attn_mma_pick(const fc_cl_context *ctx, const fc_attention_desc *d, int prefill,
                     fc_attn_mma_choice *out)
{
    const fc_attention_kernels *ak = &ctx->attention;
    const int c = d->head_dim <= 64 ? 0 : 1, dt = d->dtype == FLASHCL_BF16 ? 1 : 0;
    if (d->dtype == FLASHCL_F32) return pick_f32(ctx, d, prefill, out);
    if (d->head_dim > 128 || d->head_dim % 8 != 0 || !ak->mma[c][dt] || !rows_16b_aligned(ctx, d))
        return 0;
    /* Packed rows of a kv head that fit two warps: the two-warp kernel, unless the other has
     * fewer warps (FLASHCL_ATTENTION_MMA_WARPS=1 or 2, or none). */
    const int w2 = ak->mma_w2[c][dt] && ak->mma_warps > FC_MMA_W2_WARPS &&
                   (d->heads_q / d->heads_kv) * d->seqlen_q <= 16 * FC_MMA_W2_WARPS;
    const int warps = w2 ? FC_MMA_W2_WARPS : ak->mma_warps;
    out->kernel = w2 ? ak->mma_w2[c][dt] : ak->mma[c][dt];
    out->wg = (size_t)(32 * warps);
    out->rows = 16 * warps;
    out->keys = fc_mma_keys[c];
    /* FLASHCL_ATTENTION_NO_RING=1 keeps the two-slot kernel (A/B runs). */
    out->ring = w2 && !fc_env_flag("FLASHCL_ATTENTION_NO_RING") ? ak->mma_ring[c][dt] : NULL;
    out->ring_keys = fc_mma_ring_keys[c];
    return 1;
}
