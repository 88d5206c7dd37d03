/* profile_report.c — the categories of the op rows and the report of a profiled window
 * (kernels/profile.h): per phase, the ops by time with calls and share of the step, the phase's
 * time outside kernels, then the categories by phase. Per-step figures divide by `steps`. */
#include <stdlib.h>
#include <string.h>

#include "kernels/profile.h"

enum { MAX_ROWS = 1024 };

static int starts(const char *s, const char *prefix) { return !strncmp(s, prefix, strlen(prefix)); }

const char *prof_category(const char *name, int phase) {
    if (phase == PROF_OPTIMIZER) return "optimizer";
    if (phase == PROF_DATA) return "data";
    if (phase == PROF_LOOP) return "loop";
    if (starts(name, "gemm") || starts(name, "conv2d")) return "gemm";
    if (starts(name, "attention")) return "attention";
    if (starts(name, "unary") || starts(name, "binary") || starts(name, "dropout") || starts(name, "bias_gelu"))
        return "elementwise";
    if (starts(name, "layernorm") || starts(name, "batchnorm") || starts(name, "l2norm") || starts(name, "softmax"))
        return "normalisation";
    if (starts(name, "reduce") || starts(name, "sum_to") || starts(name, "cross_entropy")) return "reduction";
    if (starts(name, "fill") || starts(name, "copy_strided") || starts(name, "gather") || starts(name, "scatter"))
        return "layout";
    if (starts(name, "maxpool") || starts(name, "adaptive_avgpool")) return "pooling";
    if (starts(name, "adamw") || starts(name, "sgd") || starts(name, "sumsq") || starts(name, "scale") ||
        starts(name, "all_finite"))
        return "optimizer";
    return "other";
}

/* Time of a phase not spent in its kernels: the op layer, tape, arena and host work. */
static const char *host_category(int phase) {
    return phase == PROF_FORWARD || phase == PROF_BACKWARD ? "host" : prof_category("", phase);
}

static const char *const CATEGORIES[] = {"gemm", "attention", "elementwise", "normalisation", "reduction", "layout",
                                         "pooling", "optimizer", "data", "host", "other", "loop"};
enum { NCAT = sizeof CATEGORIES / sizeof CATEGORIES[0] };

static int cat_index(const char *c) {
    for (int i = 0; i < NCAT; i++)
        if (!strcmp(CATEGORIES[i], c)) return i;
    return NCAT - 2; /* other */
}

static int by_time_desc(const void *a, const void *b) {
    const prof_entry *x = a, *y = b;
    if (x->phase != y->phase) return x->phase - y->phase;
    return (x->seconds < y->seconds) - (x->seconds > y->seconds);
}

