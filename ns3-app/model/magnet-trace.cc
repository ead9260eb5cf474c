/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "magnet-trace.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <memory>
#include <sstream>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace ns3
{

uint64_t
MagnetDemandBytes(const MagnetDemand& demand)
{
    uint64_t total = 0;
    for (const auto& e : demand)
    {
        total += e.size;
    }
    return total;
}

MagnetTraceError::MagnetTraceError(const std::string& path, const std::string& problem)
    : std::runtime_error(path + ": " + problem)
{
}

namespace
{

constexpr uint32_t kVersionShift = 32;
constexpr int64_t kNsPerKhzTick = 1000000; // ns per tick = 1e6 / kHz

bool
KnownEvent(uint32_t code)
{
    switch (code)
    {
    case MAGNET_SYSINFO:
    case MAGNET_META:
    case MAGNET_LOST:
    case MAGNET_SOCK_SEND:
    case MAGNET_SOCK_RECV:
    case MAGNET_TCP_SEND:
    case MAGNET_TCP_RECV:
    case MAGNET_TCP_RETRANS:
    case MAGNET_IP_SEND:
    case MAGNET_IP_RECV:
    case MAGNET_DEV_SEND:
    case MAGNET_DEV_RECV:
    case MAGNET_SCHED_SWITCH:
    case MAGNET_SCHED_FORK:
    case MAGNET_SCHED_EXIT:
    case MAGNET_SCHED_ENTER:
    case MAGNET_SCHED_LEAVE:
        return true;
    default:
        return false;
    }
}

/** A read-only memory map of a whole file. */
class MappedFile
{
  public:
    explicit MappedFile(const std::string& path)
    {
        int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0)
        {
            throw MagnetTraceError(path, std::strerror(errno));
        }
        struct stat st;
        if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        {
            close(fd);
            throw MagnetTraceError(path, "not a regular file");
        }
        m_size = static_cast<size_t>(st.st_size);
        if (m_size > 0)
        {
            m_base = mmap(nullptr, m_size, PROT_READ, MAP_PRIVATE, fd, 0);
        }
        close(fd);
        if (m_base == MAP_FAILED)
        {
            throw MagnetTraceError(path, std::strerror(errno));
        }
    }

    ~MappedFile()
    {
        if (m_base != MAP_FAILED && m_base != nullptr)
        {
            munmap(m_base, m_size);
        }
    }

    const uint8_t* Data() const
    {
        return static_cast<const uint8_t*>(m_base);
    }

    size_t Size() const
    {
        return m_size;
    }

  private:
    void* m_base{nullptr};
    size_t m_size{0};
};

/** The core fields of the records of a mapped trace, in either byte order. */
class RecordView
{
  public:
    RecordView(const uint8_t* data, size_t recordSize, bool swap)
        : m_data(data),
          m_recordSize(recordSize),
          m_swap(swap)
    {
    }

    uint64_t Sockid(size_t i) const
    {
        return Field<uint64_t>(i, 0);
    }

    uint64_t Timestamp(size_t i) const
    {
        return Field<uint64_t>(i, 8);
    }

    uint32_t Event(size_t i) const
    {
        return Field<uint32_t>(i, 16);
    }

    int32_t Size(size_t i) const
    {
        return static_cast<int32_t>(Field<uint32_t>(i, 20));
    }

  private:
    template <typename T>
    T Field(size_t i, size_t offset) const
    {
        T v;
        std::memcpy(&v, m_data + i * m_recordSize + offset, sizeof v);
        if (m_swap)
        {
            if constexpr (sizeof(T) == 8)
            {
                v = __builtin_bswap64(v);
            }
            else
            {
                v = __builtin_bswap32(v);
            }
        }
        return v;
    }

    const uint8_t* m_data;
    size_t m_recordSize;
    bool m_swap;
};

// 128-bit products of ticks and rates; __extension__: ns-3's own build is -Wpedantic.
__extension__ typedef __int128 Int128;

/** Ticks to ns, piecewise across clock changes (docs/trace-format.md, "Clock changes"). */
class TickClock
{
  public:
    TickClock(uint64_t t0, int32_t khz)
        : m_t0(t0),
          m_khz(khz),
          m_base(static_cast<Int128>(t0) * kNsPerKhzTick / khz)
    {
    }

    int64_t Ns(uint64_t ticks) const
    {
        Int128 dt = static_cast<Int128>(ticks) - m_t0;
        return static_cast<int64_t>(m_base + dt * kNsPerKhzTick / m_khz);
    }

    void Change(uint64_t t, int32_t khz)
    {
        m_base = Ns(t);
        m_t0 = t;
        m_khz = khz;
    }

  private:
    uint64_t m_t0;
    int32_t m_khz;
    Int128 m_base;
};

std::string
Hex(uint64_t v)
{
    std::ostringstream s;
    s << "0x" << std::hex << v;
    return s.str();
}

/** Check SYSINFO (first or a clock change); returns its record size. */
size_t
CheckSysinfo(const std::string& path, uint64_t sockid, int32_t khz, const std::string& where)
{
    uint64_t version = sockid >> kVersionShift;
    uint64_t recordSize = sockid & 0xFFFFFFFFu;
    if (version != MAGNET_FORMAT_VERSION)
    {
        throw MagnetTraceError(path,
                               where + ": format version " + std::to_string(version) +
                                   " (this reader knows version " +
                                   std::to_string(MAGNET_FORMAT_VERSION) + ")");
    }
    if (recordSize != MAGNET_CORE_SIZE && recordSize != MAGNET_EXT_RECORD_SIZE)
    {
        throw MagnetTraceError(path,
                               where + ": impossible record size " + std::to_string(recordSize));
    }
    if (khz <= 0)
    {
        throw MagnetTraceError(path, where + ": impossible clock rate " + std::to_string(khz) +
                                         " kHz");
    }
    return recordSize;
}

/** Skip the META block after SYSINFO; returns the position of the first data record. */
size_t
SkipMeta(const std::string& path, const RecordView& rec, size_t n)
{
    size_t i = 1;
    while (i < n && rec.Event(i) == MAGNET_META)
    {
        ++i;
    }
    size_t count = i - 1;
    if (count == 0 || (static_cast<uint32_t>(rec.Size(i - 1)) & 0xFFFF) != MAGNET_META_END)
    {
        throw MagnetTraceError(path,
                               "impossible metadata: the META block after SYSINFO has no END record");
    }
    if (rec.Sockid(i - 1) != count - 1)
    {
        throw MagnetTraceError(path, "impossible metadata: END counts " +
                                         std::to_string(rec.Sockid(i - 1)) + " META records but " +
                                         std::to_string(count - 1) + " precede it");
    }
    return i;
}

} // namespace

