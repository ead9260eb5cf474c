// SPDX-License-Identifier: GPL-2.0-or-later
/* magnet-read: load the BPF programs (*.bpf.c), drain their ring buffer
 * into a trace (docs/trace-format.md), account for every event lost.
 *
 * The buffer is drained on a timer (the paper's sleep time) or when the
 * programs find it filling up; records go to the file in large writes. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "magnet.h"
#include "magnet.skel.h"
#include "options.h"
#include "buffers.h"
#include "status.h"
#include "writer.h"

#define CGROUP2_SUPER_MAGIC 0x63677270
#define STATUS_PERIOD_NS 1000000000ull
/* Records younger than this wait for the next drain, so that one published
 * late on another CPU still finds its place in time order. */
#define HOLD_BACK_NS 5000000ull
#define MAX_PROGS 16

static volatile sig_atomic_t stop_requested, rotate_requested;

/* One BPF program and what it is for. */
struct prog {
	struct bpf_program *prog;
	enum magnet_prog index;		/* its counters */
	__u64 events;			/* loaded if any of these events is recorded */
	bool cgroup;			/* attached to the traced cgroup */
	struct bpf_link *link;
};

struct capture {
	struct options opt;
	struct magnet_bpf *skel;
	struct prog progs[MAX_PROGS];
	int nprogs;
	struct cpu_buffers buffers;
	__u32 slots;			/* records per CPU buffer */
	struct trace_header header;
	struct trace_writer w;
	struct capture_status status;
	char events[256];
	char cgroup_path[4096];
	int cgroup_fd;
	int stats_fd;
	int ncpus;
	__u64 records;			/* event records written */
	__u64 lost;			/* sum of LOST counts written */
	__u64 misses_written;		/* skipped program runs already written as LOST */
	__u64 unwritten;		/* events that a failed write kept out of the trace */
	bool write_failed;
	bool parent_gone;		/* --parent exited: the capture ends early */
};

static void on_signal(int sig)
{
	if (sig == SIGHUP)
		rotate_requested = 1;
	else
		stop_requested = 1;
}

/* --------------------------------------------------------- environment --- */

static bool has_cap(const struct __user_cap_data_struct *d, int cap)
{
	return d[cap / 32].effective & (1u << (cap % 32));
}

static void check_privileges(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2] = {};

	if (syscall(SYS_capget, &h, d))
		die("cannot read this process's capabilities: %s", strerror(errno));
	if (!(has_cap(d, CAP_SYS_ADMIN) || (has_cap(d, CAP_BPF) && has_cap(d, CAP_PERFMON))) ||
	    !has_cap(d, CAP_NET_ADMIN))
		die("needs root (or CAP_BPF, CAP_PERFMON and CAP_NET_ADMIN) to load BPF programs");
}

static void check_btf(const struct options *o)
{
	const char *path = o->btf_path ? o->btf_path : "/sys/kernel/btf/vmlinux";

	if (access(path, R_OK) == 0)
		return;
	if (o->btf_path)
		die("--btf %s: %s", path, strerror(errno));
	die("this kernel has no BTF (/sys/kernel/btf/vmlinux is missing): it needs "
	    "CONFIG_DEBUG_INFO_BTF=y, or give a BTF file for it with --btf FILE");
}

/* The first cgroup2 mount point (the unified hierarchy). */
static bool cgroup2_root(char *out, size_t size)
{
	FILE *f = fopen("/proc/self/mountinfo", "r");
	char line[4096], mnt[4096], *sep;
	bool found = false;

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		sep = strstr(line, " - ");
		if (sep && !strncmp(sep + 3, "cgroup2 ", 8) &&
		    sscanf(line, "%*s %*s %*s %*s %4095s", mnt) == 1) {
			snprintf(out, size, "%s", mnt);
			found = true;
		}
	}
	fclose(f);
	return found;
}

/* Resolve --cgroup (default: the cgroup2 root) to an open directory, its id
 * and its depth; the tracing programs compare sockets' cgroups with them. */
