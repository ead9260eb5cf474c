// SPDX-License-Identifier: GPL-2.0-or-later
/* tcp.bpf.c: the TCP layer.
 *
 *   TCP_RECV   tp_btf tcp_probe (ESTABLISHED), sockops callbacks (other states)
 *   TCP_SEND   of a SYN-ACK: the sockops header-option callback of a listener
 *              (every other segment's TCP_SEND/RETRANS: IP egress, ip.bpf.c)
 *
 * sockops also decides the verdict on new connections and remembers their
 * flows (DEV_RECV finds them by flow). */
#include "magnet.bpf.h"

/* Listeners this capture traces, by socket cookie (see ops_request_traced). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, MAGNET_LISTENERS);
	__type(key, __u64);
	__type(value, bool);
} listeners SEC(".maps");

static __always_inline void fill_addr_ops(struct magnet_ext *e, struct bpf_sock_ops *skops, bool recv)
{
	/* Both families' fields read unconditionally (see ops_flow). */
	__u32 local[4] = { skops->local_ip6[0], skops->local_ip6[1], skops->local_ip6[2],
			   skops->local_ip6[3] };
	__u32 remote[4] = { skops->remote_ip6[0], skops->remote_ip6[1], skops->remote_ip6[2],
			    skops->remote_ip6[3] };

	fill_ends(e, skops->family == AF_INET6, local, remote, skops->local_ip4, skops->remote_ip4,
		  skops->local_port, bpf_ntohl(skops->remote_port), recv);
}

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
	struct bpf_sock_ops_kern *k = kern_ctx(skops);
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

/* The callbacks the recorded events need: a listener's header-option writing,
 * for its SYN-ACKs (TCP_SEND of every other segment is IP egress's); for
 * TCP_RECV, state changes, then header-option parsing once the connection
 * leaves ESTABLISHED (there tcp_probe records every segment, the fast path
 * included, and parsing would only add a run per slow-path segment). */
static __always_inline void ops_trace(struct bpf_sock_ops *skops)
{
	struct magnet_flow f = {};
	int flags = skops->bpf_sock_ops_cb_flags;

	if (WANT(MAGNET_BIT_TCP_SEND) && skops->op == BPF_SOCK_OPS_TCP_LISTEN_CB)
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
 * spans its TCP header), on a traced connection. Like tcp_probe's, it may be
 * several segments merged in the socket backlog (a pure ACK and the FIN
 * after it, say): gso_segs says how many, as the kernel's segs_in counts. */
static __always_inline void ops_recv(struct bpf_sock_ops *skops)
{
	struct bpf_sock_ops_kern *k = kern_ctx(skops);
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
		fill_gso_skb(&r->ext, skb);
		if (sk)
			fill_tcp_state(&r->ext, bpf_skc_to_tcp_sock(sk));
	}
	finish(r, bpf_get_socket_cookie(skops), skops->skb_len - hdr);
}

/* TCP_SEND of a SYN-ACK, sent by the request socket of a traced listener
 * (the only header-option callback this capture asks for). Its cookie
 * becomes the connection's; the flow is remembered for the packets of the
 * handshake at the other layers. */
static __always_inline void ops_synack(struct bpf_sock_ops *skops)
{
	struct bpf_sock_ops_kern *k = kern_ctx(skops);
	struct magnet_flow f = {};
	struct magnet_record *r;

	if (!k->skb || !ops_request_traced(skops)) {
		skip(MAGNET_PROG_SOCKOPS);
		return;
	}
	ops_flow(&f, skops);
	save_flow(&f, bpf_get_socket_cookie(skops), bpf_get_netns_cookie(skops));
	r = begin(MAGNET_BIT_TCP_SEND, MAGNET_TCP_SEND);
	if (!r)
		return;
	if (cfg.ext) {
		struct tcp_skb_cb *cb = (struct tcp_skb_cb *)k->skb->cb;
		struct tcp_request_sock *req = rdonly_cast(k->sk,
			bpf_core_type_id_kernel(struct tcp_request_sock));

		fill_task(&r->ext);
		fill_addr_ops(&r->ext, skops, false);
		r->ext.valid |= MAGNET_EXT_SEGMENT;
		r->ext.seq = req->snt_isn;
		r->ext.ack_seq = req->rcv_isn + 1;
		r->ext.tcp_flags = skops->skb_tcp_flags;
		fill_gso(&r->ext, cb->tcp_gso_segs, cb->tcp_gso_size);
	}
	finish(r, bpf_get_socket_cookie(skops), skops->skb_len);
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
	case BPF_SOCK_OPS_HDR_OPT_LEN_CB:		/* a segment is about to be sent */
		if (skops->state != BPF_TCP_NEW_SYN_RECV || !WANT(MAGNET_BIT_TCP_SEND) ||
		    (skops->args[0] & BPF_WRITE_HDR_TCP_CURRENT_MSS))
			break;			/* not a SYN-ACK: another capture's or program's */
		ops_synack(skops);
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
