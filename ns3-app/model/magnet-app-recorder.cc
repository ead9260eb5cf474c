/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "magnet-app-recorder.h"

#include "magnet-tcp-frame.h"

#include "ns3/simulator.h"

namespace ns3
{

namespace
{

constexpr uint64_t kEventMask =
    MAGNET_BIT_SOCK_SEND | MAGNET_BIT_SOCK_RECV | MAGNET_BIT_DEV_SEND | MAGNET_BIT_DEV_RECV;

uint32_t
PortKey(uint16_t local, uint16_t remote)
{
    return uint32_t{local} << 16 | remote;
}

} // namespace

MagnetSideRecorder::MagnetSideRecorder(const std::string& path,
                                       MagnetSide side,
                                       const std::string& description)
{
    if (!path.empty())
    {
        m_writer = std::make_unique<MagnetTraceWriter>(
            path,
            MAGNET_CLOCK_SIMULATION,
            "magnet ns-3 whole-application replay (ns-" MAGNET_NS3_VERSION ")",
            kEventMask,
            description + "; sockid = connection number; data segments only (pure ACKs, SYN, "
                          "FIN not recorded)",
            MagnetSideName(side));
    }
}

void
MagnetSideRecorder::Attach(Ptr<MagnetConnectionApplication> app)
{
    app->TraceConnectWithoutContext("Write", MakeCallback(&MagnetSideRecorder::OnWrite, this));
    app->TraceConnectWithoutContext("Read", MakeCallback(&MagnetSideRecorder::OnRead, this));
    app->TraceConnectWithoutContext("Established",
                                    MakeCallback(&MagnetSideRecorder::OnEstablished, this));
}

void
MagnetSideRecorder::AttachDevice(Ptr<NetDevice> device)
{
    // A segment leaves the host when its device takes it (MacTx, before the device's queue),
    // where Linux's net_dev_start_xmit sees it on the TUN device in front of linkem: this
    // device is also the bottleneck, whose queueing and drops are the path's, not the host's.
    device->TraceConnectWithoutContext("MacTx", MakeCallback(&MagnetSideRecorder::OnDevTx, this));
    device->TraceConnectWithoutContext("PhyRxEnd", MakeCallback(&MagnetSideRecorder::OnDevRx, this));
}

void
MagnetSideRecorder::Close()
{
    if (m_writer)
    {
        m_writer->Close();
    }
}

const MagnetSideCounts&
MagnetSideRecorder::GetCounts() const
{
    return m_counts;
}

void
MagnetSideRecorder::Record(uint32_t connection, uint32_t event, uint32_t size)
{
    if (m_writer)
    {
        m_writer->Record(connection, Simulator::Now().GetNanoSeconds(), event, static_cast<int32_t>(size));
    }
}

void
MagnetSideRecorder::OnWrite(uint32_t connection, uint32_t bytes)
{
    m_counts.sockSend++;
    m_counts.sockSendBytes += bytes;
    Record(connection, MAGNET_SOCK_SEND, bytes);
}

void
MagnetSideRecorder::OnRead(uint32_t connection, uint32_t bytes)
{
    m_counts.sockRecv++;
    m_counts.sockRecvBytes += bytes;
    Record(connection, MAGNET_SOCK_RECV, bytes);
}

void
MagnetSideRecorder::OnEstablished(uint32_t connection, uint16_t local, uint16_t remote)
{
    m_ports[PortKey(local, remote)] = connection;
}

uint32_t
MagnetSideRecorder::Connection(uint16_t local, uint16_t remote) const
{
    auto it = m_ports.find(PortKey(local, remote));
    return it == m_ports.end() ? 0 : it->second;
}

void
MagnetSideRecorder::OnDevTx(Ptr<const Packet> packet)
{
    MagnetTcpFrame seg;
    uint32_t connection;
    if (MagnetParseTcpFrame(packet, seg) && seg.payload &&
        (connection = Connection(seg.sport, seg.dport)))
    {
        m_counts.devSend++;
        m_counts.devSendBytes += seg.payload;
        Record(connection, MAGNET_DEV_SEND, seg.payload);
    }
}

void
MagnetSideRecorder::OnDevRx(Ptr<const Packet> packet)
{
    MagnetTcpFrame seg;
    uint32_t connection;
    if (MagnetParseTcpFrame(packet, seg) && seg.payload &&
        (connection = Connection(seg.dport, seg.sport)))
    {
        m_counts.devRecv++;
        m_counts.devRecvBytes += seg.payload;
        Record(connection, MAGNET_DEV_RECV, seg.payload);
    }
}

} // namespace ns3
