/*
 * _h2.c: HTTP/2 for the native request loop (h2 by ALPN over TLS, h2c with prior
 * knowledge) and unary gRPC on it, through libnghttp2, which does no I/O and is driven
 * here by the loop's own epoll edges. Included by _hotloop.c when built with WEBPERF_H2
 * (setup.py: libnghttp2's headers found), after the HTTP/1.1 functions: one translation
 * unit, so recording, scheduling, TLS and the wake heap are the loop's own, unchanged.
 *
 * A connection (a Locust user) carries up to S streams at once (use_http2's `streams`,
 * capped by the server's SETTINGS_MAX_CONCURRENT_STREAMS). Each stream slot is what a
 * conn_t is to HTTP/1.1: a request with its entry, its intended start (paced, arriving),
 * its deadline, its checks. A slot is free, pending (started, waiting for a connection
 * or for the server's stream limit, or refused unprocessed by a GOAWAY and re-sent on
 * the next connection keeping its start) or on the session.
 *
 *   read edge -> recv() -> nghttp2_session_mem_recv() -> callbacks: headers, DATA, a
 *   stream closed (its outcome recorded there) -> free slots start their next requests
 *   (the closed loop, a ticket, a paced slot that is due) -> nghttp2_session_mem_send()
 *   into the connection's buffer -> one send() for everything serialized
 *
 * so a read that completes k streams costs one write for the k next requests with
 * their WINDOW_UPDATEs and SETTINGS ACKs (the batching HTTP/1.1 cannot have).
 *
 * Modes, as HTTP/1.1's: closed (every slot loops), paced (slot k of a user added at
 * `fraction` is first due at (fraction + k/S) mod 1 periods; latency from each intended
 * start; the connection's wake is its earliest free slot's due), arrival rate (a due
 * request goes to the first-joined connection with a free stream below the cap:
 * `users_busy` counts busy streams, `users_opened` connections), counted (a ticket per
 * stream).
 *
 * Failures beyond HTTP/1.1's: RST_STREAM from the server (K_RST, keyed by its error
 * code), a GOAWAY with an error (K_GOAWAY: the streams still open fail at once, the
 * connection reopens after the back-off), a non-OK grpc-status (K_GRPC, grpc-message the
 * example). A GOAWAY with NO_ERROR is a rotation (nginx after keepalive_requests), not a
 * failure: streams above its last stream id are re-sent on a new connection (RFC 9113
 * 6.8: not processed). A server that does not speak HTTP/2 is refused in one line
 * (`refused`, in take()), never counted as failed requests: ALPN h2 refused or not
 * chosen, or the preface answered with an HTTP/1.x status line or anything that is not
 * a SETTINGS frame; sending stops.
 *
 * Figures: time to the response headers per stream (TTFB), beside the whole response;
 * the time a request body waited for the server's flow-control window; per connection
 * (the first entry's `h2` in take()): HPACK savings both ways (header block bytes on
 * the wire against the decoded name+value bytes, as h2load counts them), reads and
 * writes, the server's SETTINGS, the server's send window as we model it (nghttp2's own
 * figures reset when a WINDOW_UPDATE is queued, not sent: they flatter us) and the DATA
 * frames that left it below a frame's worth, GOAWAY rotations and re-sent streams.
 *
 * libnghttp2 1.52 (Debian bookworm) has the ssize_t API; 1.60 added the nghttp2_ssize
 * variants and deprecated these: the wrappers below pick by NGHTTP2_VERSION_NUM.
 */
#include <nghttp2/nghttp2.h>

#if NGHTTP2_VERSION_NUM >= 0x013c00
typedef nghttp2_ssize h2_ssize;
typedef nghttp2_data_provider2 h2_provider;
#define h2_mem_send nghttp2_session_mem_send2
#define h2_mem_recv nghttp2_session_mem_recv2
#define h2_submit_request nghttp2_submit_request2
#else
typedef ssize_t h2_ssize;
typedef nghttp2_data_provider h2_provider;
#define h2_mem_send nghttp2_session_mem_send
#define h2_mem_recv nghttp2_session_mem_recv
#define h2_submit_request nghttp2_submit_request
#endif

#define H2_MAX_STREAMS 1000
#define H2_WRITE_HIGH (64 * 1024) /* stop serializing while this much is unsent */
#define H2_FRAME_ROOM 16384       /* a window below one default frame: the server may wait */
#define E_H2 20                   /* K_PROTOCOL's key: the example is the words (hotloop.py) */
#define C_H2 10                   /* K_CLOSED's key: likewise */

enum { H_NONE = 0, H_CONNECTING, H_OPEN }; /* a connection's phase */

/* one entry's request: its header list built once (the strings live as long as the
   engine, so nghttp2 copies nothing), its body, whether the outcome is grpc-status */
typedef struct {
    nghttp2_nv *nva;
    size_t nvlen, nv_bytes; /* decoded size of the header fields (HPACK savings) */
    char *strings;
    uint8_t *body; /* NULL: END_STREAM on the HEADERS */
    size_t body_len;
    int grpc;
} h2_request_t;

struct h2_engine {
    int streams; /* S: per connection */
    uint32_t stream_window, conn_window;
    h2_request_t req[MAX_ENTRIES];
    nghttp2_session_callbacks *callbacks;
    nghttp2_option *option;
    uint64_t now;            /* the clock as of the read or write in progress (callbacks) */
    struct h2_figures fig;   /* the loop thread's, merged under the lock with the next record */
    /* the server's SETTINGS as last seen (a connection's, not an interval's: every take()
       says them, whenever the connections were opened) */
    volatile uint32_t server_streams, server_window, server_frame;
    char refused[512];       /* why the server does not speak HTTP/2 (written under the lock) */
};

typedef struct {
    int32_t id; /* > 0: on the session; -1: pending; 0: free */
    int ticket, entry, recorded, retried;
    uint64_t due; /* paced: this slot's next intended start */
    uint64_t intended, started, deadline, headers_at;
    int status, grpc_status, rst_code;
    size_t sent;                      /* request body bytes handed to nghttp2 */
    uint64_t stalled_since, stall_ns; /* the body waits for the server's window */
    int64_t window;                   /* the server's send window for it, as we model it */
    uint64_t body_bytes;
    body_t body; /* the body as the checks see it, as conn_t's */
    int message_len;
    char message[EXAMPLE_BYTES]; /* grpc-message, percent-decoded */
    int prefix_seen;             /* gRPC framing: bytes of the 5-byte prefix seen, */
    uint8_t prefix[5];           /* the message's bytes still to come, messages seen */
    uint64_t msg_left;
    int messages;
} h2_stream_t;

struct h2_conn {
    Engine *e;
    conn_t *c;
    nghttp2_session *session;
    int phase, seen_settings, got_bytes, closing;
    int goaway; /* no new stream: close when drained (theirs, or our ids ran out) */
    int32_t goaway_last;
    uint32_t goaway_code; /* not NO_ERROR: the connection failed */
    int goaway_len;
    char goaway_text[EXAMPLE_BYTES];
    int64_t window; /* the server's connection send window, as we model it */
    uint8_t *wbuf;
    size_t wlen, wpos, wcap;
    int blocked; /* the last write met a full socket buffer: EPOLLOUT resumes */
    int freed;   /* a stream closed while frames were serialized (our RST_STREAM) */
    int cap;     /* streams at once: min(S, the server's limit) */
    int busy;    /* slots started (pending or on the session) */
    int live;    /* slots on the session */
    uint64_t deadline; /* connecting: by then */
    h2_stream_t slots[];
};

