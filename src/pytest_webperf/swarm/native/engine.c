/*
 * engine.c: the native engine, whatever the protocol (engine.h is the seam).
 *
 * One Engine per generator process: one thread, one epoll set, every connection of the
 * process's users, registered once, edge-triggered. The thread never takes the GIL:
 * Python adds and removes connections, opens tickets, lets publishers go, stops the
 * sending and ends the run through a command queue (a mutex and an eventfd); take()
 * swaps the double-buffered interval figures under the same mutex (python.c).
 *
 * The transport is the engine's: the connect gate (at most max_connecting connects in
 * flight: 10,000 SYNs at once overflow a server's accept queue), source addresses (past
 * one address's ~28,000 ports), TLS through conn_send/conn_recv (SNI, ALPN, verified
 * against a CA when given, the last session resumed when asked; the handshake and every
 * record driven by the same edges), the write queue (allocated only when a send meets a
 * full socket buffer), reads until EAGAIN (one recv per arrival of data on plain TCP),
 * reconnects with exponential back-off, connect deadlines. The wake heap holds whatever
 * a connection waits for: a reconnect, its next paced request or message, a ping.
 *
 * The load shapes of requests are the engine's too (HTTP/1.1's and HTTP/2's alike):
 * closed (the next request when the last is answered), paced (one per period, a late
 * schedule never skipped), counted (a shared number of tickets opened by Python; the
 * phase is finished when every ticket's request completed) and arrival rate (k6's
 * constant arrival rate: due requests handed to the first-joined idle connection, late
 * never dropped).
 */
#include "engine.h"

/* ------------------------------------------------------------------ arrays, the heap */

/* *array holds at least need elements of size (doubling from 16); -1: out of memory */
int grow(void **array, size_t *cap, size_t need, size_t size) {
    if (need <= *cap) return 0;
    size_t ncap = *cap ? *cap * 2 : 16;
    while (ncap < need) ncap *= 2;
    void *p = realloc(*array, ncap * size);
    if (!p) return -1;
    *array = p;
    *cap = ncap;
    return 0;
}

void free_all(void **pointers, size_t n) {
    for (size_t i = 0; i < n; i++) free(pointers[i]);
}

uint64_t engine_random(Engine *e) {
    uint64_t x = e->rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return e->rng = x;
}

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
        if (e->heap[p]->wake <= e->heap[i]->wake) break;
        heap_swap(e, i, p);
        i = p;
    }
}

static void heap_down(Engine *e, size_t i) {
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < e->nheap && e->heap[l]->wake < e->heap[m]->wake) m = l;
        if (r < e->nheap && e->heap[r]->wake < e->heap[m]->wake) m = r;
        if (m == i) break;
        heap_swap(e, i, m);
        i = m;
    }
}

