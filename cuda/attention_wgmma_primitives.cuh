/* The Hopper (sm_90a) building blocks of cuda/attention_wgmma.cuh: the 128-byte-swizzled shared
 * layout that wgmma's matrix descriptors describe, cp.async loaders into it, the descriptors,
 * and PTX wrappers for wgmma.mma_async (m64n64k16 and m64n128k16, f32 accumulators, f16/bf16
 * operands) with its fence / commit / wait. Only cuda/attention_kernels.cuh instantiates these,
 * and only inside `#if defined(__CUDA_ARCH_FEAT_SM90_ALL)`: every other architecture's cubin
 * (and the compute_90 PTX) never sees a wgmma instruction.
 *
 * ---- The shared layout (PTX ISA, "Shared Memory Matrix Layout", 128B swizzling) -------------
 * A tile of R rows (R a multiple of 8) by DP 16-bit elements (DP a multiple of 64) is stored as
 * DP/64 column blocks, each R rows of 128 bytes (64 elements):
 *     byte(r, c) = (c / 8) * R * 128 + r * 128 + ((c % 8) ^ (r % 8)) * 16
 * for the 16-byte chunk c (elements 8c .. 8c + 7) of row r. The tile starts on a 1024-byte
 * boundary, so every 8-row group of a column block is one 1024-byte "swizzle atom" and the XOR
 * above is exactly what the hardware applies to address bits [4:6] from bits [7:9] when it
 * reads (Swizzle<3,4,3> on byte addresses). Q, K and V all use it: Q and K (rows = queries /
 * keys, D contiguous) are K-major operands of S = Q·Kᵀ, and V (rows = keys, D contiguous) is
 * the N-major ("transposed", imm-trans-b = 1) B operand of O = P·V.
 *
 * ---- The matrix descriptor (64 bits) --------------------------------------------------------
 *     bits  0-13  start address >> 4        bits 32-45  stride byte offset (SBO) >> 4
 *     bits 16-29  leading byte offset >> 4  bits 49-51  base offset (0: atoms 1024-aligned)
 *     bits 62-63  swizzle: 1 = 128-byte swizzle
 * K-major, 128B swizzle (Q as A, K as B): SBO = 1024, the step from one 8-row group to the next;
 * LBO is unused (the k16 slice of one instruction, 32 bytes, lies inside one 128-byte row) and
 * set to 16 (encoded 1) as the ISA assumes. The k-th slice of 16 elements starts at
 * (k % 4) * 32 + (k / 4) * R * 128: inside a column block the start address moves by 32 bytes
 * (the hardware swizzles the final address, so this is exact), then to the next block.
 * N-major, 128B swizzle (V as B, N = D): the canonical layout ((8,8,m),(8,k)) : ((1,8,LBO),
 * (64,SBO)) in elements: 64 contiguous elements of N per 128-byte row, the next 64 of N LBO
 * bytes further (the next column block: LBO = KEYS * 128), 8 rows (keys) per atom and the next
 * 8 keys SBO = 1024 bytes further. The k-th slice of 16 keys starts 16 * 128 = 2048 bytes on.
 *
 * ---- Register fragments (PTX ISA, "Matrix Fragments for wgmma .m64nNk16") -------------------
 * Warp w (= warp index % 4) of a warpgroup owns rows 16w .. 16w + 15 of the 64. With lane
 * = 4g + t, the f32 accumulator of an m64nN tile holds in d[j][e] (j < N/8, e < 4) the element
 *     row 16w + g + 8 * (e / 2), column 8j + 2t + (e % 2),
 * which is mma.sync.m16n8's accumulator layout for every 8-column slice j: the existing online
 * softmax (online_softmax_tile) works on it unchanged. The A operand from registers (k16, four
 * 32-bit registers of two 16-bit values) holds x[0] = (g, 2t..2t+1), x[1] = (g+8, 2t..2t+1),
 * x[2] = (g, 2t+8..2t+9), x[3] = (g+8, 2t+8..2t+9): mma.sync.m16n8k16's A layout, so the
 * probabilities of columns 16k .. 16k + 15 become A with probabilities_as_a(.., k). */
