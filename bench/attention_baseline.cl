/* The unfused attention baseline's own kernels (the GEMMs are CLBlast's): dtype conversions
 * around the f32 GEMMs, and a row softmax over the materialised f32 scores with the causal
 * mask applied in the same kernel. Concatenated after dtype_io.cl (elem_t, LOAD/STORE_ELEM). */

/* y[i] = (float)x[i]: f16/bf16 inputs widened for SGEMM. */
__kernel void attn_to_f32(__global const elem_t *x, __global float *y, ulong n)
{
    const size_t i = get_global_id(0);
    if (i < n)
        y[i] = LOAD_ELEM(x, i);
}

/* y[i] = x[i] rounded to the dtype: the f32 GEMM output stored back as f16/bf16. */
__kernel void attn_from_f32(__global const float *x, __global elem_t *y, ulong n)
{
    const size_t i = get_global_id(0);
    if (i < n)
        STORE_ELEM(y, i, x[i]);
}

/* In-place softmax of one row of the scores s [B*H*Sq, Sk] per work-group of BENCH_WG items.
 * Causal (bottom-right aligned): query i sees keys j <= i + Sk - Sq; the others become 0, and a
 * row that sees no key is all zeros. The scale was applied by the first GEMM (alpha). */
__kernel void attn_softmax_rows(__global float *s, uint sq, uint sk, int causal)
{
    __local float scratch[BENCH_WG];
    const uint lid = (uint)get_local_id(0);
    const ulong row = get_group_id(0);
    __global float *x = s + row * (ulong)sk;
    uint visible = sk;
    if (causal) {
        const long last = (long)(row % sq) + (long)sk - (long)sq; /* last visible key */
        visible = last < 0 ? 0u : (last + 1 >= (long)sk ? sk : (uint)(last + 1));
    }

    float m = -INFINITY;
    for (uint j = lid; j < visible; j += BENCH_WG)
        m = fmax(m, x[j]);
    scratch[lid] = m;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint h = BENCH_WG / 2; h > 0; h >>= 1) {
        if (lid < h)
            scratch[lid] = fmax(scratch[lid], scratch[lid + h]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    m = scratch[0];
    barrier(CLK_LOCAL_MEM_FENCE);

    float sum = 0.0f;
    for (uint j = lid; j < visible; j += BENCH_WG)
        sum += exp(x[j] - m);
    scratch[lid] = sum;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint h = BENCH_WG / 2; h > 0; h >>= 1) {
        if (lid < h)
            scratch[lid] += scratch[lid + h];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float inv = visible ? 1.0f / scratch[0] : 0.0f;

    for (uint j = lid; j < sk; j += BENCH_WG)
        x[j] = j < visible ? exp(x[j] - m) * inv : 0.0f;
}