static void resolve_cgroup(struct capture *c, struct magnet_config *cfg)
{
	char root[4096], real[4096];
	struct statfs sfs;
	struct stat st;
	size_t rlen;

	if (!cgroup2_root(root, sizeof(root)))
		die("no cgroup v2 hierarchy is mounted (the IP and TCP programs attach to one; "
		    "e.g. mount -t cgroup2 none /sys/fs/cgroup/unified)");
	if (!c->opt.cgroup) {
		snprintf(c->cgroup_path, sizeof(c->cgroup_path), "%s", root);
	} else if (!realpath(c->opt.cgroup, real)) {
		die("--cgroup %s: %s", c->opt.cgroup, strerror(errno));
	} else {
		snprintf(c->cgroup_path, sizeof(c->cgroup_path), "%s", real);
	}
	if (statfs(c->cgroup_path, &sfs) || sfs.f_type != CGROUP2_SUPER_MAGIC ||
	    stat(c->cgroup_path, &st) || !S_ISDIR(st.st_mode))
		die("--cgroup %s: not a cgroup v2 directory (the unified hierarchy is at %s)",
		    c->cgroup_path, root);
	rlen = strlen(root);
	if (strncmp(c->cgroup_path, root, rlen) || (c->cgroup_path[rlen] && c->cgroup_path[rlen] != '/'))
		die("--cgroup %s: not below the cgroup v2 root %s", c->cgroup_path, root);
	c->cgroup_fd = open(c->cgroup_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (c->cgroup_fd < 0)
		die("--cgroup %s: %s", c->cgroup_path, strerror(errno));
	if (!c->opt.cgroup || !c->cgroup_path[rlen])
		return;				/* the root: every socket */
	cfg->cgroup_id = st.st_ino;		/* a cgroup2 directory's inode is its id */
	for (const char *p = c->cgroup_path + rlen; *p; p++)
		cfg->cgroup_level += *p == '/' && p[1] && p[1] != '/';
}

/* -------------------------------------------------------------- header --- */

static __u64 host_id(void)
{
	char text[33] = {0};
	FILE *f = fopen("/etc/machine-id", "r");

	if (f && fgets(text, sizeof(text), f)) {
		fclose(f);
		text[16] = 0;
		return strtoull(text, NULL, 16);
	}
	if (f)
		fclose(f);
	return (__u64)gethostid();
}

static void describe_filter(const struct capture *c, char *out, size_t size)
{
	size_t len = 0;

	out[0] = 0;
	if (c->opt.cgroup)
		len += snprintf(out + len, size - len, "cgroup %s", c->cgroup_path);
	if (c->opt.pid && len < size)
		len += snprintf(out + len, size - len, "%spid %u", len ? "; " : "", c->opt.pid);
	for (int i = 0; i < MAGNET_MAX_PORTS && c->opt.ports[i] && len < size; i++)
		len += snprintf(out + len, size - len, "%s%u", i ? "," : len ? "; ports " : "ports ",
				c->opt.ports[i]);
	if (!out[0])
		snprintf(out, size, "all TCP connections");
}

static void fill_header(struct capture *c)
{
	struct trace_header *h = &c->header;
	struct utsname u;

	h->record_size = c->opt.ext ? MAGNET_EXT_RECORD_SIZE : MAGNET_CORE_SIZE;
	h->host_id = host_id();
	h->buffer_bytes = c->opt.buffer_bytes;
	h->drain_delay_us = c->opt.drain_delay_us;
	h->event_mask = c->opt.event_mask;
	h->ext_mask = c->opt.ext ? MAGNET_EXT_TCP_STATE | MAGNET_EXT_IP | MAGNET_EXT_ADDR |
				   MAGNET_EXT_SEGMENT | MAGNET_EXT_TASK | MAGNET_EXT_GSO : 0;
	gethostname(h->hostname, sizeof(h->hostname) - 1);
	snprintf(h->producer, sizeof(h->producer), "magnet-read %s (libbpf %u.%u)",
		 magnet_version(), libbpf_major_version(), libbpf_minor_version());
	if (uname(&u) == 0)
		snprintf(h->kernel, sizeof(h->kernel), "%s", u.release);
	describe_filter(c, h->filter, sizeof(h->filter));
}

/* ------------------------------------------------------------ programs --- */

#define SOCK_EVENTS (MAGNET_BIT_SOCK_SEND | MAGNET_BIT_SOCK_RECV)
#define NET_EVENTS (MAGNET_BIT_SOCK_SEND | MAGNET_BIT_SOCK_RECV | MAGNET_BIT_TCP_SEND | \
		    MAGNET_BIT_TCP_RECV | MAGNET_BIT_TCP_RETRANS | MAGNET_BIT_IP_SEND | \
		    MAGNET_BIT_IP_RECV | MAGNET_BIT_DEV_SEND | MAGNET_BIT_DEV_RECV)

