/* Element loads and stores for the bench's own kernels, specialised by -DBENCH_DTYPE.
 * 0 = f32, 1 = f16, 2 = bf16 (the flashcl_dtype values). Loads widen to float, stores round
 * to nearest even. f16 goes through vload_half/vstore_half and bf16 through bit shifts, so no
 * kernel needs cl_khr_fp16 (NVIDIA's OpenCL does not offer it). Indices, never pointer
 * arithmetic on half pointers, which OpenCL C only allows with cl_khr_fp16.
 * This file is concatenated in front of copy.cl and naive_softmax.cl (bench/CMakeLists.txt). */
#ifndef BENCH_DTYPE
#define BENCH_DTYPE 0
#endif
#ifndef BENCH_WG
#define BENCH_WG 256 /* work-group size of the row reductions; a power of two */
#endif

#if BENCH_DTYPE == 0
typedef float elem_t;
#define LOAD_ELEM(p, i) ((p)[i])
#define STORE_ELEM(p, i, v) ((p)[i] = (v))
#elif BENCH_DTYPE == 1
typedef half elem_t;
#define LOAD_ELEM(p, i) vload_half((i), (p))
#define STORE_ELEM(p, i, v) vstore_half_rte((v), (i), (p))
#else
typedef ushort elem_t;
/* bf16 is the top half of an f32: widening is a shift. */
#define LOAD_ELEM(p, i) as_float((uint)(p)[i] << 16)
#define STORE_ELEM(p, i, v) ((p)[i] = bench_float_to_bf16(v))
ushort bench_float_to_bf16(float f);
ushort bench_float_to_bf16(float f)
{
    uint u = as_uint(f);
    if (isnan(f))
        return (ushort)((u >> 16) | 0x40u); /* keep the sign, stay a (quiet) NaN */
    u += 0x7fffu + ((u >> 16) & 1u);         /* round to nearest, ties to even */
    return (ushort)(u >> 16);
}
#endif
