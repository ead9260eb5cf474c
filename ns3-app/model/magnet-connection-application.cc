/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "magnet-connection-application.h"

#include "magnet-linux-tcp-socket.h"
#include "magnet-replay-application.h"

#include "ns3/abort.h"
#include "ns3/boolean.h"
#include "ns3/inet-socket-address.h"
#include "ns3/log.h"
#include "ns3/packet.h"
#include "ns3/simulator.h"
#include "ns3/string.h"
#include "ns3/tcp-socket-base.h"
#include "ns3/tcp-socket-factory.h"
#include "ns3/tcp-tx-buffer.h"
#include "ns3/uinteger.h"

#include <algorithm>

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("MagnetConnectionApplication");
NS_OBJECT_ENSURE_REGISTERED(MagnetAcceptorApplication);
NS_OBJECT_ENSURE_REGISTERED(MagnetConnectionApplication);

namespace
{

/**
 * ns-3's TCP has no public abort (SO_LINGER 0): its SendRST, which Close()
 * uses when unread data is left, sends the RST and tears the socket down.
 */
struct TcpAbort : public TcpSocketBase
{
    static void Reset(Ptr<Socket> socket)
    {
        auto tcp = DynamicCast<TcpSocketBase>(socket);
        NS_ABORT_MSG_UNLESS(tcp, "a reset needs a TCP socket");
        (PeekPointer(tcp)->*(&TcpAbort::SendRST))();
    }
};

uint16_t
PortOf(Ptr<Socket> socket, bool peer)
{
    Address address;
    (peer ? socket->GetPeerName(address) : socket->GetSockName(address));
    return InetSocketAddress::IsMatchingType(address) ? InetSocketAddress::ConvertFrom(address).GetPort()
                                                      : 0;
}

} // namespace

// ------------------------------------------------------------- acceptor ---
TypeId
MagnetAcceptorApplication::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::MagnetAcceptorApplication")
            .SetParent<Application>()
            .SetGroupName("Applications")
            .AddConstructor<MagnetAcceptorApplication>()
            .AddAttribute("Local",
                          "The address to listen on.",
                          AddressValue(),
                          MakeAddressAccessor(&MagnetAcceptorApplication::m_local),
                          MakeAddressChecker())
            .AddAttribute("Protocol",
                          "The socket factory (MagnetTcpProfile::SocketFactory).",
                          TypeIdValue(TcpSocketFactory::GetTypeId()),
                          MakeTypeIdAccessor(&MagnetAcceptorApplication::m_protocol),
                          MakeTypeIdChecker())
            .AddAttribute("TcpVariant",
                          "Congestion control of the accepted sockets (empty: the node's default).",
                          StringValue(""),
                          MakeStringAccessor(&MagnetAcceptorApplication::m_tcpVariant),
                          MakeStringChecker());
    return tid;
}

MagnetAcceptorApplication::MagnetAcceptorApplication() = default;
MagnetAcceptorApplication::~MagnetAcceptorApplication() = default;

void
MagnetAcceptorApplication::Expect(uint16_t port, Ptr<MagnetConnectionApplication> app)
{
    m_expected[port] = app;
}

void
MagnetAcceptorApplication::SetSocketAttribute(const std::string& name, const AttributeValue& value)
{
    m_socketAttributes.emplace_back(name, value.Copy());
}

void
MagnetAcceptorApplication::DoDispose()
{
    m_listener = nullptr;
    m_expected.clear();
    Application::DoDispose();
}

void
MagnetAcceptorApplication::StartApplication()
{
    m_listener = MagnetCreateSocket(GetNode(), m_protocol, m_tcpVariant);
    for (const auto& [name, value] : m_socketAttributes)
    {
        m_listener->SetAttribute(name, *value);
    }
    NS_ABORT_MSG_IF(m_listener->Bind(m_local) != 0, "MagnetAcceptorApplication: cannot bind");
    m_listener->Listen();
    m_listener->SetAcceptCallback(MakeNullCallback<bool, Ptr<Socket>, const Address&>(),
                                  MakeCallback(&MagnetAcceptorApplication::HandleAccept, this));
}

void
MagnetAcceptorApplication::StopApplication()
{
    if (m_listener)
    {
        m_listener->Close();
    }
}

