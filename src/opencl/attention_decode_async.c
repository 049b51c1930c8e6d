/* Host side of the cp.async form of the key-parallel decode kernel (K and V through a ring of
 * local memory, not registers;
 * (cl/attention_decode_async.cl): where it is built, its geometry (build options), its kernel
 * objects, and the calls that take it. Launched exactly as the register-fed form it replaces
 * (same arguments, grid and split-KV partials; src/opencl/attention.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention_internal.h"
#include "../text.h"

/* {WG, RT, BK, SL} per form (8 rows a work-group, 4 rows) and head-dim class (64, 128, 256).
 * Eight rows: four warps, two slots of 32 keys at D64 and 16 at D128 (41-42 KiB of local memory
 * with Q, the score partials and P), 102-104 registers: four work-groups a compute unit.
 * Four rows (two warps, slots of 16 keys) is left out: against the register-fed four-row kernel
 * it ran 13 % faster on H200 MHA D64 B1 but 15 % slower on H100 B8 Hq16 D64, and 1-7 % slower
 * at D128 (148 registers); FLASHCL_ATTENTION_TILES=A4_64=64,4,16,2 turns it on for tuning.
 * Deeper rings of smaller blocks (4 slots of 8-16 keys, 64 work-items) took 134-166 registers
 * and lost 5-30 %. D256: two warps, slots of 8 keys, 166 registers, 43 KiB; 11-35 % faster than
 * the register-fed kernel on the H200 (B1 Hq16 Hkv2 Sk65536 0.1112 ms against 0.1708), and
 * NVIDIA OpenCL's test suite passed on it (session 30).
 * Numbers: bench/results/2026-11-27-session29.md and -session30.md. */
static const fc_attn_async_tile async_gpu[FC_ATTN_KEYS_FORMS][FC_ATTN_DIM_CLASSES] = {
    {{128, 8, 32, 2}, {128, 8, 16, 2}, {64, 8, 8, 2}},
    {{0, 4, 16, 2}, {0, 4, 16, 2}, {0, 4, 16, 2}},
};

/* Per form: the kernels' name part and the prefix of their tuples' -D options. */
static const struct {
    const char *kernel, *option;
} async_form[FC_ATTN_KEYS_FORMS] = {{"async", "A"}, {"async4", "A4_"}};

int fc_attn_async_built(const fc_cl_device *dev)
{
    return dev->is_gpu && dev->subgroups == FC_SG_NV_PTX && dev->nv_compute_major >= 8 &&
           !fc_attn_generic_kernels(dev);
}

/* Local memory of one work-group, as FC_ATTN_ASMEM4 computes it. */
static size_t async_local_bytes(const fc_attn_async_tile *t, int dp)
{
    size_t slots = (size_t)t->slots * (size_t)t->keys * (size_t)(dp / 2 + 1);
    size_t accs = (size_t)t->work_group * (size_t)t->rows;
    return 16 * (slots > accs ? slots : accs) +
           fc_attn_keys_tail_bytes(t->work_group, t->rows, t->keys, dp);
}

/* The kernel's index arithmetic: every step's work divides evenly, a row's softmax team is at
 * most one warp of consecutive lanes (shuffles; built for NVIDIA only, so 32), and the copies
 * cover each slot exactly. */
static int async_valid(const fc_attn_async_tile *t, int dp)
{
    const int warp = 32;
    int wg = t->work_group, rt = t->rows, bk = t->keys, dp4 = dp / 4;
    if (wg <= 0 || wg % warp || rt < 4 || rt > 8 || rt % 4 || wg % rt) return 0;
    if (t->slots < 2 || t->slots > 4 || bk < 1 || wg % bk || dp4 % (wg / bk)) return 0;
    if (wg / rt > warp || bk % (wg / rt)) return 0;   /* softmax team: SC <= a warp, KPI >= 1 */
    if (bk * rt / wg > 4) return 0;                   /* KPI within FC_ATTN_KKPI_BOUND */
    if (dp4 > wg || wg % dp4 || bk % (wg / dp4)) return 0; /* P·V key groups and the copies */
    return 1;
}

/* FLASHCL_ATTENTION_TILES entries "A128=WG,RT,BK,SL" and "A4_128=..." (attention_plan.c's
 * tuning hook; entries of other kernels are skipped). */
static void async_override(int form, fc_attn_async_tile tiles[FC_ATTN_DIM_CLASSES])
{
    const char *env = getenv("FLASHCL_ATTENTION_TILES");
    char pattern[32];
    snprintf(pattern, sizeof pattern, "%s%%d=%%d,%%d,%%d,%%d%%n", async_form[form].option);
    while (env && *env) {
        int dim = 0, c, n = 0;
        fc_attn_async_tile t;
        if (sscanf(env, pattern, &dim, &t.work_group, &t.rows, &t.keys, &t.slots, &n) == 5 &&
            n > 0)
            for (c = 0; c < FC_ATTN_DIM_CLASSES; c++)
                if (fc_attn_class_dim[c] == dim) tiles[c] = t;
        env = strchr(env, ';');
        if (env) env++;
    }
}

