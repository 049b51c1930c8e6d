/* The synchronisation words of the split-held softmax kernel: a ticket counter, each slice's
 * published (m, d) and per-row arrival counts, which must all be 0 when a launch starts.
 *
 * Zeroing them with cuMemsetD32Async before each launch cost a command of its own: on an H100 a
 * second memset added 4.5 us to a 1024 x 131072 f16 call (0.2131 -> 0.2176 ms) and 0.5-1.2 us to
 * others (bench/results/2026-11-25-h100-session13.md). Instead the buffer holds two regions, used
 * by alternate launches, and each launch's blocks zero the words that the launch before it used
 * in the other region: that launch has finished, since every launch of a context is ordered
 * after the one before it (one stream at a time; a stream set by
 * flashcl_context_set_cuda_stream waits for the previous one, context.c), and the next launch,
 * which takes that region, starts after this one has. Only a new buffer is zeroed by the host,
 * and a region that a much larger launch left for a small one. The same scheme as the OpenCL
 * backend's (src/opencl/split_state.c); the bookkeeping both share is src/split_regions.h. */
#include "../error.h"
#include "../text.h"
#include "split_state.h"

static flashcl_status zero_words(fc_cuda_context *ctx, CUdeviceptr at, size_t words) {
    const CUresult r = fc_cu()->MemsetD32Async(at, 0, 2 * words, ctx->stream);
    return r == CUDA_SUCCESS ? FLASHCL_SUCCESS
                             : fc_cu_fail(r, "cuMemsetD32Async (softmax split-row state)");
}

void fc_cuda_split_state_free(fc_cuda_context *ctx) {
    if (ctx->split_state) fc_cu()->MemFree(ctx->split_state);
    ctx->split_state = 0;
    ctx->split_regions.words = 0;
}

flashcl_status fc_cuda_split_state_acquire(fc_cuda_context *ctx, size_t words, uint64_t blocks,
                                           unsigned threads, fc_cuda_split_state *s) {
    flashcl_status st;
    fc_split_launch at;
    if (words > ctx->split_regions.words) {
        fc_split_regions grown;
        CUresult r;
        fc_split_regions_reset(&grown, words);
        /* Kernels still queued may use the old buffer: wait for them before freeing it. */
        if (ctx->split_state) {
            r = fc_cu()->StreamSynchronize(ctx->stream);
            if (r != CUDA_SUCCESS) return fc_cu_fail(r, "cuStreamSynchronize");
            fc_cuda_split_state_free(ctx);
        }
        r = fc_cu()->MemAlloc(&ctx->split_state, (size_t)(2 * grown.words * 8));
        if (r != CUDA_SUCCESS) {
            ctx->split_state = 0;
            return fc_cu_fail(r, "cuMemAlloc (softmax split-row state)");
        }
        ctx->split_regions = grown;
        st = zero_words(ctx, ctx->split_state, (size_t)(2 * grown.words));
        if (st != FLASHCL_SUCCESS) { /* not known to be zero: the next call starts over */
            fc_cuda_split_state_free(ctx);
            return st;
        }
    }
    /* FLASHCL_CUDA_SOFTMAX_HOST_CLEAR=1 makes the host zero every region (tests, A/B). */
    at = fc_split_regions_place(&ctx->split_regions, blocks, threads,
                                fc_env_flag("FLASHCL_CUDA_SOFTMAX_HOST_CLEAR"));
    if (at.host_clears) {
        st = zero_words(ctx, ctx->split_state + (CUdeviceptr)(at.clear_off * 8),
                        (size_t)ctx->split_regions.dirty);
        if (st != FLASHCL_SUCCESS) return st;
    }
    s->words = words;
    s->words_at = ctx->split_state + (CUdeviceptr)(at.state_off * 8);
    s->clear_at = ctx->split_state + (CUdeviceptr)(at.clear_off * 8);
    s->clear_words = at.clear_words;
    s->clear_per = at.clear_per;
    return FLASHCL_SUCCESS;
}

void fc_cuda_split_state_commit(fc_cuda_context *ctx, const fc_cuda_split_state *s) {
    fc_split_regions_commit(&ctx->split_regions, s->words);
}