/* ------------------------------------------------------------------ recording */

static void h2_figures_merge(struct h2_figures *to, struct h2_figures *from) {
    to->opened += from->opened;
    to->rotations += from->rotations;
    to->retried += from->retried;
    to->hd_recv_wire += from->hd_recv_wire;
    to->hd_recv_decoded += from->hd_recv_decoded;
    to->hd_sent_wire += from->hd_sent_wire;
    to->hd_sent_decoded += from->hd_sent_decoded;
    to->reads += from->reads;
    to->writes += from->writes;
    to->bytes_in += from->bytes_in;
    to->bytes_out += from->bytes_out;
    to->stalled += from->stalled;
    to->stall_us += from->stall_us;
    to->near_closed += from->near_closed;
    to->capped += from->capped;
    if (from->min_window < to->min_window) to->min_window = from->min_window;
    if (from->server_streams > to->server_streams) to->server_streams = from->server_streams;
    if (from->server_window > to->server_window) to->server_window = from->server_window;
    if (from->server_frame > to->server_frame) to->server_frame = from->server_frame;
    memset(from, 0, sizeof *from);
    from->min_window = INT64_MAX;
}

/* one failure of a stream's entry (the lock held) */
static void h2_count(stats_t *s, int kind, int key) {
    switch (kind) {
    case K_TIMEOUT: s->timeouts++; break;
    case K_CONNECT_TIMEOUT: s->connect_timeouts++; break;
    case K_CLOSED: s->closed++; break;
    case K_PROTOCOL: s->protocol++; break;
    case K_TLS: s->tls++; break;
    case K_UNEXPECTED_STATUS: s->unexpected_status++; break;
    case K_UNEXPECTED_BODY: s->unexpected_body++; break;
    case K_HTTP: s->http[key < MAX_STATUS ? key : MAX_STATUS - 1]++; break;
    case K_RST: s->rst[key]++; break;
    case K_GOAWAY: s->goaway[key]++; break;
    case K_GRPC: s->grpc[key]++; break;
    case K_CONNECT_ERRNO: s->connect_errno[key < ERRNO_SLOTS ? key : ERRNO_SLOTS - 1]++; break;
    default: s->io_errno[key < ERRNO_SLOTS ? key : ERRNO_SLOTS - 1]++; break;
    }
}

/* what a stream's outcome records besides itself: the time its body waited for window,
   and the connection figures gathered since the last record (the lock held) */
static void h2_record_extras(Engine *e, stats_t *s, h2_stream_t *st) {
    if (st->stall_ns) {
        hist_record(&s->stall, st->stall_ns / 1000);
        e->h2->fig.stalled++;
        e->h2->fig.stall_us += st->stall_ns / 1000;
        st->stall_ns = 0;
    }
    h2_figures_merge(&e->cur[0].fig, &e->h2->fig);
}

static void h2_record_failure(Engine *e, h2_stream_t *st, int kind, int key, int64_t a,
                              const char *raw, size_t len) {
    pthread_mutex_lock(&e->lock);
    stats_t *s = &e->cur[st->entry];
    h2_count(s, kind, key);
    if (kind != K_TIMEOUT && kind != K_CONNECT_TIMEOUT && kind != K_CONNECT_ERRNO &&
        kind != K_IO_ERRNO)
        stats_example(s, kind, key, a, 0, raw, len);
    h2_record_extras(e, s, st);
    pthread_mutex_unlock(&e->lock);
}

static int h2_slot(uint32_t code) { return code < H2_CODES - 1 ? (int)code : H2_CODES - 1; }

/* a stream the server closed cleanly: its outcome, as record_done's for HTTP/1.1 (gRPC:
   HTTP 200, a grpc-status of 0 and exactly one whole response message) */
static void h2_record_done(Engine *e, h2_stream_t *st, uint64_t done) {
    entry_t *x = &e->entries[st->entry];
    h2_request_t *r = &e->h2->req[st->entry];
    char line[EXAMPLE_BYTES];
    int line_len = snprintf(line, sizeof line, "HTTP/2 %d", st->status);
    int status = st->status > 0 && st->status < MAX_STATUS ? st->status : MAX_STATUS - 1;
    int kind = 0, key = 0;
    int64_t a = 0;
    const char *raw = line;
    size_t len = (size_t)line_len;
    char why[EXAMPLE_BYTES];
    if (x->statuses ? !x->statuses[status] : (status >= 400 || (r->grpc && status != 200))) {
        kind = x->statuses ? K_UNEXPECTED_STATUS : K_HTTP;
        key = x->statuses ? 0 : status;
    } else if (r->grpc && (st->grpc_status < 0 || st->prefix_seen || st->msg_left ||
                           (st->grpc_status == 0 && st->messages != 1))) {
        kind = K_PROTOCOL;
        key = E_H2;
        if (st->grpc_status < 0)
            snprintf(why, sizeof why, "gRPC: the response has no grpc-status");
        else if (st->prefix_seen || st->msg_left)
            snprintf(why, sizeof why, "gRPC: the response ends inside a message");
        else
            snprintf(why, sizeof why,
                     "gRPC: %d response messages to a unary call (server streaming is not "
                     "measured)", st->messages);
        raw = why;
        len = strlen(why);
    } else if (r->grpc && st->grpc_status != 0) {
        kind = K_GRPC;
        key = st->grpc_status < GRPC_CODES ? st->grpc_status : 2; /* UNKNOWN */
        raw = st->message;
        len = (size_t)st->message_len;
    } else if (x->needle && !st->body.found) {
        kind = K_UNEXPECTED_BODY;
        a = line_len; /* the status line's length in the example, then the body's start */
        memcpy(why, line, (size_t)line_len);
        size_t m = (size_t)st->body.head_len;
        if ((size_t)line_len + m > sizeof why) m = sizeof why - (size_t)line_len;
        memcpy(why + line_len, st->body.head, m);
        raw = why;
        len = (size_t)line_len + m;
    }
    pthread_mutex_lock(&e->lock);
    stats_t *s = &e->cur[st->entry];
    uint64_t from = st->started;
    if (SCHEDULED(e) && st->intended < from) from = st->intended;
    hist_record(&s->latency, (done - from) / 1000);
    if (st->headers_at) hist_record(&s->headers, (st->headers_at - st->started) / 1000);
    s->bytes += st->body_bytes;
    if (kind) {
        h2_count(s, kind, key);
        stats_example(s, kind, key, a, 0, raw, len);
    } else {
        s->ok++;
    }
    if (SCHEDULED(e)) {
        hist_record(&s->service, (done - st->started) / 1000);
        hist_record(&s->lag, st->started > st->intended ? (st->started - st->intended) / 1000 : 0);
    }
    h2_record_extras(e, s, st);
    pthread_mutex_unlock(&e->lock);
}

/* ------------------------------------------------------------------ stream slots */

static void h2_connect(Engine *e, conn_t *c, uint64_t now);
static void h2_send(Engine *e, conn_t *c, uint64_t now);
static void h2_start(Engine *e, conn_t *c, uint64_t now);
/* the Python side's helpers (_hotloop.c, below the loop) */
static PyObject *hist_tuple(hist_t *h);
static int put_counts(PyObject *dict, const char *key, const uint32_t *counts, int n);
static int put_object(PyObject *dict, const char *key, PyObject *value);

