/* Probe host (session 33; not built by CMake): builds attn_wgmma.cl on NVIDIA OpenCL with its
 * wgmma lines as PTX comments, patches the PTX (uncomment, .target sm_90a), rebuilds it from
 * that binary, checks the tf32 A-from-registers fragment layout, then runs attn_f32 on
 * B x H x S x 128 (BHSD, uniform [-1, 1]) against a double reference on 48 sampled rows and
 * times it (best of 5 batches of 5, profiling markers).
 * Usage: host <dir with attn_wgmma.cl> [B H S ["-D options"]] */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(x) do { cl_int e_ = (x); if (e_ != CL_SUCCESS) { printf("%s:%d %s: %d\n", __FILE__, __LINE__, #x, e_); exit(1); } } while (0)

static char *read_file(const char *p, size_t *n) {
    FILE *f = fopen(p, "rb"); if (!f) { printf("no %s\n", p); exit(1); }
    fseek(f, 0, SEEK_END); long sz = ftell(f); fseek(f, 0, SEEK_SET);
    char *b = malloc(sz + 1); if (fread(b, 1, sz, f) != (size_t)sz) exit(1); b[sz] = 0; fclose(f);
    if (n) *n = sz;
    return b;
}
static void print_log(cl_program p, cl_device_id dev, const char *what) {
    size_t ls = 0; clGetProgramBuildInfo(p, dev, CL_PROGRAM_BUILD_LOG, 0, NULL, &ls);
    char *log = malloc(ls + 1); clGetProgramBuildInfo(p, dev, CL_PROGRAM_BUILD_LOG, ls, log, NULL); log[ls] = 0;
    printf("%s log:\n%s\n", what, log); free(log);
}
static uint64_t rng = 88172645463325252ull;
static float frand(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return (float)((rng >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f; }

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : ".";
    int B = 4, H = 16, S = 4096;
    if (argc > 4) { B = atoi(argv[2]); H = atoi(argv[3]); S = atoi(argv[4]); }
    const int D = 128;
    cl_platform_id plats[8]; cl_uint np = 0; cl_device_id dev = NULL;
    CHECK(clGetPlatformIDs(8, plats, &np));
    for (cl_uint i = 0; i < np && !dev; i++) {
        char name[256]; clGetPlatformInfo(plats[i], CL_PLATFORM_NAME, sizeof name, name, NULL);
        if (strstr(name, "NVIDIA")) clGetDeviceIDs(plats[i], CL_DEVICE_TYPE_GPU, 1, &dev, NULL);
    }
    if (!dev) { printf("no NVIDIA OpenCL device\n"); return 1; }
    cl_int err; cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err); CHECK(err);
    cl_command_queue q = clCreateCommandQueue(ctx, dev, CL_QUEUE_PROFILING_ENABLE, &err); CHECK(err);
    char path[512]; snprintf(path, sizeof path, "%s/attn_wgmma.cl", dir);
    const char *src = read_file(path, NULL);
    cl_program p = clCreateProgramWithSource(ctx, 1, &src, NULL, &err); CHECK(err);
    char opts[512]; snprintf(opts, sizeof opts, "-cl-std=CL1.2 %s", argc > 5 ? argv[5] : "");
    printf("options: %s\n", opts);
    err = clBuildProgram(p, 1, &dev, opts, NULL, NULL);
    if (err != CL_SUCCESS) { print_log(p, dev, "placeholder build"); return 1; }
    size_t bs = 0; CHECK(clGetProgramInfo(p, CL_PROGRAM_BINARY_SIZES, sizeof bs, &bs, NULL));
    unsigned char *bin = malloc(bs + 1); CHECK(clGetProgramInfo(p, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL)); bin[bs] = 0;
    char *pt = malloc(bs + 64); size_t n = 0; int patched = 0;
    for (size_t i = 0; i < bs;) {
        if (!strncmp((char *)bin + i, "//FCWG", 6)) { i += 6; patched++; continue; }
        if (!strncmp((char *)bin + i, ".target sm_90", 13) && bin[i + 13] != 'a') { memcpy(pt + n, ".target sm_90a", 14); n += 14; i += 13; continue; }
        pt[n++] = (char)bin[i++];
    }
    pt[n] = 0;
    printf("patched %d wgmma lines\n", patched);
    FILE *f = fopen("/tmp/attn_patched.ptx", "w"); if (f) { fputs(pt, f); fclose(f); }
    const unsigned char *pb = (const unsigned char *)pt; cl_int bst;
    cl_program p2 = clCreateProgramWithBinary(ctx, 1, &dev, &n, &pb, &bst, &err); CHECK(err);
    err = clBuildProgram(p2, 1, &dev, "-cl-nv-verbose", NULL, NULL);
    print_log(p2, dev, "patched build");
    if (err != CL_SUCCESS) return 1;

    /* layout test */
    {
        cl_kernel k = clCreateKernel(p2, "layout_test", &err); CHECK(err);
        float a[512], b[128], out[1024], ref[1024];
        for (int i = 0; i < 512; i++) a[i] = (float)((i * 7) % 17 - 8) / 4.0f;
        for (int i = 0; i < 128; i++) b[i] = (float)((i * 5) % 13 - 6) / 4.0f;
        for (int r = 0; r < 64; r++) for (int nn = 0; nn < 16; nn++) { double s = 0; for (int kk = 0; kk < 8; kk++) s += (double)a[r * 8 + kk] * b[nn * 8 + kk]; ref[r * 16 + nn] = (float)s; }
        cl_mem ba = clCreateBuffer(ctx, CL_MEM_COPY_HOST_PTR, sizeof a, a, &err); CHECK(err);
        cl_mem bb = clCreateBuffer(ctx, CL_MEM_COPY_HOST_PTR, sizeof b, b, &err); CHECK(err);
        cl_mem bo = clCreateBuffer(ctx, CL_MEM_READ_WRITE, sizeof out, NULL, &err); CHECK(err);
        CHECK(clSetKernelArg(k, 0, sizeof ba, &ba)); CHECK(clSetKernelArg(k, 1, sizeof bb, &bb)); CHECK(clSetKernelArg(k, 2, sizeof bo, &bo));
        size_t g = 128, l = 128;
        CHECK(clEnqueueNDRangeKernel(q, k, 1, NULL, &g, &l, 0, NULL, NULL));
        CHECK(clEnqueueReadBuffer(q, bo, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL));
        int bad = 0; for (int i = 0; i < 1024; i++) if (out[i] != ref[i]) bad++;
        printf("layout test: %d wrong of 1024 (out[1]=%g ref %g)\n", bad, out[1], ref[1]);
    }
    /* attention */
    size_t elems = (size_t)B * H * S * D;
    float *hq = malloc(elems * 4), *hk = malloc(elems * 4), *hv = malloc(elems * 4), *ho = malloc(elems * 4);
    for (size_t i = 0; i < elems; i++) { hq[i] = frand(); hk[i] = frand(); hv[i] = frand(); }
    cl_mem bq = clCreateBuffer(ctx, CL_MEM_COPY_HOST_PTR, elems * 4, hq, &err); CHECK(err);
    cl_mem bk = clCreateBuffer(ctx, CL_MEM_COPY_HOST_PTR, elems * 4, hk, &err); CHECK(err);
    cl_mem bv = clCreateBuffer(ctx, CL_MEM_COPY_HOST_PTR, elems * 4, hv, &err); CHECK(err);
    cl_mem bo = clCreateBuffer(ctx, CL_MEM_READ_WRITE, elems * 4, NULL, &err); CHECK(err);
    {
    const char *kname = "attn_f32";
    cl_kernel k = clCreateKernel(p2, kname, &err); CHECK(err);
    { float nanv = NAN; CHECK(clEnqueueFillBuffer(q, bo, &nanv, 4, 0, elems * 4, 0, NULL, NULL)); }
    const float scale = 1.0f / sqrtf((float)D), scale_log2 = scale * 1.4426950408889634f;
    CHECK(clSetKernelArg(k, 0, sizeof bq, &bq)); CHECK(clSetKernelArg(k, 1, sizeof bk, &bk));
    CHECK(clSetKernelArg(k, 2, sizeof bv, &bv)); CHECK(clSetKernelArg(k, 3, sizeof bo, &bo));
    CHECK(clSetKernelArg(k, 4, sizeof S, &S)); CHECK(clSetKernelArg(k, 5, sizeof S, &S));
    CHECK(clSetKernelArg(k, 6, sizeof scale_log2, &scale_log2));
    size_t gws[2] = {(size_t)(S / 64) * 256, (size_t)B * H}, lws[2] = {256, 1};
    CHECK(clEnqueueNDRangeKernel(q, k, 2, NULL, gws, lws, 0, NULL, NULL));
    CHECK(clFinish(q));
    CHECK(clEnqueueReadBuffer(q, bo, CL_TRUE, 0, elems * 4, ho, 0, NULL, NULL));
    /* reference on sampled rows */
    double maxerr = 0; int checked = 0;
    double *sc = malloc(sizeof(double) * S);
    for (int smp = 0; smp < 48; smp++) {
        int bh = (smp * 37) % (B * H), row = (smp * 997 + 13) % S;
        if (smp < 4) row = smp * 17;
        const float *qr = hq + ((size_t)bh * S + row) * D;
        double mx = -1e300, sum = 0;
        for (int j = 0; j < S; j++) { const float *kr = hk + ((size_t)bh * S + j) * D; double s = 0; for (int d = 0; d < D; d++) s += (double)qr[d] * kr[d]; s *= scale; sc[j] = s; if (s > mx) mx = s; }
        for (int j = 0; j < S; j++) { sc[j] = exp(sc[j] - mx); sum += sc[j]; }
        for (int d = 0; d < D; d++) {
            double acc = 0; for (int j = 0; j < S; j++) acc += sc[j] * hv[((size_t)bh * S + j) * D + d];
            acc /= sum;
            double e = fabs(acc - ho[((size_t)bh * S + row) * D + d]);
            if (!(e <= maxerr)) maxerr = e;
        }
        checked++;
    }
    printf("%s B%d H%d S%d D%d: max |err| over %d sampled rows: %.3g\n", kname, B, H, S, D, checked, maxerr);
    /* timing */
    cl_event ev[2];
    double best = 1e30;
    for (int rep = 0; rep < 5; rep++) {
        CHECK(clEnqueueMarker(q, &ev[0]));
        for (int it = 0; it < 5; it++) CHECK(clEnqueueNDRangeKernel(q, k, 2, NULL, gws, lws, 0, NULL, NULL));
        CHECK(clEnqueueMarker(q, &ev[1]));
        CHECK(clFinish(q));
        cl_ulong t0, t1;
        CHECK(clGetEventProfilingInfo(ev[0], CL_PROFILING_COMMAND_END, sizeof t0, &t0, NULL));
        CHECK(clGetEventProfilingInfo(ev[1], CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL));
        double ms = (t1 - t0) * 1e-6 / 5;
        if (ms < best) best = ms;
        clReleaseEvent(ev[0]); clReleaseEvent(ev[1]);
    }
    double flops = 4.0 * B * H * (double)S * S * D;
    printf("%s B%d H%d S%d D%d: %.3f ms, %.1f TFLOP/s\n", kname, B, H, S, D, best, flops / best * 1e-9);
    }
    return 0;
}
