/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "magnet-path-helper.h"

#include "magnet-jitter-channel.h"
#include "magnet-linkem-loss-model.h"
#include "magnet-poisson-application.h"
#include "magnet-tcp-profile.h"
#include "magnet-udp-schedule-application.h"
#include "magnet-units.h"

#include "ns3/boolean.h"
#include "ns3/bulk-send-helper.h"
#include "ns3/config.h"
#include "ns3/data-rate.h"
#include "ns3/double.h"
#include "ns3/drop-tail-queue.h"
#include "ns3/error-model.h"
#include "ns3/inet-socket-address.h"
#include "ns3/internet-stack-helper.h"
#include "ns3/ipv4-interface-container.h"
#include "ns3/mac48-address.h"
#include "ns3/on-off-helper.h"
#include "ns3/packet-sink-helper.h"
#include "ns3/pointer.h"
#include "ns3/point-to-point-net-device.h"
#include "ns3/queue-size.h"
#include "ns3/random-variable-stream.h"
#include "ns3/simulator.h"
#include "ns3/string.h"
#include "ns3/uinteger.h"

#include <iterator>
#include <sstream>
#include <stdexcept>

namespace ns3
{

namespace
{

constexpr double kParetoShape = 1.5; // ns-2's Pareto on/off default: heavy tails, finite mean
constexpr uint32_t kIpUdpHeaders = 28;
constexpr uint64_t kPppHeader = 2;

std::string
Percent(double fraction)
{
    std::ostringstream s;
    s << fraction * 100 << "%";
    return s.str();
}

} // namespace

// ------------------------------------------------------------------ loss ---
bool
MagnetLossConfig::Bursty() const
{
    return r >= 0;
}

double
MagnetLossConfig::Mean() const
{
    if (!Bursty())
    {
        return p;
    }
    if (p + r == 0)
    {
        return good;
    }
    double inBad = p / (p + r);
    return inBad * bad + (1 - inBad) * good;
}

MagnetLossConfig
MagnetLossConfig::Parse(const std::string& text)
{
    MagnetLossConfig loss;
    if (text.rfind("ge:", 0) != 0)
    {
        loss.p = MagnetProbability(text, "loss");
        return loss;
    }
    std::vector<std::string> parts = MagnetSplit(text.substr(3), '/');
    if (parts.size() < 2 || parts.size() > 4)
    {
        throw std::invalid_argument("loss '" + text + "': use ge:P/R[/BAD[/GOOD]]");
    }
    double* fields[] = {&loss.p, &loss.r, &loss.bad, &loss.good};
    for (size_t i = 0; i < parts.size(); ++i)
    {
        *fields[i] = MagnetProbability(parts[i], "loss");
    }
    return loss;
}

std::string
MagnetLossConfig::Describe() const
{
    if (!Bursty())
    {
        return Percent(p) + " (Bernoulli, linkem's draws: MagnetLinkemLossModel)";
    }
    return Percent(Mean()) + " on average (Gilbert-Elliott: good->bad " + Percent(p) +
           ", bad->good " + Percent(r) + ", loss " + Percent(bad) + " bad, " + Percent(good) +
           " good; linkem's draws: MagnetLinkemLossModel)";
}

// ------------------------------------------------------------------ path ---
uint32_t
MagnetPathConfig::Bottleneck() const
{
    return hops / 2;
}

Time
MagnetPathConfig::HopDelay(uint32_t hop) const
{
    int64_t ns = delay.GetNanoSeconds();
    return NanoSeconds(ns / hops + (hop + 1 == hops ? ns % hops : 0));
}

std::string
MagnetPathConfig::Describe() const
{
    std::ostringstream s;
    if (rateBps && duplex)
    {
        s << MagnetFormatRate(rateBps) << " bottleneck each way (duplex), DropTail queue " << queue
          << " each way";
    }
    else if (rateBps)
    {
        s << MagnetFormatRate(rateBps) << " bottleneck (data direction; " << MagnetPathHelper::kFastRate
          << " back), DropTail queue " << queue;
    }
    else
    {
        s << "no bottleneck (every hop " << MagnetPathHelper::kFastRate << ")";
    }
    s << ", loss " << (loss.Mean() > 0 ? loss.Describe() + (duplex ? " each way" : "") : "none");
    if (jitter.IsStrictlyPositive())
    {
        s << ", jitter up to " << MagnetFormatTime(jitter) << " both ways (order kept)";
    }
    s << "; " << MagnetFormatTime(delay) << " one way over " << hops << " hop"
      << (hops > 1 ? "s" : "") << " of " << MagnetFormatTime(HopDelay(0));
    if (HopDelay(hops - 1) != HopDelay(0))
    {
        s << " (the last " << MagnetFormatTime(HopDelay(hops - 1)) << ")";
    }
    if (hops > 1)
    {
        s << ", the bottleneck hop " << Bottleneck() + 1 << ", the others "
          << MagnetPathHelper::kFastRate;
    }
    s << "; MTU " << mtu;
    return s.str();
}

void
MagnetPathConfig::Validate(const std::string& where) const
{
    auto fail = [&](const std::string& problem) { throw std::invalid_argument(where + ": " + problem); };
    QueueSizeValue q;
    if (!q.DeserializeFromString(queue, MakeQueueSizeChecker()) || q.Get().GetValue() == 0)
    {
        fail("queue '" + queue + "' is not a queue size (100p or 150000B)");
    }
    if (hops == 0 || hops > 255)
    {
        fail("hops must be 1 to 255");
    }
    if (mtu < 68 || mtu > 65535)
    {
        fail("MTU " + std::to_string(mtu) + " is out of range (68 to 65535)");
    }
    if (delay.IsStrictlyNegative() || jitter.IsStrictlyNegative())
    {
        fail("delay and jitter cannot be negative");
    }
    bool ge = loss.Bursty();
    for (double v : {loss.p, ge ? loss.r : 0.0, loss.bad, loss.good})
    {
        if (v < 0 || v > 1)
        {
            fail("loss probabilities must be in [0, 1]");
        }
    }
    if (!ge && loss.p >= 1)
    {
        fail("a loss of 100% lets nothing through");
    }
}

// ----------------------------------------------------------------- cross ---
MagnetCrossConfig
MagnetCrossConfig::Parse(const std::string& text)
{
    auto colon = text.find(':');
    std::string kind = text.substr(0, colon);
    std::vector<std::string> parts =
        colon == std::string::npos ? std::vector<std::string>{} : MagnetSplit(text.substr(colon + 1), '/');
    MagnetCrossConfig c;
    auto bad = [&]() {
        return std::invalid_argument("cross traffic '" + text +
                                     "': use tcp:N, poisson:SHARE[/BYTES] or "
                                     "pareto:SHARE[/BYTES/ON/OFF]");
    };
    if (kind == "tcp" && parts.size() == 1)
    {
        c.flows = MagnetCount(parts[0], "cross traffic flows");
        if (c.flows == 0)
        {
            throw bad();
        }
        return c;
    }
    bool poisson = kind == "poisson" && (parts.size() == 1 || parts.size() == 2);
    bool pareto = kind == "pareto" && (parts.size() == 1 || parts.size() == 2 || parts.size() == 4);
    if (!poisson && !pareto)
    {
        throw bad();
    }
    c.kind = poisson ? Kind::Poisson : Kind::Pareto;
    c.share = MagnetProbability(parts[0], "cross traffic share");
    if (c.share <= 0 || c.share >= 1)
    {
        throw bad();
    }
    if (parts.size() >= 2)
    {
        c.packetBytes = MagnetCount(parts[1], "cross traffic packet size");
    }
    if (parts.size() == 4)
    {
        c.on = MagnetTime(parts[2], "cross traffic on time");
        c.off = MagnetTime(parts[3], "cross traffic off time");
    }
    if (c.packetBytes == 0 || !c.on.IsStrictlyPositive() || !c.off.IsStrictlyPositive())
    {
        throw bad();
    }
    return c;
}

std::string
MagnetCrossConfig::Describe(uint64_t rateBps) const
{
    std::ostringstream s;
    switch (kind)
    {
    case Kind::BulkTcp:
        s << flows << " bulk TCP flow" << (flows > 1 ? "s" : "")
          << " (BulkSendApplication, the stacks' TCP, flow i starting 10 ms x i after the cross traffic, "
             "with the linux model each late by a draw from the seed of the real sender's measured "
             "lateness)";
        break;
    case Kind::Poisson:
        s << "Poisson UDP at " << Percent(share) << " of the bottleneck ("
          << MagnetFormatRate(static_cast<uint64_t>(share * rateBps)) << ", " << packetBytes
          << " B packets, exponential gaps; MagnetPoissonApplication)";
        break;
    case Kind::Pareto:
        s << "Pareto on/off UDP at " << Percent(share) << " of the bottleneck ("
          << MagnetFormatRate(static_cast<uint64_t>(share * rateBps)) << " on average, "
          << MagnetFormatRate(static_cast<uint64_t>(share * rateBps * (on + off).GetSeconds() /
                                                    on.GetSeconds()))
          << " while on, " << packetBytes << " B packets, on " << MagnetFormatTime(on) << " and off "
          << MagnetFormatTime(off) << " on average, Pareto shape " << kParetoShape
          << "; OnOffApplication)";
        break;
    }
    return s.str();
}

void
MagnetCrossConfig::Validate(const MagnetPathConfig& path, const std::string& where) const
{
    if (kind != Kind::BulkTcp && path.rateBps == 0)
    {
        throw std::invalid_argument(where + ": UDP cross traffic is a share of the bottleneck's "
                                            "rate, and the path has none");
    }
    if (kind != Kind::BulkTcp && packetBytes + kIpUdpHeaders > path.mtu)
    {
        throw std::invalid_argument(where + ": UDP packets of " + std::to_string(packetBytes) +
                                    " B do not fit the MTU " + std::to_string(path.mtu));
    }
}

// ----------------------------------------------------------- built path ---
Ptr<NetDevice>
MagnetPath::SenderDevice() const
{
    return links.front().Get(0);
}

Ptr<NetDevice>
MagnetPath::ReceiverDevice() const
{
    return links.back().Get(1);
}

Ptr<NetDevice>
MagnetPath::BottleneckTx() const
{
    return links[bottleneck].Get(0);
}

Ptr<NetDevice>
MagnetPath::BottleneckRx() const
{
    return links[bottleneck].Get(1);
}

Ptr<Node>
MagnetPath::Head() const
{
    return nodes.Get(bottleneck);
}

Ptr<Node>
MagnetPath::Tail() const
{
    return nodes.Get(bottleneck + 1);
}

// ---------------------------------------------------------------- helper ---
namespace
{

/**
 * A drop-tail queue of `limit` IP bytes, as linkem keeps one (replay/linkem/core.c: a packet
 * joins if the IP bytes waiting and its own fit).  A point-to-point device queues PPP frames,
 * 2 bytes more per packet: ns-3's own byte limit counted those, and a 150000-byte queue (1 BDP
 * at 20 Mbit/s and 60 ms) held 99 full-sized packets where linkem's holds 100.
 */
class IpBytesQueue : public DropTailQueue<Packet>
{
  public:
    explicit IpBytesQueue(uint64_t limit)
        : m_limit(limit)
    {
    }

