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
 * A path is a pipeline of stages, one per hop: an optional link (drop-tail
 * queue in bytes and/or packets, serialisation at the rate, random loss
 * after it) then the hop's share of the one-way delay (plus up to --jitter,
 * order kept). Only the bottleneck hop (--bottleneck, default the middle)
 * has the rate, queue, loss and jitter; the others are fast (no
 * serialisation) and lossless. The reverse path has the same delays and
 * jitter, and with --duplex a link of its own like the forward one (the same
 * rate, queue and loss, its own state and random numbers); without, no link. Every packet enters at the path's start, so every stage
 * sees its arrivals in time order and a packet's exit time from each stage is
 * known when it arrives: the process computes it through the stages at once
 * and then only wakes (timerfd, CLOCK_MONOTONIC, absolute) to deliver it.
 *
 * Counters per direction are written as JSON to --stats on SIGUSR1 and at
 * exit (SIGTERM, SIGINT, or the parent's death), and printed on stdout at
 * exit. "ready" on stdout once every device exists. Exit status 2: bad
 * arguments or a device that cannot be made.
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

#define MAX_TUNS 16
#define MAX_HOPS 64
#define READ_BATCH 256
#define PKT_MAX 65536
#define HELD_MAX_BYTES (1ULL << 30)     /* never hold more than this in flight */
#define LATE_BINS 2000                  /* lateness histogram: 10 us bins up to 20 ms */
#define LATE_BIN_NS 10000

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

/* ------------------------------------------------------------ random --- */

/* xoshiro256**, seeded by splitmix64: fast, and the same sequence for a seed. */
struct rng { uint64_t s[4]; };

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static void rng_seed(struct rng *r, uint64_t seed)
{
	for (int i = 0; i < 4; i++)
		r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t rng_next(struct rng *r)
{
	uint64_t *s = r->s, result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return result;
}

static double rng_unit(struct rng *r)     /* uniform in [0, 1) */
{
	return (rng_next(r) >> 11) * 0x1.0p-53;
}

/* -------------------------------------------------------------- loss --- */

/* Bernoulli (ge == 0: loss probability p) or Gilbert-Elliott: in state good
 * a packet is lost with probability `good`, in bad with `bad`; after each
 * packet good -> bad with probability p, bad -> good with r. */
struct loss {
	int ge;
	double p, r, bad, good;
	int in_bad;
};

static int loss_draw(struct loss *l, struct rng *rng)
{
	int lost;

	if (!l->ge)
		return l->p > 0 && rng_unit(rng) < l->p;
	lost = rng_unit(rng) < (l->in_bad ? l->bad : l->good);
	if (l->in_bad ? rng_unit(rng) < l->r : rng_unit(rng) < l->p)
		l->in_bad = !l->in_bad;
	return lost;
}

/* ------------------------------------------------------------- stages --- */

/* Packets waiting for the link: a ring of (service start, length). */
struct waiting {
	int64_t *start;
	uint32_t *len;
	size_t cap, head, n;
	uint64_t bytes;
};

static void waiting_push(struct waiting *w, int64_t start, uint32_t len)
{
	if (w->n == w->cap) {
		size_t cap = w->cap ? 2 * w->cap : 1024;
		int64_t *s = malloc(cap * sizeof(*s));
		uint32_t *l = malloc(cap * sizeof(*l));

		if (!s || !l)
			die(1, "out of memory");
		for (size_t i = 0; i < w->n; i++) {
			s[i] = w->start[(w->head + i) % w->cap];
			l[i] = w->len[(w->head + i) % w->cap];
		}
		free(w->start);
		free(w->len);
		w->start = s, w->len = l, w->cap = cap, w->head = 0;
	}
	w->start[(w->head + w->n) % w->cap] = start;
	w->len[(w->head + w->n) % w->cap] = len;
	w->n++;
	w->bytes += len;
}

/* Forget the packets whose service has begun by time t. */
static void waiting_trim(struct waiting *w, int64_t t)
{
	while (w->n && w->start[w->head] <= t) {
		w->bytes -= w->len[w->head];
		w->head = (w->head + 1) % w->cap;
		w->n--;
	}
}

struct counters {
	uint64_t packets_in, bytes_in, forwarded, forwarded_bytes;
	uint64_t queue_drops, queue_drop_bytes, random_losses, random_loss_bytes;
	uint64_t too_big, unroutable, overflow, write_errors;
	uint64_t queue_max_bytes, queue_max_packets;
	uint64_t late[LATE_BINS + 1];          /* delivery - due, 10 us bins; last: beyond */
	int64_t late_max;
};

/* One hop: a link (if rate_bps) and then the propagation delay. */
struct stage {
	uint64_t rate_bps;                     /* 0: no link (fast) */
	uint64_t queue_bytes, queue_packets;   /* drop-tail limits of the waiting packets; 0: none */
	struct loss loss;
	int64_t delay_ns, jitter_ns;
	int64_t busy_until, last_exit;
	struct waiting wait;
};

enum verdict { PASS, QUEUE_DROP, RANDOM_LOSS };

/* The time a packet arriving at `t` leaves the stage (through *t), or why it does not. */
static enum verdict stage_pass(struct stage *s, int64_t *t, uint32_t len, struct rng *rng,
			       struct counters *c)
{
	int64_t at = *t, exit = at;

	if (s->rate_bps) {
		int64_t start = s->busy_until > at ? s->busy_until : at;

		waiting_trim(&s->wait, at);
		if (start > at) {                  /* the link is busy: the packet waits */
			if ((s->queue_packets && s->wait.n + 1 > s->queue_packets) ||
			    (s->queue_bytes && s->wait.bytes + len > s->queue_bytes))
				return QUEUE_DROP;
			waiting_push(&s->wait, start, len);
			if (s->wait.bytes > c->queue_max_bytes)
				c->queue_max_bytes = s->wait.bytes;
			if (s->wait.n > c->queue_max_packets)
				c->queue_max_packets = s->wait.n;
		}
		s->busy_until = start + (int64_t)((uint64_t)len * 8000000000ULL / s->rate_bps);
		exit = s->busy_until;
	}
	if (loss_draw(&s->loss, rng))              /* lost on the wire, after using the link */
		return RANDOM_LOSS;
	exit += s->delay_ns;
	if (s->jitter_ns)
		exit += (int64_t)(rng_unit(rng) * (double)(s->jitter_ns + 1));
	if (exit < s->last_exit)               /* jitter never reorders */
		exit = s->last_exit;
	s->last_exit = exit;
	*t = exit;
	return PASS;
}

/* ------------------------------------------------------------ packets --- */

struct pkt {
	int64_t due;
	int out;                               /* index of the TUN it goes to */
	uint32_t len;
	unsigned char data[];
};

/* Packets in flight on one direction, in delivery order. */
struct fifo {
	struct pkt **p;
	size_t cap, head, n;
	uint64_t bytes;
};

static void fifo_push(struct fifo *f, struct pkt *p)
{
	if (f->n == f->cap) {
		size_t cap = f->cap ? 2 * f->cap : 4096;
		struct pkt **q = malloc(cap * sizeof(*q));

		if (!q)
			die(1, "out of memory");
		for (size_t i = 0; i < f->n; i++)
			q[i] = f->p[(f->head + i) % f->cap];
		free(f->p);
		f->p = q, f->cap = cap, f->head = 0;
	}
	f->p[(f->head + f->n) % f->cap] = p;
	f->n++;
	f->bytes += p->len;
}

static struct pkt *fifo_front(struct fifo *f) { return f->n ? f->p[f->head] : NULL; }

static struct pkt *fifo_pop(struct fifo *f)
{
	struct pkt *p = f->p[f->head];

	f->head = (f->head + 1) % f->cap;
	f->n--;
	f->bytes -= p->len;
	return p;
}

/* ---------------------------------------------------------- the paths --- */

struct tun {
	int side;                              /* 0: a (senders), 1: b (receivers) */
	int fd;
	const char *ns;                        /* where it lives: a netns path, or "-" */
	char name[IFNAMSIZ];
	uint32_t addr;                         /* network order */
};

struct direction {
	const char *name;
	struct stage stages[MAX_HOPS];
	int nstages;
	struct fifo flight;
	struct counters c;
	struct rng rng;
};

static struct tun tuns[MAX_TUNS];
static int ntuns;
static struct direction dirs[2] = {{.name = "forward"}, {.name = "reverse"}};
static uint32_t mtu = 1500;

static int route(int to_side, const unsigned char *ip, uint32_t len)
{
	uint32_t dst;

	if (len < 20 || (ip[0] >> 4) != 4)
		return -1;
	memcpy(&dst, ip + 16, 4);
	for (int i = 0; i < ntuns; i++)
		if (tuns[i].side == to_side && tuns[i].addr == dst)
			return i;
	return -1;
}

/* A packet read from a side-`from` device at `t` enters direction `from`. */
static void admit(int from, const unsigned char *buf, uint32_t len, int64_t t)
{
	struct direction *d = &dirs[from];
	struct counters *c = &d->c;
	int64_t due = t;
	int out;
	struct pkt *p;

	c->packets_in++;
	c->bytes_in += len;
	if (len > mtu) {
		c->too_big++;
		return;
	}
	out = route(!from, buf, len);
	if (out < 0) {
		c->unroutable++;
		return;
	}
	for (int i = 0; i < d->nstages; i++) {
		switch (stage_pass(&d->stages[i], &due, len, &d->rng, c)) {
		case PASS:
			continue;
		case QUEUE_DROP:
			c->queue_drops++;
			c->queue_drop_bytes += len;
			return;
		case RANDOM_LOSS:
			c->random_losses++;
			c->random_loss_bytes += len;
			return;
		}
	}
	if (d->flight.bytes + len > HELD_MAX_BYTES || !(p = malloc(sizeof(*p) + len))) {
		c->overflow++;
		return;
	}
	p->due = due;
	p->out = out;
	p->len = len;
	memcpy(p->data, buf, len);
	fifo_push(&d->flight, p);
}

static void deliver_due(int64_t now)
{
	for (int k = 0; k < 2; k++) {
		struct direction *d = &dirs[k];
		struct pkt *p;

		while ((p = fifo_front(&d->flight)) && p->due <= now) {
			int64_t late = now - p->due;

			fifo_pop(&d->flight);
			if (write(tuns[p->out].fd, p->data, p->len) == (ssize_t)p->len) {
				d->c.forwarded++;
				d->c.forwarded_bytes += p->len;
			} else {
				d->c.write_errors++;
			}
			d->c.late[late / LATE_BIN_NS < LATE_BINS ? late / LATE_BIN_NS : LATE_BINS]++;
			if (late > d->c.late_max)
				d->c.late_max = late;
			free(p);
		}
	}
}

static int64_t next_due(void)
{
	int64_t next = INT64_MAX;

	for (int k = 0; k < 2; k++) {
		struct pkt *p = fifo_front(&dirs[k].flight);

		if (p && p->due < next)
			next = p->due;
	}
	return next;
}

/* --------------------------------------------------------------- stats --- */

static int64_t started_ns;
static int realtime;
static const char *stats_path;

static double late_quantile(const struct counters *c, double q)
{
	uint64_t total = 0, seen = 0;

	for (int i = 0; i <= LATE_BINS; i++)
		total += c->late[i];
	if (!total)
		return 0;
	for (int i = 0; i <= LATE_BINS; i++) {
		seen += c->late[i];
		if (seen >= q * total)
			return (i + 1) * (LATE_BIN_NS / 1000.0);
	}
	return LATE_BINS * (LATE_BIN_NS / 1000.0);
}

static void write_counters(FILE *f, const struct counters *c)
{
	fprintf(f, "{\"packets_in\": %lu, \"bytes_in\": %lu, \"forwarded\": %lu, "
		"\"forwarded_bytes\": %lu, \"queue_drops\": %lu, \"queue_drop_bytes\": %lu, "
		"\"random_losses\": %lu, \"random_loss_bytes\": %lu, \"too_big\": %lu, "
		"\"unroutable\": %lu, \"overflow\": %lu, \"write_errors\": %lu, "
		"\"queue_max_bytes\": %lu, \"queue_max_packets\": %lu, "
		"\"late_p50_us\": %.0f, \"late_p99_us\": %.0f, \"late_max_us\": %.1f}",
		c->packets_in, c->bytes_in, c->forwarded, c->forwarded_bytes, c->queue_drops,
		c->queue_drop_bytes, c->random_losses, c->random_loss_bytes, c->too_big,
		c->unroutable, c->overflow, c->write_errors, c->queue_max_bytes,
		c->queue_max_packets, late_quantile(c, 0.5), late_quantile(c, 0.99),
		c->late_max / 1000.0);
}

static void write_stats(FILE *f)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	fprintf(f, "{\"elapsed_s\": %.6f, \"cpu_s\": %.6f, \"cpu_user_s\": %.6f, \"sched_fifo\": %s, "
		"\"held_packets\": [%zu, %zu], ", (now_ns() - started_ns) / 1e9,
		ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6,
		ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6, realtime ? "true" : "false",
		dirs[0].flight.n, dirs[1].flight.n);
	for (int k = 0; k < 2; k++) {
		fprintf(f, "\"%s\": ", dirs[k].name);
		write_counters(f, &dirs[k].c);
		fputs(k ? "}\n" : ", ", f);
	}
}

static void save_stats(void)
{
	char tmp[4096];
	FILE *f;

	if (!stats_path)
		return;
	snprintf(tmp, sizeof(tmp), "%s.tmp", stats_path);
	f = fopen(tmp, "w");
	if (!f)
		return;
	write_stats(f);
	if (fclose(f) == 0)
		rename(tmp, stats_path);
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
static void add_tun(const char *spec)
{
	char *copy = strdup(spec), *side, *ns, *name, *addr, *rest = copy;
	struct tun *t = &tuns[ntuns];

	side = strsep(&rest, ":");
	ns = strsep(&rest, ":");
	name = strsep(&rest, ":");
	addr = rest;
	if (ntuns == MAX_TUNS)
		die(2, "--tun: at most %d devices", MAX_TUNS);
	if (!addr || (strcmp(side, "a") && strcmp(side, "b")) || !*ns || !*name ||
	    strlen(name) >= IFNAMSIZ || inet_pton(AF_INET, addr, &t->addr) != 1)
		die(2, "--tun %s: use a|b:NETNS-PATH|-:DEVICE:IPV4", spec);
	t->side = strcmp(side, "a") ? 1 : 0;
	snprintf(t->name, IFNAMSIZ, "%s", name);
	t->ns = ns;                            /* in `copy`, kept for the process's life */
	t->fd = -1;                            /* opened once every option is read */
	ntuns++;
}

/* ----------------------------------------------------------- options --- */

struct path_opts {
	uint64_t rate, queue_bytes, queue_packets, seed;
	int64_t delay, jitter;
	int hops, bottleneck, duplex;
	struct loss loss;
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
static void parse_ge(struct loss *l, const char *text)
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
	*l = (struct loss){.ge = 1, .p = v[0], .r = v[1], .bad = v[2], .good = v[3]};
	free(copy);
}

/* Forward: hop `bottleneck` has the link; every hop a share of the delay.
 * Reverse: the hops in the other order, the link only when duplex. Jitter on
 * the bottleneck hop, both ways. */
static void build_paths(const struct path_opts *o)
{
	for (int k = 0; k < 2; k++) {
		struct direction *d = &dirs[k];

		d->nstages = o->hops;
		for (int i = 0; i < o->hops; i++) {
			int hop = k ? o->hops - 1 - i : i;
			struct stage *s = &d->stages[i];

			memset(s, 0, sizeof(*s));
			s->delay_ns = o->delay / o->hops + (hop == o->hops - 1 ? o->delay % o->hops : 0);
			if (hop != o->bottleneck)
				continue;
			s->jitter_ns = o->jitter;
			if (k == 0 || o->duplex) {
				s->rate_bps = o->rate;
				s->queue_bytes = o->queue_bytes;
				s->queue_packets = o->queue_packets;
				s->loss = o->loss;
			}
		}
		rng_seed(&d->rng, o->seed * 2 + k);
	}
}

static void usage(void)
{
	fprintf(stderr,
		"usage: linkem --tun a|b:NETNS:DEVICE:IPV4 ... [--delay NS] [--jitter NS] [--rate BPS]\n"
		"              [--queue-bytes N] [--queue-packets N] [--loss P | --ge P,R,BAD,GOOD]\n"
		"              [--hops N] [--bottleneck I] [--duplex] [--mtu N] [--seed N] [--stats FILE]\n"
		"              [--no-rt]\n");
	exit(2);
}

static void parse(int argc, char **argv, struct path_opts *o, int *want_rt)
{
	static const struct option longs[] = {
		{"tun", 1, 0, 't'}, {"delay", 1, 0, 'd'}, {"jitter", 1, 0, 'j'}, {"rate", 1, 0, 'r'},
		{"queue-bytes", 1, 0, 'B'}, {"queue-packets", 1, 0, 'P'}, {"loss", 1, 0, 'l'},
		{"ge", 1, 0, 'g'}, {"hops", 1, 0, 'h'}, {"bottleneck", 1, 0, 'b'}, {"mtu", 1, 0, 'm'},
		{"seed", 1, 0, 's'}, {"stats", 1, 0, 'S'}, {"no-rt", 0, 0, 'n'}, {"name", 1, 0, 'N'},
		{"duplex", 0, 0, 'D'},
		{0, 0, 0, 0}};
	int opt;

	*o = (struct path_opts){.hops = 1, .bottleneck = -1, .seed = 1};
	while ((opt = getopt_long(argc, argv, "", longs, NULL)) != -1) {
		switch (opt) {
		case 't': add_tun(optarg); break;
		case 'd': o->delay = number("delay", optarg, 100000000000ULL); break;
		case 'j': o->jitter = number("jitter", optarg, 10000000000ULL); break;
		case 'r': o->rate = number("rate", optarg, 1000000000000ULL); break;
		case 'B': o->queue_bytes = number("queue-bytes", optarg, 1ULL << 40); break;
		case 'P': o->queue_packets = number("queue-packets", optarg, 1ULL << 32); break;
		case 'l': o->loss = (struct loss){.p = probability("loss", optarg)}; break;
		case 'g': parse_ge(&o->loss, optarg); break;
		case 'h': o->hops = number("hops", optarg, MAX_HOPS); break;
		case 'b': o->bottleneck = number("bottleneck", optarg, MAX_HOPS); break;
		case 'm': mtu = number("mtu", optarg, PKT_MAX); break;
		case 's': o->seed = number("seed", optarg, UINT64_MAX >> 2); break;
		case 'S': stats_path = optarg; break;
		case 'n': *want_rt = 0; break;
		case 'N': prog_name = optarg; break;
		case 'D': o->duplex = 1; break;
		default: usage();
		}
	}
	if (optind != argc || ntuns < 2)
		usage();
	if (o->hops < 1)
		die(2, "--hops %d: at least 1", o->hops);
	if (o->bottleneck < 0)
		o->bottleneck = o->hops / 2;
	if (o->bottleneck >= o->hops)
		die(2, "--bottleneck %d: a hop from 0 to %d", o->bottleneck, o->hops - 1);
	if (mtu < 68)
		die(2, "--mtu %u: at least 68", mtu);
}

/* ---------------------------------------------------------------- main --- */

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

static void read_tun(int i, unsigned char *buf)
{
	for (int n = 0; n < READ_BATCH; n++) {
		ssize_t len = read(tuns[i].fd, buf, PKT_MAX);

		if (len <= 0)
			return;
		admit(tuns[i].side, buf, (uint32_t)len, now_ns());
	}
}

static int ep, tfd, sfd, running = 1;
static unsigned char buf[PKT_MAX];

/* Handle what epoll reported (timeout_ms: -1 sleep, 0 poll); returns events seen. */
static int poll_once(int timeout_ms, struct waker *w)
{
	struct epoll_event evs[MAX_TUNS + 2];
	int n = epoll_wait(ep, evs, MAX_TUNS + 2, timeout_ms);

	if (n < 0 && errno != EINTR)
		die(1, "epoll_wait: %s", strerror(errno));
	for (int i = 0; i < n; i++) {
		uint32_t what = evs[i].data.u32;

		if (what < MAX_TUNS) {
			read_tun(what, buf);
		} else if (what == MAX_TUNS) {
			uint64_t expirations;

			if (read(tfd, &expirations, sizeof(expirations)) > 0) {
				if (w->armed != INT64_MAX) {
					waker_learn(w, now_ns() - w->armed);
					w->spin_until = w->armed_for;
				}
				w->armed_for = INT64_MAX;
			}
		} else {
			struct signalfd_siginfo si;

			while (read(sfd, &si, sizeof(si)) == sizeof(si)) {
				if (si.ssi_signo == SIGUSR1)
					save_stats();
				else
					running = 0;
			}
		}
	}
	return n;
}

static void setup_events(sigset_t *sigs)
{
	struct epoll_event ev = {.events = EPOLLIN};

	ep = epoll_create1(EPOLL_CLOEXEC);
	tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	sfd = signalfd(-1, sigs, SFD_NONBLOCK | SFD_CLOEXEC);
	if (ep < 0 || tfd < 0 || sfd < 0)
		die(1, "epoll/timerfd/signalfd: %s", strerror(errno));
	for (int i = 0; i < ntuns; i++) {
		ev.data.u32 = i;
		epoll_ctl(ep, EPOLL_CTL_ADD, tuns[i].fd, &ev);
	}
	ev.data.u32 = MAX_TUNS;
	epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &ev);
	ev.data.u32 = MAX_TUNS + 1;
	epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &ev);
}

