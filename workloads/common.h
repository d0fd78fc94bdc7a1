/* Shared helpers of sharemap's workload suite: the size argument and the self-check. */
#ifndef WORKLOAD_COMMON_H
#define WORKLOAD_COMMON_H
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sharemap.h>

/* The size: the first argument, or `dflt`. */
static inline long size_arg(int argc, char **argv, long dflt) {
    long n = argc > 1 ? atol(argv[1]) : dflt;
    if (n <= 0) {
        fprintf(stderr, "usage: %s [SIZE]  (a positive size)\n", argv[0]);
        exit(2);
    }
    return n;
}

/* Whether to leave out the serial reference run the check needs: SHAREMAP_WORKLOAD_NOCHECK=1
 * (a recording of the parallel part alone, as the NAS benchmarks are, which have no serial
 * reference run in them). */
static inline int skip_check(void) {
    const char *s = getenv("SHAREMAP_WORKLOAD_NOCHECK");
    return s != NULL && s[0] == '1';
}

/* Prints the verdict and returns the exit status: 0 when `got` matches `want`. */
static inline int check(const char *name, double got, double want) {
    double err = fabs(got - want) / (fabs(want) > 1 ? fabs(want) : 1);
    int ok = err < 1e-9;
    printf("%s: %s (result %.12g, expected %.12g)\n", name, ok ? "ok" : "FAILED", got, want);
    return ok ? 0 : 1;
}
#endif
