/* accumulate.py's per-record loops in C: a batch's moments per group, the first
 * pass of the log-linear cells of OrderStats, and the gaps between consecutive
 * events of each group.
 *
 * Built on first use by magnetlib/native.py and called through ctypes.  Each loop
 * does what its numpy version does, in the same order and the same float64
 * arithmetic, so the results are identical bit for bit (the tests check it);
 * accumulate.py and metrics.py keep the numpy versions for machines without a
 * compiler.
 */
#include <stdint.h>
#include <string.h>

/* Per group of a batch: the sum of squared deviations from the batch's mean, and
 * unless the caller `has` them, count and sum (np.bincount's sequential float64
 * sums, as Moments.add computes them). */
void magnet_group_moments(const int64_t *group, const int64_t *values, int64_t n, int64_t ngroups,
			  int has, int64_t *count, double *sum, double *m2)
{
	memset(m2, 0, ngroups * sizeof(*m2));
	if (!has) {
		memset(count, 0, ngroups * sizeof(*count));
		memset(sum, 0, ngroups * sizeof(*sum));
		for (int64_t i = 0; i < n; i++) {
			count[group[i]]++;
			sum[group[i]] += (double)values[i];
		}
	}
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
