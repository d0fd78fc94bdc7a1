/* A producer-consumer pipeline (pthreads): a producer, STAGES stage threads and the main
 * thread as the consumer pass items through bounded queues; each stage transforms an item
 * and hands it on, so data moves from thread to thread (producer-consumer sharing). */
#include <pthread.h>
#include "common.h"
#define STAGES 4
#define CAP 64

/* Each queue starts on its own cache line, so only the two threads it links share it. */
typedef struct {
    long items[CAP];
    long head, tail;
    pthread_mutex_t lock;
    pthread_cond_t changed;
} __attribute__((aligned(64))) queue;

static queue q[STAGES + 1];
static long count;

static void put(queue *x, long v) {
    pthread_mutex_lock(&x->lock);
    while (x->tail - x->head == CAP) pthread_cond_wait(&x->changed, &x->lock);
    x->items[x->tail++ % CAP] = v;
    pthread_cond_broadcast(&x->changed);
    pthread_mutex_unlock(&x->lock);
}

static long take(queue *x) {
    pthread_mutex_lock(&x->lock);
    while (x->tail == x->head) pthread_cond_wait(&x->changed, &x->lock);
    long v = x->items[x->head++ % CAP];
    pthread_cond_broadcast(&x->changed);
    pthread_mutex_unlock(&x->lock);
    return v;
}

/* Each thread reads the item count once: read in every iteration, the count's line would be
 * shared by every pair of threads, as much as the scheduler lets them interleave. */
static void *produce(void *arg) {
    (void)arg;
    long n = count;
    for (long i = 0; i < n; i++) put(&q[0], i);
    return 0;
}

static void *stage(void *arg) {
    long s = (long)arg, n = count;
    for (long i = 0; i < n; i++) put(&q[s + 1], take(&q[s]) * 3 + s);
    return 0;
}

int main(int argc, char **argv) {
    long n = count = size_arg(argc, argv, 20000);
    for (int s = 0; s <= STAGES; s++) {
        pthread_mutex_init(&q[s].lock, 0);
        pthread_cond_init(&q[s].changed, 0);
    }
    pthread_t th[STAGES], producer;
    pthread_create(&producer, 0, produce, 0);
    for (long s = 0; s < STAGES; s++) pthread_create(&th[s], 0, stage, (void *)s);
    double got = 0, want = 0;
    for (long i = 0; i < n; i++) {
        got += take(&q[STAGES]);
        long v = i;
        for (long s = 0; s < STAGES; s++) v = v * 3 + s;
        want += v;
    }
    pthread_join(producer, 0);
    for (int s = 0; s < STAGES; s++) pthread_join(th[s], 0);
    return check("pipeline", got, want);
}
