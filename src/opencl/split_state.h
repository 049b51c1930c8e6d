/* The synchronisation words of the cooperative and ordered split rows (split_state.c). */
#ifndef FLASHCL_OPENCL_SPLIT_STATE_H
#define FLASHCL_OPENCL_SPLIT_STATE_H

#include "cl_internal.h"

/* Where one launch finds its words (all zero when it starts) and which words it clears for the
 * next launch, clear_per a work-group: kernel arguments state, state_off, clear_off,
 * clear_words, clear_per (in 64-bit words). */
typedef struct fc_split_state {
    cl_mem buffer;
    cl_ulong state_off, clear_off;
    cl_uint clear_words, clear_per;
    size_t words; /* this launch's words (for fc_split_state_commit) */
} fc_split_state;

/* Reserves `words` zeroed words for a launch of `groups` work-groups of `wg` work-items
 * (under launch_lock). */
flashcl_status fc_split_state_acquire(fc_cl_context *ctx, size_t words, size_t groups, size_t wg,
                                      fc_split_state *s);

/* Records that the launch given `s` was enqueued. Not called when the enqueue failed: the
 * region stays zero and the next launch takes it again. */
void fc_split_state_commit(fc_cl_context *ctx, const fc_split_state *s);

#endif
