/*
 * mqtt.c: MQTT 3.1.1 and 5 on the engine, over TCP, TLS (mqtts://) or WebSocket (ws://,
 * wss://: the upgrade and the binary frames are ws.c's).
 *
 * A publisher connects (CONNECT/CONNACK), then publishes seed 002's JSON telemetry to
 * <topic>/<clientId> at QoS 0, 1 or 2: paced (one message per period, a late one sent at
 * once and counted late when a whole period behind) or flat out (up to `window`
 * messages in flight, the next sent as soon as one is acknowledged: PUBACK at QoS 1,
 * PUBREC -> PUBREL -> PUBCOMP at QoS 2; QoS 0 while the socket takes more). A subscriber
 * subscribes to a filter and acknowledges what it gets (PUBACK; PUBREC, then PUBCOMP on
 * PUBREL), counting messages and their end-to-end latency (the payload's sentAt).
 * PINGREQ keeps idle connections alive. A connection that fails is not reopened: the
 * paho user's clients are not either.
 *
 * Accounting as swarm/child/paho.py's: every message has the client's next seq (from 0);
 * a message is outstanding until acknowledged (QoS 1, 2). At the end (finish) each
 * client's published count and outstanding seqs are the ledger. The latency of a QoS 1/2
 * message is publish -> its final acknowledgement.
 */
#include "engine.h"

#define OUT_HIGH (64 * 1024)     /* stop generating messages above this many unsent bytes */
#define MAX_PACKET (1024 * 1024) /* a bigger packet from the broker is a protocol error */
#define ROOM 14                  /* before the packets built: a WebSocket frame's head */
enum { F_ACK = 1, F_COMP, F_REFUSED }; /* waiting for PUBACK/PUBREC, for PUBCOMP; refused */

typedef struct {
    uint32_t seq;
    uint16_t pid;
    uint8_t state, timed_out;
    uint64_t sent_ns;
} flight_t;

/* the engine's part */
typedef struct {
    int qos, keepalive_s, clean_session, v5; /* v5: MQTT 5.0 (protocol level 5), else 3.1.1 */
    size_t window;
    uint64_t period_ns;
    char *topic, *prefix, *filter, *ws_path, *ws_tail; /* ws_path: over WebSocket */
    size_t topic_len, prefix_len, filter_len;
    uint8_t *out; /* the packets being built for one connection: ROOM, then them */
    size_t nout, capout;
    hist_t all_lag; /* every paced message's lag (the ledger's) */
    uint64_t all_late;
    long long outstanding, subscribed, publish_errors; /* atomic */
    double first_sent;
} mqtt_t;
#define M(e) ((mqtt_t *)(e)->cfg)

/* a connection's part */
typedef struct {
    uint32_t seq; /* the next message's: what was published */
    uint16_t next_pid;
    uint8_t up; /* CONNACK accepted */
    flight_t *fl;
    size_t nfl, capfl, live; /* live: in flight, not timed out (the window's) */
    uint8_t *in;             /* an unfinished packet */
    size_t nin, capin;
    uint64_t rng, last_tx;
    char *head; /* over WebSocket: the upgrade's answer being read */
    size_t nhead;
    char accept[29];
    ws_rx_t rx;
} mq_t;

static inline double wall_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ------------------------------------------------------------------ packets */

static inline uint8_t *put_varint(uint8_t *p, size_t n) {
    do {
        uint8_t b = n % 128;
        n /= 128;
        *p++ = n ? b | 128 : b;
    } while (n);
    return p;
}

static inline uint8_t *put_u16(uint8_t *p, unsigned v) {
    *p++ = (uint8_t)(v >> 8);
    *p++ = (uint8_t)v;
    return p;
}

static uint8_t *put_str(uint8_t *p, const char *s, size_t n) {
    memcpy(p, s, n);
    return p + n;
}

