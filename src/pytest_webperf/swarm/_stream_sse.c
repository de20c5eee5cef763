/*
 * _stream_sse.c: server-sent events (the WHATWG event-stream format) on the stream
 * loop's transport (_streamloop.h).
 *
 * GET with Accept: text/event-stream, and Last-Event-ID on a reconnect; the answer must
 * be 200 with Content-Type text/event-stream (else K_HTTP by status, or K_SSE_TYPE). The
 * body is de-chunked (or read until close) and parsed a byte at a time with constant
 * state per stream (sse_feed, a pure function over sse_t): data, id, event and retry
 * fields, comments, field names without a colon, one leading space of a value dropped,
 * ids holding NUL ignored, retry as ASCII digits only, a leading BOM, CR, LF and CRLF
 * line ends (a CRLF split across reads included), multi-line data (counted, never
 * kept), a trailing incomplete event discarded.
 *
 * Figures: time to the first event of each stream (from its connect's start), the gaps
 * between events (the interval's latency), events per stream; numeric ids accounted for
 * loss and duplicates across reconnects. A stream the server ends comes back after its
 * retry (EventSource's behaviour); with reconnect_every the client leaves every N events
 * and comes back with Last-Event-ID.
 */
#include "_streamloop.h"

/* ------------------------------------------------------------------ the parser */

/* a new stream: the parser empty, the source's last event ID string kept */
HIDDEN void sse_reset(sse_t *s, int chunked) {
    s->chunk = chunked ? CH_SIZE : CH_NONE;
    s->chunk_left = 0;
    s->bom = 0;
    s->line_start = 1;
    s->after_cr = 0;
    s->in_value = s->comment = s->skip_space = 0;
    s->name_len = 0;
    s->has_data = 0;
    s->buf_len = 0;
    s->data_bytes = 0;
}

static uint8_t field_of(const char *name, int len) {
    if (len == 4 && memcmp(name, "data", 4) == 0) return F_DATA;
    if (len == 2 && memcmp(name, "id", 2) == 0) return F_ID;
    if (len == 5 && memcmp(name, "event", 5) == 0) return F_EVENT;
    if (len == 5 && memcmp(name, "retry", 5) == 0) return F_RETRY;
    return F_OTHER;
}

/* the end of a line: a field applied, or (a blank line) the event dispatched */
static int sse_line(sse_t *s, sse_event_fn on_event, void *ctx) {
    if (s->line_start) {
        memcpy(s->last, s->buf, s->buf_len); /* the source's last event ID string */
        s->last_len = s->buf_len;
        int had = s->has_data;
        s->has_data = 0;
        int r = had ? on_event(ctx, s) : 0;
        s->data_bytes = 0;
        return r;
    }
    if (s->comment) return 0;
    uint8_t f = s->in_value ? s->field : field_of(s->name, s->name_len > 8 ? 9 : s->name_len);
    switch (f) {
    case F_DATA: /* "data" alone: an empty line of data (its joining LF counted) */
        if (!s->in_value && s->has_data) s->data_bytes++;
        s->has_data = 1;
        break;
    case F_ID:
        if (!s->in_value) {
            s->buf_len = 0; /* "id" alone: the empty id */
        } else if (!s->val_nul) {
            memcpy(s->buf, s->val, s->val_len);
            s->buf_len = s->val_len;
        }
        break;
    case F_RETRY:
        if (s->in_value && s->retry_ok && s->retry_digits) s->retry_ms = s->retry_value;
        break;
    default:
        break;
    }
    return 0;
}

