/* Generated from magnetlib/format.toml by `python -m magnetlib.codegen`: do not edit. */
/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef MAGNET_FORMAT_H
#define MAGNET_FORMAT_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#if defined(__cplusplus)
#define MAGNET_ASSERT(x) static_assert(x, #x)
#else
#define MAGNET_ASSERT(x) _Static_assert(x, #x)
#endif

#define MAGNET_FORMAT_VERSION 1
#define MAGNET_CORE_SIZE 24
#define MAGNET_EXT_SIZE 120
#define MAGNET_EXT_RECORD_SIZE 144
#define MAGNET_SYSINFO_SWAPPED 0x67452301
#define MAGNET_META_CHUNK_SHIFT 16

enum magnet_event {
	MAGNET_SYSINFO = 0x01234567,	/* first record of every trace, and a clock change later: size = clock rate in kHz, timestamp = the tick it takes effect, sockid = version << 32 | record size */
	MAGNET_META = 0x01,	/* metadata record directly after SYSINFO: size = key | chunk << 16, sockid = value */
	MAGNET_LOST = 0x02,	/* records that could not be recorded before this point: size = their number; sockid 1: the capture ended early here */
	MAGNET_SOCK_SEND = 0x10,	/* the application's send/write/sendmsg/sendfile call; size = what it returned */
	MAGNET_SOCK_RECV = 0x11,	/* the application's recv/read/recvmsg call; size = what it returned (0 = EOF) */
	MAGNET_TCP_SEND = 0x20,	/* TCP emits a segment; size = payload bytes */
	MAGNET_TCP_RECV = 0x21,	/* TCP accepts a segment; size = payload bytes */
	MAGNET_TCP_RETRANS = 0x22,	/* TCP retransmits a segment; size = payload bytes */
	MAGNET_IP_SEND = 0x30,	/* IP hands a packet on; size = transport payload bytes */
	MAGNET_IP_RECV = 0x31,	/* IP accepts a packet; size = transport payload bytes */
	MAGNET_DEV_SEND = 0x40,	/* the device puts a packet on the wire; size = transport payload bytes */
	MAGNET_DEV_RECV = 0x41,	/* the device takes a packet off the wire; size = transport payload bytes */
	MAGNET_SCHED_SWITCH = 0x80,	/* context switch: sockid = prev pid << 32 | next pid, size = cpu */
	MAGNET_SCHED_FORK = 0x81,	/* process creation: sockid = parent pid << 32 | child pid, size = cpu */
	MAGNET_SCHED_EXIT = 0x82,	/* process exit: sockid = pid, size = cpu */
	MAGNET_SCHED_ENTER = 0x83,	/* a CPU enters the scheduler: sockid = pid, size = cpu */
	MAGNET_SCHED_LEAVE = 0x84,	/* a CPU leaves the scheduler: sockid = pid now running, size = cpu */
};

enum magnet_event_bit {
	MAGNET_BIT_SOCK_SEND = 0x02,	/* EVENT_MASK bit */
	MAGNET_BIT_SOCK_RECV = 0x04,	/* EVENT_MASK bit */
	MAGNET_BIT_TCP_SEND = 0x08,	/* EVENT_MASK bit */
	MAGNET_BIT_TCP_RECV = 0x10,	/* EVENT_MASK bit */
	MAGNET_BIT_TCP_RETRANS = 0x20,	/* EVENT_MASK bit */
	MAGNET_BIT_IP_SEND = 0x40,	/* EVENT_MASK bit */
	MAGNET_BIT_IP_RECV = 0x80,	/* EVENT_MASK bit */
	MAGNET_BIT_DEV_SEND = 0x100,	/* EVENT_MASK bit */
	MAGNET_BIT_DEV_RECV = 0x200,	/* EVENT_MASK bit */
	MAGNET_BIT_SCHED_SWITCH = 0x400,	/* EVENT_MASK bit */
	MAGNET_BIT_SCHED_FORK = 0x800,	/* EVENT_MASK bit */
	MAGNET_BIT_SCHED_EXIT = 0x1000,	/* EVENT_MASK bit */
	MAGNET_BIT_SCHED_ENTER = 0x2000,	/* EVENT_MASK bit */
	MAGNET_BIT_SCHED_LEAVE = 0x4000,	/* EVENT_MASK bit */
};

