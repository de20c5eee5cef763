/*
 * ws.c: WebSocket (RFC 6455), framed once: the upgrade with Sec-WebSocket-Key/Accept,
 * masked client frames, the frame reader (ws_parse: a pure function over ws_rx_t,
 * fragmented messages with control frames between their fragments) serve this file's
 * session and MQTT over WebSocket (mqtt.c) alike. The accept key is SHA-1 and base64:
 * OpenSSL's SHA-1 where the engine is built with it, the fallback below where it is not
 * (no security rests on it). Our own framing rather than wslay (FINDINGS: a client's
 * framing is small, wslay would drive the I/O through callbacks and buffer every message).
 *
 * The session: echo (closed loop or paced), publish and subscribe through a relay
 * (fan-out), or idle (a ping now and then); ping/pong; the close handshake. A message
 * carries a 40-character ASCII header: the sender's id (8 hex), its sequence (16 hex)
 * and its send time (16 hex, CLOCK_MONOTONIC ns: the same clock for every process of the
 * host). The echo server returns it, the relay forwards it, so a round trip (echo) and a
 * publish-to-receipt delay (fan-out) need no per-message state; only a message's first
 * HEAD_BYTES are kept, the rest is counted, never buffered. Each (receiver, sender)
 * stream of sequences is accounted in an acct_t. With correlate by order an answer is
 * the oldest message in flight on its connection, for servers that answer with their own
 * bytes. A failed connection comes back after its back-off.
 */
#include "engine.h"

#define HEAD_BYTES 40 /* a message's correlation header: 8 hex id, 16 hex seq, 16 hex ns */
#define ORDER_RING 64 /* correlate by order: messages in flight per connection */
enum { WAIT_OPENING = 1, WAIT_MESSAGE, WAIT_PING }; /* K_TIMEOUT's keys: what was waited for */
/* protocol errors (K_PROTOCOL's keys): the frame reader's */
enum { E_WS_MASKED = 1, E_WS_RSV, E_WS_OPCODE, E_WS_CONTROL_LONG, E_WS_CONTROL_FRAGMENTED,
       E_WS_CONTINUATION, E_WS_INTERLEAVED, E_WS_LENGTH, E_WS_CLOSE_PAYLOAD };

/* the engine's part */
typedef struct {
    char *path[4]; /* by role */
    char *tail;    /* the opening request's headers after ours: Host, the user's */
    uint64_t interval_ns, ping_ns, close_ns;
    int binary, order;
    uint8_t *message; /* the message template, unmasked (its header rewritten) */
    size_t message_len;
    uint8_t *subscribe; /* a subscriber's first message (NULL: none) */
    size_t subscribe_len;
    uint8_t *needle; /* expect= (NULL: none) */
    uint32_t *kmp;
    size_t needle_len;
    uint8_t *sbuf; /* a frame being written: 14 bytes of head room, then its payload */
    long long echo_sent, echo_distinct, pub_sent, sub_distinct, subs; /* atomic: owed */
    uint64_t server_closes, closes_clean, close_timeouts, abnormal, pings, pongs;
} ws_engine_t;
#define W(e) ((ws_engine_t *)(e)->cfg)

/* a connection's part */
typedef struct {
    char *head; /* the upgrade's answer being read, freed once whole */
    size_t nhead;
    char accept[29]; /* the Sec-WebSocket-Accept expected */
    ws_rx_t rx;
    uint8_t close_sent, close_got, nmhead, needle_found;
    char mhead[HEAD_BYTES]; /* the message being read: its first bytes */
    uint64_t msg_len;
    uint32_t needle_at; /* expect=: bytes of the needle matched so far (KMP) */
    uint64_t seq;      /* the next message's sequence */
    uint64_t inflight; /* echo: sent, not answered (this connection's life) */
    uint64_t ping_at;  /* idle: our ping's send time (0: none out) */
    uint64_t *order;   /* correlate by order: send times of what is in flight */
    uint8_t order_head, order_len;
    acct_t *acct;  /* echo: its messages */
    struct pubacct {
        uint32_t pub;
        acct_t a;
    } *pubs; /* subscriber: one per publisher heard */
    uint32_t npubs, cappubs;
} ws_t;

/* ------------------------------------------------------------------ SHA-1, base64 */

#ifndef WEBPERF_TLS /* OpenSSL's SHA1 where built with it; this where not */
static uint32_t rol(uint32_t x, int n) { return x << n | x >> (32 - n); }

