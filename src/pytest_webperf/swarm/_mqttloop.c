/* The native MQTT loop: one epoll thread per generator process, each Locust user one
 * MQTT 3.1.1 connection (swarm/mqtt_native.py is its Locust face, swarm/mqttloop.py its
 * Python one).
 *
 * A publisher connects (CONNECT/CONNACK), then publishes seed 002's JSON telemetry to
 * <topic>/<clientId> at QoS 0, 1 or 2: paced (one message per period, a late one sent at
 * once and counted late when a whole period behind) or flat out (up to `window`
 * messages in flight, the next sent as soon as one is acknowledged: PUBACK at QoS 1,
 * PUBREC -> PUBREL -> PUBCOMP at QoS 2). A subscriber subscribes to a filter and
 * acknowledges what it gets (PUBACK; PUBREC, then PUBCOMP on PUBREL), counting messages
 * and their end-to-end latency (the payload's sentAt). PINGREQ keeps idle connections
 * alive.
 *
 * Accounting as swarm/mqtt.py's paho user: every message has the client's next seq
 * (from 0); a message is outstanding until acknowledged (QoS 1, 2). At the end
 * (`finish`) each client's published count and outstanding seqs are the ledger. The
 * latency of a QoS 1/2 message is publish -> its final acknowledgement, in the same
 * log-linear microsecond buckets as histogram.Histogram.
 *
 * The thread never touches a Python object; commands come through a locked queue and
 * an eventfd, figures go out under the same lock (`take`).
 */
#include "_loop.h" /* headers, histogram, clock, arrays, TLS words, epoll set */

/* ------------------------------------------------------------------ figures */

#define ERRNO_SLOTS 160

typedef struct {
    uint64_t ok, bytes, timeouts, connect_timeouts, closed, protocol, late, tls;
    uint64_t received, received_bytes;
    uint32_t connack[256];
    uint32_t refused[256]; /* MQTT 5: a PUBACK/PUBREC's failure reason code (>= 0x80) */
    uint32_t connect_errno[ERRNO_SLOTS];
    uint32_t io_errno[ERRNO_SLOTS];
    hist_t latency, lag, e2e;
} stats_t;

static void stats_clear(stats_t *s) {
    s->ok = s->bytes = s->timeouts = s->connect_timeouts = s->closed = s->protocol = 0;
    s->late = s->received = s->received_bytes = s->tls = 0;
    memset(s->connack, 0, sizeof s->connack);
    memset(s->refused, 0, sizeof s->refused);
    memset(s->connect_errno, 0, sizeof s->connect_errno);
    memset(s->io_errno, 0, sizeof s->io_errno);
    hist_clear(&s->latency);
    hist_clear(&s->lag);
    hist_clear(&s->e2e);
}

/* ------------------------------------------------------------------ connections */

enum { S_CONNECTING = 1, S_TLS, S_UPGRADE, S_CONNACK, S_UP, S_DEAD };
/* waiting for PUBACK/PUBREC, for PUBCOMP; refused by the broker (MQTT 5) */
enum { F_ACK = 1, F_COMP = 2, F_REFUSED = 3 };
#define OUT_HIGH (64 * 1024)     /* stop generating messages above this many unsent bytes */
#define READ_SIZE (64 * 1024)
#define MAX_PACKET (1024 * 1024) /* a bigger packet from the broker is a protocol error */
#define SCAN_NS 100000000ULL     /* deadlines and keep-alives are checked this often */

typedef struct {
    uint32_t seq;
    uint16_t pid;
    uint8_t state, timed_out;
    uint64_t sent_ns;
} flight_t;

typedef struct {
    int fd, state, subscriber, want_out, counted_dead;
    long long client;
    size_t heap_pos; /* 1-based, 0: not in the wake heap */
    uint64_t due, started, last_tx;
    uint32_t seq; /* the next message's: what was published */
    uint16_t next_pid;
    flight_t *fl;
    size_t nfl, capfl, live; /* live: in flight, not timed out (the window's) */
    char *out;
    size_t nout, capout, wpos;
    char *in;
    size_t nin, capin;
    uint64_t rng;
    void *ssl; /* SSL * over TLS, else NULL */
    size_t framed; /* WebSocket: out[wpos, framed) is in frames already */
    char *ws;      /* WebSocket: the upgrade's answer, then an unfinished frame */
    size_t nws, capws;
} conn_t;

typedef struct { int op; long long arg; double fraction; int subscriber; } command_t;
enum { OP_ADD = 1, OP_REMOVE, OP_QUIT };

typedef struct {
    PyObject_HEAD
    struct sockaddr_storage addr;
    socklen_t addrlen;
    struct sockaddr_in *sources; /* local IPv4 addresses to bind, round robin (scale) */
    size_t nsources, next_source;
    int qos, keepalive_s, clean_session;
    int v5; /* MQTT 5.0 (protocol level 5), else 3.1.1 */
    size_t window;
    uint64_t timeout_ns, period_ns;
    char *topic, *prefix, *filter;
    size_t topic_len, prefix_len, filter_len;
    pthread_t thread;
    int started, finished;
    long long adds; /* add() calls: the next handle (the thread appends in order) */
    int epfd, evfd;
    pthread_mutex_t lock;
    command_t *commands;
    size_t ncommands, capcommands;
    stats_t *cur, *spare;
    hist_t *all_lag; /* every paced message's lag, never taken: the ledger's */
    uint64_t all_late;
    volatile int stop_sending;
    long long outstanding, connected, subscribed; /* atomics */
    long long connect_failures, disconnects, publish_errors; /* atomics */
    double first_sent;
    conn_t **conns;
    size_t nconns, capconns;
    conn_t **heap;
    size_t nheap, capheap;
    char *rbuf;
    uint64_t last_scan;
    void *tls_ctx; /* SSL_CTX * (use_tls), else NULL: plain TCP */
    char *server_name;
    int server_is_ip;
    char tls_message[160]; /* the first TLS failure's words */
    char *ws_request;       /* WebSocket (use_websocket): the upgrade request, else NULL */
    size_t ws_request_len;
} Engine;

static inline double wall_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

#define ATOMIC_ADD(x, n) __atomic_add_fetch(&(x), (n), __ATOMIC_RELAXED)
#define ATOMIC_GET(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

/* ---- the wake heap (paced publishers, earliest due first) */

#define LOOP_WAKE_KEY due
#define LOOP_WAKE_HEAP
#include "_loop.h"
#undef LOOP_WAKE_HEAP
#define heap_push heap_set /* a publisher waits until it is due */

/* ---- figures (under the lock) */

static void count_errno(uint32_t *slots, int err) {
    slots[err > 0 && err < ERRNO_SLOTS ? err : 0]++;
}

/* ------------------------------------------------------------------ packets */

static inline char *put_varint(char *p, size_t n) {
    do {
        unsigned char b = n % 128;
        n /= 128;
        if (n) b |= 128;
        *p++ = (char)b;
    } while (n);
    return p;
}

static inline char *put_u16(char *p, unsigned v) {
    *p++ = (char)(v >> 8);
    *p++ = (char)(v & 255);
    return p;
}

static inline char *out_room(conn_t *c, size_t n) {
    if (c->wpos && c->wpos == c->nout) c->wpos = c->nout = c->framed = 0;
    if (grow((void **)&c->out, &c->capout, c->nout + n, 1)) return NULL;
    return c->out + c->nout;
}

