/* 3-D 7-point Jacobi stencil, domain decomposed in z slabs: each thread shares the faces of
 * its slab with the threads above and below (neighbour sharing). The parallel sweeps are the
 * region of interest; the serial run that checks them follows unless
 * SHAREMAP_WORKLOAD_NOCHECK is set. */
#include "common.h"

static double run(long n, int iters, int parallel) {
    long plane = (n + 2) * (n + 2), total = plane * (n + 2);
    double *a = calloc(total, sizeof *a), *b = calloc(total, sizeof *b);
#pragma omp parallel for schedule(static) if (parallel)
    for (long z = 0; z < n + 2; z++)
        for (long k = 0; k < plane; k++) a[z * plane + k] = b[z * plane + k] = (double)((z * 31 + k) % 17);
    if (parallel) sharemap_roi_begin();
    for (int it = 0; it < iters; it++) {
#pragma omp parallel for schedule(static) if (parallel)
        for (long z = 1; z <= n; z++)
            for (long y = 1; y <= n; y++)
                for (long x = 1; x <= n; x++) {
                    long c = z * plane + y * (n + 2) + x;
                    b[c] = (a[c] + a[c - 1] + a[c + 1] + a[c - n - 2] + a[c + n + 2] + a[c - plane] + a[c + plane]) / 7;
                }
        double *t = a; a = b; b = t;
    }
    if (parallel) sharemap_roi_end();
    double s = 0;
    for (long k = 0; k < total; k++) s += a[k];
    free(a);
    free(b);
    return s;
}

int main(int argc, char **argv) {
    long n = size_arg(argc, argv, 48);
    double got = run(n, 5, 1);
    if (skip_check()) return 0;
    return check("stencil3d", got, run(n, 5, 0));
}