static void SHA1(const uint8_t *msg, size_t len, uint8_t out[20]) {
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
#endif

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

/* the Sec-WebSocket-Accept a key must get: base64(SHA-1(key + GUID)), 28 characters */
void ws_accept_of(const char *key, char out[29]) {
    char joined[128];
    uint8_t digest[20];
    int n = snprintf(joined, sizeof joined, "%s258EAFA5-E914-47DA-95CA-C5AB0DC85B11", key);
    SHA1((const uint8_t *)joined, (size_t)n, digest);
    base64(digest, 20, out);
}

/* ------------------------------------------------------------------ frames */

/* a frame's head (FIN as given, masked with key when key is not NULL): its length */
size_t ws_frame_head(uint8_t head[14], int op, int fin, size_t n, const uint8_t key[4]) {
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
void ws_mask(uint8_t *p, size_t n, const uint8_t key[4], size_t offset) {
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

/* Frames as they arrive, in any pieces: 0, a protocol error (E_WS_*), or -1 (a sink said
   stop). A fragmented message may carry control frames between its fragments. */
int ws_parse(ws_rx_t *rx, const uint8_t *d, size_t n, const ws_sink_t *sink, void *ctx) {
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

/* one masked frame (FIN set) of `op` around the n bytes at payload, which has 14 bytes
   of room before it (the head goes there: one write) and is masked in place */
int ws_send(Engine *e, conn_t *c, int op, uint8_t *payload, size_t n, uint64_t now) {
    uint8_t head[14], key[4];
    uint64_t r = engine_random(e); /* a load generator's mask: not a secret */
    memcpy(key, &r, 4);
    size_t h = ws_frame_head(head, op, 1, n, key);
    memcpy(payload - h, head, h);
    ws_mask(payload, n, key, 0);
    return conn_write(e, c, payload - h, h + n, now);
}

/* the upgrade: GET `path` with a new key (its accept kept), then `tail`'s headers (Host,
   a subprotocol, the user's); 0, or -1 (the connection failed, handled) */
int ws_upgrade(Engine *e, conn_t *c, const char *path, const char *tail, char accept[29],
               uint64_t now) {
    uint8_t raw[16];
    char key[25];
    for (int i = 0; i < 16; i += 8) {
        uint64_t x = engine_random(e);
        memcpy(raw + i, &x, 8);
    }
    base64(raw, 16, key); /* 24 characters */
    ws_accept_of(key, accept);
    char extra[160];
    snprintf(extra, sizeof extra,
             "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
             "Sec-WebSocket-Version: 13\r\n",
             key);
    return http_get(e, c, path, extra, tail, now);
}

/* the upgrade's answer, collected across reads in *head: > 0 upgraded (what follows is
   at d + that - 1), 0 more must come, -1 refused (the session's failure, handled) */
long ws_upgraded(Engine *e, conn_t *c, char **head, size_t *nhead, const char accept[29],
                 const uint8_t *d, size_t n, uint64_t now) {
    size_t used = 0;
    long end = head_collect(head, nhead, d, n, &used);
    const char *h = *head, *v;
    size_t hn = (size_t)end, vlen;
    int key = 0, status = end > 0 ? status_of(h, hn) : 0;
    size_t len = 0;
    if (end < 0) key = HS_HEAD_LONG;
    else if (end == 0) return 0;
    else if (status < 0) key = HS_BAD_STATUS_LINE, len = hn < 40 ? hn : 40;
    else if (status != 101) key = status, len = line_len(h, hn);
    else if (!head_header(h, hn, "\r\nupgrade:", &v, &vlen) || !has_token_ci(v, vlen, "websocket") ||
             !head_header(h, hn, "\r\nconnection:", &v, &vlen) || !has_token_ci(v, vlen, "upgrade"))
        key = HS_NO_UPGRADE, len = hn;
    else if (!head_header(h, hn, "\r\nsec-websocket-accept:", &v, &vlen) || vlen != 28 ||
             memcmp(v, accept, 28) != 0)
        key = HS_BAD_ACCEPT, len = hn;
    if (key) { e->session->fail(e, c, now, K_WS_HANDSHAKE, key, len ? h : NULL, len); return -1; }
    free(*head);
    *head = NULL;
    *nhead = 0;
    return (long)used + 1;
}

/* ------------------------------------------------------------------ messages */

static void hex_put(uint8_t *out, uint64_t v, int digits) {
    static const char hex[] = "0123456789abcdef";
    for (int i = digits - 1; i >= 0; i--, v >>= 4) out[i] = (uint8_t)hex[v & 15];
}

static int hex_get(const char *in, int digits, uint64_t *v) {
    uint64_t x = 0;
    for (int i = 0; i < digits; i++) {
        int d = hex_value((uint8_t)in[i]);
        if (d < 0) return -1;
        x = x << 4 | (uint64_t)d;
    }
    *v = x;
    return 0;
}

/* a frame of op around n bytes copied from p (NULL: already in the engine's buffer) */
static int ws_frame(Engine *e, conn_t *c, int op, const uint8_t *p, size_t n, uint64_t now) {
    if (p) memcpy(W(e)->sbuf + 14, p, n);
    return ws_send(e, c, op, W(e)->sbuf + 14, n, now);
}

/* the next data message of an echo or publisher connection: 0, or -1 (conn gone) */
static int send_message(Engine *e, conn_t *c, uint64_t intended, uint64_t now) {
    ws_engine_t *w = W(e);
    ws_t *s = c->s;
    uint8_t *p = w->sbuf + 14;
    memcpy(p, w->message, w->message_len); /* the template: masking ate the last copy */
    hex_put(p, (uint64_t)c->ident, 8);
    hex_put(p + 8, s->seq, 16);
    hex_put(p + 24, now, 16);
    pthread_mutex_lock(&e->lock);
    e->cur->sent++;
    if (w->interval_ns) hist_record(&e->cur->h[H_LAG], now > intended ? (now - intended) / 1000 : 0);
    pthread_mutex_unlock(&e->lock);
    s->seq++;
    e->ledger.sent++;
    if (c->role == R_PUB) {
        ATOMIC_ADD(w->pub_sent, 1);
    } else {
        ATOMIC_ADD(w->echo_sent, 1);
        if (s->inflight++ == 0) c->deadline = now + e->timeout_ns;
        if (w->order) s->order[(s->order_head + s->order_len++) % ORDER_RING] = now;
    }
    return ws_frame(e, c, w->binary ? 2 : 1, NULL, w->message_len, now);
}

/* a subscriber's accounting for publisher `pub` (sorted by publisher; NULL: no memory) */
static acct_t *pub_acct(ws_t *s, uint32_t pub) {
    size_t lo = 0, hi = s->npubs;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (s->pubs[mid].pub == pub) return &s->pubs[mid].a;
        if (s->pubs[mid].pub < pub) lo = mid + 1;
        else hi = mid;
    }
    size_t cap = s->cappubs;
    if (grow((void **)&s->pubs, &cap, s->npubs + 1, sizeof *s->pubs)) return NULL;
    s->cappubs = (uint32_t)cap;
    memmove(&s->pubs[lo + 1], &s->pubs[lo], (s->npubs - lo) * sizeof *s->pubs);
    memset(&s->pubs[lo], 0, sizeof *s->pubs);
    s->pubs[lo].pub = pub;
    s->npubs++;
    return &s->pubs[lo].a;
}

/* a whole data message: its header read, its figures recorded; 0, or -1 (conn gone) */
static int on_message(Engine *e, conn_t *c, uint64_t now) {
    ws_engine_t *w = W(e);
    ws_t *s = c->s;
    uint64_t len = s->msg_len;
    int expected = !w->needle || s->needle_found;
    uint8_t nhead = s->nmhead;
    s->nmhead = s->needle_found = 0;
    s->msg_len = 0;
    s->needle_at = 0;
    e->ledger.received++;
    note_receipt(e, now);
    if (c->role == R_IDLE || c->role == R_PUB) return 0; /* not ours to account */
    uint64_t sender = 0, seq = 0, sent = 0;
    if (w->order && c->role == R_ECHO) { /* the oldest message in flight is answered */
        if (!s->order_len) {
            record_fail(e, 0, K_UNMATCHED, 1, 1, 0, 0, s->mhead, nhead);
            return 0;
        }
        sent = s->order[s->order_head];
        s->order_head = (uint8_t)((s->order_head + 1) % ORDER_RING);
        s->order_len--;
        seq = s->acct->top; /* answers arrive in order: each one the next */
    } else if (nhead < HEAD_BYTES || hex_get(s->mhead, 8, &sender) ||
               hex_get(s->mhead + 8, 16, &seq) || hex_get(s->mhead + 24, 16, &sent)) {
        record_fail(e, 0, K_UNMATCHED, 0, 1, 0, 0, s->mhead, nhead);
        return 0;
    }
    acct_t *a = c->role == R_ECHO ? s->acct : pub_acct(s, (uint32_t)sender);
    if (a) {
        uint64_t before = a->distinct;
        acct_seen(a, seq);
        long long *owed = c->role == R_ECHO ? &w->echo_distinct : &w->sub_distinct;
        if (a->distinct > before) ATOMIC_ADD(*owed, 1);
    }
    if (expected) record_ok(e, now > sent ? (now - sent) / 1000 : 0, len);
    else record_fail(e, 0, K_UNEXPECTED_BODY, 0, 1, 0, 0, s->mhead, nhead);
    if (c->role == R_ECHO) {
        if (s->inflight) s->inflight--;
        c->deadline = now + e->timeout_ns; /* progress */
        if (!w->interval_ns && !s->inflight && !e->stop_sending)
            return send_message(e, c, now, now); /* closed loop: the next one */
    }
    return 0;
}

/* ------------------------------------------------------------------ the reader's sinks */

static int sink_payload(void *ctx, const uint8_t *p, size_t n) {
    Engine *e = ((at_t *)ctx)->e;
    ws_t *s = ((at_t *)ctx)->c->s;
    if (s->nmhead < HEAD_BYTES) {
        size_t room = (size_t)HEAD_BYTES - s->nmhead, m = room < n ? room : n;
        memcpy(s->mhead + s->nmhead, p, m);
        s->nmhead = (uint8_t)(s->nmhead + m);
    }
    s->msg_len += n;
    if (W(e)->needle && !s->needle_found) { /* Knuth-Morris-Pratt across frames and reads */
        const uint8_t *needle = W(e)->needle;
        uint32_t at = s->needle_at;
        for (size_t i = 0; i < n && !s->needle_found; i++) {
            while (at && needle[at] != p[i]) at = W(e)->kmp[at - 1];
            if (needle[at] == p[i]) at++;
            s->needle_found = at == W(e)->needle_len;
        }
        s->needle_at = at;
    }
    return 0;
}

static int sink_message(void *ctx, int op) {
    (void)op;
    at_t *x = ctx;
    return on_message(x->e, x->c, x->now) < 0 || x->c->fd < 0 ? -1 : 0;
}

/* the close handshake's frame: code 1005 (none) goes without a body */
static int send_close(Engine *e, conn_t *c, int code, uint64_t now) {
    ws_t *s = c->s;
    uint8_t body[2] = {(uint8_t)(code >> 8), (uint8_t)code};
    s->close_sent = c->closing = 1;
    c->deadline = now + W(e)->close_ns;
    return ws_frame(e, c, 8, body, code == 1005 ? 0 : 2, now);
}

/* a whole control frame: 0, or -1 (stop reading: closed or gone) */
static int sink_control(void *ctx, int op, const uint8_t *p, size_t n) {
    at_t *x = ctx;
    Engine *e = x->e;
    conn_t *c = x->c;
    uint64_t now = x->now;
    ws_t *s = c->s;
    if (op == 9) { /* ping: the same bytes back */
        W(e)->pings++;
        return ws_frame(e, c, 10, p, n, now) < 0 ? -1 : 0;
    }
    if (op == 10) { /* pong: an idle connection's ping answered */
        W(e)->pongs++;
        uint64_t sent = 0;
        for (size_t i = 0; i < n; i++) sent = sent << 8 | p[i];
        if (c->role == R_IDLE && s->ping_at && n == 8 && sent == s->ping_at) {
            record_ok(e, (now - sent) / 1000, 0);
            s->ping_at = 0;
            note_receipt(e, now);
        }
        return 0;
    }
    if (n == 1) {
        e->session->fail(e, c, now, K_PROTOCOL, E_WS_CLOSE_PAYLOAD, (const char *)p, n);
        return -1;
    }
    int code = n >= 2 ? p[0] << 8 | p[1] : 1005; /* 1005: no code */
    s->close_got = 1;
    if (s->close_sent) { /* our close answered: done */
        W(e)->closes_clean++;
        conn_retire(e, c, now, 0, 1);
        return -1;
    }
    if (code == 1000 || code == 1005) {
        W(e)->server_closes++;
    } else {
        W(e)->abnormal++;
        record_fail(e, 0, K_WS_CLOSE, code, 1, 0, 0, (const char *)p + 2, n - 2);
    }
    send_close(e, c, code, now); /* and the server ends TCP */
    return -1;
}

static const ws_sink_t CONN_SINK = {sink_payload, sink_message, sink_control};

/* ------------------------------------------------------------------ the session */

/* a random phase in [0, period): connections do not send in step */
static uint64_t phase(Engine *e, uint64_t period) {
    return (uint64_t)((double)(engine_random(e) % 1000000) / 1e6 * (double)period);
}

/* the connection is open (or the publishers may start): its messages begin */
static void ws_start(Engine *e, conn_t *c, uint64_t now) {
    ws_engine_t *w = W(e);
    if (!c->opened || c->closing || e->stop_sending) return;
    uint64_t period = c->role == R_IDLE ? w->ping_ns : w->interval_ns;
    if (c->role == R_SUB) {
        if (w->subscribe) ws_frame(e, c, 1, w->subscribe, w->subscribe_len, now);
    } else if (c->role == R_ECHO && !period) {
        send_message(e, c, now, now);
    } else if (period && (c->role != R_PUB || e->publishing)) {
        c->due = now + phase(e, period);
        conn_wake(e, c, c->due);
    }
}

static void ws_up(Engine *e, conn_t *c, uint64_t now) {
    ws_t *s = c->s;
    memset(&s->rx, 0, sizeof s->rx);
    s->nmhead = s->needle_found = s->close_sent = s->close_got = 0;
    s->msg_len = s->inflight = s->ping_at = 0;
    s->needle_at = 0;
    s->order_head = s->order_len = 0;
    c->reading = 1;
    c->deadline = now + e->timeout_ns;
    ws_upgrade(e, c, W(e)->path[c->role], W(e)->tail, s->accept, now);
}

static int ws_read(Engine *e, conn_t *c, uint8_t *d, size_t n, uint64_t now) {
    ws_t *s = c->s;
    if (!c->opened) {
        long used = ws_upgraded(e, c, &s->head, &s->nhead, s->accept, d, n, now);
        if (used <= 0) return (int)used;
        conn_opened(e, c, now);
        ws_start(e, c, now);
        if (c->fd < 0) return -1;
        d += used - 1;
        n -= (size_t)used - 1;
    }
    if (s->close_got) return 0; /* nothing is read after a close */
    at_t ctx = {e, c, now};
    int r = ws_parse(&s->rx, d, n, &CONN_SINK, &ctx);
    if (r > 0) /* the offending frame head */
        e->session->fail(e, c, now, K_PROTOCOL, r, (const char *)s->rx.hdr, s->rx.nhdr);
    return c->fd < 0 || r ? -1 : 0;
}

/* a failure: a reconnect after the back-off (the server closed first after its close
   frame: a clean end) */
static void ws_fail(Engine *e, conn_t *c, uint64_t now, int kind, int key, const char *raw,
                    size_t len) {
    ws_t *s = c->s;
    if (kind == K_WS_CLOSE || kind == K_WS_ABNORMAL || kind == K_WS_CLOSE_TIMEOUT) W(e)->abnormal++;
    if (kind == K_IO_ERRNO && s->close_got && (key == ECONNRESET || key == EPIPE))
        conn_retire(e, c, now, 0, 1);
    else
        conn_lost(e, c, now, kind, key, raw, len, 1);
}

static void ws_eof(Engine *e, conn_t *c, uint64_t now) {
    ws_t *s = c->s;
    if (s->close_got) conn_retire(e, c, now, 0, 1); /* the clean end: the server closed TCP */
    else if (!c->opened) ws_fail(e, c, now, K_CLOSED, 1, NULL, 0);
    else ws_fail(e, c, now, K_WS_ABNORMAL, 1006, NULL, 0);
}

static void ws_due(Engine *e, conn_t *c, uint64_t now) {
    ws_engine_t *w = W(e);
    ws_t *s = c->s;
    if (!c->opened || c->closing || e->stop_sending) return;
    if (c->role == R_IDLE) {
        c->due += w->ping_ns;
        if (!s->ping_at) {
            uint8_t body[8];
            for (int i = 0; i < 8; i++) body[i] = (uint8_t)(now >> (56 - 8 * i));
            s->ping_at = now;
            c->deadline = now + e->timeout_ns;
            if (ws_frame(e, c, 9, body, 8, now) < 0) return;
        }
        conn_wake(e, c, c->due > now ? c->due : now);
        return;
    }
    if (c->role == R_PUB && !e->publishing) return;
    if (w->order && s->order_len >= ORDER_RING) { /* as many in flight as it can tell apart */
        conn_wake(e, c, now + 1000000);
        return;
    }
    /* a late schedule is never skipped: due times stay fixed, the lag is recorded */
    uint64_t intended = c->due;
    c->due += w->interval_ns;
    if (send_message(e, c, intended, now) < 0) return;
    conn_wake(e, c, c->due > now ? c->due : now);
}

/* deadlines: the upgrade's answer, a message or ping unanswered, our close unanswered */
static void ws_scan(Engine *e, conn_t *c, uint64_t now) {
    ws_t *s = c->s;
    if (c->state != T_UP || now < c->deadline) return;
    if (c->closing) { /* no close frame (or no end of TCP) in time: we close */
        if (!s->close_got) {
            W(e)->close_timeouts++;
            W(e)->abnormal++;
            record_fail(e, 0, K_WS_CLOSE_TIMEOUT, 0, 1, 0, 0, NULL, 0);
        }
        conn_retire(e, c, now, BACKOFF_NS, 1);
    } else if (!c->opened) {
        ws_fail(e, c, now, K_TIMEOUT, WAIT_OPENING, NULL, 0);
    } else if (c->role == R_ECHO && s->inflight) {
        ws_fail(e, c, now, K_TIMEOUT, WAIT_MESSAGE, NULL, 0);
    } else if (c->role == R_IDLE && s->ping_at) {
        ws_fail(e, c, now, K_TIMEOUT, WAIT_PING, NULL, 0);
    }
}

/* the user left (a close, not waited for), or the end of the run (1000, answered within
   the close timeout); a connection not open yet is dropped */
static void ws_end(Engine *e, conn_t *c, uint64_t now, int run_over) {
    if (!c->opened || c->closing) return;
    send_close(e, c, 1000, now);
    if (!run_over) c->closing = 0;
    else if (c->deadline > e->close_deadline) e->close_deadline = c->deadline;
}

static void ws_add(Engine *e, conn_t *c, uint64_t now, double fraction) {
    (void)fraction;
    ws_t *s = c->s;
    int ok = 1;
    if (c->role == R_ECHO) ok = (s->acct = calloc(1, sizeof(acct_t))) != NULL;
    if (ok && c->role == R_ECHO && W(e)->order) ok = (s->order = calloc(ORDER_RING, 8)) != NULL;
    if (c->role == R_SUB) ATOMIC_ADD(W(e)->subs, 1);
    if (!ok) conn_lost(e, c, now, K_CONNECT_ERRNO, ENOMEM, NULL, 0, 0);
    else if (e->closing_all || e->stop_sending) c->state = T_DONE;
    else conn_connect(e, c, now);
}

static void ws_release(Engine *e, conn_t *c) {
    (void)e;
    ws_t *s = c->s;
    FREE_ALL(s->head, s->acct, s->pubs, s->order);
}

static void ws_free(Engine *e) {
    ws_engine_t *w = W(e);
    if (!w) return;
    FREE_ALL(w->path[0], w->path[1], w->path[2], w->path[3], w->tail, w->message, w->subscribe);
    FREE_ALL(w->needle, w->kmp, w->sbuf, w);
}

/* options: paths (echo, subscriber, publisher, idle), tail (the opening request's
   headers: Host, the user's), message (its template, >= the header), binary,
   interval_s, ping_s, close_timeout_s, expect (bytes every answer contains), subscribe
   (a subscriber's first message), order (correlate by order), max_connecting */
static int ws_configure(Engine *e, PyObject *options) {
    static char *names[] = {"paths",  "tail",    "message",         "binary",
                            "interval_s", "ping_s", "close_timeout_s", "expect",
                            "subscribe",  "order",  "max_connecting",  NULL};
    PyObject *message = NULL, *expect = NULL, *subscribe = NULL;
    const char *paths[4], *tail;
    double interval_s = 0, ping_s = 0, close_s = 10;
    ws_engine_t *w = e->cfg = calloc(1, sizeof(ws_engine_t));
    if (!w) return PyErr_NoMemory(), -1;
    e->max_connecting = 256;
    if (parse_options(options, "(ssss)s|OpdddOOpL", names, &paths[0], &paths[1], &paths[2],
                      &paths[3], &tail, &message, &w->binary, &interval_s, &ping_s, &close_s,
                      &expect, &subscribe, &w->order, &e->max_connecting) < 0 ||
        copy_bytes(message, &w->message, &w->message_len) < 0 ||
        copy_bytes(subscribe, &w->subscribe, &w->subscribe_len) < 0 ||
        copy_bytes(expect, &w->needle, &w->needle_len) < 0)
        return -1;
    if (interval_s < 0 || ping_s < 0 || close_s <= 0 || e->max_connecting < 1 ||
        (w->message && w->message_len < HEAD_BYTES) ||
        (w->needle && (w->needle_len == 0 || w->needle_len > MAX_NEEDLE))) {
        PyErr_SetString(PyExc_ValueError, "bad interval, ping, close timeout or gate; a message "
                                          "is at least its 40-byte header, expect 1 to 1024 bytes");
        return -1;
    }
    w->interval_ns = (uint64_t)(interval_s * 1e9);
    w->ping_ns = (uint64_t)(ping_s * 1e9);
    w->close_ns = (uint64_t)(close_s * 1e9);
    for (int i = 0; i < 4; i++)
        if (!(w->path[i] = strdup(paths[i]))) return PyErr_NoMemory(), -1;
    if (w->needle) { /* the KMP failure table */
        if (!(w->kmp = calloc(w->needle_len, sizeof(uint32_t)))) return PyErr_NoMemory(), -1;
        for (size_t i = 1, k = 0; i < w->needle_len; i++) {
            while (k && w->needle[i] != w->needle[k]) k = w->kmp[k - 1];
            if (w->needle[i] == w->needle[k]) k++;
            w->kmp[i] = (uint32_t)k;
        }
    }
    size_t most = w->message_len > w->subscribe_len ? w->message_len : w->subscribe_len;
    w->tail = strdup(tail);
    w->sbuf = malloc(14 + (most > 125 ? most : 125));
    if (!w->tail || !w->sbuf) return PyErr_NoMemory(), -1;
    e->hists |= 1u << H_LAG;
    return 0;
}

/* state(): what is owed (echo: sent, not answered; fan-out: every subscriber each
   published message) */
static int ws_state(Engine *e, PyObject *d) {
    ws_engine_t *w = W(e);
    const char *keys[] = {"echo_sent", "echo_distinct", "pub_sent", "sub_distinct", "subs"};
    long long *values[] = {&w->echo_sent, &w->echo_distinct, &w->pub_sent, &w->sub_distinct,
                           &w->subs};
    for (int i = 0; i < 5; i++)
        if (put_int(d, keys[i], ATOMIC_GET(*values[i])) < 0) return -1;
    return 0;
}

/* finish(): the closes, pings, and every message's account: echo's, each publisher's
   count, each subscriber's (summed over the publishers it heard) */
static int ws_ledger(Engine *e, PyObject *d) {
    ws_engine_t *w = W(e);
    acct_t echo = {0};
    uint64_t echo_sent = 0;
    PyObject *published = PyList_New(0), *subscribers = PyList_New(0);
    for (size_t i = 0; published && subscribers && i < e->nconns; i++) {
        conn_t *c = e->conns[i];
        ws_t *s = c ? c->s : NULL;
        PyObject *row = NULL;
        if (!c) continue;
        if (c->role == R_ECHO && s->acct) {
            echo_sent += s->seq;
            for (int k = 0; k < 4; k++) (&echo.distinct)[k] += (&s->acct->distinct)[k];
        } else if (c->role == R_PUB) {
            row = Py_BuildValue("(LK)", c->ident, (unsigned long long)s->seq);
            if (!row || PyList_Append(published, row) < 0) Py_CLEAR(published);
        } else if (c->role == R_SUB) {
            acct_t sum = {0};
            for (uint32_t p = 0; p < s->npubs; p++)
                for (int k = 0; k < 4; k++) (&sum.distinct)[k] += (&s->pubs[p].a.distinct)[k];
            row = acct_tuple(0, &sum);
            if (!row || PyList_Append(subscribers, row) < 0) Py_CLEAR(subscribers);
        }
        Py_XDECREF(row);
    }
    if (!published || !subscribers) {
        Py_XDECREF(published);
        Py_XDECREF(subscribers);
        return -1;
    }
    static const char *const COUNTED[] = {"server_closes", "closes_clean", "close_timeouts",
                                          "abnormal", "pings", "pongs"};
    for (int i = 0; i < 6; i++)
        if (put_int(d, COUNTED[i], (long long)(&w->server_closes)[i]) < 0) return -1;
    return put_object(d, "published", published) || put_object(d, "subscribers", subscribers) ||
                   put_object(d, "echo", acct_tuple(echo_sent, &echo))
               ? -1
               : 0;
}

const session_t SESSION_WS = {
    .name = "ws", .alpn = "\x08http/1.1", .size = sizeof(ws_t),
    .many_idle = 1, .scan_ns = 20000000, .configure = ws_configure, .add = ws_add,
    .start = ws_start, .up = ws_up, .read = ws_read,
    .eof = ws_eof, .fail = ws_fail, .due = ws_due, .scan = ws_scan,
    .end = ws_end, .release = ws_release, .free = ws_free, .state = ws_state, .ledger = ws_ledger,
};

/* ------------------------------------------------------------------ the tests' doors */

typedef struct {
    PyObject *events;
    size_t keep, len;
    uint8_t head[HEAD_BYTES * 8];
    size_t nhead;
} parse_ctx_t;

static int t_payload(void *ctx, const uint8_t *p, size_t n) {
    parse_ctx_t *x = ctx;
    size_t room = x->keep - x->nhead, m = room < n ? room : n;
    memcpy(x->head + x->nhead, p, m);
    x->nhead += m;
    x->len += n;
    return 0;
}

static int t_append(parse_ctx_t *x, PyObject *row) {
    int bad = !row || PyList_Append(x->events, row) < 0;
    Py_XDECREF(row);
    return bad ? -1 : 0;
}

static int t_message(void *ctx, int op) {
    parse_ctx_t *x = ctx;
    PyObject *row = Py_BuildValue("(siny#)", "message", op, (Py_ssize_t)x->len, x->head,
                                  (Py_ssize_t)x->nhead);
    x->len = x->nhead = 0;
    return t_append(x, row);
}

static int t_control(void *ctx, int op, const uint8_t *p, size_t n) {
    return t_append(ctx, Py_BuildValue("(siy#)", "control", op, p, (Py_ssize_t)n));
}

/* ws_parse(chunks, keep=40) -> [("message", op, length, first bytes) | ("control", op,
   payload) | ("error", code)]: the engine's frame reader over these pieces */
PyObject *ws_parse_door(PyObject *unused, PyObject *args) {
    (void)unused;
    PyObject *chunks;
    Py_ssize_t keep = HEAD_BYTES;
    if (!PyArg_ParseTuple(args, "O|n", &chunks, &keep)) return NULL;
    if (keep < 0 || keep > HEAD_BYTES * 8) return PyErr_Format(PyExc_ValueError, "keep: 0 to 320");
    PyObject *seq = PySequence_Fast(chunks, "a sequence of bytes");
    if (!seq) return NULL;
    parse_ctx_t x = {.events = PyList_New(0), .keep = (size_t)keep};
    ws_rx_t rx = {.need = 2};
    static const ws_sink_t sink = {t_payload, t_message, t_control};
    for (Py_ssize_t i = 0; x.events && i < PySequence_Fast_GET_SIZE(seq); i++) {
        char *buf;
        Py_ssize_t n;
        if (PyBytes_AsStringAndSize(PySequence_Fast_GET_ITEM(seq, i), &buf, &n) < 0) {
            Py_CLEAR(x.events);
            break;
        }
        int r = ws_parse(&rx, (const uint8_t *)buf, (size_t)n, &sink, &x);
        if (r < 0 || (r > 0 && t_append(&x, Py_BuildValue("(si)", "error", r)) < 0))
            Py_CLEAR(x.events);
        if (r) break;
    }
    Py_DECREF(seq);
    return x.events;
}

/* ws_frame(op, payload, key=None, fin=True) -> bytes: a frame as the engine writes it */
PyObject *ws_frame_door(PyObject *unused, PyObject *args) {
    (void)unused;
    int op, fin = 1;
    Py_buffer payload;
    PyObject *key_obj = Py_None;
    if (!PyArg_ParseTuple(args, "iy*|Op", &op, &payload, &key_obj, &fin)) return NULL;
    uint8_t key[4], head[14];
    const uint8_t *k = NULL;
    if (key_obj != Py_None) {
        char *kb;
        Py_ssize_t kn;
        if (PyBytes_AsStringAndSize(key_obj, &kb, &kn) < 0 || kn != 4) {
            PyBuffer_Release(&payload);
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "key: 4 bytes");
            return NULL;
        }
        memcpy(key, kb, 4);
        k = key;
    }
    size_t h = ws_frame_head(head, op, fin, (size_t)payload.len, k);
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(h + (size_t)payload.len));
    if (out) {
        uint8_t *p = (uint8_t *)PyBytes_AS_STRING(out);
        memcpy(p, head, h);
        memcpy(p + h, payload.buf, (size_t)payload.len);
        if (k) ws_mask(p + h, (size_t)payload.len, k, 0);
    }
    PyBuffer_Release(&payload);
    return out;
}

PyObject *ws_accept_door(PyObject *unused, PyObject *arg) {
    (void)unused;
    const char *key = PyUnicode_AsUTF8(arg);
    if (!key) return NULL;
    if (strlen(key) > 64) return PyErr_Format(PyExc_ValueError, "a key of at most 64 characters");
    char out[29];
    ws_accept_of(key, out);
    return PyUnicode_FromString(out);
}
