// SPDX-License-Identifier: GPL-2.0-or-later
/* magnet.bpf.c: the kernel side of magnet, the modern form of the MAGNeT
 * kernel patch. Every event of a traced TCP connection becomes one record of
 * docs/trace-format.md in a ring buffer that magnet-read drains.
 *
 *   SOCK_SEND/RECV   tp_btf sock_send_length / sock_recv_length (on return)
 *   TCP_SEND/RETRANS sockops header-option callback, once per segment sent
 *   TCP_RECV         tp_btf tcp_probe (ESTABLISHED) + sockops callbacks (other states)
 *   IP_SEND/RECV     cgroup_skb egress / ingress
 *   DEV_SEND         tp_btf net_dev_start_xmit
 *   DEV_RECV         tp_btf netif_receive_skb (no socket yet: matched by 4-tuple)
 *   SCHED_*          tp_btf sched_switch, sched_process_fork/exit, sched_entry/exit_tp
 *
 * sockid is the socket cookie (getsockopt SO_COOKIE) at every layer. Sizes
 * below the socket layer are transport payload bytes. Nothing is lost
 * silently: a failed reservation is counted per CPU and announced by a LOST
 * record at that CPU's next successful one. See docs/capture.md. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "magnet.h"

char LICENSE[] SEC("license") = "GPL";

#define AF_INET		2
#define AF_INET6	10
#define ETH_P_IP	0x0800
#define ETH_P_IPV6	0x86DD
#define SOCK_STREAM	1
#define TCPHDR_FIN	0x01
#define TCPHDR_SYN	0x02
#define MAC_HEADER_UNSET 0xffff
#define NEXTHDR_HOP	0

const volatile struct magnet_config cfg = {};
extern unsigned int CONFIG_HZ __kconfig;

extern void *bpf_cast_to_kern_ctx(void *obj) __ksym;
extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym;

/* The capture buffer, as in the original MAGNeT: one circular buffer of
 * records per CPU, memory-mapped by magnet-read. A slot whose timestamp is
 * 0 is free; a record is published by writing its timestamp last, and the
 * reader frees a slot by zeroing it again. No locks, no wakeups. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(struct magnet_core));	/* 24 or 144: set by magnet-read */
	__uint(max_entries, 1);				/* CPUs x cfg.slots: set by magnet-read */
} records SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct magnet_cpu_stats);
} cpu_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC | BPF_F_CLONE);
	__type(key, int);
	__type(value, struct magnet_sock);
} socks SEC(".maps");

/* Traced connections by flow, for the programs that see a packet without its
 * socket (DEV_RECV, and handshake packets of request and timewait sockets). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, MAGNET_FLOWS);
	__type(key, struct magnet_flow_key);
	__type(value, __u64);		/* the connection's socket cookie */
} flows SEC(".maps");

/* DEV_RECV's per-CPU cache of recent `flows` entries: a hash lookup costs
 * about as much as recording an event, and consecutive packets on a CPU
 * mostly belong to a few connections (both directions of a transfer often
 * on the same CPU). An entry is valid while flows_gen, bumped at every change
 * of `flows`, has not moved. Only magnet_dev_recv uses it, and the kernel
 * never nests a program in itself on one CPU, so an entry is never read
 * half-written. */
struct flow_cache {
	struct {
		struct magnet_flow_key key;
		__u64 cookie;
		__u64 gen;		/* flows_gen when filled; 0 = empty */
	} entry[MAGNET_FLOW_CACHE];
	__u32 next;			/* the entry to replace next */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct flow_cache);
} flow_cache SEC(".maps");

__u64 flows_gen = 1;

/* Listeners this capture traces, by socket cookie (see ops_request_traced). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, MAGNET_LISTENERS);
	__type(key, __u64);
	__type(value, bool);
} listeners SEC(".maps");

/* Local ports of traced connections, one bit each: a packet for any other
 * port is not traced, known without a hash lookup. Bits are never cleared
 * (a stale one only costs the lookup). */
__u64 traced_ports[65536 / 64];

#define WANT(bit) (cfg.event_mask & (bit))
#define READ_ONCE(x) (*(volatile typeof(x) *)&(x))

/* ------------------------------------------------------------ accounting --- */

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