static void h2_park(Engine *e, conn_t *c) {
    if (c->state == S_PARKED || c->state == S_GONE) return;
    heap_remove(e, c);
    if (c->state == S_ARRIVAL_IDLE) not_idle(e, c);
    park(e, c);
}

/* a free slot starts a request (pending until a session takes it); 0: no ticket left */
static int slot_start(Engine *e, struct h2_conn *h, h2_stream_t *st, uint64_t now,
                      uint64_t intended) {
    if (e->mode == MODE_COUNTED) {
        pthread_mutex_lock(&e->lock);
        long long t = e->tickets;
        if (t > 0) { e->tickets--; e->outstanding++; }
        pthread_mutex_unlock(&e->lock);
        if (t <= 0) return 0;
        st->ticket = 1;
    }
    st->entry = pick_entry(e);
    st->intended = intended;
    st->started = now;
    st->deadline = now + e->timeout_ns;
    st->id = -1;
    st->recorded = st->retried = 0;
    st->stall_ns = st->stalled_since = 0;
    h->busy++;
    return 1;
}

/* a slot's request is over (recorded, or dropped): its ticket, the arrival rate's busy
   count and the paced schedule move on; the slot is free */
static void slot_end(Engine *e, struct h2_conn *h, h2_stream_t *st) {
    if (st->ticket) {
        st->ticket = 0;
        pthread_mutex_lock(&e->lock);
        e->outstanding--;
        pthread_mutex_unlock(&e->lock);
    }
    if (e->mode == MODE_ARRIVAL) arrival_done(e);
    if (e->mode == MODE_PACED) st->due += e->period_ns;
    if (st->id > 0) h->live--;
    st->id = 0;
    h->busy--;
}

/* arrival rate: a connection with a free stream below the cap takes due requests */
static void h2_offer(Engine *e, conn_t *c) {
    struct h2_conn *h = c->h2;
    if (e->mode == MODE_ARRIVAL && !e->stop_sending && c->state != S_GONE &&
        c->state != S_ARRIVAL_IDLE && !c->heap_pos && h->busy < h->cap)
        make_idle(e, c);
}

/* free slots start their next requests: every one (closed), while tickets last
   (counted), those that are due (paced: the connection wakes for the next one);
   arrivals are handed one at a time by dispatch() */
static void h2_refill(Engine *e, conn_t *c, uint64_t now) {
    struct h2_conn *h = c->h2;
    if (e->stop_sending || c->state == S_GONE || c->state == S_PARKED) return;
    int S = e->h2->streams;
    if (e->mode == MODE_CLOSED || e->mode == MODE_COUNTED) {
        for (int i = 0; i < S && h->busy < h->cap; i++)
            if (!h->slots[i].id && !slot_start(e, h, &h->slots[i], now, now)) break;
    } else if (e->mode == MODE_PACED) {
        uint64_t next = UINT64_MAX;
        for (int i = 0; i < S; i++) {
            h2_stream_t *st = &h->slots[i];
            if (st->id) continue;
            if (st->due <= now) slot_start(e, h, st, now, st->due);
            else if (st->due < next) next = st->due;
        }
        if (next != UINT64_MAX) heap_set(e, c, next);
        else heap_remove(e, c);
    }
}

/* ------------------------------------------------------------------ connection life */

/* the socket and the session go; what is on the session must have been ended (recorded
   or dropped) by the caller, pending slots stay for the next connection */
static void h2_close(Engine *e, conn_t *c) {
    struct h2_conn *h = c->h2;
    h->closing = 1; /* nghttp2_session_del's stream closes are not outcomes */
    if (h->session) nghttp2_session_del(h->session);
    h->session = NULL;
    h->closing = 0;
    tls_free(c);
    if (c->fd >= 0) {
        epoll_ctl(e->epfd, EPOLL_CTL_DEL, c->fd, NULL);
        close(c->fd);
        c->fd = -1;
    }
    c->connecting = 0;
    h->phase = H_NONE;
    h->wlen = h->wpos = 0;
    h->blocked = h->seen_settings = h->got_bytes = h->goaway = 0;
    h->goaway_code = 0;
    h->live = 0;
}

/* the streams of a connection that failed: those on the session (and the pending ones
   too, when it never connected) fail with `kind` (0: dropped, not recorded) */
static void h2_end_streams(Engine *e, conn_t *c, int kind, int key, const char *raw, size_t len,
                           int pending_too) {
    struct h2_conn *h = c->h2;
    for (int i = 0; i < e->h2->streams; i++) {
        h2_stream_t *st = &h->slots[i];
        if (!st->id || (st->id < 0 && !pending_too)) continue;
        if (kind && !st->recorded) h2_record_failure(e, st, kind, key, 0, raw, len);
        slot_end(e, h, st);
    }
}

/* what a connection does once closed: reconnect for what waits, or wait for its next
   request (after the back-off when it failed to connect or was told to go away) */
static void h2_after_close(Engine *e, conn_t *c, uint64_t now, int backoff) {
    struct h2_conn *h = c->h2;
    if (c->state == S_GONE || c->state == S_PARKED) return;
    if (e->stop_sending) { /* what never left is not sent now */
        h2_end_streams(e, c, 0, 0, NULL, 0, 1);
        h2_park(e, c);
        return;
    }
    if (e->mode == MODE_ARRIVAL) {
        if (backoff) {
            if (c->state == S_ARRIVAL_IDLE) not_idle(e, c);
            heap_set(e, c, now + BACKOFF_NS); /* then idle again (loop_main) */
            return;
        }
        h2_offer(e, c);
        if (h->busy) h2_connect(e, c, now);
        return;
    }
    if (!backoff && h->busy) { h2_connect(e, c, now); return; }
    uint64_t wake = backoff ? now + BACKOFF_NS : now;
    if (e->mode == MODE_PACED)
        for (int i = 0; i < e->h2->streams; i++)
            if (!h->slots[i].id && h->slots[i].due > wake) wake = h->slots[i].due;
    heap_set(e, c, wake);
}

static void h2_failed(Engine *e, conn_t *c, uint64_t now, int kind, int key, const char *raw,
                      size_t len) {
    int connecting = c->h2->phase == H_CONNECTING;
    h2_end_streams(e, c, kind, key, raw, len, connecting);
    h2_close(e, c);
    h2_after_close(e, c, now, connecting || kind == K_GOAWAY);
}

/* the server does not speak HTTP/2: said once, sending stops, nothing is counted */
static void h2_refuse(Engine *e, conn_t *c, const char *fmt, const char *detail) {
    pthread_mutex_lock(&e->lock);
    if (!e->h2->refused[0]) snprintf(e->h2->refused, sizeof e->h2->refused, fmt, detail);
    pthread_mutex_unlock(&e->lock);
    e->stop_sending = 1;
    h2_end_streams(e, c, 0, 0, NULL, 0, 1);
    h2_close(e, c);
    h2_park(e, c);
}