/* room for n more bytes of packets: where they go (NULL: no memory) */
static uint8_t *out_room(Engine *e, size_t n) {
    mqtt_t *m = M(e);
    if (grow((void **)&m->out, &m->capout, ROOM + m->nout + n, 1)) return NULL;
    return m->out + ROOM + m->nout;
}

/* what was built goes (over WebSocket, in one binary frame): 0, or -1 (failed) */
static int flush(Engine *e, conn_t *c, uint64_t now) {
    mqtt_t *m = M(e);
    size_t n = m->nout;
    if (!n) return 0;
    m->nout = 0;
    ((mq_t *)c->s)->last_tx = now;
    if (m->ws_path) return ws_send(e, c, 2, m->out + ROOM, n, now);
    return conn_write(e, c, m->out + ROOM, n, now);
}

static void put_ack(Engine *e, uint8_t type, unsigned pid) {
    uint8_t *p = out_room(e, 4);
    if (!p) return;
    p[0] = type;
    p[1] = 2;
    put_u16(p + 2, pid);
    M(e)->nout += 4;
}

static void put_connect(Engine *e, conn_t *c) {
    mqtt_t *m = M(e);
    char id[64];
    int sub = c->role == R_SUB, idlen = snprintf(id, sizeof id, "-%lld", c->ident);
    size_t idtotal = m->prefix_len + (size_t)idlen + (sub ? 4 : 0);
    size_t rem = 10 + 2 + idtotal + (size_t)m->v5; /* MQTT 5: an empty property list */
    uint8_t *p = out_room(e, rem + 5), *s = p;
    if (!p) return;
    *p++ = 0x10;
    p = put_varint(p, rem);
    p = put_str(p, m->v5 ? "\0\4MQTT\5" : "\0\4MQTT\4", 7);
    /* the publishers' sessions as asked; a subscriber's is persistent (as the observer's) */
    *p++ = sub ? 0 : m->clean_session ? 2 : 0;
    p = put_u16(p, (unsigned)m->keepalive_s);
    if (m->v5) *p++ = 0; /* properties */
    p = put_u16(p, (unsigned)idtotal);
    p = put_str(p, m->prefix, m->prefix_len);
    if (sub) p = put_str(p, "-sub", 4);
    p = put_str(p, id, (size_t)idlen);
    m->nout += (size_t)(p - s);
}

static void put_subscribe(Engine *e) {
    mqtt_t *m = M(e);
    size_t rem = 2 + 2 + m->filter_len + 1 + (size_t)m->v5;
    uint8_t *p = out_room(e, rem + 5), *s = p;
    if (!p) return;
    *p++ = 0x82;
    p = put_varint(p, rem);
    p = put_u16(p, 1);
    if (m->v5) *p++ = 0; /* properties */
    p = put_u16(p, (unsigned)m->filter_len);
    p = put_str(p, m->filter, m->filter_len);
    *p++ = (uint8_t)m->qos;
    m->nout += (size_t)(p - s);
}

static uint8_t *put_uint(uint8_t *p, uint64_t v) {
    char tmp[24];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n) *p++ = (uint8_t)tmp[--n];
    return p;
}

/* a value in tenths between lo and hi tenths, as "12.3" (the client's own xorshift) */
static uint8_t *put_tenths(uint8_t *p, uint64_t *rng, unsigned lo, unsigned hi) {
    uint64_t x = *rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *rng = x;
    unsigned v = lo + (unsigned)(x % (hi - lo + 1));
    p = put_uint(p, v / 10);
    *p++ = '.';
    *p++ = (uint8_t)('0' + v % 10);
    return p;
}

