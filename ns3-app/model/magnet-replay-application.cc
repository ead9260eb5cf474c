/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "magnet-replay-application.h"

#include "ns3/abort.h"
#include "ns3/boolean.h"
#include "ns3/inet-socket-address.h"
#include "ns3/inet6-socket-address.h"
#include "ns3/log.h"
#include "ns3/object-factory.h"
#include "ns3/packet.h"
#include "ns3/simulator.h"
#include "ns3/string.h"
#include "ns3/tcp-congestion-ops.h"
#include "ns3/tcp-l4-protocol.h"
#include "ns3/tcp-socket-base.h"
#include "ns3/tcp-socket-factory.h"
#include "ns3/type-id.h"
#include "ns3/uinteger.h"

#include <iostream>

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("MagnetReplayApplication");
NS_OBJECT_ENSURE_REGISTERED(MagnetReplayApplication);

TypeId
MagnetReplayApplication::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::MagnetReplayApplication")
            .SetParent<Application>()
            .SetGroupName("Applications")
            .AddConstructor<MagnetReplayApplication>()
            .AddAttribute("Remote",
                          "The address of the destination (the sink).",
                          AddressValue(),
                          MakeAddressAccessor(&MagnetReplayApplication::m_peer),
                          MakeAddressChecker())
            .AddAttribute("Local",
                          "The address to bind the socket to (default: any).",
                          AddressValue(),
                          MakeAddressAccessor(&MagnetReplayApplication::m_local),
                          MakeAddressChecker())
            .AddAttribute("Protocol",
                          "The socket factory: a stream (TCP) socket type.",
                          TypeIdValue(TcpSocketFactory::GetTypeId()),
                          MakeTypeIdAccessor(&MagnetReplayApplication::m_tid),
                          MakeTypeIdChecker())
            .AddAttribute("TcpVariant",
                          "Congestion control of this application's socket, e.g. TcpNewReno "
                          "or ns3::TcpCubic; empty: the node's ns3::TcpL4Protocol::SocketType.",
                          StringValue(""),
                          MakeStringAccessor(&MagnetReplayApplication::m_tcpVariant),
                          MakeStringChecker())
            .AddAttribute("DemandFile",
                          "A magnet trace whose SOCK_SEND records are the demand (either byte "
                          "order; `magnet demand -o x.magnet` writes the compact form).",
                          StringValue(""),
                          MakeStringAccessor(&MagnetReplayApplication::m_demandFile),
                          MakeStringChecker())
            .AddAttribute("StreamId",
                          "The stream (sockid) of DemandFile to replay; 0: the only one.",
                          UintegerValue(0),
                          MakeUintegerAccessor(&MagnetReplayApplication::m_streamId),
                          MakeUintegerChecker<uint64_t>())
            .AddAttribute("StartOffset",
                          "Time from the connection's establishment to the demand's time zero.",
                          TimeValue(Seconds(0)),
                          MakeTimeAccessor(&MagnetReplayApplication::m_startOffset),
                          MakeTimeChecker(Seconds(0)))
            .AddAttribute("Origin",
                          "The simulation time of the demand's time zero, when the connection is "
                          "up by then (0: StartOffset after the connection is established). A "
                          "scenario with cross traffic starts the demand a set time into it.",
                          TimeValue(Seconds(0)),
                          MakeTimeAccessor(&MagnetReplayApplication::m_fixedOrigin),
                          MakeTimeChecker(Seconds(0)))
            .AddAttribute("CloseAtEnd",
                          "Close the socket once the whole demand is handed to TCP.",
                          BooleanValue(true),
                          MakeBooleanAccessor(&MagnetReplayApplication::m_closeAtEnd),
                          MakeBooleanChecker())
            .AddTraceSource("Write",
                            "Bytes the socket accepted in one Send() call, and when they were "
                            "due (Now() - due is the lag).",
                            MakeTraceSourceAccessor(&MagnetReplayApplication::m_writeTrace),
                            "ns3::MagnetReplayApplication::WriteTracedCallback")
            .AddTraceSource("TcpTx",
                            "Segments this application's TCP socket sends (its Tx trace).",
                            MakeTraceSourceAccessor(&MagnetReplayApplication::m_tcpTxTrace),
                            "ns3::TcpSocketBase::TcpTxRxTracedCallback")
            .AddTraceSource("Srtt",
                            "The socket's smoothed RTT (its RTT trace): old and new value.",
                            MakeTraceSourceAccessor(&MagnetReplayApplication::m_srttTrace),
                            "ns3::TracedValueCallback::Time")
            .AddTraceSource("LastRtt",
                            "The socket's latest RTT sample (its LastRTT trace).",
                            MakeTraceSourceAccessor(&MagnetReplayApplication::m_lastRttTrace),
                            "ns3::TracedValueCallback::Time")
            .AddTraceSource("Failed",
                            "The connection failed or broke: what is left of the demand is not sent.",
                            MakeTraceSourceAccessor(&MagnetReplayApplication::m_failedTrace),
                            "ns3::MagnetReplayApplication::FailedTracedCallback");
    return tid;
}