/* one body byte through the event-stream grammar: 0, or -1 (stop) */
static inline int sse_byte(sse_t *s, uint8_t ch, sse_event_fn on_event, void *ctx) {
    if (s->bom < 3) { /* one leading U+FEFF is not part of the stream */
        static const uint8_t bom[3] = {0xEF, 0xBB, 0xBF};
        if (ch == bom[s->bom]) {
            s->bom++;
            return 0;
        }
        s->bom = 3; /* a partial BOM's bytes are dropped (FINDINGS) */
    }
    if (ch == '\n' && s->after_cr) { /* CRLF's LF */
        s->after_cr = 0;
        return 0;
    }
    s->after_cr = 0;
    if (ch == '\r' || ch == '\n') {
        s->after_cr = ch == '\r';
        if (sse_line(s, on_event, ctx) < 0) return -1;
        s->line_start = 1;
        s->in_value = s->comment = 0;
        s->name_len = 0;
        return 0;
    }
    if (s->line_start) {
        s->line_start = 0;
        if (ch == ':') {
            s->comment = 1;
            return 0;
        }
    }
    if (s->comment) return 0;
    if (!s->in_value) {
        if (ch == ':') {
            s->in_value = 1;
            s->skip_space = 1;
            s->field = field_of(s->name, s->name_len > 8 ? 9 : s->name_len);
            s->val_len = s->val_nul = 0;
            s->retry_ok = 1;
            s->retry_digits = 0;
            s->retry_value = 0;
            if (s->field == F_DATA && s->has_data) s->data_bytes++; /* the joining LF */
            return 0;
        }
        if (s->name_len < 8) s->name[s->name_len] = (char)ch;
        if (s->name_len < 255) s->name_len++;
        return 0;
    }
    if (s->skip_space) {
        s->skip_space = 0;
        if (ch == ' ') return 0;
    }
    switch (s->field) {
    case F_DATA:
        s->data_bytes++;
        break;
    case F_ID:
        if (ch == 0) s->val_nul = 1;
        else if (s->val_len < MAX_ID) s->val[s->val_len++] = (char)ch; /* longer: cut */
        break;
    case F_RETRY:
        if (ch >= '0' && ch <= '9' && s->retry_digits < 18) {
            s->retry_value = s->retry_value * 10 + (uint64_t)(ch - '0');
            s->retry_digits++;
        } else {
            s->retry_ok = 0;
        }
        break;
    default:
        break;
    }
    return 0;
}

static int hex_digit(uint8_t ch) {
    return ch >= '0' && ch <= '9'   ? ch - '0'
           : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
           : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                    : -1;
}

/* Body bytes, in any pieces: de-chunked, then parsed. 0; E_BAD_CHUNK; or -1: stopped
   (a callback said so, or the last chunk came: *ended). */
