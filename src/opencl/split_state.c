/* The synchronisation words of the cooperative and ordered split rows: a ticket counter, each
 * slice's published (m, d) and per-row words, which must all be 0 when a launch starts.
 *
 * Zeroing them with clEnqueueFillBuffer before each launch cost a command of its own: on an
 * H100 through NVIDIA's OpenCL a second fill added 2.5-3 us to a 1024 x 131072 f16 call and
 * 5-9 us to a 1 x 1M call (bench/results/2026-11-25-h100-session12.md). Instead the buffer holds
 * two regions, used by alternate launches, and each launch's work-groups zero the words that the
 * launch before it used in the other region: that launch has finished, and the next launch, which
 * takes that region, starts after this one has (every queue flashcl enqueues on is in order: an
 * application's out-of-order queue is refused when it is adopted, context.c). Only a new buffer
 * is filled, and a region that a much larger launch left for a small one. The bookkeeping is
 * src/split_regions.h, shared with the CUDA backend. */
#include "../error.h"
#include "split_state.h"

static flashcl_status fc_fill_zero(fc_cl_context *ctx, cl_ulong first, cl_ulong words)
{
    const cl_ulong zero = 0;
    const cl_int err = clEnqueueFillBuffer(ctx->queue, ctx->split_state, &zero, sizeof zero,
                                           first * sizeof zero, words * sizeof zero, 0, NULL,
                                           NULL);
    return err == CL_SUCCESS ? FLASHCL_SUCCESS
                             : fc_cl_fail(err, "clEnqueueFillBuffer(softmax split-row state)");
}

flashcl_status fc_split_state_acquire(fc_cl_context *ctx, size_t words, size_t groups, size_t wg,
                                      fc_split_state *s)
{
    flashcl_status st;
    fc_split_launch at;
    if (words > ctx->split_regions.words) {
        /* Kernels already enqueued keep the old buffer alive through their own reference. */
        cl_int err;
        fc_split_regions grown;
        cl_mem mem;
        fc_split_regions_reset(&grown, words);
        mem = clCreateBuffer(ctx->context, CL_MEM_READ_WRITE,
                             (size_t)(2 * grown.words * sizeof(cl_ulong)), NULL, &err);
        if (err != CL_SUCCESS) return fc_cl_fail(err, "clCreateBuffer(softmax split-row state)");
        if (ctx->split_state) clReleaseMemObject(ctx->split_state);
        ctx->split_state = mem;
        ctx->split_regions = grown;
        st = fc_fill_zero(ctx, 0, 2 * grown.words);
        if (st != FLASHCL_SUCCESS) { /* not known to be zero: the next call starts over */
            clReleaseMemObject(ctx->split_state);
            ctx->split_state = NULL;
            ctx->split_regions.words = 0;
            return st;
        }
    }
    at = fc_split_regions_place(&ctx->split_regions, groups, wg, 0);
    if (at.host_clears) {
        st = fc_fill_zero(ctx, at.clear_off, ctx->split_regions.dirty);
        if (st != FLASHCL_SUCCESS) return st;
    }
    s->words = words;
    s->buffer = ctx->split_state;
    s->state_off = at.state_off;
    s->clear_off = at.clear_off;
    s->clear_words = at.clear_words;
    s->clear_per = at.clear_per;
    return FLASHCL_SUCCESS;
}

void fc_split_state_commit(fc_cl_context *ctx, const fc_split_state *s)
{
    fc_split_regions_commit(&ctx->split_regions, s->words);
}
