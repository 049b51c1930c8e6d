/* The tensor-core building blocks of the attention kernels (cuda/attention_tc.cuh prefill,
 * cuda/attention_tc_decode.cuh decode, cuda/attention_tc_tf32x3.cuh f32): PTX wrappers for cp.async, ldmatrix and
 * mma.sync.m16n8k16, exp2 on the SFU, 16-bit packing, and the cp.async tile loader. */
#pragma once

#include "attention_common.cuh"

/* ---- PTX wrappers -------------------------------------------------------------------------- */

FC_DEVICE unsigned smem_u32(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }

/* 16 bytes global -> shared, bypassing L1; zero-filled when !valid (src is then not read). */
FC_DEVICE void cp_async16(void *dst, const void *src, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst)), "l"(src),
                 "r"(valid ? 16 : 0)
                 : "memory");
}
/* An L2 policy for bytes read exactly once (the decode kernel's K and V): evicted first, so
 * the stream does not push out what is read again (the split-KV partials the merge reads, Q,
 * the kernels' code). On an H200 it took B1 Hq32 Hkv4 Sk65536 D128 f16 decode from 41.0 to
 * 40.6 us and D 64 / D 256 decode by 1 % (2026-11-26). */
FC_DEVICE uint64_t l2_evict_first_policy() {
    uint64_t policy;
    asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
    return policy;
}
/* cp_async16 under an L2 cache policy. */
FC_DEVICE void cp_async16_hinted(void *dst, const void *src, bool valid, uint64_t policy) {
    asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;\n" ::"r"(smem_u32(dst)),
                 "l"(src), "r"(valid ? 16 : 0), "l"(policy)
                 : "memory");
}
FC_DEVICE void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
/* Waits until at most N of this thread's committed groups are still in flight. */
template <int N> FC_DEVICE void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

/* ldmatrix takes a shared-memory address: callers pass one per-thread base plus a compile-time
 * byte offset, which ptxas folds into the instruction instead of keeping an address register
 * per fragment alive across the key loop. */
FC_DEVICE void ldmatrix_x4(unsigned (&r)[4], unsigned address) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address));
}
FC_DEVICE void ldmatrix_x4_trans(unsigned (&r)[4], unsigned address) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address));
}

