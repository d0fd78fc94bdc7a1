/* sharemap's STM against TinySTM 1.0.5's API: each check prints "ok NAME" or "FAIL NAME:
 * why"; the exit status is the number of failures. Built with `sharemap cc --stm
 * --no-trace` by crates/sharemap-cli/tests/stm.rs. */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <stm.h>
#include <wrappers.h>
#include <mod_mem.h>
#include <mod_stats.h>
#include <mod_ab.h>

static int failures;
#define CHECK(name, cond, ...)                     \
  do {                                             \
    if (cond) {                                    \
      printf("ok %s\n", name);                     \
    } else {                                       \
      printf("FAIL %s: ", name);                   \
      printf(__VA_ARGS__);                         \
      printf("\n");                                \
      failures++;                                  \
    }                                              \
  } while (0)

/* Locals changed inside a transaction and read after it restarts are volatile: longjmp
 * restores registers. */
#define BEGIN(attr)                                \
  do {                                             \
    sigjmp_buf *env_ = stm_start(attr);            \
    if (env_ != NULL) reason = sigsetjmp(*env_, 0); \
  } while (0)

/* Words with a lock each (locks cover 32 bytes). */
typedef struct { _Alignas(64) volatile stm_word_t w; } cell_t;

/* ---- every width, unaligned and straddling, with the neighbouring bytes untouched ---- */
static void widths(void) {
  static _Alignas(64) volatile uint8_t buf[32];
  static _Alignas(64) volatile uint8_t seen[32];
  memset((void *)buf, 0xEE, sizeof buf);
  volatile int reason = 0;
  BEGIN((stm_tx_attr_t)0);
  (void)reason;
  stm_store_u8(&buf[0], 0x11);
  stm_store_u16((volatile uint16_t *)&buf[1], 0x2233);     /* unaligned, inside a word */
  stm_store_u32((volatile uint32_t *)&buf[6], 0x44556677); /* straddles words 0 and 1 */
  stm_store_u64((volatile uint64_t *)&buf[16], 0x8899AABBCCDDEEFFULL);
  /* In the transaction: its own writes, merged with memory for the bytes it did not write. */
  for (int i = 0; i < 32; i++) seen[i] = stm_load_u8(&buf[i]);
  int plain_before_commit = buf[0];
  stm_commit();
  uint8_t want[32];
  memset(want, 0xEE, sizeof want);
  want[0] = 0x11;
  want[1] = 0x33; want[2] = 0x22;
  want[6] = 0x77; want[7] = 0x66; want[8] = 0x55; want[9] = 0x44;
  for (int i = 0; i < 8; i++) want[16 + i] = (uint8_t)(0x8899AABBCCDDEEFFULL >> (8 * i));
  CHECK("widths-own-writes", memcmp((void *)seen, want, 32) == 0, "a load in the transaction saw other bytes");
  CHECK("widths-memory", memcmp((void *)buf, want, 32) == 0, "memory after commit differs");
  CHECK("write-back", plain_before_commit == 0xEE, "memory changed before commit (%#x)", plain_before_commit);
  uint16_t u16; uint32_t u32; uint64_t u64;
  BEGIN((stm_tx_attr_t)0);
  u16 = stm_load_u16((volatile uint16_t *)&buf[1]);
  u32 = stm_load_u32((volatile uint32_t *)&buf[6]);
  u64 = stm_load_u64((volatile uint64_t *)&buf[16]);
  stm_commit();
  CHECK("widths-loads", u16 == 0x2233 && u32 == 0x44556677 && u64 == 0x8899AABBCCDDEEFFULL, "%x %x %llx", u16, u32,
        (unsigned long long)u64);
}

