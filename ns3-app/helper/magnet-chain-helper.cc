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
constexpr uint32_t kIpTcpHeaders = 40;
constexpr uint32_t kTimestampOption = 12; // 10 bytes, padded to 12: Linux and ns-3 alike
// Every link is a /30 of 10.0.0.0/8.
constexpr const char* kNetwork = "10.0.0.0";
constexpr const char* kNetmask = "255.255.255.252";

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

/** "TcpCubic" or "ns3::TcpCubic" -> "ns3::TcpCubic". */
std::string
Ns3Name(const std::string& cc)
{
    return cc.rfind("ns3::", 0) == 0 ? cc : "ns3::" + cc;
}

} // namespace

uint32_t
MagnetTcpConfig::Mss(uint32_t mtu) const
{
    uint32_t path = mtu - kIpTcpHeaders;
    return mss ? std::min(mss, path) : path;
}

uint32_t
MagnetTcpConfig::SegmentSize(uint32_t mtu) const
{
    return Mss(mtu) - (timestamps ? kTimestampOption : 0);
}

const MagnetPathConfig&
MagnetChainConfig::PathOf(uint32_t k) const
{
    return paths.at(std::min<size_t>(k, paths.size()) - 1);
}

MagnetChain::MagnetChain(MagnetChainConfig config)
    : m_config(std::move(config))
{
    Validate(m_config);
}

const MagnetChainConfig&
MagnetChain::GetConfig() const
{
    return m_config;
}

std::vector<std::string>
MagnetChain::CongestionControls()
{
    std::vector<std::string> names;
    for (uint16_t i = 0; i < TypeId::GetRegisteredN(); ++i)
    {
        TypeId tid = TypeId::GetRegistered(i);
        if (tid != TcpCongestionOps::GetTypeId() && tid.IsChildOf(TcpCongestionOps::GetTypeId()) &&
            tid.HasConstructor())
        {
            names.push_back(tid.GetName().substr(5)); // without "ns3::"
        }
    }
    std::sort(names.begin(), names.end());
    return names;
}

