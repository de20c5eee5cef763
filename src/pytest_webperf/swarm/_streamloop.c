/*
 * _streamloop: the native loop of long-lived message connections, WebSocket and
 * server-sent events (swarm/streamloop.py is its Python face, swarm/child/websocket.py
 * and swarm/child/sse.py its Locust users).
 *
 * One Engine per generator process: one thread, one epoll set, every connection of the
 * process's users, registered once, edge-triggered. The thread never takes the GIL:
 * Python adds connections, lets the publishers go, stops sending and ends the run
 * through a command queue (a mutex and an eventfd); take() swaps the double-buffered
 * interval figures under the same mutex; finish() closes every connection (WebSocket:
 * code 1000, answered within the close timeout) and returns the ledger of the whole run.
 *
 * This file is the transport shared by both protocols: the connect gate (at most
 * max_connecting connects in flight: 10,000 SYNs at once overflow a server's accept
 * queue and cost a second's SYN retry), source addresses (past one address's ~28,000
 * ports), TLS through conn_send/conn_recv (SSL_MODE_RELEASE_BUFFERS: an idle connection
 * keeps no 2 x 16 KiB), the write queue (allocated only when a send hits EAGAIN),
 * reconnects with exponential back-off (10 ms to 1 s), deadlines, the accounting ring,
 * and the ledger. The protocols (_stream_ws.c, _stream_sse.c) are a proto_t each.
 */
#include "_streamloop.h"

#define BACKOFF_MIN_NS 10000000ULL  /* a failed connection's first pause */
#define BACKOFF_MAX_NS 1000000000ULL
#define SCAN_NS 20000000ULL /* deadlines are checked this often */

/* ---- the wake heap (reconnects, paced messages, pings: earliest first) */

#define LOOP_WAKE_KEY wake
#define LOOP_WAKE_HEAP
#include "_loop.h"
#undef LOOP_WAKE_HEAP

HIDDEN void conn_wake(Engine *e, conn_t *c, uint64_t at) { heap_set(e, c, at); }

HIDDEN uint64_t engine_random(Engine *e) {
    uint64_t x = e->rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return e->rng = x;
}

/* ------------------------------------------------------------------ figures */

static void stats_clear(stats_t *s) {
    s->ok = s->bytes = s->sent = 0;
    hist_clear(&s->latency);
    hist_clear(&s->lag);
    s->nfails = 0;
}

/* one more failure of (kind, key) in a table of them, its first example kept */
static void count_fail(failure_t *fails, int *nfails, int kind, int key, const char *raw,
                       size_t len) {
    for (int i = 0; i < *nfails; i++)
        if (fails[i].kind == kind && fails[i].key == key) {
            fails[i].n++;
            return;
        }
    if (*nfails >= MAX_FAILS) { /* a flood of kinds: the last slot takes the rest */
        fails[MAX_FAILS - 1].n++;
        return;
    }
    failure_t *f = &fails[(*nfails)++];
    f->kind = kind;
    f->key = key;
    f->n = 1;
    if (len > EXAMPLE_BYTES) len = EXAMPLE_BYTES;
    f->len = raw ? (int)len : 0;
    if (raw && len) memcpy(f->raw, raw, len);
}

/* a failure: the interval's, and the whole run's (the ledger's: the opening's too) */
HIDDEN void record_fail(Engine *e, int kind, int key, const char *raw, size_t len) {
    if (kind == K_WS_CLOSE || kind == K_WS_ABNORMAL || kind == K_WS_CLOSE_TIMEOUT)
        e->ledger.abnormal++;
    pthread_mutex_lock(&e->lock);
    count_fail(e->cur->fails, &e->cur->nfails, kind, key, raw, len);
    pthread_mutex_unlock(&e->lock);
    count_fail(e->ledger.fails, &e->ledger.nfails, kind, key, raw, len);
}

/* a message answered (an event received); latency_us UINT64_MAX: none to record */
HIDDEN void record_ok(Engine *e, uint64_t latency_us, uint64_t bytes) {
    pthread_mutex_lock(&e->lock);
    e->cur->ok++;
    e->cur->bytes += bytes;
    if (latency_us != UINT64_MAX) hist_record(&e->cur->latency, latency_us);
    pthread_mutex_unlock(&e->lock);
}

HIDDEN void record_lag(Engine *e, uint64_t lag_us) {
    pthread_mutex_lock(&e->lock);
    hist_record(&e->cur->lag, lag_us);
    pthread_mutex_unlock(&e->lock);
}

HIDDEN void note_receipt(Engine *e, uint64_t now) {
    ATOMIC_SET(e->ledger.last_receipt_ns, (long long)now);
}

/* ------------------------------------------------------------------ accounting */

HIDDEN void acct_seen(acct_t *a, uint64_t seq) {
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
    if (*w & bit) {
        a->duplicated++;
        return;
    }
    *w |= bit;
    a->distinct++;
    a->reordered++;
}

/* ------------------------------------------------------------------ TLS and I/O */

#ifdef WEBPERF_TLS
static void tls_failed(Engine *e, conn_t *c, const char *what) {
    char reason[EXAMPLE_BYTES] = "";
    tls_reason(c->ssl, what, reason, sizeof reason);
    snprintf(e->tls_message, sizeof e->tls_message, "%s", reason);
    errno = E_TLS_FAILED;
}

/* an SSL call's result: > 0 done; 0 the peer closed (*eof); -1 with errno (EAGAIN: wait) */
static ssize_t tls_result(Engine *e, conn_t *c, int r, int *eof) {
    int err = SSL_get_error(c->ssl, r);
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
        errno = EAGAIN;
        return -1;
    }
    if (err == SSL_ERROR_ZERO_RETURN) {
        *eof = 1;
        return 0;
    }
    if (err == SSL_ERROR_SYSCALL && ERR_peek_error() == 0) {
        if (r == 0 || errno == 0) { /* closed without close_notify */
            *eof = 1;
            return 0;
        }
        return -1;
    }
    tls_failed(e, c, "TLS error");
    return -1;
}
#endif

