/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "magnet-tcp-demux.h"

#include "ns3/ipv4-end-point.h"
#include "ns3/ipv4-interface.h"
#include "ns3/ipv4-l3-protocol.h"
#include "ns3/ipv6-interface.h"
#include "ns3/node.h"
#include "ns3/tcp-header.h"
#include "ns3/tcp-l4-protocol.h"
#include "ns3/tcp-socket-base.h"

namespace ns3
{

NS_OBJECT_ENSURE_REGISTERED(MagnetTcpDemux);

namespace
{

/** A socket's IPv4 endpoint (protected in TcpSocketBase): where ns-3 delivers its segments. */
struct SocketEndPoint : public TcpSocketBase
{
    static Ipv4EndPoint* Of(const TcpSocketBase& socket)
    {
        return socket.*(&SocketEndPoint::m_endPoint);
    }
};

/**
 * TcpL4Protocol's sockets, every one bound on the node.  They are private; the
 * public copy, its SocketList attribute, costs O(N^2) for N sockets (its accessor
 * walks the hash map from the start for each one).  An explicit instantiation may
 * name a private member (C++20 [temp.spec.general]): it hands the member's
 * address to SocketsOf.
 */
struct TcpSockets
{
    using Member = std::unordered_map<uint64_t, Ptr<TcpSocketBase>> TcpL4Protocol::*;
    friend Member SocketsMember(TcpSockets);
};

template <TcpSockets::Member M>
struct TcpSocketsAccess
{
    friend TcpSockets::Member SocketsMember(TcpSockets)
    {
        return M;
    }
};

template struct TcpSocketsAccess<&TcpL4Protocol::m_sockets>;

const std::unordered_map<uint64_t, Ptr<TcpSocketBase>>&
SocketsOf(const TcpL4Protocol& tcp)
{
    return tcp.*SocketsMember(TcpSockets{});
}

} // namespace

TypeId
MagnetTcpDemux::GetTypeId()
{
    static TypeId tid = TypeId("ns3::MagnetTcpDemux")
                            .SetParent<IpL4Protocol>()
                            .SetGroupName("Internet")
                            .AddConstructor<MagnetTcpDemux>();
    return tid;
}

void
MagnetTcpDemux::Install(Ptr<Node> node)
{
    Ptr<Ipv4L3Protocol> ipv4 = node->GetObject<Ipv4L3Protocol>();
    Ptr<TcpL4Protocol> tcp = node->GetObject<TcpL4Protocol>();
    if (!ipv4 || !tcp || Get(node))
    {
        return;
    }
    auto demux = CreateObject<MagnetTcpDemux>();
    demux->m_tcp = tcp;
    ipv4->Insert(demux); // replaces TCP as IPv4's protocol 6; TCP still sends through IPv4 itself
}

Ptr<MagnetTcpDemux>
MagnetTcpDemux::Get(Ptr<Node> node)
{
    Ptr<Ipv4L3Protocol> ipv4 = node->GetObject<Ipv4L3Protocol>();
    return ipv4 ? DynamicCast<MagnetTcpDemux>(ipv4->GetProtocol(TcpL4Protocol::PROT_NUMBER)) : nullptr;
}

void
MagnetTcpDemux::Install(const NodeContainer& nodes)
{
    for (auto node = nodes.Begin(); node != nodes.End(); ++node)
    {
        Install(*node);
    }
}

MagnetTcpDemux::MagnetTcpDemux() = default;
MagnetTcpDemux::~MagnetTcpDemux() = default;

void
MagnetTcpDemux::DoDispose()
{
    m_table.clear();
    m_tcp = nullptr;
    IpL4Protocol::DoDispose();
}

size_t
MagnetTcpDemux::KeyHash::operator()(const Key& k) const
{
    uint64_t a = uint64_t{k.local} << 32 | k.peer;
    uint64_t b = uint64_t{k.localPort} << 16 | k.peerPort;
    return std::hash<uint64_t>()(a * 0x9E3779B97F4A7C15ULL ^ b);
}

int
MagnetTcpDemux::GetProtocolNumber() const
{
    return TcpL4Protocol::PROT_NUMBER;
}

IpL4Protocol::RxStatus
MagnetTcpDemux::Receive(Ptr<Packet> packet, const Ipv4Header& ip, Ptr<Ipv4Interface> incoming)
{
    if (Node::ChecksumEnabled())
    {
        m_counts.passed++;
        return m_tcp->Receive(packet, ip, incoming);
    }
    TcpHeader tcp;
    packet->PeekHeader(tcp);
    Key key{ip.GetDestination().Get(), ip.GetSource().Get(), tcp.GetDestinationPort(), tcp.GetSourcePort()};
    Ipv4EndPoint* endPoint = Find(key, incoming);
    // A SYN alone is for a listener (wildcard peer): no table entry to learn from it.
    uint8_t flags = tcp.GetFlags();
    bool synOnly = (flags & TcpHeader::SYN) && !(flags & TcpHeader::ACK);
    if (!endPoint && !synOnly)
    {
        Rebuild();
        endPoint = Find(key, incoming);
    }
    if (!endPoint)
    {
        m_counts.passed++;
        return m_tcp->Receive(packet, ip, incoming);
    }
    // What TcpL4Protocol::Receive does once its lookup found this endpoint.
    m_counts.hits++;
    endPoint->ForwardUp(packet, ip, tcp.GetSourcePort(), incoming);
    return IpL4Protocol::RX_OK;
}

Ipv4EndPoint*
MagnetTcpDemux::Find(const Key& key, Ptr<Ipv4Interface> incoming) const
{
    auto it = m_table.find(key);
    if (it == m_table.end())
    {
        return nullptr;
    }
    // The endpoint ns-3's lookup prefers: receiving, on this device (if bound to one),
    // and all four addresses and ports exact.  Its socket still holding it means it
    // has not been deallocated (TcpSocketBase clears the pointer when it is).
    Ipv4EndPoint* e = it->second.endPoint;
    bool valid = e && SocketEndPoint::Of(*it->second.socket) == e && e->IsRxEnabled() &&
                 e->GetLocalAddress().Get() == key.local && e->GetLocalPort() == key.localPort &&
                 e->GetPeerAddress().Get() == key.peer && e->GetPeerPort() == key.peerPort &&
                 (!e->GetBoundNetDevice() || e->GetBoundNetDevice() == incoming->GetDevice());
    return valid ? e : nullptr;
}

void
MagnetTcpDemux::Rebuild()
{
    m_counts.rebuilds++;
    m_table.clear();
    for (const auto& [index, socket] : SocketsOf(*m_tcp))
    {
        Ipv4EndPoint* e = SocketEndPoint::Of(*socket);
        if (!e || e->GetPeerPort() == 0 || e->GetLocalAddress() == Ipv4Address::GetAny())
        {
            continue; // not connected, or a wildcard: ns-3's lookup decides
        }
        Key key{e->GetLocalAddress().Get(), e->GetPeerAddress().Get(), e->GetLocalPort(), e->GetPeerPort()};
        auto [entry, fresh] = m_table.emplace(key, Entry{socket, e});
        if (!fresh)
        {
            entry->second.endPoint = nullptr; // two of them: ns-3's lookup decides
        }
    }
}

IpL4Protocol::RxStatus
MagnetTcpDemux::Receive(Ptr<Packet> packet, const Ipv6Header& header, Ptr<Ipv6Interface> incoming)
{
    return m_tcp->Receive(packet, header, incoming);
}

void
MagnetTcpDemux::ReceiveIcmp(Ipv4Address icmpSource,
                            uint8_t icmpTtl,
                            uint8_t icmpType,
                            uint8_t icmpCode,
                            uint32_t icmpInfo,
                            Ipv4Address payloadSource,
                            Ipv4Address payloadDestination,
                            const uint8_t payload[8])
{
    m_tcp->ReceiveIcmp(icmpSource, icmpTtl, icmpType, icmpCode, icmpInfo, payloadSource,
                       payloadDestination, payload);
}

void
MagnetTcpDemux::ReceiveIcmp(Ipv6Address icmpSource,
                            uint8_t icmpTtl,
                            uint8_t icmpType,
                            uint8_t icmpCode,
                            uint32_t icmpInfo,
                            Ipv6Address payloadSource,
                            Ipv6Address payloadDestination,
                            const uint8_t payload[8])
{
    m_tcp->ReceiveIcmp(icmpSource, icmpTtl, icmpType, icmpCode, icmpInfo, payloadSource,
                       payloadDestination, payload);
}

void
MagnetTcpDemux::SetDownTarget(DownTargetCallback cb)
{
    m_tcp->SetDownTarget(cb);
}

void
MagnetTcpDemux::SetDownTarget6(DownTargetCallback6 cb)
{
    m_tcp->SetDownTarget6(cb);
}

IpL4Protocol::DownTargetCallback
MagnetTcpDemux::GetDownTarget() const
{
    return m_tcp->GetDownTarget();
}

IpL4Protocol::DownTargetCallback6
MagnetTcpDemux::GetDownTarget6() const
{
    return m_tcp->GetDownTarget6();
}

const MagnetTcpDemux::Counts&
MagnetTcpDemux::GetCounts() const
{
    return m_counts;
}

} // namespace ns3
