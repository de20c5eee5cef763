/*
 * _stream_ws.c: WebSocket (RFC 6455) on the stream loop's transport (_streamloop.h).
 *
 * Our own framing rather than wslay (FINDINGS: a client's framing is small, wslay would
 * drive the I/O through callbacks and buffer every message): the upgrade with
 * Sec-WebSocket-Key/Accept (SHA-1 and base64 here, so builds without OpenSSL speak
 * WebSocket too; no security rests on it), masked client frames, text or binary, the
 * frame reader (ws_parse: a pure function over ws_rx_t, fragmented messages with
 * control frames between their fragments), ping/pong, the close handshake.
 *
 * A message carries a 40-character ASCII header: the sender's id (8 hex), its sequence
 * (16 hex) and its send time (16 hex, CLOCK_MONOTONIC ns: the same clock for every
 * process of the host). The echo server returns it, the relay forwards it, so a round
 * trip (echo) and a publish-to-receipt delay (fan-out) need no per-message state; only
 * a message's first HEAD_BYTES are kept, the rest is counted, never buffered. Each
 * (receiver, sender) stream of sequences is accounted in an acct_t. With correlate by
 * order (e->order) an answer is the oldest message in flight on its connection, for
 * servers that answer with their own bytes.
 */
#include "_streamloop.h"

/* ------------------------------------------------------------------ SHA-1, base64 */

static uint32_t rol(uint32_t x, int n) { return x << n | x >> (32 - n); }

static void sha1(const uint8_t *msg, size_t len, uint8_t out[20]) {
    uint32_t h[5] = {0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0};
    size_t total = ((len + 8) / 64 + 1) * 64;
    uint8_t block[64];
    for (size_t at = 0; at < total; at += 64) {
        for (size_t i = 0; i < 64; i++) {
            size_t k = at + i;
            block[i] = k < len ? msg[k] : k == len ? 0x80 : 0;
        }
        if (at + 64 == total)
            for (int i = 0; i < 8; i++) block[56 + i] = (uint8_t)((uint64_t)len * 8 >> (56 - 8 * i));
        uint32_t w[80];
        for (int i = 0; i < 16; i++)
            w[i] = (uint32_t)block[4 * i] << 24 | (uint32_t)block[4 * i + 1] << 16 |
                   (uint32_t)block[4 * i + 2] << 8 | block[4 * i + 3];
        for (int i = 16; i < 80; i++) w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
        uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
        for (int i = 0; i < 80; i++) {
            uint32_t f, k;
            if (i < 20) f = (b & c) | (~b & d), k = 0x5A827999;
            else if (i < 40) f = b ^ c ^ d, k = 0x6ED9EBA1;
            else if (i < 60) f = (b & c) | (b & d) | (c & d), k = 0x8F1BBCDC;
            else f = b ^ c ^ d, k = 0xCA62C1D6;
            uint32_t t = rol(a, 5) + f + e + k + w[i];
            e = d, d = c, c = rol(b, 30), b = a, a = t;
        }
        h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e;
    }
    for (int i = 0; i < 20; i++) out[i] = (uint8_t)(h[i / 4] >> (24 - 8 * (i % 4)));
}

static size_t base64(const uint8_t *in, size_t n, char *out) {
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0) |
                     (i + 2 < n ? in[i + 2] : 0);
        out[o++] = abc[v >> 18 & 63];
        out[o++] = abc[v >> 12 & 63];
        out[o++] = i + 1 < n ? abc[v >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? abc[v & 63] : '=';
    }
    out[o] = 0;
    return o;
}

