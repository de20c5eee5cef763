/* costly: a test-only HTTP/1.1 server whose CPU cost per request is set by COST_US.
 *
 * GET /work burns COST_US "work units" of CPU (a serial multiply-add chain, about
 * one microsecond per unit on the reference machine), GET /health and GET /hello
 * answer at once. The work is deterministic: a slower server (COST_US x 1.1) costs
 * 10 % more CPU per request, as a real regression does, on any machine; it is never
 * a sleep. One thread, epoll, keep-alive, pipelining; binds 127.0.0.1:$PORT.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
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

#define BUF 8192
#define MAX_EVENTS 256

/* Iterations of the chain per work unit: measured once (gcc -O2 on the 2-core Xeon the gate was tuned on: 870 per us)
 * and fixed, so a unit is the same amount of work on every run and every machine. */
#define ITERATIONS_PER_UNIT 870

static uint64_t units_per_request;
static volatile uint64_t sink;

struct conn {
    int fd;
    size_t in_len, out_len, out_off;
    char in[BUF];
    char out[BUF];
};

static void burn(uint64_t units) {
    uint64_t x = 88172645463325252ULL;
    for (uint64_t i = 0; i < units * ITERATIONS_PER_UNIT; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL; /* serial dependency */
    }
    sink = x;
}

static void append(struct conn *c, const char *status, const char *body, int close_after) {
    int n = snprintf(c->out + c->out_len, BUF - c->out_len,
                     "HTTP/1.1 %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n%s\r\n%s",
                     status, strlen(body), close_after ? "Connection: close\r\n" : "", body);
    if (n > 0 && (size_t)n < BUF - c->out_len) c->out_len += (size_t)n;
}

/* Handles every complete request in the input buffer; returns 1 to close after writing. */
static int handle(struct conn *c) {
    int close_after = 0;
    for (;;) {
        char *end = memmem(c->in, c->in_len, "\r\n\r\n", 4);
        if (end == NULL) break;
        size_t head = (size_t)(end - c->in) + 4, body = 0;
        char *cl = memmem(c->in, head, "Content-Length:", 15);
        if (cl != NULL) body = strtoul(cl + 15, NULL, 10);
        if (head + body > c->in_len) {
            if (head + body > BUF) return 1; /* too large for this test server */
            break;
        }
        if (BUF - c->out_len < 256) break; /* flush first */
        if (memmem(c->in, head, "Connection: close", 17) != NULL) close_after = 1;
        if (strncmp(c->in, "GET /work ", 10) == 0) {
            burn(units_per_request);
            append(c, "200 OK", "done\n", close_after);
        } else if (strncmp(c->in, "GET /health ", 12) == 0) {
            append(c, "200 OK", "ok\n", close_after);
        } else if (strncmp(c->in, "GET /hello ", 11) == 0) {
            append(c, "200 OK", "<h1>Hello World</h1>", close_after);
        } else {
            append(c, "404 Not Found", "not found\n", close_after);
        }
        memmove(c->in, c->in + head + body, c->in_len - head - body);
        c->in_len -= head + body;
        if (close_after) break;
    }
    if (c->in_len == BUF) return 1; /* a header larger than the buffer */
    return close_after;
}

static void drop(int ep, struct conn *c) {
    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    free(c);
}

static int flush_out(struct conn *c) {
    while (c->out_off < c->out_len) {
        ssize_t n = write(c->fd, c->out + c->out_off, c->out_len - c->out_off);
        if (n < 0) return errno == EAGAIN ? 0 : -1;
        c->out_off += (size_t)n;
    }
    c->out_len = c->out_off = 0;
    return 1;
}

static void serve(int ep, struct conn *c, uint32_t events) {
    int done = 0, close_after = 0;
    if (events & EPOLLIN) {
        ssize_t n = read(c->fd, c->in + c->in_len, BUF - c->in_len);
        if (n == 0 || (n < 0 && errno != EAGAIN)) { drop(ep, c); return; }
        if (n > 0) c->in_len += (size_t)n;
        close_after = handle(c);
    }
    done = flush_out(c);
    if (done < 0 || (done == 1 && close_after)) { drop(ep, c); return; }
    struct epoll_event ev = {.events = EPOLLIN | (done ? 0 : EPOLLOUT), .data.ptr = c};
    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
}

int main(void) {
    const char *port = getenv("PORT"), *cost = getenv("COST_US");
    if (port == NULL) { fprintf(stderr, "costly: PORT is not set\n"); return 2; }
    units_per_request = cost ? strtoull(cost, NULL, 10) : 100;
    signal(SIGPIPE, SIG_IGN);
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(port))};
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    if (bind(lfd, (struct sockaddr *)&addr, sizeof addr) < 0 || listen(lfd, 4096) < 0) {
        perror("costly: bind/listen");
        return 1;
    }
    fprintf(stderr, "costly: 127.0.0.1:%s, %llu units per /work\n", port,
            (unsigned long long)units_per_request);
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
    struct epoll_event events[MAX_EVENTS];
    for (;;) {
        int n = epoll_wait(ep, events, MAX_EVENTS, -1);
        for (int i = 0; i < n; i++) {
            if (events[i].data.ptr != NULL) { serve(ep, events[i].data.ptr, events[i].events); continue; }
            int fd;
            while ((fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                struct conn *c = calloc(1, sizeof *c);
                if (c == NULL) { close(fd); continue; }
                c->fd = fd;
                struct epoll_event cev = {.events = EPOLLIN, .data.ptr = c};
                epoll_ctl(ep, EPOLL_CTL_ADD, fd, &cev);
            }
        }
    }
}
