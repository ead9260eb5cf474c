/* Unit tests of the per-packet log's writer (linklog.h): the header first, records
 * written in order by its thread whatever the buffers' boundaries; nothing lost when
 * the writer keeps up, and when it cannot (records pushed as fast as a loop can),
 * whole buffers dropped and counted, the rest in order. Built with ASan and UBSan by
 * `make test`; run without root. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "linklog.h"

#define BATCH 8192                      /* linklog.c's records per buffer */

/* n records through the writer (a flush after `flush_at` of them; `pace`: a pause
 * after each buffer, so that the writer keeps up), read back; what was lost. */
static uint64_t write_and_read(const char *path, long n, long flush_at, int pace)
{
	struct linklog *l = linklog_open(path);
	FILE *f;
	char magic[8];
	unsigned header[2];
	struct lk_record r;
	long got = 0, in_order = 1, last = -1;
	uint64_t lost;

	CHECK(l != NULL, "opened %s", path);
	if (!l)
		return 0;
	for (long i = 0; i < n; i++) {
		struct lk_record *slot = linklog_next(l);

		*slot = (struct lk_record){.arrival_ns = i, .departure_ns = 2 * i, .bytes = (uint32_t)(i % 1500)};
		linklog_commit(l);
		if (i + 1 == flush_at)
			linklog_flush(l);
		if (pace && (i + 1) % BATCH == 0)
			usleep(20000);
	}
	linklog_finish(l);
	lost = linklog_lost(l);
	CHECK(linklog_write_errors(l) == 0, "errors %lu", (unsigned long)linklog_write_errors(l));
	f = fopen(path, "rb");
	CHECK(f && fread(magic, 1, 8, f) == 8 && !memcmp(magic, "LINKEMLG", 8), "the magic first");
	CHECK(f && fread(header, 4, 2, f) == 2 && header[0] == 1 && header[1] == sizeof(r), "version 1, 40 bytes");
	while (f && fread(&r, sizeof(r), 1, f) == 1) {
		in_order &= r.arrival_ns > last && r.departure_ns == 2 * r.arrival_ns &&
			    r.bytes == (uint32_t)(r.arrival_ns % 1500);
		last = r.arrival_ns;
		got++;
	}
	CHECK(got + (long)lost == n && in_order, "%ld of %ld records back (%lu lost), in order: %ld", got, n,
	      (unsigned long)lost, in_order);
	CHECK(lost % BATCH == 0 || flush_at >= 0, "whole buffers dropped: %lu", (unsigned long)lost);
	if (f)
		fclose(f);
	free(l);
	return lost;
}

int main(void)
{
	char path[] = "/tmp/linklog-test-XXXXXX";
	int fd = mkstemp(path);

	if (fd < 0)
		return perror("mkstemp"), 2;
	CHECK(write_and_read(path, 0, -1, 1) == 0, "the header alone");
	CHECK(write_and_read(path, BATCH, -1, 1) == 0, "exactly one buffer");
	CHECK(write_and_read(path, 20 * BATCH + 5, 12345, 1) == 0, "a writer that keeps up loses nothing");
	write_and_read(path, 200 * BATCH, -1, 0);          /* faster than any disk: counted, in order */
	CHECK(linklog_open("/nonexistent-dir/x.linklog") == NULL, "a directory that is not there");
	remove(path);
	return CHECK_SUMMARY();
}
