// SPDX-License-Identifier: GPL-2.0-or-later
/* libmagnet-preload.so: the socket layer of the capture without root.
 *
 * Preloaded into a program (LD_PRELOAD, by `magnet capture --preload`), it
 * interposes libc's socket data calls and records each one on a TCP socket
 * as the BPF capture's sock_send_length / sock_recv_length tracepoints do:
 * a SOCK_SEND or SOCK_RECV record stamped when the call returns, sockid =
 * the socket cookie (getsockopt SO_COOKIE, the BPF capture's id), size =
 * what the call returned (-errno on failure, 0 for EOF). No payload is read.
 * Optionally (MAGNET_PRELOAD_EXT) each record is an extended one with the
 * socket's TCP_INFO, taken after the call (three more system calls).
 *
 * Hot path: the real call, one load from a per-fd cache (socket cookie, or
 * "not a traced socket"), then for traced sockets a clock read and a
 * 24-byte store into the calling thread's chunk of the process's spool file
 * (preload.h), mapped shared: no lock, no system call, and the records
 * survive SIGKILL, exec and _exit. A chunk's last slot is kept for a LOST
 * record, so records that cannot be stored are counted in the file.
 * Everything a non-socket fd costs is inlined into the wrapper: the cache
 * lines it touches right after a system call are what it costs. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/sockios.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sched.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include "preload.h"

#define EXPORT __attribute__((visibility("default")))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define barrier() __asm__ __volatile__("" ::: "memory")

#define FD_SLOTS (1u << 20)		/* fds the cache covers; higher ones are classified each call */
#define FD_UNKNOWN 0ull			/* cache entry: not classified yet */
#define FD_IGNORED (~0ull)		/* cache entry: not a socket we record */
#define FD_ACTIVE_OPEN (1ull << 62)	/* flag of a cache entry: opened by connect() here (cookies are
					 * counters, far below it; synthetic ids use bit 63) */
#define RETRY_NS 100000000ull		/* a failed chunk allocation is retried after 100 ms */
#define HIGH_FD 900			/* the spool fd is moved up here, out of the program's way */
#define SPARE_CHUNKS 64			/* chunks of ended threads kept for new ones */

/* ------------------------------------------------------- the real calls --- */

/* Every interposed function: its real version, found with dlsym(RTLD_NEXT)
 * when first needed (other libraries' constructors may call before ours). */
#define INTERPOSED(X) X(send) X(sendto) X(sendmsg) X(sendmmsg) X(write) X(writev) \
	X(sendfile) X(sendfile64) X(splice) X(recv) X(recvfrom) X(recvmsg) X(recvmmsg) \
	X(read) X(readv) X(__read_chk) X(__recv_chk) X(__recvfrom_chk) X(close) \
	X(close_range) X(closefrom) X(fclose) X(dup2) X(dup3) X(socket) X(connect) \
	X(accept) X(accept4)

ssize_t __read_chk(int fd, void *buf, size_t nbytes, size_t buflen);
ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen, int flags);
ssize_t __recvfrom_chk(int fd, void *buf, size_t len, size_t buflen, int flags,
		       __SOCKADDR_ARG addr, socklen_t *addrlen);

