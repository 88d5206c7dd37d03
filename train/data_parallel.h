/* data_parallel.h — the loop's data-parallel hooks (train/loop.h) on the process group
 * (nn/base/process_group.h): `mpirun -np N endoret train ...` averages every step's gradients and
 * logged loss over the N ranks. The objective shards the global batch itself (pg_rank, pg_size). */
#ifndef ENDORET_TRAIN_DATA_PARALLEL_H
#define ENDORET_TRAIN_DATA_PARALLEL_H

#include "train/loop.h"

/* Sets lc's rank, world_size, allreduce and average for a run of several ranks whose parameters
 * live on `device` (on a GPU with NCCL: joins the NCCL group, its id sent from rank 0 over MPI);
 * with one process leaves them zero/NULL (outputs unchanged). ER_OK or an er_fail code. */
int dp_attach(train_loop_config *lc, int device);
/* `--device cuda` (no index) on several ranks: "cuda:<rank on this machine>", one GPU per rank. */
void dp_pick_device(char **device);
/* Frees the staging buffer after the run. */
void dp_detach(void);

#endif
