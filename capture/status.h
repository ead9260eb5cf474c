/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The status file of a running capture, the counterpart of MAGNeT's
 * /proc/net/magnet: `magnet status` reads DIR/magnet-read.PID.json. */
#ifndef MAGNET_STATUS_H
#define MAGNET_STATUS_H

#include <stdbool.h>
#include <stdio.h>
#include <linux/types.h>

struct capture_status {
	const char *output;		/* the file being written */
	__u32 segment;
	double started;			/* Unix time */
	__u64 records;			/* event records written (LOST records not included) */
	__u64 lost;			/* sum of LOST counts written so far */
	__u64 lost_buffer_full;		/* kernel: reservations that failed */
	__u64 lost_skipped_runs;	/* kernel: program runs it skipped (recursion) */
	__u64 bytes;			/* written, all files */
	__u64 buffer_bytes;
	__u64 drain_delay_us;
	bool drain_auto;
	bool no_drain;
	const char *events;
	bool ext;
	const char *filter;
	double fill;			/* buffer fill found by the last drain, 0..1 */
	double fill_peak;
};

/* Write (atomically replace) the status file; returns its path or NULL. */
const char *status_write(const char *dir, const struct capture_status *s);
void status_remove(void);

/* JSON output helpers. */
void json_string(FILE *f, const char *s);

#endif