    bool Enqueue(Ptr<Packet> packet) override
    {
        uint64_t waiting = GetNBytes() - kPppHeader * GetNPackets();
        if (waiting + packet->GetSize() - kPppHeader > m_limit)
        {
            DropBeforeEnqueue(packet);
            return false;
        }
        return DropTailQueue<Packet>::Enqueue(packet);
    }

  private:
    uint64_t m_limit;
};

Ptr<PointToPointNetDevice>
Device(Ptr<Node> node, const std::string& rate, const std::string& queue, uint32_t mtu)
{
    auto device = CreateObject<PointToPointNetDevice>();
    device->SetAddress(Mac48Address::Allocate());
    device->SetAttribute("DataRate", StringValue(rate));
    device->SetMtu(static_cast<uint16_t>(mtu));
    node->AddDevice(device);
    QueueSize size(queue);
    Ptr<DropTailQueue<Packet>> q;
    if (size.GetUnit() == QueueSizeUnit::BYTES)
    {
        // Its own limit binds: the frames' (every IP packet at least 20 bytes) never does.
        uint64_t ip = size.GetValue();
        q = CreateObject<IpBytesQueue>(ip);
        q->SetAttribute("MaxSize", QueueSizeValue(QueueSize(QueueSizeUnit::BYTES,
                                                            static_cast<uint32_t>(ip + kPppHeader * (ip / 20 + 1)))));
    }
    else
    {
        q = CreateObject<DropTailQueue<Packet>>();
        q->SetAttribute("MaxSize", StringValue(queue));
    }
    // No NetDeviceQueueInterface (flow control) and so no queue disc: the
    // device's DropTail queue alone is the link's buffer, as on a plain router port.
    device->SetQueue(q);
    return device;
}

NetDeviceContainer
Join(Ptr<PointToPointNetDevice> a, Ptr<PointToPointNetDevice> b, Ptr<PointToPointChannel> channel,
     Ipv4AddressHelper& ip)
{
    a->Attach(channel);
    b->Attach(channel);
    NetDeviceContainer devices(a);
    devices.Add(b);
    ip.Assign(devices);
    ip.NewNetwork();
    return devices;
}

} // namespace

MagnetPathHelper::MagnetPathHelper(MagnetPathConfig config)
    : m_config(std::move(config))
{
}

NetDeviceContainer
MagnetPathHelper::FastLink(Ptr<Node> a, Ptr<Node> b, Time delay, Ipv4AddressHelper& ip) const
{
    auto channel = CreateObject<PointToPointChannel>();
    channel->SetAttribute("Delay", TimeValue(delay));
    return Join(Device(a, kFastRate, kFastQueue, m_config.mtu),
                Device(b, kFastRate, kFastQueue, m_config.mtu),
                channel,
                ip);
}

NetDeviceContainer
MagnetPathHelper::Link(Ptr<Node> a, Ptr<Node> b, uint32_t hop, Ipv4AddressHelper& ip) const
{
    const MagnetPathConfig& c = m_config;
    if (hop != c.Bottleneck())
    {
        return FastLink(a, b, c.HopDelay(hop), ip);
    }
    // A point-to-point device serialises a 2-byte PPP header with each packet; linkem
    // and a router port serialise the IP packet.  The rate is raised by (MTU + 2) / MTU
    // so that a full-sized packet takes its IP bytes' time at the rate exactly (a
    // 1028-byte datagram then takes 0.06 % longer, a 440-byte segment 0.3 %).
    std::string rate = c.rateBps ? std::to_string(c.rateBps * (c.mtu + kPppHeader) / c.mtu) + "bps" : kFastRate;
    Ptr<PointToPointChannel> channel;
    if (c.jitter.IsStrictlyPositive())
    {
        channel = CreateObject<MagnetJitterChannel>();
        channel->SetAttribute("Jitter", TimeValue(c.jitter));
    }
    else
    {
        channel = CreateObject<PointToPointChannel>();
    }
    channel->SetAttribute("Delay", TimeValue(c.HopDelay(hop)));
    // Duplex: the reverse direction leaves b by a device of the same rate and queue.
    auto rx = c.duplex ? Device(b, rate, c.queue, c.mtu) : Device(b, kFastRate, kFastQueue, c.mtu);
    if (c.loss.Mean() > 0)
    {
        rx->SetReceiveErrorModel(Errors(false));
    }
    auto tx = Device(a, rate, c.queue, c.mtu);
    if (c.duplex && c.loss.Mean() > 0)
    {
        tx->SetReceiveErrorModel(Errors(true)); // the reverse direction's loss, its own draws
    }
    return Join(tx, rx, channel, ip);
}

Ptr<ErrorModel>
MagnetPathHelper::Errors(bool reverse) const
{
    // Received by the far end of the link: the packets that left the queue, in order,
    // as linkem draws for the packets that passed its queue.  linkem draws jitter from
    // the same generator, both ways (the reverse direction has jitter but no loss
    // unless duplex).
    const MagnetLossConfig& loss = m_config.loss;
    return CreateObjectWithAttributes<MagnetLinkemLossModel>(
        "Seed", UintegerValue(MagnetLinkemLossModel::DirectionSeed(m_config.seed, reverse)),
        "GilbertElliott", BooleanValue(loss.Bursty()), "P", DoubleValue(loss.p),
        "R", DoubleValue(loss.Bursty() ? loss.r : 1.0), "LossBad", DoubleValue(loss.bad),
        "LossGood", DoubleValue(loss.good), "JitterDraws", BooleanValue(m_config.jitter.IsStrictlyPositive()));
}

MagnetPath
MagnetPathHelper::Install(Ptr<Node> sender, Ptr<Node> receiver, Ipv4AddressHelper& ip) const
{
    MagnetPath path;
    NodeContainer routers;
    routers.Create(m_config.hops - 1);
    InternetStackHelper().Install(routers);
    path.nodes.Add(sender);
    path.nodes.Add(routers);
    path.nodes.Add(receiver);
    path.bottleneck = m_config.Bottleneck();
    for (uint32_t hop = 0; hop < m_config.hops; ++hop)
    {
        path.links.push_back(Link(path.nodes.Get(hop), path.nodes.Get(hop + 1), hop, ip));
    }
    Ptr<NetDevice> last = path.ReceiverDevice();
    Ptr<Ipv4> ipv4 = receiver->GetObject<Ipv4>();
    path.receiverAddress = ipv4->GetAddress(ipv4->GetInterfaceForDevice(last), 0).GetLocal();
    return path;
}

// ----------------------------------------------------------------- cross ---
MagnetCrossTraffic::MagnetCrossTraffic(std::vector<MagnetCrossConfig> cross, MagnetPathConfig path)
    : m_cross(std::move(cross)),
      m_path(std::move(path))
{
}

void
MagnetCrossTraffic::SetSegmentSize(uint32_t bytes)
{
    Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(bytes));
}

