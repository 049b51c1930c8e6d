/* Host side of the key-parallel decode kernels (cl/attention_decode.cl): their geometry per
 * device (build options), checks, and kernel objects. src/opencl/attention_plan.c chooses them
 * for decode shapes and attention.c launches them like the tiled kernels (same arguments and
 * split-KV partials). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention_internal.h"
#include "../text.h"


/* {WG, RT, KB} per head-dim class. GPUs: four warps, a GQA group of 8 query heads (or Sq·G
 * rows up to 8) per work-group, and blocks of 16 KiB of K (64 keys of 128 16-bit dims, 32 of
 * f32; 64 keys of f32 at D 64): K in local memory stays under 48 KiB with one float4 of padding
 * per key, and the next block's K plus this block's V are 64 registers per work-item. D 256
 * halves the keys.
 * CPUs (PoCL; one generic kernel with the 256 class's tuple for every head dim): small groups. */
static const fc_attn_keys_tile keys_gpu[FC_ATTN_DIM_CLASSES] = {
    {128, 8, 64}, {128, 8, 64}, {128, 8, 32}};
static const fc_attn_keys_tile keys_cpu[FC_ATTN_DIM_CLASSES] = {
    {32, 8, 16}, {32, 8, 16}, {32, 8, 16}};
/* The four-row form, for (batch, kv head) groups of at most 4 query rows (MHA, GQA up to 4:1):
 * half the rows of the first form's tile, so half its accumulators and score sums. NVIDIA, f32
 * D128: 168 registers against 248, three work-groups a compute unit instead of two; Hq32 Hkv32
 * Sk16384 0.1566 ms against 0.1855, B32 Hq32 Hkv8 Sk4096 0.328 against 0.372 (H200, session
 * 28). D256 has no valid tuple of this size (its f32 blocks of 16 keys are fewer than the 32
 * work-items that share a row in the softmax step) and keeps the first form. */
static const fc_attn_keys_tile keys4_gpu[FC_ATTN_DIM_CLASSES] = {
    {128, 4, 64}, {128, 4, 64}, {128, 4, 32}};

/* Per form: the kernels' name part (fc_attn_decode_<name>_d<DP>_<dtype>) and the prefix of its
 * tuples' -D options (FC_ATTN_<prefix><DP>), as cl/attention_decode.cl spells them. */
static const struct {
    const char *kernel, *option;
} keys_form[FC_ATTN_KEYS_FORMS] = {{"keys", "K"}, {"keys4", "K4_"}};

static int is_pow2(int x) { return x > 0 && (x & (x - 1)) == 0; }

int fc_attn_keys_block(const fc_attn_keys_tile *t, flashcl_dtype dt, int dp)
{
    return dt == FLASHCL_F32 && dp > 64 ? t->keys / 2 : t->keys;
}

int fc_attn_decode_legacy(void)
{
    return fc_env_flag("FLASHCL_ATTENTION_DECODE_LEGACY");
}

/* float4 columns of O per work-item in the P·V step (FC_ATTN_KVD4). */
static int keys_vd4(int dp) { return dp >= 256 ? 2 : 1; }

size_t fc_attn_keys_tail_bytes(int work_group, int rows, int bk, int dp)
{
    size_t wg = (size_t)work_group, rt = (size_t)rows, k = (size_t)bk;
    return 16 * (rt * (size_t)(dp / 4) + (wg + k) * rt / 4 + (2 * rt + wg + 3) / 4);
}

/* Local memory of one work-group, as FC_ATTN_KSMEM4 computes it (bk: keys per block). */
static size_t keys_local_bytes(const fc_attn_keys_tile *t, int bk, int dp)
{
    size_t kblock = (size_t)bk * (size_t)(dp / 4 + 1);
    size_t accs = (size_t)t->work_group * (size_t)t->rows * (size_t)keys_vd4(dp);
    return 16 * (kblock > accs ? kblock : accs) +
           fc_attn_keys_tail_bytes(t->work_group, t->rows, bk, dp);
}

/* The kernel's index arithmetic for one block size bk: every step's work divides evenly. */
static int keys_split_valid(const fc_attn_keys_tile *t, int bk, int dp)
{
    int wg = t->work_group, vl = dp / 4 / keys_vd4(dp);
    if (bk < 1 || bk > wg || wg % bk) return 0;          /* step 2: KH parts per key */
    if ((dp / 4) % (wg / bk)) return 0;                  /* ... over whole float4s */
    if (bk % (wg / t->rows)) return 0;                   /* step 3: keys per team member */
    if (vl > wg || wg % vl || bk % (wg / vl)) return 0;  /* step 4: key groups */
    return 1;
}

static int keys_valid(const fc_attn_keys_tile *t, int dp, int warp)
{
    if (t->work_group <= 0) return 0;
    if (!is_pow2(t->work_group) || !is_pow2(t->rows) || !is_pow2(t->keys) || t->rows < 4 ||
        t->rows > t->work_group || t->keys < 2)
        return 0;
    if (warp && t->work_group % warp) return 0; /* shuffles need whole warps */
    return keys_split_valid(t, t->keys, dp) && keys_split_valid(t, t->keys / 2, dp);
}

/* FLASHCL_ATTENTION_TILES entries "K128=WG,RT,KB" (the tuning hook of attention_plan.c, which
 * skips entries it does not know). */
