/* linkem's core: stages, queue, loss and jitter of one direction (core.h). */
#include <stdlib.h>
#include <string.h>

#include "core.h"

#define HELD_MAX_BYTES (1ULL << 30)

/* ------------------------------------------------------------ random --- */

/* xoshiro256**, seeded by splitmix64: fast, and the same sequence for a seed. */
struct rng { uint64_t s[4]; };

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static void rng_seed(struct rng *r, uint64_t seed)
{
	for (int i = 0; i < 4; i++)
		r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t rng_next(struct rng *r)
{
	uint64_t *s = r->s, result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return result;
}

static double rng_unit(struct rng *r)     /* uniform in [0, 1) */
{
	return (rng_next(r) >> 11) * 0x1.0p-53;
}

static int loss_draw(const struct lk_loss *l, int *in_bad, struct rng *rng)
{
	int lost;

	if (!l->ge)
		return l->p > 0 && rng_unit(rng) < l->p;
	lost = rng_unit(rng) < (*in_bad ? l->bad : l->good);
	if (*in_bad ? rng_unit(rng) < l->r : rng_unit(rng) < l->p)
		*in_bad = !*in_bad;
	return lost;
}

/* ------------------------------------------------------------- rings --- */

/* A ring of fixed-size items, doubling when full. */
struct ring {
	unsigned char *items;
	size_t size, cap, head, n;
};

static void *ring_at(const struct ring *r, size_t i)
{
	return r->items + ((r->head + i) % r->cap) * r->size;
}

static int ring_push(struct ring *r, const void *item)
{
	if (r->n == r->cap) {
		size_t cap = r->cap ? 2 * r->cap : 1024;
		unsigned char *items = malloc(cap * r->size);

		if (!items)
			return -1;
		for (size_t i = 0; i < r->n; i++)
			memcpy(items + i * r->size, ring_at(r, i), r->size);
		free(r->items);
		r->items = items, r->cap = cap, r->head = 0;
	}
	memcpy(ring_at(r, r->n), item, r->size);
	r->n++;
	return 0;
}

static void ring_drop_front(struct ring *r)
{
	r->head = (r->head + 1) % r->cap;
	r->n--;
}

/* ------------------------------------------------------------- stages --- */

struct waiting { int64_t start; uint32_t len; };   /* a packet waiting for the link */

/* One hop: a link (if rate_bps) and then the propagation delay. */
struct stage {
	uint64_t rate_bps;
	uint64_t queue_bytes, queue_packets;
	struct lk_loss loss;
	int in_bad;
	int64_t delay_ns, jitter_ns;
	int64_t busy_until, last_exit;
	struct ring wait;                      /* of struct waiting, in service order */
	uint64_t wait_bytes;
};

struct lk_dir {
	struct stage stages[LK_MAX_HOPS];
	int nstages, bottleneck;
	uint32_t mtu;
	uint64_t held_max;
	struct ring flight;                    /* of struct lk_packet *, in delivery order */
	uint64_t flight_bytes;
	struct lk_counters c;
	struct rng rng;
};

/* Forget the packets whose service has begun by time t. */
static void waiting_trim(struct stage *s, int64_t t)
{
	struct waiting *w;

	while (s->wait.n && (w = ring_at(&s->wait, 0))->start <= t) {
		s->wait_bytes -= w->len;
		ring_drop_front(&s->wait);
	}
}

/* What a packet met at a stage: the queue it found, how long it waited in it. */
struct passage { uint32_t queue_packets, queue_bytes; int64_t wait_ns; };

/* The time a packet arriving at *t leaves the stage (through *t), or why it does not;
 * what it met there in *met. */
static enum lk_reason stage_pass(struct lk_dir *d, struct stage *s, int64_t *t, uint32_t len,
				 struct passage *met)
{
	int64_t at = *t, exit = at;

	met->wait_ns = 0;
	if (s->rate_bps) {
		int64_t start = s->busy_until > at ? s->busy_until : at;

		waiting_trim(s, at);
		met->queue_packets = (uint32_t)s->wait.n;
		met->queue_bytes = (uint32_t)s->wait_bytes;
		met->wait_ns = -1;
		if (start > at) {                  /* the link is busy: the packet waits */
			struct waiting w = {start, len};

			if ((s->queue_packets && s->wait.n + 1 > s->queue_packets) ||
			    (s->queue_bytes && s->wait_bytes + len > s->queue_bytes))
				return LK_QUEUE_DROP;
			if (ring_push(&s->wait, &w))
				return LK_OVERFLOW;
			s->wait_bytes += len;
			if (s->wait_bytes > d->c.queue_max_bytes)
				d->c.queue_max_bytes = s->wait_bytes;
			if (s->wait.n > d->c.queue_max_packets)
				d->c.queue_max_packets = s->wait.n;
		}
		met->wait_ns = start - at;
		s->busy_until = start + (int64_t)((uint64_t)len * 8000000000ULL / s->rate_bps);
		exit = s->busy_until;
	}
	if (loss_draw(&s->loss, &s->in_bad, &d->rng))   /* lost on the wire, after using the link */
		return LK_RANDOM_LOSS;
	exit += s->delay_ns;
	if (s->jitter_ns)
		exit += (int64_t)(rng_unit(&d->rng) * (double)(s->jitter_ns + 1));
	if (exit < s->last_exit)               /* jitter never reorders */
		exit = s->last_exit;
	s->last_exit = exit;
	*t = exit;
	return LK_PASS;
}

/* ---------------------------------------------------------- direction --- */

struct lk_dir *lk_dir_new(const struct lk_config *o, uint64_t seed)
{
	struct lk_dir *d;

	if (o->hops < 1 || o->hops > LK_MAX_HOPS || o->bottleneck < 0 || o->bottleneck >= o->hops)
		return NULL;
	d = calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	d->nstages = o->hops;
	d->mtu = o->mtu;
	d->held_max = o->held_max_bytes ? o->held_max_bytes : HELD_MAX_BYTES;
	d->flight.size = sizeof(struct lk_packet *);
	for (int i = 0; i < o->hops; i++) {
		int hop = o->reverse ? o->hops - 1 - i : i;
		struct stage *s = &d->stages[i];

		s->wait.size = sizeof(struct waiting);
		s->delay_ns = o->delay_ns / o->hops + (hop == o->hops - 1 ? o->delay_ns % o->hops : 0);
		if (hop != o->bottleneck)
			continue;
		d->bottleneck = i;
		s->jitter_ns = o->jitter_ns;
		s->rate_bps = o->rate_bps;
		s->queue_bytes = o->queue_bytes;
		s->queue_packets = o->queue_packets;
		s->loss = o->loss;
	}
	rng_seed(&d->rng, seed);
	return d;
}

void lk_dir_free(struct lk_dir *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < d->flight.n; i++)
		free(*(struct lk_packet **)ring_at(&d->flight, i));
	free(d->flight.items);
	for (int i = 0; i < d->nstages; i++)
		free(d->stages[i].wait.items);
	free(d);
}

