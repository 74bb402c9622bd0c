/* A user's own MPI program for `nodesel run`: ITERATIONS ring exchanges of 2 MiB, then an
 * allreduce. With "hang-at-exit", rank 0 never exits after MPI_Finalize, as a program whose
 * MPI library does not match its launcher can. Build: mpicc -O2 -o ring ring.c */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    int iterations = argc > 1 ? atoi(argv[1]) : 20;
    int hang = argc > 2 && strcmp(argv[2], "hang-at-exit") == 0;
    const int n = 1 << 18;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    double *out = calloc(n, sizeof(double)), *in = calloc(n, sizeof(double));
    double sum = 0.0, total = 0.0;
    for (int it = 0; it < iterations; it++) {
        out[0] = rank + it;
        MPI_Sendrecv(out, n, MPI_DOUBLE, (rank + 1) % size, 0, in, n, MPI_DOUBLE,
                     (rank + size - 1) % size, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        sum += in[0];
    }
    MPI_Allreduce(&sum, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("ring: %d ranks, %d iterations, checksum %.0f\n", size, iterations, total);
    free(out);
    free(in);
    MPI_Finalize();
    while (hang && rank == 0)
        pause();
    return 0;
}