MagnetDemand
ReadMagnetDemand(const std::string& path, uint64_t sockid, uint64_t* lost)
{
    MappedFile file(path);
    if (file.Size() < MAGNET_CORE_SIZE)
    {
        throw MagnetTraceError(path, "too short to be a magnet trace (" +
                                         std::to_string(file.Size()) + " bytes)");
    }
    uint32_t magic;
    std::memcpy(&magic, file.Data() + 16, sizeof magic);
    if (magic != MAGNET_SYSINFO && magic != MAGNET_SYSINFO_SWAPPED)
    {
        throw MagnetTraceError(path, "not a magnet trace: the first record is not SYSINFO");
    }
    RecordView first(file.Data(), MAGNET_CORE_SIZE, magic == MAGNET_SYSINFO_SWAPPED);
    size_t recordSize = CheckSysinfo(path, first.Sockid(0), first.Size(0), "SYSINFO");
    if (file.Size() % recordSize)
    {
        throw MagnetTraceError(path, "truncated final record (" +
                                         std::to_string(file.Size() % recordSize) +
                                         " trailing bytes)");
    }
    RecordView rec(file.Data(), recordSize, magic == MAGNET_SYSINFO_SWAPPED);
    size_t n = file.Size() / recordSize;
    TickClock clock(rec.Timestamp(0), rec.Size(0));

    std::vector<std::pair<int64_t, uint32_t>> writes;
    std::vector<uint64_t> streams;
    uint64_t lostRecords = 0;
    for (size_t i = SkipMeta(path, rec, n); i < n; ++i)
    {
        uint32_t event = rec.Event(i);
        if (event == MAGNET_SYSINFO)
        {
            std::string where = "record " + std::to_string(i) + " (SYSINFO)";
            if (CheckSysinfo(path, rec.Sockid(i), rec.Size(i), where) != recordSize)
            {
                throw MagnetTraceError(path, where + ": changes the record size");
            }
            clock.Change(rec.Timestamp(i), rec.Size(i));
            continue;
        }
        if (!KnownEvent(event))
        {
            throw MagnetTraceError(path, "record " + std::to_string(i) +
                                             ": unknown event code " + Hex(event));
        }
        int32_t size = rec.Size(i);
        uint64_t sid = rec.Sockid(i);
        if (event == MAGNET_LOST && size > 0)
        {
            lostRecords += static_cast<uint64_t>(size);
        }
        if (event != MAGNET_SOCK_SEND || size <= 0 || (sockid && sid != sockid))
        {
            continue;
        }
        if (std::find(streams.begin(), streams.end(), sid) == streams.end())
        {
            streams.push_back(sid);
        }
        writes.emplace_back(clock.Ns(rec.Timestamp(i)), static_cast<uint32_t>(size));
    }
    if (streams.size() > 1)
    {
        std::string ids;
        for (size_t k = 0; k < streams.size() && k < 4; ++k)
        {
            ids += (k ? ", " : "") + Hex(streams[k]);
        }
        throw MagnetTraceError(path, "SOCK_SEND records of " + std::to_string(streams.size()) +
                                         " streams (" + ids + (streams.size() > 4 ? ", ..." : "") +
                                         "): choose one");
    }
    if (writes.empty())
    {
        throw MagnetTraceError(path, "no SOCK_SEND records that moved data" +
                                         (sockid ? " in stream " + Hex(sockid) : std::string()));
    }
    if (lost)
    {
        *lost = lostRecords;
    }
    // CPUs may have reordered records a little: replay in time order.
    std::stable_sort(writes.begin(), writes.end(), [](const auto& a, const auto& b) {
        return a.first < b.first;
    });
    MagnetDemand demand;
    demand.reserve(writes.size());
    for (const auto& [ns, size] : writes)
    {
        demand.push_back({ns - writes.front().first, size});
    }
    return demand;
}