#pragma once

#include "attention_tc_primitives.cuh"

/* ---- layout and loads ---------------------------------------------------------------------- */

/* Byte offset of 16-byte chunk c of row r in a tile of R rows (see above). */
template <int R> FC_DEVICE unsigned sw128_offset(int r, int c) {
    static_assert(R % 8 == 0, "a column block is whole 1024-byte atoms");
    return (unsigned)((c >> 3) * (R * 128) + r * 128 + (((c & 7) ^ (r & 7)) << 4));
}

/* The swizzled layout for load_tile / load_rows (attention_tc_primitives.cuh). */
struct sw128_layout {
    template <int ROWS> static FC_DEVICE int offset(int r, int c) { return (int)sw128_offset<ROWS>(r, c); }
};

/* The dynamic shared memory from its first 1024-byte boundary (the swizzle atoms' alignment;
 * the host pads the allocation by 1024): the pointer, and its shared address in `base`. */
FC_DEVICE unsigned char *wgmma_smem(unsigned &base) {
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    const unsigned raw = smem_u32(smem_raw);
    base = (raw + 1023u) & ~1023u;
    return smem_raw + (base - raw);
}

/* ---- descriptors and fences ---------------------------------------------------------------- */

/* A 128B-swizzle matrix descriptor for the operand at shared address `start` (base offset 0:
 * the atoms are 1024-byte aligned). Adding (bytes >> 4) to it moves the start address, which
 * stays below 2^18 (the field holds addresses up to 256 KB) so nothing carries out. */
FC_DEVICE uint64_t wgmma_desc(unsigned start, unsigned lbo, unsigned sbo) {
    return (uint64_t)((start & 0x3ffffu) >> 4) | (uint64_t)((lbo & 0x3ffffu) >> 4) << 16 |
           (uint64_t)((sbo & 0x3ffffu) >> 4) << 32 | (uint64_t)1 << 62;
}

/* Orders this thread's register writes (accumulators, A fragments) before the wgmmas after it. */
FC_DEVICE void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
FC_DEVICE void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
/* Waits until at most N of the warpgroup's committed wgmma groups are pending. */
template <int N> FC_DEVICE void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }

/* Makes this thread's generic-proxy shared-memory writes (cp.async, st.shared) visible to the
 * async proxy through which wgmma reads its shared operands; a barrier then publishes them. */
FC_DEVICE void fence_proxy_async_shared() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

/* ---- mbarriers (the pingpong schedule of attention_wgmma, PIPE = 2) ------------------------ */

/* Sets up the mbarrier at shared address `bar` to complete a phase after `count` arrivals. */
FC_DEVICE void mbar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
/* One arrival (release semantics: this thread's earlier accesses happen before the phase ends). */
FC_DEVICE void mbar_arrive(unsigned bar) {
    asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.shared::cta.b64 state, [%0];\n}\n" ::"r"(bar) : "memory");
}
/* One arrival, made by the hardware once every cp.async this thread issued so far has landed
 * (noinc: the arrival is one of the `count` the barrier was set up with). */
FC_DEVICE void cp_async_mbar_arrive(unsigned bar) {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}
/* Waits until the phase with parity `parity` of the mbarrier has completed (acquire). */
FC_DEVICE void mbar_wait(unsigned bar, unsigned parity) {
    asm volatile("{\n.reg .pred done;\nWAIT:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                 "@!done bra WAIT;\n}\n" ::"r"(bar), "r"(parity)
                 : "memory");
}
/* Ties registers to this point of the instruction stream: after wgmma_wait, every later use of
 * an accumulator reads the value the wait made final (the compiler cannot hoist it above the
 * wait), and A fragments stay allocated until the wgmmas that read them are done. */
template <int N> FC_DEVICE void wgmma_fence_operands(float (&d)[N][4]) {
#pragma unroll
    for (int j = 0; j < N; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) asm volatile("" : "+f"(d[j][e])::"memory");
}
template <int N> FC_DEVICE void wgmma_fence_operands(unsigned (&x)[N][4]) {
#pragma unroll
    for (int j = 0; j < N; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) asm volatile("" : "+r"(x[j][e])::"memory");
}

