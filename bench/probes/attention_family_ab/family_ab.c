/* A/B of OpenCL attention kernel families in one process: the families named on the command line
 * take turns call by call (FLASHCL_ATTENTION_FAMILY is read by every call's plan), so that a
 * shared machine's drift falls on each alike. On a 2-core guest whose flashcl-bench timings moved
 * by 2x between runs, a family named twice read within 1-5 % of itself (min of 9 rounds), while
 * the families differed by 1.6x (bench/results/2026-12-06-session36.md). A family may be named
 * more than once (an A/A check). Not built by CMake; from the project root, after building:
 *   cc -O2 -Iinclude bench/probes/attention_family_ab/family_ab.c -Lbuild -lflashcl \
 *      -Wl,-rpath,$PWD/build -o family_ab
 *   ./family_ab B HQ HKV SQ SK D f32|f16|bf16 ROUNDS decode_vector rows_vector
 * Inputs (BSHD, contiguous): f32 and bf16 uniform in [-1, 1], f16 of magnitude [0.125, 0.25) with
 * random signs (bit patterns, no conversion needed). Each round times 5 calls and a finish, after
 * two rounds of warm-up; prints min and median ms per call for each family. */
#include <flashcl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <time.h>

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e3 + t.tv_nsec / 1e6; }
static int cmp(const void *a, const void *b) { double x = *(double *)a, y = *(double *)b; return x < y ? -1 : x > y; }
static flashcl_dtype dt_of(const char *s) { return !strcmp(s, "f32") ? FLASHCL_F32 : !strcmp(s, "f16") ? FLASHCL_F16 : FLASHCL_BF16; }
static size_t esz(flashcl_dtype d) { return d == FLASHCL_F32 ? 4 : 2; }
static flashcl_buffer *rnd(flashcl_context *c, flashcl_dtype d, size_t n) {
    flashcl_buffer *b; void *h = malloc(n * esz(d)); uint32_t s = 12345;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u; float f = ((s >> 8) / 16777216.0f) * 2 - 1;
        if (d == FLASHCL_F32) ((float *)h)[i] = f;
        else { uint32_t u; memcpy(&u, &f, 4); ((uint16_t *)h)[i] = d == FLASHCL_BF16 ? (uint16_t)(u >> 16) : (uint16_t)(0x3000 + ((s >> 4) & 0x3ff) + ((s & 1) << 15)); }
    }
    if (flashcl_buffer_create(c, n * esz(d), &b) || flashcl_buffer_write(b, 0, h, n * esz(d))) { fprintf(stderr, "buf: %s\n", flashcl_last_error()); exit(1); }
    free(h); return b;
}
static flashcl_tensor t4(flashcl_buffer *b, flashcl_dtype d, int64_t B, int64_t S, int64_t H, int64_t D) {
    flashcl_tensor t; memset(&t, 0, sizeof t); t.buffer = b; t.dtype = d; t.ndim = 4;
    t.shape[0] = B; t.shape[1] = S; t.shape[2] = H; t.shape[3] = D;
    t.strides[3] = 1; t.strides[2] = D; t.strides[1] = H * D; t.strides[0] = S * H * D; return t;
}
int main(int argc, char **argv) {
    flashcl_context *c;
    if (flashcl_context_create(NULL, &c)) { fprintf(stderr, "ctx: %s\n", flashcl_last_error()); return 1; }
    int64_t B = atoll(argv[1]), HQ = atoll(argv[2]), HKV = atoll(argv[3]), SQ = atoll(argv[4]), SK = atoll(argv[5]), D = atoll(argv[6]);
    flashcl_dtype d = dt_of(argv[7]); int rounds = atoi(argv[8]); int nf = argc - 9;
    flashcl_buffer *q = rnd(c, d, B * SQ * HQ * D), *k = rnd(c, d, B * SK * HKV * D), *v = rnd(c, d, B * SK * HKV * D), *o = rnd(c, d, B * SQ * HQ * D);
    flashcl_tensor tq = t4(q, d, B, SQ, HQ, D), tk = t4(k, d, B, SK, HKV, D), tv = t4(v, d, B, SK, HKV, D), to = t4(o, d, B, SQ, HQ, D);
    double *t = calloc((size_t)nf * rounds, sizeof(double));
    for (int r = -2; r < rounds; r++)
        for (int f = 0; f < nf; f++) {
            setenv("FLASHCL_ATTENTION_FAMILY", argv[9 + f], 1);
            double t0 = now();
            for (int i = 0; i < 5; i++) if (flashcl_attention_forward(c, NULL, &tq, &tk, &tv, &to, NULL)) { fprintf(stderr, "%s\n", flashcl_last_error()); return 1; }
            flashcl_finish(c);
            if (r >= 0) t[f * rounds + r] = (now() - t0) / 5;
        }
    for (int f = 0; f < nf; f++) { qsort(t + f * rounds, rounds, sizeof(double), cmp); printf("  %-14s min %.3f median %.3f ms\n", argv[9 + f], t[f * rounds], t[f * rounds + rounds / 2]); }
    return 0;
}
