/* cl/ptx_async.h — asynchronous global-to-local copies (cp.async, sm_80 and up) through inline
 * PTX: OpenCL C has no way to ask for them, but NVIDIA's OpenCL driver passes the PTX through
 * (probed on an H100). The copies skip the registers, so a kernel can keep blocks in flight in
 * local memory without holding them in its register file. Used by the tensor-core program
 * (attention_mma.cl) and the f32 cp.async decode kernels (attention_decode_async.cl); the host
 * builds those only for NVIDIA GPUs of compute capability 8.0 and up (FC_SG_NV_PTX marks
 * NVIDIA's inline PTX). Empty elsewhere. */
#if defined(FC_SG_NV_PTX)

#ifndef FC_INLINE
#define FC_INLINE static inline __attribute__((always_inline))
#endif

/* A local pointer's address in the shared state space (what ldmatrix and cp.async take). */
FC_INLINE uint fc_async_smem(__local const void *p) { return (uint)(ulong)p; }

/* 16 bytes global -> local, bypassing L1: the first `bytes` (0-16) from src, the rest zeros.
 * With bytes 0 src is not read but must still be a mapped address. */
FC_INLINE void fc_async_cp16(uint dst, __global const uchar *src, uint bytes)
{
    __asm__ volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src),
                     "r"(bytes)
                     : "memory");
}
/* Closes this work-item's copies issued since the last commit into one group. */
FC_INLINE void fc_async_commit(void) { __asm__ volatile("cp.async.commit_group;" ::: "memory"); }
/* Waits until at most n (0-3, a constant once inlined) of this work-item's groups are pending:
 * PTX takes the count as an immediate. Other work-items' copies need a barrier after it. */
FC_INLINE void fc_async_wait(const int n)
{
    if (n <= 0)
        __asm__ volatile("cp.async.wait_group 0;" ::: "memory");
    else if (n == 1)
        __asm__ volatile("cp.async.wait_group 1;" ::: "memory");
    else if (n == 2)
        __asm__ volatile("cp.async.wait_group 2;" ::: "memory");
    else
        __asm__ volatile("cp.async.wait_group 3;" ::: "memory");
}

#endif
