/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "magnet-app-demand.h"

#include "magnet-trace.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

namespace ns3
{

const char*
MagnetSideName(MagnetSide side)
{
    return side == MagnetSide::Client ? "client" : "server";
}

MagnetSide
MagnetOtherSide(MagnetSide side)
{
    return side == MagnetSide::Client ? MagnetSide::Server : MagnetSide::Client;
}

const std::vector<MagnetAppEvent>&
MagnetAppConnection::EventsOf(MagnetSide side) const
{
    return events[static_cast<size_t>(side)];
}

const std::vector<MagnetAppAdu>&
MagnetAppConnection::AdusOf(MagnetSide side) const
{
    return adus[static_cast<size_t>(side)];
}

uint64_t
MagnetAppConnection::BytesOf(MagnetSide side) const
{
    const auto& a = AdusOf(side);
    return a.empty() ? 0 : a.back().endOffset;
}

bool
MagnetAppConnection::Resets(MagnetSide side) const
{
    const auto& e = EventsOf(side);
    return std::any_of(e.begin(), e.end(), [](const MagnetAppEvent& ev) {
        return ev.kind == MagnetAppEvent::Kind::Reset;
    });
}

int64_t
MagnetAppDemand::IndexOf(uint32_t id) const
{
    auto it = std::lower_bound(connections.begin(), connections.end(), id,
                               [](const MagnetAppConnection& c, uint32_t v) { return c.id < v; });
    return it != connections.end() && it->id == id ? it - connections.begin() : -1;
}

uint64_t
MagnetAppDemand::Bytes() const
{
    uint64_t total = 0;
    for (const auto& c : connections)
    {
        total += c.BytesOf(MagnetSide::Client) + c.BytesOf(MagnetSide::Server);
    }
    return total;
}

namespace
{

const char* const kColumns[] = {"connection", "event", "side", "time_ns", "size",
                                "adu", "wait_bytes", "think_ns", "after"};
enum Column
{
    kConnection,
    kEvent,
    kSide,
    kTime,
    kSize,
    kAdu,
    kWait,
    kThink,
    kAfter,
    kNColumns
};

/** Reads the table row by row, and says where a problem is. */
class AppDemandParser
{
  public:
    explicit AppDemandParser(const std::string& path)
        : m_path(path)
    {
        m_demand = std::make_shared<MagnetAppDemand>();
        m_demand->source = path;
    }

    std::shared_ptr<const MagnetAppDemand> Parse()
    {
        std::ifstream in(m_path);
        if (!in)
        {
            throw MagnetTraceError(m_path, std::strerror(errno));
        }
        std::string line;
        if (!std::getline(in, line))
        {
            throw MagnetTraceError(m_path, "empty: no header, no connection");
        }
        Header(Fields(line));
        while (std::getline(in, line))
        {
            ++m_row;
            if (!line.empty() && line != "\r")
            {
                Row(Fields(line));
            }
        }
        Finish();
        return m_demand;
    }

  private:
    static std::vector<std::string> Fields(std::string line)
    {
        if (!line.empty() && line.back() == '\r')
        {
            line.pop_back();
        }
        std::vector<std::string> out;
        std::stringstream s(line);
        std::string f;
        while (std::getline(s, f, ','))
        {
            out.push_back(f);
        }
        if (!line.empty() && line.back() == ',')
        {
            out.emplace_back();
        }
        return out;
    }

    void Header(const std::vector<std::string>& names)
    {
        for (size_t c = 0; c < kNColumns; ++c)
        {
            auto it = std::find(names.begin(), names.end(), kColumns[c]);
            if (it == names.end())
            {
                throw MagnetTraceError(m_path, std::string("no column '") + kColumns[c] +
                                                   "': not a whole-application demand (columns "
                                                   "connection,event,side,time_ns,size,adu,"
                                                   "wait_bytes,think_ns,after)");
            }
            m_index[c] = static_cast<size_t>(it - names.begin());
        }
        m_width = names.size();
    }

    [[noreturn]] void Fail(const std::string& problem, int64_t connection = -1) const
    {
        std::string where = "row " + std::to_string(m_row);
        if (connection >= 0)
        {
            where += " (connection " + std::to_string(connection) + ")";
        }
        throw MagnetTraceError(m_path, where + ": " + problem);
    }

    int64_t Integer(const std::vector<std::string>& f, Column c, int64_t empty, int64_t connection) const
    {
        const std::string& text = f[m_index[c]];
        if (text.empty())
        {
            return empty;
        }
        char* end = nullptr;
        errno = 0;
        long long v = std::strtoll(text.c_str(), &end, 10);
        if (errno || *end != '\0')
        {
            Fail(std::string(kColumns[c]) + " '" + text + "' is not a whole number", connection);
        }
        return v;
    }

    MagnetAppConnection& Connection(uint32_t id)
    {
        auto it = m_byId.find(id);
        return m_demand->connections[it->second];
    }

