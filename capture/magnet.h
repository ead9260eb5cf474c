/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Definitions shared by the BPF programs (*.bpf.c) and magnet-read.
 * The record layout itself is magnet_format.h, generated from format.toml. */
#ifndef MAGNET_H
#define MAGNET_H

#include "magnet_format.h"

#define MAGNET_MAX_PORTS 8
#define MAGNET_FLOWS 65536		/* connections DEV_RECV can attribute at once */
#define MAGNET_FLOW_CACHE 4		/* per-CPU cache of DEV_RECV's flow lookups (a power of 2) */
#define MAGNET_LISTENERS 4096		/* traced listening sockets at once */

/* Programs, as indices of the per-program counters below. */
enum magnet_prog {
	MAGNET_PROG_SOCK_SEND,
	MAGNET_PROG_SOCK_RECV,
	MAGNET_PROG_SOCKOPS,
	MAGNET_PROG_TCP_PROBE,
	MAGNET_PROG_IP_EGRESS,
	MAGNET_PROG_IP_INGRESS,
	MAGNET_PROG_DEV_SEND,
	MAGNET_PROG_DEV_RECV,
	MAGNET_PROG_SCHED,		/* all scheduler programs together */
	MAGNET_NPROGS,
};

/* Settings fixed when the programs are loaded (read-only data: the verifier
 * removes the code of what is switched off). Chosen at run time by magnet-read. */
struct magnet_config {
	__u64 event_mask;		/* EVENT_MASK bits (MAGNET_BIT_*) */
	__u64 cgroup_id;		/* only sockets of this cgroup v2 (and below); 0 = any */
	__u32 cgroup_level;		/* its depth below the cgroup2 root */
	__u32 pid;			/* only this process (thread group); 0 = any */
	__u32 ext;			/* 1: records carry the extended block */
	__u32 slots;			/* records in each CPU's buffer */
	__u16 ports[MAGNET_MAX_PORTS];	/* local or remote port, host order, 0-terminated; none = any */
};

/* Per-CPU accounting: every program run ends in "skipped" or in events,
 * each of them recorded (counted by the reader) or lost:
 *   runs + extra = recorded + lost + skipped. */
struct magnet_cpu_stats {
	__u32 head;			/* next slot of this CPU's buffer */
	__u32 reserved;
	__u64 lost_pending;		/* lost since this CPU's last LOST record */
	__u64 lost;			/* all lost on this CPU */
	__u64 lost_event[16];		/* lost, by the event's EVENT_MASK bit */
	__u64 skipped[MAGNET_NPROGS];	/* runs that recorded nothing: filtered out, not an event */
	__u64 extra;			/* second events of one run (IP egress: TCP_SEND and IP_SEND) */
};

/* Per-socket verdict of the filter, kept in socket-local storage (cloned to
 * the connections a listener accepts). */
enum magnet_verdict { MAGNET_UNDECIDED, MAGNET_TRACED, MAGNET_IGNORED };

struct magnet_sock {
	__u8 verdict;
	__u8 tcp_seen;			/* snd_max is set */
	__u16 reserved;
	__u32 snd_max;			/* end of the highest segment recorded at the TCP layer */
};

/* A connection as the packets arriving for it see it: source = the peer.
 * IPv4 addresses as ::ffff:a.b.c.d; ports in network order. */
struct magnet_flow {
	__u8 saddr[16];
	__u8 daddr[16];
	__u16 sport;
	__u16 dport;
};

/* A connection in the flow table: its flow in its network namespace (the
 * same addresses and ports may be in use in another namespace). */
struct magnet_flow_key {
	struct magnet_flow flow;
	__u32 zero;			/* padding, hashed with the key */
	__u64 netns;			/* network namespace cookie */
};

#endif /* MAGNET_H */
