/* The driver shared by sharemap's STM programs: options, threads started together, a
 * timed run, per-thread counters and one result line.
 *
 *   -t THREADS  -d DURATION_MS  -s SEED  (and each program's own options)
 *
 * Transactions use TinySTM's API (stm.h): TX_BEGIN/TX_END around TX_LOAD/TX_STORE. A local
 * variable a transaction assigns must be assigned after TX_BEGIN (an abort jumps back to
 * it), so each body starts from its inputs alone.
 */
#ifndef STM_BENCH_H
#define STM_BENCH_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <stm.h>
#include <mod_mem.h>
#include <mod_stats.h>

#define TX_BEGIN(ro)                                                   \
  do {                                                                 \
    stm_tx_attr_t tx_attr_ = {{.id = 0, .read_only = (ro)}};           \
    sigjmp_buf *tx_env_ = stm_start(tx_attr_);                         \
    if (tx_env_ != NULL) sigsetjmp(*tx_env_, 0);                       \
  } while (0)
#define TX_END() stm_commit()
#define TX_LOAD(addr) stm_load((volatile stm_word_t *)(void *)(addr))
#define TX_STORE(addr, value) stm_store((volatile stm_word_t *)(void *)(addr), (stm_word_t)(value))

struct options {
  int threads;
  int duration_ms;
  unsigned long seed;
  /* program-specific */
  long size, range, update, accounts, read_all;
};

static void usage(const char *prog, const char *extra) {
  fprintf(stderr, "usage: %s [-t threads] [-d duration_ms] [-s seed] %s\n", prog, extra);
  exit(2);
}

static long option_value(const char *prog, const char *extra, const char *text) {
  char *end;
  long v = strtol(text, &end, 10);
  if (*text == '\0' || *end != '\0' || v < 0) usage(prog, extra);
  return v;
}

/* xorshift64*: each thread its own stream. */
static inline unsigned long next_random(unsigned long *s) {
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 2685821657736338717UL;
}

static atomic_int bench_stop;
static pthread_barrier_t bench_barrier;

struct worker {
  pthread_t thread;
  int id;
  unsigned long seed;
  unsigned long ops, updates_done, added, removed;
  unsigned long commits, aborts;
  void *shared;
  int stmap_thread, stmap_cpu;
  /* The one CPU the thread may run on at the end (sched_getaffinity), or -1. */
  int affinity;
};

typedef void (*work_fn)(struct worker *w);

struct run_args {
  struct worker *w;
  work_fn fn;
};

static void *bench_thread(void *arg) {
  struct run_args *a = arg;
  stm_init_thread();
  pthread_barrier_wait(&bench_barrier);
  a->fn(a->w);
  stm_get_stats("nb_commits", &a->w->commits);
  stm_get_stats("nb_aborts", &a->w->aborts);
  stm_get_stats("stmap_thread", &a->w->stmap_thread);
  stm_get_stats("stmap_cpu", &a->w->stmap_cpu);
  cpu_set_t set;
  a->w->affinity = -1;
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) == 1)
    for (int c = 0; c < CPU_SETSIZE; c++)
      if (CPU_ISSET(c, &set)) a->w->affinity = c;
  stm_exit_thread();
  return NULL;
}

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Runs fn on every worker for the duration; the elapsed seconds. */
static double bench_run(struct options *o, struct worker *w, work_fn fn) {
  struct run_args *args = calloc(o->threads, sizeof *args);
  pthread_barrier_init(&bench_barrier, NULL, o->threads + 1);
  for (int i = 0; i < o->threads; i++) {
    args[i].w = &w[i];
    args[i].fn = fn;
    if (pthread_create(&w[i].thread, NULL, bench_thread, &args[i]) != 0) {
      perror("pthread_create");
      exit(1);
    }
  }
  pthread_barrier_wait(&bench_barrier);
  double start = now_seconds();
  struct timespec d = {o->duration_ms / 1000, (o->duration_ms % 1000) * 1000000L};
  nanosleep(&d, NULL);
  atomic_store(&bench_stop, 1);
  for (int i = 0; i < o->threads; i++) pthread_join(w[i].thread, NULL);
  double elapsed = now_seconds() - start;
  free(args);
  return elapsed;
}

static void bench_report(const char *name, struct options *o, struct worker *w, double elapsed, const char *check) {
  unsigned long ops = 0, commits = 0, aborts = 0;
  for (int i = 0; i < o->threads; i++) {
    ops += w[i].ops;
    commits += w[i].commits;
    aborts += w[i].aborts;
  }
  printf("%s threads=%d duration_ms=%.0f txs=%lu txs_per_s=%.0f commits=%lu aborts=%lu check=%s\n", name, o->threads,
         elapsed * 1000, ops, ops / elapsed, commits, aborts, check);
  if (getenv("STM_BENCH_THREADS")) {
    for (int i = 0; i < o->threads; i++)
      printf("worker %d stmap_thread=%d stmap_cpu=%d affinity=%d commits=%lu aborts=%lu\n", i, w[i].stmap_thread,
             w[i].stmap_cpu, w[i].affinity, w[i].commits, w[i].aborts);
  }
}

#endif
