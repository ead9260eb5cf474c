/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "magnet-chain-helper.h"

#include "magnet-replay-helper.h"

#include "ns3/boolean.h"
#include "ns3/bulk-send-helper.h"
#include "ns3/config.h"
#include "ns3/data-rate.h"
#include "ns3/double.h"
#include "ns3/inet-socket-address.h"
#include "ns3/internet-stack-helper.h"
#include "ns3/ipv4-global-routing-helper.h"
#include "ns3/packet-sink-helper.h"
#include "ns3/packet-sink.h"
#include "ns3/rng-seed-manager.h"
#include "ns3/simulator.h"
#include "ns3/string.h"
#include "ns3/tcp-congestion-ops.h"
#include "ns3/uinteger.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <sstream>
#include <stdexcept>

namespace ns3
{

namespace
{

constexpr uint16_t kPort = 9;
// Every link is a /30 of 10.0.0.0/8.
constexpr const char* kNetwork = "10.0.0.0";
constexpr const char* kNetmask = "255.255.255.252";
// With cross traffic the replay connects this long before the demand's time zero.
const Time kConnectAhead = Seconds(1);

/** Measures the wall and CPU time of a simulation run. */
class Stopwatch
{
  public:
    MagnetCost Elapsed() const
    {
        std::chrono::duration<double> wall = std::chrono::steady_clock::now() - m_wall;
        return {wall.count(), CpuNow() - m_cpu};
    }

  private:
    static double CpuNow()
    {
        timespec ts;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
    }