/* seed 002's message, as swarm/mqtt.payload words it (sentAt: Unix seconds) */
static size_t put_payload(conn_t *c, uint8_t *p, double sent_at) {
    mq_t *q = c->s;
    uint8_t *s = p;
    uint64_t us = (uint64_t)(sent_at * 1e6 + 0.5);
    p = put_uint(put_str(p, "{\"clientId\":", 12), (uint64_t)c->ident);
    p = put_uint(put_str(p, ",\"seq\":", 7), q->seq);
    p = put_uint(put_str(p, ",\"sentAt\":", 10), us / 1000000);
    *p++ = '.';
    for (int i = 5; i >= 0; i--, us /= 10) p[i] = (uint8_t)('0' + us % 10);
    p += 6;
    p = put_tenths(put_str(p, ",\"temp\":", 8), &q->rng, 200, 400);
    p = put_tenths(put_str(p, ",\"humidity\":", 12), &q->rng, 100, 900);
    p = put_tenths(put_str(p, ",\"light\":", 9), &q->rng, 0, 1000);
    *p++ = '}';
    return (size_t)(p - s);
}

static flight_t *find_flight(mq_t *q, unsigned pid, size_t *index) {
    for (size_t i = 0; i < q->nfl; i++)
        if (q->fl[i].pid == pid && q->fl[i].state != F_REFUSED) { *index = i; return &q->fl[i]; }
    return NULL;
}

/* one message built: 0, or -1 (no memory, or 65,535 in flight) */
static int publish_one(Engine *e, conn_t *c, uint64_t now) {
    mqtt_t *m = M(e);
    mq_t *q = c->s;
    unsigned pid = 0;
    size_t at;
    if (m->qos) {
        if (q->nfl >= 65535) return -1;
        do q->next_pid = (uint16_t)(q->next_pid % 65535 + 1);
        while (q->nfl && find_flight(q, q->next_pid, &at));
        pid = q->next_pid;
        if (grow((void **)&q->fl, &q->capfl, q->nfl + 1, sizeof(flight_t))) return -1;
    }
    uint8_t *p = out_room(e, 5 + 2 + m->topic_len + 32 + 2 + 200), *s = p, body[200], idtxt[24];
    if (!p) return -1;
    double sent_at = wall_s();
    size_t blen = put_payload(c, body, sent_at);
    size_t idlen = (size_t)(put_uint(idtxt, (uint64_t)c->ident) - idtxt);
    size_t tlen = m->topic_len + 1 + idlen;
    *p++ = (uint8_t)(0x30 | (m->qos << 1));
    p = put_varint(p, 2 + tlen + (m->qos ? 2 : 0) + (size_t)m->v5 + blen);
    p = put_u16(p, (unsigned)tlen);
    p = put_str(p, m->topic, m->topic_len);
    *p++ = '/';
    p = put_str(p, (char *)idtxt, idlen);
    if (m->qos) p = put_u16(p, pid);
    if (m->v5) *p++ = 0; /* properties */
    p = put_str(p, (char *)body, blen);
    m->nout += (size_t)(p - s);
    if (m->first_sent == 0) m->first_sent = sent_at;
    if (m->qos) {
        q->fl[q->nfl++] = (flight_t){q->seq, (uint16_t)pid, F_ACK, 0, now};
        q->live++;
        ATOMIC_ADD(m->outstanding, 1);
    } else {
        pthread_mutex_lock(&e->lock);
        e->cur->ok++;
        e->cur->bytes += blen;
        hist_record(&e->cur->h[H_LATENCY], 0);
        pthread_mutex_unlock(&e->lock);
    }
    q->seq++;
    return 0;
}

/* flat out: publish while the window (QoS 1, 2) or the send buffer (QoS 0) allows; QoS 0
   comes back next turn while the socket takes everything */
static void pump(Engine *e, conn_t *c, uint64_t now) {
    mqtt_t *m = M(e);
    mq_t *q = c->s;
    if (!q->up || c->role == R_SUB || m->period_ns || e->stop_sending) return;
    size_t high = m->qos ? OUT_HIGH : OUT_HIGH / 4;
    while ((!m->qos || q->live < m->window) && c->wlen - c->wpos + m->nout < high)
        if (publish_one(e, c, now) < 0) break;
    if (flush(e, c, now) == 0 && !m->qos && !c->wblocked) conn_wake(e, c, now + 1);
}

/* ------------------------------------------------------------------ what the broker says */

