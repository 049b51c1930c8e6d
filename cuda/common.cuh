/* Device helpers shared by flashcl's CUDA kernels: storage dtypes, 16-byte vector access, warp
 * and block reductions, and the (max, sum) pair of the online softmax. */
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#define FC_DEVICE __device__ __forceinline__

/* The values of flashcl_dtype (include/flashcl.h). */
enum { FC_F32 = 0, FC_F16 = 1, FC_BF16 = 2 };

/* ---- storage dtypes: loads widen to f32 exactly; stores round to nearest even -------------- */

template <int DT> struct dtype_io;

template <> struct dtype_io<FC_F32> {
    static constexpr int bytes = 4;
    static constexpr int vec = 4; /* elements per 16 bytes */
    static FC_DEVICE float load(const char *p) { return *reinterpret_cast<const float *>(p); }
    static FC_DEVICE void unpack(uint4 u, float *o) {
        o[0] = __uint_as_float(u.x), o[1] = __uint_as_float(u.y);
        o[2] = __uint_as_float(u.z), o[3] = __uint_as_float(u.w);
    }
};

template <> struct dtype_io<FC_F16> {
    static constexpr int bytes = 2;
    static constexpr int vec = 8;
    static FC_DEVICE float widen(unsigned bits) {
        return __half2float(__ushort_as_half(static_cast<unsigned short>(bits)));
    }
    static FC_DEVICE float load(const char *p) {
        return widen(*reinterpret_cast<const unsigned short *>(p));
    }
    static FC_DEVICE void unpack(uint4 u, float *o) {
        const unsigned w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int i = 0; i < 4; i++) o[2 * i] = widen(w[i] & 0xffffu), o[2 * i + 1] = widen(w[i] >> 16);
    }
};