static ssize_t conn_send(Engine *e, conn_t *c, const uint8_t *buf, size_t len) {
#ifdef WEBPERF_TLS
    if (c->ssl) {
        ERR_clear_error();
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

static ssize_t conn_recv(Engine *e, conn_t *c, uint8_t *buf, size_t len) {
#ifdef WEBPERF_TLS
    if (c->ssl) {
        ERR_clear_error();
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

/* ------------------------------------------------------------------ life of a connection */

static void conn_close(Engine *e, conn_t *c) {
#ifdef WEBPERF_TLS
    if (c->ssl) SSL_free(c->ssl);
#endif
    c->ssl = NULL;
    if (c->fd >= 0) {
        epoll_ctl(e->epfd, EPOLL_CTL_DEL, c->fd, NULL);
        close(c->fd);
        c->fd = -1;
    }
    if (c->state == S_OPEN || c->state == S_CLOSING) ATOMIC_ADD(e->ledger.open, -1);
    if (c->state == S_CONNECTING || c->state == S_TLS || c->state == S_OPENING) e->connecting--;
    free(c->head);
    c->head = NULL;
    c->nhead = 0;
    free(c->wbuf); /* what was not sent dies with the connection */
    c->wbuf = NULL;
    c->wlen = c->wpos = c->wcap = 0;
    c->wblocked = 0;
    c->connecting = 0;
    c->inflight = 0;
    c->ping_at = 0;
    c->order_len = 0;
}

static void mark_tried(Engine *e, conn_t *c) {
    if (c->tried) return;
    c->tried = 1;
    ATOMIC_ADD(e->ledger.tried, 1);
}

/* the connection ended: it reconnects after `pause_ns` unless the run is ending */
HIDDEN void retire(Engine *e, conn_t *c, uint64_t now, uint64_t pause_ns) {
    heap_remove(e, c);
    conn_close(e, c);
    if (e->stop_sending || e->closing_all || c->removed) {
        c->state = S_DONE;
        return;
    }
    c->state = S_WAIT;
    e->ledger.reconnects++;
    conn_wake(e, c, now + pause_ns);
}

/* a failure: its figure, then a reconnect after the connection's back-off */
HIDDEN void fail(Engine *e, conn_t *c, uint64_t now, int kind, int key, const char *raw, size_t len) {
    record_fail(e, kind, key, raw, len);
    if (c->state != S_OPEN && c->state != S_CLOSING) {
        e->ledger.open_failures++;
        mark_tried(e, c);
    }
    c->backoff_ns = c->backoff_ns ? c->backoff_ns * 2 : BACKOFF_MIN_NS;
    if (c->backoff_ns > BACKOFF_MAX_NS) c->backoff_ns = BACKOFF_MAX_NS;
    retire(e, c, now, c->backoff_ns);
}

static void fail_errno(Engine *e, conn_t *c, uint64_t now, int err) {
    if (c->state == S_CLOSING && c->close_got && (err == ECONNRESET || err == EPIPE)) {
        retire(e, c, now, 0); /* the server closed first after its close frame: a clean end */
        return;
    }
    if (err == E_TLS_FAILED) {
        fail(e, c, now, K_TLS, 0, e->tls_message, strlen(e->tls_message));
        return;
    }
    fail(e, c, now, c->connecting ? K_CONNECT_ERRNO : K_IO_ERRNO, err, NULL, 0);
}

/* send or queue bytes: 0, or -1 (the connection failed, handled) */
HIDDEN int conn_write(Engine *e, conn_t *c, const uint8_t *p, size_t n, uint64_t now) {
    if (c->fd < 0) return -1;
    if (c->wlen == c->wpos && !c->wblocked) { /* nothing queued: straight to the socket */
        while (n) {
            ssize_t k = conn_send(e, c, p, n);
            if (k < 0) {
                if (errno == EINTR) continue;
                if (errno == EAGAIN || errno == EWOULDBLOCK) {
                    c->wblocked = 1;
                    break;
                }
                fail_errno(e, c, now, errno);
                return -1;
            }
            p += k;
            n -= (size_t)k;
        }
        if (!n) return 0;
    }
    if (c->wpos && c->wpos == c->wlen) c->wpos = c->wlen = 0;
    if (grow((void **)&c->wbuf, &c->wcap, c->wlen + n, 1)) {
        fail_errno(e, c, now, ENOMEM);
        return -1;
    }
    memcpy(c->wbuf + c->wlen, p, n);
    c->wlen += n;
    return 0;
}

/* EPOLLOUT: what was queued goes (TLS: the same bytes SSL_write asked to be retried with) */
static int conn_flush(Engine *e, conn_t *c, uint64_t now) {
    c->wblocked = 0;
    while (c->wpos < c->wlen) {
        ssize_t k = conn_send(e, c, c->wbuf + c->wpos, c->wlen - c->wpos);
        if (k < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                c->wblocked = 1;
                return 0;
            }
            fail_errno(e, c, now, errno);
            return -1;
        }
        c->wpos += (size_t)k;
    }
    free(c->wbuf); /* an idle connection keeps no buffer */
    c->wbuf = NULL;
    c->wlen = c->wpos = c->wcap = 0;
    return 0;
}

static void do_connect(Engine *e, conn_t *c, uint64_t now) {
    c->state = S_CONNECTING;
    c->connecting = 1;
    c->started = now;
    c->deadline = now + e->timeout_ns;
    e->connecting++;
    int fd = socket(e->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        fail_errno(e, c, now, errno);
        return;
    }
    c->fd = fd;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (e->nsources && e->addr.ss_family == AF_INET) { /* a 4-tuple space of ~28k ports each */
        setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
        struct sockaddr_in *src = &e->sources[e->next_source++ % e->nsources];
        if (bind(fd, (struct sockaddr *)src, sizeof *src) < 0) {
            fail_errno(e, c, now, errno);
            return;
        }
    }
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLET | EPOLLRDHUP, .data.ptr = c};
    if (epoll_ctl(e->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
        fail_errno(e, c, now, errno);
        return;
    }
    if (connect(fd, (struct sockaddr *)&e->addr, e->addrlen) < 0 && errno != EINPROGRESS)
        fail_errno(e, c, now, errno);
}

/* a connect now, or a place in the gate's queue */
static void start_connect(Engine *e, conn_t *c, uint64_t now) {
    if (e->connecting < e->max_connecting) {
        do_connect(e, c, now);
        return;
    }
    if (e->gate_head && e->gate_head == e->ngate) e->gate_head = e->ngate = 0;
    if (grow((void **)&e->gate, &e->capgate, e->ngate + 1, sizeof(conn_t *))) {
        do_connect(e, c, now); /* no memory for the queue: past the gate, then */
        return;
    }
    c->state = S_QUEUED;
    e->gate[e->ngate++] = c;
}

static void admit(Engine *e, uint64_t now) {
    while (e->gate_head < e->ngate && e->connecting < e->max_connecting) {
        conn_t *c = e->gate[e->gate_head++];
        if (c->state == S_QUEUED) do_connect(e, c, now);
    }
}

/* the TCP connect (and TLS handshake) progressed: 1 up, 0 wait, -1 failed (handled) */
static int connect_step(Engine *e, conn_t *c, uint64_t now) {
    if (c->state == S_CONNECTING) {
        int err = 0;
        socklen_t len = sizeof err;
        getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err == EINPROGRESS || err == EALREADY) return 0;
        if (err) {
            fail_errno(e, c, now, err);
            return -1;
        }
        if (!e->tls_ctx) return 1;
#ifdef WEBPERF_TLS
        SSL *ssl = SSL_new(e->tls_ctx);
        c->ssl = ssl;
        c->state = S_TLS;
        if (!ssl || !SSL_set_fd(ssl, c->fd)) {
            tls_failed(e, c, "cannot start TLS");
            fail_errno(e, c, now, errno);
            return -1;
        }
        SSL_set_connect_state(ssl);
        if (!e->server_is_ip) SSL_set_tlsext_host_name(ssl, e->server_name); /* SNI */
        if (SSL_CTX_get_verify_mode(e->tls_ctx) != SSL_VERIFY_NONE) {
            X509_VERIFY_PARAM *param = SSL_get0_param(ssl);
            if (e->server_is_ip) X509_VERIFY_PARAM_set1_ip_asc(param, e->server_name);
            else X509_VERIFY_PARAM_set1_host(param, e->server_name, 0);
        }
#endif
    }
#ifdef WEBPERF_TLS
    ERR_clear_error();
    int r = SSL_do_handshake(c->ssl);
    if (r == 1) return 1;
    int eof = 0;
    if (tls_result(e, c, r, &eof) < 0 && errno == EAGAIN) return 0;
    if (eof) tls_failed(e, c, "the server closed the connection during the TLS handshake");
    fail_errno(e, c, now, errno);
#endif
    return -1;
}

/* the opening's answer is in: the connection is open (the protocol calls this) */
HIDDEN void conn_opened(Engine *e, conn_t *c, uint64_t now) {
    free(c->head);
    c->head = NULL;
    c->nhead = 0;
    c->state = S_OPEN;
    e->connecting--;
    c->opened_at = now;
    if (!c->first_opened_at) c->first_opened_at = now;
    c->backoff_ns = 0;
    mark_tried(e, c);
    long long open = ATOMIC_ADD(e->ledger.open, 1);
    if (open > ATOMIC_GET(e->ledger.open_peak)) ATOMIC_SET(e->ledger.open_peak, open);
    e->ledger.opens++;
    hist_record(&e->ledger.upgrade, (now - c->started) / 1000);
}

/* ------------------------------------------------------------------ HTTP heads */

HIDDEN int head_header(const char *h, size_t n, const char *name, const char **v, size_t *vlen) {
    size_t k = strlen(name);
    for (size_t i = 0; i + k <= n; i++) {
        if (h[i] != '\r' || strncasecmp(h + i, name, k) != 0) continue;
        const char *p = h + i + k, *end = h + n, *eol = p;
        while (eol < end && *eol != '\r') eol++;
        while (p < eol && (*p == ' ' || *p == '\t')) p++;
        while (eol > p && (eol[-1] == ' ' || eol[-1] == '\t')) eol--;
        *v = p;
        *vlen = (size_t)(eol - p);
        return 1;
    }
    return 0;
}

HIDDEN int has_token_ci(const char *s, size_t n, const char *word) {
    size_t k = strlen(word);
    for (size_t i = 0; i + k <= n; i++)
        if (strncasecmp(s + i, word, k) == 0) return 1;
    return 0;
}

/* an answer's head: >0 its length (what follows starts at d + *used), 0 more must come,
   -1 too long */
HIDDEN long head_collect(conn_t *c, const uint8_t *d, size_t n, size_t *used) {
    size_t old = c->nhead;
    size_t take = n < MAX_HEAD + 4 - old ? n : MAX_HEAD + 4 - old;
    size_t cap = 1024; /* powers of two from 1 KiB */
    while (cap < old + take) cap *= 2;
    char *p = realloc(c->head, cap);
    if (!p) return -1;
    c->head = p;
    memcpy(c->head + old, d, take);
    c->nhead += take;
    size_t from = old >= 3 ? old - 3 : 0;
    for (size_t i = from; i + 3 < c->nhead; i++) {
        if (c->head[i] == '\r' && c->head[i + 1] == '\n' && c->head[i + 2] == '\r' &&
            c->head[i + 3] == '\n') {
            *used = i + 4 - old;
            return (long)i + 2; /* the head with its last header's CRLF */
        }
    }
    if (c->nhead >= MAX_HEAD) return -1;
    *used = n;
    return 0;
}

HIDDEN int status_of(const char *h, size_t n) {
    if (n < 12 || memcmp(h, "HTTP/1.", 7) != 0 || h[8] != ' ') return -1;
    for (int i = 9; i < 12; i++)
        if (h[i] < '0' || h[i] > '9') return -1;
    return (h[9] - '0') * 100 + (h[10] - '0') * 10 + (h[11] - '0');
}

HIDDEN size_t line_len(const char *h, size_t n) {
    const char *eol = memchr(h, '\r', n);
    return eol ? (size_t)(eol - h) : n;
}

/* GET <the role's path> HTTP/1.1, the protocol's headers, then the engine's (Host, the
   user's): 0, or -1 (the connection failed, handled) */
HIDDEN int write_request(Engine *e, conn_t *c, const char *extra, uint64_t now) {
    const char *path = e->path[c->role];
    size_t np = strlen(path), nx = strlen(extra), nt = strlen(e->request_tail);
    size_t n = 4 + np + 11 + nx + nt + 2;
    char *req = malloc(n + 1);
    if (!req) {
        fail_errno(e, c, now, ENOMEM);
        return -1;
    }
    snprintf(req, n + 1, "GET %s HTTP/1.1\r\n%s%s\r\n", path, extra, e->request_tail);
    int r = conn_write(e, c, (const uint8_t *)req, strlen(req), now);
    free(req);
    return r;
}

/* ------------------------------------------------------------------ the loop */

static void on_readable(Engine *e, conn_t *c, uint64_t now, int hup) {
    while (c->fd >= 0 && (c->state == S_OPENING || c->state == S_OPEN || c->state == S_CLOSING)) {
        ssize_t n = conn_recv(e, c, e->rbuf, READ_SIZE);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) return;
            if (errno == EINTR) continue;
            fail_errno(e, c, now, errno);
            return;
        }
        if (n == 0) {
            c->proto->on_eof(e, c, now);
            return;
        }
        if (c->proto->on_data(e, c, e->rbuf, (size_t)n, now) < 0) return;
        if ((size_t)n < READ_SIZE && !hup && !c->ssl) return; /* drained: the next edge */
    }
}