/* a failure ends the connection (no reconnect: as the paho user's); what it was
   building is dropped */
static void mqtt_fail(Engine *e, conn_t *c, uint64_t now, int kind, int key, const char *raw,
                      size_t len) {
    M(e)->nout = 0;
    conn_lost(e, c, now, kind, key, raw, len, 0);
}


static void acked(Engine *e, mq_t *q, size_t i, uint64_t now) {
    flight_t *f = &q->fl[i];
    uint64_t us = (now - f->sent_ns) / 1000;
    if (!f->timed_out) q->live--;
    q->fl[i] = q->fl[--q->nfl];
    ATOMIC_ADD(M(e)->outstanding, -1);
    pthread_mutex_lock(&e->lock);
    e->cur->ok++;
    hist_record(&e->cur->h[H_LATENCY], us);
    pthread_mutex_unlock(&e->lock);
}

/* a message for a subscriber: counted, its end-to-end latency from sentAt */
static void received(Engine *e, const uint8_t *body, size_t n) {
    static const char key[] = "\"sentAt\":";
    double latency = -1;
    const uint8_t *at = memmem(body, n, key, sizeof key - 1);
    if (at) {
        char num[32];
        size_t j = (size_t)(at - body) + sizeof key - 1, k = 0;
        while (j < n && k < sizeof num - 1 && (body[j] == '.' || (body[j] >= '0' && body[j] <= '9')))
            num[k++] = (char)body[j++];
        num[k] = 0;
        if (k) latency = wall_s() - strtod(num, NULL);
    }
    pthread_mutex_lock(&e->lock);
    e->cur->received++;
    e->cur->received_bytes += n;
    if (latency >= 0) hist_record(&e->cur->h[H_E2E], (uint64_t)(latency * 1e6));
    pthread_mutex_unlock(&e->lock);
}

/* MQTT 5: the broker refused a message (a PUBACK/PUBREC reason >= 0x80): it leaves the
   window and the outstanding count, and stays in the ledger unacknowledged */
static void refused(Engine *e, mq_t *q, flight_t *f, unsigned reason) {
    if (!f->timed_out) q->live--;
    f->state = F_REFUSED;
    ATOMIC_ADD(M(e)->outstanding, -1);
    record_fail(e, 0, K_REFUSED, (int)(reason & 255), 1, 0, 0, NULL, 0);
}

/* MQTT 5: the property list at b[at..n): where it ends, or 0 if malformed */
static size_t skip_properties(const uint8_t *b, size_t at, size_t n) {
    size_t len = 0, mult = 1;
    for (int k = 0; k < 4; k++, at++, mult *= 128) {
        if (at >= n) return 0;
        len += (size_t)(b[at] & 127) * mult;
        if (!(b[at] & 128)) return at + 1 + len <= n ? at + 1 + len : 0;
    }
    return 0;
}

static void start_publishing(Engine *e, conn_t *c, uint64_t now) {
    if (c->role == R_SUB) {
        put_subscribe(e);
    } else if (M(e)->period_ns) { /* the first at its phase (now, when that is past) */
        if (c->due < now) c->due = now;
        conn_wake(e, c, c->due);
    } else {
        pump(e, c, now);
    }
}