/* d += a·b for one 16x8x16 tile; A row-major 16x16, B column-major 16x8, f32 accumulators. */
template <int DT> FC_DEVICE void mma16816(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    if constexpr (DT == FC_F16)
        asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    else
        asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* Two f32 values as a 16-bit pair of dtype DT (low half = first), rounded to nearest even. */
template <int DT> FC_DEVICE unsigned pack_pair(float x, float y) {
    return narrow16(DT, x) | (narrow16(DT, y) << 16);
}

/* ---- where a block's tiles come from ------------------------------------------------------- */

/* The kv head's K and V rows of batch b (elements of ES bytes: 16-bit, or 4 for the f32
 * kernel), and the bytes between two keys. */
struct kv_sources {
    const char *k, *v;
    int64_t k_step, v_step;
};
template <int ES = 2>
FC_DEVICE kv_sources kv_sources_of(const fc_attention_args &a, int64_t b, int kv_head) {
    kv_sources s;
    s.k = reinterpret_cast<const char *>(a.k) + (b * a.k_strides[0] + kv_head * a.k_strides[2]) * ES;
    s.v = reinterpret_cast<const char *>(a.v) + (b * a.v_strides[0] + kv_head * a.v_strides[2]) * ES;
    s.k_step = a.k_strides[1] * ES, s.v_step = a.v_strides[1] * ES;
    return s;
}

/* The global address of packed query row R of (b, kv_head) (elements of ES bytes); ok: the row
 * exists. */
template <int ES = 2>
FC_DEVICE const char *q_row_address(const fc_attention_args &a, int64_t R, int64_t b, int kv_head, bool &ok) {
    int64_t i, h;
    unpack_row(a, R, kv_head, i, h);
    ok = R < a.seqlen_q * a.group;
    return reinterpret_cast<const char *>(a.q) + (b * a.q_strides[0] + i * a.q_strides[1] + h * a.q_strides[2]) * ES;
}

/* ---- tile loads ---------------------------------------------------------------------------- */

/* Where 16-byte chunk c of row r of a ROWS-row tile lands, in bytes from the tile's start. The
 * mma.sync kernels pad each row to DP + 8 16-bit elements (ldmatrix's 8 rows then fall into 8
 * bank groups); the wgmma kernel's 128-byte-swizzled layout is sw128_layout
 * (attention_wgmma_primitives.cuh). */
template <int DP> struct padded_layout {
    template <int ROWS> static FC_DEVICE int offset(int r, int c) { return (r * (DP + 8) + c * 8) * 2; }
};

/* Rows [0, ROWS) of a tile, DP/8 chunks of 16 bytes each, spread over THREADS threads (thread
 * `tid` of them: the block's, or one warp's lanes for a warp-private tile), placed as Layout
 * says. row_src(r, ok) gives the global address of row r's first element and whether it exists;
 * chunks at or past head_dim are zero-filled (the padded dims then add 0 to every dot), and a
 * zero-filled copy is given `base`, an address that is certainly mapped. */
template <int ROWS, int DP, int THREADS, typename Layout = padded_layout<DP>, typename RowSrc>
FC_DEVICE void load_tile(void *tile, int head_dim, const char *base, RowSrc row_src, int tid) {
    constexpr int CHUNKS = DP / 8;
    static_assert(ROWS * CHUNKS % THREADS == 0, "every thread copies the same number of chunks");
    unsigned char *bytes = static_cast<unsigned char *>(tile);
#pragma unroll
    for (int it = 0; it < ROWS * CHUNKS / THREADS; it++) {
        const int idx = it * THREADS + tid, r = idx / CHUNKS, c = idx % CHUNKS;
        bool ok;
        const char *src = row_src(r, ok);
        ok = ok && c * 8 < head_dim;
        cp_async16(bytes + Layout::template offset<ROWS>(r, c), ok ? src + c * 16 : base, ok);
    }
}

/* The same for a tile of evenly spaced rows (K, V): row r at first + r·stride_bytes, rows at or
 * past `valid` zero-filled. Walks one pointer instead of recomputing every row's address.
 * EVICT_FIRST: the rows are read once in the whole grid (l2_evict_first_policy). */
template <int ROWS, int DP, int THREADS, typename Layout = padded_layout<DP>, bool EVICT_FIRST = false>
FC_DEVICE void load_rows(void *tile, int head_dim, const char *first, int64_t stride_bytes,
                         int64_t valid, int tid) {
    constexpr int CHUNKS = DP / 8, STEP = THREADS / CHUNKS;
    unsigned char *bytes = static_cast<unsigned char *>(tile);
    const uint64_t policy = EVICT_FIRST ? l2_evict_first_policy() : 0;
    auto copy = [&](void *dst, const void *src, bool ok) {
        if constexpr (EVICT_FIRST) cp_async16_hinted(dst, src, ok, policy);
        else cp_async16(dst, src, ok);
    };
    if constexpr (THREADS % CHUNKS == 0 && ROWS % STEP == 0) {
        const int r = tid / CHUNKS, c = tid % CHUNKS;
        const bool dim_ok = c * 8 < head_dim;
        const char *src = first + r * stride_bytes + c * 16;
        const int64_t step = STEP * stride_bytes;
#pragma unroll
        for (int it = 0; it < ROWS / STEP; it++, src += step) {
            const bool ok = dim_ok && r + it * STEP < valid;
            copy(bytes + Layout::template offset<ROWS>(r + it * STEP, c), ok ? src : first, ok);
        }
    } else { /* a row's chunks do not divide the threads: each chunk finds its row */
        static_assert(ROWS * CHUNKS % THREADS == 0, "every thread copies the same number of chunks");
#pragma unroll
        for (int it = 0; it < ROWS * CHUNKS / THREADS; it++) {
            const int idx = it * THREADS + tid, r = idx / CHUNKS, c = idx % CHUNKS;
            const bool ok = c * 8 < head_dim && r < valid;
            copy(bytes + Layout::template offset<ROWS>(r, c), ok ? first + r * stride_bytes + c * 16 : first, ok);
        }
    }
}

/* Asks L2 for the rows load_rows would read (ROWS rows of head_dim 16-bit values, row r at
 * first + r·stride_bytes, rows at or past `valid` skipped), one 128-byte line per lane at a time.
 * A hint: what the kernel reads later is unaffected by it. */
template <int ROWS, int DP, int LANES>
FC_DEVICE void prefetch_rows_l2(const char *first, int64_t stride_bytes, int64_t valid, int head_dim, int lane) {
    constexpr int LINES = (DP * 2 + 127) / 128;
#pragma unroll
    for (int idx = lane; idx < ROWS * LINES; idx += LANES) {
        const int r = idx / LINES, c = idx % LINES;
        if (r < valid && c * 128 < head_dim * 2)
            asm volatile("prefetch.global.L2 [%0];\n" ::"l"(first + r * stride_bytes + c * 128));
    }
}

/* Stores the pair (x, y) of row (b, i, h) at dims d, d + 1: 16-bit o (one 32-bit store: the host
 * guarantees 16-byte aligned rows), f32 o or the f32 split-KV partial (one 64-bit store). */
template <int DT>
FC_DEVICE void store_o_pair(const fc_attention_args &a, int64_t b, int64_t i, int64_t h, int d,
                            float x, float y) {
    if (a.splits > 1) {
        float *p = reinterpret_cast<float *>(a.o_part) +
                   ((((int64_t)blockIdx.y * a.batch + b) * a.heads_q + h) * a.seqlen_q + i) * a.head_dim + d;
        *reinterpret_cast<float2 *>(p) = make_float2(x, y);
        return;
    }
    const int64_t e = b * a.o_strides[0] + i * a.o_strides[1] + h * a.o_strides[2] + d;
    if constexpr (DT == FC_F32) {
        *reinterpret_cast<float2 *>(reinterpret_cast<float *>(a.o) + e) = make_float2(x, y);
    } else {
        *reinterpret_cast<unsigned *>(reinterpret_cast<char *>(a.o) + e * 2) = pack_pair<DT>(x, y);
    }
}

/* ---- the online softmax of one 16-row tile ------------------------------------------------- */

/* Turns the raw scores of one key block into probabilities for one 16-row mma tile, as laid out
 * by mma's accumulators: this thread holds rows g and g + 8 (h = e / 2) at keys
 * n * 8 + 2t + (e & 1). Rescales the rows' sums l and updates their maxima m (log2 domain),
 * and returns in alpha the factor by which the caller must rescale their accumulators. Without softcap and with a positive scale the scores stay raw: the max
 * of raw scores times scale·log2(e) is the max of the scaled ones, and each probability is
 * exp2(fma(s, scale·log2(e), -m)), the scale folded into one FMA; otherwise they are transformed
 * first. row0: the tile's first packed row; n0: the block's first key; `masked` is false
 * when every key of the block is visible to every row. */
template <int NT>
FC_DEVICE void online_softmax_scores(const fc_attention_args &a, float (&s)[NT][4], float (&m)[2],
                                     float (&l)[2], float (&alpha)[2], bool masked, int64_t row0,
                                     int64_t n0, int g, int t) {
    const bool fold = a.softcap == 0.0f && a.scale_log2 > 0.0f;
    const float c = fold ? a.scale_log2 : 1.0f;
    if (!fold) {
#pragma unroll
        for (int n = 0; n < NT; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) s[n][e] = score_log2(a, s[n][e]);
    }
    if (masked) { /* rare (diagonal and edge blocks): the rows' ranges are recomputed here */
        int key_lo[2], key_hi[2]; /* relative to n0, clamped to [-1, KEYS] */
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const key_range r = visible_keys(a, (row0 + g + 8 * h) / a.group);
            key_lo[h] = (int)max((int64_t)-1, min((int64_t)NT * 8, r.lo - n0));
            key_hi[h] = (int)max((int64_t)-1, min((int64_t)NT * 8, r.hi - n0));
        }
#pragma unroll
        for (int n = 0; n < NT; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int h = e / 2, key = n * 8 + 2 * t + (e & 1);
                if (key < key_lo[h] || key > key_hi[h]) s[n][e] = -INFINITY;
            }
    }
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < NT; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) tile_max[e / 2] = fmaxf(tile_max[e / 2], s[n][e]);
    float sub[2];
