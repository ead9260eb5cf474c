// SPDX-License-Identifier: GPL-2.0-or-later
/* sock.bpf.c: the socket layer. SOCK_SEND and SOCK_RECV when an
 * application's send or receive call returns (the kernel's tracepoints are
 * at the return): size = what the call returned, an error as -errno. */
#include "magnet.bpf.h"

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