#define DECLARE_REAL(f)							\
	static __typeof__(f) *real_##f;					\
	static inline __typeof__(f) *get_real_##f(void)			\
	{								\
		if (unlikely(!real_##f))				\
			real_##f = (__typeof__(f) *)dlsym(RTLD_NEXT, #f); \
		return real_##f;					\
	}
INTERPOSED(DECLARE_REAL)

#define REAL(f) get_real_##f()

/* ------------------------------------------------------------- process --- */

static struct {
	bool enabled;			/* $MAGNET_PRELOAD_DIR was set */
	bool all_sockets;		/* record every socket, not only TCP */
	bool ext;			/* extended records with a TCP_INFO snapshot */
	__u32 record_size;		/* MAGNET_CORE_SIZE, or MAGNET_EXT_RECORD_SIZE with ext */
	__u16 ports[PRELOAD_MAX_PORTS];	/* only sockets with one of these local or remote ports */
	int nports;			/* ... 0: any */
	__u32 pid;			/* getpid(), for the snapshot */
	__u64 *fds;			/* the per-fd cache */
	int max_fd;			/* highest fd the cache ever held */
	pthread_key_t thread_key;	/* its destructor unmaps an exiting thread's chunk */
	pthread_mutex_t lock;		/* chunk allocation (not the hot path) */
	char dir[PATH_MAX - 64];
	char path[PATH_MAX];		/* this process's spool file */
	int fd;				/* ... open, or -1 */
	dev_t dev;			/* ... which it must still be: the program may close or reuse it */
	ino_t ino;
	off_t end;			/* bytes of chunks allocated */
	struct spare {			/* the rest of an ended thread's chunk, for the next thread */
		struct preload_chunk *chunk;
		__u32 n;		/* its slots in use */
	} spare[SPARE_CHUNKS];
	int spares;
	__u64 synthetic_id;		/* ids for sockets without a cookie (kernels before 4.12) */
} proc = { .fd = -1, .lock = PTHREAD_MUTEX_INITIALIZER };

static __u64 now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);	/* the BPF capture's clock (bpf_ktime_get_ns) */
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static int real_close_fd(int fd)
{
	return syscall(SYS_close, fd);
}

/* Create this process's spool file, named by pid and start time (an exec
 * keeps the pid and starts a new file). */
static void open_spool(void)
{
	struct stat st;
	int fd, high;

	snprintf(proc.path, sizeof(proc.path), "%s/%d-%llu" PRELOAD_SUFFIX, proc.dir, getpid(),
		 (unsigned long long)now_ns());
	proc.end = 0;
	proc.fd = -1;
	fd = open(proc.path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	high = fcntl(fd, F_DUPFD_CLOEXEC, HIGH_FD);
	if (high >= 0) {
		real_close_fd(fd);
		fd = high;
	}
	if (fstat(fd, &st)) {
		real_close_fd(fd);
		return;
	}
	proc.fd = fd;
	proc.dev = st.st_dev;
	proc.ino = st.st_ino;
}

/* The spool fd, if it is still ours; reopened by name if the program closed
 * it or put something else on its number (opened before a chroot or a
 * change of user, the first fd is the one that keeps working). */
static int spool_fd(void)
{
	struct stat st;
	int fd;

	if (proc.fd >= 0 && !fstat(proc.fd, &st) && st.st_dev == proc.dev && st.st_ino == proc.ino)
		return proc.fd;
	fd = open(proc.path, O_RDWR | O_CLOEXEC);
	if (fd >= 0 && (fstat(fd, &st) || st.st_dev != proc.dev || st.st_ino != proc.ino)) {
		real_close_fd(fd);
		fd = -1;
	}
	proc.fd = fd;
	return fd;
}

/* Give the file `bytes` more at `off` so that stores into the mapping never
 * meet a full disk (that would be SIGBUS in the program). */
static int reserve(int fd, off_t off, size_t bytes)
{
	static const char zeros[4096];

	if (!fallocate(fd, 0, off, bytes))
		return 0;
	if (errno != EOPNOTSUPP && errno != ENOSYS)
		return -1;
	for (size_t done = 0; done < bytes; done += sizeof(zeros))
		if (pwrite(fd, zeros, sizeof(zeros), off + done) != (ssize_t)sizeof(zeros))
			return -1;
	return 0;
}

static struct preload_chunk *map_chunk(__u32 bytes)
{
	void *p = NULL;
	int fd;

	pthread_mutex_lock(&proc.lock);
	fd = spool_fd();
	if (fd >= 0 && !reserve(fd, proc.end, bytes)) {
		p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, proc.end);
		if (p == MAP_FAILED)
			p = NULL;
		else
			proc.end += bytes;
	}
	pthread_mutex_unlock(&proc.lock);
	return p;
}

/* -------------------------------------------------------------- threads --- */

struct thread_state {
	struct preload_chunk *chunk;	/* this thread's chunk of the spool file, mapped */
	char *slots;			/* its record slots, proc.record_size bytes each */
	__u32 n;			/* slots claimed (claim_slot: its signal handlers claim too) */
	__u32 limit;			/* records go below it; the slot at `limit` is kept for LOST */
	__u32 next_bytes;		/* size of the next chunk */
	__u32 depth;			/* calls being recorded: more than 1 in a signal handler that
					 * interrupted one, which must not change chunks */
	__u64 lost;			/* records not stored and not yet in a LOST record (atomic) */
	__u64 retry_at;			/* no chunk allocation before this time */
	struct magnet_core *lost_rec;	/* the LOST record in the kept slot, still counting */
	bool keyed;			/* the thread-exit destructor is armed */
};

static __thread struct thread_state self __attribute__((tls_model("initial-exec")));

static inline struct magnet_core *slot_at(const struct thread_state *t, __u32 i)
{
	return (struct magnet_core *)(t->slots + (size_t)i * proc.record_size);
}

/* A compare-and-swap on a counter of the calling thread. Only the thread's
 * own signal handlers can change it meanwhile, and they run between two
 * instructions, so one instruction is enough: on x86 without the lock
 * prefix, which only orders it against other CPUs (and costs ~20 cycles). */
static inline bool cas_local(__u32 *p, __u32 *expected, __u32 desired)
{
#if defined(__x86_64__) || defined(__i386__)
	bool ok;

	__asm__ __volatile__("cmpxchgl %3, %1" : "=@ccz"(ok), "+m"(*p), "+a"(*expected)
			     : "r"(desired) : "memory");
	return ok;
#else
	return __atomic_compare_exchange_n(p, expected, desired, false, __ATOMIC_RELAXED,
					   __ATOMIC_RELAXED);
#endif
}

/* The next free slot below the limit, claimed so that a signal handler
 * recording meanwhile takes another one; false when the chunk is full. */
static inline bool claim_slot(struct thread_state *t, __u32 *slot)
{
	__u32 i = __atomic_load_n(&t->n, __ATOMIC_RELAXED);

	do {
		if (i >= t->limit)
			return false;
	} while (!cas_local(&t->n, &i, i + 1));
	*slot = i;
	return true;
}

/* Fill slot `i`; `ext`, when not NULL, is its extended block. The event,
 * stored last, makes it a record (it held PRELOAD_PENDING while the call was
 * under way, see begin_call). */
static void put(struct thread_state *t, __u32 i, __u64 id, __u64 now, __u32 event, __s32 size,
		const struct magnet_ext *ext)
{
	struct magnet_core *r = slot_at(t, i);

	__builtin_prefetch((char *)r + 96, 1);	/* a line ahead: a fresh page-cache line costs a miss */
	if (ext)
		((struct magnet_record *)r)->ext = *ext;
	r->sockid = id;
	r->size = size;
	barrier();
	r->timestamp = now;
	barrier();
	r->event = event;
}

static void drop_chunk(struct thread_state *t)
{
	t->limit = 0;			/* first: the hot path and signal handlers must not use */
	t->lost_rec = NULL;		/* the old chunk any more */
	barrier();
	if (t->chunk)
		munmap(t->chunk, t->chunk->bytes);
	t->chunk = NULL;
	t->slots = NULL;
	t->n = 0;
}

static __u32 limit_of(const struct preload_chunk *c)
{
	return (c->bytes - MAGNET_CORE_SIZE) / proc.record_size - 1;	/* after the header; the kept slot */
}

static void use_chunk(struct thread_state *t, struct preload_chunk *c, __u32 n)
{
	drop_chunk(t);
	t->chunk = c;
	t->slots = (char *)(c + 1);
	t->n = n;
	t->next_bytes = c->bytes < PRELOAD_LAST_CHUNK ? c->bytes * 2 : c->bytes;
	if (!t->keyed) {
		pthread_setspecific(proc.thread_key, t);
		t->keyed = true;
	}
	barrier();
	t->limit = limit_of(c);
}

/* What an ended thread left: a program that runs a thread per request
 * does not leave a chunk per thread in the file. */
static struct preload_chunk *take_spare(__u32 *n)
{
	struct spare s = { NULL, 0 };

	pthread_mutex_lock(&proc.lock);
	if (proc.spares)
		s = proc.spare[--proc.spares];
	pthread_mutex_unlock(&proc.lock);
	*n = s.n;
	return s.chunk;
}

static int new_chunk(struct thread_state *t, __u64 now)
{
	long page = sysconf(_SC_PAGESIZE);
	__u32 bytes = t->next_bytes ? t->next_bytes : page > PRELOAD_FIRST_CHUNK ? page : PRELOAD_FIRST_CHUNK;
	struct preload_chunk *c;
	__u32 n = 0;

	if (now < t->retry_at)
		return -1;
	c = t->chunk ? NULL : take_spare(&n);
	if (c) {
		use_chunk(t, c, n);
		return 0;
	}
	c = map_chunk(bytes);
	if (!c) {
		t->retry_at = now + RETRY_NS;
		return -1;
	}
	*c = (struct preload_chunk){ PRELOAD_CHUNK_MAGIC, bytes, proc.record_size, 0, getpid(), gettid() };
	use_chunk(t, c, 0);
	return 0;
}

/* Records that could not be stored, counted in the LOST record of the kept
 * slot (there is one once a chunk has filled up) or, without one, kept for
 * the next LOST record. A signal handler may add to either meanwhile. */
static void count_lost(struct thread_state *t, __u64 n, __u64 now)
{
	struct magnet_core *lost = t->lost_rec;
	__s32 have;

	if (!lost) {
		__atomic_fetch_add(&t->lost, n, __ATOMIC_RELAXED);
		return;
	}
	have = __atomic_load_n(&lost->size, __ATOMIC_RELAXED);
	if (n > (__u64)(INT32_MAX - have)) {		/* the rest waits for the next LOST record */
		__atomic_fetch_add(&t->lost, n - (INT32_MAX - have), __ATOMIC_RELAXED);
		n = INT32_MAX - have;
	}
	__atomic_fetch_add(&lost->size, (__s32)n, __ATOMIC_RELAXED);
	lost->timestamp = now;
}

/* Only the outermost call of a thread changes chunks: room for one record,
 * after the LOST record of what could not be stored before. 0 or -1. */
static int make_room(struct thread_state *t, __u64 now)
{
	__u64 lost = __atomic_load_n(&t->lost, __ATOMIC_RELAXED);
	__u32 i;

	if (t->n + (lost ? 1 : 0) >= t->limit && new_chunk(t, now)) {
		if (t->chunk && !t->lost_rec && t->n >= t->limit) {	/* full: the kept slot counts */
			put(t, t->limit, 0, now, MAGNET_LOST, 0, NULL);
			barrier();
			t->lost_rec = slot_at(t, t->limit);
		}
		count_lost(t, __atomic_exchange_n(&t->lost, 0, __ATOMIC_RELAXED), now);
		return -1;
	}
	lost = __atomic_exchange_n(&t->lost, 0, __ATOMIC_RELAXED);
	if (lost) {
		__s32 n = lost > INT32_MAX ? INT32_MAX : (__s32)lost;

		if (!claim_slot(t, &i)) {
			count_lost(t, lost, now);
			return -1;
		}
		put(t, i, 0, now, MAGNET_LOST, n, NULL);
		if (lost > (__u64)n)
			__atomic_fetch_add(&t->lost, lost - n, __ATOMIC_RELAXED);
	}
	return 0;
}

/* A slot below the limit, or false. Only the outermost call of the thread
 * makes room: a new chunk, after the LOST record of what was not stored. */
static bool take_slot(struct thread_state *t, __u32 *i)
{
	bool outer = t->depth == 1;

	if ((!outer || !__atomic_load_n(&t->lost, __ATOMIC_RELAXED)) && likely(claim_slot(t, i)))
		return true;
	return outer && !make_room(t, now_ns()) && claim_slot(t, i);
}

static void record(__u64 id, __u32 event, __s32 size, __u64 now, const struct magnet_ext *ext)
{
	struct thread_state *t = &self;
	__u32 i;

	t->depth++;
	barrier();
	if (take_slot(t, &i))
		put(t, i, id, now, event, size, ext);
	else
		count_lost(t, 1, now);
	barrier();
	t->depth--;
}

/* A thread ends: its records stay in the file, the rest of its chunk goes
 * to the spares if there is room left in it (and in the spares). */
static void thread_done(void *arg)
{
	struct thread_state *t = arg;
	struct preload_chunk *c = t->chunk;
	bool kept = false;

	t->limit = 0;
	barrier();
	if (c && !t->lost_rec && t->n + 1 < limit_of(c)) {
		pthread_mutex_lock(&proc.lock);
		if (proc.spares < SPARE_CHUNKS) {
			proc.spare[proc.spares++] = (struct spare){ c, t->n };
			kept = true;
		}
		pthread_mutex_unlock(&proc.lock);
	}
	if (kept)
		t->chunk = NULL;
	drop_chunk(t);
	t->keyed = false;
}

/* -------------------------------------------------------- the fd cache --- */

static int sockopt_int(int fd, int name)
{
	int v = -1;
	socklen_t len = sizeof(v);

	return getsockopt(fd, SOL_SOCKET, name, &v, &len) ? -1 : v;
}

static bool is_tcp(int fd)
{
	int domain = sockopt_int(fd, SO_DOMAIN);

	return (domain == AF_INET || domain == AF_INET6) && sockopt_int(fd, SO_TYPE) == SOCK_STREAM &&
	       sockopt_int(fd, SO_PROTOCOL) == IPPROTO_TCP;
}

/* The port of an IPv4 or IPv6 address; -1 for other families. */
static int port_in(const struct sockaddr *a, socklen_t len)
{
	if (a && a->sa_family == AF_INET && len >= sizeof(struct sockaddr_in))
		return ntohs(((const struct sockaddr_in *)a)->sin_port);
	if (a && a->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6))
		return ntohs(((const struct sockaddr_in6 *)a)->sin6_port);
	return -1;
}

