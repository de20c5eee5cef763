/*
 * http1.c: HTTP/1.1 requests on the engine, and what HTTP/2 shares with it: the request
 * mix (several payloads by weight, each with its accepted statuses and a body substring
 * it must contain) and its checks; the heads of HTTP answers (WebSocket's upgrade,
 * server-sent events' stream).
 *
 * Per request: one send() (more only when the socket buffer is full) and one recv() per
 * arrival of data; a connection is opened with its first request and kept alive.
 * Responses are framed as wire.ResponseParser frames them (Content-Length, chunked,
 * until close, HTTP/1.0, 1xx skipped, HEAD/204/304 without a body); protocol errors
 * carry a code and the offending bytes, which swarm/engine.py words exactly as wire.py
 * does. close_each: every request says Connection: close and gets a connection of its
 * own, its TCP connect and TLS handshake timed.
 */
#include "engine.h"

#define MAX_STATUS 1000
#define MAX_HEAD (64 * 1024)
#define MAX_LINE (4 * 1024)
#define OPENING_HEAD (16 * 1024) /* an upgrade's or a stream's answer (head_collect) */

enum { P_HEAD, P_LENGTH, P_CHUNK_SIZE, P_CHUNK_DATA, P_CHUNK_END, P_TRAILERS, P_UNTIL_CLOSE,
       P_DONE };
/* protocol error codes (K_PROTOCOL's keys): swarm/engine.py words them as wire.py does */
enum { E_STATUS_LINE = 1, E_SWITCHING, E_HEAD_LONG, E_BAD_LENGTH, E_BAD_CHUNK, E_CHUNK_CRLF,
       E_CHUNK_LINE_LONG, E_TRAILER_LONG };
/* how far a response had come when the peer closed (K_CLOSED's keys) */
enum { C_HEAD = 1, C_LENGTH, C_CHUNKED };

#define HTTP(e) ((http_t *)(e)->cfg)

/* a connection's part */
typedef struct {
    request_t r;
    int busy; /* a request in flight */
    int ps, status, keep_alive;
    uint64_t remaining, body_bytes;
    char *left; /* bytes kept between reads: an unfinished line, or what followed a response */
    size_t nleft, capleft;
    char status_line[EXAMPLE_BYTES];
    int status_len;
    body_t body;
} h1_t;

/* ------------------------------------------------------------------ the mix and its checks */

static void free_entries(entry_t *entries, int n) {
    for (int i = 0; i < n; i++) {
        free(entries[i].payload);
        free(entries[i].statuses);
        free(entries[i].needle);
    }
}

void http_free(Engine *e) {
    if (!e->cfg) return;
    free_entries(HTTP(e)->entries, e->nentries);
    free(e->cfg);
    e->cfg = NULL;
}

/* one entry of the mix from (payload, head_only, weight, statuses or None, needle or
   None): 0, or -1 with an error */
static int entry_from(entry_t *x, double *weight, PyObject *item) {
    PyObject *payload, *statuses, *needle;
    size_t n = 0;
    if (!PyArg_ParseTuple(item, "SpdOO", &payload, &x->head_only, weight, &statuses, &needle) ||
        copy_bytes(payload, (uint8_t **)&x->payload, &x->payload_len) < 0 ||
        copy_bytes(statuses, &x->statuses, &n) < 0 ||
        copy_bytes(needle, (uint8_t **)&x->needle, &x->needle_len) < 0)
        return -1;
    if (!(*weight > 0) || (x->statuses && n != MAX_STATUS) ||
        (x->needle && (!x->needle_len || x->needle_len > MAX_NEEDLE))) {
        PyErr_Format(PyExc_ValueError, "a weight is > 0, statuses %d flags, a needle 1 to %d bytes",
                     MAX_STATUS, MAX_NEEDLE);
        return -1;
    }
    return 0;
}

/* the load shape and the mix: mode (engine.h's MODE_*), period_s, the arrival rate's
   arrival_num / arrival_ns per process and this process's index among processes, mix:
   [(payload, head_only, weight, statuses (a flag per status 0..999) or None, needle or
   None), ...], close_each, sequence (bytes: the entries' indices in the order to send
   them, cycled; none: by weight).
   The engine's part is `size` bytes (HTTP/2's is larger). 0, or -1 with an error */
