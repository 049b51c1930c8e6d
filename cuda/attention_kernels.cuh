/* The exported attention kernels: extern "C" names that src/cuda/kernels.c looks up. */
#pragma once

#include "attention_merge.cuh"
#include "attention_simt.cuh"
#include "attention_tc.cuh"
#include "attention_tc_decode.cuh"

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
        attention_merge<DT, FC_MERGE_MAX_HEAD_DIM / 32>(a);                                                                 \
    }
FC_ATTENTION_MERGE_KERNEL(f32, FC_F32)
FC_ATTENTION_MERGE_KERNEL(f16, FC_F16)
FC_ATTENTION_MERGE_KERNEL(bf16, FC_BF16)
