/*
 * _streamloop.h: the native stream loop's own types, shared by its three C files (one
 * extension module, pytest_webperf.swarm._streamloop):
 *
 *   _streamloop.c   the transport (connect, the connect gate, TLS, the write queue,
 *                   reconnects with back-off, deadlines), the loop thread, the ledger,
 *                   the Python type;
 *   _stream_ws.c    WebSocket (RFC 6455): the upgrade, the frame reader and writer,
 *                   ping/pong, the close handshake, correlation and accounting;
 *   _stream_sse.c   server-sent events: the request, the de-chunker, the event-stream
 *                   parser, time to first event, gaps, Last-Event-ID.
 *
 * A connection carries a protocol (proto_t: four calls) over the shared transport; the
 * frame reader and the event-stream parser are pure functions over their own state, so
 * the tests drive them without a socket (ws_parse, sse_parse in the module).
 * Functions shared between the files are hidden (not exported by the .so).
 */
#ifndef WEBPERF_STREAMLOOP_H
#define WEBPERF_STREAMLOOP_H

/* the shared plumbing: each file includes it and uses part of it */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "_loop.h" /* headers, histogram, clock, arrays, TLS words, epoll set */
#pragma GCC diagnostic pop

#include <strings.h>

#define HIDDEN __attribute__((visibility("hidden")))

/* ------------------------------------------------------------------ kinds, roles, states */

enum { KIND_WS = 0, KIND_SSE = 1 };
/* what a connection does: echo (messages answered, RTT), subscriber (receives a relay's
   messages), publisher (sends, paced), idle (holds the connection, a ping now and then),
   SSE (reads a stream) */
enum { R_ECHO = 0, R_SUB = 1, R_PUB = 2, R_IDLE = 3, R_SSE = 4 };
/* S_WAIT: in the wake heap until it (re)connects; S_QUEUED: behind the connect gate */
enum { S_WAIT = 0, S_QUEUED, S_CONNECTING, S_TLS, S_OPENING, S_OPEN, S_CLOSING, S_DONE };

/* failures: kind and key (the Python face names them: swarm/streamloop.py) */
enum {
    K_CONNECT_ERRNO = 1, /* key: errno */
    K_IO_ERRNO,          /* key: errno */
    K_CONNECT_TIMEOUT,   /* no TCP (or TLS) connection within the timeout */
    K_TIMEOUT,           /* key: T_* */
    K_TLS,               /* example: OpenSSL's words */
    K_HTTP,              /* key: the status of a refused stream (SSE) */
    K_CLOSED,            /* the server closed before its answer's head was complete */
    K_PROTOCOL,          /* key: E_* (example: the bytes) */
    K_WS_HANDSHAKE,      /* key: the status, or HS_* */
    K_WS_CLOSE,          /* key: the close code; example: the reason */
    K_WS_ABNORMAL,       /* the stream ended without a close frame (1006) */
    K_WS_CLOSE_TIMEOUT,  /* our close had no answer within the close timeout */
    K_SSE_TYPE,          /* 200, but not text/event-stream; example: the content type */
    K_UNEXPECTED_BODY,   /* an answer without the expected bytes; example: its start */
    K_UNMATCHED,         /* a message without our correlation header; example: its start */
};
enum { T_OPENING = 1, T_MESSAGE, T_PING };
enum { HS_BAD_STATUS_LINE = 1, HS_NO_UPGRADE, HS_BAD_ACCEPT, HS_HEAD_LONG };
/* protocol errors (K_PROTOCOL keys); 0 < E_* < 100: the frame reader's and the SSE parser's */
enum {
    E_WS_MASKED = 1,         /* a server's frame is masked */
    E_WS_RSV,                /* RSV bits set (no extension was offered) */
    E_WS_OPCODE,             /* an unknown opcode */
    E_WS_CONTROL_LONG,       /* a control frame longer than 125 bytes */
    E_WS_CONTROL_FRAGMENTED, /* a control frame without FIN */
    E_WS_CONTINUATION,       /* a continuation with no message begun */
    E_WS_INTERLEAVED,        /* a new data frame inside a fragmented message */
    E_WS_LENGTH,             /* a 64-bit length with its top bit set */
    E_WS_CLOSE_PAYLOAD,      /* a close frame of one byte */
    E_HEAD_LONG,             /* an answer's head longer than MAX_HEAD */
    E_STATUS_LINE,           /* not an HTTP/1.x status line */
    E_BAD_CHUNK,             /* a malformed chunked body (SSE) */
};
#define E_TLS_FAILED 100000 /* conn_send/conn_recv's errno for a TLS failure */