static const char WS_GUID[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/* the Sec-WebSocket-Accept a key must get: base64(SHA-1(key + GUID)), 28 characters */
HIDDEN void ws_accept_of(const char *key, char out[29]) {
    char joined[128];
    uint8_t digest[20];
    int n = snprintf(joined, sizeof joined, "%s%s", key, WS_GUID);
    sha1((const uint8_t *)joined, (size_t)n, digest);
    base64(digest, 20, out);
}

/* ------------------------------------------------------------------ frames */

/* a frame's head (FIN as given, masked with key when key is not NULL): its length */
HIDDEN size_t ws_frame_head(uint8_t head[14], int op, int fin, size_t n, const uint8_t key[4]) {
    size_t h = 0;
    uint8_t mask = key ? 0x80 : 0;
    head[h++] = (uint8_t)((fin ? 0x80 : 0) | (op & 0x0f));
    if (n < 126) {
        head[h++] = (uint8_t)(mask | n);
    } else if (n < 65536) {
        head[h++] = mask | 126;
        head[h++] = (uint8_t)(n >> 8);
        head[h++] = (uint8_t)n;
    } else {
        head[h++] = mask | 127;
        for (int i = 7; i >= 0; i--) head[h++] = (uint8_t)((uint64_t)n >> (8 * i));
    }
    if (key) {
        memcpy(head + h, key, 4);
        h += 4;
    }
    return h;
}

/* mask (or unmask) in place, from byte `offset` of the payload: eight bytes a step */
HIDDEN void ws_mask(uint8_t *p, size_t n, const uint8_t key[4], size_t offset) {
    uint8_t k[8];
    for (int i = 0; i < 8; i++) k[i] = key[(offset + (size_t)i) & 3];
    uint64_t k8;
    memcpy(&k8, k, 8);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        w ^= k8;
        memcpy(p + i, &w, 8);
    }
    for (; i < n; i++) p[i] ^= k[i & 7];
}

/* Frames as they arrive, in any pieces: 0, a protocol error (E_*), or -1 (a sink said
   stop). A fragmented message may carry control frames between its fragments. */
HIDDEN int ws_parse(ws_rx_t *rx, const uint8_t *d, size_t n, const ws_sink_t *sink, void *ctx) {
    size_t pos = 0;
    if (rx->need == 0) rx->need = 2;
    while (pos < n) {
        if (rx->nhdr < rx->need) { /* a frame head, possibly across reads */
            rx->hdr[rx->nhdr++] = d[pos++];
            if (rx->nhdr == 2) {
                if (rx->hdr[1] & 0x80) return E_WS_MASKED;
                int len7 = rx->hdr[1] & 0x7f;
                rx->need = (uint8_t)(2 + (len7 == 126 ? 2 : len7 == 127 ? 8 : 0));
            }
            if (rx->nhdr < rx->need) continue;
            uint8_t b0 = rx->hdr[0];
            int len7 = rx->hdr[1] & 0x7f;
            uint64_t len = (uint64_t)len7;
            if (len7 == 126) len = (uint64_t)rx->hdr[2] << 8 | rx->hdr[3];
            if (len7 == 127) {
                len = 0;
                for (int i = 2; i < 10; i++) len = len << 8 | rx->hdr[i];
                if (len >> 63) return E_WS_LENGTH;
            }
            rx->fin = b0 >> 7;
            rx->op = b0 & 0x0f;
            if (b0 & 0x70) return E_WS_RSV;
            if (rx->op >= 8) {
                if (rx->op > 10) return E_WS_OPCODE;
                if (!rx->fin) return E_WS_CONTROL_FRAGMENTED;
                if (len > 125) return E_WS_CONTROL_LONG;
                rx->nctl = 0;
            } else if (rx->op == 0) {
                if (!rx->msg_op) return E_WS_CONTINUATION;
            } else if (rx->op <= 2) {
                if (rx->msg_op) return E_WS_INTERLEAVED;
                rx->msg_op = rx->op;
            } else {
                return E_WS_OPCODE;
            }
            rx->remaining = len;
            if (len) continue;
        } else { /* payload */
            size_t take = n - pos;
            if (take > rx->remaining) take = (size_t)rx->remaining;
            if (rx->op >= 8) {
                memcpy(rx->ctl + rx->nctl, d + pos, take);
                rx->nctl = (uint8_t)(rx->nctl + take);
            } else if (sink->payload(ctx, d + pos, take) < 0) {
                return -1;
            }
            pos += take;
            rx->remaining -= take;
            if (rx->remaining) continue;
        }
        /* the frame is complete */
        rx->nhdr = 0;
        rx->need = 2;
        if (rx->op >= 8) {
            if (sink->control(ctx, rx->op, rx->ctl, rx->nctl) < 0) return -1;
        } else if (rx->fin) {
            int op = rx->msg_op;
            rx->msg_op = 0;
            if (sink->message(ctx, op) < 0) return -1;
        }
    }
    return 0;
}