static int port_of(int fd, bool peer)
{
	struct sockaddr_storage a;
	socklen_t len = sizeof(a);

	if ((peer ? getpeername : getsockname)(fd, (struct sockaddr *)&a, &len))
		return -1;
	return port_in((struct sockaddr *)&a, len);
}

static bool port_wanted(int port)
{
	for (int i = 0; i < proc.nports; i++)
		if (proc.ports[i] == port)
			return true;
	return false;
}

/* With --port: FD_IGNORED unless its local or remote port is one of them
 * (`peer_hint`, when not -1, is the remote port connect() was given: it is
 * not known to getpeername until the handshake ends); FD_UNKNOWN while an IP
 * socket's remote port is not known yet (asked again at the next call). */
static __u64 port_verdict(int fd, __u64 cookie, int peer_hint)
{
	int local, peer;

	if (!proc.nports)
		return cookie;
	local = port_of(fd, false);
	if (local < 0)
		return FD_IGNORED;		/* not an IP socket (--all-sockets): no ports */
	peer = peer_hint >= 0 ? peer_hint : port_of(fd, true);
	if (port_wanted(local) || port_wanted(peer))
		return cookie;
	return peer < 0 ? FD_UNKNOWN : FD_IGNORED;
}

/* What the cache should hold for `fd`: its socket cookie, FD_IGNORED, or
 * FD_UNKNOWN when the fd is not open (nothing to cache). */
