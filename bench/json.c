/* The --json report: every row plus what is needed to compare runs later (device, driver,
 * copy bandwidth, date, command line). Written to FILE.tmp and renamed, so a reader never
 * sees half a file and an interrupted run leaves the previous report intact. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "bench.h"

/* A small streaming writer: tracks whether a comma is due at each nesting level. */
typedef struct json_out {
    FILE *f;
    int depth;
    int need_comma[16];
} json_out;

void bench_json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (*p < 0x20)
                fprintf(f, "\\u%04x", *p);
            else
                fputc(*p, f); /* UTF-8 passes through unchanged */
        }
    }
    fputc('"', f);
}

void bench_json_number(FILE *f, double value)
{
    if (isfinite(value))
        fprintf(f, "%.6g", value);
    else
        fputs("null", f);
}

/* Starts a member (key != NULL) or an array element (key == NULL). */
static void j_key(json_out *j, const char *key)
{
    if (j->need_comma[j->depth])
        fputc(',', j->f);
    j->need_comma[j->depth] = 1;
    fprintf(j->f, "\n%*s", 2 * j->depth, "");
    if (key) {
        bench_json_string(j->f, key);
        fputs(": ", j->f);
    }
}

static void j_open(json_out *j, const char *key, char bracket)
{
    j_key(j, key);
    fputc(bracket, j->f);
    j->need_comma[++j->depth] = 0;
}

static void j_close(json_out *j, char bracket)
{
    const int had_members = j->need_comma[j->depth];
    j->depth--;
    if (had_members)
        fprintf(j->f, "\n%*s", 2 * j->depth, "");
    fputc(bracket, j->f);
}

static void j_str(json_out *j, const char *key, const char *value)
{
    j_key(j, key);
    bench_json_string(j->f, value ? value : "");
}

/* Numbers that are not finite (or not measured: negative sentinels) become null. */
static void j_num(json_out *j, const char *key, double value)
{
    j_key(j, key);
    bench_json_number(j->f, value);
}

static void j_opt(json_out *j, const char *key, double value)
{
    j_num(j, key, value >= 0 ? value : NAN);
}

static void j_int(json_out *j, const char *key, long long value)
{
    j_key(j, key);
    fprintf(j->f, "%lld", value);
}

static void j_bool(json_out *j, const char *key, int value)
{
    j_key(j, key);
    fputs(value ? "true" : "false", j->f);
}

const char *bench_row_status_word(bench_row_status s)
{
    switch (s) {
    case BENCH_ROW_OK: return "ok";
    case BENCH_ROW_FAIL: return "fail";
    case BENCH_ROW_OOM: return "out_of_memory";
    case BENCH_ROW_UNSUPPORTED: return "unsupported";
    case BENCH_ROW_ERROR: return "error";
    }
    return "?";
}

static void write_row(json_out *j, const bench_row *r)
{
    j_open(j, NULL, '{');
    j_int(j, "rows", (long long)r->shape.rows);
    j_int(j, "cols", (long long)r->shape.cols);
    j_str(j, "dtype", bench_dtype_name(r->dtype));
    j_str(j, "variant", bench_variant_name(r->variant));
    j_str(j, "status", bench_row_status_word(r->status));
    if (r->status == BENCH_ROW_OK || r->status == BENCH_ROW_FAIL) {
        j_num(j, "ms", r->ms);
        j_num(j, "gbps", r->gbps);
        j_opt(j, "pct_copy", r->pct_copy);
        j_opt(j, "copy_same_bytes_ms", r->copy_same_ms);
        j_opt(j, "pct_copy_same_bytes", r->pct_copy_same);
        j_opt(j, "naive_ms", r->naive_ms);
        j_opt(j, "speedup_vs_naive", r->speedup);
        j_num(j, "max_abs_err", r->max_abs_err);
        j_num(j, "err_over_tol", r->err_over_tol);
        j_int(j, "batch", r->batch);
        j_int(j, "reps", r->reps);
        j_int(j, "buffer_sets", r->sets);
        j_str(j, "timer", r->used_events ? "device" : "host");
    } else {
        j_str(j, "note", r->note);
    }
    j_close(j, '}');
}

