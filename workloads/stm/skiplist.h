/* A skip list of integers, transactional (levels drawn with probability 1/2, at most
 * MAX_LEVEL), ending in NULL at every level. */

#define MAX_LEVEL 24

typedef struct node {
  stm_word_t val;
  stm_word_t level;
  struct node *next[];
} node_t;

typedef struct set {
  node_t *head;
  int max_level;
} set_t;

static node_t *alloc_node(long val, int level) {
  node_t *n = stm_malloc(sizeof *n + level * sizeof(node_t *));
  n->val = (stm_word_t)val;
  n->level = (stm_word_t)level;
  return n;
}

static set_t *set_new(long range) {
  set_t *s = malloc(sizeof *s);
  int levels = 1;
  while (levels < MAX_LEVEL && (1L << levels) < range) levels++;
  s->max_level = levels;
  s->head = alloc_node(-1, levels);
  for (int i = 0; i < levels; i++) s->head->next[i] = NULL;
  return s;
}

#define NEXT(n, i) ((node_t *)TX_LOAD(&(n)->next[i]))
#define VAL(n) ((long)TX_LOAD(&(n)->val))

/* Per-thread level draws (the caller's random state). */
static __thread unsigned long level_seed;

static int random_level(int max) {
  int l = 1;
  while (l < max && (next_random(&level_seed) & 1)) l++;
  return l;
}

static int set_contains(set_t *s, long val) {
  int found;
  TX_BEGIN(1);
  node_t *x = s->head, *n = NULL;
  for (int i = s->max_level - 1; i >= 0; i--) {
    while ((n = NEXT(x, i)) != NULL && VAL(n) < val) x = n;
  }
  found = n != NULL && VAL(n) == val;
  TX_END();
  return found;
}

/* In a transaction: at each level the last node below val; the node after it at level 0. */
static node_t *locate(set_t *s, long val, node_t **preds) {
  node_t *x = s->head, *n = NULL;
  for (int i = s->max_level - 1; i >= 0; i--) {
    while ((n = NEXT(x, i)) != NULL && VAL(n) < val) x = n;
    preds[i] = x;
  }
  return n;
}

static int set_add(set_t *s, long val) {
  int added;
  int level = random_level(s->max_level);
  TX_BEGIN(0);
  node_t *preds[MAX_LEVEL];
  node_t *n = locate(s, val, preds);
  added = n == NULL || VAL(n) != val;
  if (added) {
    node_t *fresh = alloc_node(val, level);
    for (int i = 0; i < level; i++) fresh->next[i] = NEXT(preds[i], i);
    for (int i = 0; i < level; i++) TX_STORE(&preds[i]->next[i], fresh);
  }
  TX_END();
  return added;
}

static int set_remove(set_t *s, long val) {
  int removed;
  TX_BEGIN(0);
  node_t *preds[MAX_LEVEL];
  node_t *n = locate(s, val, preds);
  removed = n != NULL && VAL(n) == val;
  if (removed) {
    int level = (int)TX_LOAD(&n->level);
    for (int i = 0; i < level; i++) TX_STORE(&preds[i]->next[i], NEXT(n, i));
    stm_free(n, sizeof *n + level * sizeof(node_t *));
  }
  TX_END();
  return removed;
}

/* The size, or -1 when level 0 is unsorted or a higher level is not a sublist of the
 * one below. */
static long set_check(set_t *s) {
  long size = 0, last = -1;
  for (node_t *n = s->head->next[0]; n != NULL; n = n->next[0]) {
    if ((long)n->val <= last || n->level < 1 || (int)n->level > s->max_level) return -1;
    last = (long)n->val;
    size++;
  }
  for (int i = 1; i < s->max_level; i++) {
    node_t *below = s->head->next[i - 1];
    for (node_t *n = s->head->next[i]; n != NULL; n = n->next[i]) {
      while (below != NULL && below != n) below = below->next[i - 1];
      if (below == NULL || (int)n->level <= i) return -1;
    }
  }
  return size;
}
