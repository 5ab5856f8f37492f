/* MPI_Iallreduce + MPI_Test (sched_yield between polls) per call, float sum, in place: median of blocks. Made from ../2026-12-06-cpu-mpi-inline/mpi-allreduce.c with sed. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <sched.h>
static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return (x > y) - (x < y); }
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size; MPI_Comm_rank(MPI_COMM_WORLD, &rank); MPI_Comm_size(MPI_COMM_WORLD, &size);
    long sizes[] = {4096, 65536, 1 << 20, 16 << 20};
    for (int s = 0; s < 4; s++) {
        long n = sizes[s] / 4; float *x = malloc(sizes[s]);
        for (long i = 0; i < n; i++) x[i] = 1.0f;
        int iters = sizes[s] >= (16 << 20) ? 10 : 50;
        double blocks[5];
        for (int w = 0; w < 5; w++) { MPI_Request rq; int d = 0; MPI_Iallreduce(MPI_IN_PLACE, x, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &rq); while (!d) { MPI_Test(&rq, &d, MPI_STATUS_IGNORE); if (!d) sched_yield(); } }
        for (int b = 0; b < 5; b++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            for (int i = 0; i < iters; i++) { MPI_Request rq; int d = 0; MPI_Iallreduce(MPI_IN_PLACE, x, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &rq); while (!d) { MPI_Test(&rq, &d, MPI_STATUS_IGNORE); if (!d) sched_yield(); } }
            blocks[b] = (MPI_Wtime() - t0) / iters * 1e6;
        }
        qsort(blocks, 5, sizeof(double), cmp);
        if (rank == 0) printf("MPI_Iallreduce %d ranks %9ld B: median %10.1f us (blocks %.1f-%.1f)\n", size, sizes[s], blocks[2], blocks[0], blocks[4]);
        free(x);
    }
    MPI_Finalize();
    return 0;
}
