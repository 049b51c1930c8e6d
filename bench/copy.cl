/* The device's own bandwidth ceiling: a plain copy, 16 bytes per work-item, so that every
 * softmax number can be read as a fraction of what this device moves at best. */
__kernel void bench_copy(__global const uint4 *src, __global uint4 *dst, ulong n)
{
    const size_t i = get_global_id(0);
    if (i < n)
        dst[i] = src[i];
}