static void h2_fail_errno(Engine *e, conn_t *c, uint64_t now, int err) {
    if (err == E_TLS_FAILED) {
        if (strstr(e->tls_message, "no application protocol")) {
            h2_refuse(e, c, "the server does not speak HTTP/2 over TLS: it refused ALPN h2 (%s)",
                      "a no_application_protocol alert");
            return;
        }
        h2_failed(e, c, now, K_TLS, 0, e->tls_message, strlen(e->tls_message));
        return;
    }
    h2_failed(e, c, now, c->connecting ? K_CONNECT_ERRNO : K_IO_ERRNO, err, NULL, 0);
}

static void h2_connect(Engine *e, conn_t *c, uint64_t now) {
    struct h2_conn *h = c->h2;
    if (h->phase != H_NONE) return;
    h->phase = H_CONNECTING;
    h->deadline = now + e->timeout_ns;
    c->connecting = 1;
    e->h2->fig.opened++;
    int fd = socket(e->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) { h2_fail_errno(e, c, now, errno); return; }
    c->fd = fd;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLET | EPOLLRDHUP, .data.ptr = c};
    if (epoll_ctl(e->epfd, EPOLL_CTL_ADD, fd, &ev) < 0 ||
        (connect(fd, (struct sockaddr *)&e->addr, e->addrlen) < 0 && errno != EINPROGRESS)) {
        h2_fail_errno(e, c, now, errno);
        return;
    }
}

/* ------------------------------------------------------------------ requests */

/* a request body, as nghttp2 asks for it (only while the server's window allows) */
static h2_ssize h2_body_source(nghttp2_session *session, int32_t stream_id, uint8_t *buf,
                               size_t length, uint32_t *flags, nghttp2_data_source *source,
                               void *user) {
    (void)session;
    (void)stream_id;
    struct h2_conn *h = user;
    h2_stream_t *st = source->ptr;
    h2_request_t *r = &h->e->h2->req[st->entry];
    size_t left = r->body_len - st->sent, n = left < length ? left : length;
    memcpy(buf, r->body + st->sent, n);
    st->sent += n;
    if (st->sent == r->body_len) *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (h2_ssize)n;
}

static int h2_submit(Engine *e, struct h2_conn *h, h2_stream_t *st, uint64_t now) {
    h2_request_t *r = &e->h2->req[st->entry];
    st->sent = 0;
    st->headers_at = 0;
    st->status = 0;
    st->grpc_status = -1;
    st->rst_code = -1;
    st->body_bytes = 0;
    body_reset(&st->body);
    st->message_len = 0;
    st->prefix_seen = 0;
    st->msg_left = 0;
    st->messages = 0;
    st->stalled_since = 0;
    st->window = (int64_t)e->h2->stream_window; /* our SETTINGS precede every request */
    h2_provider prd = {.source.ptr = st, .read_callback = h2_body_source};
    int32_t id = h2_submit_request(h->session, NULL, r->nva, r->nvlen, r->body ? &prd : NULL, st);
    if (id == NGHTTP2_ERR_STREAM_ID_NOT_AVAILABLE) h->goaway = 1; /* 2^31 ids: drain, reopen */
    if (id < 0) return -1;
    st->id = id;
    h->live++;
    if (st->retried) { /* refused unprocessed by a GOAWAY: a whole timeout on this one */
        e->h2->fig.retried++;
        st->retried = 0;
        st->deadline = now + e->timeout_ns;
    }
    return 0;
}

/* pending slots onto the session, in slot order, up to the cap */
static void h2_submit_pending(Engine *e, conn_t *c, uint64_t now) {
    struct h2_conn *h = c->h2;
    for (int i = 0; i < e->h2->streams && h->live < h->cap; i++) {
        h2_stream_t *st = &h->slots[i];
        if (st->id != -1) continue;
        if (h->goaway || !nghttp2_session_check_request_allowed(h->session)) return;
        if (h2_submit(e, h, st, now) < 0) return;
    }
}

/* request bodies that wait for the server's window: from the flush that left one unsent
   with a closed window until the flush after the window opened */
static void h2_note_stalls(Engine *e, conn_t *c, uint64_t now) {
    struct h2_conn *h = c->h2;
    int32_t conn_window = nghttp2_session_get_remote_window_size(h->session);
    for (int i = 0; i < e->h2->streams; i++) {
        h2_stream_t *st = &h->slots[i];
        if (st->id <= 0 || !e->h2->req[st->entry].body) continue;
        int waiting = st->sent < e->h2->req[st->entry].body_len;
        int shut = conn_window <= 0 ||
                   nghttp2_session_get_stream_remote_window_size(h->session, st->id) <= 0;
        if (waiting && shut && !st->stalled_since) {
            st->stalled_since = now;
        } else if (st->stalled_since && (!waiting || !shut)) {
            st->stall_ns += now - st->stalled_since;
            st->stalled_since = 0;
        }
    }
}

/* serialize what nghttp2 has for the wire and write it: one send() for the lot.
   0, or -1 when the connection closed (failed, or drained after a GOAWAY) */
static int h2_flush(Engine *e, conn_t *c, uint64_t now) {
    struct h2_conn *h = c->h2;
    e->h2->now = now;
    for (;;) {
        while (h->wlen - h->wpos < H2_WRITE_HIGH) {
            const uint8_t *data;
            h2_ssize n = h2_mem_send(h->session, &data);
            if (n < 0) {
                const char *why = nghttp2_strerror((int)n);
                h2_failed(e, c, now, K_PROTOCOL, E_H2, why, strlen(why));
                return -1;
            }
            if (n == 0) break;
            if (h->wlen + (size_t)n > h->wcap) {
                if (h->wpos) { /* compact first */
                    memmove(h->wbuf, h->wbuf + h->wpos, h->wlen - h->wpos);
                    h->wlen -= h->wpos;
                    h->wpos = 0;
                }
                if (h->wlen + (size_t)n > h->wcap &&
                    grow((void **)&h->wbuf, &h->wcap, h->wlen + (size_t)n, 1) < 0) {
                    h2_failed(e, c, now, K_PROTOCOL, E_H2, "out of memory", 13);
                    return -1;
                }
            }
            memcpy(h->wbuf + h->wlen, data, (size_t)n);
            h->wlen += (size_t)n;
        }
        if (h->wpos == h->wlen) break;
        ssize_t n = conn_send(e, c, (const char *)h->wbuf + h->wpos, h->wlen - h->wpos);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) { h->blocked = 1; break; }
            if (errno == EINTR) continue;
            h2_fail_errno(e, c, now, errno);
            return -1;
        }
        e->h2->fig.writes++;
        e->h2->fig.bytes_out += (uint64_t)n;
        h->wpos += (size_t)n;
        if (h->wpos == h->wlen) h->wpos = h->wlen = 0;
    }
    h2_note_stalls(e, c, now);
    if (h->wpos == h->wlen && ((h->goaway && !h->live) || (!nghttp2_session_want_read(h->session) &&
                                                           !nghttp2_session_want_write(h->session)))) {
        h2_close(e, c); /* drained after a GOAWAY: what waits goes on a new connection */
        h2_after_close(e, c, now, 0);
        return -1;
    }
    return 0;
}

/* what a connection has to send: a connection first, else its pending streams and
   everything nghttp2 has queued; a stream that closes while serialized (our
   RST_STREAM after a timeout) frees its slot only then, so once more */