#define MAX_FAILS 64
#define EXAMPLE_BYTES 160
#define HEAD_BYTES 40 /* a message's correlation header: 8 hex id, 16 hex seq, 16 hex ns */
#define MAX_HEAD (16 * 1024)
#define MAX_ID 64        /* an SSE id longer than this is cut (FINDINGS: ids are short) */
#define MAX_NEEDLE 1024  /* expect=: the answer must contain these bytes */
#define ORDER_RING 64    /* correlate by order: messages in flight per connection */
#define WINDOW 256       /* the accounting ring: sequences below the highest told apart */
#define READ_SIZE (64 * 1024)

typedef struct {
    int kind, key;
    uint64_t n;
    int len;
    char raw[EXAMPLE_BYTES];
} failure_t;

/* one interval's figures (double-buffered, swapped by take()) */
typedef struct {
    uint64_t ok, bytes, sent;
    hist_t latency; /* echo/idle: round trip; fan-out: publish -> receipt; SSE: gaps */
    hist_t lag;     /* paced sends: how late against the schedule */
    int nfails;
    failure_t fails[MAX_FAILS];
} stats_t;

/* One (receiver, sender) stream of sequence numbers: which arrived, in a ring of the
   last WINDOW below the highest. A sequence further below cannot be told from a
   duplicate: it is counted out of order and as a first copy, and beyond_window. */
typedef struct {
    uint64_t top;   /* highest seen + 1 (0: none yet) */
    uint64_t first; /* the first seen (SSE: where the server's numbering met us) */
    uint64_t distinct, duplicated, reordered, beyond_window;
    uint64_t ring[WINDOW / 64];
} acct_t;

typedef struct {
    uint32_t pub;
    acct_t a;
} pubacct_t;

/* the WebSocket frame reader's state: a frame head across reads, a control frame's
   payload (at most 125 bytes), whether a fragmented message is open */
typedef struct {
    uint8_t hdr[14], nhdr, need;
    uint8_t op, fin, msg_op;
    uint64_t remaining;
    uint8_t ctl[125], nctl;
} ws_rx_t;

/* what the reader found; each returns 0 to go on, -1 to stop (the connection is gone) */
typedef struct {
    int (*payload)(void *ctx, const uint8_t *p, size_t n); /* a data frame's bytes */
    int (*message)(void *ctx, int op);                     /* a whole message (FIN) */
    int (*control)(void *ctx, int op, const uint8_t *p, size_t n);
} ws_sink_t;

/* the event-stream parser's state: constant size whatever the stream. Three id buffers,
   as the WHATWG parser has: the line's value (kept only without NUL), the stream's last
   event ID buffer (empty at each new stream), and the source's last event ID string
   (set at each dispatch, kept across reconnects: what Last-Event-ID sends) */
typedef struct {
    uint8_t chunk; /* CH_*: the de-chunker (CH_NONE: not chunked) */
    uint64_t chunk_left;
    uint8_t bom;        /* bytes of a leading BOM matched (3: past it) */
    uint8_t line_start; /* no byte of the current line yet */
    uint8_t after_cr;   /* the last line ended with CR: a LF now is its CRLF's */
    uint8_t in_value, skip_space, comment;
    uint8_t field;      /* F_* of the line's field */
    uint8_t name_len;
    char name[8];
    uint8_t has_data;
    uint8_t val_len, val_nul, buf_len, last_len;
    char val[MAX_ID], buf[MAX_ID], last[MAX_ID];
    uint8_t retry_ok, retry_digits;
    uint64_t retry_ms, retry_value;
    uint64_t data_bytes; /* the event's data value bytes */
} sse_t;
enum { CH_SIZE, CH_EXT, CH_SIZE_LF, CH_DATA, CH_DATA_CR, CH_DATA_LF, CH_TRAILER, CH_NONE };
enum { F_OTHER, F_DATA, F_ID, F_EVENT, F_RETRY };
typedef int (*sse_event_fn)(void *ctx, const sse_t *s); /* 0 go on, -1 stop */

