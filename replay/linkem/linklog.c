/* The per-packet log's writer (linklog.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "linklog.h"

#define LOG_VERSION 1
#define LOG_BATCH 8192                  /* records per buffer, per write() */
#define LOG_BUFFERS 8                   /* the writer may fall this many buffers behind */

/* A ring of buffers: [next_write, next_write + ready) are full and queued for the
 * writer (the first of them possibly being written); `filling` is the main thread's.
 * ready < LOG_BUFFERS always, so the buffer being filled is never one being written. */
struct linklog {
	int fd;
	struct lk_record *bufs[LOG_BUFFERS];
	size_t fill[LOG_BUFFERS];
	int filling, next_write, ready, stopping, finished;
	uint64_t lost, write_errors;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t writer;
};

static void *write_loop(void *arg)
{
	struct linklog *l = arg;

	pthread_mutex_lock(&l->mu);
	for (;;) {
		while (!l->ready && !l->stopping)
			pthread_cond_wait(&l->cv, &l->mu);
		if (!l->ready)
			break;
		int i = l->next_write;
		size_t bytes = l->fill[i] * sizeof(struct lk_record);

		pthread_mutex_unlock(&l->mu);
		if (write(l->fd, l->bufs[i], bytes) != (ssize_t)bytes)
			__atomic_add_fetch(&l->write_errors, 1, __ATOMIC_RELAXED);
		pthread_mutex_lock(&l->mu);
		l->fill[i] = 0;
		l->next_write = (i + 1) % LOG_BUFFERS;
		l->ready--;
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

struct linklog *linklog_open(const char *path)
{
	uint32_t header[4] = {0, 0, LOG_VERSION, sizeof(struct lk_record)};
	struct linklog *l = calloc(1, sizeof(*l));
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	memcpy(header, "LINKEMLG", 8);
	if (!l || fd < 0 || write(fd, header, sizeof(header)) != sizeof(header))
		goto fail;
	l->fd = fd;
	for (int i = 0; i < LOG_BUFFERS; i++)
		if (!(l->bufs[i] = malloc(LOG_BATCH * sizeof(struct lk_record))))
			goto fail;
	pthread_mutex_init(&l->mu, NULL);
	pthread_cond_init(&l->cv, NULL);
	if ((errno = pthread_create(&l->writer, NULL, write_loop, l)))
		goto fail;
	return l;
fail:
	if (fd >= 0)
		close(fd);
	if (l)
		for (int i = 0; i < LOG_BUFFERS; i++)
			free(l->bufs[i]);
	free(l);
	return NULL;
}

struct lk_record *linklog_next(struct linklog *l)
{
	return &l->bufs[l->filling][l->fill[l->filling]];
}

/* The buffer being filled queued for the writer (or, the writer too far behind, its
 * records dropped and counted); an empty one is kept. */
static void hand_over(struct linklog *l)
{
	if (!l->fill[l->filling])
		return;
	pthread_mutex_lock(&l->mu);
	if (l->ready < LOG_BUFFERS - 1) {
		l->ready++;
		l->filling = (l->filling + 1) % LOG_BUFFERS;
		pthread_cond_signal(&l->cv);
	} else {
		l->lost += l->fill[l->filling];
		l->fill[l->filling] = 0;
	}
	pthread_mutex_unlock(&l->mu);
}

void linklog_commit(struct linklog *l)
{
	if (++l->fill[l->filling] == LOG_BATCH)
		hand_over(l);
}

void linklog_flush(struct linklog *l)
{
	if (!l->finished)
		hand_over(l);
}

void linklog_finish(struct linklog *l)
{
	if (l->finished)
		return;
	hand_over(l);
	pthread_mutex_lock(&l->mu);
	l->stopping = 1;
	pthread_cond_signal(&l->cv);
	pthread_mutex_unlock(&l->mu);
	pthread_join(l->writer, NULL);
	close(l->fd);
	for (int i = 0; i < LOG_BUFFERS; i++)
		free(l->bufs[i]);
	l->finished = 1;
}

uint64_t linklog_lost(struct linklog *l)
{
	uint64_t n;

	pthread_mutex_lock(&l->mu);
	n = l->lost;
	pthread_mutex_unlock(&l->mu);
	return n;
}

uint64_t linklog_write_errors(struct linklog *l)
{
	return __atomic_load_n(&l->write_errors, __ATOMIC_RELAXED);
}
