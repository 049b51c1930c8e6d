/* Host side of cl/softmax.cl, cl/softmax_cooperative.cl, cl/softmax_cooperative_bits.cl,
 * cl/softmax_pipelined.cl and cl/softmax_ordered.cl: kernel
 * creation (with the figures softmax_tuning.c picks per device, which also writes the build
 * options), and the launch of the variant softmax_plan.c chose for one validated request. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../error.h"
#include "../text.h"
#include "softmax_plan.h"
#include "softmax_tuning.h"
#include "split_state.h"

/* ---- kernels ----------------------------------------------------------------------------------- */

static const char *const fc_dtype_suffix[FC_DTYPE_COUNT] = {"f32", "f16", "bf16"};

/* Kinds of kernel whose work-group limits the launches share (kernel_wg's second index). */
enum { FC_WG_RIR, FC_WG_HELD, FC_WG_CHUNKED, FC_WG_SPLIT, FC_WG_COOP, FC_WG_ORDERED,
       FC_WG_HELD32, FC_WG_VECTOR, FC_WG_PIPE };

/* The rows_held kernels (k->rows_held[i]): elements a work-item, the limit kind they share, and
 * the inputs that have them (cl/softmax_kernels.cl): 1 f32, 2 16-bit, 3 both. */
static const struct {
    unsigned elems;
    int wg_kind, inputs;
} fc_held_kinds[FC_HELD_KINDS] = {{8, FC_WG_HELD, 3},    {16, FC_WG_HELD, 3},
                                  {32, FC_WG_HELD32, 2}, {12, FC_WG_HELD, 1},
                                  {24, FC_WG_HELD32, 2}};

