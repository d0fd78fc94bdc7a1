/* Serial initialisation, then parallel compute: the main thread writes all the data (so
 * first touch puts every page on its node), calls sharemap_init_done(), then each thread
 * works on its own block (the first-touch trap of seed 003). */
#include "common.h"

int main(int argc, char **argv) {
    long n = size_arg(argc, argv, 1 << 20);
    double *a = malloc(n * sizeof *a);
    for (long i = 0; i < n; i++) a[i] = (double)(i % 100);
    sharemap_init_done();
    double got = 0;
    for (int it = 0; it < 3; it++) {
#pragma omp parallel for schedule(static) reduction(+ : got)
        for (long i = 0; i < n; i++) {
            a[i] = a[i] * 0.5 + 1;
            got += a[i];
        }
    }
    /* Serial replay of the same arithmetic. */
    double want = 0;
    for (int it = 0; it < 3; it++)
        for (long i = 0; i < n; i++) {
            double v = (double)(i % 100);
            for (int k = 0; k <= it; k++) v = v * 0.5 + 1;
            want += v;
        }
    free(a);
    return check("initcompute", got, want);
}
