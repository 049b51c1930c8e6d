/* cl/softmax_exp.h — the per-element exp of the softmax kernels.
 *
 * FC_EXP(x): exp of a float4, OpenCL's exp unless the 16-bit programs on NVIDIA take
 * ex2.approx (FC_FAST_EXP). FC_EXP_SUM(x) for exps that only join a sum and FC_EXP_OUT(ydt, x)
 * for exps that end in an output of dtype ydt: both FC_EXP unless FC_EXP_FTZ picks cheaper
 * forms that give the same result there. Arguments are s - max <= 0 (or NaN). */
#ifndef FC_SOFTMAX_EXP_H
#define FC_SOFTMAX_EXP_H

#ifndef FLASHCL_EMBEDDED
#include "portability.h"
#include "dtype.h"
#endif

/* 1 (NVIDIA PTX only): per-element exp from one ex2.approx, 2 instructions (5 with the
 * subnormal handling ptxas adds without .ftz) instead of ~10 for exp (see fc_exp_fast). */
#ifndef FC_FAST_EXP
#define FC_FAST_EXP 0
#endif
/* 1 (with FC_FAST_EXP): exps that only join a sum or end in an f16 output use ex2.approx.ftz
 * (see fc_exp_fast_ftz). */
#ifndef FC_EXP_FTZ
#define FC_EXP_FTZ 0
#endif

#if FC_FAST_EXP && defined(FC_SG_NV_PTX)
/* exp(x) for the per-element terms (x = s - max <= 0, or NaN) of the 16-bit programs:
 * ex2.approx(x log2 e), 2 instructions. The rounding of x log2 e costs at most 2.6e-6 relative
 * at |x| = 80, below the tests' 1e-5 and far below what 16-bit inputs carry. -inf gives +0, NaN
 * stays NaN, 0 gives exactly 1; results below 2^-126 are kept (no .ftz). */
FC_INLINE float fc_exp_fast(float x)
{
    float e;
    FC_ASM("ex2.approx.f32 %0, %1;" : "=f"(e) : "f"(x * 1.44269504f));
    return e;
}

FC_INLINE float4 fc_exp4(float4 x)
{
    return (float4)(fc_exp_fast(x.x), fc_exp_fast(x.y), fc_exp_fast(x.z), fc_exp_fast(x.w));
}
#define FC_EXP fc_exp4

#if FC_EXP_FTZ
/* The same with .ftz: results below 2^-126 become +0, which saves the two rescaling
 * instructions ptxas wraps around ex2.approx without it. Exact where a term only joins a sum
 * (every sum holds a term of exactly 1, its own maximum, so terms below 2^-126 change nothing
 * in f32) or ends in an f16 output (a value below 2^-126, times factors <= 1, rounds to 0 there
 * either way); f32 and bf16 outputs keep the subnormals torch gives (fc_exp4). */
FC_INLINE float fc_exp_fast_ftz(float x)
{
    float e;
    FC_ASM("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(x * 1.44269504f));
    return e;
}

FC_INLINE float4 fc_exp4_ftz(float4 x)
{
    return (float4)(fc_exp_fast_ftz(x.x), fc_exp_fast_ftz(x.y), fc_exp_fast_ftz(x.z),
                    fc_exp_fast_ftz(x.w));
}
/* For bf16 outputs, which keep subnormals down to 2^-133: the exponent shifted up by 64 before
 * the .ftz ex2 and back by an exact multiply by 2^-64 after it (a multiply rounds subnormals
 * as IEEE says), 3 instructions against 5. Arguments below -190 (results below 2^-190) give 0,
 * as they round to 0 in bf16. Relative error up to 2.6e-6 (the rounding of the shifted
 * argument), far below bf16's 3.9e-3. FC_EXP_SHIFT=0 keeps fc_exp4 there (A/B). */
#ifndef FC_EXP_SHIFT
#define FC_EXP_SHIFT 1
#endif
FC_INLINE float fc_exp_fast_shifted(float x)
{
    float e;
    FC_ASM("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(fma(x, 1.44269504f, 64.0f)));
    return e * 5.42101086242752217e-20f; /* 2^-64 */
}

FC_INLINE float4 fc_exp4_shifted(float4 x)
{
    return (float4)(fc_exp_fast_shifted(x.x), fc_exp_fast_shifted(x.y),
                    fc_exp_fast_shifted(x.z), fc_exp_fast_shifted(x.w));
}
#define FC_EXP_SUM fc_exp4_ftz
#define FC_EXP_OUT(ydt, x)                                                                     \
    ((ydt) == FC_F16                   ? fc_exp4_ftz(x)                                        \
     : (ydt) == FC_BF16 && FC_EXP_SHIFT ? fc_exp4_shifted(x)                                   \
                                        : fc_exp4(x))
#endif
#else
#define FC_EXP exp
#endif
/* FC_EXP_SUM: exps that only join a sum; FC_EXP_OUT(ydt, x): exps that reach an output of ydt. */
#ifndef FC_EXP_SUM
#define FC_EXP_SUM FC_EXP
#define FC_EXP_OUT(ydt, x) FC_EXP(x)
#endif

#endif /* FC_SOFTMAX_EXP_H */
