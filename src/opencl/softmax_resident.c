/* How many work-groups of a cooperative split-row kernel can be resident on the device at once:
 * the bound on a row's slices (the no-deadlock condition, cl/softmax_cooperative.cl), which
 * OpenCL does not tell. The kernel answers itself: launched with rows == 0 it runs
 * fc_resident_probe (cl/softmax.cl), which says why the answer can only be short, never long.
 * softmax_plan.c asks for it with FLASHCL_SOFTMAX_COOP_PROBE=1; the answer is kept per kernel and
 * work-group size in the context, so each is probed once. */
#include <stdio.h>
#include <string.h>

#include "../error.h"
#include "cl_internal.h"

/* Groups a probe launches: far more than fit at once, so that the first to settle saw the device
 * full. 4096 work-items a compute unit is twice what NVIDIA's (2048) and AMD's CDNA (2048-2560)
 * hold; at least 8 and at most 64 groups a compute unit (NVIDIA runs at most 32 a unit). */
static size_t fc_resident_grid(const fc_cl_device *dev, size_t wg)
{
    size_t per = 4096 / wg;
    if (per < 8) per = 8;
    if (per > 64) per = 64;
    return (size_t)dev->compute_units * per;
}

/* One probe launch of `kernel` (a cooperative kernel, FC_COOP_PARAMS) in groups of wg. */
static flashcl_status fc_resident_run(fc_cl_context *ctx, cl_kernel kernel, size_t wg,
                                      uint64_t *groups)
{
    const size_t grid = fc_resident_grid(&ctx->dev, wg), global = grid * wg;
    /* probe[0]: groups started; probe[1]: the least count a group settled on */
    cl_ulong probe[2] = {0, CL_ULONG_MAX};
    const cl_ulong zero = 0;
    const cl_uint none = 0;
    const cl_float one = 1.0f;
    const cl_int off = 0;
    char name[96] = "softmax", what[160];
    const char *call = "clCreateBuffer";
    cl_int err;
    cl_uint i;
    cl_mem mem = clCreateBuffer(ctx->context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                                sizeof probe, probe, &err);
    if (err == CL_SUCCESS) {
        /* FC_PTR_ARGS then FC_COOP_PARAMS: x and y NULL (the probe touches neither), rows 0
         * (the probe), the probe's words at offset 0, no words to clear. */
        const struct {
            size_t size;
            const void *value;
        } args[] = {{sizeof(cl_mem), NULL}, {sizeof zero, &zero},  {sizeof zero, &zero},
                    {sizeof(cl_mem), NULL}, {sizeof zero, &zero},  {sizeof zero, &zero},
                    {sizeof zero, &zero},   {sizeof none, &none},  {sizeof none, &none},
                    {sizeof none, &none},   {sizeof one, &one},    {sizeof off, &off},
                    {sizeof off, &off},     {sizeof mem, &mem},    {sizeof zero, &zero},
                    {sizeof zero, &zero},   {sizeof none, &none},  {sizeof none, &none}};
        call = "clSetKernelArg";
        for (i = 0; i < sizeof args / sizeof args[0] && err == CL_SUCCESS; i++)
            err = clSetKernelArg(kernel, i, args[i].size, args[i].value);
    }
    if (err == CL_SUCCESS) {
        call = "clEnqueueNDRangeKernel";
        err = clEnqueueNDRangeKernel(ctx->queue, kernel, 1, NULL, &global, &wg, 0, NULL, NULL);
    }
    if (err == CL_SUCCESS) { /* in order: the read waits for the probe */
        call = "clEnqueueReadBuffer";
        err = clEnqueueReadBuffer(ctx->queue, mem, CL_TRUE, 0, sizeof probe, probe, 0, NULL,
                                  NULL);
    }
    if (mem) clReleaseMemObject(mem);
    if (err != CL_SUCCESS) {
        clGetKernelInfo(kernel, CL_KERNEL_FUNCTION_NAME, sizeof name, name, NULL);
        snprintf(what, sizeof what, "%s(%s, residency probe)", call, name);
        return fc_cl_fail(err, what);
    }
    /* Every group counts itself and settles on a count of at least 1: anything else is a kernel
     * that did not run the probe. */
    if (probe[0] != grid || probe[1] == 0 || probe[1] > grid) {
        clGetKernelInfo(kernel, CL_KERNEL_FUNCTION_NAME, sizeof name, name, NULL);
        return fc_fail(FLASHCL_BACKEND_ERROR,
                       "softmax residency probe of %s (work-group %zu): %llu of %zu groups "
                       "counted, least count %llu",
                       name, wg, (unsigned long long)probe[0], grid,
                       (unsigned long long)probe[1]);
    }
    *groups = probe[1];
    return FLASHCL_SUCCESS;
}

flashcl_status fc_softmax_resident(fc_cl_context *ctx, cl_kernel kernel, size_t wg,
                                   uint64_t *groups)
{
    fc_resident_slot *slot = NULL;
    flashcl_status st = FLASHCL_SUCCESS;
    unsigned i;
    if (!kernel || wg == 0)
        return fc_fail(FLASHCL_BACKEND_ERROR, "softmax residency probe: no kernel to probe");
    mtx_lock(&ctx->launch_lock);
    for (i = 0; i < FC_RESIDENT_SLOTS && !slot; i++)
        if (ctx->resident[i].kernel == kernel && ctx->resident[i].wg == wg)
            slot = &ctx->resident[i];
    if (!slot) {
        uint64_t found = 0;
        st = fc_resident_run(ctx, kernel, wg, &found);
        if (st == FLASHCL_SUCCESS) { /* full: the oldest answer makes room */
            slot = &ctx->resident[ctx->resident_next++ % FC_RESIDENT_SLOTS];
            slot->kernel = kernel;
            slot->wg = wg;
            slot->groups = found;
        }
    }
    if (slot) *groups = slot->groups;
    mtx_unlock(&ctx->launch_lock);
    return st;
}

void fc_softmax_resident_forget(fc_cl_context *ctx)
{
    memset(ctx->resident, 0, sizeof ctx->resident);
    ctx->resident_next = 0;
}
