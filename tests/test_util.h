/* Shared helpers of the flashcl test suite: the test context (or a clean skip), seeded random
 * data, poisoned buffers, and the softmax checker that compares every output element against
 * host_ref and proves that nothing outside the output view was written.
 *
 * Tolerances (the same for every softmax test; see tu_softmax_tol):
 *   The kernels accumulate in f32, so the value they compute before the final store is allowed
 *   to differ from the double reference `ref` by
 *     softmax:      e = 1e-5 * |ref| + 1e-20   (relative: f32 exp and sum; the tiny absolute
 *                                               floor covers flushed subnormals only)
 *     log-softmax:  e = 1e-5 + 2^-20 * |ref|   (absolute on the log scale: log of the f32 sum;
 *                                               relative for huge |ref| from ~1e30 inputs)
 *   and the stored output must then be the output dtype's round-to-nearest of some real
 *   within [ref - e, ref + e]. For f32 that is |got - ref| <= e + half an ulp; for f16 and bf16
 *   it means the quantisation of the output dtype dominates (half an ulp: 2^-11 relative for
 *   f16, 2^-8 for bf16, plus the f16 subnormal step 2^-24) and a truncating store fails.
 *   Special values must match exactly: NaN where ref is NaN, +-inf where ref is +-inf, and an
 *   exact 0 where ref is exactly 0 (an input of -inf).
 */
#ifndef FLASHCL_TEST_UTIL_H
#define FLASHCL_TEST_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "flashcl.h"
#include "host_ref.h"

#define TU_SKIP_CODE 77

/* ---- context ---------------------------------------------------------------------------------- */

/* The folder the tests use as binary cache: $FLASHCL_TEST_CACHE_DIR (CTest sets one inside the
 * build tree) or a fresh temporary folder, so that tests never write to ~/.cache. */
const char *tu_cache_dir(void);

/* Creates a context the normal way (opts: AUTO backend, best device, no name match, the test
 * cache dir), so FLASHCL_BACKEND / FLASHCL_DEVICE in the environment pick the device. When
 * there is no device it prints "SKIP: no OpenCL device: <reason>" and exits with 77; any other
 * failure prints the reason and exits with 1. Also prints the device it runs on. */
flashcl_context *tu_context_or_skip(void);

/* Same, returning the status (for tests that look at failures themselves). */
flashcl_status tu_context_create(const char *cache_dir, flashcl_context **out);

/* A contiguous 2-D view [rows, cols] of `b` at offset 0. */
flashcl_tensor tu_view2d(flashcl_buffer *b, flashcl_dtype dt, int64_t rows, int64_t cols);

/* Exits with 77 after printing the reason when `st` is FLASHCL_DEVICE_NOT_FOUND. */
void tu_skip_if_no_device(flashcl_status st);

/* For a probe context that only decides whether a test about OpenCL programs can run: `st` is
 * the probe's creation status (no device: skip and exit 77 as tu_skip_if_no_device; another
 * failure: print it and exit 1). Destroys the probe. Returns 1 on the OpenCL backend; otherwise
 * prints "SKIP: the context is on the <backend> backend, whose kernels are compiled ahead of
 * time (<what_is_missing>)" and returns 0: the caller cleans up and exits with 77. */
int tu_probe_is_opencl(flashcl_status st, flashcl_context *probe, const char *what_is_missing);

/* Turns cmocka's failure count into an exit status that is never 77. */
int tu_exit_code(int failures);

/* ---- temporary files ------------------------------------------------------------------------ */

/* mkdtemp under $TMPDIR (or /tmp); returns a malloc'ed path. */
char *tu_make_temp_dir(const char *tag);
/* rm -rf of a folder made by tu_make_temp_dir. */
void tu_remove_tree(const char *path);

/* ---- random numbers: splitmix64, seeded, reproducible --------------------------------------- */

/* Rows that every device must run with a forced ROW_IN_REGISTERS. A work-group's register
 * capacity is the device's (its per-kernel work-group limit x elements per item): 4096 f32
 * columns on PoCL and NVIDIA, but Rusticl's llvmpipe allows only 32 work-items for these
 * kernels (512 columns). Beyond this the variant may answer FLASHCL_UNSUPPORTED. */
#define TU_RIR_GUARANTEED_COLS 512

typedef struct tu_rng {
    uint64_t state;
} tu_rng;

/* The suite's base seed: $FLASHCL_TEST_SEED or a fixed default. */
uint64_t tu_base_seed(void);
void tu_rng_seed(tu_rng *rng, uint64_t seed);
uint64_t tu_rng_next(tu_rng *rng);
/* Uniform in [lo, hi). */
double tu_rng_uniform(tu_rng *rng, double lo, double hi);
/* Uniform integer in [0, n). */
uint64_t tu_rng_below(tu_rng *rng, uint64_t n);