static void h2_send(Engine *e, conn_t *c, uint64_t now) {
    struct h2_conn *h = c->h2;
    if (h->phase == H_NONE) {
        if (h->busy) h2_connect(e, c, now);
        return;
    }
    for (int round = 0; round < 2 && h->phase == H_OPEN; round++) {
        h->freed = 0;
        h2_submit_pending(e, c, now);
        if (h2_flush(e, c, now) < 0 || !h->freed) return;
        h2_refill(e, c, now);
    }
}

/* TCP (and TLS) are up: the HTTP/2 session, our SETTINGS and the first requests */
static void h2_session_begin(Engine *e, conn_t *c, uint64_t now);

/* the first bytes from a server we spoke HTTP/2 to: a SETTINGS frame, or a refusal */
static int h2_check_preface(Engine *e, conn_t *c, const uint8_t *d, size_t n) {
    if (n >= 5 && memcmp(d, "HTTP/", 5) == 0) {
        char line[120];
        size_t k = 0;
        while (k < n && k < sizeof line - 1 && d[k] != '\r' && d[k] != '\n') {
            line[k] = (char)d[k];
            k++;
        }
        line[k] = 0;
        h2_refuse(e, c,
                  "the server does not speak HTTP/2 with prior knowledge (h2c): it answered the "
                  "preface with \"%s\"",
                  line);
        return -1;
    }
    if (n >= 4 && d[3] != NGHTTP2_SETTINGS) {
        char hex[40];
        size_t k = 0;
        for (size_t i = 0; i < n && i < 16; i++)
            k += (size_t)snprintf(hex + k, sizeof hex - k, "%02x", d[i]);
        h2_refuse(e, c,
                  "the server does not speak HTTP/2: its first bytes are not a SETTINGS frame "
                  "(%s)",
                  hex);
        return -1;
    }
    return 0;
}

static void h2_read(Engine *e, conn_t *c, uint64_t now, int hup) {
    struct h2_conn *h = c->h2;
    while (h->phase == H_OPEN) {
        ssize_t n = conn_recv(e, c, e->rbuf, READ_SIZE);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) break;
            if (errno == EINTR) continue;
            h2_fail_errno(e, c, now, errno);
            return;
        }
        if (n == 0) { /* the server closed: a clean end with nothing on the session */
            if (!h->live) {
                h2_close(e, c);
                h2_after_close(e, c, now, 0);
            } else {
                char why[80];
                int k = snprintf(why, sizeof why, "the server closed the connection with %d "
                                 "stream%s open", h->live, h->live == 1 ? "" : "s");
                h2_failed(e, c, now, K_CLOSED, C_H2, why, (size_t)k);
            }
            return;
        }
        e->h2->fig.reads++;
        e->h2->fig.bytes_in += (uint64_t)n;
        if (!h->got_bytes && !h->seen_settings &&
            h2_check_preface(e, c, (const uint8_t *)e->rbuf, (size_t)n) < 0)
            return;
        h->got_bytes = 1;
        e->h2->now = now;
        h2_ssize r = h2_mem_recv(h->session, (const uint8_t *)e->rbuf, (size_t)n);
        if (r < 0) {
            const char *why = nghttp2_strerror((int)r);
            h2_failed(e, c, now, K_PROTOCOL, E_H2, why, strlen(why));
            return;
        }
        if (h->goaway && h->goaway_code) { /* failed by the server: reconnect after a pause */
            h2_failed(e, c, now, K_GOAWAY, h2_slot(h->goaway_code), h->goaway_text,
                      (size_t)h->goaway_len);
            return;
        }
        /* drained (plain TCP: a short read; TLS: a record at a time until WANT_READ) */
        if ((size_t)n < READ_SIZE && !hup && !conn_tls(c)) break;
    }
    if (h->phase != H_OPEN) return;
    now = now_ns(); /* the next requests start, and the window updates leave, now */
    h2_refill(e, c, now);
    if (!h->busy && e->mode == MODE_COUNTED) { /* no ticket left: as h2_start, parked */
        h2_park(e, c); /* open_tickets() wakes it on its open connection (a phase after */
        return;        /* another, as a counted measurement's warm-up, probe and window) */
    }
    h2_send(e, c, now);
}

static void h2_session_begin(Engine *e, conn_t *c, uint64_t now) {
    struct h2_conn *h = c->h2;
#ifdef WEBPERF_TLS
    if (conn_tls(c)) {
        const unsigned char *proto = NULL;
        unsigned int len = 0;
        SSL_get0_alpn_selected(c->tls->ssl, &proto, &len);
        if (len != 2 || memcmp(proto, "h2", 2) != 0) {
            char got[64];
            snprintf(got, sizeof got, "%.*s", (int)(len < 40 ? len : 40),
                     len ? (const char *)proto : "");
            h2_refuse(e, c,
                      len ? "the server does not speak HTTP/2 over TLS: ALPN chose \"%s\", not h2"
                          : "the server does not speak HTTP/2 over TLS: no protocol negotiated "
                            "by ALPN (h2 offered)%s",
                      got);
            return;
        }
    }
#endif
    c->connecting = 0;
    if (nghttp2_session_client_new2(&h->session, e->h2->callbacks, h, e->h2->option) != 0) {
        h2_failed(e, c, now, K_PROTOCOL, E_H2, "nghttp2: out of memory", 22);
        return;
    }
    h->phase = H_OPEN;
    /* no push; windows so large that the server never waits for us unless asked (h2load's
       defaults are 2^30-1 both ways) */
    nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
                                   {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, e->h2->stream_window}};
    nghttp2_submit_settings(h->session, NGHTTP2_FLAG_NONE, iv, 2);
    if (e->h2->conn_window > NGHTTP2_INITIAL_CONNECTION_WINDOW_SIZE)
        nghttp2_session_set_local_window_size(h->session, NGHTTP2_FLAG_NONE, 0,
                                              (int32_t)e->h2->conn_window);
    h->cap = e->h2->streams; /* until the server's SETTINGS say otherwise */
    h->window = NGHTTP2_INITIAL_CONNECTION_WINDOW_SIZE; /* raised by our WINDOW_UPDATE */
    h2_send(e, c, now);
    if (h->phase == H_OPEN && conn_tls(c)) h2_read(e, c, now, 0); /* records read already */
}

/* ------------------------------------------------------------------ nghttp2 callbacks */

static h2_stream_t *h2_stream_of(nghttp2_session *session, int32_t id) {
    return nghttp2_session_get_stream_user_data(session, id);
}

static int h2_on_begin_headers(nghttp2_session *session, const nghttp2_frame *frame, void *user) {
    struct h2_conn *h = user;
    if (frame->hd.type != NGHTTP2_HEADERS) return 0;
    h2_stream_t *st = h2_stream_of(session, frame->hd.stream_id);
    if (st && !st->headers_at) st->headers_at = h->e->h2->now;
    return 0;
}