enum magnet_meta_key {
	MAGNET_META_WALL_ANCHOR_NS = 0x01,	/* Unix time in ns at the first SYSINFO's timestamp */
	MAGNET_META_CLOCK_SOURCE = 0x02,	/* what the ticks count (see [[clock]]) */
	MAGNET_META_HOST_ID = 0x03,	/* opaque host id (e.g. from /etc/machine-id) */
	MAGNET_META_HOSTNAME = 0x04,	/* host name */
	MAGNET_META_PRODUCER = 0x05,	/* program and version that wrote the trace */
	MAGNET_META_KERNEL = 0x06,	/* kernel release (uname -r) of the traced host */
	MAGNET_META_BUFFER_BYTES = 0x07,	/* capture buffer size, bytes */
	MAGNET_META_DRAIN_DELAY_US = 0x08,	/* drain period of the capture buffer, microseconds */
	MAGNET_META_EVENT_MASK = 0x09,	/* events recorded: bit n set = event with bit n */
	MAGNET_META_EXT_MASK = 0x0a,	/* extended groups recorded (ext_valid bits) */
	MAGNET_META_FILTER = 0x0b,	/* capture filter in words (cgroup, pid, ports) */
	MAGNET_META_SEGMENT_INDEX = 0x0c,	/* 0 for the first file of a capture, n for its n-th rotation */
	MAGNET_META_CAPTURE_METHOD = 0x0d,	/* how the records were taken: bpf (magnet-read) or preload (the LD_PRELOAD shim) */
	MAGNET_META_END = 0x7fff,	/* last metadata record: value = number of META records before it */
};

enum magnet_clock {
	MAGNET_CLOCK_MONOTONIC = 0x01,	/* CLOCK_MONOTONIC (bpf_ktime_get_ns) */
	MAGNET_CLOCK_BOOTTIME = 0x02,	/* CLOCK_BOOTTIME (bpf_ktime_get_boot_ns) */
	MAGNET_CLOCK_TAI = 0x03,	/* CLOCK_TAI */
	MAGNET_CLOCK_CYCLES = 0x04,	/* CPU cycle counter (the original MAGNeT's get_cycles) */
	MAGNET_CLOCK_REALTIME = 0x05,	/* CLOCK_REALTIME (e.g. a pcap's timestamps) */
	MAGNET_CLOCK_SIMULATION = 0x06,	/* simulated time (ns-3) */
	MAGNET_CLOCK_SYNTHETIC = 0x07,	/* a synthetic trace's own time line */
};

enum magnet_ext_valid {
	MAGNET_EXT_TCP_STATE = 0x01,	/* tcp_state, snd_wnd .. mss hold the socket's TCP state */
	MAGNET_EXT_IP = 0x02,	/* ip_len, ip_id, ip_frag_off, ip_tos, ip_ttl, ip_protocol hold the IP header */
	MAGNET_EXT_ADDR = 0x04,	/* ip_version, sport, dport, saddr, daddr hold the connection's addresses */
	MAGNET_EXT_SEGMENT = 0x08,	/* seq, ack_seq, tcp_flags describe the segment */
	MAGNET_EXT_TASK = 0x10,	/* pid and cpu are set */
	MAGNET_EXT_GSO = 0x20,	/* gso_segs and gso_size are set */
	MAGNET_EXT_TCP_INFO = 0x40,	/* tcp_state, snd_wnd .. mss hold the socket's TCP_INFO (the preload capture): write_seq, copied_seq, snd_nxt and snd_una count bytes from the connection's first data byte, not sequence numbers */
	MAGNET_EXT_DEMAND = 0x80,	/* the record is a row of a whole-application demand (docs/app-demand.md), not a capture: tcp_flags is the row's kind (SYN open, PSH send, FIN close, RST reset); seq + ack_seq << 32 is its wait_bytes, snd_wnd + rcv_wnd << 32 its think_ns, srtt_us its adu and rto_us its after (signed 32-bit), not TCP state */
};

