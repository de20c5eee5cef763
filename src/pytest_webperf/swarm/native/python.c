/*
 * python.c: the native engine's Python type, pytest_webperf.swarm._hotloop.Engine
 * (swarm/engine.py is its face): a session by name with its options, connections added
 * and removed, each interval's figures taken, the ledger at the end (its methods say).
 * The thread never touches a Python object: commands go through the locked queue, the
 * figures come back under the same lock.
 */
#include "engine.h"

/* the sessions by the name Python gives (engine.h: a new protocol's goes here) */
static const session_t *const SESSIONS[] = {
    &SESSION_HTTP1, &SESSION_MQTT, &SESSION_WS, &SESSION_SSE,
#ifdef WEBPERF_H2
    &SESSION_H2,
#endif
};
static const char *const HIST_NAMES[NHIST] = {"latency", "service", "lag", "connect",
                                              "handshake", "headers", "stall", "e2e"};

/* ------------------------------------------------------------------ values for Python */

PyObject *hist_tuple(const hist_t *h) {
    PyObject *pairs = PyList_New(0);
    if (!pairs) return NULL;
    for (int i = h->lo; i <= h->hi; i++) {
        if (!h->c[i]) continue;
        PyObject *pair = Py_BuildValue("(iK)", i, (unsigned long long)h->c[i]);
        if (!pair || PyList_Append(pairs, pair) < 0) {
            Py_XDECREF(pair);
            Py_DECREF(pairs);
            return NULL;
        }
        Py_DECREF(pair);
    }
    return Py_BuildValue("(KKKKN)", (unsigned long long)h->count, (unsigned long long)h->total,
                         (unsigned long long)h->min, (unsigned long long)h->max, pairs);
}

PyObject *fails_list(const fail_t *fails, int nfails) {
    PyObject *out = PyList_New(0);
    for (int i = 0; out && i < nfails; i++) {
        const fail_t *f = &fails[i];
        PyObject *row = Py_BuildValue("(iiKLLy#)", f->kind, f->key, (unsigned long long)f->n,
                                      (long long)f->a, (long long)f->b, f->raw, (Py_ssize_t)f->len);
        if (!row || PyList_Append(out, row) < 0) Py_CLEAR(out);
        Py_XDECREF(row);
    }
    return out;
}

/* a session's options: the dict's keys by name (PyArg_ParseTupleAndKeywords' format);
   0, or -1 with an error */
int parse_options(PyObject *options, const char *format, char **names, ...) {
    PyObject *empty = PyTuple_New(0);
    if (!empty) return -1;
    va_list va;
    va_start(va, names);
    int ok = PyArg_VaParseTupleAndKeywords(empty, options, format, names, va);
    va_end(va);
    Py_DECREF(empty);
    return ok ? 0 : -1;
}

/* d[key] = value, the reference taken (value NULL: -1, the error kept) */
int put_object(PyObject *d, const char *key, PyObject *value) {
    if (!value) return -1;
    int r = PyDict_SetItemString(d, key, value);
    Py_DECREF(value);
    return r;
}

/* bytes (or None: nothing) copied to a new buffer: 0, or -1 with an error */
int copy_bytes(PyObject *obj, uint8_t **out, size_t *len) {
    if (obj == NULL || obj == Py_None) return 0;
    char *buf;
    Py_ssize_t n;
    if (PyBytes_AsStringAndSize(obj, &buf, &n) < 0) return -1;
    *out = malloc(n ? (size_t)n : 1);
    if (!*out) { PyErr_NoMemory(); return -1; }
    memcpy(*out, buf, (size_t)n);
    *len = (size_t)n;
    return 0;
}

/* (expected, distinct, duplicated, reordered, beyond the window) of an account */
PyObject *acct_tuple(uint64_t expected, const acct_t *a) {
    return Py_BuildValue("(KKKKK)", (unsigned long long)expected, (unsigned long long)a->distinct,
                         (unsigned long long)a->duplicated, (unsigned long long)a->reordered,
                         (unsigned long long)a->beyond_window);
}

int put_int(PyObject *d, const char *key, long long v) {
    return put_object(d, key, PyLong_FromLongLong(v));
}

/* ------------------------------------------------------------------ the thread */

