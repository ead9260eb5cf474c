/* linkem: a userspace link emulator between network namespaces, on TUN devices.
 *
 *   linkem --tun a:/run/netns/L:tunL:10.203.1.1 --tun b:/run/netns/R:tunR:10.203.1.2 \
 *          --delay 30000000 --rate 20000000 --queue-packets 100 --hops 3 --stats s.json
 *
 * Each --tun opens a TUN device in a network namespace (side a: the senders,
 * side b: the receivers) and names the IPv4 address behind it. What a side-a
 * device reads crosses the forward path and is written to the side-b device
 * that holds its destination; the reverse path carries the answers back.
 *
 * The paths are linkem's core (core.h: stages, queue, loss, jitter, without a
 * system call), one per direction; this file is the thin part around it:
 * options, devices, and an epoll loop that reads packets in, pushes them into
 * the core and writes out what is due, waking (timerfd, CLOCK_MONOTONIC,
 * absolute) for the next delivery. The forward path's bottleneck hop
 * (--bottleneck, default the middle) has the link (rate, queue, loss) and the
 * jitter; the reverse path has the same delays and jitter, and with --duplex a
 * link like the forward one (its own state and random numbers), without none.
 *
 * Counters per direction are written as JSON to --stats on SIGUSR1 and at exit
 * (SIGTERM, SIGINT, or the parent's death), and printed on stdout at exit.
 * --log DIR writes every packet's record (core.h: struct lk_record) to
 * DIR/forward.linklog and DIR/reverse.linklog, by a writer thread of each
 * (linklog.h: a slow disk never holds up the packets). "ready" on stdout once every
 * device exists. Exit status 2: bad arguments or a device that cannot be made.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "core.h"
#include "linklog.h"

#define MAX_TUNS 16
#define READ_BATCH 256
#define PKT_MAX 65536

static const char *prog_name = "linkem";

static void die(int status, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", prog_name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(status);
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ------------------------------------------------------------- state --- */

struct tun {
	int side;                              /* 0: a (senders), 1: b (receivers) */
	int fd;
	const char *ns;                        /* where it lives: a netns path, or "-" */
	char name[IFNAMSIZ];
	uint32_t addr;                         /* network order */
};

/* A long sleep on this kind of VM wakes 50-200 us late (an idle vCPU's exit),
 * a short one (< LONG_SLEEP_NS) 30-40 us: before a long sleep the timer is set
 * `margin` early and, once it fires, the rest until that delivery is spent
 * polling the devices; short sleeps are not shortened, so dense traffic costs
 * no spinning. The margin is the largest oversleep of the last MARGIN_WINDOW
 * long sleeps plus 20 us, between 30 and 300 us. */
#define LONG_SLEEP_NS 1000000
#define MARGIN_WINDOW 64
#define MARGIN_MIN_NS 30000
#define MARGIN_MAX_NS 300000

struct waker {
	int64_t oversleep[MARGIN_WINDOW];
	int next;
	int64_t margin;
	int64_t armed, armed_for;              /* the timer's time, and the delivery it is for */
	int64_t spin_until;                    /* woken early: poll the devices until this due time */
};

struct emulator {
	struct tun tuns[MAX_TUNS];
	int ntuns;
	struct lk_dir *dirs[2];                /* forward (from side a), reverse */
	struct linklog *logs[2];               /* NULL: no log */
	const char *stats_path, *log_dir;
	int realtime, running;
	int64_t started_ns;
	int ep, tfd, sfd;
	struct waker waker;
	unsigned char buf[PKT_MAX];
};

static const char *const DIR_NAMES[2] = {"forward", "reverse"};

/* ------------------------------------------------------------- paths --- */

static int route(const struct emulator *e, int to_side, const unsigned char *ip, uint32_t len)
{
	uint32_t dst;

	if (len < 20 || (ip[0] >> 4) != 4)
		return -1;
	memcpy(&dst, ip + 16, 4);
	for (int i = 0; i < e->ntuns; i++)
		if (e->tuns[i].side == to_side && e->tuns[i].addr == dst)
			return i;
	return -1;
}

/* A packet read from a side-`from` device at `t` enters direction `from`. */
static void admit(struct emulator *e, int from, const unsigned char *data, uint32_t len, int64_t t)
{
	struct linklog *l = e->logs[from];
	int out = route(e, !from, data, len);

	lk_dir_push(e->dirs[from], t, data, len, out, l ? linklog_next(l) : NULL);
	if (l)
		linklog_commit(l);
}

