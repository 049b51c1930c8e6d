/* What the softmax kernels (cuda/softmax*.cuh, CUDA C++) and their host side (src/cuda/softmax.c,
 * C99) must agree on: the argument block and the table of row-in-registers configurations.
 * Plain C so that both compilers read the same text. */
#ifndef FLASHCL_CUDA_SOFTMAX_SHARED_H
#define FLASHCL_CUDA_SOFTMAX_SHARED_H

#include <stdint.h>

/* The single by-value argument of every softmax kernel. Fixed-width members, ordered from wide
 * to narrow, so that the host compiler and nvcc lay it out identically. */
typedef struct fc_softmax_args {
    uint64_t x, y;              /* device addresses of row 0 of x and y (view offsets applied) */
    int64_t rows, cols;
    int64_t x_stride, y_stride; /* elements between consecutive rows */
    int64_t chunk_cols;         /* split kernels: columns per chunk (a multiple of the step) */
    uint64_t partials;          /* split kernels: float2 (max, sum) per (row, chunk) */
    uint64_t counters;          /* resident split, staged: uint32 arrivals per row, zeroed
                                   before launch; split-held: its region of the split state
                                   (64-bit words, all 0 when it starts; src/cuda/split_state.c) */
    uint64_t clear;             /* split-held: the split state's other region, whose first
                                   clear_words words each block zeroes clear_per of */
    float scale;                /* never 0 (api.c defaults it to 1) */
    int32_t log;                /* nonzero: log-softmax */
    int32_t y_dtype;            /* flashcl_dtype of y; x's dtype is the kernel's template */
    int32_t x_vec_ok;           /* every x row starts 16-byte aligned: 16-byte loads allowed */
    int32_t y_vec_ok;           /* every y row is aligned for the vector stores (see softmax.c) */
    int32_t chunks;             /* split kernels: chunks per row */
    int32_t smem_parts;         /* resident split: parts of a chunk parked in shared memory */
    int32_t buffers;            /* staged: chunk buffers in shared memory (1, or 2: the next
                                   item loads while this one is worked on) */
    int32_t held_cols;          /* staged: columns of a chunk held in a buffer; the rest of the
                                   chunk is read twice from global memory (the second time
                                   mostly from L2) */
    uint32_t clear_words, clear_per; /* split-held: see clear */
    int16_t shifted;            /* row-in-registers: x rows not 16-byte aligned, held in their
                                   shifted layout (cuda/softmax.cuh, shifted_row; the host
                                   picks a configuration that covers cols + a vector - 1) */
    int16_t prefetch;           /* row-in-registers: the block's rows are asked of L2 before
                                   the kernel waits for the one before it (softmax_rows). Two
                                   16-bit members: at 136 bytes instead of 128 ptxas spilled
                                   the f32 row kernels of 16 and 32 values */
} fc_softmax_args;
/* Both sides check this (static assertions in softmax.c and softmax.cuh). */
#define FC_SOFTMAX_ARGS_BYTES 128

/* Row-in-registers configurations: X(name, group, items, block).
 * A group of `group` threads owns one row; each thread holds `items` values in registers, so a
 * configuration takes rows of up to group * items columns. `block` threads per block: groups
 * smaller than a warp share blocks of 128; larger groups are the whole block. The host picks
 * the first configuration whose capacity covers the row (src/cuda/softmax.c, row_config).
 * g8x8 serves rows of 33..64 columns, which g16x8 held with half its threads idle: H200,
 * 2026-11-26, ms, against g16x8 in the same call (torch.softmax beside): 65536x64 f16 0.0082
 * against 0.0162 (0.0112), f32 0.0115 against 0.0158 (0.0117); 131072x48 f16 0.0165 against
 * 0.0295 (0.0199); 262144x40 f32 0.0294 against 0.0559 (0.0382)
 * (bench/results/2026-11-26-h200-s18-g8x8-rows.txt).
 * g4x16, g8x16, g16x16 and g16x32 (last, so that the indices above stay) hold 16-bit rows of
 * up to 64, 128, 256 and 512 columns 16 or 32 values a thread, where the rows are held in
 * 16-byte vectors (src/cuda/softmax_plan.c, fc_cuda_row_config_for); f32 never takes them. */
