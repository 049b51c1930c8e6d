/* The plan of the attention programs (cl/attention*.cl): the tile geometry per device and the
 * build options written from it, and for one forward call the choice of kernel (prefill tiles,
 * key-parallel decode, tiled decode, tensor-core or CPU kernels) and of its key splits.
 * attention.c launches what fc_attn_plan_forward chose. Descriptors arrive validated. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention_internal.h"
#include "../error.h"
#include "../text.h"

#define FC_ATTN_MERGE_WG 64     /* at most: flashcl_attention_merge's work-group */
#define FC_ATTN_SPLIT_WG 256    /* at most: the split-KV merge's work-group */
#define FC_ATTN_MAX_SPLITS 256  /* the split merge keeps one weight per split in local memory */
/* Kernel kinds a program holds, as cl/attention_common.cl's FC_ATTN_KIND_* (-DFC_ATTN_KINDS). */
#define FC_ATTN_KIND_PREFILL 1
#define FC_ATTN_KIND_DECODE_TILES 2
#define FC_ATTN_KIND_DECODE_KEYS 4
#define FC_ATTN_KIND_MERGE 8
/* Split-KV scratch (partials of every split) is capped; past it, fewer splits. */
#define FC_ATTN_SCRATCH_CAP ((size_t)256 << 20)
/* Loop passes per key and per 64 dims of the head-dim class that one work-item of each kernel
 * makes, for devices whose driver ends loops after fc_cl_device.loop_limit passes (llvmpipe):
 * twice what Mesa 22.3.6 took with the generic kernels, from the most keys one work-group got
 * right at head dims 64, 128, 256 (every dtype, aligned rows or not, causal, softcap): prefill
 * 1088, 624, 328; key-parallel decode 2016, 1128, 808 (f32; 16-bit blocks do a little better);
 * tiled decode 2464, 1560, 896. The margin covers what this estimate does not see (another
 * Mesa unrolling less). */
#define FC_ATTN_PASSES_PREFILL 120
#define FC_ATTN_PASSES_DECODE_KEYS 66
#define FC_ATTN_PASSES_DECODE_TILES 54
/* The CPU kernels (cl/attention_cpu.cl): rows per work-item of fc_attn_rows_vector and of
 * fc_attn_decode_vector, the rows of a (batch, kv head) up to which AUTO takes the second, the
 * first one's keys per block, and the fewest keys of a split. AUTO gives the second every
 * (batch, kv head) of up to 4 rows: decode GQA groups of 4 (Llama-3 8B, Mistral 7B) or fewer.
 * The rule was 2 rows, set before that kernel streamed several kv heads a work-item
 * (cpu_decode_heads; 8 rows took 13.1 ms against 4.9 then). The second against the first, ms,
 * min of 9 rounds alternating the two call by call in one process (2-core AVX-512 EPYC, PoCL 3.1,
 * 2026-12-06, bench/results/2026-12-06-session36.md): 4 rows faster on every shape tried -- B1
 * Hq32 Hkv8 Sk4096 D128 f32 2.31 against 4.07, f16 1.96 against 3.09, Sk16384 bf16 6.71 against
 * 17.19, B8 Sk1024 4.17 against 6.78, D64 Sq2 (Hq16 Hkv8) 2.32 against 4.37, D256 1.40 against
 * 1.96; 8 rows mixed -- Hkv4 Sk8192 f32 3.13 against 4.65, but B2 Hq64 Hkv8 Sk4096 11.84 against
 * 10.82 and Hq32 Hkv8 Sq2 11.34 against 9.84 --; 16 rows the first's (Hkv2 1.50 against 0.94).
 * 16-core Xeon, PoCL 5 (the lent GPU machine's host), runs of the bench: 4 rows f32 0.62-0.73
 * against 0.73-1.23, 8 rows level. */
#define FC_ATTN_RV_ROWS 16
#define FC_ATTN_DV_ROWS 8
#define FC_ATTN_DV_AUTO_ROWS 4
#define FC_ATTN_DV_SLOTS 256 /* its private float16s of Q: rows x 16-element chunks */
#define FC_ATTN_RV_KEYS 8
#define FC_ATTN_CPU_MIN_KEYS 256