static void put_ack(conn_t *c, unsigned char type, unsigned pid) {
    char *p = out_room(c, 4);
    if (!p) return;
    p[0] = (char)type;
    p[1] = 2;
    put_u16(p + 2, pid);
    c->nout += 4;
}

static void put_connect(Engine *e, conn_t *c) {
    char id[64];
    int idlen = snprintf(id, sizeof id, "-%lld", c->client);
    size_t idtotal = e->prefix_len + (size_t)idlen + (c->subscriber ? 4 : 0);
    size_t rem = 10 + 2 + idtotal + (size_t)e->v5; /* MQTT 5: an empty property list */
    char *p = out_room(c, rem + 5);
    if (!p) return;
    char *s = p;
    *p++ = 0x10;
    p = put_varint(p, rem);
    memcpy(p, e->v5 ? "\0\4MQTT\5" : "\0\4MQTT\4", 7);
    p += 7;
    /* the publishers' sessions as asked; a subscriber's is persistent (as the observer's) */
    *p++ = (char)((c->subscriber ? 0 : (e->clean_session ? 2 : 0)));
    p = put_u16(p, (unsigned)e->keepalive_s);
    if (e->v5) *p++ = 0; /* properties */
    p = put_u16(p, (unsigned)idtotal);
    memcpy(p, e->prefix, e->prefix_len);
    p += e->prefix_len;
    if (c->subscriber) {
        memcpy(p, "-sub", 4);
        p += 4;
    }
    memcpy(p, id, (size_t)idlen);
    p += idlen;
    c->nout += (size_t)(p - s);
}

static void put_subscribe(Engine *e, conn_t *c) {
    size_t rem = 2 + 2 + e->filter_len + 1 + (size_t)e->v5;
    char *p = out_room(c, rem + 5);
    if (!p) return;
    char *s = p;
    *p++ = (char)0x82;
    p = put_varint(p, rem);
    p = put_u16(p, 1);
    if (e->v5) *p++ = 0; /* properties */
    p = put_u16(p, (unsigned)e->filter_len);
    memcpy(p, e->filter, e->filter_len);
    p += e->filter_len;
    *p++ = (char)e->qos;
    c->nout += (size_t)(p - s);
}

static char *put_uint(char *p, uint64_t v) {
    char tmp[24];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n) *p++ = tmp[--n];
    return p;
}

static inline uint64_t xorshift(uint64_t *s) {
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

/* a value in tenths between lo and hi tenths, as "12.3" */
static char *put_tenths(char *p, uint64_t *rng, unsigned lo, unsigned hi) {
    unsigned v = lo + (unsigned)(xorshift(rng) % (hi - lo + 1));
    p = put_uint(p, v / 10);
    *p++ = '.';
    *p++ = (char)('0' + v % 10);
    return p;
}

/* seed 002's message, as swarm/mqtt.payload words it (sentAt: Unix seconds) */
static size_t put_payload(conn_t *c, char *p, double sent_at) {
    char *s = p;
    memcpy(p, "{\"clientId\":", 12);
    p = put_uint(p + 12, (uint64_t)c->client);
    memcpy(p, ",\"seq\":", 7);
    p = put_uint(p + 7, c->seq);
    memcpy(p, ",\"sentAt\":", 10);
    uint64_t us = (uint64_t)(sent_at * 1e6 + 0.5);
    p = put_uint(p + 10, us / 1000000);
    *p++ = '.';
    char frac[7];
    uint64_t f = us % 1000000;
    for (int i = 5; i >= 0; i--) {
        frac[i] = (char)('0' + f % 10);
        f /= 10;
    }
    memcpy(p, frac, 6);
    p += 6;
    memcpy(p, ",\"temp\":", 8);
    p = put_tenths(p + 8, &c->rng, 200, 400);
    memcpy(p, ",\"humidity\":", 12);
    p = put_tenths(p + 12, &c->rng, 100, 900);
    memcpy(p, ",\"light\":", 9);
    p = put_tenths(p + 9, &c->rng, 0, 1000);
    *p++ = '}';
    return (size_t)(p - s);
}

static int pid_in_flight(conn_t *c, unsigned pid) {
    for (size_t i = 0; i < c->nfl; i++)
        if (c->fl[i].pid == pid && c->fl[i].state != F_REFUSED) return 1;
    return 0;
}

/* one message: 0 sent (queued), -1 not (no memory, or 65,535 in flight) */
static int publish_one(Engine *e, conn_t *c, uint64_t now) {
    unsigned pid = 0;
    if (e->qos) {
        if (c->nfl >= 65535) return -1;
        do {
            c->next_pid = (uint16_t)(c->next_pid % 65535 + 1);
        } while (c->nfl && pid_in_flight(c, c->next_pid));
        pid = c->next_pid;
        if (grow((void **)&c->fl, &c->capfl, c->nfl + 1, sizeof(flight_t))) return -1;
    }
    char *p = out_room(c, 5 + 2 + e->topic_len + 32 + 2 + 200);
    if (!p) return -1;
    char body[200];
    double sent_at = wall_s();
    size_t blen = put_payload(c, body, sent_at);
    char idtxt[24];
    size_t idlen = (size_t)(put_uint(idtxt, (uint64_t)c->client) - idtxt);
    size_t tlen = e->topic_len + 1 + idlen;
    size_t rem = 2 + tlen + (e->qos ? 2 : 0) + (size_t)e->v5 + blen;
    char *s = p;
    *p++ = (char)(0x30 | (e->qos << 1));
    p = put_varint(p, rem);
    p = put_u16(p, (unsigned)tlen);
    memcpy(p, e->topic, e->topic_len);
    p += e->topic_len;
    *p++ = '/';
    memcpy(p, idtxt, idlen);
    p += idlen;
    if (e->qos) p = put_u16(p, pid);
    if (e->v5) *p++ = 0; /* properties */
    memcpy(p, body, blen);
    p += blen;
    c->nout += (size_t)(p - s);
    if (e->first_sent == 0) e->first_sent = sent_at;
    if (e->qos) {
        c->fl[c->nfl++] = (flight_t){c->seq, (uint16_t)pid, F_ACK, 0, now};
        c->live++;
        ATOMIC_ADD(e->outstanding, 1);
    } else {
        pthread_mutex_lock(&e->lock);
        e->cur->ok++;
        e->cur->bytes += blen;
        hist_record(&e->cur->latency, 0);
        pthread_mutex_unlock(&e->lock);
    }
    c->seq++;
    return 0;
}

/* ------------------------------------------------------------------ I/O */

#define E_TLS 100000 /* io_send/io_recv's errno for a TLS failure (not an errno) */

#ifdef WEBPERF_TLS
static void tls_failed(Engine *e, conn_t *c, const char *what) {
    char reason[160] = "";
    tls_reason(c->ssl, what, reason, sizeof reason);
    pthread_mutex_lock(&e->lock);
    if (!e->tls_message[0]) snprintf(e->tls_message, sizeof e->tls_message, "%s", reason);
    pthread_mutex_unlock(&e->lock);
    errno = E_TLS;
}

/* an SSL call's result: > 0 done; 0 the peer closed; -1 with errno (EAGAIN: wait; *want_write:
   for a writable socket) */
static ssize_t tls_result(Engine *e, conn_t *c, int r, int *want_write) {
    int err = SSL_get_error(c->ssl, r);
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
        if (want_write) *want_write = err == SSL_ERROR_WANT_WRITE;
        errno = EAGAIN;
        return -1;
    }
    if (err == SSL_ERROR_ZERO_RETURN) return 0;
    if (err == SSL_ERROR_SYSCALL && ERR_peek_error() == 0) {
        if (r == 0 || errno == 0) return 0; /* closed without close_notify */
        return -1;
    }
    tls_failed(e, c, "TLS error");
    return -1;
}
#endif