/* one masked frame (FIN set) of `op` around `payload` (NULL: already in e->sbuf + 14) */
static int ws_send_frame(Engine *e, conn_t *c, int op, const uint8_t *payload, size_t n,
                         uint64_t now) {
    uint8_t head[14], key[4];
    uint64_t r = engine_random(e); /* a load generator's mask: not a secret */
    memcpy(key, &r, 4);
    size_t h = ws_frame_head(head, op, 1, n, key);
    uint8_t *frame = e->sbuf + 14 - h; /* the head right before the payload: one write */
    if (payload) memcpy(e->sbuf + 14, payload, n);
    memcpy(frame, head, h);
    ws_mask(e->sbuf + 14, n, key, 0);
    return conn_write(e, c, frame, h + n, now);
}

/* ------------------------------------------------------------------ messages */

static void hex_put(uint8_t *out, uint64_t v, int digits) {
    static const char hex[] = "0123456789abcdef";
    for (int i = digits - 1; i >= 0; i--, v >>= 4) out[i] = (uint8_t)hex[v & 15];
}

static int hex_get(const char *in, int digits, uint64_t *v) {
    uint64_t x = 0;
    for (int i = 0; i < digits; i++) {
        char ch = in[i];
        int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
        if (d < 0) return -1;
        x = x << 4 | (uint64_t)d;
    }
    *v = x;
    return 0;
}

/* the next data message of an echo or publisher connection: 0, or -1 (conn gone) */
static int ws_send_message(Engine *e, conn_t *c, uint64_t intended, uint64_t now) {
    uint8_t *p = e->sbuf + 14;
    memcpy(p, e->message, e->message_len); /* the template: masking ate the last copy */
    hex_put(p, c->id, 8);
    hex_put(p + 8, c->seq, 16);
    hex_put(p + 24, now, 16);
    if (e->interval_ns) record_lag(e, now > intended ? (now - intended) / 1000 : 0);
    c->seq++;
    e->ledger.sent++;
    if (c->role == R_PUB) {
        ATOMIC_ADD(e->ledger.pub_sent, 1);
    } else {
        ATOMIC_ADD(e->ledger.echo_sent, 1);
        if (c->inflight++ == 0) c->deadline = now + e->timeout_ns;
        if (e->order) {
            c->order[(c->order_head + c->order_len) % ORDER_RING] = now;
            c->order_len++;
        }
    }
    pthread_mutex_lock(&e->lock);
    e->cur->sent++;
    pthread_mutex_unlock(&e->lock);
    return ws_send_frame(e, c, e->binary ? 2 : 1, NULL, e->message_len, now);
}

static int ws_send_ping(Engine *e, conn_t *c, uint64_t now) {
    uint8_t body[8];
    for (int i = 0; i < 8; i++) body[i] = (uint8_t)(now >> (56 - 8 * i));
    c->ping_at = now;
    c->deadline = now + e->timeout_ns;
    return ws_send_frame(e, c, 9, body, 8, now);
}

/* a subscriber's accounting for publisher `pub` (sorted by publisher; NULL: no memory) */
static acct_t *pub_acct(conn_t *c, uint32_t pub) {
    size_t lo = 0, hi = c->npubs;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (c->pubs[mid].pub == pub) return &c->pubs[mid].a;
        if (c->pubs[mid].pub < pub) lo = mid + 1;
        else hi = mid;
    }
    size_t cap = c->cappubs;
    if (grow((void **)&c->pubs, &cap, c->npubs + 1, sizeof(pubacct_t))) return NULL;
    c->cappubs = (uint32_t)cap;
    memmove(&c->pubs[lo + 1], &c->pubs[lo], (c->npubs - lo) * sizeof(pubacct_t));
    memset(&c->pubs[lo], 0, sizeof(pubacct_t));
    c->pubs[lo].pub = pub;
    c->npubs++;
    return &c->pubs[lo].a;
}