void
MagnetChain::Validate(const MagnetChainConfig& config)
{
    if (config.stacks == 0 || config.paths.empty())
    {
        throw std::invalid_argument("a chain needs at least one stack and one path");
    }
    const MagnetTcpConfig& tcp = config.tcp;
    TypeId tid;
    if (!TypeId::LookupByNameFailSafe(Ns3Name(tcp.cc), &tid) ||
        !tid.IsChildOf(TcpCongestionOps::GetTypeId()))
    {
        std::string known;
        for (const auto& name : CongestionControls())
        {
            known += (known.empty() ? "" : ", ") + name;
        }
        throw std::invalid_argument("unknown TCP variant '" + tcp.cc + "' (ns-3 " MAGNET_NS3_VERSION
                                    " has " + known + ")");
    }
    if (tcp.readSize == 0 || (tcp.mss && tcp.mss <= kTimestampOption))
    {
        throw std::invalid_argument("the read size and the MSS must be positive (MSS above 12)");
    }
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

namespace
{

/** ns-3's own default of an attribute, "ns3::Type::Name" (whatever SetDefault did since). */
Ptr<const AttributeValue>
Ns3Default(const std::string& path)
{
    auto cut = path.rfind("::");
    TypeId::AttributeInformation info;
    NS_ABORT_UNLESS(TypeId::LookupByName(path.substr(0, cut)).LookupAttributeByName(path.substr(cut + 2), &info));
    return info.originalInitialValue;
}

void
SetDefaultOr(const std::string& path, bool given, const AttributeValue& value)
{
    Config::SetDefault(path, given ? value : *Ns3Default(path));
}

} // namespace

void
MagnetChain::ApplyDefaults() const
{
    const MagnetTcpConfig& tcp = m_config.tcp;
    Config::SetDefault("ns3::TcpL4Protocol::SocketType", TypeIdValue(TypeId::LookupByName(Ns3Name(tcp.cc))));
    Config::SetDefault("ns3::TcpSocket::TcpNoDelay", BooleanValue(!tcp.nagle));
    Config::SetDefault("ns3::TcpSocketBase::Sack", BooleanValue(tcp.sack));
    Config::SetDefault("ns3::TcpSocketBase::Timestamp", BooleanValue(tcp.timestamps));
    Config::SetDefault("ns3::TcpSocketBase::WindowScaling", BooleanValue(tcp.windowScaling));
    SetDefaultOr("ns3::TcpSocket::DelAckCount", tcp.delAckCount > 0, UintegerValue(tcp.delAckCount));
    SetDefaultOr("ns3::TcpSocket::DelAckTimeout", !tcp.delAckTimeout.IsStrictlyNegative(),
                 TimeValue(tcp.delAckTimeout));
    SetDefaultOr("ns3::TcpSocket::SndBufSize", tcp.sndBuf > 0, UintegerValue(tcp.sndBuf));
    SetDefaultOr("ns3::TcpSocket::RcvBufSize", tcp.rcvBuf > 0, UintegerValue(tcp.rcvBuf));
    MagnetCrossTraffic::SetSegmentSize(tcp.SegmentSize(m_config.PathOf(1).mtu));
    RngSeedManager::SetSeed(m_config.seed);
}

std::vector<std::pair<std::string, std::string>>
MagnetChain::TcpSettings()
{
    const std::pair<const char*, const char*> shown[] = {
        {"ns3::TcpL4Protocol", "SocketType"},  {"ns3::TcpSocket", "SndBufSize"},
        {"ns3::TcpSocket", "RcvBufSize"},      {"ns3::TcpSocket", "InitialCwnd"},
        {"ns3::TcpSocket", "TcpNoDelay"},      {"ns3::TcpSocket", "DelAckCount"},
        {"ns3::TcpSocket", "DelAckTimeout"},   {"ns3::TcpSocketBase", "Sack"},
        {"ns3::TcpSocketBase", "Timestamp"},   {"ns3::TcpSocketBase", "WindowScaling"},
        {"ns3::TcpSocketBase", "MinRto"},      {"ns3::TcpL4Protocol", "RecoveryType"},
    };
    std::vector<std::pair<std::string, std::string>> settings;
    for (const auto& [type, name] : shown)
    {
        TypeId::AttributeInformation info;
        if (!TypeId::LookupByName(type).LookupAttributeByName(name, &info))
        {
            continue;
        }
        std::ostringstream value;
        if (auto time = DynamicCast<const TimeValue>(info.initialValue))
        {
            value << time->Get().GetSeconds() << "s"; // "0.2s", not "+2e+08ns"
        }
        else
        {
            value << info.initialValue->SerializeToString(info.checker);
        }
        settings.emplace_back(name, value.str());
    }
    return settings;
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
    MagnetSinkHelper sinks("ns3::TcpSocketFactory", InetSocketAddress(Ipv4Address::GetAny(), kPort));
    sinks.SetAttribute("ReadSize", UintegerValue(m_config.tcp.readSize));
    stack.sink = DynamicCast<MagnetSinkApplication>(sinks.Install(receiver).Get(0));
    stack.sink->SetSocketAttribute("SegmentSize", segment);
    MagnetReplayHelper replay("ns3::TcpSocketFactory", InetSocketAddress(stack.path.receiverAddress, kPort));
    replay.SetAttribute("TcpVariant", StringValue(m_config.tcp.cc));
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
    if (!m_config.cross.empty())
    {
        stack.app->SetStartTime(m_config.crossLead);
        stack.cross = std::make_unique<MagnetCrossTraffic>(m_config.cross, config);
        stack.cross->Install(stack.path, ip, crossStart, segment.Get());
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
    }
    r.sinkBytes = stack.sink->GetTotalRx();
    r.sinkReads = stack.sink->GetReads();
    r.cost = cost;
    r.trace = TracePath(k);
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
        RngSeedManager::SetRun(k); // each stack its own draws of loss and cross traffic
        NodeContainer nodes;
        nodes.Create(2);
        InternetStackHelper().Install(nodes);
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
    RngSeedManager::SetRun(1);
    NodeContainer nodes;
    nodes.Create(m_config.stacks + 1);
    InternetStackHelper().Install(nodes);
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
    RngSeedManager::SetRun(1);
    NodeContainer nodes;
    nodes.Create(2);
    InternetStackHelper().Install(nodes);
    Ipv4AddressHelper ip(kNetwork, kNetmask);
    MagnetPath path = MagnetPathHelper(m_config.PathOf(1)).Install(nodes.Get(0), nodes.Get(1), ip);
    Ipv4GlobalRoutingHelper::PopulateRoutingTables();
    BulkSendHelper bulk("ns3::TcpSocketFactory", InetSocketAddress(path.receiverAddress, kPort));
    bulk.SetAttribute("MaxBytes", UintegerValue(bytes));
    bulk.SetAttribute("SendSize", UintegerValue(sendSize));
    bulk.Install(nodes.Get(0));
    PacketSinkHelper sinks("ns3::TcpSocketFactory", InetSocketAddress(Ipv4Address::GetAny(), kPort));
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
