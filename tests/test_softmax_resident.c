/* The residency probe of the OpenCL cooperative split row (FLASHCL_SOFTMAX_COOP_PROBE=1,
 * src/opencl/softmax_resident.c): rows of more slices than compute units, which the probe lets
 * the plan cut where it finds that many of the kernel's work-groups resident at once. Long 16-bit
 * rows (8 x 8388608 f16 held as bits, 128 elements a work-item; 2 x 3000001 bf16 at an odd
 * offset, held as floats in the shifted layout) are checked against host_ref under the suite's
 * tolerances (test_util.h), and the plan each call printed (FLASHCL_SOFTMAX_TRACE=1, read back
 * from stderr) must bound its slices by the probed count. On NVIDIA, where about 4 groups of 128
 * work-items fit a compute unit, the plan must also have used more slices than compute units;
 * and without the switch the plan must keep to one slice a compute unit.
 * The cooperative kernels need a GPU (NVIDIA or AMD with 64-bit atomics, softmax_tuning.c):
 * elsewhere (PoCL, CUDA contexts) the test prints why and skips with 77. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_util.h"

static flashcl_context *g_ctx;
static flashcl_device_info g_dev;
static int g_nvidia;

/* ---- stderr, where the trace goes ------------------------------------------------------------ */

static FILE *g_capture;
static int g_saved_stderr = -1;

/* Sends stderr to a temporary file until capture_end. */
static int capture_begin(void)
{
    fflush(stderr);
    g_capture = tmpfile();
    if (!g_capture) return 0;
    g_saved_stderr = dup(2);
    if (g_saved_stderr < 0 || dup2(fileno(g_capture), 2) < 0) return 0;
    return 1;
}

/* Restores stderr, repeats there what was caught and returns it (malloc'ed; NULL when nothing
 * was being caught). Also the teardown of every test, so that a failed assert leaves stderr. */
static char *capture_end(void)
{
    char *text;
    long n;
    if (g_saved_stderr < 0) return NULL;
    fflush(stderr);
    dup2(g_saved_stderr, 2);
    close(g_saved_stderr);
    g_saved_stderr = -1;
    fseek(g_capture, 0, SEEK_END);
    n = ftell(g_capture);
    rewind(g_capture);
    text = malloc(n > 0 ? (size_t)n + 1 : 1);
    if (text) {
        const size_t got = n > 0 ? fread(text, 1, (size_t)n, g_capture) : 0;
        text[got] = '\0';
        fputs(text, stderr);
    }
    fclose(g_capture);
    g_capture = NULL;
    return text;
}

static int teardown(void **state)
{
    (void)state;
    free(capture_end());
    return 0;
}

/* ---- the plan a call printed ---------------------------------------------------------------- */

typedef struct plan_line {
    char kind[64];           /* "split_row_cooperative", ... */
    unsigned slices;
    unsigned long long resident; /* 0: no resident count on the line (not a cooperative plan) */
    int probed;              /* the count came from the probe */
} plan_line;

/* The plan FLASHCL_SOFTMAX_TRACE printed for rows x cols in `text`; 0 when there is none. */
static int find_plan(const char *text, int64_t rows, int64_t cols, plan_line *out)
{
    char head[96];
    const char *at, *eol, *s, *r;
    snprintf(head, sizeof head, "flashcl softmax (opencl): %lld x %lld -> ", (long long)rows,
             (long long)cols);
    at = text ? strstr(text, head) : NULL;
    if (!at) return 0;
    at += strlen(head);
    eol = strchr(at, '\n');
    if (!eol) eol = at + strlen(at);
    memset(out, 0, sizeof *out);
    if (sscanf(at, "%63[a-z_]", out->kind) != 1) return 0;
    s = strstr(at, ", slices ");
    if (!s || s > eol || sscanf(s, ", slices %u", &out->slices) != 1) return 0;
    r = strstr(at, ", resident ");
    if (r && r < eol) {
        if (sscanf(r, ", resident %llu (", &out->resident) != 1 || !strchr(r, '(')) return 0;
        out->probed = strncmp(strchr(r, '(') + 1, "probed", 6) == 0;
    }
    return 1;
}

/* Runs one case through tu_softmax_check with the trace caught, and returns its plan. */
static void run_traced(const tu_softmax_case *c, uint64_t seed, plan_line *plan)
{
    char *text;
    int found;
    setenv("FLASHCL_SOFTMAX_TRACE", "1", 1);
    assert_true(capture_begin());
    tu_softmax_check(g_ctx, c, seed, NULL);
    text = capture_end();
    unsetenv("FLASHCL_SOFTMAX_TRACE");
    found = find_plan(text, c->rows, c->cols, plan);
    free(text);
    if (!found) fail_msg("%s: no plan line in the trace", tu_case_str(c));
    printf("  %s: %s, %u slices, resident %llu%s, %d compute units\n", tu_case_str(c),
           plan->kind, plan->slices, plan->resident, plan->probed ? " (probed)" : "",
           g_dev.compute_units);
}

/* What every plan with the probe on must show; on NVIDIA also the slices past the compute
 * units that the probe is for. */
