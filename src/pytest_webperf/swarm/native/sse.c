/*
 * sse.c: server-sent events (the WHATWG event-stream format) on the engine.
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
#include "engine.h"

#define MAX_ID 64 /* an SSE id longer than this is cut (FINDINGS: ids are short) */
enum { E_HEAD_LONG = 10, E_STATUS_LINE, E_BAD_CHUNK }; /* K_PROTOCOL's keys (engine.py) */
enum { CH_SIZE, CH_EXT, CH_SIZE_LF, CH_DATA, CH_DATA_CR, CH_DATA_LF, CH_TRAILER, CH_NONE };
enum { F_OTHER, F_DATA, F_ID, F_EVENT, F_RETRY };

/* the event-stream parser's state: constant size whatever the stream. Three id buffers,
   as the WHATWG parser has: the line's value (kept only without NUL), the stream's last
   event ID buffer (empty at each new stream), and the source's last event ID string
   (set at each dispatch, kept across reconnects: what Last-Event-ID sends) */
typedef struct {
    uint8_t last_len; /* kept across streams: the source's last event ID, the retry */
    char last[MAX_ID];
    uint64_t retry_ms;
    uint8_t chunk; /* a stream's, from here on (sse_reset): CH_*, the de-chunker's */
    uint64_t chunk_left;
    uint8_t bom;        /* bytes of a leading BOM matched (3: past it) */
    uint8_t line_start; /* no byte of the current line yet */
    uint8_t after_cr;   /* the last line ended with CR: a LF now is its CRLF's */
    uint8_t in_value, skip_space, comment;
    uint8_t field; /* F_* of the line's field */
    uint8_t name_len;
    char name[8];
    uint8_t has_data;
    uint8_t val_len, val_nul, buf_len;
    char val[MAX_ID], buf[MAX_ID];
    uint8_t retry_ok, retry_digits;
    uint64_t retry_value;
    uint64_t data_bytes; /* the event's data value bytes */
} sse_t;
typedef int (*sse_event_fn)(void *ctx, const sse_t *s); /* 0 go on, -1 stop */

/* the engine's part */
typedef struct {
    char *path, *tail;
    uint64_t retry_ns;
    long long reconnect_every; /* leave and come back with Last-Event-ID every N events */
    uint64_t streams_ended;
    hist_t ttfe; /* time to each stream's first event (the whole run's) */
} sse_engine_t;
#define S(e) ((sse_engine_t *)(e)->cfg)

/* a connection's part */
typedef struct {
    sse_t parser;
    acct_t acct; /* numeric ids */
    char *head;  /* the answer's head being read, freed once whole */
    size_t nhead;
    uint8_t first_pending;
    uint64_t events, first_event_at, last_event_at, stream_events;
} stream_t;

/* ------------------------------------------------------------------ the parser */