static int h2_hexdigit(uint8_t ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

static int h2_on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
                        size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                        void *user) {
    (void)flags;
    struct h2_conn *h = user;
    h->e->h2->fig.hd_recv_decoded += namelen + valuelen;
    h2_stream_t *st = h2_stream_of(session, frame->hd.stream_id);
    if (!st) return 0;
    if (namelen == 7 && memcmp(name, ":status", 7) == 0) {
        int v = 0;
        for (size_t i = 0; i < valuelen && i < 3; i++) v = v * 10 + (value[i] - '0');
        if (v >= 200 || !st->status) st->status = v; /* 1xx: the final one follows */
    } else if (namelen == 11 && memcmp(name, "grpc-status", 11) == 0) {
        int v = valuelen ? 0 : 2;
        for (size_t i = 0; i < valuelen && i < 4; i++)
            v = value[i] >= '0' && value[i] <= '9' ? v * 10 + (value[i] - '0') : 2;
        st->grpc_status = v;
    } else if (namelen == 12 && memcmp(name, "grpc-message", 12) == 0) {
        int k = 0; /* percent-decoded (gRPC's encoding of UTF-8 text) */
        for (size_t i = 0; i < valuelen && k < EXAMPLE_BYTES; i++) {
            int hi, lo;
            if (value[i] == '%' && i + 2 < valuelen && (hi = h2_hexdigit(value[i + 1])) >= 0 &&
                (lo = h2_hexdigit(value[i + 2])) >= 0) {
                st->message[k++] = (char)(hi * 16 + lo);
                i += 2;
            } else {
                st->message[k++] = (char)value[i];
            }
        }
        st->message_len = k;
    }
    return 0;
}

/* gRPC messages in DATA: a compressed flag, 4 bytes of big-endian length, the message
   (grpcwire.py frames them the same way) */
static void h2_grpc_chunk(h2_stream_t *st, const uint8_t *p, size_t n) {
    while (n) {
        if (st->msg_left) {
            size_t take = n < st->msg_left ? n : (size_t)st->msg_left;
            st->msg_left -= take;
            p += take;
            n -= take;
            continue;
        }
        st->prefix[st->prefix_seen++] = *p++;
        n--;
        if (st->prefix_seen == 5) {
            st->msg_left = (uint64_t)st->prefix[1] << 24 | (uint64_t)st->prefix[2] << 16 |
                           (uint64_t)st->prefix[3] << 8 | st->prefix[4];
            st->prefix_seen = 0;
            st->messages++;
        }
    }
}

static int h2_on_data_chunk(nghttp2_session *session, uint8_t flags, int32_t id,
                            const uint8_t *data, size_t len, void *user) {
    (void)flags;
    struct h2_conn *h = user;
    h2_stream_t *st = h2_stream_of(session, id);
    if (!st) return 0;
    st->body_bytes += len;
    body_scan(&h->e->entries[st->entry], &st->body, (const char *)data, len);
    if (h->e->h2->req[st->entry].grpc) h2_grpc_chunk(st, data, len);
    return 0;
}

static int h2_on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *user) {
    struct h2_conn *h = user;
    Engine *e = h->e;
    struct h2_figures *fig = &e->h2->fig;
    switch (frame->hd.type) {
    case NGHTTP2_HEADERS: /* the header block on the wire, less padding and priority */
        fig->hd_recv_wire += frame->hd.length - frame->headers.padlen -
                             ((frame->hd.flags & NGHTTP2_FLAG_PRIORITY) ? 5 : 0);
        break;
    case NGHTTP2_DATA: {
        /* the server's send windows after this frame; below a frame's worth it may wait
           for our WINDOW_UPDATE (its wait is not visible from here, its cause is) */
        h2_stream_t *st = h2_stream_of(session, frame->hd.stream_id);
        h->window -= (int64_t)frame->hd.length;
        if (h->window < fig->min_window) fig->min_window = h->window;
        if (!st) break;
        st->window -= (int64_t)frame->hd.length;
        if (st->window < fig->min_window) fig->min_window = st->window;
        if (!(frame->hd.flags & NGHTTP2_FLAG_END_STREAM) &&
            (st->window < H2_FRAME_ROOM || h->window < H2_FRAME_ROOM))
            fig->near_closed++;
        break;
    }
    case NGHTTP2_SETTINGS: {
        if (frame->hd.flags & NGHTTP2_FLAG_ACK) break;
        h->seen_settings = 1;
        uint32_t max = nghttp2_session_get_remote_settings(
            session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
        int cap = (uint32_t)e->h2->streams < max ? e->h2->streams : (int)max;
        if (cap < 1) cap = 1;
        if (cap < e->h2->streams && h->cap == e->h2->streams) fig->capped++;
        h->cap = cap;
        e->h2->server_streams = max;
        e->h2->server_window =
            nghttp2_session_get_remote_settings(session, NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE);
        e->h2->server_frame =
            nghttp2_session_get_remote_settings(session, NGHTTP2_SETTINGS_MAX_FRAME_SIZE);
        break;
    }
    case NGHTTP2_RST_STREAM: {
        h2_stream_t *st = h2_stream_of(session, frame->hd.stream_id);
        if (st) st->rst_code = (int)frame->rst_stream.error_code;
        break;
    }
    case NGHTTP2_GOAWAY: {
        /* NO_ERROR: the server retires the connection, not a failure; streams above
           last_stream_id come back refused (h2_on_stream_close) and are re-sent. An
           error: the streams still open fail with it once this read is processed */
        uint32_t code = frame->goaway.error_code;
        if (h->goaway && !code) break; /* a second GOAWAY only lowers last_stream_id */
        if (!code) fig->rotations++;
        h->goaway = 1;
        h->goaway_last = frame->goaway.last_stream_id;
        h->goaway_code = code;
        if (code) {
            size_t n = frame->goaway.opaque_data_len < 80 ? frame->goaway.opaque_data_len : 80;
            int k = snprintf(h->goaway_text, sizeof h->goaway_text, "GOAWAY %s (last stream %d)%s%.*s",
                             nghttp2_http2_strerror(code), frame->goaway.last_stream_id,
                             n ? ": " : "", (int)n, n ? (const char *)frame->goaway.opaque_data : "");
            h->goaway_len = k < (int)sizeof h->goaway_text ? k : (int)sizeof h->goaway_text - 1;
        }
        break;
    }
    }
    return 0;
}

static int h2_on_frame_send(nghttp2_session *session, const nghttp2_frame *frame, void *user) {
    struct h2_conn *h = user;
    Engine *e = h->e;
    if (frame->hd.type == NGHTTP2_WINDOW_UPDATE) { /* the server's window reopens */
        int64_t inc = frame->window_update.window_size_increment;
        if (frame->hd.stream_id == 0) {
            h->window += inc;
        } else {
            h2_stream_t *st = h2_stream_of(session, frame->hd.stream_id);
            if (st) st->window += inc;
        }
    } else if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
        h2_stream_t *st = h2_stream_of(session, frame->hd.stream_id);
        e->h2->fig.hd_sent_wire += frame->hd.length - frame->headers.padlen -
                                   ((frame->hd.flags & NGHTTP2_FLAG_PRIORITY) ? 5 : 0);
        e->h2->fig.hd_sent_decoded += st ? e->h2->req[st->entry].nv_bytes : 0;
    }
    return 0;
}

