/* flashcl-bench: measures flashcl against the device's own ceiling (a copy kernel) and
 * against what a user would otherwise write (a naive three-pass softmax).
 * This file is the command line: parse, validate (bad usage exits 2), dispatch. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "bench.h"

static const bench_shape default_shapes[] = {{4096, 1024}, {1024, 4096}, {64, 65536}};
/* From many short rows to a few very long ones: each variant of the library gets its turn. */
static const bench_shape full_shapes[] = {{32768, 128},   {16384, 1024}, {4096, 4096},
                                          {4096, 32768},  {1024, 131072}, {64, 1048576},
                                          {8, 8388608}};

static void usage(FILE *f)
{
    fputs(
        "usage: flashcl-bench [COMMAND] [OPTIONS]\n"
        "\n"
        "commands:\n"
        "  (none)       the short softmax suite on the default device (as `softmax`)\n"
        "  devices      list every device flashcl can use\n"
        "  softmax      time softmax against the device's copy bandwidth and a naive\n"
        "               three-pass baseline, and check it against the host reference\n"
        "  attention    time fused attention (flashcl_attention_forward) against an unfused\n"
        "               CLBlast GEMM + softmax + GEMM baseline; see `attention --help`\n"
        "\n"
        "softmax options:\n"
        "  -d, --device N|NAME  device index (see `devices`) or a name substring;\n"
        "                       default: the best device (FLASHCL_DEVICE overrides);\n"
        "                       a GPU both backends reach is listed twice and a name\n"
        "                       takes its first entry (CUDA); FLASHCL_BACKEND=opencl\n"
        "                       (or cuda) makes it take that backend's entry\n"
        "  -a, --all-devices    every device, one after the other\n"
        "  -t, --dtype LIST     comma list of f32, f16, bf16 (input and output dtype);\n"
        "                       default f32,f16; with --suite full all three\n"
        "  -s, --shapes LIST    comma list of ROWSxCOLS, e.g. 4096x1024,8x8388608\n"
        "  -S, --suite NAME     default: 4096x1024 1024x4096 64x65536\n"
        "                       full:    32768x128 16384x1024 4096x4096 4096x32768\n"
        "                                1024x131072 64x1048576 8x8388608\n"
        "  -l, --log            log-softmax instead of softmax\n"
        "  -V, --variant LIST   comma list of auto, rows, chunked, split, or all\n"
        "                       (default auto: the library chooses)\n"
        "  -r, --reps N         timed batches per row; the median is reported (default 7)\n"
        "      --no-naive       skip the naive baseline\n"
        "      --reuse-output   every call writes the same output buffer, as torch.softmax's\n"
        "                       caching allocator hands back the block the last call freed\n"
        "                       (default: inputs and outputs rotate through buffer sets\n"
        "                       larger than the cache; torch_softmax.py does the same)\n"
        "      --cold           create the first context against a fresh cache folder, so\n"
        "                       it always compiles (slow through PoCL: minutes)\n"
        "  -j, --json FILE      also write results and device metadata as JSON\n"
        "  -q, --quiet          no progress line on stderr\n"
        "  -h, --help           this text\n"
        "      --version        print the flashcl version\n"
        "\n"
        "Each row: median ms per call; GB/s counting rows*cols*(in+out) bytes once; that as\n"
        "% of the copy kernel's GB/s; the naive kernels' ms and the speedup over them; the\n"
        "largest |y - ref| over ~8 sampled rows and its ratio to the tolerance (> 1 is FAIL).\n"
        "\n"
        "exit status: 0 success; 1 a row failed its check or something failed; 2 bad usage\n",
        f);
}