int http_configure(Engine *e, PyObject *options, size_t size) {
    static char *names[] = {"mode", "period_s", "arrival_num", "arrival_ns", "processes",
                            "index", "mix", "close_each", "sequence", NULL};
    double period_s = 0;
    unsigned long long num = 0, ns = 0;
    long long processes = 1, index = 0;
    PyObject *mix = NULL, *sequence = NULL;
    int close_each = 0;
    if (parse_options(options, "|idKKLLOpO", names, &e->mode, &period_s, &num, &ns, &processes,
                      &index, &mix, &close_each, &sequence) < 0 ||
        copy_bytes(sequence, &e->sequence, &e->nsequence) < 0)
        return -1;
    if (e->mode < MODE_CLOSED || e->mode > MODE_ARRIVAL || (e->mode == MODE_PACED && period_s <= 0) ||
        (e->mode == MODE_ARRIVAL && (!num || !ns || processes < 1 || index < 0 ||
                                     index >= processes))) {
        PyErr_SetString(PyExc_ValueError, "bad mode, period or arrival rate");
        return -1;
    }
    e->period_ns = (uint64_t)(period_s * 1e9);
    e->arrival_num = num;
    e->arrival_ns = ns;
    e->processes = processes;
    e->index = index;
    PyObject *seq = mix ? PySequence_Fast(mix, "a mix is a list of entries") : NULL;
    if (!seq) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (!(e->cfg = calloc(1, size))) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    http_t *h = HTTP(e);
    e->cumulative = h->cumulative;
    h->close_each = e->setup_times = close_each;
    e->nentries = n < 1 ? 1 : n > MAX_ENTRIES ? MAX_ENTRIES : (int)n;
    if (n < 1 || n > MAX_ENTRIES) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "a mix has 1 to %d entries", MAX_ENTRIES);
        return -1;
    }
    double total = 0, weight;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (entry_from(&h->entries[i], &weight, PySequence_Fast_GET_ITEM(seq, i)) < 0) {
            Py_DECREF(seq);
            return -1;
        }
        h->cumulative[i] = total += weight;
    }
    Py_DECREF(seq);
    for (size_t i = 0; i < e->nsequence; i++)
        if (e->sequence[i] >= e->nentries) {
            PyErr_SetString(PyExc_ValueError, "a sequence names entries of the mix");
            return -1;
        }
    if (SCHEDULED(e)) e->hists |= 1u << H_SERVICE | 1u << H_LAG;
    return 0;
}

void body_reset(body_t *b) {
    b->found = 0;
    b->ntail = 0;
    b->head_len = 0;
}

/* n more bytes of a body: kept as the example while it is short, searched for the
   entry's needle, the chunk's last bytes kept for a needle that spans two chunks */
