/* Probe (session 33, 2026-11-27; not part of the library, not built by CMake): f32 attention
 * forward on Hopper tensor cores through NVIDIA's OpenCL driver, wgmma with 3xTF32 operands.
 * Non-causal, BHSD contiguous, D = 128, Sq a multiple of 64, Sk a multiple of 16.
 *
 * Every wgmma line is written behind WG, a PTX comment prefix ("//FCWG"), so that NVIDIA's
 * OpenCL compiler (which targets sm_90, where ptxas rejects wgmma) builds it; host.c then takes
 * the program's PTX, deletes the prefix, retargets it to sm_90a and builds it again from that
 * binary (README.md).
 *
 * attn_f32: a work-group of 2 warpgroups (256 threads) owns 64 query rows; warpgroup h owns d in
 * [64h, 64h + 64): its half of Q (split big/small in registers, the A operand), its half of the
 * scores (m64n16k8 against K big/small in local memory; the halves are exchanged through local
 * memory and summed), and its half of O (m64n64k8, P from registers against V big/small stored
 * transposed). Keys come in tiles of 16, one local-memory slot (40 KiB of NVIDIA's 48), the
 * next tile prefetched into registers. Each tile's P·V is summed apart and added to O in f32
 * (DIRECT_O accumulates O in the tensor cores instead: 1e-6 error, dropped).
 * A form that issued S(t+1) before softmax(t) (FlashAttention-3's overlap inside a warpgroup)
 * ran slower (37.3 TF/s: 255 registers, spills) and is not kept. Its lesson: wgmmas issued
 * inside a branch (`if (tile + 1 < tiles)`) made ptxas serialise every wgmma (C7514, "non wgmma
 * instructions reading accumulator registers"); issued unconditionally (a dummy product on the
 * last tile) they were not.
 * Ablations (timing only, wrong results): ABL_NOXCH skips the score exchange, ABL_ONLY_MMA
 * (with ABL_NOXCH) leaves only the tensor-core work, staging once. S_CHAINS sums the three
 * score products in three accumulators (no faster).
 * H200 (bench/results/2026-11-27-session33.md): attn_f32 45.7-46.0 TF/s at B4 H16 S4096 D128,
 * error 2.45e-8 against a double reference; the tensor work alone 78.8-79.3. */
#ifndef WG
#define WG "//FCWG"
#endif
#define INLINE static inline __attribute__((always_inline))
#define D 128
#define DH 64
#define KT 16
#define ROWS 64
#ifdef DIRECT_O
#define DIRECT 1
#else
#define DIRECT 0
#endif

INLINE float2 split(float x)
{
    const uint big = (as_uint(x) + 0x1000u) & 0xffffe000u;
    return (float2)(as_float(big), x - as_float(big));
}

INLINE ulong desc(uint addr, uint lbo, uint sbo)
{
    return (ulong)((addr & 0x3ffffu) >> 4) | ((ulong)((lbo & 0x3ffffu) >> 4) << 16) |
           ((ulong)((sbo & 0x3ffffu) >> 4) << 32);
}