static void usage_attention(FILE *f)
{
    fputs(
        "usage: flashcl-bench attention [OPTIONS]\n"
        "\n"
        "Times flashcl_attention_forward (BSHD, inputs uniform [-1, 1]) and the unfused\n"
        "baseline a user would otherwise write on the same queue: CLBlast SGEMM S = scale*Q*K^T\n"
        "per (batch, head), a masked row softmax kernel, CLBlast SGEMM O = P*V.\n"
        "\n"
        "  -d, --device N|NAME  device index (see `devices`) or a name substring\n"
        "  -a, --all-devices    every device, one after the other\n"
        "  -t, --dtype LIST     comma list of f32, f16, bf16; default f32,f16; full: all three\n"
        "  -S, --suite NAME     default: B1 H4 S256 D64 (non-causal and causal), B1 H8 S512\n"
        "                                D128 causal, decode B1 Hq32 Hkv4 Sk2048 D128\n"
        "                       full:    D 64,128 x S 512..16384 (B = 16384/S, H = 2048/D),\n"
        "                                non-causal and causal, plus decode B 1,8 x\n"
        "                                Sk 4096,16384,65536,131072 (Hq32 Hkv4 D128)\n"
        "  -s, --shapes LIST    comma list of BxHxSxD (self-attention) or\n"
        "                       BxHQxHKVxSQxSKxD, e.g. 1x4x256x64,1x32x4x1x2048x128\n"
        "      --causal         causal masking on every shape (bottom-right aligned)\n"
        "  -r, --reps N         timed batches per row; the median is reported (default 7)\n"
        "      --no-baseline    skip the unfused CLBlast baseline\n"
        "      --cold           create the first context against a fresh cache folder\n"
        "  -j, --json FILE      also write results and device metadata as JSON\n"
        "  -q, --quiet          no progress line on stderr\n"
        "\n"
        "Each row: median ms per call; TFLOP/s = 4*B*Hq*Sq*Sk*D / t (halved when causal);\n"
        "for decode (Sq = 1) GB/s of the K and V bytes; the baseline's ms, the size of its\n"
        "f32 score buffer and flashcl's speedup over it; the largest |o - ref| over ~8 sampled\n"
        "(b, h, row) outputs against host_ref and its ratio to the tolerance (> 1 is FAIL).\n",
        f);
}

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "flashcl-bench: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(see flashcl-bench --help)\n");
    return BENCH_EXIT_USAGE;
}

/* Calls one(item, len) for each item of a comma list (without modifying it); empty items
 * are errors. */
typedef int (*item_fn)(bench_options *o, const char *item, size_t len);

static int for_each_item(bench_options *o, const char *list, item_fn one)
{
    const char *p = list;
    if (!*p)
        return -1;
    for (;;) {
        const char *comma = strchr(p, ',');
        const size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len == 0 || one(o, p, len) != 0)
            return -1;
        if (!comma)
            return 0;
        p = comma + 1;
    }
}

static int item_is(const char *item, size_t len, const char *word)
{
    return strlen(word) == len && strncasecmp(item, word, len) == 0;
}

static int add_dtype(bench_options *o, const char *item, size_t len)
{
    flashcl_dtype d;
    if (item_is(item, len, "f32") || item_is(item, len, "fp32") || item_is(item, len, "float"))
        d = FLASHCL_F32;
    else if (item_is(item, len, "f16") || item_is(item, len, "fp16") || item_is(item, len, "half"))
        d = FLASHCL_F16;
    else if (item_is(item, len, "bf16") || item_is(item, len, "bfloat16"))
        d = FLASHCL_BF16;
    else
        return -1;
    for (int i = 0; i < o->ndtypes; i++)
        if (o->dtypes[i] == d)
            return 0;
    o->dtypes[o->ndtypes++] = d;
    return 0;
}

static int add_variant_value(bench_options *o, flashcl_softmax_variant v)
{
    for (int i = 0; i < o->nvariants; i++)
        if (o->variants[i] == v)
            return 0;
    o->variants[o->nvariants++] = v;
    return 0;
}