/* ------------------------------------------------------------------ connections, engine */

typedef struct engine Engine;
typedef struct conn conn_t;

typedef struct {
    const char *name;
    void (*on_open)(Engine *, conn_t *, uint64_t now);  /* TCP/TLS up: send the request */
    int (*on_data)(Engine *, conn_t *, const uint8_t *, size_t, uint64_t now); /* -1: gone */
    void (*on_eof)(Engine *, conn_t *, uint64_t now);
    void (*on_due)(Engine *, conn_t *, uint64_t now); /* its timer: a message or a ping */
} proto_t;

struct conn {
    const proto_t *proto;
    int fd, state, role;
    uint32_t id; /* its number: a publisher's id in the header */
    size_t heap_pos;
    uint64_t wake; /* the wake heap's key: reconnect, next message, next ping */
    uint64_t started, deadline, due, opened_at, first_opened_at;
    uint64_t backoff_ns;
    uint8_t tried, removed, wblocked, connecting, close_sent, close_got;
    uint8_t nmhead, sse_first_pending;
    void *ssl; /* SSL * over TLS */
    /* the write queue: only what a send could not take (most connections: none) */
    uint8_t *wbuf;
    size_t wlen, wpos, wcap;
    /* an answer's head being read (upgrade or SSE), freed once complete */
    char *head;
    size_t nhead;
    char accept[29]; /* the Sec-WebSocket-Accept expected */
    ws_rx_t rx;
    char mhead[HEAD_BYTES]; /* the message being read: its first bytes */
    uint64_t msg_len;
    uint32_t needle_at; /* expect=: bytes of the needle matched so far (KMP) */
    uint8_t needle_found;
    uint64_t seq;        /* the next message's sequence */
    uint64_t inflight;   /* echo: sent, not answered (this connection's life) */
    uint64_t ping_at;    /* idle: our ping's send time (0: none out) */
    uint64_t *order;     /* correlate by order: send times of what is in flight */
    uint8_t order_head, order_len;
    acct_t *acct;        /* echo: its messages; SSE: numeric ids */
    pubacct_t *pubs;     /* subscriber: one per publisher heard */
    uint32_t npubs, cappubs;
    sse_t *sse;
    uint64_t events, first_event_at, last_event_at, stream_events;
};

typedef struct {
    int op, role;
    long long arg;
    double fraction;
} command_t;
enum { OP_ADD = 1, OP_REMOVE, OP_GO, OP_CLOSE_ALL, OP_QUIT };

/* what the run did as a whole (warm-up and the end included): read after the thread
   stops (finish), the counters marked atomic also while it runs (state) */
typedef struct {
    long long added, tried, open, open_peak; /* atomic */
    long long echo_sent, echo_distinct, pub_sent, sub_distinct, subs; /* atomic: owed */
    long long last_receipt_ns;                                         /* atomic */
    uint64_t opens, open_failures, reconnects, server_closes, closes_clean, close_timeouts;
    uint64_t abnormal, pings, pongs, streams_ended, sent, received;
    hist_t upgrade, ttfe;
    int nfails; /* every failure of the run by kind and key, the opening's too */
    failure_t fails[MAX_FAILS];
} ledger_t;

