/* A red-black tree of integers, transactional (the textbook algorithms with parent
 * pointers; NULL leaves are black). */

#define RED 0
#define BLACK 1

typedef struct node {
  stm_word_t key;
  stm_word_t color;
  struct node *left, *right, *parent;
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
#define LEFT(n) LD((n)->left)
#define RIGHT(n) LD((n)->right)
#define PARENT(n) LD((n)->parent)
#define SET(field, v) TX_STORE(&(field), (v))
#define SET_COLOR(n, c) TX_STORE(&(n)->color, (c))

static void rotate_left(set_t *s, node_t *x) {
  node_t *y = RIGHT(x), *b = LEFT(y), *xp = PARENT(x);
  SET(x->right, b);
  if (b != NULL) SET(b->parent, x);
  SET(y->parent, xp);
  if (xp == NULL) SET(s->root, y);
  else if (x == LEFT(xp)) SET(xp->left, y);
  else SET(xp->right, y);
  SET(y->left, x);
  SET(x->parent, y);
}

static void rotate_right(set_t *s, node_t *x) {
  node_t *y = LEFT(x), *b = RIGHT(y), *xp = PARENT(x);
  SET(x->left, b);
  if (b != NULL) SET(b->parent, x);
  SET(y->parent, xp);
  if (xp == NULL) SET(s->root, y);
  else if (x == RIGHT(xp)) SET(xp->right, y);
  else SET(xp->left, y);
  SET(y->right, x);
  SET(x->parent, y);
}

static void insert_fixup(set_t *s, node_t *z) {
  node_t *p;
  while ((p = PARENT(z)) != NULL && COLOR(p) == RED) {
    node_t *g = PARENT(p);
    if (p == LEFT(g)) {
      node_t *u = RIGHT(g);
      if (COLOR(u) == RED) {
        SET_COLOR(p, BLACK);
        SET_COLOR(u, BLACK);
        SET_COLOR(g, RED);
        z = g;
      } else {
        if (z == RIGHT(p)) {
          z = p;
          rotate_left(s, z);
          p = PARENT(z);
        }
        SET_COLOR(p, BLACK);
        SET_COLOR(g, RED);
        rotate_right(s, g);
      }
    } else {
      node_t *u = LEFT(g);
      if (COLOR(u) == RED) {
        SET_COLOR(p, BLACK);
        SET_COLOR(u, BLACK);
        SET_COLOR(g, RED);
        z = g;
      } else {
        if (z == LEFT(p)) {
          z = p;
          rotate_right(s, z);
          p = PARENT(z);
        }
        SET_COLOR(p, BLACK);
        SET_COLOR(g, RED);
        rotate_left(s, g);
      }
    }
  }
  SET_COLOR(LD(s->root), BLACK);
}

static void delete_fixup(set_t *s, node_t *x, node_t *xp) {
  while (x != LD(s->root) && COLOR(x) == BLACK) {
    if (x == LEFT(xp)) {
      node_t *w = RIGHT(xp);
      if (COLOR(w) == RED) {
        SET_COLOR(w, BLACK);
        SET_COLOR(xp, RED);
        rotate_left(s, xp);
        w = RIGHT(xp);
      }
      if (COLOR(LEFT(w)) == BLACK && COLOR(RIGHT(w)) == BLACK) {
        SET_COLOR(w, RED);
        x = xp;
        xp = PARENT(x);
      } else {
        if (COLOR(RIGHT(w)) == BLACK) {
          SET_COLOR(LEFT(w), BLACK);
          SET_COLOR(w, RED);
          rotate_right(s, w);
          w = RIGHT(xp);
        }
        SET_COLOR(w, COLOR(xp));
        SET_COLOR(xp, BLACK);
        SET_COLOR(RIGHT(w), BLACK);
        rotate_left(s, xp);
        x = LD(s->root);
        xp = NULL;
      }
    } else {
      node_t *w = LEFT(xp);
      if (COLOR(w) == RED) {
        SET_COLOR(w, BLACK);
        SET_COLOR(xp, RED);
        rotate_right(s, xp);
        w = LEFT(xp);
      }
      if (COLOR(RIGHT(w)) == BLACK && COLOR(LEFT(w)) == BLACK) {
        SET_COLOR(w, RED);
        x = xp;
        xp = PARENT(x);
      } else {
        if (COLOR(LEFT(w)) == BLACK) {
          SET_COLOR(RIGHT(w), BLACK);
          SET_COLOR(w, RED);
          rotate_left(s, w);
          w = LEFT(xp);
        }
        SET_COLOR(w, COLOR(xp));
        SET_COLOR(xp, BLACK);
        SET_COLOR(LEFT(w), BLACK);
        rotate_right(s, xp);
        x = LD(s->root);
        xp = NULL;
      }
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
    z->left = z->right = NULL;
    z->parent = y;
    if (y == NULL) SET(s->root, z);
    else if (key < k) SET(y->left, z);
    else SET(y->right, z);
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
    else if (y == LEFT(xp)) SET(xp->left, x);
    else SET(xp->right, x);
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
  if (n->color == RED && ((n->left && n->left->color == RED) || (n->right && n->right->color == RED))) return -1;
  long l = check_subtree(n->left, n, lo, k, size);
  long r = check_subtree(n->right, n, k, hi, size);
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
