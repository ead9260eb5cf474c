// SPDX-License-Identifier: GPL-2.0-or-later
/* magnet-read's options. */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "options.h"

#define VERSION "0.1.0"

static const char usage[] =
"usage: magnet-read -o FILE [options]\n"
"Record what applications ask of TCP and what each layer of the stack makes of it\n"
"(docs/capture.md), into a magnet trace (docs/trace-format.md).\n"
"\n"
"  -o, --output FILE       trace file, created mode 0600 (strftime %-patterns allowed);\n"
"                          an existing non-empty file is kept unless --force\n"
"  -f, --force             replace existing non-empty trace files\n"
"  -b, --buffer SIZE       kernel buffer, shared out between the CPUs (default 16M)\n"
"  -d, --drain-delay TIME  how often the buffer is drained (default auto)\n"
"  -e, --events LIST       sock,tcp,ip,dev,sched, net (= the first four), all, or event\n"
"                          names such as SOCK_SEND,DEV_RECV (default net)\n"
"  -x, --ext               extended records: TCP state, IP header, addresses, task, GSO\n"
"  -p, --pid PID           only connections of this process\n"
"  -c, --cgroup DIR        only connections of this cgroup v2 (and below it)\n"
"  -P, --port PORTS        only connections with one of these local or remote ports\n"
"  -D, --duration TIME     stop after TIME\n"
"      --rotate-size SIZE  start a new file when this one reaches SIZE\n"
"      --rotate-time TIME  start a new file every TIME (SIGHUP: now)\n"
"      --status-dir DIR    where `magnet status` finds running captures (" DEFAULT_STATUS_DIR ")\n"
"      --stats FILE        enable BPF run-time statistics, write them as JSON at the end\n"
"      --btf FILE          kernel BTF, where /sys/kernel/btf/vmlinux is missing\n"
"      --no-drain          load the programs but never drain (overhead measurements)\n"
"      --ready-fd FD       write \"ready\" to FD once capturing\n"
"      --parent PID        PID is the parent: stop when it exits, the trace marked as\n"
"                          ended early (magnet capture passes its own pid)\n"
"  -q, --quiet             no summary on stderr\n"
"  -v, --verbose           libbpf's messages on stderr\n"
"  -V, --version\n"
"\n"
"SIZE: bytes with an optional K, M or G suffix. TIME: a number with us, ms, s, m, h or d\n"
"(seconds without a unit). SIGINT/SIGTERM stop and close the trace; SIGHUP rotates.\n";

enum { OPT_ROTATE_SIZE = 256, OPT_ROTATE_TIME, OPT_STATUS_DIR, OPT_STATS, OPT_BTF, OPT_NO_DRAIN,
       OPT_READY_FD, OPT_PARENT };

static const struct option long_options[] = {
	{"output", required_argument, 0, 'o'},
	{"buffer", required_argument, 0, 'b'},
	{"drain-delay", required_argument, 0, 'd'},
	{"events", required_argument, 0, 'e'},
	{"ext", no_argument, 0, 'x'},
	{"pid", required_argument, 0, 'p'},
	{"cgroup", required_argument, 0, 'c'},
	{"port", required_argument, 0, 'P'},
	{"duration", required_argument, 0, 'D'},
	{"rotate-size", required_argument, 0, OPT_ROTATE_SIZE},
	{"rotate-time", required_argument, 0, OPT_ROTATE_TIME},
	{"status-dir", required_argument, 0, OPT_STATUS_DIR},
	{"stats", required_argument, 0, OPT_STATS},
	{"btf", required_argument, 0, OPT_BTF},
	{"no-drain", no_argument, 0, OPT_NO_DRAIN},
	{"ready-fd", required_argument, 0, OPT_READY_FD},
	{"parent", required_argument, 0, OPT_PARENT},
	{"force", no_argument, 0, 'f'},
	{"quiet", no_argument, 0, 'q'},
	{"verbose", no_argument, 0, 'v'},
	{"version", no_argument, 0, 'V'},
	{"help", no_argument, 0, 'h'},
	{0, 0, 0, 0},
};