static int add_variant(bench_options *o, const char *item, size_t len)
{
    if (item_is(item, len, "auto"))
        return add_variant_value(o, FLASHCL_SOFTMAX_AUTO);
    if (item_is(item, len, "rows"))
        return add_variant_value(o, FLASHCL_SOFTMAX_ROW_IN_REGISTERS);
    if (item_is(item, len, "chunked"))
        return add_variant_value(o, FLASHCL_SOFTMAX_ONLINE_CHUNKED);
    if (item_is(item, len, "split"))
        return add_variant_value(o, FLASHCL_SOFTMAX_SPLIT_ROW);
    if (item_is(item, len, "all")) {
        add_variant_value(o, FLASHCL_SOFTMAX_AUTO);
        add_variant_value(o, FLASHCL_SOFTMAX_ROW_IN_REGISTERS);
        add_variant_value(o, FLASHCL_SOFTMAX_ONLINE_CHUNKED);
        return add_variant_value(o, FLASHCL_SOFTMAX_SPLIT_ROW);
    }
    return -1;
}

/* A positive decimal integer of at most 2^31 - 1, the whole of [s, s+len). */
static int parse_dim(const char *s, size_t len, int64_t *out)
{
    if (len == 0 || len > 10)
        return -1;
    int64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    if (v < 1 || v > INT32_MAX)
        return -1;
    *out = v;
    return 0;
}

static int add_shape(bench_options *o, const char *item, size_t len)
{
    size_t x = 0;
    while (x < len && item[x] != 'x' && item[x] != 'X')
        x++;
    bench_shape s;
    if (x == len || parse_dim(item, x, &s.rows) || parse_dim(item + x + 1, len - x - 1, &s.cols))
        return -1;
    if (s.rows * s.cols > ((int64_t)1 << 36)) /* 256 GiB of f32 each way: surely a typo */
        return -1;
    if (o->nshapes == BENCH_MAX_SHAPES)
        return -1;
    o->shapes[o->nshapes++] = s;
    return 0;
}

/* An attention shape: BxHxSxD or BxHQxHKVxSQxSKxD. */
static int add_attn_shape(bench_options *o, const char *item, size_t len)
{
    int64_t v[6];
    int n = 0;
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && item[i] != 'x' && item[i] != 'X')
            continue;
        if (n == 6 || parse_dim(item + start, i - start, &v[n]))
            return -1;
        n++;
        start = i + 1;
    }
    bench_attn_shape s;
    memset(&s, 0, sizeof s);
    if (n == 4) {
        s.batch = v[0];
        s.heads_q = s.heads_kv = v[1];
        s.seqlen_q = s.seqlen_k = v[2];
        s.head_dim = v[3];
    } else if (n == 6) {
        s.batch = v[0];
        s.heads_q = v[1];
        s.heads_kv = v[2];
        s.seqlen_q = v[3];
        s.seqlen_k = v[4];
        s.head_dim = v[5];
    } else {
        return -1;
    }
    if (s.heads_q % s.heads_kv != 0 || s.head_dim > 1024)
        return -1;
    /* 2^36 elements in any tensor (256 GiB of f32): surely a typo. */
    const int64_t lim = (int64_t)1 << 36;
    if (s.batch * s.seqlen_q > lim / (s.heads_q * s.head_dim) ||
        s.batch * s.seqlen_k > lim / (s.heads_kv * s.head_dim))
        return -1;
    if (o->nattn_shapes == BENCH_MAX_SHAPES)
        return -1;
    o->attn_shapes[o->nattn_shapes++] = s;
    return 0;
}

enum { OPT_NO_NAIVE = 1000, OPT_VERSION, OPT_COLD, OPT_CAUSAL, OPT_NO_BASELINE,
       OPT_REUSE_OUTPUT };