static ssize_t io_send(Engine *e, conn_t *c, const char *buf, size_t len) {
#ifdef WEBPERF_TLS
    if (c->ssl) {
        ERR_clear_error();
        int r = SSL_write(c->ssl, buf, (int)(len > 1 << 30 ? 1 << 30 : len));
        if (r > 0) return r;
        ssize_t x = tls_result(e, c, r, NULL);
        if (x == 0) { errno = EPIPE; return -1; }
        return x;
    }
#endif
    (void)e;
    return send(c->fd, buf, len, MSG_NOSIGNAL);
}

static ssize_t io_recv(Engine *e, conn_t *c, char *buf, size_t len) {
#ifdef WEBPERF_TLS
    if (c->ssl) {
        ERR_clear_error();
        int r = SSL_read(c->ssl, buf, (int)len);
        if (r > 0) return r;
        return tls_result(e, c, r, NULL);
    }
#endif
    (void)e;
    return recv(c->fd, buf, len, 0);
}

static void tls_free(conn_t *c) {
#ifdef WEBPERF_TLS
    if (c->ssl) SSL_free(c->ssl);
#endif
    c->ssl = NULL;
}

static void set_events(Engine *e, conn_t *c, int want_out) {
    if (c->fd < 0 || want_out == c->want_out) return;
    struct epoll_event ev = {.events = EPOLLIN | (want_out ? EPOLLOUT : 0), .data.ptr = c};
    epoll_ctl(e->epfd, EPOLL_CTL_MOD, c->fd, &ev);
    c->want_out = want_out;
}

static void conn_dead(Engine *e, conn_t *c, int unexpected) {
    heap_remove(e, c);
    if (c->fd >= 0) {
        epoll_ctl(e->epfd, EPOLL_CTL_DEL, c->fd, NULL);
        close(c->fd);
        c->fd = -1;
    }
    if (c->state == S_UP) {
        ATOMIC_ADD(e->connected, -1);
        if (unexpected) ATOMIC_ADD(e->disconnects, 1);
    }
    tls_free(c);
    c->state = S_DEAD;
    /* what was in flight stays outstanding (never acknowledged) */
    ATOMIC_ADD(e->outstanding, -(long long)c->nfl);
    c->live = 0;
    c->nout = c->wpos = c->nin = 0;
    free(c->out);
    free(c->in);
    free(c->ws);
    c->out = c->in = c->ws = NULL;
    c->capout = c->capin = c->capws = 0;
    c->nws = c->framed = 0;
}

static void io_failed(Engine *e, conn_t *c, int err) {
    pthread_mutex_lock(&e->lock);
    if (err == E_TLS) e->cur->tls++;
    else if (err) count_errno(e->cur->io_errno, err);
    else e->cur->closed++;
    pthread_mutex_unlock(&e->lock);
    conn_dead(e, c, 1);
}

static void pump(Engine *e, conn_t *c, uint64_t now);

/* WebSocket: what was queued since the last frame becomes one binary frame (masked, as a
   client's must be, with the key 0: the payload is unchanged) */
static int ws_frame(conn_t *c) {
    size_t n = c->nout - c->framed;
    if (!n) return 0;
    size_t head = n < 126 ? 6 : n < 65536 ? 8 : 14;
    if (grow((void **)&c->out, &c->capout, c->nout + head, 1)) return -1;
    char *p = c->out + c->framed;
    memmove(p + head, p, n);
    p[0] = (char)0x82;
    if (n < 126) {
        p[1] = (char)(0x80 | n);
    } else if (n < 65536) {
        p[1] = (char)(0x80 | 126);
        put_u16(p + 2, (unsigned)n);
    } else {
        p[1] = (char)(0x80 | 127);
        for (int i = 0; i < 8; i++) p[2 + i] = (char)((uint64_t)n >> (56 - 8 * i));
    }
    memset(p + head - 4, 0, 4); /* the masking key */
    c->nout += head;
    c->framed = c->nout;
    return 0;
}

/* send what is queued; -1: the connection died */
static int flush(Engine *e, conn_t *c) {
    if (e->ws_request && c->state >= S_CONNACK && ws_frame(c) < 0) {
        io_failed(e, c, ENOMEM);
        return -1;
    }
    while (c->wpos < c->nout) {
        ssize_t n = io_send(e, c, c->out + c->wpos, c->nout - c->wpos);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                set_events(e, c, 1);
                return 0;
            }
            io_failed(e, c, errno);
            return -1;
        }
        c->wpos += (size_t)n;
        c->last_tx = now_ns();
    }
    c->wpos = c->nout = c->framed = 0;
    /* QoS 0 flat out: wake again when the socket takes more */
    set_events(e, c, c->state == S_UP && !c->subscriber && !e->qos && !e->period_ns &&
                         !e->stop_sending);
    return 0;
}

/* flat out: publish while the window (QoS 1, 2) or the send buffer (QoS 0) allows */
static void pump(Engine *e, conn_t *c, uint64_t now) {
    if (c->state != S_UP || c->subscriber || e->period_ns || e->stop_sending) return;
    if (e->qos) {
        while (c->live < e->window && c->nout < OUT_HIGH)
            if (publish_one(e, c, now) < 0) break;
    } else {
        while (c->nout - c->wpos < OUT_HIGH / 4)
            if (publish_one(e, c, now) < 0) break;
    }
}

static void start_publishing(Engine *e, conn_t *c, uint64_t now) {
    if (c->subscriber) {
        put_subscribe(e, c);
        return;
    }
    if (e->period_ns) {
        /* paced: the first due at the user's phase (set in c->due at add) */
        heap_push(e, c, c->due > now ? c->due : now);
        return;
    }
    pump(e, c, now);
}

static flight_t *find_flight(conn_t *c, unsigned pid, size_t *index) {
    for (size_t i = 0; i < c->nfl; i++)
        if (c->fl[i].pid == pid && c->fl[i].state != F_REFUSED) {
            *index = i;
            return &c->fl[i];
        }
    return NULL;
}

static void acked(Engine *e, conn_t *c, size_t i, uint64_t now) {
    flight_t *f = &c->fl[i];
    uint64_t us = (now - f->sent_ns) / 1000;
    if (!f->timed_out) c->live--;
    c->fl[i] = c->fl[--c->nfl];
    ATOMIC_ADD(e->outstanding, -1);
    pthread_mutex_lock(&e->lock);
    e->cur->ok++;
    hist_record(&e->cur->latency, us);
    pthread_mutex_unlock(&e->lock);
}