void heap_remove(Engine *e, conn_t *c) {
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

/* c waits in the heap until `at` (moved if it is there) */
void conn_wake(Engine *e, conn_t *c, uint64_t at) {
    heap_remove(e, c);
    if (grow((void **)&e->heap, &e->capheap, e->nheap + 1, sizeof(conn_t *))) return;
    c->wake = at;
    e->heap[e->nheap] = c;
    c->heap_pos = ++e->nheap;
    heap_up(e, e->nheap - 1);
}

/* ------------------------------------------------------------------ figures */

/* one more failure (n of them) of (kind, key) in a table, its first example kept */
void count_fail(fail_t *fails, int *nfails, int kind, int key, uint64_t n, int64_t a, int64_t b,
                const char *raw, size_t len) {
    for (int i = 0; i < *nfails; i++)
        if (fails[i].kind == kind && fails[i].key == key) { fails[i].n += n; return; }
    if (*nfails >= MAX_FAILS) { /* a flood of kinds: the last slot takes the rest */
        fails[MAX_FAILS - 1].n += n;
        return;
    }
    fail_t *f = &fails[(*nfails)++];
    *f = (fail_t){.kind = kind, .key = key, .n = n, .a = a, .b = b};
    if (len > EXAMPLE_BYTES) len = EXAMPLE_BYTES;
    f->len = raw ? (int)len : 0;
    if (raw && len) memcpy(f->raw, raw, len);
}

/* a failure of an entry's request (or a connection's): the interval's and the run's */
void record_fail(Engine *e, int entry, int kind, int key, uint64_t n, int64_t a, int64_t b,
                 const char *raw, size_t len) {
    pthread_mutex_lock(&e->lock);
    stats_t *s = &e->cur[entry];
    count_fail(s->fails, &s->nfails, kind, key, n, a, b, raw, len);
    pthread_mutex_unlock(&e->lock);
    count_fail(e->ledger.fails, &e->ledger.nfails, kind, key, n, a, b, raw, len);
}

void record_value(Engine *e, int which, uint64_t us) {
    pthread_mutex_lock(&e->lock);
    hist_record(&e->cur->h[which], us);
    pthread_mutex_unlock(&e->lock);
}

/* a message answered, an event received (latency_us UINT64_MAX: none to record) */
void record_ok(Engine *e, uint64_t latency_us, uint64_t bytes) {
    pthread_mutex_lock(&e->lock);
    e->cur->ok++;
    e->cur->received++;
    e->cur->bytes += bytes;
    if (latency_us != UINT64_MAX) hist_record(&e->cur->h[H_LATENCY], latency_us);
    pthread_mutex_unlock(&e->lock);
}

void note_receipt(Engine *e, uint64_t now) {
    ATOMIC_SET(e->ledger.last_receipt_ns, (long long)now);
}

/* message accounting: sequence `seq` of a stream arrived */
void acct_seen(acct_t *a, uint64_t seq) {
    if (!a->distinct) a->first = seq;
    if (seq >= a->top) { /* a gap: what is missing may still come, out of order */
        uint64_t advance = seq + 1 - a->top;
        if (advance >= WINDOW) {
            memset(a->ring, 0, sizeof a->ring);
        } else {
            for (uint64_t s = a->top; s <= seq; s++) a->ring[(s % WINDOW) / 64] &= ~(1ULL << (s % 64));
        }
        a->ring[(seq % WINDOW) / 64] |= 1ULL << (seq % 64);
        a->top = seq + 1;
        a->distinct++;
        return;
    }
    if (a->top - seq > WINDOW) {
        a->distinct++;
        a->reordered++;
        a->beyond_window++;
        return;
    }
    uint64_t bit = 1ULL << (seq % 64), *w = &a->ring[(seq % WINDOW) / 64];
    if (*w & bit) { a->duplicated++; return; }
    *w |= bit;
    a->distinct++;
    a->reordered++;
}

/* ------------------------------------------------------------------ TLS and I/O */

#ifdef WEBPERF_TLS
/* the failure's words into e->tls_message (the certificate's verification result first,
   else OpenSSL's error, else `what`); errno E_TLS_FAILED; the error queue emptied */
static void tls_failed(Engine *e, conn_t *c, const char *what) {
    long verify = c->ssl ? SSL_get_verify_result(c->ssl) : X509_V_OK;
    unsigned long code = ERR_get_error();
    char *m = e->tls_message;
    if (verify != X509_V_OK)
        snprintf(m, EXAMPLE_BYTES, "certificate verify failed: %s",
                 X509_verify_cert_error_string(verify));
    else if (code)
        ERR_error_string_n(code, m, EXAMPLE_BYTES);
    else
        snprintf(m, EXAMPLE_BYTES, "%s", what);
    ERR_clear_error();
    errno = E_TLS_FAILED;
}

/* what an SSL call's result means: > 0 done; 0 the peer closed (*eof); -1 with errno
   (EAGAIN: wait for an edge) */
static ssize_t tls_result(Engine *e, conn_t *c, int r, int *eof) {
    int err = SSL_get_error(c->ssl, r);
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) { errno = EAGAIN; return -1; }
    if (err == SSL_ERROR_ZERO_RETURN) { *eof = 1; return 0; }
    if (err == SSL_ERROR_SYSCALL && ERR_peek_error() == 0) {
        if (r == 0 || errno == 0) { /* the peer closed without close_notify */
            *eof = 1;
            return 0;
        }
        return -1; /* errno says */
    }
    tls_failed(e, c, "TLS error");
    return -1;
}
#endif

/* bytes sent, or -1 with errno (EAGAIN: EPOLLOUT resumes) */
static ssize_t conn_send(Engine *e, conn_t *c, const uint8_t *buf, size_t len) {
#ifdef WEBPERF_TLS
    if (c->ssl) {
        int r = SSL_write(c->ssl, buf, len > (1U << 30) ? (1 << 30) : (int)len);
        if (r > 0) return r;
        int eof = 0;
        ssize_t n = tls_result(e, c, r, &eof);
        if (eof) errno = EPIPE;
        return n < 0 ? n : -1;
    }
#endif
    (void)e;
    return send(c->fd, buf, len, MSG_NOSIGNAL);
}

