/* bank: transfers between accounts, and audits that read every account in one
 * transaction and check the total there, on every audit, before committing: any
 * inconsistent snapshot is caught where it happens.
 *
 *   bank [-t threads] [-d duration_ms] [-s seed] [-a accounts] [-r read_all_percent]
 *
 * Exit status 1 (and a message) when an audit or the final check sees a wrong total. */
#include "bench.h"

#define INITIAL_BALANCE 1000

struct bank {
  long accounts;
  long read_all;
  volatile stm_word_t *balance;
  long total;
  atomic_long bad_audits;
};

static void work(struct worker *w) {
  struct bank *b = w->shared;
  while (!atomic_load_explicit(&bench_stop, memory_order_relaxed)) {
    unsigned long r = next_random(&w->seed);
    if ((long)(r % 100) < b->read_all) {
      long sum;
      TX_BEGIN(1);
      sum = 0;
      for (long i = 0; i < b->accounts; i++) sum += (long)TX_LOAD(&b->balance[i]);
      if (sum != b->total) {
        /* Seen inside the transaction: opacity is broken. */
        atomic_fetch_add(&b->bad_audits, 1);
        fprintf(stderr, "bank: an audit saw a total of %ld, not %ld\n", sum, b->total);
      }
      TX_END();
    } else {
      long src = (long)(next_random(&w->seed) % b->accounts);
      long dst = (long)(next_random(&w->seed) % b->accounts);
      long amount = 1 + (long)(next_random(&w->seed) % 10);
      TX_BEGIN(0);
      if (src != dst) {
        long a = (long)TX_LOAD(&b->balance[src]);
        long c = (long)TX_LOAD(&b->balance[dst]);
        TX_STORE(&b->balance[src], a - amount);
        TX_STORE(&b->balance[dst], c + amount);
      }
      TX_END();
      w->updates_done++;
    }
    w->ops++;
  }
}

int main(int argc, char **argv) {
  const char *extra = "[-a accounts] [-r read_all_percent]";
  struct options o = {.threads = 2, .duration_ms = 2000, .seed = 1, .accounts = 1024, .read_all = 20};
  int c;
  while ((c = getopt(argc, argv, "t:d:s:a:r:")) != -1) {
    long v = optarg ? option_value(argv[0], extra, optarg) : 0;
    switch (c) {
      case 't': o.threads = (int)v; break;
      case 'd': o.duration_ms = (int)v; break;
      case 's': o.seed = (unsigned long)v; break;
      case 'a': o.accounts = v; break;
      case 'r': o.read_all = v; break;
      default: usage(argv[0], extra);
    }
  }
  if (o.threads < 1 || o.accounts < 1 || o.read_all > 100) usage(argv[0], extra);
  stm_init();
  mod_mem_init(0);
  struct bank b = {.accounts = o.accounts, .read_all = o.read_all, .total = o.accounts * INITIAL_BALANCE};
  b.balance = calloc(o.accounts, sizeof(stm_word_t));
  for (long i = 0; i < o.accounts; i++) b.balance[i] = INITIAL_BALANCE;
  struct worker *w = calloc(o.threads, sizeof *w);
  for (int i = 0; i < o.threads; i++) {
    w[i].id = i;
    w[i].seed = o.seed * 0x9E3779B97F4A7C15UL + i + 1;
    w[i].shared = &b;
  }
  double elapsed = bench_run(&o, w, work);
  long sum = 0;
  for (long i = 0; i < o.accounts; i++) sum += (long)b.balance[i];
  int ok = sum == b.total && atomic_load(&b.bad_audits) == 0;
  if (sum != b.total) fprintf(stderr, "bank: final total %ld, not %ld\n", sum, b.total);
  bench_report("bank", &o, w, elapsed, ok ? "ok" : "FAILED");
  stm_exit();
  return ok ? 0 : 1;
}