static __u64 classify(int fd, int peer_hint)
{
	__u64 cookie = 0;
	socklen_t len = sizeof(cookie);

	if (getsockopt(fd, SOL_SOCKET, SO_COOKIE, &cookie, &len)) {
		if (errno == ENOTSOCK)
			return FD_IGNORED;
		if (errno != ENOPROTOOPT)
			return FD_UNKNOWN;
		cookie = 1ull << 63 | __atomic_add_fetch(&proc.synthetic_id, 1, __ATOMIC_RELAXED);
	}
	if (!proc.all_sockets && !is_tcp(fd))
		return FD_IGNORED;
	return port_verdict(fd, cookie, peer_hint);
}

static __attribute__((always_inline)) inline __u64 cached(int fd)
{
	if (likely((unsigned)fd < FD_SLOTS && proc.fds))
		return __atomic_load_n(&proc.fds[fd], __ATOMIC_RELAXED);
	return FD_UNKNOWN;
}

static __u64 learn(int fd, int peer_hint, __u64 flags)
{
	__u64 id = classify(fd, peer_hint);

	if (id != FD_UNKNOWN && id != FD_IGNORED)
		id |= flags;

	if ((unsigned)fd < FD_SLOTS && proc.fds && id != FD_UNKNOWN) {
		__atomic_store_n(&proc.fds[fd], id, __ATOMIC_RELAXED);
		if (fd > __atomic_load_n(&proc.max_fd, __ATOMIC_RELAXED))
			__atomic_store_n(&proc.max_fd, fd, __ATOMIC_RELAXED);
	}
	return id;
}

