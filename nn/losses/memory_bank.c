/* memory_bank.c — a memory bank of unit rows with its host copy (memory_bank.h). */
#include "nn/losses/memory_bank.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "nn/base/base.h"

int memory_bank_new(memory_bank *b, const char *name, int n, int dim, int device) {
    *b = (memory_bank){.t = tensor_new(2, SHAPE(n, dim)), .n = n, .dim = dim, .device = device};
    b->t->name = xstrdup(name);
    int rc = tensor_to_device(b->t, device);
    b->M = device == DEV_CPU ? b->t->data : xcalloc((size_t)n * dim, sizeof(float));
    return rc;
}

int memory_bank_pull(memory_bank *b) {
    if (b->device != DEV_CPU) tensor_to_host(b->t, b->M);
    double s = 0;
    for (int d = 0; d < b->dim; d++) s += (double)b->M[d] * b->M[d];
    return s > 0; /* unit rows: an all-zero row 0 means never filled */
}

void memory_bank_push_rows(memory_bank *b, const int *idx, int n) {
    if (b->device == DEV_CPU) return;
    const er_backend *be = backend_get(b->device);
    for (int j = 0; j < n; j++)
        be->upload(b->t->data + (size_t)idx[j] * b->dim, b->M + (size_t)idx[j] * b->dim, (size_t)b->dim * sizeof(float));
}

void memory_bank_set(memory_bank *b, int first, int n, const float *rows) {
    memcpy(b->M + (size_t)first * b->dim, rows, (size_t)n * b->dim * sizeof(float));
    if (b->device != DEV_CPU) backend_get(b->device)->upload(b->t->data + (size_t)first * b->dim, rows, (size_t)n * b->dim * sizeof(float));
}

void memory_bank_free(memory_bank *b) {
    if (b->device != DEV_CPU) free(b->M);
    tensor_free(b->t);
    *b = (memory_bank){0};
}