static void wake(Engine *e) {
    uint64_t one = 1;
    if (write(e->evfd, &one, sizeof one) < 0) { /* the counter is full: a wake-up is pending */
    }
}

static int push_command(Engine *e, command_t cmd) {
    pthread_mutex_lock(&e->lock);
    int bad = grow((void **)&e->commands, &e->capcommands, e->ncommands + 1, sizeof(command_t));
    if (!bad) e->commands[e->ncommands++] = cmd;
    pthread_mutex_unlock(&e->lock);
    if (bad) { PyErr_NoMemory(); return -1; }
    wake(e);
    return 0;
}

static int ensure_thread(Engine *e) {
    if (e->finished) { PyErr_SetString(PyExc_RuntimeError, "the engine is closed"); return -1; }
    if (!e->started) {
        int err = pthread_create(&e->thread, NULL, loop_main, e);
        if (err) {
            errno = err;
            PyErr_SetFromErrno(PyExc_OSError);
            return -1;
        }
        e->started = 1;
    }
    return 0;
}

/* the thread stopped (op: OP_QUIT at once, OP_CLOSE_ALL politely), every socket closed */
static void engine_join(Engine *e, int op) {
    if (e->started && !e->finished) {
        command_t cmd = {op, 0, 0, 0};
        if (push_command(e, cmd) < 0) PyErr_Clear();
        Py_BEGIN_ALLOW_THREADS
        pthread_join(e->thread, NULL);
        Py_END_ALLOW_THREADS
    }
    if (!e->finished) {
        e->finished = 1;
        for (size_t i = 0; i < e->nconns; i++)
            if (e->conns[i] && e->conns[i]->fd >= 0) conn_close(e, e->conns[i]);
    }
}

/* ------------------------------------------------------------------ the type */

static int Engine_init(Engine *e, PyObject *args, PyObject *kwds) {
    static char *names[] = {"protocol", "host", "port", "timeout_s", "options", NULL};
    const char *protocol, *host;
    int port;
    double timeout_s;
    PyObject *options = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "ssid|O!", names, &protocol, &host, &port,
                                     &timeout_s, &PyDict_Type, &options))
        return -1;
    char service[8];
    struct addrinfo *ai, hints = {.ai_socktype = SOCK_STREAM,
                                  .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV};
    snprintf(service, sizeof service, "%d", port & 0xffff);
    if (getaddrinfo(host, service, &hints, &ai) != 0) {
        PyErr_Format(PyExc_ValueError, "not a numeric address: %s", host);
        return -1;
    }
    memcpy(&e->addr, ai->ai_addr, ai->ai_addrlen);
    e->addrlen = ai->ai_addrlen;
    freeaddrinfo(ai);
    for (size_t i = 0; i < sizeof SESSIONS / sizeof *SESSIONS; i++)
        if (strcmp(SESSIONS[i]->name, protocol) == 0) e->session = SESSIONS[i];
    if (!e->session) {
        PyErr_Format(PyExc_ValueError, "no protocol %s in this build", protocol);
        return -1;
    }
    if (timeout_s <= 0) { PyErr_SetString(PyExc_ValueError, "a timeout is > 0"); return -1; }
    e->timeout_ns = (uint64_t)(timeout_s * 1e9);
    e->rng = 0x9E3779B97F4A7C15ULL ^ (uint64_t)getpid() ^ now_ns();
    e->tickets = -1;
    e->slot = -1;
    e->nentries = 1;
    e->hists = 1u << H_LATENCY;
    hist_clear(&e->ledger.opening);
    PyObject *empty = options ? NULL : PyDict_New();
    int bad = e->session->configure(e, options ? options : empty);
    Py_XDECREF(empty);
    if (bad) return -1;
    uint8_t *rbuf = malloc(READ_ROOM + READ_SIZE);
    e->cur = calloc((size_t)e->nentries, sizeof(stats_t));
    e->spare = calloc((size_t)e->nentries, sizeof(stats_t));
    if (!rbuf || !e->cur || !e->spare) {
        free(rbuf);
        PyErr_NoMemory();
        return -1;
    }
    e->rbuf = rbuf + READ_ROOM;
    for (int i = 0; i < e->nentries; i++)
        for (int j = 0; j < NHIST; j++) {
            hist_clear(&e->cur[i].h[j]);
            hist_clear(&e->spare[i].h[j]);
        }
    e->cur->fig.min_window = e->spare->fig.min_window = INT64_MAX;
    e->epfd = epoll_create1(EPOLL_CLOEXEC);
    e->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL}; /* commands: data NULL */
    if (e->epfd < 0 || e->evfd < 0 || epoll_ctl(e->epfd, EPOLL_CTL_ADD, e->evfd, &ev) < 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    pthread_mutex_init(&e->lock, NULL);
    return 0;
}