void body_scan(Engine *e, int entry, body_t *b, const char *p, size_t n) {
    const entry_t *x = &HTTP(e)->entries[entry];
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

/* a response's status against its entry's checks: 0 as expected, else K_HTTP (`failing`
   without statuses to allow: a status >= 400) or K_UNEXPECTED_STATUS, its key and the
   example (the status line) */
int http_status_check(Engine *e, int entry, int status, int failing, int *key) {
    const entry_t *x = &HTTP(e)->entries[entry];
    int slot = status > 0 && status < MAX_STATUS ? status : MAX_STATUS - 1;
    *key = x->statuses ? 0 : slot;
    if (x->statuses) return x->statuses[slot] ? 0 : K_UNEXPECTED_STATUS;
    return failing ? K_HTTP : 0;
}

/* a response's body against its entry's needle: 0 found (or none asked), else
   K_UNEXPECTED_BODY with its example in raw (the status line's first bytes, `a` of
   them, then the body's) */
int http_body_check(Engine *e, int entry, const body_t *b, const char *line, size_t n,
                    int64_t *a, char raw[EXAMPLE_LINE + EXAMPLE_BODY], size_t *len) {
    if (!HTTP(e)->entries[entry].needle || b->found) return 0;
    if (n > EXAMPLE_LINE) n = EXAMPLE_LINE;
    memcpy(raw, line, n);
    memcpy(raw + n, b->head, (size_t)b->head_len);
    *a = (int64_t)n;
    *len = n + (size_t)b->head_len;
    return K_UNEXPECTED_BODY;
}

/* ------------------------------------------------------------------ heads */

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
int head_header(const char *head, size_t n, const char *name, const char **value, size_t *vlen) {
    size_t k = strlen(name);
    for (size_t i = 0; i + k <= n; i++) {
        if (head[i] != '\r' || strncasecmp(head + i, name, k) != 0) continue;
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

int has_token_ci(const char *s, size_t n, const char *word) {
    size_t k = strlen(word);
    for (size_t i = 0; i + k <= n; i++)
        if (strncasecmp(s + i, word, k) == 0) return 1;
    return 0;
}

/* a hexadecimal digit's value, or -1 */
int hex_value(uint8_t ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

/* an HTTP/1.x status line's status, or -1 */
int status_of(const char *h, size_t n) {
    if (n < 12 || memcmp(h, "HTTP/1.", 7) != 0 || h[8] != ' ') return -1;
    for (int i = 9; i < 12; i++)
        if (h[i] < '0' || h[i] > '9') return -1;
    return (h[9] - '0') * 100 + (h[10] - '0') * 10 + (h[11] - '0');
}

size_t line_len(const char *h, size_t n) {
    const char *eol = memchr(h, '\r', n);
    return eol ? (size_t)(eol - h) : n;
}

/* GET `path` HTTP/1.1 with the protocol's headers (`extra`), then `tail`'s (Host, the
   user's): 0, or -1 (the connection failed, handled) */
int http_get(Engine *e, conn_t *c, const char *path, const char *extra, const char *tail,
             uint64_t now) {
    size_t n = strlen(path) + strlen(extra) + strlen(tail) + 20;
    char *req = malloc(n);
    if (!req) { conn_fail_errno(e, c, now, ENOMEM); return -1; }
    int len = snprintf(req, n, "GET %s HTTP/1.1\r\n%s%s\r\n", path, extra, tail);
    int r = conn_write(e, c, req, (size_t)len, now);
    free(req);
    return r;
}

/* an opening's answer head collected across reads into *head: > 0 its length (what
   follows starts at d + *used), 0 more must come, -1 too long */
long head_collect(char **head, size_t *nhead, const uint8_t *d, size_t n, size_t *used) {
    size_t old = *nhead;
    size_t take = n < OPENING_HEAD + 4 - old ? n : OPENING_HEAD + 4 - old;
    size_t cap = 1024; /* powers of two from 1 KiB */
    while (cap < old + take) cap *= 2;
    char *p = realloc(*head, cap);
    if (!p) return -1;
    *head = p;
    memcpy(p + old, d, take);
    *nhead += take;
    for (size_t i = old >= 3 ? old - 3 : 0; i + 3 < *nhead; i++) {
        if (p[i] == '\r' && p[i + 1] == '\n' && p[i + 2] == '\r' && p[i + 3] == '\n') {
            *used = i + 4 - old;
            return (long)i + 2; /* the head with its last header's CRLF */
        }
    }
    if (*nhead >= OPENING_HEAD) return -1;
    *used = n;
    return 0;
}

/* ------------------------------------------------------------------ HTTP/1.1 */

static void h1_start(Engine *e, conn_t *c, uint64_t now);
static int feed(Engine *e, conn_t *c, const char *d, size_t n, uint64_t now);

static void keep_left(h1_t *h, const char *data, size_t n) {
    if (n > h->capleft) {
        char *p = realloc(h->left, n);
        if (!p) { h->nleft = 0; return; }
        h->left = p;
        h->capleft = n;
    }
    memmove(h->left, data, n);
    h->nleft = n;
}

/* the end (CRLF) of the line at `at`: NULL when more must come (kept), or when it is
   longer than a line may be (*code = too_long) */
static const char *line_end(h1_t *h, const char *at, const char *end, int too_long, int *code) {
    const char *eol = find_crlf(at, end);
    if (eol) return eol;
    if ((size_t)(end - at) > MAX_LINE) *code = too_long;
    else keep_left(h, at, (size_t)(end - at));
    return NULL;
}

/* the next request of a connection that is free at ``now`` (``failed``: the last one
   failed; ``connect_failed``: it failed to connect, back off before retrying) */
static void next(Engine *e, conn_t *c, uint64_t now, int failed, int connect_failed) {
    h1_t *h = c->s;
    h->busy = 0;
    c->reading = 0;
    request_end(e, &h->r);
    if (e->stop_sending) { park(e, c); return; }
    uint64_t earliest = connect_failed ? now + BACKOFF_NS : now;
    if (e->mode == MODE_ARRIVAL) { /* idle again (after a failed connect: a pause first) */
        if (connect_failed) conn_wake(e, c, earliest);
        else make_idle(e, c);
        return;
    }
    if (e->mode == MODE_PACED) {
        uint64_t wake = h->r.due > earliest ? h->r.due : earliest;
        if (wake > now) conn_wake(e, c, wake);
        else h1_start(e, c, now);
        return;
    }
    /* failures, and bytes already here for the next response, go round the loop: no spin,
       no recursion */
    if (failed || h->nleft) conn_wake(e, c, earliest);
    else h1_start(e, c, now);
}

static void h1_fail(Engine *e, conn_t *c, uint64_t now, int kind, int key, const char *raw,
                    size_t len) {
    h1_t *h = c->s;
    int connecting = c->state == T_CONNECTING || c->state == T_TLS;
    if (h->busy) record_fail(e, h->r.entry, kind, key, 1, 0, 0, raw, len);
    conn_close(e, c);
    h->nleft = 0;
    next(e, c, now, 1, connecting); /* connect errors and timeouts come while connecting */
}

static void h1_send(Engine *e, conn_t *c, uint64_t now) {
    h1_t *h = c->s;
    entry_t *x = &HTTP(e)->entries[h->r.entry];
    c->reading = 1;
    if (conn_write(e, c, x->payload, x->payload_len, now) < 0) return;
    if (HTTP(e)->close_each) c->peer_closed = 1; /* no next request on it, whatever it says */
    if (h->nleft) { /* bytes that followed the last response: they start this one */
        size_t n = h->nleft;
        h->nleft = 0;
        memcpy(e->rbuf, h->left, n);
        feed(e, c, (char *)e->rbuf, n, now);
    }
}

static void h1_start(Engine *e, conn_t *c, uint64_t now) {
    h1_t *h = c->s;
    c->sched = Q_BUSY;
    if (!request_begin(e, &h->r, now, e->mode == MODE_ARRIVAL ? c->due : h->r.due)) {
        park(e, c); /* not open yet, or none left */
        return;
    }
    h->busy = 1;
    h->ps = P_HEAD;
    h->status = h->status_len = 0;
    h->keep_alive = 1;
    h->remaining = h->body_bytes = 0;
    body_reset(&h->body);
    if (c->fd >= 0) {
        h1_send(e, c, now);
    } else { /* up() sends it; what the last connection left is not this one's */
        h->nleft = 0;
        conn_connect(e, c, now);
    }
}

/* 0: parsed; -1: a protocol error (code, raw set) */
static int on_head(Engine *e, h1_t *h, const char *d, size_t n, int *code, const char **raw,
                   size_t *rawlen) {
    int status = status_of(d, n);
    if (status < 0) {
        *code = E_STATUS_LINE;
        *raw = d;
        *rawlen = n < 40 ? n : 40;
        return -1;
    }
    if (status >= 100 && status < 200) {
        if (status != 101) return 0; /* interim: the real response follows */
        *code = E_SWITCHING;
        return -1;
    }
    h->status = status;
    entry_t *x = &HTTP(e)->entries[h->r.entry];
    if (status >= 400 || x->statuses || x->needle) {
        const char *eol = find_crlf(d, d + n);
        size_t len = eol ? (size_t)(eol - d) : n;
        h->status_len = (int)(len > EXAMPLE_BYTES ? EXAMPLE_BYTES : len);
        memcpy(h->status_line, d, (size_t)h->status_len);
    }
    const char *v;
    size_t vlen;
    int has_connection = head_header(d, n, "\r\nconnection:", &v, &vlen);
    if (d[7] == '0')
        h->keep_alive = has_connection && has_token_ci(v, vlen, "keep-alive");
    else
        h->keep_alive = !has_connection || !has_token_ci(v, vlen, "close");
    if (x->head_only || status == 204 || status == 304) { h->ps = P_DONE; return 0; }
    if (head_header(d, n, "\r\ntransfer-encoding:", &v, &vlen)) {
        const char *last = v + vlen, *p = last;
        while (p > v && p[-1] != ',') p--;
        while (p < last && is_space(*p)) p++;
        h->ps = (size_t)(last - p) == 7 && strncasecmp(p, "chunked", 7) == 0 ? P_CHUNK_SIZE
                                                                             : P_UNTIL_CLOSE;
        if (h->ps == P_UNTIL_CLOSE) h->keep_alive = 0;
        return 0;
    }
    if (!head_header(d, n, "\r\ncontent-length:", &v, &vlen)) {
        h->ps = P_UNTIL_CLOSE;
        h->keep_alive = 0;
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
    h->remaining = length;
    h->ps = length ? P_LENGTH : P_DONE;
    return 0;
}

/* a response came whole: its outcome recorded, the connection kept or closed */
static void h1_done(Engine *e, conn_t *c, uint64_t now) {
    h1_t *h = c->s;
    int key = 0, kind = http_status_check(e, h->r.entry, h->status, h->status >= 400, &key);
    int64_t a = 0;
    char raw[EXAMPLE_LINE + EXAMPLE_BODY];
    size_t len = (size_t)h->status_len;
    const char *example = h->status_line;
    if (!kind && (kind = http_body_check(e, h->r.entry, &h->body, h->status_line, len, &a, raw, &len)))
        example = raw;
    request_done(e, &h->r, now, h->body_bytes, kind, key, a, example, len, 0);
}

/* Frame what arrived. 1: the response is complete (and handled), 0: more must come,
   -1: the connection failed (handled). */
static int feed(Engine *e, conn_t *c, const char *d, size_t n, uint64_t now) {
    h1_t *h = c->s;
    size_t pos = 0;
    int code = 0;
    const char *raw = NULL;
    size_t rawlen = 0;
    while (h->ps != P_DONE) {
        const char *at = d + pos, *end = d + n;
        switch (h->ps) {
        case P_HEAD: {
            const char *stop = NULL;
            for (const char *p = at; p + 3 < end; p++) {
                p = memchr(p, '\r', (size_t)(end - p - 3));
                if (!p) break;
                if (p[1] == '\n' && p[2] == '\r' && p[3] == '\n') { stop = p; break; }
            }
            if (!stop) {
                if ((size_t)(end - at) > MAX_HEAD) { code = E_HEAD_LONG; goto protocol; }
                keep_left(h, at, (size_t)(end - at));
                return 0;
            }
            if (on_head(e, h, at, (size_t)(stop - at), &code, &raw, &rawlen) < 0) goto protocol;
            pos = (size_t)(stop - d) + 4;
            break;
        }
        case P_LENGTH:
        case P_CHUNK_DATA: {
            uint64_t take = (uint64_t)(end - at);
            if (take > h->remaining) take = h->remaining;
            body_scan(e, h->r.entry, &h->body, at, (size_t)take);
            h->body_bytes += take;
            h->remaining -= take;
            pos += take;
            if (h->remaining) return 0;
            h->ps = h->ps == P_LENGTH ? P_DONE : P_CHUNK_END;
            break;
        }
        case P_CHUNK_SIZE: {
            const char *eol = line_end(h, at, end, E_CHUNK_LINE_LONG, &code);
            if (!eol) goto unfinished;
            const char *p = at, *stop = memchr(at, ';', (size_t)(eol - at));
            if (!stop) stop = eol;
            while (p < stop && is_space(*p)) p++;
            const char *q = stop;
            while (q > p && is_space(q[-1])) q--;
            uint64_t size = 0;
            int digits = 0;
            for (; p < q; p++, digits++) {
                int v = hex_value((uint8_t)*p);
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
            h->remaining = size;
            h->ps = size ? P_CHUNK_DATA : P_TRAILERS;
            break;
        }
        case P_CHUNK_END:
            if (end - at < 2) { keep_left(h, at, (size_t)(end - at)); return 0; }
            if (at[0] != '\r' || at[1] != '\n') { code = E_CHUNK_CRLF; goto protocol; }
            pos += 2;
            h->ps = P_CHUNK_SIZE;
            break;
        case P_TRAILERS: {
            const char *eol = line_end(h, at, end, E_TRAILER_LONG, &code);
            if (!eol) goto unfinished;
            if (eol == at) h->ps = P_DONE;
            pos = (size_t)(eol - d) + 2;
            break;
        }
        case P_UNTIL_CLOSE:
            body_scan(e, h->r.entry, &h->body, at, (size_t)(end - at));
            h->body_bytes += (uint64_t)(end - at);
            return 0;
        }
    }
    h1_done(e, c, now);
    if (h->keep_alive && !c->peer_closed) {
        /* what followed the response (none from a sane server) starts the next one; more
           than a head's worth is an error then anyway */
        if (pos < n) keep_left(h, d + pos, n - pos > MAX_HEAD + 1 ? MAX_HEAD + 1 : n - pos);
    } else {
        conn_close(e, c);
    }
    next(e, c, now, 0, 0);
    return 1;
unfinished: /* a line that more must come to finish, unless it is too long already */
    if (!code) return 0;
protocol:
    h1_fail(e, c, now, K_PROTOCOL, code, raw, rawlen);
    return -1;
}

/* bytes that arrived (the engine's buffer has room before it for those kept) */
static int h1_read(Engine *e, conn_t *c, uint8_t *buf, size_t n, uint64_t now) {
    h1_t *h = c->s;
    size_t kept = h->nleft;
    h->nleft = 0;
    memcpy(buf - kept, h->left, kept);
    return feed(e, c, (char *)buf - kept, kept + n, now) != 0 ? -1 : 0;
}

static void h1_eof(Engine *e, conn_t *c, uint64_t now) {
    h1_t *h = c->s;
    if (h->ps == P_UNTIL_CLOSE) {
        h->ps = P_DONE;
        h1_done(e, c, now);
        conn_close(e, c);
        next(e, c, now, 0, 0);
        return;
    }
    int code = h->ps == P_HEAD ? C_HEAD : h->ps == P_LENGTH ? C_LENGTH : C_CHUNKED;
    int64_t a = code == C_HEAD ? (int64_t)h->nleft : (int64_t)h->body_bytes;
    int64_t b = code == C_LENGTH ? (int64_t)(h->body_bytes + h->remaining) : 0;
    record_fail(e, h->r.entry, K_CLOSED, code, 1, a, b, NULL, 0);
    conn_close(e, c);
    h->nleft = 0;
    next(e, c, now, 1, 0);
}

/* a new user: its first request (arrival rate: when one is due; paced: at `fraction`
   of a period from now) */
static void h1_add(Engine *e, conn_t *c, uint64_t now, double fraction) {
    h1_t *h = c->s;
    if (e->stop_sending) {
        park(e, c);
    } else if (e->mode == MODE_ARRIVAL) {
        make_idle(e, c); /* its connection opens with its first request */
    } else if (e->mode == MODE_PACED) {
        h->r.due = now + (uint64_t)(fraction * (double)e->period_ns);
        conn_wake(e, c, h->r.due);
    } else {
        h1_start(e, c, now);
    }
}

static void h1_scan(Engine *e, conn_t *c, uint64_t now) {
    h1_t *h = c->s;
    if (h->busy && c->state == T_UP && now >= h->r.deadline) h1_fail(e, c, now, K_TIMEOUT, 0, NULL, 0);
}

/* the user left (or the run is over): what was in flight is dropped */
static void h1_end(Engine *e, conn_t *c, uint64_t now, int run_over) {
    (void)now;
    (void)run_over;
    h1_t *h = c->s;
    if (h->busy) request_end(e, &h->r); /* its ticket's count freed, no longer busy */
    h->busy = 0;
}

static void h1_release(Engine *e, conn_t *c) {
    (void)e;
    free(((h1_t *)c->s)->left);
}

static int h1_configure(Engine *e, PyObject *options) {
    return http_configure(e, options, sizeof(http_t));
}

/* take(): a new connection per request: their setup times, each interval */
static int h1_take(Engine *e, PyObject *d, stats_t *s, int entry) {
    (void)entry;
    if (!HTTP(e)->close_each) return 0;
    if (put_object(d, "connect", hist_tuple(&s->h[H_CONNECT])) < 0) return -1;
    return e->tls_ctx ? put_object(d, "handshake", hist_tuple(&s->h[H_HANDSHAKE])) : 0;
}

const session_t SESSION_HTTP1 = {
    .name = "http1", .alpn = "\x08http/1.1", .size = sizeof(h1_t), .scan_ns = 5000000,
    .configure = h1_configure, .add = h1_add, .start = h1_start, .up = h1_send,
    .read = h1_read, .eof = h1_eof, .fail = h1_fail,
    .due = requests_due, .scan = h1_scan, .end = h1_end,
    .release = h1_release, .free = http_free, .take = h1_take,
};
