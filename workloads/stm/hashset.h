/* A hash set of integers, transactional: a fixed table of buckets (a power of two at least
 * half the key range), each a sorted list. */

typedef struct node {
  stm_word_t val;
  struct node *next;
} node_t;

typedef struct set {
  unsigned long mask;
  node_t **buckets;
} set_t;

static set_t *set_new(long range) {
  set_t *s = malloc(sizeof *s);
  unsigned long n = 1;
  while (n < (unsigned long)range / 2) n <<= 1;
  s->mask = n - 1;
  s->buckets = calloc(n, sizeof *s->buckets);
  return s;
}

static inline node_t **bucket(set_t *s, long val) {
  return &s->buckets[(unsigned long)val & s->mask];
}

#define NEXT(n) ((node_t *)TX_LOAD(&(n)->next))
#define VAL(n) ((long)TX_LOAD(&(n)->val))

static int set_contains(set_t *s, long val) {
  int found;
  TX_BEGIN(1);
  node_t *n = (node_t *)TX_LOAD(bucket(s, val));
  while (n != NULL && VAL(n) < val) n = NEXT(n);
  found = n != NULL && VAL(n) == val;
  TX_END();
  return found;
}

/* In a transaction: the link to the first node of val's bucket at or above val, and it. */
static node_t **locate(set_t *s, long val, node_t **node_out) {
  node_t **link = bucket(s, val);
  node_t *n = (node_t *)TX_LOAD(link);
  while (n != NULL && VAL(n) < val) {
    link = &n->next;
    n = NEXT(n);
  }
  *node_out = n;
  return link;
}

static int set_add(set_t *s, long val) {
  int added;
  TX_BEGIN(0);
  node_t *n;
  node_t **link = locate(s, val, &n);
  added = n == NULL || VAL(n) != val;
  if (added) {
    node_t *fresh = stm_malloc(sizeof *fresh);
    fresh->val = (stm_word_t)val;
    fresh->next = n;
    TX_STORE(link, fresh);
  }
  TX_END();
  return added;
}

static int set_remove(set_t *s, long val) {
  int removed;
  TX_BEGIN(0);
  node_t *n;
  node_t **link = locate(s, val, &n);
  removed = n != NULL && VAL(n) == val;
  if (removed) {
    TX_STORE(link, NEXT(n));
    stm_free(n, sizeof *n);
  }
  TX_END();
  return removed;
}

/* The size, or -1 when a bucket is unsorted or holds a key that hashes elsewhere. */
static long set_check(set_t *s) {
  long size = 0;
  for (unsigned long b = 0; b <= s->mask; b++) {
    long last = -1;
    for (node_t *n = s->buckets[b]; n != NULL; n = n->next) {
      long v = (long)n->val;
      if (v <= last || ((unsigned long)v & s->mask) != b) return -1;
      last = v;
      size++;
    }
  }
  return size;
}