/* bytes received, 0 at the end of the stream, or -1 with errno (EAGAIN: drained) */
static ssize_t conn_recv(Engine *e, conn_t *c, uint8_t *buf, size_t len) {
#ifdef WEBPERF_TLS
    if (c->ssl) {
        int r = SSL_read(c->ssl, buf, (int)len);
        if (r > 0) return r;
        int eof = 0;
        ssize_t n = tls_result(e, c, r, &eof);
        return eof ? 0 : n;
    }
#endif
    (void)e;
    return recv(c->fd, buf, len, 0);
}

static void tls_free(conn_t *c) {
#ifdef WEBPERF_TLS
    if (!c->ssl) return;
    if (SSL_is_init_finished(c->ssl) &&
        SSL_CTX_get_session_cache_mode(SSL_get_SSL_CTX(c->ssl)) != SSL_SESS_CACHE_OFF) {
        SSL_SESSION *session = SSL_get1_session(c->ssl); /* resume: keep its latest ticket */
        if (session) {
            if (c->resume) SSL_SESSION_free(c->resume);
            c->resume = session;
        }
        /* closed without close_notify (no write here): as if it had been, or SSL_free
           marks the session not resumable */
        SSL_set_shutdown(c->ssl, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
    }
    SSL_free(c->ssl);
#endif
    c->ssl = NULL;
}

/* ------------------------------------------------------------------ a connection's life */

static void mark_tried(Engine *e, conn_t *c) {
    if (c->tried) return;
    c->tried = 1;
    ATOMIC_ADD(e->ledger.tried, 1);
}

static int gated(conn_t *c) {
    return c->state == T_CONNECTING || c->state == T_TLS || (c->state == T_UP && !c->opened);
}

void conn_close(Engine *e, conn_t *c) {
    tls_free(c);
    if (c->fd >= 0) {
        epoll_ctl(e->epfd, EPOLL_CTL_DEL, c->fd, NULL);
        close(c->fd);
        c->fd = -1;
    }
    if (c->opened) ATOMIC_ADD(e->ledger.open, -1);
    else if (e->max_connecting && gated(c)) e->connecting--;
    free(c->wbuf); /* what was not sent dies with the connection */
    c->wbuf = NULL;
    c->wlen = c->wpos = c->wcap = 0;
    c->wblocked = c->reading = c->peer_closed = c->opened = c->closing = 0;
    if (c->state != T_DONE) c->state = T_IDLE;
}

/* the session's opening was answered (an upgrade, a stream's head, a CONNACK) */
void conn_opened(Engine *e, conn_t *c, uint64_t now) {
    if (e->max_connecting) e->connecting--;
    c->opened = 1;
    c->backoff_ns = 0;
    mark_tried(e, c);
    long long open = ATOMIC_ADD(e->ledger.open, 1);
    if (open > ATOMIC_GET(e->ledger.open_peak)) ATOMIC_SET(e->ledger.open_peak, open);
    e->ledger.opens++;
    hist_record(&e->ledger.opening, (now - c->started) / 1000);
}

/* the connection ended: it reconnects after `pause_ns` unless the run is ending (or it
   does not reconnect at all) */
void conn_retire(Engine *e, conn_t *c, uint64_t now, uint64_t pause_ns, int reconnect) {
    heap_remove(e, c);
    conn_close(e, c);
    if (!reconnect || e->stop_sending || e->closing_all || c->removed) {
        c->state = T_DONE;
        return;
    }
    c->state = T_WAIT;
    e->ledger.reconnects++;
    conn_wake(e, c, now + pause_ns);
}

/* a failure ends a connection that is not a request's: recorded (the interval's and the
   run's), counted as an opening's failure or a drop, then a reconnect after its back-off
   (10 ms doubling to 1 s), or the end of it */
void conn_lost(Engine *e, conn_t *c, uint64_t now, int kind, int key, const char *raw,
               size_t len, int reconnect) {
    record_fail(e, 0, kind, key, 1, 0, 0, raw, len);
    if (!c->opened) {
        ATOMIC_ADD(e->ledger.open_failures, 1);
        mark_tried(e, c);
    } else {
        ATOMIC_ADD(e->ledger.drops, 1);
    }
    c->backoff_ns = c->backoff_ns ? c->backoff_ns * 2 : BACKOFF_NS;
    if (c->backoff_ns > BACKOFF_MAX_NS) c->backoff_ns = BACKOFF_MAX_NS;
    conn_retire(e, c, now, c->backoff_ns, reconnect);
}

/* a socket call failed: the session's failure, named (connecting: the connect's) */
void conn_fail_errno(Engine *e, conn_t *c, uint64_t now, int err) {
    if (err == E_TLS_FAILED) {
        e->session->fail(e, c, now, K_TLS, 0, e->tls_message, strlen(e->tls_message));
        return;
    }
    int connecting = c->state == T_CONNECTING || c->state == T_TLS;
    e->session->fail(e, c, now, connecting ? K_CONNECT_ERRNO : K_IO_ERRNO, err, NULL, 0);
}

static void do_connect(Engine *e, conn_t *c, uint64_t now) {
    c->state = T_CONNECTING;
    c->started = now;
    c->deadline = now + e->timeout_ns;
    if (e->max_connecting) e->connecting++;
    int fd = socket(e->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) { conn_fail_errno(e, c, now, errno); return; }
    c->fd = fd;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (e->nsources && e->addr.ss_family == AF_INET) { /* a 4-tuple space of ~28k ports each */
        setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
        struct sockaddr_in *src = &e->sources[e->next_source++ % e->nsources];
        if (bind(fd, (struct sockaddr *)src, sizeof *src) < 0) {
            conn_fail_errno(e, c, now, errno);
            return;
        }
    }
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLET | EPOLLRDHUP, .data.ptr = c};
    if (epoll_ctl(e->epfd, EPOLL_CTL_ADD, fd, &ev) < 0 ||
        (connect(fd, (struct sockaddr *)&e->addr, e->addrlen) < 0 && errno != EINPROGRESS))
        conn_fail_errno(e, c, now, errno);
}

