/* Helpers of the tests on tensors past 2^31 elements (test_softmax_large, test_attention_large):
 * a GPU with enough memory or a printed skip, device buffers filled on several threads with
 * values that are a hash of the element index (so that the host never holds a whole tensor:
 * any element can be worked out again for the reference), and poisoned outputs. */
#ifndef FLASHCL_TEST_LARGE_TENSORS_H
#define FLASHCL_TEST_LARGE_TENSORS_H

#include "test_util.h"

/* Skips the test (exit 77, the reason printed) unless the context's device is a GPU with at
 * least `device_bytes` of memory and the host has at least `host_bytes`. */
void lt_require_gpu_memory(flashcl_context *ctx, uint64_t device_bytes, uint64_t host_bytes);

/* Element `index` of the tensor `seed`: uniform in [lo, hi), rounded to `dt`, never 0. */
float lt_value(flashcl_dtype dt, uint64_t seed, uint64_t index, double lo, double hi);

/* A device buffer of `elems` elements of `dt` holding lt_value(dt, seed, i, lo, hi) at i
 * (cmocka asserts on failure). */
flashcl_buffer *lt_filled_buffer(flashcl_context *ctx, flashcl_dtype dt, uint64_t elems,
                                 uint64_t seed, double lo, double hi);

/* A device buffer of `elems` elements of `dt` holding the dtype's poison (tu_poison_bits). */
flashcl_buffer *lt_poisoned_buffer(flashcl_context *ctx, flashcl_dtype dt, uint64_t elems);

/* Elements [first, first + count) of a buffer of `dt`, widened to float, into out; *poisoned
 * counts those still holding the poison. */
void lt_read(const flashcl_buffer *b, flashcl_dtype dt, uint64_t first, uint64_t count,
             float *out, uint64_t *poisoned);

#endif
