/*
 * _hotloop: the native request loop behind the native HTTP user (swarm/native.py).
 *
 * One Engine per generator process: one thread, one epoll set, every connection of
 * the process's users. The thread never takes the GIL: Python adds and removes
 * connections, opens tickets and stops sending through a command queue (a mutex and
 * an eventfd), and takes each interval's figures with take(), which swaps the
 * double-buffered statistics under the same mutex.
 *
 * Per request: one send() (more only when the socket buffer is full) and one recv()
 * per arrival of data (a read that fills the buffer is followed by another);
 * sockets are registered once, edge-triggered. Responses are framed here as
 * wire.ResponseParser frames them (Content-Length, chunked, until close, HTTP/1.0,
 * 1xx skipped, HEAD/204/304 without a body); protocol errors carry a code and the
 * offending bytes, which native.py words exactly as wire.py does.
 *
 * Latencies go into the same log-linear microsecond buckets as histogram.Histogram
 * (values below 512 exact, then 256 sub-buckets per power of two).
 *
 * Modes: closed (the next request when the last is answered), paced (one request per
 * connection every period, latency from the intended start, service time and lag
 * recorded beside it; a late schedule is never skipped), counted (a shared number of
 * tickets opened by Python; the phase is finished when every ticket's request
 * completed).
 *
 * A request mix (set_mix, before the first add): several payloads by weight, each
 * request of a connection picks one (cumulative weights, the thread's xorshift RNG), or,
 * after set_sequence, takes the next entry of a fixed sequence (a counted mix: the same
 * requests in the same order on both sides of a comparison);
 * each entry has its own statistics (take() returns them by entry), its accepted
 * statuses (a bitmap; none given: any below 400) and a body substring it must contain
 * (searched across reads, the last needle-length - 1 bytes kept between them).
 * TLS (built with WEBPERF_TLS, OpenSSL): use_tls() before the first add() gives the
 * Engine one SSL_CTX (ALPN http/1.1, SNI, verification off unless a CA file is given);
 * every socket read and write goes through conn_send/conn_recv, which speak TLS when the
 * connection has it: SSL_read until WANT_READ per readiness, SSL_write resumed on
 * EPOLLOUT after WANT_WRITE, the handshake driven by the same edges while connecting.
 *
 * A connection speaks its protocol through a small seam (proto_t, a table per protocol
 * set when the user is added): what a new user does, what a due request does, what an
 * epoll event does, the deadlines, and the user's removal. HTTP/1.1 is the functions
 * below (proto_h1); HTTP/2 (built with WEBPERF_H2, libnghttp2: use_http2() before the
 * first add) is _h2.c, included below in this translation unit so that it shares every
 * static helper (recording, scheduling, TLS, the wake heap) unchanged.
 */
#include "_loop.h" /* headers, histogram, clock, arrays, TLS words, epoll set */

/* ------------------------------------------------------------------ statistics */

#define ERRNO_SLOTS 160
#define MAX_STATUS 1000
#define MAX_EXAMPLES 16
#define EXAMPLE_BYTES 160

/* kinds of failure (an example is kept for the first of each kind and key) */
enum { K_HTTP = 1, K_CLOSED, K_PROTOCOL, K_TIMEOUT, K_CONNECT_TIMEOUT, K_CONNECT_ERRNO, K_IO_ERRNO,
       K_UNEXPECTED_STATUS, K_UNEXPECTED_BODY };
enum { K_TLS = 20 }; /* the handshake failed or the certificate was refused: the example says */
/* HTTP/2 and gRPC (_h2.c): a stream reset by the server, a GOAWAY with an error (keyed by
   the HTTP/2 error code), a non-OK grpc-status (keyed by the code) */
enum { K_RST = 21, K_GOAWAY = 22, K_GRPC = 23 };
#define H2_CODES 16   /* HTTP/2 error codes 0x0..0xd, 0xe..0xf: the rest (hotloop.py names them) */
#define GRPC_CODES 17 /* gRPC status codes 0..16 */
#define E_TLS_FAILED 100000 /* conn_recv/conn_send's errno for a TLS failure (not an errno) */
#define MAX_ENTRIES 32       /* a mix's entries */
#define MAX_NEEDLE 1024      /* an expected body substring (fixture/http.py MAX_NEEDLE) */
#define EXAMPLE_LINE 60      /* an unexpected body's example: its status line, then */
#define EXAMPLE_BODY 100     /* the body's first bytes */

typedef struct {
    int kind, key;       /* key: the status, errno or protocol/closed code */
    int64_t a, b;        /* numbers for the message (closed early: bytes) */
    int len;
    char raw[EXAMPLE_BYTES];
} example_t;

typedef struct {
    uint64_t ok, bytes;
    uint64_t timeouts, connect_timeouts, closed, protocol;
    uint64_t unexpected_status, unexpected_body;
    uint64_t tls; /* TLS failures (K_TLS) */
    uint32_t http[MAX_STATUS];
    uint32_t connect_errno[ERRNO_SLOTS];
    uint32_t io_errno[ERRNO_SLOTS];
    int n_examples;
    example_t examples[MAX_EXAMPLES];
    hist_t latency, service, lag;
    hist_t connect, handshake; /* close_each(): per connection, TCP connect and TLS handshake */
    long long users_busy, users_opened, dispatched; /* arrival rate: peak busy, ever used */
    /* HTTP/2 (_h2.c): per stream, the time to its response headers and the time its
       request body waited for the server's flow-control window; failures by code; the
       connections' figures (the first entry's only) */
    hist_t headers, stall;
    uint32_t rst[H2_CODES], goaway[H2_CODES], grpc[GRPC_CODES];
    struct h2_figures {
        uint64_t opened, rotations, retried;          /* connections; GOAWAY NO_ERROR; re-sent */
        uint64_t hd_recv_wire, hd_recv_decoded;       /* HPACK: header block bytes, name+value */
        uint64_t hd_sent_wire, hd_sent_decoded;
        uint64_t reads, writes, bytes_in, bytes_out;
        uint64_t stalled, stall_us;                   /* request bodies that waited for window */
        uint64_t near_closed;                         /* DATA frames that left a window < a frame */
        int64_t min_window;                           /* the server's lowest send window (model) */
        uint64_t capped;                              /* connections whose server allowed < streams */
        uint32_t server_streams, server_window, server_frame; /* the server's SETTINGS (max) */
    } fig;
} stats_t;

static void stats_clear(stats_t *s) {
    s->ok = s->bytes = s->timeouts = s->connect_timeouts = s->closed = s->protocol = 0;
    s->unexpected_status = s->unexpected_body = 0;
    s->tls = 0;
    memset(s->http, 0, sizeof s->http);
    memset(s->connect_errno, 0, sizeof s->connect_errno);
    memset(s->io_errno, 0, sizeof s->io_errno);
    s->n_examples = 0;
    s->users_busy = s->users_opened = s->dispatched = 0;
    hist_clear(&s->latency);
    hist_clear(&s->service);
    hist_clear(&s->lag);
    hist_clear(&s->connect);
    hist_clear(&s->handshake);
    hist_clear(&s->headers);
    hist_clear(&s->stall);
    memset(s->rst, 0, sizeof s->rst);
    memset(s->goaway, 0, sizeof s->goaway);
    memset(s->grpc, 0, sizeof s->grpc);
    memset(&s->fig, 0, sizeof s->fig);
    s->fig.min_window = INT64_MAX;
}

static void stats_example(stats_t *s, int kind, int key, int64_t a, int64_t b, const char *raw,
                          size_t len) {
    for (int i = 0; i < s->n_examples; i++)
        if (s->examples[i].kind == kind && s->examples[i].key == key) return;
    if (s->n_examples >= MAX_EXAMPLES) return;
    example_t *e = &s->examples[s->n_examples++];
    e->kind = kind;
    e->key = key;
    e->a = a;
    e->b = b;
    if (len > EXAMPLE_BYTES) len = EXAMPLE_BYTES;
    e->len = (int)len;
    if (len) memcpy(e->raw, raw, len);
}

/* ------------------------------------------------------------------ connections */

enum { MODE_CLOSED = 0, MODE_PACED = 1, MODE_COUNTED = 2, MODE_ARRIVAL = 3 };
/* S_ARRIVAL_IDLE: an arrival-rate connection waiting to be handed a due request */
enum { S_IDLE = 0, S_CONNECTING, S_WRITING, S_READING, S_PARKED, S_GONE, S_ARRIVAL_IDLE };
#define SCHEDULED(e) ((e)->mode == MODE_PACED || (e)->mode == MODE_ARRIVAL)
enum { P_HEAD, P_LENGTH, P_CHUNK_SIZE, P_CHUNK_DATA, P_CHUNK_END, P_TRAILERS, P_UNTIL_CLOSE, P_DONE };
/* protocol error codes: native.py words them as wire.py does */
enum { E_STATUS_LINE = 1, E_SWITCHING, E_HEAD_LONG, E_BAD_LENGTH, E_BAD_CHUNK, E_CHUNK_CRLF,
       E_CHUNK_LINE_LONG, E_TRAILER_LONG };
/* how far a response had come when the peer closed */
enum { C_HEAD = 1, C_LENGTH, C_CHUNKED };

