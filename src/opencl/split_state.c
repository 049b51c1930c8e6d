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
 * is filled, once. */
#include "../error.h"
#include "split_state.h"

/* Words each work-item zeroes at most before the host zeroes a region itself (a small launch
 * after a large one). */
#define FC_CLEAR_WORDS_PER_ITEM 16

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
    if (words > ctx->split_state_words) {
        /* Kernels already enqueued keep the old buffer alive through their own reference. */
        cl_int err;
        const cl_ulong per_region = ((cl_ulong)words + 8191) / 8192 * 8192;
        cl_mem mem = clCreateBuffer(ctx->context, CL_MEM_READ_WRITE,
                                    (size_t)(2 * per_region * sizeof(cl_ulong)), NULL, &err);
        if (err != CL_SUCCESS) return fc_cl_fail(err, "clCreateBuffer(softmax split-row state)");
        if (ctx->split_state) clReleaseMemObject(ctx->split_state);
        ctx->split_state = mem;
        ctx->split_state_words = per_region;
        ctx->split_state_region = 0;
        ctx->split_state_dirty = 0;
        st = fc_fill_zero(ctx, 0, 2 * per_region);
        if (st != FLASHCL_SUCCESS) { /* not known to be zero: the next call starts over */
            clReleaseMemObject(ctx->split_state);
            ctx->split_state = NULL;
            ctx->split_state_words = 0;
            return st;
        }
    }
    s->words = words;
    s->buffer = ctx->split_state;
    s->state_off = (cl_ulong)ctx->split_state_region * ctx->split_state_words;
    s->clear_off = (cl_ulong)(1 - ctx->split_state_region) * ctx->split_state_words;
    s->clear_words = (cl_uint)ctx->split_state_dirty;
    s->clear_per = (cl_uint)((ctx->split_state_dirty + groups - 1) / groups);
    if (s->clear_per > (cl_ulong)wg * FC_CLEAR_WORDS_PER_ITEM) {
        st = fc_fill_zero(ctx, s->clear_off, ctx->split_state_dirty);
        if (st != FLASHCL_SUCCESS) return st;
        s->clear_words = 0;
        s->clear_per = 0;
    }
    return FLASHCL_SUCCESS;
}

void fc_split_state_commit(fc_cl_context *ctx, const fc_split_state *s)
{
    ctx->split_state_region = 1 - ctx->split_state_region;
    ctx->split_state_dirty = s->words;
}