static void on_event(Engine *e, conn_t *c, uint32_t events, uint64_t now) {
    if (c->state == S_CONNECTING || c->state == S_TLS) {
        int r = connect_step(e, c, now);
        if (r <= 0) return;
        c->connecting = 0;
        c->state = S_OPENING;
        c->deadline = now + e->timeout_ns;
        c->proto->on_open(e, c, now);
        if (c->fd < 0) return;
        events |= EPOLLIN; /* the answer may be here already: its edge is gone */
    }
    if ((events & EPOLLOUT) && c->wlen > c->wpos) {
        if (conn_flush(e, c, now) < 0) return;
    }
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
        on_readable(e, c, now, (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0);
}

static void scan_deadlines(Engine *e, uint64_t now) {
    for (size_t i = 0; i < e->nconns; i++) {
        conn_t *c = e->conns[i];
        if (now < c->deadline) continue;
        switch (c->state) {
        case S_CONNECTING:
        case S_TLS:
            fail(e, c, now, K_CONNECT_TIMEOUT, 0, NULL, 0);
            break;
        case S_OPENING:
            fail(e, c, now, K_TIMEOUT, T_OPENING, NULL, 0);
            break;
        case S_CLOSING: /* no close frame (or no end of TCP) in time: we close */
            if (!c->close_got) {
                e->ledger.close_timeouts++;
                record_fail(e, K_WS_CLOSE_TIMEOUT, 0, NULL, 0);
            }
            retire(e, c, now, BACKOFF_MIN_NS);
            break;
        case S_OPEN:
            if (c->role == R_ECHO && c->inflight) fail(e, c, now, K_TIMEOUT, T_MESSAGE, NULL, 0);
            else if (c->role == R_IDLE && c->ping_at) fail(e, c, now, K_TIMEOUT, T_PING, NULL, 0);
            break;
        }
    }
}

static void due_conn(Engine *e, conn_t *c, uint64_t now) {
    if (c->state == S_WAIT) {
        if (e->stop_sending || e->closing_all || c->removed) c->state = S_DONE;
        else start_connect(e, c, now);
        return;
    }
    if (c->state == S_OPEN && c->proto->on_due) c->proto->on_due(e, c, now);
}

/* the end of the run: WebSocket connections close (1000, answered within the close
   timeout), streams and connections not open yet are dropped */
static void close_all(Engine *e, uint64_t now) {
    e->closing_all = 1;
    e->close_deadline = now + e->close_ns;
    for (size_t i = 0; i < e->nconns; i++) {
        conn_t *c = e->conns[i];
        heap_remove(e, c);
        if (c->state == S_OPEN && e->kind == KIND_WS) {
            ws_close(e, c, 1000, now);
        } else if (c->state != S_CLOSING) {
            conn_close(e, c);
            c->state = S_DONE;
        }
    }
}

static int anything_closing(Engine *e) {
    for (size_t i = 0; i < e->nconns; i++)
        if (e->conns[i]->state == S_CLOSING) return 1;
    return 0;
}

static conn_t *new_conn(Engine *e, int role, uint32_t id) {
    conn_t *c = calloc(1, sizeof(conn_t));
    if (!c) return NULL;
    c->fd = -1;
    c->role = role;
    c->id = id;
    c->proto = e->kind == KIND_SSE ? &PROTO_SSE : &PROTO_WS;
    int ok = 1;
    if (role == R_ECHO || role == R_SSE) ok = (c->acct = calloc(1, sizeof(acct_t))) != NULL;
    if (ok && role == R_SSE) ok = (c->sse = calloc(1, sizeof(sse_t))) != NULL;
    if (ok && role == R_ECHO && e->order) ok = (c->order = calloc(ORDER_RING, sizeof(uint64_t))) != NULL;
    if (!ok || grow((void **)&e->conns, &e->capconns, e->nconns + 1, sizeof(conn_t *))) {
        free(c->acct);
        free(c->sse);
        free(c->order);
        free(c);
        return NULL;
    }
    e->conns[e->nconns++] = c;
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
        switch (cmd->op) {
        case OP_QUIT:
            quit = 1;
            break;
        case OP_ADD: {
            conn_t *c = new_conn(e, cmd->role, (uint32_t)cmd->arg);
            if (!c) {
                record_fail(e, K_CONNECT_ERRNO, ENOMEM, NULL, 0);
                ATOMIC_ADD(e->ledger.tried, 1);
                break;
            }
            if (cmd->role == R_SUB) ATOMIC_ADD(e->ledger.subs, 1);
            if (e->closing_all || e->stop_sending) c->state = S_DONE;
            else start_connect(e, c, now);
            break;
        }
        case OP_REMOVE: { /* the user left: the connection goes (a close, not answered) */
            size_t id = (size_t)cmd->arg;
            if (id >= e->nconns) break;
            conn_t *c = e->conns[id];
            c->removed = 1;
            if (c->state == S_OPEN && e->kind == KIND_WS) ws_close(e, c, 1000, now);
            heap_remove(e, c);
            conn_close(e, c);
            c->state = S_DONE;
            break;
        }
        case OP_GO:
            e->publishing = 1;
            for (size_t j = 0; j < e->nconns; j++)
                if (e->conns[j]->role == R_PUB) ws_start_sending(e, e->conns[j], now);
            break;
        case OP_CLOSE_ALL:
            if (!e->closing_all) close_all(e, now);
            break;
        }
    }
    free(cmds);
    return quit;
}