#define FC_SOFTMAX_ROW_CONFIGS(X)       \
    X(g4x8, 4, 8, 128)                  \
    X(g8x8, 8, 8, 128)                  \
    X(g16x8, 16, 8, 128)                \
    X(g32x8, 32, 8, 128)                \
    X(g32x16, 32, 16, 128)              \
    X(g32x32, 32, 32, 128)              \
    X(b128x16, 128, 16, 128)            \
    X(b256x16, 256, 16, 256)            \
    X(b512x16, 512, 16, 512)            \
    X(b512x32, 512, 32, 512)            \
    X(b1024x32, 1024, 32, 1024)         \
    X(b128x32, 128, 32, 128)            \
    X(b256x32, 256, 32, 256)            \
    X(g4x16, 4, 16, 128)                \
    X(g8x16, 8, 16, 128)                \
    X(g16x16, 16, 16, 128)              \
    X(g16x32, 16, 32, 128)

/* The resident split kernel holds a chunk of (1 + smem_parts) * THREADS * ITEMS columns per block:
 * one part in registers (16 values per thread, not 32: its item loop and the partial exchange
 * need registers of their own under the 64-register cap of two 512-thread blocks per SM) and
 * up to MAX_SMEM_PARTS parts of 32 KiB each in dynamic shared memory. */
#define FC_SOFTMAX_RESIDENT_THREADS 512
#define FC_SOFTMAX_RESIDENT_ITEMS 16
#define FC_SOFTMAX_RESIDENT_MAX_SMEM_PARTS 3

/* Streaming kernels (online chunked, split statistics / normalisation): threads per block and
 * values each thread loads per step (four 16-byte vectors of f32, two of f16/bf16: more would
 * spill under the 64-register cap). Chunk boundaries are multiples of THREADS * VALUES columns,
 * so every chunk starts vector-aligned. */
#define FC_SOFTMAX_STREAM_THREADS 512
#define FC_SOFTMAX_STREAM_VALUES 16

/* The staged kernel (cuda/softmax_staged.cuh): one block of this many threads per SM, chunks of a
 * row in shared memory. */
#define FC_SOFTMAX_STAGED_THREADS 1024

/* The split-held kernel (cuda/softmax_split_held.cuh): blocks of THREADS threads with ITEMS
 * values each in registers hold a slice of THREADS * ITEMS columns of a row; launch bounds ask
 * for BLOCKS_PER_SM of them per SM (64 registers per thread). */
#define FC_SOFTMAX_SPLIT_HELD_THREADS 256
#define FC_SOFTMAX_SPLIT_HELD_ITEMS 32
#define FC_SOFTMAX_SPLIT_HELD_BLOCKS_PER_SM 4
/* Its 16-bit form (held_bits): values kept as storage bits, two per register, so as many
 * registers hold slices of THREADS * BITS_ITEMS columns. */
#define FC_SOFTMAX_SPLIT_HELD_BITS_ITEMS 64
/* Its wide form (16-bit inputs, whole rows): blocks of WIDE_THREADS, WIDE_BLOCKS_PER_SM of them
 * per SM (64 registers per thread still), slices of twice the columns. */
#define FC_SOFTMAX_SPLIT_HELD_WIDE_THREADS 512
#define FC_SOFTMAX_SPLIT_HELD_WIDE_BLOCKS_PER_SM 2
/* Its narrow form (aligned f32 rows): blocks of NARROW_THREADS, NARROW_BLOCKS_PER_SM of them per
 * SM, slices of half the columns, as the OpenCL cooperative split row's groups of 128. */
#define FC_SOFTMAX_SPLIT_HELD_NARROW_THREADS 128
#define FC_SOFTMAX_SPLIT_HELD_NARROW_BLOCKS_PER_SM 8
/* Its ring form (cuda/softmax_split_held_ring.cuh): RING_SLOTS slices parked a block in dynamic
 * shared memory (16 bytes x ITEMS / VEC x THREADS each: 32 KiB), RING_BLOCKS_PER_SM blocks an SM. */
#define FC_SOFTMAX_SPLIT_HELD_RING_SLOTS 2
#define FC_SOFTMAX_SPLIT_HELD_RING_BLOCKS_PER_SM 3
/* Its deep merged form (aligned rows of more slices than the grid holds): blocks of
 * DEEP_THREADS holding DEEP_ITEMS f32 (DEEP_BITS_ITEMS 16-bit values) a thread as bits (up to
 * 128 registers), DEEP_BLOCKS_PER_SM of them an SM, each parking a slice of 44 KiB in static
 * shared memory (under its 48 KiB). */
#define FC_SOFTMAX_SPLIT_HELD_DEEP_THREADS 128
#define FC_SOFTMAX_SPLIT_HELD_DEEP_ITEMS 88
#define FC_SOFTMAX_SPLIT_HELD_DEEP_BITS_ITEMS 176
#define FC_SOFTMAX_SPLIT_HELD_DEEP_BLOCKS_PER_SM 4

#endif