/* a message for a subscriber: count it, its end-to-end latency from sentAt */
static void received(Engine *e, const char *body, size_t n) {
    static const char key[] = "\"sentAt\":";
    double latency = -1;
    for (size_t i = 0; i + sizeof key - 1 < n; i++) {
        if (body[i] == '"' && memcmp(body + i, key, sizeof key - 1) == 0) {
            char num[32];
            size_t j = i + sizeof key - 1, k = 0;
            while (j < n && k < sizeof num - 1 && (body[j] == '.' || (body[j] >= '0' && body[j] <= '9')))
                num[k++] = body[j++];
            num[k] = 0;
            if (k) latency = wall_s() - strtod(num, NULL);
            break;
        }
    }
    pthread_mutex_lock(&e->lock);
    e->cur->received++;
    e->cur->received_bytes += n;
    if (latency >= 0) hist_record(&e->cur->e2e, (uint64_t)(latency * 1e6));
    pthread_mutex_unlock(&e->lock);
}

/* MQTT 5: the broker refused a message (a PUBACK/PUBREC reason >= 0x80): it leaves the
   window and the outstanding count, and stays in the ledger unacknowledged */
static void refused(Engine *e, conn_t *c, flight_t *f, unsigned reason) {
    if (!f->timed_out) c->live--;
    f->state = F_REFUSED;
    ATOMIC_ADD(e->outstanding, -1);
    pthread_mutex_lock(&e->lock);
    e->cur->refused[reason & 255]++;
    pthread_mutex_unlock(&e->lock);
}

/* MQTT 5: the property list at b[at..n): where it ends, or 0 if malformed */
static size_t skip_properties(const unsigned char *b, size_t at, size_t n) {
    size_t len = 0, mult = 1;
    for (int k = 0; k < 4; k++, at++) {
        if (at >= n) return 0;
        len += (size_t)(b[at] & 127) * mult;
        mult *= 128;
        if (!(b[at] & 128)) {
            at++;
            return at + len <= n ? at + len : 0;
        }
    }
    return 0;
}

/* one packet from the broker; -1: a protocol error (the connection is closed) */
static int on_packet(Engine *e, conn_t *c, unsigned char type, const unsigned char *b, size_t n,
                     uint64_t now) {
    unsigned kind = type >> 4;
    unsigned pid = n >= 2 ? (unsigned)(b[0] << 8 | b[1]) : 0;
    size_t i;
    flight_t *f;
    switch (kind) {
    case 2: /* CONNACK (MQTT 5: a reason code and properties) */
        if (c->state != S_CONNACK || (e->v5 ? n < 3 : n != 2)) return -1;
        if (b[1] != 0) { /* refused: its return code is the error kind */
            pthread_mutex_lock(&e->lock);
            e->cur->connack[b[1]]++;
            pthread_mutex_unlock(&e->lock);
            ATOMIC_ADD(e->connect_failures, 1);
            conn_dead(e, c, 0);
            return 1;
        }
        c->state = S_UP;
        ATOMIC_ADD(e->connected, 1);
        start_publishing(e, c, now);
        return 0;
    case 4: /* PUBACK (MQTT 5: a reason code may follow) */
        if (e->v5 ? n < 2 : n != 2) return -1;
        if ((f = find_flight(c, pid, &i)) && f->state == F_ACK && e->qos == 1) {
            if (n > 2 && b[2] >= 0x80) refused(e, c, f, b[2]);
            else acked(e, c, i, now);
        }
        return 0;
    case 5: /* PUBREC: release it (MQTT 5: unless it says the broker refused it) */
        if (e->v5 ? n < 2 : n != 2) return -1;
        if (n > 2 && b[2] >= 0x80) {
            if ((f = find_flight(c, pid, &i)) && f->state == F_ACK) refused(e, c, f, b[2]);
            return 0;
        }
        if ((f = find_flight(c, pid, &i)) && f->state == F_ACK) f->state = F_COMP;
        put_ack(c, 0x62, pid);
        return 0;
    case 7: /* PUBCOMP */
        if (e->v5 ? n < 2 : n != 2) return -1;
        if ((f = find_flight(c, pid, &i)) && f->state == F_COMP) acked(e, c, i, now);
        return 0;
    case 6: /* PUBREL (a subscriber's QoS 2 message): complete it */
        if ((e->v5 ? n < 2 : n != 2) || (type & 15) != 2) return -1;
        put_ack(c, 0x70, pid);
        return 0;
    case 3: { /* PUBLISH (a subscriber's) */
        unsigned q = (type >> 1) & 3;
        if (n < 2 || q == 3) return -1;
        size_t tlen = (size_t)(b[0] << 8 | b[1]);
        size_t head = 2 + tlen + (q ? 2 : 0);
        if (head > n) return -1;
        if (q) {
            pid = (unsigned)(b[2 + tlen] << 8 | b[3 + tlen]);
            put_ack(c, q == 1 ? 0x40 : 0x50, pid);
        }
        if (e->v5 && !(head = skip_properties(b, head, n))) return -1;
        received(e, (const char *)b + head, n - head);
        return 0;
    }
    case 9: { /* SUBACK (MQTT 5: properties before the reason codes) */
        size_t at = e->v5 ? skip_properties(b, 2, n) : 2;
        if (n < 3 || !at || at >= n || b[at] >= 0x80) return -1;
        ATOMIC_ADD(e->subscribed, 1);
        return 0;
    }
    case 13: /* PINGRESP */
        return 0;
    case 14: /* DISCONNECT from the broker (MQTT 5) */
        if (!e->v5) return -1;
        io_failed(e, c, 0);
        return 1;
    default:
        return -1;
    }
}

static void protocol_error(Engine *e, conn_t *c) {
    pthread_mutex_lock(&e->lock);
    e->cur->protocol++;
    pthread_mutex_unlock(&e->lock);
    conn_dead(e, c, 1);
}

/* parse what arrived: every whole packet; keep the rest */
static void on_bytes(Engine *e, conn_t *c, const unsigned char *d, size_t n, uint64_t now) {
    const unsigned char *p = d, *end = d + n;
    if (c->nin) { /* an unfinished packet from before: join */
        if (grow((void **)&c->in, &c->capin, c->nin + n, 1)) { conn_dead(e, c, 1); return; }
        memcpy(c->in + c->nin, d, n);
        c->nin += n;
        p = (const unsigned char *)c->in;
        end = p + c->nin;
    }
    while (end - p >= 2) {
        size_t rem = 0, mult = 1, k = 1;
        for (;; k++) {
            if (k > 4) { protocol_error(e, c); return; }
            if (p + k >= end) goto partial;
            rem += (size_t)(p[k] & 127) * mult;
            mult *= 128;
            if (!(p[k] & 128)) break;
        }
        if (rem > MAX_PACKET) { protocol_error(e, c); return; }
        if ((size_t)(end - p) < 1 + k + rem) goto partial;
        int r = on_packet(e, c, p[0], p + 1 + k, rem, now);
        if (r < 0) { protocol_error(e, c); return; }
        if (r > 0 || c->state == S_DEAD) return;
        p += 1 + k + rem;
    }
partial:
    if (p < end) {
        size_t left = (size_t)(end - p);
        if (c->nin) memmove(c->in, p, left);
        else {
            if (grow((void **)&c->in, &c->capin, left, 1)) { conn_dead(e, c, 1); return; }
            memcpy(c->in, p, left);
        }
        c->nin = left;
    } else {
        c->nin = 0;
    }
    pump(e, c, now);
    flush(e, c);
}

