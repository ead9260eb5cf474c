/* SPDX-License-Identifier: GPL-2.0-or-later */
/* magnet.bpf.h: what every BPF program of the capture shares (sock.bpf.c,
 * tcp.bpf.c, ip.bpf.c, dev.bpf.c, sched.bpf.c): the maps and settings
 * (defined once, in state.bpf.c; `bpftool gen object` links the files into
 * the one object magnet-read loads), claiming and publishing a slot of the
 * buffer, the extended block, the one IPv4/IPv6 parser and the filters.
 * See docs/capture.md. */
#ifndef MAGNET_BPF_H
#define MAGNET_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "magnet.h"

#define AF_INET		2
#define AF_INET6	10
#define ETH_P_IP	0x0800
#define ETH_P_IPV6	0x86DD
#define SOCK_STREAM	1
#define TCPHDR_FIN	0x01
#define TCPHDR_SYN	0x02
#define MAC_HEADER_UNSET 0xffff
#define NEXTHDR_HOP	0

extern unsigned int CONFIG_HZ __kconfig;

/* The kfuncs bpf_rdonly_cast and bpf_cast_to_kern_ctx, through wrappers in
 * state.bpf.c: the linker of libbpf 1.1 (Debian 12) refuses an extern kfunc
 * declared in more than one object. Hidden functions are verified in their
 * caller's context, so what they return keeps its type. */
extern void *rdonly_cast(const void *obj, __u32 btf_id);
extern void *kern_ctx(void *ctx);

/* ------------------------------------------------------- shared state --- */

/* The capture buffer, as in the original MAGNeT: one circular buffer of
 * records per CPU, memory-mapped by magnet-read. A slot whose timestamp is
 * 0 is free; a record is published by writing its timestamp last, and the
 * reader frees a slot by zeroing it again. No locks, no wakeups. */
struct records_map {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(struct magnet_core));	/* 24 or 144: set by magnet-read */
	__uint(max_entries, 1);				/* CPUs x cfg.slots: set by magnet-read */
};

struct cpu_stats_map {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct magnet_cpu_stats);
};

/* The filter's verdict and the TCP layer's state, per socket. */
struct socks_map {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC | BPF_F_CLONE);
	__type(key, int);
	__type(value, struct magnet_sock);
};

/* Traced connections by flow, for the programs that see a packet without its
 * socket (DEV_RECV, and handshake packets of request and timewait sockets). */
struct flows_map {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, MAGNET_FLOWS);
	__type(key, struct magnet_flow_key);
	__type(value, __u64);		/* the connection's socket cookie */
};

extern struct records_map records SEC(".maps");
extern struct cpu_stats_map cpu_stats SEC(".maps");
extern struct socks_map socks SEC(".maps");
extern struct flows_map flows SEC(".maps");
extern const volatile struct magnet_config cfg;	/* read-only: the verifier drops what is off */
extern __u64 flows_gen;				/* bumped at every change of `flows` */
/* Local ports of traced connections, one bit each: a packet for any other
 * port is not traced, known without a hash lookup. Bits are never cleared
 * (a stale one only costs the lookup). */
extern __u64 traced_ports[65536 / 64];

#define WANT(bit) (cfg.event_mask & (bit))
#define READ_ONCE(x) (*(volatile typeof(x) *)&(x))

/* ---------------------------------------------------------- accounting --- */

static __always_inline struct magnet_cpu_stats *cpu_stats_here(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&cpu_stats, &zero);
}

/* A run that records nothing (filtered out, or not an event). */
static __always_inline int skip(enum magnet_prog prog)
{
	struct magnet_cpu_stats *st = cpu_stats_here();

	if (st)
		__sync_fetch_and_add(&st->skipped[prog], 1);
	return 0;
}

/* Claim this CPU's next slot if it is free. A program that interrupted us
 * on this CPU may have taken it meanwhile: then try the one after. */
static __always_inline struct magnet_record *claim(struct magnet_cpu_stats *st)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct magnet_record *r;