/* ---- wgmma.mma_async ----------------------------------------------------------------------- */

#define FC_WG_REGS32                                                                            \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
    "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define FC_WG_REGS64                                                                            \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
    "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, "  \
    "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, "  \
    "%56, %57, %58, %59, %60, %61, %62, %63}"
#define FC_WG_D4(j) "+f"(d[j][0]), "+f"(d[j][1]), "+f"(d[j][2]), "+f"(d[j][3])
#define FC_WG_ACC32                                                                             \
    FC_WG_D4(0), FC_WG_D4(1), FC_WG_D4(2), FC_WG_D4(3), FC_WG_D4(4), FC_WG_D4(5), FC_WG_D4(6),  \
        FC_WG_D4(7)
#define FC_WG_ACC64                                                                             \
    FC_WG_ACC32, FC_WG_D4(8), FC_WG_D4(9), FC_WG_D4(10), FC_WG_D4(11), FC_WG_D4(12),            \
        FC_WG_D4(13), FC_WG_D4(14), FC_WG_D4(15)

/* d (+)= A·B, A and B from shared memory, both K-major: SHAPE m64nNk16, TYPE f16 or bf16; REGS
 * and ACC the N/2 accumulators; IA, IB, IS the operand numbers of the two descriptors and of
 * the accumulate flag (0: d = A·B, else d += A·B). */
#define FC_WGMMA_SS(SHAPE, TYPE, REGS, ACC, IA, IB, IS)                                        \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" IS ", 0;\n"                                 \
                 "wgmma.mma_async.sync.aligned." SHAPE ".f32." TYPE "." TYPE " " REGS ", %" IA   \
                 ", %" IB ", p, 1, 1, 0, 0;\n}\n"                                                \
                 : ACC                                                                          \
                 : "l"(da), "l"(db), "r"(accumulate)                                            \
                 : "memory")

/* d += A·B, A from four registers, B from shared memory N-major (imm-trans-b = 1). */
#define FC_WGMMA_RS_TB(SHAPE, TYPE, REGS, ACC, I0, I1, I2, I3, IB, IS)                         \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" IS ", 0;\n"                                 \
                 "wgmma.mma_async.sync.aligned." SHAPE ".f32." TYPE "." TYPE " " REGS ", {%" I0  \
                 ", %" I1 ", %" I2 ", %" I3 "}, %" IB ", p, 1, 1, 1;\n}\n"                       \
                 : ACC                                                                          \
                 : "r"(x[0]), "r"(x[1]), "r"(x[2]), "r"(x[3]), "l"(db), "r"(1)                  \
                 : "memory")

/* S-type product for one k16 slice: d[N/8][4] (+)= A(64x16, descriptor da) · B(16xN, db). */
template <int DT, int N>
FC_DEVICE void wgmma_ss(float (&d)[N / 8][4], uint64_t da, uint64_t db, int accumulate) {
    static_assert(N == 64 || N == 128, "the shapes this kernel uses");
    if constexpr (N == 64) {
        if constexpr (DT == FC_F16) FC_WGMMA_SS("m64n64k16", "f16", FC_WG_REGS32, FC_WG_ACC32, "32", "33", "34");
        else FC_WGMMA_SS("m64n64k16", "bf16", FC_WG_REGS32, FC_WG_ACC32, "32", "33", "34");
    } else {
        if constexpr (DT == FC_F16) FC_WGMMA_SS("m64n128k16", "f16", FC_WG_REGS64, FC_WG_ACC64, "64", "65", "66");
        else FC_WGMMA_SS("m64n128k16", "bf16", FC_WG_REGS64, FC_WG_ACC64, "64", "65", "66");
    }
}

