/* Multigrid-like V-cycles over LEVELS grids, each 8x the size of the next coarser one:
 * a phase per level (sharemap_phase), and the data each thread works on changes with the
 * level. */
#include "common.h"
#define LEVELS 4

/* One Jacobi smoothing step of a level, through a scratch array of the same size. */
static void smooth(double *g, double *tmp, long n, int parallel) {
#pragma omp parallel for schedule(static) if (parallel)
    for (long i = 1; i < n - 1; i++) tmp[i] = (g[i - 1] + 2 * g[i] + g[i + 1]) / 4;
#pragma omp parallel for schedule(static) if (parallel)
    for (long i = 1; i < n - 1; i++) g[i] = tmp[i];
}

static double run(long n, int cycles, int parallel) {
    double *g[LEVELS], *tmp = malloc((n > 4 ? n : 4) * sizeof *tmp);
    long size[LEVELS];
    for (int l = 0; l < LEVELS; l++) {
        size[l] = n >> (3 * (LEVELS - 1 - l));
        if (size[l] < 4) size[l] = 4;
        g[l] = malloc(size[l] * sizeof *g[l]);
        for (long i = 0; i < size[l]; i++) g[l][i] = (double)(i % 11);
    }
    char name[32];
    for (int c = 0; c < cycles; c++)
        for (int step = 0; step < 2 * LEVELS - 1; step++) {
            int l = step < LEVELS ? LEVELS - 1 - step : step - LEVELS + 1;
            if (parallel) {
                snprintf(name, sizeof name, "level-%d", l);
                sharemap_phase(name);
            }
            smooth(g[l], tmp, size[l], parallel);
        }
    double s = 0;
    for (int l = 0; l < LEVELS; l++) {
        for (long i = 0; i < size[l]; i++) s += g[l][i];
        free(g[l]);
    }
    free(tmp);
    return s;
}

int main(int argc, char **argv) {
    long n = size_arg(argc, argv, 1 << 18);
    return check("multigrid", run(n, 2, 1), run(n, 2, 0));
}