static void mqtt_begin(Engine *e, conn_t *c) {
    if (e->ws_request && c->state != S_UPGRADE) { /* ws://: the HTTP upgrade first */
        char *p = out_room(c, e->ws_request_len);
        if (!p) { io_failed(e, c, ENOMEM); return; }
        memcpy(p, e->ws_request, e->ws_request_len);
        c->nout += e->ws_request_len;
        c->state = S_UPGRADE;
        flush(e, c);
        return;
    }
    c->state = S_CONNACK;
    put_connect(e, c);
    flush(e, c);
}

static void on_bytes(Engine *e, conn_t *c, const unsigned char *d, size_t n, uint64_t now);

/* WebSocket bytes: the upgrade's answer, then frames whose payloads are the MQTT stream */
static void ws_bytes(Engine *e, conn_t *c, const unsigned char *d, size_t n, uint64_t now) {
    if (grow((void **)&c->ws, &c->capws, c->nws + n, 1)) { io_failed(e, c, ENOMEM); return; }
    memcpy(c->ws + c->nws, d, n);
    c->nws += n;
    size_t at = 0;
    if (c->state == S_UPGRADE) {
        char *end = memmem(c->ws, c->nws, "\r\n\r\n", 4);
        if (!end) {
            if (c->nws > 16384) protocol_error(e, c);
            return;
        }
        if (c->nws < 13 || memcmp(c->ws, "HTTP/1.1 101", 12) != 0) { /* not switched */
            protocol_error(e, c);
            return;
        }
        at = (size_t)(end - c->ws) + 4;
        mqtt_begin(e, c);
        if (c->state == S_DEAD) return;
    }
    while (c->nws - at >= 2) {
        unsigned char *f = (unsigned char *)c->ws + at;
        size_t avail = c->nws - at, head = 2, len = f[1] & 127;
        if (f[1] & 128) { protocol_error(e, c); return; } /* a server's frames are not masked */
        if (len == 126) {
            if (avail < 4) break;
            len = (size_t)f[2] << 8 | f[3];
            head = 4;
        } else if (len == 127) {
            if (avail < 10) break;
            len = 0;
            for (int i = 0; i < 8; i++) len = len << 8 | f[2 + i];
            head = 10;
        }
        if (len > MAX_PACKET) { protocol_error(e, c); return; }
        if (avail < head + len) break;
        unsigned opcode = f[0] & 15;
        at += head + len;
        if (opcode == 8) { io_failed(e, c, 0); return; } /* close */
        if (opcode == 9) { /* ping: pong with its payload (small) */
            if (ws_frame(c) < 0) { io_failed(e, c, ENOMEM); return; } /* what came before */
            char *p = out_room(c, 6 + (len < 126 ? len : 0));
            f = (unsigned char *)c->ws + at - head - len; /* (out_room does not move c->ws) */
            if (p && len < 126) {
                p[0] = (char)0x8A;
                p[1] = (char)(0x80 | len);
                memset(p + 2, 0, 4);
                memcpy(p + 6, f + head, len);
                c->nout += 6 + len;
                c->framed = c->nout;
            }
            continue;
        }
        if (opcode <= 2 && len) {
            /* on_bytes never touches c->ws: f stays valid */
            on_bytes(e, c, f + head, len, now);
            if (c->state == S_DEAD) return;
        }
    }
    if (at) {
        memmove(c->ws, c->ws + at, c->nws - at);
        c->nws -= at;
    }
}

/* one step of the TLS handshake (the socket is connected) */
static void tls_step(Engine *e, conn_t *c) {
#ifdef WEBPERF_TLS
    ERR_clear_error();
    int r = SSL_do_handshake(c->ssl);
    if (r == 1) {
        mqtt_begin(e, c);
        return;
    }
    int want_write = 0;
    if (tls_result(e, c, r, &want_write) < 0 && errno == EAGAIN) {
        set_events(e, c, want_write);
        return;
    }
    if (errno != E_TLS) tls_failed(e, c, "the broker closed the connection during the TLS handshake");
    pthread_mutex_lock(&e->lock);
    e->cur->tls++;
    pthread_mutex_unlock(&e->lock);
    ATOMIC_ADD(e->connect_failures, 1);
    conn_dead(e, c, 0);
#else
    (void)e;
    (void)c;
#endif
}

static void tls_start(Engine *e, conn_t *c) {
#ifdef WEBPERF_TLS
    SSL *ssl = SSL_new(e->tls_ctx);
    c->ssl = ssl;
    c->state = S_TLS;
    if (!ssl || !SSL_set_fd(ssl, c->fd)) {
        tls_failed(e, c, "cannot start TLS");
        pthread_mutex_lock(&e->lock);
        e->cur->tls++;
        pthread_mutex_unlock(&e->lock);
        ATOMIC_ADD(e->connect_failures, 1);
        conn_dead(e, c, 0);
        return;
    }
    SSL_set_connect_state(ssl);
    if (!e->server_is_ip) SSL_set_tlsext_host_name(ssl, e->server_name); /* SNI */
    if (SSL_CTX_get_verify_mode(e->tls_ctx) != SSL_VERIFY_NONE) {
        X509_VERIFY_PARAM *param = SSL_get0_param(ssl);
        if (e->server_is_ip) X509_VERIFY_PARAM_set1_ip_asc(param, e->server_name);
        else X509_VERIFY_PARAM_set1_host(param, e->server_name, 0);
    }
    tls_step(e, c);
#else
    (void)e;
    (void)c;
#endif
}

static void on_event(Engine *e, conn_t *c, uint32_t events, uint64_t now) {
    if (c->state == S_TLS) {
        tls_step(e, c);
        return;
    }
    if (c->state == S_CONNECTING) {
        int err = 0;
        socklen_t len = sizeof err;
        getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err || (events & (EPOLLERR | EPOLLHUP))) {
            pthread_mutex_lock(&e->lock);
            count_errno(e->cur->connect_errno, err ? err : ECONNREFUSED);
            pthread_mutex_unlock(&e->lock);
            ATOMIC_ADD(e->connect_failures, 1);
            conn_dead(e, c, 0);
            return;
        }
        if (e->tls_ctx) tls_start(e, c);
        else mqtt_begin(e, c);
        return;
    }
    if (events & EPOLLIN) {
        for (;;) {
            ssize_t n = io_recv(e, c, e->rbuf, READ_SIZE);
            if (n > 0) {
                if (e->ws_request) ws_bytes(e, c, (unsigned char *)e->rbuf, (size_t)n, now);
                else on_bytes(e, c, (unsigned char *)e->rbuf, (size_t)n, now);
                if (c->state == S_DEAD) return;
                if (n < READ_SIZE && !c->ssl) break; /* TLS: until it wants more */
                continue;
            }
            if (n == 0) {
                if (c->state != S_UP) ATOMIC_ADD(e->connect_failures, 1);
                io_failed(e, c, 0);
                return;
            }
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) break;
            io_failed(e, c, errno);
            return;
        }
    } else if (events & (EPOLLERR | EPOLLHUP)) {
        io_failed(e, c, 0);
        return;
    }
    if (events & EPOLLOUT) {
        pump(e, c, now);
        flush(e, c);
    }
}