static void check_probed_plan(const tu_softmax_case *c, const plan_line *plan)
{
    const int coop = strcmp(plan->kind, "split_row_cooperative") == 0;
    if (coop && plan->resident < plan->slices)
        fail_msg("%s: %u slices on %llu groups resident at once", tu_case_str(c), plan->slices,
                 plan->resident);
    if (coop && plan->slices > (unsigned)g_dev.compute_units && !plan->probed)
        fail_msg("%s: %u slices past %d compute units without the probe", tu_case_str(c),
                 plan->slices, g_dev.compute_units);
    if (g_nvidia) {
        if (!coop) fail_msg("%s: %s, not the cooperative split row", tu_case_str(c), plan->kind);
        if (plan->slices <= (unsigned)g_dev.compute_units)
            fail_msg("%s: %u slices, not more than the %d compute units", tu_case_str(c),
                     plan->slices, g_dev.compute_units);
    } else if (!coop || plan->slices <= (unsigned)g_dev.compute_units) {
        printf("  note: on this device the probe did not give this row more slices than compute "
               "units (checked on NVIDIA only)\n");
    }
}

/* 8 x 8388608 f16, held as bits 128 elements a work-item: 512 slices of 128 x 128 on any
 * device that runs groups of 128 (an H100 has 132 compute units). */
static void test_long_f16_rows_held_as_bits(void **state)
{
    tu_softmax_case c;
    plan_line plan;
    (void)state;
    memset(&c, 0, sizeof c);
    c.xt = c.yt = FLASHCL_F16;
    c.rows = 8;
    c.cols = 8388608;
    setenv("FLASHCL_SOFTMAX_COOP_PROBE", "1", 1);
    setenv("FLASHCL_SOFTMAX_BITS_ELEMS", "128", 1);
    run_traced(&c, tu_base_seed() + 1, &plan);
    unsetenv("FLASHCL_SOFTMAX_COOP_PROBE");
    unsetenv("FLASHCL_SOFTMAX_BITS_ELEMS");
    check_probed_plan(&c, &plan);
}

/* 2 x 3000001 bf16 -> f32 starting at element 1 (rows not 16-byte aligned: held as floats in
 * the shifted layout), log-softmax with a scale, special rows: 367 slices of 128 x 64 on NVIDIA.
 * Then the same without the switch, which must keep to the compute units. */
static void test_odd_offset_rows(void **state)
{
    tu_softmax_case c;
    plan_line plan;
    (void)state;
    memset(&c, 0, sizeof c);
    c.xt = FLASHCL_BF16;
    c.yt = FLASHCL_F32;
    c.rows = 2;
    c.cols = 3000001;
    c.x_off = 1;
    c.y_off = 1;
    c.scale = -1.5f;
    c.log = 1;
    c.special = 1;
    setenv("FLASHCL_SOFTMAX_COOP_PROBE", "1", 1);
    run_traced(&c, tu_base_seed() + 2, &plan);
    unsetenv("FLASHCL_SOFTMAX_COOP_PROBE");
    check_probed_plan(&c, &plan);

    run_traced(&c, tu_base_seed() + 3, &plan);
    if (strcmp(plan.kind, "split_row_cooperative") == 0 &&
        (plan.slices > (unsigned)g_dev.compute_units || plan.probed))
        fail_msg("%s without FLASHCL_SOFTMAX_COOP_PROBE: %u slices, resident %llu%s",
                 tu_case_str(&c), plan.slices, plan.resident, plan.probed ? " (probed)" : "");
}

/* Whether the context built the cooperative kernels: the launch limits the trace printed when it
 * created them ("cooperative 0": none). Exits with 1 when the line is missing. */
static int has_cooperative(const char *text)
{
    const char *at = NULL, *next = text, *coop;
    size_t wg = 0;
    while (next && (next = strstr(next, "launch limits: ")) != NULL) at = next++;
    coop = at ? strstr(at, " cooperative ") : NULL;
    if (!coop || sscanf(coop, " cooperative %zu", &wg) != 1) {
        fprintf(stderr, "FAIL: no launch limits in the trace of the context's creation\n");
        exit(1);
    }
    return wg > 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_long_f16_rows_held_as_bits, teardown),
        cmocka_unit_test_teardown(test_odd_offset_rows, teardown),
    };
    char *text;
    int failures, coop;
    /* the kernels' launch limits are traced as the context creates them; the switch, set then,
     * builds the cooperative kernels with the probe's branch (FC_RESIDENT_PROBE), and each call
     * that sets it again may probe them */
    setenv("FLASHCL_SOFTMAX_TRACE", "1", 1);
    setenv("FLASHCL_SOFTMAX_COOP_PROBE", "1", 1);
    if (!capture_begin()) {
        fprintf(stderr, "FAIL: cannot catch stderr\n");
        return 1;
    }
    g_ctx = tu_context_or_skip();
    text = capture_end();
    unsetenv("FLASHCL_SOFTMAX_TRACE");
    unsetenv("FLASHCL_SOFTMAX_COOP_PROBE");
    if (flashcl_context_device(g_ctx, &g_dev) != FLASHCL_SUCCESS) {
        fprintf(stderr, "FAIL: flashcl_context_device: %s\n", flashcl_last_error());
        return 1;
    }
    if (g_dev.backend != FLASHCL_BACKEND_OPENCL) {
        printf("SKIP: the context is on the CUDA backend; the residency probe is the OpenCL "
               "cooperative split row's (FLASHCL_BACKEND=opencl runs it)\n");
        free(text);
        flashcl_context_destroy(g_ctx);
        return TU_SKIP_CODE;
    }
    coop = has_cooperative(text);
    free(text);
    if (!coop) {
        printf("SKIP: '%s' has no cooperative split-row kernels (GPUs with 64-bit atomics, "
               "NVIDIA or AMD), whose residency the probe measures\n",
               g_dev.name);
        flashcl_context_destroy(g_ctx);
        return TU_SKIP_CODE;
    }
    g_nvidia = strstr(g_dev.vendor, "NVIDIA") != NULL;
    failures = cmocka_run_group_tests(tests, NULL, NULL);
    flashcl_context_destroy(g_ctx);
    return tu_exit_code(failures);
}