static void *loop_main(void *arg) {
    Engine *e = arg;
    struct epoll_event events[256];
    for (;;) {
        uint64_t now = now_ns();
        admit(e, now);
        uint64_t wake = now + SCAN_NS;
        if (e->nheap && e->heap[0]->wake < wake) wake = e->heap[0]->wake;
        uint64_t wait = wake > now ? wake - now : 0;
        struct timespec ts = {.tv_sec = (time_t)(wait / 1000000000ULL),
                              .tv_nsec = (long)(wait % 1000000000ULL)};
        int n = epoll_pwait2(e->epfd, events, 256, &ts, NULL);
        if (n < 0 && errno == ENOSYS)
            n = epoll_wait(e->epfd, events, 256, (int)((wait + 999999) / 1000000));
        int quit = 0;
        for (int i = 0; i < n; i++) {
            now = now_ns();
            if (events[i].data.ptr == NULL) quit |= run_commands(e, now);
            else {
                conn_t *c = events[i].data.ptr;
                if (c->fd >= 0) on_event(e, c, events[i].events, now);
            }
        }
        if (quit) break;
        now = now_ns();
        while (e->nheap && e->heap[0]->wake <= now) {
            conn_t *c = e->heap[0];
            heap_remove(e, c);
            due_conn(e, c, now);
            now = now_ns();
        }
        if (now - e->last_scan >= SCAN_NS) {
            e->last_scan = now;
            scan_deadlines(e, now);
            if (e->closing_all && (!anything_closing(e) || now >= e->close_deadline + SCAN_NS))
                break; /* every close answered, or its time is up */
        }
    }
    return NULL;
}

/* ------------------------------------------------------------------ Python type */

static int push_command(Engine *e, command_t cmd) {
    pthread_mutex_lock(&e->lock);
    int bad = grow((void **)&e->commands, &e->capcommands, e->ncommands + 1, sizeof(command_t));
    if (!bad) e->commands[e->ncommands++] = cmd;
    pthread_mutex_unlock(&e->lock);
    if (bad) {
        PyErr_NoMemory();
        return -1;
    }
    uint64_t one = 1;
    if (write(e->evfd, &one, sizeof one) < 0) { /* a wake-up is pending */
    }
    return 0;
}

static int copy_bytes(PyObject *obj, uint8_t **out, size_t *len) {
    if (obj == NULL || obj == Py_None) return 0;
    char *buf;
    Py_ssize_t n;
    if (PyBytes_AsStringAndSize(obj, &buf, &n) < 0) return -1;
    *out = malloc(n ? (size_t)n : 1);
    if (!*out) {
        PyErr_NoMemory();
        return -1;
    }
    memcpy(*out, buf, (size_t)n);
    *len = (size_t)n;
    return 0;
}