/* Publish a record: its timestamp, written last, makes it visible. */
static __always_inline void publish(struct magnet_record *r)
{
	__u64 now = bpf_ktime_get_ns();

	asm volatile("" ::: "memory");
	r->core.timestamp = now;
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

static __always_inline void finish(struct magnet_record *r, __u64 sockid, __s32 size)
{
	r->core.sockid = sockid;
	r->core.size = size;
	publish(r);
}

/* -------------------------------------------------------- extended data --- */

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

/* Addresses of a socket; on the receive path the source is the peer. */
static __always_inline void fill_addr_sk(struct magnet_ext *e, struct sock *sk, bool recv)
{
	struct sock_common *c = &sk->__sk_common;
	__u8 *local = recv ? e->daddr : e->saddr, *remote = recv ? e->saddr : e->daddr;
	__u16 lport = c->skc_num, rport = bpf_ntohs(c->skc_dport);

	e->valid |= MAGNET_EXT_ADDR;
	if (c->skc_family == AF_INET6) {
		e->ip_version = 6;
		__builtin_memcpy(local, &c->skc_v6_rcv_saddr, 16);
		__builtin_memcpy(remote, &c->skc_v6_daddr, 16);
	} else {
		e->ip_version = 4;
		set_v4(local, c->skc_rcv_saddr);
		set_v4(remote, c->skc_daddr);
	}
	e->sport = recv ? rport : lport;
	e->dport = recv ? lport : rport;
}

static __always_inline void fill_addr_ops(struct magnet_ext *e, struct bpf_sock_ops *skops, bool recv)
{
	__u8 *local = recv ? e->daddr : e->saddr, *remote = recv ? e->saddr : e->daddr;
	__u16 lport = skops->local_port, rport = bpf_ntohl(skops->remote_port);
	__u32 a[4];

	e->valid |= MAGNET_EXT_ADDR;
	if (skops->family == AF_INET6) {
		e->ip_version = 6;
		a[0] = skops->local_ip6[0]; a[1] = skops->local_ip6[1];
		a[2] = skops->local_ip6[2]; a[3] = skops->local_ip6[3];
		__builtin_memcpy(local, a, 16);
		a[0] = skops->remote_ip6[0]; a[1] = skops->remote_ip6[1];
		a[2] = skops->remote_ip6[2]; a[3] = skops->remote_ip6[3];
		__builtin_memcpy(remote, a, 16);
	} else {
		e->ip_version = 4;
		set_v4(local, skops->local_ip4);
		set_v4(remote, skops->remote_ip4);
	}
	e->sport = recv ? rport : lport;
	e->dport = recv ? lport : rport;
}

static __always_inline void fill_gso(struct magnet_ext *e, __u16 segs, __u16 size)
{
	e->valid |= MAGNET_EXT_GSO;
	e->gso_segs = segs ? segs : 1;
	e->gso_size = size;
}

static __always_inline void fill_gso_skb(struct magnet_ext *e, const struct sk_buff *skb)
{
	const struct skb_shared_info *sh = bpf_rdonly_cast(skb->head + skb->end,
		bpf_core_type_id_kernel(struct skb_shared_info));

	fill_gso(e, sh->gso_segs, sh->gso_size);
}

/* ------------------------------------------------------------- packets --- */

/* The TCP/IP headers of a packet, read where it is (BTF-typed or packet
 * pointers), and what the record needs of them. */
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

static __always_inline void fill_pkt(struct magnet_ext *e, const struct pkt *p)
{
	e->valid |= MAGNET_EXT_IP | MAGNET_EXT_ADDR | MAGNET_EXT_SEGMENT;
	e->ip_version = p->version;
	e->ip_len = p->ip_len > 0xffff ? 0 : p->ip_len;	/* 0: unknown (too long) */
	e->ip_id = p->ip_id;
	e->ip_frag_off = p->frag_off;
	e->ip_tos = p->tos;
	e->ip_ttl = p->ttl;
	e->ip_protocol = IPPROTO_TCP;
	__builtin_memcpy(e->saddr, p->flow.saddr, 16);
	__builtin_memcpy(e->daddr, p->flow.daddr, 16);
	e->sport = bpf_ntohs(p->flow.sport);
	e->dport = bpf_ntohs(p->flow.dport);
	e->seq = p->seq;
	e->ack_seq = p->ack_seq;
	e->tcp_flags = p->flags;
}

/* The flow key of the socket that sent packet `p` (receive orientation). */
static __always_inline void reverse_flow(struct magnet_flow *out, const struct magnet_flow *in)
{
	__builtin_memcpy(out->saddr, in->daddr, 16);
	__builtin_memcpy(out->daddr, in->saddr, 16);
	out->sport = in->dport;
	out->dport = in->sport;
}

/* The transport payload, once the TCP header is known. `net_len` is the
 * packet's length from its network header on, for headers that say 0
 * (BIG TCP packets longer than 64 KiB). */
static __always_inline void pkt_payload(struct pkt *p, const struct tcphdr *th, __u32 ip_hlen,
					__u32 net_len)
{
	pkt_tcp(p, th);
	p->thlen = th->doff * 4;
	if (!p->ip_len)
		p->ip_len = net_len;
	p->payload = p->ip_len - ip_hlen - p->thlen;
}

/* Headers of a kernel skb starting at head + `net` (network) and `trans`
 * (transport, or 0: right after the IP header). false if not TCP. An IPv6
 * hop-by-hop header before TCP is skipped; other extension headers are not. */
static __always_inline bool parse_kernel_skb(struct pkt *p, const struct sk_buff *skb,
					     __u16 net, __u16 trans, __u32 net_len)
{
	const unsigned char *head = skb->head;
	__u32 ip_hlen;

	if (skb->protocol == bpf_htons(ETH_P_IP)) {
		const struct iphdr *ip = bpf_rdonly_cast(head + net, bpf_core_type_id_kernel(struct iphdr));

		if (ip->protocol != IPPROTO_TCP)
			return false;
		pkt_ip4(p, ip);
		ip_hlen = ip->ihl * 4;
	} else if (skb->protocol == bpf_htons(ETH_P_IPV6)) {
		const struct ipv6hdr *ip6 = bpf_rdonly_cast(head + net, bpf_core_type_id_kernel(struct ipv6hdr));
		__u8 next = ip6->nexthdr;

		ip_hlen = sizeof(*ip6);
		if (next == NEXTHDR_HOP) {
			const struct ipv6_opt_hdr *hop = bpf_rdonly_cast(head + net + ip_hlen,
				bpf_core_type_id_kernel(struct ipv6_opt_hdr));

			next = hop->nexthdr;
			ip_hlen += (hop->hdrlen + 1) * 8;
		}
		if (next != IPPROTO_TCP)
			return false;
		pkt_ip6(p, ip6);
	} else {
		return false;
	}
	if (!trans)
		trans = net + ip_hlen;
	pkt_payload(p, bpf_rdonly_cast(head + trans, bpf_core_type_id_kernel(struct tcphdr)),
		    ip_hlen, net_len);
	return true;
}

/* --------------------------------------------------------------- filter --- */

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

/* Ports first: they are what differs between a host's connections. */
static __always_inline bool same_flow(const struct magnet_flow_key *a, const struct magnet_flow *b,
				      __u64 netns)
{
	const __u64 *x = (const __u64 *)&a->flow, *y = (const __u64 *)b;

	return a->flow.sport == b->sport && a->flow.dport == b->dport && a->netns == netns &&
	       x[3] == y[3] && x[1] == y[1] && x[2] == y[2] && x[0] == y[0];
}

/* The cookie of the traced connection a received packet belongs to, or 0
 * (DEV_RECV only: see flow_cache). */
static __always_inline __u64 find_flow(const struct magnet_flow *flow, __u64 netns)
{
	__u32 zero = 0, i;
	struct flow_cache *c = bpf_map_lookup_elem(&flow_cache, &zero);
	__u64 gen = READ_ONCE(flows_gen), cookie;

	if (!port_traced(flow->dport) || !c)
		return 0;
#pragma unroll
	for (i = 0; i < MAGNET_FLOW_CACHE; i++)
		if (c->entry[i].gen == gen && same_flow(&c->entry[i].key, flow, netns))
			return c->entry[i].cookie;
	cookie = flow_cookie(flow, netns);
	if (cookie) {
		i = c->next++ & (MAGNET_FLOW_CACHE - 1);
		c->entry[i].key = (struct magnet_flow_key){ *flow, 0, netns };
		c->entry[i].cookie = cookie;
		c->entry[i].gen = gen;
	}
	return cookie;
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

/* ------------------------------------------------------- socket layer --- */

static __always_inline int sock_event(struct sock *sk, int ret, __u32 bit, __u32 event,
				      enum magnet_prog prog)
{
	struct magnet_record *r;

	if (!sk || !traced_sk(sk, true))
		return skip(prog);
	r = begin(bit, event);
	if (!r)
		return 0;
	if (cfg.ext) {
		fill_task(&r->ext);
		fill_addr_sk(&r->ext, sk, event == MAGNET_SOCK_RECV);
		fill_tcp_state(&r->ext, bpf_skc_to_tcp_sock(sk));
	}
	finish(r, cookie_of(sk), ret);
	return 0;
}

SEC("tp_btf/sock_send_length")
int BPF_PROG(magnet_sock_send, struct sock *sk, int ret, int flags)
{
	return sock_event(sk, ret, MAGNET_BIT_SOCK_SEND, MAGNET_SOCK_SEND, MAGNET_PROG_SOCK_SEND);
}

SEC("tp_btf/sock_recv_length")
int BPF_PROG(magnet_sock_recv, struct sock *sk, int ret, int flags)
{
	return sock_event(sk, ret, MAGNET_BIT_SOCK_RECV, MAGNET_SOCK_RECV, MAGNET_PROG_SOCK_RECV);
}

/* ----------------------------------------------------------- TCP layer --- */

/* sockops sees a socket's life: it decides the verdict on new connections
 * (it runs only for sockets of the traced cgroup), remembers their flow for
 * DEV_RECV, and asks for the per-segment callbacks. Those callbacks are the
 * socket's, not this capture's: another capture (or any sockops program) may
 * have asked for them, so each one checks this capture's own verdict. */
static __always_inline void ops_flow(struct magnet_flow *f, struct bpf_sock_ops *skops)
{
	/* Every field read unconditionally, at its own offset: clang would
	 * otherwise merge the IPv4 and IPv6 reads into one load from a computed
	 * context address, which the verifier refuses. */
	__u32 remote[4] = { skops->remote_ip6[0], skops->remote_ip6[1], skops->remote_ip6[2],
			    skops->remote_ip6[3] };
	__u32 local[4] = { skops->local_ip6[0], skops->local_ip6[1], skops->local_ip6[2],
			   skops->local_ip6[3] };
	__u32 remote4 = skops->remote_ip4, local4 = skops->local_ip4;

	asm volatile("" ::: "memory");
	if (skops->family == AF_INET6) {
		__builtin_memcpy(f->saddr, remote, 16);
		__builtin_memcpy(f->daddr, local, 16);
	} else {
		set_v4(f->saddr, remote4);
		set_v4(f->daddr, local4);
	}
	f->sport = bpf_htons((__u16)bpf_ntohl(skops->remote_port));
	f->dport = bpf_htons(skops->local_port);
}

static __always_inline int ops_verdict(struct bpf_sock_ops *skops, bool task)
{
	struct bpf_sock *sk = skops->sk;
	struct magnet_flow f = {};
	struct magnet_sock *s;
	bool ok;

	if (!sk)
		return MAGNET_UNDECIDED;
	s = bpf_sk_storage_get(&socks, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!s)
		return MAGNET_UNDECIDED;
	if (s->verdict)				/* decided, or inherited from the listener */
		return s->verdict;
	if (cfg.pid && !task)
		return MAGNET_UNDECIDED;
	ok = pid_ok() && port_ok(skops->local_port, bpf_ntohl(skops->remote_port));
	if (ok) {
		s->verdict = MAGNET_TRACED;
		if (skops->op == BPF_SOCK_OPS_TCP_LISTEN_CB) {
			__u64 cookie = bpf_get_socket_cookie(skops);

			bpf_map_update_elem(&listeners, &cookie, &ok, BPF_ANY);
		}
	} else if (skops->op != BPF_SOCK_OPS_TCP_LISTEN_CB) {
		s->verdict = MAGNET_IGNORED;	/* a listener's children decide for themselves */
		ops_flow(&f, skops);
		forget_flow(&f, bpf_get_netns_cookie(skops));
	}
	return s->verdict;
}

/* This capture's verdict on the full socket of a callback (not deciding it). */
static __always_inline struct magnet_sock *ops_traced(struct bpf_sock_ops *skops)
{
	struct bpf_sock *sk = skops->sk;
	struct magnet_sock *s;

	if (!skops->is_fullsock || !sk)
		return NULL;
	s = bpf_sk_storage_get(&socks, sk, 0, 0);
	return s && s->verdict == MAGNET_TRACED ? s : NULL;
}

/* A SYN-ACK is sent by a request socket, which has no storage of its own:
 * it is traced if its listener is. No helper takes the listener there, but
 * its address can be read, and through it the listener's cookie. */
static __always_inline bool ops_request_traced(struct bpf_sock_ops *skops)
{
	struct bpf_sock_ops_kern *k = bpf_cast_to_kern_ctx(skops);
	struct tcp_request_sock *req = bpf_skc_to_tcp_request_sock(k->sk);
	__u64 listener, cookie = 0;

	if (!req)
		return false;
	listener = (__u64)req->req.req.__req_common.skc_listener;
	if (!listener || bpf_probe_read_kernel(&cookie, sizeof(cookie), (void *)listener +
			bpf_core_field_offset(struct sock, __sk_common.skc_cookie)))
		return false;
	return bpf_map_lookup_elem(&listeners, &cookie) != NULL;
}

/* The per-segment callbacks the recorded events need: header-option writing
 * for every segment sent (TCP_SEND, TCP_RETRANS); for TCP_RECV, state changes,
 * then header-option parsing once the connection leaves ESTABLISHED (there
 * tcp_probe records every segment, the fast path included, and parsing would
 * only add a run per slow-path segment). */
static __always_inline void ops_trace(struct bpf_sock_ops *skops)
{
	struct magnet_flow f = {};
	int flags = skops->bpf_sock_ops_cb_flags;

	if (WANT(MAGNET_BIT_TCP_SEND | MAGNET_BIT_TCP_RETRANS))
		flags |= BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG;
	if (WANT(MAGNET_BIT_TCP_RECV))
		flags |= BPF_SOCK_OPS_STATE_CB_FLAG;
	if (flags != skops->bpf_sock_ops_cb_flags)
		bpf_sock_ops_cb_flags_set(skops, flags);
	if (skops->op != BPF_SOCK_OPS_TCP_LISTEN_CB) {
		ops_flow(&f, skops);
		save_flow(&f, bpf_get_socket_cookie(skops), bpf_get_netns_cookie(skops));
	}
}

/* A traced connection leaves ESTABLISHED: its segments now reach TCP's
 * slow path only, where the header-option parsing callback sees them. */
static __always_inline void ops_state(struct bpf_sock_ops *skops)
{
	__u32 state = skops->args[1];

	if (state == BPF_TCP_ESTABLISHED || state == BPF_TCP_CLOSE || !WANT(MAGNET_BIT_TCP_RECV) ||
	    !ops_traced(skops))
		return;
	bpf_sock_ops_cb_flags_set(skops, skops->bpf_sock_ops_cb_flags |
				  BPF_SOCK_OPS_PARSE_ALL_HDR_OPT_CB_FLAG);
}

/* TCP_RECV of a segment given to a sockops callback (skb_data..skb_data_end
 * spans its TCP header), on a traced connection. */
static __always_inline void ops_recv(struct bpf_sock_ops *skops)
{
	struct bpf_sock_ops_kern *k = bpf_cast_to_kern_ctx(skops);
	struct sk_buff *skb = k->skb;
	struct bpf_sock *sk = skops->sk;
	struct magnet_record *r;
	__u32 hdr = skops->skb_data_end - skops->skb_data;

	if (!skb || !WANT(MAGNET_BIT_TCP_RECV)) {
		skip(MAGNET_PROG_SOCKOPS);
		return;
	}
	r = begin(MAGNET_BIT_TCP_RECV, MAGNET_TCP_RECV);
	if (!r)
		return;
	if (cfg.ext) {
		struct tcp_skb_cb *cb = (struct tcp_skb_cb *)skb->cb;

		fill_task(&r->ext);
		fill_addr_ops(&r->ext, skops, true);
		r->ext.valid |= MAGNET_EXT_SEGMENT;
		r->ext.seq = cb->seq;
		r->ext.ack_seq = cb->ack_seq;
		r->ext.tcp_flags = skops->skb_tcp_flags;
		if (sk)
			fill_tcp_state(&r->ext, bpf_skc_to_tcp_sock(sk));
	}
	finish(r, bpf_get_socket_cookie(skops), skops->skb_len - hdr);
}

/* Was this segment sent before: a retransmission, or TCP repeating a
 * segment that was dropped below it (a full qdisc)? It starts below the
 * highest sequence the connection has sent. Also counts the segments the TCP
 * layer has accounted for, to compare with the kernel's segs_out. */
static __always_inline bool resent(struct magnet_sock *s, __u32 seq, __u32 end, bool carries,
				   __u32 segs)
{
	bool again = s->tcp_seen && carries && (__s32)(seq - s->snd_max) < 0;

	if (!s->tcp_seen || (__s32)(end - s->snd_max) > 0)
		s->snd_max = end;
	s->tcp_seen = 1;
	s->tcp_out += segs;
	return again;
}

/* TCP_SEND or TCP_RETRANS of the segment TCP is about to transmit, from a
 * traced connection (`s`) or a traced listener's request socket (a SYN-ACK,
 * `s` NULL). The callback does not run when the segment's options fill the
 * header (e.g. an ACK with three SACK blocks): IP egress records those
 * (tcp_send_gap). */
static __always_inline void ops_send(struct bpf_sock_ops *skops, struct magnet_sock *s)
{
	struct bpf_sock_ops_kern *k = bpf_cast_to_kern_ctx(skops);
	struct sk_buff *skb = k->skb;
	struct bpf_sock *sk = skops->sk;
	struct tcp_skb_cb *cb;
	struct magnet_record *r;
	__u32 seq, bit = MAGNET_BIT_TCP_SEND, event = MAGNET_TCP_SEND;
	__u8 flags = skops->skb_tcp_flags;

	if (!skb) {
		skip(MAGNET_PROG_SOCKOPS);
		return;
	}
	cb = (struct tcp_skb_cb *)skb->cb;
	seq = cb->seq;
	if (s && resent(s, seq, cb->end_seq, skops->skb_len || (flags & (TCPHDR_SYN | TCPHDR_FIN)),
			cb->tcp_gso_segs ? cb->tcp_gso_segs : 1)) {
		bit = MAGNET_BIT_TCP_RETRANS;
		event = MAGNET_TCP_RETRANS;
	}
	if (!WANT(bit)) {
		skip(MAGNET_PROG_SOCKOPS);
		return;
	}
	r = begin(bit, event);
	if (!r)
		return;
	if (cfg.ext) {
		fill_task(&r->ext);
		fill_addr_ops(&r->ext, skops, false);
		r->ext.valid |= MAGNET_EXT_SEGMENT;
		r->ext.seq = seq;
		r->ext.tcp_flags = flags;
		fill_gso(&r->ext, cb->tcp_gso_segs, cb->tcp_gso_size);
		if (s && sk) {
			struct tcp_sock *tp = bpf_skc_to_tcp_sock(sk);

			fill_tcp_state(&r->ext, tp);
			if (tp)
				r->ext.ack_seq = tp->rcv_nxt;
		} else if (skops->state == BPF_TCP_NEW_SYN_RECV) {	/* SYN-ACK */
			struct tcp_request_sock *req = bpf_rdonly_cast(k->sk,
				bpf_core_type_id_kernel(struct tcp_request_sock));

			r->ext.seq = req->snt_isn;
			r->ext.ack_seq = req->rcv_isn + 1;
		}
	}
	finish(r, bpf_get_socket_cookie(skops), skops->skb_len);
}

/* The header-option length callback: a segment is about to be sent, or TCP
 * is sizing its segments (nothing sent: the common case, checked first). */
static __always_inline void ops_hdr_len(struct bpf_sock_ops *skops)
{
	struct magnet_flow f = {};
	struct magnet_sock *s;

	if (skops->args[0] & BPF_WRITE_HDR_TCP_CURRENT_MSS) {
		skip(MAGNET_PROG_SOCKOPS);
		return;
	}
	if (skops->state == BPF_TCP_NEW_SYN_RECV) {	/* SYN-ACK: first sight of the connection */
		if (!ops_request_traced(skops)) {
			skip(MAGNET_PROG_SOCKOPS);
			return;
		}
		ops_flow(&f, skops);
		save_flow(&f, bpf_get_socket_cookie(skops), bpf_get_netns_cookie(skops));
		ops_send(skops, NULL);
		return;
	}
	s = ops_traced(skops);
	if (!s) {
		skip(MAGNET_PROG_SOCKOPS);
		return;
	}
	ops_send(skops, s);
}

SEC("sockops")
int magnet_sockops(struct bpf_sock_ops *skops)
{
	switch (skops->op) {
	case BPF_SOCK_OPS_TCP_LISTEN_CB:
	case BPF_SOCK_OPS_TCP_CONNECT_CB:
		if (ops_verdict(skops, true) == MAGNET_TRACED)
			ops_trace(skops);
		break;
	case BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB:	/* skb: the SYN-ACK */
	case BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB:	/* skb: the handshake's last ACK */
		if (ops_verdict(skops, false) != MAGNET_TRACED)
			break;
		ops_trace(skops);
		ops_recv(skops);
		return 1;
	case BPF_SOCK_OPS_HDR_OPT_LEN_CB:
		ops_hdr_len(skops);
		return 1;
	case BPF_SOCK_OPS_PARSE_HDR_OPT_CB:
		if (skops->state == BPF_TCP_ESTABLISHED || !ops_traced(skops))
			break;			/* tcp_probe has recorded it; not ours */
		ops_recv(skops);
		return 1;
	case BPF_SOCK_OPS_STATE_CB:
		ops_state(skops);
		break;
	}
	skip(MAGNET_PROG_SOCKOPS);
	return 1;
}

/* Segments TCP receives in ESTABLISHED state (fast path included). */
SEC("tp_btf/tcp_probe")
int BPF_PROG(magnet_tcp_probe, struct sock *sk, const struct sk_buff *skb)
{
	struct tcp_skb_cb *cb = (struct tcp_skb_cb *)skb->cb;
	struct magnet_record *r;
	__u32 len;
	__u8 flags;

	if (!traced_sk(sk, false))
		return skip(MAGNET_PROG_TCP_PROBE);
	r = begin(MAGNET_BIT_TCP_RECV, MAGNET_TCP_RECV);
	if (!r)
		return 0;
	flags = cb->tcp_flags;
	len = cb->end_seq - cb->seq - !!(flags & TCPHDR_SYN) - !!(flags & TCPHDR_FIN);
	if (cfg.ext) {
		fill_task(&r->ext);
		fill_addr_sk(&r->ext, sk, true);
		r->ext.valid |= MAGNET_EXT_SEGMENT;
		r->ext.seq = cb->seq;
		r->ext.ack_seq = cb->ack_seq;
		r->ext.tcp_flags = flags;
		fill_gso_skb(&r->ext, skb);
		fill_tcp_state(&r->ext, bpf_skc_to_tcp_sock(sk));
	}
	finish(r, cookie_of(sk), len);
	return 0;
}

/* ------------------------------------------------------------ IP layer --- */

static __always_inline bool parse_packet(struct pkt *p, struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	const struct tcphdr *th;
	__u32 ip_hlen;

	if (skb->protocol == bpf_htons(ETH_P_IP)) {
		const struct iphdr *ip = data;

		if ((void *)(ip + 1) > end || ip->protocol != IPPROTO_TCP)
			return false;
		pkt_ip4(p, ip);
		ip_hlen = ip->ihl * 4;
	} else if (skb->protocol == bpf_htons(ETH_P_IPV6)) {
		const struct ipv6hdr *ip6 = data;
		const struct ipv6_opt_hdr *hop = (void *)(ip6 + 1);
		__u8 next;

		if ((void *)(hop + 1) > end)
			return false;
		next = ip6->nexthdr;
		ip_hlen = sizeof(*ip6);
		if (next == NEXTHDR_HOP) {		/* BIG TCP's jumbo option, say */
			next = hop->nexthdr;
			ip_hlen += (hop->hdrlen + 1) * 8;
		}
		if (next != IPPROTO_TCP)
			return false;
		pkt_ip6(p, ip6);
	} else {
		return false;
	}
	th = data + ip_hlen;
	if ((void *)(th + 1) > end)
		return false;
	pkt_payload(p, th, ip_hlen, skb->len);
	return true;
}

/* This capture's verdict on a full TCP socket seen by a cgroup_skb program
 * (which runs only for sockets of the traced cgroup), decided from the socket
 * alone, before the packet is parsed, if no program has decided it yet
 * (`*fresh`). Its state, or NULL if it is not traced. */
static __always_inline struct magnet_sock *traced_bpf_sock(struct bpf_sock *sk, bool *fresh)
{
	struct magnet_sock *s = bpf_sk_storage_get(&socks, sk, 0, 0);
	bool ok;

	if (s && s->verdict)
		return s->verdict == MAGNET_TRACED ? s : NULL;
	if (cfg.pid || sk->protocol != IPPROTO_TCP)
		return NULL;			/* left to a program that knows the task */
	ok = port_ok(sk->src_port, bpf_ntohs(sk->dst_port));
	s = bpf_sk_storage_get(&socks, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!s)
		return NULL;
	s->verdict = ok ? MAGNET_TRACED : MAGNET_IGNORED;
	*fresh = true;
	return ok ? s : NULL;
}

/* Remember (or forget) the flow of a socket just decided on, from one of its
 * packets. */
static __always_inline void decided_flow(struct __sk_buff *skb, const struct pkt *p, bool recv,
					 bool traced)
{
	struct magnet_flow f;

	if (recv)
		__builtin_memcpy(&f, &p->flow, sizeof(f));
	else
		reverse_flow(&f, &p->flow);
	if (traced)
		save_flow(&f, bpf_get_socket_cookie(skb), bpf_get_netns_cookie(skb));
	else
		forget_flow(&f, bpf_get_netns_cookie(skb));
}

/* Segments TCP sent without its sockops callback running (options filling
 * the header, or a connection older than the capture): the kernel's segs_out
 * has moved past what the TCP layer accounted for. Checked before the packet
 * is parsed: almost always there are none. */
static __always_inline __u32 tcp_send_gap(struct bpf_sock *sk, struct magnet_sock *s)
{
	struct bpf_tcp_sock *tp = bpf_tcp_sock(sk);

	return tp ? tp->segs_out - s->tcp_out : 0;
}

/* The TCP_SEND (or TCP_RETRANS) record of such a segment, `gap` segments;
 * 1 if it is an event (recorded or lost). */
static __always_inline int tcp_send_missed(struct __sk_buff *skb, struct bpf_sock *sk,
					    struct magnet_sock *s, const struct pkt *p, __u64 cookie,
					    __u32 gap)
{
	__u32 bit = MAGNET_BIT_TCP_SEND, event = MAGNET_TCP_SEND, syn_fin;
	struct magnet_record *r;

	syn_fin = !!(p->flags & TCPHDR_SYN) + !!(p->flags & TCPHDR_FIN);
	if (resent(s, p->seq, p->seq + p->payload + syn_fin, p->payload || syn_fin, gap)) {
		bit = MAGNET_BIT_TCP_RETRANS;
		event = MAGNET_TCP_RETRANS;
	}
	if (!WANT(bit))
		return 0;
	r = begin(bit, event);
	if (!r)
		return 1;
	if (cfg.ext) {
		fill_task(&r->ext);
		fill_pkt(&r->ext, p);
		fill_gso(&r->ext, skb->gso_segs, skb->gso_size);
		fill_tcp_state(&r->ext, bpf_skc_to_tcp_sock(sk));
	}
	finish(r, cookie, p->payload);
	return 1;
}

/* The cookie of the connection a listener's handshake packet belongs to. */
static __always_inline bool handshake_cookie(struct __sk_buff *skb, const struct pkt *p, bool recv,
					     __u64 *cookie)
{
	struct magnet_flow f;

	if (recv)
		__builtin_memcpy(&f, &p->flow, sizeof(f));
	else
		reverse_flow(&f, &p->flow);
	*cookie = flow_cookie(&f, bpf_get_netns_cookie(skb));
	return *cookie != 0;
}

static __always_inline int ip_event(struct __sk_buff *skb, bool recv)
{
	enum magnet_prog prog = recv ? MAGNET_PROG_IP_INGRESS : MAGNET_PROG_IP_EGRESS;
	__u32 bit = recv ? MAGNET_BIT_IP_RECV : MAGNET_BIT_IP_SEND;
	struct bpf_sock *sk = skb->sk, *full;
	struct magnet_cpu_stats *st;
	struct magnet_record *r;
	struct magnet_sock *s = NULL;
	struct pkt p = {};
	bool fresh = false;
	__u32 gap = 0;
	__u64 cookie;
	int events = 0;

	if (!sk)
		goto skipped;
	full = bpf_sk_fullsock(sk);
	if (full && full->state != BPF_TCP_LISTEN) {
		s = traced_bpf_sock(full, &fresh);
		if (s && !recv && WANT(MAGNET_BIT_TCP_SEND | MAGNET_BIT_TCP_RETRANS))
			gap = tcp_send_gap(full, s);
		if (!fresh && (!s || (!gap && !WANT(bit))))
			goto skipped;		/* the common early exit: not ours, or nothing to record */
		if (!parse_packet(&p, skb))
			goto skipped;
		if (fresh)
			decided_flow(skb, &p, recv, s != NULL);
		if (!s || (!gap && !WANT(bit)))
			goto skipped;
		cookie = bpf_get_socket_cookie(skb);
		if (gap)
			events = tcp_send_missed(skb, full, s, &p, cookie, gap);
	} else if (!WANT(bit) || !parse_packet(&p, skb) || !handshake_cookie(skb, &p, recv, &cookie)) {
		goto skipped;
	}
	if (!WANT(bit)) {
		if (!events)
			goto skipped;
		return 1;			/* the gap's record only */
	}
	if (events && (st = cpu_stats_here()))
		__sync_fetch_and_add(&st->extra, 1);
	r = begin(bit, recv ? MAGNET_IP_RECV : MAGNET_IP_SEND);
	if (!r)
		return 1;
	if (cfg.ext) {
		fill_task(&r->ext);
		fill_pkt(&r->ext, &p);
		fill_gso(&r->ext, skb->gso_segs, skb->gso_size);
		if (s)
			fill_tcp_state(&r->ext, bpf_skc_to_tcp_sock(full));
	}
	finish(r, cookie, p.payload);
	return 1;
skipped:
	skip(prog);
	return 1;
}

SEC("cgroup_skb/egress")
int magnet_ip_send(struct __sk_buff *skb)
{
	return ip_event(skb, false);
}

SEC("cgroup_skb/ingress")
int magnet_ip_recv(struct __sk_buff *skb)
{
	return ip_event(skb, true);
}

/* -------------------------------------------------------- device layer --- */


/* The headers of a packet a device is about to send. */
static __always_inline bool parse_sent(struct pkt *p, const struct sk_buff *skb)
{
	__u16 mac = skb->mac_header, net = skb->network_header;

	return parse_kernel_skb(p, skb, net, skb->transport_header,
				skb->len - (net - (mac != MAC_HEADER_UNSET ? mac : net)));
}

/* The cookie of the traced connection a packet leaving a device belongs
 * to: a full TCP socket (skb->sk) answers from its storage, before the packet
 * is parsed (the early exit of every packet not ours); request and timewait
 * sockets, and the kernel's control sockets sending for a closed connection,
 * by the flow map. Only devices of the connection's network namespace count
 * (not a router's). */
static __always_inline bool dev_send_cookie(const struct sk_buff *skb, struct sock *sk, bool *parsed,
					    struct pkt *p, __u64 *cookie)
{
	__u64 netns = skb->dev->nd_net.net->net_cookie;
	__u8 state = sk->__sk_common.skc_state;
	struct magnet_flow f;
	struct magnet_sock *s;

	if (state != BPF_TCP_TIME_WAIT && state != BPF_TCP_NEW_SYN_RECV && is_tcp(sk)) {
		s = bpf_sk_storage_get(&socks, sk, 0, 0);
		if (!s || s->verdict != MAGNET_TRACED || sk->__sk_common.skc_net.net->net_cookie != netns)
			return false;
		/* Deciding it traced generated its cookie (save_flow); the helper
		 * that would generate one refuses this RCU pointer. */
		*cookie = sk->__sk_common.skc_cookie.counter;
		if (*cookie)
			return true;
	}
	*parsed = true;
	if (!parse_sent(p, skb))
		return false;
	reverse_flow(&f, &p->flow);
	*cookie = flow_cookie(&f, netns);
	return *cookie != 0;
}

SEC("tp_btf/net_dev_start_xmit")
int BPF_PROG(magnet_dev_send, const struct sk_buff *skb, const struct net_device *dev)
{
	struct sock *sk = skb->sk;
	struct magnet_record *r;
	struct pkt p = {};
	__u16 mac = skb->mac_header;
	bool parsed = false;
	__u64 cookie;

	if (!sk || !dev_send_cookie(skb, sk, &parsed, &p, &cookie))
		return skip(MAGNET_PROG_DEV_SEND);
	if (!parsed && !parse_sent(&p, skb))
		return skip(MAGNET_PROG_DEV_SEND);
	/* What the device sends after the TCP header (a GSO packet's whole payload). */
	if (mac != MAC_HEADER_UNSET)
		p.payload = skb->len - (skb->transport_header - mac) - p.thlen;
	r = begin(MAGNET_BIT_DEV_SEND, MAGNET_DEV_SEND);
	if (!r)
		return 0;
	if (cfg.ext) {
		fill_task(&r->ext);
		fill_pkt(&r->ext, &p);
		fill_gso_skb(&r->ext, skb);
		if (sk->sk_protocol == IPPROTO_TCP &&
		    sk->__sk_common.skc_state != BPF_TCP_TIME_WAIT &&
		    sk->__sk_common.skc_state != BPF_TCP_NEW_SYN_RECV)
			fill_tcp_state(&r->ext, bpf_rdonly_cast(sk, bpf_core_type_id_kernel(struct tcp_sock)));
	}
	finish(r, cookie, p.payload);
	return 0;
}

/* No socket yet: the flow map (through flow_cache) says whether the packet's
 * connection, in the device's network namespace, is traced. */
SEC("tp_btf/netif_receive_skb")
int BPF_PROG(magnet_dev_recv, struct sk_buff *skb)
{
	struct magnet_record *r;
	struct pkt p = {};
	__u64 cookie;

	if (!parse_kernel_skb(&p, skb, skb->data - skb->head, 0, skb->len) ||
	    !(cookie = find_flow(&p.flow, skb->dev->nd_net.net->net_cookie)))
		return skip(MAGNET_PROG_DEV_RECV);
	r = begin(MAGNET_BIT_DEV_RECV, MAGNET_DEV_RECV);
	if (!r)
		return 0;
	if (cfg.ext) {
		fill_task(&r->ext);
		fill_pkt(&r->ext, &p);
		fill_gso_skb(&r->ext, skb);
	}
	finish(r, cookie, p.payload);
	return 0;
}

/* ----------------------------------------------------------- scheduler --- */

static __always_inline bool task_ok(struct task_struct *t)
{
	return !cfg.pid || t->tgid == cfg.pid;
}

/* A scheduler event, if the task filter lets `ok` through. */
static __always_inline int sched_event(bool ok, __u32 bit, __u32 event, __u64 sockid)
{
	struct magnet_record *r;

	if (!ok)
		return skip(MAGNET_PROG_SCHED);
	r = begin(bit, event);
	if (!r)
		return 0;
	if (cfg.ext)
		fill_task(&r->ext);
	finish(r, sockid, bpf_get_smp_processor_id());
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(magnet_sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	return sched_event(task_ok(prev) || task_ok(next), MAGNET_BIT_SCHED_SWITCH,
			   MAGNET_SCHED_SWITCH, (__u64)prev->pid << 32 | (__u32)next->pid);
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(magnet_sched_fork, struct task_struct *parent, struct task_struct *child)
{
	return sched_event(task_ok(parent), MAGNET_BIT_SCHED_FORK, MAGNET_SCHED_FORK,
			   (__u64)parent->pid << 32 | (__u32)child->pid);
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(magnet_sched_exit, struct task_struct *p)
{
	return sched_event(task_ok(p), MAGNET_BIT_SCHED_EXIT, MAGNET_SCHED_EXIT, p->pid);
}

/* A CPU enters the scheduler (current: the task leaving the CPU)... */
SEC("tp_btf/sched_entry_tp")
int BPF_PROG(magnet_sched_enter, bool preempt)
{
	struct task_struct *t = bpf_get_current_task_btf();

	return sched_event(task_ok(t), MAGNET_BIT_SCHED_ENTER, MAGNET_SCHED_ENTER, t->pid);
}

/* ... and leaves it (current: the task now running). */
SEC("tp_btf/sched_exit_tp")
int BPF_PROG(magnet_sched_leave, bool is_switch)
{
	struct task_struct *t = bpf_get_current_task_btf();

	return sched_event(task_ok(t), MAGNET_BIT_SCHED_LEAVE, MAGNET_SCHED_LEAVE, t->pid);
}
