/* progress.c — a rate-limited progress line on a terminal's stderr (progress.h). */
#include "nn/base/progress.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nn/base/base.h"

static int quiet_all;

void progress_quiet(int quiet) { quiet_all = quiet; }

void progress_time(double s, char *buf, size_t n) {
    if (!isfinite(s) || s < 0) s = 0;
    int h = (int)(s / 3600), m = (int)(fmod(s, 3600) / 60), sec = (int)fmod(s, 60);
    if (h) snprintf(buf, n, "%dh%02dm", h, m);
    else snprintf(buf, n, "%dm%02ds", m, sec);
}

void progress_begin(progress *p, const char *what, const char *unit, int64_t total) {
    memset(p, 0, sizeof *p);
    p->what = what;
    p->unit = unit;
    p->total = total;
    const char *env = getenv("ENDORET_PROGRESS");
    p->on = !quiet_all && total > 0 && isatty(2) && !(env && !strcmp(env, "0"));
    p->t0 = now_seconds();
}

static void print_line(progress *p, int64_t done, double now) {
    double el = now - p->t0, rate = el > 0 ? done / el : 0;
    char eta[32];
    progress_time(rate > 0 ? (p->total - done) / rate : 0, eta, sizeof eta);
    fprintf(stderr, "\r%s: %lld/%lld %s  %.1f %s/s  ETA %s\033[K", p->what, (long long)done, (long long)p->total,
            p->unit, rate, p->unit, eta);
    fflush(stderr);
    p->shown = 1;
}

void progress_add(progress *p, int64_t n) {
    if (!p->on) return;
    int64_t done = __atomic_add_fetch(&p->done, n, __ATOMIC_RELAXED);
    double now = now_seconds();
    /* the first item, then at most every 0.25 s; one thread prints, the others go on */
    if ((p->shown && now - p->last < 0.25 && done < p->total) || __atomic_exchange_n(&p->printing, 1, __ATOMIC_ACQUIRE))
        return;
    p->last = now;
    print_line(p, done, now);
    __atomic_store_n(&p->printing, 0, __ATOMIC_RELEASE);
}

void progress_end(progress *p) {
    if (p->on && p->shown) {
        fputs("\r\033[K", stderr); /* the command's summary line takes its place */
        fflush(stderr);
    }
    p->on = 0;
}