/* Event names, in EVENT_MASK bit order (bit 1 = SOCK_SEND). */
static const char *const event_name[] = {
	NULL, "SOCK_SEND", "SOCK_RECV", "TCP_SEND", "TCP_RECV", "TCP_RETRANS", "IP_SEND",
	"IP_RECV", "DEV_SEND", "DEV_RECV", "SCHED_SWITCH", "SCHED_FORK", "SCHED_EXIT",
	"SCHED_ENTER", "SCHED_LEAVE",
};
#define NEVENTS (sizeof(event_name) / sizeof(event_name[0]))

#define MASK_SOCK  (MAGNET_BIT_SOCK_SEND | MAGNET_BIT_SOCK_RECV)
#define MASK_TCP   (MAGNET_BIT_TCP_SEND | MAGNET_BIT_TCP_RECV | MAGNET_BIT_TCP_RETRANS)
#define MASK_IP    (MAGNET_BIT_IP_SEND | MAGNET_BIT_IP_RECV)
#define MASK_DEV   (MAGNET_BIT_DEV_SEND | MAGNET_BIT_DEV_RECV)
#define MASK_NET   (MASK_SOCK | MASK_TCP | MASK_IP | MASK_DEV)
#define MASK_SCHED (MAGNET_BIT_SCHED_SWITCH | MAGNET_BIT_SCHED_FORK | MAGNET_BIT_SCHED_EXIT | \
		    MAGNET_BIT_SCHED_ENTER | MAGNET_BIT_SCHED_LEAVE)

static const struct { const char *name; __u64 mask; } event_groups[] = {
	{"sock", MASK_SOCK}, {"tcp", MASK_TCP}, {"ip", MASK_IP}, {"dev", MASK_DEV},
	{"net", MASK_NET}, {"sched", MASK_SCHED}, {"all", MASK_NET | MASK_SCHED},
};

void die(const char *fmt, ...)
{
	va_list ap;

	fputs("magnet-read: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

static __u64 parse_size(const char *opt, const char *s)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-')
		die("%s: '%s' is not a size", opt, s);
	switch (toupper((unsigned char)*end)) {
	case 'G': v <<= 10; /* fall through */
	case 'M': v <<= 10; /* fall through */
	case 'K': v <<= 10; end++; break;
	}
	if (*end == 'i' || *end == 'I')
		end++;
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end)
		die("%s: '%s' is not a size (bytes, K, M or G)", opt, s);
	return v;
}

static __u64 parse_time_us(const char *opt, const char *s)
{
	static const struct { const char *unit; double us; } units[] = {
		{"us", 1}, {"ms", 1e3}, {"s", 1e6}, {"", 1e6}, {"m", 60e6}, {"h", 3600e6}, {"d", 86400e6},
	};
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || v < 0)
		die("%s: '%s' is not a time", opt, s);
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (!strcmp(end, units[i].unit))
			return (__u64)(v * units[i].us + 0.5);
	die("%s: '%s' is not a time (a number with us, ms, s, m, h or d)", opt, s);
}

static __u64 parse_events(const char *s)
{
	char *copy = strdup(s), *tok, *save = NULL;
	__u64 mask = 0;

	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		__u64 found = 0;

		for (size_t i = 0; i < sizeof(event_groups) / sizeof(event_groups[0]); i++)
			if (!strcasecmp(tok, event_groups[i].name))
				found = event_groups[i].mask;
		for (size_t i = 1; i < NEVENTS && !found; i++)
			if (!strcasecmp(tok, event_name[i]))
				found = 1ull << i;
		if (!found)
			die("--events: unknown event '%s' (use sock, tcp, ip, dev, sched, net, all or "
			    "names such as SOCK_SEND)", tok);
		mask |= found;
	}
	free(copy);
	if (!mask)
		die("--events: no events given");
	return mask;
}

static void parse_ports(const char *s, __u16 *ports)
{
	char *copy = strdup(s), *tok, *save = NULL, *end;
	int n = 0;

	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		long v = strtol(tok, &end, 10);

		if (*end || end == tok || v < 1 || v > 65535)
			die("--port: '%s' is not a port number", tok);
		if (n == MAGNET_MAX_PORTS)
			die("--port: at most %d ports", MAGNET_MAX_PORTS);
		ports[n++] = v;
	}
	free(copy);
}

