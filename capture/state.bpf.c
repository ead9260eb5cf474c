// SPDX-License-Identifier: GPL-2.0-or-later
/* state.bpf.c: what the programs of every layer share (declared in
 * magnet.bpf.h), defined once: the maps and settings, the packet parser,
 * and the kfuncs. */
#include "magnet.bpf.h"

char LICENSE[] SEC("license") = "GPL";

struct records_map records SEC(".maps");
struct cpu_stats_map cpu_stats SEC(".maps");
struct socks_map socks SEC(".maps");
struct flows_map flows SEC(".maps");

const volatile struct magnet_config cfg = {};
__u64 flows_gen = 1;
__u64 traced_ports[65536 / 64];

extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym;
extern void *bpf_cast_to_kern_ctx(void *obj) __ksym;

/* The one parser: the TCP/IP headers of a kernel skb whose network header
 * is at head + `net` (its transport header right after the IP header).
 * `net_len` is the packet's length from the network header on, for headers
 * that say 0 (BIG TCP packets longer than 64 KiB). false if not TCP. An IPv6
 * hop-by-hop header before TCP is skipped; other extension headers are not. */
static __always_inline bool parse_headers(struct pkt *p, const struct sk_buff *skb, __u16 net, __u32 net_len)
{
	const unsigned char *head = skb->head;
	const struct tcphdr *th;
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
		if (next == NEXTHDR_HOP) {		/* BIG TCP's jumbo option, say */
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
	th = bpf_rdonly_cast(head + net + ip_hlen, bpf_core_type_id_kernel(struct tcphdr));
	pkt_tcp(p, th);
	p->thlen = th->doff * 4;
	if (!p->ip_len)
		p->ip_len = net_len;
	p->payload = p->ip_len - ip_hlen - p->thlen;
	return true;
}

__hidden __noinline bool parse_skb(struct pkt *p, const struct sk_buff *skb, __u16 net, __u32 net_len)
{
	return parse_headers(p, skb, net, net_len);
}

/* A cgroup_skb program's packet: its data starts at the network header. */
__hidden __noinline bool parse_ctx(struct pkt *p, struct __sk_buff *ctx)
{
	const struct sk_buff *k = bpf_cast_to_kern_ctx(ctx);

	return parse_headers(p, k, k->network_header, ctx->len);
}

__hidden __noinline void *rdonly_cast(const void *obj, __u32 btf_id)
{
	return bpf_rdonly_cast(obj, btf_id);
}

__hidden __noinline void *kern_ctx(void *ctx)
{
	return bpf_cast_to_kern_ctx(ctx);
}
