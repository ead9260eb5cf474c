/* A sockops program that sets socket options on every TCP connection of a cgroup
 * as it is established (bpf_setsockopt), for what Linux sets only per socket:
 * the delayed-ACK cap (TCP_BPF_DELACK_MAX: no socket option or sysctl has it), the
 * congestion control (TCP_CONGESTION: a network namespace may only default to
 * the machine's allowed ones) and TCP_NODELAY (Nagle off). Each is set only when
 * asked (a zero or empty value: left alone). Counts the connections that took
 * every option asked and those that refused one. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#define SOL_TCP 6
#define TCP_NODELAY 1
#define TCP_CONGESTION 13
#define CC_NAME_MAX 16

const volatile __u32 delack_max_us = 0;
const volatile char cc[CC_NAME_MAX] = "";
const volatile __u32 nodelay = 0;
__u64 applied = 0;
__u64 refused = 0;

SEC("sockops")
int set_options(struct bpf_sock_ops *ops)
{
	int failed = 0, value;
	char name[CC_NAME_MAX];

	if (ops->op != BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB &&
	    ops->op != BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB)
		return 1;
	if (delack_max_us) {
		value = delack_max_us;
		failed |= bpf_setsockopt(ops, SOL_TCP, TCP_BPF_DELACK_MAX, &value, sizeof(value));
	}
	if (cc[0]) {
		/* Read through the volatile: a plain copy would fold to the "" it was built with. */
		for (int i = 0; i < CC_NAME_MAX; i++)
			name[i] = cc[i];
		failed |= bpf_setsockopt(ops, SOL_TCP, TCP_CONGESTION, name, sizeof(name));
	}
	if (nodelay) {
		value = 1;
		failed |= bpf_setsockopt(ops, SOL_TCP, TCP_NODELAY, &value, sizeof(value));
	}
	if (failed)
		__sync_fetch_and_add(&refused, 1);
	else
		__sync_fetch_and_add(&applied, 1);
	return 1;
}

char LICENSE[] SEC("license") = "GPL";