#define MAX_HEAD (64 * 1024)
#define MAX_LINE (4 * 1024)
#define READ_SIZE (64 * 1024)
#define RBUF_SIZE (MAX_HEAD + 2 * READ_SIZE) /* kept bytes (<= MAX_HEAD + 1) + one read */
#define BACKOFF_NS 10000000ULL /* after a failed connect: no busy spin (lean: 10 ms) */
#define SCAN_NS 5000000ULL     /* how often deadlines are checked */

struct proto;
/* A response body as an expected substring sees it, over HTTP/1.1 reads and HTTP/2 DATA
   frames alike (body_scan): found yet, the last needle_len - 1 bytes of the chunk before
   (a needle across two chunks), and the body's first bytes (the example of a failure). */
typedef struct {
    int found;
    size_t ntail;
    int head_len;
    char head[EXAMPLE_BODY];
    char tail[MAX_NEEDLE];
} body_t;

typedef struct {
    const struct proto *proto; /* the protocol it speaks (proto_h1, proto_h2) */
    struct h2_conn *h2;        /* HTTP/2: its session and streams (_h2.c); NULL on HTTP/1.1 */
    int fd, state, connecting, ticket, blocked; /* blocked: a send met a full buffer */
    int peer_closed;                              /* the server's FIN has arrived */
    int used;                                     /* arrival rate: it was ever handed one */
    size_t id;
    size_t heap_pos; /* 1-based position in the wake heap, 0: not in it */
    uint64_t wake;   /* heap key */
    uint64_t due, intended, started, deadline;
    size_t wpos;
    /* response framing */
    int ps, status, keep_alive;
    uint64_t remaining, body_bytes;
    char *left; /* bytes kept between reads: an unfinished line, or what followed a response */
    size_t nleft, capleft;
    char status_line[EXAMPLE_BYTES];
    int status_len;
    int entry;   /* a mix: the entry of the request in flight */
    body_t body; /* the response's body as the checks see it */
    struct tls_conn *tls; /* TLS state (NULL: plain, or no connection yet) */
} conn_t;

typedef struct {
    char *payload;
    size_t payload_len;
    int head_only;
    double cumulative;  /* sum of the weights up to this entry */
    uint8_t *statuses;  /* MAX_STATUS flags, or NULL: any status below 400 */
    char *needle;       /* NULL: no expected body substring */
    size_t needle_len;
} entry_t;

typedef struct { int op; long long arg; double fraction; } command_t;
enum { OP_ADD = 1, OP_REMOVE, OP_WAKE_PARKED, OP_QUIT };

typedef struct {
    PyObject_HEAD
    /* settings */
    struct sockaddr_storage addr;
    socklen_t addrlen;
    char *payload;
    size_t payload_len;
    int head_only, mode;
    uint64_t timeout_ns, period_ns;
    /* thread */
    pthread_t thread;
    int started, closed;
    int epfd, evfd;
    pthread_mutex_t lock; /* commands, statistics swap, tickets */
    command_t *commands;
    size_t ncommands, capcommands;
    stats_t *cur, *spare; /* one per entry: the request mix's (one without a mix) */
    entry_t entries[MAX_ENTRIES];
    int nentries;
    uint64_t rng; /* the loop thread's xorshift state */
    int *sequence; /* set_sequence(): the entries in this order, cycled; NULL: by weight */
    size_t nsequence, sequence_at;
    /* arrival rate: slot s is due at s * arrival_ns / arrival_num ns (pacing.ArrivalSchedule);
       this process takes the slots s = index (mod processes) */
    uint64_t arrival_num, arrival_ns;
    long long processes, index, slot; /* slot: the next one nobody took; -1: not begun */
    uint64_t *idle_bits;              /* idle arrival connections, by id: the lowest first */
    size_t idle_words, n_idle;
    long long busy, opened;
    long long tickets;     /* -1: not open yet */
    long long outstanding; /* taken, not completed */
    volatile int stop_sending;
    /* loop-thread state */
    conn_t **conns;
    size_t nconns, capconns;
    conn_t **heap;
    size_t nheap, capheap;
    conn_t **parked;
    size_t nparked, capparked;
    char *rbuf;
    uint64_t last_scan;
    long long added;
    /* TLS (use_tls): one context for every connection; the last failure's words */
#ifdef WEBPERF_TLS
    SSL_CTX *tls_ctx;
#else
    void *tls_ctx;
#endif
    char *server_name;
    int server_is_ip;
    int close_each; /* close_each(): requests say Connection: close, each gets a connection */
    char tls_message[EXAMPLE_BYTES];
    struct h2_engine *h2; /* use_http2(): every connection speaks HTTP/2 (_h2.c); NULL: HTTP/1.1 */
} Engine;

/* ---- the protocol seam: what a connection does, by the protocol it speaks */

typedef struct proto {
    /* a new user (a connection): paced, first due at `fraction` of a period from now */
    void (*add)(Engine *e, conn_t *c, uint64_t now, double fraction);
    /* its next request is due (closed loop, a paced schedule, an arrival, a ticket) */
    void (*start)(Engine *e, conn_t *c, uint64_t now);
    void (*event)(Engine *e, conn_t *c, uint32_t events, uint64_t now);
    void (*deadlines)(Engine *e, conn_t *c, uint64_t now); /* timeouts, every SCAN_NS */
    void (*remove)(Engine *e, conn_t *c); /* the user stopped: close, drop what is in flight */
    void (*release)(conn_t *c);           /* the engine closes: free what it holds (or NULL) */
} proto_t;

/* ---- the wake heap (earliest first) */

#define LOOP_WAKE_KEY wake
#define LOOP_WAKE_HEAP
#include "_loop.h"
#undef LOOP_WAKE_HEAP

/* c waits in the heap until `wake` (idle: its next request is due then) */
static void heap_push(Engine *e, conn_t *c, uint64_t wake) {
    heap_set(e, c, wake);
    c->state = S_IDLE;
}

/* ---- socket I/O: plain, or TLS when the connection has it */

#ifdef WEBPERF_TLS
struct tls_conn {
    SSL *ssl;
    int handshaken;
    SSL_SESSION *session; /* resume: the last connection's, for the next one */
    uint64_t connected;   /* when its TCP connect completed (the handshake's start) */
};

/* the failure's words into e->tls_message (the verification result first); errno set to
   E_TLS_FAILED; the thread's error queue emptied */
static void tls_failed(Engine *e, conn_t *c, const char *what) {
    char reason[EXAMPLE_BYTES] = "";
    tls_reason(c->tls ? c->tls->ssl : NULL, what, reason, sizeof reason);
    snprintf(e->tls_message, sizeof e->tls_message, "%s", reason);
    errno = E_TLS_FAILED;
}

/* what an SSL call's result means: > 0 done; -1 with errno (EAGAIN: wait) */
static ssize_t tls_result(Engine *e, conn_t *c, int r, int *eof) {
    int err = SSL_get_error(c->tls->ssl, r);
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) { errno = EAGAIN; return -1; }
    if (err == SSL_ERROR_ZERO_RETURN) { *eof = 1; return 0; }
    if (err == SSL_ERROR_SYSCALL && ERR_peek_error() == 0) {
        if (r == 0 || errno == 0) { *eof = 1; return 0; } /* the peer closed without notify */
        return -1; /* errno says */
    }
    tls_failed(e, c, "TLS error");
    return -1;
}