void fc_attn_async_plan(const fc_cl_device *dev, int form,
                        fc_attn_async_tile tiles[FC_ATTN_DIM_CLASSES])
{
    int c;
    memcpy(tiles, async_gpu[form], sizeof async_gpu[form]);
    async_override(form, tiles);
    for (c = 0; c < FC_ATTN_DIM_CLASSES; c++) {
        fc_attn_async_tile *t = &tiles[c];
        const int dp = fc_attn_class_dim[c];
        if (!fc_attn_async_built(dev) || !async_valid(t, dp) ||
            async_local_bytes(t, dp) > dev->local_mem_bytes ||
            (size_t)t->work_group > dev->max_work_group_size)
            t->work_group = 0;
    }
}

size_t fc_attn_async_options(const fc_cl_device *dev, char *out, size_t out_size, size_t used)
{
    fc_attn_async_tile tiles[FC_ATTN_DIM_CLASSES];
    int f, c;
    if (!fc_attn_async_built(dev)) return used;
    if (used < out_size)
        used += (size_t)snprintf(out + used, out_size - used, " -DFC_ATTN_ASYNC=1");
    for (f = 0; f < FC_ATTN_KEYS_FORMS; f++) {
        fc_attn_async_plan(dev, f, tiles);
        for (c = 0; c < FC_ATTN_DIM_CLASSES && used < out_size; c++)
            used += (size_t)snprintf(out + used, out_size - used, " -DFC_ATTN_%s%d=(%d,%d,%d,%d)",
                                     async_form[f].option, fc_attn_class_dim[c],
                                     tiles[c].work_group, tiles[c].rows, tiles[c].keys,
                                     tiles[c].slots);
    }
    return used;
}

flashcl_status fc_attn_async_create_kernels(fc_cl_context *ctx, cl_program program, int part)
{
    fc_attention_kernels *ak = &ctx->attention;
    int f, c;
    flashcl_status st;
    if (!fc_attn_async_built(&ctx->dev) || !fc_attn_part_has(part, FLASHCL_F32))
        return FLASHCL_SUCCESS;
    for (f = 0; f < FC_ATTN_KEYS_FORMS; f++) {
        fc_attn_async_plan(&ctx->dev, f, ak->async_tile[f]);
        for (c = 0; c < FC_ATTN_DIM_CLASSES; c++) {
            char name[64];
            cl_kernel *k = &ak->decode_async[f][c];
            if (ak->async_tile[f][c].work_group == 0) continue;
            snprintf(name, sizeof name, "fc_attn_decode_%s_d%d_f32", async_form[f].kernel,
                     fc_attn_class_dim[c]);
            st = fc_attn_create_kernel_for_wg(ctx, program, name,
                                              (size_t)ak->async_tile[f][c].work_group, k);
            if (st != FLASHCL_SUCCESS) return st;
        }
    }
    return FLASHCL_SUCCESS;
}

void fc_attn_async_release_kernels(fc_cl_context *ctx, int part)
{
    fc_attention_kernels *ak = &ctx->attention;
    int f, c;
    if (!fc_attn_part_has(part, FLASHCL_F32)) return;
    for (f = 0; f < FC_ATTN_KEYS_FORMS; f++)
        for (c = 0; c < FC_ATTN_DIM_CLASSES; c++) {
            if (ak->decode_async[f][c]) clReleaseKernel(ak->decode_async[f][c]);
            ak->decode_async[f][c] = NULL;
        }
}

cl_kernel fc_attn_async_pick(const fc_cl_context *ctx, const fc_attention_desc *d, int form,
                             int dim_class, const fc_attn_async_tile **tile)
{
    const fc_attention_kernels *ak = &ctx->attention;
    const cl_kernel k = ak->decode_async[form][dim_class];
    const fc_attn_async_tile *t = &ak->async_tile[form][dim_class];
    if (!k || d->dtype != FLASHCL_F32 || d->head_dim % 4 ||
        !fc_attn_rows_aligned(ctx, d->k_offset, d->dtype, d->k_strides, 3, 4) ||
        !fc_attn_rows_aligned(ctx, d->v_offset, d->dtype, d->v_strides, 3, 4) ||
        fc_env_flag("FLASHCL_ATTENTION_NO_ASYNC"))
        return NULL;
    *tile = t;
    return k;
}