static void add_prog(struct capture *c, struct bpf_program *p, enum magnet_prog index,
		     __u64 events, bool cgroup)
{
	struct prog *pr = &c->progs[c->nprogs++];

	pr->prog = p;
	pr->index = index;
	pr->events = events;
	pr->cgroup = cgroup;
	bpf_program__set_autoload(p, (c->opt.event_mask & events) != 0);
}

static void list_programs(struct capture *c)
{
	struct magnet_bpf *s = c->skel;

	add_prog(c, s->progs.magnet_sock_send, MAGNET_PROG_SOCK_SEND, MAGNET_BIT_SOCK_SEND, false);
	add_prog(c, s->progs.magnet_sock_recv, MAGNET_PROG_SOCK_RECV, MAGNET_BIT_SOCK_RECV, false);
	/* sockops decides on new connections (the pid filter needs it there), remembers
	 * their flows and asks for the per-segment callbacks: every layer below the
	 * socket's needs it; the socket layer decides for itself. */
	add_prog(c, s->progs.magnet_sockops, MAGNET_PROG_SOCKOPS, NET_EVENTS & ~SOCK_EVENTS, true);
	add_prog(c, s->progs.magnet_tcp_probe, MAGNET_PROG_TCP_PROBE, MAGNET_BIT_TCP_RECV, false);
	/* IP egress also finds the segments sockops did not see (TCP_SEND). */
	add_prog(c, s->progs.magnet_ip_send, MAGNET_PROG_IP_EGRESS, MAGNET_BIT_IP_SEND |
		 MAGNET_BIT_TCP_SEND | MAGNET_BIT_TCP_RETRANS, true);
	add_prog(c, s->progs.magnet_ip_recv, MAGNET_PROG_IP_INGRESS, MAGNET_BIT_IP_RECV, true);
	add_prog(c, s->progs.magnet_dev_send, MAGNET_PROG_DEV_SEND, MAGNET_BIT_DEV_SEND, false);
	add_prog(c, s->progs.magnet_dev_recv, MAGNET_PROG_DEV_RECV, MAGNET_BIT_DEV_RECV, false);
	add_prog(c, s->progs.magnet_sched_switch, MAGNET_PROG_SCHED, MAGNET_BIT_SCHED_SWITCH, false);
	add_prog(c, s->progs.magnet_sched_fork, MAGNET_PROG_SCHED, MAGNET_BIT_SCHED_FORK, false);
	add_prog(c, s->progs.magnet_sched_exit, MAGNET_PROG_SCHED, MAGNET_BIT_SCHED_EXIT, false);
	add_prog(c, s->progs.magnet_sched_enter, MAGNET_PROG_SCHED, MAGNET_BIT_SCHED_ENTER, false);
	add_prog(c, s->progs.magnet_sched_leave, MAGNET_PROG_SCHED, MAGNET_BIT_SCHED_LEAVE, false);
}