#pragma unroll
	for (int attempt = 0; attempt < 3; attempt++) {
		__u32 head = st->head, next = head + 1 == cfg.slots ? 0 : head + 1;
		__u32 key = cpu * cfg.slots + head;

		r = bpf_map_lookup_elem(&records, &key);
		if (!r)
			return NULL;
		if (r->core.timestamp) {
			if (READ_ONCE(st->head) != head)
				continue;		/* taken by a program that interrupted us */
			return NULL;			/* full: the reader has not freed it yet */
		}
		if (__sync_val_compare_and_swap(&st->head, head, next) == head) {
			if (cfg.ext)
				__builtin_memset(&r->ext, 0, sizeof(r->ext));
			return r;
		}
	}
	return NULL;
}

/* Publish a record stamped `ts`: its timestamp, written last, makes it visible. */
static __always_inline void publish_at(struct magnet_record *r, __u64 ts)
{
	asm volatile("" ::: "memory");
	r->core.timestamp = ts;
}

static __always_inline void publish(struct magnet_record *r)
{
	publish_at(r, bpf_ktime_get_ns());
}

/* The LOST record announcing `n` records this CPU could not write. */
static __always_inline bool emit_lost(struct magnet_cpu_stats *st, __u64 n)
{
	struct magnet_record *r = claim(st);

	if (!r)
		return false;
	if (n > 0x7fffffff) {			/* the rest goes into the next LOST record */
		__sync_fetch_and_add(&st->lost_pending, n - 0x7fffffff);
		n = 0x7fffffff;
	}
	r->core.sockid = 0;
	r->core.event = MAGNET_LOST;
	r->core.size = n;
	publish(r);
	return true;
}

/* The position of an EVENT_MASK bit (a constant where inlined). */
static __always_inline __u32 bit_index(__u32 bit)
{
#pragma unroll
	for (__u32 i = 0; i < 16; i++)
		if (bit == (1u << i))
			return i;
	return 0;
}

/* Claim the slot of an event (EVENT_MASK bit `bit`); NULL when the buffer is
 * full, the event then being counted as lost, to be announced by a LOST
 * record at this CPU's next successful claim. */
static __always_inline struct magnet_record *begin(__u32 bit, __u32 event)
{
	struct magnet_cpu_stats *st = cpu_stats_here();
	struct magnet_record *r;
	__u64 n;

	if (!st)
		return NULL;
	if (st->lost_pending) {
		n = __sync_lock_test_and_set(&st->lost_pending, 0);
		if (n && !emit_lost(st, n)) {
			__sync_fetch_and_add(&st->lost_pending, n);
			goto lost;
		}
	}
	r = claim(st);
	if (!r)
		goto lost;
	r->core.event = event;
	return r;
lost:
	__sync_fetch_and_add(&st->lost_pending, 1);
	__sync_fetch_and_add(&st->lost, 1);
	__sync_fetch_and_add(&st->lost_event[bit_index(bit)], 1);
	return NULL;
}

static __always_inline void finish_at(struct magnet_record *r, __u64 sockid, __s32 size, __u64 ts)
{
	r->core.sockid = sockid;
	r->core.size = size;
	publish_at(r, ts);
}

static __always_inline void finish(struct magnet_record *r, __u64 sockid, __s32 size)
{
	finish_at(r, sockid, size, bpf_ktime_get_ns());
}

/* ------------------------------------------------------ extended block --- */

static __always_inline void set_v4(__u8 *out, __u32 addr_be)
{
	__builtin_memset(out, 0, 10);
	out[10] = 0xff;
	out[11] = 0xff;
	__builtin_memcpy(out + 12, &addr_be, 4);
}

static __always_inline void fill_task(struct magnet_ext *e)
{
	e->valid |= MAGNET_EXT_TASK;
	e->pid = bpf_get_current_pid_tgid() >> 32;
	e->cpu = bpf_get_smp_processor_id();
}

