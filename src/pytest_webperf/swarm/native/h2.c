/*
 * h2.c: HTTP/2 on the engine (h2 by ALPN over TLS, h2c with prior knowledge) and unary
 * gRPC on it, through libnghttp2, which does no I/O and is driven here by the engine's
 * edges. Built with WEBPERF_H2 (setup.py: libnghttp2's headers found); the request mix,
 * its checks and the load shapes are HTTP/1.1's (http1.c, engine.c).
 *
 * A connection (a Locust user) carries up to S streams at once (`streams`, capped by the
 * server's SETTINGS_MAX_CONCURRENT_STREAMS). Each stream slot is what a connection is to
 * HTTP/1.1: a request with its entry, its intended start (paced, arriving), its deadline,
 * its checks. A slot is free, pending (started, waiting for a connection or for the
 * server's stream limit, or refused unprocessed by a GOAWAY and re-sent on the next
 * connection keeping its start) or on the session.
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
#include "engine.h"

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
#define E_H2 20                   /* K_PROTOCOL's key: the example is the words (engine.py) */
#define C_H2 10                   /* K_CLOSED's key: likewise */
#define GRPC_UNKNOWN 2
#define GRPC_CODES 17             /* gRPC status codes 0..16: the rest is UNKNOWN */
#define H2_CODES 16               /* HTTP/2 error codes 0x0..0xe, 0xf: the rest */

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

/* the engine's part: HTTP/1.1's first (the mix), then HTTP/2's */
typedef struct {
    http_t http; /* the mix */
    int streams;             /* S: per connection */
    uint32_t stream_window, conn_window;
    h2_request_t req[MAX_ENTRIES];
    nghttp2_session_callbacks *callbacks;
    nghttp2_option *option;
    uint64_t now;          /* the clock as of the read or write in progress (callbacks) */
    struct h2_figures fig; /* the loop thread's, merged under the lock with the next record */
    /* the server's SETTINGS as last seen (a connection's, not an interval's: every take()
       says them, whenever the connections were opened) */
    volatile uint32_t server_streams, server_window, server_frame;
    char refused[512]; /* why the server does not speak HTTP/2 (written under the lock) */
} h2_engine_t;
#define G(e) ((h2_engine_t *)(e)->cfg)

typedef struct {
    request_t r;
    int32_t id; /* > 0: on the session; -1: pending; 0: free */
    int recorded, retried;
    uint64_t headers_at;
    int status, grpc_status, rst_code;
    size_t sent;                      /* request body bytes handed to nghttp2 */
    uint64_t stalled_since, stall_ns; /* the body waits for the server's window */
    int64_t window;                   /* the server's send window for it, as we model it */
    uint64_t body_bytes;
    body_t body; /* the body as the checks see it, as HTTP/1.1's */
    int message_len;
    char message[EXAMPLE_BYTES]; /* grpc-message, percent-decoded */
    int prefix_seen;             /* gRPC framing: bytes of the 5-byte prefix seen, */
    uint8_t prefix[5];           /* the message's bytes still to come, messages seen */
    uint64_t msg_left;
    int messages;
} h2_stream_t;

/* a connection's part */
typedef struct {
    Engine *e;
    conn_t *c;
    nghttp2_session *session; /* NULL: no connection up yet (or none) */
    int seen_settings, got_bytes, closing;
    int goaway; /* no new stream: close when drained (theirs, or our ids ran out) */
    int32_t goaway_last;
    uint32_t goaway_code; /* not NO_ERROR: the connection failed */
    int goaway_len;
    char goaway_text[EXAMPLE_BYTES];
    int64_t window; /* the server's connection send window, as we model it */
    uint8_t *wbuf;  /* what nghttp2 serialized, for one send() */
    size_t wlen, wcap;
    int freed; /* a stream closed while frames were serialized (our RST_STREAM) */
    int cap;   /* streams at once: min(S, the server's limit) */
    int busy;  /* slots started (pending or on the session) */
    int live;  /* slots on the session */
    h2_stream_t *slots;
} h2_conn_t;

/* ------------------------------------------------------------------ recording */

static void figures_merge(struct h2_figures *to, struct h2_figures *from) {
    uint64_t *t = &to->opened, *f = &from->opened; /* the counters up to min_window */
    for (size_t i = 0; i < offsetof(struct h2_figures, min_window) / sizeof(uint64_t); i++)
        t[i] += f[i];
    to->capped += from->capped;
    if (from->min_window < to->min_window) to->min_window = from->min_window;
    if (from->server_streams > to->server_streams) to->server_streams = from->server_streams;
    if (from->server_window > to->server_window) to->server_window = from->server_window;
    if (from->server_frame > to->server_frame) to->server_frame = from->server_frame;
    memset(from, 0, sizeof *from);
    from->min_window = INT64_MAX;
}

/* what a stream's outcome records besides itself: the time its body waited for window;
   with `merge`, the connection figures gathered since (else once per read: h2_drained) */
