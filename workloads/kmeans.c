/* k-means on n 2-D points: threads assign their share of the points to the nearest of K
 * shared centres, which every thread reads and a reduction rewrites each iteration. */
#include "common.h"
#define K 8

static double run(long n, int iters, int parallel) {
    double *px = malloc(n * sizeof *px), *py = malloc(n * sizeof *py);
    double cx[K], cy[K];
    unsigned long h = 99;
    for (long i = 0; i < n; i++) {
        h = h * 6364136223846793005UL + 1442695040888963407UL;
        px[i] = (double)(h >> 40) / (1 << 24) + (i % K);
        py[i] = (double)((h >> 16) & 0xffffff) / (1 << 24) + (i % K) * 0.5;
    }
    for (int k = 0; k < K; k++) cx[k] = px[k], cy[k] = py[k];
    for (int it = 0; it < iters; it++) {
        double sx[K] = {0}, sy[K] = {0};
        long cnt[K] = {0};
#pragma omp parallel for schedule(static) reduction(+ : sx[:K], sy[:K], cnt[:K]) if (parallel)
        for (long i = 0; i < n; i++) {
            int best = 0;
            double bd = 1e300;
            for (int k = 0; k < K; k++) {
                double d = (px[i] - cx[k]) * (px[i] - cx[k]) + (py[i] - cy[k]) * (py[i] - cy[k]);
                if (d < bd) bd = d, best = k;
            }
            sx[best] += px[i];
            sy[best] += py[i];
            cnt[best]++;
        }
        for (int k = 0; k < K; k++)
            if (cnt[k]) cx[k] = sx[k] / cnt[k], cy[k] = sy[k] / cnt[k];
    }
    double s = 0;
    for (int k = 0; k < K; k++) s += cx[k] + cy[k];
    free(px); free(py);
    return s;
}

int main(int argc, char **argv) {
    long n = size_arg(argc, argv, 100000);
    /* Sums in a different order round differently: compare to 1e-9 relative. */
    return check("kmeans", run(n, 5, 1), run(n, 5, 0));
}
