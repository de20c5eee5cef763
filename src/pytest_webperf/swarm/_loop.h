/*
 * _loop.h: what the native loops share (_hotloop.c, HTTP; _mqttloop.c, MQTT): the
 * headers, the latency histogram, the monotonic clock, growing arrays, the wake heap,
 * a TLS failure's words, and the epoll set with its command eventfd.
 *
 * Included once by each loop, each its own extension module: every function here is
 * static. Two parts:
 *   - before the loop's types: everything but the wake heap;
 *   - the wake heap, included a second time with LOOP_WAKE_HEAP defined, after the loop
 *     defines its `Engine` (fields `heap`, `nheap`, `capheap`) and `conn_t` (fields
 *     `heap_pos`, 1-based, 0: not in the heap, and the key LOOP_WAKE_KEY, a uint64_t
 *     in nanoseconds of now_ns()).
 */
#ifndef LOOP_WAKE_HEAP
#ifndef WEBPERF_LOOP_H
#define WEBPERF_LOOP_H

#define PY_SSIZE_T_CLEAN
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <Python.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#ifdef WEBPERF_TLS /* setup.py: where OpenSSL's headers are */
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#endif

/* ------------------------------------------------------------------ histogram */
/* the same log-linear microsecond buckets as histogram.Histogram (stats/histogram.py):
   values below 512 exact, then 256 sub-buckets per power of two */

#define SUB_BITS 8
#define SUB 256
#define NBUCKETS (42 * SUB)
#define VALUE_MAX ((1ULL << 49) - 1)

typedef struct {
    uint64_t count, total, min, max;
    int lo, hi; /* touched bucket range */
    uint64_t c[NBUCKETS];
} hist_t;

static inline int bucket_index(uint64_t v) {
    if (v < 2 * SUB) return (int)v;
    int shift = 64 - __builtin_clzll(v) - SUB_BITS - 1;
    return shift * SUB + (int)(v >> shift);
}

static void hist_clear(hist_t *h) {
    if (h->hi >= h->lo) memset(&h->c[h->lo], 0, (size_t)(h->hi - h->lo + 1) * sizeof(uint64_t));
    h->count = h->total = h->min = h->max = 0;
    h->lo = NBUCKETS;
    h->hi = -1;
}

static inline void hist_record(hist_t *h, uint64_t v) {
    if (v > VALUE_MAX) v = VALUE_MAX;
    int i = bucket_index(v);
    h->c[i]++;
    if (i < h->lo) h->lo = i;
    if (i > h->hi) h->hi = i;
    if (h->count == 0 || v < h->min) h->min = v;
    if (v > h->max) h->max = v;
    h->count++;
    h->total += v;
}

/* ------------------------------------------------------------------ time, arrays */

static inline uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* *array holds at least need elements of size (doubling from 16); -1: out of memory */
static int grow(void **array, size_t *cap, size_t need, size_t size) {
    if (need <= *cap) return 0;
    size_t ncap = *cap ? *cap * 2 : 16;
    while (ncap < need) ncap *= 2;
    void *p = realloc(*array, ncap * size);
    if (!p) return -1;
    *array = p;
    *cap = ncap;
    return 0;
}

/* ------------------------------------------------------------------ TLS */

#ifdef WEBPERF_TLS
/* a TLS failure's words into reason: the certificate's verification result first, else
   OpenSSL's error, else `what`; the thread's error queue emptied */
static void tls_reason(SSL *ssl, const char *what, char *reason, size_t size) {
    long verify = ssl ? SSL_get_verify_result(ssl) : X509_V_OK;
    unsigned long code = ERR_get_error();
    if (verify != X509_V_OK)
        snprintf(reason, size, "certificate verify failed: %s",
                 X509_verify_cert_error_string(verify));
    else if (code)
        ERR_error_string_n(code, reason, size);
    else
        snprintf(reason, size, "%s", what);
    ERR_clear_error();
}
#endif

/* ------------------------------------------------------------------ the epoll set */

/* an epoll set with an eventfd in it (data.ptr NULL) that wakes the loop for commands;
   -1 with a Python OSError set */
static int loop_open(int *epfd, int *evfd) {
    *epfd = epoll_create1(EPOLL_CLOEXEC);
    *evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (*epfd < 0 || *evfd < 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    if (epoll_ctl(*epfd, EPOLL_CTL_ADD, *evfd, &ev) < 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    return 0;
}

#endif /* WEBPERF_LOOP_H */
#else  /* LOOP_WAKE_HEAP: the wake heap, earliest first, over the loop's Engine and conn_t */

static void heap_swap(Engine *e, size_t i, size_t j) {
    conn_t *a = e->heap[i], *b = e->heap[j];
    e->heap[i] = b;
    e->heap[j] = a;
    b->heap_pos = i + 1;
    a->heap_pos = j + 1;
}

static void heap_up(Engine *e, size_t i) {
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (e->heap[p]->LOOP_WAKE_KEY <= e->heap[i]->LOOP_WAKE_KEY) break;
        heap_swap(e, i, p);
        i = p;
    }
}

static void heap_down(Engine *e, size_t i) {
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < e->nheap && e->heap[l]->LOOP_WAKE_KEY < e->heap[m]->LOOP_WAKE_KEY) m = l;
        if (r < e->nheap && e->heap[r]->LOOP_WAKE_KEY < e->heap[m]->LOOP_WAKE_KEY) m = r;
        if (m == i) break;
        heap_swap(e, i, m);
        i = m;
    }
}

static void heap_remove(Engine *e, conn_t *c) {
    if (!c->heap_pos) return;
    size_t i = c->heap_pos - 1;
    c->heap_pos = 0;
    e->nheap--;
    if (i == e->nheap) return;
    e->heap[i] = e->heap[e->nheap];
    e->heap[i]->heap_pos = i + 1;
    heap_down(e, i);
    heap_up(e, i);
}

/* c into the heap (moved if it is there) with its key set to `at` */
static void heap_set(Engine *e, conn_t *c, uint64_t at) {
    heap_remove(e, c);
    if (grow((void **)&e->heap, &e->capheap, e->nheap + 1, sizeof(conn_t *))) return;
    c->LOOP_WAKE_KEY = at;
    e->heap[e->nheap] = c;
    c->heap_pos = ++e->nheap;
    heap_up(e, e->nheap - 1);
}

#endif /* LOOP_WAKE_HEAP */