static void tls_free(conn_t *c) {
    if (c->tls && c->tls->ssl) {
        if (c->tls->handshaken && SSL_CTX_get_session_cache_mode(SSL_get_SSL_CTX(c->tls->ssl)) !=
                                      SSL_SESS_CACHE_OFF) { /* resume: keep its latest ticket */
            SSL_SESSION *session = SSL_get1_session(c->tls->ssl);
            if (session) {
                if (c->tls->session) SSL_SESSION_free(c->tls->session);
                c->tls->session = session;
            }
            /* closed without close_notify (no write here): as if it had been, or SSL_free
               marks the session not resumable */
            SSL_set_shutdown(c->tls->ssl, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
        }
        SSL_free(c->tls->ssl);
        c->tls->ssl = NULL;
    }
}

/* the connection's TLS client, once its TCP connect completed: 0, or -1 (errno set) */
static int tls_begin(Engine *e, conn_t *c) {
    if (!c->tls && !(c->tls = calloc(1, sizeof *c->tls))) { errno = ENOMEM; return -1; }
    tls_free(c);
    SSL *ssl = c->tls->ssl = SSL_new(e->tls_ctx);
    c->tls->handshaken = 0;
    if (!ssl || !SSL_set_fd(ssl, c->fd)) { tls_failed(e, c, "cannot start TLS"); return -1; }
    SSL_set_connect_state(ssl);
    if (c->tls->session) SSL_set_session(ssl, c->tls->session);
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

/* one step of the handshake: 1 done, 0 wait for an edge, -1 failed (errno set) */
static int tls_handshake(Engine *e, conn_t *c) {
    int r = SSL_do_handshake(c->tls->ssl);
    if (r == 1) { c->tls->handshaken = 1; return 1; }
    int eof = 0;
    if (tls_result(e, c, r, &eof) < 0 && errno == EAGAIN) return 0;
    if (eof) {
        tls_failed(e, c, "the server closed the connection during the TLS handshake");
        errno = E_TLS_FAILED;
    }
    return -1;
}
#else
struct tls_conn {
    int unused;
};
static void tls_free(conn_t *c) { (void)c; }
#endif

static inline int conn_tls(conn_t *c) {
#ifdef WEBPERF_TLS
    return c->tls && c->tls->ssl;
#else
    (void)c;
    return 0;
#endif
}

/* bytes sent, or -1 with errno (EAGAIN: EPOLLOUT resumes) */
static inline ssize_t conn_send(Engine *e, conn_t *c, const char *buf, size_t len) {
#ifdef WEBPERF_TLS
    if (conn_tls(c)) {
        int r = SSL_write(c->tls->ssl, buf, len > INT32_MAX ? INT32_MAX : (int)len);
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
static inline ssize_t conn_recv(Engine *e, conn_t *c, char *buf, size_t len) {
#ifdef WEBPERF_TLS
    if (conn_tls(c)) {
        int r = SSL_read(c->tls->ssl, buf, len > INT32_MAX ? INT32_MAX : (int)len);
        if (r > 0) return r;
        int eof = 0;
        ssize_t n = tls_result(e, c, r, &eof);
        return eof ? 0 : n;
    }
#endif
    (void)e;
    return recv(c->fd, buf, len, 0);
}

/* ---- connection life */

static void conn_close(Engine *e, conn_t *c) {
    c->peer_closed = 0;
    tls_free(c);
    if (c->fd >= 0) {
        epoll_ctl(e->epfd, EPOLL_CTL_DEL, c->fd, NULL);
        close(c->fd);
        c->fd = -1;
    }
    c->nleft = 0;
    c->connecting = 0;
}

static void park(Engine *e, conn_t *c) {
    if (grow((void **)&e->parked, &e->capparked, e->nparked + 1, sizeof(conn_t *))) return;
    c->state = S_PARKED;
    e->parked[e->nparked++] = c;
}

static void keep_left(conn_t *c, const char *data, size_t n) {
    if (n > c->capleft) {
        char *p = realloc(c->left, n);
        if (!p) { c->nleft = 0; return; }
        c->left = p;
        c->capleft = n;
    }
    memmove(c->left, data, n);
    c->nleft = n;
}

/* ---- recording (the only place the loop takes the lock per request) */

static void record_done(Engine *e, conn_t *c, uint64_t done) {
    pthread_mutex_lock(&e->lock);
    stats_t *s = &e->cur[c->entry];
    entry_t *x = &e->entries[c->entry];
    uint64_t latency, from = c->started;
    if (SCHEDULED(e) && c->intended < from) from = c->intended;
    latency = (done - from) / 1000;
    hist_record(&s->latency, latency);
    s->bytes += c->body_bytes;
    if (x->statuses && !x->statuses[c->status < MAX_STATUS ? c->status : MAX_STATUS - 1]) {
        s->unexpected_status++;
        stats_example(s, K_UNEXPECTED_STATUS, 0, 0, 0, c->status_line, (size_t)c->status_len);
    } else if (!x->statuses && c->status >= 400) {
        s->http[c->status < MAX_STATUS ? c->status : MAX_STATUS - 1]++;
        stats_example(s, K_HTTP, c->status, 0, 0, c->status_line, (size_t)c->status_len);
    } else if (x->needle && !c->body.found) {
        char raw[EXAMPLE_LINE + EXAMPLE_BODY];
        size_t line = (size_t)c->status_len < EXAMPLE_LINE ? (size_t)c->status_len : EXAMPLE_LINE;
        memcpy(raw, c->status_line, line);
        memcpy(raw + line, c->body.head, (size_t)c->body.head_len);
        s->unexpected_body++;
        stats_example(s, K_UNEXPECTED_BODY, 0, (int64_t)line, 0, raw,
                      line + (size_t)c->body.head_len);
    } else {
        s->ok++;
    }
    if (SCHEDULED(e)) {
        hist_record(&s->service, (done - c->started) / 1000);
        hist_record(&s->lag, c->started > c->intended ? (c->started - c->intended) / 1000 : 0);
    }
    pthread_mutex_unlock(&e->lock);
}

static void record_failure(Engine *e, int entry, int kind, int key, int64_t a, int64_t b,
                           const char *raw, size_t len) {
    pthread_mutex_lock(&e->lock);
    stats_t *s = &e->cur[entry];
    switch (kind) {
    case K_TIMEOUT: s->timeouts++; break;
    case K_CONNECT_TIMEOUT: s->connect_timeouts++; break;
    case K_CLOSED: s->closed++; break;
    case K_PROTOCOL: s->protocol++; break;
    case K_TLS: s->tls++; break;
    case K_CONNECT_ERRNO: s->connect_errno[key < ERRNO_SLOTS ? key : ERRNO_SLOTS - 1]++; break;
    default: s->io_errno[key < ERRNO_SLOTS ? key : ERRNO_SLOTS - 1]++; break;
    }
    if (kind == K_CLOSED || kind == K_PROTOCOL || kind == K_TLS)
        stats_example(s, kind, key, a, b, raw, len);
    pthread_mutex_unlock(&e->lock);
}

/* a new connection's setup time (close_each() only): TCP connect, or the TLS handshake */
static void record_setup(Engine *e, int handshake, uint64_t ns) {
    pthread_mutex_lock(&e->lock);
    hist_record(handshake ? &e->cur->handshake : &e->cur->connect, ns / 1000);
    pthread_mutex_unlock(&e->lock);
}

/* ---- scheduling: what a connection does next */

static void start_request(Engine *e, conn_t *c, uint64_t now);

static void ticket_done(Engine *e, conn_t *c) {
    if (!c->ticket) return;
    c->ticket = 0;
    pthread_mutex_lock(&e->lock);
    e->outstanding--;
    pthread_mutex_unlock(&e->lock);
}

/* ---- arrival rate (k6's constant arrival rate, as arrival.py and pacing.ArrivalSchedule) */

static uint64_t due_of(Engine *e, long long slot) {
    return (uint64_t)((unsigned __int128)(uint64_t)slot * e->arrival_ns / e->arrival_num);
}

static void make_idle(Engine *e, conn_t *c) {
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
    c->state = S_ARRIVAL_IDLE;
}

static void not_idle(Engine *e, conn_t *c) {
    if (c->state != S_ARRIVAL_IDLE) return;
    e->idle_bits[c->id / 64] &= ~(1ULL << (c->id % 64));
    e->n_idle--;
    c->state = S_IDLE;
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
        if (!c->used) { c->used = 1; e->opened++; }
        stats_t *s = e->cur;
        if (e->busy > s->users_busy) s->users_busy = e->busy;
        s->users_opened = e->opened;
        s->dispatched++;
        pthread_mutex_unlock(&e->lock);
        c->proto->start(e, c, now);
        now = now_ns();
    }
}

static void arrival_done(Engine *e) {
    pthread_mutex_lock(&e->lock);
    e->busy--;
    pthread_mutex_unlock(&e->lock);
}

/* the next request of a connection that is free at ``now`` (``failed``: the last one
   failed; ``connect_failed``: it failed to connect, back off before retrying) */
static void next(Engine *e, conn_t *c, uint64_t now, int failed, int connect_failed) {
    ticket_done(e, c);
    if (e->mode == MODE_ARRIVAL) arrival_done(e);
    if (e->stop_sending) { park(e, c); return; }
    uint64_t earliest = connect_failed ? now + BACKOFF_NS : now;
    if (e->mode == MODE_ARRIVAL) { /* idle again (after a failed connect: a pause first) */
        if (connect_failed) heap_push(e, c, earliest);
        else make_idle(e, c);
        return;
    }
    if (e->mode == MODE_PACED) {
        c->due += e->period_ns;
        uint64_t wake = c->due > earliest ? c->due : earliest;
        if (wake > now) heap_push(e, c, wake);
        else start_request(e, c, now);
        return;
    }
    /* failures, and bytes already here for the next response, go round the loop: no spin,
       no recursion */
    if (failed || c->nleft) { heap_push(e, c, earliest); return; }
    start_request(e, c, now);
}

static void fail(Engine *e, conn_t *c, uint64_t now, int kind, int key, int64_t a, int64_t b,
                 const char *raw, size_t len) {
    int connecting = c->connecting;
    record_failure(e, c->entry, kind, key, a, b, raw, len);
    conn_close(e, c);
    next(e, c, now, 1, connecting); /* connect errors and timeouts come while connecting */
}

static void fail_errno(Engine *e, conn_t *c, uint64_t now, int err) {
    if (err == E_TLS_FAILED) {
        fail(e, c, now, K_TLS, 0, 0, 0, e->tls_message, strlen(e->tls_message));
        return;
    }
    fail(e, c, now, c->connecting ? K_CONNECT_ERRNO : K_IO_ERRNO, err, 0, 0, NULL, 0);
}

static void body_reset(body_t *b) {
    b->found = 0;
    b->ntail = 0;
    b->head_len = 0;
}

static void begin_response(conn_t *c) {
    c->ps = P_HEAD;
    c->status = 0;
    c->keep_alive = 1;
    c->remaining = 0;
    c->body_bytes = 0;
    c->status_len = 0;
    body_reset(&c->body);
}

/* the entry of a connection's next request: by weight (one entry: the one) */
static int pick_entry(Engine *e) {
    if (e->sequence) { /* a fixed sequence: the loop thread alone moves along it */
        int next = e->sequence[e->sequence_at];
        e->sequence_at = (e->sequence_at + 1) % e->nsequence;
        return next;
    }
    if (e->nentries <= 1) return 0;
    uint64_t x = e->rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    e->rng = x;
    double u = (double)(x >> 11) * 0x1.0p-53 * e->entries[e->nentries - 1].cumulative;
    for (int i = 0; i < e->nentries - 1; i++)
        if (u < e->entries[i].cumulative) return i;
    return e->nentries - 1;
}

/* body bytes as they arrive: the needle searched across reads, the first bytes kept */
/* n more bytes of a body: kept as the example while it is short, searched for the
   entry's needle, the chunk's last bytes kept for a needle that spans two chunks */
static void body_scan(const entry_t *x, body_t *b, const char *p, size_t n) {
    if (!x->needle || !n) return;
    if (b->head_len < EXAMPLE_BODY) {
        size_t room = (size_t)(EXAMPLE_BODY - b->head_len), m = n < room ? n : room;
        memcpy(b->head + b->head_len, p, m);
        b->head_len += (int)m;
    }
    if (b->found) return;
    size_t k = x->needle_len, keep = k - 1;
    if (b->ntail) { /* a needle that starts in the last chunk and ends in this one */
        char window[2 * MAX_NEEDLE];
        size_t m = n < keep ? n : keep;
        memcpy(window, b->tail, b->ntail);
        memcpy(window + b->ntail, p, m);
        if (memmem(window, b->ntail + m, x->needle, k)) { b->found = 1; return; }
    }
    if (memmem(p, n, x->needle, k)) { b->found = 1; return; }
    if (n >= keep) {
        memcpy(b->tail, p + n - keep, keep);
        b->ntail = keep;
    } else {
        size_t old = b->ntail < keep - n ? b->ntail : keep - n;
        memmove(b->tail, b->tail + b->ntail - old, old);
        memcpy(b->tail + old, p, n);
        b->ntail = old + n;
    }
}

static int feed(Engine *e, conn_t *c, const char *data, size_t n, uint64_t now);
static void on_writable(Engine *e, conn_t *c, uint64_t now);
static void on_readable(Engine *e, conn_t *c, uint64_t now, int hup);

static int open_socket(Engine *e, conn_t *c, uint64_t now) {
    int fd = socket(e->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        c->connecting = 1;
        fail_errno(e, c, now, errno);
        return -1;
    }
    c->fd = fd;
    c->connecting = 1;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLET | EPOLLRDHUP, .data.ptr = c};
    if (epoll_ctl(e->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
        fail_errno(e, c, now, errno);
        return -1;
    }
    if (connect(fd, (struct sockaddr *)&e->addr, e->addrlen) < 0 && errno != EINPROGRESS) {
        fail_errno(e, c, now, errno);
        return -1;
    }
    return 0;
}

static void start_request(Engine *e, conn_t *c, uint64_t now) {
    if (e->mode == MODE_COUNTED) {
        pthread_mutex_lock(&e->lock);
        long long t = e->tickets;
        if (t > 0) { e->tickets--; e->outstanding++; }
        pthread_mutex_unlock(&e->lock);
        if (t <= 0) { park(e, c); return; } /* not open yet, or none left */
        c->ticket = 1;
    }
    c->entry = pick_entry(e);
    c->intended = SCHEDULED(e) ? c->due : now;
    c->started = now;
    c->deadline = now + e->timeout_ns;
    c->wpos = 0;
    c->blocked = 0;
    begin_response(c);
    if (c->fd < 0) {
        if (open_socket(e, c, now) < 0) return;
        c->state = S_CONNECTING; /* the first EPOLLOUT says it is connected (or why not) */
        return;
    }
    c->state = S_WRITING;
    on_writable(e, c, now);
}

static void on_writable(Engine *e, conn_t *c, uint64_t now) {
    if (c->state == S_CONNECTING) {
        if (!conn_tls(c)) { /* TCP: the first EPOLLOUT */
            int err = 0;
            socklen_t len = sizeof err;
            getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
            if (err == EINPROGRESS || err == EALREADY) return;
            if (err) { fail_errno(e, c, now, err); return; }
            int one = 1;
            setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            if (e->close_each) record_setup(e, 0, now - c->started);
#ifdef WEBPERF_TLS
            if (e->tls_ctx && tls_begin(e, c) < 0) { fail_errno(e, c, now, errno); return; }
            if (conn_tls(c)) c->tls->connected = now;
#endif
        }
#ifdef WEBPERF_TLS
        if (conn_tls(c)) { /* the handshake, a step per edge */
            int r = tls_handshake(e, c);
            if (r < 0) { fail_errno(e, c, now, errno); return; }
            if (r == 0) return;
            if (e->close_each) record_setup(e, 1, now - c->tls->connected);
        }
#endif
        c->connecting = 0;
        c->state = S_WRITING;
    }
    if (c->state != S_WRITING) return;
    entry_t *x = &e->entries[c->entry];
    while (c->wpos < x->payload_len) {
        ssize_t n = conn_send(e, c, x->payload + c->wpos, x->payload_len - c->wpos);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) { c->blocked = 1; return; } /* EPOLLOUT resumes */
            if (errno == EINTR) continue;
            fail_errno(e, c, now, errno);
            return;
        }
        c->wpos += (size_t)n;
    }
    c->state = S_READING;
    if (e->close_each) c->peer_closed = 1; /* no next request on it, whatever the answer says */
    if (c->nleft) { /* bytes that followed the last response: they start this one */
        size_t n = c->nleft;
        c->nleft = 0;
        memcpy(e->rbuf, c->left, n);
        if (feed(e, c, e->rbuf, n, now) != 0) return;
    }
    if (c->blocked) { /* an answer may have come while we waited to send: its edge is gone */
        c->blocked = 0;
        on_readable(e, c, now, 0);
    }
}

/* ---- response framing (as wire.ResponseParser) */

static const char *find_crlf(const char *p, const char *end) {
    while (p + 1 < end) {
        const char *r = memchr(p, '\r', (size_t)(end - p - 1));
        if (!r) return NULL;
        if (r[1] == '\n') return r;
        p = r + 1;
    }
    return NULL;
}

static int is_space(char ch) {
    return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n' || ch == '\x0b' || ch == '\x0c';
}

/* the stripped value of the first header ``name`` (lower case, "\r\nname:") in a head */
static int header(const char *head, size_t n, const char *name, const char **value, size_t *vlen) {
    size_t k = strlen(name);
    if (n < k) return 0;
    for (size_t i = 0; i + k <= n; i++) {
        if (head[i] != '\r') continue;
        if (strncasecmp(head + i, name, k) != 0) continue;
        const char *v = head + i + k, *end = head + n;
        const char *eol = find_crlf(v, end);
        if (!eol) eol = end;
        while (v < eol && is_space(*v)) v++;
        while (eol > v && is_space(eol[-1])) eol--;
        *value = v;
        *vlen = (size_t)(eol - v);
        return 1;
    }
    return 0;
}

static int contains_ci(const char *s, size_t n, const char *word) {
    size_t k = strlen(word);
    for (size_t i = 0; i + k <= n; i++)
        if (strncasecmp(s + i, word, k) == 0) return 1;
    return 0;
}

/* 0: parsed; -1: protocol error (code, raw set) */
static int on_head(Engine *e, conn_t *c, const char *h, size_t n, int *code, const char **raw,
                   size_t *rawlen) {
    if (n < 12 || memcmp(h, "HTTP/1.", 7) != 0 || h[8] != ' ' || h[9] < '0' || h[9] > '9' ||
        h[10] < '0' || h[10] > '9' || h[11] < '0' || h[11] > '9') {
        *code = E_STATUS_LINE;
        *raw = h;
        *rawlen = n < 40 ? n : 40;
        return -1;
    }
    int status = (h[9] - '0') * 100 + (h[10] - '0') * 10 + (h[11] - '0');
    if (status >= 100 && status < 200) {
        if (status == 101) { *code = E_SWITCHING; *raw = NULL; *rawlen = 0; return -1; }
        return 0; /* interim: the real response follows */
    }
    c->status = status;
    entry_t *x = &e->entries[c->entry];
    if (status >= 400 || x->statuses || x->needle) {
        const char *eol = find_crlf(h, h + n);
        size_t len = eol ? (size_t)(eol - h) : n;
        if (len > EXAMPLE_BYTES) len = EXAMPLE_BYTES;
        memcpy(c->status_line, h, len);
        c->status_len = (int)len;
    }
    const char *v;
    size_t vlen;
    int has_connection = header(h, n, "\r\nconnection:", &v, &vlen);
    if (h[7] == '0')
        c->keep_alive = has_connection && contains_ci(v, vlen, "keep-alive");
    else
        c->keep_alive = !has_connection || !contains_ci(v, vlen, "close");
    if (x->head_only || status == 204 || status == 304) { c->ps = P_DONE; return 0; }
    if (header(h, n, "\r\ntransfer-encoding:", &v, &vlen)) {
        const char *last = v + vlen, *p = last;
        while (p > v && p[-1] != ',') p--;
        while (p < last && is_space(*p)) p++;
        if ((size_t)(last - p) == 7 && strncasecmp(p, "chunked", 7) == 0) {
            c->ps = P_CHUNK_SIZE;
        } else {
            c->ps = P_UNTIL_CLOSE;
            c->keep_alive = 0;
        }
        return 0;
    }
    if (!header(h, n, "\r\ncontent-length:", &v, &vlen)) {
        c->ps = P_UNTIL_CLOSE;
        c->keep_alive = 0;
        return 0;
    }
    const char *p = v, *end = v + vlen;
    const char *comma = memchr(v, ',', vlen);
    if (comma) end = comma;
    while (p < end && is_space(*p)) p++;
    while (end > p && is_space(end[-1])) end--;
    if (p < end && *p == '+') p++;
    uint64_t length = 0;
    int digits = 0;
    for (; p < end; p++, digits++) {
        if (*p < '0' || *p > '9' || digits >= 18) { digits = -1; break; }
        length = length * 10 + (uint64_t)(*p - '0');
    }
    if (digits <= 0) {
        *code = E_BAD_LENGTH;
        *raw = v;
        *rawlen = vlen < 80 ? vlen : 80;
        return -1;
    }
    c->remaining = length;
    c->ps = length ? P_LENGTH : P_DONE;
    return 0;
}

static int hexval(char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

/* Frame what arrived. 1: the response is complete (and handled), 0: more must come,
   -1: the connection failed (handled). */
static int feed(Engine *e, conn_t *c, const char *d, size_t n, uint64_t now) {
    size_t pos = 0;
    int code = 0;
    const char *raw = NULL;
    size_t rawlen = 0;
    while (c->ps != P_DONE) {
        const char *at = d + pos, *end = d + n;
        switch (c->ps) {
        case P_HEAD: {
            const char *stop = NULL;
            for (const char *p = at; p + 3 < end; p++) {
                p = memchr(p, '\r', (size_t)(end - p - 3));
                if (!p) break;
                if (p[1] == '\n' && p[2] == '\r' && p[3] == '\n') { stop = p; break; }
            }
            if (!stop) {
                if ((size_t)(end - at) > MAX_HEAD) { code = E_HEAD_LONG; goto protocol; }
                keep_left(c, at, (size_t)(end - at));
                return 0;
            }
            if (on_head(e, c, at, (size_t)(stop - at), &code, &raw, &rawlen) < 0) goto protocol;
            pos = (size_t)(stop - d) + 4;
            break;
        }
        case P_LENGTH:
        case P_CHUNK_DATA: {
            uint64_t take = (uint64_t)(end - at);
            if (take > c->remaining) take = c->remaining;
            body_scan(&e->entries[c->entry], &c->body, at, (size_t)take);
            c->body_bytes += take;
            c->remaining -= take;
            pos += take;
            if (c->remaining) return 0;
            c->ps = c->ps == P_LENGTH ? P_DONE : P_CHUNK_END;
            break;
        }
        case P_CHUNK_SIZE: {
            const char *eol = find_crlf(at, end);
            if (!eol) {
                if ((size_t)(end - at) > MAX_LINE) { code = E_CHUNK_LINE_LONG; goto protocol; }
                keep_left(c, at, (size_t)(end - at));
                return 0;
            }
            const char *p = at, *stop = memchr(at, ';', (size_t)(eol - at));
            if (!stop) stop = eol;
            while (p < stop && is_space(*p)) p++;
            const char *q = stop;
            while (q > p && is_space(q[-1])) q--;
            uint64_t size = 0;
            int digits = 0;
            for (; p < q; p++, digits++) {
                int v = hexval(*p);
                if (v < 0 || digits >= 15) { digits = -1; break; }
                size = size * 16 + (uint64_t)v;
            }
            if (digits <= 0) {
                code = E_BAD_CHUNK;
                raw = at;
                rawlen = (size_t)(eol - at) < 40 ? (size_t)(eol - at) : 40;
                goto protocol;
            }
            pos = (size_t)(eol - d) + 2;
            if (size == 0) {
                c->ps = P_TRAILERS;
            } else {
                c->remaining = size;
                c->ps = P_CHUNK_DATA;
            }
            break;
        }
        case P_CHUNK_END:
            if (end - at < 2) { keep_left(c, at, (size_t)(end - at)); return 0; }
            if (at[0] != '\r' || at[1] != '\n') { code = E_CHUNK_CRLF; goto protocol; }
            pos += 2;
            c->ps = P_CHUNK_SIZE;
            break;
        case P_TRAILERS: {
            const char *eol = find_crlf(at, end);
            if (!eol) {
                if ((size_t)(end - at) > MAX_LINE) { code = E_TRAILER_LONG; goto protocol; }
                keep_left(c, at, (size_t)(end - at));
                return 0;
            }
            if (eol == at) c->ps = P_DONE;
            pos = (size_t)(eol - d) + 2;
            break;
        }
        case P_UNTIL_CLOSE:
            body_scan(&e->entries[c->entry], &c->body, at, (size_t)(end - at));
            c->body_bytes += (uint64_t)(end - at);
            return 0;
        }
    }
    /* complete */
    record_done(e, c, now);
    if (c->keep_alive && !c->peer_closed) {
        /* what followed the response (none from a sane server) starts the next one; more
           than a head's worth is an error then anyway */
        if (pos < n) keep_left(c, d + pos, n - pos > MAX_HEAD + 1 ? MAX_HEAD + 1 : n - pos);
    } else {
        conn_close(e, c);
    }
    next(e, c, now, 0, 0);
    return 1;
protocol:
    fail(e, c, now, K_PROTOCOL, code, 0, 0, raw, rawlen);
    return -1;
}

static void on_eof(Engine *e, conn_t *c, uint64_t now) {
    if (c->ps == P_UNTIL_CLOSE) {
        c->ps = P_DONE;
        c->keep_alive = 0;
        record_done(e, c, now);
        conn_close(e, c);
        next(e, c, now, 0, 0);
        return;
    }
    int code;
    int64_t a = (int64_t)c->body_bytes, b = 0;
    if (c->ps == P_HEAD) {
        code = C_HEAD;
        a = (int64_t)c->nleft;
    } else if (c->ps == P_LENGTH) {
        code = C_LENGTH;
        b = (int64_t)(c->body_bytes + c->remaining);
    } else {
        code = C_CHUNKED;
    }
    fail(e, c, now, K_CLOSED, code, a, b, NULL, 0);
}

/* ``hup``: the peer's FIN came with this edge: read until recv says so (no edge follows) */
static void on_readable(Engine *e, conn_t *c, uint64_t now, int hup) {
    while (c->state == S_READING) {
        size_t kept = c->nleft;
        if (kept) memcpy(e->rbuf, c->left, kept);
        c->nleft = 0;
        size_t room = RBUF_SIZE - kept;
        ssize_t n = conn_recv(e, c, e->rbuf + kept, room);
        if (n < 0) {
            c->nleft = kept;
            if (kept) memcpy(c->left, e->rbuf, kept);
            if (errno == EAGAIN || errno == EWOULDBLOCK) return;
            if (errno == EINTR) continue;
            fail_errno(e, c, now, errno);
            return;
        }
        if (n == 0) {
            c->nleft = kept;
            if (kept) memcpy(c->left, e->rbuf, kept);
            on_eof(e, c, now);
            return;
        }
        if (feed(e, c, e->rbuf, kept + (size_t)n, now) != 0) return; /* done or failed */
        /* drained: the next edge brings more (TLS: a record at a time, until WANT_READ) */
        if ((size_t)n < room && !hup && !conn_tls(c)) return;
    }
}

/* ---- the loop */

static void on_event(Engine *e, conn_t *c, uint32_t events, uint64_t now) {
    if (c->state == S_GONE) return;
    if (events & (EPOLLRDHUP | EPOLLHUP)) c->peer_closed = 1; /* no next request on it */
    if (events & (EPOLLOUT | EPOLLERR)) {
        if (c->state == S_CONNECTING || c->state == S_WRITING) on_writable(e, c, now);
    } else if (c->state == S_CONNECTING && conn_tls(c)) { /* the handshake's answer */
        on_writable(e, c, now);
    }
    if (c->state == S_READING && (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
        on_readable(e, c, now, (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0);
    else if (c->fd >= 0 && c->state != S_CONNECTING && c->state != S_WRITING &&
             (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))) {
        /* between requests: the server closed (or sent bytes nobody asked for); the next
           request finds out, as the lean user does */
        if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) conn_close(e, c);
    }
}

static void h1_deadlines(Engine *e, conn_t *c, uint64_t now) {
    if (c->state != S_CONNECTING && c->state != S_WRITING && c->state != S_READING) return;
    if (now < c->deadline) return;
    fail(e, c, now, c->connecting ? K_CONNECT_TIMEOUT : K_TIMEOUT, 0, 0, 0, NULL, 0);
}

static void scan_deadlines(Engine *e, uint64_t now) {
    for (size_t i = 0; i < e->nconns; i++) {
        conn_t *c = e->conns[i];
        if (c && c->state != S_GONE) c->proto->deadlines(e, c, now);
    }
}

static void wake_parked(Engine *e, uint64_t now) {
    size_t n = e->nparked;
    conn_t **list = e->parked;
    e->parked = NULL;
    e->nparked = e->capparked = 0;
    for (size_t i = 0; i < n; i++)
        if (list[i]->state == S_PARKED) list[i]->proto->start(e, list[i], now);
    free(list);
}

/* a new user: its first request (arrival rate: when one is due; paced: at `fraction` of a
   period from now) */
static void h1_add(Engine *e, conn_t *c, uint64_t now, double fraction) {
    if (e->stop_sending) { park(e, c); return; }
    if (e->mode == MODE_ARRIVAL) {
        make_idle(e, c); /* its connection opens with its first request */
    } else if (e->mode == MODE_PACED) {
        c->due = now + (uint64_t)(fraction * (double)e->period_ns);
        heap_push(e, c, c->due);
    } else {
        start_request(e, c, now);
    }
}

static void h1_remove(Engine *e, conn_t *c) {
    heap_remove(e, c);
    ticket_done(e, c); /* a request cut short frees its ticket's count */
    if (e->mode == MODE_ARRIVAL) {
        if (c->state == S_ARRIVAL_IDLE) not_idle(e, c);
        else if (c->state == S_CONNECTING || c->state == S_WRITING || c->state == S_READING)
            arrival_done(e);
    }
    conn_close(e, c);
}

static const proto_t proto_h1 = {h1_add, start_request, on_event, h1_deadlines, h1_remove, NULL};

#ifdef WEBPERF_H2 /* setup.py: where libnghttp2's headers are */
#include "_h2.c"
#endif

static int run_commands(Engine *e, uint64_t now) {
    uint64_t value;
    if (read(e->evfd, &value, sizeof value) < 0) { /* nothing pending */ }
    pthread_mutex_lock(&e->lock);
    command_t *list = e->commands;
    size_t n = e->ncommands;
    e->commands = NULL;
    e->ncommands = e->capcommands = 0;
    pthread_mutex_unlock(&e->lock);
    int quit = 0;
    for (size_t i = 0; i < n; i++) {
        command_t *cmd = &list[i];
        if (cmd->op == OP_QUIT) {
            quit = 1;
        } else if (cmd->op == OP_ADD) {
            size_t id = (size_t)cmd->arg;
            if (grow((void **)&e->conns, &e->capconns, id + 1, sizeof(conn_t *))) continue;
            while (e->nconns <= id) e->conns[e->nconns++] = NULL;
            conn_t *c = calloc(1, sizeof *c);
            if (!c) continue;
            c->fd = -1;
            c->id = id;
#ifdef WEBPERF_H2
            c->proto = e->h2 ? &proto_h2 : &proto_h1;
#else
            c->proto = &proto_h1;
#endif
            e->conns[id] = c;
            c->proto->add(e, c, now, cmd->fraction);
        } else if (cmd->op == OP_REMOVE) {
            size_t id = (size_t)cmd->arg;
            conn_t *c = id < e->nconns ? e->conns[id] : NULL;
            if (!c || c->state == S_GONE) continue;
            c->proto->remove(e, c);
            c->state = S_GONE; /* freed at the end (it may still be in the parked list) */
        } else if (cmd->op == OP_WAKE_PARKED) {
            if (!e->stop_sending) wake_parked(e, now);
        }
    }
    free(list);
    return quit;
}

static void *loop_main(void *arg) {
    Engine *e = arg;
    struct epoll_event events[256];
    int use_pwait2 = 1;
    for (;;) {
        uint64_t now = now_ns();
        uint64_t wake = now + SCAN_NS;
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
        now = now_ns();
        int quit = 0;
        for (int i = 0; i < n; i++) { /* the clock read per event: a batch takes a while */
            if (i) now = now_ns();
            conn_t *c = events[i].data.ptr;
            if (c == NULL) quit |= run_commands(e, now);
            else if (c->state != S_GONE) c->proto->event(e, c, events[i].events, now);
        }
        now = now_ns();
        if (quit) break;
        while (e->nheap && e->heap[0]->wake <= now) {
            conn_t *c = e->heap[0];
            heap_remove(e, c);
            if (e->stop_sending) park(e, c);
            else if (e->mode == MODE_ARRIVAL) make_idle(e, c);
            else c->proto->start(e, c, now);
            now = now_ns();
        }
        dispatch(e, now);
        if (now - e->last_scan >= SCAN_NS) {
            e->last_scan = now;
            scan_deadlines(e, now);
        }
    }
    return NULL;
}

/* ------------------------------------------------------------------ Python type */

static int push_command(Engine *e, int op, long long arg, double fraction) {
    pthread_mutex_lock(&e->lock);
    int bad = grow((void **)&e->commands, &e->capcommands, e->ncommands + 1, sizeof(command_t));
    if (!bad) e->commands[e->ncommands++] = (command_t){op, arg, fraction};
    pthread_mutex_unlock(&e->lock);
    if (bad) { PyErr_NoMemory(); return -1; }
    uint64_t one = 1;
    if (write(e->evfd, &one, sizeof one) < 0) { /* the counter is full: a wake-up is pending */ }
    return 0;
}

static int start_thread(Engine *e) {
    if (e->started) return 0;
    if (e->closed) { PyErr_SetString(PyExc_RuntimeError, "the engine is closed"); return -1; }
    int err = pthread_create(&e->thread, NULL, loop_main, e);
    if (err) { errno = err; PyErr_SetFromErrno(PyExc_OSError); return -1; }
    e->started = 1;
    return 0;
}

static int Engine_init(Engine *e, PyObject *args, PyObject *kwds) {
    static char *names[] = {"family",       "host",       "port",      "payload",
                            "head_only",    "timeout_s",  "mode",      "period_s",
                            "arrival_num",  "arrival_ns", "processes", "index", NULL};
    int family, port, head_only, mode;
    const char *host;
    Py_buffer payload;
    double timeout_s, period_s;
    unsigned long long arrival_num = 0, arrival_ns = 0;
    long long processes = 1, index = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "isiy*pdid|KKLL", names, &family, &host, &port,
                                     &payload, &head_only, &timeout_s, &mode, &period_s,
                                     &arrival_num, &arrival_ns, &processes, &index))
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
    if (mode < MODE_CLOSED || mode > MODE_ARRIVAL || timeout_s <= 0 ||
        (mode == MODE_PACED && period_s <= 0) ||
        (mode == MODE_ARRIVAL && (!arrival_num || !arrival_ns || processes < 1 || index < 0 ||
                                  index >= processes))) {
        PyBuffer_Release(&payload);
        PyErr_SetString(PyExc_ValueError, "bad mode, timeout or period");
        return -1;
    }
    e->payload = malloc(payload.len ? (size_t)payload.len : 1);
    e->cur = calloc(1, sizeof(stats_t));
    e->spare = calloc(1, sizeof(stats_t));
    e->nentries = 1;
    e->rng = 0x9E3779B97F4A7C15ULL ^ (uint64_t)getpid() ^ now_ns();
    e->rbuf = malloc(RBUF_SIZE);
    if (!e->payload || !e->cur || !e->spare || !e->rbuf) {
        PyBuffer_Release(&payload);
        PyErr_NoMemory();
        return -1;
    }
    memcpy(e->payload, payload.buf, (size_t)payload.len);
    e->payload_len = (size_t)payload.len;
    PyBuffer_Release(&payload);
    stats_clear(e->cur);
    stats_clear(e->spare);
    e->head_only = head_only;
    e->entries[0] = (entry_t){e->payload, e->payload_len, head_only, 1.0, NULL, NULL, 0};
    e->mode = mode;
    e->timeout_ns = (uint64_t)(timeout_s * 1e9);
    e->period_ns = (uint64_t)(period_s * 1e9);
    e->tickets = -1;
    e->arrival_num = arrival_num;
    e->arrival_ns = arrival_ns;
    e->processes = processes;
    e->index = index;
    e->slot = -1;
    if (loop_open(&e->epfd, &e->evfd) < 0) return -1;
    pthread_mutex_init(&e->lock, NULL);
    return 0;
bad_address:
    PyBuffer_Release(&payload);
    PyErr_Format(PyExc_ValueError, "not a numeric address of family %d: %s", family, host);
    return -1;
}

static PyObject *Engine_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    Engine *e = (Engine *)type->tp_alloc(type, 0);
    if (e) {
        e->epfd = e->evfd = -1;
    }
    return (PyObject *)e;
}