static bool loaded(const struct capture *c, const struct prog *p)
{
	return (c->opt.event_mask & p->events) != 0;
}

static char libbpf_last[512];
static bool verbose_libbpf;

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (verbose_libbpf)
		return vfprintf(stderr, fmt, ap);
	if (level <= LIBBPF_WARN)
		vsnprintf(libbpf_last, sizeof(libbpf_last), fmt, ap);
	return 0;
}

static void load(struct capture *c)
{
	LIBBPF_OPTS(bpf_object_open_opts, open_opts, .btf_custom_path = c->opt.btf_path);
	struct magnet_config cfg = {
		.event_mask = c->opt.event_mask,
		.pid = c->opt.pid,
		.ext = c->opt.ext,
	};
	__u32 record_size = c->opt.ext ? MAGNET_EXT_RECORD_SIZE : MAGNET_CORE_SIZE;
	int err;

	memcpy(cfg.ports, c->opt.ports, sizeof(cfg.ports));
	if (c->opt.event_mask & NET_EVENTS)
		resolve_cgroup(c, &cfg);
	verbose_libbpf = c->opt.verbose;
	libbpf_set_print(libbpf_print);
	c->skel = magnet_bpf__open_opts(&open_opts);
	if (!c->skel)
		die("cannot open the BPF object: %s", strerror(errno));
	c->ncpus = libbpf_num_possible_cpus();
	c->slots = c->opt.buffer_bytes / c->ncpus / record_size;
	if (c->slots < 16)
		c->slots = 16;
	c->opt.buffer_bytes = (__u64)c->slots * c->ncpus * record_size;
	if (c->opt.drain_auto)
		c->opt.drain_delay_us = auto_drain_delay_us((__u64)c->slots * record_size, c->opt.ext);
	cfg.slots = c->slots;
	c->skel->rodata->cfg = cfg;
	bpf_map__set_value_size(c->skel->maps.records, record_size);
	bpf_map__set_max_entries(c->skel->maps.records, c->slots * c->ncpus);
	list_programs(c);
	err = magnet_bpf__load(c->skel);
	if (err == -EPERM)
		die("the kernel refused the BPF programs (%s): needs root with CAP_BPF, CAP_PERFMON "
		    "and CAP_NET_ADMIN; lockdown may forbid them (run with -v for the log)",
		    strerror(-err));
	if (err == -ENOSYS)
		die("this kernel has no BPF support");
	if (err)
		die("loading the BPF programs failed: %s%s%.*s (run with -v for the verifier's log)",
		    strerror(-err), libbpf_last[0] ? "; libbpf: " : "",
		    (int)strcspn(libbpf_last, "\n"), libbpf_last);
}

static void attach(struct capture *c)
{
	for (int i = 0; i < c->nprogs; i++) {
		struct prog *p = &c->progs[i];

		if (!loaded(c, p))
			continue;
		p->link = p->cgroup ? bpf_program__attach_cgroup(p->prog, c->cgroup_fd)
				    : bpf_program__attach(p->prog);
		if (!p->link)
			die("attaching %s failed: %s", bpf_program__name(p->prog), strerror(errno));
	}
}

static void detach(struct capture *c)
{
	for (int i = 0; i < c->nprogs; i++) {
		bpf_link__destroy(c->progs[i].link);
		c->progs[i].link = NULL;
	}
	usleep(20000);				/* let runs in flight on other CPUs finish */
}

/* ---------------------------------------------------------- accounting --- */

static void read_cpu_stats(struct capture *c, struct magnet_cpu_stats *sum)
{
	struct magnet_cpu_stats per[c->ncpus];
	__u32 zero = 0;

	memset(sum, 0, sizeof(*sum));
	if (bpf_map__lookup_elem(c->skel->maps.cpu_stats, &zero, sizeof(zero), per,
				 sizeof(per), 0))
		return;
	for (int cpu = 0; cpu < c->ncpus; cpu++) {
		sum->lost_pending += per[cpu].lost_pending;
		sum->lost += per[cpu].lost;
		for (int i = 0; i < 16; i++)
			sum->lost_event[i] += per[cpu].lost_event[i];
		for (int i = 0; i < MAGNET_NPROGS; i++)
			sum->skipped[i] += per[cpu].skipped[i];
		sum->extra += per[cpu].extra;
	}
}