/* ---- every C type of wrappers.h, and the byte functions ---- */
static void types(void) {
  static struct {
    char c; unsigned char uc; short s; unsigned short us; int i; unsigned int ui; long l; unsigned long ul;
    float f; double d; void *p;
  } v, got;
  static _Alignas(64) volatile uint8_t bytes[40];
  static uint8_t out[40];
  int reason = 0;
  memset((void *)&v, 0, sizeof v);
  BEGIN((stm_tx_attr_t)0);
  (void)reason;
  stm_store_char(&v.c, -5); stm_store_uchar(&v.uc, 250); stm_store_short(&v.s, -12345);
  stm_store_ushort(&v.us, 54321); stm_store_int(&v.i, -123456789); stm_store_uint(&v.ui, 4000000000U);
  stm_store_long(&v.l, -1234567890123L); stm_store_ulong(&v.ul, 12345678901234UL);
  stm_store_float(&v.f, 1.5f); stm_store_double(&v.d, -2.25); stm_store_ptr((volatile void **)&v.p, &got);
  stm_commit();
  BEGIN((stm_tx_attr_t)0);
  got.c = stm_load_char(&v.c); got.uc = stm_load_uchar(&v.uc); got.s = stm_load_short(&v.s);
  got.us = stm_load_ushort(&v.us); got.i = stm_load_int(&v.i); got.ui = stm_load_uint(&v.ui);
  got.l = stm_load_long(&v.l); got.ul = stm_load_ulong(&v.ul); got.f = stm_load_float(&v.f);
  got.d = stm_load_double(&v.d); got.p = stm_load_ptr((volatile void **)&v.p);
  stm_commit();
  CHECK("types", got.c == -5 && got.uc == 250 && got.s == -12345 && got.us == 54321 && got.i == -123456789 &&
        got.ui == 4000000000U && got.l == -1234567890123L && got.ul == 12345678901234UL && got.f == 1.5f &&
        got.d == -2.25 && got.p == &got && v.c == -5 && v.d == -2.25,
        "a typed load or store lost its value");
  memset((void *)bytes, 0x5A, sizeof bytes);
  uint8_t msg[13] = "hello, bytes";
  BEGIN((stm_tx_attr_t)0);
  stm_store_bytes(&bytes[3], msg, 13);
  stm_set_bytes(&bytes[20], 0x77, 9);
  stm_load_bytes(&bytes[0], out, 40);
  stm_commit();
  int ok = bytes[2] == 0x5A && memcmp((void *)&bytes[3], msg, 13) == 0 && bytes[16] == 0x5A && bytes[19] == 0x5A &&
           bytes[20] == 0x77 && bytes[28] == 0x77 && bytes[29] == 0x5A && memcmp(out, (void *)bytes, 40) == 0;
  CHECK("bytes", ok, "store_bytes/set_bytes/load_bytes");
}

/* ---- stm_store2's mask ---- */
static void masks(void) {
  static cell_t x = {0x1111222233334444UL};
  stm_word_t inside;
  int reason = 0;
  BEGIN((stm_tx_attr_t)0);
  (void)reason;
  stm_store2(&x.w, 0xAB00, 0xFF00);
  stm_store2(&x.w, 0xCD00000000UL, 0xFF00000000UL);
  inside = stm_load(&x.w);
  stm_commit();
  CHECK("mask", inside == 0x111122CD3333AB44UL && x.w == 0x111122CD3333AB44UL, "%lx %lx", inside, x.w);
}

/* ---- abort reasons ---- */
static cell_t X, Y, Z;
static atomic_int phase;

static void wait_phase(int p) {
  while (atomic_load(&phase) < p) sched_yield();
}

/* Holds a write lock on X until told, then commits. */
static void *holder(void *arg) {
  (void)arg;
  stm_init_thread();
  int reason = 0;
  BEGIN((stm_tx_attr_t)0);
  (void)reason;
  stm_store(&X.w, stm_load(&X.w) + 1);
  atomic_store(&phase, 1);
  wait_phase(2);
  stm_commit();
  stm_exit_thread();
  return NULL;
}

