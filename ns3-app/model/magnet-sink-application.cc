/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "magnet-sink-application.h"

#include "ns3/abort.h"
#include "ns3/log.h"
#include "ns3/packet.h"
#include "ns3/simulator.h"
#include "ns3/tcp-socket-factory.h"
#include "ns3/uinteger.h"

#include <algorithm>

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("MagnetSinkApplication");
NS_OBJECT_ENSURE_REGISTERED(MagnetSinkApplication);

TypeId
MagnetSinkApplication::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::MagnetSinkApplication")
            .SetParent<Application>()
            .SetGroupName("Applications")
            .AddConstructor<MagnetSinkApplication>()
            .AddAttribute("Local",
                          "The address to listen on.",
                          AddressValue(),
                          MakeAddressAccessor(&MagnetSinkApplication::m_local),
                          MakeAddressChecker())
            .AddAttribute("Protocol",
                          "The socket factory: a stream (TCP) socket type.",
                          TypeIdValue(TcpSocketFactory::GetTypeId()),
                          MakeTypeIdAccessor(&MagnetSinkApplication::m_tid),
                          MakeTypeIdChecker())
            .AddAttribute("ReadSize",
                          "The most bytes one read returns (the application's read buffer).",
                          UintegerValue(65536),
                          MakeUintegerAccessor(&MagnetSinkApplication::m_readSize),
                          MakeUintegerChecker<uint32_t>(1))
            .AddAttribute("HalfCloseAt",
                          "Each connection shuts down its sending side (its FIN) at this time, or at "
                          "once if accepted later, as the real replay's receiving end does at its "
                          "time zero, having nothing to write (negative: see HalfCloseAfter).",
                          TimeValue(Seconds(-1)),
                          MakeTimeAccessor(&MagnetSinkApplication::m_halfCloseAt),
                          MakeTimeChecker())
            .AddAttribute("HalfCloseAfter",
                          "Without HalfCloseAt: each connection shuts down its sending side this "
                          "long after it is accepted (negative: never; it closes when its peer does).",
                          TimeValue(Seconds(-1)),
                          MakeTimeAccessor(&MagnetSinkApplication::m_halfCloseAfter),
                          MakeTimeChecker())
            .AddTraceSource("Read",
                            "Bytes one read delivered to the application.",
                            MakeTraceSourceAccessor(&MagnetSinkApplication::m_readTrace),
                            "ns3::MagnetSinkApplication::ReadTracedCallback")
            .AddTraceSource("PeerClosed",
                            "A peer closed its connection and all its data has been read.",
                            MakeTraceSourceAccessor(&MagnetSinkApplication::m_peerClosedTrace),
                            "ns3::TracedCallback::Void");
    return tid;
}

MagnetSinkApplication::MagnetSinkApplication() = default;
MagnetSinkApplication::~MagnetSinkApplication() = default;

uint64_t
MagnetSinkApplication::GetTotalRx() const
{
    return m_totalRx;
}

uint64_t
MagnetSinkApplication::GetReads() const
{
    return m_reads;
}

void
MagnetSinkApplication::SetSocketAttribute(const std::string& name, const AttributeValue& value)
{
    m_socketAttributes.emplace_back(name, value.Copy());
}

void
MagnetSinkApplication::DoDispose()
{
    m_listener = nullptr;
    m_accepted.clear();
    m_closed.clear();
    Application::DoDispose();
}

void
MagnetSinkApplication::StartApplication()
{
    m_listener = Socket::CreateSocket(GetNode(), m_tid);
    for (const auto& [name, value] : m_socketAttributes)
    {
        m_listener->SetAttribute(name, *value);
    }
    NS_ABORT_MSG_IF(m_listener->Bind(m_local) != 0, "MagnetSinkApplication: cannot bind");
    m_listener->Listen();
    m_listener->SetAcceptCallback(MakeNullCallback<bool, Ptr<Socket>, const Address&>(),
                                  MakeCallback(&MagnetSinkApplication::HandleAccept, this));
}

void
MagnetSinkApplication::StopApplication()
{
    for (auto& socket : m_accepted)
    {
        socket->Close();
    }
    if (m_listener)
    {
        m_listener->Close();
    }
}

void
MagnetSinkApplication::HandleAccept(Ptr<Socket> socket, const Address& from)
{
    socket->SetRecvCallback(MakeCallback(&MagnetSinkApplication::HandleRead, this));
    socket->SetCloseCallbacks(MakeCallback(&MagnetSinkApplication::HandlePeerClose, this),
                              MakeCallback(&MagnetSinkApplication::HandlePeerClose, this));
    m_accepted.push_back(socket);
    const bool atTime = !m_halfCloseAt.IsNegative();
    if (atTime || !m_halfCloseAfter.IsNegative())
    {
        Time at = atTime ? std::max(m_halfCloseAt, Simulator::Now()) : Simulator::Now() + m_halfCloseAfter;
        Simulator::Schedule(at - Simulator::Now(), &MagnetSinkApplication::HalfClose, this, socket);
    }
}

void
MagnetSinkApplication::HalfClose(Ptr<Socket> socket)
{
    // The receiving end has nothing to write: shutdown(SHUT_WR), unless its peer closed first.
    if (std::find(m_closed.begin(), m_closed.end(), socket) == m_closed.end())
    {
        socket->ShutdownSend();
    }
}

void
MagnetSinkApplication::HandleRead(Ptr<Socket> socket)
{
    while (Ptr<Packet> packet = socket->Recv(m_readSize, 0))
    {
        uint32_t bytes = packet->GetSize();
        if (bytes == 0)
        {
            break;
        }
        m_reads++;
        m_totalRx += bytes;
        m_readTrace(bytes);
    }
}

void
MagnetSinkApplication::HandlePeerClose(Ptr<Socket> socket)
{
    HandleRead(socket); // whatever is still buffered belongs before the close
    m_closed.push_back(socket);
    socket->Close();
    m_peerClosedTrace();
}

} // namespace ns3