static void record_extras(Engine *e, h2_stream_t *st, int merge) {
    if (!st->stall_ns && !merge) return;
    pthread_mutex_lock(&e->lock);
    if (st->stall_ns) {
        hist_record(&e->cur[st->r.entry].h[H_STALL], st->stall_ns / 1000);
        G(e)->fig.stalled++;
        G(e)->fig.stall_us += st->stall_ns / 1000;
        st->stall_ns = 0;
    }
    if (merge) figures_merge(&e->cur[0].fig, &G(e)->fig);
    pthread_mutex_unlock(&e->lock);
}

static void record_failure(Engine *e, h2_stream_t *st, int kind, int key, const char *raw,
                           size_t len) {
    record_fail(e, st->r.entry, kind, key, 1, 0, 0, raw, len);
    record_extras(e, st, 1);
}

static int h2_slot(uint32_t code) { return code < H2_CODES - 1 ? (int)code : H2_CODES - 1; }

/* a stream the server closed cleanly: its outcome, as HTTP/1.1's (gRPC: HTTP 200, a
   grpc-status of 0 and exactly one whole response message) */
static void record_done(Engine *e, h2_stream_t *st, uint64_t done) {
    h2_request_t *r = &G(e)->req[st->r.entry];
    char line[EXAMPLE_BYTES], why[EXAMPLE_LINE + EXAMPLE_BODY];
    int line_len = snprintf(line, sizeof line, "HTTP/2 %d", st->status);
    int failing = st->status >= 400 || (r->grpc && st->status != 200);
    int key = 0, kind = http_status_check(e, st->r.entry, st->status, failing, &key);
    int64_t a = 0;
    const char *raw = line;
    size_t len = (size_t)line_len;
    if (kind) { /* the status says */
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
                     "measured)",
                     st->messages);
        raw = why;
        len = strlen(why);
    } else if (r->grpc && st->grpc_status != 0) {
        kind = K_GRPC;
        key = st->grpc_status < GRPC_CODES ? st->grpc_status : GRPC_UNKNOWN;
        raw = st->message;
        len = (size_t)st->message_len;
    } else if ((kind = http_body_check(e, st->r.entry, &st->body, line, len, &a, why, &len))) {
        raw = why;
    }
    request_done(e, &st->r, done, st->body_bytes, kind, key, a, raw, len, st->headers_at);
    record_extras(e, st, 0);
}

/* ------------------------------------------------------------------ stream slots */

static void h2_connect(Engine *e, conn_t *c, uint64_t now);
static void h2_send(Engine *e, conn_t *c, uint64_t now);
static void h2_start(Engine *e, conn_t *c, uint64_t now);

static void h2_park(Engine *e, conn_t *c) {
    if (c->sched == Q_PARKED || c->sched == Q_GONE) return;
    heap_remove(e, c);
    not_idle(e, c);
    park(e, c);
}

/* a free slot starts a request (pending until a session takes it); 0: no ticket left */
static int slot_start(Engine *e, h2_conn_t *h, h2_stream_t *st, uint64_t now, uint64_t intended) {
    if (!request_begin(e, &st->r, now, intended)) return 0;
    st->id = -1;
    st->recorded = st->retried = 0;
    st->stall_ns = st->stalled_since = 0;
    h->busy++;
    return 1;
}

/* a slot's request is over (recorded, or dropped): the slot is free */
static void slot_end(Engine *e, h2_conn_t *h, h2_stream_t *st) {
    request_end(e, &st->r);
    if (st->id > 0) h->live--;
    st->id = 0;
    h->busy--;
}

/* arrival rate: a connection with a free stream below the cap takes due requests */
static void h2_offer(Engine *e, conn_t *c) {
    h2_conn_t *h = c->s;
    if (e->mode == MODE_ARRIVAL && !e->stop_sending && c->sched == Q_BUSY && !c->heap_pos &&
        h->busy < h->cap)
        make_idle(e, c);
}

/* free slots start their next requests: every one (closed), while tickets last
   (counted), those that are due (paced: the connection wakes for the next one);
   arrivals are handed one at a time by the engine's dispatch */
static void h2_refill(Engine *e, conn_t *c, uint64_t now) {
    h2_conn_t *h = c->s;
    if (e->stop_sending || c->sched == Q_GONE || c->sched == Q_PARKED) return;
    int S = G(e)->streams;
    if (e->mode == MODE_CLOSED || e->mode == MODE_COUNTED) {
        for (int i = 0; i < S && h->busy < h->cap; i++)
            if (!h->slots[i].id && !slot_start(e, h, &h->slots[i], now, now)) break;
    } else if (e->mode == MODE_PACED) {
        uint64_t next = UINT64_MAX;
        for (int i = 0; i < S; i++) {
            h2_stream_t *st = &h->slots[i];
            if (st->id) continue;
            if (st->r.due <= now) slot_start(e, h, st, now, st->r.due);
            else if (st->r.due < next) next = st->r.due;
        }
        if (next != UINT64_MAX) conn_wake(e, c, next);
        else heap_remove(e, c);
    }
}