static __always_inline void fill_tcp_state(struct magnet_ext *e, struct tcp_sock *tp)
{
	if (!tp)
		return;
	e->valid |= MAGNET_EXT_TCP_STATE;
	e->tcp_state = tp->inet_conn.icsk_inet.sk.__sk_common.skc_state;
	e->snd_wnd = tp->snd_wnd;
	e->rcv_wnd = tp->rcv_wnd;
	e->srtt_us = tp->srtt_us >> 3;
	e->rto_us = tp->inet_conn.icsk_rto * (1000000 / CONFIG_HZ);
	e->snd_cwnd = tp->snd_cwnd;
	e->snd_ssthresh = tp->snd_ssthresh;
	e->packets_out = tp->packets_out;
	e->retrans_out = tp->retrans_out;
	e->write_seq = tp->write_seq;
	e->copied_seq = tp->copied_seq;
	e->snd_nxt = tp->snd_nxt;
	e->snd_una = tp->snd_una;
	e->mss = tp->mss_cache;
}

/* The ADDR group from a connection's two ends (IPv4 addresses as network-order
 * words, IPv6 ones as 16 bytes); on the receive path the source is the peer. */
static __always_inline void fill_ends(struct magnet_ext *e, bool v6, const void *local6,
				      const void *remote6, __u32 local4, __u32 remote4,
				      __u16 lport, __u16 rport, bool recv)
{
	__u8 *local = recv ? e->daddr : e->saddr, *remote = recv ? e->saddr : e->daddr;

	e->valid |= MAGNET_EXT_ADDR;
	if (v6) {
		e->ip_version = 6;
		__builtin_memcpy(local, local6, 16);
		__builtin_memcpy(remote, remote6, 16);
	} else {
		e->ip_version = 4;
		set_v4(local, local4);
		set_v4(remote, remote4);
	}
	e->sport = recv ? rport : lport;
	e->dport = recv ? lport : rport;
}

static __always_inline void fill_addr_sk(struct magnet_ext *e, struct sock *sk, bool recv)
{
	struct sock_common *c = &sk->__sk_common;

	fill_ends(e, c->skc_family == AF_INET6, &c->skc_v6_rcv_saddr, &c->skc_v6_daddr,
		  c->skc_rcv_saddr, c->skc_daddr, c->skc_num, bpf_ntohs(c->skc_dport), recv);
}

static __always_inline void fill_gso(struct magnet_ext *e, __u16 segs, __u16 size)
{
	e->valid |= MAGNET_EXT_GSO;
	e->gso_segs = segs ? segs : 1;
	e->gso_size = size;
}

static __always_inline void fill_gso_skb(struct magnet_ext *e, const struct sk_buff *skb)
{
	const struct skb_shared_info *sh = rdonly_cast(skb->head + skb->end,
		bpf_core_type_id_kernel(struct skb_shared_info));

	fill_gso(e, sh->gso_segs, sh->gso_size);
}

/* ------------------------------------------------------------- packets --- */

/* The TCP/IP headers of a packet and what the record needs of them. */
struct pkt {
	struct magnet_flow flow;	/* as on the wire: source, destination */
	__u32 payload;			/* transport payload bytes */
	__u32 thlen;			/* TCP header bytes */
	__u32 seq, ack_seq;
	__u8 flags, version, tos, ttl;
	__u32 ip_len;			/* from the header; 0 for BIG TCP (> 64 KiB) */
	__u16 ip_id, frag_off;
};

/* What only the extended block needs is read only when it is recorded
 * (cfg.ext is a constant: the verifier removes the code otherwise). */
static __always_inline void pkt_tcp(struct pkt *p, const struct tcphdr *th)
{
	p->flow.sport = th->source;
	p->flow.dport = th->dest;
	p->seq = bpf_ntohl(th->seq);
	p->flags = ((const __u8 *)th)[13];	/* the flags byte, as the format wants it */
	if (cfg.ext)
		p->ack_seq = bpf_ntohl(th->ack_seq);
}

static __always_inline void pkt_ip4(struct pkt *p, const struct iphdr *ip)
{
	p->version = 4;
	set_v4(p->flow.saddr, ip->saddr);
	set_v4(p->flow.daddr, ip->daddr);
	p->ip_len = bpf_ntohs(ip->tot_len);
	if (cfg.ext) {
		p->ip_id = bpf_ntohs(ip->id);
		p->frag_off = bpf_ntohs(ip->frag_off);
		p->tos = ip->tos;
		p->ttl = ip->ttl;
	}
}