int main(int argc, char **argv)
{
	struct path_opts o;
	struct waker w = {.margin = 200000, .armed = INT64_MAX, .armed_for = INT64_MAX,
			  .spin_until = INT64_MIN};
	int want_rt = 1, home;
	sigset_t sigs;

	parse(argc, argv, &o, &want_rt);
	build_paths(&o);
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
	home = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (home < 0)
		die(2, "/proc/self/ns/net: %s", strerror(errno));
	for (int i = 0; i < ntuns; i++)
		tuns[i].fd = open_tun(tuns[i].ns, tuns[i].name, home);
	close(home);
	setup_events(&sigs);
	if (want_rt) {
		struct sched_param sp = {.sched_priority = 20};

		realtime = sched_setscheduler(0, SCHED_FIFO, &sp) == 0;
	}
	prctl(PR_SET_TIMERSLACK, 1UL);
	started_ns = now_ns();
	printf("ready sched_fifo=%d\n", realtime);
	fflush(stdout);

	while (running) {
		int64_t next = next_due(), now = now_ns();

		if (next <= w.spin_until && next > now) {
			poll_once(0, &w);              /* woken early: poll the devices until due */
		} else {
			w.spin_until = INT64_MIN;
			arm(tfd, &w, next, now);
			poll_once(-1, &w);
		}
		deliver_due(now_ns());
	}
	save_stats();
	write_stats(stdout);
	return 0;
}