/* a new stream: the parser empty, the source's last event ID string kept */
static void sse_reset(sse_t *s, int chunked) {
    memset(&s->chunk, 0, sizeof *s - offsetof(sse_t, chunk));
    s->chunk = chunked ? CH_SIZE : CH_NONE;
    s->line_start = 1;
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
        if (ch == bom[s->bom]) { s->bom++; return 0; }
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
        if (ch == ':') { s->comment = 1; return 0; }
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

/* Body bytes, in any pieces: de-chunked, then parsed. 0; E_BAD_CHUNK; or -1: stopped
   (a callback said so, or the last chunk came: *ended). */
static int sse_feed(sse_t *s, const uint8_t *d, size_t n, sse_event_fn on_event, void *ctx,
                    int *ended) {
    for (size_t i = 0; i < n; i++) {
        uint8_t ch = d[i];
        switch (s->chunk) {
        case CH_NONE:
            if (sse_byte(s, ch, on_event, ctx) < 0) return -1;
            break;
        case CH_SIZE: {
            int v = hex_value(ch);
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
                if (sse_byte(s, d[i + j], on_event, ctx) < 0) { s->chunk_left -= j + 1; return -1; }
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

/* ------------------------------------------------------------------ the session */

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
static int on_event(void *ctx, const sse_t *p) {
    at_t *x = ctx;
    Engine *e = x->e;
    conn_t *c = x->c;
    stream_t *s = c->s;
    uint64_t now = x->now, id;
    e->ledger.received++;
    note_receipt(e, now);
    if (!e->stop_sending) s->events++; /* events per second: until the end of the sending */
    if (!s->first_event_at) s->first_event_at = now;
    s->stream_events++;
    if (s->first_pending) { /* time to the first event: the whole run's (ledger) */
        s->first_pending = 0;
        hist_record(&S(e)->ttfe, (now - c->started) / 1000);
        record_ok(e, UINT64_MAX, p->data_bytes); /* an event, no gap */
    } else {
        record_ok(e, (now - s->last_event_at) / 1000, p->data_bytes);
    }
    s->last_event_at = now;
    if (numeric_id(p, &id)) acct_seen(&s->acct, id);
    if (S(e)->reconnect_every && s->stream_events >= (uint64_t)S(e)->reconnect_every &&
        !e->stop_sending) { /* the client leaves, as a closed tab would, and comes back */
        conn_retire(e, c, now, 0, 1);
        return -1;
    }
    return 0;
}

static void sse_up(Engine *e, conn_t *c, uint64_t now) {
    char extra[256];
    stream_t *s = c->s;
    sse_t *p = &s->parser;
    snprintf(extra, sizeof extra,
             "Accept: text/event-stream\r\nCache-Control: no-cache\r\n%s%.*s%s",
             p->last_len ? "Last-Event-ID: " : "", (int)p->last_len, p->last,
             p->last_len ? "\r\n" : "");
    sse_reset(p, 0);
    s->first_pending = 1;
    s->stream_events = 0;
    c->reading = 1;
    c->deadline = now + e->timeout_ns;
    http_get(e, c, S(e)->path, extra, S(e)->tail, now);
}

static void sse_fail(Engine *e, conn_t *c, uint64_t now, int kind, int key, const char *raw,
                     size_t len) {
    conn_lost(e, c, now, kind, key, raw, len, 1);
}

/* the server ended the stream: back after its retry */
static void ended(Engine *e, conn_t *c, uint64_t now) {
    stream_t *s = c->s;
    S(e)->streams_ended++;
    uint64_t retry = s->parser.retry_ms ? s->parser.retry_ms * 1000000ULL : S(e)->retry_ns;
    conn_retire(e, c, now, retry, 1);
}

/* the answer's head (200, text/event-stream, chunked or not), then the stream */
static int sse_read(Engine *e, conn_t *c, uint8_t *d, size_t n, uint64_t now) {
    stream_t *s = c->s;
    if (!c->opened) {
        size_t used = 0;
        long end = head_collect(&s->head, &s->nhead, d, n, &used);
        const char *h = s->head, *v = "";
        size_t hn = (size_t)end, vlen = 0;
        int status = end > 0 ? status_of(h, hn) : 0;
        if (end == 0) return 0;
        if (end < 0) sse_fail(e, c, now, K_PROTOCOL, E_HEAD_LONG, NULL, 0);
        else if (status < 0) sse_fail(e, c, now, K_PROTOCOL, E_STATUS_LINE, h, hn < 40 ? hn : 40);
        else if (status != 200) sse_fail(e, c, now, K_HTTP, status, h, line_len(h, hn));
        else if (head_header(h, hn, "\r\ncontent-type:", &v, &vlen),
                 !has_token_ci(v, vlen, "text/event-stream"))
            sse_fail(e, c, now, K_SSE_TYPE, 0, v, vlen);
        if (c->state != T_UP) return -1;
        int chunked = head_header(h, hn, "\r\ntransfer-encoding:", &v, &vlen) &&
                      has_token_ci(v, vlen, "chunked");
        sse_reset(&s->parser, chunked);
        free(s->head);
        s->head = NULL;
        s->nhead = 0;
        conn_opened(e, c, now);
        d += used;
        n -= used;
    }
    int stopped = 0;
    at_t ctx = {e, c, now};
    int r = sse_feed(&s->parser, d, n, on_event, &ctx, &stopped);
    if (r > 0) sse_fail(e, c, now, K_PROTOCOL, r, (const char *)d, n < 20 ? n : 20);
    else if (r < 0 && stopped) ended(e, c, now);
    return r ? -1 : 0;
}

static void sse_eof(Engine *e, conn_t *c, uint64_t now) {
    if (c->opened) ended(e, c, now); /* read until close: the end of the stream */
    else sse_fail(e, c, now, K_CLOSED, 1, NULL, 0);
}

static void sse_scan(Engine *e, conn_t *c, uint64_t now) {
    if (c->state == T_UP && !c->opened && now >= c->deadline)
        sse_fail(e, c, now, K_TIMEOUT, 1, NULL, 0); /* no answer to the opening request */
}

static void sse_add(Engine *e, conn_t *c, uint64_t now, double fraction) {
    (void)fraction;
    if (e->closing_all || e->stop_sending) c->state = T_DONE;
    else conn_connect(e, c, now);
}

static void sse_release(Engine *e, conn_t *c) {
    (void)e;
    free(((stream_t *)c->s)->head);
}

static void sse_free(Engine *e) {
    if (S(e)) FREE_ALL(S(e)->path, S(e)->tail, S(e));
}

/* options: path, tail (the request's headers after ours: Host, the user's), retry_s (a
   stream's pause before it comes back, unless the server says), reconnect_every,
   max_connecting */
static int sse_configure(Engine *e, PyObject *options) {
    static char *names[] = {"path", "tail", "retry_s", "reconnect_every", "max_connecting", NULL};
    const char *path, *tail;
    double retry_s = 3;
    sse_engine_t *g = e->cfg = calloc(1, sizeof(sse_engine_t));
    if (!g) return PyErr_NoMemory(), -1;
    e->max_connecting = 256;
    if (parse_options(options, "ss|dLL", names, &path, &tail, &retry_s, &g->reconnect_every,
                      &e->max_connecting) < 0)
        return -1;
    if (retry_s < 0 || g->reconnect_every < 0 || e->max_connecting < 1) {
        PyErr_SetString(PyExc_ValueError, "bad retry, reconnect_every or gate");
        return -1;
    }
    g->retry_ns = (uint64_t)(retry_s * 1e9);
    hist_clear(&g->ttfe);
    if (!(g->path = strdup(path)) || !(g->tail = strdup(tail))) return PyErr_NoMemory(), -1;
    e->hists |= 1u << H_LAG;
    return 0;
}

/* finish(): streams ended, time to first event, the ids' account, each stream's events
   per second from its first event to the end (a stream that stalled is slower by it) */
static int sse_ledger(Engine *e, PyObject *d) {
    acct_t sum = {0};
    uint64_t expected = 0, end = e->stop_at;
    PyObject *rates = PyList_New(0);
    for (size_t i = 0; rates && i < e->nconns; i++) {
        stream_t *s = e->conns[i] ? e->conns[i]->s : NULL;
        if (!s) continue;
        if (s->acct.distinct) expected += s->acct.top - s->acct.first;
        for (int k = 0; k < 4; k++) (&sum.distinct)[k] += (&s->acct.distinct)[k];
        if (!s->first_event_at || end <= s->first_event_at) continue;
        double after_first = s->events > 1 ? (double)(s->events - 1) : 0.0;
        PyObject *rate = PyFloat_FromDouble(after_first * 1e9 / (double)(end - s->first_event_at));
        if (!rate || PyList_Append(rates, rate) < 0) Py_CLEAR(rates);
        Py_XDECREF(rate);
    }
    return put_object(d, "rates", rates) || put_object(d, "sse", acct_tuple(expected, &sum)) ||
                   put_object(d, "ttfe", hist_tuple(&S(e)->ttfe)) ||
                   put_int(d, "streams_ended", (long long)S(e)->streams_ended)
               ? -1
               : 0;
}

const session_t SESSION_SSE = {
    .name = "sse", .alpn = "\x08http/1.1", .size = sizeof(stream_t),
    .many_idle = 1, .scan_ns = 20000000, .configure = sse_configure, .add = sse_add,
    .up = sse_up, .read = sse_read,
    .eof = sse_eof, .fail = sse_fail, .scan = sse_scan,
    .release = sse_release, .free = sse_free, .ledger = sse_ledger,
};

/* ------------------------------------------------------------------ the tests' door */

static int t_event(void *ctx, const sse_t *s) {
    PyObject *row = Py_BuildValue("(y#KK)", s->last, (Py_ssize_t)s->last_len,
                                  (unsigned long long)s->data_bytes, (unsigned long long)s->retry_ms);
    int bad = !row || PyList_Append((PyObject *)ctx, row) < 0;
    Py_XDECREF(row);
    return bad ? -1 : 0;
}

/* sse_parse(chunks, chunked=False) -> (events, ended, error): the engine's event-stream
   parser over these pieces; each event (last event id, data bytes, retry ms in force) */
PyObject *sse_parse_door(PyObject *unused, PyObject *args) {
    (void)unused;
    PyObject *chunks;
    int chunked = 0, stopped = 0, error = 0;
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
        int r = sse_feed(&s, (const uint8_t *)buf, (size_t)n, t_event, events, &stopped);
        if (r > 0) error = r;
        if (r < 0 && !stopped) Py_CLEAR(events);
        if (r) break;
    }
    Py_DECREF(seq);
    if (!events) return NULL;
    return Py_BuildValue("(Nii)", events, stopped, error);
}