static struct bpf_prog_info prog_info(const struct prog *p)
{
	struct bpf_prog_info info = {};
	__u32 len = sizeof(info);

	bpf_obj_get_info_by_fd(bpf_program__fd(p->prog), &info, &len);
	return info;
}

/* Program runs the kernel skipped (a program already running on that CPU). */
static __u64 recursion_misses(const struct capture *c)
{
	__u64 n = 0;

	for (int i = 0; i < c->nprogs; i++)
		if (loaded(c, &c->progs[i]))
			n += prog_info(&c->progs[i]).recursion_misses;
	return n;
}

static void write_failed(struct capture *c)
{
	if (!c->write_failed)
		fprintf(stderr, "magnet-read: %s: %s; stopping, the trace ends early\n",
			c->w.failed_path[0] ? c->w.failed_path : c->w.path, strerror(errno));
	c->write_failed = true;
	stop_requested = 1;
}

static void write_lost(struct capture *c, __u64 n)
{
	if (!n)
		return;
	if (!c->write_failed && tw_append_lost(&c->w, n) == 0) {
		c->lost += n;
		return;
	}
	write_failed(c);
	c->unwritten += n;
}

/* Skipped runs not yet in the trace become a LOST record now. */
static void account_misses(struct capture *c)
{
	__u64 misses = recursion_misses(c);

	write_lost(c, misses - c->misses_written);
	c->misses_written = misses;
}

/* --------------------------------------------------------------- drain --- */

/* Start the next file. */
static void rotate(struct capture *c)
{
	if (tw_rotate(&c->w))
		write_failed(c);
}

/* After a failed write, records are still taken from the buffer, to be
 * counted in the LOST record that ends the trace. */
static int on_record(void *ctx, const void *data)
{
	struct capture *c = ctx;
	const struct magnet_core *r = data;
	bool lost = r->event == MAGNET_LOST;

	if (c->opt.rotate_bytes && !c->write_failed &&
	    c->w.bytes + c->w.len + c->header.record_size > c->opt.rotate_bytes)
		rotate(c);
	if (!c->write_failed && tw_append(&c->w, data) == 0) {
		if (lost)
			c->lost += (__u32)r->size;
		else
			c->records++;
		return 0;
	}
	write_failed(c);
	c->unwritten += lost ? (__u32)r->size : 1;
	return 0;
}

/* Take what the CPUs have published up to `until`, in time order. */
static void drain(struct capture *c, __u64 until)
{
	double fill = 0;

	if (!c->opt.no_drain)
		buffers_drain(&c->buffers, until, on_record, c, &fill);
	c->status.fill = fill;
	if (fill > c->status.fill_peak)
		c->status.fill_peak = fill;
	account_misses(c);
	if (!c->write_failed && tw_flush(&c->w))
		write_failed(c);
}

/* The paper's sleep time: the programs never wake the reader. */
static void sleep_drain_delay(struct capture *c)
{
	struct timespec ts = { c->opt.drain_delay_us / 1000000, c->opt.drain_delay_us % 1000000 * 1000 };

	nanosleep(&ts, NULL);			/* a signal ends it early */
}

/* Once the parent has gone, getppid() names whoever adopted us. */
static bool parent_exited(struct capture *c)
{
	if (c->opt.parent && !c->parent_gone && (__u32)getppid() != c->opt.parent)
		c->parent_gone = true;
	return c->parent_gone;
}