/* a connect now, or a place in the gate's queue */
void conn_connect(Engine *e, conn_t *c, uint64_t now) {
    if (!e->max_connecting || e->connecting < e->max_connecting) { do_connect(e, c, now); return; }
    if (e->gate_head && e->gate_head == e->ngate) e->gate_head = e->ngate = 0;
    if (grow((void **)&e->gate, &e->capgate, e->ngate + 1, sizeof(conn_t *))) {
        do_connect(e, c, now); /* no memory for the queue: past the gate, then */
        return;
    }
    c->state = T_QUEUED;
    e->gate[e->ngate++] = c;
}

static void admit(Engine *e, uint64_t now) {
    while (e->gate_head < e->ngate && e->connecting < e->max_connecting) {
        conn_t *c = e->gate[e->gate_head++];
        if (c->state == T_QUEUED) do_connect(e, c, now);
    }
}

#ifdef WEBPERF_TLS
/* the connection's TLS client, once its TCP connect completed: 0, or -1 (errno set) */
static int tls_begin(Engine *e, conn_t *c) {
    SSL *ssl = c->ssl = SSL_new(e->tls_ctx);
    if (!ssl || !SSL_set_fd(ssl, c->fd)) { tls_failed(e, c, "cannot start TLS"); return -1; }
    SSL_set_connect_state(ssl);
    if (c->resume) SSL_set_session(ssl, c->resume);
    if (!e->server_is_ip) SSL_set_tlsext_host_name(ssl, e->server_name); /* SNI */
    if (SSL_CTX_get_verify_mode(e->tls_ctx) != SSL_VERIFY_NONE) {
        X509_VERIFY_PARAM *param = SSL_get0_param(ssl);
        if (e->server_is_ip ? !X509_VERIFY_PARAM_set1_ip_asc(param, e->server_name)
                            : !X509_VERIFY_PARAM_set1_host(param, e->server_name, 0)) {
            tls_failed(e, c, "cannot set the name to verify");
            return -1;
        }
    }
    return 0;
}
#endif

/* the TCP connect (and TLS handshake) progressed: 1 up, 0 wait, -1 failed (handled);
   *clock: the event's, read again when a handshake ends (its calls took their time) */
static int connect_step(Engine *e, conn_t *c, uint32_t events, uint64_t *clock) {
    uint64_t now = *clock;
    if (c->state == T_CONNECTING) { /* the first EPOLLOUT says it is connected (or why not) */
        if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) return 0;
        int err = 0;
        socklen_t len = sizeof err;
        getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err == EINPROGRESS || err == EALREADY) return 0;
        if (err) { conn_fail_errno(e, c, now, err); return -1; }
        c->tcp_at = now;
        if (e->setup_times) record_value(e, H_CONNECT, (now - c->started) / 1000);
        if (!e->tls_ctx) return 1;
#ifdef WEBPERF_TLS
        c->state = T_TLS;
        if (tls_begin(e, c) < 0) { conn_fail_errno(e, c, now, errno); return -1; }