/* R-type product for one k16 slice: d[N/8][4] += A(64x16, registers x) · B(16xN, db N-major). */
template <int DT, int N>
FC_DEVICE void wgmma_rs_tb(float (&d)[N / 8][4], const unsigned (&x)[4], uint64_t db) {
    static_assert(N == 64 || N == 128, "the shapes this kernel uses");
    if constexpr (N == 64) {
        if constexpr (DT == FC_F16)
            FC_WGMMA_RS_TB("m64n64k16", "f16", FC_WG_REGS32, FC_WG_ACC32, "32", "33", "34", "35", "36", "37");
        else FC_WGMMA_RS_TB("m64n64k16", "bf16", FC_WG_REGS32, FC_WG_ACC32, "32", "33", "34", "35", "36", "37");
    } else {
        if constexpr (DT == FC_F16)
            FC_WGMMA_RS_TB("m64n128k16", "f16", FC_WG_REGS64, FC_WG_ACC64, "64", "65", "66", "67", "68", "69");
        else FC_WGMMA_RS_TB("m64n128k16", "bf16", FC_WG_REGS64, FC_WG_ACC64, "64", "65", "66", "67", "68", "69");
    }
}

/* ---- the two products of one key block, as the wgmma kernels issue them ------------------ */

/* S = Q·Kᵀ for a warpgroup's 64 rows and the KEYS keys of one ring slot: DP/16 m64n{KEYS}k16
 * wgmmas, Q (A) and K (B) from shared memory, both K-major, one commit group; issued, not
 * waited. q_desc: the warpgroup's Q rows; k_desc: slot 0's K; slot_bytes: where the slot
 * starts, from slot 0. */
template <int DT, int DP, int ROWS, int KEYS>
FC_DEVICE void wgmma_issue_scores(float (&s)[KEYS / 8][4], uint64_t q_desc, uint64_t k_desc,
                                  unsigned slot_bytes) {
#pragma unroll
    for (int kk = 0; kk < DP / 16; kk++) {
        const unsigned q_off = (kk % 4) * 32 + (kk / 4) * ROWS * 128;
        const unsigned k_off = slot_bytes + (kk % 4) * 32 + (kk / 4) * KEYS * 128;
        wgmma_ss<DT, KEYS>(s, q_desc + (q_off >> 4), k_desc + (k_off >> 4), kk > 0);
    }
    wgmma_commit();
}

/* O += P·V with the V of one ring slot: keys [16kk, 16kk + 16) of P (registers) are the A
 * operand of slice kk, V (B) N-major; one commit group, issued, not waited. */
template <int DT, int DP, int KEYS>
FC_DEVICE void wgmma_issue_pv(float (&o)[DP / 8][4], const unsigned (&p)[KEYS / 16][4],
                              uint64_t v_desc, unsigned slot_bytes) {
#pragma unroll
    for (int kk = 0; kk < KEYS / 16; kk++)
        wgmma_rs_tb<DT, DP>(o, p[kk], v_desc + ((slot_bytes + kk * 16 * 128) >> 4));
    wgmma_commit();
}

/* The pingpong schedule's barriers, set up by one thread: per ring slot a `full` barrier (one
 * arrival per thread, made by its copies landing) and an `empty` one (one per warp), and the
 * two warpgroups' `turn` barriers (one arrival per warp of the other warpgroup). */
template <int STAGES, int THREADS>
FC_DEVICE void pingpong_barriers_init(unsigned full, unsigned empty, unsigned turns) {
#pragma unroll
    for (int st = 0; st < STAGES; st++) {
        mbar_init(full + 8 * st, THREADS);
        mbar_init(empty + 8 * st, THREADS / 32);
    }
    mbar_init(turns, 4);
    mbar_init(turns + 8, 4);
}

/* One arrival per warp on an mbarrier, once every lane is here (the pingpong schedule counts
 * warps: turns, released slots, Q done). */
FC_DEVICE void warp_arrive(unsigned bar) {
    __syncwarp();
    if (threadIdx.x % 32 == 0) mbar_arrive(bar);
}

#undef FC_WGMMA_SS
#undef FC_WGMMA_RS_TB
#undef FC_WG_ACC64
#undef FC_WG_ACC32
#undef FC_WG_D4
#undef FC_WG_REGS64
#undef FC_WG_REGS32
