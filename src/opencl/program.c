/* The programs of a context: which ones (the table below), building them concurrently (a
 * driver compiles one program per call, and a cold context compiles for a minute on some), then
 * creating their kernels and, at the end, releasing them. program_build.c builds one program,
 * from the binary cache when it can. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cl_internal.h"
#include "embedded_cl.h"
#include "../error.h"
#include "../parallel.h"
#include "../text.h"

/* One program: its sources (embedded from cl/), the part of its kernel family it holds (the
 * hooks receive it, and turn it into -D options that select the kernels), and the family's
 * hooks (cl_internal.h). */
typedef struct fc_program_spec {
    const char *name;           /* in messages and FLASHCL_VERBOSE lines */
    const char *const *sources;
    const size_t *source_count;
    int part;                   /* FC_PART_*, FC_ATTN_PART_* */
    int (*wanted)(const fc_cl_device *dev, int part); /* NULL: every device builds it */
    void (*options)(const fc_cl_device *dev, int part, char *out, size_t out_size);
    flashcl_status (*create_kernels)(fc_cl_context *ctx, cl_program program, int part);
    void (*release_kernels)(fc_cl_context *ctx, int part);
} fc_program_spec;

#define FC_SOURCES(program) fc_##program##_program_sources, &fc_##program##_program_source_count
#define FC_SOFTMAX_HOOKS                                                                        \
    NULL, fc_cl_softmax_options, fc_cl_softmax_create_kernels, fc_cl_softmax_release_kernels
#define FC_ATTENTION_HOOKS                                                                      \
    fc_cl_attention_wanted, fc_cl_attention_options, fc_cl_attention_create_kernels,          \
        fc_cl_attention_release_kernels

/* Builds start in this order (so the longest come first when there are fewer threads than
 * programs), and when several fail, the first in this order is reported. Each program is a
 * cache entry of its own (the key covers its options). */
static const fc_program_spec fc_programs[] = {
    {"attention_f32", FC_SOURCES(attention), FC_PART_F32, FC_ATTENTION_HOOKS},
    {"attention_f16", FC_SOURCES(attention), FC_PART_F16, FC_ATTENTION_HOOKS},
    {"attention_bf16", FC_SOURCES(attention), FC_PART_BF16, FC_ATTENTION_HOOKS},
    {"attention", FC_SOURCES(attention), FC_PART_ALL_DTYPES, FC_ATTENTION_HOOKS},
    {"softmax_f32", FC_SOURCES(softmax), FC_PART_F32, FC_SOFTMAX_HOOKS},
    {"softmax_f16", FC_SOURCES(softmax), FC_PART_F16, FC_SOFTMAX_HOOKS},
    {"softmax_bf16", FC_SOURCES(softmax), FC_PART_BF16, FC_SOFTMAX_HOOKS},
    {"attention_merge", FC_SOURCES(attention), FC_ATTN_PART_MERGE, FC_ATTENTION_HOOKS},
    {"attention_tiled_decode", FC_SOURCES(attention), FC_ATTN_PART_TILED_DECODE,
     FC_ATTENTION_HOOKS},
    {"attention_mma", FC_SOURCES(attention_mma), 0, fc_cl_attention_mma_wanted,
     fc_cl_attention_mma_options, fc_cl_attention_mma_create_kernels,
     fc_cl_attention_mma_release_kernels},
};
#define FC_PROGRAM_COUNT (sizeof fc_programs / sizeof fc_programs[0])
/* ctx->programs has a slot per entry: a compile error here means FC_CL_MAX_PROGRAMS is short. */
typedef char fc_program_slots_suffice[FC_PROGRAM_COUNT <= FC_CL_MAX_PROGRAMS ? 1 : -1];

#define FC_OPTIONS_SIZE 1024

/* One program to build, and what its build left. Written only by the thread that builds it
 * until the caller joins that thread. */
typedef struct fc_program_job {
    const fc_program_spec *spec;
    size_t slot;                /* its index in fc_programs and ctx->programs */
    char options[FC_OPTIONS_SIZE];
    cl_program program;
    int from_cache;
    double seconds;             /* building (or loading) it, on its thread */
    flashcl_status status;
    char *error;                /* its thread's flashcl_last_error when it failed (malloc'ed) */
} fc_program_job;

