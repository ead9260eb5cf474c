/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Magnet traces from ns-3: read an application's demand (the SOCK_SEND
 * stream of a magnet trace, either byte order) and write simulated events
 * in the same format, so that magnetlib analyses simulated and real stacks
 * alike.  The format is docs/trace-format.md; the record layout comes from
 * the generated capture/magnet_format.h.
 */
#ifndef MAGNET_TRACE_H
#define MAGNET_TRACE_H

#include "magnet_format.h"

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace ns3
{

/** One application write: when (ns since the demand's first write) and how many bytes. */
struct MagnetDemandEvent
{
    int64_t timeNs;
    uint64_t size; //!< 64-bit: a write of a demand given in memory may exceed 2^32 bytes

    bool operator==(const MagnetDemandEvent&) const = default;
};

using MagnetDemand = std::vector<MagnetDemandEvent>;

/** Total bytes of a demand. */
uint64_t MagnetDemandBytes(const MagnetDemand& demand);

/** Bad input: what() is one line, "PATH: problem". */
class MagnetTraceError : public std::runtime_error
{
  public:
    MagnetTraceError(const std::string& path, const std::string& problem);
};

/**
 * Read the demand of one stream from a magnet trace: its SOCK_SEND records
 * that moved data, in time order, times relative to the first.  Either byte
 * order and clock changes are handled.  `sockid` 0 means "the only stream
 * that sends"; a trace with several asks for one.  Throws MagnetTraceError.
 * `lost`, if given, receives the records the capture reported lost (LOST
 * records): the demand may then lack writes.
 */
MagnetDemand ReadMagnetDemand(const std::string& path, uint64_t sockid = 0, uint64_t* lost = nullptr);

/**
 * Write `values` as a NumPy .npy file (one dimension, unsigned 32-bit, this
 * machine's byte order), atomically.  Throws MagnetTraceError.
 */
void WriteNpyU32(const std::string& path, const std::vector<uint32_t>& values);

/**
 * Writes a magnet trace (native byte order, 24-byte records, nanosecond
 * clock): the header at once, records as they come, through a buffer.
 * The file appears complete (renamed from a temporary, mode 0600) on
 * Close(); destroyed without Close() it leaves nothing behind.
 */
class MagnetTraceWriter
{
  public:
    /**
     * `clock` is a MAGNET_CLOCK_* value, `eventMask` the MAGNET_BIT_* of the
     * events recorded, `filter` says in words what was (not) recorded,
     * `hostname` (if any) which host the trace is of.
     */
    MagnetTraceWriter(const std::string& path,
                      uint32_t clock,
                      const std::string& producer,
                      uint64_t eventMask,
                      const std::string& filter,
                      const std::string& hostname = "");
    ~MagnetTraceWriter();
    MagnetTraceWriter(const MagnetTraceWriter&) = delete;
    MagnetTraceWriter& operator=(const MagnetTraceWriter&) = delete;

    /** Append one record; `ns` must be > 0 (timestamps are never 0). */
    void Record(uint64_t sockid, int64_t ns, uint32_t event, int32_t size)
    {
        m_buffer.push_back({sockid, static_cast<uint64_t>(ns), event, size});
        if (m_buffer.size() == kBufferRecords)
        {
            Flush();
        }
    }

    /** Flush, fsync and move the file into place. */
    void Close();

    uint64_t RecordsWritten() const
    {
        return m_written + m_buffer.size();
    }

    const std::string& Path() const
    {
        return m_path;
    }

  private:
    static constexpr size_t kBufferRecords = 1 << 16;
    void Flush();
    void WriteMeta(uint32_t key, uint64_t value);
    void WriteText(uint32_t key, const std::string& text);

    std::string m_path;
    std::string m_tmp;
    int m_fd{-1};
    std::vector<magnet_core> m_buffer;
    uint64_t m_written{0};
    uint32_t m_metaRecords{0};
};

} // namespace ns3

#endif /* MAGNET_TRACE_H */