/* one packet from the broker: 0, 1 (the connection ended, handled), -1 a protocol error */
static int on_packet(Engine *e, conn_t *c, uint8_t type, const uint8_t *b, size_t n, uint64_t now) {
    mqtt_t *m = M(e);
    mq_t *q = c->s;
    unsigned pid = n >= 2 ? (unsigned)(b[0] << 8 | b[1]) : 0;
    int reason = (m->v5 ? n < 2 : n != 2) ? -2 : n > 2 && b[2] >= 0x80 ? b[2] : -1;
    size_t i;
    flight_t *f = NULL;
    switch (type >> 4) {
    case 2: /* CONNACK (MQTT 5: a reason code and properties) */
        if (q->up || (m->v5 ? n < 3 : n != 2)) return -1;
        if (b[1] != 0) { /* refused: its return code is the error kind */
            mqtt_fail(e, c, now, K_CONNACK, b[1], NULL, 0);
            return 1;
        }
        q->up = 1;
        conn_opened(e, c, now);
        start_publishing(e, c, now);
        return 0;
    case 4: /* PUBACK (MQTT 5: a reason code may follow) */
        if (reason == -2) return -1;
        if ((f = find_flight(q, pid, &i)) && f->state == F_ACK && m->qos == 1) {
            if (reason >= 0) refused(e, q, f, (unsigned)reason);
            else acked(e, q, i, now);
        }
        return 0;
    case 5: /* PUBREC: release it (MQTT 5: unless it says the broker refused it) */
        if (reason == -2) return -1;
        f = find_flight(q, pid, &i);
        if (f && f->state == F_ACK) {
            if (reason >= 0) refused(e, q, f, (unsigned)reason);
            else f->state = F_COMP;
        }
        if (reason < 0) put_ack(e, 0x62, pid);
        return 0;
    case 7: /* PUBCOMP */
        if (reason == -2) return -1;
        if ((f = find_flight(q, pid, &i)) && f->state == F_COMP) acked(e, q, i, now);
        return 0;
    case 6: /* PUBREL (a subscriber's QoS 2 message): complete it */
        if (reason == -2 || (type & 15) != 2) return -1;
        put_ack(e, 0x70, pid);
        return 0;
    case 3: { /* PUBLISH (a subscriber's) */
        unsigned qos = (type >> 1) & 3;
        if (n < 2 || qos == 3) return -1;
        size_t tlen = (size_t)(b[0] << 8 | b[1]), head = 2 + tlen + (qos ? 2 : 0);
        if (head > n) return -1;
        if (qos) put_ack(e, qos == 1 ? 0x40 : 0x50, (unsigned)(b[2 + tlen] << 8 | b[3 + tlen]));
        if (m->v5 && !(head = skip_properties(b, head, n))) return -1;
        received(e, b + head, n - head);
        return 0;
    }
    case 9: { /* SUBACK (MQTT 5: properties before the reason codes) */
        size_t at = m->v5 ? skip_properties(b, 2, n) : 2;
        if (n < 3 || !at || at >= n || b[at] >= 0x80) return -1;
        ATOMIC_ADD(m->subscribed, 1);
        return 0;
    }
    case 13: /* PINGRESP */
        return 0;
    case 14: /* DISCONNECT from the broker (MQTT 5) */
        if (!m->v5) return -1;
        mqtt_fail(e, c, now, K_CLOSED, 0, NULL, 0);
        return 1;
    default:
        return -1;
    }
}

/* the MQTT stream's bytes: every whole packet handled, the rest kept; 0, or -1 (gone) */
static int on_bytes(Engine *e, conn_t *c, const uint8_t *d, size_t n, uint64_t now) {
    mq_t *q = c->s;
    const uint8_t *p = d, *end = d + n;
    if (q->nin) { /* an unfinished packet from before: joined */
        if (grow((void **)&q->in, &q->capin, q->nin + n, 1)) goto failed;
        memcpy(q->in + q->nin, d, n);
        q->nin += n;
        p = q->in;
        end = p + q->nin;
    }
    while (end - p >= 2) {
        size_t rem = 0, mult = 1, k = 1;
        for (;; k++, mult *= 128) {
            if (k > 4) goto protocol;
            if (p + k >= end) goto partial;
            rem += (size_t)(p[k] & 127) * mult;
            if (!(p[k] & 128)) break;
        }
        if (rem > MAX_PACKET) goto protocol;
        if ((size_t)(end - p) < 1 + k + rem) break;
        int r = on_packet(e, c, p[0], p + 1 + k, rem, now);
        if (r < 0) goto protocol;
        if (r > 0) return -1;
        p += 1 + k + rem;
    }
partial:
    q->nin = (size_t)(end - p);
    if (q->nin && p != q->in) {
        if (grow((void **)&q->in, &q->capin, q->nin, 1)) goto failed;
        memmove(q->in, p, q->nin);
    }
    return 0;
protocol:
    mqtt_fail(e, c, now, K_PROTOCOL, 0, NULL, 0);
    return -1;
failed:
    mqtt_fail(e, c, now, K_IO_ERRNO, ENOMEM, NULL, 0);
    return -1;
}