static void forget_range(unsigned first, unsigned last)
{
	unsigned top = __atomic_load_n(&proc.max_fd, __ATOMIC_RELAXED);

	if (!proc.fds)
		return;
	for (unsigned fd = first; fd <= last && fd <= top; fd++)
		__atomic_store_n(&proc.fds[fd], FD_UNKNOWN, __ATOMIC_RELAXED);
}

static void forget(int fd)
{
	if (fd >= 0)
		forget_range(fd, fd);
}

/* --------------------------------------------------------- recording --- */

#define SNAPSHOT_TRIES 8

union tcp_info_buf {
	struct tcp_info ti;
	char raw[sizeof(struct tcp_info) + 64];	/* newer kernels return more */
};

struct queues {
	int out, in;			/* SIOCOUTQ (write_seq - snd_una), SIOCINQ (rcv_nxt - copied_seq) */
};

static int read_queues(int fd, struct queues *q)
{
	return ioctl(fd, SIOCOUTQ, &q->out) || ioctl(fd, SIOCINQ, &q->in) ? -1 : 0;
}

/* TCP_INFO and the queues at one moment: TCP_INFO between two readings of
 * the queues that agree (an ACK or data arriving in between changes them). */
static int read_tcp_info(int fd, union tcp_info_buf *u, socklen_t *len, struct queues *q)
{
	struct queues before;

	for (int i = 0; i < SNAPSHOT_TRIES; i++) {
		*len = sizeof(*u);
		if (read_queues(fd, &before) || getsockopt(fd, IPPROTO_TCP, TCP_INFO, u, len) ||
		    read_queues(fd, q))
			return -1;
		if (before.out == q->out && before.in == q->in)
			return 0;
	}
	return -1;
}

/* The TCP_INFO snapshot of a socket (the BPF capture's TCP_STATE, as far as
 * an unprivileged process can see it): TCP_INFO, plus the bytes queued to
 * send (SIOCOUTQ) and to read (SIOCINQ), which turn TCP_INFO's byte counts
 * into the sequence fields, counted from the connection's first data byte. */
static void snapshot(int fd, bool active_open, struct magnet_ext *e)
{
	union tcp_info_buf u;
	const size_t rcv_wnd_at = offsetof(struct tcp_info, tcpi_snd_wnd) + 4;	/* tcpi_rcv_wnd, 6.8+ */
	socklen_t len;
	struct queues q;
	int cpu = sched_getcpu();
	__u32 written;

	e->valid = MAGNET_EXT_TASK;
	e->pid = proc.pid;
	e->cpu = cpu < 0 ? 0 : cpu;
	/* not TCP (--all-sockets), a kernel before 5.4, or the queues never
	 * stood still: no TCP_INFO group */
	if (read_tcp_info(fd, &u, &len, &q) || len < offsetof(struct tcp_info, tcpi_snd_wnd) + 4)
		return;
	e->valid |= MAGNET_EXT_TCP_INFO;
	e->tcp_state = u.ti.tcpi_state;
	e->snd_wnd = u.ti.tcpi_snd_wnd;
	if (len >= rcv_wnd_at + 4)
		memcpy(&e->rcv_wnd, u.raw + rcv_wnd_at, 4);
	e->srtt_us = u.ti.tcpi_rtt;
	e->rto_us = u.ti.tcpi_rto;
	e->snd_cwnd = u.ti.tcpi_snd_cwnd;
	e->snd_ssthresh = u.ti.tcpi_snd_ssthresh;
	e->packets_out = u.ti.tcpi_unacked;
	e->retrans_out = u.ti.tcpi_retrans;
	e->mss = u.ti.tcpi_snd_mss;
	/* bytes_acked counts the SYN's ACK on the side that connect()ed (the
	 * accepted side's child socket starts with its SYN-ACK acknowledged) */
	e->snd_una = (__u32)u.ti.tcpi_bytes_acked - (active_open && u.ti.tcpi_bytes_acked);
	written = e->snd_una + (__u32)q.out;
	e->write_seq = written;
	e->snd_nxt = written - u.ti.tcpi_notsent_bytes;
	e->copied_seq = (__u32)u.ti.tcpi_bytes_received - (__u32)q.in;
}

