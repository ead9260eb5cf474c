/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "magnet-stack-recorder.h"

#include "magnet-tcp-frame.h"

#include "ns3/abort.h"
#include "ns3/packet.h"
#include "ns3/point-to-point-net-device.h"
#include "ns3/queue.h"
#include "ns3/simulator.h"
#include "ns3/tcp-header.h"

namespace ns3
{

namespace
{

constexpr uint64_t kEventMask = MAGNET_BIT_SOCK_SEND | MAGNET_BIT_SOCK_RECV | MAGNET_BIT_TCP_SEND |
                                MAGNET_BIT_TCP_RETRANS | MAGNET_BIT_DEV_SEND | MAGNET_BIT_DEV_RECV;

} // namespace

uint32_t
MagnetStackRecorder::HighMark::NewBytes(uint32_t seq, uint32_t size)
{
    SequenceNumber32 start(seq);
    SequenceNumber32 end = start + size;
    if (!set)
    {
        set = true;
        high = end;
        return size;
    }
    if (end <= high)
    {
        return 0;
    }
    uint32_t fresh = start >= high ? size : static_cast<uint32_t>(end - high);
    high = end;
    return fresh;
}

MagnetStackRecorder::MagnetStackRecorder(const std::string& path,
                                         uint64_t sockid,
                                         const std::string& description)
    : m_sockid(sockid)
{
    if (!path.empty())
    {
        m_writer = std::make_unique<MagnetTraceWriter>(
            path,
            MAGNET_CLOCK_SIMULATION,
            "magnet ns-3 replay (ns-" MAGNET_NS3_VERSION ")",
            kEventMask,
            description + "; data segments only (pure ACKs, SYN, FIN not recorded)");
    }
}

MagnetStackRecorder::~MagnetStackRecorder() = default;

Time
MagnetRttStats::SrttMean() const
{
    return srttUpdates ? NanoSeconds(static_cast<int64_t>(srttSumNs / srttUpdates)) : Time();
}

void
MagnetStackRecorder::Attach(Ptr<MagnetReplayApplication> app,
                            Ptr<NetDevice> sender,
                            Ptr<NetDevice> receiver,
                            Ptr<MagnetSinkApplication> sink,
                            uint16_t sinkPort)
{
    m_port = sinkPort;
    app->TraceConnectWithoutContext("Srtt", MakeCallback(&MagnetStackRecorder::OnSrtt, this));
    app->TraceConnectWithoutContext("LastRtt", MakeCallback(&MagnetStackRecorder::OnLastRtt, this));
    app->TraceConnectWithoutContext("Write", MakeCallback(&MagnetStackRecorder::OnWrite, this));
    app->TraceConnectWithoutContext("TcpTx", MakeCallback(&MagnetStackRecorder::OnTcpTx, this));
    // A segment leaves the host when its device takes it (MacTx, before the device's
    // queue), where Linux's net_dev_start_xmit sees it on a TUN device: on a one-hop path
    // the sender's device is also the bottleneck, whose queueing is the path's, not the host's.
    sender->TraceConnectWithoutContext("MacTx",
                                       MakeCallback(&MagnetStackRecorder::OnDevTx, this));
    receiver->TraceConnectWithoutContext("PhyRxEnd",
                                         MakeCallback(&MagnetStackRecorder::OnDevRx, this));
    sink->TraceConnectWithoutContext("Read", MakeCallback(&MagnetStackRecorder::OnRead, this));
}

void
MagnetStackRecorder::AttachBottleneck(Ptr<NetDevice> tx, Ptr<NetDevice> rx)
{
    auto p2p = DynamicCast<PointToPointNetDevice>(tx);
    NS_ABORT_MSG_UNLESS(p2p, "MagnetStackRecorder: the bottleneck is not a point-to-point device");
    p2p->GetQueue()->TraceConnectWithoutContext("Drop",
                                                MakeCallback(&MagnetStackRecorder::OnQueueDrop, this));
    rx->TraceConnectWithoutContext("PhyRxDrop", MakeCallback(&MagnetStackRecorder::OnLoss, this));
}

const MagnetRttStats&
MagnetStackRecorder::GetRtt() const
{
    return m_rtt;
}

bool
MagnetStackRecorder::Own(Ptr<const Packet> packet, uint32_t* seq, uint32_t* payload) const
{
    MagnetTcpFrame seg;
    if (!MagnetParseTcpFrame(packet, seg) || seg.payload == 0 || seg.dport != m_port)
    {
        return false;
    }
    if (seq)
    {
        *seq = seg.seq;
        *payload = seg.payload;
    }
    return true;
}

void
MagnetStackRecorder::OnQueueDrop(Ptr<const Packet> packet)
{
    m_counts.queueDrops++;
    m_counts.queueDropsOwn += Own(packet);
}

void
MagnetStackRecorder::OnLoss(Ptr<const Packet> packet)
{
    m_counts.lossDrops++;
    m_counts.lossDropsOwn += Own(packet);
}

void
MagnetStackRecorder::OnSrtt(Time before, Time now)
{
    m_rtt.srttUpdates++;
    m_rtt.srttSumNs += static_cast<double>(now.GetNanoSeconds());
    m_rtt.srttLast = now;
}

void
MagnetStackRecorder::OnLastRtt(Time before, Time now)
{
    m_rtt.samples++;
    m_rtt.sampleMin = m_rtt.samples == 1 ? now : std::min(m_rtt.sampleMin, now);
}

void
MagnetStackRecorder::Close()
{
    if (m_writer)
    {
        m_writer->Close();
    }
}

const std::vector<MagnetWireSegment>&
MagnetStackRecorder::GetWire() const
{
    return m_wire;
}

const MagnetStackCounts&
MagnetStackRecorder::GetCounts() const
{
    return m_counts;
}

MagnetDemand
MagnetStackRecorder::WireDemand(bool newDataOnly) const
{
    MagnetDemand demand;
    demand.reserve(m_wire.size());
    for (const auto& seg : m_wire)
    {
        uint32_t size = newDataOnly ? seg.newBytes : seg.size;
        if (size)
        {
            demand.push_back({seg.ns - m_wire.front().ns, size});
        }
    }
    return demand;
}

void
MagnetStackRecorder::Record(uint32_t event, uint32_t size)
{
    if (m_writer)
    {
        m_writer->Record(m_sockid, Simulator::Now().GetNanoSeconds(), event, static_cast<int32_t>(size));
    }
}

void
MagnetStackRecorder::OnWrite(uint32_t bytes, Time due)
{
    m_counts.sockSend++;
    m_counts.sockSendBytes += bytes;
    Record(MAGNET_SOCK_SEND, bytes);
}

void
MagnetStackRecorder::OnTcpTx(Ptr<const Packet> packet,
                             const TcpHeader& header,
                             Ptr<const TcpSocketBase> socket)
{
    uint32_t size = packet->GetSize(); // the payload: TCP adds its header later
    if (size == 0)
    {
        return;
    }
    if (m_tcpHigh.NewBytes(header.GetSequenceNumber().GetValue(), size) == size)
    {
        m_counts.tcpSend++;
        m_counts.tcpSendBytes += size;
        Record(MAGNET_TCP_SEND, size);
    }
    else
    {
        m_counts.tcpRetrans++;
        m_counts.tcpRetransBytes += size;
        Record(MAGNET_TCP_RETRANS, size);
    }
}

void
MagnetStackRecorder::OnDevTx(Ptr<const Packet> packet)
{
    uint32_t seq;
    uint32_t payload;
    if (!Own(packet, &seq, &payload))
    {
        return;
    }
    uint32_t fresh = m_devHigh.NewBytes(seq, payload);
    m_counts.devSend++;
    m_counts.devSendBytes += payload;
    m_counts.devRetrans += fresh < payload;
    m_wire.push_back({Simulator::Now().GetNanoSeconds(), payload, fresh});
    Record(MAGNET_DEV_SEND, payload);
}

void
MagnetStackRecorder::OnDevRx(Ptr<const Packet> packet)
{
    uint32_t seq;
    uint32_t payload;
    if (!Own(packet, &seq, &payload))
    {
        return;
    }
    m_counts.devRecv++;
    m_counts.devRecvBytes += payload;
    Record(MAGNET_DEV_RECV, payload);
}

void
MagnetStackRecorder::OnRead(uint32_t bytes)
{
    m_counts.sockRecv++;
    m_counts.sockRecvBytes += bytes;
    Record(MAGNET_SOCK_RECV, bytes);
}

} // namespace ns3
