/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "magnet-udp-schedule-application.h"

#include "ns3/abort.h"
#include "ns3/packet.h"
#include "ns3/simulator.h"
#include "ns3/string.h"
#include "ns3/udp-socket-factory.h"

namespace ns3
{

NS_OBJECT_ENSURE_REGISTERED(MagnetUdpScheduleApplication);

TypeId
MagnetUdpScheduleApplication::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::MagnetUdpScheduleApplication")
            .SetParent<SourceApplication>()
            .SetGroupName("Applications")
            .AddConstructor<MagnetUdpScheduleApplication>()
            .AddAttribute("Schedule",
                          "A magnet trace whose SOCK_SEND records are the datagrams (time, payload "
                          "bytes); empty: SetSchedule.",
                          StringValue(""),
                          MakeStringAccessor(&MagnetUdpScheduleApplication::m_file),
                          MakeStringChecker())
            .AddTraceSource("Tx",
                            "A datagram handed to the socket.",
                            MakeTraceSourceAccessor(&MagnetUdpScheduleApplication::m_txTrace),
                            "ns3::Packet::TracedCallback");
    return tid;
}

MagnetUdpScheduleApplication::MagnetUdpScheduleApplication() = default;
MagnetUdpScheduleApplication::~MagnetUdpScheduleApplication() = default;

void
MagnetUdpScheduleApplication::SetSchedule(MagnetDemand schedule)
{
    m_schedule = std::move(schedule);
}

uint64_t
MagnetUdpScheduleApplication::GetPacketsSent() const
{
    return m_packets;
}

uint64_t
MagnetUdpScheduleApplication::GetBytesSent() const
{
    return m_bytes;
}

bool
MagnetUdpScheduleApplication::Exhausted() const
{
    return m_next == m_schedule.size();
}

Time
MagnetUdpScheduleApplication::GetEnd() const
{
    return m_schedule.empty() ? m_origin : m_origin + NanoSeconds(m_schedule.back().timeNs);
}

void
MagnetUdpScheduleApplication::DoDispose()
{
    m_socket = nullptr;
    m_schedule.clear();
    SourceApplication::DoDispose();
}

void
MagnetUdpScheduleApplication::StartApplication()
{
    if (!m_file.empty() && m_schedule.empty())
    {
        try
        {
            m_schedule = ReadMagnetDemand(m_file);
        }
        catch (const MagnetTraceError& e)
        {
            NS_FATAL_ERROR(e.what());
        }
    }
    m_socket = Socket::CreateSocket(GetNode(), UdpSocketFactory::GetTypeId());
    NS_ABORT_MSG_IF(m_socket->Bind() != 0 || m_socket->Connect(m_peer) != 0,
                    "MagnetUdpScheduleApplication: cannot bind or connect the UDP socket");
    m_socket->ShutdownRecv();
    m_origin = Simulator::Now();
    ScheduleNext();
}

void
MagnetUdpScheduleApplication::StopApplication()
{
    Simulator::Cancel(m_sendEvent);
    if (m_socket)
    {
        m_socket->Close();
    }
}

void
MagnetUdpScheduleApplication::ScheduleNext()
{
    if (m_next < m_schedule.size())
    {
        Time at = m_origin + NanoSeconds(m_schedule[m_next].timeNs);
        m_sendEvent = Simulator::Schedule(at - Simulator::Now(), &MagnetUdpScheduleApplication::SendPacket, this);
    }
}

void
MagnetUdpScheduleApplication::SendPacket()
{
    auto size = static_cast<uint32_t>(m_schedule[m_next++].size);
    Ptr<Packet> packet = Create<Packet>(size);
    m_txTrace(packet);
    if (m_socket->Send(packet) > 0)
    {
        m_packets++;
        m_bytes += size;
    }
    ScheduleNext();
}

} // namespace ns3