/* ------------------------------------------------------------------ over WebSocket */

static int frame_payload(void *ctx, const uint8_t *p, size_t n) {
    at_t *x = ctx;
    return on_bytes(x->e, x->c, p, n, x->now);
}

static int frame_message(void *ctx, int op) {
    (void)ctx;
    (void)op;
    return 0;
}

static int frame_control(void *ctx, int op, const uint8_t *p, size_t n) {
    at_t *x = ctx;
    if (op == 8) { /* close */
        mqtt_fail(x->e, x->c, x->now, K_CLOSED, 0, NULL, 0);
        return -1;
    }
    if (op == 9) { /* ping: pong with its payload, after what is built */
        uint8_t pong[ROOM + 125];
        memcpy(pong + ROOM, p, n);
        if (flush(x->e, x->c, x->now) < 0 || ws_send(x->e, x->c, 10, pong + ROOM, n, x->now) < 0)
            return -1;
    }
    return 0;
}

static const ws_sink_t FRAMES = {frame_payload, frame_message, frame_control};

/* ------------------------------------------------------------------ the session */

/* TCP (and TLS) are up: the upgrade first over WebSocket, else CONNECT */
static void mqtt_up(Engine *e, conn_t *c, uint64_t now) {
    mqtt_t *m = M(e);
    mq_t *q = c->s;
    c->reading = 1;
    q->last_tx = now;
    if (m->ws_path) { ws_upgrade(e, c, m->ws_path, m->ws_tail, q->accept, now); return; }
    put_connect(e, c);
    flush(e, c, now);
}

static int mqtt_read(Engine *e, conn_t *c, uint8_t *d, size_t n, uint64_t now) {
    mqtt_t *m = M(e);
    mq_t *q = c->s;
    int r;
    if (!m->ws_path) {
        r = on_bytes(e, c, d, n, now);
    } else {
        if (q->rx.need == 0) { /* the upgrade's answer */
            long used = ws_upgraded(e, c, &q->head, &q->nhead, q->accept, d, n, now);
            if (used <= 0) return (int)used;
            q->rx.need = 2;
            d += used - 1;
            n -= (size_t)used - 1;
            put_connect(e, c);
        }
        at_t ctx = {e, c, now};
        r = ws_parse(&q->rx, d, n, &FRAMES, &ctx);
        if (r > 0) mqtt_fail(e, c, now, K_PROTOCOL, r, NULL, 0);
    }
    if (c->state != T_UP) return -1;
    pump(e, c, now);
    return c->state == T_UP && flush(e, c, now) == 0 ? 0 : -1;
}

static void mqtt_eof(Engine *e, conn_t *c, uint64_t now) {
    mqtt_fail(e, c, now, K_CLOSED, 0, NULL, 0);
}

/* paced: this message's lag; a whole period behind, it is counted late and the schedule
   moves on from now (no burst to catch up); flat out at QoS 0: the next turn's batch */
static void mqtt_due(Engine *e, conn_t *c, uint64_t now) {
    mqtt_t *m = M(e);
    if (e->stop_sending || c->state != T_UP) return;
    if (!m->period_ns) { pump(e, c, now); return; }
    uint64_t lag = now - c->due, next = c->due + m->period_ns;
    pthread_mutex_lock(&e->lock);
    hist_record(&e->cur->h[H_LAG], lag / 1000);
    hist_record(&m->all_lag, lag / 1000);
    if (lag > m->period_ns) {
        e->cur->late++;
        m->all_late++;
        next = now + m->period_ns;
    }
    pthread_mutex_unlock(&e->lock);
    if (publish_one(e, c, now) < 0) ATOMIC_ADD(m->publish_errors, 1);
    c->due = next;
    conn_wake(e, c, next);
    flush(e, c, now);
}

