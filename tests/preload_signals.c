/* For the preload capture's tests: the main loop sends COUNT x 100 B on one
 * connection while a SIGALRM handler, every 50 us, sends 333 B on a second
 * one (the handler interrupts the shim while it records the main loop's
 * calls); a thread, with SIGALRM blocked, drains both. Prints each
 * connection's cookie and send calls as JSON.
 *
 *     cc -O2 -pthread preload_signals.c -o preload_signals && ./preload_signals [COUNT] */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#ifndef SO_COOKIE
#define SO_COOKIE 57
#endif

static int handler_fd;
static long handler_calls;

static void on_alarm(int sig)
{
	static char buf[333];

	send(handler_fd, buf, sizeof(buf), MSG_DONTWAIT);
	__atomic_fetch_add(&handler_calls, 1, __ATOMIC_RELAXED);
}

static void *drain(void *arg)
{
	int *fds = arg, open = 2;
	sigset_t alarm;
	struct pollfd p[2] = { { fds[0], POLLIN, 0 }, { fds[1], POLLIN, 0 } };
	char buf[65536];

	sigemptyset(&alarm);
	sigaddset(&alarm, SIGALRM);
	pthread_sigmask(SIG_BLOCK, &alarm, NULL);
	while (open) {
		poll(p, 2, -1);
		for (int i = 0; i < 2; i++)
			if (p[i].fd >= 0 && (p[i].revents & (POLLIN | POLLHUP)) && recv(p[i].fd, buf, sizeof(buf), 0) <= 0) {
				p[i].fd = -1;
				open--;
			}
	}
	return NULL;
}

static unsigned long long cookie(int fd)
{
	unsigned long long c = 0;
	socklen_t len = sizeof(c);

	getsockopt(fd, SOL_SOCKET, SO_COOKIE, &c, &len);
	return c;
}

int main(int argc, char **argv)
{
	long count = argc > 1 ? atol(argv[1]) : 300000;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int l = socket(AF_INET, SOCK_STREAM, 0), out[2], in[2];
	struct sigaction sa = { .sa_handler = on_alarm, .sa_flags = SA_RESTART };
	struct itimerval every = { { 0, 50 }, { 0, 50 } }, off = { { 0, 0 }, { 0, 0 } };
	static char msg[100];
	pthread_t t;
	unsigned long long ids[2];

	bind(l, (struct sockaddr *)&a, sizeof(a));
	listen(l, 2);
	getsockname(l, (struct sockaddr *)&a, &len);
	for (int i = 0; i < 2; i++) {
		out[i] = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(out[i], (struct sockaddr *)&a, sizeof(a)) || (in[i] = accept(l, NULL, NULL)) < 0)
			return 1;
	}
	handler_fd = out[1];
	ids[0] = cookie(out[0]);
	ids[1] = cookie(out[1]);
	pthread_create(&t, NULL, drain, in);
	sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &every, NULL);
	for (long i = 0; i < count; i++)
		send(out[0], msg, sizeof(msg), 0);
	setitimer(ITIMER_REAL, &off, NULL);
	signal(SIGALRM, SIG_IGN);
	close(out[0]);
	close(out[1]);
	pthread_join(t, NULL);
	printf("{\"main\": {\"cookie\": %llu, \"sends\": %ld}, \"handler\": {\"cookie\": %llu, \"sends\": %ld}}\n",
	       ids[0], count, ids[1], handler_calls);
	return 0;
}