void
MagnetCrossTraffic::Install(const MagnetPath& path, Ipv4AddressHelper& ip, Time start, uint32_t segmentSize,
                            TypeId tcpFactory)
{
    m_start = start;
    NodeContainer ends;
    ends.Create(2);
    MagnetTcpProfile::InstallStack(ends);
    Time before;
    Time after;
    for (uint32_t hop = 0; hop < m_path.hops; ++hop)
    {
        (hop < path.bottleneck ? before : after) += hop == path.bottleneck ? Time() : m_path.HopDelay(hop);
    }
    MagnetPathHelper links(m_path);
    NetDeviceContainer in = links.FastLink(ends.Get(0), path.Head(), before, ip);
    NetDeviceContainer out = links.FastLink(path.Tail(), ends.Get(1), after, ip);
    auto address = [](Ptr<NetDevice> device) {
        Ptr<Ipv4> ipv4 = device->GetNode()->GetObject<Ipv4>();
        return ipv4->GetAddress(ipv4->GetInterfaceForDevice(device), 0).GetLocal();
    };
    InstallDirection(ends.Get(0), ends.Get(1), address(out.Get(1)), kFirstPort, start, segmentSize,
                     tcpFactory, m_schedules);
    if (m_path.duplex)
    {
        // The schedules are the forward direction's: ns-3 draws the reverse one.
        InstallDirection(ends.Get(1), ends.Get(0), address(in.Get(0)), kReverseFirstPort, start,
                         segmentSize, tcpFactory, {});
    }
}