MagnetReplayApplication::MagnetReplayApplication()
{
    NS_LOG_FUNCTION(this);
}

MagnetReplayApplication::~MagnetReplayApplication()
{
    NS_LOG_FUNCTION(this);
}

void
MagnetReplayApplication::SetDemand(MagnetDemand demand)
{
    m_demand = std::move(demand);
    m_relay = false;
}

const MagnetDemand&
MagnetReplayApplication::GetDemand() const
{
    return m_demand;
}

Ptr<Socket>
MagnetReplayApplication::GetSocket() const
{
    return m_socket;
}

void
MagnetReplayApplication::SetSocketAttribute(const std::string& name, const AttributeValue& value)
{
    m_socketAttributes.emplace_back(name, value.Copy());
}

const MagnetReplayApplication::Stats&
MagnetReplayApplication::GetStats() const
{
    return m_stats;
}

const std::string&
MagnetReplayApplication::GetFailure() const
{
    return m_failure;
}

void
MagnetReplayApplication::DoDispose()
{
    m_socket = nullptr;
    m_demand.clear();
    m_pending.clear();
    Application::DoDispose();
}

namespace
{

/** The TypeId of a congestion control named "TcpCubic" or "ns3::TcpCubic". */
TypeId
TcpVariantTypeId(std::string name)
{
    if (name.rfind("ns3::", 0) != 0)
    {
        name = "ns3::" + name;
    }
    TypeId tid;
    NS_ABORT_MSG_UNLESS(TypeId::LookupByNameFailSafe(name, &tid) &&
                            tid.IsChildOf(TcpCongestionOps::GetTypeId()),
                        "unknown TCP variant " << name);
    return tid;
}

} // namespace

Ptr<Socket>
MagnetCreateSocket(Ptr<Node> node, TypeId factory, const std::string& tcpVariant)
{
    // Any TCP socket factory (MagnetTcpProfile::SocketFactory: ns-3's or the Linux profile's),
    // then the congestion control asked for.
    Ptr<Socket> socket = Socket::CreateSocket(node, factory);
    if (!tcpVariant.empty())
    {
        auto tcp = DynamicCast<TcpSocketBase>(socket);
        NS_ABORT_MSG_UNLESS(tcp, "MagnetCreateSocket: TcpVariant needs a TcpSocketBase");
        ObjectFactory variant;
        variant.SetTypeId(TcpVariantTypeId(tcpVariant));
        tcp->SetCongestionControlAlgorithm(variant.Create<TcpCongestionOps>());
    }
    return socket;
}

void
MagnetReplayApplication::StartApplication()
{
    NS_LOG_FUNCTION(this);
    if (!m_demandFile.empty() && m_relay)
    {
        try
        {
            uint64_t lost = 0;
            SetDemand(ReadMagnetDemand(m_demandFile, m_streamId, &lost));
            if (lost)
            {
                std::cerr << "MagnetReplayApplication: " << m_demandFile << ": the capture lost "
                          << lost << " records: the demand may lack writes\n";
            }
        }
        catch (const MagnetTraceError& e)
        {
            NS_FATAL_ERROR(e.what());
        }
    }
    m_socket = MagnetCreateSocket(GetNode(), m_tid, m_tcpVariant);
    NS_ABORT_MSG_UNLESS(m_socket->GetSocketType() == Socket::NS3_SOCK_STREAM,
                        "MagnetReplayApplication replays over a stream (TCP) socket");
    for (const auto& [name, value] : m_socketAttributes)
    {
        m_socket->SetAttribute(name, *value);
    }
    int bound;
    if (!m_local.IsInvalid())
    {
        bound = m_socket->Bind(m_local);
    }
    else
    {
        bound = Inet6SocketAddress::IsMatchingType(m_peer) ? m_socket->Bind6() : m_socket->Bind();
    }
    NS_ABORT_MSG_IF(bound != 0, "MagnetReplayApplication: cannot bind the socket");
    if (auto tcp = DynamicCast<TcpSocketBase>(m_socket))
    {
        tcp->TraceConnectWithoutContext(
            "Tx",
            MakeCallback(&MagnetReplayApplication::ForwardTcpTx, this));
        tcp->TraceConnectWithoutContext("RTT", MakeCallback(&MagnetReplayApplication::ForwardSrtt, this));
        tcp->TraceConnectWithoutContext("LastRTT",
                                        MakeCallback(&MagnetReplayApplication::ForwardLastRtt, this));
    }
    m_socket->ShutdownRecv();
    m_socket->SetConnectCallback(MakeCallback(&MagnetReplayApplication::ConnectionSucceeded, this),
                                 MakeCallback(&MagnetReplayApplication::ConnectionFailed, this));
    m_socket->SetSendCallback(MakeCallback(&MagnetReplayApplication::SendSpace, this));
    m_socket->SetCloseCallbacks(MakeNullCallback<void, Ptr<Socket>>(),
                                MakeCallback(&MagnetReplayApplication::SocketClosedByError, this));
    m_socket->Connect(m_peer);
}

