// SPDX-License-Identifier: GPL-2.0-or-later
/* The status file of a running capture. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "status.h"
#include "writer.h"

static char status_path[PATH_MAX];

void json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (; s && *s; s++) {
		unsigned char c = *s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static void field_u64(FILE *f, const char *name, __u64 v)
{
	fprintf(f, "  \"%s\": %llu,\n", name, (unsigned long long)v);
}

static void field_str(FILE *f, const char *name, const char *v)
{
	fprintf(f, "  \"%s\": ", name);
	json_string(f, v);
	fputs(",\n", f);
}

static void field_bool(FILE *f, const char *name, bool v)
{
	fprintf(f, "  \"%s\": %s,\n", name, v ? "true" : "false");
}

const char *status_write(const char *dir, const struct capture_status *s)
{
	char tmp[PATH_MAX + 8];
	struct timespec now;
	FILE *f;
	int fd;

	if (mkdir(dir, 0755) && errno != EEXIST)
		return NULL;
	snprintf(status_path, sizeof(status_path), "%s/magnet-read.%d.json", dir, (int)getpid());
	snprintf(tmp, sizeof(tmp), "%s.tmp", status_path);
	unlink(tmp);				/* a stale one, or whatever was put in its place */
	fd = open_private(tmp, false);		/* 0600: it names files and connections */
	f = fd < 0 ? NULL : fdopen(fd, "w");
	if (!f) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	clock_gettime(CLOCK_REALTIME, &now);
	fputs("{\n", f);
	field_u64(f, "pid", getpid());
	fprintf(f, "  \"started\": %.3f,\n  \"updated\": %.3f,\n", s->started,
		now.tv_sec + now.tv_nsec / 1e9);
	field_str(f, "output", s->output);
	field_u64(f, "segment", s->segment);
	field_u64(f, "records", s->records);
	field_u64(f, "lost", s->lost);
	field_u64(f, "lost_buffer_full", s->lost_buffer_full);
	field_u64(f, "lost_skipped_runs", s->lost_skipped_runs);
	field_u64(f, "bytes_written", s->bytes);
	field_u64(f, "buffer_bytes", s->buffer_bytes);
	field_u64(f, "drain_delay_us", s->drain_delay_us);
	field_bool(f, "drain_auto", s->drain_auto);
	field_bool(f, "no_drain", s->no_drain);
	field_str(f, "events", s->events);
	field_bool(f, "ext", s->ext);
	field_str(f, "filter", s->filter);
	fprintf(f, "  \"buffer_fill\": %.4f,\n  \"buffer_fill_peak\": %.4f\n}\n", s->fill, s->fill_peak);
	if (fclose(f) || rename(tmp, status_path)) {
		unlink(tmp);
		return NULL;
	}
	return status_path;
}

void status_remove(void)
{
	if (status_path[0])
		unlink(status_path);
}
