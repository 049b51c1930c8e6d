/* The causal tail order of the forward kernels' blocks, one policy for both backends.
 *
 * Under a causal mask a row block's work grows with its position. Taken one (batch, kv head)
 * pair after another, each pair heavy to light, a grid ends on a mix of heavy and light blocks
 * that leaves compute units idle while the last heavy ones finish (4-7 % of the ideal time in a
 * list-scheduling model of the FlashAttention grid). So the last pairs interleave their row
 * blocks instead, every pair's heaviest before any lighter one (the kernels' block mapping:
 * block_position in cuda/attention_common.cuh, FC_ATTN_PLACE in cl/attention_common.cl); the
 * pairs before them keep the pair-after-pair order, whose blocks share K/V in the cache. */
#ifndef FLASHCL_ATTENTION_TAIL_H
#define FLASHCL_ATTENTION_TAIL_H

#include <stdint.h>

#include "backend.h"
#include "text.h"

/* How many of the last pairs interleave, for a grid of `row_blocks` row blocks per pair and
 * `splits` key splits on a device that runs `slots` blocks at once: enough pairs for twice
 * `slots`, so that every pair still has several row blocks running together; none without a
 * causal mask, with split-KV, or where the lightest row block sees more than half the keys
 * (Sk > 2 Sq: the work hardly varies). The backend's variables: `off_env`=1 keeps the
 * pair-after-pair order (comparisons), `count_env`=n forces n pairs whatever the mask (tests:
 * any count gives the same result). */
static inline int64_t fc_attention_tail_pairs(const fc_attention_desc *d, int64_t row_blocks,
                                              int64_t slots, int64_t splits,
                                              const char *off_env, const char *count_env)
{
    const int64_t pairs = d->batch * d->heads_kv;
    int64_t tail = fc_env_long(count_env, -1);
    if (tail < 0) {
        if (!d->causal || 2 * d->seqlen_q < d->seqlen_k || splits > 1 || row_blocks < 2 ||
            slots <= 0 || fc_env_flag(off_env))
            return 0;
        tail = (2 * slots + row_blocks - 1) / row_blocks;
    }
    return tail < pairs ? tail : pairs;
}

#endif
