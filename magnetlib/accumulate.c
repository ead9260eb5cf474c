/* accumulate.py's per-record loops in C: Index's lookup of ids, a batch's moments
 * per group, the first pass of the log-linear cells of OrderStats, and the gaps
 * between consecutive events of each group.
 *
 * Built on first use by magnetlib/native.py and called through ctypes.  Each loop
 * does what its numpy version does, in the same order and the same float64
 * arithmetic, so the results are identical bit for bit (the tests check it);
 * accumulate.py and metrics.py keep the numpy versions for machines without a
 * compiler.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Per group of a batch: count and sum of the values (np.bincount's sequential
 * float64 sums, as Moments.add computes them). */
void magnet_group_count_sum(const int64_t *group, const int64_t *values, int64_t n, int64_t ngroups,
			    int64_t *count, double *sum)
{
	memset(count, 0, ngroups * sizeof(*count));
	memset(sum, 0, ngroups * sizeof(*sum));
	for (int64_t i = 0; i < n; i++) {
		count[group[i]]++;
		sum[group[i]] += (double)values[i];
	}
}

/* Per group of a batch: the sum of squared deviations from the batch's mean, and
 * unless the caller `has` them, count and sum. */
void magnet_group_moments(const int64_t *group, const int64_t *values, int64_t n, int64_t ngroups,
			  int has, int64_t *count, double *sum, double *m2)
{
	memset(m2, 0, ngroups * sizeof(*m2));
	if (!has)
		magnet_group_count_sum(group, values, n, ngroups, count, sum);
	for (int64_t i = 0; i < n; i++) {
		int64_t g = group[i];
		double dev = (double)values[i] - sum[g] / (double)count[g];
		m2[g] += dev * dev;
	}
}

/* accumulate.hdr_cell of one value in [0, 2**52): itself below 2**(m+1), then the
 * exponent and top m mantissa bits of its float64. */
static inline int64_t hdr_cell(int64_t x, int m)
{
	if (x < (2LL << m))
		return x;
	double d = (double)x;
	int64_t bits;
	memcpy(&bits, &d, sizeof(bits));
	return (bits >> (52 - m)) - ((int64_t)(1022 + m) << m);
}

/* OrderStats' first pass (_count_first and _track): each value x of a group with
 * target t >= 0 (target[group]) counts in cell t * cells_per_group + hdr_cell(min(x,
 * top)); a cell that can hold several values keeps its min (as INT64_MAX - min) and max. */
void magnet_hdr_count_first(const int64_t *group, const int64_t *x, int64_t n, const int64_t *target,
			    int m, int64_t top, int64_t cells_per_group, int64_t *counts,
			    int64_t *rev_mins, int64_t *maxs)
{
	for (int64_t i = 0; i < n; i++) {
		int64_t t = target[group[i]], v = x[i];
		if (t < 0)
			continue;
		int64_t at = t * cells_per_group + hdr_cell(v < top ? v : top, m);
		counts[at]++;
		if (v >= (2LL << m)) {
			if (INT64_MAX - v > rev_mins[at])
				rev_mins[at] = INT64_MAX - v;
			if (v > maxs[at])
				maxs[at] = v;
		}
	}
}

/* Gaps between consecutive events of each group, for events whose times never
 * decrease within a group (metrics._Spacing): last[g] is the group's latest time
 * (INT64_MIN: none yet), first[g] its earliest.  Writes each event's gap after its
 * group's first (gap_group[k], gap[k]) and per group the batch's gap count and sum;
 * returns the gaps. */
int64_t magnet_gaps(const int64_t *group, const int64_t *ns, int64_t n, int64_t ngroups, int64_t *first,
		    int64_t *last, int64_t *gap_group, int64_t *gap, int64_t *count, int64_t *total)
{
	int64_t k = 0;
	memset(count, 0, ngroups * sizeof(*count));
	memset(total, 0, ngroups * sizeof(*total));
	for (int64_t i = 0; i < n; i++) {
		int64_t g = group[i], t = ns[i];
		if (last[g] != INT64_MIN) {
			gap_group[k] = g;
			gap[k++] = t - last[g];
			count[g]++;
			total[g] += t - last[g];
		}
		if (t < first[g])
			first[g] = t;
		last[g] = t;
	}
	return k;
}

/* Index: dense indices 0..n-1 for 64-bit ids in order of first appearance, as an
 * open-addressing hash table (linear probing, at most half full). */
struct index_slot {
	uint64_t id;
	int64_t index;			/* -1: empty */
};

struct id_index {
	struct index_slot *slots;
	int64_t mask, ids;
};

static struct index_slot *empty_slots(int64_t n)
{
	struct index_slot *s = malloc(n * sizeof(*s));
	for (int64_t i = 0; s && i < n; i++)
		s[i].index = -1;
	return s;
}

struct id_index *magnet_index_new(void)
{
	struct id_index *t = calloc(1, sizeof(*t));
	if (t && !(t->slots = empty_slots(64))) {
		free(t);
		return NULL;
	}
	if (t)
		t->mask = 63;
	return t;
}

void magnet_index_free(struct id_index *t)
{
	if (t)
		free(t->slots);
	free(t);
}

static struct index_slot *slot_of_id(const struct id_index *t, uint64_t id)
{
	uint64_t at = id * 0x9E3779B97F4A7C15ull;
	for (at ^= at >> 29;; at++) {
		struct index_slot *s = &t->slots[at & t->mask];
		if (s->index < 0 || s->id == id)
			return s;
	}
}

static int grow_index(struct id_index *t)
{
	struct id_index bigger = { .mask = 2 * t->mask + 1, .ids = t->ids };
	if (!(bigger.slots = empty_slots(bigger.mask + 1)))
		return -1;
	for (int64_t i = 0; i <= t->mask; i++)
		if (t->slots[i].index >= 0)
			*slot_of_id(&bigger, t->slots[i].id) = t->slots[i];
	free(t->slots);
	*t = bigger;
	return 0;
}

/* Index.cells: per record, index_of(id[i]) * per + column_of[code[i]] (no codes:
 * column 0).  Ids not seen before get the next indices and are appended to new_ids.
 * Returns how many were new; -1 when memory ran out, -2 for a code not below ncodes. */
int64_t magnet_index_cells(struct id_index *t, const uint64_t *id, int64_t n, const uint32_t *code,
			   const int64_t *column_of, int64_t ncodes, int64_t per, int64_t *cell,
			   uint64_t *new_ids)
{
	int64_t fresh = 0, index = -1;
	for (int64_t i = 0; i < n; i++) {
		if (code && code[i] >= ncodes)
			return -2;
		if (i == 0 || id[i] != id[i - 1]) {	/* runs of one id: one lookup */
			struct index_slot *s = slot_of_id(t, id[i]);
			if (s->index < 0) {
				if (2 * (t->ids + 1) > t->mask + 1) {
					if (grow_index(t))
						return -1;
					s = slot_of_id(t, id[i]);
				}
				s->id = id[i];
				s->index = t->ids++;
				new_ids[fresh++] = id[i];
			}
			index = s->index;
		}
		cell[i] = index * per + (code ? column_of[code[i]] : 0);
	}
	return fresh;
}
