/* process_group.h — the processes of a data-parallel run, and the only door to MPI.
 *
 * `mpirun -np N endoret train ...` (or `srun`) starts N copies; each calls pg_init once. A build
 * with MPI (make MPI=1, auto-detected: -DENDORET_MPI) joins MPI_COMM_WORLD when a launcher's
 * environment is present and stays a plain single process otherwise (no MPI_Init: a run without
 * mpirun behaves exactly as a build without MPI). A build without MPI refuses to run as one of
 * several ranks (OMPI_COMM_WORLD_SIZE, PMI_SIZE or SLURM_STEP_NUM_TASKS > 1) with one message.
 *
 * Everything here works on host memory: the loop's gradient hook (train/data_parallel.c) and the
 * differentiable all-gather (nn/ops_distributed.c) stage device data through the host (or, on GPUs,
 * use NCCL with the id from pg_broadcast). Collectives must be called in the same order on every
 * rank. A rank that dies ends the whole job (MPI's default error handler; mpirun names the rank). */
#ifndef ENDORET_BASE_PROCESS_GROUP_H
#define ENDORET_BASE_PROCESS_GROUP_H

#include <stddef.h>
#include <stdint.h>

/* Joins the process group (idempotent). ER_INPUT with one message when launched as several ranks
 * by a build without MPI. */
int pg_init(void);
/* This process's rank (0..size-1) and the number of processes (1 without a launcher). */
int pg_rank(void);
int pg_size(void);
/* This rank's index among the ranks on its machine (0 without a launcher): its GPU. */
int pg_local_rank(void);
/* In place: buf[i] = sum over ranks of buf[i] (n host floats / doubles). */
int pg_allreduce_sum(float *buf, int64_t n);
int pg_allreduce_sum_f64(double *buf, int n);
/* In place: v[i] = max over ranks of v[i]. */
int pg_allreduce_max(int *v, int n);
/* recv [size * n] = the n floats of rank 0, then rank 1, ... (equal counts). */
int pg_allgather(const float *send, int64_t n, float *recv);
/* Copies root's n bytes into buf on every rank (e.g. the NCCL unique id). */
int pg_broadcast(void *buf, size_t n, int root);
/* Ends every rank of the job with exit status `code` after this rank's message (as mpirun reports
 * it); a single process just returns. */
void pg_abort(int code);
/* "Open MPI v4.1.4, ..." (the library's own version line), or "not compiled (one process)". */
const char *pg_describe(void);
/* Leaves the group (every rank must call it on a normal exit). */
void pg_finalize(void);

#endif
