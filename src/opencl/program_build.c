/* Builds one program for a context's device: from the binary cache when a verified binary is
 * there, else from the embedded sources (and then stores the binary). Touches nothing of the
 * context but its (read-only) device and cl_context, so program.c runs several at once on
 * different threads; failures are recorded in this thread's flashcl_last_error. */
#include <stdio.h>
#include <stdlib.h>

#include "cl_internal.h"
#include "../error.h"

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

/* PoCL compiles every kernel of a program to machine code when asked for an executable's
 * binary (minutes for our programs on a small CPU), but hands out a compiled object (LLVM
 * bitcode) at once. So there flashcl compiles and links separately and caches the object; a
 * warm start then only links. Elsewhere the executable binary is cached. */
static int caches_objects(const fc_cl_context *ctx) { return ctx->dev.vendor == FC_VENDOR_POCL; }

/* Turns a freshly created (source or binary) program into an executable one: either
 * clBuildProgram, or clCompileProgram (sources only) then clLinkProgram. On failure *program
 * is released and NULL, and *err holds the error. */
static cl_program make_executable(fc_cl_context *ctx, cl_program program, const char *options,
                                  int from_source, cl_int *err) {
    cl_program linked;
    if (!caches_objects(ctx)) {
        *err = clBuildProgram(program, 1, &ctx->dev.device, options, NULL, NULL);
        return *err == CL_SUCCESS ? program : NULL;
    }
    if (from_source) {
        *err = clCompileProgram(program, 1, &ctx->dev.device, options, 0, NULL, NULL, NULL, NULL);
        if (*err != CL_SUCCESS) return NULL;
    }
    linked = clLinkProgram(ctx->context, 1, &ctx->dev.device, "", 1, &program, NULL, NULL, err);
    return *err == CL_SUCCESS ? linked : NULL;
}

static cl_program program_from_binary(fc_cl_context *ctx, const char *options,
                                      const unsigned char *binary, size_t size) {
    cl_int err, binary_status = CL_SUCCESS;
    cl_program executable;
    cl_program program = clCreateProgramWithBinary(ctx->context, 1, &ctx->dev.device, &size,
                                                   &binary, &binary_status, &err);
    if (err != CL_SUCCESS || binary_status != CL_SUCCESS) {
        if (program) clReleaseProgram(program);
        return NULL;
    }
    executable = make_executable(ctx, program, options, 0, &err);
    if (executable != program) clReleaseProgram(program);
    return executable;
}

/* Builds from the embedded sources. *cacheable receives the program whose binary goes to the
 * cache (the executable, or the compiled object when caches_objects), retained; release it. */
static flashcl_status program_from_source(fc_cl_context *ctx, const fc_program_source *src,
                                          cl_program *out, cl_program *cacheable) {
    cl_int err;
    char what[96];
    cl_program executable;
    cl_program program = clCreateProgramWithSource(ctx->context, (cl_uint)src->count,
                                                   (const char **)src->sources, NULL, &err);
    snprintf(what, sizeof what, "clCreateProgramWithSource(%s)", src->name);
    if (err != CL_SUCCESS) return fc_cl_fail(err, what);
    executable = make_executable(ctx, program, src->options, 1, &err);
    if (!executable) {
        flashcl_status st =
            fc_fail(FLASHCL_BUILD_FAILED,
                    "building the %s kernels for '%s' failed: %s (%d); options: %s", src->name,
                    ctx->dev.info.name, fc_cl_error_name(err), (int)err, src->options);
        append_build_log(program, ctx->dev.device);
        clReleaseProgram(program);
        return st;
    }
    *out = executable;
    *cacheable = program; /* the same program when built in one step: one reference each */
    if (executable == program) clRetainProgram(program);
    return FLASHCL_SUCCESS;
}

flashcl_status fc_cl_program_build(fc_cl_context *ctx, const fc_program_source *src,
                                   const char *cache_dir, int load_cached, cl_program *out,
                                   int *from_cache) {
    fc_cache_key key;
    cl_program cacheable = NULL;
    flashcl_status st;

    *out = NULL;
    *from_cache = 0;
    if (cache_dir) fc_cache_make_key(&key, &ctx->dev, src->options, src->sources, src->count);
    if (cache_dir && load_cached) {
        size_t size = 0;
        unsigned char *binary = fc_cache_load(cache_dir, &key, &size);
        if (binary) {
            *out = program_from_binary(ctx, src->options, binary, size);
            free(binary);
        }
        if (*out) {
            *from_cache = 1;
            return FLASHCL_SUCCESS;
        }
    }
    st = program_from_source(ctx, src, out, &cacheable);
    if (st != FLASHCL_SUCCESS) return st;
    if (cache_dir) {
        size_t size = 0;
        unsigned char *binary = program_binary(cacheable, &size);
        /* A cache that cannot be written (read-only folder, full disk) costs only time. */
        if (binary) fc_cache_store(cache_dir, &key, binary, size);
        free(binary);
    }
    clReleaseProgram(cacheable);
    return FLASHCL_SUCCESS;
}