const int fc_attn_class_dim[FC_ATTN_DIM_CLASSES] = {64, 128, 256};
const char *const fc_attn_dtype_name[FC_DTYPE_COUNT] = {"f32", "f16", "bf16"};

/* ---- geometry ---------------------------------------------------------------------------------
 * Per family and head-dim class: {C, R, TM, TN, DC, VC}. GPUs: 256-item prefill groups with an
 * 8x4 S micro-tile and 8 rows x 8 dims of O per item (BM = 128 query rows, BN = 64 keys; D 256
 * halves TM to stay in registers), and 128-item decode groups of 8 rows (a GQA group of one
 * query) whose whole head dim fits one chunk (Q stays in local memory) and that leave room for
 * several groups per compute unit (D 64 needs C = 16: 4·C dims per O column step). Both were
 * the best of the tuples tried on an H200. CPUs (PoCL) run work-items as loop iterations: small
 * groups keep the per-item state in cache. */
static const fc_attn_tile fc_attn_gpu[FC_ATTN_FAMILIES][FC_ATTN_DIM_CLASSES] = {
    {{16, 16, 8, 4, 32, 16}, {16, 16, 8, 4, 32, 16}, {16, 16, 4, 4, 32, 8}},
    {{16, 8, 1, 2, 64, 32}, {32, 4, 2, 1, 128, 32}, {32, 4, 2, 1, 128, 16}},
};
static const fc_attn_tile fc_attn_cpu[FC_ATTN_FAMILIES][FC_ATTN_DIM_CLASSES] = {
    {{4, 8, 4, 8, 32, 8}, {4, 8, 4, 8, 32, 8}, {4, 8, 4, 8, 32, 8}},
    {{8, 4, 2, 4, 32, 8}, {8, 4, 2, 4, 32, 8}, {8, 4, 2, 4, 32, 8}},
};

static size_t floor_pow2(size_t x)
{
    size_t p = 1;
    while (p * 2 <= x) p *= 2;
    return p;
}

/* Work-group sizes of the two merge kernels on this device (powers of two). */
size_t fc_attn_merge_wg(const fc_cl_device *dev)
{
    size_t m = floor_pow2(dev->max_work_group_size ? dev->max_work_group_size : 1);
    return m < FC_ATTN_MERGE_WG ? m : FC_ATTN_MERGE_WG;
}
size_t fc_attn_split_merge_wg(const fc_cl_device *dev)
{
    size_t m = floor_pow2(dev->max_work_group_size ? dev->max_work_group_size : 1);
    return m < FC_ATTN_SPLIT_WG ? m : FC_ATTN_SPLIT_WG;
}

static int tile_wg(const fc_attn_tile *t) { return t->columns * t->row_groups; }
static int tile_rows(const fc_attn_tile *t) { return t->row_groups * t->rows_per_item; }
static int tile_keys(const fc_attn_tile *t) { return t->columns * t->keys_per_item; }

static int is_pow2(int x) { return x > 0 && (x & (x - 1)) == 0; }

/* CPUs get generic kernels (dtype and head dim at run time, no unrolling): PoCL compiles each
 * kernel with work-group loops around every barrier, and 18 unrolled variants would take
 * minutes. Their geometry is the 256 class's, used for every head dim. */
int fc_attn_generic_kernels(const fc_cl_device *dev) { return !dev->is_gpu; }

/* CPUs also build the CPU kernels (cl/attention_cpu.cl) into their generic program, and those
 * take every forward call there (fc_attn_plan_forward). So does Oclgrind (a GPU by its device
 * type), in its f32 program, so that the simulator checks them too. Not Mesa's llvmpipe (the one
 * device with a loop limit): its compiler splits every float16 operation into lanes and took over
 * 20 minutes and 7 GB on fc_attn_rows_vector (Mesa 22.3.6, 2-core machine), where the generic
 * kernels build in about a minute. */
int fc_attn_cpu_part(const fc_cl_device *dev)
{
    if (!dev->is_gpu) return dev->loop_limit > 0 ? -1 : FC_PART_ALL_DTYPES;
    return strstr(dev->info.name, "Oclgrind") ? FC_PART_F32 : -1;
}