#pragma unroll
    for (int h = 0; h < 2; h++) { /* a row's columns are spread over the 4 lanes of its group */
        tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 1));
        tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 2));
        alpha[h] = online_rescale(m[h], tile_max[h] * c, sub[h]);
        l[h] *= alpha[h];
    }
#pragma unroll
    for (int n = 0; n < NT; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            s[n][e] = fast_exp2(fmaf(s[n][e], c, -sub[e / 2]));
            l[e / 2] += s[n][e];
        }
}

/* Multiplies this thread's accumulators of rows g (h = 0) and g + 8 (h = 1) by alpha[h]. */
template <int DT8>
FC_DEVICE void rescale_o(float (&o)[DT8][4], const float (&alpha)[2]) {
#pragma unroll
    for (int j = 0; j < DT8; j++)
#pragma unroll
        for (int h = 0; h < 2; h++) o[j][2 * h] *= alpha[h], o[j][2 * h + 1] *= alpha[h];
}

/* online_softmax_scores, then the accumulators rescaled at once (kernels that do not overlap
 * the rescale with a product still in flight). */
template <int NT, int DT8>
FC_DEVICE void online_softmax_tile(const fc_attention_args &a, float (&s)[NT][4], float (&o)[DT8][4],
                                   float (&m)[2], float (&l)[2], bool masked, int64_t row0,
                                   int64_t n0, int g, int t) {
    float alpha[2];
    online_softmax_scores(a, s, m, l, alpha, masked, row0, n0, g, t);
    rescale_o(o, alpha);
}

/* The A operand of P·V for keys [16kk, 16kk + 16) from the probabilities of key tiles 2kk and
 * 2kk + 1: mma's accumulator layout of S is exactly its A layout. P is rounded to DT, as
 * FlashAttention does; the row sums l keep the unrounded values, so the error this adds to o is
 * at most the unit roundoff of DT times max|v|. */
