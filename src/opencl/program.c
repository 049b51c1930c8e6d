/* Builds the kernel programs for a device: from the binary cache when a verified binary is
 * there, else from the embedded sources (and then stores the binary). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cl_internal.h"
#include "embedded_cl.h"
#include "../error.h"

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Puts the build log into flashcl_last_error after the message already there. */
static void append_build_log(cl_program program, cl_device_id device) {
    size_t size = 0;
    char *log;
    if (clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, NULL, &size) !=
            CL_SUCCESS ||
        size == 0)
        return;
    log = malloc(size + 1);
    if (!log) return;
    if (clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, size, log, NULL) ==
        CL_SUCCESS) {
        log[size] = '\0';
        fc_error_append("\nbuild log:\n");
        fc_error_append(log);
    }
    free(log);
}

/* Reads the device binary of a built program. Returns NULL when the driver gives none. */
static unsigned char *program_binary(cl_program program, size_t *size) {
    size_t bytes = 0;
    unsigned char *binary;
    if (clGetProgramInfo(program, CL_PROGRAM_BINARY_SIZES, sizeof bytes, &bytes, NULL) !=
            CL_SUCCESS ||
        bytes == 0)
        return NULL;
    binary = malloc(bytes);
    if (!binary) return NULL;
    if (clGetProgramInfo(program, CL_PROGRAM_BINARIES, sizeof binary, &binary, NULL) !=
        CL_SUCCESS) {
        free(binary);
        return NULL;
    }
    *size = bytes;
    return binary;
}

static cl_program program_from_binary(fc_cl_context *ctx, const unsigned char *binary,
                                      size_t size) {
    cl_int err, binary_status = CL_SUCCESS;
    cl_program program = clCreateProgramWithBinary(ctx->context, 1, &ctx->dev.device, &size,
                                                   &binary, &binary_status, &err);
    if (err != CL_SUCCESS || binary_status != CL_SUCCESS) {
        if (program) clReleaseProgram(program);
        return NULL;
    }
    if (clBuildProgram(program, 1, &ctx->dev.device, ctx->build_options, NULL, NULL) !=
        CL_SUCCESS) {
        clReleaseProgram(program);
        return NULL;
    }
    return program;
}

static flashcl_status program_from_source(fc_cl_context *ctx, cl_program *out) {
    cl_int err;
    cl_program program = clCreateProgramWithSource(
        ctx->context, (cl_uint)fc_softmax_program_source_count,
        (const char **)fc_softmax_program_sources, NULL, &err);
    if (err != CL_SUCCESS) return fc_cl_fail(err, "clCreateProgramWithSource(softmax)");
    err = clBuildProgram(program, 1, &ctx->dev.device, ctx->build_options, NULL, NULL);
    if (err != CL_SUCCESS) {
        flashcl_status st =
            fc_fail(FLASHCL_BUILD_FAILED,
                    "building the softmax kernels for '%s' failed: %s (%d); options: %s",
                    ctx->dev.info.name, fc_cl_error_name(err), (int)err, ctx->build_options);
        append_build_log(program, ctx->dev.device);
        clReleaseProgram(program);
        return st;
    }
    *out = program;
    return FLASHCL_SUCCESS;
}

flashcl_status fc_cl_build_programs(fc_cl_context *ctx, const char *cache_dir) {
    char device_options[sizeof ctx->build_options];
    char dir[4096];
    fc_cache_key key;
    int caching;
    double start = now_seconds();
    flashcl_status st;

    fc_cl_softmax_options(&ctx->dev, device_options, sizeof device_options);
    snprintf(ctx->build_options, sizeof ctx->build_options, "-cl-std=CL1.2 -DFLASHCL_EMBEDDED %s",
             device_options);
    fc_cache_make_key(&key, &ctx->dev, ctx->build_options, fc_softmax_program_sources,
                      fc_softmax_program_source_count);
    caching = fc_cache_dir(cache_dir, dir, sizeof dir);

    ctx->softmax_program = NULL;
    ctx->built_from_cache = 0;
    if (caching) {
        size_t size = 0;
        unsigned char *binary = fc_cache_load(dir, &key, &size);
        if (binary) {
            ctx->softmax_program = program_from_binary(ctx, binary, size);
            free(binary);
            if (ctx->softmax_program) {
                /* A binary that loads but lacks a kernel is as bad as a damaged one. */
                if (fc_cl_softmax_create_kernels(ctx) == FLASHCL_SUCCESS) {
                    ctx->built_from_cache = 1;
                } else {
                    fc_cl_softmax_release_kernels(ctx);
                    clReleaseProgram(ctx->softmax_program);
                    ctx->softmax_program = NULL;
                    fc_clear_error();
                }
            }
        }
    }
    if (!ctx->softmax_program) {
        st = program_from_source(ctx, &ctx->softmax_program);
        if (st != FLASHCL_SUCCESS) return st;
        st = fc_cl_softmax_create_kernels(ctx);
        if (st != FLASHCL_SUCCESS) {
            fc_cl_release_programs(ctx);
            return st;
        }
        if (caching) {
            size_t size = 0;
            unsigned char *binary = program_binary(ctx->softmax_program, &size);
            /* A cache that cannot be written (read-only folder, full disk) costs only time. */
            if (binary) fc_cache_store(dir, &key, binary, size);
            free(binary);
        }
    }
    ctx->build_seconds = now_seconds() - start;
    return FLASHCL_SUCCESS;
}

void fc_cl_release_programs(fc_cl_context *ctx) {
    fc_cl_softmax_release_kernels(ctx);
    if (ctx->softmax_program) clReleaseProgram(ctx->softmax_program);
    ctx->softmax_program = NULL;
}