#endif
    }
#ifdef WEBPERF_TLS
    ERR_clear_error(); /* SSL_get_error reads the queue: nothing stale in it */
    int r = SSL_do_handshake(c->ssl); /* a step per edge */
    if (r == 1) { /* timed now, not at the event: the step that connected may have waited
                     out the server's whole flight (preempted after the ClientHello) */
        *clock = now_ns();
        if (e->setup_times) record_value(e, H_HANDSHAKE, (*clock - c->tcp_at) / 1000);
        return 1;
    }
    int eof = 0;
    if (tls_result(e, c, r, &eof) < 0 && errno == EAGAIN) return 0;
    if (eof) tls_failed(e, c, "the server closed the connection during the TLS handshake");
    conn_fail_errno(e, c, now, errno);
#endif
    return -1;
}

/* send, or queue what the socket does not take: 0, or -1 (the connection failed, handled) */
int conn_write(Engine *e, conn_t *c, const void *data, size_t n, uint64_t now) {
    const uint8_t *p = data;
    if (c->fd < 0) return -1;
    if (c->wlen == c->wpos && !c->wblocked) { /* nothing queued: straight to the socket */
        while (n) {
            ssize_t k = conn_send(e, c, p, n);
            if (k < 0) {
                if (errno == EINTR) continue;
                if (errno == EAGAIN || errno == EWOULDBLOCK) { c->wblocked = 1; break; }
                conn_fail_errno(e, c, now, errno);
                return -1;
            }
            p += k;
            n -= (size_t)k;
        }
        if (!n) return 0;
    }
    if (c->wpos && c->wpos == c->wlen) c->wpos = c->wlen = 0;
    if (grow((void **)&c->wbuf, &c->wcap, c->wlen + n, 1)) {
        conn_fail_errno(e, c, now, ENOMEM);
        return -1;
    }
    memcpy(c->wbuf + c->wlen, p, n);
    c->wlen += n;
    return 0;
}

/* EPOLLOUT: what was queued goes (TLS: the same bytes SSL_write asked to be retried with);
   0, or -1 (failed, handled) */
static int conn_flush(Engine *e, conn_t *c, uint64_t now) {
    c->wblocked = 0;
    while (c->wpos < c->wlen) {
        ssize_t k = conn_send(e, c, c->wbuf + c->wpos, c->wlen - c->wpos);
        if (k < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) { c->wblocked = 1; return 0; }
            conn_fail_errno(e, c, now, errno);
            return -1;
        }
        c->wpos += (size_t)k;
    }
    free(c->wbuf); /* an idle connection keeps no buffer */
    c->wbuf = NULL;
    c->wlen = c->wpos = c->wcap = 0;
    return 0;
}

/* ``hup``: the peer's FIN came with this edge: read until recv says so (no edge follows) */
static void conn_read(Engine *e, conn_t *c, uint64_t now, int hup) {
    while (c->fd >= 0 && c->reading) {
        ssize_t n = conn_recv(e, c, e->rbuf, READ_SIZE);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) break;
            if (errno == EINTR) continue;
            conn_fail_errno(e, c, now, errno);
            return;
        }
        if (n == 0) { e->session->eof(e, c, now); return; }
        if (e->session->read(e, c, e->rbuf, (size_t)n, now) < 0) return;
        /* drained: the next edge brings more (TLS: a record at a time, until WANT_READ) */
        if ((size_t)n < READ_SIZE && !hup && !c->ssl) break;
    }
    if (c->fd >= 0 && c->reading && e->session->drained) e->session->drained(e, c, now);
}

static void on_event(Engine *e, conn_t *c, uint32_t events, uint64_t now) {
    if (events & (EPOLLRDHUP | EPOLLHUP)) c->peer_closed = 1; /* no next request on it */
    if (c->state == T_CONNECTING || c->state == T_TLS) {
        if (connect_step(e, c, events, &now) <= 0) return;
        c->state = T_UP;
        e->session->up(e, c, now);
        if (c->fd < 0) return;
        if (c->ssl) events |= EPOLLIN; /* the handshake may have read the first records */
    }
    if ((events & (EPOLLOUT | EPOLLERR)) && (c->wblocked || c->wlen > c->wpos)) {
        if (conn_flush(e, c, now) < 0 || c->fd < 0) return;
        if (!c->wblocked && e->session->writable) e->session->writable(e, c, now);
        if (c->fd < 0) return;
    }
    if (!(events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) || c->state != T_UP) return;
    if (c->reading)
        conn_read(e, c, now, (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0);
    else if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))
        conn_close(e, c); /* between requests: the server closed; the next one reconnects */
}