/* ------------------------------------------------------------------ connection life */

/* the socket and the session go; what is on the session must have been ended (recorded
   or dropped) by the caller, pending slots stay for the next connection */
static void h2_close(Engine *e, conn_t *c) {
    h2_conn_t *h = c->s;
    h->closing = 1; /* nghttp2_session_del's stream closes are not outcomes */
    if (h->session) nghttp2_session_del(h->session);
    h->session = NULL;
    h->closing = 0;
    conn_close(e, c);
    h->wlen = 0;
    h->seen_settings = h->got_bytes = h->goaway = 0;
    h->goaway_code = 0;
    h->live = 0;
}

/* the streams of a connection that failed: those on the session (and the pending ones
   too, when it never connected) fail with `kind` (0: dropped, not recorded) */
static void end_streams(Engine *e, conn_t *c, int kind, int key, const char *raw, size_t len,
                        int pending_too) {
    h2_conn_t *h = c->s;
    for (int i = 0; i < G(e)->streams; i++) {
        h2_stream_t *st = &h->slots[i];
        if (!st->id || (st->id < 0 && !pending_too)) continue;
        if (kind && !st->recorded) record_failure(e, st, kind, key, raw, len);
        slot_end(e, h, st);
    }
}

/* what a connection does once closed: reconnect for what waits, or wait for its next
   request (after the back-off when it failed to connect or was told to go away) */
static void after_close(Engine *e, conn_t *c, uint64_t now, int backoff) {
    h2_conn_t *h = c->s;
    if (c->sched == Q_GONE || c->sched == Q_PARKED) return;
    if (e->stop_sending) { /* what never left is not sent now */
        end_streams(e, c, 0, 0, NULL, 0, 1);
        h2_park(e, c);
        return;
    }
    if (e->mode == MODE_ARRIVAL) {
        if (backoff) {
            not_idle(e, c);
            conn_wake(e, c, now + BACKOFF_NS); /* then idle again (requests_due) */
            return;
        }
        h2_offer(e, c);
        if (h->busy) h2_connect(e, c, now);
        return;
    }
    if (!backoff && h->busy) { h2_connect(e, c, now); return; }
    uint64_t wake = backoff ? now + BACKOFF_NS : now;
    if (e->mode == MODE_PACED)
        for (int i = 0; i < G(e)->streams; i++)
            if (!h->slots[i].id && h->slots[i].r.due > wake) wake = h->slots[i].r.due;
    conn_wake(e, c, wake);
}

static void h2_failed(Engine *e, conn_t *c, uint64_t now, int kind, int key, const char *raw,
                      size_t len) {
    h2_conn_t *h = c->s;
    int connecting = !h->session;
    end_streams(e, c, kind, key, raw, len, connecting);
    h2_close(e, c);
    after_close(e, c, now, connecting || kind == K_GOAWAY);
}

/* the server does not speak HTTP/2: said once, sending stops, nothing is counted */
static void h2_refuse(Engine *e, conn_t *c, const char *fmt, const char *detail) {
    pthread_mutex_lock(&e->lock);
    if (!G(e)->refused[0]) snprintf(G(e)->refused, sizeof G(e)->refused, fmt, detail);
    pthread_mutex_unlock(&e->lock);
    e->stop_sending = 1;
    end_streams(e, c, 0, 0, NULL, 0, 1);
    h2_close(e, c);
    h2_park(e, c);
}

/* the transport failed (the engine's words) */
static void h2_fail(Engine *e, conn_t *c, uint64_t now, int kind, int key, const char *raw,
                    size_t len) {
    if (kind == K_TLS && raw && memmem(raw, len, "no application protocol", 23))
        h2_refuse(e, c, "the server does not speak HTTP/2 over TLS: it refused ALPN h2 (%s)",
                  "a no_application_protocol alert");
    else
        h2_failed(e, c, now, kind, key, raw, len);
}

static void h2_connect(Engine *e, conn_t *c, uint64_t now) {
    if (c->fd >= 0 || c->state == T_CONNECTING) return;
    G(e)->fig.opened++;
    conn_connect(e, c, now);
}

/* ------------------------------------------------------------------ requests */

/* a request body, as nghttp2 asks for it (only while the server's window allows) */
static h2_ssize body_source(nghttp2_session *session, int32_t stream_id, uint8_t *buf,
                            size_t length, uint32_t *flags, nghttp2_data_source *source,
                            void *user) {
    (void)session;
    (void)stream_id;
    h2_conn_t *h = user;
    h2_stream_t *st = source->ptr;
    h2_request_t *r = &G(h->e)->req[st->r.entry];
    size_t left = r->body_len - st->sent, n = left < length ? left : length;
    memcpy(buf, r->body + st->sent, n);
    st->sent += n;
    if (st->sent == r->body_len) *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (h2_ssize)n;
}