static void engine_stop(Engine *e) {
    if (e->started && !e->closed) {
        push_command(e, OP_QUIT, 0, 0);
        Py_BEGIN_ALLOW_THREADS
        pthread_join(e->thread, NULL);
        Py_END_ALLOW_THREADS
    }
    if (!e->closed) {
        e->closed = 1;
        for (size_t i = 0; i < e->nconns; i++) {
            conn_t *c = e->conns[i];
            if (!c) continue;
            if (c->proto && c->proto->release) c->proto->release(c);
            tls_free(c);
#ifdef WEBPERF_TLS
            if (c->tls && c->tls->session) SSL_SESSION_free(c->tls->session);
#endif
            free(c->tls);
            if (c->fd >= 0) close(c->fd);
            free(c->left);
            free(c);
        }
        free(e->conns);
        e->conns = NULL;
        e->nconns = 0;
    }
}

static void Engine_dealloc(Engine *e) {
    engine_stop(e);
    if (e->epfd >= 0) close(e->epfd);
    if (e->evfd >= 0) close(e->evfd);
    for (int i = 0; i < e->nentries; i++) {
        if (e->entries[i].payload != e->payload) free(e->entries[i].payload);
        free(e->entries[i].statuses);
        free(e->entries[i].needle);
    }
    free(e->payload);
    free(e->sequence);
    free(e->cur);
    free(e->spare);
    free(e->rbuf);
    free(e->heap);
    free(e->parked);
    free(e->commands);
    free(e->idle_bits);
#ifdef WEBPERF_TLS
    if (e->tls_ctx) SSL_CTX_free(e->tls_ctx);
#endif
#ifdef WEBPERF_H2
    h2_engine_free(e->h2);
#endif
    free(e->server_name);
    Py_TYPE(e)->tp_free((PyObject *)e);
}