struct magnet_core {
	__u64 sockid;	/* opaque per-connection id (the kernel socket cookie); 0 when the event has no socket */
	__u64 timestamp;	/* clock ticks (see SYSINFO for the rate); never 0 */
	__u32 event;	/* event code (see [[event]]) */
	__s32 size;	/* bytes moved; a negative value is the error the call returned; LOST: records dropped */
};
MAGNET_ASSERT(__builtin_offsetof(struct magnet_core, sockid) == 0);
MAGNET_ASSERT(__builtin_offsetof(struct magnet_core, timestamp) == 8);
MAGNET_ASSERT(__builtin_offsetof(struct magnet_core, event) == 16);
MAGNET_ASSERT(__builtin_offsetof(struct magnet_core, size) == 20);
MAGNET_ASSERT(sizeof(struct magnet_core) == 24);

struct magnet_ext {
	__u8 valid;	/* which groups of extended fields hold data (see [[ext_valid]]) */
	__u8 tcp_flags;	/* the segment's TCP flags, bit for bit as in the TCP header (FIN=0x01 ... CWR=0x80) */
	__u8 tcp_state;	/* socket state as in the kernel's enum (1 = ESTABLISHED) */
	__u8 ip_version;	/* 4 or 6; 0 when unknown */
	__u16 sport;	/* local (send path) or source (receive path) port */
	__u16 dport;	/* remote (send path) or destination (receive path) port */
	__u32 seq;	/* the segment's first sequence number */
	__u32 ack_seq;	/* the segment's acknowledgement number */
	__u32 snd_wnd;	/* peer's advertised window, bytes */
	__u32 rcv_wnd;	/* current receive window, bytes */
	__u32 srtt_us;	/* smoothed round-trip time, microseconds */
	__u32 rto_us;	/* retransmission timeout, microseconds */
	__u32 snd_cwnd;	/* congestion window, segments */
	__u32 snd_ssthresh;	/* slow-start threshold, segments */
	__u32 packets_out;	/* segments in flight */
	__u32 retrans_out;	/* retransmitted segments in flight */
	__u32 write_seq;	/* tail+1 of data in the send buffer */
	__u32 copied_seq;	/* head of data not yet read by the application */
	__u32 snd_nxt;	/* next sequence number to send */
	__u32 snd_una;	/* first unacknowledged sequence number */
	__u32 mss;	/* current send MSS, bytes */
	__u32 pid;	/* process (thread group) id of the task that made the call; 0 when none */
	__u16 cpu;	/* CPU the event was recorded on */
	__u16 ip_len;	/* IP packet length, header included; 0 when unknown */
	__u16 ip_id;	/* IPv4 identification */
	__u16 ip_frag_off;	/* IPv4 flags and fragment offset */
	__u8 ip_tos;	/* IPv4 TOS / IPv6 traffic class */
	__u8 ip_ttl;	/* IPv4 TTL / IPv6 hop limit */
	__u8 ip_protocol;	/* IPv4 protocol / IPv6 next header */
	__u8 reserved0;	/* written 0 */
	__u16 gso_segs;	/* segments in a GSO/TSO buffer (more than 1: the device splits it) */
	__u16 gso_size;	/* segment size of a GSO/TSO buffer */
	__u8 saddr[16];	/* local/source address, network order; IPv4 as ::ffff:a.b.c.d */
	__u8 daddr[16];	/* remote/destination address, network order; IPv4 as ::ffff:a.b.c.d */
};
MAGNET_ASSERT(__builtin_offsetof(struct magnet_ext, valid) == 0);
MAGNET_ASSERT(__builtin_offsetof(struct magnet_ext, tcp_flags) == 1);
MAGNET_ASSERT(__builtin_offsetof(struct magnet_ext, tcp_state) == 2);
MAGNET_ASSERT(__builtin_offsetof(struct magnet_ext, ip_version) == 3);
MAGNET_ASSERT(__builtin_offsetof(struct magnet_ext, sport) == 4);
MAGNET_ASSERT(__builtin_offsetof(struct magnet_ext, dport) == 6);
MAGNET_ASSERT(__builtin_offsetof(struct magnet_ext, seq) == 8);
MAGNET_ASSERT(__builtin_offsetof(struct magnet_ext, ack_seq) == 12);
MAGNET_ASSERT(__builtin_offsetof(struct magnet_ext, snd_wnd) == 16);
MAGNET_ASSERT(__builtin_offsetof(struct magnet_ext, rcv_wnd) == 20);
MAGNET_ASSERT(__builtin_offsetof(struct magnet_ext, srtt_us) == 24);
MAGNET_ASSERT(__builtin_offsetof(struct magnet_ext, rto_us) == 28);
MAGNET_ASSERT(__builtin_offsetof(struct magnet_ext, snd_cwnd) == 32);
MAGNET_ASSERT(__builtin_offsetof(struct magnet_ext, snd_ssthresh) == 36);
MAGNET_ASSERT(__builtin_offsetof(struct magnet_ext, packets_out) == 40);
MAGNET_ASSERT(__builtin_offsetof(struct magnet_ext, retrans_out) == 44);
MAGNET_ASSERT(__builtin_offsetof(struct magnet_ext, write_seq) == 48);
MAGNET_ASSERT(__builtin_offsetof(struct magnet_ext, copied_seq) == 52);
MAGNET_ASSERT(__builtin_offsetof(struct magnet_ext, snd_nxt) == 56);
MAGNET_ASSERT(__builtin_offsetof(struct magnet_ext, snd_una) == 60);
MAGNET_ASSERT(__builtin_offsetof(struct magnet_ext, mss) == 64);
MAGNET_ASSERT(__builtin_offsetof(struct magnet_ext, pid) == 68);
MAGNET_ASSERT(__builtin_offsetof(struct magnet_ext, cpu) == 72);
MAGNET_ASSERT(__builtin_offsetof(struct magnet_ext, ip_len) == 74);
MAGNET_ASSERT(__builtin_offsetof(struct magnet_ext, ip_id) == 76);
MAGNET_ASSERT(__builtin_offsetof(struct magnet_ext, ip_frag_off) == 78);
MAGNET_ASSERT(__builtin_offsetof(struct magnet_ext, ip_tos) == 80);
MAGNET_ASSERT(__builtin_offsetof(struct magnet_ext, ip_ttl) == 81);
MAGNET_ASSERT(__builtin_offsetof(struct magnet_ext, ip_protocol) == 82);
MAGNET_ASSERT(__builtin_offsetof(struct magnet_ext, reserved0) == 83);
MAGNET_ASSERT(__builtin_offsetof(struct magnet_ext, gso_segs) == 84);
MAGNET_ASSERT(__builtin_offsetof(struct magnet_ext, gso_size) == 86);
MAGNET_ASSERT(__builtin_offsetof(struct magnet_ext, saddr) == 88);
MAGNET_ASSERT(__builtin_offsetof(struct magnet_ext, daddr) == 104);
MAGNET_ASSERT(sizeof(struct magnet_ext) == 120);

/* A record with the extended block. */
struct magnet_record {
	struct magnet_core core;
	struct magnet_ext ext;
};
MAGNET_ASSERT(sizeof(struct magnet_record) == 144);

#endif /* MAGNET_FORMAT_H */