static void deliver_due(struct emulator *e, int64_t now)
{
	for (int k = 0; k < 2; k++) {
		struct lk_counters *c = lk_dir_counters(e->dirs[k]);
		struct lk_packet *p;

		while ((p = lk_dir_pop_due(e->dirs[k], now))) {
			if (write(e->tuns[p->out].fd, p->data, p->len) == (ssize_t)p->len) {
				c->forwarded++;
				c->forwarded_bytes += p->len;
			} else {
				c->write_errors++;
			}
			free(p);
		}
	}
}

static int64_t next_due(const struct emulator *e)
{
	int64_t a = lk_dir_next(e->dirs[0]), b = lk_dir_next(e->dirs[1]);

	return a < b ? a : b;
}

/* --------------------------------------------------------------- stats --- */

static void write_counters(FILE *f, const struct lk_counters *c, struct linklog *l)
{
	fprintf(f, "{\"packets_in\": %lu, \"bytes_in\": %lu, \"forwarded\": %lu, "
		"\"forwarded_bytes\": %lu, \"queue_drops\": %lu, \"queue_drop_bytes\": %lu, "
		"\"random_losses\": %lu, \"random_loss_bytes\": %lu, \"too_big\": %lu, "
		"\"unroutable\": %lu, \"overflow\": %lu, \"write_errors\": %lu, "
		"\"queue_max_bytes\": %lu, \"queue_max_packets\": %lu, "
		"\"late_p50_us\": %.0f, \"late_p99_us\": %.0f, \"late_max_us\": %.1f, "
		"\"log_lost\": %lu, \"log_write_errors\": %lu}",
		c->packets_in, c->bytes_in, c->forwarded, c->forwarded_bytes, c->queue_drops,
		c->queue_drop_bytes, c->random_losses, c->random_loss_bytes, c->too_big,
		c->unroutable, c->overflow, c->write_errors, c->queue_max_bytes,
		c->queue_max_packets, lk_late_quantile(c, 0.5), lk_late_quantile(c, 0.99),
		c->late_max / 1000.0, l ? linklog_lost(l) : 0, l ? linklog_write_errors(l) : 0);
}

static void write_stats(const struct emulator *e, FILE *f)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	fprintf(f, "{\"elapsed_s\": %.6f, \"cpu_s\": %.6f, \"cpu_user_s\": %.6f, \"sched_fifo\": %s, "
		"\"held_packets\": [%lu, %lu], ", (now_ns() - e->started_ns) / 1e9,
		ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6,
		ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6, e->realtime ? "true" : "false",
		lk_dir_held(e->dirs[0]), lk_dir_held(e->dirs[1]));
	for (int k = 0; k < 2; k++) {
		fprintf(f, "\"%s\": ", DIR_NAMES[k]);
		write_counters(f, lk_dir_counters(e->dirs[k]), e->logs[k]);
		fputs(k ? "}\n" : ", ", f);
	}
}

/* The stats file (written whole, then renamed) and what the logs hold so far. */
static void save(struct emulator *e)
{
	char tmp[4096];
	FILE *f;

	for (int k = 0; k < 2; k++)
		if (e->logs[k])
			linklog_flush(e->logs[k]);
	if (!e->stats_path)
		return;
	snprintf(tmp, sizeof(tmp), "%s.tmp", e->stats_path);
	f = fopen(tmp, "w");
	if (!f)
		return;
	write_stats(e, f);
	if (fclose(f) == 0)
		rename(tmp, e->stats_path);
}

static void open_logs(struct emulator *e)
{
	for (int k = 0; k < 2; k++) {
		char path[4096];

		snprintf(path, sizeof(path), "%s/%s.linklog", e->log_dir, DIR_NAMES[k]);
		e->logs[k] = linklog_open(path);
		if (!e->logs[k])
			die(2, "--log %s: %s", path, strerror(errno));
	}
}

/* ------------------------------------------------------------ devices --- */