void prof_report(FILE *f, int steps, double measured, int json) {
    static prof_entry rows[MAX_ROWS];
    int n = prof_entries(rows, MAX_ROWS);
    if (n > MAX_ROWS) n = MAX_ROWS;
    qsort(rows, n, sizeof rows[0], by_time_desc);
    double per = steps > 0 ? 1e3 / steps : 1e3; /* seconds in the window -> ms per step */
    double kern[PROF_PHASES] = {0}, cat[NCAT][PROF_PHASES] = {{0}}, step = 0;
    for (int i = 0; i < n; i++) {
        kern[rows[i].phase] += rows[i].seconds;
        cat[cat_index(prof_category(rows[i].name, rows[i].phase))][rows[i].phase] += rows[i].seconds;
    }
    for (int p = 0; p < PROF_PHASES; p++) {
        double host = prof_phase_seconds(p) - kern[p];
        cat[cat_index(host_category(p))][p] += host > 0 ? host : 0;
        if (p != PROF_LOOP) step += prof_phase_seconds(p); /* the loop's own work is outside the step */
    }
    double share = step > 0 ? 100.0 / step : 0;
    if (json) {
        fprintf(f, "{\"profile\": {\"steps\": %d, \"measured_ms_per_step\": %.4f, \"profiled_ms_per_step\": %.4f, \"phases\": [",
                steps, measured * per, step * per);
        int first_phase = 1;
        for (int p = 0; p < PROF_PHASES; p++) {
            double ps = prof_phase_seconds(p);
            if (ps <= 0 && kern[p] <= 0) continue;
            fprintf(f, "%s{\"phase\": \"%s\", \"ms\": %.4f, \"kernels_ms\": %.4f, \"host_ms\": %.4f, \"share\": %.5f, \"ops\": [",
                    first_phase ? "" : ", ", prof_phase_name(p), ps * per, kern[p] * per, (ps - kern[p]) * per,
                    p == PROF_LOOP ? 0 : ps * share / 100);
            first_phase = 0;
            int first = 1;
            for (int i = 0; i < n; i++) {
                if (rows[i].phase != p) continue;
                fprintf(f, "%s{\"op\": \"%s\", \"category\": \"%s\", \"calls\": %lld, \"calls_per_step\": %.2f, \"ms\": %.4f, \"share\": %.5f}",
                        first ? "" : ", ", rows[i].name, prof_category(rows[i].name, p), (long long)rows[i].calls,
                        (double)rows[i].calls / (steps > 0 ? steps : 1), rows[i].seconds * per,
                        rows[i].seconds * share / 100);
                first = 0;
            }
            fprintf(f, "]}");
        }
        fprintf(f, "], \"categories\": [");
        int first = 1;
        for (int c = 0; c < NCAT; c++) {
            double tot = 0;
            for (int p = 0; p < PROF_PHASES; p++) tot += cat[c][p];
            if (tot <= 0) continue;
            fprintf(f, "%s{\"category\": \"%s\"", first ? "" : ", ", CATEGORIES[c]);
            for (int p = 0; p < PROF_PHASES; p++) fprintf(f, ", \"%s_ms\": %.4f", prof_phase_name(p), cat[c][p] * per);
            fprintf(f, ", \"ms\": %.4f, \"share\": %.5f}", tot * per, c == NCAT - 1 ? 0 : tot * share / 100);
            first = 0;
        }
        fprintf(f, "]}}\n");
        return;
    }
    fprintf(f, "== profile: %d step%s, %.1f ms/step in the profiled phases", steps, steps == 1 ? "" : "s", step * per);
    if (measured > 0) fprintf(f, " (measured by the caller: %.1f ms/step)", measured * per);
    fprintf(f, "\n%-10s %-30s %11s %10s %7s  %s\n", "phase", "op", "calls/step", "ms/step", "% step", "category");
    for (int p = 0; p < PROF_PHASES; p++) {
        double ps = prof_phase_seconds(p);
        if (ps <= 0 && kern[p] <= 0) continue;
        for (int i = 0; i < n; i++)
            if (rows[i].phase == p)
                fprintf(f, "%-10s %-30s %11.1f %10.3f %7.2f  %s\n", prof_phase_name(p), rows[i].name,
                        (double)rows[i].calls / (steps > 0 ? steps : 1), rows[i].seconds * per,
                        p == PROF_LOOP ? 0 : rows[i].seconds * share, prof_category(rows[i].name, p));
        fprintf(f, "%-10s %-30s %11s %10.3f %7.2f  %s\n", prof_phase_name(p), "(not in a kernel)", "",
                (ps - kern[p]) * per, p == PROF_LOOP ? 0 : (ps - kern[p]) * share, host_category(p));
        fprintf(f, "%-10s %-30s %11s %10.3f %7.2f\n", prof_phase_name(p), "= phase total", "", ps * per,
                p == PROF_LOOP ? 0 : ps * share);
    }
    fprintf(f, "== by category (ms/step)\n%-14s", "category");
    for (int p = 0; p < PROF_PHASES; p++) fprintf(f, " %10s", prof_phase_name(p));
    fprintf(f, " %10s %7s\n", "total", "% step");
    for (int c = 0; c < NCAT; c++) {
        double tot = 0;
        for (int p = 0; p < PROF_PHASES; p++) tot += cat[c][p];
        if (tot <= 0) continue;
        fprintf(f, "%-14s", CATEGORIES[c]);
        for (int p = 0; p < PROF_PHASES; p++) fprintf(f, " %10.3f", cat[c][p] * per);
        fprintf(f, " %10.3f %7.2f\n", tot * per, c == NCAT - 1 ? 0 : tot * share);
    }
    fprintf(f, "(host: time of the forward/backward phases outside kernels: op layer, tape, arena, uploads; "
               "loop: outside the step, not in %% step)\n");
}
