/* Helpers of the tests on tensors past 2^31 elements: see large_tensors.h. */
#include "large_tensors.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "host_ref.h"

#define LT_CHUNK ((uint64_t)1 << 26) /* elements staged on the host per buffer write */
#define LT_MAX_THREADS 32

void lt_require_gpu_memory(flashcl_context *ctx, uint64_t device_bytes, uint64_t host_bytes)
{
    flashcl_device_info info;
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    const uint64_t host = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
    if (flashcl_context_device(ctx, &info) != FLASHCL_SUCCESS) {
        fprintf(stderr, "FAIL: flashcl_context_device: %s\n", flashcl_last_error());
        exit(1);
    }
    if (!(info.features & FLASHCL_FEATURE_GPU)) {
        printf("SKIP: tensors past 2^31 elements are checked on GPUs only; %s is not one\n",
               info.name);
        exit(TU_SKIP_CODE);
    }
    if ((uint64_t)info.global_mem_bytes < device_bytes || host < host_bytes) {
        printf("SKIP: needs %.0f GB of device memory and %.0f GB of host memory; %s has %.1f GB, "
               "the host %.1f GB\n",
               device_bytes / 1e9, host_bytes / 1e9, info.name, info.global_mem_bytes / 1e9,
               host / 1e9);
        exit(TU_SKIP_CODE);
    }
}

static uint64_t mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

float lt_value(flashcl_dtype dt, uint64_t seed, uint64_t index, double lo, double hi)
{
    const double u = (double)(mix(mix(seed) ^ index) >> 11) / 9007199254740992.0; /* [0, 1) */
    float v = host_ref_round(dt, (float)(lo + (hi - lo) * u));
    if (v == 0.0f) v = host_ref_round(dt, (float)((hi - lo) / 1024.0));
    return v;
}

typedef struct fill_part {
    unsigned char *dst;
    flashcl_dtype dt;
    uint64_t seed, first, count;
    double lo, hi;
} fill_part;

static void *fill_thread(void *arg)
{
    const fill_part *p = arg;
    for (uint64_t i = 0; i < p->count; i++)
        host_ref_store(p->dt, p->dst, (size_t)i, lt_value(p->dt, p->seed, p->first + i, p->lo, p->hi));
    return NULL;
}

static int thread_count(void)
{
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > LT_MAX_THREADS ? LT_MAX_THREADS : (int)n;
}

flashcl_buffer *lt_filled_buffer(flashcl_context *ctx, flashcl_dtype dt, uint64_t elems,
                                 uint64_t seed, double lo, double hi)
{
    const size_t es = host_ref_dtype_size(dt);
    const int threads = thread_count();
    flashcl_buffer *b = NULL;
    unsigned char *stage = malloc((size_t)LT_CHUNK * es);
    assert_non_null(stage);
    assert_int_equal(flashcl_buffer_create(ctx, (size_t)elems * es, &b), FLASHCL_SUCCESS);
    for (uint64_t c = 0; c < elems; c += LT_CHUNK) {
        const uint64_t n = elems - c < LT_CHUNK ? elems - c : LT_CHUNK;
        pthread_t tid[LT_MAX_THREADS];
        fill_part parts[LT_MAX_THREADS];
        for (int t = 0; t < threads; t++) {
            const uint64_t a = n * (uint64_t)t / (uint64_t)threads,
                           e = n * (uint64_t)(t + 1) / (uint64_t)threads;
            parts[t] = (fill_part){stage + a * es, dt, seed, c + a, e - a, lo, hi};
            assert_int_equal(pthread_create(&tid[t], NULL, fill_thread, &parts[t]), 0);
        }
        for (int t = 0; t < threads; t++) pthread_join(tid[t], NULL);
        assert_int_equal(flashcl_buffer_write(b, (size_t)(c * es), stage, (size_t)(n * es)),
                         FLASHCL_SUCCESS);
    }
    free(stage);
    return b;
}

flashcl_buffer *lt_poisoned_buffer(flashcl_context *ctx, flashcl_dtype dt, uint64_t elems)
{
    const size_t es = host_ref_dtype_size(dt);
    flashcl_buffer *b = NULL;
    unsigned char *stage = malloc((size_t)LT_CHUNK * es);
    assert_non_null(stage);
    tu_poison(stage, (size_t)LT_CHUNK * es, dt);
    assert_int_equal(flashcl_buffer_create(ctx, (size_t)elems * es, &b), FLASHCL_SUCCESS);
    for (uint64_t c = 0; c < elems; c += LT_CHUNK) {
        const uint64_t n = elems - c < LT_CHUNK ? elems - c : LT_CHUNK;
        assert_int_equal(flashcl_buffer_write(b, (size_t)(c * es), stage, (size_t)(n * es)),
                         FLASHCL_SUCCESS);
    }
    free(stage);
    return b;
}

void lt_read(const flashcl_buffer *b, flashcl_dtype dt, uint64_t first, uint64_t count,
             float *out, uint64_t *poisoned)
{
    const size_t es = host_ref_dtype_size(dt);
    unsigned char *raw = malloc((size_t)count * es);
    assert_non_null(raw);
    assert_int_equal(flashcl_buffer_read(b, (size_t)(first * es), raw, (size_t)(count * es)),
                     FLASHCL_SUCCESS);
    *poisoned = 0;
    for (uint64_t i = 0; i < count; i++) {
        out[i] = host_ref_load(dt, raw, (size_t)i);
        *poisoned += (uint64_t)tu_is_poison(dt, raw, (size_t)i);
    }
    free(raw);
}