/* Local memory of one work-group, as FC_ATTN_SMEM4 in the kernel computes it. qres: Q has a
 * region of its own (one chunk spans the head dim); shuffle: row reductions need no scratch. */
static size_t tile_local_bytes(const fc_attn_tile *t, int dp, int qres, int shuffle)
{
    size_t bm = (size_t)tile_rows(t), bn = (size_t)tile_keys(t);
    size_t ks4 = (size_t)t->dim_chunk / 4 + 1, ps4 = bn / 4 + 1;
    size_t pv = bm * ps4 + (size_t)t->v_chunk * (size_t)dp / 4;
    size_t red = shuffle ? 0 : (bm * (size_t)t->columns + 3) / 4;
    size_t main = qres ? bm * ks4 + (bn * ks4 > pv ? bn * ks4 : pv)
                       : ((bm + bn) * ks4 > pv ? (bm + bn) * ks4 : pv);
    return 16 * (main + red);
}

/* The kernel's structural requirements: power-of-two row teams, whole float4 chunks, V chunks
 * that tile a key tile, and at least one float4 of O dims per item. */
static int tile_valid(const fc_attn_tile *t, int dp, int warp)
{
    int bn = tile_keys(t);
    if (t->columns <= 0) return 0;
    if (!is_pow2(t->columns) || t->row_groups <= 0 || t->rows_per_item <= 0 ||
        t->keys_per_item <= 0 || t->dim_chunk <= 0 || t->dim_chunk % 4 || t->v_chunk <= 0 ||
        t->v_chunk % 4 || bn % t->v_chunk || dp % (4 * t->columns))
        return 0;
    /* shuffles reduce over lanes of one warp: teams inside a warp, warps complete */
    if (warp && (t->columns > warp || tile_wg(t) % warp)) return 0;
    return 1;
}

/* Reads FLASHCL_ATTENTION_TILES="P128=8,32,4,8,32,16;D64=..." (a tuning hook): P = prefill,
 * D = decode, then the class's head dim. */
static void tile_override(fc_attn_tile tiles[FC_ATTN_FAMILIES][FC_ATTN_DIM_CLASSES])
{
    const char *env = getenv("FLASHCL_ATTENTION_TILES");
    while (env && *env) {
        char fam = 0;
        int dim = 0, n = 0, f, c;
        fc_attn_tile t;
        if (sscanf(env, "%c%d=%d,%d,%d,%d,%d,%d%n", &fam, &dim, &t.columns, &t.row_groups,
                   &t.rows_per_item, &t.keys_per_item, &t.dim_chunk, &t.v_chunk, &n) == 8) {
            f = fam == 'P' ? FC_ATTN_PREFILL : fam == 'D' ? FC_ATTN_DECODE : -1;
            for (c = 0; c < FC_ATTN_DIM_CLASSES && f >= 0; c++)
                if (fc_attn_class_dim[c] == dim) tiles[f][c] = t;
        }
        env = strchr(env, ';');
        if (env) env++;
    }
}

/* A pure function of the device (and the tuning variable), so the build options and the launch
 * geometry always agree, also for a program loaded from the cache. A tile that does not fit the
 * device's local memory or work-group limit is shrunk (fewer rows per item, shorter head-dim
 * and V chunks, fewer row groups) until it does, or disabled: a head-dim class whose two
 * families are both disabled reports FLASHCL_UNSUPPORTED. */
