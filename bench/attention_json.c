/* The attention suite's --json report: every row, its baseline, and the devices. Written
 * with json.c's helpers (value writers, FILE.tmp and rename). */
#include <math.h>
#include <stdio.h>

#include "attention_suite.h"

/* A number; null when not finite or a "not measured" negative sentinel (opt). */
static void jnum(FILE *f, double v, int opt)
{
    bench_json_number(f, opt && v < 0 ? NAN : v);
}

static const char *base_word(base_state b)
{
    switch (b) {
    case BASE_NONE: return "not_measured";
    case BASE_OK: return "ok";
    case BASE_SKIPPED: return "skipped";
    case BASE_OOM: return "out_of_memory";
    case BASE_ERROR: return "error";
    }
    return "?";
}

static void write_row(FILE *f, const attn_row *r)
{
    const bench_attn_shape *s = &r->shape;
    fprintf(f, "        {\"batch\": %lld, \"heads_q\": %lld, \"heads_kv\": %lld, \"seqlen_q\": %lld, "
               "\"seqlen_k\": %lld, \"head_dim\": %lld, \"causal\": %s, \"dtype\": ",
            (long long)s->batch, (long long)s->heads_q, (long long)s->heads_kv,
            (long long)s->seqlen_q, (long long)s->seqlen_k, (long long)s->head_dim,
            s->causal ? "true" : "false");
    bench_json_string(f, bench_dtype_name(r->dtype));
    fputs(", \"status\": ", f);
    bench_json_string(f, bench_row_status_word(r->status));
    if (r->status != BENCH_ROW_OK && r->status != BENCH_ROW_FAIL) {
        fputs(", \"note\": ", f);
        bench_json_string(f, r->note);
        fputs("}", f);
        return;
    }
    fputs(",\n         \"ms\": ", f);
    jnum(f, r->ms, 0);
    fputs(", \"tflops\": ", f);
    jnum(f, r->tflops, 0);
    fputs(", \"kv_gbps\": ", f);
    jnum(f, r->gbps, 1);
    fputs(", \"max_abs_err\": ", f);
    jnum(f, r->max_abs_err, 0);
    fputs(", \"err_over_tol\": ", f);
    jnum(f, r->err_over_tol, 0);
    fputs(", \"tolerance\": ", f);
    jnum(f, attn_tolerance(r->dtype), 0);
    fprintf(f, ", \"batch_launches\": %d, \"reps\": %d, \"timer\": \"%s\",\n         "
               "\"baseline\": {\"status\": \"%s\"",
            r->batch, r->reps, r->used_events ? "device" : "host", base_word(r->base));
    if (r->base != BASE_NONE) {
        fputs(", \"score_bytes\": ", f);
        jnum(f, r->score_bytes, 0);
        fputs(", \"extra_bytes\": ", f);
        jnum(f, r->base_extra_bytes, 0);
        fprintf(f, ", \"inputs_converted_to_f32\": %s",
                r->dtype != FLASHCL_F32 ? "true" : "false");
    }
    if (r->base == BASE_OK) {
        fputs(", \"ms\": ", f);
        jnum(f, r->base_ms, 0);
        fputs(", \"err_over_tol\": ", f);
        jnum(f, r->base_err_over_tol, 0);
    }
    if (r->base_note[0]) {
        fputs(", \"note\": ", f);
        bench_json_string(f, r->base_note);
    }
    fputs("}, \"speedup_vs_baseline\": ", f);
    jnum(f, r->speedup, 1);
    fputs("}", f);
}

int attn_write_json(const char *path, const bench_options *o, const attn_device *devs, int ndev)
{
    char tmp[4096], date[32], cmdline[4096];
    FILE *f = bench_json_open(path, tmp, sizeof tmp);
    if (!f)
        return -1;
    bench_json_run_info(o, date, sizeof date, cmdline, sizeof cmdline);
    fprintf(f, "{\n  \"tool\": \"flashcl-bench\",\n  \"flashcl_version\": \"%d.%d.%d\",\n"
               "  \"benchmark\": \"attention\",\n  \"suite\": ",
            FLASHCL_VERSION_MAJOR, FLASHCL_VERSION_MINOR, FLASHCL_VERSION_PATCH);
    bench_json_string(f, o->suite);
    fputs(",\n  \"date\": ", f);
    bench_json_string(f, date);
    fputs(",\n  \"command_line\": ", f);
    bench_json_string(f, cmdline);
    fprintf(f, ",\n  \"reps\": %d,\n  \"input\": \"uniform [-1, 1], BSHD contiguous, scale "
               "1/sqrt(D)\",\n  \"flops\": \"4*B*Hq*Sq*Sk*D; causal: halved for Sq = Sk, else "
               "times the visible fraction of (query, key) pairs\",\n"
               "  \"baseline\": \"%s\",\n  \"devices\": [",
            o->reps,
#ifdef FLASHCL_BENCH_HAVE_CLBLAST
            o->baseline ? "CLBlast SgemmBatched + masked row softmax + SgemmBatched, f32 "
                          "(f16/bf16 converted, inside its time)"
                        : "off"
#else
            "none (built without CLBlast)"
#endif
    );
    for (int d = 0; d < ndev; d++) {
        const bench_device_report *rep = &devs[d].rep;
        char feats[128];
        bench_feature_words(rep->info.features, feats, sizeof feats);
        fprintf(f, "%s\n    {\"index\": %d, \"name\": ", d ? "," : "", rep->index);
        bench_json_string(f, rep->info.name);
        fputs(", \"vendor\": ", f);
        bench_json_string(f, rep->info.vendor);
        fputs(", \"platform\": ", f);
        bench_json_string(f, rep->info.platform);
        fputs(", \"driver\": ", f);
        bench_json_string(f, rep->info.driver);
        fputs(", \"backend\": ", f);
        bench_json_string(f, bench_backend_name(rep->info.backend));
        fprintf(f, ",\n     \"compute_units\": %d, \"global_mem_bytes\": %lld, "
                   "\"local_mem_bytes\": %lld, \"subgroup_size\": %d, \"features\": ",
                rep->info.compute_units, (long long)rep->info.global_mem_bytes,
                (long long)rep->info.local_mem_bytes, rep->info.subgroup_size);
        bench_json_string(f, feats);
        fprintf(f, ", \"opened\": %s", rep->opened ? "true" : "false");
        if (rep->error[0]) {
            fputs(", \"error\": ", f);
            bench_json_string(f, rep->error);
        }
        if (rep->opened) {
            fputs(",\n     \"context_create\": {\"cold_s\": ", f);
            jnum(f, rep->ctx_cold_s, 0);
            fprintf(f, ", \"cold_from_cache\": %s, \"warm_s\": ",
                    rep->cold_from_cache ? "true" : "false");
            jnum(f, rep->ctx_warm_s, 0);
            fprintf(f, ", \"warm_from_cache\": %s}", rep->warm_from_cache ? "true" : "false");
        }
        fputs(",\n     \"results\": [", f);
        for (int i = 0; i < devs[d].nrows; i++) {
            fputs(i ? ",\n" : "\n", f);
            write_row(f, &devs[d].rows[i]);
        }
        fputs(devs[d].nrows ? "\n     ]}" : "]}", f);
    }
    fputs("\n  ]\n}\n", f);
    return bench_json_close(f, tmp, path);
}