struct engine {
    PyObject_HEAD
    int kind;
    struct sockaddr_storage addr;
    socklen_t addrlen;
    struct sockaddr_in *sources; /* local IPv4 addresses to bind, round robin */
    size_t nsources, next_source;
    uint64_t timeout_ns, interval_ns, ping_ns, retry_ns, close_ns;
    long long reconnect_every; /* SSE: leave and come back with Last-Event-ID every N */
    int binary, order, max_connecting;
    char *request_tail;        /* the opening request after its path: Host, headers */
    char *path[5];             /* by role */
    uint8_t *message;          /* the message template, unmasked (its header rewritten) */
    size_t message_len;
    uint8_t *subscribe;        /* a subscriber's first message (NULL: none) */
    size_t subscribe_len;
    uint8_t *needle;           /* expect= (NULL: none) */
    uint32_t *kmp;
    size_t needle_len;
    pthread_t thread;
    int started, finished;
    long long adds;
    int epfd, evfd;
    pthread_mutex_t lock;
    command_t *commands;
    size_t ncommands, capcommands;
    stats_t *cur, *spare;
    volatile int stop_sending, publishing, closing_all;
    uint64_t stop_at, close_deadline;
    conn_t **conns;
    size_t nconns, capconns;
    conn_t **heap;
    size_t nheap, capheap;
    conn_t **gate; /* connects waiting for a place (at most max_connecting at once) */
    size_t ngate, gate_head, capgate;
    long long connecting;
    uint8_t *rbuf, *sbuf;
    size_t sbuf_cap;
    uint64_t rng, last_scan;
    void *tls_ctx; /* SSL_CTX *, else plain TCP */
    char *server_name;
    int server_is_ip;
    char tls_message[EXAMPLE_BYTES];
    ledger_t ledger;
};

#define ATOMIC_ADD(x, n) __atomic_add_fetch(&(x), (n), __ATOMIC_RELAXED)
#define ATOMIC_GET(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define ATOMIC_SET(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)

/* ------------------------------------------------------------------ shared functions */

/* _streamloop.c: the transport and the figures */
HIDDEN void record_fail(Engine *e, int kind, int key, const char *raw, size_t len);
HIDDEN void record_ok(Engine *e, uint64_t latency_us, uint64_t bytes);
HIDDEN void record_lag(Engine *e, uint64_t lag_us);
HIDDEN void fail(Engine *e, conn_t *c, uint64_t now, int kind, int key, const char *raw, size_t len);
HIDDEN void retire(Engine *e, conn_t *c, uint64_t now, uint64_t pause_ns);
HIDDEN int conn_write(Engine *e, conn_t *c, const uint8_t *p, size_t n, uint64_t now);
HIDDEN void conn_opened(Engine *e, conn_t *c, uint64_t now);
HIDDEN void conn_wake(Engine *e, conn_t *c, uint64_t at);
HIDDEN int write_request(Engine *e, conn_t *c, const char *extra, uint64_t now);
HIDDEN long head_collect(conn_t *c, const uint8_t *d, size_t n, size_t *used);
HIDDEN int head_header(const char *h, size_t n, const char *name, const char **v, size_t *vlen);
HIDDEN int has_token_ci(const char *s, size_t n, const char *word);
HIDDEN int status_of(const char *h, size_t n);
HIDDEN size_t line_len(const char *h, size_t n);
HIDDEN uint64_t engine_random(Engine *e);
HIDDEN void acct_seen(acct_t *a, uint64_t seq);
HIDDEN void note_receipt(Engine *e, uint64_t now);

/* _stream_ws.c */
extern HIDDEN const proto_t PROTO_WS;
HIDDEN int ws_parse(ws_rx_t *rx, const uint8_t *d, size_t n, const ws_sink_t *sink, void *ctx);
HIDDEN size_t ws_frame_head(uint8_t head[14], int op, int fin, size_t n, const uint8_t key[4]);
HIDDEN void ws_mask(uint8_t *p, size_t n, const uint8_t key[4], size_t offset);
HIDDEN void ws_accept_of(const char *key, char out[29]);
HIDDEN void ws_start_sending(Engine *e, conn_t *c, uint64_t now);
HIDDEN void ws_close(Engine *e, conn_t *c, int code, uint64_t now);

/* _stream_sse.c */
extern HIDDEN const proto_t PROTO_SSE;
HIDDEN void sse_reset(sse_t *s, int chunked);
HIDDEN int sse_feed(sse_t *s, const uint8_t *d, size_t n, sse_event_fn on_event, void *ctx,
                    int *ended);

#endif /* WEBPERF_STREAMLOOP_H */
