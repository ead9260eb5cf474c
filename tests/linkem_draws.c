/* linkem's own loss decisions, for comparing ns-3's MagnetLinkemLossModel with them:
 * N packets through one direction of linkem's core (core.c: no link, so none waits or
 * is dropped by a queue; the loss and the jitter as given), '1' for each it loses,
 * '0' for each it passes, on one line.
 *
 *   linkem_draws SEED N P            Bernoulli
 *   linkem_draws SEED N P R BAD GOOD Gilbert-Elliott
 *   (JITTER_NS in the environment: that jitter too, drawn from the same generator)
 */
#include <stdio.h>
#include <stdlib.h>

#include "core.h"

int main(int argc, char **argv)
{
	struct lk_config c = {.hops = 1, .mtu = 1500};
	const char *jitter = getenv("JITTER_NS");
	unsigned char packet[100] = {0};
	struct lk_dir *d;
	long n;

	if (argc != 4 && argc != 7) {
		fprintf(stderr, "usage: linkem_draws SEED N P [R BAD GOOD]\n");
		return 2;
	}
	n = atol(argv[2]);
	c.loss.p = atof(argv[3]);
	if (argc == 7)
		c.loss = (struct lk_loss){.ge = 1, .p = c.loss.p, .r = atof(argv[4]),
					  .bad = atof(argv[5]), .good = atof(argv[6])};
	c.jitter_ns = jitter ? atoll(jitter) : 0;
	d = lk_dir_new(&c, strtoull(argv[1], NULL, 10));
	if (!d)
		return 1;
	for (long i = 0; i < n; i++) {
		enum lk_reason why = lk_dir_push(d, i * 1000000, packet, sizeof(packet), 0, NULL);
		struct lk_packet *p;

		putchar(why == LK_RANDOM_LOSS ? '1' : '0');
		while ((p = lk_dir_pop_due(d, i * 1000000 + 2000000000)))
			free(p);
	}
	putchar('\n');
	lk_dir_free(d);
	return 0;
}
