/* optim_flat.h — the optimizer's flat buffers (private to nn/optim*.c; see optim_flat.c). */
#ifndef ENDORET_OPTIM_FLAT_H
#define ENDORET_OPTIM_FLAT_H

#include <stdint.h>

#include "nn/optim.h"

/* A run of the flat layout whose tensors share their update arguments: one entry of the
 * multi-tensor update instead of one per tensor. */
typedef struct {
    int64_t off, n;  /* elements, from the start of the group's buffers */
    float lr_scale, wd;
} optim_span;

/* One device's buffers: params, grads, and the optimizer state (m, v; SGD: m only or none). */
typedef struct {
    int device;
    int64_t numel;           /* elements, alignment padding included */
    er_storage *p, *g, *m, *v;
    er_storage *p16;         /* the parameters rounded to bf16 (optim_config.bf16_weights), or NULL */
    int count;               /* tensors in the buffers */
    int *index;              /* their o->ps indices, in layout order */
    int64_t *off;            /* their offsets */
    optim_span *spans;       /* scratch of optim_flat_spans (count entries) */
} optim_flat_group;

struct optim_flat {
    optim_flat_group group[DEV_COUNT];
    int ngroups;
};

/* Lays out o->ps (filled, without state yet) and moves every eligible parameter and its gradient
 * into its device's buffers; their state tensors (ps[i].m / .v) become views of the state buffers
 * and ps[i].flat is set. The rest keep their storage and get no state here. */
void optim_flat_build(optimizer *o);
void optim_flat_free(struct optim_flat *f);
/* The spans of G for the current arguments: runs of adjacent tensors with equal lr multiplier
 * and weight decay (ps[i].lr_scale / .wd, which callers may change after optim_new), each
 * reaching over the padding between its tensors. Returns how many (in G->spans). */
int optim_flat_spans(const optimizer *o, optim_flat_group *G);
/* The group of `device`, or NULL. */
optim_flat_group *optim_flat_group_of(const optimizer *o, int device);

#endif