static void open_conn(Engine *e, conn_t *c, uint64_t now) {
    int fd = socket(e->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) goto failed;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (e->nsources && e->addr.ss_family == AF_INET) {
        struct sockaddr_in *src = &e->sources[e->next_source++ % e->nsources];
        if (bind(fd, (struct sockaddr *)src, sizeof *src) < 0) {
            close(fd);
            goto failed;
        }
    }
    c->fd = fd;
    c->started = c->last_tx = now;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.ptr = c};
    c->want_out = 1;
    if (connect(fd, (struct sockaddr *)&e->addr, e->addrlen) < 0 && errno != EINPROGRESS) {
        close(fd);
        c->fd = -1;
        goto failed;
    }
    c->state = S_CONNECTING;
    if (epoll_ctl(e->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
        close(fd);
        c->fd = -1;
        goto failed;
    }
    return;
failed:;
    int err = errno;
    pthread_mutex_lock(&e->lock);
    count_errno(e->cur->connect_errno, err);
    pthread_mutex_unlock(&e->lock);
    ATOMIC_ADD(e->connect_failures, 1);
    c->state = S_DEAD;
}

/* timeouts, connect deadlines and keep-alives */
static void scan(Engine *e, uint64_t now) {
    uint64_t keepalive_ns = (uint64_t)e->keepalive_s * 1000000000ULL / 2;
    for (size_t i = 0; i < e->nconns; i++) {
        conn_t *c = e->conns[i];
        if (!c || c->state == S_DEAD) continue;
        if (c->state != S_UP) {
            if (now - c->started > e->timeout_ns) {
                pthread_mutex_lock(&e->lock);
                e->cur->connect_timeouts++;
                pthread_mutex_unlock(&e->lock);
                ATOMIC_ADD(e->connect_failures, 1);
                conn_dead(e, c, 0);
            }
            continue;
        }
        uint64_t timeouts = 0;
        for (size_t j = 0; j < c->nfl; j++) {
            flight_t *f = &c->fl[j];
            if (!f->timed_out && now - f->sent_ns > e->timeout_ns) {
                f->timed_out = 1; /* still outstanding; no longer holds a window's place */
                c->live--;
                timeouts++;
            }
        }
        if (timeouts) {
            pthread_mutex_lock(&e->lock);
            e->cur->timeouts += timeouts;
            pthread_mutex_unlock(&e->lock);
            pump(e, c, now);
            flush(e, c);
            if (c->state == S_DEAD) continue;
        }
        if (keepalive_ns && now - c->last_tx > keepalive_ns) {
            char *p = out_room(c, 2);
            if (p) {
                p[0] = (char)0xC0;
                p[1] = 0;
                c->nout += 2;
                c->last_tx = now;
                flush(e, c);
            }
        }
    }
}

static void paced_due(Engine *e, conn_t *c, uint64_t now) {
    uint64_t lag = now - c->due;
    uint64_t next = c->due + e->period_ns;
    pthread_mutex_lock(&e->lock);
    hist_record(&e->cur->lag, lag / 1000);
    hist_record(e->all_lag, lag / 1000);
    if (lag > e->period_ns) { /* a whole slot behind: counted late, no burst to catch up */
        e->cur->late++;
        e->all_late++;
        next = now + e->period_ns;
    }
    pthread_mutex_unlock(&e->lock);
    if (publish_one(e, c, now) < 0) ATOMIC_ADD(e->publish_errors, 1);
    heap_push(e, c, next);
    flush(e, c);
}

static int run_commands(Engine *e, uint64_t now) {
    uint64_t drained;
    if (read(e->evfd, &drained, sizeof drained) < 0) { /* nothing pending */ }
    pthread_mutex_lock(&e->lock);
    command_t *cmds = e->commands;
    size_t n = e->ncommands;
    e->commands = NULL;
    e->ncommands = e->capcommands = 0;
    pthread_mutex_unlock(&e->lock);
    int quit = 0;
    for (size_t i = 0; i < n; i++) {
        command_t *cmd = &cmds[i];
        if (cmd->op == OP_QUIT) quit = 1;
        else if (cmd->op == OP_ADD) {
            conn_t *c = calloc(1, sizeof(conn_t));
            if (!c || grow((void **)&e->conns, &e->capconns, e->nconns + 1, sizeof(conn_t *))) {
                free(c);
                ATOMIC_ADD(e->connect_failures, 1);
                continue;
            }
            c->fd = -1;
            c->client = cmd->arg;
            c->subscriber = cmd->subscriber;
            c->rng = 0x9E3779B97F4A7C15ULL ^ ((uint64_t)cmd->arg * 0x2545F4914F6CDD1DULL);
            if (!c->rng) c->rng = 1;
            c->due = now + (uint64_t)(cmd->fraction * (double)e->period_ns);
            e->conns[e->nconns++] = c;
            open_conn(e, c, now);
        } else if (cmd->op == OP_REMOVE) {
            size_t id = (size_t)cmd->arg;
            if (id < e->nconns && e->conns[id] && e->conns[id]->state != S_DEAD) {
                conn_t *c = e->conns[id];
                if (c->state == S_UP) { /* a polite goodbye */
                    char bye[2] = {(char)0xE0, 0};
                    if (io_send(e, c, bye, 2) < 0) { /* closing anyway */ }
                }
                conn_dead(e, c, 0);
            }
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
        uint64_t wake = now + SCAN_NS;
        if (e->nheap && !e->stop_sending && e->heap[0]->due < wake) wake = e->heap[0]->due;
        uint64_t wait = wake > now ? wake - now : 0;
        struct timespec ts = {.tv_sec = (time_t)(wait / 1000000000ULL),
                              .tv_nsec = (long)(wait % 1000000000ULL)};
        int n = epoll_pwait2(e->epfd, events, 256, &ts, NULL);
        if (n < 0 && errno == ENOSYS)
            n = epoll_wait(e->epfd, events, 256, (int)((wait + 999999) / 1000000));
        now = now_ns();
        int quit = 0;
        for (int i = 0; i < n; i++) {
            if (events[i].data.ptr == NULL) quit |= run_commands(e, now);
            else {
                conn_t *c = events[i].data.ptr;
                if (c->state != S_DEAD) on_event(e, c, events[i].events, now);
            }
        }
        if (quit) break;
        now = now_ns();
        while (!e->stop_sending && e->nheap && e->heap[0]->due <= now) {
            conn_t *c = e->heap[0];
            heap_remove(e, c);
            paced_due(e, c, now);
        }
        if (now - e->last_scan >= SCAN_NS) {
            e->last_scan = now;
            scan(e, now);
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
    if (bad) { PyErr_NoMemory(); return -1; }
    uint64_t one = 1;
    if (write(e->evfd, &one, sizeof one) < 0) { /* a wake-up is pending */ }
    return 0;
}

static int Engine_init(Engine *e, PyObject *args, PyObject *kwds) {
    static char *names[] = {"family", "host",      "port",    "qos",           "period_s",
                            "window", "timeout_s", "topic",   "client_prefix", "keepalive_s",
                            "clean_session", "filter", "protocol", NULL};
    int family, port, qos, keepalive_s = 60, clean_session = 1, protocol = 4;
    const char *host, *topic, *prefix, *filter = "";
    double period_s, timeout_s;
    Py_ssize_t window;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "isiidndss|ipsi", names, &family, &host, &port,
                                     &qos, &period_s, &window, &timeout_s, &topic, &prefix,
                                     &keepalive_s, &clean_session, &filter, &protocol))
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
    if (qos < 0 || qos > 2 || period_s < 0 || window < 1 || window > 65535 || timeout_s <= 0 ||
        keepalive_s < 0 || keepalive_s > 65535 || (protocol != 4 && protocol != 5)) {
        PyErr_SetString(PyExc_ValueError, "bad qos, period, window, timeout, keep-alive or protocol");
        return -1;
    }
    e->qos = qos;
    e->v5 = protocol == 5;
    e->period_ns = (uint64_t)(period_s * 1e9);
    e->window = (size_t)window;
    e->timeout_ns = (uint64_t)(timeout_s * 1e9);
    e->keepalive_s = keepalive_s;
    e->clean_session = clean_session;
    e->topic = strdup(topic);
    e->prefix = strdup(prefix);
    e->filter = strdup(filter);
    e->cur = calloc(1, sizeof(stats_t));
    e->spare = calloc(1, sizeof(stats_t));
    e->rbuf = malloc(READ_SIZE);
    e->all_lag = calloc(1, sizeof(hist_t));
    if (!e->all_lag) { PyErr_NoMemory(); return -1; }
    hist_clear(e->all_lag);
    if (!e->topic || !e->prefix || !e->filter || !e->cur || !e->spare || !e->rbuf) {
        PyErr_NoMemory();
        return -1;
    }
    e->topic_len = strlen(topic);
    e->prefix_len = strlen(prefix);
    e->filter_len = strlen(filter);
    if (e->topic_len > 1000 || e->prefix_len > 1000 || e->filter_len > 1000) {
        PyErr_SetString(PyExc_ValueError, "topic, client prefix or filter too long");
        return -1;
    }
    stats_clear(e->cur);
    stats_clear(e->spare);
    if (loop_open(&e->epfd, &e->evfd) < 0) return -1;
    pthread_mutex_init(&e->lock, NULL);
    return 0;
bad_address:
    PyErr_Format(PyExc_ValueError, "not a numeric address of family %d: %s", family, host);
    return -1;
}

static PyObject *Engine_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    Engine *e = (Engine *)type->tp_alloc(type, 0);
    if (e) e->epfd = e->evfd = -1;
    return (PyObject *)e;
}