/* A TUN device `name` in the network namespace mounted at `ns` ("-": ours). */
static int open_tun(const char *ns, const char *name, int home)
{
	struct ifreq ifr = {0};
	int fd, nsfd = -1;

	if (strcmp(ns, "-")) {
		nsfd = open(ns, O_RDONLY | O_CLOEXEC);
		if (nsfd < 0)
			die(2, "network namespace %s: %s", ns, strerror(errno));
		if (setns(nsfd, CLONE_NEWNET) < 0)
			die(2, "entering network namespace %s: %s", ns, strerror(errno));
	}
	fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		die(2, "/dev/net/tun: %s", strerror(errno));
	ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
	snprintf(ifr.ifr_name, IFNAMSIZ, "%s", name);
	if (ioctl(fd, TUNSETIFF, &ifr) < 0)
		die(2, "TUN device %s: %s", name, strerror(errno));
	if (nsfd >= 0) {
		if (setns(home, CLONE_NEWNET) < 0)
			die(2, "back to our network namespace: %s", strerror(errno));
		close(nsfd);
	}
	return fd;
}

/* --tun SIDE:NS:NAME:ADDR */
static void add_tun(struct emulator *e, const char *spec)
{
	char *copy = strdup(spec), *side, *ns, *name, *addr, *rest = copy;
	struct tun *t = &e->tuns[e->ntuns];

	if (e->ntuns == MAX_TUNS)
		die(2, "--tun: at most %d devices", MAX_TUNS);
	side = strsep(&rest, ":");
	ns = strsep(&rest, ":");
	name = strsep(&rest, ":");
	addr = rest;
	if (!addr || (strcmp(side, "a") && strcmp(side, "b")) || !*ns || !*name ||
	    strlen(name) >= IFNAMSIZ || inet_pton(AF_INET, addr, &t->addr) != 1)
		die(2, "--tun %s: use a|b:NETNS-PATH|-:DEVICE:IPV4", spec);
	t->side = strcmp(side, "a") ? 1 : 0;
	snprintf(t->name, IFNAMSIZ, "%s", name);
	t->ns = ns;                            /* in `copy`, kept for the process's life */
	t->fd = -1;                            /* opened once every option is read */
	e->ntuns++;
}

/* ----------------------------------------------------------- options --- */

struct options {
	struct lk_config link;                 /* the forward direction's */
	uint64_t seed;
	int duplex, want_rt;
};

static uint64_t number(const char *opt, const char *text, uint64_t max)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(text, &end, 10);
	if (errno || end == text || *end || text[0] == '-' || v > max)
		die(2, "--%s %s: a whole number up to %llu", opt, text, (unsigned long long)max);
	return v;
}

static double probability(const char *opt, const char *text)
{
	char *end;
	double v = strtod(text, &end);

	if (end == text || *end || !(v >= 0 && v <= 1))
		die(2, "--%s %s: a probability between 0 and 1", opt, text);
	return v;
}

/* --ge P,R,BAD,GOOD */
static struct lk_loss parse_ge(const char *text)
{
	char *copy = strdup(text), *rest = copy;
	double v[4];

	for (int i = 0; i < 4; i++) {
		char *part = strsep(&rest, ",");

		if (!part)
			die(2, "--ge %s: P,R,BAD,GOOD (four probabilities)", text);
		v[i] = probability("ge", part);
	}
	if (rest)
		die(2, "--ge %s: P,R,BAD,GOOD (four probabilities)", text);
	free(copy);
	return (struct lk_loss){.ge = 1, .p = v[0], .r = v[1], .bad = v[2], .good = v[3]};
}

static void usage(void)
{
	fprintf(stderr,
		"usage: linkem --tun a|b:NETNS:DEVICE:IPV4 ... [--delay NS] [--jitter NS] [--rate BPS]\n"
		"              [--queue-bytes N] [--queue-packets N] [--loss P | --ge P,R,BAD,GOOD]\n"
		"              [--hops N] [--bottleneck I] [--duplex] [--mtu N] [--seed N] [--stats FILE]\n"
		"              [--log DIR] [--no-rt]\n");
	exit(2);
}