/* A data call on an fd: its socket's id (FD_IGNORED: not a socket we
 * record; FD_UNKNOWN: not known yet) and, for a send on a traced socket, the
 * slot of its record, claimed before the call and marked PRELOAD_PENDING
 * (preload.h): a send the process never returns from (SIGKILL, exit() in
 * another thread) becomes a LOST record in the merge instead of nothing. */
struct call {
	__u64 id;
	__u32 slot;			/* NO_SLOT: none claimed (the chunk was full: claimed after) */
	bool held;			/* t->depth was raised for the call */
};

#define NO_SLOT (~0u)

static __attribute__((noinline)) void begin_traced(int fd, struct call *c, bool marker)
{
	struct thread_state *t = &self;
	__u32 i;

	if (c->id == FD_UNKNOWN)
		c->id = learn(fd, -1, 0);
	if (c->id == FD_UNKNOWN || c->id == FD_IGNORED || !marker)
		return;		/* without a marker the record takes its slot when the call returns */
	c->held = true;
	t->depth++;		/* its handlers must not change chunks under the claimed slot */
	barrier();
	if (!take_slot(t, &i))
		return;
	slot_at(t, i)->event = PRELOAD_PENDING;
	barrier();
	slot_at(t, i)->timestamp = 1;		/* used: not a free slot */
	c->slot = i;
}

static __attribute__((always_inline)) inline struct call begin_call(int fd, bool marker)
{
	struct call c = { FD_IGNORED, NO_SLOT, false };

	if (likely(proc.enabled)) {
		c.id = cached(fd);
		if (unlikely(c.id != FD_IGNORED))
			begin_traced(fd, &c, marker);
	}
	return c;
}

/* The record of a call on a traced socket (or one not known before it). Out
 * of line: the cost of the non-socket path is its inlining. */
static __attribute__((noinline)) void end_traced(int fd, struct call *c, __u32 event, ssize_t ret)
{
	struct thread_state *t = &self;
	int err = errno;
	__u64 now = now_ns(), id;
	__s32 size = ret < 0 ? -err : ret > INT32_MAX ? INT32_MAX : (__s32)ret;
	struct magnet_ext ext = { 0 }, *e = NULL;

	if (c->id == FD_UNKNOWN)
		c->id = learn(fd, -1, 0);
	id = c->id;
	if (id != FD_UNKNOWN && id != FD_IGNORED) {
		if (unlikely(proc.ext)) {
			snapshot(fd, id & FD_ACTIVE_OPEN, &ext);
			e = &ext;
		}
		if (c->slot != NO_SLOT)
			put(t, c->slot, id & ~FD_ACTIVE_OPEN, now, event, size, e);
		else
			record(id & ~FD_ACTIVE_OPEN, event, size, now, e);
		c->slot = NO_SLOT;
	}
	if (c->held) {
		barrier();
		t->depth--;
		c->held = false;
	}
	errno = err;
}

/* After a data call on `fd` returned `ret`: its record if fd is a socket we
 * trace. Other fds cost the one cache load of begin_call. */
static __attribute__((always_inline)) inline ssize_t end_call(int fd, struct call *c, __u32 event,
							     ssize_t ret)
{
	if (unlikely(c->id != FD_IGNORED))
		end_traced(fd, c, event, ret);
	return ret;
}

/* A call on `fd` made by `call`, recorded as `event`. Only a send is marked
 * pending while it is under way: its data can reach the peer though the
 * process never returns from it. A receive that never returns gave the
 * application nothing, and a server killed while it waits in recv() is the
 * common case, not a loss. */
#define CALL(fd, event, made) ({ struct call _c = begin_call(fd, (event) == MAGNET_SOCK_SEND); \
				 end_call(fd, &_c, event, made); })

/* One record per message, as the kernel's tracepoint sees them; one for a
 * failure. Learnt after the call, without a pending marker: a call that
 * moves no message has no record. */