void fc_attn_plan(const fc_cl_device *dev,
                  fc_attn_tile tiles[FC_ATTN_FAMILIES][FC_ATTN_DIM_CLASSES])
{
    int f, c, warp = dev->subgroups == FC_SG_NV_PTX ? 32 : 0;
    size_t local = dev->local_mem_bytes, max_wg = dev->max_work_group_size;
    memcpy(tiles, dev->is_gpu ? fc_attn_gpu : fc_attn_cpu, sizeof fc_attn_gpu);
    tile_override(tiles);
    if (fc_attn_generic_kernels(dev))
        for (f = 0; f < FC_ATTN_FAMILIES; f++)
            tiles[f][0] = tiles[f][1] = tiles[f][2];
    for (f = 0; f < FC_ATTN_FAMILIES; f++)
        for (c = 0; c < FC_ATTN_DIM_CLASSES; c++) {
            fc_attn_tile *t = &tiles[f][c];
            int dp = fc_attn_generic_kernels(dev) ? 256 : fc_attn_class_dim[c];
            while (t->columns > 0 &&
                   tile_local_bytes(t, dp, !fc_attn_generic_kernels(dev) && t->dim_chunk >= dp,
                                    warp > 0) > local) {
                if (t->rows_per_item > 1) t->rows_per_item /= 2;
                else if (t->dim_chunk > 32) t->dim_chunk /= 2;
                else if (t->v_chunk > 4 && (t->v_chunk / 2) % 4 == 0) t->v_chunk /= 2;
                else t->columns = 0;
            }
            while (t->columns > 0 && (size_t)tile_wg(t) > max_wg && t->row_groups > 1)
                t->row_groups /= 2; /* fewer query rows per work-group */
            if ((size_t)tile_wg(t) > max_wg || !tile_valid(t, dp, warp)) t->columns = 0;
        }
}

/* ---- build options ---------------------------------------------------------------------------
 * Every attention program gets the whole geometry (so a kernel compiles the same in whichever
 * program holds it) and the -D options selecting its part's kernels; attention_kernels.c says
 * which parts a device builds. */

/* What a part's program holds: FC_DTYPES and FC_ATTN_KINDS of cl/ (the generic program also
 * holds the merge kernels, see attention_kernels.c). */
static void part_contents(int part, int *dtypes, int *kinds)
{
    *dtypes = part >= FC_PART_F32 && part <= FC_PART_BF16 ? 1 << part : 7;
    *kinds = part == FC_ATTN_PART_MERGE          ? FC_ATTN_KIND_MERGE
             : part == FC_ATTN_PART_TILED_DECODE ? FC_ATTN_KIND_DECODE_TILES
             : part == FC_PART_ALL_DTYPES
                 ? FC_ATTN_KIND_PREFILL | FC_ATTN_KIND_DECODE_KEYS | FC_ATTN_KIND_MERGE
                 : FC_ATTN_KIND_PREFILL | FC_ATTN_KIND_DECODE_KEYS;
}

void fc_cl_attention_options(const fc_cl_device *dev, int part, char *out, size_t out_size)
{
    fc_attn_tile tiles[FC_ATTN_FAMILIES][FC_ATTN_DIM_CLASSES];
    size_t used;
    int f, c, dtypes, kinds;
    fc_attn_plan(dev, tiles);
    /* Only NVIDIA's warp shuffles are used (row teams must be consecutive lanes of a known
     * width); elsewhere the row reductions go through local memory. */
    used = (size_t)snprintf(out, out_size,
                            "-D%s%s -DFC_ATTN_SPLIT_WG=%zu -DFC_ATTN_MAX_SPLITS=%d",
                            dev->subgroups == FC_SG_NV_PTX ? "FC_SG_NV_PTX" : "FC_SG_NONE",
                            fc_attn_generic_kernels(dev) ? " -DFC_ATTN_GENERIC" : "",
                            fc_attn_split_merge_wg(dev), FC_ATTN_MAX_SPLITS);
    /* Oclgrind's uninitialised-value checker cannot simulate the `freeze` instructions that
     * LLVM's optimiser adds around integer div/rem pairs; unoptimised code means the same. */
    if (strstr(dev->info.name, "Oclgrind") && used < out_size)
        used += (size_t)snprintf(out + used, out_size - used, " -cl-opt-disable");
    for (f = 0; f < FC_ATTN_FAMILIES; f++)
        for (c = 0; c < FC_ATTN_DIM_CLASSES && used < out_size; c++) {
            const fc_attn_tile *t = &tiles[f][c];
            used += (size_t)snprintf(out + used, out_size - used,
                                     " -DFC_ATTN_%c%d=(%d,%d,%d,%d,%d,%d)",
                                     f == FC_ATTN_PREFILL ? 'P' : 'D', fc_attn_class_dim[c],
                                     t->columns, t->row_groups, t->rows_per_item,
                                     t->keys_per_item, t->dim_chunk, t->v_chunk);
        }
    used = fc_attn_keys_options(dev, out, out_size, used);
    used = fc_attn_async_options(dev, out, out_size, used);
    part_contents(part, &dtypes, &kinds);
    if (used < out_size)
        used += (size_t)snprintf(out + used, out_size - used, " -DFC_DTYPES=%d -DFC_ATTN_KINDS=%d",
                                 dtypes, kinds);
    if (part == fc_attn_cpu_part(dev) && used < out_size)
        snprintf(out + used, out_size - used, " -DFC_ATTN_CPU=1");
}