/* ------------------------------------------------------------------ requests' load shapes */

void park(Engine *e, conn_t *c) {
    if (grow((void **)&e->parked, &e->capparked, e->nparked + 1, sizeof(conn_t *))) return;
    c->sched = Q_PARKED;
    e->parked[e->nparked++] = c;
}

static void wake_parked(Engine *e, uint64_t now) {
    size_t n = e->nparked;
    conn_t **list = e->parked;
    e->parked = NULL;
    e->nparked = e->capparked = 0;
    for (size_t i = 0; i < n; i++)
        if (list[i]->sched == Q_PARKED) e->session->start(e, list[i], now);
    free(list);
}

/* arrival rate (as arrival.py and pacing.ArrivalSchedule) */
static uint64_t due_of(Engine *e, long long slot) {
    return (uint64_t)((unsigned __int128)(uint64_t)slot * e->arrival_ns / e->arrival_num);
}

void make_idle(Engine *e, conn_t *c) {
    size_t word = c->id / 64;
    if (word >= e->idle_words) {
        size_t n = word + 1 > 2 * e->idle_words ? word + 1 : 2 * e->idle_words;
        uint64_t *bits = realloc(e->idle_bits, n * sizeof(uint64_t));
        if (!bits) return;
        memset(bits + e->idle_words, 0, (n - e->idle_words) * sizeof(uint64_t));
        e->idle_bits = bits;
        e->idle_words = n;
    }
    if (!(e->idle_bits[word] & (1ULL << (c->id % 64)))) e->n_idle++;
    e->idle_bits[word] |= 1ULL << (c->id % 64);
    c->sched = Q_ARRIVAL;
}

void not_idle(Engine *e, conn_t *c) {
    if (c->sched != Q_ARRIVAL) return;
    e->idle_bits[c->id / 64] &= ~(1ULL << (c->id % 64));
    e->n_idle--;
    c->sched = Q_BUSY;
}

static conn_t *first_idle(Engine *e) {
    for (size_t w = 0; w < e->idle_words; w++)
        if (e->idle_bits[w]) return e->conns[w * 64 + (size_t)__builtin_ctzll(e->idle_bits[w])];
    return NULL;
}

/* every slot due by now goes to the first-joined idle connection (none idle: it waits,
   late, never dropped) */
static void dispatch(Engine *e, uint64_t now) {
    if (e->mode != MODE_ARRIVAL || e->stop_sending || !e->n_idle) return;
    if (e->slot < 0) { /* this process's first slot due at or after now */
        unsigned __int128 x = (unsigned __int128)now * e->arrival_num;
        long long slot = (long long)((x + e->arrival_ns - 1) / e->arrival_ns);
        long long shift = (e->index - slot) % e->processes;
        e->slot = slot + (shift < 0 ? shift + e->processes : shift);
    }
    while (e->n_idle && due_of(e, e->slot) <= now) {
        conn_t *c = first_idle(e);
        if (!c) break;
        not_idle(e, c);
        c->due = due_of(e, e->slot);
        e->slot += e->processes;
        pthread_mutex_lock(&e->lock);
        e->busy++;
        if (!c->tried) { /* its first: a connection opened */
            c->tried = 1;
            e->opened++;
        }
        stats_t *s = e->cur;
        if (e->busy > s->users_busy) s->users_busy = e->busy;
        s->users_opened = e->opened;
        s->dispatched++;
        pthread_mutex_unlock(&e->lock);
        e->session->start(e, c, now);
        now = now_ns();
    }
}

void arrival_done(Engine *e) {
    pthread_mutex_lock(&e->lock);
    e->busy--;
    pthread_mutex_unlock(&e->lock);
}

/* a requests connection's wake time came: parked when the sending stopped, idle again
   for the arrivals (after a back-off), else its next request */
void requests_due(Engine *e, conn_t *c, uint64_t now) {
    c->sched = Q_BUSY;
    if (e->stop_sending) park(e, c);
    else if (e->mode == MODE_ARRIVAL) make_idle(e, c);
    else e->session->start(e, c, now);
}

/* a request begins: a ticket taken (counted; 0: none left or not open yet), its entry
   picked by weight (or the next of a given order), its intended start (paced, arriving)
   and deadline */