static void engine_join(Engine *e) {
    if (e->started && !e->finished) {
        command_t quit = {OP_QUIT, 0, 0, 0};
        push_command(e, quit);
        Py_BEGIN_ALLOW_THREADS
        pthread_join(e->thread, NULL);
        Py_END_ALLOW_THREADS
    }
    if (!e->finished) {
        e->finished = 1;
        for (size_t i = 0; i < e->nconns; i++) {
            conn_t *c = e->conns[i];
            if (c->state == S_UP) {
                char bye[2] = {(char)0xE0, 0};
                if (io_send(e, c, bye, 2) < 0) { /* closing anyway */ }
            }
            tls_free(c);
            if (c->fd >= 0) close(c->fd);
            c->fd = -1;
        }
    }
}

static void Engine_dealloc(Engine *e) {
    engine_join(e);
    for (size_t i = 0; i < e->nconns; i++) {
        conn_t *c = e->conns[i];
        free(c->fl);
        free(c->out);
        free(c->in);
        free(c);
    }
    free(e->conns);
    free(e->sources);
    if (e->epfd >= 0) close(e->epfd);
    if (e->evfd >= 0) close(e->evfd);
    free(e->topic);
    free(e->prefix);
    free(e->filter);
    free(e->cur);
    free(e->spare);
    free(e->rbuf);
    free(e->all_lag);
#ifdef WEBPERF_TLS
    if (e->tls_ctx) SSL_CTX_free(e->tls_ctx);
#endif
    free(e->server_name);
    free(e->ws_request);
    free(e->heap);
    free(e->commands);
    Py_TYPE(e)->tp_free((PyObject *)e);
}

/* add(client, fraction=0.0, subscriber=False) -> handle */
static PyObject *Engine_add(Engine *e, PyObject *args) {
    long long client;
    double fraction = 0;
    int subscriber = 0;
    if (!PyArg_ParseTuple(args, "L|dp", &client, &fraction, &subscriber)) return NULL;
    if (fraction < 0 || fraction >= 1 || client < 0) {
        PyErr_SetString(PyExc_ValueError, "client below 0 or fraction outside [0, 1)");
        return NULL;
    }
    if (e->finished) {
        PyErr_SetString(PyExc_RuntimeError, "the loop is finished");
        return NULL;
    }
    if (subscriber && !e->filter_len) {
        PyErr_SetString(PyExc_ValueError, "a subscriber needs the engine's filter");
        return NULL;
    }
    if (!e->started) {
        int err = pthread_create(&e->thread, NULL, loop_main, e);
        if (err) { errno = err; return PyErr_SetFromErrno(PyExc_OSError); }
        e->started = 1;
    }
    /* handles are the order of adds: the thread appends in command order */
    long long id = e->adds++;
    command_t cmd = {OP_ADD, client, fraction, subscriber};
    if (push_command(e, cmd) < 0) return NULL;
    return PyLong_FromLongLong(id);
}