HIDDEN int sse_feed(sse_t *s, const uint8_t *d, size_t n, sse_event_fn on_event, void *ctx,
                    int *ended) {
    for (size_t i = 0; i < n; i++) {
        uint8_t ch = d[i];
        switch (s->chunk) {
        case CH_NONE:
            if (sse_byte(s, ch, on_event, ctx) < 0) return -1;
            break;
        case CH_SIZE: {
            int v = hex_digit(ch);
            if (v >= 0) {
                if (s->chunk_left >> 56) return E_BAD_CHUNK;
                s->chunk_left = s->chunk_left * 16 + (uint64_t)v;
            } else if (ch == '\r') {
                s->chunk = CH_SIZE_LF;
            } else if (ch == ';' || ch == ' ' || ch == '\t') {
                s->chunk = CH_EXT;
            } else {
                return E_BAD_CHUNK;
            }
            break;
        }
        case CH_EXT:
            if (ch == '\r') s->chunk = CH_SIZE_LF;
            break;
        case CH_SIZE_LF:
            if (ch != '\n') return E_BAD_CHUNK;
            s->chunk = s->chunk_left ? CH_DATA : CH_TRAILER;
            if (s->chunk == CH_TRAILER) { /* the last chunk: the stream is over */
                *ended = 1;
                return -1;
            }
            break;
        case CH_DATA: { /* a run of data bytes at once */
            size_t take = n - i;
            if (take > s->chunk_left) take = (size_t)s->chunk_left;
            for (size_t j = 0; j < take; j++)
                if (sse_byte(s, d[i + j], on_event, ctx) < 0) {
                    s->chunk_left -= j + 1;
                    return -1;
                }
            s->chunk_left -= take;
            i += take - 1;
            if (!s->chunk_left) s->chunk = CH_DATA_CR;
            break;
        }
        case CH_DATA_CR:
            if (ch != '\r') return E_BAD_CHUNK;
            s->chunk = CH_DATA_LF;
            break;
        case CH_DATA_LF:
            if (ch != '\n') return E_BAD_CHUNK;
            s->chunk = CH_SIZE;
            s->chunk_left = 0;
            break;
        case CH_TRAILER:
            *ended = 1;
            return -1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------ the protocol */

typedef struct {
    Engine *e;
    conn_t *c;
    uint64_t now;
} event_ctx_t;

/* the source's last event ID, when it is a number (the ids accounted) */
static int numeric_id(const sse_t *s, uint64_t *id) {
    if (!s->last_len || s->last_len > 19) return 0;
    uint64_t v = 0;
    for (int i = 0; i < s->last_len; i++) {
        if (s->last[i] < '0' || s->last[i] > '9') return 0;
        v = v * 10 + (uint64_t)(s->last[i] - '0');
    }
    *id = v;
    return 1;
}

/* an event was dispatched: its figures; 0, or -1 (the client leaves: reconnect_every) */
static int sse_event(void *ctx, const sse_t *s) {
    event_ctx_t *x = ctx;
    Engine *e = x->e;
    conn_t *c = x->c;
    uint64_t now = x->now, id;
    e->ledger.received++;
    note_receipt(e, now);
    if (!e->stop_sending) c->events++; /* events per second: until the end of the sending */
    if (!c->first_event_at) c->first_event_at = now;
    c->stream_events++;
    if (c->sse_first_pending) { /* time to the first event: the whole run's (ledger) */
        c->sse_first_pending = 0;
        hist_record(&e->ledger.ttfe, (now - c->started) / 1000);
        record_ok(e, UINT64_MAX, s->data_bytes); /* an event, no gap */
    } else {
        record_ok(e, (now - c->last_event_at) / 1000, s->data_bytes);
    }
    c->last_event_at = now;
    if (numeric_id(s, &id)) acct_seen(c->acct, id);
    if (e->reconnect_every && c->stream_events >= (uint64_t)e->reconnect_every &&
        !e->stop_sending) { /* the client leaves, as a closed tab would, and comes back */
        retire(e, c, now, 0);
        return -1;
    }
    return 0;
}

static void sse_open(Engine *e, conn_t *c, uint64_t now) {
    char extra[256];
    sse_t *s = c->sse;
    if (s->last_len)
        snprintf(extra, sizeof extra,
                 "Accept: text/event-stream\r\nCache-Control: no-cache\r\nLast-Event-ID: %.*s\r\n",
                 (int)s->last_len, s->last);
    else
        snprintf(extra, sizeof extra, "Accept: text/event-stream\r\nCache-Control: no-cache\r\n");
    sse_reset(s, 0);
    c->sse_first_pending = 1;
    c->stream_events = 0;
    write_request(e, c, extra, now);
}

/* the server ended the stream: back after its retry */
static void sse_ended(Engine *e, conn_t *c, uint64_t now) {
    e->ledger.streams_ended++;
    uint64_t pause = c->sse->retry_ms ? c->sse->retry_ms * 1000000ULL : e->retry_ns;
    retire(e, c, now, pause);
}

static int sse_data(Engine *e, conn_t *c, const uint8_t *d, size_t n, uint64_t now) {
    if (c->state == S_OPENING) {
        size_t used = 0;
        long end = head_collect(c, d, n, &used);
        if (end < 0) {
            fail(e, c, now, K_PROTOCOL, E_HEAD_LONG, NULL, 0);
            return -1;
        }
        if (end == 0) return 0;
        const char *h = c->head, *v;
        size_t hn = (size_t)end, vlen;
        int status = status_of(h, hn);
        if (status < 0) {
            fail(e, c, now, K_PROTOCOL, E_STATUS_LINE, h, hn < 40 ? hn : 40);
            return -1;
        }
        if (status != 200) {
            fail(e, c, now, K_HTTP, status, h, line_len(h, hn));
            return -1;
        }
        if (!head_header(h, hn, "\r\ncontent-type:", &v, &vlen)) {
            v = "";
            vlen = 0;
        }
        if (!has_token_ci(v, vlen, "text/event-stream")) {
            fail(e, c, now, K_SSE_TYPE, 0, v, vlen);
            return -1;
        }
        int chunked = head_header(h, hn, "\r\ntransfer-encoding:", &v, &vlen) &&
                      has_token_ci(v, vlen, "chunked");
        sse_reset(c->sse, chunked);
        conn_opened(e, c, now);
        d += used;
        n -= used;
    }
    int ended = 0;
    event_ctx_t ctx = {e, c, now};
    int r = sse_feed(c->sse, d, n, sse_event, &ctx, &ended);
    if (r > 0) {
        fail(e, c, now, K_PROTOCOL, r, (const char *)d, n < 20 ? n : 20);
        return -1;
    }
    if (r < 0) {
        if (ended) sse_ended(e, c, now);
        return -1;
    }
    return 0;
}

static void sse_eof(Engine *e, conn_t *c, uint64_t now) {
    if (c->state == S_OPEN) { /* read until close: the end of the stream */
        sse_ended(e, c, now);
        return;
    }
    fail(e, c, now, K_CLOSED, 1, NULL, 0);
}

/* no on_due: the server paces a stream; the only timer is a reconnect (the transport's) */
HIDDEN const proto_t PROTO_SSE = {"sse", sse_open, sse_data, sse_eof, NULL};