int main(int argc, char **argv)
{
    bench_options o;
    memset(&o, 0, sizeof o);
    o.reps = 7;
    o.naive = 1;
    o.baseline = 1;
    o.suite = "default";
    o.argc = argc;
    o.argv = argv;

    /* The command is the first argument when it is not an option. */
    const char *cmd = "softmax";
    int first = 1;
    if (argc > 1 && argv[1][0] != '-') {
        cmd = argv[1];
        first = 2;
    }
    const int attention = !strcmp(cmd, "attention");
    if (!strcmp(cmd, "help")) {
        usage(stdout);
        return BENCH_EXIT_OK;
    }
    if (strcmp(cmd, "softmax") && strcmp(cmd, "devices") && !attention)
        return usage_error("unknown command '%s'", cmd);

    /* getopt_long over [argv[0], options...]; it may permute this copy, not argv. */
    const int sub_argc = argc - first + 1;
    char **sub = malloc(((size_t)sub_argc + 1) * sizeof *sub);
    if (!sub)
        return BENCH_EXIT_FAIL;
    sub[0] = argv[0];
    for (int i = first; i < argc; i++)
        sub[i - first + 1] = argv[i];
    sub[sub_argc] = NULL;

    static const struct option longopts[] = {
        {"device", required_argument, NULL, 'd'},  {"all-devices", no_argument, NULL, 'a'},
        {"dtype", required_argument, NULL, 't'},   {"shapes", required_argument, NULL, 's'},
        {"suite", required_argument, NULL, 'S'},   {"log", no_argument, NULL, 'l'},
        {"variant", required_argument, NULL, 'V'}, {"reps", required_argument, NULL, 'r'},
        {"json", required_argument, NULL, 'j'},    {"quiet", no_argument, NULL, 'q'},
        {"no-naive", no_argument, NULL, OPT_NO_NAIVE}, {"cold", no_argument, NULL, OPT_COLD},
        {"version", no_argument, NULL, OPT_VERSION}, {"help", no_argument, NULL, 'h'},
        {"causal", no_argument, NULL, OPT_CAUSAL},
        {"no-baseline", no_argument, NULL, OPT_NO_BASELINE},
        {"reuse-output", no_argument, NULL, OPT_REUSE_OUTPUT},
        {NULL, 0, NULL, 0}};
    int c, softmax_opts = 0, full = 0, rc = BENCH_EXIT_OK;
    const char *softmax_only = NULL, *attention_only = NULL; /* an option of the other command */
    opterr = 0; /* our own messages, naming the option */
    optind = 1;
    while (rc == BENCH_EXIT_OK &&
           (c = getopt_long(sub_argc, sub, ":d:at:s:S:lV:r:j:qh", longopts, NULL)) != -1) {
        if (c != 'h' && c != OPT_VERSION && c != '?' && c != ':')
            softmax_opts++;
        switch (c) {
        case 'd': o.device = optarg; break;
        case 'a': o.all_devices = 1; break;
        case 't':
            o.ndtypes = 0;
            if (for_each_item(&o, optarg, add_dtype))
                rc = usage_error("bad --dtype '%s': expected a comma list of f32, f16, bf16",
                                 optarg);
            break;
        case 's':
            o.nshapes = 0;
            o.nattn_shapes = 0;
            if (attention) {
                if (for_each_item(&o, optarg, add_attn_shape))
                    rc = usage_error("bad --shapes '%s': expected BxHxSxD or BxHQxHKVxSQxSKxD "
                                     "items with positive sizes, HQ a multiple of HKV, D <= "
                                     "1024, e.g. 1x4x256x64,1x32x4x1x2048x128",
                                     optarg);
                o.nshapes = o.nattn_shapes;
            } else if (for_each_item(&o, optarg, add_shape))
                rc = usage_error("bad --shapes '%s': expected ROWSxCOLS[,ROWSxCOLS...] with "
                                 "positive sizes, e.g. 4096x1024",
                                 optarg);
            break;
        case 'S':
            if (!strcmp(optarg, "full") || !strcmp(optarg, "default"))
                full = !strcmp(optarg, "full");
            else
                rc = usage_error("bad --suite '%s': expected default or full", optarg);
            o.suite = full ? "full" : "default";
            break;
        case 'l': o.log = 1; softmax_only = "--log"; break;
        case 'V':
            softmax_only = "--variant";
            o.nvariants = 0;
            if (for_each_item(&o, optarg, add_variant))
                rc = usage_error("bad --variant '%s': expected auto, rows, chunked, split or all",
                                 optarg);
            break;
        case 'r': {
            char *end;
            errno = 0;
            const long v = strtol(optarg, &end, 10);
            if (!*optarg || *end || errno || v < 1 || v > 1000)
                rc = usage_error("bad --reps '%s': expected an integer from 1 to 1000", optarg);
            o.reps = (int)v;
            break;
        }
        case 'j': o.json_path = optarg; break;
        case 'q': o.quiet = 1; break;
        case OPT_NO_NAIVE: o.naive = 0; softmax_only = "--no-naive"; break;
        case OPT_CAUSAL: o.causal = 1; attention_only = "--causal"; break;
        case OPT_NO_BASELINE: o.baseline = 0; attention_only = "--no-baseline"; break;
        case OPT_COLD: o.cold = 1; break;
        case OPT_REUSE_OUTPUT: o.reuse_output = 1; softmax_only = "--reuse-output"; break;
        case OPT_VERSION:
            printf("flashcl-bench %d.%d.%d\n", FLASHCL_VERSION_MAJOR, FLASHCL_VERSION_MINOR,
                   FLASHCL_VERSION_PATCH);
            free(sub);
            return BENCH_EXIT_OK;
        case 'h':
            if (attention)
                usage_attention(stdout);
            else
                usage(stdout);
            free(sub);
            return BENCH_EXIT_OK;
        case ':':
            rc = usage_error("option '%s' needs a value", sub[optind - 1]);
            break;
        default: { /* '?': unknown option; optopt is 0 for an unknown long one */
            char shortopt[3] = {'-', (char)optopt, '\0'};
            rc = usage_error("unknown option '%s'", optopt ? shortopt : sub[optind - 1]);
        }
        }
    }
    if (rc == BENCH_EXIT_OK && optind < sub_argc)
        rc = usage_error("unexpected argument '%s'", sub[optind]);
    if (rc == BENCH_EXIT_OK && !strcmp(cmd, "devices") && softmax_opts)
        rc = usage_error("%s takes no options besides --help", "devices");
    if (rc == BENCH_EXIT_OK && o.all_devices && o.device)
        rc = usage_error("%s", "--device and --all-devices exclude each other");
    if (rc == BENCH_EXIT_OK && attention && softmax_only)
        rc = usage_error("%s is a softmax option", softmax_only);
    if (rc == BENCH_EXIT_OK && !attention && attention_only)
        rc = usage_error("%s is an attention option", attention_only);
    if (rc == BENCH_EXIT_OK && o.json_path && !*o.json_path)
        rc = usage_error("%s", "--json needs a file name");
    free(sub);
    if (rc != BENCH_EXIT_OK)
        return rc;

    if (!strcmp(cmd, "devices"))
        return bench_cmd_devices();

    /* Defaults from the suite where the command line left them open. */
    if (o.nshapes > 0)
        o.suite = "custom";
    if (attention) {
        if (o.nattn_shapes == 0)
            bench_attention_suite(&o, full);
        if (o.ndtypes == 0) {
            o.dtypes[o.ndtypes++] = FLASHCL_F32;
            o.dtypes[o.ndtypes++] = FLASHCL_F16;
            if (full)
                o.dtypes[o.ndtypes++] = FLASHCL_BF16;
        }
        return bench_cmd_attention(&o);
    }
    if (o.nshapes == 0) {
        const bench_shape *s = full ? full_shapes : default_shapes;
        const int n = full ? (int)(sizeof full_shapes / sizeof *s)
                           : (int)(sizeof default_shapes / sizeof *s);
        for (int i = 0; i < n; i++)
            o.shapes[o.nshapes++] = s[i];
    }
    if (o.ndtypes == 0) {
        o.dtypes[o.ndtypes++] = FLASHCL_F32;
        o.dtypes[o.ndtypes++] = FLASHCL_F16;
        if (full)
            o.dtypes[o.ndtypes++] = FLASHCL_BF16;
    }
    if (o.nvariants == 0)
        o.variants[o.nvariants++] = FLASHCL_SOFTMAX_AUTO;
    return bench_cmd_softmax(&o);
}