static PyObject *Engine_remove(Engine *e, PyObject *arg) {
    long long id = PyLong_AsLongLong(arg);
    if (id == -1 && PyErr_Occurred()) return NULL;
    if (!e->finished) {
        command_t cmd = {OP_REMOVE, id, 0, 0};
        if (push_command(e, cmd) < 0) return NULL;
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
    for (Py_ssize_t i = 0; i < n; i++) {
        const char *text = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(seq, i));
        if (!text) { Py_DECREF(seq); return NULL; }
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
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
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
    if (!e->server_name) { SSL_CTX_free(ctx); return PyErr_NoMemory(); }
    unsigned char buf[sizeof(struct in6_addr)];
    e->server_is_ip = inet_pton(AF_INET, server_name, buf) == 1 ||
                      inet_pton(AF_INET6, server_name, buf) == 1;
    e->tls_ctx = ctx;
    Py_RETURN_NONE;
#else
    (void)server_name;
    (void)ca_file;
    PyErr_SetString(PyExc_RuntimeError, "the native MQTT loop is built without TLS (no OpenSSL)");
    return NULL;
#endif
}

/* use_websocket(request): ws:// (wss:// with use_tls): every connection sends this HTTP
   upgrade request (swarm/mqttloop.py builds it) and then speaks MQTT in binary frames */
static PyObject *Engine_use_websocket(Engine *e, PyObject *arg) {
    char *buf;
    Py_ssize_t len;
    if (PyBytes_AsStringAndSize(arg, &buf, &len) < 0) return NULL;
    if (e->started || e->ws_request) {
        PyErr_SetString(PyExc_RuntimeError, "use_websocket() comes once, before the first add()");
        return NULL;
    }
    e->ws_request = malloc((size_t)len);
    if (!e->ws_request) return PyErr_NoMemory();
    memcpy(e->ws_request, buf, (size_t)len);
    e->ws_request_len = (size_t)len;
    Py_RETURN_NONE;
}

static PyObject *Engine_stop_sending(Engine *e, PyObject *unused) {
    e->stop_sending = 1;
    __sync_synchronize();
    if (e->started && !e->finished) {
        uint64_t one = 1;
        if (write(e->evfd, &one, sizeof one) < 0) { /* pending */ }
    }
    Py_RETURN_NONE;
}

static PyObject *hist_tuple(hist_t *h) {
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

static PyObject *counts_dict(const uint32_t *counts, int n) {
    PyObject *d = PyDict_New();
    if (!d) return NULL;
    for (int i = 0; i < n; i++) {
        if (!counts[i]) continue;
        PyObject *k = PyLong_FromLong(i), *v = PyLong_FromUnsignedLong(counts[i]);
        if (!k || !v || PyDict_SetItem(d, k, v) < 0) {
            Py_XDECREF(k);
            Py_XDECREF(v);
            Py_DECREF(d);
            return NULL;
        }
        Py_DECREF(k);
        Py_DECREF(v);
    }
    return d;
}

/* take() -> dict: what completed since the last take */
static PyObject *Engine_take(Engine *e, PyObject *unused) {
    pthread_mutex_lock(&e->lock);
    stats_t *s = e->cur;
    e->cur = e->spare;
    e->spare = s;
    pthread_mutex_unlock(&e->lock);
    PyObject *r = Py_BuildValue(
        "{sKsKsKsKsKsKsKsKsKsKsssNsNsNsNsNsNsN}", "ok", (unsigned long long)s->ok, "bytes",
        (unsigned long long)s->bytes, "timeouts", (unsigned long long)s->timeouts,
        "connect_timeouts", (unsigned long long)s->connect_timeouts, "closed",
        (unsigned long long)s->closed, "protocol", (unsigned long long)s->protocol, "late",
        (unsigned long long)s->late, "received", (unsigned long long)s->received,
        "received_bytes", (unsigned long long)s->received_bytes, "tls",
        (unsigned long long)s->tls, "tls_message", e->tls_message, "connack",
        counts_dict(s->connack, 256), "refused", counts_dict(s->refused, 256), "connect_errno", counts_dict(s->connect_errno, ERRNO_SLOTS),
        "io_errno", counts_dict(s->io_errno, ERRNO_SLOTS), "latency", hist_tuple(&s->latency),
        "lag", hist_tuple(&s->lag), "e2e", hist_tuple(&s->e2e));
    stats_clear(s);
    return r;
}

/* state() -> (connected, outstanding, subscribed, connect_failures, disconnects,
   publish_errors, first_sent) */
static PyObject *Engine_state(Engine *e, PyObject *unused) {
    return Py_BuildValue("(LLLLLLd)", ATOMIC_GET(e->connected), ATOMIC_GET(e->outstanding),
                         ATOMIC_GET(e->subscribed), ATOMIC_GET(e->connect_failures),
                         ATOMIC_GET(e->disconnects), ATOMIC_GET(e->publish_errors),
                         e->first_sent);
}

/* pace() -> (late, lag histogram): every paced message since the start */
static PyObject *Engine_pace(Engine *e, PyObject *unused) {
    (void)unused;
    pthread_mutex_lock(&e->lock);
    PyObject *r = Py_BuildValue("(KN)", (unsigned long long)e->all_late, hist_tuple(e->all_lag));
    pthread_mutex_unlock(&e->lock);
    return r;
}

/* finish() -> [(client, published, [outstanding seqs]), ...] of every publisher ever
   added: the thread stops, every connection says DISCONNECT and closes */
static PyObject *Engine_finish(Engine *e, PyObject *unused) {
    engine_join(e);
    PyObject *out = PyList_New(0);
    if (!out) return NULL;
    for (size_t i = 0; i < e->nconns; i++) {
        conn_t *c = e->conns[i];
        if (c->subscriber) continue;
        PyObject *seqs = PyList_New((Py_ssize_t)c->nfl);
        if (!seqs) { Py_DECREF(out); return NULL; }
        for (size_t j = 0; j < c->nfl; j++)
            PyList_SET_ITEM(seqs, (Py_ssize_t)j, PyLong_FromUnsignedLong(c->fl[j].seq));
        if (PyList_Sort(seqs) < 0) { Py_DECREF(seqs); Py_DECREF(out); return NULL; }
        PyObject *row = Py_BuildValue("(LkN)", c->client, (unsigned long)c->seq, seqs);
        if (!row || PyList_Append(out, row) < 0) {
            Py_XDECREF(row);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(row);
    }
    return out;
}

static PyObject *Engine_bucket_index(PyObject *unused, PyObject *arg) {
    unsigned long long v = PyLong_AsUnsignedLongLong(arg);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
    if (v > VALUE_MAX) v = VALUE_MAX;
    return PyLong_FromLong(bucket_index(v));
}

static PyMethodDef Engine_methods[] = {
    {"add", (PyCFunction)Engine_add, METH_VARARGS,
     "add(client, fraction=0.0, subscriber=False) -> handle: a new MQTT connection for client "
     "number `client` (paced: its first message at `fraction` of a period)"},
    {"remove", (PyCFunction)Engine_remove, METH_O,
     "remove(handle): DISCONNECT and close; what it had in flight stays outstanding"},
    {"bind_sources", (PyCFunction)Engine_bind_sources, METH_O,
     "bind_sources([ipv4, ...]): connect from these local addresses, round robin"},
    {"use_tls", (PyCFunction)Engine_use_tls, METH_VARARGS,
     "use_tls(server_name, ca_file=None): every connection speaks TLS (verified against "
     "ca_file if given); before the first add()"},
    {"use_websocket", (PyCFunction)Engine_use_websocket, METH_O,
     "use_websocket(upgrade_request): MQTT over WebSocket; before the first add()"},
    {"stop_sending", (PyCFunction)Engine_stop_sending, METH_NOARGS,
     "no message is published after this (acknowledgements still complete)"},
    {"take", (PyCFunction)Engine_take, METH_NOARGS, "the figures since the last take"},
    {"state", (PyCFunction)Engine_state, METH_NOARGS,
     "(connected, outstanding, subscribed, connect_failures, disconnects, publish_errors, "
     "first_sent)"},
    {"pace", (PyCFunction)Engine_pace, METH_NOARGS,
     "(late, lag histogram) of every paced message since the start"},
    {"finish", (PyCFunction)Engine_finish, METH_NOARGS,
     "stop the thread, disconnect everybody; the ledger [(client, published, [unacked])]"},
    {NULL, NULL, 0, NULL}};

static PyTypeObject EngineType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pytest_webperf.swarm._mqttloop.Engine",
    .tp_basicsize = sizeof(Engine),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One generator process's native MQTT loop (see swarm/mqtt_native.py).",
    .tp_new = Engine_new,
    .tp_init = (initproc)Engine_init,
    .tp_dealloc = (destructor)Engine_dealloc,
    .tp_methods = Engine_methods,
};

static PyMethodDef module_methods[] = {
    {"bucket_index", Engine_bucket_index, METH_O,
     "the histogram bucket of a value in microseconds (as histogram.bucket_index)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_mqttloop",
                                    "The native MQTT loop (see swarm/mqtt_native.py).", -1,
                                    module_methods};

PyMODINIT_FUNC PyInit__mqttloop(void) {
    if (PyType_Ready(&EngineType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&EngineType);
    if (PyModule_AddObject(m, "Engine", (PyObject *)&EngineType) < 0 ||
#ifdef WEBPERF_TLS
        PyModule_AddIntConstant(m, "TLS", 1) < 0) {
#else
        PyModule_AddIntConstant(m, "TLS", 0) < 0) {
#endif
        Py_DECREF(&EngineType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
