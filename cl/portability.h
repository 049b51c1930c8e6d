/* cl/portability.h — reductions across work-items on whatever the device offers.
 *
 * One of these selects the mechanism (src/opencl/softmax.c passes it with -D):
 *   FC_SG_KHR     cl_khr_subgroups (or OpenCL C 3.0 __opencl_c_subgroups): sub_group_reduce_*
 *   FC_SG_INTEL   cl_intel_subgroups: intel_sub_group_shuffle_xor butterflies
 *   FC_SG_NV_PTX  NVIDIA inline PTX shfl.sync.bfly on 32-lane warps (NVIDIA's OpenCL driver
 *                 has no cl_khr_subgroups, but accepts inline PTX)
 *   FC_SG_NONE    local memory only (the default; every device can run it)
 * No kernel requires sub-groups: each helper below works with FC_SG_NONE.
 *
 * The helpers reduce over a "team": `team` consecutive work-items of a 1-D work-group (team is
 * a power of two that divides the local size; one team may be the whole work-group). Every
 * work-item of the work-group must call a helper (they contain barriers), with the same `team`,
 * and every work-item receives its team's result. Reductions run in a fixed order, so a result
 * is bitwise identical from run to run on one device. `scratch` is __local, at least
 * get_local_size(0) elements, and is free again when a helper returns. */
#ifndef FC_PORTABILITY_H
#define FC_PORTABILITY_H

/* The test suite's way to make one program fail to build (FLASHCL_TEST_BREAK_PROGRAMS). */
#ifdef FC_TEST_BREAK
#error "FC_TEST_BREAK: this program fails to build on purpose (FLASHCL_TEST_BREAK_PROGRAMS)"
#endif

/* No fused multiply-add contraction: s = x * scale must round the same way wherever it is
 * computed (the max pass and the output pass), or exp(s - m) sees the rounding residue of the
 * product (exp(±1e23) for inputs near 1e30). NVIDIA's compiler contracts across statements. */
#pragma OPENCL FP_CONTRACT OFF

#if !defined(FC_SG_KHR) && !defined(FC_SG_INTEL) && !defined(FC_SG_NV_PTX) && !defined(FC_SG_NONE)
#define FC_SG_NONE 1
#endif

/* Lanes the kernels assume for FC_SG_NV_PTX (a warp). KHR and INTEL ask the device at run time
 * (get_max_sub_group_size) because compilers pick the width per kernel. */
#ifndef FC_SG_SIZE
#define FC_SG_SIZE 32
#endif

/* The largest work-group the host launches: sizes the __local scratch arrays. */
#ifndef FC_MAX_WG
#define FC_MAX_WG 256
#endif

/* Helper functions are always inlined: the kernels pass dtype codes and sizes as literals that
 * must fold into straight-line code (private arrays in registers, unrolled loops). static:
 * a plain C99 `inline` definition gives the linker no body (e.g. at -cl-opt-disable). */
#ifndef FC_INLINE
#define FC_INLINE static inline __attribute__((always_inline))
#endif

/* Inline assembly keyword (clang and NVIDIA's compiler accept __asm__). */
#ifndef FC_ASM
#define FC_ASM __asm__
#endif

/* cl_khr_subgroups functions exist only where the compiler announces them (clang announces the
 * extension for OpenCL C 2.0+ only). Built as OpenCL C 1.2 on such a device, fall back. */
#if defined(FC_SG_KHR)
#if defined(cl_khr_subgroups)
#pragma OPENCL EXTENSION cl_khr_subgroups : enable
#elif !defined(__opencl_c_subgroups)
#undef FC_SG_KHR
#define FC_SG_NONE 1
#endif
#endif
#if defined(FC_SG_INTEL)
#if defined(cl_intel_subgroups)
#pragma OPENCL EXTENSION cl_intel_subgroups : enable
#else
#undef FC_SG_INTEL
#define FC_SG_NONE 1
#endif
#endif

#define FC_OP_MAX(a, b) fmax((a), (b))
#define FC_OP_SUM(a, b) ((a) + (b))