static PyObject *Engine_add(Engine *e, PyObject *args) {
    double fraction = 0;
    if (!PyArg_ParseTuple(args, "|d", &fraction)) return NULL;
    if (fraction < 0 || fraction >= 1) {
        PyErr_SetString(PyExc_ValueError, "fraction outside [0, 1)");
        return NULL;
    }
    if (start_thread(e) < 0) return NULL;
    long long id = e->added++;
    if (push_command(e, OP_ADD, id, fraction) < 0) return NULL;
    return PyLong_FromLongLong(id);
}

static PyObject *Engine_remove(Engine *e, PyObject *arg) {
    long long id = PyLong_AsLongLong(arg);
    if (id == -1 && PyErr_Occurred()) return NULL;
    if (!e->closed && push_command(e, OP_REMOVE, id, 0) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *Engine_open_tickets(Engine *e, PyObject *arg) {
    long long n = PyLong_AsLongLong(arg);
    if (n == -1 && PyErr_Occurred()) return NULL;
    if (n < 0) { PyErr_SetString(PyExc_ValueError, "a ticket count is >= 0"); return NULL; }
    pthread_mutex_lock(&e->lock);
    e->tickets = n;
    pthread_mutex_unlock(&e->lock);
    if (e->started && push_command(e, OP_WAKE_PARKED, 0, 0) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *Engine_tickets_finished(Engine *e, PyObject *unused) {
    pthread_mutex_lock(&e->lock);
    int finished = e->tickets == 0 && e->outstanding == 0;
    pthread_mutex_unlock(&e->lock);
    return PyBool_FromLong(finished);
}

static PyObject *Engine_stop_sending(Engine *e, PyObject *unused) {
    e->stop_sending = 1;
    __sync_synchronize();
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

static int put_counts(PyObject *dict, const char *key, const uint32_t *counts, int n) {
    PyObject *sub = PyDict_New();
    if (!sub) return -1;
    for (int i = 0; i < n; i++) {
        if (!counts[i]) continue;
        PyObject *k = PyLong_FromLong(i), *v = PyLong_FromUnsignedLong(counts[i]);
        int bad = !k || !v || PyDict_SetItem(sub, k, v) < 0;
        Py_XDECREF(k);
        Py_XDECREF(v);
        if (bad) { Py_DECREF(sub); return -1; }
    }
    int r = PyDict_SetItemString(dict, key, sub);
    Py_DECREF(sub);
    return r;
}

static int put_int(PyObject *dict, const char *key, unsigned long long value) {
    PyObject *v = PyLong_FromUnsignedLongLong(value);
    if (!v) return -1;
    int r = PyDict_SetItemString(dict, key, v);
    Py_DECREF(v);
    return r;
}

static int put_object(PyObject *dict, const char *key, PyObject *value) {
    if (!value) return -1;
    int r = PyDict_SetItemString(dict, key, value);
    Py_DECREF(value);
    return r;
}

/* take(): what completed since the last take, as plain Python values: one dict per
   entry of the mix (one without a mix); the arrival rate's users in the first, and
   HTTP/2's connection figures and refusal (`refused`, "" if none) */
static PyObject *stats_dict(Engine *e, stats_t *s, int index, const char *refused);

static PyObject *Engine_take(Engine *e, PyObject *unused) {
    pthread_mutex_lock(&e->lock);
    stats_t *s = e->cur;
    e->cur = e->spare;
    e->spare = s;
    e->cur->users_busy = e->busy; /* the next interval starts with those still busy */
    e->cur->users_opened = e->opened;
    char refused[512] = "";
#ifdef WEBPERF_H2
    if (e->h2) memcpy(refused, e->h2->refused, sizeof refused);
#endif
    pthread_mutex_unlock(&e->lock);
    PyObject *list = PyList_New(0);
    if (!list) return NULL;
    for (int i = 0; i < e->nentries; i++) {
        PyObject *d = stats_dict(e, &s[i], i, refused);
        if (!d || PyList_Append(list, d) < 0) {
            Py_XDECREF(d);
            Py_DECREF(list);
            for (int j = i + 1; j < e->nentries; j++) stats_clear(&s[j]);
            return NULL;
        }
        Py_DECREF(d);
    }
    return list;
}

static PyObject *stats_dict(Engine *e, stats_t *s, int index, const char *refused) {
    (void)index;
    (void)refused;
    PyObject *d = PyDict_New();
    if (!d) return NULL;
    PyObject *examples = PyList_New(0);
    int bad = !examples;
    for (int i = 0; !bad && i < s->n_examples; i++) {
        example_t *x = &s->examples[i];
        PyObject *item = Py_BuildValue("(iiLLy#)", x->kind, x->key, (long long)x->a,
                                       (long long)x->b, x->raw, (Py_ssize_t)x->len);
        bad = !item || PyList_Append(examples, item) < 0;
        Py_XDECREF(item);
    }
    if (bad || put_object(d, "examples", examples) < 0 || put_int(d, "ok", s->ok) < 0 ||
        put_int(d, "bytes", s->bytes) < 0 || put_int(d, "timeouts", s->timeouts) < 0 ||
        put_int(d, "connect_timeouts", s->connect_timeouts) < 0 ||
        put_int(d, "closed", s->closed) < 0 || put_int(d, "protocol", s->protocol) < 0 ||
        put_int(d, "unexpected_status", s->unexpected_status) < 0 ||
        put_int(d, "unexpected_body", s->unexpected_body) < 0 ||
        put_int(d, "tls", s->tls) < 0 ||
        put_counts(d, "http", s->http, MAX_STATUS) < 0 ||
        put_counts(d, "connect_errno", s->connect_errno, ERRNO_SLOTS) < 0 ||
        put_counts(d, "io_errno", s->io_errno, ERRNO_SLOTS) < 0 ||
        put_object(d, "latency", hist_tuple(&s->latency)) < 0 ||
        (e->close_each && put_object(d, "connect", hist_tuple(&s->connect)) < 0) ||
        (e->close_each && e->tls_ctx && put_object(d, "handshake", hist_tuple(&s->handshake)) < 0) ||
        (e->mode == MODE_ARRIVAL && s->dispatched &&
         (put_int(d, "users_busy", (unsigned long long)s->users_busy) < 0 ||
          put_int(d, "users_opened", (unsigned long long)s->users_opened) < 0)) ||
        (SCHEDULED(e) && (put_object(d, "service", hist_tuple(&s->service)) < 0 ||
                          put_object(d, "lag", hist_tuple(&s->lag)) < 0))
#ifdef WEBPERF_H2
        || (e->h2 && h2_put_stats(e, d, s, index == 0, refused) < 0)
#endif
    ) {
        if (bad) Py_XDECREF(examples);
        Py_DECREF(d);
        stats_clear(s);
        return NULL;
    }
    stats_clear(s);
    return d;
}

/* set_mix([(payload, head_only, weight, statuses or None, needle or None), ...]): the
   request mix, before the first add() */
static PyObject *Engine_set_mix(Engine *e, PyObject *arg) {
    if (e->started || e->closed) {
        PyErr_SetString(PyExc_RuntimeError, "set_mix comes before the first add()");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(arg, "set_mix takes a list of entries");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n < 1 || n > MAX_ENTRIES) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "a mix has 1 to %d entries", MAX_ENTRIES);
        return NULL;
    }
    entry_t entries[MAX_ENTRIES];
    memset(entries, 0, sizeof entries);
    double total = 0;
    Py_ssize_t i;
    for (i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i), *statuses, *needle;
        Py_buffer payload;
        int head_only;
        double weight;
        if (!PyArg_ParseTuple(item, "y*pdOO", &payload, &head_only, &weight, &statuses, &needle))
            goto fail;
        entry_t *x = &entries[i];
        x->payload = malloc(payload.len ? (size_t)payload.len : 1);
        if (!x->payload) { PyBuffer_Release(&payload); PyErr_NoMemory(); goto fail; }
        memcpy(x->payload, payload.buf, (size_t)payload.len);
        x->payload_len = (size_t)payload.len;
        PyBuffer_Release(&payload);
        x->head_only = head_only;
        if (!(weight > 0)) { PyErr_SetString(PyExc_ValueError, "a weight is > 0"); goto fail; }
        total += weight;
        x->cumulative = total;
        if (statuses != Py_None) {
            x->statuses = calloc(MAX_STATUS, 1);
            PyObject *it = x->statuses ? PyObject_GetIter(statuses) : NULL, *v;
            if (!it) { if (!x->statuses) PyErr_NoMemory(); goto fail; }
            while ((v = PyIter_Next(it))) {
                long status = PyLong_AsLong(v);
                Py_DECREF(v);
                if (status < 100 || status >= MAX_STATUS) {
                    if (!PyErr_Occurred())
                        PyErr_SetString(PyExc_ValueError, "a status is from 100 to 999");
                    break;
                }
                x->statuses[status] = 1;
            }
            Py_DECREF(it);
            if (PyErr_Occurred()) goto fail;
        }
        if (needle != Py_None) {
            char *bytes;
            Py_ssize_t len;
            if (PyBytes_AsStringAndSize(needle, &bytes, &len) < 0) goto fail;
            if (len < 1 || len > MAX_NEEDLE) {
                PyErr_Format(PyExc_ValueError, "a body needle has 1 to %d bytes", MAX_NEEDLE);
                goto fail;
            }
            x->needle = malloc((size_t)len);
            if (!x->needle) { PyErr_NoMemory(); goto fail; }
            memcpy(x->needle, bytes, (size_t)len);
            x->needle_len = (size_t)len;
        }
    }
    stats_t *cur = calloc((size_t)n, sizeof(stats_t)), *spare = calloc((size_t)n, sizeof(stats_t));
    if (!cur || !spare) { free(cur); free(spare); PyErr_NoMemory(); i = n; goto fail; }
    for (Py_ssize_t j = 0; j < n; j++) {
        stats_clear(&cur[j]);
        stats_clear(&spare[j]);
    }
    for (int j = 0; j < e->nentries; j++) {
        if (e->entries[j].payload != e->payload) free(e->entries[j].payload);
        free(e->entries[j].statuses);
        free(e->entries[j].needle);
    }
    free(e->cur);
    free(e->spare);
    e->cur = cur;
    e->spare = spare;
    memcpy(e->entries, entries, sizeof entries);
    e->nentries = (int)n;
    Py_DECREF(seq);
    Py_RETURN_NONE;
fail:
    for (Py_ssize_t j = 0; j <= i && j < n; j++) {
        free(entries[j].payload);
        free(entries[j].statuses);
        free(entries[j].needle);
    }
    Py_DECREF(seq);
    return NULL;
}

/* set_sequence([i, ...]): each request takes the next entry of this sequence (cycled)
   instead of one by weight; after set_mix, before the first add() */
static PyObject *Engine_set_sequence(Engine *e, PyObject *arg) {
    if (e->started || e->closed) {
        PyErr_SetString(PyExc_RuntimeError, "set_sequence comes before the first add()");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(arg, "set_sequence takes a list of entry indices");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    int *order = n > 0 ? malloc((size_t)n * sizeof(int)) : NULL;
    if (n < 1 || !order) {
        Py_DECREF(seq);
        if (n < 1) PyErr_SetString(PyExc_ValueError, "a sequence has one entry at least");
        else PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        long index = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));
        if (index < 0 || index >= e->nentries) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "an index of the mix's entries");
            free(order);
            Py_DECREF(seq);
            return NULL;
        }
        order[i] = (int)index;
    }
    Py_DECREF(seq);
    free(e->sequence);
    e->sequence = order;
    e->nsequence = (size_t)n;
    e->sequence_at = 0;
    Py_RETURN_NONE;
}