void
WriteNpyU32(const std::string& path, const std::vector<uint32_t>& values)
{
    // NPY format 1.0: magic, version, header length, a Python dict padded to 64 bytes.
    std::string order = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? "<" : ">";
    std::string dict = "{'descr': '" + order + "u4', 'fortran_order': False, 'shape': (" +
                       std::to_string(values.size()) + ",), }";
    size_t unpadded = 10 + dict.size() + 1;
    dict += std::string((64 - unpadded % 64) % 64, ' ') + "\n";
    std::string header = "\x93NUMPY\x01";
    header += '\0';
    header += static_cast<char>(dict.size() & 0xFF);
    header += static_cast<char>(dict.size() >> 8);
    header += dict;
    std::string tmp = path + ".tmp";
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        out.write(header.data(), static_cast<std::streamsize>(header.size()));
        out.write(reinterpret_cast<const char*>(values.data()),
                  static_cast<std::streamsize>(values.size() * sizeof(uint32_t)));
        if (!out)
        {
            throw MagnetTraceError(path, "cannot write");
        }
    }
    chmod(tmp.c_str(), 0600);
    if (rename(tmp.c_str(), path.c_str()) != 0)
    {
        int err = errno;
        unlink(tmp.c_str());
        throw MagnetTraceError(path, std::strerror(err));
    }
}