static int done_mmsg(int fd, __u32 event, int ret, const struct mmsghdr *v)
{
	struct call c;

	if (ret < 0) {
		c = begin_call(fd, false);
		end_call(fd, &c, event, ret);
	}
	for (int i = 0; i < ret; i++) {
		c = begin_call(fd, false);
		end_call(fd, &c, event, v[i].msg_len);
	}
	return ret;
}

/* ------------------------------------------------------ interposition --- */

EXPORT ssize_t send(int fd, const void *buf, size_t len, int flags)
{
	return CALL(fd, MAGNET_SOCK_SEND, REAL(send)(fd, buf, len, flags));
}

EXPORT ssize_t sendto(int fd, const void *buf, size_t len, int flags, __CONST_SOCKADDR_ARG addr,
		      socklen_t addrlen)
{
	return CALL(fd, MAGNET_SOCK_SEND, REAL(sendto)(fd, buf, len, flags, addr, addrlen));
}

EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	return CALL(fd, MAGNET_SOCK_SEND, REAL(sendmsg)(fd, msg, flags));
}

EXPORT int sendmmsg(int fd, struct mmsghdr *v, unsigned int n, int flags)
{
	return done_mmsg(fd, MAGNET_SOCK_SEND, REAL(sendmmsg)(fd, v, n, flags), v);
}

EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
	return CALL(fd, MAGNET_SOCK_SEND, REAL(write)(fd, buf, n));
}

EXPORT ssize_t writev(int fd, const struct iovec *iov, int iovcnt)
{
	return CALL(fd, MAGNET_SOCK_SEND, REAL(writev)(fd, iov, iovcnt));
}

EXPORT ssize_t sendfile(int out_fd, int in_fd, off_t *offset, size_t count)
{
	return CALL(out_fd, MAGNET_SOCK_SEND, REAL(sendfile)(out_fd, in_fd, offset, count));
}

EXPORT ssize_t sendfile64(int out_fd, int in_fd, off64_t *offset, size_t count)
{
	return CALL(out_fd, MAGNET_SOCK_SEND, REAL(sendfile64)(out_fd, in_fd, offset, count));
}

/* Only the socket it writes to: the kernel's splice read from TCP bypasses
 * the socket layer's recvmsg, so the BPF capture does not see that side either. */
EXPORT ssize_t splice(int fd_in, off64_t *off_in, int fd_out, off64_t *off_out, size_t len,
		      unsigned int flags)
{
	return CALL(fd_out, MAGNET_SOCK_SEND, REAL(splice)(fd_in, off_in, fd_out, off_out, len, flags));
}

EXPORT ssize_t recv(int fd, void *buf, size_t len, int flags)
{
	return CALL(fd, MAGNET_SOCK_RECV, REAL(recv)(fd, buf, len, flags));
}

EXPORT ssize_t recvfrom(int fd, void *buf, size_t len, int flags, __SOCKADDR_ARG addr,
			socklen_t *addrlen)
{
	return CALL(fd, MAGNET_SOCK_RECV, REAL(recvfrom)(fd, buf, len, flags, addr, addrlen));
}

EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	return CALL(fd, MAGNET_SOCK_RECV, REAL(recvmsg)(fd, msg, flags));
}

EXPORT int recvmmsg(int fd, struct mmsghdr *v, unsigned int n, int flags, struct timespec *timeout)
{
	return done_mmsg(fd, MAGNET_SOCK_RECV, REAL(recvmmsg)(fd, v, n, flags, timeout), v);
}

EXPORT ssize_t read(int fd, void *buf, size_t n)
{
	return CALL(fd, MAGNET_SOCK_RECV, REAL(read)(fd, buf, n));
}

EXPORT ssize_t readv(int fd, const struct iovec *iov, int iovcnt)
{
	return CALL(fd, MAGNET_SOCK_RECV, REAL(readv)(fd, iov, iovcnt));
}

/* What programs built with _FORTIFY_SOURCE call instead of read/recv/recvfrom. */
EXPORT ssize_t __read_chk(int fd, void *buf, size_t nbytes, size_t buflen)
{
	return CALL(fd, MAGNET_SOCK_RECV, REAL(__read_chk)(fd, buf, nbytes, buflen));
}

EXPORT ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen, int flags)
{
	return CALL(fd, MAGNET_SOCK_RECV, REAL(__recv_chk)(fd, buf, len, buflen, flags));
}

EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t len, size_t buflen, int flags,
			      __SOCKADDR_ARG addr, socklen_t *addrlen)
{
	return CALL(fd, MAGNET_SOCK_RECV,
		    REAL(__recvfrom_chk)(fd, buf, len, buflen, flags, addr, addrlen));
}

/* --- fds that end or change: their cache entries go (before, so that no
 * other thread re-learns the old socket meanwhile, and after). */

EXPORT int close(int fd)
{
	int ret;

	forget(fd);
	ret = REAL(close)(fd);
	forget(fd);
	return ret;
}