    void Row(const std::vector<std::string>& f)
    {
        if (f.size() != m_width)
        {
            Fail(std::to_string(f.size()) + " fields, the header has " + std::to_string(m_width));
        }
        int64_t id = Integer(f, kConnection, -1, -1);
        if (id < 1 || id > UINT32_MAX)
        {
            Fail("connection '" + f[m_index[kConnection]] + "' is not a connection number (1, 2, ...)");
        }
        const std::string& event = f[m_index[kEvent]];
        const std::string& sideText = f[m_index[kSide]];
        if (sideText != "client" && sideText != "server")
        {
            Fail("unknown side '" + sideText + "' (client or server)", id);
        }
        MagnetSide side = sideText == "client" ? MagnetSide::Client : MagnetSide::Server;
        int64_t time = Integer(f, kTime, 0, id);
        int64_t size = Integer(f, kSize, 0, id);
        int64_t wait = Integer(f, kWait, 0, id);
        int64_t think = Integer(f, kThink, 0, id);
        if (size < 0 || wait < 0)
        {
            Fail(std::string(size < 0 ? "negative size" : "negative wait_bytes"), id);
        }
        if (think < 0)
        {
            Fail("negative think time " + std::to_string(think) + " ns", id);
        }
        bool known = m_byId.count(static_cast<uint32_t>(id));
        if (event == "open")
        {
            if (known)
            {
                Fail("a second open", id);
            }
            Open(static_cast<uint32_t>(id), side, time, Integer(f, kAfter, 0, id), think);
            return;
        }
        MagnetAppEvent ev;
        if (event == "send")
        {
            ev.kind = MagnetAppEvent::Kind::Send;
        }
        else if (event == "close")
        {
            ev.kind = MagnetAppEvent::Kind::Close;
        }
        else if (event == "reset")
        {
            ev.kind = MagnetAppEvent::Kind::Reset;
        }
        else
        {
            Fail("unknown event '" + event + "' (open, send, close or reset)", id);
        }
        if (!known)
        {
            Fail(event + " before the connection's open", id);
        }
        ev.timeNs = time;
        ev.size = static_cast<uint64_t>(size);
        ev.adu = static_cast<int32_t>(Integer(f, kAdu, -1, id));
        ev.waitBytes = static_cast<uint64_t>(wait);
        ev.thinkNs = think;
        ev.row = m_row;
        Add(Connection(static_cast<uint32_t>(id)), side, ev);
    }

    void Open(uint32_t id, MagnetSide side, int64_t time, int64_t after, int64_t think)
    {
        if (after < 0 || (after > 0 && !m_byId.count(static_cast<uint32_t>(after))))
        {
            Fail("after " + std::to_string(after) + ": no earlier connection of that number", id);
        }
        MagnetAppConnection c;
        c.id = id;
        c.opener = side;
        c.openNs = time;
        c.after = static_cast<uint32_t>(after);
        c.afterThinkNs = after > 0 ? think : 0;
        m_byId[id] = m_demand->connections.size();
        m_demand->connections.push_back(std::move(c));
    }

    void Add(MagnetAppConnection& c, MagnetSide side, const MagnetAppEvent& ev)
    {
        auto& events = c.events[static_cast<size_t>(side)];
        const char* name = MagnetSideName(side);
        if (!events.empty() && events.back().kind != MagnetAppEvent::Kind::Send)
        {
            Fail(std::string("an event after the ") + name + " closed", c.id);
        }
        if (!events.empty() && ev.waitBytes < events.back().waitBytes)
        {
            Fail("wait_bytes decreases (from " + std::to_string(events.back().waitBytes) + " to " +
                     std::to_string(ev.waitBytes) + ")",
                 c.id);
        }
        events.push_back(ev);
        if (ev.kind != MagnetAppEvent::Kind::Send)
        {
            return;
        }
        auto& adus = c.adus[static_cast<size_t>(side)];
        if (adus.empty() || adus.back().number != ev.adu)
        {
            uint64_t offset = adus.empty() ? 0 : adus.back().endOffset;
            adus.push_back({ev.adu, 0, offset, ev.waitBytes, ev.timeNs});
        }
        adus.back().bytes += ev.size;
        adus.back().endOffset += ev.size;
    }

    /** What needs the whole file: each wait within what the peer sends. */
    void Finish()
    {
        if (m_demand->connections.empty())
        {
            throw MagnetTraceError(m_path, "no connection");
        }
        for (const auto& c : m_demand->connections)
        {
            for (MagnetSide side : {MagnetSide::Client, MagnetSide::Server})
            {
                uint64_t peer = c.BytesOf(MagnetOtherSide(side));
                for (const auto& ev : c.EventsOf(side))
                {
                    if (ev.waitBytes > peer)
                    {
                        m_row = ev.row;
                        Fail("wait_bytes " + std::to_string(ev.waitBytes) + " is more than the " +
                                 MagnetSideName(MagnetOtherSide(side)) + " ever sends on it (" +
                                 std::to_string(peer) + ")",
                             c.id);
                    }
                }
            }
        }
        // Connections by number (they are numbered in order of opening).
        auto& all = m_demand->connections;
        std::sort(all.begin(), all.end(),
                  [](const MagnetAppConnection& a, const MagnetAppConnection& b) { return a.id < b.id; });
    }

    std::string m_path;
    std::shared_ptr<MagnetAppDemand> m_demand;
    std::map<uint32_t, size_t> m_byId;
    size_t m_index[kNColumns]{};
    size_t m_width{0};
    uint64_t m_row{0};
};

} // namespace

std::shared_ptr<const MagnetAppDemand>
ReadMagnetAppDemand(const std::string& path)
{
    return AppDemandParser(path).Parse();
}

} // namespace ns3