void
MagnetCrossTraffic::InstallDirection(Ptr<Node> from,
                                     Ptr<Node> to,
                                     Ipv4Address sinkAddress,
                                     uint16_t firstPort,
                                     Time start,
                                     uint32_t segmentSize,
                                     TypeId tcpFactory,
                                     const std::vector<std::string>& schedules)
{
    for (size_t i = 0; i < m_cross.size(); ++i)
    {
        const MagnetCrossConfig& c = m_cross[i];
        auto port = static_cast<uint16_t>(firstPort + i);
        bool tcp = c.kind == MagnetCrossConfig::Kind::BulkTcp;
        std::string factory = tcp ? tcpFactory.GetName() : "ns3::UdpSocketFactory";
        PacketSinkHelper sinks(factory, InetSocketAddress(Ipv4Address::GetAny(), port));
        ApplicationContainer sink = sinks.Install(to);
        m_sinks.push_back(DynamicCast<PacketSink>(sink.Get(0)));
        InetSocketAddress remote(sinkAddress, port);
        ApplicationContainer sources;
        // The share counts IP bytes on the bottleneck (as replay/cross.py does for real
        // TCP); ns-3's UDP applications take their rate in payload bytes.
        double payload = static_cast<double>(c.packetBytes) / (c.packetBytes + kIpUdpHeaders);
        uint64_t mean = static_cast<uint64_t>(c.share * static_cast<double>(m_path.rateBps) * payload);
        if (tcp)
        {
            BulkSendHelper bulk(factory, remote);
            bulk.SetAttribute("SendSize", UintegerValue(16384));
            for (uint32_t f = 0; f < c.flows; ++f)
            {
                // Scheduled now, before the application's start event: it runs first.
                Time at = start + BulkOffset(f);
                Simulator::Schedule(at, &MagnetCrossTraffic::SetSegmentSize, segmentSize);
                sources.Add(bulk.Install(from));
                sources.Get(f)->SetStartTime(at);
            }
        }
        else if (i < schedules.size() && !schedules[i].empty())
        {
            auto app = CreateObject<MagnetUdpScheduleApplication>();
            app->SetAttribute("Remote", AddressValue(remote));
            app->SetAttribute("Schedule", StringValue(schedules[i]));
            from->AddApplication(app);
            sources.Add(app);
            m_played.push_back(app);
        }
        else if (c.kind == MagnetCrossConfig::Kind::Poisson)
        {
            auto app = CreateObject<MagnetPoissonApplication>();
            app->SetAttribute("Remote", AddressValue(remote));
            app->SetAttribute("PacketSize", UintegerValue(c.packetBytes));
            app->SetAttribute("DataRate", DataRateValue(DataRate(mean)));
            from->AddApplication(app);
            sources.Add(app);
        }
        else
        {
            // Mean rate = share of the bottleneck: send at rate * (on + off) / on while on.
            double onRate = static_cast<double>(mean) * (c.on + c.off).GetSeconds() / c.on.GetSeconds();
            OnOffHelper onoff(factory, remote);
            onoff.SetAttribute("DataRate", DataRateValue(DataRate(static_cast<uint64_t>(onRate))));
            onoff.SetAttribute("PacketSize", UintegerValue(c.packetBytes));
            for (auto [name, mean] : {std::pair{"OnTime", c.on}, std::pair{"OffTime", c.off}})
            {
                auto pareto = CreateObjectWithAttributes<ParetoRandomVariable>(
                    "Shape", DoubleValue(kParetoShape),
                    "Scale", DoubleValue(mean.GetSeconds() * (kParetoShape - 1) / kParetoShape));
                onoff.SetAttribute(name, PointerValue(pareto));
            }
            sources.Add(onoff.Install(from));
        }
        if (!tcp)
        {
            sources.Start(start);
        }
    }
}

