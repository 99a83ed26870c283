// nullserver: a Redis-protocol server that does no work, the floor for any
// server measured with the same client on the same machine.
//
// It answers +OK to every command and keeps nothing: one thread, epoll, one
// read per readable socket, and one write per socket that completed commands
// in that pass, as Redis's event loop does. A server that stores, logs or
// fsyncs cannot be faster than this one with the same client, short of
// spending less CPU on the socket calls themselves. scripts/bench_vs_redis.py
// --null builds and runs it (gcc -O2) beside Flint and Redis.
//
// Usage: nullserver PORT. It listens on 127.0.0.1:PORT. Commands must be
// RESP arrays of bulk strings, as redis-benchmark sends, no longer than
// BUF bytes; anything else, or a short write of the replies (the client reads
// every reply before it sends more, so the socket buffer never fills), ends
// the server with a message, since this is a measuring tool.
#define _GNU_SOURCE // accept4
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAXFD 4096
#define BUF (64 << 10)
#define OK "+OK\r\n"

struct conn {
	int n;       // bytes of in[] not yet parsed into commands
	int pending; // commands complete but not yet answered
	char in[BUF];
};

static struct conn *conns[MAXFD];
static char replies[BUF * 2]; // OK repeated; a command is at least 4 bytes, a reply 5

static void die(const char *what) {
	perror(what);
	exit(1);
}

// line returns the integer after the type byte of the line at p, and sets
// *next to the byte after the line, or returns -1 if the line is incomplete.
static long line(const char *p, const char *end, const char **next) {
	const char *nl = memchr(p, '\n', end - p);
	if (nl == NULL)
		return -1;
	*next = nl + 1;
	return strtol(p + 1, NULL, 10);
}

// command returns the end of the command at p, or NULL if it is incomplete.
static const char *command(const char *p, const char *end) {
	if (*p != '*') {
		fprintf(stderr, "nullserver: not a RESP array\n");
		exit(1);
	}
	long args = line(p, end, &p);
	for (long i = 0; i < args; i++) {
		long len = p < end ? line(p, end, &p) : -1;
		if (len < 0 || end - p < len + 2)
			return NULL;
		p += len + 2;
	}
	return args < 0 ? NULL : p;
}

// parse counts the complete commands at the start of c->in and drops them.
static int parse(struct conn *c) {
	const char *p = c->in, *end = c->in + c->n, *next;
	int cmds = 0;
	for (; p < end && (next = command(p, end)) != NULL; p = next)
		cmds++;
	c->n = end - p;
	memmove(c->in, p, c->n);
	return cmds;
}

static void accept_one(int ep, int ls) {
	int fd = accept4(ls, NULL, NULL, SOCK_NONBLOCK), one = 1;
	if (fd < 0)
		return;
	if (fd >= MAXFD || (conns[fd] = calloc(1, sizeof(struct conn))) == NULL) {
		close(fd);
		return;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
	if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
		die("epoll_ctl");
}

static void drop(int fd) {
	close(fd); // also removes it from the epoll set
	free(conns[fd]);
	conns[fd] = NULL;
}

// serve reads from fd and returns whether it has commands to answer.
static int serve(int fd) {
	struct conn *c = conns[fd];
	if (c->n == BUF) {
		fprintf(stderr, "nullserver: a command over %d bytes\n", BUF);
		exit(1);
	}
	ssize_t r = read(fd, c->in + c->n, BUF - c->n);
	if (r < 0 && errno == EAGAIN)
		return 0;
	if (r <= 0) {
		drop(fd);
		return 0;
	}
	c->n += r;
	c->pending = parse(c);
	return c->pending > 0;
}

int main(int argc, char **argv) {
	if (argc != 2) {
		fprintf(stderr, "usage: nullserver PORT\n");
		return 2;
	}
	for (size_t i = 0; i + 5 <= sizeof replies; i += 5)
		memcpy(replies + i, OK, 5);
	int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[1])),
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	if (bind(ls, (struct sockaddr *)&addr, sizeof addr) < 0 || listen(ls, 511) < 0)
		die("listen");
	int ep = epoll_create1(0);
	struct epoll_event ev = {.events = EPOLLIN, .data.fd = ls}, evs[512];
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev) < 0)
		die("epoll");
	int ready[512];
	for (;;) {
		int n = epoll_wait(ep, evs, 512, -1), nready = 0;
		if (n < 0 && errno != EINTR)
			die("epoll_wait");
		for (int i = 0; i < n; i++) {
			int fd = evs[i].data.fd;
			if (fd == ls)
				accept_one(ep, ls);
			else if (serve(fd))
				ready[nready++] = fd;
		}
		for (int i = 0; i < nready; i++) {
			struct conn *c = conns[ready[i]];
			ssize_t want = 5 * (ssize_t)c->pending;
			if (write(ready[i], replies, want) != want)
				die("nullserver: short write of replies");
			c->pending = 0;
		}
	}
}
