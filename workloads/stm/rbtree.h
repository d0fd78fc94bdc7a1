/* A red-black tree of integers, transactional (the textbook algorithms with parent
 * pointers; NULL leaves are black). */

#define RED 0
#define BLACK 1

/* Children by direction (0 left, 1 right): each rebalancing case is written once for a
 * direction d, its mirror image being the same code with !d. */
typedef struct node {
  stm_word_t key;
  stm_word_t color;
  struct node *child[2], *parent;
} node_t;

typedef struct set {
  node_t *root;
} set_t;

static set_t *set_new(long range) {
  (void)range;
  set_t *s = malloc(sizeof *s);
  s->root = NULL;
  return s;
}

#define LD(field) ((node_t *)TX_LOAD(&(field)))
#define KEY(n) ((long)TX_LOAD(&(n)->key))
#define COLOR(n) ((n) == NULL ? BLACK : (int)TX_LOAD(&(n)->color))
#define CHILD(n, d) LD((n)->child[d])
#define LEFT(n) CHILD(n, 0)
#define RIGHT(n) CHILD(n, 1)
#define PARENT(n) LD((n)->parent)
#define SET(field, v) TX_STORE(&(field), (v))
#define SET_COLOR(n, c) TX_STORE(&(n)->color, (c))

/* Rotates x towards direction d: its child on side !d takes its place (d = 0: a left
 * rotation). */
static void rotate(set_t *s, node_t *x, int d) {
  node_t *y = CHILD(x, !d), *b = CHILD(y, d), *xp = PARENT(x);
  SET(x->child[!d], b);
  if (b != NULL) SET(b->parent, x);
  SET(y->parent, xp);
  if (xp == NULL) SET(s->root, y);
  else SET(xp->child[x == RIGHT(xp)], y);
  SET(y->child[d], x);
  SET(x->parent, y);
}

static void insert_fixup(set_t *s, node_t *z) {
  node_t *p;
  while ((p = PARENT(z)) != NULL && COLOR(p) == RED) {
    node_t *g = PARENT(p);
    int d = p != LEFT(g); /* the side of p under g */
    node_t *u = CHILD(g, !d);
    if (COLOR(u) == RED) {
      SET_COLOR(p, BLACK);
      SET_COLOR(u, BLACK);
      SET_COLOR(g, RED);
      z = g;
    } else {
      if (z == CHILD(p, !d)) {
        z = p;
        rotate(s, z, d);
        p = PARENT(z);
      }
      SET_COLOR(p, BLACK);
      SET_COLOR(g, RED);
      rotate(s, g, !d);
    }
  }
  SET_COLOR(LD(s->root), BLACK);
}

static void delete_fixup(set_t *s, node_t *x, node_t *xp) {
  while (x != LD(s->root) && COLOR(x) == BLACK) {
    int d = x != LEFT(xp); /* the side of x under xp */
    node_t *w = CHILD(xp, !d);
    if (COLOR(w) == RED) {
      SET_COLOR(w, BLACK);
      SET_COLOR(xp, RED);
      rotate(s, xp, d);
      w = CHILD(xp, !d);
    }
    if (COLOR(LEFT(w)) == BLACK && COLOR(RIGHT(w)) == BLACK) {
      SET_COLOR(w, RED);
      x = xp;
      xp = PARENT(x);
    } else {
      if (COLOR(CHILD(w, !d)) == BLACK) {
        SET_COLOR(CHILD(w, d), BLACK);
        SET_COLOR(w, RED);
        rotate(s, w, !d);
        w = CHILD(xp, !d);
      }
      SET_COLOR(w, COLOR(xp));
      SET_COLOR(xp, BLACK);
      SET_COLOR(CHILD(w, !d), BLACK);
      rotate(s, xp, d);
      x = LD(s->root);
      xp = NULL;
    }
  }
  if (x != NULL) SET_COLOR(x, BLACK);
}

static int set_contains(set_t *s, long key) {
  int found;
  TX_BEGIN(1);
  node_t *n = LD(s->root);
  long k = 0;
  while (n != NULL && (k = KEY(n)) != key) n = key < k ? LEFT(n) : RIGHT(n);
  found = n != NULL;
  TX_END();
  return found;
}

static int set_add(set_t *s, long key) {
  int added;
  TX_BEGIN(0);
  node_t *y = NULL, *x = LD(s->root);
  long k = 0;
  added = 1;
  while (x != NULL) {
    y = x;
    k = KEY(x);
    if (k == key) {
      added = 0;
      break;
    }
    x = key < k ? LEFT(x) : RIGHT(x);
  }
  if (added) {
    node_t *z = stm_malloc(sizeof *z);
    z->key = (stm_word_t)key;
    z->color = RED;
    z->child[0] = z->child[1] = NULL;
    z->parent = y;
    if (y == NULL) SET(s->root, z);
    else SET(y->child[key > k], z);
    insert_fixup(s, z);
  }
  TX_END();
  return added;
}

static int set_remove(set_t *s, long key) {
  int removed;
  TX_BEGIN(0);
  node_t *z = LD(s->root);
  long k = 0;
  while (z != NULL && (k = KEY(z)) != key) z = key < k ? LEFT(z) : RIGHT(z);
  removed = z != NULL;
  if (removed) {
    /* y: the node taken out of the tree (z itself, or z's successor whose key z takes). */
    node_t *y = z;
    if (LEFT(z) != NULL && RIGHT(z) != NULL) {
      y = RIGHT(z);
      node_t *l;
      while ((l = LEFT(y)) != NULL) y = l;
    }
    node_t *x = LEFT(y) != NULL ? LEFT(y) : RIGHT(y);
    node_t *xp = PARENT(y);
    if (x != NULL) SET(x->parent, xp);
    if (xp == NULL) SET(s->root, x);
    else SET(xp->child[y != LEFT(xp)], x);
    if (y != z) TX_STORE(&z->key, TX_LOAD(&y->key));
    if (COLOR(y) == BLACK) delete_fixup(s, x, xp);
    stm_free(y, sizeof *y);
  }
  TX_END();
  return removed;
}

/* Black height of the subtree, or -1 when it breaks an invariant (order within (lo, hi),
 * parent links, no red node with a red child, equal black heights). */
static long check_subtree(node_t *n, node_t *parent, long lo, long hi, long *size) {
  if (n == NULL) return 1;
  long k = (long)n->key;
  if (k <= lo || k >= hi || n->parent != parent) return -1;
  for (int d = 0; d < 2; d++)
    if (n->color == RED && n->child[d] && n->child[d]->color == RED) return -1;
  long l = check_subtree(n->child[0], n, lo, k, size);
  long r = check_subtree(n->child[1], n, k, hi, size);
  if (l < 0 || r < 0 || l != r) return -1;
  (*size)++;
  return l + (n->color == BLACK);
}

/* The size, or -1 when the tree is not a valid red-black tree. */
static long set_check(set_t *s) {
  long size = 0;
  if (s->root != NULL && s->root->color != BLACK) return -1;
  return check_subtree(s->root, NULL, -1, 1L << 62, &size) < 0 ? -1 : size;
}
