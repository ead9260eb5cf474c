// SPDX-License-Identifier: GPL-2.0-or-later
/* sched.bpf.c: the scheduler, for the time an application waits for a CPU
 * (SCHED_SWITCH, SCHED_FORK, SCHED_EXIT, SCHED_ENTER, SCHED_LEAVE: see
 * docs/trace-format.md). */
#include "magnet.bpf.h"

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