void
MagnetAcceptorApplication::HandleAccept(Ptr<Socket> socket, const Address& from)
{
    auto it = m_expected.find(InetSocketAddress::ConvertFrom(from).GetPort());
    NS_ABORT_MSG_IF(it == m_expected.end(), "MagnetAcceptorApplication: a connection nobody opened");
    Ptr<MagnetConnectionApplication> app = it->second;
    m_expected.erase(it);
    app->Accepted(socket);
}

// ----------------------------------------------------------- connection ---
TypeId
MagnetConnectionApplication::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::MagnetConnectionApplication")
            .SetParent<Application>()
            .SetGroupName("Applications")
            .AddConstructor<MagnetConnectionApplication>()
            .AddAttribute("ReadSize",
                          "The most bytes one read returns (the application's read buffer).",
                          UintegerValue(65536),
                          MakeUintegerAccessor(&MagnetConnectionApplication::m_readSize),
                          MakeUintegerChecker<uint32_t>(1))
            .AddAttribute("OpenLoop",
                          "Every event at its time in the original run, ignoring wait_bytes and "
                          "think times (what a replay of packet times does).",
                          BooleanValue(false),
                          MakeBooleanAccessor(&MagnetConnectionApplication::m_openLoop),
                          MakeBooleanChecker())
            .AddAttribute("Protocol",
                          "The socket factory (MagnetTcpProfile::SocketFactory).",
                          TypeIdValue(TcpSocketFactory::GetTypeId()),
                          MakeTypeIdAccessor(&MagnetConnectionApplication::m_protocol),
                          MakeTypeIdChecker())
            .AddAttribute("TcpVariant",
                          "Congestion control of the opener's socket (empty: the node's default).",
                          StringValue(""),
                          MakeStringAccessor(&MagnetConnectionApplication::m_tcpVariant),
                          MakeStringChecker())
            .AddTraceSource("Write",
                            "Bytes the socket accepted in one Send() call.",
                            MakeTraceSourceAccessor(&MagnetConnectionApplication::m_writeTrace),
                            "ns3::MagnetConnectionApplication::BytesTracedCallback")
            .AddTraceSource("Read",
                            "Bytes one read returned.",
                            MakeTraceSourceAccessor(&MagnetConnectionApplication::m_readTrace),
                            "ns3::MagnetConnectionApplication::BytesTracedCallback")
            .AddTraceSource("Established",
                            "The connection is established: its ports.",
                            MakeTraceSourceAccessor(&MagnetConnectionApplication::m_establishedTrace),
                            "ns3::MagnetConnectionApplication::EstablishedTracedCallback")
            .AddTraceSource("ReadAll",
                            "This side has read every byte the peer sends on the connection.",
                            MakeTraceSourceAccessor(&MagnetConnectionApplication::m_readAllTrace),
                            "ns3::MagnetConnectionApplication::DoneTracedCallback")
            .AddTraceSource("Done",
                            "This side has closed and read the peer's close, or failed.",
                            MakeTraceSourceAccessor(&MagnetConnectionApplication::m_doneTrace),
                            "ns3::MagnetConnectionApplication::DoneTracedCallback");
    return tid;
}

MagnetConnectionApplication::MagnetConnectionApplication() = default;
MagnetConnectionApplication::~MagnetConnectionApplication() = default;

void
MagnetConnectionApplication::SetConnection(std::shared_ptr<const MagnetAppDemand> demand,
                                           size_t index,
                                           MagnetSide side)
{
    m_demand = std::move(demand);
    m_connection = &m_demand->connections.at(index);
    m_side = side;
    m_events = &m_connection->EventsOf(side);
    m_peerBytes = m_connection->BytesOf(MagnetOtherSide(side));
    m_record.aduStart.assign(m_connection->AdusOf(side).size(), Time::Max());
    m_record.peerAduRead.assign(m_connection->AdusOf(MagnetOtherSide(side)).size(), Time::Max());
}

const MagnetAppConnection&
MagnetConnectionApplication::GetConnection() const
{
    return *m_connection;
}

MagnetSide
MagnetConnectionApplication::GetSide() const
{
    return m_side;
}

bool
MagnetConnectionApplication::IsOpener() const
{
    return m_connection->opener == m_side;
}

void
MagnetConnectionApplication::SetPeer(Ptr<MagnetConnectionApplication> peer)
{
    m_peer = peer;
}

