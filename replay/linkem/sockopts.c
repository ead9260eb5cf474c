/* linkem-sockopts: set socket options on the TCP connections of a cgroup.
 *
 *   linkem-sockopts CGROUP-PATH [--delack-max-us N] [--cc NAME] [--nodelay]
 *
 * Loads sockopts.bpf.c with the options asked, attaches it to the cgroup through
 * a BPF link (so it is detached when this process ends, however it ends), prints
 * "ready", and waits for SIGTERM, SIGINT, SIGHUP or its parent's death; then
 * prints {"applied": N, "refused": M}: connections that took every option, and
 * those that refused one. Exit status 2: bad arguments, or the program cannot be
 * loaded or attached. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "sockopts.skel.h"

static int quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	return 0;
}

static int usage(void)
{
	fprintf(stderr, "usage: linkem-sockopts CGROUP-PATH [--delack-max-us N] [--cc NAME] [--nodelay]\n");
	return 2;
}

/* The options into the program's read-only data; 0 when they are fine. */
static int options(int argc, char **argv, struct sockopts_bpf *skel)
{
	static const struct option longs[] = {
		{"delack-max-us", 1, 0, 'd'}, {"cc", 1, 0, 'c'}, {"nodelay", 0, 0, 'n'}, {0, 0, 0, 0}};
	int opt;
	char *end;
	long us;

	while ((opt = getopt_long(argc, argv, "", longs, NULL)) != -1) {
		switch (opt) {
		case 'd':
			us = strtol(optarg, &end, 10);
			if (*end || us <= 0)
				return fprintf(stderr, "linkem-sockopts: --delack-max-us %s: a positive "
					       "number of microseconds\n", optarg), 2;
			skel->rodata->delack_max_us = (__u32)us;
			break;
		case 'c':
			if (!*optarg || strlen(optarg) >= sizeof(skel->rodata->cc))
				return fprintf(stderr, "linkem-sockopts: --cc %s: a congestion control's "
					       "name\n", optarg), 2;
			strcpy((char *)skel->rodata->cc, optarg);
			break;
		case 'n':
			skel->rodata->nodelay = 1;
			break;
		default:
			return usage();
		}
	}
	return optind == argc - 1 ? 0 : usage();
}

int main(int argc, char **argv)
{
	struct sockopts_bpf *skel;
	struct bpf_link *link;
	sigset_t sigs;
	int cg, sig, bad;

	prctl(PR_SET_PDEATHSIG, SIGTERM);
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	if (getppid() == 1)
		return 0;
	libbpf_set_print(quiet);
	skel = sockopts_bpf__open();
	if (!skel)
		return fprintf(stderr, "linkem-sockopts: cannot open the BPF program: %s\n", strerror(errno)), 2;
	bad = options(argc, argv, skel);
	if (bad)
		return bad;
	cg = open(argv[optind], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (cg < 0)
		return fprintf(stderr, "linkem-sockopts: %s: %s\n", argv[optind], strerror(errno)), 2;
	if (sockopts_bpf__load(skel))
		return fprintf(stderr, "linkem-sockopts: the kernel refused the sockops program: %s\n",
			       strerror(errno)), 2;
	link = bpf_program__attach_cgroup(skel->progs.set_options, cg);
	if (!link)
		return fprintf(stderr, "linkem-sockopts: cannot attach to %s: %s\n", argv[optind],
			       strerror(errno)), 2;
	printf("ready\n");
	fflush(stdout);
	sigwait(&sigs, &sig);
	printf("{\"applied\": %llu, \"refused\": %llu}\n", (unsigned long long)skel->bss->applied,
	       (unsigned long long)skel->bss->refused);
	bpf_link__destroy(link);
	sockopts_bpf__destroy(skel);
	return 0;
}
