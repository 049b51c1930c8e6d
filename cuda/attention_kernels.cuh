/* The exported attention kernels: extern "C" names that src/cuda/kernels.c looks up. */
#pragma once

#include "attention_merge.cuh"
#include "attention_simt.cuh"
#include "attention_tc.cuh"
#include "attention_tc_decode.cuh"
#include "attention_tc_tf32x3.cuh"
#include "attention_wgmma.cuh"
#include "attention_wgmma_persistent.cuh"
#include "attention_wgmma_persistent_w1.cuh"

#define FC_ATTENTION_TC_KERNEL(name, DP, KEYS, MT)                                              \
    extern "C" __global__ void __launch_bounds__(FC_ATTENTION_TC_THREADS, 2)                    \
        fc_attention_tc_##name##_f16(fc_attention_args a) {                                     \
        attention_tc<FC_F16, DP, KEYS, MT>(a);                                                  \
    }                                                                                           \
    extern "C" __global__ void __launch_bounds__(FC_ATTENTION_TC_THREADS, 2)                    \
        fc_attention_tc_##name##_bf16(fc_attention_args a) {                                    \
        attention_tc<FC_BF16, DP, KEYS, MT>(a);                                                 \
    }
FC_ATTENTION_TC_CONFIGS(FC_ATTENTION_TC_KERNEL)

/* The wgmma kernels exist in every image (the host looks every name up) but have a body only in
 * the sm_90a cubin: wgmma needs the arch-specific target, and the host launches them only on
 * compute capability 9.0, whose driver loads that cubin. One block per SM: the ring takes most
 * of the shared memory and the two warpgroups all of the registers they want. */
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* PIPE 3 and 4 are the persistent pingpong kernel (cuda/attention_wgmma_persistent.cuh: two
 * warpgroups, 128-key blocks; unmasked calls, and causal ones), the others attention_wgmma. */
template <int DT, int DP, int KEYS, int WGS, int PIPE>
__device__ void attention_wgmma_config(const fc_attention_args &a) {
    if constexpr (PIPE == 3) attention_wgmma_persistent<DT, DP, KEYS, false>(a);
    else if constexpr (PIPE == 4) attention_wgmma_persistent<DT, DP, KEYS, true>(a);
    else if constexpr (PIPE == 5) attention_wgmma_persistent_w1<DT, DP, KEYS, false>(a);
    else if constexpr (PIPE == 6) attention_wgmma_persistent_w1<DT, DP, KEYS, true>(a);
    else attention_wgmma<DT, DP, KEYS, WGS, PIPE>(a);
}
#define FC_ATTENTION_WGMMA_BODY(DT, DP, KEYS, WGS, PIPE) attention_wgmma_config<DT, DP, KEYS, WGS, PIPE>(a);
#else
#define FC_ATTENTION_WGMMA_BODY(DT, DP, KEYS, WGS, PIPE) (void)a;
#endif
#define FC_ATTENTION_WGMMA_KERNEL(name, DP, KEYS, WGS, PIPE, BLOCKS)                                       \
    extern "C" __global__ void __launch_bounds__(FC_ATTENTION_WGMMA_WG_THREADS * (WGS), BLOCKS)     \
        fc_attention_##name##_f16(fc_attention_args a) {                                        \
        FC_ATTENTION_WGMMA_BODY(FC_F16, DP, KEYS, WGS, PIPE)                                    \
    }                                                                                           \
    extern "C" __global__ void __launch_bounds__(FC_ATTENTION_WGMMA_WG_THREADS * (WGS), BLOCKS)     \
        fc_attention_##name##_bf16(fc_attention_args a) {                                       \
        FC_ATTENTION_WGMMA_BODY(FC_BF16, DP, KEYS, WGS, PIPE)                                    \
    }
FC_ATTENTION_WGMMA_CONFIGS(FC_ATTENTION_WGMMA_KERNEL)

#define FC_ATTENTION_TC_DECODE_KERNEL(name, DP, KEYS, STAGES)                                   \
    extern "C" __global__ void __launch_bounds__(FC_ATTENTION_TC_THREADS)                       \
        fc_attention_tc_decode_##name##_f16(fc_attention_args a) {                              \
        attention_tc_decode<FC_F16, DP, KEYS, STAGES>(a);                                       \
    }                                                                                           \
    extern "C" __global__ void __launch_bounds__(FC_ATTENTION_TC_THREADS)                       \
        fc_attention_tc_decode_##name##_bf16(fc_attention_args a) {                             \
        attention_tc_decode<FC_BF16, DP, KEYS, STAGES>(a);                                      \
    }
FC_ATTENTION_TC_DECODE_CONFIGS(FC_ATTENTION_TC_DECODE_KERNEL)

#define FC_ATTENTION_TF32_KERNEL(name, DP, KEYS)                                                \
    extern "C" __global__ void __launch_bounds__(FC_ATTENTION_TC_THREADS, 2)                    \
        fc_attention_##name##_f32(fc_attention_args a) {                                        \
        attention_tc<FC_F32, DP, KEYS, 1>(a);                                                   \
    }
FC_ATTENTION_TF32_CONFIGS(FC_ATTENTION_TF32_KERNEL)

#define FC_ATTENTION_TF32_DECODE_KERNEL(name, DP, KEYS, STAGES)                                 \
    extern "C" __global__ void __launch_bounds__(FC_ATTENTION_TC_THREADS)                       \
        fc_attention_##name##_f32(fc_attention_args a) {                                        \
        attention_tc_decode<FC_F32, DP, KEYS, STAGES>(a);                                       \
    }
FC_ATTENTION_TF32_DECODE_CONFIGS(FC_ATTENTION_TF32_DECODE_KERNEL)

#define FC_ATTENTION_SIMT_KERNEL_DT(name, DP, dt_name, DT)                                      \
    extern "C" __global__ void __launch_bounds__(FC_ATTENTION_SIMT_THREADS)                     \
        fc_attention_simt_##name##_##dt_name(fc_attention_args a) {                             \
        attention_simt<DT, DP>(a);                                                              \
    }
#define FC_ATTENTION_SIMT_KERNEL(name, DP)                                                      \
    FC_ATTENTION_SIMT_KERNEL_DT(name, DP, f32, FC_F32)                                          \
    FC_ATTENTION_SIMT_KERNEL_DT(name, DP, f16, FC_F16)                                          \
    FC_ATTENTION_SIMT_KERNEL_DT(name, DP, bf16, FC_BF16)
FC_ATTENTION_SIMT_CONFIGS(FC_ATTENTION_SIMT_KERNEL)

#define FC_ATTENTION_MERGE_KERNEL(dt_name, DT)                                                  \
    extern "C" __global__ void __launch_bounds__(FC_MERGE_THREADS)                              \
        fc_attention_merge_##dt_name(fc_merge_args a) {                                         \
        attention_merge<DT>(a);                                                                 \
    }
FC_ATTENTION_MERGE_KERNEL(f32, FC_F32)
FC_ATTENTION_MERGE_KERNEL(f16, FC_F16)
FC_ATTENTION_MERGE_KERNEL(bf16, FC_BF16)