static void reasons(void) {
  volatile int reason;
  /* Explicit. */
  volatile int attempts = 0;
  reason = 0;
  BEGIN((stm_tx_attr_t)0);
  if (++attempts == 1) stm_abort(0);
  stm_commit();
  CHECK("abort-explicit", attempts == 2 && reason == (STM_ABORT_EXPLICIT | STM_PATH_INSTRUMENTED), "reason %#x", reason);

  /* Reading a location another transaction has written: WR; writing it: WW. */
  for (int kind = 0; kind < 2; kind++) {
    pthread_t t;
    atomic_store(&phase, 0);
    pthread_create(&t, NULL, holder, NULL);
    wait_phase(1);
    attempts = 0;
    volatile int first = 0;
    reason = 0;
    BEGIN((stm_tx_attr_t)0);
    if (++attempts == 2) {
      first = reason;
      atomic_store(&phase, 2); /* the holder may commit now */
    }
    if (attempts > 1) {
      pthread_join(t, NULL);
    }
    if (kind == 0) (void)stm_load(&X.w); else stm_store(&X.w, 7);
    stm_commit();
    int want = kind == 0 ? STM_ABORT_WR_CONFLICT : STM_ABORT_WW_CONFLICT;
    CHECK(kind == 0 ? "abort-wr-conflict" : "abort-ww-conflict", first == (want | STM_PATH_INSTRUMENTED),
          "first abort %#x", first);
  }

  /* A read newer than the snapshot when an earlier read changed: VAL_READ. */
  attempts = 0;
  volatile int first = 0;
  reason = 0;
  BEGIN((stm_tx_attr_t)0);
  if (++attempts == 2) first = reason;
  (void)stm_load(&X.w);
  if (attempts == 1) {
    /* Another thread commits X and Y (as a unit store each, from this thread). */
    stm_unit_store(&X.w, 100, NULL);
    stm_unit_store(&Y.w, 200, NULL);
  }
  (void)stm_load(&Y.w);
  stm_commit();
  CHECK("abort-val-read", first == (STM_ABORT_VAL_READ | STM_PATH_INSTRUMENTED), "first abort %#x", first);

  /* A read that changed before commit: VALIDATE. */
  attempts = 0;
  first = 0;
  reason = 0;
  BEGIN((stm_tx_attr_t)0);
  if (++attempts == 2) first = reason;
  (void)stm_load(&X.w);
  stm_store(&Z.w, 1);
  if (attempts == 1) stm_unit_store(&X.w, 300, NULL);
  stm_commit();
  CHECK("abort-validate", first == (STM_ABORT_VALIDATE | STM_PATH_INSTRUMENTED), "first abort %#x", first);

  /* no_retry: the failing call returns, the transaction is over. */
  stm_tx_attr_t once = {{.no_retry = 1}};
  reason = 0;
  volatile int ran = 0, committed = -1;
  BEGIN(once);
  if (++ran == 1) {
    stm_abort(0);
    committed = stm_commit();
  }
  CHECK("no-retry", ran == 1 && stm_aborted() && committed == 0 && !stm_active(), "ran %d committed %d", ran, committed);

  unsigned long n = 0, wr = 0, ww = 0, vr = 0, vc = 0;
  stm_get_stats("nb_aborts", &n);
  stm_get_stats("nb_aborts_locked_read", &wr);
  stm_get_stats("nb_aborts_locked_write", &ww);
  stm_get_stats("nb_aborts_validate_read", &vr);
  stm_get_stats("nb_aborts_validate_commit", &vc);
  CHECK("abort-stats", n == 6 && wr == 1 && ww == 1 && vr == 1 && vc == 1, "aborts %lu wr %lu ww %lu vr %lu vc %lu", n,
        wr, ww, vr, vc);
}

/* ---- read-only transactions (TinySTM's read_only attribute) ---- */
static cell_t ro_a, ro_b;

static void read_only(void) {
  stm_tx_attr_t ro = {{.read_only = 1}};
  volatile int reason = 0, attempts = 0;
  volatile unsigned int mode_first = 9, mode_retry = 9;
  unsigned int rs = 99;
  /* Reads are not logged; the attempt says it is read-only. */
  BEGIN(ro);
  (void)stm_load(&ro_a.w);
  (void)stm_load(&ro_b.w);
  stm_get_stats("read_set_nb_entries", &rs);
  stm_get_stats("read_only", (void *)&mode_first);
  stm_commit();
  int unlogged = rs == 0 && mode_first == 1;
  /* A read newer than the snapshot cannot extend it: VAL_READ, where an update transaction
   * would have extended and gone on; the retry runs as one, and commits. */
  attempts = 0;
  volatile int first = 0;
  BEGIN(ro);
  if (++attempts == 2) first = reason;
  (void)stm_load(&ro_a.w);
  if (attempts == 1) stm_unit_store(&ro_b.w, 5, NULL);
  stm_word_t b = stm_load(&ro_b.w);
  stm_commit();
  int no_extension = attempts == 2 && first == (STM_ABORT_VAL_READ | STM_PATH_INSTRUMENTED) && b == 5;
  /* A write restarts the transaction as an update one, and the write is made. */
  attempts = 0;
  first = 0;
  BEGIN(ro);
  if (++attempts == 2) first = reason;
  stm_get_stats("read_only", (void *)&mode_retry);
  stm_store(&ro_a.w, stm_load(&ro_b.w) + 1);
  stm_commit();
  int restarted = attempts == 2 && first == (STM_ABORT_OTHER | STM_PATH_INSTRUMENTED) && mode_retry == 0 && ro_a.w == 6;
  CHECK("read-only", unlogged && no_extension && restarted,
        "read set %u, mode %u then %u; val-read attempts %d; write: first abort %#x, a %lu", rs, mode_first, mode_retry,
        attempts, first, ro_a.w);
}