/* ---- lane-level exchange inside one sub-group ---------------------------------------------- */
#if defined(FC_SG_NV_PTX)
#define FC_HAVE_SHUFFLE 1
/* Butterfly exchange with the lane whose index differs by `mask`. The full member mask is right
 * because every warp is complete (work-groups are multiples of 32) and converged here. */
FC_INLINE float fc_shuffle_xor(float v, uint mask)
{
    float r;
    FC_ASM volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;"
                    : "=f"(r)
                    : "f"(v), "r"(mask));
    return r;
}
#define fc_sg_lanes() ((uint)FC_SG_SIZE)
#elif defined(FC_SG_INTEL)
#define FC_HAVE_SHUFFLE 1
#define fc_shuffle_xor(v, mask) intel_sub_group_shuffle_xor((v), (mask))
#define fc_sg_lanes() ((uint)get_max_sub_group_size())
#endif

/* ---- building blocks of a team reduction ---------------------------------------------------- */

/* Local-memory tree over the team: log2(team) steps, fixed pairing. */
#define FC_TEAM_TREE(OP)                                                                       \
    {                                                                                          \
        const uint lid_ = get_local_id(0);                                                     \
        scratch[lid_] = v;                                                                     \
        barrier(CLK_LOCAL_MEM_FENCE);                                                          \
        for (uint s_ = team >> 1; s_ > 0; s_ >>= 1) {                                          \
            if ((lid_ & (team - 1u)) < s_)                                                     \
                scratch[lid_] = OP(scratch[lid_], scratch[lid_ + s_]);                         \
            barrier(CLK_LOCAL_MEM_FENCE);                                                      \
        }                                                                                      \
        v = scratch[lid_ & ~(team - 1u)];                                                      \
        barrier(CLK_LOCAL_MEM_FENCE);                                                          \
        return v;                                                                              \
    }

/* The team spans several sub-groups of `lanes` (each already reduced, every lane holding its
 * sub-group's value): lane 0 of each publishes, then every item folds its team's sub-group
 * values in index order. Sub-groups are consecutive local ids (1-D work-groups). */
#define FC_TEAM_ACROSS_SUBGROUPS(OP, lanes)                                                    \
    {                                                                                          \
        const uint lid_ = get_local_id(0);                                                     \
        if ((lid_ & ((lanes) - 1u)) == 0)                                                      \
            scratch[lid_ / (lanes)] = v;                                                       \
        barrier(CLK_LOCAL_MEM_FENCE);                                                          \
        const uint first_ = (lid_ & ~(team - 1u)) / (lanes), count_ = team / (lanes);          \
        v = scratch[first_];                                                                   \
        for (uint i_ = 1; i_ < count_; ++i_)                                                   \
            v = OP(v, scratch[first_ + i_]);                                                   \
        barrier(CLK_LOCAL_MEM_FENCE);                                                          \
        return v;                                                                              \
    }

#if defined(FC_SG_NV_PTX) && FC_SG_SIZE == 32
/* A whole warp's butterfly, unrolled: a loop over a run-time width spends a counter update, a
 * test and a branch on each step's shuffle and operation. Every lane gets the same bits (each
 * step combines the same two values in both lanes, and OP is commutative). */
#define FC_WARP_STEPS(OP)                                                                      \
    v = OP(v, fc_shuffle_xor(v, 16u));                                                         \
    v = OP(v, fc_shuffle_xor(v, 8u));                                                          \
    v = OP(v, fc_shuffle_xor(v, 4u));                                                          \
    v = OP(v, fc_shuffle_xor(v, 2u));                                                          \
    v = OP(v, fc_shuffle_xor(v, 1u));
#define FC_HAVE_WARP_STEPS 1
#endif

#if defined(FC_HAVE_SHUFFLE)
#if defined(FC_HAVE_WARP_STEPS)
#define FC_SHUFFLE_STEPS(OP, lanes)                                                            \
    if (team >= (lanes)) {                                                                     \
        FC_WARP_STEPS(OP)                                                                      \
    } else {                                                                                   \
        for (uint o_ = team >> 1; o_ > 0; o_ >>= 1)                                            \
            v = OP(v, fc_shuffle_xor(v, o_));                                                  \
    }