void
MagnetConnectionApplication::SetRemote(const Address& remote, Ptr<MagnetAcceptorApplication> peerAcceptor)
{
    m_remote = remote;
    m_peerAcceptor = peerAcceptor;
}

void
MagnetConnectionApplication::OpenAfter(Ptr<MagnetConnectionApplication> earlier)
{
    m_earlier = earlier;
}

void
MagnetConnectionApplication::SetSocketAttribute(const std::string& name, const AttributeValue& value)
{
    m_socketAttributes.emplace_back(name, value.Copy());
}

const MagnetConnectionApplication::Record&
MagnetConnectionApplication::GetRecord() const
{
    return m_record;
}

bool
MagnetConnectionApplication::IsDone() const
{
    return m_record.done != Time::Max();
}

bool
MagnetConnectionApplication::IsWaiting() const
{
    bool connecting = m_record.opened != Time::Max() && m_record.established == Time::Max() &&
                      m_record.failure.empty(); // TCP's SYN retries run until it gives up
    return connecting || m_timer.IsPending() ||
           (!m_openLoopEvents.empty() && m_openLoopEvents.back().IsPending());
}

void
MagnetConnectionApplication::DoDispose()
{
    Simulator::Cancel(m_timer);
    m_socket = nullptr;
    m_peer = nullptr;
    m_peerAcceptor = nullptr;
    m_earlier = nullptr;
    Application::DoDispose();
}

void
MagnetConnectionApplication::StartApplication()
{
    NS_ABORT_MSG_UNLESS(m_connection, "MagnetConnectionApplication: no connection set");
    if (m_openLoop)
    {
        for (size_t i = 0; i < m_events->size(); ++i)
        {
            m_openLoopEvents.push_back(Simulator::Schedule(NanoSeconds((*m_events)[i].timeNs),
                                                           &MagnetConnectionApplication::FireOpenLoop,
                                                           this,
                                                           i));
        }
    }
    if (!IsOpener())
    {
        return; // the acceptor hands this side its socket
    }
    if (m_earlier && !m_openLoop)
    {
        m_earlier->TraceConnectWithoutContext(
            "ReadAll", MakeCallback(&MagnetConnectionApplication::EarlierReadAll, this));
        return;
    }
    m_timer = Simulator::Schedule(NanoSeconds(m_connection->openNs), &MagnetConnectionApplication::Open, this);
}

void
MagnetConnectionApplication::StopApplication()
{
    Simulator::Cancel(m_timer);
    for (auto& event : m_openLoopEvents)
    {
        Simulator::Cancel(event);
    }
}

void
MagnetConnectionApplication::EarlierReadAll(uint32_t connection)
{
    m_timer = Simulator::Schedule(NanoSeconds(m_connection->afterThinkNs),
                                  &MagnetConnectionApplication::Open,
                                  this);
}

void
MagnetConnectionApplication::Open()
{
    m_socket = MagnetCreateSocket(GetNode(), m_protocol, m_tcpVariant);
    for (const auto& [name, value] : m_socketAttributes)
    {
        m_socket->SetAttribute(name, *value);
    }
    if (m_socket->Bind() != 0)
    {
        Fail("bind: " + std::to_string(m_socket->GetErrno()));
        return;
    }
    // The peer's acceptor learns which connection this is by the port it comes from.
    m_peerAcceptor->Expect(PortOf(m_socket, false), m_peer);
    m_socket->SetConnectCallback(MakeCallback(&MagnetConnectionApplication::ConnectionSucceeded, this),
                                 MakeCallback(&MagnetConnectionApplication::ConnectionFailed, this));
    UseSocket(m_socket);
    m_record.opened = Simulator::Now();
    if (m_socket->Connect(m_remote) != 0)
    {
        Fail("connect: socket error " + std::to_string(m_socket->GetErrno()));
        return;
    }
    Next();
}

void
MagnetConnectionApplication::Accepted(Ptr<Socket> socket)
{
    m_socket = socket;
    m_record.opened = Simulator::Now();
    UseSocket(socket);
    // ns-3 hands the socket over from within the handshake's last step; when the peer's
    // FIN completes it, the socket is still in SYN_RCVD there (CLOSE_WAIT right after)
    // and a Send() fails with ERROR_NOTCONN.  Linux's accept() returns it in CLOSE_WAIT,
    // taking writes: use it once that step is over.
    Simulator::ScheduleNow(&MagnetConnectionApplication::AcceptDone, this);
}

