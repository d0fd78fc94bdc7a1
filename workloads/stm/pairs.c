/* Pairs of threads that share disjoint data: workers 2k and 2k+1 update random words of
 * array k, transactionally, and nothing else. STMap's matrix must name exactly those pairs;
 * its mapping keeps each pair together; with data mapping (a multi-node host) each array's
 * pages move to its pair's node.
 *
 *   pairs WORKERS TRANSACTIONS_PER_WORKER PAGES_PER_ARRAY [interleave]
 *
 * With "interleave" the arrays are first touched with their pages spread over the nodes.
 * Once every worker has run its transactions, and while all still run, the main thread
 * reads each worker's affinity (the one CPU it may run on, -1: several) and where each
 * array's pages lie, from the kernel; then it stops them. Prints, per worker, its STMap id
 * and that CPU; per array, how many of its pages each node holds; then STMap's counters and
 * the threads left once the workers are joined (the STM's own).
 * The STM's tests and `sharemap demo` run it. */
#define _GNU_SOURCE
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <stm.h>

#define PAGE 4096
#define MPOL_DEFAULT 0
#define MPOL_INTERLEAVE 3

static long workers, transactions, pages;
static volatile stm_word_t **arrays;
static pthread_barrier_t start;

struct result {
  int stmap_thread, cpu;
  atomic_int tid;
  atomic_long done;
  unsigned long commits;
};
static struct result *results;
static atomic_int stop;

/* The one CPU thread `tid` may run on, or -1. */
static int only_cpu(int tid) {
  cpu_set_t s;
  CPU_ZERO(&s);
  sched_getaffinity(tid, sizeof s, &s);
  int n = 0, one = -1;
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, &s)) {
      n++;
      one = c;
    }
  return n == 1 ? one : -1;
}

static void *work(void *arg) {
  long w = (long)arg;
  volatile stm_word_t *a = arrays[w / 2];
  long words = pages * PAGE / sizeof(stm_word_t);
  unsigned long seed = 0x9E3779B97F4A7C15UL * (w + 1);
  stm_init_thread();
  stm_get_stats("stmap_thread", &results[w].stmap_thread);
  atomic_store(&results[w].tid, (int)syscall(SYS_gettid));
  pthread_barrier_wait(&start);
  for (long k = 0; !atomic_load_explicit(&stop, memory_order_relaxed); k++) {
    seed = seed * 6364136223846793005UL + 1442695040888963407UL;
    long i = (long)((seed >> 20) % words), j = (long)((seed >> 40) % words);
    sigjmp_buf *env = stm_start((stm_tx_attr_t)0);
    if (env != NULL) sigsetjmp(*env, 0);
    stm_word_t x = stm_load(&a[i]), y = stm_load(&a[j]);
    stm_store(&a[i], x + 1);
    stm_store(&a[j], y + 1);
    stm_commit();
    atomic_store_explicit(&results[w].done, k + 1, memory_order_relaxed);
  }
  stm_get_stats("nb_commits", &results[w].commits);
  stm_exit_thread();
  return NULL;
}

/* Threads of this process besides the calling one (-1: unknown). */
static int other_threads(void) {
  DIR *d = opendir("/proc/self/task");
  if (!d) return -1;
  int n = -1;
  for (struct dirent *e; (e = readdir(d));)
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: pairs WORKERS TRANSACTIONS PAGES [interleave]\n");
    return 2;
  }
  workers = atol(argv[1]);
  transactions = atol(argv[2]);
  pages = atol(argv[3]);
  if (workers < 2 || workers % 2 != 0 || transactions < 1 || pages < 1) {
    fprintf(stderr, "pairs: WORKERS must be even and at least 2, TRANSACTIONS and PAGES at least 1\n");
    return 2;
  }
  int interleave = argc > 4 && strcmp(argv[4], "interleave") == 0;
  stm_init();
  arrays = calloc(workers / 2, sizeof *arrays);
  results = calloc(workers, sizeof *results);
  if (interleave) {
    unsigned long all = 3; /* nodes 0 and 1 */
    syscall(SYS_set_mempolicy, MPOL_INTERLEAVE, &all, 64);
  }
  for (long p = 0; p < workers / 2; p++) {
    void *m;
    if (posix_memalign(&m, PAGE, pages * PAGE) != 0) return 2;
    memset(m, 0, pages * PAGE);
    arrays[p] = m;
  }
  if (interleave) syscall(SYS_set_mempolicy, MPOL_DEFAULT, NULL, 0);
  pthread_barrier_init(&start, NULL, workers);
  pthread_t *t = calloc(workers, sizeof *t);
  for (long w = 0; w < workers; w++) pthread_create(&t[w], NULL, work, (void *)w);
  for (long w = 0; w < workers; w++)
    while (atomic_load(&results[w].done) < transactions) usleep(1000);
  /* Where each worker may run, once it holds still: a remap decided just now reaches a
   * worker at its next transaction, so the reading is repeated until two agree, and, for
   * up to 2 s (a loaded host delays the first decision), until every worker is pinned. */
  for (int tries = 0, settled = 0; !settled && tries < 40; tries++) {
    settled = tries > 0;
    int pinned = 1;
    for (long w = 0; w < workers; w++) {
      int cpu = only_cpu(atomic_load(&results[w].tid));
      settled &= cpu == results[w].cpu;
      pinned &= cpu >= 0;
      results[w].cpu = cpu;
    }
    settled &= pinned || tries == 39;
    if (!settled) usleep(50000);
  }
  for (long w = 0; w < workers; w++)
    printf("worker %ld stmap_thread %d cpu %d\n", w, results[w].stmap_thread, results[w].cpu);
  for (long p = 0; p < workers / 2; p++) {
    void **addr = calloc(pages, sizeof *addr);
    int *status = calloc(pages, sizeof *status);
    for (long i = 0; i < pages; i++) addr[i] = (char *)arrays[p] + i * PAGE;
    int on[2] = {0, 0};
    if (syscall(SYS_move_pages, 0, pages, addr, NULL, status, 0) == 0)
      for (long i = 0; i < pages; i++)
        if (status[i] == 0 || status[i] == 1) on[status[i]]++;
    printf("array %ld node0 %d node1 %d\n", p, on[0], on[1]);
  }
  atomic_store(&stop, 1);
  unsigned long commits = 0;
  for (long w = 0; w < workers; w++) {
    pthread_join(t[w], NULL);
    commits += results[w].commits;
  }
  printf("commits %lu\n", commits);
  unsigned long samples = 0, remaps = 0, moved = 0;
  int enabled = 0;
  stm_init_thread();
  stm_get_stats("stmap_enabled", &enabled);
  stm_get_stats("stmap_samples", &samples);
  stm_get_stats("stmap_remaps", &remaps);
  stm_get_stats("stmap_pages_moved", &moved);
  printf("stmap enabled %d samples %lu remaps %lu pages_moved %lu\n", enabled, samples, remaps, moved);
  printf("stm threads %d\n", other_threads());
  stm_exit_thread();
  stm_exit();
  return 0;
}