static void parse(int argc, char **argv, struct emulator *e, struct options *o)
{
	static const struct option longs[] = {
		{"tun", 1, 0, 't'}, {"delay", 1, 0, 'd'}, {"jitter", 1, 0, 'j'}, {"rate", 1, 0, 'r'},
		{"queue-bytes", 1, 0, 'B'}, {"queue-packets", 1, 0, 'P'}, {"loss", 1, 0, 'l'},
		{"ge", 1, 0, 'g'}, {"hops", 1, 0, 'h'}, {"bottleneck", 1, 0, 'b'}, {"mtu", 1, 0, 'm'},
		{"seed", 1, 0, 's'}, {"stats", 1, 0, 'S'}, {"no-rt", 0, 0, 'n'}, {"name", 1, 0, 'N'},
		{"duplex", 0, 0, 'D'}, {"log", 1, 0, 'L'}, {0, 0, 0, 0}};
	struct lk_config *l = &o->link;
	int opt;

	*o = (struct options){.link = {.hops = 1, .bottleneck = -1, .mtu = 1500}, .seed = 1, .want_rt = 1};
	while ((opt = getopt_long(argc, argv, "", longs, NULL)) != -1) {
		switch (opt) {
		case 't': add_tun(e, optarg); break;
		case 'd': l->delay_ns = number("delay", optarg, 100000000000ULL); break;
		case 'j': l->jitter_ns = number("jitter", optarg, 10000000000ULL); break;
		case 'r': l->rate_bps = number("rate", optarg, 1000000000000ULL); break;
		case 'B': l->queue_bytes = number("queue-bytes", optarg, 1ULL << 40); break;
		case 'P': l->queue_packets = number("queue-packets", optarg, 1ULL << 32); break;
		case 'l': l->loss = (struct lk_loss){.p = probability("loss", optarg)}; break;
		case 'g': l->loss = parse_ge(optarg); break;
		case 'h': l->hops = number("hops", optarg, LK_MAX_HOPS); break;
		case 'b': l->bottleneck = number("bottleneck", optarg, LK_MAX_HOPS); break;
		case 'm': l->mtu = number("mtu", optarg, PKT_MAX); break;
		case 's': o->seed = number("seed", optarg, UINT64_MAX >> 2); break;
		case 'S': e->stats_path = optarg; break;
		case 'L': e->log_dir = optarg; break;
		case 'n': o->want_rt = 0; break;
		case 'N': prog_name = optarg; break;
		case 'D': o->duplex = 1; break;
		default: usage();
		}
	}
	if (optind != argc || e->ntuns < 2)
		usage();
	if (l->hops < 1)
		die(2, "--hops %d: at least 1", l->hops);
	if (l->bottleneck < 0)
		l->bottleneck = l->hops / 2;
	if (l->bottleneck >= l->hops)
		die(2, "--bottleneck %d: a hop from 0 to %d", l->bottleneck, l->hops - 1);
	if (l->mtu < 68)
		die(2, "--mtu %u: at least 68", l->mtu);
}

/* The reverse direction: the hops in the other order, the same delays and jitter,
 * and the forward link only when duplex. */
static void build_paths(struct emulator *e, const struct options *o)
{
	struct lk_config back = o->link;

	back.reverse = 1;
	if (!o->duplex) {
		back.rate_bps = back.queue_bytes = back.queue_packets = 0;
		back.loss = (struct lk_loss){0};
	}
	e->dirs[0] = lk_dir_new(&o->link, o->seed * 2);
	e->dirs[1] = lk_dir_new(&back, o->seed * 2 + 1);
	if (!e->dirs[0] || !e->dirs[1])
		die(1, "out of memory");
}

/* ---------------------------------------------------------------- loop --- */

static void waker_learn(struct waker *w, int64_t late)
{
	int64_t worst = 0;

	w->oversleep[w->next++ % MARGIN_WINDOW] = late > 0 ? late : 0;
	for (int i = 0; i < MARGIN_WINDOW; i++)
		if (w->oversleep[i] > worst)
			worst = w->oversleep[i];
	w->margin = worst + 20000;
	if (w->margin < MARGIN_MIN_NS)
		w->margin = MARGIN_MIN_NS;
	if (w->margin > MARGIN_MAX_NS)
		w->margin = MARGIN_MAX_NS;
}

static void arm(int tfd, struct waker *w, int64_t due, int64_t now)
{
	struct itimerspec its = {0};
	int64_t at = due;

	if (due == w->armed_for)
		return;
	if (due != INT64_MAX && due - now > LONG_SLEEP_NS)
		at = due - w->margin;
	if (due != INT64_MAX) {
		its.it_value.tv_sec = at / 1000000000;
		its.it_value.tv_nsec = at % 1000000000;
		if (!its.it_value.tv_sec && !its.it_value.tv_nsec)
			its.it_value.tv_nsec = 1;
	}
	timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL);
	w->armed = at == due ? INT64_MAX : at;   /* only early wakes teach the margin */
	w->armed_for = due;
}

static void read_tun(struct emulator *e, int i)
{
	for (int n = 0; n < READ_BATCH; n++) {
		ssize_t len = read(e->tuns[i].fd, e->buf, PKT_MAX);

		if (len <= 0)
			return;
		admit(e, e->tuns[i].side, e->buf, (uint32_t)len, now_ns());
	}
}