void
MagnetConnectionApplication::AcceptDone()
{
    if (!m_record.failure.empty())
    {
        return; // reset before the hand-over ended
    }
    Established();
    HandleRead(m_socket); // what arrived with the handshake's end
}

void
MagnetConnectionApplication::UseSocket(Ptr<Socket> socket)
{
    socket->SetRecvCallback(MakeCallback(&MagnetConnectionApplication::HandleRead, this));
    socket->SetSendCallback(MakeCallback(&MagnetConnectionApplication::SendSpace, this));
    socket->SetCloseCallbacks(MakeCallback(&MagnetConnectionApplication::PeerClose, this),
                              MakeCallback(&MagnetConnectionApplication::ErrorClose, this));
    socket->TraceConnectWithoutContext("State", MakeCallback(&MagnetConnectionApplication::StateChanged, this));
}

void
MagnetConnectionApplication::StateChanged(TcpSocket::TcpStates_t from, TcpSocket::TcpStates_t to)
{
    // FIN_WAIT_1 -> CLOSING: the peer's FIN came in order, behind all its data, while this
    // side's own FIN awaits its ACK (the two crossed).  ns-3 tells the application only
    // on TIME_WAIT, once this side's FIN is ACKed (a round trip after it left); Linux's
    // read() returns 0 as soon as the FIN is in.  Not from within the socket's processing.
    // (From FIN_WAIT_1 only: the Linux profile passes a segment it takes in CLOSING through
    // CLOSE_WAIT and back.)
    if (from == TcpSocket::FIN_WAIT_1 && to == TcpSocket::CLOSING)
    {
        Simulator::ScheduleNow(&MagnetConnectionApplication::PeerClose, this, m_socket);
    }
}

void
MagnetConnectionApplication::ConnectionSucceeded(Ptr<Socket> socket)
{
    Established();
}

void
MagnetConnectionApplication::ConnectionFailed(Ptr<Socket> socket)
{
    Fail("connect failed");
}

void
MagnetConnectionApplication::Established()
{
    m_record.established = Simulator::Now();
    m_establishedTrace(m_connection->id, PortOf(m_socket, false), PortOf(m_socket, true));
    if (m_peerBytes == 0 && !m_readAllFired)
    {
        m_readAllFired = true;
        m_readAllTrace(m_connection->id);
    }
    if (m_fireOnEstablish)
    {
        m_fireOnEstablish = false;
        Fire();
        return;
    }
    Next();
}

void
MagnetConnectionApplication::HandleRead(Ptr<Socket> socket)
{
    const auto& peerAdus = m_connection->AdusOf(MagnetOtherSide(m_side));
    while (Ptr<Packet> packet = socket->Recv(m_readSize, 0))
    {
        uint32_t bytes = packet->GetSize();
        if (bytes == 0)
        {
            break;
        }
        bool waiting = m_next < m_events->size() && m_record.bytesRead < (*m_events)[m_next].waitBytes;
        m_record.bytesRead += bytes;
        if (waiting && m_record.bytesRead >= (*m_events)[m_next].waitBytes)
        {
            m_waitMet = Simulator::Now();
        }
        m_readTrace(m_connection->id, bytes);
        while (m_peerAdu < peerAdus.size() && m_record.bytesRead >= peerAdus[m_peerAdu].endOffset)
        {
            m_record.peerAduRead[m_peerAdu++] = Simulator::Now();
        }
    }
    if (!m_readAllFired && m_record.bytesRead >= m_peerBytes)
    {
        m_readAllFired = true;
        m_readAllTrace(m_connection->id);
    }
    Next();
}

void
MagnetConnectionApplication::PeerClose(Ptr<Socket> socket)
{
    HandleRead(socket); // what is buffered came before the FIN
    if (m_record.peerClosed == Time::Max())
    {
        m_record.peerClosed = Simulator::Now();
    }
    if (m_finAfterPeer)
    {
        m_finAfterPeer = false;
        Simulator::ScheduleNow(&MagnetConnectionApplication::CloseSocket, this);
    }
    CheckDone();
}

