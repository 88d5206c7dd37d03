/* collectives.cu — data-parallel gradient averaging between GPUs with NCCL (built when nccl.h is
 * found: -DENDORET_NCCL). One communicator per process, one GPU per rank; the id travels over MPI
 * (train/data_parallel.c), so this file knows nothing about how the ranks were launched. The
 * all-reduces run on the backend's stream, grouped into one NCCL launch per step. */
#include <string.h>

extern "C" {
#include "nn/base/base.h"
}
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_common.h"

#ifdef ENDORET_NCCL
#include <nccl.h>

static_assert(NCCL_UNIQUE_ID_BYTES == COLLECTIVE_ID_BYTES, "kernels/backend.h: COLLECTIVE_ID_BYTES");

static ncclComm_t g_comm = NULL;

static int nccl_fail(ncclResult_t r, const char *what) {
    return er_fail(ER_RUNTIME, "%s: %s", what, ncclGetErrorString(r));
}

static int cu_collective_id(void *id) {
    ncclUniqueId u;
    ncclResult_t r = ncclGetUniqueId(&u);
    if (r != ncclSuccess) return nccl_fail(r, "ncclGetUniqueId");
    memcpy(id, &u, sizeof u);
    return ER_OK;
}

static int cu_collective_join(const void *id, int rank, int size) {
    ncclUniqueId u;
    memcpy(&u, id, sizeof u);
    ncclResult_t r = ncclCommInitRank(&g_comm, size, u, rank);
    return r == ncclSuccess ? ER_OK : nccl_fail(r, "ncclCommInitRank");
}

static int cu_allreduce_mean(float *const *bufs, const int64_t *n, int count) {
    if (!g_comm) return er_fail(ER_RUNTIME, "NCCL all-reduce before joining the group");
    ncclResult_t r = ncclGroupStart();
    for (int i = 0; r == ncclSuccess && i < count; i++)
        r = ncclAllReduce(bufs[i], bufs[i], (size_t)n[i], ncclFloat32, ncclAvg, g_comm, cuda_stream());
    ncclResult_t e = ncclGroupEnd();
    if (r != ncclSuccess) return nccl_fail(r, "ncclAllReduce");
    return e == ncclSuccess ? ER_OK : nccl_fail(e, "ncclGroupEnd");
}

void cuda_collectives_fill(er_backend *t) {
    t->collective_id = cu_collective_id;
    t->collective_join = cu_collective_join;
    t->allreduce_mean = cu_allreduce_mean;
}
#else
/* Without nccl.h the table has no collectives: data-parallel GPU runs stage gradients through the
 * host and MPI (train/data_parallel.c). */
void cuda_collectives_fill(er_backend *t) { (void)t; }
#endif