static PyObject *Engine_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    (void)args;
    (void)kwds;
    Engine *e = (Engine *)type->tp_alloc(type, 0);
    if (e) e->epfd = e->evfd = -1;
    return (PyObject *)e;
}

static void Engine_dealloc(Engine *e) {
    engine_join(e, OP_QUIT);
    for (size_t i = 0; i < e->nconns; i++) {
        conn_t *c = e->conns[i];
        if (!c) continue;
        if (e->session->release) e->session->release(e, c);
#ifdef WEBPERF_TLS
        if (c->resume) SSL_SESSION_free(c->resume);
#endif
        free(c->s);
        free(c);
    }
    if (e->session && e->session->free) e->session->free(e);
    FREE_ALL(e->conns, e->gate, e->heap, e->parked, e->commands, e->sources, e->idle_bits);
    FREE_ALL(e->cur, e->spare, e->server_name, e->sequence, e->rbuf ? e->rbuf - READ_ROOM : NULL);
    if (e->epfd >= 0) close(e->epfd);
    if (e->evfd >= 0) close(e->evfd);
#ifdef WEBPERF_TLS
    if (e->tls_ctx) SSL_CTX_free(e->tls_ctx);
#endif
    Py_TYPE(e)->tp_free((PyObject *)e);
}

/* add(fraction=0.0, ident=0, role=0) -> handle: a new connection (a user); paced: its
   first request or message at `fraction` of a period from now */
static PyObject *Engine_add(Engine *e, PyObject *args, PyObject *kwds) {
    static char *names[] = {"fraction", "ident", "role", NULL};
    double fraction = 0;
    long long ident = 0;
    int role = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|dLi", names, &fraction, &ident, &role))
        return NULL;
    if (fraction < 0 || fraction >= 1 || ident < 0 || role < 0 || role > 255) {
        PyErr_SetString(PyExc_ValueError, "fraction outside [0, 1), or ident or role below 0");
        return NULL;
    }
    if (ensure_thread(e) < 0) return NULL;
    long long handle = e->adds++; /* the thread appends in command order */
    ATOMIC_ADD(e->ledger.added, 1);
    command_t cmd = {OP_ADD, role, ident, fraction};
    if (push_command(e, cmd) < 0) return NULL;
    return PyLong_FromLongLong(handle);
}

