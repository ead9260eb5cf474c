// SPDX-License-Identifier: GPL-2.0-or-later
/* Draining the per-CPU capture buffers. */
#include <stdlib.h>
#include <sys/mman.h>
#include "buffers.h"
#include "magnet_format.h"

static struct magnet_core *slot(const struct cpu_buffers *b, __u32 cpu, __u32 i)
{
	return (struct magnet_core *)(b->base + ((size_t)cpu * b->slots + i) * b->record_size);
}

static __u64 published(const struct magnet_core *r)
{
	return __atomic_load_n(&r->timestamp, __ATOMIC_ACQUIRE);
}

static __u32 next(const struct cpu_buffers *b, __u32 i)
{
	return i + 1 == b->slots ? 0 : i + 1;
}

int buffers_map(struct cpu_buffers *b, int map_fd, __u32 ncpus, __u32 slots, __u32 record_size)
{
	size_t page = 4096;

	b->ncpus = ncpus;
	b->slots = slots;
	b->record_size = record_size;
	b->map_bytes = ((size_t)ncpus * slots * record_size + page - 1) / page * page;
	b->base = mmap(NULL, b->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, map_fd, 0);
	b->tail = calloc(ncpus, sizeof(*b->tail));
	b->taken = calloc(ncpus, sizeof(*b->taken));
	b->order = calloc((size_t)ncpus * slots, sizeof(*b->order));
	if (b->base == MAP_FAILED || !b->tail || !b->taken || !b->order)
		return -1;
	return 0;
}

/* List the slots of one CPU's records that are due (published by `until`),
 * in time order, and say how full its buffer is. Slots are in publishing
 * order, which a program interrupted by another on the same CPU can leave
 * slightly out of time order: an insertion sort puts that right (it is
 * linear on input in order). */
static __u32 scan(struct cpu_buffers *b, __u32 cpu, __u64 until, __u32 *used)
{
	__u32 *order = b->order + (size_t)cpu * b->slots;
	__u32 i = b->tail[cpu], due = 0, n = 0;
	__u64 ts;

	while (n < b->slots && (ts = published(slot(b, cpu, i)))) {
		if (ts <= until && due == n) {
			__u32 k = due++;

			while (k && slot(b, cpu, order[k - 1])->timestamp > ts) {
				order[k] = order[k - 1];
				k--;
			}
			order[k] = i;
		}
		n++;
		i = next(b, i);
	}
	*used = n;
	return due;
}

/* The CPU whose next due record is the oldest; -1 when none is left. */
static int oldest(const struct cpu_buffers *b, const __u32 *pos)
{
	int best = -1;
	__u64 best_ts = 0;

	for (__u32 cpu = 0; cpu < b->ncpus; cpu++) {
		__u64 ts;

		if (pos[cpu] == b->taken[cpu])
			continue;
		ts = slot(b, cpu, b->order[(size_t)cpu * b->slots + pos[cpu]])->timestamp;
		if (best < 0 || ts < best_ts) {
			best = cpu;
			best_ts = ts;
		}
	}
	return best;
}

static void release(struct cpu_buffers *b, __u32 cpu, __u32 n)
{
	__u32 i = b->tail[cpu];

	while (n--) {
		__atomic_store_n(&slot(b, cpu, i)->timestamp, 0, __ATOMIC_RELEASE);
		i = next(b, i);
	}
	b->tail[cpu] = i;
}

long buffers_drain(struct cpu_buffers *b, __u64 until, record_fn fn, void *ctx, double *fill)
{
	__u32 pos[b->ncpus], used, most = 0;
	long total = 0;
	int cpu, err = 0;

	for (cpu = 0; cpu < (int)b->ncpus; cpu++) {
		b->taken[cpu] = scan(b, cpu, until, &used);
		pos[cpu] = 0;
		total += b->taken[cpu];
		if (used > most)
			most = used;
	}
	*fill = (double)most / b->slots;
	while (!err && (cpu = oldest(b, pos)) >= 0) {
		err = fn(ctx, slot(b, cpu, b->order[(size_t)cpu * b->slots + pos[cpu]]));
		pos[cpu]++;
	}
	/* Free what was written; after a failed write, keep the rest. */
	for (cpu = 0; cpu < (int)b->ncpus; cpu++)
		release(b, cpu, err ? 0 : b->taken[cpu]);
	return err ? -1 : total;
}

void buffers_unmap(struct cpu_buffers *b)
{
	if (b->base && b->base != MAP_FAILED)
		munmap(b->base, b->map_bytes);
	free(b->tail);
	free(b->taken);
	free(b->order);
}