static long parse_int(const char *opt, const char *s, long lo, long hi)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || end == s || v < lo || v > hi)
		die("%s: '%s' is not a number from %ld to %ld", opt, s, lo, hi);
	return v;
}

void event_names(__u64 mask, char *buf, size_t size)
{
	size_t len = 0;

	buf[0] = 0;
	for (size_t i = 1; i < NEVENTS; i++)
		if (mask & (1ull << i))
			len += snprintf(buf + len, len < size ? size - len : 0, "%s%s",
					len ? "," : "", event_name[i]);
}

__u64 auto_drain_delay_us(__u64 per_cpu_bytes, bool ext)
{
	const double heavy_rate = 5e6;		/* events/s: more than one busy CPU produces */
	double slot = ext ? MAGNET_EXT_RECORD_SIZE : MAGNET_CORE_SIZE;
	double us = per_cpu_bytes / 4.0 / (slot * heavy_rate) * 1e6;

	return us < 1000 ? 1000 : us > 100000 ? 100000 : (__u64)us;
}

void parse_options(int argc, char **argv, struct options *o)
{
	int c;

	memset(o, 0, sizeof(*o));
	o->buffer_bytes = DEFAULT_BUFFER_BYTES;
	o->drain_auto = true;
	o->event_mask = MASK_NET;
	o->status_dir = DEFAULT_STATUS_DIR;
	o->ready_fd = -1;
	while ((c = getopt_long(argc, argv, "o:b:d:e:xp:c:P:D:fqvVh", long_options, NULL)) != -1) {
		switch (c) {
		case 'o': o->output = optarg; break;
		case 'b': o->buffer_bytes = parse_size("--buffer", optarg); break;
		case 'd':
			o->drain_auto = !strcmp(optarg, "auto");
			if (!o->drain_auto)
				o->drain_delay_us = parse_time_us("--drain-delay", optarg);
			break;
		case 'e': o->event_mask = parse_events(optarg); break;
		case 'x': o->ext = true; break;
		case 'p': o->pid = parse_int("--pid", optarg, 1, INT_MAX); break;
		case 'c': o->cgroup = optarg; break;
		case 'P': parse_ports(optarg, o->ports); break;
		case 'D': o->duration_us = parse_time_us("--duration", optarg); break;
		case OPT_ROTATE_SIZE: o->rotate_bytes = parse_size("--rotate-size", optarg); break;
		case OPT_ROTATE_TIME: o->rotate_us = parse_time_us("--rotate-time", optarg); break;
		case OPT_STATUS_DIR: o->status_dir = optarg; break;
		case OPT_STATS: o->stats_path = optarg; break;
		case OPT_BTF: o->btf_path = optarg; break;
		case OPT_NO_DRAIN: o->no_drain = true; break;
		case OPT_READY_FD: o->ready_fd = parse_int("--ready-fd", optarg, 0, INT_MAX); break;
		case OPT_PARENT: o->parent = parse_int("--parent", optarg, 1, INT_MAX); break;
		case 'f': o->force = true; break;
		case 'q': o->quiet = true; break;
		case 'v': o->verbose = true; break;
		case 'V': printf("magnet-read " VERSION "\n"); exit(0);
		case 'h': fputs(usage, stdout); exit(0);
		default: exit(2);		/* getopt has said what is wrong */
		}
	}
	if (optind < argc)
		die("unexpected argument '%s' (see --help)", argv[optind]);
	if (!o->output)
		die("no output file: give -o FILE (see --help)");
	if (o->buffer_bytes < 4096 || o->buffer_bytes > (1ull << 31))
		die("--buffer: %llu bytes is out of range (4K to 2G)", (unsigned long long)o->buffer_bytes);
	if (!o->drain_auto && o->drain_delay_us < 100)
		die("--drain-delay: at least 100us");
	if (o->rotate_bytes && o->rotate_bytes < 4096)
		die("--rotate-size: at least 4K");
}

const char *magnet_version(void)
{
	return VERSION;
}
