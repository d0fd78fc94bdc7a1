/* Drives one sharing case of sharemap-decide's cases.toml through the STM's own STMap.
 *
 * usage: stmap_case FILE, where FILE holds the case's accesses, one per line "THREAD r|w
 * WORD" (counts expanded). One pthread per case thread; they take turns in the case's
 * order. Each maximal run of one thread's accesses is one transaction of that thread,
 * after which the thread leaves the STM (stm_exit_thread applies its pending samples), so
 * STMap sees the samples in the case's order. Thread k registers k-th, so its STMap id is k.
 * Prints "distinct N" (STMap's distinct addresses); the matrix is what STMap writes at
 * stm_exit (SHAREMAP_STMAP_MATRIX). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include <stm.h>

typedef struct {
  int thread, write;
  long word;
} access_t;

static access_t *accesses;
static long n_accesses, n_words;
static int n_threads;
static volatile stm_word_t *words;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t turn_changed = PTHREAD_COND_INITIALIZER;
static long position; /* the next access to run */
static int registered; /* threads registered so far */
static int failed;

static void wait_until(int (*ready)(long), long me) {
  pthread_mutex_lock(&lock);
  while (!ready(me)) pthread_cond_wait(&turn_changed, &lock);
  pthread_mutex_unlock(&lock);
}

static void advance(long *what, long to) {
  pthread_mutex_lock(&lock);
  *what = to;
  pthread_cond_broadcast(&turn_changed);
  pthread_mutex_unlock(&lock);
}

static int my_registration(long me) { return registered == me; }
static int my_run_or_done(long me) {
  return registered == n_threads && (position == n_accesses || accesses[position].thread == me);
}

static void *work(void *arg) {
  long me = (long)arg;
  wait_until(my_registration, me);
  stm_init_thread();
  int id = -1;
  stm_get_stats("stmap_thread", &id);
  if (id != me) {
    fprintf(stderr, "stmap_case: thread %ld got STMap id %d\n", me, id);
    failed = 1;
  }
  stm_exit_thread();
  pthread_mutex_lock(&lock);
  registered++;
  pthread_cond_broadcast(&turn_changed);
  pthread_mutex_unlock(&lock);
  for (;;) {
    wait_until(my_run_or_done, me);
    long start = position, end = start; /* only this thread moves position now */
    if (start == n_accesses) return NULL;
    while (end < n_accesses && accesses[end].thread == me) end++;
    stm_init_thread();
    sigjmp_buf *env = stm_start((stm_tx_attr_t)0);
    if (env != NULL) sigsetjmp(*env, 0);
    for (long i = start; i < end; i++) {
      volatile stm_word_t *w = &words[accesses[i].word];
      if (accesses[i].write)
        stm_store(w, (stm_word_t)i);
      else
        (void)stm_load(w);
    }
    stm_commit();
    stm_exit_thread();
    advance(&position, end);
  }
}

static int read_case(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  long cap = 64;
  accesses = malloc(cap * sizeof *accesses);
  int t;
  char kind;
  long w;
  while (fscanf(f, "%d %c %ld", &t, &kind, &w) == 3) {
    if (t < 0 || w < 0 || (kind != 'r' && kind != 'w')) return 0;
    if (n_accesses == cap) accesses = realloc(accesses, (cap *= 2) * sizeof *accesses);
    accesses[n_accesses++] = (access_t){t, kind == 'w', w};
    if (t + 1 > n_threads) n_threads = t + 1;
    if (w + 1 > n_words) n_words = w + 1;
  }
  int whole = feof(f);
  fclose(f);
  return whole && n_accesses > 0;
}

int main(int argc, char **argv) {
  if (argc != 2 || !read_case(argv[1])) {
    fprintf(stderr, "usage: stmap_case FILE (lines \"THREAD r|w WORD\")\n");
    return 2;
  }
  words = calloc(n_words, sizeof *words);
  stm_init();
  pthread_t *threads = calloc(n_threads, sizeof *threads);
  for (long k = 0; k < n_threads; k++) pthread_create(&threads[k], NULL, work, (void *)k);
  for (long k = 0; k < n_threads; k++) pthread_join(threads[k], NULL);
  unsigned long distinct = 0;
  stm_get_stats("stmap_distinct_addresses", &distinct);
  printf("distinct %lu\n", distinct);
  stm_exit();
  return failed;
}