static void mqtt_writable(Engine *e, conn_t *c, uint64_t now) {
    pump(e, c, now);
}

/* the opening's deadline (its CONNACK), the messages' timeouts, keep-alives */
static void mqtt_scan(Engine *e, conn_t *c, uint64_t now) {
    mqtt_t *m = M(e);
    mq_t *q = c->s;
    if (c->state != T_UP) return;
    if (!q->up) {
        if (now - c->started > e->timeout_ns) mqtt_fail(e, c, now, K_CONNECT_TIMEOUT, 0, NULL, 0);
        return;
    }
    uint64_t timeouts = 0;
    for (size_t j = 0; j < q->nfl; j++) {
        flight_t *f = &q->fl[j];
        if (!f->timed_out && now - f->sent_ns > e->timeout_ns) {
            f->timed_out = 1; /* still outstanding; no longer holds a window's place */
            if (f->state != F_REFUSED) q->live--; /* (a refused one left it already) */
            timeouts++;
        }
    }
    if (timeouts) {
        record_fail(e, 0, K_TIMEOUT, 0, timeouts, 0, 0, NULL, 0);
        pump(e, c, now);
        if (c->state != T_UP) return;
    }
    uint8_t *p;
    if (m->keepalive_s && now - q->last_tx > (uint64_t)m->keepalive_s * 500000000ULL &&
        (p = out_room(e, 2))) { /* PINGREQ after half the keep-alive */
        p[0] = 0xC0;
        p[1] = 0;
        m->nout += 2;
        flush(e, c, now);
    }
}

/* the user left, or the run is over: a polite goodbye (DISCONNECT); what was in flight
   stays outstanding */
static void mqtt_end(Engine *e, conn_t *c, uint64_t now, int run_over) {
    (void)run_over;
    uint8_t *p;
    if (!((mq_t *)c->s)->up || !(p = out_room(e, 2))) return;
    p[0] = 0xE0;
    p[1] = 0;
    M(e)->nout += 2;
    flush(e, c, now);
}

static void mqtt_add(Engine *e, conn_t *c, uint64_t now, double fraction) {
    mq_t *q = c->s;
    q->rng = 0x9E3779B97F4A7C15ULL ^ ((uint64_t)c->ident * 0x2545F4914F6CDD1DULL);
    if (!q->rng) q->rng = 1;
    c->due = now + (uint64_t)(fraction * (double)M(e)->period_ns);
    conn_connect(e, c, now);
}

static void mqtt_release(Engine *e, conn_t *c) {
    (void)e;
    mq_t *q = c->s;
    FREE_ALL(q->fl, q->in, q->head);
}

static void mqtt_free(Engine *e) {
    mqtt_t *m = M(e);
    if (m) FREE_ALL(m->topic, m->prefix, m->filter, m->ws_path, m->ws_tail, m->out, m);
}

/* options: qos, period_s (0: flat out), window (in flight per connection), topic,
   client_prefix, keepalive_s, clean_session, filter (a subscriber's), protocol (4: 3.1.1,
   5), websocket (the path of MQTT over WebSocket, "" none) and ws_tail (its upgrade's
   headers after ours: Host, the subprotocol) */
