/*
 * engine.h: the native engine's seam. One engine (engine.c: the epoll thread, the wake
 * heap, timers and pacing, connections opened, closed and reopened over TCP or TLS, the
 * figures; python.c: its Python type) and protocols as sessions behind one small
 * interface (session_t), each a file of its own that owns only its framing and its
 * request/answer bookkeeping:
 *
 *   http1.c   HTTP/1.1 requests (and the request mix and checks HTTP/2 shares)
 *   h2.c      HTTP/2 and unary gRPC through libnghttp2 (built with WEBPERF_H2)
 *   mqtt.c    MQTT 3.1.1 and 5 publishers and subscribers (over TCP, TLS or WebSocket)
 *   ws.c      WebSocket: the upgrade and the frames (for mqtt.c too), and its messages
 *   sse.c     server-sent events
 *
 * The model is h2load's Client and Session (nghttp2's src/h2load_session.h): the engine
 * owns the socket and calls the session when it is up, when bytes arrive, when the
 * socket takes more, when a timer is due and when it ends; the session writes through
 * conn_write and records through record_*. A new protocol is a file with a session_t,
 * named in python.c's table of sessions.
 *
 * One extension module (pytest_webperf.swarm._hotloop), compiled with
 * -fvisibility=hidden: what the files share is declared here.
 */
#ifndef WEBPERF_ENGINE_H
#define WEBPERF_ENGINE_H

#define PY_SSIZE_T_CLEAN
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <Python.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#ifdef WEBPERF_TLS /* setup.py: where OpenSSL's headers are */
#include <openssl/err.h>
#include <openssl/sha.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#endif

/* ------------------------------------------------------------------ histogram */
/* the same log-linear microsecond buckets as stats/histogram.py's Histogram: values
   below 512 exact, then 256 sub-buckets per power of two */

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