/* use_tls(server_name, ca_file=None): every connection speaks TLS (before the first add) */
static PyObject *Engine_use_tls(Engine *e, PyObject *args) {
    const char *server_name, *ca_file = NULL;
    int resume = 0;
    if (!PyArg_ParseTuple(args, "s|zp", &server_name, &ca_file, &resume)) return NULL;
    if (e->started || e->tls_ctx) {
        PyErr_SetString(PyExc_RuntimeError, "use_tls() comes once, before the first add()");
        return NULL;
    }
#ifdef WEBPERF_TLS
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx) goto ssl_error;
    static const unsigned char alpn[] = "\x08http/1.1", alpn_h2[] = "\x02h2";
    if (e->h2) /* use_http2() first: h2 only (a server that picks nothing is refused) */
        SSL_CTX_set_alpn_protos(ctx, alpn_h2, sizeof alpn_h2 - 1);
    else
        SSL_CTX_set_alpn_protos(ctx, alpn, sizeof alpn - 1);
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
#ifdef SSL_OP_IGNORE_UNEXPECTED_EOF
    SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF); /* a close without notify: EOF */
#endif
    SSL_CTX_set_session_cache_mode(ctx, resume ? SSL_SESS_CACHE_CLIENT : SSL_SESS_CACHE_OFF);
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
    free(e->server_name);
    e->server_name = strdup(server_name);
    if (!e->server_name) { SSL_CTX_free(ctx); return PyErr_NoMemory(); }
    unsigned char buf[sizeof(struct in6_addr)];
    e->server_is_ip = inet_pton(AF_INET, server_name, buf) == 1 ||
                      inet_pton(AF_INET6, server_name, buf) == 1;
    e->tls_ctx = ctx;
    Py_RETURN_NONE;