static int submit(Engine *e, h2_conn_t *h, h2_stream_t *st, uint64_t now) {
    h2_request_t *r = &G(e)->req[st->r.entry];
    st->sent = 0;
    st->headers_at = 0;
    st->status = 0;
    st->grpc_status = st->rst_code = -1;
    st->body_bytes = 0;
    body_reset(&st->body);
    st->message_len = st->prefix_seen = st->messages = 0;
    st->msg_left = 0;
    st->stalled_since = 0;
    st->window = (int64_t)G(e)->stream_window; /* our SETTINGS precede every request */
    h2_provider prd = {.source.ptr = st, .read_callback = body_source};
    int32_t id = h2_submit_request(h->session, NULL, r->nva, r->nvlen, r->body ? &prd : NULL, st);
    if (id == NGHTTP2_ERR_STREAM_ID_NOT_AVAILABLE) h->goaway = 1; /* 2^31 ids: drain, reopen */
    if (id < 0) return -1;
    st->id = id;
    h->live++;
    if (st->retried) { /* refused unprocessed by a GOAWAY: a whole timeout on this one */
        G(e)->fig.retried++;
        st->retried = 0;
        st->r.deadline = now + e->timeout_ns;
    }
    return 0;
}

/* pending slots onto the session, in slot order, up to the cap */
static void submit_pending(Engine *e, h2_conn_t *h, uint64_t now) {
    for (int i = 0; i < G(e)->streams && h->live < h->cap; i++) {
        h2_stream_t *st = &h->slots[i];
        if (st->id != -1) continue;
        if (h->goaway || !nghttp2_session_check_request_allowed(h->session)) return;
        if (submit(e, h, st, now) < 0) return;
    }
}

/* request bodies that wait for the server's window: from the flush that left one unsent
   with a closed window until the flush after the window opened */