static int Engine_init(Engine *e, PyObject *args, PyObject *kwds) {
    static char *names[] = {"family",  "host",           "port",          "kind",
                            "timeout_s", "request_tail", "paths",         "message",
                            "binary",  "interval_s",     "ping_s",        "close_timeout_s",
                            "retry_s", "reconnect_every", "expect",       "subscribe",
                            "order",   "max_connecting", NULL};
    int family, port, kind, binary = 0, order = 0, max_connecting = 256;
    const char *host, *tail;
    double timeout_s, interval_s = 0, ping_s = 0, close_s = 10, retry_s = 3;
    long long reconnect_every = 0;
    PyObject *paths, *message = NULL, *expect = NULL, *subscribe = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "isiidsO|OpddddLOOpi", names, &family, &host,
                                     &port, &kind, &timeout_s, &tail, &paths, &message, &binary,
                                     &interval_s, &ping_s, &close_s, &retry_s, &reconnect_every,
                                     &expect, &subscribe, &order, &max_connecting))
        return -1;
    memset(&e->addr, 0, sizeof e->addr);
    if (family == AF_INET) {
        struct sockaddr_in *a = (struct sockaddr_in *)&e->addr;
        a->sin_family = AF_INET;
        a->sin_port = htons((uint16_t)port);
        if (inet_pton(AF_INET, host, &a->sin_addr) != 1) goto bad_address;
        e->addrlen = sizeof *a;
    } else if (family == AF_INET6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&e->addr;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons((uint16_t)port);
        if (inet_pton(AF_INET6, host, &a->sin6_addr) != 1) goto bad_address;
        e->addrlen = sizeof *a;
    } else {
        goto bad_address;
    }
    if ((kind != KIND_WS && kind != KIND_SSE) || timeout_s <= 0 || interval_s < 0 || ping_s < 0 ||
        close_s <= 0 || retry_s < 0 || reconnect_every < 0 || max_connecting < 1) {
        PyErr_SetString(PyExc_ValueError, "bad kind, timeout, interval, ping, close, retry or gate");
        return -1;
    }
    e->kind = kind;
    e->timeout_ns = (uint64_t)(timeout_s * 1e9);
    e->interval_ns = (uint64_t)(interval_s * 1e9);
    e->ping_ns = (uint64_t)(ping_s * 1e9);
    e->close_ns = (uint64_t)(close_s * 1e9);
    e->retry_ns = (uint64_t)(retry_s * 1e9);
    e->reconnect_every = reconnect_every;
    e->binary = binary;
    e->order = order;
    e->max_connecting = max_connecting;
    PyObject *seq = PySequence_Fast(paths, "paths: a sequence of five strings (one per role)");
    if (!seq) return -1;
    if (PySequence_Fast_GET_SIZE(seq) != 5) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "paths: five strings, one per role");
        return -1;
    }
    for (int i = 0; i < 5; i++) {
        const char *p = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(seq, i));
        if (!p || !(e->path[i] = strdup(p))) {
            Py_DECREF(seq);
            if (!PyErr_Occurred()) PyErr_NoMemory();
            return -1;
        }
    }
    Py_DECREF(seq);
    if (copy_bytes(message, &e->message, &e->message_len) < 0 ||
        copy_bytes(subscribe, &e->subscribe, &e->subscribe_len) < 0 ||
        copy_bytes(expect, &e->needle, &e->needle_len) < 0)
        return -1;
    if (e->message && e->message_len < HEAD_BYTES) {
        PyErr_SetString(PyExc_ValueError, "a message is at least its 40-byte header");
        return -1;
    }
    if (e->needle && (e->needle_len == 0 || e->needle_len > MAX_NEEDLE)) {
        PyErr_SetString(PyExc_ValueError, "expect: 1 to 1024 bytes");
        return -1;
    }
    if (e->needle) { /* the KMP failure table */
        e->kmp = calloc(e->needle_len, sizeof(uint32_t));
        if (!e->kmp) {
            PyErr_NoMemory();
            return -1;
        }
        for (size_t i = 1, k = 0; i < e->needle_len; i++) {
            while (k && e->needle[i] != e->needle[k]) k = e->kmp[k - 1];
            if (e->needle[i] == e->needle[k]) k++;
            e->kmp[i] = (uint32_t)k;
        }
    }
    e->request_tail = strdup(tail);
    size_t most = e->message_len > e->subscribe_len ? e->message_len : e->subscribe_len;
    e->sbuf_cap = 14 + (most > 125 ? most : 125);
    e->sbuf = malloc(e->sbuf_cap);
    e->rbuf = malloc(READ_SIZE);
    e->cur = calloc(1, sizeof(stats_t));
    e->spare = calloc(1, sizeof(stats_t));
    if (!e->request_tail || !e->sbuf || !e->rbuf || !e->cur || !e->spare) {
        PyErr_NoMemory();
        return -1;
    }
    stats_clear(e->cur);
    stats_clear(e->spare);
    hist_clear(&e->ledger.upgrade);
    hist_clear(&e->ledger.ttfe);
    e->rng = 0x9E3779B97F4A7C15ULL ^ (uint64_t)getpid() ^ now_ns();
    if (loop_open(&e->epfd, &e->evfd) < 0) return -1;
    pthread_mutex_init(&e->lock, NULL);
    return 0;
bad_address:
    PyErr_Format(PyExc_ValueError, "not a numeric address of family %d: %s", family, host);
    return -1;
}

static PyObject *Engine_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    (void)args;
    (void)kwds;
    Engine *e = (Engine *)type->tp_alloc(type, 0);
    if (e) e->epfd = e->evfd = -1;
    return (PyObject *)e;
}

static void engine_join(Engine *e, int quit) {
    if (e->started && !e->finished) {
        command_t cmd = {quit ? OP_QUIT : OP_CLOSE_ALL, 0, 0, 0};
        if (push_command(e, cmd) < 0) PyErr_Clear();
        Py_BEGIN_ALLOW_THREADS
        pthread_join(e->thread, NULL);
        Py_END_ALLOW_THREADS
    }
    if (!e->finished) {
        e->finished = 1;
        for (size_t i = 0; i < e->nconns; i++) {
            conn_t *c = e->conns[i];
            if (c->fd >= 0) conn_close(e, c);
        }
    }
}

static void Engine_dealloc(Engine *e) {
    engine_join(e, 1);
    for (size_t i = 0; i < e->nconns; i++) {
        conn_t *c = e->conns[i];
        free(c->acct);
        free(c->pubs);
        free(c->sse);
        free(c->order);
        free(c);
    }
    free(e->conns);
    free(e->gate);
    free(e->heap);
    free(e->commands);
    free(e->sources);
    if (e->epfd >= 0) close(e->epfd);
    if (e->evfd >= 0) close(e->evfd);
    for (int i = 0; i < 5; i++) free(e->path[i]);
    free(e->request_tail);
    free(e->message);
    free(e->subscribe);
    free(e->needle);
    free(e->kmp);
    free(e->sbuf);
    free(e->rbuf);
    free(e->cur);
    free(e->spare);
#ifdef WEBPERF_TLS
    if (e->tls_ctx) SSL_CTX_free(e->tls_ctx);
#endif
    free(e->server_name);
    Py_TYPE(e)->tp_free((PyObject *)e);
}

static int ensure_thread(Engine *e) {
    if (e->finished) {
        PyErr_SetString(PyExc_RuntimeError, "the loop is finished");
        return -1;
    }
    if (!e->started) {
        int err = pthread_create(&e->thread, NULL, loop_main, e);
        if (err) {
            errno = err;
            PyErr_SetFromErrno(PyExc_OSError);
            return -1;
        }
        e->started = 1;
    }
    return 0;
}

/* add(role, ident=0) -> handle: a new connection in `role`, its messages under `ident` */
static PyObject *Engine_add(Engine *e, PyObject *args) {
    int role;
    long long ident = 0;
    if (!PyArg_ParseTuple(args, "i|L", &role, &ident)) return NULL;
    if (role < R_ECHO || role > R_SSE || ident < 0 || ident > 0xffffffffLL ||
        (role == R_SSE) != (e->kind == KIND_SSE) || ((role == R_ECHO || role == R_PUB) && !e->message)) {
        PyErr_SetString(PyExc_ValueError, "a role of this engine's kind (echo and publishers "
                                          "need a message), an ident of 32 bits");
        return NULL;
    }
    if (ensure_thread(e) < 0) return NULL;
    long long handle = e->adds++; /* the thread appends in command order */
    ATOMIC_ADD(e->ledger.added, 1);
    command_t cmd = {OP_ADD, role, ident, 0};
    if (push_command(e, cmd) < 0) return NULL;
    return PyLong_FromLongLong(handle);
}

