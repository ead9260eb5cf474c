/* Unit tests of linkem's core (core.h), without root, devices or a clock: time is
 * an argument. Built with ASan and UBSan by `make test`, run by tests/test_linkem.py.
 * Prints one line per failed check and "N checks, M failed"; exit status 1 if any. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core.h"

#define MS 1000000LL
#define US 1000LL

static const unsigned char payload[1500];

static struct lk_config link_of(uint64_t rate, int64_t delay, uint64_t queue_packets)
{
	return (struct lk_config){.rate_bps = rate, .delay_ns = delay, .queue_packets = queue_packets,
				  .hops = 1, .bottleneck = 0, .mtu = 1500};
}

/* Every packet in flight handed out at its due time: their due times, in order. */
static size_t drain(struct lk_dir *d, int64_t *due, size_t max)
{
	size_t n = 0;
	struct lk_packet *p;

	while (lk_dir_next(d) != INT64_MAX) {
		p = lk_dir_pop_due(d, lk_dir_next(d));
		if (n < max)
			due[n] = p->due;
		n++;
		free(p);
	}
	return n;
}

static void test_delay_only(void)
{
	struct lk_config c = link_of(0, 30 * MS, 0);
	struct lk_dir *d = lk_dir_new(&c, 1);
	struct lk_record r;
	struct lk_packet *p;

	CHECK(lk_dir_next(d) == INT64_MAX, "nothing in flight yet");
	CHECK(lk_dir_push(d, 5 * MS, payload, 100, 3, &r) == LK_PASS, "passes");
	CHECK(lk_dir_next(d) == 35 * MS, "due %lld", (long long)lk_dir_next(d));
	CHECK(lk_dir_pop_due(d, 35 * MS - 1) == NULL, "not before its time");
	p = lk_dir_pop_due(d, 35 * MS + 25 * US);
	CHECK(p && p->out == 3 && p->len == 100 && p->due == 35 * MS, "the packet, for its device");
	free(p);
	CHECK(lk_dir_counters(d)->late[2] == 1, "25 us late: the third 10 us bin");
	CHECK(r.arrival_ns == 5 * MS && r.departure_ns == 35 * MS && r.wait_ns == 0 && r.reason == LK_PASS,
	      "record %lld %lld %lld", (long long)r.arrival_ns, (long long)r.departure_ns, (long long)r.wait_ns);
	lk_dir_free(d);
}

static void test_hops_share_the_delay(void)
{
	struct lk_config c = link_of(0, 20 * MS + 3, 0);
	struct lk_dir *d;

	c.hops = 7;
	c.bottleneck = 3;
	d = lk_dir_new(&c, 1);
	lk_dir_push(d, 0, payload, 100, 0, NULL);
	CHECK(lk_dir_next(d) == 20 * MS + 3, "the sum of the hops' delays: %lld", (long long)lk_dir_next(d));
	lk_dir_free(d);
	c.bottleneck = 7;
	CHECK(lk_dir_new(&c, 1) == NULL, "a bottleneck beyond the hops is refused");
}

static void test_serialisation_and_drop_tail(void)
{
	struct lk_config c = link_of(8000000, 0, 3);     /* 1000 B: 1 ms at 8 Mbit/s */
	struct lk_dir *d = lk_dir_new(&c, 1);
	struct lk_record r[6];
	int64_t due[8];
	enum lk_reason why[6];

	for (int i = 0; i < 6; i++)
		why[i] = lk_dir_push(d, 0, payload, 1000, 0, &r[i]);
	/* One in service, three waiting; the fifth and sixth find the queue full. */
	CHECK(why[0] == LK_PASS && why[3] == LK_PASS && why[4] == LK_QUEUE_DROP && why[5] == LK_QUEUE_DROP,
	      "drop-tail after the queue's 3 packets");
	CHECK(r[3].queue_packets == 2 && r[3].queue_bytes == 2000 && r[3].wait_ns == 3 * MS,
	      "the 4th found 2 waiting, waited 3 ms: %u %u %lld", r[3].queue_packets, r[3].queue_bytes,
	      (long long)r[3].wait_ns);
	CHECK(r[4].queue_packets == 3 && r[4].departure_ns == -1 && r[4].wait_ns == -1 &&
	      r[4].reason == LK_QUEUE_DROP, "the dropped one's record");
	CHECK(drain(d, due, 8) == 4 && due[0] == 1 * MS && due[3] == 4 * MS, "1 ms apart");
	CHECK(lk_dir_counters(d)->queue_drops == 2 && lk_dir_counters(d)->queue_drop_bytes == 2000 &&
	      lk_dir_counters(d)->queue_max_packets == 3, "counted");
	/* Once the queue has drained, a packet is served at once again. */
	CHECK(lk_dir_push(d, 10 * MS, payload, 1000, 0, &r[0]) == LK_PASS && r[0].wait_ns == 0 &&
	      r[0].queue_packets == 0, "an idle link");
	lk_dir_free(d);
}

static void test_byte_queue(void)
{
	struct lk_config c = link_of(8000000, 0, 0);
	struct lk_dir *d;
	int passed = 0;

	c.queue_bytes = 2500;
	d = lk_dir_new(&c, 1);
	for (int i = 0; i < 10; i++)
		passed += lk_dir_push(d, 0, payload, 1000, 0, NULL) == LK_PASS;
	CHECK(passed == 3, "one in service and the two that fit in 2500 B: %d", passed);
	CHECK(lk_dir_counters(d)->queue_max_bytes == 2000, "peak %lu", lk_dir_counters(d)->queue_max_bytes);
	lk_dir_free(d);
}