/* ---- flat nesting ---- */
static void nesting(void) {
  static cell_t c = {0};
  volatile int reason = 0, outer_attempts = 0, inner_null = 0;
  volatile stm_word_t plain_after_inner = 99;
  BEGIN((stm_tx_attr_t)0);
  outer_attempts++;
  stm_store(&c.w, stm_load(&c.w) + 1);
  {
    sigjmp_buf *inner = stm_start((stm_tx_attr_t)0);
    inner_null = inner == NULL;
    stm_store(&c.w, stm_load(&c.w) + 10);
    if (outer_attempts == 1) stm_abort(0); /* restarts the outermost transaction */
    stm_commit();
  }
  plain_after_inner = c.w;
  stm_commit();
  CHECK("nesting", inner_null && outer_attempts == 2 && plain_after_inner == 0 && c.w == 11 && reason != 0,
        "inner env null %d, outer attempts %d, memory after inner commit %lu, final %lu", inner_null, outer_attempts,
        plain_after_inner, c.w);
}

/* ---- irrevocability beside writers ---- */
static cell_t counter;
static atomic_int stop_writers;

static void *writer(void *arg) {
  (void)arg;
  stm_init_thread();
  int reason = 0;
  while (!atomic_load(&stop_writers)) {
    BEGIN((stm_tx_attr_t)0);
    (void)reason;
    stm_store(&counter.w, stm_load(&counter.w) + 1);
    stm_commit();
  }
  stm_exit_thread();
  return NULL;
}

static void irrevocable(void) {
  pthread_t t[2];
  for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, writer, NULL);
  volatile int reason = 0, bad = 0;
  for (int round = 0; round < 200; round++) {
    volatile int attempts = 0, irr = 0;
    BEGIN((stm_tx_attr_t)0);
    attempts++;
    if (round % 2 == 0) {
      irr = stm_set_irrevocable(1); /* before any access: at once */
    } else {
      (void)stm_load(&Z.w);
      irr = stm_set_irrevocable(0); /* after a read: restarts irrevocable */
    }
    stm_word_t v = stm_load(&counter.w);
    for (volatile int spin = 0; spin < 2000; spin++) {}
    stm_store(&counter.w, v + 1000000);
    if (!stm_irrevocable()) bad++;
    stm_commit();
    int want = round % 2 == 0 ? 1 : 2;
    if (irr != 1 || attempts != want) bad++;
  }
  atomic_store(&stop_writers, 1);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  unsigned long commits = 0;
  stm_get_global_stats("global_nb_commits", &commits);
  CHECK("irrevocable", bad == 0 && counter.w / 1000000 == 200, "%d irrevocable transactions misbehaved, counter %lu",
        bad, counter.w);
  (void)reason;
}

/* ---- threads exit and register again, many times ---- */
static cell_t total;

static void *reinit(void *arg) {
  long *id_changes = arg;
  int first_id = -1;
  for (int k = 0; k < 100; k++) {
    struct stm_tx *a = stm_init_thread();
    struct stm_tx *b = stm_init_thread();
    if (a != b) *id_changes += 1000;
    int id;
    stm_get_stats("stmap_thread", &id);
    if (first_id < 0) first_id = id;
    if (id != first_id) (*id_changes)++;
    int reason = 0;
    BEGIN((stm_tx_attr_t)0);
    (void)reason;
    stm_store(&total.w, stm_load(&total.w) + 1);
    stm_commit();
    stm_exit_thread();
  }
  return NULL;
}

static void exit_and_reinit(void) {
  pthread_t t[4];
  long changes[4] = {0};
  for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, reinit, &changes[i]);
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
  CHECK("exit-reinit", total.w == 400 && changes[0] + changes[1] + changes[2] + changes[3] == 0,
        "total %lu, id changes %ld %ld %ld %ld", total.w, changes[0], changes[1], changes[2], changes[3]);
}

/* ---- transactional allocation: undone on abort, frees only after commit ---- */
static size_t mapped(void) {
  return mallinfo2().hblkhd; /* bytes in blocks malloc took with mmap */
}

static void allocation(void) {
  const size_t big = 64 << 20; /* always mmapped by glibc */
  static cell_t slot = {0};
  volatile int reason = 0, attempts = 0;
  size_t before = mapped();
  BEGIN((stm_tx_attr_t)0);
  (void)reason;
  attempts++;
  void *p = stm_malloc(big);
  memset(p, 1, 4096);
  if (attempts == 1) stm_abort(0); /* the first attempt's block goes back */
  stm_store(&slot.w, (stm_word_t)p);
  stm_commit();
  size_t after_commit = mapped();
  CHECK("malloc-abort-commit", attempts == 2 && (after_commit - before) / big == 1,
        "mmapped %zu -> %zu after %d attempts", before, after_commit, attempts);
  /* A free in an aborted attempt does nothing; in the committed one it happens, once no
   * transaction can reach the block (here: when the thread leaves the STM). */
  attempts = 0;
  volatile size_t mid = 0;
  BEGIN((stm_tx_attr_t)0);
  attempts++;
  void *q = (void *)stm_load(&slot.w);
  stm_free(q, big);
  if (attempts == 1) {
    mid = mapped();
    stm_abort(0);
  }
  stm_store(&slot.w, 0);
  stm_commit();
  size_t after_free_commit = mapped();
  stm_exit_thread();
  size_t after_exit = mapped();
  stm_init_thread();
  CHECK("free-after-commit", mid == after_commit && after_free_commit <= after_commit && after_exit == before,
        "mmapped: in aborted attempt %zu (had %zu), after commit %zu, after the thread left %zu (before all %zu)", mid,
        after_commit, after_free_commit, after_exit, before);
}