// ------------------------------------------------------------------ writer ---

MagnetTraceWriter::MagnetTraceWriter(const std::string& path,
                                     uint32_t clock,
                                     const std::string& producer,
                                     uint64_t eventMask,
                                     const std::string& filter,
                                     const std::string& hostname)
    : m_path(path)
{
    auto slash = path.rfind('/');
    std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
    std::vector<char> tmp(dir.begin(), dir.end());
    const std::string pattern = "/.magnet-XXXXXX.tmp";
    tmp.insert(tmp.end(), pattern.begin(), pattern.end());
    tmp.push_back('\0');
    m_fd = mkstemps(tmp.data(), 4);
    if (m_fd < 0)
    {
        throw MagnetTraceError(path, std::strerror(errno));
    }
    m_tmp = tmp.data();
    fchmod(m_fd, 0600);
    m_buffer.reserve(kBufferRecords);

    const uint64_t anchor = 1; // time zero of the trace: simulation time 0 (timestamps are never 0)
    m_buffer.push_back({(uint64_t{MAGNET_FORMAT_VERSION} << kVersionShift) | MAGNET_CORE_SIZE,
                        anchor,
                        MAGNET_SYSINFO,
                        1000000});
    WriteMeta(MAGNET_META_CLOCK_SOURCE, clock);
    WriteText(MAGNET_META_PRODUCER, producer);
    WriteMeta(MAGNET_META_EVENT_MASK, eventMask);
    WriteText(MAGNET_META_FILTER, filter);
    if (!hostname.empty())
    {
        WriteText(MAGNET_META_HOSTNAME, hostname);
    }
    WriteMeta(MAGNET_META_END, m_metaRecords);
}

MagnetTraceWriter::~MagnetTraceWriter()
{
    if (m_fd >= 0)
    {
        close(m_fd);
        unlink(m_tmp.c_str());
    }
}

void
MagnetTraceWriter::WriteMeta(uint32_t key, uint64_t value)
{
    m_buffer.push_back({value, 1, MAGNET_META, static_cast<int32_t>(key)});
    m_metaRecords += key != MAGNET_META_END;
}

void
MagnetTraceWriter::WriteText(uint32_t key, const std::string& text)
{
    // Chunk i holds 8 raw bytes of the text (NUL-padded) in its sockid field.
    for (size_t i = 0; i == 0 || i * 8 < text.size(); ++i)
    {
        char chunk[8] = {};
        std::memcpy(chunk, text.data() + i * 8, std::min<size_t>(8, text.size() - i * 8));
        uint64_t raw;
        std::memcpy(&raw, chunk, sizeof raw);
        WriteMeta(key | static_cast<uint32_t>(i << MAGNET_META_CHUNK_SHIFT), raw);
    }
}

void
MagnetTraceWriter::Flush()
{
    const char* p = reinterpret_cast<const char*>(m_buffer.data());
    size_t left = m_buffer.size() * sizeof(magnet_core);
    while (left)
    {
        ssize_t n = write(m_fd, p, left);
        if (n < 0 && errno == EINTR)
        {
            continue;
        }
        if (n <= 0)
        {
            throw MagnetTraceError(m_path, std::strerror(errno));
        }
        p += n;
        left -= static_cast<size_t>(n);
    }
    m_written += m_buffer.size();
    m_buffer.clear();
}

void
MagnetTraceWriter::Close()
{
    Flush();
    if (fsync(m_fd) != 0 || close(m_fd) != 0)
    {
        throw MagnetTraceError(m_path, std::strerror(errno));
    }
    m_fd = -1;
    if (rename(m_tmp.c_str(), m_path.c_str()) != 0)
    {
        int err = errno;
        unlink(m_tmp.c_str());
        throw MagnetTraceError(m_path, std::strerror(err));
    }
}

} // namespace ns3
