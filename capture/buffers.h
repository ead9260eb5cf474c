/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The reader's side of the per-CPU capture buffers (see magnet.bpf.h):
 * memory-mapped, records taken in time order across CPUs, slots freed by
 * zeroing their timestamps. */
#ifndef MAGNET_BUFFERS_H
#define MAGNET_BUFFERS_H

#include <stddef.h>
#include <linux/types.h>

struct cpu_buffers {
	char *base;			/* the mapped array: CPU after CPU */
	size_t map_bytes;
	__u32 ncpus, slots, record_size;
	__u32 *tail;			/* per CPU: next slot to read */
	__u32 *taken;			/* per CPU: records taken by this drain */
	__u32 *order;			/* per CPU: their slots, in time order */
};

/* What to do with each record taken; non-zero stops the drain. */
typedef int (*record_fn)(void *ctx, const void *record);

int buffers_map(struct cpu_buffers *b, int map_fd, __u32 ncpus, __u32 slots, __u32 record_size);
/* Hand every record published at or before `until` (ns) to fn, oldest first,
 * then free their slots. Returns the records taken, -1 if fn stopped it;
 * *fill is the occupancy of the fullest CPU buffer found, 0..1. */
long buffers_drain(struct cpu_buffers *b, __u64 until, record_fn fn, void *ctx, double *fill);
void buffers_unmap(struct cpu_buffers *b);

#endif
