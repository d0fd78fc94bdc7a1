/* A histogram with shared counters: every thread increments one shared array of BINS
 * counters (true sharing, updated in a critical section), and its own tally in an array of
 * adjacent per-thread counters that sit in one cache line (false sharing). The counters are
 * updated with plain loads and stores: clang's instrumentation does not see atomic
 * read-modify-write instructions. */
#include <omp.h>
#include "common.h"
#define BINS 64

static long bins[BINS];
static volatile long tally[64]; /* per thread, adjacent: false sharing */

int main(int argc, char **argv) {
    long n = size_arg(argc, argv, 200000);
#pragma omp parallel
    {
        int t = omp_get_thread_num() % 64;
#pragma omp for schedule(static)
        for (long i = 0; i < n; i++) {
            unsigned long h = (unsigned long)i * 2654435761UL;
#pragma omp critical
            bins[(h >> 7) % BINS]++;
            tally[t]++;
        }
    }
    long total = 0, counted = 0;
    for (int b = 0; b < BINS; b++) total += bins[b];
    for (int t = 0; t < 64; t++) counted += tally[t];
    return check("histogram", (double)total + counted, 2.0 * n);
}