static int mqtt_configure(Engine *e, PyObject *options) {
    static char *names[] = {"qos",           "period_s", "window",   "topic",     "client_prefix",
                            "keepalive_s",   "clean_session", "filter", "protocol", "websocket",
                            "ws_tail",       NULL};
    const char *topic, *prefix, *filter = "", *ws_path = "", *ws_tail = "";
    double period_s = 0;
    Py_ssize_t window = 1;
    int protocol = 4;
    mqtt_t *m = e->cfg = calloc(1, sizeof(mqtt_t));
    if (!m) return PyErr_NoMemory(), -1;
    m->keepalive_s = 60;
    m->clean_session = 1;
    if (parse_options(options, "idnss|ipsiss", names, &m->qos, &period_s, &window, &topic, &prefix,
                      &m->keepalive_s, &m->clean_session, &filter, &protocol, &ws_path, &ws_tail) < 0)
        return -1;
    if (m->qos < 0 || m->qos > 2 || period_s < 0 || window < 1 || window > 65535 ||
        m->keepalive_s < 0 || m->keepalive_s > 65535 || (protocol != 4 && protocol != 5) ||
        strlen(topic) > 1000 || strlen(prefix) > 1000 || strlen(filter) > 1000) {
        PyErr_SetString(PyExc_ValueError, "bad qos, period, window, keep-alive, protocol, or a "
                                          "topic, client prefix or filter too long");
        return -1;
    }
    m->v5 = protocol == 5;
    m->period_ns = (uint64_t)(period_s * 1e9);
    m->window = (size_t)window;
    m->topic_len = strlen(topic);
    m->prefix_len = strlen(prefix);
    m->filter_len = strlen(filter);
    hist_clear(&m->all_lag);
    if (!(m->topic = strdup(topic)) || !(m->prefix = strdup(prefix)) ||
        !(m->filter = strdup(filter)) ||
        (*ws_path && (!(m->ws_path = strdup(ws_path)) || !(m->ws_tail = strdup(ws_tail)))))
        return PyErr_NoMemory(), -1;
    e->hists |= 1u << H_LAG | 1u << H_E2E;
    return 0;
}

/* state(): what is outstanding, subscribers subscribed, messages not built, the first
   message's wall time */
static int mqtt_state(Engine *e, PyObject *d) {
    mqtt_t *m = M(e);
    return put_int(d, "outstanding", ATOMIC_GET(m->outstanding)) ||
                   put_int(d, "subscribed", ATOMIC_GET(m->subscribed)) ||
                   put_int(d, "publish_errors", ATOMIC_GET(m->publish_errors)) ||
                   put_object(d, "first_sent", PyFloat_FromDouble(m->first_sent))
               ? -1
               : 0;
}

/* finish(): every publisher ever added, (client, published, [outstanding seqs]); every
   paced message's lag and how many were a whole period late */
static int mqtt_ledger(Engine *e, PyObject *d) {
    PyObject *clients = PyList_New(0);
    for (size_t i = 0; clients && i < e->nconns; i++) {
        conn_t *c = e->conns[i];
        mq_t *q = c ? c->s : NULL;
        if (!c || c->role == R_SUB) continue;
        PyObject *seqs = PyList_New((Py_ssize_t)q->nfl), *row = NULL;
        for (size_t j = 0; seqs && j < q->nfl; j++)
            PyList_SET_ITEM(seqs, (Py_ssize_t)j, PyLong_FromUnsignedLong(q->fl[j].seq));
        if (seqs && PyList_Sort(seqs) == 0)
            row = Py_BuildValue("(LkO)", c->ident, (unsigned long)q->seq, seqs);
        if (!row || PyList_Append(clients, row) < 0) Py_CLEAR(clients);
        Py_XDECREF(seqs);
        Py_XDECREF(row);
    }
    return put_object(d, "clients", clients) || put_int(d, "late", (long long)M(e)->all_late) ||
                   put_object(d, "pace_lag", hist_tuple(&M(e)->all_lag))
               ? -1
               : 0;
}

const session_t SESSION_MQTT = {
    .name = "mqtt", .size = sizeof(mq_t), .scan_ns = 100000000,
    .configure = mqtt_configure, .add = mqtt_add, .up = mqtt_up,
    .read = mqtt_read, .eof = mqtt_eof, .writable = mqtt_writable, .fail = mqtt_fail,
    .due = mqtt_due, .scan = mqtt_scan, .end = mqtt_end,
    .release = mqtt_release, .free = mqtt_free, .state = mqtt_state, .ledger = mqtt_ledger,
};
