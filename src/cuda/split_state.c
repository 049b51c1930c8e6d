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
 * backend's (src/opencl/split_state.c). */
#include "../error.h"
#include "../text.h"
#include "split_state.h"

/* Words each thread zeroes at most before the host zeroes a region itself (a small launch after
 * a large one); FLASHCL_CUDA_SOFTMAX_HOST_CLEAR=1 makes the host zero every region (tests, A/B). */
#define FC_CLEAR_WORDS_PER_THREAD 16

static flashcl_status zero_words(fc_cuda_context *ctx, CUdeviceptr at, size_t words) {
    const CUresult r = fc_cu()->MemsetD32Async(at, 0, 2 * words, ctx->stream);
    return r == CUDA_SUCCESS ? FLASHCL_SUCCESS
                             : fc_cu_fail(r, "cuMemsetD32Async (softmax split-row state)");
}

void fc_cuda_split_state_free(fc_cuda_context *ctx) {
    if (ctx->split_state) fc_cu()->MemFree(ctx->split_state);
    ctx->split_state = 0;
    ctx->split_state_words = 0;
    ctx->split_state_region = 0;
    ctx->split_state_dirty = 0;
}

flashcl_status fc_cuda_split_state_acquire(fc_cuda_context *ctx, size_t words, uint64_t blocks,
                                           unsigned threads, fc_cuda_split_state *s) {
    flashcl_status st;
    CUdeviceptr region;
    if (words > ctx->split_state_words) {
        const size_t per_region = (words + 8191) / 8192 * 8192;
        CUresult r;
        /* Kernels still queued may use the old buffer: wait for them before freeing it. */
        if (ctx->split_state) {
            r = fc_cu()->StreamSynchronize(ctx->stream);
            if (r != CUDA_SUCCESS) return fc_cu_fail(r, "cuStreamSynchronize");
            fc_cuda_split_state_free(ctx);
        }
        r = fc_cu()->MemAlloc(&ctx->split_state, 2 * per_region * 8);
        if (r != CUDA_SUCCESS) {
            ctx->split_state = 0;
            return fc_cu_fail(r, "cuMemAlloc (softmax split-row state)");
        }
        ctx->split_state_words = per_region;
        st = zero_words(ctx, ctx->split_state, 2 * per_region);
        if (st != FLASHCL_SUCCESS) { /* not known to be zero: the next call starts over */
            fc_cuda_split_state_free(ctx);
            return st;
        }
    }
    region = ctx->split_state + (CUdeviceptr)(ctx->split_state_words * 8);
    s->words = words;
    s->words_at = ctx->split_state_region ? region : ctx->split_state;
    s->clear_at = ctx->split_state_region ? ctx->split_state : region;
    s->clear_words = (uint32_t)ctx->split_state_dirty;
    s->clear_per = (uint32_t)((ctx->split_state_dirty + blocks - 1) / blocks);
    if (s->clear_per > (uint64_t)threads * FC_CLEAR_WORDS_PER_THREAD ||
        (s->clear_words > 0 && fc_env_flag("FLASHCL_CUDA_SOFTMAX_HOST_CLEAR"))) {
        st = zero_words(ctx, s->clear_at, ctx->split_state_dirty);
        if (st != FLASHCL_SUCCESS) return st;
        s->clear_words = 0;
        s->clear_per = 0;
    }
    return FLASHCL_SUCCESS;
}

void fc_cuda_split_state_commit(fc_cuda_context *ctx, const fc_cuda_split_state *s) {
    ctx->split_state_region = 1 - ctx->split_state_region;
    ctx->split_state_dirty = s->words;
}
