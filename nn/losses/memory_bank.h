/* memory_bank.h — the memory bank of a memory-bank contrastive loss (PGCon, nn/losses/pgcon_loss.h):
 * [n, dim] unit rows kept as a buffer of the training state (a named tensor without a gradient, so
 * checkpoints carry it and --resume restores it) with a host copy M that the negative rows are read
 * from and the update writes (on the CPU, the tensor's own data). The rows start at zero: row 0
 * still all zero means the bank was never filled. */
#ifndef ENDORET_MEMORY_BANK_H
#define ENDORET_MEMORY_BANK_H

#include "nn/tensor.h"

typedef struct {
    tensor *t;      /* [n, dim] on the device */
    float *M;       /* host rows */
    int n, dim, device;
} memory_bank;

/* A zero bank called `name` on `device`. */
int memory_bank_new(memory_bank *b, const char *name, int n, int dim, int device);
/* Reads the device rows back into M (after --resume); 1 when the bank holds rows (row 0 not zero). */
int memory_bank_pull(memory_bank *b);
/* Sets rows first .. first + n of the bank (M and the device) to rows [n, dim]. */
void memory_bank_set(memory_bank *b, int first, int n, const float *rows);
/* Writes rows idx[0 .. n) of M to the device tensor (a no-op on the CPU: M is its data). */
void memory_bank_push_rows(memory_bank *b, const int *idx, int n);
void memory_bank_free(memory_bank *b);

#endif