static __always_inline void pkt_ip6(struct pkt *p, const struct ipv6hdr *ip6)
{
	p->version = 6;
	__builtin_memcpy(p->flow.saddr, &ip6->saddr, 16);
	__builtin_memcpy(p->flow.daddr, &ip6->daddr, 16);
	p->ip_len = ip6->payload_len ? bpf_ntohs(ip6->payload_len) + sizeof(*ip6) : 0;
	if (cfg.ext) {
		p->tos = (ip6->priority << 4) | (ip6->flow_lbl[0] >> 4);
		p->ttl = ip6->hop_limit;
	}
}

/* The ADDR and SEGMENT groups of a packet (what a TCP event carries). */
static __always_inline void fill_segment(struct magnet_ext *e, const struct pkt *p)
{
	e->valid |= MAGNET_EXT_ADDR | MAGNET_EXT_SEGMENT;
	e->ip_version = p->version;
	__builtin_memcpy(e->saddr, p->flow.saddr, 16);
	__builtin_memcpy(e->daddr, p->flow.daddr, 16);
	e->sport = bpf_ntohs(p->flow.sport);
	e->dport = bpf_ntohs(p->flow.dport);
	e->seq = p->seq;
	e->ack_seq = p->ack_seq;
	e->tcp_flags = p->flags;
}

/* ... and the IP group too (what an IP or device event carries). */
static __always_inline void fill_pkt(struct magnet_ext *e, const struct pkt *p)
{
	fill_segment(e, p);
	e->valid |= MAGNET_EXT_IP;
	e->ip_len = p->ip_len > 0xffff ? 0 : p->ip_len;	/* 0: unknown (too long) */
	e->ip_id = p->ip_id;
	e->ip_frag_off = p->frag_off;
	e->ip_tos = p->tos;
	e->ip_ttl = p->ttl;
	e->ip_protocol = IPPROTO_TCP;
}

/* The flow key of the socket that sent packet `p` (receive orientation). */
static __always_inline void reverse_flow(struct magnet_flow *out, const struct magnet_flow *in)
{
	__builtin_memcpy(out->saddr, in->daddr, 16);
	__builtin_memcpy(out->daddr, in->saddr, 16);
	out->sport = in->dport;
	out->dport = in->sport;
}

/* The packet's flow as the socket that receives it sees it (recv), or as the
 * one that sent it. */
static __always_inline void flow_of_pkt(struct magnet_flow *out, const struct pkt *p, bool recv)
{
	if (recv)
		__builtin_memcpy(out, &p->flow, sizeof(*out));
	else
		reverse_flow(out, &p->flow);
}

/* The one parser (state.bpf.c): the TCP/IP headers of a kernel skb whose
 * network header is at head + `net`, and of a cgroup_skb program's packet.
 * One call each (the kfuncs it needs inlined there, see rdonly_cast). */
extern bool parse_skb(struct pkt *p, const struct sk_buff *skb, __u16 net, __u32 net_len);
extern bool parse_ctx(struct pkt *p, struct __sk_buff *ctx);

/* -------------------------------------------------------------- filters --- */

static __always_inline bool port_ok(__u16 lport, __u16 rport)
{
	if (!cfg.ports[0])
		return true;
#pragma unroll
	for (int i = 0; i < MAGNET_MAX_PORTS; i++) {
		if (!cfg.ports[i])
			break;
		if (cfg.ports[i] == lport || cfg.ports[i] == rport)
			return true;
	}
	return false;
}

static __always_inline bool pid_ok(void)
{
	return !cfg.pid || (bpf_get_current_pid_tgid() >> 32) == cfg.pid;
}

/* Is the socket in the traced cgroup (or below it)? */
static __always_inline bool cgroup_ok(struct sock *sk)
{
	struct cgroup *cg;

	if (!cfg.cgroup_id)
		return true;
	cg = sk->sk_cgrp_data.cgroup;
	if (!cg || cg->level < (int)cfg.cgroup_level)
		return false;
	/* ancestors[] lies past the struct's BTF size: read it (once per socket). */
	if (bpf_probe_read_kernel(&cg, sizeof(cg), &cg->ancestors[cfg.cgroup_level]))
		return false;
	return cg && BPF_CORE_READ(cg, kn, id) == cfg.cgroup_id;
}