static PyObject *Engine_remove(Engine *e, PyObject *arg) {
    long long id = PyLong_AsLongLong(arg);
    if (id == -1 && PyErr_Occurred()) return NULL;
    if (e->started && !e->finished) {
        command_t cmd = {OP_REMOVE, 0, id, 0};
        if (push_command(e, cmd) < 0) return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *Engine_go(Engine *e, PyObject *unused) {
    (void)unused;
    if (e->started && !e->finished) {
        command_t cmd = {OP_GO, 0, 0, 0};
        if (push_command(e, cmd) < 0) return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *Engine_stop_sending(Engine *e, PyObject *unused) {
    (void)unused;
    if (!e->stop_sending) e->stop_at = now_ns();
    e->stop_sending = 1;
    __sync_synchronize();
    if (e->started && !e->finished) {
        uint64_t one = 1;
        if (write(e->evfd, &one, sizeof one) < 0) { /* pending */
        }
    }
    Py_RETURN_NONE;
}

/* bind_sources(["127.0.0.2", ...]): connections from these local addresses, round robin */
static PyObject *Engine_bind_sources(Engine *e, PyObject *arg) {
    if (e->started) {
        PyErr_SetString(PyExc_RuntimeError, "bind_sources() comes before the first add()");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(arg, "a list of IPv4 addresses");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    free(e->sources);
    e->sources = calloc((size_t)(n ? n : 1), sizeof(struct sockaddr_in));
    e->nsources = 0;
    if (!e->sources) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        const char *text = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(seq, i));
        if (!text) {
            Py_DECREF(seq);
            return NULL;
        }
        struct sockaddr_in *a = &e->sources[i];
        a->sin_family = AF_INET;
        if (inet_pton(AF_INET, text, &a->sin_addr) != 1) {
            Py_DECREF(seq);
            return PyErr_Format(PyExc_ValueError, "not an IPv4 address: %s", text);
        }
        e->nsources++;
    }
    Py_DECREF(seq);
    Py_RETURN_NONE;
}

/* use_tls(server_name, ca_file=None): every connection speaks TLS (before the first add) */
static PyObject *Engine_use_tls(Engine *e, PyObject *args) {
    const char *server_name, *ca_file = NULL;
    if (!PyArg_ParseTuple(args, "s|z", &server_name, &ca_file)) return NULL;
    if (e->started || e->tls_ctx) {
        PyErr_SetString(PyExc_RuntimeError, "use_tls() comes once, before the first add()");
        return NULL;
    }
#ifdef WEBPERF_TLS
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx) {
        ERR_clear_error();
        PyErr_SetString(PyExc_RuntimeError, "OpenSSL: cannot make a TLS context");
        return NULL;
    }
    static const unsigned char alpn[] = "\x08http/1.1"; /* the upgrade is HTTP/1.1's */
    SSL_CTX_set_alpn_protos(ctx, alpn, sizeof alpn - 1);
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                              SSL_MODE_RELEASE_BUFFERS); /* idle connections: no 2 x 16 KiB */
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    if (ca_file) {
        if (SSL_CTX_load_verify_locations(ctx, ca_file, NULL) != 1) {
            SSL_CTX_free(ctx);
            ERR_clear_error();
            PyErr_Format(PyExc_ValueError, "cannot load the CA file %s", ca_file);
            return NULL;
        }
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    } else {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    }
    e->server_name = strdup(server_name);
    if (!e->server_name) {
        SSL_CTX_free(ctx);
        return PyErr_NoMemory();
    }
    unsigned char buf[sizeof(struct in6_addr)];
    e->server_is_ip = inet_pton(AF_INET, server_name, buf) == 1 ||
                      inet_pton(AF_INET6, server_name, buf) == 1;
    e->tls_ctx = ctx;
    Py_RETURN_NONE;
#else
    (void)server_name;
    (void)ca_file;
    PyErr_SetString(PyExc_RuntimeError, "the native stream loop is built without TLS (no OpenSSL)");
    return NULL;
#endif
}

static PyObject *hist_tuple(const hist_t *h) {
    PyObject *pairs = PyList_New(0);
    if (!pairs) return NULL;
    for (int i = h->lo; i <= h->hi; i++) {
        if (!h->c[i]) continue;
        PyObject *pair = Py_BuildValue("(iK)", i, (unsigned long long)h->c[i]);
        if (!pair || PyList_Append(pairs, pair) < 0) {
            Py_XDECREF(pair);
            Py_DECREF(pairs);
            return NULL;
        }
        Py_DECREF(pair);
    }
    return Py_BuildValue("(KKKKN)", (unsigned long long)h->count, (unsigned long long)h->total,
                         (unsigned long long)h->min, (unsigned long long)h->max, pairs);
}

static PyObject *fails_list(const failure_t *fails, int nfails) {
    PyObject *out = PyList_New(0);
    if (!out) return NULL;
    for (int i = 0; i < nfails; i++) {
        const failure_t *f = &fails[i];
        PyObject *row = Py_BuildValue("(iiKy#)", f->kind, f->key, (unsigned long long)f->n,
                                      f->raw, (Py_ssize_t)f->len);
        if (!row || PyList_Append(out, row) < 0) {
            Py_XDECREF(row);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(row);
    }
    return out;
}

/* take() -> dict: what completed since the last take */
static PyObject *Engine_take(Engine *e, PyObject *unused) {
    (void)unused;
    pthread_mutex_lock(&e->lock);
    stats_t *s = e->cur;
    e->cur = e->spare;
    e->spare = s;
    pthread_mutex_unlock(&e->lock);
    PyObject *r = Py_BuildValue("{sKsKsKsNsNsN}", "ok", (unsigned long long)s->ok, "bytes",
                                (unsigned long long)s->bytes, "sent", (unsigned long long)s->sent,
                                "latency", hist_tuple(&s->latency), "lag", hist_tuple(&s->lag),
                                "fails", fails_list(s->fails, s->nfails));
    stats_clear(s);
    return r;
}

/* state() -> dict of the run so far: connections added, tried once, open; what is owed */
static PyObject *Engine_state(Engine *e, PyObject *unused) {
    (void)unused;
    ledger_t *l = &e->ledger;
    /* the connect gate's figures are the thread's, read without the lock: a glimpse */
    long long connecting = __atomic_load_n(&e->connecting, __ATOMIC_RELAXED);
    long long queued = (long long)__atomic_load_n(&e->ngate, __ATOMIC_RELAXED) -
                       (long long)__atomic_load_n(&e->gate_head, __ATOMIC_RELAXED);
    return Py_BuildValue(
        "{sLsLsLsLsLsLsLsLsLsLsLsL}", "connecting", connecting, "queued", queued, "added",
        ATOMIC_GET(l->added), "tried", ATOMIC_GET(l->tried),
        "open", ATOMIC_GET(l->open), "open_peak", ATOMIC_GET(l->open_peak), "echo_sent",
        ATOMIC_GET(l->echo_sent), "echo_distinct", ATOMIC_GET(l->echo_distinct), "pub_sent",
        ATOMIC_GET(l->pub_sent), "sub_distinct", ATOMIC_GET(l->sub_distinct), "subs",
        ATOMIC_GET(l->subs), "last_receipt_ns", ATOMIC_GET(l->last_receipt_ns));
}

static PyObject *acct_tuple(uint64_t expected, const acct_t *a) {
    return Py_BuildValue("(KKKKK)", (unsigned long long)expected, (unsigned long long)a->distinct,
                         (unsigned long long)a->duplicated, (unsigned long long)a->reordered,
                         (unsigned long long)a->beyond_window);
}

/* finish() -> the ledger: every connection closed (WebSocket: 1000, answered within the
   close timeout), the thread stopped; the whole run's figures and accounting */
static PyObject *Engine_finish(Engine *e, PyObject *unused) {
    (void)unused;
    uint64_t end = e->stop_at ? e->stop_at : now_ns();
    engine_join(e, 0);
    ledger_t *l = &e->ledger;
    acct_t echo = {0}, sse = {0};
    uint64_t echo_sent = 0, sse_expected = 0;
    PyObject *published = PyList_New(0), *subscribers = PyList_New(0), *rates = PyList_New(0);
    if (!published || !subscribers || !rates) goto failed;
    for (size_t i = 0; i < e->nconns; i++) {
        conn_t *c = e->conns[i];
        PyObject *row = NULL;
        if (c->role == R_ECHO) {
            echo_sent += c->seq;
            echo.distinct += c->acct->distinct;
            echo.duplicated += c->acct->duplicated;
            echo.reordered += c->acct->reordered;
            echo.beyond_window += c->acct->beyond_window;
        } else if (c->role == R_PUB) {
            row = Py_BuildValue("(kK)", (unsigned long)c->id, (unsigned long long)c->seq);
            if (!row || PyList_Append(published, row) < 0) goto failed_row;
        } else if (c->role == R_SUB) {
            acct_t sum = {0};
            for (uint32_t p = 0; p < c->npubs; p++) {
                sum.distinct += c->pubs[p].a.distinct;
                sum.duplicated += c->pubs[p].a.duplicated;
                sum.reordered += c->pubs[p].a.reordered;
                sum.beyond_window += c->pubs[p].a.beyond_window;
            }
            row = acct_tuple(0, &sum);
            if (!row || PyList_Append(subscribers, row) < 0) goto failed_row;
        } else if (c->role == R_SSE) {
            const acct_t *a = c->acct;
            if (a->distinct) sse_expected += a->top - a->first;
            sse.distinct += a->distinct;
            sse.duplicated += a->duplicated;
            sse.reordered += a->reordered;
            sse.beyond_window += a->beyond_window;
            /* from its first event to the end: the events after the first over that time
               (a stream that stalled before the end is slower by as much) */
            if (c->first_event_at && end > c->first_event_at) {
                double after_first = c->events > 1 ? (double)(c->events - 1) : 0.0;
                row = PyFloat_FromDouble(after_first * 1e9 / (double)(end - c->first_event_at));
                if (!row || PyList_Append(rates, row) < 0) goto failed_row;
            }
        }
        Py_XDECREF(row);
        continue;
    failed_row:
        Py_XDECREF(row);
        goto failed;
    }
    PyObject *r = Py_BuildValue(
        "{sKsKsKsKsKsKsKsKsKsKsKsKsLsNsNsNsNsNsNsNsN}", "opens", (unsigned long long)l->opens,
        "open_failures", (unsigned long long)l->open_failures, "reconnects",
        (unsigned long long)l->reconnects, "server_closes", (unsigned long long)l->server_closes,
        "closes_clean", (unsigned long long)l->closes_clean, "close_timeouts",
        (unsigned long long)l->close_timeouts, "abnormal", (unsigned long long)l->abnormal,
        "pings", (unsigned long long)l->pings, "pongs", (unsigned long long)l->pongs,
        "streams_ended", (unsigned long long)l->streams_ended, "sent", (unsigned long long)l->sent,
        "received", (unsigned long long)l->received, "open_peak", ATOMIC_GET(l->open_peak),
        "upgrade", hist_tuple(&l->upgrade), "ttfe", hist_tuple(&l->ttfe), "fails",
        fails_list(l->fails, l->nfails), "echo",
        acct_tuple(echo_sent, &echo), "sse", acct_tuple(sse_expected, &sse), "published", published,
        "subscribers", subscribers, "rates", rates);
    return r;
failed:
    Py_XDECREF(published);
    Py_XDECREF(subscribers);
    Py_XDECREF(rates);
    return NULL;
}

/* ------------------------------------------------------------------ the tests' doors */

typedef struct {
    PyObject *events;
    size_t keep, len;
    uint8_t head[HEAD_BYTES * 8];
    size_t nhead;
} parse_ctx_t;

static int t_payload(void *ctx, const uint8_t *p, size_t n) {
    parse_ctx_t *x = ctx;
    size_t room = x->keep - x->nhead, m = room < n ? room : n;
    memcpy(x->head + x->nhead, p, m);
    x->nhead += m;
    x->len += n;
    return 0;
}

static int t_message(void *ctx, int op) {
    parse_ctx_t *x = ctx;
    PyObject *row = Py_BuildValue("(siny#)", "message", op, (Py_ssize_t)x->len, x->head,
                                  (Py_ssize_t)x->nhead);
    x->len = x->nhead = 0;
    if (!row || PyList_Append(x->events, row) < 0) {
        Py_XDECREF(row);
        return -1;
    }
    Py_DECREF(row);
    return 0;
}

static int t_control(void *ctx, int op, const uint8_t *p, size_t n) {
    parse_ctx_t *x = ctx;
    PyObject *row = Py_BuildValue("(siy#)", "control", op, p, (Py_ssize_t)n);
    if (!row || PyList_Append(x->events, row) < 0) {
        Py_XDECREF(row);
        return -1;
    }
    Py_DECREF(row);
    return 0;
}

/* ws_parse(chunks, keep=40) -> [("message", op, length, first bytes) | ("control", op,
   payload) | ("error", code)]: the loop's frame reader over these pieces */
static PyObject *mod_ws_parse(PyObject *unused, PyObject *args) {
    (void)unused;
    PyObject *chunks;
    Py_ssize_t keep = HEAD_BYTES;
    if (!PyArg_ParseTuple(args, "O|n", &chunks, &keep)) return NULL;
    if (keep < 0 || keep > HEAD_BYTES * 8) return PyErr_Format(PyExc_ValueError, "keep: 0 to 320");
    PyObject *seq = PySequence_Fast(chunks, "a sequence of bytes");
    if (!seq) return NULL;
    parse_ctx_t x = {.events = PyList_New(0), .keep = (size_t)keep};
    ws_rx_t rx = {.need = 2};
    static const ws_sink_t sink = {t_payload, t_message, t_control};
    for (Py_ssize_t i = 0; x.events && i < PySequence_Fast_GET_SIZE(seq); i++) {
        char *buf;
        Py_ssize_t n;
        if (PyBytes_AsStringAndSize(PySequence_Fast_GET_ITEM(seq, i), &buf, &n) < 0) {
            Py_CLEAR(x.events);
            break;
        }
        int r = ws_parse(&rx, (const uint8_t *)buf, (size_t)n, &sink, &x);
        if (r < 0) Py_CLEAR(x.events);
        if (r > 0) {
            PyObject *row = Py_BuildValue("(si)", "error", r);
            if (!row || PyList_Append(x.events, row) < 0) Py_CLEAR(x.events);
            Py_XDECREF(row);
            break;
        }
    }
    Py_DECREF(seq);
    return x.events;
}

/* ws_frame(op, payload, key=None, fin=True) -> bytes: a frame as the loop writes it */
static PyObject *mod_ws_frame(PyObject *unused, PyObject *args) {
    (void)unused;
    int op, fin = 1;
    Py_buffer payload;
    PyObject *key_obj = Py_None;
    if (!PyArg_ParseTuple(args, "iy*|Op", &op, &payload, &key_obj, &fin)) return NULL;
    uint8_t key[4], head[14];
    const uint8_t *k = NULL;
    if (key_obj != Py_None) {
        char *kb;
        Py_ssize_t kn;
        if (PyBytes_AsStringAndSize(key_obj, &kb, &kn) < 0 || kn != 4) {
            PyBuffer_Release(&payload);
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "key: 4 bytes");
            return NULL;
        }
        memcpy(key, kb, 4);
        k = key;
    }
    size_t h = ws_frame_head(head, op, fin, (size_t)payload.len, k);
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(h + (size_t)payload.len));
    if (out) {
        uint8_t *p = (uint8_t *)PyBytes_AS_STRING(out);
        memcpy(p, head, h);
        memcpy(p + h, payload.buf, (size_t)payload.len);
        if (k) ws_mask(p + h, (size_t)payload.len, k, 0);
    }
    PyBuffer_Release(&payload);
    return out;
}