    std::chrono::steady_clock::time_point m_wall{std::chrono::steady_clock::now()};
    double m_cpu{CpuNow()};
};

} // namespace

const MagnetPathConfig&
MagnetChainConfig::PathOf(uint32_t k) const
{
    return paths.at(std::min<size_t>(k, paths.size()) - 1);
}

MagnetChain::MagnetChain(MagnetChainConfig config)
    : m_config(std::move(config)),
      m_profile(m_config.tcp)
{
    Validate(m_config);
}

const MagnetChainConfig&
MagnetChain::GetConfig() const
{
    return m_config;
}

void
MagnetChain::Validate(const MagnetChainConfig& config)
{
    if (config.stacks == 0 || config.paths.empty())
    {
        throw std::invalid_argument("a chain needs at least one stack and one path");
    }
    MagnetTcpProfile::Validate(config.tcp);
    uint32_t k = 1;
    for (const auto& path : config.paths)
    {
        std::string where = "stack " + std::to_string(k++) + "'s path";
        path.Validate(where);
        for (const auto& cross : config.cross)
        {
            cross.Validate(path, where);
        }
    }
}

void
MagnetChain::ApplyDefaults() const
{
    m_profile.ApplyDefaults();
    MagnetCrossTraffic::SetSegmentSize(m_config.tcp.SegmentSize(m_config.PathOf(1).mtu));
    SelectDraws(1);
}

void
MagnetChain::SelectDraws(uint32_t k) const
{
    // ns-3's generator (MRG32k3a) started from seed s is seed 1's state times s, so seeds
    // 1, 2, 3 draw related numbers: a 1 % loss model under seed 2 lost 84 of the 186
    // packets seed 1 lost.  Runs (substreams) are independent: every seed is seed 1, each
    // of our seeds a block of 2^32 runs, stack k the k-th (seed 1 keeps its draws).
    RngSeedManager::SetSeed(1);
    RngSeedManager::SetRun(static_cast<uint64_t>(m_config.seed - 1) << 32 | k);
}

std::vector<std::pair<std::string, std::string>>
MagnetChain::TcpSettings() const
{
    return m_profile.Settings();
}

std::string
MagnetChain::Describe(uint32_t k) const
{
    const MagnetPathConfig& path = m_config.PathOf(k);
    const MagnetTcpConfig& tcp = m_config.tcp;
    std::ostringstream s;
    s << path.Describe() << "; TCP MSS " << tcp.Mss(path.mtu) << " (segments of "
      << tcp.SegmentSize(path.mtu) << " B of data" << (tcp.timestamps ? " after the 12 B timestamp option" : "")
      << "), receiver reads " << tcp.readSize << " B";
    return s.str();
}

std::vector<std::string>
MagnetChain::CrossSchedules(uint32_t k) const
{
    std::vector<std::string> files;
    for (size_t i = 0; i < m_config.cross.size(); ++i)
    {
        bool udp = m_config.cross[i].kind != MagnetCrossConfig::Kind::BulkTcp;
        files.push_back(udp && !m_config.crossSchedules.empty()
                            ? m_config.crossSchedules + "/stack-" + std::to_string(k) + "-cross-" +
                                  std::to_string(i + 1) + ".magnet"
                            : "");
    }
    return files;
}

std::string
MagnetChain::TracePath(uint32_t k, const std::string& suffix) const
{
    return m_config.outDir.empty() ? "" : m_config.outDir + "/stack-" + std::to_string(k) + suffix;
}

MagnetChain::Stack
MagnetChain::BuildStack(uint32_t k, Ptr<Node> sender, Ptr<Node> receiver, Ipv4AddressHelper& ip,
                        Time crossStart)
{
    const MagnetPathConfig& config = m_config.PathOf(k);
    UintegerValue segment(m_config.tcp.SegmentSize(config.mtu));
    Stack stack;
    stack.path = MagnetPathHelper(config).Install(sender, receiver, ip);
    MagnetSinkHelper sinks(m_profile.SocketFactory().GetName(), InetSocketAddress(Ipv4Address::GetAny(), kPort));
    sinks.SetAttribute("ReadSize", UintegerValue(m_config.tcp.readSize));
    if (m_config.tcp.Linux())
    {
        // The real replay's receiving end has nothing to write: it shuts down its sending side
        // (its FIN) at its time zero, the demand's (replay/endpoint.py: Replayer.run), and
        // receives the whole transfer in FIN_WAIT_2.
        if (m_config.cross.empty())
        {
            sinks.SetAttribute("HalfCloseAfter", TimeValue(m_config.startOffset));
        }
        else
        {
            sinks.SetAttribute("HalfCloseAt", TimeValue(m_config.crossLead));
        }
    }
    stack.sink = DynamicCast<MagnetSinkApplication>(sinks.Install(receiver).Get(0));
    stack.sink->SetSocketAttribute("SegmentSize", segment);
    MagnetReplayHelper replay(m_profile.SocketFactory().GetName(), InetSocketAddress(stack.path.receiverAddress, kPort));
    replay.SetAttribute("TcpVariant", StringValue(m_profile.CongestionControl()));
    replay.SetAttribute("StartOffset", TimeValue(m_config.startOffset));
    stack.app = DynamicCast<MagnetReplayApplication>(replay.Install(sender).Get(0));
    stack.app->SetSocketAttribute("SegmentSize", segment);
    std::string description = "ns-3 stack " + std::to_string(k) + " of " +
                              std::to_string(m_config.stacks) +
                              (m_config.live ? " (live relay)" : " (offline re-replay)") + ": " +
                              Describe(k) + ", " + m_config.tcp.cc;
    stack.recorder = std::make_unique<MagnetStackRecorder>(TracePath(k), k, description);
    stack.recorder->Attach(stack.app, stack.path.SenderDevice(), stack.path.ReceiverDevice(), stack.sink, kPort);
    stack.recorder->AttachBottleneck(stack.path.BottleneckTx(), stack.path.BottleneckRx());
    if (m_config.linkLog && !m_config.outDir.empty())
    {
        Time before;
        Time after;
        for (uint32_t hop = 0; hop < config.hops; ++hop)
        {
            (hop < config.Bottleneck() ? before : after) += hop == config.Bottleneck() ? Time() : config.HopDelay(hop);
        }
        stack.linkLog = std::make_unique<MagnetLinkLog>(stack.path.BottleneckTx(), stack.path.BottleneckRx(),
                                                        before, after);
        if (config.duplex)
        {
            // The reverse direction's own rate and queue: logged as linkem's reverse.linklog.
            stack.reverseLog = std::make_unique<MagnetLinkLog>(stack.path.BottleneckRx(),
                                                               stack.path.BottleneckTx(), after, before);
        }
    }
    if (!m_config.cross.empty())
    {
        // Connect a while before the demand's time zero, which is crossLead into the cross
        // traffic in both engines (the real replay's ends wait for it too).
        stack.app->SetStartTime(m_config.crossLead - std::min(m_config.crossLead, kConnectAhead));
        stack.app->SetAttribute("Origin", TimeValue(m_config.crossLead));
        stack.cross = std::make_unique<MagnetCrossTraffic>(m_config.cross, config);
        stack.cross->SetSchedules(CrossSchedules(k));
        if (m_config.tcp.Linux())
        {
            stack.cross->DrawStarts(MagnetCrossTraffic::kStartStream + k); // the real sender's lateness
        }
        stack.cross->Install(stack.path, ip, crossStart, segment.Get(), m_profile.SocketFactory());
    }
    return stack;
}

void
MagnetChain::StopWhenDone(std::vector<Stack>& stacks)
{
    // Cross traffic never ends by itself: stop once every stack's sink has read
    // everything, or at once if a connection broke.
    if (m_config.cross.empty())
    {
        return;
    }
    m_running = static_cast<uint32_t>(stacks.size());
    for (auto& stack : stacks)
    {
        stack.sink->TraceConnectWithoutContext("PeerClosed", MakeCallback(&MagnetChain::StackDone, this));
        stack.app->TraceConnectWithoutContext("Failed", MakeCallback(&MagnetChain::StackFailed, this));
    }
}

void
MagnetChain::StackDone()
{
    if (--m_running == 0)
    {
        Simulator::Stop();
    }
}

void
MagnetChain::StackFailed()
{
    Simulator::Stop();
}

MagnetStackResult
MagnetChain::Collect(uint32_t k, const Stack& stack, MagnetCost cost, uint64_t given) const
{
    MagnetStackResult r;
    r.stack = k;
    r.givenBytes = given;
    r.failure = stack.app->GetFailure();
    r.app = stack.app->GetStats();
    r.demandWrites = r.app.writesDue;
    r.demandBytes = r.app.bytesDue;
    r.counts = stack.recorder->GetCounts();
    r.rtt = stack.recorder->GetRtt();
    r.segmentSize = m_config.tcp.SegmentSize(m_config.PathOf(k).mtu);
    if (stack.cross)
    {
        r.crossBytes = stack.cross->DeliveredBytes();
        r.crossTime = Simulator::Now() - stack.cross->GetStart();
        r.crossExhausted = stack.cross->ScheduleExhausted();
    }
    r.sinkBytes = stack.sink->GetTotalRx();
    r.sinkReads = stack.sink->GetReads();
    r.cost = cost;
    r.trace = TracePath(k);
    if (stack.linkLog)
    {
        r.linkLog = TracePath(k, ".linklog");
        stack.linkLog->Write(r.linkLog);
    }
    if (stack.reverseLog)
    {
        r.reverseLinkLog = TracePath(k, ".reverse.linklog");
        stack.reverseLog->Write(r.reverseLinkLog);
    }
    if (!r.trace.empty())
    {
        r.newBytes = TracePath(k, ".new.npy");
        std::vector<uint32_t> fresh;
        fresh.reserve(stack.recorder->GetWire().size());
        for (const auto& seg : stack.recorder->GetWire())
        {
            fresh.push_back(seg.newBytes);
        }
        WriteNpyU32(r.newBytes, fresh);
    }
    return r;
}

std::vector<MagnetStackResult>
MagnetChain::Run(MagnetDemand demand)
{
    ApplyDefaults();
    return m_config.live ? RunLive(std::move(demand)) : RunOffline(std::move(demand));
}

std::vector<MagnetStackResult>
MagnetChain::RunOffline(MagnetDemand demand)
{
    std::vector<MagnetStackResult> results;
    for (uint32_t k = 1; k <= m_config.stacks; ++k)
    {
        MagnetCrossTraffic::SetSegmentSize(m_config.tcp.SegmentSize(m_config.PathOf(k).mtu));
        SelectDraws(k); // each stack its own draws of loss and cross traffic
        NodeContainer nodes;
        nodes.Create(2);
        MagnetTcpProfile::InstallStack(nodes);
        Ipv4AddressHelper ip(kNetwork, kNetmask);
        std::vector<Stack> stacks;
        stacks.push_back(BuildStack(k, nodes.Get(0), nodes.Get(1), ip, Seconds(0)));
        Stack& stack = stacks.back();
        Ipv4GlobalRoutingHelper::PopulateRoutingTables();
        StopWhenDone(stacks);
        uint64_t given = MagnetDemandBytes(demand);
        stack.app->SetDemand(std::move(demand));
        Stopwatch clock;
        Simulator::Run();
        MagnetCost cost = clock.Elapsed();
        stack.recorder->Close();
        results.push_back(Collect(k, stack, cost, given));
        demand = stack.recorder->WireDemand(m_config.newDataOnly);
        stacks.clear();
        Simulator::Destroy();
        if (demand.empty())
        {
            break; // nothing reached the wire: no further stack to drive
        }
    }
    return results;
}

std::vector<MagnetStackResult>
MagnetChain::RunLive(MagnetDemand demand)
{
    SelectDraws(1);
    NodeContainer nodes;
    nodes.Create(m_config.stacks + 1);
    MagnetTcpProfile::InstallStack(nodes);
    Ipv4AddressHelper ip(kNetwork, kNetmask);
    std::vector<Stack> stacks;
    for (uint32_t k = 1; k <= m_config.stacks; ++k)
    {
        // Distinct start times: each stack's cross flows start right after their segment size is set.
        stacks.push_back(BuildStack(k, nodes.Get(k - 1), nodes.Get(k), ip, NanoSeconds(k)));
    }
    Ipv4GlobalRoutingHelper::PopulateRoutingTables();
    StopWhenDone(stacks);
    uint64_t given = MagnetDemandBytes(demand);
    stacks.front().app->SetDemand(std::move(demand));
    for (size_t k = 0; k + 1 < stacks.size(); ++k)
    {
        // The relay on node k+1 writes each read into the next stack at once.
        Ptr<MagnetReplayApplication> next = stacks[k + 1].app;
        stacks[k].sink->TraceConnectWithoutContext(
            "Read", MakeCallback(&MagnetReplayApplication::Write, next));
        stacks[k].sink->TraceConnectWithoutContext(
            "PeerClosed", MakeCallback(&MagnetReplayApplication::Finish, next));
    }
    Stopwatch clock;
    Simulator::Run();
    MagnetCost cost = clock.Elapsed();
    std::vector<MagnetStackResult> results;
    for (uint32_t k = 1; k <= stacks.size(); ++k)
    {
        stacks[k - 1].recorder->Close();
        // A relay is given what the stack before it delivered.
        results.push_back(Collect(k, stacks[k - 1], cost, k == 1 ? given : results.back().sinkBytes));
    }
    stacks.clear();
    Simulator::Destroy();
    return results;
}

MagnetCost
MagnetChain::RunBulkSend(uint64_t bytes, uint32_t sendSize)
{
    ApplyDefaults();
    NodeContainer nodes;
    nodes.Create(2);
    MagnetTcpProfile::InstallStack(nodes);
    Ipv4AddressHelper ip(kNetwork, kNetmask);
    MagnetPath path =
        MagnetPathHelper(m_config.PathOf(1)).Install(nodes.Get(0), nodes.Get(1), ip);
    Ipv4GlobalRoutingHelper::PopulateRoutingTables();
    BulkSendHelper bulk(m_profile.SocketFactory().GetName(), InetSocketAddress(path.receiverAddress, kPort));
    bulk.SetAttribute("MaxBytes", UintegerValue(bytes));
    bulk.SetAttribute("SendSize", UintegerValue(sendSize));
    bulk.Install(nodes.Get(0));
    PacketSinkHelper sinks(m_profile.SocketFactory().GetName(), InetSocketAddress(Ipv4Address::GetAny(), kPort));
    auto sink = DynamicCast<PacketSink>(sinks.Install(nodes.Get(1)).Get(0));
    Stopwatch clock;
    Simulator::Run();
    MagnetCost cost = clock.Elapsed();
    uint64_t received = sink->GetTotalRx();
    Simulator::Destroy();
    if (received != bytes)
    {
        throw std::runtime_error("BulkSend reference delivered " + std::to_string(received) +
                                 " of " + std::to_string(bytes) + " bytes");
    }
    return cost;
}

} // namespace ns3