static __always_inline bool is_tcp(struct sock *sk)
{
	return sk->sk_protocol == IPPROTO_TCP && sk->sk_type == SOCK_STREAM &&
	       (sk->__sk_common.skc_family == AF_INET || sk->__sk_common.skc_family == AF_INET6);
}

/* A traced connection's flow (receive orientation: the destination port is
 * its local port) in its network namespace. */
static __always_inline void save_flow(const struct magnet_flow *flow, __u64 cookie, __u64 netns)
{
	struct magnet_flow_key key = { *flow, 0, netns };
	__u16 port = bpf_ntohs(flow->dport);

	bpf_map_update_elem(&flows, &key, &cookie, BPF_ANY);
	__sync_fetch_and_or(&traced_ports[port / 64], 1ull << (port % 64));
	__sync_fetch_and_add(&flows_gen, 1);
}

/* A connection this capture does not trace: an entry a traced connection
 * left under the same addresses and ports must not claim its packets. */
static __always_inline void forget_flow(const struct magnet_flow *flow, __u64 netns)
{
	struct magnet_flow_key key = { *flow, 0, netns };

	if (bpf_map_delete_elem(&flows, &key) == 0)
		__sync_fetch_and_add(&flows_gen, 1);
}

/* The cookie of the traced connection of a flow, or 0. */
static __always_inline __u64 flow_cookie(const struct magnet_flow *flow, __u64 netns)
{
	struct magnet_flow_key key = { *flow, 0, netns };
	__u64 *cookie = bpf_map_lookup_elem(&flows, &key);

	return cookie ? *cookie : 0;
}

static __always_inline bool port_traced(__be16 port_be)
{
	__u16 port = bpf_ntohs(port_be);

	return traced_ports[port / 64] & (1ull << (port % 64));
}

/* The receive-orientation flow of a kernel socket. */
static __always_inline void flow_of_sk(struct magnet_flow *f, struct sock *sk)
{
	struct sock_common *c = &sk->__sk_common;

	if (c->skc_family == AF_INET6) {
		__builtin_memcpy(f->saddr, &c->skc_v6_daddr, 16);
		__builtin_memcpy(f->daddr, &c->skc_v6_rcv_saddr, 16);
	} else {
		set_v4(f->saddr, c->skc_daddr);
		set_v4(f->daddr, c->skc_rcv_saddr);
	}
	f->sport = c->skc_dport;
	f->dport = bpf_htons(c->skc_num);
}

/* The verdict on a socket seen by a tracing program; decides it when no
 * other program has. `task` says the current task is the one using the
 * socket (process context), so the pid filter can be applied. */
static __always_inline bool traced_sk(struct sock *sk, bool task)
{
	struct magnet_sock *s = bpf_sk_storage_get(&socks, sk, 0, 0);
	struct magnet_flow f = {};
	__u64 netns;
	bool ok;

	if (s && s->verdict)
		return s->verdict == MAGNET_TRACED;
	if (cfg.pid && !task)
		return false;			/* cannot tell yet */
	if (!is_tcp(sk))
		return false;
	ok = cgroup_ok(sk) && pid_ok() &&
	     port_ok(sk->__sk_common.skc_num, bpf_ntohs(sk->__sk_common.skc_dport));
	s = bpf_sk_storage_get(&socks, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!s)
		return false;
	s->verdict = ok ? MAGNET_TRACED : MAGNET_IGNORED;
	if (sk->__sk_common.skc_state == BPF_TCP_LISTEN)
		return ok;
	flow_of_sk(&f, sk);
	netns = sk->__sk_common.skc_net.net->net_cookie;
	if (ok)
		save_flow(&f, bpf_get_socket_cookie(sk), netns);
	else
		forget_flow(&f, netns);
	return ok;
}

static __always_inline __u64 cookie_of(struct sock *sk)
{
	__u64 c = sk->__sk_common.skc_cookie.counter;

	return c ? c : bpf_get_socket_cookie(sk);
}

#endif /* MAGNET_BPF_H */
