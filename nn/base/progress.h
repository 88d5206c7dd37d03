/* progress.h — one progress line for the long phases outside the training step loop (the image
 * cache decode, `embed`, `data check`, `index build`, `report`):
 *
 *   embed: 384/1000 images  52.1 images/s  ETA 0m12s
 *
 * rewritten in place on stderr, and cleared at the end (the command's own summary line follows).
 * Only for a person watching: nothing at all is written when stderr is not a terminal (a log, a
 * pipe, a file), or after progress_quiet(1) (`--json`, `train --quiet`), or with
 * ENDORET_PROGRESS=0. At most about four updates a second, so calling progress_add per item costs
 * nothing; progress_add may be called from OpenMP workers (atomic count, one printer at a time).
 * The training loop keeps its own step line (train/loop.c) and shares progress_time's format. */
#ifndef ENDORET_PROGRESS_H
#define ENDORET_PROGRESS_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *what, *unit; /* "embed", "images": static strings */
    int64_t total;
    int64_t done;            /* updated atomically */
    double t0, last;         /* start, last print (now_seconds) */
    int on, printing, shown;
} progress;

/* Process-wide: 1 = no progress lines from now on (a command given --json sets it). */
void progress_quiet(int quiet);
void progress_begin(progress *p, const char *what, const char *unit, int64_t total);
void progress_add(progress *p, int64_t n);
void progress_end(progress *p);
/* Seconds as "1m18s" / "2h05m" (the ETA of this line and of the training line). */
void progress_time(double s, char *buf, size_t n);

#endif
