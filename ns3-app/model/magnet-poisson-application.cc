/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "magnet-poisson-application.h"

#include "ns3/abort.h"
#include "ns3/double.h"
#include "ns3/packet.h"
#include "ns3/simulator.h"
#include "ns3/udp-socket-factory.h"
#include "ns3/uinteger.h"

namespace ns3
{

NS_OBJECT_ENSURE_REGISTERED(MagnetPoissonApplication);

TypeId
MagnetPoissonApplication::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::MagnetPoissonApplication")
            .SetParent<SourceApplication>()
            .SetGroupName("Applications")
            .AddConstructor<MagnetPoissonApplication>()
            .AddAttribute("PacketSize",
                          "UDP payload bytes of every packet.",
                          UintegerValue(1000),
                          MakeUintegerAccessor(&MagnetPoissonApplication::m_packetSize),
                          MakeUintegerChecker<uint32_t>(1))
            .AddAttribute("DataRate",
                          "Mean rate of the payload (the gaps' mean is PacketSize * 8 / DataRate).",
                          DataRateValue(DataRate("1Mbps")),
                          MakeDataRateAccessor(&MagnetPoissonApplication::m_rate),
                          MakeDataRateChecker())
            .AddTraceSource("Tx",
                            "A packet handed to the socket.",
                            MakeTraceSourceAccessor(&MagnetPoissonApplication::m_txTrace),
                            "ns3::Packet::TracedCallback");
    return tid;
}

MagnetPoissonApplication::MagnetPoissonApplication()
    : m_gap(CreateObject<ExponentialRandomVariable>())
{
}

MagnetPoissonApplication::~MagnetPoissonApplication() = default;

int64_t
MagnetPoissonApplication::AssignStreams(int64_t stream)
{
    m_gap->SetStream(stream);
    return 1;
}

uint64_t
MagnetPoissonApplication::GetPacketsSent() const
{
    return m_packets;
}

uint64_t
MagnetPoissonApplication::GetBytesSent() const
{
    return m_bytes;
}

void
MagnetPoissonApplication::DoDispose()
{
    m_socket = nullptr;
    SourceApplication::DoDispose();
}

void
MagnetPoissonApplication::StartApplication()
{
    NS_ABORT_MSG_IF(m_rate.GetBitRate() == 0, "MagnetPoissonApplication: DataRate must be positive");
    m_socket = Socket::CreateSocket(GetNode(), UdpSocketFactory::GetTypeId());
    NS_ABORT_MSG_IF(m_socket->Bind() != 0 || m_socket->Connect(m_peer) != 0,
                    "MagnetPoissonApplication: cannot bind or connect the UDP socket");
    m_socket->ShutdownRecv();
    m_gap->SetAttribute("Mean", DoubleValue(m_packetSize * 8.0 / m_rate.GetBitRate()));
    ScheduleNext();
}

void
MagnetPoissonApplication::StopApplication()
{
    Simulator::Cancel(m_sendEvent);
    if (m_socket)
    {
        m_socket->Close();
    }
}

void
MagnetPoissonApplication::ScheduleNext()
{
    m_sendEvent = Simulator::Schedule(Seconds(m_gap->GetValue()), &MagnetPoissonApplication::SendPacket, this);
}

void
MagnetPoissonApplication::SendPacket()
{
    Ptr<Packet> packet = Create<Packet>(m_packetSize);
    m_txTrace(packet);
    if (m_socket->Send(packet) > 0)
    {
        m_packets++;
        m_bytes += m_packetSize;
    }
    ScheduleNext();
}

} // namespace ns3