INLINE void wg_fence(void) { __asm__ volatile(WG "wgmma.fence.sync.aligned;" ::: "memory"); }
INLINE void wg_commit(void) { __asm__ volatile(WG "wgmma.commit_group.sync.aligned;" ::: "memory"); }
INLINE void wg_wait0(void) { __asm__ volatile(WG "wgmma.wait_group.sync.aligned 0;" ::: "memory"); }
INLINE void proxy_fence(void) { __asm__ volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

/* s[8] (+)= A(64x8 tf32, registers a) * B(8 x 16, descriptor) ; SD: 0 -> overwrite */
#define WG_N16(SD, s, a0, a1, a2, a3, db)                                                       \
    __asm__ volatile(WG "wgmma.mma_async.sync.aligned.m64n16k8.f32.tf32.tf32 "                  \
                     "{%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9, %10, %11}, %12, " #SD ", 1, 1;" \
                     : "+f"(s[0]), "+f"(s[1]), "+f"(s[2]), "+f"(s[3]), "+f"(s[4]), "+f"(s[5]),  \
                       "+f"(s[6]), "+f"(s[7])                                                   \
                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(db)                              \
                     : "memory")

#define WG_N64(SD, o, a0, a1, a2, a3, db)                                                       \
    __asm__ volatile(WG "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 "                  \
                     "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "  \
                     "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, "   \
                     "%30, %31}, {%32, %33, %34, %35}, %36, " #SD ", 1, 1;"                      \
                     : "+f"(o[0]), "+f"(o[1]), "+f"(o[2]), "+f"(o[3]), "+f"(o[4]), "+f"(o[5]),  \
                       "+f"(o[6]), "+f"(o[7]), "+f"(o[8]), "+f"(o[9]), "+f"(o[10]),             \
                       "+f"(o[11]), "+f"(o[12]), "+f"(o[13]), "+f"(o[14]), "+f"(o[15]),         \
                       "+f"(o[16]), "+f"(o[17]), "+f"(o[18]), "+f"(o[19]), "+f"(o[20]),         \
                       "+f"(o[21]), "+f"(o[22]), "+f"(o[23]), "+f"(o[24]), "+f"(o[25]),         \
                       "+f"(o[26]), "+f"(o[27]), "+f"(o[28]), "+f"(o[29]), "+f"(o[30]),         \
                       "+f"(o[31])                                                              \
                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(db)                              \
                     : "memory")

/* WG_N16 with SD a macro to expand first */
#define WG_N16_X(SD, s, a0, a1, a2, a3, db) WG_N16(SD, s, a0, a1, a2, a3, db)

#define TIE8(s) __asm__ volatile("" : "+f"(s[0]), "+f"(s[1]), "+f"(s[2]), "+f"(s[3]), "+f"(s[4]), "+f"(s[5]), "+f"(s[6]), "+f"(s[7]) :: "memory")

INLINE float quad_max(float x)
{
    float y;
    __asm__ volatile("shfl.sync.bfly.b32 %0, %1, 1, 0x1f, 0xffffffff;" : "=f"(y) : "f"(x));
    x = fmax(x, y);
    __asm__ volatile("shfl.sync.bfly.b32 %0, %1, 2, 0x1f, 0xffffffff;" : "=f"(y) : "f"(x));
    return fmax(x, y);
}
INLINE float quad_sum(float x)
{
    float y;
    __asm__ volatile("shfl.sync.bfly.b32 %0, %1, 1, 0x1f, 0xffffffff;" : "=f"(y) : "f"(x));
    x += y;
    __asm__ volatile("shfl.sync.bfly.b32 %0, %1, 2, 0x1f, 0xffffffff;" : "=f"(y) : "f"(x));
    return x + y;
}
INLINE float ex2(float x)
{
    float y;
    __asm__("ex2.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

/* Layout test: s = A(64x8 from registers, fragment a0=(g,t) a1=(g+8,t) a2=(g,t+4) a3=(g+8,t+4))
 * times B (16 n x 8 k, K-major in local memory). a is 64x8 row-major, b is 16x8 (n, k). */
__kernel __attribute__((reqd_work_group_size(128, 1, 1)))
void layout_test(__global const float *a, __global const float *b, __global float *out)
{
    __local float sb[16 * 8] __attribute__((aligned(128)));
    const int tid = get_local_id(0), w = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
    if (tid < 128) {
        const int n = tid / 8, k = tid % 8;
        /* core (n/8, k/4) at (n/8)*256 + (k/4)*128, within: (n%8)*16 + (k%4)*4 */
        *(__local float *)((__local char *)sb + (n / 8) * 256 + (k / 4) * 128 + (n % 8) * 16 + (k % 4) * 4) = b[n * 8 + k];
    }
    proxy_fence();
    barrier(CLK_LOCAL_MEM_FENCE);
    const int r0 = 16 * w + g;
    const uint a0 = as_uint(a[r0 * 8 + t]), a1 = as_uint(a[(r0 + 8) * 8 + t]);
    const uint a2 = as_uint(a[r0 * 8 + t + 4]), a3 = as_uint(a[(r0 + 8) * 8 + t + 4]);
    float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    const ulong db = desc((uint)(ulong)sb, 128, 256);
    wg_fence();
    WG_N16(0, s, a0, a1, a2, a3, db);
    wg_commit();
    wg_wait0();
    TIE8(s);
    for (int j = 0; j < 2; j++)
        for (int e = 0; e < 4; e++)
            out[(r0 + 8 * (e / 2)) * 16 + 8 * j + 2 * t + (e % 2)] = s[j * 4 + e];
}

__kernel __attribute__((reqd_work_group_size(256, 1, 1)))
void attn_f32(__global const float *q, __global const float *k, __global const float *v,
              __global float *o, int seq_q, int seq_k, float scale_log2)
{
    __local float ks_hi[KT * D] __attribute__((aligned(128)));
    __local float ks_lo[KT * D] __attribute__((aligned(128)));
    __local float vs_hi[KT * D] __attribute__((aligned(128)));
    __local float vs_lo[KT * D] __attribute__((aligned(128)));
    __local float xch[2 * 128 * 8] __attribute__((aligned(128)));

    const int tid = get_local_id(0), h = tid / 128, tw = tid % 128, w = tw / 32, lane = tid % 32;
    const int g = lane / 4, t = lane % 4;
    const int bh = get_group_id(1), q0 = get_group_id(0) * ROWS;
    __global const float *qb = q + (size_t)bh * seq_q * D;
    __global const float *kb = k + (size_t)bh * seq_k * D;
    __global const float *vb = v + (size_t)bh * seq_k * D;

    /* Q fragments of this warpgroup's d half, split */
    const int r0 = q0 + 16 * w + g, r1 = r0 + 8;
    uint qh[8][4], ql[8][4];
#pragma unroll
    for (int s = 0; s < 8; s++) {
        const int d0 = 64 * h + 8 * s + t;
        float2 x;
        x = split(qb[(size_t)r0 * D + d0]);     qh[s][0] = as_uint(x.x); ql[s][0] = as_uint(x.y);
        x = split(qb[(size_t)r1 * D + d0]);     qh[s][1] = as_uint(x.x); ql[s][1] = as_uint(x.y);
        x = split(qb[(size_t)r0 * D + d0 + 4]); qh[s][2] = as_uint(x.x); ql[s][2] = as_uint(x.y);
        x = split(qb[(size_t)r1 * D + d0 + 4]); qh[s][3] = as_uint(x.x); ql[s][3] = as_uint(x.y);
    }

    float oacc[32], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
#pragma unroll
    for (int i = 0; i < 32; i++) oacc[i] = 0.f;

    /* staging: 2 K and 2 V float4 per thread: idx = tid + 256 u, chunk c = idx / 16, key r = idx % 16 */
    float4 kr[2], vr[2];
    /* V: thread owns d = tid % 128 and key combos cb = tid / 128 + 2u: slice j = cb / 2, odd = cb % 2,
     * keys 8j + 2i + odd (i = 0..3), which are the 4 consecutive k positions of one core row */
    const int vd = tid % 128;
#pragma unroll
    for (int u = 0; u < 2; u++) {
        const int idx = tid + 256 * u, c = idx / 16, r = idx % 16;
        kr[u] = vload4(0, kb + (size_t)r * D + 4 * c);
        const int cb = tid / 128 + 2 * u, j = cb / 2, odd = cb % 2;
        vr[u] = (float4)(vb[(size_t)(8 * j + odd) * D + vd], vb[(size_t)(8 * j + 2 + odd) * D + vd],
                         vb[(size_t)(8 * j + 4 + odd) * D + vd], vb[(size_t)(8 * j + 6 + odd) * D + vd]);
    }
    const uint ks_hi_a = (uint)(ulong)ks_hi, ks_lo_a = (uint)(ulong)ks_lo;
    const uint vs_hi_a = (uint)(ulong)vs_hi, vs_lo_a = (uint)(ulong)vs_lo;
    const int tiles = seq_k / KT;
    for (int tile = 0; tile < tiles; tile++) {
#ifdef ABL_ONLY_MMA
        if (tile == 0)
#endif
#pragma unroll
        for (int u = 0; u < 2; u++) {
            const int idx = tid + 256 * u, c = idx / 16, r = idx % 16;
            const uint koff = (r / 8) * 4096 + c * 128 + (r % 8) * 16;
            float2 x0 = split(kr[u].x), x1 = split(kr[u].y), x2 = split(kr[u].z), x3 = split(kr[u].w);
            *(__local float4 *)((__local char *)ks_hi + koff) = (float4)(x0.x, x1.x, x2.x, x3.x);
            *(__local float4 *)((__local char *)ks_lo + koff) = (float4)(x0.y, x1.y, x2.y, x3.y);
            const int cb = tid / 128 + 2 * u; /* kcore = 2j + odd = cb */
            const uint voff = (vd / 8) * 512 + cb * 128 + (vd % 8) * 16;
            x0 = split(vr[u].x), x1 = split(vr[u].y), x2 = split(vr[u].z), x3 = split(vr[u].w);
            *(__local float4 *)((__local char *)vs_hi + voff) = (float4)(x0.x, x1.x, x2.x, x3.x);
            *(__local float4 *)((__local char *)vs_lo + voff) = (float4)(x0.y, x1.y, x2.y, x3.y);
        }
#ifdef ABL_ONLY_MMA
        if (tile == 0) {
#endif
        proxy_fence();
        barrier(CLK_LOCAL_MEM_FENCE);
#ifdef ABL_ONLY_MMA
        }
#endif
        if (tile + 1 < tiles) {
            const int kbase = (tile + 1) * KT;
#pragma unroll
            for (int u = 0; u < 2; u++) {
                const int idx = tid + 256 * u, c = idx / 16, r = idx % 16;
                kr[u] = vload4(0, kb + (size_t)(kbase + r) * D + 4 * c);
                const int cb = tid / 128 + 2 * u, j = cb / 2, odd = cb % 2;
                __global const float *vk = vb + (size_t)(kbase + 8 * j + odd) * D + vd;
                vr[u] = (float4)(vk[0], vk[2 * D], vk[4 * D], vk[6 * D]);
            }
        }
        /* scores, this half of d */
        float s[8];
#ifdef S_CHAINS /* the three products in three accumulators, summed after the wait */
        float s2[8], s3[8];
#define S_BIG_SMALL s2
#define S_BIG_BIG s3
#define S_FIRST 0
#else
#define S_BIG_SMALL s
#define S_BIG_BIG s
#define S_FIRST 1
#endif
        wg_fence();
#pragma unroll
        for (int st = 0; st < 8; st++) {
            const uint off = (16 * h + 2 * st) * 128;
            const ulong dh = desc(ks_hi_a + off, 128, 4096), dl = desc(ks_lo_a + off, 128, 4096);
            if (st == 0) {
                WG_N16(0, s, ql[st][0], ql[st][1], ql[st][2], ql[st][3], dh);
                WG_N16_X(S_FIRST, S_BIG_SMALL, qh[st][0], qh[st][1], qh[st][2], qh[st][3], dl);
                WG_N16_X(S_FIRST, S_BIG_BIG, qh[st][0], qh[st][1], qh[st][2], qh[st][3], dh);
            } else {
                WG_N16(1, s, ql[st][0], ql[st][1], ql[st][2], ql[st][3], dh);
                WG_N16(1, S_BIG_SMALL, qh[st][0], qh[st][1], qh[st][2], qh[st][3], dl);
                WG_N16(1, S_BIG_BIG, qh[st][0], qh[st][1], qh[st][2], qh[st][3], dh);
            }
        }
        wg_commit();
        wg_wait0();
        TIE8(s);
#ifdef S_CHAINS
        TIE8(s2); TIE8(s3);
#pragma unroll
        for (int i = 0; i < 8; i++) s[i] = (s[i] + s2[i]) + s3[i];
#endif
        /* exchange halves */
#ifndef ABL_NOXCH
        __local float4 *mine = (__local float4 *)(xch + (h * 128 + tw) * 8);
        mine[0] = (float4)(s[0], s[1], s[2], s[3]);
        mine[1] = (float4)(s[4], s[5], s[6], s[7]);
        barrier(CLK_LOCAL_MEM_FENCE);
        __local float4 *other = (__local float4 *)(xch + ((1 - h) * 128 + tw) * 8);
        float4 o0 = other[0], o1 = other[1];
        s[0] += o0.x; s[1] += o0.y; s[2] += o0.z; s[3] += o0.w;
        s[4] += o1.x; s[5] += o1.y; s[6] += o1.z; s[7] += o1.w;
#endif
        /* online softmax: rows g (e 0,1) and g + 8 (e 2,3) of slices 0, 1 */
        float alpha[2] = {1.0f, 1.0f};
#ifndef ABL_ONLY_MMA
#pragma unroll
        for (int rr = 0; rr < 2; rr++) {
            float mx = fmax(fmax(s[2 * rr], s[2 * rr + 1]), fmax(s[4 + 2 * rr], s[5 + 2 * rr]));
            mx = quad_max(mx) * scale_log2;
            const float mn = fmax(m[rr], mx);
            alpha[rr] = ex2(m[rr] - mn);
            m[rr] = mn;
            s[2 * rr] = ex2(fma(s[2 * rr], scale_log2, -mn));
            s[2 * rr + 1] = ex2(fma(s[2 * rr + 1], scale_log2, -mn));
            s[4 + 2 * rr] = ex2(fma(s[4 + 2 * rr], scale_log2, -mn));
            s[5 + 2 * rr] = ex2(fma(s[5 + 2 * rr], scale_log2, -mn));
            l[rr] = l[rr] * alpha[rr] + (s[2 * rr] + s[2 * rr + 1]) + (s[4 + 2 * rr] + s[5 + 2 * rr]);
        }
#endif
        /* P fragments: slice j -> a = (p[j][0], p[j][2], p[j][1], p[j][3]) */
        uint ph[2][4], pl[2][4];
#pragma unroll
        for (int j = 0; j < 2; j++) {
            const float pv[4] = {s[4 * j + 0], s[4 * j + 2], s[4 * j + 1], s[4 * j + 3]};
#pragma unroll
            for (int x = 0; x < 4; x++) {
                float2 sp = split(pv[x]);
                ph[j][x] = as_uint(sp.x);
                pl[j][x] = as_uint(sp.y);
            }
        }
#ifdef DIRECT_O
#pragma unroll
        for (int n = 0; n < 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) oacc[4 * n + e] *= alpha[e / 2];
#define ot oacc
#else
        float ot[32];
#endif
        wg_fence();
#pragma unroll
        for (int j = 0; j < 2; j++) {
            const uint off = (8 * h) * 512 + (2 * j) * 128;
            const ulong dh = desc(vs_hi_a + off, 128, 512), dl = desc(vs_lo_a + off, 128, 512);
            if (j == 0 && !DIRECT) {
                WG_N64(0, ot, pl[j][0], pl[j][1], pl[j][2], pl[j][3], dh);
            } else {
                WG_N64(1, ot, pl[j][0], pl[j][1], pl[j][2], pl[j][3], dh);
            }
            WG_N64(1, ot, ph[j][0], ph[j][1], ph[j][2], ph[j][3], dl);
            WG_N64(1, ot, ph[j][0], ph[j][1], ph[j][2], ph[j][3], dh);
        }
        wg_commit();
        wg_wait0();
        TIE8(ot); TIE8((ot + 8)); TIE8((ot + 16)); TIE8((ot + 24));
        __asm__ volatile("" : "+r"(ph[0][0]), "+r"(ph[0][1]), "+r"(ph[0][2]), "+r"(ph[0][3]),
                              "+r"(ph[1][0]), "+r"(ph[1][1]), "+r"(ph[1][2]), "+r"(ph[1][3]),
                              "+r"(pl[0][0]), "+r"(pl[0][1]), "+r"(pl[0][2]), "+r"(pl[0][3]),
                              "+r"(pl[1][0]), "+r"(pl[1][1]), "+r"(pl[1][2]), "+r"(pl[1][3]) :: "memory");
#ifdef DIRECT_O
#undef ot
#else
#pragma unroll
        for (int n = 0; n < 8; n++)
            for (int e = 0; e < 4; e++) oacc[4 * n + e] = fma(oacc[4 * n + e], alpha[e / 2], ot[4 * n + e]);
#endif
#ifndef ABL_ONLY_MMA
        barrier(CLK_LOCAL_MEM_FENCE);
#endif
    }
#pragma unroll
    for (int rr = 0; rr < 2; rr++) l[rr] = 1.0f / quad_sum(l[rr]);
    __global float *ob = o + (size_t)bh * seq_q * D;
#pragma unroll
    for (int n = 0; n < 8; n++) {
        const int d = 64 * h + 8 * n + 2 * t;
        vstore2((float2)(oacc[4 * n] * l[0], oacc[4 * n + 1] * l[0]), 0, ob + (size_t)r0 * D + d);
        vstore2((float2)(oacc[4 * n + 2] * l[1], oacc[4 * n + 3] * l[1]), 0, ob + (size_t)r1 * D + d);
    }
}