static enum lk_reason count(struct lk_dir *d, enum lk_reason why, uint32_t len)
{
	struct lk_counters *c = &d->c;

	switch (why) {
	case LK_QUEUE_DROP: c->queue_drops++, c->queue_drop_bytes += len; break;
	case LK_RANDOM_LOSS: c->random_losses++, c->random_loss_bytes += len; break;
	case LK_TOO_BIG: c->too_big++; break;
	case LK_UNROUTABLE: c->unroutable++; break;
	case LK_OVERFLOW: c->overflow++; break;
	case LK_PASS: break;
	}
	return why;
}

/* Through every stage: its due time, or why it does not get through; what it met at
 * the bottleneck in *met. */
static enum lk_reason travel(struct lk_dir *d, int64_t *due, uint32_t len, struct passage *met)
{
	for (int i = 0; i < d->nstages; i++) {
		struct passage here = {0, 0, 0};
		enum lk_reason why = stage_pass(d, &d->stages[i], due, len, &here);

		if (i == d->bottleneck)
			*met = here;
		if (why != LK_PASS)
			return why;
	}
	return LK_PASS;
}

enum lk_reason lk_dir_push(struct lk_dir *d, int64_t now, const unsigned char *data, uint32_t len,
			   int out, struct lk_record *record)
{
	struct passage met = {0, 0, -1};
	int64_t due = now;
	enum lk_reason why = LK_PASS;
	struct lk_packet *p = NULL;

	d->c.packets_in++;
	d->c.bytes_in += len;
	if (len > d->mtu)
		why = LK_TOO_BIG;
	else if (out < 0)
		why = LK_UNROUTABLE;
	else
		why = travel(d, &due, len, &met);
	if (why == LK_PASS) {
		if (d->flight_bytes + len > d->held_max || !(p = malloc(sizeof(*p) + len)))
			why = LK_OVERFLOW;
	}
	if (why == LK_PASS) {
		p->due = due;
		p->out = out;
		p->len = len;
		memcpy(p->data, data, len);
		if (ring_push(&d->flight, &p)) {
			free(p);
			why = LK_OVERFLOW;
		} else {
			d->flight_bytes += len;
		}
	}
	if (record)
		*record = (struct lk_record){.arrival_ns = now, .departure_ns = why == LK_PASS ? due : -1,
					     .wait_ns = met.wait_ns, .bytes = len,
					     .queue_packets = met.queue_packets,
					     .queue_bytes = met.queue_bytes, .reason = (uint8_t)why};
	return count(d, why, len);
}

struct lk_packet *lk_dir_pop_due(struct lk_dir *d, int64_t now)
{
	struct lk_packet *p;
	int64_t late;

	if (!d->flight.n || (p = *(struct lk_packet **)ring_at(&d->flight, 0))->due > now)
		return NULL;
	ring_drop_front(&d->flight);
	d->flight_bytes -= p->len;
	late = now - p->due;
	d->c.late[late / LK_LATE_BIN_NS < LK_LATE_BINS ? late / LK_LATE_BIN_NS : LK_LATE_BINS]++;
	if (late > d->c.late_max)
		d->c.late_max = late;
	return p;
}

int64_t lk_dir_next(const struct lk_dir *d)
{
	return d->flight.n ? (*(struct lk_packet **)ring_at(&d->flight, 0))->due : INT64_MAX;
}

uint64_t lk_dir_held(const struct lk_dir *d)
{
	return d->flight.n;
}

struct lk_counters *lk_dir_counters(struct lk_dir *d)
{
	return &d->c;
}

double lk_late_quantile(const struct lk_counters *c, double q)
{
	uint64_t total = 0, seen = 0;

	for (int i = 0; i <= LK_LATE_BINS; i++)
		total += c->late[i];
	if (!total)
		return 0;
	for (int i = 0; i <= LK_LATE_BINS; i++) {
		seen += c->late[i];
		if (seen >= q * total)
			return (i + 1) * (LK_LATE_BIN_NS / 1000.0);
	}
	return LK_LATE_BINS * (LK_LATE_BIN_NS / 1000.0);
}
