/* Finds every OpenCL device and describes it: vendor, limits, and which reduction mechanism
 * the kernels may use there. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl_internal.h"
#include "../error.h"
#include "../text.h"

/* Upper bounds on what we enumerate; real systems have a handful of each. */
#define FC_MAX_PLATFORMS 32
#define FC_MAX_DEVICES_PER_PLATFORM 64

static void info_string(cl_device_id d, cl_device_info what, char *out, size_t size) {
    out[0] = '\0';
    if (clGetDeviceInfo(d, what, size, out, NULL) != CL_SUCCESS) out[0] = '\0';
    out[size - 1] = '\0';
}

static int has_extension(const char *extensions, const char *name) {
    size_t n = strlen(name);
    const char *p = extensions;
    while ((p = strstr(p, name)) != NULL) {
        int starts = (p == extensions || p[-1] == ' ');
        int ends = (p[n] == '\0' || p[n] == ' ');
        if (starts && ends) return 1;
        p += n;
    }
    return 0;
}

static fc_vendor detect_vendor(const char *platform, const char *vendor, const char *name) {
    if (fc_contains_nocase(platform, "portable computing language") ||
        fc_contains_nocase(platform, "pocl"))
        return FC_VENDOR_POCL;
    if (fc_contains_nocase(vendor, "nvidia")) return FC_VENDOR_NVIDIA;
    if (fc_contains_nocase(vendor, "advanced micro devices") || fc_contains_nocase(vendor, "amd"))
        return FC_VENDOR_AMD;
    if (fc_contains_nocase(vendor, "intel")) return FC_VENDOR_INTEL;
    (void)name;
    return FC_VENDOR_OTHER;
}

flashcl_status fc_cl_describe(cl_platform_id platform, cl_device_id device, fc_cl_device *dev) {
    cl_int err;
    cl_device_type type = 0;
    cl_ulong global_mem = 0, local_mem = 0, max_alloc = 0;
    cl_uint units = 0, align_bits = 0;
    size_t max_wg = 0, ext_size = 0;
    char *extensions;

    memset(dev, 0, sizeof *dev);
    dev->platform = platform;
    dev->device = device;
    err = clGetDeviceInfo(device, CL_DEVICE_TYPE, sizeof type, &type, NULL);
    if (err == CL_SUCCESS)
        err = clGetDeviceInfo(device, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof global_mem, &global_mem,
                              NULL);
    if (err == CL_SUCCESS)
        err = clGetDeviceInfo(device, CL_DEVICE_LOCAL_MEM_SIZE, sizeof local_mem, &local_mem,
                              NULL);
    if (err == CL_SUCCESS)
        err = clGetDeviceInfo(device, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof max_alloc,
                              &max_alloc, NULL);
    if (err == CL_SUCCESS)
        err = clGetDeviceInfo(device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof units, &units, NULL);
    if (err == CL_SUCCESS)
        err = clGetDeviceInfo(device, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof max_wg, &max_wg,
                              NULL);
    if (err == CL_SUCCESS)
        err = clGetDeviceInfo(device, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof align_bits,
                              &align_bits, NULL);
    if (err == CL_SUCCESS)
        err = clGetDeviceInfo(device, CL_DEVICE_EXTENSIONS, 0, NULL, &ext_size);
    if (err != CL_SUCCESS) return fc_cl_fail(err, "clGetDeviceInfo");

    extensions = malloc(ext_size + 1);
    if (!extensions) return fc_fail(FLASHCL_OUT_OF_MEMORY, "out of host memory");
    err = clGetDeviceInfo(device, CL_DEVICE_EXTENSIONS, ext_size, extensions, NULL);
    extensions[err == CL_SUCCESS ? ext_size : 0] = '\0';

    info_string(device, CL_DEVICE_NAME, dev->info.name, sizeof dev->info.name);
    info_string(device, CL_DEVICE_VENDOR, dev->info.vendor, sizeof dev->info.vendor);
    info_string(device, CL_DRIVER_VERSION, dev->driver_version, sizeof dev->driver_version);
    info_string(device, CL_DEVICE_VERSION, dev->device_version, sizeof dev->device_version);
    snprintf(dev->info.driver, sizeof dev->info.driver, "%s", dev->driver_version);
    if (clGetPlatformInfo(platform, CL_PLATFORM_NAME, sizeof dev->info.platform,
                          dev->info.platform, NULL) != CL_SUCCESS)
        dev->info.platform[0] = '\0';
    dev->info.platform[sizeof dev->info.platform - 1] = '\0';

    dev->vendor = detect_vendor(dev->info.platform, dev->info.vendor, dev->info.name);
    dev->is_gpu = (type & CL_DEVICE_TYPE_GPU) != 0;
    dev->max_work_group_size = max_wg;
    dev->local_mem_bytes = (size_t)local_mem;
    dev->compute_units = units ? units : 1;
    dev->mem_base_align_bytes = align_bits / 8;
    dev->max_alloc_bytes = max_alloc;

    /* Reduction mechanism, best first. NVIDIA's driver exposes no sub-group extension, but
     * inline PTX shfl.sync works in its OpenCL kernels (warp of 32). */
    if (dev->vendor == FC_VENDOR_NVIDIA && dev->is_gpu) {
        dev->subgroups = FC_SG_NV_PTX;
        dev->subgroup_size = 32;
    } else if (has_extension(extensions, "cl_intel_subgroups")) {
        dev->subgroups = FC_SG_INTEL;
        dev->subgroup_size = 0; /* chosen by the compiler: kernels query it at run time */
    } else if (has_extension(extensions, "cl_khr_subgroups")) {
        dev->subgroups = FC_SG_KHR;
        dev->subgroup_size = 0;
    } else {
        dev->subgroups = FC_SG_NONE;
        dev->subgroup_size = 0;
    }

    {
        /* "OpenCL C <major>.<minor> ..." */
        char c_version[64];
        info_string(device, CL_DEVICE_OPENCL_C_VERSION, c_version, sizeof c_version);
        dev->opencl_c_major =
            strncmp(c_version, "OpenCL C ", 9) == 0 && atoi(c_version + 9) > 0 ? atoi(c_version + 9) : 1;
    }
    dev->has_int64_atomics = has_extension(extensions, "cl_khr_int64_base_atomics");
    if (has_extension(extensions, "cl_nv_device_attribute_query")) {
        cl_uint major = 0; /* CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV */
        if (clGetDeviceInfo(device, 0x4000, sizeof major, &major, NULL) == CL_SUCCESS)
            dev->nv_compute_major = (int)major;
    }

    /* Mesa's llvmpipe (Rusticl's CPU device) gives every kernel invocation one loop counter,
     * set to LP_MAX_TGSI_LOOP_ITERATIONS = 65535 at its start and decremented at the end of
     * every pass of every loop (nested or not, the exit pass included); at 0 the loop running
     * then ends as if every lane had broken out, and each later loop runs one pass: no error,
     * just a wrong answer (gallivm lp_bld_ir_common.c, lp_exec_mask_function_init and
     * lp_exec_endloop; measured on Mesa 22.3.6, and still so in later versions). Loops the
     * compiler unrolls do not count. Attention plans its splits around it (attention_plan.c). */
    dev->loop_limit = fc_contains_nocase(dev->info.name, "llvmpipe") ? 65535 : 0;

    dev->info.backend = FLASHCL_BACKEND_OPENCL;
    dev->info.global_mem_bytes = (size_t)global_mem;
    dev->info.local_mem_bytes = (size_t)local_mem;
    dev->info.compute_units = (int)dev->compute_units;
    dev->info.subgroup_size = dev->subgroups == FC_SG_NV_PTX ? 32 : 0;
    dev->info.features = 0;
    if (dev->subgroups != FC_SG_NONE) dev->info.features |= FLASHCL_FEATURE_SUBGROUPS;
    if (has_extension(extensions, "cl_khr_fp16")) dev->info.features |= FLASHCL_FEATURE_FP16_ARITH;
    if (dev->is_gpu) dev->info.features |= FLASHCL_FEATURE_GPU;
    if (dev->vendor == FC_VENDOR_NVIDIA && dev->is_gpu)
        dev->info.features |= FLASHCL_FEATURE_MATRIX_UNITS; /* mma.sync through inline PTX */
    if (has_extension(extensions, "cl_intel_subgroup_matrix_multiply_accumulate"))
        dev->info.features |= FLASHCL_FEATURE_MATRIX_UNITS;
    free(extensions);
    return FLASHCL_SUCCESS;
}