ssl_error:
    ERR_clear_error();
    PyErr_SetString(PyExc_RuntimeError, "OpenSSL: cannot make a TLS context");
    return NULL;
#else
    (void)server_name;
    (void)ca_file;
    (void)resume;
    PyErr_SetString(PyExc_RuntimeError, "the native loop is built without TLS (no OpenSSL)");
    return NULL;
#endif
}

#ifndef WEBPERF_H2
static PyObject *Engine_use_http2(Engine *e, PyObject *args) {
    (void)e;
    (void)args;
    PyErr_SetString(PyExc_RuntimeError,
                    "the native loop is built without HTTP/2 (no libnghttp2 headers)");
    return NULL;
}
#endif

static PyObject *Engine_close_each(Engine *e, PyObject *unused) {
    if (e->h2) {
        PyErr_SetString(PyExc_RuntimeError, "close_each() is HTTP/1.1's (a stream is not a "
                                            "connection)");
        return NULL;
    }
    if (e->started) {
        PyErr_SetString(PyExc_RuntimeError, "close_each() comes before the first add()");
        return NULL;
    }
    e->close_each = 1;
    Py_RETURN_NONE;
}

static PyObject *Engine_close(Engine *e, PyObject *unused) {
    engine_stop(e);
    Py_RETURN_NONE;
}

