/* Attention forward on tensor cores (f16 / bf16 storage, f32 accumulation): FlashAttention-2's
 * schedule with mma.sync.m16n8k16, ldmatrix and cp.async.
 *
 * A block of 4 warps owns 64 packed rows (GQA: the query heads of one kv head share its K/V
 * tiles); each warp owns 16 of them. Per key block: S = Q·Kᵀ in registers (ldmatrix of Q and K
 * from shared memory), scale·log2(e) applied in one multiply, mask, online softmax with exp2, and
 * O += P·V with P kept in registers: the S accumulators are laid out exactly as the A operand
 * of the next mma wants them. P is split into a 16-bit high part and the 16-bit rounding of the
 * rest, two MMAs: a single bf16 rounding of P (2^-9) would exceed the f32-level tolerance the
 * library promises. Key blocks are walked from the last visible one down, so the blocks that
 * straddle the causal diagonal or the end of the keys come first and only they pay for the mask.
 *
 * Shared memory: Q [64][DP], K [KEYS][DP], V [KEYS][DP] (16-bit), rows padded by 16 bytes so
 * that the 8 rows an ldmatrix reads fall into 8 different bank groups. One buffer each, loads
 * overlapped FlashAttention-style: V(j) streams in while S(j) is computed, K(j+1) while P(j)·V(j)
 * is. Global rows must be 16-byte aligned (the host checks; other layouts use the SIMT kernel). */
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
FC_DEVICE void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
FC_DEVICE void cp_async_wait_all_but_one() { asm volatile("cp.async.wait_group 1;\n" ::: "memory"); }

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

/* Two f32 values as a 16-bit pair (low half = first), and what that rounding left over. */
template <int DT> FC_DEVICE unsigned pack_pair(float x, float y, float &rx, float &ry) {
    const unsigned bx = narrow16(DT, x), by = narrow16(DT, y);
    rx = x - (DT == FC_F16 ? __half2float(__ushort_as_half((unsigned short)bx))
                           : __uint_as_float(bx << 16));
    ry = y - (DT == FC_F16 ? __half2float(__ushort_as_half((unsigned short)by))
                           : __uint_as_float(by << 16));
    return bx | (by << 16);
}
template <int DT> FC_DEVICE unsigned pack_pair(float x, float y) {
    return narrow16(DT, x) | (narrow16(DT, y) << 16);
}

/* ---- tile loads ---------------------------------------------------------------------------- */

/* Rows [0, ROWS) of a tile, DP/8 chunks of 16 bytes each, spread over the block's threads.
 * row_src(r, ok) gives the global address of row r's first element and whether it exists;
 * chunks at or past head_dim are zero-filled (the padded dims then add 0 to every dot), and a
 * zero-filled copy is given `base`, an address that is certainly mapped. */
template <int ROWS, int DP, int THREADS, typename RowSrc>
FC_DEVICE void load_tile(uint16_t *tile, int head_dim, const char *base, RowSrc row_src) {
    constexpr int CHUNKS = DP / 8, STRIDE = DP + 8;
    static_assert(ROWS * CHUNKS % THREADS == 0, "every thread copies the same number of chunks");
#pragma unroll
    for (int it = 0; it < ROWS * CHUNKS / THREADS; it++) {
        const int idx = it * THREADS + threadIdx.x, r = idx / CHUNKS, c = idx % CHUNKS;
        bool ok;
        const char *src = row_src(r, ok);
        ok = ok && c * 8 < head_dim;
        cp_async16(tile + r * STRIDE + c * 8, ok ? src + c * 16 : base, ok);
    }
}

/* Stores the pair (x, y) of row (b, i, h) at dims d, d + 1: 16-bit o (one 32-bit store: the host
 * guarantees 16-byte aligned rows), or the f32 split-KV partial (one 64-bit store). */
template <int DT>
FC_DEVICE void store_o_pair(const fc_attention_args &a, int64_t b, int64_t i, int64_t h, int d,
                            float x, float y) {
    if (a.splits > 1) {
        float *p = reinterpret_cast<float *>(a.o_part) +
                   ((((int64_t)blockIdx.y * a.batch + b) * a.heads_q + h) * a.seqlen_q + i) * a.head_dim + d;
        *reinterpret_cast<float2 *>(p) = make_float2(x, y);
        return;
    }
    char *p = reinterpret_cast<char *>(a.o) + (b * a.o_strides[0] + i * a.o_strides[1] + h * a.o_strides[2] + d) * 2;
    *reinterpret_cast<unsigned *>(p) = pack_pair<DT>(x, y);
}

/* ---- the kernel ---------------------------------------------------------------------------- */

