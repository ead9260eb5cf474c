/* What the preload capture costs a program (experiments/bench_preload.py runs it):
 *
 *   preload_bench calls unix|tcp|devnull ITERATIONS BLOCKS   ns per iteration through libc
 *                                                           against the same system calls made raw
 *   preload_bench bulk SECONDS CHUNK                         Gb/s and CPU s per GB of TCP loopback
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static int listener(struct sockaddr_in *addr)
{
	socklen_t len = sizeof(*addr);
	int l = socket(AF_INET, SOCK_STREAM, 0);
	memset(addr, 0, sizeof(*addr));
	addr->sin_family = AF_INET;
	addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(l, (void *)addr, sizeof(*addr)) || listen(l, 1) || getsockname(l, (void *)addr, &len))
		exit(1);
	return l;
}

static void tcp_pair(int sv[2])
{
	struct sockaddr_in addr;
	int l = listener(&addr), one = 1;
	sv[0] = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(sv[0], (void *)&addr, sizeof(addr)))
		exit(1);
	sv[1] = accept(l, NULL, NULL);
	setsockopt(sv[0], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	close(l);
}

static double median(double *v, int n)
{
	qsort(v, n, sizeof(double), cmp);
	return v[n / 2];
}

/* One iteration: send + recv of 64 bytes (or one write to /dev/null), through
 * libc (what the shim interposes) or as raw system calls (what it cannot see). */
static void iteration(const char *mode, int sv[2], int devnull, int raw)
{
	static char buf[64];

	if (!strcmp(mode, "devnull")) {
		if (raw)
			syscall(SYS_write, devnull, buf, sizeof(buf));
		else
			write(devnull, buf, sizeof(buf));
	} else if (raw) {
		syscall(SYS_sendto, sv[0], buf, sizeof(buf), 0, NULL, 0);
		syscall(SYS_recvfrom, sv[1], buf, sizeof(buf), 0, NULL, NULL);
	} else {
		send(sv[0], buf, sizeof(buf), 0);
		recv(sv[1], buf, sizeof(buf), 0);
	}
}

/* Blocks of n iterations through libc and as raw system calls, alternating
 * (paired: a neighbour's noise hits both): ns per iteration of each (medians),
 * the median of the blocks' differences, the libc calls made. */
static void calls(const char *mode, long n, int blocks)
{
	double lib[256], raw[256], diff[256];
	int sv[2], devnull = open("/dev/null", O_WRONLY);

	if (!strcmp(mode, "tcp"))
		tcp_pair(sv);
	else
		socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
	for (int b = 0; b < blocks; b++) {
		for (int k = 0; k < 2; k++) {
			int is_raw = (b + k) % 2;	/* which goes first alternates */
			double t0 = now();

			for (long i = 0; i < n; i++)
				iteration(mode, sv, devnull, is_raw);
			(is_raw ? raw : lib)[b] = (now() - t0) * 1e9 / n;
		}
		diff[b] = lib[b] - raw[b];
	}
	printf("%.2f %.2f %.2f %ld\n", median(lib, blocks), median(raw, blocks), median(diff, blocks),
	       n * blocks);
}

/* Sender and receiver on CPUs of their own: loopback throughput is bimodal otherwise. */
static void pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu % sysconf(_SC_NPROCESSORS_ONLN), &set);
	sched_setaffinity(0, sizeof(set), &set);
}

static double cpu_seconds(int who)
{
	struct rusage ru;
	getrusage(who, &ru);
	return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

/* Gb/s, CPU seconds per GB (both processes), send calls, recv calls, seconds */
static void bulk(double seconds, size_t chunk)
{
	static char buf[1 << 16];
	struct sockaddr_in addr;
	int l = listener(&addr), p[2], status;
	long long sent = 0, got = 0, sends = 0, recvs[2] = {0, 0};
	double t0, elapsed;

	if (pipe(p))
		exit(1);
	if (fork() == 0) {
		int c = socket(AF_INET, SOCK_STREAM, 0);
		ssize_t k;

		pin(1);
		if (connect(c, (void *)&addr, sizeof(addr)))
			_exit(1);
		recvs[0] = got = 0;
		while ((k = recv(c, buf, sizeof(buf), 0)) > 0) {
			got += k;
			recvs[0]++;
		}
		recvs[1] = got;
		write(p[1], recvs, sizeof(recvs));
		_exit(0);
	}
	int s = accept(l, NULL, NULL);
	pin(0);
	t0 = now();
	while (now() - t0 < seconds)
		for (int i = 0; i < 64; i++) {
			ssize_t k = send(s, buf, chunk, 0);
			if (k < 0)
				exit(1);
			sent += k;
			sends++;
		}
	shutdown(s, SHUT_WR);
	if (read(p[0], recvs, sizeof(recvs)) != sizeof(recvs))
		exit(1);
	elapsed = now() - t0;
	wait(&status);
	printf("%.3f %.3f %lld %lld %.6f\n", recvs[1] * 8 / elapsed / 1e9,
	       (cpu_seconds(RUSAGE_SELF) + cpu_seconds(RUSAGE_CHILDREN)) / (recvs[1] / 1e9),
	       sends, recvs[0] + 1, elapsed);
}

int main(int argc, char **argv)
{
	if (argc == 5 && !strcmp(argv[1], "calls"))
		calls(argv[2], atol(argv[3]), atoi(argv[4]));
	else if (argc == 4 && !strcmp(argv[1], "bulk"))
		bulk(atof(argv[2]), atol(argv[3]));
	else
		return 2;
	return 0;
}