static double loss_rate(struct lk_loss loss, uint64_t seed, int n, double *mean_burst)
{
	struct lk_config c = link_of(0, 0, 0);
	struct lk_dir *d;
	int lost = 0, bursts = 0, in_burst = 0;

	c.loss = loss;
	d = lk_dir_new(&c, seed);
	for (int i = 0; i < n; i++) {
		int gone = lk_dir_push(d, i, payload, 100, 0, NULL) == LK_RANDOM_LOSS;
		struct lk_packet *p = lk_dir_pop_due(d, i);

		free(p);
		lost += gone;
		bursts += gone && !in_burst;
		in_burst = gone;
	}
	CHECK(lk_dir_counters(d)->random_losses == (uint64_t)lost, "counted");
	lk_dir_free(d);
	*mean_burst = bursts ? (double)lost / bursts : 0;
	return (double)lost / n;
}

static void test_random_loss(void)
{
	int n = 100000;
	double burst, burst2;
	double bernoulli = loss_rate((struct lk_loss){.p = 0.1}, 7, n, &burst);
	double ge = loss_rate((struct lk_loss){.ge = 1, .p = 0.05, .r = 0.2, .bad = 1, .good = 0}, 7, n, &burst2);

	CHECK(fabs(bernoulli - 0.1) < 5 * sqrt(0.1 * 0.9 / n), "Bernoulli 10%%: %f", bernoulli);
	CHECK(burst < 1.2, "Bernoulli losses mostly single: %f", burst);
	CHECK(fabs(ge - 0.2) < 0.02, "Gilbert-Elliott 5%%/20%%: stationary 20%%, %f", ge);
	CHECK(burst2 > 4 && burst2 < 6, "its bursts last 1/R = 5 on average: %f", burst2);
	CHECK(loss_rate((struct lk_loss){.p = 0.1}, 7, n, &burst2) == bernoulli, "the same seed, the same losses");
	CHECK(loss_rate((struct lk_loss){.p = 0.1}, 8, n, &burst2) != bernoulli, "another seed, others");
}

static void test_jitter_bounded_and_in_order(void)
{
	struct lk_config c = link_of(0, 20 * MS, 0);
	struct lk_dir *d;
	int64_t due[2000];
	int ordered = 1, bounded = 1;

	c.jitter_ns = 5 * MS;
	d = lk_dir_new(&c, 3);
	for (int i = 0; i < 2000; i++)
		lk_dir_push(d, i * 500 * US, payload, 100, 0, NULL);
	CHECK(drain(d, due, 2000) == 2000, "all through");
	for (int i = 0; i < 2000; i++) {
		int64_t delay = due[i] - i * 500 * US;

		bounded &= delay >= 20 * MS && delay <= 25 * MS + 1;
		ordered &= i == 0 || due[i] >= due[i - 1];
	}
	CHECK(bounded, "every delay within [20, 25] ms");
	CHECK(ordered, "never reordered");
	lk_dir_free(d);
}

static void test_refusals_and_overflow(void)
{
	struct lk_config c = link_of(0, MS, 0);
	struct lk_dir *d;
	struct lk_record r;

	c.mtu = 576;
	c.held_max_bytes = 2000;
	d = lk_dir_new(&c, 1);
	CHECK(lk_dir_push(d, 0, payload, 577, 0, &r) == LK_TOO_BIG && r.reason == LK_TOO_BIG, "over the MTU");
	CHECK(lk_dir_push(d, 0, payload, 100, -1, NULL) == LK_UNROUTABLE, "nowhere to go");
	for (int i = 0; i < 4; i++)
		lk_dir_push(d, 0, payload, 500, 0, NULL);
	CHECK(lk_dir_push(d, 0, payload, 500, 0, NULL) == LK_OVERFLOW, "more than held_max in flight");
	CHECK(lk_dir_held(d) == 4, "held %lu", lk_dir_held(d));
	{
		struct lk_counters *k = lk_dir_counters(d);

		CHECK(k->packets_in == 7 && k->too_big == 1 && k->unroutable == 1 && k->overflow == 1,
		      "every packet counted once");
	}
	lk_dir_free(d);                            /* frees what is still in flight (ASan checks) */
}

static void test_reverse_and_bottleneck_position(void)
{
	struct lk_config c = link_of(8000000, 30 * MS, 0);
	struct lk_dir *d;
	int64_t due[2];

	c.hops = 3;
	c.bottleneck = 0;                          /* the first hop forward, the last one back */
	c.reverse = 1;
	d = lk_dir_new(&c, 1);
	lk_dir_push(d, 0, payload, 1000, 0, NULL);
	lk_dir_push(d, 0, payload, 1000, 0, NULL);
	/* Back, the link is the last stage: the two arrive there together after 20 ms
	 * of the other hops, and leave 1 ms apart after their serialisation. */
	CHECK(drain(d, due, 2) == 2 && due[0] == 31 * MS && due[1] == 32 * MS,
	      "%lld %lld", (long long)due[0], (long long)due[1]);
	lk_dir_free(d);
}

static void test_late_quantiles(void)
{
	struct lk_counters c;

	memset(&c, 0, sizeof(c));
	CHECK(lk_late_quantile(&c, 0.5) == 0, "empty");
	c.late[0] = 98, c.late[5] = 1, c.late[LK_LATE_BINS] = 1;
	CHECK(lk_late_quantile(&c, 0.5) == 10 && lk_late_quantile(&c, 0.99) == 60, "%f %f",
	      lk_late_quantile(&c, 0.5), lk_late_quantile(&c, 0.99));
}

int main(void)
{
	test_delay_only();
	test_hops_share_the_delay();
	test_serialisation_and_drop_tail();
	test_byte_queue();
	test_random_loss();
	test_jitter_bounded_and_in_order();
	test_refusals_and_overflow();
	test_reverse_and_bottleneck_position();
	test_late_quantiles();
	return CHECK_SUMMARY();
}
