/* step_record.h — what a training step reports, kept on the device until the step's end.
 *
 * Reading a loss on the host (tensor_item) makes the host wait for the device; a step that did so
 * for its loss, each logged term and the gradient norm stopped the host up to eight times, each
 * time draining the queue of launched kernels. The loop instead copies each micro-batch's loss and
 * device-side terms into one buffer on the device (a device-to-device copy each: no wait), lets the
 * optimizer's step guard (optim_guard) write the gradient norm and clip coefficient beside them, and
 * reads the whole buffer once, after the update: one wait a step, which is also the step's device
 * check.
 *
 * Layout (bytes, on the run's device): [0, 8) the gradient norm (double); [8, 12) the guard's gradient
 * scale (float; NaN: the update was skipped); from 16, accum floats (the micro-batches' losses, what
 * the guard checks), then accum * LOSS_TERMS_MAX floats (term i of micro-batch m at m * LOSS_TERMS_MAX
 * + i). */
#ifndef ENDORET_STEP_RECORD_H
#define ENDORET_STEP_RECORD_H

#include "train/loop.h"

typedef struct {
    int device, accum;
    size_t bytes;
    unsigned char *dev;  /* the buffer on the device */
    unsigned char *host; /* its copy after step_record_read */
} step_record;

int step_record_init(step_record *r, int device, int accum);
void step_record_free(step_record *r);

/* Copy micro-batch m's loss (a one-element tensor) into the record: on the device when it is fp32 on
 * r->device, else read now on the host (a wait) and uploaded. */
void step_record_loss(step_record *r, int m, const tensor *loss);
/* Copy micro-batch m's deferred terms (loss_terms_defer) into the record. */
void step_record_terms(step_record *r, int m, const loss_terms *t);

/* Device addresses for optim_guard. */
const float *step_record_losses(const step_record *r);
double *step_record_norm(step_record *r);
float *step_record_gscale(step_record *r);

/* One download of the whole record (the host waits here); then the host-side values: */
void step_record_read(step_record *r);
double step_record_loss_value(const step_record *r, int m);
double step_record_norm_value(const step_record *r);
/* Fill t's deferred terms of micro-batch m with their values. */
void step_record_term_values(const step_record *r, int m, loss_terms *t);

#endif