/* ---- the forward call's plan ------------------------------------------------------------- */

/* The number of key splits and keys per split: work-groups for per_cu a compute unit, the
 * split count rounded up, or with `at_most` down (a kernel that streams near a compute unit's
 * share of the bandwidth is set back by a compute unit holding one group more than the others);
 * each split at least min_blocks blocks of bn keys, the partials within the scratch cap, and
 * never fewer than `need` splits. */
static void plan_splits(const fc_cl_context *ctx, const fc_attention_desc *d, fc_attn_launch *p,
                        int64_t bn, int64_t min_blocks, int64_t split_cap, int64_t need,
                        int at_most)
{
    const int64_t base = d->batch * (d->heads_kv / p->heads) * p->ntiles;
    const int64_t target = (int64_t)ctx->dev.compute_units * p->per_cu;
    const int64_t max_split = (d->seqlen_k + min_blocks * bn - 1) / (min_blocks * bn);
    int64_t nsplit =
        base * 2 <= target ? (at_most ? target / base : (target + base - 1) / base) : 1;
    int64_t kps;
    if (nsplit > split_cap) nsplit = split_cap; /* the kernel's own bound, not a forced count's */
    nsplit = fc_env_long("FLASHCL_ATTENTION_SPLITS", nsplit);
    if (!ctx->attention.split_merge) nsplit = 1;
    if (nsplit > max_split) nsplit = max_split;
    if (nsplit > FC_ATTN_MAX_SPLITS) nsplit = FC_ATTN_MAX_SPLITS;
    while (nsplit > 1 && (size_t)nsplit * (size_t)(d->batch * d->heads_q * d->seqlen_q) *
                                 (size_t)(d->head_dim + 1) * 4 > FC_ATTN_SCRATCH_CAP)
        nsplit /= 2;
    if (nsplit < need) nsplit = need; /* past the scratch cap if it must be (correct first) */
    if (nsplit < 1) nsplit = 1;
    kps = (d->seqlen_k + nsplit - 1) / nsplit;
    kps = (kps + bn - 1) / bn * bn; /* splits start on tile boundaries */
    p->nsplit = (int)((d->seqlen_k + kps - 1) / kps);
    p->keys_per_split = p->nsplit > 1 ? (int)kps : (int)d->seqlen_k;
}

/* Kv heads a work-group of fc_attn_decode_vector takes (cl/attention_cpu.cl): where one key's K
 * and V rows of consecutive kv heads lie closer than a head's consecutive keys (BSHD), as many as
 * divide Hkv, fit its private rows (64, and 256 float16s of Q) and still leave the splits work
 * for every core; else one. FLASHCL_ATTENTION_CPU_HEADS=n forces n (a divisor of Hkv that fits;
 * tests). */