typedef struct fc_program_build {
    fc_cl_context *ctx;
    const char *cache_dir;      /* NULL: no cache */
    fc_program_job jobs[FC_PROGRAM_COUNT];
    size_t count;
} fc_program_build;

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static fc_program_source job_source(const fc_program_job *job) {
    fc_program_source src;
    src.name = job->spec->name;
    src.sources = job->spec->sources;
    src.count = *job->spec->source_count;
    src.options = job->options;
    return src;
}

/* FLASHCL_TEST_BREAK_PROGRAMS=name,...: a test hook. Those programs fail to compile (an
 * #error in cl/portability.h), so that tests/test_build.c can see how a failure on a build
 * thread reaches the caller. */
static int test_break(const char *name) {
    const char *v = getenv("FLASHCL_TEST_BREAK_PROGRAMS");
    const size_t n = strlen(name);
    while (v && *v) {
        if (!strncmp(v, name, n) && (v[n] == ',' || v[n] == '\0')) return 1;
        v = strchr(v, ',');
        if (v) v++;
    }
    return 0;
}

/* The whole option line of a program; fails rather than build from a truncated line. */
static flashcl_status job_init(fc_program_job *job, const fc_program_spec *spec, size_t slot,
                               const fc_cl_device *dev) {
    char device_options[FC_OPTIONS_SIZE - 64];
    int n;
    job->spec = spec;
    job->slot = slot;
    job->status = FLASHCL_BACKEND_ERROR; /* until it is built: skipped jobs are no successes */
    device_options[0] = '\0';
    spec->options(dev, spec->part, device_options, sizeof device_options);
    /* OpenCL C 1.2 unless the program's own options ask for a newer one (softmax on devices
     * with cl_khr_subgroups, whose functions need 2.0+): one -cl-std on the line, not two. */
    n = snprintf(job->options, sizeof job->options, "%s-DFLASHCL_EMBEDDED%s %s",
                 strstr(device_options, "-cl-std=") ? "" : "-cl-std=CL1.2 ",
                 test_break(spec->name) ? " -DFC_TEST_BREAK" : "", device_options);
    if (strlen(device_options) + 1 >= sizeof device_options || n < 0 ||
        (size_t)n >= sizeof job->options)
        return fc_fail(FLASHCL_BACKEND_ERROR, "the build options of the %s kernels exceed %d bytes",
                       spec->name, FC_OPTIONS_SIZE);
    return FLASHCL_SUCCESS;
}

/* fc_parallel_for's job: builds program i. flashcl_last_error is per thread, so a failure's
 * message is copied out for the caller to raise again. */
static int build_job(void *arg, size_t i) {
    fc_program_build *b = arg;
    fc_program_job *job = &b->jobs[i];
    const fc_program_source src = job_source(job);
    const double t0 = now_seconds();
    job->status = fc_cl_program_build(b->ctx, &src, b->cache_dir, 1, &job->program,
                                      &job->from_cache);
    job->seconds = now_seconds() - t0;
    if (job->status == FLASHCL_SUCCESS) return 0;
    {
        const char *message = flashcl_last_error();
        size_t n = strlen(message) + 1;
        job->error = malloc(n);
        if (job->error) memcpy(job->error, message, n);
    }
    return 1;
}

/* FLASHCL_BUILD_THREADS=N builds on N threads (1: one program after the other on the calling
 * thread, as flashcl did before); by default on one thread per program, but no more threads
 * than processors online: a compile keeps a processor busy. Oclgrind (21.10) crashes when two
 * threads build at once, whatever the variable says. */
static unsigned build_threads(const fc_cl_device *dev, size_t programs) {
    const char *v = getenv("FLASHCL_BUILD_THREADS");
    unsigned cpus = fc_cpu_count();
    long n = 0;
    if (strstr(dev->info.name, "Oclgrind")) return 1;
    if (v && *v) {
        char *end;
        n = strtol(v, &end, 10);
        if (*end || n < 1) n = 0; /* not a count: the default */
    }
    if (n == 0) n = cpus && programs > cpus ? (long)cpus : (long)programs;
    return n > FC_PARALLEL_MAX_THREADS ? FC_PARALLEL_MAX_THREADS : (unsigned)n;
}

/* Creates a built program's kernels (on the calling thread: kernel objects go into ctx). A
 * binary that loads but lacks a kernel is as bad as a damaged one: it is compiled again. */
