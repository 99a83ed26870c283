// nullserver: a Redis-protocol server that does no work, to measure how
// fast the client alone lets any server go on this machine.
//
// It answers +OK to every command and keeps nothing: one thread, epoll, one
// read per readable socket, and one write per socket that completed commands
// in that pass, as Redis's event loop does. A server that stores, logs or
// fsyncs has all of this to do and more, so with the same client it can beat
// this one only by spending less on its socket calls; Redis without
// persistence runs at about the same rate. scripts/bench_vs_redis.py --null
// builds it (gcc -O2) and runs it beside Flint and Redis.
//
// Usage: nullserver PORT. It listens on 127.0.0.1:PORT and takes RESP arrays
// of bulk strings, as clients send, and inline commands (one per line), as
// redis-benchmark's PING_INLINE does. Empty ones get no reply, as in Redis.
// A connection that sends anything else, a command over BUF bytes, or that
// does not read its replies (a write of them falls short) is closed, with
// a message on stderr.
#define _GNU_SOURCE // accept4
#include <arpa/inet.h>
#include <errno.h>
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
#define OKLEN 5

struct conn {
	int n;       // bytes of in[] not yet parsed into commands
	int pending; // commands complete but not yet answered
	char in[BUF];
};

static struct conn *conns[MAXFD];
// The shortest command that gets a reply is 2 bytes ("x\n"), so a pass of
// one read answers at most BUF/2 commands.
static char replies[BUF / 2 * OKLEN];

static void die(const char *what) {
	perror(what);
	exit(1);
}

enum { INCOMPLETE = -1, BAD = -2 };

// number parses the line at p, a type byte and then a decimal number from 0
// to BUF, ending in \r\n. It returns the number and sets *next past the
// line, or returns INCOMPLETE or BAD.
static long number(const char *p, const char *end, const char **next) {
	long n = 0;
	const char *q = p + 1;
	for (; q < end && *q >= '0' && *q <= '9'; q++)
		if ((n = n * 10 + (*q - '0')) > BUF)
			return BAD;
	if (end - q < 2)
		return INCOMPLETE;
	if (q == p + 1 || q[0] != '\r' || q[1] != '\n')
		return BAD;
	*next = q + 2;
	return n;
}

// command parses the command at p. It returns 1 if the command wants a
// reply, 0 if it is empty, or INCOMPLETE or BAD, and sets *next past it.
static int command(const char *p, const char *end, const char **next) {
	if (*p != '*') { // inline: one line
		const char *nl = memchr(p, '\n', end - p);
		if (nl == NULL)
			return INCOMPLETE;
		*next = nl + 1;
		return nl - p > (nl > p && nl[-1] == '\r' ? 1 : 0);
	}
	long args = number(p, end, &p);
	for (long i = 0; args >= 0 && i < args; i++) {
		if (p == end)
			return INCOMPLETE;
		if (*p != '$')
			return BAD;
		long len = number(p, end, &p);
		if (len < 0)
			return len;
		if (end - p < len + 2)
			return INCOMPLETE;
		if (p[len] != '\r' || p[len + 1] != '\n')
			return BAD;
		p += len + 2;
	}
	if (args < 0)
		return args;
	*next = p;
	return args > 0;
}

static void drop(int fd, const char *why) {
	if (why != NULL)
		fprintf(stderr, "nullserver: closing connection %d: %s\n", fd, why);
	close(fd); // also removes it from the epoll set
	free(conns[fd]);
	conns[fd] = NULL;
}

// parse counts the complete commands at the start of c->in that want a
// reply, adds them to c->pending, and drops them. It returns 0, or -1 if
// it closed the connection.
static int parse(int fd, struct conn *c) {
	const char *p = c->in, *end = c->in + c->n, *next = NULL;
	int r = 0;
	for (; p < end && (r = command(p, end, &next)) >= 0; p = next)
		c->pending += r;
	if (r == BAD) {
		drop(fd, "not a Redis command");
		return -1;
	}
	c->n = end - p;
	memmove(c->in, p, c->n);
	if (c->n == BUF) {
		drop(fd, "a command longer than the buffer");
		return -1;
	}
	return 0;
}

static void accept_one(int ep, int ls) {
	int fd = accept4(ls, NULL, NULL, SOCK_NONBLOCK), one = 1;
	if (fd < 0) {
		if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
			die("accept");
		return;
	}
	if (fd >= MAXFD || (conns[fd] = calloc(1, sizeof(struct conn))) == NULL) {
		fprintf(stderr, "nullserver: refusing connection %d: too many\n", fd);
		close(fd);
		return;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
	if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
		die("epoll_ctl");
}

// serve reads from fd and returns whether it has commands to answer.
static int serve(int fd) {
	struct conn *c = conns[fd];
	ssize_t r = read(fd, c->in + c->n, BUF - c->n);
	if (r < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (r <= 0) {
		drop(fd, NULL);
		return 0;
	}
	c->n += r;
	return parse(fd, c) == 0 && c->pending > 0;
}

// answer writes the replies fd is owed.
static void answer(int fd) {
	struct conn *c = conns[fd];
	ssize_t want = (ssize_t)c->pending * OKLEN;
	if (send(fd, replies, want, MSG_NOSIGNAL) != want) {
		drop(fd, "it does not read its replies, or has gone");
		return;
	}
	c->pending = 0;
}

int main(int argc, char **argv) {
	if (argc != 2) {
		fprintf(stderr, "usage: nullserver PORT\n");
		return 2;
	}
	for (size_t i = 0; i + OKLEN <= sizeof replies; i += OKLEN)
		memcpy(replies + i, OK, OKLEN);
	int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), one = 1;
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
		for (int i = 0; i < nready; i++)
			if (conns[ready[i]] != NULL)
				answer(ready[i]);
	}
}