/* a whole data message: its header read, its figures recorded; 0, or -1 (conn gone) */
static int ws_message(Engine *e, conn_t *c, uint64_t now) {
    uint64_t len = c->msg_len;
    int expected = !e->needle || c->needle_found;
    uint8_t nhead = c->nmhead;
    c->nmhead = 0;
    c->msg_len = 0;
    c->needle_at = 0;
    c->needle_found = 0;
    e->ledger.received++;
    note_receipt(e, now);
    if (c->role == R_IDLE || c->role == R_PUB) return 0; /* not ours to account */
    uint64_t sender = 0, seq = 0, sent = 0;
    if (e->order && c->role == R_ECHO) { /* the oldest message in flight is answered */
        if (!c->order_len) {
            record_fail(e, K_UNMATCHED, 1, c->mhead, nhead);
            return 0;
        }
        sent = c->order[c->order_head];
        c->order_head = (uint8_t)((c->order_head + 1) % ORDER_RING);
        c->order_len--;
        seq = c->acct->top; /* answers arrive in order: each one the next */
    } else if (nhead < HEAD_BYTES || hex_get(c->mhead, 8, &sender) ||
               hex_get(c->mhead + 8, 16, &seq) || hex_get(c->mhead + 24, 16, &sent)) {
        record_fail(e, K_UNMATCHED, 0, c->mhead, nhead);
        return 0;
    }
    uint64_t took = now > sent ? (now - sent) / 1000 : 0;
    acct_t *a = c->role == R_ECHO ? c->acct : pub_acct(c, (uint32_t)sender);
    if (a) {
        uint64_t before = a->distinct;
        acct_seen(a, seq);
        if (a->distinct > before) {
            if (c->role == R_ECHO) ATOMIC_ADD(e->ledger.echo_distinct, 1);
            else ATOMIC_ADD(e->ledger.sub_distinct, 1);
        }
    }
    if (expected) record_ok(e, took, len);
    else record_fail(e, K_UNEXPECTED_BODY, 0, c->mhead, nhead);
    if (c->role == R_ECHO) {
        if (c->inflight) c->inflight--;
        c->deadline = now + e->timeout_ns; /* progress */
        if (!e->interval_ns && !c->inflight && !e->stop_sending)
            return ws_send_message(e, c, now, now); /* closed loop: the next one */
    }
    return 0;
}

/* ------------------------------------------------------------------ the reader's sinks */

/* the reader's context: whose bytes, read when */
typedef struct {
    Engine *e;
    conn_t *c;
    uint64_t now;
} sink_ctx_t;

static int sink_payload(void *ctx, const uint8_t *p, size_t n) {
    conn_t *c = ((sink_ctx_t *)ctx)->c;
    Engine *e = ((sink_ctx_t *)ctx)->e;
    if (c->nmhead < HEAD_BYTES) {
        size_t room = (size_t)HEAD_BYTES - c->nmhead, m = room < n ? room : n;
        memcpy(c->mhead + c->nmhead, p, m);
        c->nmhead = (uint8_t)(c->nmhead + m);
    }
    c->msg_len += n;
    if (e->needle && !c->needle_found) { /* Knuth-Morris-Pratt across frames and reads */
        uint32_t at = c->needle_at;
        for (size_t i = 0; i < n; i++) {
            while (at && e->needle[at] != p[i]) at = e->kmp[at - 1];
            if (e->needle[at] == p[i]) at++;
            if (at == e->needle_len) {
                c->needle_found = 1;
                break;
            }
        }
        c->needle_at = at;
    }
    return 0;
}

static int sink_message(void *ctx, int op) {
    (void)op;
    sink_ctx_t *s = ctx;
    if (ws_message(s->e, s->c, s->now) < 0 || s->c->fd < 0) return -1;
    return 0;
}