/* ---- a block freed with its size comes back to the same thread's next stm_malloc of that
 * size at once; one freed without it once the transactions running at its free have ended,
 * or to malloc at once when its thread is alone ---- */
typedef struct { volatile stm_word_t a, b; } pair_t;

static void *tx_malloc(size_t size) {
  volatile int reason = 0;
  void *volatile p = NULL;
  BEGIN((stm_tx_attr_t)0);
  (void)reason;
  p = stm_malloc(size);
  stm_commit();
  return p;
}

static void tx_free(void *p, size_t size) {
  volatile int reason = 0;
  BEGIN((stm_tx_attr_t)0);
  (void)reason;
  stm_free(p, size);
  stm_commit();
}

/* A second registered thread that holds a transaction open until told to commit, then
 * stays registered, idle, until told to leave. */
static atomic_int parked_ready, parked_go, parked_done, parked_leave;
static cell_t parked_cell;
static void *parked(void *arg) {
  (void)arg;
  stm_init_thread();
  volatile int reason = 0;
  BEGIN((stm_tx_attr_t)0);
  (void)reason;
  (void)stm_load(&parked_cell.w);
  atomic_store(&parked_ready, 1);
  while (!atomic_load(&parked_go)) {
  }
  stm_commit();
  atomic_store(&parked_done, 1);
  while (!atomic_load(&parked_leave)) {
  }
  stm_exit_thread();
  return NULL;
}

/* Frees `n` fresh blocks without their size, one transaction each, into `out`. */
#define ROUND 16
static void free_unsized(void **out) {
  for (int i = 0; i < ROUND; i++) out[i] = tx_malloc(sizeof(pair_t));
  for (int i = 0; i < ROUND; i++) tx_free(out[i], 0);
}

static int among(void *p, void **set) {
  for (int i = 0; i < ROUND; i++)
    if (set[i] == p) return 1;
  return 0;
}

static void reuse(void) {
  void *p = tx_malloc(sizeof(pair_t));
  tx_free(p, sizeof(pair_t));
  void *same = tx_malloc(sizeof(pair_t));
  void *other_size = tx_malloc(sizeof(pair_t) + 16);
  /* Reused in an attempt that aborts, it is there again for the next. */
  tx_free(same, sizeof(pair_t));
  volatile int reason = 0, attempts = 0;
  void *volatile first = NULL, *volatile second = NULL;
  BEGIN((stm_tx_attr_t)0);
  (void)reason;
  if (++attempts == 1) {
    first = stm_malloc(sizeof(pair_t));
    stm_abort(0);
  }
  second = stm_malloc(sizeof(pair_t));
  stm_commit();
  CHECK("free-reuse", same == p && other_size != p && first == p && second == p,
        "freed %p; same size got %p, another size %p; aborted attempt %p, retry %p", p, same, other_size,
        (void *)first, (void *)second);
  tx_free(second, sizeof(pair_t));

  /* Freed without its size (TL2's TxFree): locked, and reused only once every running
   * transaction began after the free. While another thread's transaction that began before
   * runs, none of the blocks comes back; once it has committed, the newest does. */
  pthread_t other;
  atomic_store(&parked_go, 0);
  atomic_store(&parked_ready, 0);
  atomic_store(&parked_done, 0);
  atomic_store(&parked_leave, 0);
  pthread_create(&other, NULL, parked, NULL);
  while (!atomic_load(&parked_ready)) {
  }
  void *during[ROUND], *after[ROUND];
  free_unsized(during);
  void *while_running = tx_malloc(sizeof(pair_t));
  atomic_store(&parked_go, 1);
  while (!atomic_load(&parked_done)) {
  }
  free_unsized(after);
  void *once_ended = tx_malloc(sizeof(pair_t));
  atomic_store(&parked_leave, 1);
  pthread_join(other, NULL);
  CHECK("free-reuse-unsized", !among(while_running, during) && among(once_ended, after),
        "while an older transaction ran: %p (%s); after it ended: %p (%s)", while_running,
        among(while_running, during) ? "a block freed after it began" : "fresh", once_ended,
        among(once_ended, after) ? "a freed block" : "not one of the freed blocks");
  tx_free(while_running, sizeof(pair_t));
  /* With no other thread registered, no transaction but the next of this thread can reach
   * it: it goes back to malloc at commit, whose per-thread cache hands it out next. */
  tx_free(once_ended, 0);
  void *from_malloc = malloc(sizeof(pair_t));
  CHECK("free-alone", from_malloc == once_ended, "freed %p alone; malloc then gave %p", once_ended, from_malloc);
  free(from_malloc);
  tx_free(other_size, sizeof(pair_t) + 16);
}

