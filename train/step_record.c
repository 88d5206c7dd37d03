/* step_record.c — a training step's losses, terms, gradient norm and clip scale, read once. See step_record.h. */
#include "train/step_record.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "nn/base/base.h"

void loss_terms_set(loss_terms *t, const char *name, double value) {
    for (int i = 0; i < t->n; i++)
        if (!strcmp(t->name[i], name)) { t->value[i] = value; t->dev[i] = NULL; return; }
    if (t->n < LOSS_TERMS_MAX) {
        t->name[t->n] = name;
        t->dev[t->n] = NULL;
        t->value[t->n++] = value;
    }
}

void loss_terms_defer(loss_terms *t, const char *name, const tensor *x) {
    if (!x) return;
    loss_terms_set(t, name, NAN);
    for (int i = t->n - 1; i >= 0; i--) /* the entry just set (a full list keeps the first eight) */
        if (!strcmp(t->name[i], name)) { t->dev[i] = x; break; }
}

void loss_terms_resolve(loss_terms *t) {
    for (int i = 0; i < t->n; i++)
        if (t->dev[i]) {
            t->value[i] = tensor_item(t->dev[i]);
            t->dev[i] = NULL;
        }
}

#define REC_LOSSES 16 /* byte offset of the losses */

static size_t term_off(const step_record *r, int m, int i) {
    return REC_LOSSES + ((size_t)r->accum + (size_t)m * LOSS_TERMS_MAX + (size_t)i) * sizeof(float);
}

int step_record_init(step_record *r, int device, int accum) {
    memset(r, 0, sizeof *r);
    r->device = device;
    r->accum = accum < 1 ? 1 : accum;
    r->bytes = term_off(r, r->accum, 0);
    r->dev = backend_get(device)->alloc(r->bytes);
    if (!r->dev) return er_fail(ER_RUNTIME, "step record: cannot allocate %zu bytes on the device", r->bytes);
    r->host = xcalloc(1, r->bytes);
    return ER_OK;
}

void step_record_free(step_record *r) {
    if (r->dev) backend_get(r->device)->free(r->dev);
    free(r->host);
    memset(r, 0, sizeof *r);
}

/* A one-element fp32 tensor on the record's device: copied there, never read on the host. */
static int copyable(const step_record *r, const tensor *x) {
    return x && x->device == r->device && x->dtype == DT_F32 && tensor_numel(x) == 1;
}

/* x's value into the record at byte `off`: a device copy, or for a tensor on another device or of
 * another dtype, read now (a wait) and uploaded, so the step's one read finds it there. */
static void record_value(step_record *r, size_t off, const tensor *x) {
    if (copyable(r, x)) {
        backend_get(r->device)->copy(r->dev + off, x->data, sizeof(float));
    } else {
        float v = tensor_item(x);
        backend_get(r->device)->upload(r->dev + off, &v, sizeof v);
    }
}

void step_record_loss(step_record *r, int m, const tensor *loss) {
    record_value(r, REC_LOSSES + (size_t)m * sizeof(float), loss);
}

void step_record_terms(step_record *r, int m, const loss_terms *t) {
    for (int i = 0; i < t->n; i++)
        if (t->dev[i]) record_value(r, term_off(r, m, i), t->dev[i]);
}

const float *step_record_losses(const step_record *r) { return (const float *)(r->dev + REC_LOSSES); }
double *step_record_norm(step_record *r) { return (double *)r->dev; }
float *step_record_gscale(step_record *r) { return (float *)(r->dev + 8); }

void step_record_read(step_record *r) { backend_get(r->device)->download(r->host, r->dev, r->bytes); }

double step_record_loss_value(const step_record *r, int m) {
    float v;
    memcpy(&v, r->host + REC_LOSSES + (size_t)m * sizeof(float), sizeof v);
    return v;
}

double step_record_norm_value(const step_record *r) {
    double v;
    memcpy(&v, r->host, sizeof v);
    return v;
}

void step_record_term_values(const step_record *r, int m, loss_terms *t) {
    for (int i = 0; i < t->n; i++) {
        if (!t->dev[i]) continue;
        float v;
        memcpy(&v, r->host + term_off(r, m, i), sizeof v);
        t->value[i] = v;
        t->dev[i] = NULL;
    }
}
