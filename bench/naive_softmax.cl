/* The baseline: softmax the way one writes it without flashcl. Three kernels, three trips
 * through memory: the row max, the row sum of exp(x - max), then the normalise pass.
 * The reductions use one work-group per row with a local-memory tree; nothing is fused and
 * nothing is held on chip between passes. x and y are [rows, cols], packed. */

/* row_max[row] = max_j x[row, j]; one work-group of BENCH_WG items per row. */
__kernel void naive_row_max(__global const elem_t *x, __global float *row_max, uint cols)
{
    __local float scratch[BENCH_WG];
    const uint lid = (uint)get_local_id(0);
    const ulong base = (ulong)get_group_id(0) * cols;
    float m = -INFINITY;
    for (uint j = lid; j < cols; j += BENCH_WG)
        m = fmax(m, LOAD_ELEM(x, base + j));
    scratch[lid] = m;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = BENCH_WG / 2; s > 0; s >>= 1) {
        if (lid < s)
            scratch[lid] = fmax(scratch[lid], scratch[lid + s]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0)
        row_max[get_group_id(0)] = scratch[0];
}

/* row_sum[row] = sum_j exp(x[row, j] - row_max[row]). */
__kernel void naive_row_sum(__global const elem_t *x, __global const float *row_max,
                            __global float *row_sum, uint cols)
{
    __local float scratch[BENCH_WG];
    const uint lid = (uint)get_local_id(0);
    const ulong base = (ulong)get_group_id(0) * cols;
    const float m = row_max[get_group_id(0)];
    float s = 0.0f;
    for (uint j = lid; j < cols; j += BENCH_WG)
        s += exp(LOAD_ELEM(x, base + j) - m);
    scratch[lid] = s;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint h = BENCH_WG / 2; h > 0; h >>= 1) {
        if (lid < h)
            scratch[lid] += scratch[lid + h];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0)
        row_sum[get_group_id(0)] = scratch[0];
}

/* y = exp(x - max) / sum, or x - max - log(sum) for log-softmax; a 2-D range (cols, rows)
 * whose first dimension is rounded up to the work-group size. */
__kernel void naive_normalize(__global const elem_t *x, __global elem_t *y,
                              __global const float *row_max, __global const float *row_sum,
                              uint cols, int log_softmax)
{
    const uint j = (uint)get_global_id(0);
    const size_t row = get_global_id(1);
    if (j >= cols)
        return;
    const ulong i = (ulong)row * cols + j;
    const float d = LOAD_ELEM(x, i) - row_max[row];
    const float v = log_softmax ? d - log(row_sum[row]) : exp(d) / row_sum[row];
    STORE_ELEM(y, i, v);
}