EXPORT int fclose(FILE *f)
{
	int fd = fileno(f), ret;	/* its close inside libc does not come through close() */

	forget(fd);
	ret = REAL(fclose)(f);
	forget(fd);
	return ret;
}

EXPORT int close_range(unsigned int first, unsigned int last, int flags)
{
	int ret = REAL(close_range) ? real_close_range(first, last, flags)
				    : syscall(SYS_close_range, first, last, flags);

	if (!ret && !(flags & CLOSE_RANGE_CLOEXEC))
		forget_range(first, last);
	return ret;
}

EXPORT void closefrom(int lowfd)
{
	if (REAL(closefrom))
		real_closefrom(lowfd);
	else
		syscall(SYS_close_range, lowfd, ~0u, 0);
	forget_range(lowfd < 0 ? 0 : lowfd, ~0u);
}

EXPORT int dup2(int oldfd, int newfd)
{
	int ret = REAL(dup2)(oldfd, newfd);

	forget(newfd);
	return ret;
}

EXPORT int dup3(int oldfd, int newfd, int flags)
{
	int ret = REAL(dup3)(oldfd, newfd, flags);

	forget(newfd);
	return ret;
}

EXPORT int socket(int domain, int type, int protocol)
{
	int fd = REAL(socket)(domain, type, protocol);

	forget(fd);
	return fd;
}

/* A connection begins: learn its socket now, not at its first data call. */
static void learn_connection(int fd, int peer_hint, __u64 flags)
{
	int err = errno;

	if (proc.enabled && fd >= 0) {
		forget(fd);
		learn(fd, peer_hint, flags);
	}
	errno = err;
}

EXPORT int connect(int fd, __CONST_SOCKADDR_ARG addr, socklen_t len)
{
	int ret = REAL(connect)(fd, addr, len);

	if (!ret || errno == EINPROGRESS)
		learn_connection(fd, port_in(addr.__sockaddr__, len), FD_ACTIVE_OPEN);
	return ret;
}

EXPORT int accept(int fd, __SOCKADDR_ARG addr, socklen_t *len)
{
	int conn = REAL(accept)(fd, addr, len);

	learn_connection(conn, -1, 0);
	return conn;
}

EXPORT int accept4(int fd, __SOCKADDR_ARG addr, socklen_t *len, int flags)
{
	int conn = REAL(accept4)(fd, addr, len, flags);

	learn_connection(conn, -1, 0);
	return conn;
}

/* ------------------------------------------------------- fork and start --- */

static void before_fork(void)
{
	pthread_mutex_lock(&proc.lock);
}

static void after_fork_parent(void)
{
	pthread_mutex_unlock(&proc.lock);
}

/* A child of fork() writes a file of its own: its chunk of the parent's
 * file is the parent's (records a signal handler was writing are lost). */
static void after_fork_child(void)
{
	struct thread_state *t = &self;

	pthread_mutex_init(&proc.lock, NULL);
	while (proc.spares) {		/* chunks of the parent's file */
		struct preload_chunk *c = proc.spare[--proc.spares].chunk;

		munmap(c, c->bytes);
	}
	drop_chunk(t);
	t->lost = 0;
	t->next_bytes = 0;
	t->retry_at = 0;
	proc.pid = getpid();
	if (proc.fd >= 0)
		real_close_fd(proc.fd);
	open_spool();
}

/* "80,443" (checked by `magnet capture`): the ports to keep. */
static void parse_ports(const char *s)
{
	char *end;

	while (s && *s && proc.nports < PRELOAD_MAX_PORTS) {
		unsigned long v = strtoul(s, &end, 10);

		if (end == s)
			break;
		if (v && v <= 65535)
			proc.ports[proc.nports++] = v;
		s = *end == ',' ? end + 1 : end;
	}
}

__attribute__((constructor)) static void start(void)
{
	const char *dir = getenv(PRELOAD_DIR_ENV), *sockets = getenv(PRELOAD_SOCKETS_ENV);
	const char *ext = getenv(PRELOAD_EXT_ENV);
	void *fds;

	if (!dir || !*dir || strlen(dir) >= sizeof(proc.dir))
		return;
	snprintf(proc.dir, sizeof(proc.dir), "%s", dir);
	proc.all_sockets = sockets && !strcmp(sockets, "all");
	proc.ext = ext && !strcmp(ext, "1");
	proc.record_size = proc.ext ? MAGNET_EXT_RECORD_SIZE : MAGNET_CORE_SIZE;
	proc.pid = getpid();
	parse_ports(getenv(PRELOAD_PORTS_ENV));
	fds = mmap(NULL, FD_SLOTS * sizeof(__u64), PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	proc.fds = fds == MAP_FAILED ? NULL : fds;
	if (pthread_key_create(&proc.thread_key, thread_done))
		return;
	pthread_atfork(before_fork, after_fork_parent, after_fork_child);
	open_spool();
	proc.enabled = true;
}