template <int DT, int NT>
FC_DEVICE void probabilities_as_a(unsigned (&p)[4], const float (&s)[NT][4], int kk) {
    p[0] = pack_pair<DT>(s[2 * kk][0], s[2 * kk][1]);
    p[1] = pack_pair<DT>(s[2 * kk][2], s[2 * kk][3]);
    p[2] = pack_pair<DT>(s[2 * kk + 1][0], s[2 * kk + 1][1]);
    p[3] = pack_pair<DT>(s[2 * kk + 1][2], s[2 * kk + 1][3]);
}

/* The sum of a row's values spread over the 4 lanes of its group (mma's accumulator layout). */
FC_DEVICE float row_group_sum(float v) {
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

/* What normalises a row of sum l: 1/l, or 0 when no key was visible (o = 0, never NaN). */
FC_DEVICE float row_normaliser(float l) { return l > 0.0f ? 1.0f / l : 0.0f; }

/* Row sums over the 4 lanes of a row group, normalisation, and the stores of o and lse (or the
 * split-KV partials) for one 16-row tile whose first packed row is `row0`. */
template <int DT, int DT8>
FC_DEVICE void store_tile(const fc_attention_args &a, int64_t row0, int64_t b, int kv_head,
                          float (&o)[DT8][4], const float (&m)[2], float (&l)[2], int g, int t) {
    const int64_t packed = a.seqlen_q * a.group;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        l[h] = row_group_sum(l[h]);
        const float inv = row_normaliser(l[h]);
        const int64_t row = row0 + g + 8 * h;
        int64_t qi, qh;
        if (row >= packed) continue;
        unpack_row(a, row, kv_head, qi, qh);
#pragma unroll
        for (int j = 0; j < DT8; j++) {
            const int d = j * 8 + 2 * t;
            if (d < a.head_dim) store_o_pair<DT>(a, b, qi, qh, d, o[j][2 * h] * inv, o[j][2 * h + 1] * inv);
        }
        if (t == 0) store_lse(a, b, qi, qh, m[h], l[h]);
    }
}

/* The unsplit epilogue, first half: row sums over the 4 lanes of a row group, normalisation,
 * and the 16-row tile's o (mma's accumulator layout) written as 16-bit pairs into rows
 * [r, r + 16) of a staging tile of STRIDE elements per row; the rows' lse go straight out. r0:
 * the block's first packed row (staging row x is packed row r0 + x). */
template <int DT, int DT8, int STRIDE>
FC_DEVICE void stage_o_tile(const fc_attention_args &a, uint16_t *tile, int r, int64_t r0, int64_t b,
                            int kv_head, const float (&o)[DT8][4], const float (&m)[2], float (&l)[2],
                            int g, int t) {
#pragma unroll
    for (int h = 0; h < 2; h++) {
        l[h] = row_group_sum(l[h]);
        const float inv = row_normaliser(l[h]);
        const int x = r + g + 8 * h;
#pragma unroll
        for (int j = 0; j < DT8; j++)
            *reinterpret_cast<unsigned *>(tile + x * STRIDE + j * 8 + 2 * t) =
                pack_pair<DT>(o[j][2 * h] * inv, o[j][2 * h + 1] * inv);
        const int64_t row = r0 + x;
        if (t == 0 && row < a.seqlen_q * a.group) {
            int64_t qi, qh;
            unpack_row(a, row, kv_head, qi, qh);
            store_lse(a, b, qi, qh, m[h], l[h]);
        }
    }
}

/* The unsplit epilogue, second half (after a barrier): rows [0, ROWS) of the staging tile (DP + 8
 * elements per row) to o in 16-byte chunks, chunks past head_dim and rows past the packed rows
 * left out. */
template <int DP, int ROWS, int THREADS>
FC_DEVICE void copy_out_rows(const fc_attention_args &a, const uint16_t *tile, int64_t r0, int64_t b,
                             int kv_head) {
    constexpr int CHUNKS = DP / 8, STRIDE = DP + 8;
#pragma unroll 1
    for (int idx = threadIdx.x; idx < ROWS * CHUNKS; idx += THREADS) {
        const int r = idx / CHUNKS, c = idx % CHUNKS;
        int64_t qi, qh;
        if (r0 + r >= a.seqlen_q * a.group || c * 8 >= a.head_dim) continue;
        unpack_row(a, r0 + r, kv_head, qi, qh);
        char *dst = reinterpret_cast<char *>(a.o) + (b * a.o_strides[0] + qi * a.o_strides[1] + qh * a.o_strides[2] + c * 8) * 2;
        *reinterpret_cast<uint4 *>(dst) = *reinterpret_cast<const uint4 *>(tile + r * STRIDE + c * 8);
    }
}
