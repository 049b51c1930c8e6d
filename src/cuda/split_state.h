/* The synchronisation words of the CUDA split-held softmax (split_state.c). */
#ifndef FLASHCL_CUDA_SPLIT_STATE_H
#define FLASHCL_CUDA_SPLIT_STATE_H

#include "cuda_internal.h"

/* Where one launch finds its words (all zero when it starts) and which words it clears for the
 * next launch, clear_per a block: kernel arguments counters, clear, clear_words, clear_per. */
typedef struct fc_cuda_split_state {
    CUdeviceptr words_at, clear_at;
    uint32_t clear_words, clear_per;
    size_t words; /* this launch's words (for fc_cuda_split_state_commit) */
} fc_cuda_split_state;

/* Reserves `words` zeroed 64-bit words for a launch of `blocks` blocks of `threads` threads
 * (ctx->lock held, inside enter/leave). */
flashcl_status fc_cuda_split_state_acquire(fc_cuda_context *ctx, size_t words, uint64_t blocks,
                                           unsigned threads, fc_cuda_split_state *s);

/* Records that the launch given `s` was enqueued. Not called when the launch failed: the
 * region stays zero and the next launch takes it again. */
void fc_cuda_split_state_commit(fc_cuda_context *ctx, const fc_cuda_split_state *s);

/* Frees the buffer (context destruction, after the stream has drained). */
void fc_cuda_split_state_free(fc_cuda_context *ctx);

#endif