template <int DT, int DP, int KEYS>
__device__ void attention_tc(const fc_attention_args &a) {
    constexpr int ROWS = FC_ATTENTION_TC_ROWS, THREADS = FC_ATTENTION_TC_THREADS;
    constexpr int STRIDE = DP + 8, NT = KEYS / 8, DT8 = DP / 8;
    extern __shared__ __align__(16) uint16_t smem[];
    uint16_t *q_tile = smem, *k_tile = smem + ROWS * STRIDE, *v_tile = k_tile + KEYS * STRIDE;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;

    int64_t r0, b;
    int kv_head;
    block_position(a, ROWS, r0, b, kv_head);
    const int64_t packed = a.seqlen_q * a.group;
    const block_keys plan = plan_keys(a, r0, ROWS, KEYS);

    /* What this thread's two rows (g and g + 8 of its warp's 16) may see. */
    key_range seen[2];
#pragma unroll
    for (int h = 0; h < 2; h++) seen[h] = visible_keys(a, (r0 + warp * 16 + g + 8 * h) / a.group);

    float o[DT8][4];
#pragma unroll
    for (int j = 0; j < DT8; j++) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

    /* Per-thread ldmatrix bases (see the layout notes at the fragment loads below). */
    const unsigned q_frag = smem_u32(q_tile + (warp * 16 + lane % 16) * STRIDE + (lane / 16) * 8);
    const unsigned k_frag = smem_u32(k_tile + ((lane / 16) * 8 + lane % 8) * STRIDE + ((lane / 8) % 2) * 8);
    const unsigned v_frag = smem_u32(v_tile + (((lane / 8) % 2) * 8 + lane % 8) * STRIDE + (lane / 16) * 8);

    const char *q_base = reinterpret_cast<const char *>(a.q);
    const char *k_base = reinterpret_cast<const char *>(a.k) + (b * a.k_strides[0] + kv_head * a.k_strides[2]) * 2;
    const char *v_base = reinterpret_cast<const char *>(a.v) + (b * a.v_strides[0] + kv_head * a.v_strides[2]) * 2;
    auto q_row = [&](int r, bool &ok) {
        int64_t i, h;
        unpack_row(a, r0 + r, kv_head, i, h);
        ok = r0 + r < packed;
        return q_base + (b * a.q_strides[0] + i * a.q_strides[1] + h * a.q_strides[2]) * 2;
    };
    auto kv_row = [&](const char *base, int64_t stride, int64_t n0) {
        return [=, &a](int r, bool &ok) {
            ok = n0 + r < a.seqlen_k;
            return base + (n0 + r) * stride * 2;
        };
    };

    if (plan.last_block >= plan.first_block) {
        const int64_t n_last = plan.last_block * KEYS;
        load_tile<ROWS, DP, THREADS>(q_tile, (int)a.head_dim, q_base, q_row);
        load_tile<KEYS, DP, THREADS>(k_tile, (int)a.head_dim, k_base, kv_row(k_base, a.k_strides[1], n_last));
        cp_async_commit();
        load_tile<KEYS, DP, THREADS>(v_tile, (int)a.head_dim, v_base, kv_row(v_base, a.v_strides[1], n_last));
        cp_async_commit();
    }

    for (int64_t blk = plan.last_block; blk >= plan.first_block; blk--) {
        const int64_t n0 = blk * KEYS;
        const bool has_next = blk > plan.first_block;
        cp_async_wait_all_but_one(); /* Q and K(blk) have landed; V(blk) may still be in flight */
        __syncthreads();

        /* S = Q·Kᵀ for this warp's 16 rows and the block's KEYS keys. */
        float s[NT][4];
#pragma unroll
        for (int n = 0; n < NT; n++) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
        /* Q fragment (A, 16x16): lanes 0-15 address rows 0-15 at column 0, lanes 16-31 the
         * same rows at column 8, giving a0..a3 of mma's row-major A. K fragments (B, two
         * 16x8 tiles): lane l addresses key (n + l/16)*8 + l%8 at dim ((l/8)%2)*8: rows of K are
         * columns of B, so the plain (non-transposed) load yields b0, b1 of keys n and n + 1. */
#pragma unroll
        for (int kk = 0; kk < DP / 16; kk++) {
            unsigned qa[4];
            ldmatrix_x4(qa, q_frag + kk * 16 * 2);
#pragma unroll
            for (int n = 0; n < NT; n += 2) {
                unsigned kb[4];
                ldmatrix_x4(kb, k_frag + (n * 8 * STRIDE + kk * 16) * 2);
                mma16816<DT>(s[n], qa, kb[0], kb[1]);
                mma16816<DT>(s[n + 1], qa, kb[2], kb[3]);
            }
        }
        __syncthreads(); /* every warp is done with K(blk): the next one may overwrite it */
        if (has_next)
            load_tile<KEYS, DP, THREADS>(k_tile, (int)a.head_dim, k_base, kv_row(k_base, a.k_strides[1], n0 - KEYS));
        cp_async_commit(); /* (an empty group when there is no next block keeps the count) */

        /* Scores and mask. Without softcap and with a positive scale the scores stay raw: the
         * max of raw scores times scale·log2(e) is the max of the scaled ones, and each
         * probability is exp2(fma(s, scale·log2(e), -m)), the scale folded into one FMA.
         * Otherwise they are transformed first and c = 1. Masked scores are -inf either way. */
        const bool fold = a.softcap == 0.0f && a.scale_log2 > 0.0f;
        const float c = fold ? a.scale_log2 : 1.0f;
        const bool masked = n0 < plan.all_lo || n0 + KEYS - 1 > plan.all_hi;
        int key_lo[2], key_hi[2]; /* the rows' visible keys relative to n0, in [-1, KEYS] */
#pragma unroll
        for (int h = 0; h < 2; h++) {
            key_lo[h] = (int)max((int64_t)-1, min((int64_t)KEYS, seen[h].lo - n0));
            key_hi[h] = (int)max((int64_t)-1, min((int64_t)KEYS, seen[h].hi - n0));
        }
        float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int n = 0; n < NT; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int h = e / 2, key = n * 8 + 2 * t + (e & 1); /* relative to n0 */
                float x = fold ? s[n][e] : score_log2(a, s[n][e]);
                if (masked && (key < key_lo[h] || key > key_hi[h])) x = -INFINITY;
                s[n][e] = x;
                tile_max[h] = fmaxf(tile_max[h], x);
            }
        float sub[2];
#pragma unroll
        for (int h = 0; h < 2; h++) { /* a row's columns are spread over the 4 lanes of its group */
            tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 1));
            tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 2));
            const float alpha = online_rescale(m[h], tile_max[h] * c, sub[h]);
            l[h] *= alpha;
