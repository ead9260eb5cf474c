// SPDX-License-Identifier: GPL-2.0-or-later
/* state.bpf.c: the maps and settings the programs of every layer share
 * (declared in magnet.bpf.h), defined once. */
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

__hidden __noinline void *rdonly_cast(const void *obj, __u32 btf_id)
{
	return bpf_rdonly_cast(obj, btf_id);
}

__hidden __noinline void *kern_ctx(void *ctx)
{
	return bpf_cast_to_kern_ctx(ctx);
}