template <> struct dtype_io<FC_BF16> {
    static constexpr int bytes = 2;
    static constexpr int vec = 8;
    /* bf16 is the top half of an f32: widening is a shift. */
    static FC_DEVICE float load(const char *p) {
        return __uint_as_float(static_cast<unsigned>(*reinterpret_cast<const unsigned short *>(p)) << 16);
    }
    static FC_DEVICE void unpack(uint4 u, float *o) {
        const unsigned w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int i = 0; i < 4; i++)
            o[2 * i] = __uint_as_float(w[i] << 16), o[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
};

/* Bits of v rounded to a 16-bit dtype (cvt.rn: NaN stays NaN, overflow becomes inf). */
FC_DEVICE unsigned narrow16(int dt, float v) {
    return dt == FC_F16 ? __half_as_ushort(__float2half_rn(v))
                        : __bfloat16_as_ushort(__float2bfloat16_rn(v));
}

/* A compile-time count passed to a generic lambda (a runtime choice among unrolled forms). */
template <int N> struct fc_count {
    static constexpr int value = N;
};

/* Stores one value of runtime dtype `dt` (the output dtype is a kernel argument, not a template,
 * which keeps the number of kernels in the fatbinary down by three). */
FC_DEVICE void store_one(char *p, int dt, float v) {
    if (dt == FC_F32) *reinterpret_cast<float *>(p) = v;
    else *reinterpret_cast<unsigned short *>(p) = static_cast<unsigned short>(narrow16(dt, v));
}

/* Stores VEC (4 or 8) consecutive values; p is aligned to min(16, VEC * size of dt). STREAMING
 * marks the lines evict-first, for kernels that want their input to stay in L2 instead. */
template <int VEC, bool STREAMING>
FC_DEVICE void store_vec(char *p, int dt, const float *v) {
    if (dt == FC_F32) {
#pragma unroll
        for (int i = 0; i < VEC; i += 4) {
            float4 f = make_float4(v[i], v[i + 1], v[i + 2], v[i + 3]);
            float4 *q = reinterpret_cast<float4 *>(p + 4 * i);
            if (STREAMING) __stcs(q, f);
            else *q = f;
        }
        return;
    }
    unsigned w[VEC / 2];
#pragma unroll
    for (int i = 0; i < VEC / 2; i++) w[i] = narrow16(dt, v[2 * i]) | (narrow16(dt, v[2 * i + 1]) << 16);
    if constexpr (VEC == 4) {
        uint2 u = make_uint2(w[0], w[1]);
        if (STREAMING) __stcs(reinterpret_cast<uint2 *>(p), u);
        else *reinterpret_cast<uint2 *>(p) = u;
    } else {
        uint4 u = make_uint4(w[0], w[1], w[2], w[3]);
        if (STREAMING) __stcs(reinterpret_cast<uint4 *>(p), u);
        else *reinterpret_cast<uint4 *>(p) = u;
    }
}

/* 2^x on the special-function unit (ex2.approx.ftz, relative error ~2^-22; -inf gives +0, NaN
 * NaN; results below 2^-126 become +0). */
FC_DEVICE float fast_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

/* ---- reductions: fixed butterflies, so every lane ends with the same bits ------------------ */
/* Each butterfly step combines a value with its partner's by a commutative operation (fmaxf,
 * an un-contracted add), so both partners compute identical results and every run the same
 * order: bitwise deterministic without atomics. */

template <int WIDTH> FC_DEVICE float warp_max(float v) {
#pragma unroll
    for (int o = WIDTH / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

template <int WIDTH> FC_DEVICE float warp_sum(float v) {
#pragma unroll
    for (int o = WIDTH / 2; o > 0; o >>= 1) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* -inf as the max of a row means "no finite entry": subtracting 0 instead keeps exp(-inf - m)
 * at 0 rather than NaN (FlashAttention's rule); the row still ends up NaN through its zero sum. */
FC_DEVICE float subtrahend(float m) { return m == -INFINITY ? 0.0f : m; }

/* (m, d) ⊕ (m2, d2): the online-softmax merge. Products and the sum are explicitly rounded so
 * the compiler cannot contract them into an FMA, which would make the merge order-dependent. */
FC_DEVICE void stats_merge(float &m, float &d, float m2, float d2) {
    const float M = fmaxf(m, m2), s = subtrahend(M);
    d = __fadd_rn(__fmul_rn(d, expf(m - s)), __fmul_rn(d2, expf(m2 - s)));
    m = M;
}

template <int WIDTH> FC_DEVICE void warp_merge(float &m, float &d) {
#pragma unroll
    for (int o = WIDTH / 2; o > 0; o >>= 1) {
        const float m2 = __shfl_xor_sync(0xffffffffu, m, o);
        const float d2 = __shfl_xor_sync(0xffffffffu, d, o);
        stats_merge(m, d, m2, d2);
    }
}

/* Block-wide versions for a block of G threads (G a multiple of 32, up to 1024); every thread
 * returns the result. `slots` is 32 floats of shared memory that no other reduction uses until
 * the next barrier of this one; alternating two slot arrays is enough for back-to-back calls. */
template <int G> FC_DEVICE float block_max(float v, float *slots) {
    v = warp_max<32>(v);
    if constexpr (G == 32) return v;
    if ((threadIdx.x & 31) == 0) slots[threadIdx.x >> 5] = v;
    __syncthreads();
    v = (threadIdx.x & 31) < G / 32 ? slots[threadIdx.x & 31] : -INFINITY;
    return warp_max<32>(v);
}

template <int G> FC_DEVICE float block_sum(float v, float *slots) {
    v = warp_sum<32>(v);
    if constexpr (G == 32) return v;
    if ((threadIdx.x & 31) == 0) slots[threadIdx.x >> 5] = v;
    __syncthreads();
    v = (threadIdx.x & 31) < G / 32 ? slots[threadIdx.x & 31] : 0.0f;
    return warp_sum<32>(v);
}

/* block_merge with everyone = false: only warp 0 merges the warps' results (the other warps
 * keep their own warp's), for callers where one thread uses the block's. */
template <int G>
FC_DEVICE void block_merge(float &m, float &d, float2 *slots, bool everyone = true) {
    warp_merge<32>(m, d);
    if constexpr (G == 32) return;
    if ((threadIdx.x & 31) == 0) slots[threadIdx.x >> 5] = make_float2(m, d);
    __syncthreads();
    if (!everyone && threadIdx.x >= 32) return;
    const bool mine = (threadIdx.x & 31) < G / 32;
    m = mine ? slots[threadIdx.x & 31].x : -INFINITY;
    d = mine ? slots[threadIdx.x & 31].y : 0.0f;
    warp_merge<32>(m, d);
}

/* ---- inter-block signalling for kernels whose blocks are all resident ----------------------- */

FC_DEVICE unsigned load_acquire_gpu(const unsigned *p) {
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

FC_DEVICE void add_release_gpu(unsigned *p, unsigned v) {
    asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

/* ---- programmatic dependent launch (compute capability 9.0+) ------------------------------ */

/* Called by a kernel the host may launch as a programmatic dependent (src/cuda/cuda_internal.h,
 * fc_cuda_launch) before it touches memory: waits until the kernel queued before it has
 * finished and its writes are visible, then lets the next dependent be scheduled (its blocks
 * wait here in turn). For an ordinary launch the wait returns at once; before sm_90 there is
 * nothing to wait for. */
FC_DEVICE void dependent_launch_enter() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;");
#endif
}

/* Asks L2 for the 128-byte lines that hold [p, p + bytes), lane t of n taking every n-th line.
 * Safe before dependent_launch_enter's wait: every write of the kernel before lands in L2, so a
 * line fetched early is still read as that kernel writes it. */
FC_DEVICE void prefetch_l2(const char *p, int64_t bytes, int t, int n) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    const uint64_t first = reinterpret_cast<uint64_t>(p) & ~uint64_t(127),
                   end = reinterpret_cast<uint64_t>(p) + bytes;
    for (uint64_t line = first + (uint64_t)t * 128; line < end; line += (uint64_t)n * 128)
        asm volatile("prefetch.global.L2 [%0];" ::"l"(line));
#else
    (void)p, (void)bytes, (void)t, (void)n;
#endif
}