/* ---- poison ----------------------------------------------------------------------------------- */

/* A distinctive NaN bit pattern per dtype that no kernel produces by accident:
 * f32 0x7fc0dead, f16 0xfe7f, bf16 0xffad. An output element still holding it was not written;
 * an input element holding it, read by mistake, turns a row into NaN. */
uint32_t tu_poison_bits(flashcl_dtype dtype);
/* Fills `bytes` of memory with the dtype's poison (element-aligned from `p`). */
void tu_poison(void *p, size_t bytes, flashcl_dtype dtype);
/* Element `index` of a packed array holds the poison pattern. */
int tu_is_poison(flashcl_dtype dtype, const void *data, size_t index);
/* Bits of element `index` (zero-extended). */
uint32_t tu_element_bits(flashcl_dtype dtype, const void *data, size_t index);

/* ---- softmax ---------------------------------------------------------------------------------- */

/* Row contents, chosen per row by tu_softmax_case.kinds. */
typedef enum tu_row_kind {
    TU_ROW_RANDOM = 0,  /* uniform in [lo, hi) */
    TU_ROW_SOME_NEG_INF,/* random, every third entry (j % 3 == 1) -inf */
    TU_ROW_ALL_NEG_INF, /* every entry -inf: NaN row */
    TU_ROW_ONE_NAN,     /* random with one NaN: NaN row */
    TU_ROW_ONE_POS_INF, /* random with one +inf: NaN row */
    TU_ROW_HUGE,        /* +-[0.5, 1) * 1e30 (inf in f16) */
    TU_ROW_NEAR_1000,   /* 1000 + [-1, 1) */
    TU_ROW_CONSTANT,    /* every entry 5: uniform output */
    TU_ROW_WIDE,        /* uniform in [-60, 60): the exp range, underflow to (sub)normals */
    TU_ROW_KIND_COUNT
} tu_row_kind;

typedef struct tu_softmax_case {
    flashcl_dtype xt, yt;
    int64_t rows, cols;
    int64_t x_pad, y_pad;       /* row stride = cols + pad (elements) */
    size_t x_off, y_off;        /* view offsets in elements (bytes = elements * size) */
    size_t tail;                /* extra elements after the view (0: the view ends the buffer) */
    float scale;                /* as passed: 0 means 1 */
    int log;
    int in_place;               /* y is x's view (requires xt == yt; y_* ignored) */
    flashcl_softmax_variant variant;
    int special;                /* 0: every row TU_ROW_RANDOM; 1: row r is kind
                                   (r + kind_offset) % TU_ROW_KIND_COUNT */
    int kind_offset;
    int allow_unsupported;      /* FLASHCL_UNSUPPORTED is acceptable (output checked untouched) */
    int params_null;            /* pass params = NULL (scale and log must be 0 then) */
    double lo, hi;              /* range for random rows; 0, 0 means [-8, 8) */
} tu_softmax_case;

/* A readable one-line description of a case (static buffer). */
const char *tu_case_str(const tu_softmax_case *c);

/* Tolerance of the f32 computation, see the top of this file. */
double tu_softmax_tol(double ref, int log);

/* Whether `got` (an element of dtype `dt`, given as float) is acceptable for the double
 * reference `ref` under tolerance `e`. */
int tu_value_ok(flashcl_dtype dt, float got, double ref, double e);

/* Generates the input from `seed`, runs flashcl_softmax on the test context, and checks with
 * cmocka asserts: status SUCCESS (or UNSUPPORTED when allowed, with the output untouched),
 * every output element against host_ref_softmax_row of the dtype-rounded input, no element
 * left holding the poison, and every byte outside the output view unchanged. Returns the
 * status; *hash (may be NULL) receives a hash of the whole output buffer, for determinism. */
flashcl_status tu_softmax_check(flashcl_context *ctx, const tu_softmax_case *c, uint64_t seed,
                                uint64_t *hash);

/* Fills one row of `cols` floats with `kind` (values before dtype rounding). */
void tu_fill_row(float *row, int64_t cols, tu_row_kind kind, double lo, double hi,
                 tu_rng *rng);

/* Picks the layout and numeric options of `c` at random (rows, cols, dtypes and variant are
 * kept): row pads 0 or odd, element offsets 0 or 1..3, tail 0 or 8, scale 0 / 0.37 / -1.5,
 * log, in place (only when xt == yt), special rows. */
void tu_randomize_layout(tu_softmax_case *c, tu_rng *rng);

/* All 9 (x dtype, y dtype) pairs. */
extern const flashcl_dtype tu_pairs[9][2];

#endif
