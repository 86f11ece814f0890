/* A chained hash table keyed by (kind, pointer or handle), guarded by one mutex: allocation and free
 * are rare next to launches, and exact accounting matters more here than speed. */
#include "allocs.h"

#include <pthread.h>
#include <stdlib.h>

#define BUCKETS 4096

typedef struct node {
    struct node *next;
    uint64_t key;
    uint64_t bytes;
    int kind;
    int dev;
    const void *owner; /* the context whose end frees it, or NULL */
} node;

static node *buckets[BUCKETS];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static unsigned bucket_of(int kind, uint64_t key)
{
    uint64_t h = (key ^ (uint64_t)kind) * 0x9e3779b97f4a7c15ULL;
    return (unsigned)(h >> 52) % BUCKETS;
}

int vgpu_allocs_put(int kind, uint64_t key, int dev, uint64_t bytes)
{
    return vgpu_allocs_put_owned(kind, key, dev, bytes, NULL);
}

int vgpu_allocs_put_owned(int kind, uint64_t key, int dev, uint64_t bytes, const void *owner)
{
    node *n = malloc(sizeof *n);
    if (!n)
        return -1;
    n->owner = owner;
    n->key = key;
    n->kind = kind;
    n->dev = dev;
    n->bytes = bytes;
    unsigned b = bucket_of(kind, key);
    pthread_mutex_lock(&mu);
    n->next = buckets[b];
    buckets[b] = n;
    pthread_mutex_unlock(&mu);
    return 0;
}

int vgpu_allocs_take(int kind, uint64_t key, int *dev, uint64_t *bytes)
{
    unsigned b = bucket_of(kind, key);
    node *found = NULL;
    pthread_mutex_lock(&mu);
    for (node **p = &buckets[b]; *p; p = &(*p)->next) {
        if ((*p)->key == key && (*p)->kind == kind) {
            found = *p;
            *p = found->next;
            break;
        }
    }
    pthread_mutex_unlock(&mu);
    if (!found)
        return -1;
    *dev = found->dev;
    *bytes = found->bytes;
    free(found);
    return 0;
}

void vgpu_allocs_drop_owner(const void *owner, void (*gone)(int dev, uint64_t bytes))
{
    node *dropped = NULL;
    if (!owner)
        return;
    pthread_mutex_lock(&mu);
    for (unsigned b = 0; b < BUCKETS; b++)
        for (node **p = &buckets[b]; *p;) {
            node *n = *p;
            if (n->owner != owner) {
                p = &n->next;
                continue;
            }
            *p = n->next;
            n->next = dropped;
            dropped = n;
        }
    pthread_mutex_unlock(&mu);
    while (dropped) {
        node *next = dropped->next;
        gone(dropped->dev, dropped->bytes);
        free(dropped);
        dropped = next;
    }
}

void vgpu_allocs_forget(void)
{
    /* Called in a forked child; the parent's nodes are copies the child may free. */
    for (unsigned b = 0; b < BUCKETS; b++) {
        node *n = buckets[b];
        buckets[b] = NULL;
        while (n) {
            node *next = n->next;
            free(n);
            n = next;
        }
    }
    pthread_mutex_init(&mu, NULL);
}

int vgpu_grow(void **array, size_t *cap, size_t n, size_t elem)
{
    if (n < *cap)
        return 0;
    size_t bigger = *cap ? *cap * 2 : 64;
    void *moved = realloc(*array, bigger * elem);
    if (!moved)
        return -1;
    *array = moved;
    *cap = bigger;
    return 0;
}