static int cpu_decode_heads(const fc_cl_context *ctx, const fc_attention_desc *d, int64_t rows)
{
    const int64_t tile = rows < FC_ATTN_DV_ROWS ? rows : FC_ATTN_DV_ROWS;
    const int64_t chunks = (d->head_dim + 15) / 16;
    const int64_t fit = FC_ATTN_DV_SLOTS / chunks < 64 ? FC_ATTN_DV_SLOTS / chunks : 64;
    const int64_t splits = (d->seqlen_k + FC_ATTN_CPU_MIN_KEYS - 1) / FC_ATTN_CPU_MIN_KEYS;
    const int64_t target = (int64_t)ctx->dev.compute_units * 4;
    const long forced = fc_env_long("FLASHCL_ATTENTION_CPU_HEADS", 0);
    int64_t h, best = 1;
    const int interleaved = llabs(d->k_strides[2]) < llabs(d->k_strides[1]) &&
                            llabs(d->v_strides[2]) < llabs(d->v_strides[1]);
    for (h = 1; h <= d->heads_kv; h++) {
        if (d->heads_kv % h != 0 || h * tile > fit) continue;
        if (forced > 0 ? h == forced
                       : interleaved && d->batch * (d->heads_kv / h) * splits >= target)
            best = h;
    }
    return (int)best;
}

/* Chooses the family (decode when the rows of a kv head fit in four small decode tiles: their
 * extra passes over the keys hit the cache, while a prefill tile would compute its empty rows)
 * and, for decode, the key-parallel kernel (its four-row form where a (batch, kv head) holds at
 * most 4 query rows, its cp.async form for f32 on NVIDIA sm80+; the tiled one when FLASHCL_ATTENTION_DECODE_LEGACY=1
 * asks for it, or when it is all this class has); the number of key splits (when the tiles
 * alone would leave the device idle and keys are many, and always enough that no work-group
 * walks more keys than a driver's loop limit allows: that minimum overrides
 * FLASHCL_ATTENTION_SPLITS); and checks that the shape fits the kernels' 32-bit row and key
 * indices. */