void
MagnetConnectionApplication::ErrorClose(Ptr<Socket> socket)
{
    if (m_record.closed != Time::Max() && m_record.peerClosed != Time::Max())
    {
        return; // after this side's own reset, or once done
    }
    if (!m_connection->Resets(MagnetOtherSide(m_side)))
    {
        Fail(m_record.established == Time::Max() ? "connect failed" : "reset");
        return;
    }
    HandleRead(socket);
    m_record.peerClosed = Simulator::Now(); // the peer's reset, as the demand has it
    if (m_record.closed == Time::Max())
    {
        m_record.closed = Simulator::Now(); // the socket is gone: nothing more can be written
    }
    CheckDone();
}

void
MagnetConnectionApplication::SendSpace(Ptr<Socket> socket, uint32_t available)
{
    auto tcp = DynamicCast<TcpSocketBase>(socket);
    if (m_shutdownWhenAcked && tcp && tcp->GetTxBuffer()->Size() == 0)
    {
        m_shutdownWhenAcked = false;
        Simulator::ScheduleNow(&MagnetConnectionApplication::CloseSocket, this);
    }
    Next();
}

// --------------------------------------------------------------- events ---
Time
MagnetConnectionApplication::OpenTime() const
{
    return IsOpener() ? m_record.opened : (m_peer ? m_peer->m_record.opened : Time::Max());
}

void
MagnetConnectionApplication::Next()
{
    if (!m_record.failure.empty())
    {
        return;
    }
    bool established = m_record.established != Time::Max();
    if (established)
    {
        SendPending();
    }
    if (!m_pending.empty() || m_waiting || m_openLoop || m_next == m_events->size())
    {
        if (established)
        {
            MaybeClose();
        }
        return;
    }
    Time open = OpenTime();
    const MagnetAppEvent& ev = (*m_events)[m_next];
    if (open == Time::Max() || m_record.bytesRead < ev.waitBytes)
    {
        return;
    }
    // The think time runs from the latest of the open (the opener's connect: the
    // original's think from the open holds the handshake), the previous row handed
    // to TCP and the wait met; the row goes out then, or once established.
    m_waiting = true;
    Time due = std::max({open, m_prevDone, m_waitMet}) + NanoSeconds(ev.thinkNs);
    m_timer = Simulator::Schedule(std::max(due - Simulator::Now(), Time(0)),
                                  &MagnetConnectionApplication::Fire,
                                  this);
}

void
MagnetConnectionApplication::Fire()
{
    if (m_record.established == Time::Max())
    {
        m_fireOnEstablish = true; // due, but the connection is not up yet
        return;
    }
    m_waiting = false;
    const MagnetAppEvent& ev = (*m_events)[m_next++];
    m_waitMet = Time(); // a wait the next row already has was met before this one went
    Perform(ev);
    if (m_pending.empty())
    {
        m_prevDone = Simulator::Now();
    }
    Next();
}

void
MagnetConnectionApplication::FireOpenLoop(size_t index)
{
    m_next = index + 1;
    if (!m_pending.empty() || m_record.established == Time::Max())
    {
        m_record.lateEvents++;
    }
    Perform((*m_events)[index]);
    Next();
}

void
MagnetConnectionApplication::Perform(const MagnetAppEvent& ev)
{
    switch (ev.kind)
    {
    case MagnetAppEvent::Kind::Send: {
        // ADUs are numbered in the order of their first send: this one or a later one.
        const auto& adus = m_connection->AdusOf(m_side);
        while (m_adu < adus.size() && adus[m_adu].number != ev.adu)
        {
            ++m_adu;
        }
        if (m_adu < adus.size() && m_record.aduStart[m_adu] == Time::Max())
        {
            m_record.aduStart[m_adu] = Simulator::Now();
        }
        if (ev.size)
        {
            m_pending.push_back(ev.size);
        }
        break;
    }
    case MagnetAppEvent::Kind::Close:
        m_closeDue = true;
        break;
    case MagnetAppEvent::Kind::Reset:
        Abort();
        break;
    }
}