static flashcl_status create_kernels(fc_program_build *b, fc_program_job *job) {
    fc_cl_context *ctx = b->ctx;
    const fc_program_spec *spec = job->spec;
    cl_program *program = &ctx->programs[job->slot];
    fc_program_source src;
    flashcl_status st = spec->create_kernels(ctx, *program, spec->part);
    double t0;
    if (st == FLASHCL_SUCCESS || !job->from_cache) return st;
    spec->release_kernels(ctx, spec->part);
    clReleaseProgram(*program);
    *program = NULL;
    fc_clear_error();
    src = job_source(job);
    t0 = now_seconds();
    st = fc_cl_program_build(ctx, &src, b->cache_dir, 0, program, &job->from_cache);
    job->seconds += now_seconds() - t0;
    return st == FLASHCL_SUCCESS ? spec->create_kernels(ctx, *program, spec->part) : st;
}

/* Hands the built programs to ctx, raises the first failure (in table order) on this thread,
 * else creates every kernel. On failure the caller releases what ctx holds. */
static flashcl_status finish_builds(fc_program_build *b) {
    size_t i;
    for (i = 0; i < b->count; i++) b->ctx->programs[b->jobs[i].slot] = b->jobs[i].program;
    /* Jobs are skipped only after a failure, and start in table order: the first job that
     * did not succeed is one that ran and failed. */
    for (i = 0; i < b->count; i++) {
        const fc_program_job *job = &b->jobs[i];
        if (job->status == FLASHCL_SUCCESS) continue;
        if (job->error) return fc_fail(job->status, "%s", job->error);
        return fc_fail(job->status, "building the %s kernels failed (its message was lost: "
                                    "out of host memory)", job->spec->name);
    }
    for (i = 0; i < b->count; i++) {
        flashcl_status st = create_kernels(b, &b->jobs[i]);
        if (st != FLASHCL_SUCCESS) return st;
    }
    return FLASHCL_SUCCESS;
}

flashcl_status fc_cl_build_programs(fc_cl_context *ctx, const char *cache_dir) {
    char dir[4096];
    fc_program_build *b = calloc(1, sizeof *b);
    const double start = now_seconds();
    /* FLASHCL_VERBOSE=1: one stderr line per program (a compile from source can take long on
     * some drivers; this says which program and whether the cache served it) and one for all. */
    const int say = fc_env_flag("FLASHCL_VERBOSE");
    flashcl_status st = FLASHCL_SUCCESS;
    unsigned threads = 0;
    double built = 0.0;
    size_t i;

    if (!b) return fc_fail(FLASHCL_OUT_OF_MEMORY, "out of host memory");
    b->ctx = ctx;
    b->cache_dir = fc_cache_dir(cache_dir, dir, sizeof dir) ? dir : NULL;
    for (i = 0; i < FC_PROGRAM_COUNT && st == FLASHCL_SUCCESS; i++) {
        const fc_program_spec *spec = &fc_programs[i];
        if (spec->wanted && !spec->wanted(&ctx->dev, spec->part)) continue;
        st = job_init(&b->jobs[b->count++], spec, i, &ctx->dev);
    }
    if (st == FLASHCL_SUCCESS) {
        /* Every job is either run or skipped (after a failure) before this returns. */
        threads = fc_parallel_for(b->count, build_threads(&ctx->dev, b->count), build_job, b);
        built = now_seconds();
        st = finish_builds(b);
    }
    ctx->built_from_cache = 1;
    for (i = 0; i < b->count; i++) {
        const fc_program_job *job = &b->jobs[i];
        if (!job->from_cache) ctx->built_from_cache = 0;
        if (say && st == FLASHCL_SUCCESS)
            fprintf(stderr, "flashcl: program '%s' for %s: %s in %.3f s\n", job->spec->name,
                    ctx->dev.info.name, job->from_cache ? "loaded from the cache" : "compiled",
                    job->seconds);
        free(job->error);
    }
    ctx->build_seconds = now_seconds() - start;
    if (say && st == FLASHCL_SUCCESS)
        fprintf(stderr,
                "flashcl: %zu programs for %s on %u thread%s: %.3f s, kernels created in %.3f s\n",
                b->count, ctx->dev.info.name, threads, threads == 1 ? "" : "s",
                ctx->build_seconds, now_seconds() - built);
    free(b);
    if (st != FLASHCL_SUCCESS) fc_cl_release_programs(ctx);
    return st;
}

void fc_cl_release_programs(fc_cl_context *ctx) {
    size_t i;
    for (i = 0; i < FC_PROGRAM_COUNT; i++) {
        if (!ctx->programs[i]) continue;
        fc_programs[i].release_kernels(ctx, fc_programs[i].part);
        clReleaseProgram(ctx->programs[i]);
        ctx->programs[i] = NULL;
    }
}
