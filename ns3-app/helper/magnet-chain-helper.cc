/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "magnet-chain-helper.h"

#include "magnet-replay-helper.h"

#include "ns3/boolean.h"
#include "ns3/bulk-send-helper.h"
#include "ns3/config.h"
#include "ns3/data-rate.h"
#include "ns3/double.h"
#include "ns3/error-model.h"
#include "ns3/inet-socket-address.h"
#include "ns3/internet-stack-helper.h"
#include "ns3/packet-sink-helper.h"
#include "ns3/packet-sink.h"
#include "ns3/pointer.h"
#include "ns3/point-to-point-helper.h"
#include "ns3/queue-size.h"
#include "ns3/rng-seed-manager.h"
#include "ns3/simulator.h"
#include "ns3/string.h"
#include "ns3/tcp-congestion-ops.h"
#include "ns3/traffic-control-helper.h"
#include "ns3/uinteger.h"

#include <chrono>
#include <ctime>
#include <sstream>
#include <stdexcept>

namespace ns3
{

namespace
{

constexpr uint16_t kPort = 9;

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

void
ValidateValue(AttributeValue&& value, Ptr<const AttributeChecker> checker,
              const std::string& text, const std::string& what)
{
    if (!value.DeserializeFromString(text, checker))
    {
        throw std::invalid_argument(what + " '" + text + "' is not valid");
    }
}

} // namespace

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

void
MagnetChain::Validate(const MagnetChainConfig& config)
{
    const MagnetLinkConfig& link = config.link;
    ValidateValue(DataRateValue(), MakeDataRateChecker(), link.rate, "link rate");
    ValidateValue(TimeValue(), MakeTimeChecker(), link.delay, "link delay");
    ValidateValue(QueueSizeValue(), MakeQueueSizeChecker(), link.queue, "queue size");
    std::string name = link.tcp.rfind("ns3::", 0) == 0 ? link.tcp : "ns3::" + link.tcp;
    TypeId tid;
    if (!TypeId::LookupByNameFailSafe(name, &tid) || !tid.IsChildOf(TcpCongestionOps::GetTypeId()))
    {
        throw std::invalid_argument("unknown TCP variant '" + link.tcp + "'");
    }
    if (link.mss == 0 || link.sndBuf == 0 || link.rcvBuf == 0 || config.stacks == 0)
    {
        throw std::invalid_argument("MSS, buffer sizes and the number of stacks must be positive");
    }
    if (link.loss < 0 || link.loss >= 1)
    {
        throw std::invalid_argument("loss rate must be in [0, 1)");
    }
}

void
MagnetChain::ApplyDefaults() const
{
    const MagnetLinkConfig& link = m_config.link;
    std::string tcp = link.tcp.rfind("ns3::", 0) == 0 ? link.tcp : "ns3::" + link.tcp;
    Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(link.mss));
    Config::SetDefault("ns3::TcpSocket::SndBufSize", UintegerValue(link.sndBuf));
    Config::SetDefault("ns3::TcpSocket::RcvBufSize", UintegerValue(link.rcvBuf));
    Config::SetDefault("ns3::TcpSocket::TcpNoDelay", BooleanValue(!link.nagle));
    Config::SetDefault("ns3::TcpL4Protocol::SocketType", TypeIdValue(TypeId::LookupByName(tcp)));
    RngSeedManager::SetSeed(m_config.seed);
}