static void note_stalls(Engine *e, h2_conn_t *h, uint64_t now) {
    int32_t conn_window = nghttp2_session_get_remote_window_size(h->session);
    for (int i = 0; i < G(e)->streams; i++) {
        h2_stream_t *st = &h->slots[i];
        if (st->id <= 0 || !G(e)->req[st->r.entry].body) continue;
        int waiting = st->sent < G(e)->req[st->r.entry].body_len;
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

/* serialize what nghttp2 has for the wire and write it: one send() for the lot (what the
   socket does not take waits in the engine's queue). 0, or -1 when the connection closed
   (failed, or drained after a GOAWAY) */
static int flush(Engine *e, conn_t *c, uint64_t now) {
    h2_conn_t *h = c->s;
    G(e)->now = now;
    while (!c->wblocked) {
        while (h->wlen < H2_WRITE_HIGH) {
            const uint8_t *data;
            h2_ssize n = h2_mem_send(h->session, &data);
            if (n < 0) {
                const char *why = nghttp2_strerror((int)n);
                h2_failed(e, c, now, K_PROTOCOL, E_H2, why, strlen(why));
                return -1;
            }
            if (n == 0) break;
            if (grow((void **)&h->wbuf, &h->wcap, h->wlen + (size_t)n, 1) < 0) {
                h2_failed(e, c, now, K_PROTOCOL, E_H2, "out of memory", 13);
                return -1;
            }
            memcpy(h->wbuf + h->wlen, data, (size_t)n);
            h->wlen += (size_t)n;
        }
        if (!h->wlen) break;
        G(e)->fig.writes++;
        G(e)->fig.bytes_out += h->wlen;
        size_t n = h->wlen;
        h->wlen = 0;
        if (conn_write(e, c, h->wbuf, n, now) < 0) return -1; /* failed: h2_fail */
    }
    note_stalls(e, h, now);
    if (!c->wblocked && ((h->goaway && !h->live) || (!nghttp2_session_want_read(h->session) &&
                                                     !nghttp2_session_want_write(h->session)))) {
        h2_close(e, c); /* drained after a GOAWAY: what waits goes on a new connection */
        after_close(e, c, now, 0);
        return -1;
    }
    return 0;
}

/* what a connection has to send: a connection first, else its pending streams and
   everything nghttp2 has queued; a stream that closes while serialized (our
   RST_STREAM after a timeout) frees its slot only then, so once more */
static void h2_send(Engine *e, conn_t *c, uint64_t now) {
    h2_conn_t *h = c->s;
    if (c->fd < 0) { if (h->busy) h2_connect(e, c, now); return; }
    for (int round = 0; round < 2 && h->session; round++) {
        h->freed = 0;
        submit_pending(e, h, now);
        if (flush(e, c, now) < 0 || !h->freed) return;
        h2_refill(e, c, now);
    }
}

/* the first bytes from a server we spoke HTTP/2 to: a SETTINGS frame, or a refusal */
static int check_preface(Engine *e, conn_t *c, const uint8_t *d, size_t n) {
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

/* bytes from the server, through the session's callbacks: 0, or -1 (closed or failed) */
static int h2_read(Engine *e, conn_t *c, uint8_t *d, size_t n, uint64_t now) {
    h2_conn_t *h = c->s;
    G(e)->fig.reads++;
    G(e)->fig.bytes_in += n;
    if (!h->got_bytes && !h->seen_settings && check_preface(e, c, d, n) < 0) return -1;
    h->got_bytes = 1;
    G(e)->now = now;
    h2_ssize r = h2_mem_recv(h->session, d, n);
    if (r < 0) {
        const char *why = nghttp2_strerror((int)r);
        h2_failed(e, c, now, K_PROTOCOL, E_H2, why, strlen(why));
        return -1;
    }
    if (h->goaway && h->goaway_code) { /* failed by the server: reconnect after a pause */
        h2_failed(e, c, now, K_GOAWAY, h2_slot(h->goaway_code), h->goaway_text,
                  (size_t)h->goaway_len);
        return -1;
    }
    return 0;
}

/* every byte read: the next requests start, and the window updates leave, now */
static void h2_drained(Engine *e, conn_t *c, uint64_t now) {
    pthread_mutex_lock(&e->lock); /* this read's connection figures */
    figures_merge(&e->cur[0].fig, &G(e)->fig);
    pthread_mutex_unlock(&e->lock);
    now = now_ns();
    h2_refill(e, c, now);
    if (e->mode == MODE_COUNTED && !((h2_conn_t *)c->s)->busy) h2_park(e, c); /* tickets spent */
    else h2_send(e, c, now);
}

static void h2_eof(Engine *e, conn_t *c, uint64_t now) {
    h2_conn_t *h = c->s;
    if (!h->live) { /* the server closed: a clean end with nothing on the session */
        h2_close(e, c);
        after_close(e, c, now, 0);
        return;
    }
    char why[80];
    int k = snprintf(why, sizeof why, "the server closed the connection with %d stream%s open",
                     h->live, h->live == 1 ? "" : "s");
    h2_failed(e, c, now, K_CLOSED, C_H2, why, (size_t)k);
}

/* TCP (and TLS) are up: the HTTP/2 session, our SETTINGS and the first requests */
static void h2_up(Engine *e, conn_t *c, uint64_t now) {
    h2_conn_t *h = c->s;
#ifdef WEBPERF_TLS
    if (c->ssl) {
        const unsigned char *proto = NULL;
        unsigned int len = 0;
        SSL_get0_alpn_selected(c->ssl, &proto, &len);
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
    if (nghttp2_session_client_new2(&h->session, G(e)->callbacks, h, G(e)->option) != 0) {
        h2_failed(e, c, now, K_PROTOCOL, E_H2, "nghttp2: out of memory", 22);
        return;
    }
    c->reading = 1;
    /* no push; windows so large that the server never waits for us unless asked (h2load's
       defaults are 2^30-1 both ways) */
    nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
                                   {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, G(e)->stream_window}};
    nghttp2_submit_settings(h->session, NGHTTP2_FLAG_NONE, iv, 2);
    if (G(e)->conn_window > NGHTTP2_INITIAL_CONNECTION_WINDOW_SIZE)
        nghttp2_session_set_local_window_size(h->session, NGHTTP2_FLAG_NONE, 0,
                                              (int32_t)G(e)->conn_window);
    h->cap = G(e)->streams; /* until the server's SETTINGS say otherwise */
    h->window = NGHTTP2_INITIAL_CONNECTION_WINDOW_SIZE; /* raised by our WINDOW_UPDATE */
    h2_send(e, c, now);
}

/* the engine's queue drained: nghttp2 may serialize more */
static void h2_writable(Engine *e, conn_t *c, uint64_t now) {
    G(e)->fig.writes++;
    if (((h2_conn_t *)c->s)->session) h2_send(e, c, now);
}

/* ------------------------------------------------------------------ nghttp2 callbacks */

static h2_stream_t *stream_of(nghttp2_session *session, int32_t id) {
    return nghttp2_session_get_stream_user_data(session, id);
}

static int on_begin_headers(nghttp2_session *session, const nghttp2_frame *frame, void *user) {
    h2_conn_t *h = user;
    if (frame->hd.type != NGHTTP2_HEADERS) return 0;
    h2_stream_t *st = stream_of(session, frame->hd.stream_id);
    if (st && !st->headers_at) st->headers_at = G(h->e)->now;
    return 0;
}

static int on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *user) {
    (void)flags;
    h2_conn_t *h = user;
    G(h->e)->fig.hd_recv_decoded += namelen + valuelen;
    h2_stream_t *st = stream_of(session, frame->hd.stream_id);
    if (!st) return 0;
    if (namelen == 7 && memcmp(name, ":status", 7) == 0) {
        int v = 0;
        for (size_t i = 0; i < valuelen && i < 3; i++) v = v * 10 + (value[i] - '0');
        if (v >= 200 || !st->status) st->status = v; /* 1xx: the final one follows */
    } else if (namelen == 11 && memcmp(name, "grpc-status", 11) == 0) {
        int v = valuelen ? 0 : GRPC_UNKNOWN;
        for (size_t i = 0; i < valuelen && i < 4; i++)
            v = value[i] >= '0' && value[i] <= '9' ? v * 10 + (value[i] - '0') : GRPC_UNKNOWN;
        st->grpc_status = v;
    } else if (namelen == 12 && memcmp(name, "grpc-message", 12) == 0) {
        int k = 0; /* percent-decoded (gRPC's encoding of UTF-8 text) */
        for (size_t i = 0; i < valuelen && k < EXAMPLE_BYTES; i++) {
            int hi, lo;
            if (value[i] == '%' && i + 2 < valuelen && (hi = hex_value(value[i + 1])) >= 0 &&
                (lo = hex_value(value[i + 2])) >= 0) {
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
static void grpc_chunk(h2_stream_t *st, const uint8_t *p, size_t n) {
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

static int on_data_chunk(nghttp2_session *session, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *user) {
    (void)flags;
    h2_conn_t *h = user;
    h2_stream_t *st = stream_of(session, id);
    if (!st) return 0;
    st->body_bytes += len;
    body_scan(h->e, st->r.entry, &st->body, (const char *)data, len);
    if (G(h->e)->req[st->r.entry].grpc) grpc_chunk(st, data, len);
    return 0;
}

static int on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *user) {
    h2_conn_t *h = user;
    h2_engine_t *g = G(h->e);
    struct h2_figures *fig = &g->fig;
    switch (frame->hd.type) {
    case NGHTTP2_HEADERS: /* the header block on the wire, less padding and priority */
        fig->hd_recv_wire += frame->hd.length - frame->headers.padlen -
                             ((frame->hd.flags & NGHTTP2_FLAG_PRIORITY) ? 5 : 0);
        break;
    case NGHTTP2_DATA: {
        /* the server's send windows after this frame; below a frame's worth it may wait
           for our WINDOW_UPDATE (its wait is not visible from here, its cause is) */
        h2_stream_t *st = stream_of(session, frame->hd.stream_id);
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
        uint32_t max =
            nghttp2_session_get_remote_settings(session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
        int cap = (uint32_t)g->streams < max ? g->streams : (int)max;
        if (cap < 1) cap = 1;
        if (cap < g->streams && h->cap == g->streams) fig->capped++;
        h->cap = cap;
        g->server_streams = max;
        g->server_window =
            nghttp2_session_get_remote_settings(session, NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE);
        g->server_frame =
            nghttp2_session_get_remote_settings(session, NGHTTP2_SETTINGS_MAX_FRAME_SIZE);
        break;
    }
    case NGHTTP2_RST_STREAM: {
        h2_stream_t *st = stream_of(session, frame->hd.stream_id);
        if (st) st->rst_code = (int)frame->rst_stream.error_code;
        break;
    }
    case NGHTTP2_GOAWAY: {
        /* NO_ERROR: the server retires the connection, not a failure; streams above
           last_stream_id come back refused (on_stream_close) and are re-sent. An error:
           the streams still open fail with it once this read is processed */
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

static int on_frame_send(nghttp2_session *session, const nghttp2_frame *frame, void *user) {
    h2_conn_t *h = user;
    h2_engine_t *g = G(h->e);
    if (frame->hd.type == NGHTTP2_WINDOW_UPDATE) { /* the server's window reopens */
        int64_t inc = frame->window_update.window_size_increment;
        if (frame->hd.stream_id == 0) {
            h->window += inc;
        } else {
            h2_stream_t *st = stream_of(session, frame->hd.stream_id);
            if (st) st->window += inc;
        }
    } else if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
        h2_stream_t *st = stream_of(session, frame->hd.stream_id);
        g->fig.hd_sent_wire += frame->hd.length - frame->headers.padlen -
                               ((frame->hd.flags & NGHTTP2_FLAG_PRIORITY) ? 5 : 0);
        g->fig.hd_sent_decoded += st ? g->req[st->r.entry].nv_bytes : 0;
    }
    return 0;
}

static int on_stream_close(nghttp2_session *session, int32_t id, uint32_t code, void *user) {
    h2_conn_t *h = user;
    Engine *e = h->e;
    h2_stream_t *st = stream_of(session, id);
    if (h->closing || !st || st->id != id) return 0;
    uint64_t now = G(e)->now;
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
    if (!st->recorded && (st->rst_code >= 0 || code != NGHTTP2_NO_ERROR)) {
        uint32_t why = st->rst_code >= 0 ? (uint32_t)st->rst_code : code;
        char raw[EXAMPLE_BYTES];
        const char *ours = st->rst_code >= 0 ? "" : " (ours)";
        int n = st->status ? snprintf(raw, sizeof raw, "RST_STREAM %s%s after HTTP/2 %d and %llu body bytes",
                                      nghttp2_http2_strerror(why), ours, st->status,
                                      (unsigned long long)st->body_bytes)
                           : snprintf(raw, sizeof raw, "RST_STREAM %s%s before the response headers",
                                      nghttp2_http2_strerror(why), ours);
        record_failure(e, st, K_RST, h2_slot(why), raw, n < (int)sizeof raw ? (size_t)n : sizeof raw - 1);
    } else if (!st->recorded) {
        record_done(e, st, now);
    }
    slot_end(e, h, st);
    h->freed = 1;
    h2_offer(e, h->c);
    return 0;
}

/* ------------------------------------------------------------------ the seam */

static void h2_add(Engine *e, conn_t *c, uint64_t now, double fraction) {
    int S = G(e)->streams;
    h2_conn_t *h = c->s;
    h->e = e;
    h->c = c;
    h->cap = S;
    if (!(h->slots = calloc((size_t)S, sizeof(h2_stream_t)))) {
        c->sched = Q_GONE;
        record_fail(e, 0, K_CONNECT_ERRNO, ENOMEM, 1, 0, 0, NULL, 0);
        return;
    }
    if (e->stop_sending) {
        h2_park(e, c);
    } else if (e->mode == MODE_ARRIVAL) {
        make_idle(e, c); /* its connection opens with its first request */
    } else {
        if (e->mode == MODE_PACED) /* slot k first due at (fraction + k/S) periods */
            for (int k = 0; k < S; k++) {
                double f = fraction + (double)k / S;
                h->slots[k].r.due = now + (uint64_t)((f - (double)(long long)f) * (double)e->period_ns);
            }
        h2_start(e, c, now);
    }
}

/* a request is due: arrivals one stream (at c->due), the other modes whatever is free */
static void h2_start(Engine *e, conn_t *c, uint64_t now) {
    h2_conn_t *h = c->s;
    if (c->sched == Q_PARKED) c->sched = Q_BUSY;
    if (e->mode == MODE_ARRIVAL) {
        for (int i = 0; i < G(e)->streams; i++) {
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

/* a stream unanswered in time is a timeout, reset with CANCEL (its close is then quiet);
   streams a GOAWAY refused, waiting for a connection, time out too */
static void h2_scan(Engine *e, conn_t *c, uint64_t now) {
    h2_conn_t *h = c->s;
    if (!h->slots || (c->fd >= 0 && !h->session)) return;
    int cancelled = 0;
    for (int i = 0; i < G(e)->streams; i++) {
        h2_stream_t *st = &h->slots[i];
        if (!st->id || st->recorded || now < st->r.deadline || (!h->session && st->id != -1))
            continue;
        record_failure(e, st, K_TIMEOUT, 0, NULL, 0);
        if (st->id < 0) { /* it waited for a stream (or a connection) of its own all along */
            slot_end(e, h, st);
            continue;
        }
        st->recorded = 1;
        nghttp2_submit_rst_stream(h->session, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_CANCEL);
        cancelled = 1;
    }
    if (!h->session) h2_offer(e, c);
    else if (cancelled) h2_send(e, c, now);
}

static void h2_end(Engine *e, conn_t *c, uint64_t now, int run_over) {
    (void)now;
    (void)run_over;
    if (!((h2_conn_t *)c->s)->slots) return;
    end_streams(e, c, 0, 0, NULL, 0, 1); /* dropped, as HTTP/1.1's request in flight */
    h2_close(e, c);
}

static void h2_release(Engine *e, conn_t *c) {
    h2_conn_t *h = c->s;
    (void)e;
    if (h->session) nghttp2_session_del(h->session);
    free(h->slots);
    free(h->wbuf);
}

static void h2_free(Engine *e) {
    h2_engine_t *g = G(e);
    if (!g) return;
    for (int i = 0; i < MAX_ENTRIES; i++) {
        free(g->req[i].nva);
        free(g->req[i].strings);
        free(g->req[i].body);
    }
    if (g->callbacks) nghttp2_session_callbacks_del(g->callbacks);
    if (g->option) nghttp2_option_del(g->option);
    http_free(e);
}

/* one entry's request from (fields, body or None, grpc), fields its header fields as
   b"name\0value\0...": the nv list points into a copy of them; -1 with an error */
static int request_from(h2_request_t *r, PyObject *item) {
    PyObject *fields, *body;
    size_t n = 0, nuls = 0;
    if (!PyArg_ParseTuple(item, "SOp", &fields, &body, &r->grpc) ||
        copy_bytes(fields, (uint8_t **)&r->strings, &n) < 0 ||
        copy_bytes(body, &r->body, &r->body_len) < 0)
        return -1;
    for (size_t i = 0; i < n; i++) nuls += !r->strings[i];
    r->nva = calloc(nuls / 2 + 1, sizeof(nghttp2_nv));
    if (nuls % 2 || (n && r->strings[n - 1]) || !r->nva) {
        PyErr_SetString(PyExc_ValueError, "an entry's fields are name\\0value\\0 pairs");
        return -1;
    }
    for (char *p = r->strings; p < r->strings + n; r->nvlen++) {
        size_t nl = strlen(p), vl = strlen(p + nl + 1);
        uint8_t flags = NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE;
        r->nva[r->nvlen] = (nghttp2_nv){(uint8_t *)p, (uint8_t *)p + nl + 1, nl, vl, flags};
        r->nv_bytes += nl + vl;
        p += nl + vl + 2;
    }
    return 0;
}

/* options: streams, requests (one (fields, body or None, grpc) per entry of the mix),
   stream_window_bits and conn_window_bits (30), http (http1.c's: the load shape and the
   mix, whose weights and checks HTTP/2 takes) */
static int h2_configure(Engine *e, PyObject *options) {
    static char *names[] = {"streams", "requests", "http", "stream_window_bits",
                            "conn_window_bits", NULL};
    int streams = 1, wbits = 30, cwbits = 30;
    PyObject *requests = NULL, *http = NULL;
    if (parse_options(options, "iOO!|ii", names, &streams, &requests, &PyDict_Type, &http, &wbits,
                      &cwbits) < 0 ||
        http_configure(e, http, sizeof(h2_engine_t)) < 0)
        return -1;
    h2_engine_t *g = G(e);
    if (g->http.close_each || streams < 1 ||
        streams > H2_MAX_STREAMS || wbits < 16 || wbits > 31 || cwbits < 16 || cwbits > 31) {
        PyErr_Format(PyExc_ValueError,
                     "streams are 1 to %d, window bits 16 to 31, never with close_each",
                     H2_MAX_STREAMS);
        return -1;
    }
    PyObject *seq = PySequence_Fast(requests, "requests: a list, one per entry of the mix");
    if (!seq) return -1;
    int bad = PySequence_Fast_GET_SIZE(seq) != e->nentries;
    if (bad) PyErr_Format(PyExc_ValueError, "one request per entry of the mix (%d)", e->nentries);
    for (int i = 0; !bad && i < e->nentries; i++)
        bad = request_from(&g->req[i], PySequence_Fast_GET_ITEM(seq, i)) < 0;
    Py_DECREF(seq);
    if (bad) return -1;
    g->streams = streams;
    g->stream_window = (uint32_t)((1ULL << wbits) - 1);
    g->conn_window = (uint32_t)((1ULL << cwbits) - 1);
    g->fig.min_window = INT64_MAX;
    if (nghttp2_session_callbacks_new(&g->callbacks) != 0 || nghttp2_option_new(&g->option) != 0) {
        PyErr_NoMemory();
        return -1;
    }
    nghttp2_session_callbacks *cb = g->callbacks;
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
    nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_send);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
    /* before the server's SETTINGS: as many streams as asked (servers allow >= 100) */
    nghttp2_option_set_peer_max_concurrent_streams(g->option, (uint32_t)streams);
    e->hists |= 1u << H_HEADERS | 1u << H_STALL;
    return 0;
}

/* take(): the connections' figures and the refusal ("" if none) in the first entry */
static int h2_take(Engine *e, PyObject *d, stats_t *s, int entry) {
    if (entry) return 0;
    h2_engine_t *g = G(e);
    struct h2_figures *f = &s->fig;
    char refused[sizeof g->refused];
    pthread_mutex_lock(&e->lock);
    memcpy(refused, g->refused, sizeof refused);
    pthread_mutex_unlock(&e->lock);
    static const char *const COUNTED[] = {
        "opened", "rotations", "retried", "hd_recv_wire", "hd_recv_decoded", "hd_sent_wire",
        "hd_sent_decoded", "reads", "writes", "bytes_in", "bytes_out", "stalled", "stall_us",
        "near_closed"}; /* struct h2_figures' counters, up to min_window */
    PyObject *fig = PyDict_New();
    for (int i = 0; fig && i < (int)(sizeof COUNTED / sizeof *COUNTED); i++)
        if (put_int(fig, COUNTED[i], (long long)(&f->opened)[i]) < 0) Py_CLEAR(fig);
    if (fig && (put_int(fig, "streams", g->streams) || put_int(fig, "capped", (long long)f->capped) ||
                put_int(fig, "min_window", f->min_window == INT64_MAX ? -1 : f->min_window) ||
                put_int(fig, "server_streams", g->server_streams) ||
                put_int(fig, "server_window", g->server_window) ||
                put_int(fig, "server_frame", g->server_frame)))
        Py_CLEAR(fig);
    memset(f, 0, sizeof *f);
    f->min_window = INT64_MAX;
    if (put_object(d, "h2", fig) < 0) return -1;
    if (!refused[0]) return 0;
    return put_object(d, "refused", PyUnicode_DecodeLatin1(refused, (Py_ssize_t)strlen(refused), 0));
}

const session_t SESSION_H2 = {
    .name = "h2", .alpn = "\x02h2", .size = sizeof(h2_conn_t), .scan_ns = 5000000,
    .configure = h2_configure, .add = h2_add, .start = h2_start, .up = h2_up,
    .read = h2_read, .drained = h2_drained, .eof = h2_eof, .writable = h2_writable, .fail = h2_fail,
    .due = requests_due, .scan = h2_scan, .end = h2_end,
    .release = h2_release, .free = h2_free, .take = h2_take,
};
