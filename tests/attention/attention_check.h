/* The attention tests' case description and checker: builds q, k, v (random, never zero) in the
 * requested layouts, poisons o and lse, runs flashcl_attention_forward and compares every output
 * element with host_ref_attention (double), and every byte outside the output views with what was
 * there before.
 *
 * Tolerances (ta_tol): the kernels compute in f32 whatever the storage dtype, so the value they
 * compute before the final store may differ from the double reference by
 *     o:    e = 1e-5 + 1e-5·|ref|     (f32 dot products over up to 256 dims, exp2, one division;
 *                                      PoCL stays under 1e-6 on these inputs: a 10x margin)
 *     lse:  e = 1e-5 + 2e-6·|ref|     (log of the f32 row sum, scores carry the dot-product error)
 * and the stored o must be the round-to-nearest, in the storage dtype, of a real within e of the
 * reference (tu_value_ok: half an ulp of f16 / bf16 dominates there). Rows with no visible key
 * must be exactly 0 with lse exactly -inf. FLASHCL_TEST_VERBOSE=1 prints every passing case
 * with its largest error (to see how much margin the tolerance leaves on a device). */
#ifndef FLASHCL_ATTENTION_CHECK_H
#define FLASHCL_ATTENTION_CHECK_H

#include "test_util.h"
#include "attention_ref.h"

/* How a [B, S, H, D] tensor lies in its buffer. */
typedef enum ta_layout {
    TA_BSHD = 0,    /* packed, heads inside positions (the PyTorch default) */
    TA_BHSD,        /* packed, positions inside heads */
    TA_PADDED,      /* BSHD with gaps: every head row and every position padded */
    TA_KV_PACKED,   /* k and v interleaved in one buffer [B, S, 2, H, D] (k and v only) */
    TA_BROADCAST,   /* batch stride 0: every batch reads the same [S, H, D] (inputs only) */
    TA_LAYOUT_COUNT
} ta_layout;

typedef struct ta_case {
    flashcl_dtype dtype;
    int64_t batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim;
    ta_layout q_layout, kv_layout, o_layout; /* kv_layout applies to k and v */
    int lse_mode;                /* 0: no lse, 1: packed [B, H, Sq], 2: padded + offset */
    size_t q_off, kv_off, o_off; /* extra element offsets of the views */
    flashcl_attention_params params;
    int params_null;             /* pass NULL params (then params must be all defaults) */
    int allow_unsupported;       /* FLASHCL_UNSUPPORTED is acceptable (outputs untouched) */
} ta_case;

/* Default params: scale 0 (1/sqrt(D)), not causal, no window, no softcap. */
flashcl_attention_params ta_default_params(void);

/* A case of the given shape, packed BSHD layouts, lse on (packed), default params. */
ta_case ta_new_case(flashcl_dtype dt, int64_t batch, int64_t seqlen_q, int64_t seqlen_k,
                    int64_t heads_q, int64_t heads_kv, int64_t head_dim);

/* One-line description (static buffer). */
const char *ta_case_str(const ta_case *c);

/* The tolerance the CUDA tensor-core paths add for 16-bit storage (see attention_check.c). */
double ta_p_rounding_allowance(flashcl_context *ctx, flashcl_dtype dt, double max_abs_v);

/* Runs the case with inputs from `seed` and checks everything (cmocka asserts; failures print
 * the case). Returns the status of flashcl_attention_forward. */
flashcl_status ta_check(flashcl_context *ctx, const ta_case *c, uint64_t seed);

/* Element strides of a [B, S, H, D] tensor in `layout`, its element count in a buffer (view
 * offset excluded). For TA_KV_PACKED the strides step over both tensors; v starts H·D later. */
void ta_strides(ta_layout layout, int64_t B, int64_t S, int64_t H, int64_t D, int64_t st[4],
                size_t *elems);

/* Random values (uniform in [lo, hi), rounded to dtype, never exactly 0) into the view's
 * elements of a buffer image `img` (dtype elements) and the float mirror `f` (same indexing). */
void ta_fill(flashcl_dtype dt, void *img, float *f, size_t off, const int64_t shape[4],
             const int64_t st[4], double lo, double hi, tu_rng *rng);

/* A buffer holding `bytes` copied from `src` (asserts on failure). */
flashcl_buffer *ta_buffer(flashcl_context *ctx, const void *src, size_t bytes);

/* Whether FLASHCL_TEST_LARGE=1 asks for the bigger cases (GPU machines). */
int ta_large(void);

/* Whether the context's device runs the CPU attention kernels (cl/attention_cpu.cl): an OpenCL
 * CPU device but Mesa's llvmpipe, or Oclgrind, which builds them so that the simulator checks
 * them (src/opencl/attention_plan.c). Their families can be forced there with
 * FLASHCL_ATTENTION_FAMILY=rows_vector or decode_vector. */
int ta_cpu_kernels_device(flashcl_context *ctx);

/* For a test binary that CTest also runs with FLASHCL_ATTENTION_NO_CPU_KERNELS=1, so that CPU
 * devices run it on the generic kernels that GPUs are built from: where the device has no CPU
 * kernels that run repeats the default one, so it exits 77 (skip) with the reason. */
void ta_skip_repeat_without_cpu_kernels(flashcl_context *ctx);

#endif