#pragma unroll
            for (int j = 0; j < DT8; j++) o[j][2 * h] *= alpha, o[j][2 * h + 1] *= alpha;
        }
#pragma unroll
        for (int n = 0; n < NT; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                s[n][e] = exp2f(fmaf(s[n][e], c, -sub[e / 2]));
                l[e / 2] += s[n][e];
            }

        cp_async_wait_all_but_one(); /* V(blk) has landed; K(blk - 1) may still be in flight */
        __syncthreads();
        /* O += P·V: P from the S registers (A operand: the accumulators of key tiles 2kk and
         * 2kk+1 are exactly a0..a3), V through ldmatrix.trans (B operand: lane l addresses key
         * kk*16 + ((l/8)%2)*8 + l%8 at dim (j + l/16)*8; transposing puts keys along k). */
#pragma unroll
        for (int kk = 0; kk < KEYS / 16; kk++) {
            unsigned p_hi[4], p_lo[4];
            float r[8];
            p_hi[0] = pack_pair<DT>(s[2 * kk][0], s[2 * kk][1], r[0], r[1]);
            p_hi[1] = pack_pair<DT>(s[2 * kk][2], s[2 * kk][3], r[2], r[3]);
            p_hi[2] = pack_pair<DT>(s[2 * kk + 1][0], s[2 * kk + 1][1], r[4], r[5]);
            p_hi[3] = pack_pair<DT>(s[2 * kk + 1][2], s[2 * kk + 1][3], r[6], r[7]);
#pragma unroll
            for (int j = 0; j < 4; j++) p_lo[j] = pack_pair<DT>(r[2 * j], r[2 * j + 1]);
#pragma unroll
            for (int j = 0; j < DT8; j += 2) {
                unsigned vb[4];
                ldmatrix_x4_trans(vb, v_frag + (kk * 16 * STRIDE + j * 8) * 2);
                mma16816<DT>(o[j], p_hi, vb[0], vb[1]);
                mma16816<DT>(o[j], p_lo, vb[0], vb[1]);
                mma16816<DT>(o[j + 1], p_hi, vb[2], vb[3]);
                mma16816<DT>(o[j + 1], p_lo, vb[2], vb[3]);
            }
        }
        __syncthreads(); /* every warp is done with V(blk) */
        if (has_next)
            load_tile<KEYS, DP, THREADS>(v_tile, (int)a.head_dim, v_base, kv_row(v_base, a.v_strides[1], n0 - KEYS));
        cp_async_commit();
    }

    /* Epilogue: full row sums (the 4 lanes of a row group), normalise, store. */
#pragma unroll
    for (int h = 0; h < 2; h++) {
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
        const float inv = l[h] > 0.0f ? 1.0f / l[h] : 0.0f; /* no visible key: o = 0 */
        const int64_t row = r0 + warp * 16 + g + 8 * h;
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