/* a whole control frame: 0, or -1 (stop reading: closed or gone) */
static int sink_control(void *ctx, int op, const uint8_t *p, size_t n) {
    conn_t *c = ((sink_ctx_t *)ctx)->c;
    Engine *e = ((sink_ctx_t *)ctx)->e;
    uint64_t now = ((sink_ctx_t *)ctx)->now;
    if (op == 9) { /* ping: the same bytes back */
        e->ledger.pings++;
        return ws_send_frame(e, c, 10, p, n, now) < 0 ? -1 : 0;
    }
    if (op == 10) { /* pong: an idle connection's ping answered */
        e->ledger.pongs++;
        if (c->role == R_IDLE && c->ping_at && n == 8) {
            uint64_t sent = 0;
            for (int i = 0; i < 8; i++) sent = sent << 8 | p[i];
            if (sent == c->ping_at) {
                record_ok(e, (now - sent) / 1000, 0);
                c->ping_at = 0;
                note_receipt(e, now);
            }
        }
        return 0;
    }
    int code = 1005; /* close: no code */
    if (n == 1) {
        fail(e, c, now, K_PROTOCOL, E_WS_CLOSE_PAYLOAD, (const char *)p, n);
        return -1;
    }
    if (n >= 2) code = p[0] << 8 | p[1];
    c->close_got = 1;
    if (c->close_sent) { /* our close answered: done */
        e->ledger.closes_clean++;
        retire(e, c, now, 0);
        return -1;
    }
    if (code == 1000 || code == 1005) {
        e->ledger.server_closes++;
    } else {
        record_fail(e, K_WS_CLOSE, code, (const char *)p + 2, n - 2);
    }
    uint8_t body[2] = {(uint8_t)(code >> 8), (uint8_t)code};
    c->close_sent = 1;
    c->state = S_CLOSING;
    c->deadline = now + e->close_ns;
    ws_send_frame(e, c, 8, body, code == 1005 ? 0 : 2, now); /* and the server ends TCP */
    return -1;
}

static const ws_sink_t CONN_SINK = {sink_payload, sink_message, sink_control};

/* ------------------------------------------------------------------ the protocol */

static void ws_open(Engine *e, conn_t *c, uint64_t now) {
    uint8_t raw[16];
    char key[25], extra[160];
    for (int i = 0; i < 16; i += 8) {
        uint64_t x = engine_random(e);
        memcpy(raw + i, &x, 8);
    }
    base64(raw, 16, key); /* 24 characters */
    ws_accept_of(key, c->accept);
    snprintf(extra, sizeof extra,
             "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
             "Sec-WebSocket-Version: 13\r\n",
             key);
    memset(&c->rx, 0, sizeof c->rx);
    c->rx.need = 2;
    c->nmhead = 0;
    c->msg_len = 0;
    c->needle_at = c->needle_found = 0;
    c->close_sent = c->close_got = 0;
    c->inflight = 0;
    c->ping_at = 0;
    c->order_head = c->order_len = 0;
    write_request(e, c, extra, now);
}

/* a random phase in [0, period): connections do not send in step */
static uint64_t phase(Engine *e, uint64_t period) {
    return (uint64_t)((double)(engine_random(e) % 1000000) / 1e6 * (double)period);
}

/* the connection is open (or the publishers may start): its messages begin */
HIDDEN void ws_start_sending(Engine *e, conn_t *c, uint64_t now) {
    if (c->state != S_OPEN || e->stop_sending) return;
    switch (c->role) {
    case R_ECHO:
        if (e->interval_ns) {
            c->due = now + phase(e, e->interval_ns);
            conn_wake(e, c, c->due);
        } else {
            ws_send_message(e, c, now, now);
        }
        break;
    case R_PUB:
        if (!e->publishing) break;
        c->due = now + phase(e, e->interval_ns);
        conn_wake(e, c, c->due);
        break;
    case R_IDLE:
        if (!e->ping_ns) break;
        c->due = now + phase(e, e->ping_ns);
        conn_wake(e, c, c->due);
        break;
    case R_SUB:
        if (e->subscribe) ws_send_frame(e, c, 1, e->subscribe, e->subscribe_len, now);
        break;
    }
}