static inline void hist_clear(hist_t *h) {
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

static inline uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

#define ATOMIC_ADD(x, n) __atomic_add_fetch(&(x), (n), __ATOMIC_RELAXED)
#define ATOMIC_GET(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define ATOMIC_SET(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)

/* ------------------------------------------------------------------ figures */

/* kinds of failure, each with a key (the Python face names them: swarm/engine.py) */
enum {
    K_CONNECT_ERRNO = 1, /* key: errno */
    K_IO_ERRNO,          /* key: errno */
    K_CONNECT_TIMEOUT,   /* no connection (or no opening answer) within the timeout */
    K_TIMEOUT,           /* key: what was waited for (the session's) */
    K_TLS,               /* example: OpenSSL's words */
    K_HTTP,              /* key: a failing status */
    K_CLOSED,            /* key: how far the answer had come (a, b: its bytes) */
    K_PROTOCOL,          /* key: the session's error code (example: the bytes or words) */
    K_UNEXPECTED_STATUS, /* a status the request's checks do not allow */
    K_UNEXPECTED_BODY,   /* an answer without the expected bytes (a: its status line's) */
    K_RST,               /* HTTP/2: RST_STREAM, key its error code */
    K_GOAWAY,            /* HTTP/2: GOAWAY with an error, key its code */
    K_GRPC,              /* gRPC: key the grpc-status */
    K_WS_HANDSHAKE,      /* key: the status, or HS_* */
    K_WS_CLOSE,          /* key: the close code; example: the reason */
    K_WS_ABNORMAL,       /* the stream ended without a close frame (1006) */
    K_WS_CLOSE_TIMEOUT,  /* our close had no answer within the close timeout */
    K_SSE_TYPE,          /* 200, but not text/event-stream; example: the content type */
    K_UNMATCHED,         /* a message without our correlation header */
    K_CONNACK,           /* MQTT: a refused CONNACK, key its code */
    K_REFUSED,           /* MQTT 5: a PUBACK/PUBREC's failure reason code */
    K_LAST
};
#define E_TLS_FAILED 100000 /* conn_send/conn_recv's errno for a TLS failure (not an errno) */

/* the histograms an interval may carry, by name in take() (python.c: HIST_NAMES) */
enum { H_LATENCY, H_SERVICE, H_LAG, H_CONNECT, H_HANDSHAKE, H_HEADERS, H_STALL, H_E2E, NHIST };

#define MAX_FAILS 64
#define EXAMPLE_BYTES 160

typedef struct {
    int kind, key;
    uint64_t n;
    int64_t a, b; /* numbers for the words (closed early: bytes got and expected) */
    int len;
    char raw[EXAMPLE_BYTES];
} fail_t;

/* HTTP/2's connection figures (h2.c), gathered under the lock into the first entry's */
struct h2_figures {
    uint64_t opened, rotations, retried;    /* connections; GOAWAY NO_ERROR; re-sent */
    uint64_t hd_recv_wire, hd_recv_decoded; /* HPACK: header block bytes, name+value */
    uint64_t hd_sent_wire, hd_sent_decoded;
    uint64_t reads, writes, bytes_in, bytes_out;
    uint64_t stalled, stall_us; /* request bodies that waited for window */
    uint64_t near_closed;       /* DATA frames that left a window < a frame */
    int64_t min_window;         /* the server's lowest send window (as we model it) */
    uint64_t capped;            /* connections whose server allowed < streams */
    uint32_t server_streams, server_window, server_frame; /* the server's SETTINGS */
};

/* one interval's figures of one entry of a request mix (one without a mix), double
   buffered: take() swaps them under the lock */
typedef struct {
    uint64_t ok, bytes, sent, received, received_bytes, late;
    long long users_busy, users_opened, dispatched; /* arrival rate: peak busy, ever used */
    struct h2_figures fig;
    int nfails;
    fail_t fails[MAX_FAILS];
    hist_t h[NHIST];
} stats_t;

/* the whole run's (warm-up and the end included): counters marked atomic are read by
   state() while the thread runs, the rest after it stopped (finish) */
typedef struct {
    long long added, tried, open, open_peak, last_receipt_ns; /* atomic */
    uint64_t opens, open_failures, drops, reconnects, sent, received;
    hist_t opening; /* from the connect's start to the opening's answer (an upgrade) */
    int nfails;     /* every failure of the run by kind and key, the opening's too */
    fail_t fails[MAX_FAILS];
} ledger_t;

/* One (receiver, sender) stream of sequence numbers: which arrived, in a ring of the
   last WINDOW below the highest. A sequence further below cannot be told from a
   duplicate: it is counted out of order and as a first copy, and beyond_window. */
#define WINDOW 256
typedef struct {
    uint64_t top;   /* highest seen + 1 (0: none yet) */
    uint64_t first; /* the first seen (SSE: where the server's numbering met us) */
    uint64_t distinct, duplicated, reordered, beyond_window;
    uint64_t ring[WINDOW / 64];
} acct_t;

/* ------------------------------------------------------------------ connections */

/* what a connection does: echo (messages answered, RTT), subscriber (receives a relay's
   or a broker's messages), publisher (sends, paced or flat out), idle (holds the
   connection, a ping now and then), a stream (server-sent events) */
enum { R_ECHO = 0, R_SUB, R_PUB, R_IDLE, R_STREAM };

typedef struct engine Engine;
typedef struct conn conn_t;

/* the transport's state: no socket (T_WAIT: in the heap until it reconnects), behind
   the connect gate, TCP connecting, the TLS handshake, up (the session speaks), done */
enum { T_IDLE = 0, T_WAIT, T_QUEUED, T_CONNECTING, T_TLS, T_UP, T_DONE };
/* where a connection of requests waits (HTTP): busy (or in the heap), parked until
   tickets open or the sending stops, idle until an arrival is due; gone (removed) */
enum { Q_BUSY = 0, Q_PARKED, Q_ARRIVAL, Q_GONE };

struct conn {
    void *s; /* the session's part of it */
    int fd;
    uint8_t state;       /* T_* */
    uint8_t sched;       /* Q_* */
    uint8_t reading;     /* bytes that arrive are read (HTTP/1.1: an answer is awaited) */
    uint8_t peer_closed; /* the server's FIN has arrived */
    uint8_t wblocked;    /* a send met a full socket buffer: EPOLLOUT resumes */
    uint8_t tried, opened, removed, closing, role;
    uint32_t id;     /* its handle */
    long long ident; /* the Python side's number for it (an MQTT client, a publisher) */
    size_t heap_pos; /* 1-based position in the wake heap, 0: not in it */
    uint64_t wake;   /* the heap's key */
    uint64_t due;    /* paced: its next intended start */
    uint64_t started, deadline, tcp_at; /* its connect began, must end by, TCP came up */
    uint64_t backoff_ns;
    /* the write queue: only what a send could not take (most connections: none) */
    uint8_t *wbuf;
    size_t wlen, wpos, wcap;
#ifdef WEBPERF_TLS
    SSL *ssl;
    SSL_SESSION *resume; /* the last connection's session, for the next one */
#else
    void *ssl, *resume;
#endif
};

/* ------------------------------------------------------------------ the seam */

typedef struct session {
    const char *name;
    const char *alpn;  /* offered over TLS (wire format), or NULL */
    size_t size;       /* a connection's part, allocated with it */
    int many_idle;     /* many connections wait: TLS keeps no buffers while idle */
    uint64_t scan_ns;  /* how often scan() runs */
    int (*configure)(Engine *, PyObject *options); /* before the thread: -1 with an error */
    void (*add)(Engine *, conn_t *, uint64_t now, double fraction); /* a new user */
    void (*start)(Engine *, conn_t *, uint64_t now); /* requests: the next one is due */
    void (*up)(Engine *, conn_t *, uint64_t now);    /* TCP (and TLS) are up */
    int (*read)(Engine *, conn_t *, uint8_t *, size_t, uint64_t now); /* -1: stop reading */
    void (*drained)(Engine *, conn_t *, uint64_t now); /* read until EAGAIN (or NULL) */
    void (*eof)(Engine *, conn_t *, uint64_t now);     /* the server closed */
    void (*writable)(Engine *, conn_t *, uint64_t now); /* the write queue drained (or NULL) */
    void (*fail)(Engine *, conn_t *, uint64_t now, int kind, int key, const char *raw,
                 size_t len);                         /* the transport failed */
    void (*due)(Engine *, conn_t *, uint64_t now);  /* its wake time came (or NULL) */
    void (*scan)(Engine *, conn_t *, uint64_t now); /* deadlines, keep-alives */
    void (*end)(Engine *, conn_t *, uint64_t now, int run_over); /* the user left, the end */
    void (*release)(Engine *, conn_t *);                         /* free what its part holds */
    void (*free)(Engine *);                                      /* free the engine's part */
    int (*take)(Engine *, PyObject *d, stats_t *s, int entry);   /* take()'s own items */
    int (*state)(Engine *, PyObject *d);                         /* state()'s own items */
    int (*ledger)(Engine *, PyObject *d);                        /* finish()'s own items */
} session_t;

extern const session_t SESSION_HTTP1, SESSION_MQTT, SESSION_WS, SESSION_SSE;
#ifdef WEBPERF_H2
extern const session_t SESSION_H2;
#endif

/* ------------------------------------------------------------------ the engine */

enum { MODE_CLOSED = 0, MODE_PACED = 1, MODE_COUNTED = 2, MODE_ARRIVAL = 3 };
#define SCHEDULED(e) ((e)->mode == MODE_PACED || (e)->mode == MODE_ARRIVAL)
#define READ_SIZE (64 * 1024)
#define READ_ROOM (64 * 1024 + 1) /* before e->rbuf: a session may put kept bytes there */
#define BACKOFF_NS 10000000ULL    /* after a failed connect: no busy spin */
#define BACKOFF_MAX_NS 1000000000ULL

typedef struct {
    int op, role;
    long long arg;
    double fraction;
} command_t;
enum { OP_ADD = 1, OP_REMOVE, OP_GO, OP_WAKE_PARKED, OP_CLOSE_ALL, OP_QUIT };

struct engine {
    PyObject_HEAD
    const session_t *session;
    void *cfg; /* the session's settings and figures */
    /* the transport */
    struct sockaddr_storage addr;
    socklen_t addrlen;
    struct sockaddr_in *sources; /* local IPv4 addresses to bind, round robin */
    size_t nsources, next_source;
    uint64_t timeout_ns;
    long long max_connecting, connecting; /* the connect gate (0: none) */
    conn_t **gate;
    size_t ngate, gate_head, capgate;
    void *tls_ctx; /* SSL_CTX * (use_tls), else plain TCP */
    char *server_name;
    int server_is_ip, setup_times;
    char tls_message[EXAMPLE_BYTES];
    /* the thread and its commands */
    pthread_t thread;
    int started, finished, closing_all;
    int epfd, evfd;
    pthread_mutex_t lock; /* commands, figures, tickets */
    command_t *commands;
    size_t ncommands, capcommands;
    volatile int stop_sending, publishing;
    uint64_t stop_at, close_deadline;
    /* the connections: by handle, the wake heap, the parked */
    conn_t **conns;
    size_t nconns, capconns;
    long long adds;
    conn_t **heap;
    size_t nheap, capheap;
    conn_t **parked;
    size_t nparked, capparked;
    uint8_t *rbuf; /* READ_ROOM, then READ_SIZE: e->rbuf points past the room */
    uint64_t rng, last_scan;
    /* the figures */
    stats_t *cur, *spare; /* one per entry */
    int nentries;
    unsigned hists; /* the histograms take() always gives (1 << H_*) */
    ledger_t ledger;
    /* the load shape of requests (HTTP): closed, paced, counted, arriving */
    int mode;
    double *cumulative; /* a mix's entries by weight: the sum of the weights up to each */
    uint8_t *sequence;  /* or the entries in this order, cycled (a counted mix) */
    size_t nsequence, sequence_at;
    uint64_t period_ns;
    /* arrival rate: slot s is due at s * arrival_ns / arrival_num ns
       (pacing.ArrivalSchedule); this process takes the slots s = index (mod processes) */
    uint64_t arrival_num, arrival_ns;
    long long processes, index, slot; /* slot: the next one nobody took; -1: not begun */
    uint64_t *idle_bits;              /* idle arrival connections, by id: the lowest first */
    size_t idle_words, n_idle;
    long long busy, opened;
    long long tickets;     /* counted: -1 not open yet */
    long long outstanding; /* taken, not completed */
};

/* engine.c: the thread, arrays, randomness, the heap */
void *loop_main(void *engine);
int grow(void **array, size_t *cap, size_t need, size_t size);
void free_all(void **pointers, size_t n);
#define FREE_ALL(...) \
    free_all((void *[]){__VA_ARGS__}, sizeof((void *[]){__VA_ARGS__}) / sizeof(void *))
uint64_t engine_random(Engine *e);
void conn_wake(Engine *e, conn_t *c, uint64_t at);
void heap_remove(Engine *e, conn_t *c);

/* engine.c: the transport */
void conn_connect(Engine *e, conn_t *c, uint64_t now); /* through the gate */
int conn_write(Engine *e, conn_t *c, const void *p, size_t n, uint64_t now); /* -1: failed */
void conn_close(Engine *e, conn_t *c);
void conn_fail_errno(Engine *e, conn_t *c, uint64_t now, int err);
void conn_opened(Engine *e, conn_t *c, uint64_t now); /* the opening was answered */
void conn_lost(Engine *e, conn_t *c, uint64_t now, int kind, int key, const char *raw,
               size_t len, int reconnect); /* a failure ends it: recorded, reconnect or done */
void conn_retire(Engine *e, conn_t *c, uint64_t now, uint64_t pause_ns, int reconnect);

/* engine.c: the figures (under the lock, but for the ledger's) */
void count_fail(fail_t *fails, int *nfails, int kind, int key, uint64_t n, int64_t a, int64_t b,
                const char *raw, size_t len);
void record_fail(Engine *e, int entry, int kind, int key, uint64_t n, int64_t a, int64_t b,
                 const char *raw, size_t len);
void record_value(Engine *e, int which, uint64_t us); /* one more value in a histogram */
void record_ok(Engine *e, uint64_t latency_us, uint64_t bytes); /* a message answered */
void note_receipt(Engine *e, uint64_t now);
void acct_seen(acct_t *a, uint64_t seq);
PyObject *acct_tuple(uint64_t expected, const acct_t *a);

/* engine.c: requests (HTTP's load shapes) */
typedef struct {
    int entry, ticket;
    uint64_t due, intended, started, deadline;
} request_t;
int request_begin(Engine *e, request_t *r, uint64_t now, uint64_t intended); /* 0: no ticket */
void request_end(Engine *e, request_t *r);
void request_done(Engine *e, const request_t *r, uint64_t done, uint64_t bytes, int kind, int key,
                  int64_t a, const char *raw, size_t len, uint64_t headers_at);
void requests_due(Engine *e, conn_t *c, uint64_t now); /* a session's due(): park, idle, start */
void park(Engine *e, conn_t *c);
void make_idle(Engine *e, conn_t *c);
void not_idle(Engine *e, conn_t *c);
void arrival_done(Engine *e);

/* http1.c: a request mix and its checks (HTTP/2's too) */
#define MAX_ENTRIES 32   /* a mix's entries */
#define MAX_NEEDLE 1024  /* an expected body substring (fixture/http.py MAX_NEEDLE) */
#define EXAMPLE_LINE 60  /* an unexpected body's example: its status line, then */
#define EXAMPLE_BODY 100 /* the body's first bytes */

typedef struct {
    char *payload; /* HTTP/1.1's request */
    size_t payload_len;
    int head_only;
    uint8_t *statuses; /* MAX_STATUS flags, or NULL: any status below 400 */
    char *needle;      /* NULL: no expected body substring */
    size_t needle_len;
} entry_t;

/* the engine's part of HTTP/1.1 (e->cfg), the first of HTTP/2's */
typedef struct {
    entry_t entries[MAX_ENTRIES];
    double cumulative[MAX_ENTRIES];
    int close_each;
} http_t;

/* A response body as an expected substring sees it, over HTTP/1.1 reads and HTTP/2 DATA
   frames alike (body_scan): found yet, the last needle_len - 1 bytes of the chunk before
   (a needle across two chunks), and the body's first bytes (the example of a failure). */
typedef struct body {
    int found;
    size_t ntail;
    int head_len;
    char head[EXAMPLE_BODY];
    char tail[MAX_NEEDLE];
} body_t;

int http_configure(Engine *e, PyObject *options, size_t size); /* the load shape, the mix */
void http_free(Engine *e);
void body_reset(body_t *b);
void body_scan(Engine *e, int entry, body_t *b, const char *p, size_t n);
int http_status_check(Engine *e, int entry, int status, int failing, int *key);
int http_body_check(Engine *e, int entry, const body_t *b, const char *line, size_t n,
                    int64_t *a, char raw[EXAMPLE_LINE + EXAMPLE_BODY], size_t *len);

/* where a connection's bytes are, for a parser's callbacks: whose, read when */
typedef struct {
    Engine *e;
    conn_t *c;
    uint64_t now;
} at_t;

/* ws.c: WebSocket framing (mqtt.c's transport too) */
typedef struct ws_rx { /* the frame reader's state: a frame head across reads, a control */
    uint8_t hdr[14], nhdr, need; /* frame's payload (at most 125 bytes), whether a */
    uint8_t op, fin, msg_op;     /* fragmented message is open */
    uint64_t remaining;
    uint8_t ctl[125], nctl;
} ws_rx_t;
typedef struct {
    int (*payload)(void *ctx, const uint8_t *p, size_t n); /* a data frame's bytes */
    int (*message)(void *ctx, int op);                     /* a whole message (FIN) */
    int (*control)(void *ctx, int op, const uint8_t *p, size_t n);
} ws_sink_t;
enum { HS_BAD_STATUS_LINE = 1, HS_NO_UPGRADE, HS_BAD_ACCEPT, HS_HEAD_LONG };
int ws_parse(ws_rx_t *rx, const uint8_t *d, size_t n, const ws_sink_t *sink, void *ctx);
size_t ws_frame_head(uint8_t head[14], int op, int fin, size_t n, const uint8_t key[4]);
void ws_mask(uint8_t *p, size_t n, const uint8_t key[4], size_t offset);
void ws_accept_of(const char *key, char out[29]);
int ws_upgrade(Engine *e, conn_t *c, const char *path, const char *tail, char accept[29],
               uint64_t now);
long ws_upgraded(Engine *e, conn_t *c, char **head, size_t *nhead, const char accept[29],
                 const uint8_t *d, size_t n, uint64_t now);
int ws_send(Engine *e, conn_t *c, int op, uint8_t *payload, size_t n, uint64_t now);

/* http1.c: an opening request, the heads of HTTP answers (an upgrade's, a stream's) */
int http_get(Engine *e, conn_t *c, const char *path, const char *extra, const char *tail,
             uint64_t now);
long head_collect(char **head, size_t *nhead, const uint8_t *d, size_t n, size_t *used);
int head_header(const char *h, size_t n, const char *name, const char **v, size_t *vlen);
int has_token_ci(const char *s, size_t n, const char *word);
int status_of(const char *h, size_t n);
int hex_value(uint8_t ch);
size_t line_len(const char *h, size_t n);

/* the tests' doors (module functions): ws.c's frames, sse.c's parser */
PyObject *ws_parse_door(PyObject *unused, PyObject *args);
PyObject *ws_frame_door(PyObject *unused, PyObject *args);
PyObject *ws_accept_door(PyObject *unused, PyObject *arg);
PyObject *sse_parse_door(PyObject *unused, PyObject *args);

/* python.c: what the sessions hand to Python */
PyObject *hist_tuple(const hist_t *h);
PyObject *fails_list(const fail_t *fails, int nfails);
int put_object(PyObject *d, const char *key, PyObject *value);
int put_int(PyObject *d, const char *key, long long value);
int parse_options(PyObject *options, const char *format, char **names, ...);
int copy_bytes(PyObject *obj, uint8_t **out, size_t *len);

#endif /* WEBPERF_ENGINE_H */