#else
#define FC_SHUFFLE_STEPS(OP, lanes)                                                            \
    for (uint o_ = min(team, (lanes)) >> 1; o_ > 0; o_ >>= 1)                                  \
        v = OP(v, fc_shuffle_xor(v, o_));
#endif
#define FC_TEAM_REDUCE_BODY(OP, SG_REDUCE)                                                     \
    const uint lanes_ = fc_sg_lanes();                                                         \
    FC_SHUFFLE_STEPS(OP, lanes_)                                                               \
    if (team <= lanes_)                                                                        \
        return v;                                                                              \
    FC_TEAM_ACROSS_SUBGROUPS(OP, lanes_)
#elif defined(FC_SG_KHR)
/* A sub-group reduction covers whole sub-groups, so teams narrower than one use the tree. */
#define FC_TEAM_REDUCE_BODY(OP, SG_REDUCE)                                                     \
    const uint lanes_ = (uint)get_max_sub_group_size();                                        \
    if (team >= lanes_) {                                                                      \
        v = SG_REDUCE(v);                                                                      \
        if (team == lanes_)                                                                    \
            return v;                                                                          \
        FC_TEAM_ACROSS_SUBGROUPS(OP, lanes_)                                                   \
    }                                                                                          \
    FC_TEAM_TREE(OP)
#else
#define FC_TEAM_REDUCE_BODY(OP, SG_REDUCE) FC_TEAM_TREE(OP)
#endif

/* Maximum over the team (NaN inputs are ignored, as fmax does; -inf is the identity). */
FC_INLINE float fc_team_max(float v, uint team, __local float *scratch)
{
    FC_TEAM_REDUCE_BODY(FC_OP_MAX, sub_group_reduce_max)
}

/* Sum over the team. */
FC_INLINE float fc_team_sum(float v, uint team, __local float *scratch)
{
    FC_TEAM_REDUCE_BODY(FC_OP_SUM, sub_group_reduce_add)
}

/* ---- the softmax pair (m, d): running max and denominator sum(exp(s - m)) ------------------ */

/* The value subtracted before exp: the max, except that a max of -inf (nothing but -inf seen
 * yet) becomes 0, so that exp(-inf - -inf) never makes a NaN out of an empty or all -inf part.
 * A max of +inf stays, so that a row holding +inf turns into NaN as torch does. */
FC_INLINE float fc_md_ref(float m)
{
    return m == -INFINITY ? 0.0f : m;
}

/* (m, d) ⊕ (m', d') = (M, d·e^(m−M) + d'·e^(m'−M)), M = max(m, m'). Commutative, so both
 * orders give the same bits. Empty parts are (-inf, 0). */
FC_INLINE float2 fc_md_merge(float2 a, float2 b)
{
    const float mx = fmax(a.x, b.x), ref = fc_md_ref(mx);
    return (float2)(mx, a.y * exp(a.x - ref) + b.y * exp(b.x - ref));
}

/* Merges every item's (m, d) over the team: a max reduction, then a sum of the rescaled d.
 * Same result as merging pairs, with one rescale per item. */
FC_INLINE float2 fc_team_merge(float2 md, uint team, __local float *scratch)
{
    const float mx = fc_team_max(md.x, team, scratch);
    const float d = fc_team_sum(md.y * exp(md.x - fc_md_ref(mx)), team, scratch);
    return (float2)(mx, d);
}

#if defined(FC_HAVE_WARP_STEPS)
/* fc_team_merge over one warp, with no barrier and no local memory (each warp may call it on
 * its own): every lane gets the same bits. */
FC_INLINE float2 fc_warp_merge(float2 md)
{
    float v = md.x;
    FC_WARP_STEPS(FC_OP_MAX)
    const float mx = v;
    v = md.y * exp(md.x - fc_md_ref(mx));
    FC_WARP_STEPS(FC_OP_SUM)
    return (float2)(mx, v);
}
#endif

#endif /* FC_PORTABILITY_H */
