/* Builds the kernel programs for a device: from the binary cache when a verified binary is
 * there, else from the embedded sources (and then stores the binary). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cl_internal.h"
#include "embedded_cl.h"
#include "../error.h"
#include "../text.h"

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

/* What it takes to build one program: its sources, its options, its kernels. */
typedef struct fc_program_spec {
    const char *name;
    const char *const *sources;
    const size_t *source_count;
    void (*options)(const fc_cl_device *dev, char *out, size_t out_size);
    flashcl_status (*create_kernels)(fc_cl_context *ctx);
    void (*release_kernels)(fc_cl_context *ctx);
    int (*wanted)(const fc_cl_device *dev); /* NULL: every device */
    size_t program_field;       /* offsetof(fc_cl_context, <name>_program) */
    size_t options_field;       /* offsetof(fc_cl_context, <options buffer>) */
} fc_program_spec;

static const fc_program_spec fc_programs[] = {
    {"softmax", fc_softmax_program_sources, &fc_softmax_program_source_count,
     fc_cl_softmax_options, fc_cl_softmax_create_kernels, fc_cl_softmax_release_kernels, NULL,
     offsetof(fc_cl_context, softmax_program), offsetof(fc_cl_context, build_options)},
    {"attention", fc_attention_program_sources, &fc_attention_program_source_count,
     fc_cl_attention_options, fc_cl_attention_create_kernels, fc_cl_attention_release_kernels,
     NULL, offsetof(fc_cl_context, attention_program), offsetof(fc_cl_context, attention_options)},
    {"attention_mma", fc_attention_mma_program_sources, &fc_attention_mma_program_source_count,
     fc_cl_attention_mma_options, fc_cl_attention_mma_create_kernels,
     fc_cl_attention_mma_release_kernels, fc_attn_mma_wanted,
     offsetof(fc_cl_context, attention_mma_program),
     offsetof(fc_cl_context, attention_mma_options)},
};
#define FC_PROGRAM_COUNT (sizeof fc_programs / sizeof fc_programs[0])
#define FC_OPTIONS_SIZE sizeof(((fc_cl_context *)0)->build_options)

static cl_program *program_slot(fc_cl_context *ctx, const fc_program_spec *spec) {
    return (cl_program *)(void *)((char *)ctx + spec->program_field);
}

static char *options_slot(fc_cl_context *ctx, const fc_program_spec *spec) {
    return (char *)ctx + spec->options_field;
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
static flashcl_status program_from_source(fc_cl_context *ctx, const fc_program_spec *spec,
                                          const char *options, cl_program *out,
                                          cl_program *cacheable) {
    cl_int err;
    char what[96];
    cl_program executable;
    cl_program program = clCreateProgramWithSource(ctx->context, (cl_uint)*spec->source_count,
                                                   (const char **)spec->sources, NULL, &err);
    snprintf(what, sizeof what, "clCreateProgramWithSource(%s)", spec->name);
    if (err != CL_SUCCESS) return fc_cl_fail(err, what);
    executable = make_executable(ctx, program, options, 1, &err);
    if (!executable) {
        flashcl_status st =
            fc_fail(FLASHCL_BUILD_FAILED,
                    "building the %s kernels for '%s' failed: %s (%d); options: %s",
                    spec->name, ctx->dev.info.name, fc_cl_error_name(err), (int)err, options);
        append_build_log(program, ctx->dev.device);
        clReleaseProgram(program);
        return st;
    }
    *out = executable;
    *cacheable = program; /* the same program when built in one step: one reference each */
    if (executable == program) clRetainProgram(program);
    return FLASHCL_SUCCESS;
}

/* Builds one program (cache first), creates its kernels; *from_cache says which way. */
static flashcl_status build_program(fc_cl_context *ctx, const fc_program_spec *spec,
                                    const char *dir, int caching, int *from_cache) {
    /* Room for the common prefix below, so the whole line always fits FC_OPTIONS_SIZE. */
    char device_options[FC_OPTIONS_SIZE - 40];
    char *options = options_slot(ctx, spec);
    cl_program *program = program_slot(ctx, spec);
    fc_cache_key key;
    cl_program cacheable = NULL;
    flashcl_status st;

    spec->options(&ctx->dev, device_options, sizeof device_options);
    snprintf(options, FC_OPTIONS_SIZE, "-cl-std=CL1.2 -DFLASHCL_EMBEDDED %s", device_options);
    fc_cache_make_key(&key, &ctx->dev, options, spec->sources, *spec->source_count);
    *from_cache = 0;
    *program = NULL;
    if (caching) {
        size_t size = 0;
        unsigned char *binary = fc_cache_load(dir, &key, &size);
        if (binary) {
            *program = program_from_binary(ctx, options, binary, size);
            free(binary);
        }
        if (*program) {
            /* A binary that loads but lacks a kernel is as bad as a damaged one. */
            if (spec->create_kernels(ctx) == FLASHCL_SUCCESS) {
                *from_cache = 1;
                return FLASHCL_SUCCESS;
            }
            spec->release_kernels(ctx);
            clReleaseProgram(*program);
            *program = NULL;
            fc_clear_error();
        }
    }
    st = program_from_source(ctx, spec, options, program, &cacheable);
    if (st != FLASHCL_SUCCESS) return st;
    st = spec->create_kernels(ctx);
    if (st == FLASHCL_SUCCESS && caching) {
        size_t size = 0;
        unsigned char *binary = program_binary(cacheable, &size);
        /* A cache that cannot be written (read-only folder, full disk) costs only time. */
        if (binary) fc_cache_store(dir, &key, binary, size);
        free(binary);
    }
    clReleaseProgram(cacheable);
    return st;
}

flashcl_status fc_cl_build_programs(fc_cl_context *ctx, const char *cache_dir) {
    char dir[4096];
    size_t i;
    double start = now_seconds();
    int caching = fc_cache_dir(cache_dir, dir, sizeof dir);

    /* FLASHCL_VERBOSE=1: one stderr line per program (a compile from source can take long on
     * some drivers; this says which program and whether the cache served it). */
    const int say = fc_env_flag("FLASHCL_VERBOSE");

    ctx->built_from_cache = 1;
    for (i = 0; i < FC_PROGRAM_COUNT; i++) {
        int from_cache = 0;
        const double t0 = now_seconds();
        flashcl_status st;
        if (fc_programs[i].wanted && !fc_programs[i].wanted(&ctx->dev)) continue;
        st = build_program(ctx, &fc_programs[i], dir, caching, &from_cache);
        if (st != FLASHCL_SUCCESS) {
            fc_cl_release_programs(ctx);
            return st;
        }
        if (!from_cache) ctx->built_from_cache = 0;
        if (say)
            fprintf(stderr, "flashcl: program '%s' for %s: %s in %.3f s\n", fc_programs[i].name,
                    ctx->dev.info.name, from_cache ? "loaded from the cache" : "compiled",
                    now_seconds() - t0);
    }
    ctx->build_seconds = now_seconds() - start;
    return FLASHCL_SUCCESS;
}

void fc_cl_release_programs(fc_cl_context *ctx) {
    size_t i;
    for (i = 0; i < FC_PROGRAM_COUNT; i++) {
        cl_program *program = program_slot(ctx, &fc_programs[i]);
        fc_programs[i].release_kernels(ctx);
        if (*program) clReleaseProgram(*program);
        *program = NULL;
    }
}