static PyObject *command(Engine *e, int op, long long arg) {
    if (e->started && !e->finished) {
        command_t cmd = {op, 0, arg, 0};
        if (push_command(e, cmd) < 0) return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *Engine_remove(Engine *e, PyObject *arg) {
    long long handle = PyLong_AsLongLong(arg);
    if (handle == -1 && PyErr_Occurred()) return NULL;
    return command(e, OP_REMOVE, handle);
}

static PyObject *Engine_go(Engine *e, PyObject *unused) {
    (void)unused;
    return command(e, OP_GO, 0);
}

static PyObject *Engine_stop_sending(Engine *e, PyObject *unused) {
    (void)unused;
    if (!e->stop_sending) e->stop_at = now_ns();
    e->stop_sending = 1;
    __sync_synchronize();
    if (e->started && !e->finished) wake(e);
    Py_RETURN_NONE;
}

static PyObject *Engine_open_tickets(Engine *e, PyObject *arg) {
    long long n = PyLong_AsLongLong(arg);
    if (n == -1 && PyErr_Occurred()) return NULL;
    if (n < 0) { PyErr_SetString(PyExc_ValueError, "a ticket count is >= 0"); return NULL; }
    pthread_mutex_lock(&e->lock);
    e->tickets = n;
    pthread_mutex_unlock(&e->lock);
    return command(e, OP_WAKE_PARKED, 0);
}

static PyObject *Engine_tickets_finished(Engine *e, PyObject *unused) {
    (void)unused;
    pthread_mutex_lock(&e->lock);
    int finished = e->tickets == 0 && e->outstanding == 0;
    pthread_mutex_unlock(&e->lock);
    return PyBool_FromLong(finished);
}

/* one entry's figures as a dict (the stats cleared for the next interval) */
static PyObject *stats_dict(Engine *e, stats_t *s, int entry) {
    static const char *const COUNTED[] = {"ok", "bytes", "sent", "received", "received_bytes",
                                          "late"}; /* stats_t's counters, from ok */
    PyObject *d = PyDict_New();
    int bad = !d || put_object(d, "fails", fails_list(s->fails, s->nfails)) < 0;
    for (int i = 0; !bad && i < 6; i++) bad = put_int(d, COUNTED[i], (long long)(&s->ok)[i]) < 0;
    for (int i = 0; !bad && i < NHIST; i++)
        if (e->hists & (1u << i)) bad = put_object(d, HIST_NAMES[i], hist_tuple(&s->h[i])) < 0;
    if (!bad && e->mode == MODE_ARRIVAL && s->dispatched)
        bad = put_int(d, "users_busy", s->users_busy) < 0 ||
              put_int(d, "users_opened", s->users_opened) < 0;
    if (!bad && e->session->take) bad = e->session->take(e, d, s, entry) < 0;
    memset(&s->ok, 0, 6 * sizeof s->ok);
    s->users_busy = s->users_opened = s->dispatched = s->nfails = 0;
    for (int i = 0; i < NHIST; i++) hist_clear(&s->h[i]);
    if (bad) Py_CLEAR(d);
    return d;
}

/* take() -> [dict, ...]: what completed since the last take, one dict per entry of the
   mix (one without a mix) */
static PyObject *Engine_take(Engine *e, PyObject *unused) {
    (void)unused;
    pthread_mutex_lock(&e->lock);
    stats_t *s = e->cur;
    e->cur = e->spare;
    e->spare = s;
    e->cur->users_busy = e->busy; /* the next interval starts with those still busy */
    e->cur->users_opened = e->opened;
    pthread_mutex_unlock(&e->lock);
    PyObject *list = PyList_New(0);
    for (int i = 0; list && i < e->nentries; i++) {
        PyObject *d = stats_dict(e, &s[i], i);
        if (!d || PyList_Append(list, d) < 0) Py_CLEAR(list);
        Py_XDECREF(d);
    }
    return list;
}

/* state() -> dict of the run so far: connections added, tried once, open; the session's */
static PyObject *Engine_state(Engine *e, PyObject *unused) {
    (void)unused;
    ledger_t *l = &e->ledger;
    /* the connect gate's figures are the thread's, read without the lock: a glimpse */
    long long queued = (long long)ATOMIC_GET(e->ngate) - (long long)ATOMIC_GET(e->gate_head);
    PyObject *d = Py_BuildValue(
        "{sLsLsLsLsLsLsLsLsL}", "connecting", ATOMIC_GET(e->connecting), "queued", queued,
        "added", ATOMIC_GET(l->added), "tried", ATOMIC_GET(l->tried), "open", ATOMIC_GET(l->open),
        "open_peak", ATOMIC_GET(l->open_peak), "open_failures",
        (long long)ATOMIC_GET(l->open_failures), "drops", (long long)ATOMIC_GET(l->drops),
        "last_receipt_ns", ATOMIC_GET(l->last_receipt_ns));
    if (d && e->session->state && e->session->state(e, d) < 0) Py_CLEAR(d);
    return d;
}

/* finish() -> the ledger: every connection closed (politely where the protocol says how),
   the thread stopped; the whole run's figures and the session's accounting */
static PyObject *Engine_finish(Engine *e, PyObject *unused) {
    (void)unused;
    if (!e->stop_at) e->stop_at = now_ns();
    engine_join(e, OP_CLOSE_ALL);
    ledger_t *l = &e->ledger;
    PyObject *d = Py_BuildValue(
        "{sKsKsKsKsKsKsLsNsN}", "opens", (unsigned long long)l->opens, "open_failures",
        (unsigned long long)l->open_failures, "reconnects", (unsigned long long)l->reconnects,
        "drops", (unsigned long long)l->drops, "sent", (unsigned long long)l->sent, "received",
        (unsigned long long)l->received, "open_peak", ATOMIC_GET(l->open_peak), "upgrade",
        hist_tuple(&l->opening), "fails", fails_list(l->fails, l->nfails));
    if (d && e->session->ledger && e->session->ledger(e, d) < 0) Py_CLEAR(d);
    return d;
}

static PyObject *Engine_close(Engine *e, PyObject *unused) {
    (void)unused;
    engine_join(e, OP_QUIT);
    Py_RETURN_NONE;
}

/* bind_sources(b"<4 bytes per IPv4 address>"): connections from these local addresses,
   round robin */
static PyObject *Engine_bind_sources(Engine *e, PyObject *arg) {
    uint8_t *packed = NULL;
    size_t n = 0;
    if (e->started)
        return PyErr_Format(PyExc_RuntimeError, "bind_sources() comes before the first add()");
    if (copy_bytes(arg, &packed, &n) < 0) return NULL;
    free(e->sources);
    e->nsources = 0;
    if (!(e->sources = calloc(n / 4 + 1, sizeof(struct sockaddr_in)))) {
        free(packed);
        return PyErr_NoMemory();
    }
    for (; e->nsources < n / 4; e->nsources++) {
        e->sources[e->nsources].sin_family = AF_INET;
        memcpy(&e->sources[e->nsources].sin_addr, packed + 4 * e->nsources, 4);
    }
    free(packed);
    Py_RETURN_NONE;
}

/* use_tls(server_name, ca_file=None, resume=False): every connection speaks TLS (SNI,
   the session's ALPN; verified against ca_file if given; resume: a new connection
   resumes its user's last session); before the first add() */
static PyObject *Engine_use_tls(Engine *e, PyObject *args) {
    const char *server_name, *ca_file = NULL;
    int resume = 0;
    if (!PyArg_ParseTuple(args, "s|zp", &server_name, &ca_file, &resume)) return NULL;
    if (e->started || e->tls_ctx) {
        PyErr_SetString(PyExc_RuntimeError, "use_tls() comes once, before the first add()");
        return NULL;
    }
#ifdef WEBPERF_TLS
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx) {
        ERR_clear_error();
        PyErr_SetString(PyExc_RuntimeError, "OpenSSL: cannot make a TLS context");
        return NULL;
    }
    const char *alpn = e->session->alpn; /* a server that picks none of it is refused */
    if (alpn) SSL_CTX_set_alpn_protos(ctx, (const unsigned char *)alpn, (unsigned)strlen(alpn));
    long mode = SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER;
    if (e->session->many_idle) mode |= SSL_MODE_RELEASE_BUFFERS; /* idle: no 2 x 16 KiB */
    SSL_CTX_set_mode(ctx, mode);
#ifdef SSL_OP_IGNORE_UNEXPECTED_EOF
    SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF); /* a close without notify: EOF */
#endif
    SSL_CTX_set_session_cache_mode(ctx, resume ? SSL_SESS_CACHE_CLIENT : SSL_SESS_CACHE_OFF);
    if (ca_file) {
        if (SSL_CTX_load_verify_locations(ctx, ca_file, NULL) != 1) {
            SSL_CTX_free(ctx);
            ERR_clear_error();
            PyErr_Format(PyExc_ValueError, "cannot load the CA file %s", ca_file);
            return NULL;
        }
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    } else {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    }
    e->server_name = strdup(server_name);
    if (!e->server_name) { SSL_CTX_free(ctx); return PyErr_NoMemory(); }
    unsigned char buf[sizeof(struct in6_addr)];
    e->server_is_ip = inet_pton(AF_INET, server_name, buf) == 1 ||
                      inet_pton(AF_INET6, server_name, buf) == 1;
    e->tls_ctx = ctx;
    Py_RETURN_NONE;
#else
    (void)server_name;
    (void)ca_file;
    (void)resume;
    PyErr_SetString(PyExc_RuntimeError, "the native engine is built without TLS (no OpenSSL)");
    return NULL;
#endif
}