void
MagnetCrossTraffic::DrawStarts(int64_t stream)
{
    m_late = CreateObject<UniformRandomVariable>();
    m_late->SetStream(stream); // its own stream: the other sources' draws stay as they were
}

Time
MagnetCrossTraffic::BulkOffset(uint32_t flow)
{
    Time offset = MilliSeconds(10 * flow);
    if (!m_late)
    {
        return offset;
    }
    // The flow's measured lateness: its empirical quantile function (linear between the
    // 5 % quantiles) at a uniform draw.
    const auto& late = kBulkLateUs[std::min<size_t>(flow, std::size(kBulkLateUs) - 1)];
    constexpr size_t n = std::size(kBulkLateUs[0]);
    double at = m_late->GetValue(0, 1) * (n - 1);
    auto i = std::min(static_cast<size_t>(at), n - 2);
    double us = late[i] + (at - i) * (late[i + 1] - late[i]);
    return offset + NanoSeconds(static_cast<int64_t>(us * 1000));
}

void
MagnetCrossTraffic::SetSchedules(std::vector<std::string> files)
{
    m_schedules = std::move(files);
}

bool
MagnetCrossTraffic::ScheduleExhausted() const
{
    for (const auto& app : m_played)
    {
        if (DynamicCast<MagnetUdpScheduleApplication>(app)->Exhausted())
        {
            return true;
        }
    }
    return false;
}

uint64_t
MagnetCrossTraffic::DeliveredBytes() const
{
    uint64_t total = 0;
    for (const auto& sink : m_sinks)
    {
        total += sink->GetTotalRx();
    }
    return total;
}

Time
MagnetCrossTraffic::GetStart() const
{
    return m_start;
}

} // namespace ns3
