/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef MAGNET_TCP_DEMUX_H
#define MAGNET_TCP_DEMUX_H

#include "ns3/ip-l4-protocol.h"
#include "ns3/ipv4-address.h"
#include "ns3/node-container.h"
#include "ns3/ptr.h"

#include <cstdint>
#include <unordered_map>

namespace ns3
{

class Ipv4EndPoint;
class TcpL4Protocol;
class TcpSocketBase;

/**
 * @brief A node's TCP segments handed to their connection in one hash lookup.
 *
 * ns-3 3.44's TcpL4Protocol finds the socket of each segment it receives by
 * walking every endpoint of the node (Ipv4EndPointDemux::Lookup): with N
 * connections on a node each packet costs O(N), and N connections' traffic
 * O(N^2).  MagnetTcpDemux takes TCP's place in the node's IPv4 (protocol 6)
 * and hands a segment to the endpoint whose local and peer addresses and ports
 * all equal the segment's (the endpoint ns-3's lookup returns whenever one
 * exists), found in a table of the node's connected sockets.  Everything else
 * (a SYN to a listener, a segment for a closed connection, checksums enabled)
 * goes to TcpL4Protocol::Receive as before.  The simulation is the same, event
 * for event; only the search is shorter.
 *
 * The table learns a connection when one of its segments finds no entry: it
 * is rebuilt then from TCP's socket list (O(sockets), at most twice per
 * connection: the handshake's last segment at each end; fewer when connections
 * open together, 666 times for 1,000 in bench_ns3_app).  An entry is checked
 * on every use (its socket still holds that endpoint, with those addresses).
 */
class MagnetTcpDemux : public IpL4Protocol
{
  public:
    static TypeId GetTypeId();

    /** Put a MagnetTcpDemux in front of the node's TCP (once: a second call does nothing). */
    static void Install(Ptr<Node> node);
    /** The same for each node that has TCP. */
    static void Install(const NodeContainer& nodes);
    /** The node's MagnetTcpDemux (nullptr: none). */
    static Ptr<MagnetTcpDemux> Get(Ptr<Node> node);

    MagnetTcpDemux();
    ~MagnetTcpDemux() override;

    int GetProtocolNumber() const override;
    RxStatus Receive(Ptr<Packet> p, const Ipv4Header& header, Ptr<Ipv4Interface> incoming) override;
    RxStatus Receive(Ptr<Packet> p, const Ipv6Header& header, Ptr<Ipv6Interface> incoming) override;
    void ReceiveIcmp(Ipv4Address icmpSource,
                     uint8_t icmpTtl,
                     uint8_t icmpType,
                     uint8_t icmpCode,
                     uint32_t icmpInfo,
                     Ipv4Address payloadSource,
                     Ipv4Address payloadDestination,
                     const uint8_t payload[8]) override;
    void ReceiveIcmp(Ipv6Address icmpSource,
                     uint8_t icmpTtl,
                     uint8_t icmpType,
                     uint8_t icmpCode,
                     uint32_t icmpInfo,
                     Ipv6Address payloadSource,
                     Ipv6Address payloadDestination,
                     const uint8_t payload[8]) override;
    void SetDownTarget(DownTargetCallback cb) override;
    void SetDownTarget6(DownTargetCallback6 cb) override;
    DownTargetCallback GetDownTarget() const override;
    DownTargetCallback6 GetDownTarget6() const override;

    /** How segments were delivered: from the table, by TCP's own lookup, and table rebuilds. */
    struct Counts
    {
        uint64_t hits{0};
        uint64_t passed{0};
        uint64_t rebuilds{0};
    };

    const Counts& GetCounts() const;

  protected:
    void DoDispose() override;

  private:
    /** A connection's local and peer address and port. */
    struct Key
    {
        uint32_t local;
        uint32_t peer;
        uint16_t localPort;
        uint16_t peerPort;

        bool operator==(const Key& other) const = default;
    };

    struct KeyHash
    {
        size_t operator()(const Key& k) const;
    };

    struct Entry
    {
        Ptr<TcpSocketBase> socket; //!< holds it, so that its endpoint can be checked
        Ipv4EndPoint* endPoint;    //!< nullptr: two sockets share the key (ns-3's lookup decides)
    };

    /** The table's endpoint for `key`, if it is still that connection's (else nullptr). */
    Ipv4EndPoint* Find(const Key& key, Ptr<Ipv4Interface> incoming) const;
    /** The table anew from TCP's socket list. */
    void Rebuild();

    Ptr<TcpL4Protocol> m_tcp;
    std::unordered_map<Key, Entry, KeyHash> m_table;
    Counts m_counts;
};

} // namespace ns3

#endif /* MAGNET_TCP_DEMUX_H */
