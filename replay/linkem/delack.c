/* linkem-delack: cap the delayed-ACK timer of the TCP connections of a cgroup.
 *
 *   linkem-delack CGROUP-PATH DELACK-MAX-US
 *
 * Loads delack.bpf.c, attaches it to the cgroup through a BPF link (so it is
 * detached when this process ends, however it ends), prints "ready", and
 * waits for SIGTERM, SIGINT, SIGHUP or its parent's death; then prints
 * {"applied": N, "refused": M}: connections that took the cap, and refused it.
 * Exit status 2: bad arguments, or the program cannot be loaded or attached. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "delack.skel.h"

static int quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	return 0;
}

int main(int argc, char **argv)
{
	struct delack_bpf *skel;
	struct bpf_link *link;
	sigset_t sigs;
	char *end;
	long us;
	int cg, sig;

	if (argc != 3)
		return fprintf(stderr, "usage: linkem-delack CGROUP-PATH DELACK-MAX-US\n"), 2;
	us = strtol(argv[2], &end, 10);
	if (*end || us <= 0)
		return fprintf(stderr, "linkem-delack: %s: a positive number of microseconds\n", argv[2]), 2;
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	if (getppid() == 1)
		return 0;
	libbpf_set_print(quiet);
	cg = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (cg < 0)
		return fprintf(stderr, "linkem-delack: %s: %s\n", argv[1], strerror(errno)), 2;
	skel = delack_bpf__open();
	if (!skel)
		return fprintf(stderr, "linkem-delack: cannot open the BPF program: %s\n", strerror(errno)), 2;
	skel->rodata->delack_max_us = (__u32)us;
	if (delack_bpf__load(skel))
		return fprintf(stderr, "linkem-delack: the kernel refused the sockops program: %s\n",
			       strerror(errno)), 2;
	link = bpf_program__attach_cgroup(skel->progs.cap_delack, cg);
	if (!link)
		return fprintf(stderr, "linkem-delack: cannot attach to %s: %s\n", argv[1], strerror(errno)), 2;
	printf("ready\n");
	fflush(stdout);
	sigwait(&sigs, &sig);
	printf("{\"applied\": %llu, \"refused\": %llu}\n", (unsigned long long)skel->bss->applied,
	       (unsigned long long)skel->bss->refused);
	bpf_link__destroy(link);
	delack_bpf__destroy(skel);
	return 0;
}