int request_begin(Engine *e, request_t *r, uint64_t now, uint64_t intended) {
    if (e->mode == MODE_COUNTED) {
        pthread_mutex_lock(&e->lock);
        long long t = e->tickets;
        if (t > 0) {
            e->tickets--;
            e->outstanding++;
        }
        pthread_mutex_unlock(&e->lock);
        if (t <= 0) return 0;
        r->ticket = 1;
    }
    r->entry = 0;
    if (e->nsequence) { /* in the order given */
        r->entry = e->sequence[e->sequence_at++];
        if (e->sequence_at == e->nsequence) e->sequence_at = 0;
    } else if (e->nentries > 1) { /* by weight: the mix's cumulative weights */
        double u = (double)(engine_random(e) >> 11) * 0x1.0p-53 * e->cumulative[e->nentries - 1];
        while (r->entry < e->nentries - 1 && u >= e->cumulative[r->entry]) r->entry++;
    }
    r->intended = SCHEDULED(e) ? intended : now;
    r->started = now;
    r->deadline = now + e->timeout_ns;
    return 1;
}

/* a request is over (recorded, or dropped): its ticket, the arrival rate's busy count
   and the paced schedule move on */
void request_end(Engine *e, request_t *r) {
    if (r->ticket) {
        r->ticket = 0;
        pthread_mutex_lock(&e->lock);
        e->outstanding--;
        pthread_mutex_unlock(&e->lock);
    }
    if (e->mode == MODE_ARRIVAL) arrival_done(e);
    if (e->mode == MODE_PACED) r->due += e->period_ns;
}

/* a request's outcome (kind 0: as expected): its latency from its intended start, its
   service time and lag when scheduled, the time to its response headers (HTTP/2) */
void request_done(Engine *e, const request_t *r, uint64_t done, uint64_t bytes, int kind, int key,
                  int64_t a, const char *raw, size_t len, uint64_t headers_at) {
    pthread_mutex_lock(&e->lock);
    stats_t *s = &e->cur[r->entry];
    uint64_t from = SCHEDULED(e) && r->intended < r->started ? r->intended : r->started;
    hist_record(&s->h[H_LATENCY], (done - from) / 1000);
    if (headers_at) hist_record(&s->h[H_HEADERS], (headers_at - r->started) / 1000);
    s->bytes += bytes;
    if (kind) count_fail(s->fails, &s->nfails, kind, key, 1, a, 0, raw, len);
    else s->ok++;
    if (SCHEDULED(e)) {
        hist_record(&s->h[H_SERVICE], (done - r->started) / 1000);
        hist_record(&s->h[H_LAG], r->started > r->intended ? (r->started - r->intended) / 1000 : 0);
    }
    pthread_mutex_unlock(&e->lock);
}

/* ------------------------------------------------------------------ the loop */

static void close_all(Engine *e, uint64_t now) {
    e->closing_all = 1;
    e->close_deadline = now;
    for (size_t i = 0; i < e->nconns; i++) {
        conn_t *c = e->conns[i];
        if (!c || c->sched == Q_GONE) continue;
        heap_remove(e, c);
        if (e->session->end) e->session->end(e, c, now, 1); /* it may close politely */
        if (!c->closing) {
            conn_close(e, c);
            c->state = T_DONE;
        }
    }
}

/* a new connection under the next handle (NULL: no memory; the handle stays taken) */
static conn_t *new_conn(Engine *e, command_t *cmd) {
    if (grow((void **)&e->conns, &e->capconns, e->nconns + 1, sizeof(conn_t *))) return NULL;
    size_t id = e->nconns++;
    conn_t *c = e->conns[id] = calloc(1, sizeof(conn_t));
    if (c && e->session->size && !(c->s = calloc(1, e->session->size))) {
        free(c);
        c = e->conns[id] = NULL;
    }
    if (!c) return NULL;
    c->fd = -1;
    c->id = (uint32_t)id;
    c->ident = cmd->arg;
    c->role = (uint8_t)cmd->role;
    return c;
}