static PyObject *mod_ws_accept(PyObject *unused, PyObject *arg) {
    (void)unused;
    const char *key = PyUnicode_AsUTF8(arg);
    if (!key) return NULL;
    if (strlen(key) > 64) return PyErr_Format(PyExc_ValueError, "a key of at most 64 characters");
    char out[29];
    ws_accept_of(key, out);
    return PyUnicode_FromString(out);
}

static int t_event(void *ctx, const sse_t *s) {
    PyObject *row = Py_BuildValue("(y#KK)", s->last, (Py_ssize_t)s->last_len,
                                  (unsigned long long)s->data_bytes, (unsigned long long)s->retry_ms);
    if (!row || PyList_Append((PyObject *)ctx, row) < 0) {
        Py_XDECREF(row);
        return -1;
    }
    Py_DECREF(row);
    return 0;
}

/* sse_parse(chunks, chunked=False) -> (events, ended, error): the loop's event-stream
   parser over these pieces; each event (last event id, data bytes, retry ms in force) */
static PyObject *mod_sse_parse(PyObject *unused, PyObject *args) {
    (void)unused;
    PyObject *chunks;
    int chunked = 0, ended = 0, error = 0;
    if (!PyArg_ParseTuple(args, "O|p", &chunks, &chunked)) return NULL;
    PyObject *seq = PySequence_Fast(chunks, "a sequence of bytes");
    if (!seq) return NULL;
    PyObject *events = PyList_New(0);
    sse_t s;
    memset(&s, 0, sizeof s);
    sse_reset(&s, chunked);
    for (Py_ssize_t i = 0; events && i < PySequence_Fast_GET_SIZE(seq); i++) {
        char *buf;
        Py_ssize_t n;
        if (PyBytes_AsStringAndSize(PySequence_Fast_GET_ITEM(seq, i), &buf, &n) < 0) {
            Py_CLEAR(events);
            break;
        }
        int r = sse_feed(&s, (const uint8_t *)buf, (size_t)n, t_event, events, &ended);
        if (r > 0) error = r;
        if (r < 0 && !ended) Py_CLEAR(events);
        if (r) break;
    }
    Py_DECREF(seq);
    if (!events) return NULL;
    return Py_BuildValue("(Nii)", events, ended, error);
}