static int h2_on_stream_close(nghttp2_session *session, int32_t id, uint32_t code, void *user) {
    struct h2_conn *h = user;
    Engine *e = h->e;
    h2_stream_t *st = h2_stream_of(session, id);
    if (h->closing || !st || st->id != id) return 0;
    uint64_t now = e->h2->now;
    if (st->stalled_since) {
        st->stall_ns += now - st->stalled_since;
        st->stalled_since = 0;
    }
    if (code == NGHTTP2_REFUSED_STREAM && st->rst_code < 0 && h->goaway && id > h->goaway_last &&
        !e->stop_sending) { /* never processed (RFC 9113 6.8): the next connection sends it */
        st->id = -1;
        st->retried = 1;
        h->live--;
        return 0;
    }
    if (!st->recorded) {
        if (st->rst_code >= 0 || code != NGHTTP2_NO_ERROR) {
            uint32_t why = st->rst_code >= 0 ? (uint32_t)st->rst_code : code;
            char raw[EXAMPLE_BYTES];
            const char *ours = st->rst_code >= 0 ? "" : " (ours)";
            int n = st->status ? snprintf(raw, sizeof raw,
                                          "RST_STREAM %s%s after HTTP/2 %d and %llu body bytes",
                                          nghttp2_http2_strerror(why), ours, st->status,
                                          (unsigned long long)st->body_bytes)
                               : snprintf(raw, sizeof raw, "RST_STREAM %s%s before the response headers",
                                          nghttp2_http2_strerror(why), ours);
            h2_record_failure(e, st, K_RST, h2_slot(why), 0, raw,
                              n < (int)sizeof raw ? (size_t)n : sizeof raw - 1);
        } else {
            h2_record_done(e, st, now);
        }
    }
    slot_end(e, h, st);
    h->freed = 1;
    h2_offer(e, h->c);
    return 0;
}

/* ------------------------------------------------------------------ the seam */

static void h2_add(Engine *e, conn_t *c, uint64_t now, double fraction) {
    int S = e->h2->streams;
    struct h2_conn *h = calloc(1, sizeof *h + (size_t)S * sizeof(h2_stream_t));
    if (!h) { c->state = S_GONE; return; }
    h->e = e;
    h->c = c;
    h->cap = S;
    c->h2 = h;
    if (e->stop_sending) { h2_park(e, c); return; }
    if (e->mode == MODE_ARRIVAL) {
        make_idle(e, c); /* its connection opens with its first request */
    } else if (e->mode == MODE_PACED) { /* slot k first due at (fraction + k/S) periods */
        for (int k = 0; k < S; k++) {
            double f = fraction + (double)k / S;
            h->slots[k].due = now + (uint64_t)((f - (double)(long long)f) * (double)e->period_ns);
        }
        h2_start(e, c, now);
    } else {
        h2_start(e, c, now);
    }
}

/* a request is due: arrivals one stream (at c->due), the other modes whatever is free */
static void h2_start(Engine *e, conn_t *c, uint64_t now) {
    struct h2_conn *h = c->h2;
    if (c->state == S_PARKED) c->state = S_IDLE;
    if (e->mode == MODE_ARRIVAL) {
        for (int i = 0; i < e->h2->streams; i++) {
            if (h->slots[i].id) continue;
            slot_start(e, h, &h->slots[i], now, c->due);
            break;
        }
        h2_offer(e, c);
    } else {
        h2_refill(e, c, now);
    }
    if (!h->busy && (e->stop_sending || e->mode == MODE_COUNTED)) {
        h2_park(e, c); /* open_tickets() wakes it (its connection, if any, stays open) */
        return;
    }
    h2_send(e, c, now);
}

static void h2_event(Engine *e, conn_t *c, uint32_t events, uint64_t now) {
    struct h2_conn *h = c->h2;
    if (h->phase == H_CONNECTING) {
        if (!conn_tls(c)) { /* TCP: the first EPOLLOUT says it is connected (or why not) */
            if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) return;
            int err = 0;
            socklen_t len = sizeof err;
            getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
            if (err == EINPROGRESS || err == EALREADY) return;
            if (err) { h2_fail_errno(e, c, now, err); return; }
            int one = 1;
            setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
#ifdef WEBPERF_TLS
            if (e->tls_ctx && tls_begin(e, c) < 0) { h2_fail_errno(e, c, now, errno); return; }
#endif
        }
#ifdef WEBPERF_TLS
        if (conn_tls(c)) { /* the handshake, a step per edge */
            int r = tls_handshake(e, c);
            if (r < 0) { h2_fail_errno(e, c, now, errno); return; }
            if (r == 0) return;
        }
#endif
        h2_session_begin(e, c, now);
        return;
    }
    if (h->phase != H_OPEN) return;
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
        h2_read(e, c, now, (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0);
    if (h->phase == H_OPEN && (events & EPOLLOUT) && h->blocked) {
        h->blocked = 0;
        h2_send(e, c, now);
    }
}

/* a connection that does not come up in time fails its streams; a stream unanswered in
   time is a timeout, reset with CANCEL (its close is then quiet) */
static void h2_deadlines(Engine *e, conn_t *c, uint64_t now) {
    struct h2_conn *h = c->h2;
    if (h->phase == H_CONNECTING) {
        if (now >= h->deadline) h2_failed(e, c, now, K_CONNECT_TIMEOUT, 0, NULL, 0);
        return;
    }
    if (h->phase == H_NONE) { /* streams a GOAWAY refused, waiting for a connection */
        for (int i = 0; i < e->h2->streams; i++) {
            h2_stream_t *st = &h->slots[i];
            if (st->id != -1 || now < st->deadline) continue;
            h2_record_failure(e, st, K_TIMEOUT, 0, 0, NULL, 0);
            slot_end(e, h, st);
        }
        h2_offer(e, c);
        return;
    }
    int cancelled = 0;
    for (int i = 0; i < e->h2->streams; i++) {
        h2_stream_t *st = &h->slots[i];
        if (!st->id || st->recorded || now < st->deadline) continue;
        h2_record_failure(e, st, K_TIMEOUT, 0, 0, NULL, 0);
        if (st->id < 0) { /* it waited for a stream of its own all along */
            slot_end(e, h, st);
            continue;
        }
        st->recorded = 1;
        nghttp2_submit_rst_stream(h->session, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_CANCEL);
        cancelled = 1;
    }
    if (cancelled) h2_send(e, c, now);
}

static void h2_remove(Engine *e, conn_t *c) {
    heap_remove(e, c);
    if (c->state == S_ARRIVAL_IDLE) not_idle(e, c);
    h2_end_streams(e, c, 0, 0, NULL, 0, 1); /* dropped, as HTTP/1.1's request in flight */
    h2_close(e, c);
}

static void h2_release(conn_t *c) {
    if (!c->h2) return;
    if (c->h2->session) nghttp2_session_del(c->h2->session);
    free(c->h2->wbuf);
    free(c->h2);
    c->h2 = NULL;
}

static const proto_t proto_h2 = {h2_add, h2_start, h2_event, h2_deadlines, h2_remove, h2_release};

/* ------------------------------------------------------------------ the Python side */

static void h2_engine_free(struct h2_engine *g) {
    if (!g) return;
    for (int i = 0; i < MAX_ENTRIES; i++) {
        free(g->req[i].nva);
        free(g->req[i].strings);
        free(g->req[i].body);
    }
    if (g->callbacks) nghttp2_session_callbacks_del(g->callbacks);
    if (g->option) nghttp2_option_del(g->option);
    free(g);
}

/* one entry's request from ([(name, value), ...], body or None, grpc): the strings in
   one block, the nv list pointing into it; -1 with an exception set */
