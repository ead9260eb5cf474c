/* The per-packet log's writer (linkem --log): records buffered in memory and written by
 * a thread of its own, so that a slow disk (a writeback stall) never holds up the
 * packets. When the writer falls LOG_BUFFERS buffers behind, a full buffer's records
 * are dropped and counted (lost), never silently. The file: a 16-byte header (the
 * magic "LINKEMLG", the version and the record size as u32) then the records.
 *
 *   struct linklog *l = linklog_open(path);        NULL: errno says why
 *   lk_dir_push(d, now, data, len, out, linklog_next(l));  linklog_commit(l);
 *   linklog_flush(l);                               hand what is buffered to the writer
 *   linklog_finish(l);                              everything written, the file closed
 *   linklog_lost(l), linklog_write_errors(l)        what did not reach the file (also after)
 */
#ifndef LINKEM_LINKLOG_H
#define LINKEM_LINKLOG_H

#include <stdint.h>

#include "core.h"

struct linklog;

struct linklog *linklog_open(const char *path);
struct lk_record *linklog_next(struct linklog *l);
void linklog_commit(struct linklog *l);
void linklog_flush(struct linklog *l);
void linklog_finish(struct linklog *l);
uint64_t linklog_lost(struct linklog *l);
uint64_t linklog_write_errors(struct linklog *l);

#endif
