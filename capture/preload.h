/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The spool files of the LD_PRELOAD capture (preload.c), which
 * `magnet capture --preload` (capture/preload.py) merges into one trace.
 *
 * Each process that loads the shim writes one file, PID-NS.spool, in the
 * directory $MAGNET_PRELOAD_DIR. A file is a sequence of chunks; a chunk is
 * a header the size of a core record, then record slots of trace-format.md
 * (24 bytes, or 144 with the TCP_INFO snapshot; no SYSINFO: the merge writes
 * the header), then padding up to `bytes`. Each thread fills a chunk of its own through a shared memory
 * mapping, so what it recorded is in the file even when the process is
 * killed. The chunk starts zeroed and a record's timestamp (never 0) is
 * stored last: slots after the last record are unused; a 0 timestamp
 * before it is a record that was being written when the process died. A
 * send on a socket claims its slot before it is made, marked with the event
 * PRELOAD_PENDING and timestamp 1, and stores its record there (the event
 * last) when it returns: a slot still pending is a send the process never
 * returned from (killed, or ended by another thread). The merge counts both
 * kinds in a LOST record. */
#ifndef MAGNET_PRELOAD_H
#define MAGNET_PRELOAD_H

#include <linux/types.h>
#include "magnet_format.h"

#define PRELOAD_DIR_ENV "MAGNET_PRELOAD_DIR"	/* where the spool files go; unset: record nothing */
#define PRELOAD_SOCKETS_ENV "MAGNET_PRELOAD_SOCKETS"	/* "all": every socket, not only TCP */
#define PRELOAD_EXT_ENV "MAGNET_PRELOAD_EXT"		/* "1": extended records, TCP_INFO snapshot per call */
#define PRELOAD_PORTS_ENV "MAGNET_PRELOAD_PORTS"	/* "80,443": only sockets with one of these ports */
#define PRELOAD_MAX_PORTS 8		/* as the BPF capture (MAGNET_MAX_PORTS) */
#define PRELOAD_SUFFIX ".spool"
#define PRELOAD_CHUNK_MAGIC 0x4d475043u		/* "CPGM" in a little-endian file */
#define PRELOAD_FIRST_CHUNK (4u << 10)		/* a thread's first chunk (or a page, if larger); each next
						 * one doubles; every chunk starts at a multiple of it */
#define PRELOAD_LAST_CHUNK (1u << 20)		/* ... up to this */
#define PRELOAD_PENDING 0xffffu		/* the event of a slot whose call is under way (no trace event) */

struct preload_chunk {
	__u32 magic;		/* PRELOAD_CHUNK_MAGIC */
	__u32 bytes;		/* the chunk's size, header and padding included */
	__u32 record_size;	/* its slots' size: MAGNET_CORE_SIZE or MAGNET_EXT_RECORD_SIZE */
	__u32 reserved;		/* 0 */
	__u32 pid;		/* process and thread that wrote it */
	__u32 tid;
};
MAGNET_ASSERT(sizeof(struct preload_chunk) == MAGNET_CORE_SIZE);

#endif
