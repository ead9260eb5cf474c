// SPDX-License-Identifier: GPL-2.0-or-later
/* Trace files of docs/trace-format.md. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
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

/* The bytes written before an error (errno says which); n if none. */
static size_t write_all(int fd, const void *p, size_t n)
{
	size_t done = 0;

	while (done < n) {
		ssize_t k = write(fd, (const char *)p + done, n - done);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			if (k == 0)
				errno = EIO;
			break;
		}
		done += k;
	}
	return done;
}

static int pwrite_all(int fd, const void *p, size_t n, off_t at)
{
	size_t done = 0;

	while (done < n) {
		ssize_t k = pwrite(fd, (const char *)p + done, n - done, at + done);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		done += k;
	}
	return 0;
}

/* ----------------------------------------------------------------- files --- */

/* Why open_private refused a file (errno's text otherwise). */
static const char *refusal;

const char *open_private_error(void)
{
	return refusal ? refusal : strerror(errno);
}

static int refuse(const char *why)
{
	refusal = why;
	return -1;
}

int open_private(const char *path, bool replace)
{
	struct stat st, opened;
	int fd;

	refusal = NULL;
	/* A new file is ours alone; O_NOFOLLOW: root must not write through a user's link. */
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd >= 0 || errno != EEXIST)
		return fd;
	if (lstat(path, &st))
		return -1;
	if (S_ISLNK(st.st_mode))
		return refuse("is a symbolic link (not followed)");
	if (!S_ISREG(st.st_mode))
		return refuse("exists and is not a regular file");
	if (st.st_nlink > 1)
		return refuse("exists with other hard links (not replaced)");
	if (st.st_size && !replace)
		return refuse("exists and is not empty (--force replaces it)");
	/* O_NONBLOCK: a FIFO swapped in since lstat must not block the open. */
	fd = open(path, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (fstat(fd, &opened) || opened.st_dev != st.st_dev || opened.st_ino != st.st_ino) {
		close(fd);
		return refuse("was replaced while being opened");
	}
	if (ftruncate(fd, 0) || fchmod(fd, 0600) || fcntl(fd, F_SETFL, 0)) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	return fd;
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

/* Write the header of file number `segment` to fd; its length, or 0 on failure. */
static size_t write_header(const struct trace_writer *w, int fd, __u32 segment, __u64 *anchor)
{
	const struct trace_header *h = w->header;
	size_t most = 16 + (strlen(h->hostname) + strlen(h->producer) + strlen(h->kernel) +
			    strlen(h->filter)) / 8 + 8;
	struct header_buf b = { calloc(most, h->record_size), 0, h->record_size, monotonic_ns() };
	__u64 wall = realtime_ns(), sysinfo = (__u64)MAGNET_FORMAT_VERSION << 32 | h->record_size;
	size_t meta, len;

	if (!b.rec)
		return 0;
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
	put_u64(&b, MAGNET_META_SEGMENT_INDEX, segment);
	meta = b.n - 1;
	put_u64(&b, MAGNET_META_END, meta);
	*anchor = b.anchor;
	len = b.n * b.size;
	if (write_all(fd, b.rec, len) != len)
		len = 0;
	free(b.rec);
	return len;
}

/* ------------------------------------------------------------- segments --- */

/* The file name of the current segment: -o with strftime patterns expanded;
 * a later segment that would reuse the name gets ".N" before the extension. */
static void segment_path(struct trace_writer *w, __u32 segment, char *out, size_t size)
{
	char expanded[PATH_MAX];
	time_t now = time(NULL);
	struct tm tm;
	const char *slash, *dot;

	localtime_r(&now, &tm);
	if (!strchr(w->pattern, '%') || !strftime(expanded, sizeof(expanded), w->pattern, &tm))
		snprintf(expanded, sizeof(expanded), "%s", w->pattern);
	if (segment == 0 || strcmp(expanded, w->expanded)) {
		snprintf(w->expanded, sizeof(w->expanded), "%s", expanded);
		snprintf(out, size, "%s", expanded);
		return;
	}
	slash = strrchr(expanded, '/');
	dot = strrchr(expanded, '.');
	if (!dot || (slash && dot < slash) || dot == (slash ? slash + 1 : expanded))
		dot = expanded + strlen(expanded);
	snprintf(out, size, "%.*s.%u%s", (int)(dot - expanded), expanded, segment, dot);
}

/* Open file number `segment` and write its header; only then does it become
 * the writer's file. A file left without a whole header is removed: it would
 * be no trace at all. */
static int open_segment(struct trace_writer *w, __u32 segment)
{
	char path[PATH_MAX];
	size_t header;
	__u64 anchor;
	int fd, e;

	segment_path(w, segment, path, sizeof(path));
	snprintf(w->failed_path, sizeof(w->failed_path), "%s", path);
	fd = open_private(path, w->force);
	if (fd < 0)
		return -1;
	header = fchmod(fd, 0600) ? 0 : write_header(w, fd, segment, &anchor);
	if (!header) {
		e = errno;
		unlink(path);
		close(fd);
		errno = e;
		return -1;
	}
	w->fd = fd;
	w->segment = segment;
	w->opened_ns = anchor;
	w->bytes = w->header_bytes = header;
	snprintf(w->path, sizeof(w->path), "%s", path);
	w->failed_path[0] = 0;
	return 0;
}

int tw_open(struct trace_writer *w, const char *pattern, const struct trace_header *h, bool force)
{
	memset(w, 0, sizeof(*w));
	w->fd = -1;
	w->force = force;
	w->pattern = pattern;
	w->header = h;
	w->cap = WRITE_BUFFER / h->record_size * h->record_size;
	w->buf = malloc(w->cap);
	if (!w->buf)
		return -1;
	return open_segment(w, 0);
}

static int failed(struct trace_writer *w)
{
	errno = w->error;
	return -1;
}

int tw_flush(struct trace_writer *w)
{
	size_t done;

	if (w->error)
		return failed(w);
	if (!w->len)
		return 0;
	done = write_all(w->fd, w->buf, w->len);
	w->bytes += done;
	if (done < w->len) {
		/* Keep the buffer: tw_end_early counts what did not reach the file. */
		w->flushed = done;
		w->error = errno ? errno : EIO;
		return -1;
	}
	w->len = 0;
	return 0;
}

int tw_append(struct trace_writer *w, const void *record)
{
	size_t size = w->header->record_size;

	if (w->error)
		return failed(w);
	if (w->len + size > w->cap && tw_flush(w))
		return -1;
	memcpy(w->buf + w->len, record, size);
	w->len += size;
	return 0;
}

static void lost_record(char *rec, __u64 sockid, __u64 count)
{
	struct magnet_core *c = (struct magnet_core *)rec;

	memset(rec, 0, MAGNET_EXT_RECORD_SIZE);
	c->sockid = sockid;
	c->timestamp = monotonic_ns();
	c->event = MAGNET_LOST;
	c->size = count > INT32_MAX ? INT32_MAX : count;
}

int tw_append_lost(struct trace_writer *w, __u64 count)
{
	char rec[MAGNET_EXT_RECORD_SIZE];

	while (count) {
		__u64 n = count > INT32_MAX ? INT32_MAX : count;

		lost_record(rec, 0, n);
		if (tw_append(w, rec))
			return -1;
		count -= n;
	}
	return 0;
}

/* ------------------------------------------------------------ ending early --- */

/* Count the records of buf[from, to) into *d: event records, and LOST counts. */
static void count_records(const struct trace_writer *w, size_t from, size_t to, struct tw_dropped *d)
{
	size_t size = w->header->record_size;

	for (size_t at = from; at + size <= to; at += size) {
		const struct magnet_core *r = (const struct magnet_core *)(w->buf + at);

		if (r->event == MAGNET_LOST)
			d->lost += (__u32)r->size;
		else
			d->records++;
	}
}

static __u64 lost_total(__u64 lost, const struct tw_dropped *d)
{
	return lost + d->records + d->lost;
}

/* No room for one more record (a full disk): the closing record takes the
 * place of the last one, which needs no new space. */
static int overwrite_last(struct trace_writer *w, __u64 end, __u64 lost, struct tw_dropped *d)
{
	size_t size = w->header->record_size;
	char rec[MAGNET_EXT_RECORD_SIZE];
	const struct magnet_core *last = (const struct magnet_core *)rec;

	if (end < w->header_bytes + size) {
		ftruncate(w->fd, end);
		return -1;
	}
	if (pread(w->fd, rec, size, end - size) != (ssize_t)size)
		return -1;
	if (last->event == MAGNET_LOST)
		d->lost += (__u32)last->size;
	else
		d->records++;
	lost_record(rec, MAGNET_LOST_ENDED_EARLY, lost_total(lost, d));
	if (pwrite_all(w->fd, rec, size, end - size) || ftruncate(w->fd, end))
		return -1;
	return 0;
}

int tw_end_early(struct trace_writer *w, __u64 lost, struct tw_dropped *d)
{
	size_t size = w->header->record_size, whole;
	char rec[MAGNET_EXT_RECORD_SIZE];
	__u64 end;

	memset(d, 0, sizeof(*d));
	if (w->fd < 0)
		return -1;
	if (tw_flush(w)) {
		/* The file ends in buf[0, flushed), maybe in the middle of a record. */
		whole = w->flushed / size * size;
		count_records(w, whole, w->len, d);
		end = w->bytes - (w->flushed - whole);
	} else {
		end = w->bytes;
	}
	w->len = 0;
	lost_record(rec, MAGNET_LOST_ENDED_EARLY, lost_total(lost, d));
	if (pwrite_all(w->fd, rec, size, end) || ftruncate(w->fd, end + size)) {
		if (overwrite_last(w, end, lost, d))
			return -1;
		end -= size;
	}
	w->bytes = end + size;
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

/* The old file stays open until the new one has its header, so that a
 * failure leaves a file to end early in. */
int tw_rotate(struct trace_writer *w)
{
	int old_fd = w->fd;
	__u64 old_bytes;

	if (tw_flush(w))
		return -1;
	old_bytes = w->bytes;
	if (open_segment(w, w->segment + 1)) {
		w->error = errno;
		return -1;
	}
	w->bytes_closed += old_bytes;
	return fsync(old_fd) | close(old_fd) ? -1 : 0;
}

int tw_close(struct trace_writer *w)
{
	int err = w->fd >= 0 ? close_segment(w) : 0;

	free(w->buf);
	w->buf = NULL;
	return err;
}
