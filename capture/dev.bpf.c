// SPDX-License-Identifier: GPL-2.0-or-later
/* dev.bpf.c: the device layer.
 *
 *   DEV_SEND   tp_btf net_dev_start_xmit: the driver gets the packet
 *   DEV_RECV   tp_btf netif_receive_skb: the stack takes it from the driver
 *              (no socket yet: the connection is found by its flow)
 *
 * Only devices of the connection's network namespace count (not a router's). */
#include "magnet.bpf.h"

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

/* The record of a device event of packet `p` (its skb), or NULL (lost). */
static __always_inline struct magnet_record *dev_record(__u32 bit, __u32 event, const struct pkt *p,
							const struct sk_buff *skb)
{
	struct magnet_record *r = begin(bit, event);

	if (r && cfg.ext) {
		fill_task(&r->ext);
		fill_pkt(&r->ext, p);
		fill_gso_skb(&r->ext, skb);
	}
	return r;
}

/* The headers of a packet a device is about to send. */
static __always_inline bool parse_sent(struct pkt *p, const struct sk_buff *skb)
{
	__u16 mac = skb->mac_header, net = skb->network_header;

	return parse_skb(p, skb, net, skb->len - (net - (mac != MAC_HEADER_UNSET ? mac : net)));
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
	r = dev_record(MAGNET_BIT_DEV_SEND, MAGNET_DEV_SEND, &p, skb);
	if (!r)
		return 0;
	if (cfg.ext && sk->sk_protocol == IPPROTO_TCP &&
	    sk->__sk_common.skc_state != BPF_TCP_TIME_WAIT &&
	    sk->__sk_common.skc_state != BPF_TCP_NEW_SYN_RECV)
		fill_tcp_state(&r->ext, rdonly_cast(sk, bpf_core_type_id_kernel(struct tcp_sock)));
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

	if (!parse_skb(&p, skb, skb->data - skb->head, skb->len) ||
	    !(cookie = find_flow(&p.flow, skb->dev->nd_net.net->net_cookie)))
		return skip(MAGNET_PROG_DEV_RECV);
	r = dev_record(MAGNET_BIT_DEV_RECV, MAGNET_DEV_RECV, &p, skb);
	if (r)
		finish(r, cookie, p.payload);
	return 0;
}
