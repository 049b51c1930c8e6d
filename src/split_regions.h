/* The bookkeeping of the split-row synchronisation state, the same for both backends
 * (src/opencl/split_state.c, src/cuda/split_state.c): a buffer of two regions of 64-bit words,
 * used by alternate launches; each launch's work-groups zero the words the launch before it used
 * in the other region, so that the next launch finds them 0, and the host zeroes them only when
 * they are too many for the groups (a small launch after a large one). The backends own the
 * buffer and the fills; this file says where a launch's words are and who clears what. */
#ifndef FLASHCL_SPLIT_REGIONS_H
#define FLASHCL_SPLIT_REGIONS_H

#include <stdint.h>

/* Words each work-item zeroes at most before the host zeroes a region itself. */
#define FC_CLEAR_WORDS_PER_ITEM 16

typedef struct fc_split_regions {
    uint64_t words; /* per region; 0: no buffer */
    uint64_t dirty; /* words of the other region the last launch used */
    int next;       /* the region the next launch takes (all zero) */
} fc_split_regions;

/* One launch's place, in words from the buffer's start: its region, and the other region, of
 * which each of its groups zeroes clear_per words of the first clear_words. host_clears: the
 * host must zero the other region's `dirty` words itself first (clear_words and clear_per are
 * then 0). */
typedef struct fc_split_launch {
    uint64_t state_off, clear_off;
    uint32_t clear_words, clear_per;
    int host_clears;
} fc_split_launch;

/* A new, all-zero buffer for launches of up to `words` words: regions rounded up to 8192 words,
 * so that few launches regrow it. */
static inline void fc_split_regions_reset(fc_split_regions *r, uint64_t words)
{
    r->words = (words + 8191) / 8192 * 8192;
    r->dirty = 0;
    r->next = 0;
}

/* The place of the next launch, of `groups` groups of `group_size` work-items; `host_clears`
 * forces the host to clear (tests, A/B). */
static inline fc_split_launch fc_split_regions_place(const fc_split_regions *r, uint64_t groups,
                                                     uint64_t group_size, int host_clears)
{
    fc_split_launch l;
    const uint64_t per = (r->dirty + groups - 1) / groups;
    l.state_off = (uint64_t)r->next * r->words;
    l.clear_off = (uint64_t)(1 - r->next) * r->words;
    l.host_clears = r->dirty > 0 && (host_clears || per > group_size * FC_CLEAR_WORDS_PER_ITEM);
    l.clear_words = l.host_clears ? 0 : (uint32_t)r->dirty;
    l.clear_per = l.host_clears ? 0 : (uint32_t)per;
    return l;
}

/* Records that a launch of `words` words was enqueued (not called when the enqueue failed: its
 * region stays zero and the next launch takes it again). */
static inline void fc_split_regions_commit(fc_split_regions *r, uint64_t words)
{
    r->next = 1 - r->next;
    r->dirty = words;
}

#endif
