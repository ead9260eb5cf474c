/* SPDX-License-Identifier: GPL-2.0-or-later */
/* magnet-read's command line: the run-time settings that replace MAGNeT's
 * compile-time ones. */
#ifndef MAGNET_OPTIONS_H
#define MAGNET_OPTIONS_H

#include <limits.h>
#include <stdbool.h>
#include <linux/types.h>
#include "magnet.h"

#define DEFAULT_BUFFER_BYTES (16u << 20)
#define DEFAULT_STATUS_DIR "/run/magnet"

struct options {
	const char *output;		/* trace file (strftime patterns allowed) */
	__u64 buffer_bytes;		/* ring buffer, a power of two */
	__u64 drain_delay_us;		/* 0 until resolved: then the drain period */
	bool drain_auto;
	bool no_drain;			/* benchmark: load and attach, never drain */
	__u64 event_mask;		/* MAGNET_BIT_* */
	bool ext;
	__u32 pid;
	const char *cgroup;		/* cgroup v2 directory; NULL = all */
	__u16 ports[MAGNET_MAX_PORTS];
	__u64 duration_us;		/* 0 = until stopped */
	__u64 rotate_bytes;		/* 0 = never */
	__u64 rotate_us;		/* 0 = never */
	const char *status_dir;
	int ready_fd;			/* -1 = none */
	__u32 parent;			/* stop when this parent exits; 0 = never */
	bool force;			/* replace existing non-empty trace files */
	const char *stats_path;		/* BPF run-time statistics as JSON; NULL = off */
	const char *btf_path;		/* kernel BTF if /sys/kernel/btf/vmlinux is missing */
	bool quiet;
	bool verbose;
};

/* Parse argv; on a bad option print one line and exit 2. */
void parse_options(int argc, char **argv, struct options *o);

/* Event names of a mask, comma-separated, into buf. */
void event_names(__u64 mask, char *buf, size_t size);

/* The drain delay chosen when none is given: a CPU's buffer drained at a
 * quarter full under a heavy load, bounded to [1 ms, 100 ms]. */
__u64 auto_drain_delay_us(__u64 per_cpu_bytes, bool ext);

const char *magnet_version(void);

/* Fatal setup error: one line "magnet-read: ..." and exit status 2. */
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

#endif