static int h2_request_from(h2_request_t *r, PyObject *item) {
    PyObject *headers, *body;
    int grpc;
    if (!PyArg_ParseTuple(item, "OOp", &headers, &body, &grpc)) return -1;
    PyObject *seq = PySequence_Fast(headers, "an entry's headers are a list of (name, value)");
    if (!seq) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    size_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2 ||
            !PyBytes_Check(PyTuple_GET_ITEM(pair, 0)) || !PyBytes_Check(PyTuple_GET_ITEM(pair, 1))) {
            Py_DECREF(seq);
            PyErr_SetString(PyExc_TypeError, "a header is a (bytes, bytes) pair");
            return -1;
        }
        total += (size_t)PyBytes_GET_SIZE(PyTuple_GET_ITEM(pair, 0)) +
                 (size_t)PyBytes_GET_SIZE(PyTuple_GET_ITEM(pair, 1)) + 2;
    }
    r->nva = calloc(n ? (size_t)n : 1, sizeof(nghttp2_nv));
    r->strings = malloc(total ? total : 1);
    if (!r->nva || !r->strings) { Py_DECREF(seq); PyErr_NoMemory(); return -1; }
    char *p = r->strings;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = PySequence_Fast_GET_ITEM(seq, i);
        PyObject *name = PyTuple_GET_ITEM(pair, 0), *value = PyTuple_GET_ITEM(pair, 1);
        size_t nl = (size_t)PyBytes_GET_SIZE(name), vl = (size_t)PyBytes_GET_SIZE(value);
        memcpy(p, PyBytes_AS_STRING(name), nl);
        p[nl] = 0;
        memcpy(p + nl + 1, PyBytes_AS_STRING(value), vl);
        p[nl + 1 + vl] = 0;
        r->nva[i] = (nghttp2_nv){(uint8_t *)p, (uint8_t *)p + nl + 1, nl, vl,
                                 NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE};
        r->nv_bytes += nl + vl;
        p += nl + vl + 2;
    }
    r->nvlen = (size_t)n;
    Py_DECREF(seq);
    if (body != Py_None) {
        char *bytes;
        Py_ssize_t len;
        if (PyBytes_AsStringAndSize(body, &bytes, &len) < 0) return -1;
        r->body = malloc(len ? (size_t)len : 1);
        if (!r->body) { PyErr_NoMemory(); return -1; }
        memcpy(r->body, bytes, (size_t)len);
        r->body_len = (size_t)len;
    }
    r->grpc = grpc;
    return 0;
}

/* use_http2(streams, requests, stream_window_bits=30, conn_window_bits=30): every
   connection speaks HTTP/2 with `streams` requests in flight; `requests` one per entry
   of the mix (set_mix first: weights and checks), before use_tls and the first add */
static PyObject *Engine_use_http2(Engine *e, PyObject *args) {
    int streams, wbits = 30, cwbits = 30;
    PyObject *requests;
    if (!PyArg_ParseTuple(args, "iO|ii", &streams, &requests, &wbits, &cwbits)) return NULL;
    if (e->started || e->h2 || e->tls_ctx || e->close_each) {
        PyErr_SetString(PyExc_RuntimeError,
                        "use_http2() comes once, before use_tls() and the first add(), never "
                        "with close_each()");
        return NULL;
    }
    if (streams < 1 || streams > H2_MAX_STREAMS || wbits < 16 || wbits > 31 || cwbits < 16 ||
        cwbits > 31) {
        PyErr_Format(PyExc_ValueError,
                     "streams are 1 to %d, window bits 16 to 31", H2_MAX_STREAMS);
        return NULL;
    }
    PyObject *seq = PySequence_Fast(requests, "use_http2 takes a list of requests");
    if (!seq) return NULL;
    if (PySequence_Fast_GET_SIZE(seq) != e->nentries) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "one request per entry of the mix (%d)", e->nentries);
        return NULL;
    }
    struct h2_engine *g = calloc(1, sizeof *g);
    if (!g) { Py_DECREF(seq); return PyErr_NoMemory(); }
    for (int i = 0; i < e->nentries; i++) {
        if (h2_request_from(&g->req[i], PySequence_Fast_GET_ITEM(seq, i)) < 0) {
            Py_DECREF(seq);
            h2_engine_free(g);
            return NULL;
        }
    }
    Py_DECREF(seq);
    g->streams = streams;
    g->stream_window = (uint32_t)((1ULL << wbits) - 1);
    g->conn_window = (uint32_t)((1ULL << cwbits) - 1);
    g->fig.min_window = INT64_MAX;
    if (nghttp2_session_callbacks_new(&g->callbacks) != 0 || nghttp2_option_new(&g->option) != 0) {
        h2_engine_free(g);
        return PyErr_NoMemory();
    }
    nghttp2_session_callbacks *cb = g->callbacks;
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, h2_on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cb, h2_on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, h2_on_data_chunk);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, h2_on_frame_recv);
    nghttp2_session_callbacks_set_on_frame_send_callback(cb, h2_on_frame_send);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, h2_on_stream_close);
    /* before the server's SETTINGS: as many streams as asked (servers allow >= 100) */
    nghttp2_option_set_peer_max_concurrent_streams(g->option, (uint32_t)streams);
    e->h2 = g;
    Py_RETURN_NONE;
}

/* take()'s HTTP/2 parts of one entry; the connections' figures and the refusal (copied
   under the lock by take(); "" if none) in the first (`first`) */
static int h2_put_stats(Engine *e, PyObject *d, stats_t *s, int first, const char *refused) {
    if (put_counts(d, "rst", s->rst, H2_CODES) < 0 ||
        put_counts(d, "goaway", s->goaway, H2_CODES) < 0 ||
        put_counts(d, "grpc", s->grpc, GRPC_CODES) < 0 ||
        put_object(d, "headers", hist_tuple(&s->headers)) < 0 ||
        put_object(d, "stall", hist_tuple(&s->stall)) < 0)
        return -1;
    if (!first) return 0;
    struct h2_figures *f = &s->fig;
    f->server_streams = e->h2->server_streams;
    f->server_window = e->h2->server_window;
    f->server_frame = e->h2->server_frame;
    PyObject *fig = Py_BuildValue(
        "{s:i,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:L,s:K,s:I,s:I,s:I}",
        "streams", e->h2->streams, "opened", (unsigned long long)f->opened, "rotations",
        (unsigned long long)f->rotations, "retried", (unsigned long long)f->retried,
        "hd_recv_wire", (unsigned long long)f->hd_recv_wire, "hd_recv_decoded",
        (unsigned long long)f->hd_recv_decoded, "hd_sent_wire", (unsigned long long)f->hd_sent_wire,
        "hd_sent_decoded", (unsigned long long)f->hd_sent_decoded, "reads",
        (unsigned long long)f->reads, "writes", (unsigned long long)f->writes, "bytes_in",
        (unsigned long long)f->bytes_in, "bytes_out", (unsigned long long)f->bytes_out, "stalled",
        (unsigned long long)f->stalled, "stall_us", (unsigned long long)f->stall_us,
        "near_closed", (unsigned long long)f->near_closed, "min_window",
        (long long)(f->min_window == INT64_MAX ? -1 : f->min_window), "capped",
        (unsigned long long)f->capped, "server_streams", f->server_streams, "server_window",
        f->server_window, "server_frame", f->server_frame);
    if (put_object(d, "h2", fig) < 0) return -1;
    if (refused[0] &&
        put_object(d, "refused", PyUnicode_DecodeLatin1(refused, (Py_ssize_t)strlen(refused),
                                                        NULL)) < 0)
        return -1;
    return 0;
}
