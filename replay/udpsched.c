/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * udpsched: send UDP datagrams at given times, for magnet's cross traffic
 * (replay/cross.py draws the times, UdpSchedule, and streams them here).
 *
 *   udpsched --bind 10.203.1.3 --to 10.203.1.4:5999 --size 1000 < times
 *
 * stdin: absolute CLOCK_MONOTONIC send times, int64 ns in native byte order,
 * in increasing order, as many as the run needs (the writer stays ahead).
 * Each datagram of --size bytes leaves at its time: a sleep to shortly before
 * it (clock_nanosleep, absolute), then a spin on the clock, under SCHED_FIFO
 * where allowed (as linkem).  A late datagram leaves at once; how late each
 * left is kept in a histogram.  At EOF, SIGTERM or SIGINT: one JSON line on
 * stdout (datagrams and bytes sent, send errors, lateness p50/p99/max in us).
 * Python could not keep the times: on a busy 2-core machine it fell behind by
 * a second during on periods at 20 Mbit/s and then sent the backlog at once.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BATCH 4096             /* times read at once */
#define SPIN_NS 60000          /* wake up this early, then spin */
#define LATE_BIN_NS 10000      /* lateness histogram: 10 us bins up to 2 s */
#define LATE_BINS 200000

static volatile sig_atomic_t stopping;

static void on_signal(int sig)
{
	(void)sig;
	stopping = 1;
}

static void die(const char *what, const char *why)
{
	fprintf(stderr, "udpsched: %s: %s\n", what, why);
	exit(2);
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void wait_until(int64_t due)
{
	int64_t early = due - SPIN_NS;

	if (now_ns() < early) {
		struct timespec ts = {.tv_sec = early / 1000000000, .tv_nsec = early % 1000000000};

		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
	}
	while (!stopping && now_ns() < due)
		;
}

static double quantile(const uint64_t *hist, uint64_t n, double q)
{
	uint64_t want = (uint64_t)(q * (double)n), seen = 0;

	for (int i = 0; i <= LATE_BINS; i++) {
		seen += hist[i];
		if (seen > want)
			return (double)(i + 1) * LATE_BIN_NS / 1000;
	}
	return 0;
}

static void parse_addr(const char *text, struct sockaddr_in *sa, int port_required)
{
	char host[64];
	const char *colon = strrchr(text, ':');
	size_t len = colon ? (size_t)(colon - text) : strlen(text);

	if ((port_required && !colon) || len >= sizeof(host))
		die(text, "use ADDRESS:PORT");
	memcpy(host, text, len);
	host[len] = 0;
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	if (inet_pton(AF_INET, host, &sa->sin_addr) != 1)
		die(text, "not an IPv4 address");
	if (colon)
		sa->sin_port = htons((uint16_t)atoi(colon + 1));
}

int main(int argc, char **argv)
{
	static const struct option longs[] = {
		{"bind", required_argument, NULL, 'b'},
		{"to", required_argument, NULL, 't'},
		{"size", required_argument, NULL, 's'},
		{NULL, 0, NULL, 0},
	};
	struct sockaddr_in local, remote;
	int have_local = 0, have_remote = 0, opt;
	long size = 0;

	while ((opt = getopt_long(argc, argv, "", longs, NULL)) != -1) {
		if (opt == 'b') {
			parse_addr(optarg, &local, 0);
			have_local = 1;
		} else if (opt == 't') {
			parse_addr(optarg, &remote, 1);
			have_remote = 1;
		} else if (opt == 's') {
			size = strtol(optarg, NULL, 10);
		} else {
			die("arguments", "use --bind ADDRESS --to ADDRESS:PORT --size BYTES < times");
		}
	}
	if (!have_remote || size <= 0 || size > 65507)
		die("arguments", "--to ADDRESS:PORT and --size 1..65507 are required");
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	struct sched_param sp = {.sched_priority = 10};
	int fifo = sched_setscheduler(0, SCHED_FIFO, &sp) == 0; /* refused without the right: coarser */

	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0 || (have_local && bind(fd, (struct sockaddr *)&local, sizeof(local)) < 0))
		die("socket", strerror(errno));
	char *payload = calloc(1, (size_t)size);
	uint64_t *late = calloc(LATE_BINS + 1, sizeof(*late));
	int64_t times[BATCH], late_max = 0;
	uint64_t sent = 0, errors = 0, count = 0;
	size_t have = 0; /* bytes in times[], a time cut short by the pipe kept for the next read */

	while (!stopping) {
		ssize_t got = read(0, (char *)times + have, sizeof(times) - have);
		if (got <= 0)
			break;
		have += (size_t)got;
		size_t whole = have / sizeof(times[0]);
		for (size_t i = 0; i < whole && !stopping; i++) {
			wait_until(times[i]);
			if (stopping)
				break;
			if (sendto(fd, payload, (size_t)size, 0, (struct sockaddr *)&remote, sizeof(remote)) == size)
				sent++;
			else
				errors++; /* ENOBUFS: the device queue was full; the datagram is lost */
			int64_t l = now_ns() - times[i];
			late[l < 0 ? 0 : (l / LATE_BIN_NS > LATE_BINS ? LATE_BINS : l / LATE_BIN_NS)]++;
			late_max = l > late_max ? l : late_max;
			count++;
		}
		have -= whole * sizeof(times[0]);
		memmove(times, times + whole, have);
	}
	printf("{\"udp_packets\": %lu, \"udp_bytes\": %lu, \"udp_send_errors\": %lu, \"sched_fifo\": %s, "
	       "\"udp_late_us\": {\"p50\": %.1f, \"p99\": %.1f, \"max\": %.1f}}\n",
	       (unsigned long)sent, (unsigned long)(sent * (uint64_t)size), (unsigned long)errors,
	       fifo ? "true" : "false", quantile(late, count, 0.5), quantile(late, count, 0.99),
	       (double)late_max / 1000);
	return 0;
}