static void update_status(struct capture *c)
{
	struct magnet_cpu_stats sum;

	read_cpu_stats(c, &sum);
	c->status.output = c->w.path;
	c->status.segment = c->w.segment;
	c->status.records = c->records;
	c->status.lost = c->lost;
	c->status.lost_buffer_full = sum.lost;
	c->status.lost_skipped_runs = c->misses_written;
	c->status.bytes = c->w.bytes_closed + c->w.bytes;
	status_write(c->opt.status_dir, &c->status);
}

/* SIGHUP or --rotate-time (--rotate-size is applied record by record). */
static bool rotation_due(const struct capture *c, __u64 now)
{
	return rotate_requested || (c->opt.rotate_us && now - c->w.opened_ns >= c->opt.rotate_us * 1000);
}

static void run(struct capture *c)
{
	__u64 start = monotonic_ns(), last_status = start;

	while (!stop_requested && !parent_exited(c)) {
		__u64 now;

		sleep_drain_delay(c);
		now = monotonic_ns();
		drain(c, now - HOLD_BACK_NS);
		if (rotation_due(c, now) && !c->write_failed) {
			rotate_requested = 0;
			rotate(c);
		}
		if (now - last_status >= STATUS_PERIOD_NS) {
			update_status(c);
			last_status = now;
		}
		if (c->opt.duration_us && now - start >= c->opt.duration_us * 1000)
			break;
	}
}

/* A write failed or the parent is gone: the last record says so, and counts
 * what the trace does not hold. */
static void end_early(struct capture *c)
{
	struct tw_dropped d;

	if (tw_end_early(&c->w, c->unwritten, &d)) {
		fprintf(stderr, "magnet-read: %s: no room left to mark the trace as ended early: %s\n",
			c->w.path, strerror(errno));
		return;
	}
	c->records -= d.records;
	c->lost += c->unwritten + d.records;	/* d.lost moves from earlier records to this one */
}

/* After the programs are detached: drain what is left, then write a LOST
 * record for what the CPUs could not announce themselves. */
static void finish(struct capture *c)
{
	struct magnet_cpu_stats sum;

	detach(c);
	drain(c, ~0ull);
	read_cpu_stats(c, &sum);
	write_lost(c, sum.lost_pending);
	account_misses(c);
	if (c->write_failed || parent_exited(c))
		end_early(c);
	c->status.bytes = c->w.bytes_closed + c->w.bytes;
	if (tw_close(&c->w) && !c->write_failed)
		write_failed(c);
}

/* ----------------------------------------------------------- statistics --- */

static void write_stats(struct capture *c)
{
	struct magnet_cpu_stats sum;
	int fd = open_private(c->opt.stats_path, true);
	FILE *f = fd < 0 ? NULL : fdopen(fd, "w");

	if (!f) {
		fprintf(stderr, "magnet-read: --stats %s: %s\n", c->opt.stats_path, open_private_error());
		if (fd >= 0)
			close(fd);
		return;
	}
	read_cpu_stats(c, &sum);
	fprintf(f, "{\n  \"programs\": {");
	for (int i = 0, first = 1; i < c->nprogs; i++) {
		struct prog *p = &c->progs[i];
		struct bpf_prog_info info;

		if (!loaded(c, p))
			continue;
		info = prog_info(p);
		fprintf(f, "%s\n    ", first ? "" : ",");
		json_string(f, bpf_program__name(p->prog));
		fprintf(f, ": {\"attach\": ");
		json_string(f, bpf_program__section_name(p->prog));
		fprintf(f, ", \"run_cnt\": %llu, \"run_time_ns\": %llu, \"recursion_misses\": %llu, "
			"\"group\": %d}", (unsigned long long)info.run_cnt,
			(unsigned long long)info.run_time_ns,
			(unsigned long long)info.recursion_misses, p->index);
		first = 0;
	}
	fprintf(f, "\n  },\n  \"skipped_by_group\": [");
	for (int i = 0; i < MAGNET_NPROGS; i++)
		fprintf(f, "%s%llu", i ? ", " : "", (unsigned long long)sum.skipped[i]);
	fprintf(f, "],\n  \"extra_events\": %llu,\n  \"lost_by_event_bit\": [",
		(unsigned long long)sum.extra);
	for (int i = 0; i < 16; i++)
		fprintf(f, "%s%llu", i ? ", " : "", (unsigned long long)sum.lost_event[i]);
	fprintf(f, "],\n  \"records\": %llu,\n  \"lost\": %llu,\n  \"lost_buffer_full\": %llu,\n"
		"  \"lost_skipped_runs\": %llu,\n  \"bytes_written\": %llu,\n  \"segments\": %u,\n"
		"  \"buffer_fill_peak\": %.4f\n}\n",
		(unsigned long long)c->records, (unsigned long long)c->lost,
		(unsigned long long)sum.lost, (unsigned long long)c->misses_written,
		(unsigned long long)c->status.bytes, c->w.segment + 1, c->status.fill_peak);
	fclose(f);
}

