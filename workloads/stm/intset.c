/* intset: a set of integers under a mix of contains, add and remove transactions; built
 * once per structure (-DSET_LIST, -DSET_RBTREE, -DSET_HASH, -DSET_SKIP).
 *
 *   intset [-t threads] [-d duration_ms] [-s seed] [-i initial_size] [-r range] [-u update_percent]
 *
 * An update alternates: a thread adds a random key, then removes what it added, so the
 * size stays near the initial one. At the end the structure's invariants are checked and
 * its size must equal the initial size plus the adds minus the removes that succeeded. */
#include "bench.h"

#if defined(SET_LIST)
#include "list.h"
#define NAME "linkedlist"
#elif defined(SET_RBTREE)
#include "rbtree.h"
#define NAME "rbtree"
#elif defined(SET_HASH)
#include "hashset.h"
#define NAME "hashset"
#elif defined(SET_SKIP)
#include "skiplist.h"
#define NAME "skiplist"
#else
#error "define one of SET_LIST, SET_RBTREE, SET_HASH, SET_SKIP"
#endif

struct shared {
  set_t *set;
  long range, update;
};

static void work(struct worker *w) {
  struct shared *sh = w->shared;
  long last = -1;
#ifdef SET_SKIP
  level_seed = w->seed ^ 0x5DEECE66DUL;
#endif
  while (!atomic_load_explicit(&bench_stop, memory_order_relaxed)) {
    long r = (long)(next_random(&w->seed) % 100);
    if (r < sh->update) {
      if (last < 0) {
        long v = 1 + (long)(next_random(&w->seed) % sh->range);
        if (set_add(sh->set, v)) {
          last = v;
          w->added++;
        }
      } else {
        if (set_remove(sh->set, last)) w->removed++;
        last = -1;
      }
      w->updates_done++;
    } else {
      set_contains(sh->set, 1 + (long)(next_random(&w->seed) % sh->range));
    }
    w->ops++;
  }
}

int main(int argc, char **argv) {
  const char *extra = "[-i initial_size] [-r range] [-u update_percent]";
  struct options o = {.threads = 2, .duration_ms = 2000, .seed = 1, .size = 256, .range = 512, .update = 20};
  int c;
  while ((c = getopt(argc, argv, "t:d:s:i:r:u:")) != -1) {
    long v = optarg ? option_value(argv[0], extra, optarg) : 0;
    switch (c) {
      case 't': o.threads = (int)v; break;
      case 'd': o.duration_ms = (int)v; break;
      case 's': o.seed = (unsigned long)v; break;
      case 'i': o.size = v; break;
      case 'r': o.range = v; break;
      case 'u': o.update = v; break;
      default: usage(argv[0], extra);
    }
  }
  if (o.threads < 1 || o.range < 1 || o.size > o.range || o.update > 100) usage(argv[0], extra);
  stm_init();
  mod_mem_init(0);
  /* The main thread registers before it allocates: TinySTM's stm_malloc needs a thread's
   * descriptor even outside transactions. */
  stm_init_thread();
  struct shared sh = {.set = set_new(o.range), .range = o.range, .update = o.update};
  /* Fill with distinct random keys, in transactions of the main thread. */
  unsigned long seed = o.seed * 31 + 7;
#ifdef SET_SKIP
  level_seed = seed;
#endif
  long filled = 0;
  while (filled < o.size) filled += set_add(sh.set, 1 + (long)(next_random(&seed) % o.range));
  struct worker *w = calloc(o.threads, sizeof *w);
  for (int i = 0; i < o.threads; i++) {
    w[i].id = i;
    w[i].seed = o.seed * 0x9E3779B97F4A7C15UL + i + 1;
    w[i].shared = &sh;
  }
  double elapsed = bench_run(&o, w, work);
  long expected = filled;
  for (int i = 0; i < o.threads; i++) expected += (long)w[i].added - (long)w[i].removed;
  long size = set_check(sh.set);
  int ok = size == expected;
  if (size < 0) fprintf(stderr, NAME ": the structure's invariants do not hold\n");
  else if (!ok) fprintf(stderr, NAME ": size %ld, expected %ld\n", size, expected);
  bench_report(NAME, &o, w, elapsed, ok ? "ok" : "FAILED");
  stm_exit_thread();
  stm_exit();
  return ok ? 0 : 1;
}