static PyObject *mod_bucket_index(PyObject *unused, PyObject *arg) {
    (void)unused;
    unsigned long long v = PyLong_AsUnsignedLongLong(arg);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
    if (v > VALUE_MAX) v = VALUE_MAX;
    return PyLong_FromLong(bucket_index(v));
}

static PyMethodDef Engine_methods[] = {
    {"add", (PyCFunction)(void (*)(void))Engine_add, METH_VARARGS | METH_KEYWORDS,
     "add(fraction=0.0, ident=0, role=0) -> handle: a new connection (a user)"},
    {"remove", (PyCFunction)Engine_remove, METH_O, "remove(handle): its connection goes"},
    {"go", (PyCFunction)Engine_go, METH_NOARGS, "the publishers start (every subscriber is open)"},
    {"stop_sending", (PyCFunction)Engine_stop_sending, METH_NOARGS,
     "nothing is sent after this returns (what is in flight completes)"},
    {"open_tickets", (PyCFunction)Engine_open_tickets, METH_O,
     "open_tickets(n): counted: exactly n requests from now"},
    {"tickets_finished", (PyCFunction)Engine_tickets_finished, METH_NOARGS,
     "whether every ticket's request has completed"},
    {"take", (PyCFunction)Engine_take, METH_NOARGS,
     "the figures since the last take: a list, one dict per entry of the mix"},
    {"state", (PyCFunction)Engine_state, METH_NOARGS, "the run so far: connections, what is owed"},
    {"finish", (PyCFunction)Engine_finish, METH_NOARGS,
     "close every connection, stop the thread: the ledger of the whole run"},
    {"close", (PyCFunction)Engine_close, METH_NOARGS, "stop the thread, close every connection"},
    {"bind_sources", (PyCFunction)Engine_bind_sources, METH_O,
     "bind_sources(packed IPv4 addresses): connect from these, round robin"},
    {"use_tls", (PyCFunction)Engine_use_tls, METH_VARARGS,
     "use_tls(server_name, ca_file=None, resume=False): every connection speaks TLS; before "
     "the first add()"},
    {NULL, NULL, 0, NULL}};