/* ---- opacity across reuse: a writer replaces the head node each transaction, reusing
 * the block it freed in the last one, and fills it with plain stores (a poison first);
 * readers that followed the old head must abort, never see a + b != SUM ---- */
#define SUM 1000
#define POISON 0xdeadUL
static cell_t head;
static atomic_int reuse_stop;
static atomic_long zombies;
static atomic_int readers_ready;
static long recycled;

static void *reuse_reader(void *arg) {
  (void)arg;
  stm_init_thread();
  atomic_fetch_add(&readers_ready, 1);
  while (!atomic_load(&reuse_stop)) {
    volatile int reason = 0;
    BEGIN((stm_tx_attr_t)0);
    (void)reason;
    pair_t *h = (pair_t *)stm_load(&head.w);
    for (volatile int i = 0; i < 50; i++) {
    } /* room for the writer to free and reuse h */
    stm_word_t a = stm_load(&h->a), b = stm_load(&h->b);
    if (a + b != SUM) atomic_fetch_add(&zombies, 1);
    stm_commit();
  }
  stm_exit_thread();
  return NULL;
}

/* Sized frees come back to the next allocation at once (more than half of the 200000);
 * frees without a size once the readers' transactions running at the free have ended (theirs
 * are short, so many do). Either way no reader sees a reused
 * block's new contents under an old snapshot. */
static void recycled_zombies(const char *check, size_t freed_size) {
  recycled = 0;
  atomic_store(&zombies, 0);
  atomic_store(&reuse_stop, 0);
  pair_t *first = tx_malloc(sizeof(pair_t));
  first->a = 0;
  first->b = SUM;
  head.w = (stm_word_t)first;
  pthread_t readers[2];
  atomic_store(&readers_ready, 0);
  for (int i = 0; i < 2; i++) pthread_create(&readers[i], NULL, reuse_reader, NULL);
  /* Registered readers: the writer is never alone, so its unsized frees wait. */
  while (atomic_load(&readers_ready) < 2) {
  }
  void *freed_last = NULL;
  for (stm_word_t x = 1; x <= 200000; x++) {
    volatile int reason = 0;
    BEGIN((stm_tx_attr_t)0);
    (void)reason;
    pair_t *old = (pair_t *)stm_load(&head.w);
    pair_t *n = stm_malloc(sizeof(pair_t));
    n->a = POISON;
    n->b = POISON;
    n->a = x % SUM;
    n->b = SUM - x % SUM;
    stm_store(&head.w, (stm_word_t)n);
    stm_free(old, freed_size);
    stm_commit();
    if ((void *)n == freed_last) recycled++;
    freed_last = old;
  }
  atomic_store(&reuse_stop, 1);
  for (int i = 0; i < 2; i++) pthread_join(readers[i], NULL);
  int reused_as_expected = recycled > (freed_size ? 100000 : 1000);
  CHECK(check, zombies == 0 && reused_as_expected,
        "%ld reads of a reused block's new contents under an old snapshot; %ld of 200000 blocks reused", zombies,
        recycled);
  tx_free((void *)head.w, sizeof(pair_t));
}

/* ---- the rest of the API ---- */
static volatile int starts, commits, aborts_seen;
static void on_start(void *a) { (void)a; starts++; }
static void on_commit(void *a) { (void)a; commits++; }
static void on_abort(void *a) { (void)a; aborts_seen++; }

