"""The counted end-to-end tests' servers, as the sources a user's repository holds.

``C_SERVER``: a single-threaded epoll HTTP/1.1 server (keep-alive) whose ``GET /work``
runs ``WORK`` rounds of an FNV-1a loop in ``hash_work`` (kept out of line, so a profile
can name it), ``GET /other`` ``OTHER`` rounds (a second endpoint of a mix), with three more
knobs: ``EXTRA_MALLOC`` (one more ``malloc``/``free`` per request), ``EXTRA_WRITE`` (one
more ``write``, of a byte to /dev/null) and ``USE_LIB`` (``hash_work`` calls the hashing
of ``LIB_WORK``, a shared library built without symbols: a static function reached
through a pointer, as a callback or a table of functions would be). The knobs are macros,
given by a header the build includes (``cc -include knobs.h``): a change to a knob is a
change to a file of the repository, as a user's would be.

``python_server(work_file)``: the stdlib's threaded ``http.server`` whose ``GET /work``
runs a pure-Python hash loop, as many rounds as ``work_file`` says, and whose accept loop
sleeps until a connection comes (no timer: its counts are the requests' alone).

``C_TARGET``: the inner test files' ``c_server(webperf, knobs)``, that server built with
the knobs of ``knobs.h``. ``entries`` and ``check``: what the counted tests read of a
JSON report.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# the test file's function that starts the C server built with the knobs of ``KNOBS.h``
# (each side builds its own: ``build=``), for the inner test files of the counted tests
C_TARGET = """

def c_server(webperf, knobs):
    return webperf.process(
        [f"build/{knobs}"],
        name=knobs,
        health="/health",
        build=f"mkdir -p build && cc -O2 -include {knobs}.h -o build/{knobs} server.c",
        watch=["server.c", f"{knobs}.h"],
    )
"""

C_SERVER = r"""
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef WORK
#define WORK 2000
#endif
#ifndef OTHER
#define OTHER 500
#endif
#ifndef EXTRA_MALLOC
#define EXTRA_MALLOC 0
#endif
#ifndef EXTRA_WRITE
#define EXTRA_WRITE 0
#endif
#ifndef USE_LIB
#define USE_LIB 0
#endif
#if USE_LIB
uint32_t (*lib_mixer(void))(long);
static uint32_t (*mixer)(long);
#endif

struct conn { int fd; size_t used; char buf[8192]; };
static int devnull = -1;

__attribute__((noinline)) static uint32_t hash_work(long rounds) {
#if USE_LIB
    return mixer(rounds);
#else
    uint32_t h = 2166136261u;
    for (long i = 0; i < rounds; i++) { h ^= (uint32_t)(i & 0xff); h *= 16777619u; }
    return h;
#endif
}

static int send_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) { if (errno == EINTR) continue; return -1; }
        p += w; n -= (size_t)w;
    }
    return 0;
}

static int answer(struct conn *c) {
    for (;;) {
        char *end = memmem(c->buf, c->used, "\r\n\r\n", 4);
        if (end == NULL) return c->used < sizeof c->buf ? 0 : -1;
        size_t length = (size_t)(end - c->buf) + 4;
        char body[32];
        int body_len = strncmp(c->buf, "GET /work", 9) == 0
            ? snprintf(body, sizeof body, "%08x\n", hash_work(WORK))
            : strncmp(c->buf, "GET /other", 10) == 0
            ? snprintf(body, sizeof body, "%08x\n", hash_work(OTHER))
            : snprintf(body, sizeof body, "ok\n");
        if (EXTRA_MALLOC) {
            char *volatile scratch = malloc(64);
            if (scratch != NULL) scratch[0] = 1;
            free(scratch);
        }
        if (EXTRA_WRITE && send_all(devnull, "x", 1) < 0) return -1;
        char out[160];
        int n = snprintf(out, sizeof out,
                         "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", body_len, body);
        if (send_all(c->fd, out, (size_t)n) < 0) return -1;
        memmove(c->buf, c->buf + length, c->used - length);
        c->used -= length;
    }
}

int main(void) {
    const char *port = getenv("PORT");
    if (port == NULL) return 2;
    devnull = open("/dev/null", O_WRONLY);
#if USE_LIB
    mixer = lib_mixer();
#endif
    signal(SIGPIPE, SIG_IGN);
    int listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), one = 1;
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(port)),
                               .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(listener, (struct sockaddr *)&addr, sizeof addr) < 0 || listen(listener, 64) < 0)
        return 1;
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL}, events[16];
    epoll_ctl(ep, EPOLL_CTL_ADD, listener, &ev);
    for (;;) {
        int ready = epoll_wait(ep, events, 16, -1);
        for (int i = 0; i < ready; i++) {
            struct conn *c = events[i].data.ptr;
            if (c == NULL) {
                int fd = accept4(listener, NULL, NULL, SOCK_NONBLOCK);
                if (fd < 0) continue;
                setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                c = calloc(1, sizeof *c);
                c->fd = fd;
                struct epoll_event cev = {.events = EPOLLIN, .data.ptr = c};
                epoll_ctl(ep, EPOLL_CTL_ADD, fd, &cev);
                continue;
            }
            ssize_t r = read(c->fd, c->buf + c->used, sizeof c->buf - c->used);
            if (r > 0) { c->used += (size_t)r; if (answer(c) == 0) continue; }
            else if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
            close(c->fd);
            free(c);
        }
    }
}
"""


LIB_WORK = r"""
#include <stdint.h>

#ifndef LIB_EXTRA
#define LIB_EXTRA 0
#endif

static uint32_t mix(long rounds) {
    uint32_t h = 2166136261u;
    for (long i = 0; i < rounds + LIB_EXTRA; i++) { h ^= (uint32_t)(i & 0xff); h *= 16777619u; }
    return h;
}

uint32_t (*lib_mixer(void))(long) { return mix; }
"""


def python_server(work_file: str) -> str:
    """A threaded stdlib server whose ``GET /work`` hashes in pure Python as many rounds as
    the file ``work_file`` (beside it) says."""
    return f"""
import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

WORK = int((Path(__file__).parent / {work_file!r}).read_text())


def hash_work(rounds):
    h = 2166136261
    for i in range(rounds):
        h = ((h ^ (i & 0xFF)) * 16777619) & 0xFFFFFFFF
    return h


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def do_GET(self):
        body = f"{{hash_work(WORK):08x}}\\n".encode() if self.path == "/work" else b"ok\\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


# no poll timeout: a loop that wakes every 0.5 s allocates by the clock, and the collector
# it brings forward runs in some windows and not others (+1.4 % in 1 of 4 windows)
ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), Handler).serve_forever(3600)
"""


def entries(path: Path) -> dict[str, dict[str, Any]]:
    """A JSON report's tests by the test function's name."""
    tests = json.loads(path.read_text())["tests"]
    return {t["nodeid"].split("::")[-1].split("[")[0]: t for t in tests}


def check(entry: dict[str, Any], metric: str) -> dict[str, Any]:
    """A test's check of ``metric``, as its verdict holds it."""
    return next(c for c in entry["verdict"]["checks"] if c["metric"] == metric)