static void timer_fired(struct emulator *e)
{
	struct waker *w = &e->waker;
	uint64_t expirations;

	if (read(e->tfd, &expirations, sizeof(expirations)) > 0) {
		if (w->armed != INT64_MAX) {
			waker_learn(w, now_ns() - w->armed);
			w->spin_until = w->armed_for;
		}
		w->armed_for = INT64_MAX;
	}
}

/* Handle what epoll reported (timeout_ms: -1 sleep, 0 poll). */
static void poll_once(struct emulator *e, int timeout_ms)
{
	struct epoll_event evs[MAX_TUNS + 2];
	int n = epoll_wait(e->ep, evs, MAX_TUNS + 2, timeout_ms);

	if (n < 0 && errno != EINTR)
		die(1, "epoll_wait: %s", strerror(errno));
	for (int i = 0; i < n; i++) {
		uint32_t what = evs[i].data.u32;
		struct signalfd_siginfo si;

		if (what < MAX_TUNS) {
			read_tun(e, what);
		} else if (what == MAX_TUNS) {
			timer_fired(e);
		} else {
			while (read(e->sfd, &si, sizeof(si)) == sizeof(si)) {
				if (si.ssi_signo == SIGUSR1)
					save(e);
				else
					e->running = 0;
			}
		}
	}
}

static void setup_events(struct emulator *e, sigset_t *sigs)
{
	struct epoll_event ev = {.events = EPOLLIN};

	e->ep = epoll_create1(EPOLL_CLOEXEC);
	e->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	e->sfd = signalfd(-1, sigs, SFD_NONBLOCK | SFD_CLOEXEC);
	if (e->ep < 0 || e->tfd < 0 || e->sfd < 0)
		die(1, "epoll/timerfd/signalfd: %s", strerror(errno));
	for (int i = 0; i < e->ntuns; i++) {
		ev.data.u32 = i;
		epoll_ctl(e->ep, EPOLL_CTL_ADD, e->tuns[i].fd, &ev);
	}
	ev.data.u32 = MAX_TUNS;
	epoll_ctl(e->ep, EPOLL_CTL_ADD, e->tfd, &ev);
	ev.data.u32 = MAX_TUNS + 1;
	epoll_ctl(e->ep, EPOLL_CTL_ADD, e->sfd, &ev);
}

static void run(struct emulator *e)
{
	struct waker *w = &e->waker;

	*w = (struct waker){.margin = 200000, .armed = INT64_MAX, .armed_for = INT64_MAX,
			    .spin_until = INT64_MIN};
	while (e->running) {
		int64_t next = next_due(e), now = now_ns();

		if (next <= w->spin_until && next > now) {
			poll_once(e, 0);               /* woken early: poll the devices until due */
		} else {
			w->spin_until = INT64_MIN;
			arm(e->tfd, w, next, now);
			poll_once(e, -1);
		}
		deliver_due(e, now_ns());
	}
}

int main(int argc, char **argv)
{
	static struct emulator emulator = {.running = 1};
	struct emulator *e = &emulator;
	struct options o;
	sigset_t sigs;
	int home;

	parse(argc, argv, e, &o);
	build_paths(e, &o);
	/* Die with the process that started us: nothing of a run outlives it. */
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	sigaddset(&sigs, SIGUSR1);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	if (getppid() == 1)
		return 0;
	if (e->log_dir)
		open_logs(e);
	home = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (home < 0)
		die(2, "/proc/self/ns/net: %s", strerror(errno));
	for (int i = 0; i < e->ntuns; i++)
		e->tuns[i].fd = open_tun(e->tuns[i].ns, e->tuns[i].name, home);
	close(home);
	setup_events(e, &sigs);
	if (o.want_rt) {
		struct sched_param sp = {.sched_priority = 20};

		e->realtime = sched_setscheduler(0, SCHED_FIFO, &sp) == 0;
	}
	prctl(PR_SET_TIMERSLACK, 1UL);
	e->started_ns = now_ns();
	printf("ready sched_fifo=%d\n", e->realtime);
	fflush(stdout);
	run(e);
	for (int k = 0; k < 2; k++)
		if (e->logs[k])
			linklog_finish(e->logs[k]);    /* everything written before the counters say so */
	save(e);
	write_stats(e, stdout);
	return 0;
}