flashcl_status fc_attn_plan_forward(fc_cl_context *ctx, const fc_attention_desc *d,
                                    fc_attn_launch *p)
{
    const fc_attention_kernels *ak = &ctx->attention;
    int64_t group = d->heads_q / d->heads_kv, rows = group * d->seqlen_q, bn;
    int64_t tile_r, min_blocks = 2, need = 1;
    int64_t split_cap = FC_ATTN_MAX_SPLITS;
    const char *force = getenv("FLASHCL_ATTENTION_FAMILY");
    const int force_cpu = /* a CPU kernel's family (cl/attention_cpu.cl) */
        force && (!strcmp(force, "rows_vector") || !strcmp(force, "decode_vector"));
    const int legacy = fc_attn_decode_legacy();
    cl_kernel pk, dk, kk, kk4, dec;
    const fc_attn_tile *tile;
    fc_attn_mma_choice mma;
    int use_mma = 0;

    memset(p, 0, sizeof *p);
    p->heads = 1;
    p->dim_class = d->head_dim <= 64 ? 0 : d->head_dim <= 128 ? 1 : 2;
    pk = ak->forward[FC_ATTN_PREFILL][p->dim_class][d->dtype];
    dk = ak->forward[FC_ATTN_DECODE][p->dim_class][d->dtype]; /* NULL when not built */
    kk = ak->decode_keys[0][p->dim_class][d->dtype];
    kk4 = rows <= 4 && !fc_env_flag("FLASHCL_ATTENTION_NO_KEYS4")
              ? ak->decode_keys[1][p->dim_class][d->dtype]
              : NULL; /* the four-row form (attention_decode.c) */
    dec = dk && (legacy || !kk) ? dk : kk;                 /* the decode family's kernel */
    tile = &ak->tile[FC_ATTN_DECODE][p->dim_class];        /* decode-shaped: fits 4 of these */
    if (!pk && !dec)
        return fc_fail(FLASHCL_UNSUPPORTED,
                       "head_dim %lld does not fit '%s' (local memory %zu bytes, work-group "
                       "limit %zu)",
                       (long long)d->head_dim, ctx->dev.info.name, ctx->dev.local_mem_bytes,
                       ctx->dev.max_work_group_size);
    if (d->seqlen_q > INT_MAX / 2 || d->seqlen_k > INT_MAX / 2 || rows > INT_MAX / 2 ||
        d->batch * d->heads_kv > INT_MAX)
        return fc_fail(FLASHCL_UNSUPPORTED,
                       "attention shape too large for 32-bit row indices (seqlen_q %lld, "
                       "seqlen_k %lld, heads_q %lld)",
                       (long long)d->seqlen_q, (long long)d->seqlen_k, (long long)d->heads_q);
    p->family = dec && (!pk || (tile->columns > 0 && rows <= 4 * tile_rows(tile)))
                    ? FC_ATTN_DECODE : FC_ATTN_PREFILL;
    if (force && !strcmp(force, "prefill") && pk) p->family = FC_ATTN_PREFILL;
    if (force && !strcmp(force, "decode") && dec) p->family = FC_ATTN_DECODE;
    /* An A/B measurement must not quietly time the other kernel. */
    if (p->family == FC_ATTN_DECODE && legacy && !ak->tiled_decode)
        return fc_fail(FLASHCL_UNSUPPORTED,
                       "FLASHCL_ATTENTION_DECODE_LEGACY=1: this context has no tiled decode "
                       "kernels; they are built only when the variable is set as the context "
                       "is created");
    tile = &ak->tile[p->family][p->dim_class];
    p->kernel = p->family == FC_ATTN_DECODE ? dec : pk;
    p->wg = (size_t)tile_wg(tile);
    tile_r = tile_rows(tile);
    bn = tile_keys(tile);
    p->per_cu = p->family == FC_ATTN_DECODE ? 8 : 2;
    if (force_cpu && !ak->rows_vector)
        return fc_fail(FLASHCL_UNSUPPORTED,
                       "FLASHCL_ATTENTION_FAMILY=%s: the CPU kernels are built for CPU devices "
                       "(but Mesa's llvmpipe) and Oclgrind only, and '%s' is none of them",
                       force, ctx->dev.info.name);
    if (ak->rows_vector && d->head_dim <= 256 &&
        (force ? force_cpu : !fc_env_flag("FLASHCL_ATTENTION_NO_CPU_KERNELS"))) {
        /* CPUs (cl/attention_cpu.cl): at most 4 rows a (batch, kv head), decode, on the kernel
         * with the head dim in its lanes, else on the one with 16 rows in its lanes; split
         * across the cores where the (batch, kv head, tile) items alone are too few, in splits
         * of at least 256 keys, since each costs a partial and the merge. 2-core AVX-512 EPYC,
         * PoCL 3.1, against the generic kernels (FLASHCL_ATTENTION_NO_CPU_KERNELS=1): see
         * bench/results/2026-12-06-session35.md. */
        const int dims_in_lanes =
            force ? !strcmp(force, "decode_vector") : rows <= FC_ATTN_DV_AUTO_ROWS;
        p->kernel = dims_in_lanes ? ak->decode_vector : ak->rows_vector;
        if (dims_in_lanes) p->heads = cpu_decode_heads(ctx, d, rows);
        p->wg = 1;
        tile_r = dims_in_lanes ? FC_ATTN_DV_ROWS : FC_ATTN_RV_ROWS;
        bn = FC_ATTN_RV_KEYS;
        min_blocks = FC_ATTN_CPU_MIN_KEYS / FC_ATTN_RV_KEYS;
        p->per_cu = 4;
    } else if (!(force && !strcmp(force, "decode")) &&
        fc_attn_mma_pick(ctx, d, p->family == FC_ATTN_PREFILL, &mma)) {
        use_mma = 1;
        /* Tensor cores where the device has them, for 16-bit decode shapes too: there the
         * kernel's cp.async stream of K and V through local memory outran the key-parallel
         * kernel (H100, B1 Hq32 Hkv4 Sk65536 f16: 2223 GB/s against 1136), split as prefill
         * tiles. f32 takes them (3xTF32) for prefill-family calls only: its decode calls keep
         * the key-parallel kernel's cp.async form. */
        p->family = FC_ATTN_PREFILL;
        p->kernel = mma.kernel;
        p->wg = mma.wg;
        tile_r = mma.rows;
        bn = mma.keys;
        p->per_cu = 2;
    } else if (p->family == FC_ATTN_DECODE && dec == kk) {
        /* A split of one block already streams its K and V at once. Eight groups per compute
         * unit keep the last wave short, but at most 64 splits: the merge reads a row's
         * partials in one work-group (H100, f32 D128 Hq32 Hkv4: B1 Sk65536 with 64 splits
         * 2327 GB/s, 128: 2223, 256: 2040; B8 Sk8192 with 33 splits 2199, 9: 1649). */
        const fc_attn_keys_tile *kt = &ak->keys_tile[kk4 ? 1 : 0][p->dim_class];
        const fc_attn_async_tile *at = NULL;
        const cl_kernel async = fc_attn_async_pick(ctx, d, kk4 ? 1 : 0, p->dim_class, &at);
        split_cap = 64;
        p->kernel = kk4 ? kk4 : kk;
        p->wg = (size_t)kt->work_group;
        tile_r = kt->rows;
        bn = fc_attn_keys_block(kt, d->dtype, fc_attn_class_dim[p->dim_class]);
        min_blocks = 1;
        if (async) { /* its cp.async form (f32, NVIDIA sm80+: attention_decode_async.c) */
            /* four work-groups a compute unit: up to 128 splits (H200 f32 Hq32 Hkv4 Sk65536
             * D128: 0.0814 ms against 0.0861 with 64, D64 0.0452 against 0.0513) */
            split_cap = 128;
            p->kernel = async;
            p->wg = (size_t)at->work_group;
            tile_r = at->rows;
            bn = at->keys;
        }
    }
    p->ntiles = (int)((rows + tile_r - 1) / tile_r);

    /* A driver that ends loops after loop_limit passes (llvmpipe, see discovery.c) would drop
     * the keys past what a work-group's passes reach without a word: `need` splits keep every
     * work-group within max_keys (whole tiles), or the shape is refused. */
    if (ctx->dev.loop_limit > 0) {
        const int64_t passes = p->family != FC_ATTN_DECODE ? FC_ATTN_PASSES_PREFILL
                               : dec == kk ? FC_ATTN_PASSES_DECODE_KEYS /* every form of it */
                                           : FC_ATTN_PASSES_DECODE_TILES;
        const int64_t max_keys = (int64_t)ctx->dev.loop_limit * 64 /
                                 (passes * fc_attn_class_dim[p->dim_class]) / bn * bn;
        need = max_keys > 0 ? (d->seqlen_k + max_keys - 1) / max_keys : INT64_MAX;
        if (need > 1 && (!ak->split_merge || need > FC_ATTN_MAX_SPLITS))
            return fc_fail(FLASHCL_UNSUPPORTED,
                           "seqlen_k %lld with head_dim %lld is too long for '%s': its driver "
                           "ends a kernel's loops after %ld passes, so one work-group may walk "
                           "at most %lld keys, and %s (%d at most)",
                           (long long)d->seqlen_k, (long long)d->head_dim, ctx->dev.info.name,
                           ctx->dev.loop_limit, (long long)max_keys,
                           ak->split_merge ? "the keys would need more splits than that"
                                           : "this device has no split-KV merge kernel",
                           ak->split_merge ? FC_ATTN_MAX_SPLITS : 1);
    }

    plan_splits(ctx, d, p, bn, min_blocks, split_cap, need, 0);
    /* The two-warp kernel with a deeper ring where its work-groups walk enough keys to fill it
     * (NVIDIA only, where no driver loop limit applies). f16 decode, ms against the two-slot
     * kernel in the same call: H200 B1 Hq32 Hkv4 Sk65536 D128 0.0453 against 0.0485, B8
     * Sk8192 0.0447 against 0.0479; H100, with the 3 slots it takes there (attention_mma.c),
     * 3 % slower to 2 % faster: B1 Sk65536 0.0590 against 0.0575, B8 Sk8192 0.0571 against
     * 0.0585, Hq32 Hkv32 Sk16384 0.0998 against 0.1015 (bench/results/2026-11-27-session26.md,
     * section 4). */
    if (use_mma && mma.ring && ctx->dev.loop_limit == 0) {
        fc_attn_launch r = *p;
        plan_splits(ctx, d, &r, mma.ring_keys, min_blocks, split_cap, need, 1);
        if (r.keys_per_split >= FC_MMA_RING_MIN_KEYS) {
            r.kernel = mma.ring;
            *p = r;
        }
    }
    return FLASHCL_SUCCESS;
}