/* The index in k->rows_held of the kernels of `elems` elements a work-item (a plan's). */
static int fc_held_index(unsigned elems)
{
    int i = 0;
    while (i + 1 < FC_HELD_KINDS && fc_held_kinds[i].elems != elems) i++;
    return i;
}

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
    int yd, kind, h;
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
        for (h = 0; h < FC_HELD_KINDS && st == FLASHCL_SUCCESS; h++) {
            char base[32];
            if (!(fc_held_kinds[h].inputs & (xd == FLASHCL_F32 ? 1 : 2))) continue;
            snprintf(base, sizeof base, "softmax_rows_held%u", fc_held_kinds[h].elems);
            st = fc_create_kernel_twins(ctx, program, &k->rows_held[h][xd][yd],
                                        &k->rows_held_aligned[h][xd][yd], t->aligned_kernels,
                                        &wg[fc_held_kinds[h].wg_kind], base, xd, yd);
        }
        if (st == FLASHCL_SUCCESS && t->coop)
            st = fc_create_kernel_twins(ctx, program, &k->split_row_cooperative[xd][yd],
                                        &k->split_row_cooperative_aligned[xd][yd],
                                        t->aligned_kernels, &wg[FC_WG_COOP],
                                        "softmax_split_row_cooperative", xd, yd);
        for (h = 0; h < 2 && st == FLASHCL_SUCCESS && t->coop_bits && xd != FLASHCL_F32; h++)
            st = fc_create_kernel(ctx, program, &k->split_row_cooperative_bits[h][xd][yd],
                                  &wg[FC_WG_COOP],
                                  h ? "softmax_split_row_cooperative_bits128"
                                    : "softmax_split_row_cooperative_bits64",
                                  xd, yd);
        if (st == FLASHCL_SUCCESS && t->pipe_floats)
            st = fc_create_kernel(ctx, program, &k->split_row_pipelined[xd][yd], &wg[FC_WG_PIPE],
                                  "softmax_split_row_pipelined", xd, yd);
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
    k->coop_bits = t->coop_bits;
    k->pipe_floats = t->pipe_floats;
    k->pipe_wg = t->pipe_floats ? fc_floor_pow2(fc_min(wg[FC_WG_PIPE], t->coop_wg)) : 0;
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
        "rows_in_registers", "rows_held8/12/16", "online_chunked", "split_row",
        "split_row_cooperative", "split_row_ordered", "rows_held24/32", "rows_vector",
        "split_row_pipelined"};
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
            "rows_held24/32 %zu, cooperative %zu, pipelined %zu, ordered %zu\n",
            k->rir_max_wg, k->held_max_wg, k->held32_max_wg, k->coop_wg, k->pipe_wg,
            k->ordered_wg);
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
        /* the options this program was built with (the same pure tuning) */
        k->probe_built[xd] = k->part_ready[xd] && t.resident_probe;
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
                &k->rows_in_registers[xd][yd],   &k->online_chunked[xd][yd],
                &k->split_row_normalize[xd][yd], &k->split_row_cooperative[xd][yd],
                &k->split_row_ordered[xd][yd],   &k->rows_vector[xd][yd],
                &k->split_row_cooperative_aligned[xd][yd], &k->split_row_pipelined[xd][yd],
                &k->split_row_cooperative_bits[0][xd][yd],
                &k->split_row_cooperative_bits[1][xd][yd]};
            size_t i;
            for (i = 0; i < sizeof pair / sizeof pair[0]; i++) {
                if (*pair[i]) clReleaseKernel(*pair[i]);
                *pair[i] = NULL;
            }
            for (i = 0; i < FC_HELD_KINDS; i++) {
                cl_kernel *held[] = {&k->rows_held[i][xd][yd], &k->rows_held_aligned[i][xd][yd]};
                size_t h;
                for (h = 0; h < 2; h++) {
                    if (*held[h]) clReleaseKernel(*held[h]);
                    *held[h] = NULL;
                }
            }
        }
        k->part_ready[xd] = 0;
        k->probe_built[xd] = 0;
    }
    fc_softmax_resident_forget(ctx); /* answers about kernels that may be gone */
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
        const int e = fc_held_index(p->elems);
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
    case FC_PLAN_COOP:
    case FC_PLAN_PIPE: { /* pipelined: p->groups work-groups draw the n x slices tickets */
        const size_t tickets = (size_t)n * p->slices;
        const int pipe = p->kind == FC_PLAN_PIPE;
        const size_t groups = pipe && p->groups < tickets ? p->groups : tickets;
        const cl_kernel kernel =
            pipe ? k->split_row_pipelined[xd][yd] : fc_coop_kernel(k, p->bits, xd, yd, vec);
        fc_split_state s;
        st = fc_split_state_acquire(ctx, 1 + tickets + (size_t)n, groups, p->wg, &s);
        if (st == FLASHCL_SUCCESS) {
            const fc_arg args[] = {FC_ARG(x),           FC_ARG(x_off),       FC_ARG(x_stride),
                                   FC_ARG(y),           FC_ARG(y_off),       FC_ARG(y_stride),
                                   FC_ARG(n),           FC_ARG(cols),        FC_ARG(slice_len),
                                   FC_ARG(slices),      FC_ARG(scale),       FC_ARG(log_mode),
                                   FC_ARG(vec),         FC_ARG(s.buffer),    FC_ARG(s.state_off),
                                   FC_ARG(s.clear_off), FC_ARG(s.clear_words),
                                   FC_ARG(s.clear_per)};
            st = fc_launch(ctx, kernel, args, 18, groups, p->wg);
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
     * (vec = 2; fc_softmax_layout). */
    cl_int vec;
    cl_ulong batch, row0;
    fc_coop_room room;
    fc_plan p;
    flashcl_status st;

    /* Kernels index within a row in 32 bits (one instruction per address). */
    if (desc->cols > ((int64_t)1 << 31))
        return fc_fail(FLASHCL_UNSUPPORTED, "softmax: rows of %lld columns exceed 2^31",
                       (long long)desc->cols);
    fc_coop_room_init(&room, ctx);
    st = fc_softmax_choose_plan(ctx, desc, &room, &p);
    if (st != FLASHCL_SUCCESS) return st;
    vec = fc_softmax_layout(desc, p.shifted);
    if (fc_env_flag("FLASHCL_SOFTMAX_TRACE")) {
        static const char *const names[] = {"rows_in_registers", "rows_held", "online_chunked",
                                            "split_row", "split_row_cooperative",
                                            "split_row_ordered", "rows_vector",
                                            "split_row_pipelined"};
        static const char *const from[] = {"one a compute unit", "probed",
                                           "assumed: FLASHCL_SOFTMAX_COOP_RESIDENT"};
        char resident[128] = "";
        if (p.kind == FC_PLAN_COOP || p.kind == FC_PLAN_PIPE) /* the bound on slices */
            snprintf(resident, sizeof resident, ", resident %llu (%s; %u compute units)",
                     (unsigned long long)p.resident, from[p.resident_from],
                     ctx->dev.compute_units);
        fprintf(stderr,
                "flashcl softmax (opencl): %lld x %lld -> %s, work-group %zu, team %u, elems %u, "
                "slices %u of %llu, lag %llu, groups %zu%s%s%s\n",
                (long long)desc->rows, (long long)desc->cols, names[p.kind], p.wg, p.team,
                p.bits ? p.bits : p.elems, p.slices, (unsigned long long)p.slice_len,
                (unsigned long long)p.lag, p.groups, p.shifted ? ", shifted rows" : "",
                p.bits ? ", held as bits" : "", resident);
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