flashcl_status fc_cl_discover(fc_cl_device **out, size_t *count) {
    cl_platform_id platforms[FC_MAX_PLATFORMS];
    cl_uint nplatforms = 0, p;
    fc_cl_device *devices = NULL;
    size_t n = 0, capacity = 0;
    cl_int err;

    *out = NULL;
    *count = 0;
    err = clGetPlatformIDs(FC_MAX_PLATFORMS, platforms, &nplatforms);
    /* No ICD installed, or no platform: not an error, just no devices. */
    if (err == -1001 /* CL_PLATFORM_NOT_FOUND_KHR */ || nplatforms == 0) return FLASHCL_SUCCESS;
    if (err != CL_SUCCESS) return fc_cl_fail(err, "clGetPlatformIDs");
    if (nplatforms > FC_MAX_PLATFORMS) nplatforms = FC_MAX_PLATFORMS;

    for (p = 0; p < nplatforms; p++) {
        cl_device_id ids[FC_MAX_DEVICES_PER_PLATFORM];
        cl_uint nids = 0, i;
        err = clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, FC_MAX_DEVICES_PER_PLATFORM, ids,
                             &nids);
        if (err == CL_DEVICE_NOT_FOUND || nids == 0) continue; /* e.g. Clover with no GPU */
        if (err != CL_SUCCESS) continue; /* a broken platform must not hide the others */
        if (nids > FC_MAX_DEVICES_PER_PLATFORM) nids = FC_MAX_DEVICES_PER_PLATFORM;
        for (i = 0; i < nids; i++) {
            fc_cl_device d;
            if (fc_cl_describe(platforms[p], ids[i], &d) != FLASHCL_SUCCESS) continue;
            if (n == capacity) {
                size_t cap = capacity ? capacity * 2 : 8;
                fc_cl_device *grown = realloc(devices, cap * sizeof *devices);
                if (!grown) {
                    free(devices);
                    return fc_fail(FLASHCL_OUT_OF_MEMORY, "out of host memory");
                }
                devices = grown;
                capacity = cap;
            }
            devices[n++] = d;
        }
    }
    *out = devices;
    *count = n;
    return FLASHCL_SUCCESS;
}