static void misc(void) {
  const char *flags = NULL;
  CHECK("compile-flags", stm_get_parameter("compile_flags", &flags) == 1 && flags && strstr(flags, "sharemap"),
        "no compile_flags string");
  int key = stm_create_specific();
  stm_set_specific(key, &key);
  CHECK("specific", key >= 0 && stm_get_specific(key) == &key, "key %d", key);
  stm_register(NULL, NULL, on_start, NULL, on_commit, on_abort, NULL);
  stm_word_t clock0 = stm_get_clock();
  volatile int reason = 0, attempts = 0;
  BEGIN((stm_tx_attr_t)0);
  if (++attempts == 1) stm_abort(0);
  stm_store(&Y.w, 5);
  stm_commit();
  CHECK("callbacks", starts == 2 && commits == 1 && aborts_seen == 1, "starts %d commits %d aborts %d", starts, commits,
        aborts_seen);
  CHECK("clock", stm_get_clock() > clock0, "the clock did not advance");
  stm_word_t ts = 0;
  stm_word_t v = stm_unit_load(&Y.w, &ts);
  int stale = stm_unit_store(&Y.w, 9, &(stm_word_t){ts - 1});
  int fresh = stm_unit_store(&Y.w, 9, &ts);
  CHECK("unit", v == 5 && ts > 0 && !stale && fresh && Y.w == 9, "v %lu ts %lu stale %d fresh %d", v, ts, stale, fresh);
  stm_ab_stats_t ab;
  CHECK("mod-ab", stm_get_ab_stats(0, &ab) == 1 && ab.samples > 0 && ab.min <= ab.max, "no atomic-block statistics");
  unsigned long gc = 0, ga = 0;
  stm_get_global_stats("global_nb_commits", &gc);
  stm_get_global_stats("global_nb_aborts", &ga);
  CHECK("global-stats", gc > 400 && ga > 0, "commits %lu aborts %lu", gc, ga);
  /* sharemap's own: each abort kind over every thread. The readers of reuse-opacity abort
   * on the writer's locks and versions; the kinds never add up to more than the aborts. */
  const char *kinds[] = {"locked_read", "locked_write", "validate_read", "validate_write", "validate_commit",
                         "irrevocable", "killed"};
  unsigned long by_kind = 0;
  int known = 1;
  for (int i = 0; i < 7; i++) {
    char name[64];
    unsigned long n = 0;
    snprintf(name, sizeof name, "global_nb_aborts_%s", kinds[i]);
    known &= stm_get_global_stats(name, &n) == 1;
    by_kind += n;
  }
  unsigned long bogus = 0;
  CHECK("global-stats-kinds", known && by_kind > 0 && by_kind <= ga && !stm_get_global_stats("global_nb_bogus", &bogus),
        "names known %d, %lu aborts by kind of %lu", known, by_kind, ga);
  (void)reason;
}

/* ---- mod_ab_init(0, ...) samples as TinySTM does: one committed transaction in 1024 ---- */
static void ab_sampling(void) {
  static cell_t c;
  volatile int reason = 0;
  mod_ab_init(0, NULL);
  stm_tx_attr_t attr = {{.id = 7}};
  for (int i = 0; i < 2048; i++) {
    BEGIN(attr);
    stm_store(&c.w, stm_load(&c.w) + 1);
    stm_commit();
  }
  stm_ab_stats_t ab;
  int found = stm_get_ab_stats(7, &ab);
  CHECK("mod-ab-sampling", found == 1 && ab.samples == 2, "found %d, %lu samples of 2048 transactions (1 in 1024 expected)",
        found, found ? (unsigned long)ab.samples : 0UL);
  (void)reason;
}

/* ---- serial irrevocability: restarted alone, on the uninstrumented path ---- */
static void serial_irrevocable(void) {
  atomic_store(&stop_writers, 0);
  pthread_t t[2];
  for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, writer, NULL);
  volatile int bad = 0, uninstrumented = 0, moved = 0;
  for (int round = 0; round < 100; round++) {
    volatile int attempts = 0;
    volatile int reason = 0;
    BEGIN((stm_tx_attr_t)0);
    attempts++;
    if (reason & STM_PATH_UNINSTRUMENTED) {
      /* Alone: direct accesses, and no writer commits while this runs. */
      uninstrumented++;
      stm_word_t before = counter.w;
      for (volatile int spin = 0; spin < 20000; spin++) {}
      if (counter.w != before) moved++;
      counter.w = before + 1000000;
      if (!stm_irrevocable()) bad++;
    } else {
      stm_store(&Z.w, stm_load(&Z.w) + 1); /* a write first: serial mode restarts */
      stm_set_irrevocable(1);
      bad++; /* never reached: the call restarts the transaction */
    }
    stm_commit();
    if (attempts != 2) bad++;
  }
  /* Outside a transaction: 0 now, the next transaction irrevocable from its start. */
  int outside = stm_set_irrevocable(0);
  volatile int reason = 0, irrevocable_next = 0;
  BEGIN((stm_tx_attr_t)0);
  (void)reason;
  irrevocable_next = stm_irrevocable();
  stm_commit();
  atomic_store(&stop_writers, 1);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  CHECK("serial-irrevocable", bad == 0 && uninstrumented == 100 && moved == 0 && outside == 0 && irrevocable_next == 1,
        "%d misbehaved, %d of 100 on the uninstrumented path, %d saw a concurrent commit, outside %d, next irrevocable %d",
        bad, uninstrumented, moved, outside, irrevocable_next);
}

