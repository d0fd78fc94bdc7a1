/* STREAM-like triad, a[i] = b[i] + s * c[i], over three arrays each thread first touches
 * in its static share: no sharing, all bandwidth. The timed loop is the region of interest;
 * the check after it reads every array serially (the only sharing the program has). */
#include "common.h"

int main(int argc, char **argv) {
    long n = size_arg(argc, argv, 1L << 21);
    const int iters = 4;
    const double s = 3.0;
    double *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *c = malloc(n * sizeof *c);
    if (!a || !b || !c) {
        fprintf(stderr, "stream: cannot allocate 3 x %ld doubles\n", n);
        return 2;
    }
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) {
        a[i] = 0;
        b[i] = (double)(i % 7);
        c[i] = (double)(i % 5);
    }
    sharemap_roi_begin();
    for (int it = 0; it < iters; it++) {
#pragma omp parallel for schedule(static)
        for (long i = 0; i < n; i++) a[i] = b[i] + s * c[i];
    }
    sharemap_roi_end();
    if (skip_check()) return 0;
    double got = 0, want = 0;
    for (long i = 0; i < n; i++) {
        got += a[i];
        want += (double)(i % 7) + s * (double)(i % 5);
    }
    free(a);
    free(b);
    free(c);
    return check("stream", got, want);
}
