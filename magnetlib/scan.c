/* Walks over a trace's mapped records in C: scan.py's pass (counts, bytes, clock) and
 * Trace._batch's columns of the wanted records, each one sequential walk in place of
 * numpy's several passes over columns copied out of the records.
 *
 * Built on first use by magnetlib/native.py and called through ctypes (one range per
 * thread).  Each gives what its numpy version gives (the tests compare the two);
 * scan.py and trace.py keep those for machines without a compiler.
 */
#include <stdint.h>
#include <string.h>

/* A worker's clock accumulators (scan._Part's), carried from one range to the next. */
struct scan_times {
	int64_t tmin, tmax;		/* valid once seen */
	int64_t zero_ts, first_zero_ts;	/* first_zero_ts: -1 for none */
	int64_t backsteps;
	uint64_t max_back;		/* the largest step back, in ticks */
	int64_t max_back_pos;		/* its record; -1 for none */
	int64_t prev;			/* the timestamp before the range, when has_prev */
	int64_t has_prev, seen;
};

struct scan_layout {
	int64_t record_size, at_sockid, at_event, at_size, at_timestamp, swap;
};

static inline uint32_t field32(const uint8_t *p, int swap)
{
	uint32_t v;
	memcpy(&v, p, sizeof(v));
	return swap ? __builtin_bswap32(v) : v;
}

static inline uint64_t field64(const uint8_t *p, int swap)
{
	uint64_t v;
	memcpy(&v, p, sizeof(v));
	return swap ? __builtin_bswap64(v) : v;
}

static void note_time(struct scan_times *t, int64_t ts, int64_t pos)
{
	if (!t->seen || ts < t->tmin)
		t->tmin = ts;
	if (!t->seen || ts > t->tmax)
		t->tmax = ts;
	t->seen = 1;
	if (ts == 0) {
		if (t->first_zero_ts < 0)
			t->first_zero_ts = pos;
		t->zero_ts++;
	}
	if (t->has_prev) {
		int64_t step = (int64_t)((uint64_t)ts - (uint64_t)t->prev);
		if (step < 0) {
			uint64_t back = -(uint64_t)step;
			t->backsteps++;
			if (back > t->max_back) {
				t->max_back = back;
				t->max_back_pos = pos;
			}
		}
	}
	t->prev = ts;
	t->has_prev = 1;
}

/* Records first..first+n-1 (the range starts at `records`): per event code below
 * `table`, the records, the sum of positive sizes, the negative sizes (errors) and the
 * zero sizes; the clock accumulators over every record.  A code of `table` or more
 * (SYSINFO, or unknown) is counted in none of the per-code arrays: its position and code
 * go to high_pos and high_code.  Returns how many such records there were. */
int64_t magnet_scan_range(const uint8_t *records, int64_t first, int64_t n, const struct scan_layout *l,
			  int64_t table, int64_t *counts, int64_t *bytes, int64_t *errors, int64_t *zeros,
			  struct scan_times *t, int64_t *high_pos, int64_t *high_code)
{
	int64_t high = 0;
	for (int64_t i = 0; i < n; i++) {
		const uint8_t *r = records + i * l->record_size;
		uint32_t ev = field32(r + l->at_event, l->swap);
		int32_t size = (int32_t)field32(r + l->at_size, l->swap);

		note_time(t, (int64_t)field64(r + l->at_timestamp, l->swap), first + i);
		if (ev >= table) {
			high_pos[high] = first + i;
			high_code[high++] = ev;
			continue;
		}
		counts[ev]++;
		if (size > 0)
			bytes[ev] += size;
		else if (size < 0)
			errors[ev]++;
		else
			zeros[ev]++;
	}
	return high;
}

/* Trace._batch: of n records, those whose code has keep[min(code, ncodes - 1)] (and,
 * when `one`, sockid `sockid`), as columns.  Returns how many. */
int64_t magnet_trace_columns(const uint8_t *records, int64_t n, const struct scan_layout *l,
			     const uint8_t *keep, int64_t ncodes, int one, uint64_t sockid,
			     uint64_t *sid, uint32_t *event, int64_t *ns, int64_t *size)
{
	int64_t k = 0;
	for (int64_t i = 0; i < n; i++) {
		const uint8_t *r = records + i * l->record_size;
		uint32_t ev = field32(r + l->at_event, l->swap);
		uint64_t id = field64(r + l->at_sockid, l->swap);

		if (!keep[ev < ncodes ? ev : ncodes - 1] || (one && id != sockid))
			continue;
		sid[k] = id;
		event[k] = ev;
		ns[k] = (int64_t)field64(r + l->at_timestamp, l->swap);
		size[k++] = (int32_t)field32(r + l->at_size, l->swap);
	}
	return k;
}
