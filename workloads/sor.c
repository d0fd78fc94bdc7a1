/* Red-black SOR on an n x n grid, rows split in bands among the threads (seed 004's
 * sorbyr): each thread owns a band; the rows at its edges are shared with its neighbours. */
#include "common.h"

static void sweep(double *g, long n, int color, int parallel) {
    const double w = 1.5;
#pragma omp parallel for schedule(static) if (parallel)
    for (long i = 1; i <= n; i++)
        for (long j = 1 + (i + color) % 2; j <= n; j += 2) {
            double *c = &g[i * (n + 2) + j];
            *c += w * ((c[-1] + c[1] + c[-(n + 2)] + c[n + 2]) / 4 - *c);
        }
}

static double run(long n, int iters, int parallel) {
    double *g = calloc((n + 2) * (n + 2), sizeof *g);
    for (long j = 0; j < n + 2; j++) g[j] = 1.0; /* the top edge is hot */
    if (parallel) sharemap_init_done();
    for (int it = 0; it < iters; it++) {
        sweep(g, n, 0, parallel);
        sweep(g, n, 1, parallel);
    }
    double s = 0;
    for (long k = 0; k < (n + 2) * (n + 2); k++) s += g[k];
    free(g);
    return s;
}

int main(int argc, char **argv) {
    long n = size_arg(argc, argv, 256);
    return check("sor", run(n, 10, 1), run(n, 10, 0));
}