static PyObject *Engine_bucket_index(PyObject *unused, PyObject *arg) {
    unsigned long long v = PyLong_AsUnsignedLongLong(arg);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
    if (v > VALUE_MAX) v = VALUE_MAX;
    return PyLong_FromLong(bucket_index(v));
}

static PyMethodDef Engine_methods[] = {
    {"add", (PyCFunction)Engine_add, METH_VARARGS,
     "add(fraction=0.0) -> id: a connection that starts sending (paced: first due at "
     "fraction of a period from now)"},
    {"remove", (PyCFunction)Engine_remove, METH_O, "remove(id): close it, drop what it had in flight"},
    {"open_tickets", (PyCFunction)Engine_open_tickets, METH_O,
     "open_tickets(n): counted mode: exactly n requests from now"},
    {"tickets_finished", (PyCFunction)Engine_tickets_finished, METH_NOARGS,
     "whether every ticket's request has completed"},
    {"stop_sending", (PyCFunction)Engine_stop_sending, METH_NOARGS,
     "no request is started after this returns (those in flight complete)"},
    {"take", (PyCFunction)Engine_take, METH_NOARGS,
     "the figures since the last take: a list, one dict per entry of the mix"},
    {"set_mix", (PyCFunction)Engine_set_mix, METH_O,
     "set_mix([(payload, head_only, weight, statuses or None, needle or None), ...]): the "
     "request mix (before the first add)"},
    {"set_sequence", (PyCFunction)Engine_set_sequence, METH_O,
     "set_sequence([index, ...]): requests take the mix's entries in this order, cycled, "
     "instead of by weight (after set_mix, before the first add)"},
    {"close", (PyCFunction)Engine_close, METH_NOARGS, "stop the thread, close every connection"},
    {"close_each", (PyCFunction)Engine_close_each, METH_NOARGS,
     "a new connection per request (they say Connection: close); before the first add()"},
    {"use_tls", (PyCFunction)Engine_use_tls, METH_VARARGS,
     "use_tls(server_name, ca_file=None, resume=False): every connection speaks TLS (SNI, "
     "ALPN http/1.1; verified against ca_file if given); before the first add()"},
    {"use_http2", (PyCFunction)Engine_use_http2, METH_VARARGS,
     "use_http2(streams, requests, stream_window_bits=30, conn_window_bits=30): every "
     "connection speaks HTTP/2 (h2c, or h2 with use_tls after it) with `streams` requests in "
     "flight; requests: one ([(name, value), ...], body or None, grpc) per entry of the mix "
     "(set_mix first); before the first add()"},
    {NULL, NULL, 0, NULL}};

static PyTypeObject EngineType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pytest_webperf.swarm._hotloop.Engine",
    .tp_basicsize = sizeof(Engine),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One generator process's native request loop (see swarm/native.py).",
    .tp_new = Engine_new,
    .tp_init = (initproc)Engine_init,
    .tp_dealloc = (destructor)Engine_dealloc,
    .tp_methods = Engine_methods,
};

static PyMethodDef module_methods[] = {
    {"bucket_index", Engine_bucket_index, METH_O,
     "the histogram bucket of a value in microseconds (as histogram.bucket_index)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_hotloop",
                                    "The native request loop (see swarm/native.py).", -1,
                                    module_methods};

PyMODINIT_FUNC PyInit__hotloop(void) {
    if (PyType_Ready(&EngineType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&EngineType);
    if (PyModule_AddObject(m, "Engine", (PyObject *)&EngineType) < 0 ||
        PyModule_AddIntConstant(m, "CLOSED", MODE_CLOSED) < 0 ||
        PyModule_AddIntConstant(m, "PACED", MODE_PACED) < 0 ||
        PyModule_AddIntConstant(m, "COUNTED", MODE_COUNTED) < 0 ||
        PyModule_AddIntConstant(m, "ARRIVAL", MODE_ARRIVAL) < 0 ||
#ifdef WEBPERF_TLS
        PyModule_AddIntConstant(m, "TLS", 1) < 0 ||
#else
        PyModule_AddIntConstant(m, "TLS", 0) < 0 ||
#endif
#ifdef WEBPERF_H2
        PyModule_AddIntConstant(m, "H2", 1) < 0 ||
#else
        PyModule_AddIntConstant(m, "H2", 0) < 0 ||
#endif
        PyModule_AddIntConstant(m, "K_TLS", K_TLS) < 0) {
        Py_DECREF(&EngineType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