static void write_device(json_out *j, const bench_device_report *d)
{
    char feats[128];
    bench_feature_words(d->info.features, feats, sizeof feats);
    j_open(j, NULL, '{');
    j_int(j, "index", d->index);
    j_str(j, "name", d->info.name);
    j_str(j, "vendor", d->info.vendor);
    j_str(j, "platform", d->info.platform);
    j_str(j, "driver", d->info.driver);
    j_str(j, "backend", bench_backend_name(d->info.backend));
    j_int(j, "compute_units", d->info.compute_units);
    j_int(j, "global_mem_bytes", (long long)d->info.global_mem_bytes);
    j_int(j, "local_mem_bytes", (long long)d->info.local_mem_bytes);
    j_int(j, "subgroup_size", d->info.subgroup_size);
    j_str(j, "features", feats);
    j_bool(j, "opened", d->opened);
    if (d->error[0])
        j_str(j, "error", d->error);
    if (d->opened) {
        j_open(j, "context_create", '{');
        j_num(j, "cold_s", d->ctx_cold_s);
        j_bool(j, "cold_from_cache", d->cold_from_cache);
        j_num(j, "cold_build_s", d->cold_build_s);
        j_num(j, "warm_s", d->ctx_warm_s);
        j_bool(j, "warm_from_cache", d->warm_from_cache);
        j_num(j, "warm_build_s", d->warm_build_s);
        j_close(j, '}');
        j_num(j, "copy_gbps", d->copy_gbps > 0 ? d->copy_gbps : NAN);
        j_int(j, "copy_buffer_bytes", (long long)d->copy_bytes);
        j_bool(j, "baselines_on_opencl_twin", d->baselines_on_opencl_twin);
    }
    j_open(j, "results", '[');
    for (int i = 0; i < d->nrows; i++)
        write_row(j, &d->rows[i]);
    j_close(j, ']');
    j_close(j, '}');
}

FILE *bench_json_open(const char *path, char *tmp, size_t tmp_size)
{
    if (snprintf(tmp, tmp_size, "%s.tmp", path) >= (int)tmp_size) {
        fprintf(stderr, "flashcl-bench: --json path too long\n");
        return NULL;
    }
    FILE *f = fopen(tmp, "w");
    if (!f)
        perror(tmp);
    return f;
}

int bench_json_close(FILE *f, const char *tmp, const char *path)
{
    const int write_failed = ferror(f);
    if (fclose(f) != 0 || write_failed) {
        fprintf(stderr, "flashcl-bench: writing %s failed\n", tmp);
        remove(tmp);
        return -1;
    }
    if (rename(tmp, path) != 0) {
        perror(path);
        remove(tmp);
        return -1;
    }
    return 0;
}

void bench_json_run_info(const bench_options *opts, char *date, size_t date_size,
                         char *cmdline, size_t cmdline_size)
{
    const time_t now = time(NULL);
    struct tm utc;
    date[0] = '\0';
    if (gmtime_r(&now, &utc))
        strftime(date, date_size, "%Y-%m-%dT%H:%M:%SZ", &utc);
    size_t used = 0;
    cmdline[0] = '\0';
    for (int i = 0; i < opts->argc && used < cmdline_size; i++)
        used += (size_t)snprintf(cmdline + used, cmdline_size - used, "%s%s", i ? " " : "",
                                 opts->argv[i]);
}

int bench_write_json(const char *path, const bench_options *opts,
                     const bench_device_report *reports, int nreports)
{
    char tmp[4096], date[32], cmdline[4096];
    json_out j;
    memset(&j, 0, sizeof j);
    j.f = bench_json_open(path, tmp, sizeof tmp);
    if (!j.f)
        return -1;
    bench_json_run_info(opts, date, sizeof date, cmdline, sizeof cmdline);

    fputc('{', j.f);
    j.depth = 1;
    j_str(&j, "tool", "flashcl-bench");
    char version[32];
    snprintf(version, sizeof version, "%d.%d.%d", FLASHCL_VERSION_MAJOR, FLASHCL_VERSION_MINOR,
             FLASHCL_VERSION_PATCH);
    j_str(&j, "flashcl_version", version);
    j_str(&j, "benchmark", opts->log ? "log_softmax" : "softmax");
    j_str(&j, "suite", opts->suite);
    j_str(&j, "date", date);
    j_str(&j, "command_line", cmdline);
    j_int(&j, "reps", opts->reps);
    j_bool(&j, "cold_fresh_cache_folder", opts->cold); /* --cold: first context compiled */
    j_bool(&j, "reuse_output", opts->reuse_output); /* outputs: one buffer, or rotated */
    j_str(&j, "input", "uniform [-8, 8], output dtype = input dtype");
    j_open(&j, "devices", '[');
    for (int i = 0; i < nreports; i++)
        write_device(&j, &reports[i]);
    j_close(&j, ']');
    fputs("\n}\n", j.f);

    return bench_json_close(j.f, tmp, path);
}