void
MagnetConnectionApplication::SendPending()
{
    if (m_sending || m_record.closed != Time::Max())
    {
        return;
    }
    m_sending = true; // a socket callback from within Send() must not re-enter
    while (!m_pending.empty())
    {
        uint32_t room = m_socket->GetTxAvailable();
        if (room == 0)
        {
            break; // the send callback resumes when TCP frees buffer space
        }
        auto n = static_cast<uint32_t>(std::min<uint64_t>(room, m_pending.front()));
        int sent = m_socket->Send(Create<Packet>(n));
        if (sent <= 0)
        {
            m_sending = false;
            Fail("send: socket error " + std::to_string(m_socket->GetErrno()));
            return;
        }
        m_record.bytesWritten += sent;
        m_writeTrace(m_connection->id, sent);
        m_pending.front() -= sent;
        if (m_pending.front() == 0)
        {
            m_pending.pop_front();
            m_prevDone = Simulator::Now();
        }
    }
    m_sending = false;
}

void
MagnetConnectionApplication::MaybeClose()
{
    if (m_record.closed != Time::Max() || !m_pending.empty() || m_next < m_events->size())
    {
        return;
    }
    bool explicitClose = !m_events->empty() && m_events->back().kind != MagnetAppEvent::Kind::Send;
    // Without a close row: after the last send, once everything the peer sends is read.
    if (m_closeDue || (!explicitClose && m_record.bytesRead >= m_peerBytes))
    {
        Shutdown();
    }
}

void
MagnetConnectionApplication::Shutdown()
{
    m_record.closed = Simulator::Now();
    // Each side closes at its own time, whatever the peer did, as Linux's replay shuts
    // its writing half at the row's time (replay/app_endpoint.py): a side closing after
    // its peer did, before the peer's FIN reached it, sends its FIN then and the two
    // cross.  ns-3 3.44's own TCP drops the ACK a FIN carries into ESTABLISHED
    // (ProcessEstablished hands a FIN+ACK to PeerClose, never to ReceivedAck): a peer
    // whose data that ACK covered, and whose FIN waits for it (CloseSocket), never
    // closed.  With that TCP the second side sends its FIN once it has read the
    // first's (a passive close), as before.
    if (m_record.peerClosed == Time::Max() && m_peer && m_peer->m_record.closed != Time::Max() &&
        !DynamicCast<MagnetLinuxTcpSocket>(m_socket))
    {
        m_finAfterPeer = true;
    }
    else
    {
        // Not from within the socket's own callback (this may run inside its
        // NormalClose notification, while ns-3 changes the socket's state).
        Simulator::ScheduleNow(&MagnetConnectionApplication::CloseSocket, this);
    }
    CheckDone();
}

void
MagnetConnectionApplication::CloseSocket()
{
    // The FIN follows the data still in TCP's buffer.  After the peer's FIN,
    // Close() (CLOSE_WAIT -> LAST_ACK, a FIN+ACK); before it, ShutdownSend()
    // (a half-close: this side goes on reading).
    if (m_record.peerClosed != Time::Max())
    {
        m_socket->Close();
        return;
    }
    // ns-3's ShutdownSend() sends its FIN at once on an empty send buffer, or with a
    // data segment still to send (or to resend); with every byte sent and awaiting its
    // ACK it never would: then it waits until the buffer is empty.  The Linux profile's
    // sends it at once, as tcp_send_fin does.
    auto tcp = DynamicCast<TcpSocketBase>(m_socket);
    Ptr<TcpTxBuffer> tx = tcp ? tcp->GetTxBuffer() : nullptr;
    m_shutdownWhenAcked = tx && tx->Size() > 0 && tx->Size() <= tx->BytesInFlight() &&
                          !DynamicCast<MagnetLinuxTcpSocket>(m_socket);
    if (!m_shutdownWhenAcked)
    {
        m_socket->ShutdownSend();
    }
}

void
MagnetConnectionApplication::Abort()
{
    m_pending.clear();
    m_record.closed = Simulator::Now();
    m_record.peerClosed = Simulator::Now(); // nothing more will be read
    if (m_socket)
    {
        TcpAbort::Reset(m_socket);
    }
    CheckDone();
}

void
MagnetConnectionApplication::CheckDone()
{
    if (m_record.closed != Time::Max() && m_record.peerClosed != Time::Max() &&
        m_record.done == Time::Max())
    {
        m_record.done = Simulator::Now();
        m_doneTrace(m_connection->id);
    }
}

void
MagnetConnectionApplication::Fail(const std::string& why)
{
    if (!m_record.failure.empty())
    {
        return;
    }
    m_record.failure = why;
    Simulator::Cancel(m_timer);
    m_pending.clear();
    m_doneTrace(m_connection->id);
}

} // namespace ns3
