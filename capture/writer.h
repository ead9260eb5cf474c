/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Trace files: the SYSINFO/META header of docs/trace-format.md, then records
 * in large writes. Every write ends on a record boundary, so a file is a
 * readable trace up to its last whole record even if the writer is killed. */
#ifndef MAGNET_WRITER_H
#define MAGNET_WRITER_H

#include <limits.h>
#include <stddef.h>
#include <linux/types.h>

/* What the header of each file says about the capture. */
struct trace_header {
	__u32 record_size;		/* 24 or 144 */
	__u64 host_id;
	__u64 buffer_bytes;
	__u64 drain_delay_us;
	__u64 event_mask;
	__u64 ext_mask;
	char hostname[256];
	char producer[128];
	char kernel[128];
	char filter[512];
};

struct trace_writer {
	int fd;
	char path[PATH_MAX];
	const char *pattern;		/* -o as given */
	char expanded[PATH_MAX];	/* the pattern as last expanded */
	const struct trace_header *header;
	__u32 segment;			/* 0, then 1 after the first rotation ... */
	__u64 opened_ns;		/* CLOCK_MONOTONIC when the segment began */
	__u64 bytes;			/* written to this segment */
	char *buf;
	size_t len, cap;
};

/* Open the first segment; -1 with errno set on failure. */
int tw_open(struct trace_writer *w, const char *pattern, const struct trace_header *h);
/* Close this segment and open the next; -1 with errno set on failure. */
int tw_rotate(struct trace_writer *w);
/* Append one record (copied into the write buffer). */
int tw_append(struct trace_writer *w, const void *record);
/* Append a LOST record written by the reader itself (e.g. for skipped program runs). */
int tw_append_lost(struct trace_writer *w, __u64 count);
int tw_flush(struct trace_writer *w);
int tw_close(struct trace_writer *w);

__u64 monotonic_ns(void);

#endif
