/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "magnet-app-replay-helper.h"

#include "magnet-trace.h"

#include "ns3/inet-socket-address.h"
#include "ns3/simulator.h"
#include "ns3/string.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace ns3
{

namespace
{

constexpr size_t kClient = static_cast<size_t>(MagnetSide::Client);
constexpr size_t kServer = static_cast<size_t>(MagnetSide::Server);
const Time kStallCheck = Seconds(1);

/** Seconds, exactly as simulated (ns resolution); empty for "never". */
std::string
SecondsText(Time t)
{
    if (t == Time::Max())
    {
        return "";
    }
    int64_t ns = t.GetNanoSeconds();
    char text[32];
    std::snprintf(text, sizeof text, "%s%lld.%09lld", ns < 0 ? "-" : "",
                  static_cast<long long>(std::llabs(ns) / 1000000000),
                  static_cast<long long>(std::llabs(ns) % 1000000000));
    return text;
}

/** Write `text` to `path` atomically (a temporary renamed into place). */
void
WriteFile(const std::string& path, const std::string& text)
{
    std::string tmp = path + ".tmp";
    {
        std::ofstream out(tmp, std::ios::trunc);
        out << text;
        if (!out)
        {
            throw MagnetTraceError(path, "cannot write");
        }
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0)
    {
        throw MagnetTraceError(path, std::strerror(errno));
    }
}

} // namespace

// -------------------------------------------------------------- results ---
ApplicationContainer
MagnetAppReplay::GetApplications() const
{
    ApplicationContainer all(m_state->acceptors);
    for (uint32_t i = 0; i < GetN(); ++i)
    {
        all.Add(m_state->apps[kClient][i]);
        all.Add(m_state->apps[kServer][i]);
    }
    return all;
}

uint32_t
MagnetAppReplay::GetN() const
{
    return static_cast<uint32_t>(m_state->apps[kClient].size());
}

Ptr<MagnetConnectionApplication>
MagnetAppReplay::Get(uint32_t i, MagnetSide side) const
{
    return m_state->apps[static_cast<size_t>(side)].at(i);
}

const MagnetAppDemand&
MagnetAppReplay::GetDemand() const
{
    return *m_state->demand;
}

void
MagnetAppReplay::Start(Time start)
{
    m_state->start = start;
    GetApplications().Start(start);
}

void
MagnetAppReplay::StopWhenDone(Time stall)
{
    State& s = *m_state;
    s.finished.assign(GetN(), 0);
    s.running = GetN();
    for (size_t side : {kClient, kServer})
    {
        for (const auto& app : s.apps[side])
        {
            app->TraceConnectWithoutContext("Done", MakeCallback(&State::SideFinished, m_state));
        }
    }
    s.stall = stall;
    if (stall.IsStrictlyPositive())
    {
        Simulator::Schedule(s.start + kStallCheck, &State::CheckStall, m_state);
    }
}

void
MagnetAppReplay::State::SideFinished(uint32_t connection)
{
    size_t i = static_cast<size_t>(demand->IndexOf(connection));
    bool failed = !apps[kClient][i]->GetRecord().failure.empty() ||
                  !apps[kServer][i]->GetRecord().failure.empty();
    // A connection is over when both sides are done, or at its first failure.
    if (finished[i] < 2 && (++finished[i] == 2 || failed))
    {
        finished[i] = 2;
        if (--running == 0)
        {
            Simulator::Stop();
        }
    }
}

uint64_t
MagnetAppReplay::State::Progress() const
{
    uint64_t moved = 0;
    for (size_t side : {kClient, kServer})
    {
        for (const auto& app : apps[side])
        {
            const auto& r = app->GetRecord();
            moved += r.bytesWritten + r.bytesRead + (r.opened != Time::Max()) + (r.closed != Time::Max());
        }
    }
    return moved;
}

void
MagnetAppReplay::State::CheckStall()
{
    uint64_t now = Progress();
    bool waiting = false;
    for (size_t side : {kClient, kServer})
    {
        for (const auto& app : apps[side])
        {
            waiting = waiting || app->IsWaiting();
        }
    }
    if (now != lastProgress || waiting)
    {
        lastProgress = now;
        lastMoved = Simulator::Now();
    }
    if (Simulator::Now() - lastMoved >= stall)
    {
        Simulator::Stop();
        return;
    }
    Simulator::Schedule(kStallCheck, &State::CheckStall, Ptr<State>(this));
}

bool
MagnetAppReplay::Complete() const
{
    for (const auto& c : Connections())
    {
        if (c.status != "ok")
        {
            return false;
        }
    }
    return true;
}

std::vector<MagnetConnectionResult>
MagnetAppReplay::Connections() const
{
    const State& s = *m_state;
    std::vector<MagnetConnectionResult> out;
    for (uint32_t i = 0; i < GetN(); ++i)
    {
        const MagnetAppConnection& demand = s.demand->connections[i];
        const auto& client = s.apps[kClient][i]->GetRecord();
        const auto& server = s.apps[kServer][i]->GetRecord();
        const auto& opener = demand.opener == MagnetSide::Client ? client : server;
        MagnetConnectionResult r;
        r.connection = demand.id;
        r.opener = demand.opener;
        r.start = opener.opened == Time::Max() ? opener.opened : opener.opened - s.start;
        r.bytesSent = client.bytesWritten;
        r.bytesReceived = client.bytesRead;
        r.adus = static_cast<uint32_t>(demand.AdusOf(MagnetSide::Client).size() +
                                       demand.AdusOf(MagnetSide::Server).size());
        bool reset = demand.Resets(MagnetSide::Client) || demand.Resets(MagnetSide::Server);
        bool whole = client.bytesRead == demand.BytesOf(MagnetSide::Server) &&
                     server.bytesRead == demand.BytesOf(MagnetSide::Client);
        if (!client.failure.empty() || !server.failure.empty())
        {
            r.status = !client.failure.empty() ? client.failure : server.failure;
        }
        else if (client.done == Time::Max() || server.done == Time::Max() || !(whole || reset))
        {
            r.status = "incomplete";
        }
        else
        {
            r.status = "ok";
            r.completion = std::max(client.done, server.done) - s.start;
        }
        out.push_back(r);
    }
    return out;
}

std::vector<MagnetAduResult>
MagnetAppReplay::Adus() const
{
    const State& s = *m_state;
    std::vector<MagnetAduResult> out;
    auto since = [&](Time t) { return t == Time::Max() ? t : t - s.start; };
    for (uint32_t i = 0; i < GetN(); ++i)
    {
        const MagnetAppConnection& demand = s.demand->connections[i];
        for (MagnetSide side : {MagnetSide::Client, MagnetSide::Server})
        {
            MagnetSide other = MagnetOtherSide(side);
            const auto& own = s.apps[static_cast<size_t>(side)][i]->GetRecord();
            const auto& peer = s.apps[static_cast<size_t>(other)][i]->GetRecord();
            const auto& adus = demand.AdusOf(side);
            const auto& peerAdus = demand.AdusOf(other);
            for (size_t a = 0; a < adus.size(); ++a)
            {
                MagnetAduResult r;
                r.connection = demand.id;
                r.adu = adus[a].number;
                r.side = side;
                r.bytes = adus[a].bytes;
                r.start = since(own.aduStart[a]);
                r.end = since(peer.peerAduRead[a]);
                // An answer: the first ADU after this side read more of the peer's data;
                // the request is the peer's ADU holding the last byte it waited for
                // (found by bisection: a connection may hold many thousand ADUs).
                uint64_t w = adus[a].waitBytes;
                bool answer = w > 0 && (a == 0 || adus[a - 1].waitBytes < w);
                if (answer && r.end != Time::Max())
                {
                    auto q = std::partition_point(peerAdus.begin(), peerAdus.end(),
                                                  [w](const MagnetAppAdu& p) { return p.endOffset < w; }) -
                             peerAdus.begin();
                    while (q < static_cast<ptrdiff_t>(peerAdus.size()) && peer.aduStart[q] == Time::Max())
                    {
                        ++q;
                    }
                    if (q < static_cast<ptrdiff_t>(peerAdus.size()))
                    {
                        r.response = peer.peerAduRead[a] - peer.aduStart[q];
                    }
                }
                out.push_back(r);
            }
        }
    }
    // In the file's order: by connection, then ADU number (both sides interleaved).
    std::stable_sort(out.begin(), out.end(), [](const MagnetAduResult& a, const MagnetAduResult& b) {
        return std::pair(a.connection, a.adu) < std::pair(b.connection, b.adu);
    });
    return out;
}

void
MagnetAppReplay::WriteResults(const std::string& dir, uint32_t stack) const
{
    std::ostringstream c;
    c << "stack,connection,opener,start_s,completion_s,duration_s,bytes_sent,bytes_received,adus,status\n";
    for (const auto& r : Connections())
    {
        bool timed = r.start != Time::Max() && r.completion != Time::Max();
        c << stack << "," << r.connection << "," << MagnetSideName(r.opener) << ","
          << SecondsText(r.start) << "," << SecondsText(r.completion) << ","
          << (timed ? SecondsText(r.completion - r.start) : "") << "," << r.bytesSent << ","
          << r.bytesReceived << "," << r.adus << "," << r.status << "\n";
    }
    WriteFile(dir + "/connections.csv", c.str());
    std::ostringstream a;
    a << "stack,connection,adu,side,bytes,start_s,end_s,response_s\n";
    for (const auto& r : Adus())
    {
        a << stack << "," << r.connection << "," << r.adu << "," << MagnetSideName(r.side) << ","
          << r.bytes << "," << SecondsText(r.start) << "," << SecondsText(r.end) << ","
          << SecondsText(r.response) << "\n";
    }
    WriteFile(dir + "/adus.csv", a.str());
}

// --------------------------------------------------------------- helper ---
MagnetAppReplayHelper::MagnetAppReplayHelper(const std::string& demandFile)
    : MagnetAppReplayHelper(ReadMagnetAppDemand(demandFile))
{
}

MagnetAppReplayHelper::MagnetAppReplayHelper(std::shared_ptr<const MagnetAppDemand> demand)
    : m_demand(std::move(demand))
{
    m_factory.SetTypeId(MagnetConnectionApplication::GetTypeId());
}

void
MagnetAppReplayHelper::SetAttribute(const std::string& name, const AttributeValue& value)
{
    m_factory.Set(name, value);
}

void
MagnetAppReplayHelper::SetSocketAttribute(const std::string& name, const AttributeValue& value)
{
    m_socketAttributes.emplace_back(name, value.Copy());
}

void
MagnetAppReplayHelper::SetPort(uint16_t port)
{
    m_port = port;
}

const MagnetAppDemand&
MagnetAppReplayHelper::GetDemand() const
{
    return *m_demand;
}

MagnetAppReplay
MagnetAppReplayHelper::Install(Ptr<Node> client,
                               Ipv4Address clientAddress,
                               Ptr<Node> server,
                               Ipv4Address serverAddress) const
{
    MagnetAppReplay replay;
    replay.m_state = Create<MagnetAppReplay::State>();
    MagnetAppReplay::State& s = *replay.m_state;
    s.demand = m_demand;
    Ptr<Node> nodes[2] = {client, server};
    Ipv4Address addresses[2] = {clientAddress, serverAddress};
    StringValue variant;
    Ptr<MagnetAcceptorApplication> acceptors[2];
    for (size_t side : {kClient, kServer})
    {
        acceptors[side] = CreateObject<MagnetAcceptorApplication>();
        acceptors[side]->SetAttribute("Local",
                                      AddressValue(InetSocketAddress(Ipv4Address::GetAny(), m_port)));
        for (const auto& [name, value] : m_socketAttributes)
        {
            acceptors[side]->SetSocketAttribute(name, *value);
        }
        nodes[side]->AddApplication(acceptors[side]);
        s.acceptors.Add(acceptors[side]);
    }
    for (size_t i = 0; i < m_demand->connections.size(); ++i)
    {
        for (size_t side : {kClient, kServer})
        {
            auto app = m_factory.Create<MagnetConnectionApplication>();
            app->SetConnection(m_demand, i, static_cast<MagnetSide>(side));
            for (const auto& [name, value] : m_socketAttributes)
            {
                app->SetSocketAttribute(name, *value);
            }
            nodes[side]->AddApplication(app);
            s.apps[side].push_back(app);
        }
        const MagnetAppConnection& c = m_demand->connections[i];
        size_t opener = static_cast<size_t>(c.opener);
        size_t peer = 1 - opener;
        s.apps[opener][i]->SetRemote(InetSocketAddress(addresses[peer], m_port), acceptors[peer]);
        s.apps[opener][i]->SetPeer(s.apps[peer][i]);
        s.apps[peer][i]->SetPeer(s.apps[opener][i]);
        if (c.after)
        {
            s.apps[opener][i]->OpenAfter(s.apps[opener][m_demand->IndexOf(c.after)]);
        }
    }
    // The acceptors' variant and socket factory follow the connections' (accepted
    // sockets are the listener's copies).
    for (size_t side : {kClient, kServer})
    {
        if (!s.apps[side].empty())
        {
            s.apps[side].front()->GetAttribute("TcpVariant", variant);
            acceptors[side]->SetAttribute("TcpVariant", variant);
            TypeIdValue protocol;
            s.apps[side].front()->GetAttribute("Protocol", protocol);
            acceptors[side]->SetAttribute("Protocol", protocol);
        }
    }
    return replay;
}

} // namespace ns3
