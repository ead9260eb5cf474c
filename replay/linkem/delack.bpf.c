/* A sockops program that caps the delayed-ACK timer of every TCP connection
 * of a cgroup: bpf_setsockopt(TCP_BPF_DELACK_MAX) as each connection is
 * established (Linux has no socket option or sysctl for it). Counts how many
 * connections took the cap and how many refused it. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define SOL_TCP 6

const volatile __u32 delack_max_us = 200000;
__u64 applied = 0;
__u64 refused = 0;

SEC("sockops")
int cap_delack(struct bpf_sock_ops *ops)
{
	int value = delack_max_us;

	if (ops->op != BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB &&
	    ops->op != BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB)
		return 1;
	if (bpf_setsockopt(ops, SOL_TCP, TCP_BPF_DELACK_MAX, &value, sizeof(value)))
		__sync_fetch_and_add(&refused, 1);
	else
		__sync_fetch_and_add(&applied, 1);
	return 1;
}

char LICENSE[] SEC("license") = "GPL";
