/* sharemap's STM (libsharemap_stm): the C API of TinySTM 1.0.5.
 *
 * Programs written for TinySTM build and run against it unchanged:
 *
 *   stm_init(); ... stm_init_thread();
 *   sigjmp_buf *env = stm_start((stm_tx_attr_t)0);
 *   if (env != NULL) sigsetjmp(*env, 0);      (an abort jumps back here and retries)
 *   x = stm_load(&w); stm_store(&w, x + 1);
 *   stm_commit();
 *
 * Design: write-back with encounter-time locking over a global version clock, read-set
 * validation with snapshot extension (opacity: no transaction sees an inconsistent
 * snapshot), flat nesting. STMap's online thread and data mapping is built in; environment
 * variables SHAREMAP_STMAP* control it (docs/stm.md).
 */
#ifndef SHAREMAP_STM_H
#define SHAREMAP_STM_H

#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define STM_VERSION "1.0.5"
#define STM_VERSION_NB 105

#ifdef __cplusplus
extern "C" {
#endif

/* A thread's transaction context (opaque). */
struct stm_tx;

/* The unit of transactional access: one machine word. */
typedef uintptr_t stm_word_t;

/* Attributes of a transaction: (stm_tx_attr_t)0 for the defaults, or {{.id = i, .read_only = 1}}. */
typedef union stm_tx_attr {
  struct {
    unsigned int id : 16;          /* the atomic block's identifier (mod_ab, trace events) */
    unsigned int read_only : 1;    /* a hint */
    unsigned int visible_reads : 1; /* accepted; reads are invisible */
    unsigned int no_retry : 1;     /* on abort, return failure instead of jumping back */
    unsigned int no_extend : 1;    /* never extend the snapshot */
  };
  int32_t attrs;
} stm_tx_attr_t;

/* What sigsetjmp returns after an abort: the reason, with STM_PATH_INSTRUMENTED set. */
enum {
  STM_PATH_INSTRUMENTED = 0x01,
  STM_PATH_UNINSTRUMENTED = 0x02,
  STM_ABORT_EXPLICIT = (1 << 5),
  STM_ABORT_NO_RETRY = (1 << 5) | (0x01 << 8),
  STM_ABORT_IMPLICIT = (1 << 6),
  STM_ABORT_RR_CONFLICT = (1 << 6) | (0x01 << 8),
  STM_ABORT_RW_CONFLICT = (1 << 6) | (0x02 << 8),
  STM_ABORT_WR_CONFLICT = (1 << 6) | (0x03 << 8),
  STM_ABORT_WW_CONFLICT = (1 << 6) | (0x04 << 8),
  STM_ABORT_VAL_READ = (1 << 6) | (0x05 << 8),
  STM_ABORT_VAL_WRITE = (1 << 6) | (0x06 << 8),
  STM_ABORT_VALIDATE = (1 << 6) | (0x07 << 8),
  STM_ABORT_IRREVOCABLE = (1 << 6) | (0x09 << 8),
  STM_ABORT_KILLED = (1 << 6) | (0x0A << 8),
  STM_ABORT_SIGNAL = (1 << 6) | (0x0B << 8),
  STM_ABORT_EXTEND_WS = (1 << 6) | (0x0C << 8),
  STM_ABORT_OTHER = (1 << 6) | (0x0F << 8)
};

/* The library: once, from the main thread (stm_exit writes STMap's matrix file if asked). */
void stm_init(void);
void stm_exit(void);

/* Each transactional thread; stm_init_thread is idempotent, and a thread may exit and
 * initialise again. */
struct stm_tx *stm_init_thread(void);
void stm_exit_thread(void);
void stm_exit_thread_tx(struct stm_tx *tx);
struct stm_tx *stm_current_tx(void);

/* Transactions. stm_start returns the environment to sigsetjmp on, or NULL when nested
 * (flat nesting). stm_commit returns 1, or jumps back to retry (0 with no_retry). */
sigjmp_buf *stm_start(stm_tx_attr_t attr);
int stm_commit(void);
void stm_abort(int abort_reason);

stm_word_t stm_load(volatile stm_word_t *addr);
void stm_store(volatile stm_word_t *addr, stm_word_t value);
/* Writes only the bits of mask. */
void stm_store2(volatile stm_word_t *addr, stm_word_t value, stm_word_t mask);

int stm_active(void);
int stm_aborted(void);
int stm_irrevocable(void);
int stm_killed(void);
sigjmp_buf *stm_get_env(void);
stm_tx_attr_t stm_get_attributes(void);

/* Statistics of the calling thread by name (TinySTM's: nb_commits, nb_aborts,
 * max_retries, read_set_size, ...; STMap's: stmap_enabled, stmap_thread, stmap_cpu,
 * stmap_samples, stmap_decisions, stmap_remaps, stmap_migrations, stmap_pages_moved,
 * stmap_distinct_addresses). 1 when known. */
int stm_get_stats(const char *name, void *val);

/* "compile_flags", "design", "contention_manager" (const char *), "initial_rw_set_size",
 * "stmap_si", "stmap_mi" (int). */
int stm_get_parameter(const char *name, void *val);
int stm_set_parameter(const char *name, void *val);

int stm_create_specific(void);
void *stm_get_specific(int key);
void stm_set_specific(int key, void *data);

int stm_register(void (*on_thread_init)(void *arg),
                 void (*on_thread_exit)(void *arg),
                 void (*on_start)(void *arg),
                 void (*on_precommit)(void *arg),
                 void (*on_commit)(void *arg),
                 void (*on_abort)(void *arg),
                 void *arg);

/* Accesses outside transactions, atomic with respect to them. */
stm_word_t stm_unit_load(volatile stm_word_t *addr, stm_word_t *timestamp);
int stm_unit_store(volatile stm_word_t *addr, stm_word_t value, stm_word_t *timestamp);
int stm_unit_store2(volatile stm_word_t *addr, stm_word_t value, stm_word_t mask, stm_word_t *timestamp);

void stm_set_extension(int enable, stm_word_t *timestamp);
stm_word_t stm_get_clock(void);

/* Irrevocability: the transaction never aborts afterwards. Serial: it waits for the others
 * to end, and transactions that have not started wait until it ends. Returns 1 at once when
 * the transaction has touched nothing yet, else aborts and restarts irrevocable (a serial
 * one with STM_PATH_UNINSTRUMENTED from sigsetjmp: it runs alone). Outside a transaction:
 * the next one starts irrevocable; returns 0. */
int stm_set_irrevocable(int serial);

/* The same functions on an explicit descriptor (from stm_init_thread or stm_current_tx;
 * NULL is the calling thread's), as TinySTM's *_tx family. */
sigjmp_buf *stm_start_tx(struct stm_tx *tx, stm_tx_attr_t attr);
int stm_commit_tx(struct stm_tx *tx);
void stm_abort_tx(struct stm_tx *tx, int abort_reason);
stm_word_t stm_load_tx(struct stm_tx *tx, volatile stm_word_t *addr);
void stm_store_tx(struct stm_tx *tx, volatile stm_word_t *addr, stm_word_t value);
void stm_store2_tx(struct stm_tx *tx, volatile stm_word_t *addr, stm_word_t value, stm_word_t mask);
int stm_active_tx(struct stm_tx *tx);
int stm_aborted_tx(struct stm_tx *tx);
int stm_irrevocable_tx(struct stm_tx *tx);
int stm_killed_tx(struct stm_tx *tx);
sigjmp_buf *stm_get_env_tx(struct stm_tx *tx);
stm_tx_attr_t stm_get_attributes_tx(struct stm_tx *tx);
int stm_get_stats_tx(struct stm_tx *tx, const char *name, void *val);
void *stm_get_specific_tx(struct stm_tx *tx, int key);
void stm_set_specific_tx(struct stm_tx *tx, int key, void *data);
void stm_set_extension_tx(struct stm_tx *tx, int enable, stm_word_t *timestamp);
int stm_set_irrevocable_tx(struct stm_tx *tx, int serial);

/* Advances the global clock by one (TinySTM's, for its regression tests). */
void stm_inc_clock(void);

#ifdef __cplusplus
}
#endif

#endif