std::vector<std::pair<std::string, std::string>>
MagnetChain::TcpSettings()
{
    const std::pair<const char*, const char*> shown[] = {
        {"ns3::TcpSocket", "SegmentSize"},     {"ns3::TcpSocket", "SndBufSize"},
        {"ns3::TcpSocket", "RcvBufSize"},      {"ns3::TcpSocket", "InitialCwnd"},
        {"ns3::TcpSocket", "TcpNoDelay"},      {"ns3::TcpSocket", "DelAckCount"},
        {"ns3::TcpSocket", "DelAckTimeout"},   {"ns3::TcpSocketBase", "Sack"},
        {"ns3::TcpSocketBase", "Timestamp"},   {"ns3::TcpSocketBase", "WindowScaling"},
        {"ns3::TcpSocketBase", "MinRto"},      {"ns3::TcpL4Protocol", "SocketType"},
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
MagnetChain::TracePath(uint32_t k) const
{
    return m_config.outDir.empty() ? "" : m_config.outDir + "/stack-" + std::to_string(k) + ".magnet";
}

MagnetChain::Hop
MagnetChain::BuildHop(Ptr<Node> a, Ptr<Node> b, Ipv4AddressHelper& ip) const
{
    const MagnetLinkConfig& link = m_config.link;
    PointToPointHelper p2p;
    p2p.SetDeviceAttribute("DataRate", StringValue(link.rate));
    p2p.SetChannelAttribute("Delay", StringValue(link.delay));
    p2p.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize", StringValue(link.queue));
    Hop hop;
    hop.devices = p2p.Install(a, b);
    if (link.loss > 0)
    {
        auto errors = CreateObject<RateErrorModel>();
        errors->SetAttribute("ErrorRate", DoubleValue(link.loss));
        errors->SetAttribute("ErrorUnit", StringValue("ERROR_UNIT_PACKET"));
        hop.devices.Get(1)->SetAttribute("ReceiveErrorModel", PointerValue(errors));
    }
    hop.addresses = ip.Assign(hop.devices);
    ip.NewNetwork();
    // Assign() installs a default queue disc (FqCoDel); the device's DropTail
    // queue alone is the link's buffer, as on a plain router port.
    TrafficControlHelper().Uninstall(hop.devices);
    return hop;
}

MagnetChain::Stack
MagnetChain::BuildStack(uint32_t k, Ptr<Node> sender, Ptr<Node> receiver, Ipv4AddressHelper& ip) const
{
    Stack stack;
    stack.hop = BuildHop(sender, receiver, ip);
    MagnetSinkHelper sinks("ns3::TcpSocketFactory", InetSocketAddress(Ipv4Address::GetAny(), kPort));
    sinks.SetAttribute("ReadSize", UintegerValue(m_config.readSize));
    stack.sink = DynamicCast<MagnetSinkApplication>(sinks.Install(receiver).Get(0));
    MagnetReplayHelper replay("ns3::TcpSocketFactory",
                              InetSocketAddress(stack.hop.addresses.GetAddress(1), kPort));
    replay.SetAttribute("TcpVariant", StringValue(m_config.link.tcp));
    replay.SetAttribute("StartOffset", TimeValue(m_config.startOffset));
    stack.app = DynamicCast<MagnetReplayApplication>(replay.Install(sender).Get(0));
    const MagnetLinkConfig& link = m_config.link;
    std::string description = "ns-3 stack " + std::to_string(k) + " of " +
                              std::to_string(m_config.stacks) +
                              (m_config.live ? " (live relay)" : " (offline re-replay)") + ": " +
                              link.rate + ", " + link.delay + " one-way, queue " + link.queue +
                              ", MSS " + std::to_string(link.mss) + ", " + link.tcp;
    stack.recorder = std::make_unique<MagnetStackRecorder>(TracePath(k), k, description);
    stack.recorder->Attach(stack.app, stack.hop.devices.Get(0), stack.hop.devices.Get(1), stack.sink);
    return stack;
}

MagnetStackResult
MagnetChain::Collect(uint32_t k, const Stack& stack, MagnetCost cost) const
{
    MagnetStackResult r;
    r.stack = k;
    r.app = stack.app->GetStats();
    r.demandWrites = r.app.writesDue;
    r.demandBytes = r.app.bytesDue;
    r.counts = stack.recorder->GetCounts();
    r.sinkBytes = stack.sink->GetTotalRx();
    r.sinkReads = stack.sink->GetReads();
    r.cost = cost;
    r.trace = TracePath(k);
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
        NodeContainer nodes;
        nodes.Create(2);
        InternetStackHelper().Install(nodes);
        Ipv4AddressHelper ip("10.1.0.0", "255.255.255.252");
        Stack stack = BuildStack(k, nodes.Get(0), nodes.Get(1), ip);
        stack.app->SetDemand(std::move(demand));
        Stopwatch clock;
        Simulator::Run();
        MagnetCost cost = clock.Elapsed();
        stack.recorder->Close();
        results.push_back(Collect(k, stack, cost));
        demand = stack.recorder->WireDemand(m_config.newDataOnly);
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
    NodeContainer nodes;
    nodes.Create(m_config.stacks + 1);
    InternetStackHelper().Install(nodes);
    Ipv4AddressHelper ip("10.1.0.0", "255.255.255.252");
    std::vector<Stack> stacks;
    for (uint32_t k = 1; k <= m_config.stacks; ++k)
    {
        stacks.push_back(BuildStack(k, nodes.Get(k - 1), nodes.Get(k), ip));
    }
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
        results.push_back(Collect(k, stacks[k - 1], cost));
    }
    Simulator::Destroy();
    return results;
}

MagnetCost
MagnetChain::RunBulkSend(uint64_t bytes, uint32_t sendSize)
{
    ApplyDefaults();
    NodeContainer nodes;
    nodes.Create(2);
    InternetStackHelper().Install(nodes);
    Ipv4AddressHelper ip("10.1.0.0", "255.255.255.252");
    Hop hop = BuildHop(nodes.Get(0), nodes.Get(1), ip);
    BulkSendHelper bulk("ns3::TcpSocketFactory", InetSocketAddress(hop.addresses.GetAddress(1), kPort));
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