static PyObject *mod_bucket_index(PyObject *unused, PyObject *arg) {
    (void)unused;
    unsigned long long v = PyLong_AsUnsignedLongLong(arg);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
    if (v > VALUE_MAX) v = VALUE_MAX;
    return PyLong_FromLong(bucket_index(v));
}

static PyMethodDef Engine_methods[] = {
    {"add", (PyCFunction)Engine_add, METH_VARARGS,
     "add(role, ident=0) -> handle: a new connection in `role` (R_*), its messages under `ident`"},
    {"remove", (PyCFunction)Engine_remove, METH_O, "remove(handle): the connection goes"},
    {"go", (PyCFunction)Engine_go, METH_NOARGS, "the publishers start (every subscriber is open)"},
    {"stop_sending", (PyCFunction)Engine_stop_sending, METH_NOARGS,
     "no message is sent after this, no connection comes back (answers still arrive)"},
    {"bind_sources", (PyCFunction)Engine_bind_sources, METH_O,
     "bind_sources([ipv4, ...]): connect from these local addresses, round robin"},
    {"use_tls", (PyCFunction)Engine_use_tls, METH_VARARGS,
     "use_tls(server_name, ca_file=None): every connection speaks TLS; before the first add()"},
    {"take", (PyCFunction)Engine_take, METH_NOARGS, "the figures since the last take"},
    {"state", (PyCFunction)Engine_state, METH_NOARGS, "the run so far: connections, what is owed"},
    {"finish", (PyCFunction)Engine_finish, METH_NOARGS,
     "close every connection, stop the thread: the ledger of the whole run"},
    {NULL, NULL, 0, NULL}};

static PyTypeObject EngineType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pytest_webperf.swarm._streamloop.Engine",
    .tp_basicsize = sizeof(Engine),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One generator process's native stream loop (see swarm/streamloop.py).",
    .tp_new = Engine_new,
    .tp_init = (initproc)Engine_init,
    .tp_dealloc = (destructor)Engine_dealloc,
    .tp_methods = Engine_methods,
};

static PyMethodDef module_methods[] = {
    {"ws_parse", mod_ws_parse, METH_VARARGS, "the loop's WebSocket frame reader over pieces"},
    {"ws_frame", mod_ws_frame, METH_VARARGS, "a frame as the loop writes it"},
    {"ws_accept", mod_ws_accept, METH_O, "the Sec-WebSocket-Accept of a key"},
    {"sse_parse", mod_sse_parse, METH_VARARGS, "the loop's event-stream parser over pieces"},
    {"bucket_index", mod_bucket_index, METH_O,
     "the histogram bucket of a value in microseconds (as histogram.bucket_index)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_streamloop",
                                    "The native stream loop (see swarm/streamloop.py).", -1,
                                    module_methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__streamloop(void) {
    if (PyType_Ready(&EngineType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&EngineType);
#ifdef WEBPERF_TLS
    int tls = 1;
#else
    int tls = 0;
#endif
    if (PyModule_AddObject(m, "Engine", (PyObject *)&EngineType) < 0 ||
        PyModule_AddIntConstant(m, "TLS", tls) < 0) {
        Py_DECREF(&EngineType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
