/* CG-like sparse matrix-vector products: each row has NNZ nonzeros in columns spread over
 * the whole vector, so every thread reads the x entries every other thread writes
 * (uniform sharing: no thread mapping helps much). */
#include "common.h"
#define NNZ 8

static double run(long n, int iters, int parallel) {
    long *col = malloc(n * NNZ * sizeof *col);
    double *val = malloc(n * NNZ * sizeof *val), *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    unsigned long h = 12345;
    for (long k = 0; k < n * NNZ; k++) {
        h = h * 6364136223846793005UL + 1442695040888963407UL;
        col[k] = (long)((h >> 33) % (unsigned long)n);
        val[k] = 1.0 / NNZ;
    }
    for (long i = 0; i < n; i++) x[i] = 1.0 + i % 7;
    for (int it = 0; it < iters; it++) {
#pragma omp parallel for schedule(static) if (parallel)
        for (long i = 0; i < n; i++) {
            double s = 0;
            for (int k = 0; k < NNZ; k++) s += val[i * NNZ + k] * x[col[i * NNZ + k]];
            y[i] = s;
        }
#pragma omp parallel for schedule(static) if (parallel)
        for (long i = 0; i < n; i++) x[i] = y[i];
    }
    double s = 0;
    for (long i = 0; i < n; i++) s += x[i];
    free(col); free(val); free(x); free(y);
    return s;
}

int main(int argc, char **argv) {
    long n = size_arg(argc, argv, 100000);
    if (skip_check()) {
        /* On stderr: a recording's caller may keep stdout for itself (reproduce --json). */
        fprintf(stderr, "cg: unchecked (result %.12g)\n", run(n, 5, 1));
        return 0;
    }
    return check("cg", run(n, 5, 1), run(n, 5, 0));
}