static void keys_override(fc_attn_keys_tile tiles[FC_ATTN_DIM_CLASSES])
{
    const char *env = getenv("FLASHCL_ATTENTION_TILES");
    while (env && *env) {
        int dim = 0, c;
        fc_attn_keys_tile t;
        if (sscanf(env, "K%d=%d,%d,%d", &dim, &t.work_group, &t.rows, &t.keys) == 4)
            for (c = 0; c < FC_ATTN_DIM_CLASSES; c++)
                if (fc_attn_class_dim[c] == dim) tiles[c] = t;
        env = strchr(env, ';');
        if (env) env++;
    }
}

/* A pure function of the device and the tuning variable (build options and launches agree).
 * Blocks that do not fit local memory are halved; a tuple that still does not fit, or breaks
 * the kernel's divisibility rules, is disabled (the tiled decode kernel then runs). Generic
 * kernels serve every head dim with one tuple, which must suit all three. */
void fc_attn_keys_plan(const fc_cl_device *dev, int form,
                       fc_attn_keys_tile tiles[FC_ATTN_DIM_CLASSES])
{
    int c, warp = dev->subgroups == FC_SG_NV_PTX ? 32 : 0, generic = fc_attn_generic_kernels(dev);
    if (form == 1) {
        /* per-dtype kernels only: a generic kernel serves every shape with the first form */
        memcpy(tiles, keys4_gpu, sizeof keys4_gpu);
        if (generic)
            for (c = 0; c < FC_ATTN_DIM_CLASSES; c++) tiles[c].work_group = 0;
    } else {
        memcpy(tiles, dev->is_gpu ? keys_gpu : keys_cpu, sizeof keys_gpu);
        keys_override(tiles);
    }
    if (generic) tiles[0] = tiles[1] = tiles[2];
    for (c = 0; c < FC_ATTN_DIM_CLASSES; c++) {
        fc_attn_keys_tile *t = &tiles[c];
        int dp = generic ? 256 : fc_attn_class_dim[c], ok;
        while (t->work_group > 0 && t->keys > 2 &&
               keys_local_bytes(t, t->keys, dp) > dev->local_mem_bytes)
            t->keys /= 2;
        ok = keys_local_bytes(t, t->keys, dp) <= dev->local_mem_bytes &&
             (size_t)t->work_group <= dev->max_work_group_size && keys_valid(t, dp, warp);
        if (generic) ok = ok && keys_valid(t, 64, warp) && keys_valid(t, 128, warp);
        if (!ok) t->work_group = 0;
    }
}

size_t fc_attn_keys_options(const fc_cl_device *dev, char *out, size_t out_size, size_t used)
{
    fc_attn_keys_tile tiles[FC_ATTN_DIM_CLASSES];
    int f, c;
    /* f16 conversions with PTX cvt where NVIDIA's inline PTX is in use (as the softmax does) */
    if (used < out_size)
        used += (size_t)snprintf(out + used, out_size - used, " -DFC_HALF_IMPL=%d",
                                 dev->subgroups == FC_SG_NV_PTX ? 2 : 1);
    for (f = 0; f < FC_ATTN_KEYS_FORMS; f++) {
        fc_attn_keys_plan(dev, f, tiles);
        for (c = 0; c < FC_ATTN_DIM_CLASSES && used < out_size; c++)
            used += (size_t)snprintf(out + used, out_size - used, " -DFC_ATTN_%s%d=(%d,%d,%d)",
                                     keys_form[f].option, fc_attn_class_dim[c],
                                     tiles[c].work_group, tiles[c].rows, tiles[c].keys);
    }
    return used;
}

flashcl_status fc_attn_keys_create_kernels(fc_cl_context *ctx, cl_program program, int part)
{
    fc_attention_kernels *ak = &ctx->attention;
    int f, c, dt;
    flashcl_status st;
    for (f = 0; f < FC_ATTN_KEYS_FORMS; f++) {
        fc_attn_keys_plan(&ctx->dev, f, ak->keys_tile[f]);
        for (c = 0; c < FC_ATTN_DIM_CLASSES; c++) {
            if (ak->keys_tile[f][c].work_group == 0) continue;
            for (dt = 0; dt < FC_DTYPE_COUNT; dt++) {
                char name[64];
                cl_kernel *k = &ak->decode_keys[f][c][dt];
                if (!fc_attn_part_has(part, dt)) continue;
                if (fc_attn_generic_kernels(&ctx->dev))
                    snprintf(name, sizeof name, "fc_attn_decode_keys_any");
                else
                    snprintf(name, sizeof name, "fc_attn_decode_%s_d%d_%s", keys_form[f].kernel,
                             fc_attn_class_dim[c], fc_attn_dtype_name[dt]);
                st = fc_attn_create_kernel_for_wg(ctx, program, name,
                                                  (size_t)ak->keys_tile[f][c].work_group, k);
                if (st != FLASHCL_SUCCESS) return st;
            }
        }
    }
    return FLASHCL_SUCCESS;
}

void fc_attn_keys_release_kernels(fc_cl_context *ctx, int part)
{
    fc_attention_kernels *ak = &ctx->attention;
    int f, c, dt;
    for (f = 0; f < FC_ATTN_KEYS_FORMS; f++)
        for (c = 0; c < FC_ATTN_DIM_CLASSES; c++)
            for (dt = 0; dt < FC_DTYPE_COUNT; dt++) {
                if (!fc_attn_part_has(part, dt)) continue;
                if (ak->decode_keys[f][c][dt]) clReleaseKernel(ak->decode_keys[f][c][dt]);
                ak->decode_keys[f][c][dt] = NULL;
            }
}