void
MagnetReplayApplication::StopApplication()
{
    NS_LOG_FUNCTION(this);
    Simulator::Cancel(m_writeEvent);
    if (m_socket && !m_closed)
    {
        m_socket->Close();
        m_closed = true;
    }
}

void
MagnetReplayApplication::ConnectionSucceeded(Ptr<Socket> socket)
{
    NS_LOG_FUNCTION(this << socket);
    m_connected = true;
    m_stats.connected = Simulator::Now();
    m_origin = std::max(Simulator::Now() + m_startOffset, m_fixedOrigin);
    if (!m_relay)
    {
        ScheduleNextWrite();
    }
    SendPending();
}

void
MagnetReplayApplication::ConnectionFailed(Ptr<Socket> socket)
{
    Fail("connection to the sink failed");
}

void
MagnetReplayApplication::SocketClosedByError(Ptr<Socket> socket)
{
    Fail("the connection broke (socket error " + std::to_string(socket->GetErrno()) + ")");
}

void
MagnetReplayApplication::Fail(const std::string& why)
{
    // Said out loud: logging may be compiled out, and the rest of the demand will not be sent.
    std::cerr << "MagnetReplayApplication: " << why << "; " << m_stats.bytesDue - m_stats.bytesSent
              << " bytes due so far, and any later, stay unsent\n";
    Simulator::Cancel(m_writeEvent);
    m_closed = true;
    m_failure = why;
    m_failedTrace();
}

void
MagnetReplayApplication::ScheduleNextWrite()
{
    if (m_next == m_demand.size())
    {
        Finish();
        return;
    }
    Time at = m_origin + NanoSeconds(m_demand[m_next].timeNs);
    m_writeEvent = Simulator::Schedule(at - Simulator::Now(), &MagnetReplayApplication::IssueWrite, this);
}

void
MagnetReplayApplication::IssueWrite()
{
    // Every write due by now, in order (several may share a time stamp).
    Time now = Simulator::Now();
    while (m_next < m_demand.size() && m_origin + NanoSeconds(m_demand[m_next].timeNs) <= now)
    {
        Due(m_demand[m_next++].size);
    }
    SendPending();
    ScheduleNextWrite();
}

void
MagnetReplayApplication::Write(uint32_t bytes)
{
    if (bytes == 0)
    {
        return;
    }
    Due(bytes);
    SendPending();
}

void
MagnetReplayApplication::Finish()
{
    m_finished = true;
    MaybeClose();
}

void
MagnetReplayApplication::Due(uint64_t bytes)
{
    m_stats.writesDue++;
    m_stats.bytesDue += bytes;
    m_pending.push_back({Simulator::Now(), bytes});
}

void
MagnetReplayApplication::SendSpace(Ptr<Socket> socket, uint32_t available)
{
    SendPending();
}

void
MagnetReplayApplication::SendPending()
{
    if (!m_connected || m_closed || m_sending)
    {
        return;
    }
    m_sending = true; // a socket callback from within Send() must not re-enter
    while (!m_pending.empty())
    {
        Pending& write = m_pending.front();
        uint32_t room = m_socket->GetTxAvailable();
        if (room == 0)
        {
            break; // the send callback resumes when TCP frees buffer space
        }
        auto n = static_cast<uint32_t>(std::min<uint64_t>(room, write.left));
        int sent = m_socket->Send(Create<Packet>(n));
        if (sent <= 0)
        {
            // The socket is broken (reset, shut down): what is pending stays unsent, said once.
            Fail("Send failed (socket error " + std::to_string(m_socket->GetErrno()) + ")");
            break;
        }
        m_stats.sendCalls++;
        m_stats.bytesSent += sent;
        write.left -= sent;
        m_writeTrace(sent, write.due);
        if (write.left == 0)
        {
            Time lag = Simulator::Now() - write.due;
            if (lag.IsStrictlyPositive())
            {
                m_stats.lateWrites++;
                m_stats.totalLag += lag;
                m_stats.maxLag = std::max(m_stats.maxLag, lag);
            }
            m_pending.pop_front();
        }
    }
    m_sending = false;
    MaybeClose();
}

void
MagnetReplayApplication::MaybeClose()
{
    if (m_closeAtEnd && m_finished && m_connected && !m_closed && m_pending.empty())
    {
        m_socket->Close(); // TCP sends its FIN once the buffered data is out
        m_closed = true;
    }
}

void
MagnetReplayApplication::ForwardSrtt(Time before, Time now)
{
    m_srttTrace(before, now);
}

void
MagnetReplayApplication::ForwardLastRtt(Time before, Time now)
{
    m_lastRttTrace(before, now);
}

void
MagnetReplayApplication::ForwardTcpTx(Ptr<const Packet> packet,
                                      const TcpHeader& header,
                                      Ptr<const TcpSocketBase> socket)
{
    m_tcpTxTrace(packet, header, socket);
}

} // namespace ns3
