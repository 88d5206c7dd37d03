/* process_group.c — MPI behind pg_* (nn/base/process_group.h); a single process without MPI. */
#include "nn/base/process_group.h"

#include <stdlib.h>
#include <string.h>

#include "nn/base/base.h"

#ifdef ENDORET_MPI
#include <mpi.h>
#endif

static int pg_joined, pg_me, pg_n = 1, pg_local;

/* The number of ranks a launcher started, from its environment (1 when none did). */
static int launched_ranks(void) {
    /* mpirun (Open MPI), PMI launchers (MPICH, srun --mpi=pmi2), srun itself (set per job step, not
     * in the batch script, so one process run from an allocation stays one process) */
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && atoi(v) > 1) return atoi(v);
    }
    return 1;
}

int pg_init(void) {
    if (pg_joined) return ER_OK;
    int launched = launched_ranks();
#ifdef ENDORET_MPI
    if (launched > 1) {
        MPI_Init(NULL, NULL);
        MPI_Comm_rank(MPI_COMM_WORLD, &pg_me);
        MPI_Comm_size(MPI_COMM_WORLD, &pg_n);
        MPI_Comm node; /* the ranks sharing this machine */
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, pg_me, MPI_INFO_NULL, &node);
        MPI_Comm_rank(node, &pg_local);
        MPI_Comm_free(&node);
    }
#else
    if (launched > 1)
        return er_fail(ER_INPUT, "launched as %d ranks, but this endoret was built without MPI: install "
                                 "libopenmpi-dev and rebuild (make MPI=1), or run one process", launched);
#endif
    pg_joined = 1;
    return ER_OK;
}

int pg_rank(void) { return pg_me; }
int pg_size(void) { return pg_n; }
int pg_local_rank(void) { return pg_local; }

#ifdef ENDORET_MPI
/* MPI counts are int: large buffers go in chunks. */
#define PG_CHUNK ((int64_t)1 << 28)

int pg_allreduce_sum(float *buf, int64_t n) {
    for (int64_t o = 0; pg_n > 1 && o < n; o += PG_CHUNK) {
        int c = (int)(n - o < PG_CHUNK ? n - o : PG_CHUNK);
        if (MPI_Allreduce(MPI_IN_PLACE, buf + o, c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS)
            return er_fail(ER_RUNTIME, "rank %d: MPI_Allreduce failed", pg_me);
    }
    return ER_OK;
}

int pg_allreduce_sum_f64(double *buf, int n) {
    if (pg_n > 1 && MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS)
        return er_fail(ER_RUNTIME, "rank %d: MPI_Allreduce failed", pg_me);
    return ER_OK;
}

int pg_allreduce_max(int *v, int n) {
    if (pg_n > 1 && MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_INT, MPI_MAX, MPI_COMM_WORLD) != MPI_SUCCESS)
        return er_fail(ER_RUNTIME, "rank %d: MPI_Allreduce failed", pg_me);
    return ER_OK;
}

int pg_allgather(const float *send, int64_t n, float *recv) {
    if (n > INT32_MAX) return er_fail(ER_RUNTIME, "all-gather of %lld floats per rank is too large", (long long)n);
    if (MPI_Allgather(send, (int)n, MPI_FLOAT, recv, (int)n, MPI_FLOAT, MPI_COMM_WORLD) != MPI_SUCCESS)
        return er_fail(ER_RUNTIME, "rank %d: MPI_Allgather failed", pg_me);
    return ER_OK;
}

int pg_broadcast(void *buf, size_t n, int root) {
    if (pg_n > 1 && MPI_Bcast(buf, (int)n, MPI_BYTE, root, MPI_COMM_WORLD) != MPI_SUCCESS)
        return er_fail(ER_RUNTIME, "rank %d: MPI_Bcast failed", pg_me);
    return ER_OK;
}

void pg_abort(int code) {
    if (pg_n > 1) MPI_Abort(MPI_COMM_WORLD, code);
}

const char *pg_describe(void) {
    static char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int n = 0;
    MPI_Get_library_version(v, &n); /* callable before MPI_Init */
    v[strcspn(v, "\n")] = 0;
    return v;
}

void pg_finalize(void) {
    if (pg_joined && pg_n > 1) MPI_Finalize();
    pg_joined = 0;
}
#else
/* One process: every collective is the identity. */
int pg_allreduce_sum(float *buf, int64_t n) { (void)buf; (void)n; return ER_OK; }
int pg_allreduce_sum_f64(double *buf, int n) { (void)buf; (void)n; return ER_OK; }
int pg_allreduce_max(int *v, int n) { (void)v; (void)n; return ER_OK; }
int pg_allgather(const float *send, int64_t n, float *recv) {
    for (int64_t i = 0; i < n; i++) recv[i] = send[i];
    return ER_OK;
}
int pg_broadcast(void *buf, size_t n, int root) { (void)buf; (void)n; (void)root; return ER_OK; }
void pg_abort(int code) { (void)code; }
const char *pg_describe(void) { return "not compiled (one process; make MPI=1 with libopenmpi-dev)"; }
void pg_finalize(void) { pg_joined = 0; }
#endif
