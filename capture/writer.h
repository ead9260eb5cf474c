/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Trace files: the SYSINFO/META header of docs/trace-format.md, then records
 * in large writes. Every write ends on a record boundary, so a file is a
 * readable trace up to its last whole record even if the writer is killed. */
#ifndef MAGNET_WRITER_H
#define MAGNET_WRITER_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <linux/types.h>

/* The sockid of the LOST record that ends a capture which stopped before it
 * was asked to (docs/trace-format.md): nothing after it was recorded. */
#define MAGNET_LOST_ENDED_EARLY 1

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
	char failed_path[PATH_MAX];	/* the file that could not be opened, if any */
	const char *pattern;		/* -o as given */
	char expanded[PATH_MAX];	/* the pattern as last expanded */
	const struct trace_header *header;
	bool force;			/* replace existing non-empty files */
	__u32 segment;			/* 0, then 1 after the first rotation ... */
	__u64 opened_ns;		/* CLOCK_MONOTONIC when the segment began */
	__u64 header_bytes;		/* of this segment */
	__u64 bytes;			/* in this segment's file (a failed write's part included) */
	__u64 bytes_closed;		/* in the segments before it */
	char *buf;
	size_t len, cap;
	int error;			/* errno of the first failed write; 0 = none */
	size_t flushed;			/* after a failed write: bytes of buf that reached the file */
};

/* What tw_end_early took back from the file: event records and LOST counts. */
struct tw_dropped {
	__u64 records;
	__u64 lost;
};

/* Open `path` for writing, refusing to follow a symbolic link or to open
 * anything but a regular file with one link: a new file (mode 0600), an
 * existing empty one, or with `replace` an existing non-empty one (emptied
 * and set to 0600). -1 on failure, open_private_error() says why. */
int open_private(const char *path, bool replace);
const char *open_private_error(void);

/* Open the first segment (failed_path and open_private_error() on failure). */
int tw_open(struct trace_writer *w, const char *pattern, const struct trace_header *h, bool force);
/* Open the next segment, then close this one; -1 with errno set on failure. */
int tw_rotate(struct trace_writer *w);
/* Append one record (copied into the write buffer). */
int tw_append(struct trace_writer *w, const void *record);
/* Append a LOST record written by the reader itself (e.g. for skipped program runs). */
int tw_append_lost(struct trace_writer *w, __u64 count);
/* Write the buffer out. After one failure every later call fails too. */
int tw_flush(struct trace_writer *w);
/* End the file with a LOST record marked MAGNET_LOST_ENDED_EARLY counting
 * `lost` and what a failed write left out, at the end of the last whole
 * record, or in place of the last record when the disk has no room for one
 * more. *d: what was taken back from the file (its count is in the record). */
int tw_end_early(struct trace_writer *w, __u64 lost, struct tw_dropped *d);
int tw_close(struct trace_writer *w);

__u64 monotonic_ns(void);

#endif