static int ws_data(Engine *e, conn_t *c, const uint8_t *d, size_t n, uint64_t now) {
    if (c->state == S_OPENING) {
        size_t used = 0;
        long end = head_collect(c, d, n, &used);
        if (end < 0) {
            fail(e, c, now, K_WS_HANDSHAKE, HS_HEAD_LONG, NULL, 0);
            return -1;
        }
        if (end == 0) return 0;
        const char *h = c->head, *v;
        size_t hn = (size_t)end, vlen;
        int status = status_of(h, hn);
        if (status < 0) {
            fail(e, c, now, K_WS_HANDSHAKE, HS_BAD_STATUS_LINE, h, hn < 40 ? hn : 40);
            return -1;
        }
        if (status != 101) {
            fail(e, c, now, K_WS_HANDSHAKE, status, h, line_len(h, hn));
            return -1;
        }
        if (!head_header(h, hn, "\r\nupgrade:", &v, &vlen) || !has_token_ci(v, vlen, "websocket") ||
            !head_header(h, hn, "\r\nconnection:", &v, &vlen) || !has_token_ci(v, vlen, "upgrade")) {
            fail(e, c, now, K_WS_HANDSHAKE, HS_NO_UPGRADE, h, hn);
            return -1;
        }
        if (!head_header(h, hn, "\r\nsec-websocket-accept:", &v, &vlen) || vlen != 28 ||
            memcmp(v, c->accept, 28) != 0) {
            fail(e, c, now, K_WS_HANDSHAKE, HS_BAD_ACCEPT, h, hn);
            return -1;
        }
        conn_opened(e, c, now);
        ws_start_sending(e, c, now);
        if (c->fd < 0) return -1;
        d += used;
        n -= used;
        if (!n) return 0;
    }
    if (c->state == S_CLOSING && c->close_got) return 0; /* nothing is read after a close */
    sink_ctx_t ctx = {e, c, now};
    int r = ws_parse(&c->rx, d, n, &CONN_SINK, &ctx);
    if (r > 0) { /* the offending frame head */
        fail(e, c, now, K_PROTOCOL, r, (const char *)c->rx.hdr, c->rx.nhdr);
        return -1;
    }
    return c->fd < 0 ? -1 : 0;
}

static void ws_eof(Engine *e, conn_t *c, uint64_t now) {
    if (c->state == S_CLOSING && c->close_got) { /* the clean end: the server closed TCP */
        retire(e, c, now, 0);
        return;
    }
    if (c->state != S_OPEN && c->state != S_CLOSING) {
        fail(e, c, now, K_CLOSED, 1, NULL, 0);
        return;
    }
    fail(e, c, now, K_WS_ABNORMAL, 1006, NULL, 0);
}

static void ws_due(Engine *e, conn_t *c, uint64_t now) {
    if (c->state != S_OPEN || e->stop_sending) return;
    if (c->role == R_IDLE) {
        c->due += e->ping_ns;
        if (!c->ping_at && ws_send_ping(e, c, now) < 0) return;
        conn_wake(e, c, c->due > now ? c->due : now);
        return;
    }
    if (c->role == R_PUB && !e->publishing) return;
    if (e->order && c->order_len >= ORDER_RING) { /* as many in flight as it can tell apart */
        conn_wake(e, c, now + 1000000);
        return;
    }
    /* a late schedule is never skipped: due times stay fixed, the lag is recorded */
    uint64_t intended = c->due;
    c->due += e->interval_ns;
    if (ws_send_message(e, c, intended, now) < 0) return;
    conn_wake(e, c, c->due > now ? c->due : now);
}

/* the end of the run: a close (1000) the server must answer within the close timeout */
HIDDEN void ws_close(Engine *e, conn_t *c, int code, uint64_t now) {
    uint8_t body[2] = {(uint8_t)(code >> 8), (uint8_t)code};
    c->close_sent = 1;
    c->state = S_CLOSING;
    c->deadline = now + e->close_ns;
    ws_send_frame(e, c, 8, body, 2, now);
}

HIDDEN const proto_t PROTO_WS = {"websocket", ws_open, ws_data, ws_eof, ws_due};
