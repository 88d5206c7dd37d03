/* profile.h — a per-op wall-time profile of the op table, the ggml way: while it is on,
 * backend_get returns a wrapper table (generated from kernels/ops.def) whose entries time the
 * real kernel and count the call; no kernel knows. Off (the default), backend_get returns the real
 * table and nothing is timed: the only cost is one flag test per backend_get.
 *
 * The time is split by phase: the caller (or autograd / the optimizer) says which part of a step
 * runs. Each phase's wall clock is kept too, so a phase's time not spent in kernels (the op layer,
 * the tape, arena and host work) is its remainder. On a GPU every timed call synchronises the
 * device before and after (times are real kernel times, the step gets slower).
 * Ops must be issued from one thread (as the op layer does). */
#ifndef ENDORET_PROFILE_H
#define ENDORET_PROFILE_H

#include <stdint.h>
#include <stdio.h>

#include "kernels/backend.h"

enum {
    PROF_FORWARD = 0, /* the default phase of a profiled window */
    PROF_BACKWARD,    /* set by autograd's backward */
    PROF_OPTIMIZER,   /* set by nn/optim.c: clipping, the update, zeroing gradients */
    PROF_DATA,        /* loading + augmentation (set by the objectives that do it per step) */
    PROF_LOOP,        /* outside the step: logging, evaluation, checkpoints (train's loop) */
    PROF_PHASES
};

/* Read by backend_get; use prof_on(). */
extern int prof_enabled;
static inline int prof_on(void) { return prof_enabled; }

/* Clear every count, turn profiling on, phase PROF_FORWARD, phase clock running. */
void prof_start(void);
/* Close the current phase and turn profiling off; the counts stay for the report. */
void prof_stop(void);
/* Switch the phase (nothing when off); returns the previous one, for restoring. */
int prof_phase(int phase);
/* The timing table around `inner` (one per device, made once; its storage and device services
 * are inner's own). backend_get calls this while profiling is on. */
const er_backend *prof_wrap(const er_backend *inner);

/* One row of the profile: an op (or an op with its selector: "unary.gelu", "binary.add") in a
 * phase. */
typedef struct {
    const char *name;
    int phase;
    int64_t calls;
    double seconds;
} prof_entry;

/* The rows with at least one call, at most cap of them, phase by phase, ops in ops.def order;
 * returns how many exist (may exceed cap). */
int prof_entries(prof_entry *out, int cap);
/* Wall clock spent in `phase` between prof_start and prof_stop. */
double prof_phase_seconds(int phase);
const char *prof_phase_name(int phase);

/* kernels/profile_report.c: the category of an op row ("gemm", "attention", "elementwise", ...),
 * and the report of the window. `measured` is the caller's own wall time of the steps it profiled
 * (0: not known), `steps` how many; a text table, or one JSON line (`json`). */
const char *prof_category(const char *name, int phase);
void prof_report(FILE *f, int steps, double measured, int json);

#endif
