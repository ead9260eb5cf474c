// SPDX-License-Identifier: GPL-2.0-or-later
/* Trace files of docs/trace-format.md. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "writer.h"
#include "magnet_format.h"

#define WRITE_BUFFER (4u << 20)

__u64 monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static __u64 realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static int write_all(int fd, const void *p, size_t n)
{
	while (n) {
		ssize_t k = write(fd, p, n);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -1;
		p = (const char *)p + k;
		n -= k;
	}
	return 0;
}

/* ---------------------------------------------------------------- header --- */

struct header_buf {
	char *rec;			/* records being built */
	size_t n, size;			/* records, record size */
	__u64 anchor;
};

static void put(struct header_buf *b, __u32 event, __s32 size, const void *sockid8)
{
	struct magnet_core *c = (struct magnet_core *)(b->rec + b->n++ * b->size);

	memset(c, 0, b->size);
	memcpy(&c->sockid, sockid8, 8);
	c->timestamp = b->anchor;
	c->event = event;
	c->size = size;
}

static void put_u64(struct header_buf *b, int key, __u64 value)
{
	put(b, MAGNET_META, key, &value);
}

static void put_text(struct header_buf *b, int key, const char *text)
{
	size_t len = strlen(text);

	for (size_t i = 0; i == 0 || i * 8 < len; i++) {
		char chunk[8] = {0};

		memcpy(chunk, text + i * 8, len - i * 8 < 8 ? len - i * 8 : 8);
		put(b, MAGNET_META, key | (int)(i << MAGNET_META_CHUNK_SHIFT), chunk);
	}
}

static int write_header(struct trace_writer *w)
{
	const struct trace_header *h = w->header;
	size_t most = 16 + (strlen(h->hostname) + strlen(h->producer) + strlen(h->kernel) +
			    strlen(h->filter)) / 8 + 8;
	struct header_buf b = { calloc(most, h->record_size), 0, h->record_size, monotonic_ns() };
	__u64 wall = realtime_ns(), sysinfo = (__u64)MAGNET_FORMAT_VERSION << 32 | h->record_size;
	size_t meta;
	int err;

	if (!b.rec)
		return -1;
	put(&b, MAGNET_SYSINFO, 1000000, &sysinfo);	/* ns clock: 1e6 kHz */
	put_u64(&b, MAGNET_META_WALL_ANCHOR_NS, wall);
	put_u64(&b, MAGNET_META_CLOCK_SOURCE, MAGNET_CLOCK_MONOTONIC);
	put_u64(&b, MAGNET_META_HOST_ID, h->host_id);
	put_text(&b, MAGNET_META_HOSTNAME, h->hostname);
	put_text(&b, MAGNET_META_PRODUCER, h->producer);
	put_text(&b, MAGNET_META_KERNEL, h->kernel);
	put_u64(&b, MAGNET_META_BUFFER_BYTES, h->buffer_bytes);
	put_u64(&b, MAGNET_META_DRAIN_DELAY_US, h->drain_delay_us);
	put_u64(&b, MAGNET_META_EVENT_MASK, h->event_mask);
	put_u64(&b, MAGNET_META_EXT_MASK, h->ext_mask);
	put_text(&b, MAGNET_META_FILTER, h->filter);
	put_u64(&b, MAGNET_META_SEGMENT_INDEX, w->segment);
	meta = b.n - 1;
	put_u64(&b, MAGNET_META_END, meta);
	w->opened_ns = b.anchor;
	err = write_all(w->fd, b.rec, b.n * b.size);
	if (!err)
		w->bytes = b.n * b.size;
	free(b.rec);
	return err;
}

/* ------------------------------------------------------------- segments --- */

/* The file name of the current segment: -o with strftime patterns expanded;
 * a later segment that would reuse the name gets ".N" before the extension. */
static void segment_path(struct trace_writer *w, char *out, size_t size)
{
	char expanded[PATH_MAX];
	time_t now = time(NULL);
	struct tm tm;
	const char *slash, *dot;

	localtime_r(&now, &tm);
	if (!strchr(w->pattern, '%') || !strftime(expanded, sizeof(expanded), w->pattern, &tm))
		snprintf(expanded, sizeof(expanded), "%s", w->pattern);
	if (w->segment == 0 || strcmp(expanded, w->expanded)) {
		snprintf(w->expanded, sizeof(w->expanded), "%s", expanded);
		snprintf(out, size, "%s", expanded);
		return;
	}
	slash = strrchr(expanded, '/');
	dot = strrchr(expanded, '.');
	if (!dot || (slash && dot < slash) || dot == (slash ? slash + 1 : expanded))
		dot = expanded + strlen(expanded);
	snprintf(out, size, "%.*s.%u%s", (int)(dot - expanded), expanded, w->segment, dot);
}

static int open_segment(struct trace_writer *w)
{
	char path[PATH_MAX];

	segment_path(w, path, sizeof(path));
	w->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (w->fd < 0)
		return -1;
	snprintf(w->path, sizeof(w->path), "%s", path);
	if (fchmod(w->fd, 0600) || write_header(w)) {
		int e = errno;

		close(w->fd);
		w->fd = -1;
		errno = e;
		return -1;
	}
	return 0;
}

int tw_open(struct trace_writer *w, const char *pattern, const struct trace_header *h)
{
	memset(w, 0, sizeof(*w));
	w->pattern = pattern;
	w->header = h;
	w->cap = WRITE_BUFFER / h->record_size * h->record_size;
	w->buf = malloc(w->cap);
	if (!w->buf)
		return -1;
	return open_segment(w);
}

int tw_flush(struct trace_writer *w)
{
	if (!w->len)
		return 0;
	if (write_all(w->fd, w->buf, w->len))
		return -1;
	w->bytes += w->len;
	w->len = 0;
	return 0;
}

int tw_append(struct trace_writer *w, const void *record)
{
	size_t size = w->header->record_size;

	if (w->len + size > w->cap && tw_flush(w))
		return -1;
	memcpy(w->buf + w->len, record, size);
	w->len += size;
	return 0;
}

int tw_append_lost(struct trace_writer *w, __u64 count)
{
	char rec[MAGNET_EXT_RECORD_SIZE] = {0};
	struct magnet_core *c = (struct magnet_core *)rec;

	while (count) {
		__u64 n = count > 0x7fffffff ? 0x7fffffff : count;

		c->timestamp = monotonic_ns();
		c->event = MAGNET_LOST;
		c->size = n;
		if (tw_append(w, rec))
			return -1;
		count -= n;
	}
	return 0;
}

static int close_segment(struct trace_writer *w)
{
	int err = tw_flush(w);

	if (fsync(w->fd) && !err)
		err = -1;
	if (close(w->fd) && !err)
		err = -1;
	w->fd = -1;
	return err;
}

int tw_rotate(struct trace_writer *w)
{
	if (close_segment(w))
		return -1;
	w->segment++;
	return open_segment(w);
}

int tw_close(struct trace_writer *w)
{
	int err = w->fd >= 0 ? close_segment(w) : 0;

	free(w->buf);
	w->buf = NULL;
	return err;
}
