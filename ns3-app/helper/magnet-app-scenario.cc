/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "magnet-app-scenario.h"

#include "magnet-link-log.h"
#include "magnet-tcp-profile.h"

#include "ns3/boolean.h"
#include "ns3/data-rate.h"
#include "ns3/inet-socket-address.h"
#include "ns3/on-off-helper.h"
#include "ns3/packet-sink-helper.h"
#include "ns3/packet-sink.h"
#include "ns3/ipv4-address-helper.h"
#include "ns3/ipv4-global-routing-helper.h"
#include "ns3/node-list.h"
#include "ns3/rng-seed-manager.h"
#include "ns3/simulator.h"
#include "ns3/string.h"
#include "ns3/uinteger.h"

#include <chrono>
#include <ctime>

namespace ns3
{

namespace
{

constexpr const char* kNetwork = "10.0.0.0";
constexpr const char* kNetmask = "255.255.255.252";

double
CpuSeconds()
{
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

/** Drops at one direction's bottleneck queue and link, counted by a stack recorder that records nothing. */
std::unique_ptr<MagnetStackRecorder>
CountDrops(Ptr<NetDevice> tx, Ptr<NetDevice> rx)
{
    auto counter = std::make_unique<MagnetStackRecorder>("", 0, "");
    counter->AttachBottleneck(tx, rx);
    return counter;
}

Ipv4Address
AddressOf(Ptr<NetDevice> device)
{
    Ptr<Ipv4> ipv4 = device->GetNode()->GetObject<Ipv4>();
    return ipv4->GetAddress(ipv4->GetInterfaceForDevice(device), 0).GetLocal();
}

} // namespace

bool
MagnetAppRunResult::Complete() const
{
    return FirstFailure().empty();
}

std::string
MagnetAppRunResult::FirstFailure() const
{
    for (const auto& c : connections)
    {
        if (c.status != "ok")
        {
            return "connection " + std::to_string(c.connection) + ": " + c.status;
        }
    }
    return "";
}

MagnetAppScenario::MagnetAppScenario(MagnetChainConfig config, bool openLoop)
    : m_config(std::move(config)),
      m_openLoop(openLoop)
{
    MagnetChain::Validate(m_config);
}

void
MagnetAppScenario::SetHashedDemux(bool hashed)
{
    m_hashedDemux = hashed;
}

void
MagnetAppScenario::InstallDemux() const
{
    if (m_hashedDemux)
    {
        MagnetTcpDemux::Install(NodeContainer::GetGlobal());
    }
}

MagnetTcpDemux::Counts
MagnetAppScenario::DemuxCounts() const
{
    MagnetTcpDemux::Counts sum;
    for (auto node = NodeList::Begin(); node != NodeList::End(); ++node)
    {
        if (Ptr<MagnetTcpDemux> demux = MagnetTcpDemux::Get(*node))
        {
            sum.hits += demux->GetCounts().hits;
            sum.passed += demux->GetCounts().passed;
            sum.rebuilds += demux->GetCounts().rebuilds;
        }
    }
    return sum;
}

MagnetAppRunResult
MagnetAppScenario::Run(std::shared_ptr<const MagnetAppDemand> demand)
{
    MagnetChain(m_config).ApplyDefaults(); // and the draws of stack 1
    const MagnetPathConfig& pathConfig = m_config.PathOf(1);
    const MagnetTcpConfig& tcp = m_config.tcp;
    NodeContainer nodes;
    nodes.Create(2);
    MagnetTcpProfile::InstallStack(nodes); // the profile's sockets (--tcpModel)
    Ipv4AddressHelper ip(kNetwork, kNetmask);
    MagnetPath path = MagnetPathHelper(pathConfig)
                          .Install(nodes.Get(0), nodes.Get(1), ip);
    std::unique_ptr<MagnetCrossTraffic> cross;
    Time start;
    if (!m_config.cross.empty())
    {
        cross = std::make_unique<MagnetCrossTraffic>(m_config.cross, pathConfig);
        if (tcp.Linux())
        {
            cross->DrawStarts(MagnetCrossTraffic::kStartStream + 1); // stack 1's, as the chain's
        }
        cross->Install(path, ip, Seconds(0), tcp.SegmentSize(pathConfig.mtu),
                       MagnetTcpProfile(tcp).SocketFactory());
        start = m_config.crossLead;
    }
    Ipv4GlobalRoutingHelper::PopulateRoutingTables();
    InstallDemux();

    MagnetAppReplayHelper helper(demand);
    helper.SetAttribute("TcpVariant", StringValue(MagnetTcpProfile(tcp).CongestionControl()));
    helper.SetAttribute("Protocol", TypeIdValue(MagnetTcpProfile(tcp).SocketFactory()));
    helper.SetAttribute("ReadSize", UintegerValue(tcp.readSize));
    helper.SetAttribute("OpenLoop", BooleanValue(m_openLoop));
    helper.SetSocketAttribute("SegmentSize", UintegerValue(tcp.SegmentSize(pathConfig.mtu)));
    MagnetAppReplay replay = helper.Install(nodes.Get(0), AddressOf(path.SenderDevice()), nodes.Get(1),
                                            path.receiverAddress);
    replay.Start(start);
    // Cross traffic never ends, and a TCP that never lets go of a connection (a FIN
    // retransmitted for ever) would not either: stop when nothing moves any more.
    replay.StopWhenDone(Seconds(kStallSeconds));

    std::string description = "ns-3 whole-application replay, " + std::to_string(replay.GetN()) +
                              " connections of " + demand->source + (m_openLoop ? " (open loop)" : "") +
                              ": " + MagnetChain(m_config).Describe(1) + ", " + tcp.cc;
    MagnetAppRunResult result;
    std::unique_ptr<MagnetSideRecorder> recorders[2];
    for (MagnetSide side : {MagnetSide::Client, MagnetSide::Server})
    {
        std::string trace = m_config.outDir.empty() ? ""
                                                    : m_config.outDir + "/" + MagnetSideName(side) + ".magnet";
        auto& recorder = recorders[static_cast<size_t>(side)];
        recorder = std::make_unique<MagnetSideRecorder>(trace, side, description);
        recorder->AttachDevice(side == MagnetSide::Client ? path.SenderDevice() : path.ReceiverDevice());
        for (uint32_t i = 0; i < replay.GetN(); ++i)
        {
            recorder->Attach(replay.Get(i, side));
        }
        if (!trace.empty())
        {
            result.traces.push_back(trace);
        }
    }
    auto forward = CountDrops(path.BottleneckTx(), path.BottleneckRx());
    auto backward = CountDrops(path.BottleneckRx(), path.BottleneckTx());
    // --linkLog: the bottleneck's per-packet log, as the chain's (stack-1.linklog, and on a
    // duplex path stack-1.reverse.linklog).
    std::unique_ptr<MagnetLinkLog> linkLogs[2];
    if (m_config.linkLog && !m_config.outDir.empty())
    {
        Time before;
        Time after;
        for (uint32_t hop = 0; hop < pathConfig.hops; ++hop)
        {
            (hop < pathConfig.Bottleneck() ? before : after) +=
                hop == pathConfig.Bottleneck() ? Time() : pathConfig.HopDelay(hop);
        }
        linkLogs[0] = std::make_unique<MagnetLinkLog>(path.BottleneckTx(), path.BottleneckRx(), before, after);
        if (pathConfig.duplex)
        {
            linkLogs[1] = std::make_unique<MagnetLinkLog>(path.BottleneckRx(), path.BottleneckTx(), after, before);
        }
    }

    auto wall = std::chrono::steady_clock::now();
    double cpu = CpuSeconds();
    Simulator::Run();
    result.cost = {std::chrono::duration<double>(std::chrono::steady_clock::now() - wall).count(),
                   CpuSeconds() - cpu};
    result.end = Simulator::Now();
    result.demux = DemuxCounts();
    for (size_t side : {0, 1})
    {
        recorders[side]->Close();
        result.counts[side] = recorders[side]->GetCounts();
    }
    result.bottleneck[0] = forward->GetCounts();
    result.bottleneck[1] = backward->GetCounts();
    if (cross)
    {
        result.crossBytes = cross->DeliveredBytes();
        result.crossTime = Simulator::Now() - cross->GetStart();
    }
    result.connections = replay.Connections();
    result.adus = replay.Adus();
    if (!m_config.outDir.empty())
    {
        replay.WriteResults(m_config.outDir);
    }
    for (size_t way : {0, 1})
    {
        if (linkLogs[way])
        {
            linkLogs[way]->Write(m_config.outDir + (way ? "/stack-1.reverse.linklog" : "/stack-1.linklog"));
        }
    }
    Simulator::Destroy();
    return result;
}

std::pair<MagnetCost, uint64_t>
MagnetAppScenario::RunReference(const MagnetAppDemand& demand, Time until)
{
    MagnetChain(m_config).ApplyDefaults(); // and the draws of stack 1
    const MagnetPathConfig& pathConfig = m_config.PathOf(1);
    const TypeId factory = MagnetTcpProfile(m_config.tcp).SocketFactory();
    NodeContainer nodes;
    nodes.Create(2);
    MagnetTcpProfile::InstallStack(nodes); // the replay's TCP for the plain applications too
    Ipv4AddressHelper ip(kNetwork, kNetmask);
    MagnetPath path = MagnetPathHelper(pathConfig)
                          .Install(nodes.Get(0), nodes.Get(1), ip);
    std::unique_ptr<MagnetCrossTraffic> cross;
    Time start;
    if (!m_config.cross.empty())
    {
        cross = std::make_unique<MagnetCrossTraffic>(m_config.cross, pathConfig);
        if (m_config.tcp.Linux())
        {
            cross->DrawStarts(MagnetCrossTraffic::kStartStream + 1);
        }
        cross->Install(path, ip, Seconds(0), m_config.tcp.SegmentSize(pathConfig.mtu), factory);
        start = m_config.crossLead;
    }
    Ipv4GlobalRoutingHelper::PopulateRoutingTables();
    InstallDemux();
    constexpr uint16_t kSinkPort = 9;
    Ipv4Address addresses[2] = {AddressOf(path.SenderDevice()), path.receiverAddress};
    PacketSink* sinks[2];
    for (size_t side : {0, 1})
    {
        PacketSinkHelper helper(factory.GetName(), InetSocketAddress(Ipv4Address::GetAny(), kSinkPort));
        sinks[side] = PeekPointer(DynamicCast<PacketSink>(helper.Install(nodes.Get(side)).Get(0)));
    }
    for (const auto& c : demand.connections)
    {
        int64_t last = c.openNs;
        for (MagnetSide side : {MagnetSide::Client, MagnetSide::Server})
        {
            for (const auto& ev : c.EventsOf(side))
            {
                last = std::max(last, ev.timeNs);
            }
        }
        double span = std::max<int64_t>(last - c.openNs, 1000000) * 1e-9;
        for (MagnetSide side : {MagnetSide::Client, MagnetSide::Server})
        {
            uint64_t bytes = c.BytesOf(side);
            if (bytes == 0)
            {
                continue;
            }
            size_t writes = 0;
            for (const auto& ev : c.EventsOf(side))
            {
                writes += ev.kind == MagnetAppEvent::Kind::Send;
            }
            size_t peer = 1 - static_cast<size_t>(side);
            OnOffHelper onoff(factory.GetName(), InetSocketAddress(addresses[peer], kSinkPort));
            onoff.SetConstantRate(DataRate(std::max<uint64_t>(8, static_cast<uint64_t>(bytes * 8 / span))),
                                  static_cast<uint32_t>(std::max<uint64_t>(1, bytes / writes)));
            onoff.SetAttribute("MaxBytes", UintegerValue(bytes));
            onoff.Install(nodes.Get(static_cast<size_t>(side))).Start(start + NanoSeconds(c.openNs));
        }
    }
    Simulator::Stop(until);
    auto wall = std::chrono::steady_clock::now();
    double cpu = CpuSeconds();
    Simulator::Run();
    MagnetCost cost{std::chrono::duration<double>(std::chrono::steady_clock::now() - wall).count(),
                    CpuSeconds() - cpu};
    uint64_t received = sinks[0]->GetTotalRx() + sinks[1]->GetTotalRx();
    Simulator::Destroy();
    return {cost, received};
}

} // namespace ns3
