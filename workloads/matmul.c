/* Blocked matrix multiplication C = A x B: threads own blocks of rows of C and all read B. */
#include "common.h"
#define BS 32

static double run(long n, int parallel) {
    double *a = malloc(n * n * sizeof *a), *b = malloc(n * n * sizeof *b), *c = calloc(n * n, sizeof *c);
    for (long k = 0; k < n * n; k++) {
        a[k] = (double)(k % 13) / 13;
        b[k] = (double)(k % 7) / 7;
    }
#pragma omp parallel for schedule(static) if (parallel)
    for (long ii = 0; ii < n; ii += BS)
        for (long kk = 0; kk < n; kk += BS)
            for (long jj = 0; jj < n; jj += BS)
                for (long i = ii; i < ii + BS && i < n; i++)
                    for (long k = kk; k < kk + BS && k < n; k++)
                        for (long j = jj; j < jj + BS && j < n; j++) c[i * n + j] += a[i * n + k] * b[k * n + j];
    double s = 0;
    for (long k = 0; k < n * n; k++) s += c[k];
    free(a); free(b); free(c);
    return s;
}

int main(int argc, char **argv) {
    long n = size_arg(argc, argv, 128);
    return check("matmul", run(n, 1), run(n, 0));
}