static int run_commands(Engine *e, uint64_t now) {
    uint64_t drained;
    if (read(e->evfd, &drained, sizeof drained) < 0) { /* nothing pending */
    }
    pthread_mutex_lock(&e->lock);
    command_t *cmds = e->commands;
    size_t n = e->ncommands;
    e->commands = NULL;
    e->ncommands = e->capcommands = 0;
    pthread_mutex_unlock(&e->lock);
    int quit = 0;
    for (size_t i = 0; i < n; i++) {
        command_t *cmd = &cmds[i];
        conn_t *c;
        switch (cmd->op) {
        case OP_QUIT:
            quit = 1;
            break;
        case OP_ADD: /* handles are the order of adds: the Python side counts them alike */
            if ((c = new_conn(e, cmd))) {
                e->session->add(e, c, now, cmd->fraction);
            } else { /* no memory: a connection that never was */
                record_fail(e, 0, K_CONNECT_ERRNO, ENOMEM, 1, 0, 0, NULL, 0);
                ATOMIC_ADD(e->ledger.tried, 1);
                ATOMIC_ADD(e->ledger.open_failures, 1);
            }
            break;
        case OP_REMOVE: /* the user left: its connection goes */
            c = (size_t)cmd->arg < e->nconns ? e->conns[cmd->arg] : NULL;
            if (!c || c->sched == Q_GONE) break;
            c->removed = 1;
            if (e->session->end) e->session->end(e, c, now, 0);
            heap_remove(e, c);
            not_idle(e, c);
            conn_close(e, c);
            c->state = T_DONE;
            c->sched = Q_GONE; /* freed at the end (it may be in the parked list) */
            break;
        case OP_GO: /* the publishers start */
            e->publishing = 1;
            for (size_t j = 0; j < e->nconns; j++)
                if ((c = e->conns[j]) && c->role == R_PUB && c->state == T_UP)
                    e->session->start(e, c, now);
            break;
        case OP_WAKE_PARKED:
            if (!e->stop_sending) wake_parked(e, now);
            break;
        case OP_CLOSE_ALL:
            if (!e->closing_all) close_all(e, now);
            break;
        }
    }
    free(cmds);
    return quit;
}

static int anything_closing(Engine *e) {
    for (size_t i = 0; i < e->nconns; i++)
        if (e->conns[i] && e->conns[i]->closing) return 1;
    return 0;
}

static void scan(Engine *e, uint64_t now) {
    for (size_t i = 0; i < e->nconns; i++) {
        conn_t *c = e->conns[i];
        if (!c || c->sched == Q_GONE || c->state == T_DONE) continue;
        if ((c->state == T_CONNECTING || c->state == T_TLS) && now >= c->deadline)
            e->session->fail(e, c, now, K_CONNECT_TIMEOUT, 0, NULL, 0);
        else if (e->session->scan)
            e->session->scan(e, c, now);
    }
}

void *loop_main(void *arg) {
    Engine *e = arg;
    struct epoll_event events[256];
    uint64_t scan_ns = e->session->scan_ns;
    int use_pwait2 = 1;
    for (;;) {
        uint64_t now = now_ns();
        admit(e, now);
        uint64_t wake = now + scan_ns;
        if (e->nheap && e->heap[0]->wake < wake) wake = e->heap[0]->wake;
        if (e->mode == MODE_ARRIVAL && e->n_idle && !e->stop_sending) {
            uint64_t due = e->slot < 0 ? now : due_of(e, e->slot);
            if (due < wake) wake = due;
        }
        uint64_t wait = wake > now ? wake - now : 0;
        int n;
        if (use_pwait2) {
            struct timespec ts = {.tv_sec = (time_t)(wait / 1000000000ULL),
                                  .tv_nsec = (long)(wait % 1000000000ULL)};
            n = epoll_pwait2(e->epfd, events, 256, &ts, NULL);
            if (n < 0 && errno == ENOSYS) { use_pwait2 = 0; continue; }
        } else {
            n = epoll_wait(e->epfd, events, 256, (int)((wait + 999999) / 1000000));
        }
        int quit = 0;
        for (int i = 0; i < n; i++) { /* the clock read per event: a batch takes a while */
            now = now_ns();
            conn_t *c = events[i].data.ptr;
            if (c == NULL) quit |= run_commands(e, now);
            else if (c->fd >= 0) on_event(e, c, events[i].events, now);
        }
        if (quit) break;
        now = now_ns();
        uint64_t until = now; /* what is due now: a connection due again at once waits a turn */
        while (e->nheap && e->heap[0]->wake <= until) {
            conn_t *c = e->heap[0];
            heap_remove(e, c);
            if (c->state != T_WAIT) {
                if (e->session->due) e->session->due(e, c, now);
            } else if (e->stop_sending || e->closing_all || c->removed) c->state = T_DONE;
            else conn_connect(e, c, now); /* it reconnects */
            now = now_ns();
        }
        dispatch(e, now);
        if (now - e->last_scan >= scan_ns) {
            e->last_scan = now;
            scan(e, now);
            if (e->closing_all && (!anything_closing(e) || now >= e->close_deadline + scan_ns))
                break; /* every close answered, or its time is up */
        }
    }
    return NULL;
}