static PyTypeObject EngineType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pytest_webperf.swarm._hotloop.Engine",
    .tp_basicsize = sizeof(Engine),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One generator process's native engine (see swarm/engine.py).",
    .tp_new = Engine_new,
    .tp_init = (initproc)Engine_init,
    .tp_dealloc = (destructor)Engine_dealloc,
    .tp_methods = Engine_methods,
};

static PyMethodDef module_methods[] = {
    {"bucket_index", mod_bucket_index, METH_O,
     "the histogram bucket of a value in microseconds (as histogram.bucket_index)"},
    {"ws_parse", ws_parse_door, METH_VARARGS, "the engine's WebSocket frame reader over pieces"},
    {"ws_frame", ws_frame_door, METH_VARARGS, "a frame as the engine writes it"},
    {"ws_accept", ws_accept_door, METH_O, "the Sec-WebSocket-Accept of a key"},
    {"sse_parse", sse_parse_door, METH_VARARGS, "the engine's event-stream parser over pieces"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_hotloop",
                                    "The native engine (see swarm/engine.py).", -1,
                                    module_methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__hotloop(void) {
    if (PyType_Ready(&EngineType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&EngineType);
#ifdef WEBPERF_TLS
    int tls = 1;
#else
    int tls = 0;
#endif
#ifdef WEBPERF_H2
    int h2 = 1;
#else
    int h2 = 0;
#endif
    if (PyModule_AddObject(m, "Engine", (PyObject *)&EngineType) < 0 ||
        PyModule_AddIntConstant(m, "TLS", tls) < 0 || PyModule_AddIntConstant(m, "H2", h2) < 0 ||
        PyModule_AddIntConstant(m, "CLOSED", MODE_CLOSED) < 0 ||
        PyModule_AddIntConstant(m, "PACED", MODE_PACED) < 0 ||
        PyModule_AddIntConstant(m, "COUNTED", MODE_COUNTED) < 0 ||
        PyModule_AddIntConstant(m, "ARRIVAL", MODE_ARRIVAL) < 0 ||
        PyModule_AddIntConstant(m, "KINDS", K_LAST - 1) < 0) {
        Py_DECREF(&EngineType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