/* ----------------------------------------------------------------- main --- */

static void setup_signals(void)
{
	struct sigaction sa = { .sa_handler = on_signal };

	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	signal(SIGXFSZ, SIG_IGN);		/* a file size limit is a failed write (EFBIG) */
}

/* --parent: the parent's death sends SIGTERM. A parent that died before
 * prctl took effect is seen by getppid() after it. */
static void watch_parent(const struct options *o)
{
	if (!o->parent)
		return;
	if (prctl(PR_SET_PDEATHSIG, SIGTERM))
		die("--parent: %s", strerror(errno));
	if ((__u32)getppid() != o->parent)
		die("--parent %u: not this process's parent (it has exited?)", o->parent);
}

static void announce_ready(struct capture *c)
{
	if (c->opt.ready_fd < 0)
		return;
	if (write(c->opt.ready_fd, "ready\n", 6) != 6)
		perror("magnet-read: --ready-fd");
	close(c->opt.ready_fd);
}

static void start(struct capture *c)
{
	struct timespec now;

	fill_header(c);
	if (tw_open(&c->w, c->opt.output, &c->header, c->opt.force))
		die("%s: %s", c->w.failed_path[0] ? c->w.failed_path : c->opt.output,
		    open_private_error());
	if (c->opt.stats_path) {
		c->stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
		if (c->stats_fd < 0)
			die("--stats: cannot enable BPF statistics: %s", strerror(errno));
	}
	if (buffers_map(&c->buffers, bpf_map__fd(c->skel->maps.records), c->ncpus, c->slots,
			c->header.record_size))
		die("cannot map the capture buffer: %s", strerror(errno));
	attach(c);
	clock_gettime(CLOCK_REALTIME, &now);
	event_names(c->opt.event_mask, c->events, sizeof(c->events));
	c->status = (struct capture_status){
		.started = now.tv_sec + now.tv_nsec / 1e9, .buffer_bytes = c->opt.buffer_bytes,
		.drain_delay_us = c->opt.drain_delay_us, .drain_auto = c->opt.drain_auto,
		.no_drain = c->opt.no_drain, .events = c->events, .ext = c->opt.ext,
		.filter = c->header.filter,
	};
	update_status(c);
}

int main(int argc, char **argv)
{
	static struct capture c = { .cgroup_fd = -1, .stats_fd = -1 };

	parse_options(argc, argv, &c.opt);
	watch_parent(&c.opt);
	check_privileges();
	check_btf(&c.opt);
	load(&c);
	setup_signals();
	start(&c);
	announce_ready(&c);
	run(&c);
	finish(&c);
	if (c.opt.stats_path)
		write_stats(&c);
	status_remove();
	buffers_unmap(&c.buffers);
	magnet_bpf__destroy(c.skel);
	if (!c.opt.quiet)
		fprintf(stderr, "magnet-read: %llu records, %llu lost, %u file(s), last %s\n",
			(unsigned long long)c.records, (unsigned long long)c.lost, c.w.segment + 1,
			c.w.path);
	return c.write_failed ? 1 : 0;
}
