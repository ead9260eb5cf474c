/* linkem's core: one direction of an emulated path, with no globals and no system
 * calls (time is an argument), so that it is tested without root or devices
 * (test_core.c) and the TUN/epoll main (linkem.c) stays thin.
 *
 *   struct lk_dir *d = lk_dir_new(&config, seed);
 *   lk_dir_push(d, now, data, len, out, &record);   a packet in (record: optional, the log's)
 *   while ((p = lk_dir_pop_due(d, now))) ...         the packets due out, in order
 *   lk_dir_next(d)                                    the time of the next event
 *   lk_dir_free(d);
 *
 * A direction is a pipeline of stages, one per hop: an optional link (drop-tail
 * queue in bytes and/or packets, serialisation at the rate, random loss after
 * it) then the hop's share of the one-way delay (plus up to the jitter, order
 * kept). Every packet enters at the path's start, so every stage sees its
 * arrivals in time order and a packet's exit from each stage is known when it
 * arrives: push computes it through the stages at once; the packet then waits,
 * in delivery order, until pop_due hands it out. All times are ns on one clock.
 */
#ifndef LINKEM_CORE_H
#define LINKEM_CORE_H

#include <stdint.h>

#define LK_MAX_HOPS 64
#define LK_LATE_BINS 2000                  /* lateness histogram: 10 us bins up to 20 ms */
#define LK_LATE_BIN_NS 10000

/* Bernoulli (ge == 0: loss probability p) or Gilbert-Elliott: in state good a
 * packet is lost with probability `good`, in bad with `bad`; after each packet
 * good -> bad with probability p, bad -> good with r. */
struct lk_loss {
	int ge;
	double p, r, bad, good;
};

struct lk_config {
	uint64_t rate_bps;                     /* the bottleneck's; 0: no link (delays only) */
	uint64_t queue_bytes, queue_packets;   /* drop-tail limits of the waiting packets; 0: none */
	struct lk_loss loss;
	int64_t delay_ns, jitter_ns;           /* the whole path's one-way delay; jitter at the bottleneck */
	int hops, bottleneck;                  /* stages, and which has the link (0-based) */
	int reverse;                           /* the hops in the other order (the answers' way) */
	uint32_t mtu;                          /* larger packets are refused */
	uint64_t held_max_bytes;               /* never hold more in flight (0: 1 GiB) */
};

/* Why a packet did not get through (0: it did), as counted and logged. */
enum lk_reason { LK_PASS, LK_QUEUE_DROP, LK_RANDOM_LOSS, LK_TOO_BIG, LK_UNROUTABLE, LK_OVERFLOW };

struct lk_counters {
	uint64_t packets_in, bytes_in, forwarded, forwarded_bytes;
	uint64_t queue_drops, queue_drop_bytes, random_losses, random_loss_bytes;
	uint64_t too_big, unroutable, overflow, write_errors;
	uint64_t queue_max_bytes, queue_max_packets;
	uint64_t late[LK_LATE_BINS + 1];       /* delivery - due, 10 us bins; last: beyond */
	int64_t late_max;
};

/* One packet as the per-packet log records it, also its layout on disk (40 bytes,
 * native byte order): when it arrived, when it leaves the path (-1: it does not),
 * how long it waited in the bottleneck's queue before its serialisation began (-1:
 * it never joined), its IP bytes, the queue it found there (packets and bytes
 * waiting, the one being serialised not counted) and why it was dropped. */
struct lk_record {
	int64_t arrival_ns, departure_ns, wait_ns;
	uint32_t bytes, queue_packets, queue_bytes;
	uint8_t reason;                        /* enum lk_reason */
	uint8_t pad[3];
};
_Static_assert(sizeof(struct lk_record) == 40, "the log's record layout");

struct lk_packet {
	int64_t due;
	int out;                               /* where it goes (the caller's number) */
	uint32_t len;
	unsigned char data[];
};

struct lk_dir;

struct lk_dir *lk_dir_new(const struct lk_config *config, uint64_t seed);
void lk_dir_free(struct lk_dir *d);

/* A packet of `len` bytes arriving at `now`, to be handed out for `out` (< 0: no
 * way to deliver it, counted as unroutable); why it will not get through, if so.
 * `record` (may be NULL) gets its log record. The data is copied. */
enum lk_reason lk_dir_push(struct lk_dir *d, int64_t now, const unsigned char *data, uint32_t len,
			   int out, struct lk_record *record);

/* The next packet due by `now` (its lateness counted), or NULL; free() it when done. */
struct lk_packet *lk_dir_pop_due(struct lk_dir *d, int64_t now);

/* The due time of the next packet, INT64_MAX when none is in flight. */
int64_t lk_dir_next(const struct lk_dir *d);

/* Packets in flight; the counters (the caller adds forwarded or write_errors for
 * what it hands out). */
uint64_t lk_dir_held(const struct lk_dir *d);
struct lk_counters *lk_dir_counters(struct lk_dir *d);

/* The q-quantile of the lateness histogram, us (upper bin edge; 0 when empty). */
double lk_late_quantile(const struct lk_counters *c, double q);

#endif
