// SPDX-License-Identifier: GPL-2.0-or-later
/* ip.bpf.c: the IP layer, and the TCP layer's sending side.
 *
 *   IP_SEND           cgroup_skb egress: IP hands a packet to the device layer
 *   IP_RECV           cgroup_skb ingress: IP delivers a packet to the socket
 *   TCP_SEND/RETRANS  the same egress run, at the same time: TCP's transmit
 *                     calls IP output with no queue between them
 *
 * One run per packet sent records both layers (a sockops callback per segment
 * and one more per MSS sizing did the TCP layer's before). */
#include "magnet.bpf.h"

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

	flow_of_pkt(&f, p, recv);
	if (traced)
		save_flow(&f, bpf_get_socket_cookie(skb), bpf_get_netns_cookie(skb));
	else
		forget_flow(&f, bpf_get_netns_cookie(skb));
}

/* Was this segment sent before: a retransmission, or TCP repeating a
 * segment that was dropped below it (a full qdisc)? It starts below the
 * highest sequence the connection has sent. */
static __always_inline bool resent(struct magnet_sock *s, __u32 seq, __u32 end, bool carries)
{
	bool again = s->tcp_seen && carries && (__s32)(seq - s->snd_max) < 0;

	if (!s->tcp_seen || (__s32)(end - s->snd_max) > 0)
		s->snd_max = end;
	s->tcp_seen = 1;
	return again;
}

/* The TCP_SEND (or TCP_RETRANS) record of a segment leaving a traced
 * connection; 1 if it is an event (recorded or lost). */
static __always_inline int tcp_sent(struct __sk_buff *skb, struct bpf_sock *sk, struct magnet_sock *s,
				    const struct pkt *p, __u64 cookie, __u64 now)
{
	__u32 bit = MAGNET_BIT_TCP_SEND, event = MAGNET_TCP_SEND, syn_fin;
	struct magnet_record *r;

	syn_fin = !!(p->flags & TCPHDR_SYN) + !!(p->flags & TCPHDR_FIN);
	if (resent(s, p->seq, p->seq + p->payload + syn_fin, p->payload || syn_fin)) {
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
		fill_segment(&r->ext, p);
		fill_gso(&r->ext, skb->gso_segs, skb->gso_size);
		fill_tcp_state(&r->ext, bpf_skc_to_tcp_sock(sk));
	}
	finish_at(r, cookie, p->payload, now);
	return 1;
}

/* The cookie of the connection a listener's handshake packet belongs to. */
static __always_inline bool handshake_cookie(struct __sk_buff *skb, const struct pkt *p, bool recv,
					     __u64 *cookie)
{
	struct magnet_flow f;

	flow_of_pkt(&f, p, recv);
	*cookie = flow_cookie(&f, bpf_get_netns_cookie(skb));
	return *cookie != 0;
}

#define TCP_SENDS (MAGNET_BIT_TCP_SEND | MAGNET_BIT_TCP_RETRANS)

static __always_inline int ip_event(struct __sk_buff *skb, bool recv)
{
	enum magnet_prog prog = recv ? MAGNET_PROG_IP_INGRESS : MAGNET_PROG_IP_EGRESS;
	__u32 bit = recv ? MAGNET_BIT_IP_RECV : MAGNET_BIT_IP_SEND;
	bool tcp = !recv && WANT(TCP_SENDS), fresh = false;
	struct bpf_sock *sk = skb->sk, *full;
	struct magnet_cpu_stats *st;
	struct magnet_record *r;
	struct magnet_sock *s = NULL;
	struct pkt p = {};
	__u64 cookie, now;
	int events = 0;

	if (!sk)
		goto skipped;
	full = bpf_sk_fullsock(sk);
	if (full && full->state != BPF_TCP_LISTEN) {
		s = traced_bpf_sock(full, &fresh);
		if (!fresh && (!s || (!tcp && !WANT(bit))))
			goto skipped;		/* the common early exit: not ours, or nothing to record */
		if (!parse_ctx(&p, skb))
			goto skipped;
		if (fresh)
			decided_flow(skb, &p, recv, s != NULL);
		if (!s || (!tcp && !WANT(bit)))
			goto skipped;
		cookie = bpf_get_socket_cookie(skb);
		now = bpf_ktime_get_ns();
		if (tcp)
			events = tcp_sent(skb, full, s, &p, cookie, now);
	} else if (!WANT(bit) || !parse_ctx(&p, skb) || !handshake_cookie(skb, &p, recv, &cookie)) {
		goto skipped;		/* a listener's: the handshake, whose TCP_SEND sockops records */
	} else {
		now = bpf_ktime_get_ns();
	}
	if (!WANT(bit)) {
		if (!events)
			goto skipped;
		return 1;			/* the TCP layer's record only */
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
	finish_at(r, cookie, p.payload, now);
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
