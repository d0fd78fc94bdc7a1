/* A sorted linked list of integers, transactional: head and tail sentinels. */
#include <limits.h>

typedef struct node {
  stm_word_t val;
  struct node *next;
} node_t;

typedef struct set {
  node_t *head;
} set_t;

static node_t *new_node(long val, node_t *next) {
  node_t *n = stm_malloc(sizeof *n);
  n->val = (stm_word_t)val;
  n->next = next;
  return n;
}

static set_t *set_new(long range) {
  (void)range;
  set_t *s = malloc(sizeof *s);
  s->head = new_node(LONG_MIN, new_node(LONG_MAX, NULL));
  return s;
}

#define NEXT(n) ((node_t *)TX_LOAD(&(n)->next))
#define VAL(n) ((long)TX_LOAD(&(n)->val))

static int set_contains(set_t *s, long val) {
  int found;
  TX_BEGIN(1);
  node_t *next = NEXT(s->head);
  long v;
  while ((v = VAL(next)) < val) next = NEXT(next);
  found = v == val;
  TX_END();
  return found;
}

/* In a transaction: the last node below val, and the one after it (val or above). */
static node_t *locate(set_t *s, long val, node_t **next_out) {
  node_t *prev = s->head, *next = NEXT(prev);
  while (VAL(next) < val) {
    prev = next;
    next = NEXT(next);
  }
  *next_out = next;
  return prev;
}

static int set_add(set_t *s, long val) {
  int added;
  TX_BEGIN(0);
  node_t *next;
  node_t *prev = locate(s, val, &next);
  added = VAL(next) != val;
  if (added) TX_STORE(&prev->next, new_node(val, next));
  TX_END();
  return added;
}

static int set_remove(set_t *s, long val) {
  int removed;
  TX_BEGIN(0);
  node_t *next;
  node_t *prev = locate(s, val, &next);
  removed = VAL(next) == val;
  if (removed) {
    TX_STORE(&prev->next, NEXT(next));
    stm_free(next, sizeof *next);
  }
  TX_END();
  return removed;
}

/* After the run (no transactions): the size, or -1 when the list is not strictly sorted. */
static long set_check(set_t *s) {
  long size = 0, last = LONG_MIN;
  for (node_t *n = s->head->next; n->next != NULL; n = n->next) {
    if ((long)n->val <= last) return -1;
    last = (long)n->val;
    size++;
  }
  return size;
}