/* ---- the explicit-descriptor family, the clock, the thread's totals ---- */
static cell_t tx_a, tx_b;

static void tx_family(void) {
  struct stm_tx *tx = stm_current_tx();
  int ok = tx != NULL && tx == stm_init_thread();
  unsigned long commits_before = 0, commits_after = 0, max_retries = 0;
  ok &= stm_get_local_stats("nb_commits", &commits_before) == 1;
  ok &= stm_get_env_tx(tx) != NULL && stm_active_tx(tx) == 0;
  volatile int reason = 0, attempts = 0;
  stm_tx_attr_t attr = {{.id = 9}};
  sigjmp_buf *env = stm_start_tx(tx, attr);
  if (env != NULL) reason = sigsetjmp(*env, 0);
  attempts++;
  ok &= stm_active_tx(tx) == 1 && stm_get_env_tx(tx) == NULL && stm_get_attributes_tx(tx).id == 9;
  stm_store_tx(tx, &tx_a.w, stm_load_tx(tx, &tx_a.w) + 5);
  stm_store2_tx(tx, &tx_b.w, 0xAB00, 0xFF00);
  unsigned int rs = 0;
  ok &= stm_get_stats_tx(tx, "write_set_size", &rs) == 1 && rs == 2;
  void *block = stm_malloc_tx(tx, 64);
  stm_free_tx(tx, block, 64);
  if (attempts == 1) stm_abort_tx(tx, 0); /* restarts: the allocation is undone */
  ok &= stm_commit_tx(tx) == 1 && stm_aborted_tx(tx) == 0 && stm_active_tx(tx) == 0;
  ok &= tx_a.w == 5 && tx_b.w == 0xAB00 && attempts == 2 && reason != 0;
  /* Specific data through the descriptor. */
  int key = stm_create_specific();
  stm_set_specific_tx(tx, key, &tx_a);
  ok &= stm_get_specific(key) == &tx_a && stm_get_specific_tx(tx, key) == &tx_a;
  /* stm_free2: the block goes at commit, bytes 8..24 locked meanwhile. */
  void *other = malloc(64);
  BEGIN((stm_tx_attr_t)0);
  stm_free2(other, 8, 16);
  stm_commit();
  ok &= stm_get_local_stats("nb_commits", &commits_after) == 1 && commits_after == commits_before + 2;
  ok &= stm_get_local_stats("nb_retries_max", &max_retries) == 1 && max_retries >= 1;
  double avg = -1;
  ok &= stm_get_local_stats("nb_retries_avg", &avg) == 1 && avg > 0 && stm_get_local_stats("no_such", &avg) == 0;
  /* stm_inc_clock: one tick, and a running transaction still commits (it extends). */
  stm_word_t c0 = stm_get_clock();
  stm_inc_clock();
  int one_tick = stm_get_clock() == c0 + 1;
  BEGIN((stm_tx_attr_t)0);
  stm_word_t a = stm_load(&tx_a.w);
  stm_inc_clock();
  stm_inc_clock();
  stm_store(&tx_b.w, a);
  int committed = stm_commit();
  ok &= one_tick && committed == 1 && tx_b.w == 5;
  CHECK("tx-family", ok, "the *_tx functions, stm_free2, stm_get_local_stats or stm_inc_clock misbehaved "
        "(attempts %d, a %lu, b %lx, commits %lu -> %lu, max retries %lu, clock tick %d)",
        attempts, tx_a.w, tx_b.w, commits_before, commits_after, max_retries, one_tick);
}

int main(void) {
  stm_init();
  mod_mem_init(0);
  mod_stats_init();
  mod_ab_init(1, NULL);
  stm_init_thread();
  widths();
  types();
  masks();
  reasons();
  nesting();
  irrevocable();
  serial_irrevocable();
  tx_family();
  read_only();
  exit_and_reinit();
  allocation();
  reuse();
  recycled_zombies("reuse-opacity", sizeof(pair_t));
  recycled_zombies("reuse-opacity-unsized", 0);
  misc();
  ab_sampling();
  stm_exit_thread();
  stm_exit();
  printf("%d failures\n", failures);
  return failures;
}
