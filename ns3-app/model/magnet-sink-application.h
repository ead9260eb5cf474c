/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef MAGNET_SINK_APPLICATION_H
#define MAGNET_SINK_APPLICATION_H

#include "ns3/address.h"
#include "ns3/application.h"
#include "ns3/nstime.h"
#include "ns3/ptr.h"
#include "ns3/socket.h"
#include "ns3/traced-callback.h"

#include <string>
#include <utility>
#include <vector>

namespace ns3
{

/**
 * @brief Accepts TCP connections and reads everything, recording each delivered read.
 *
 * Like PacketSink, but a read is what one Recv() call returned (at most
 * ReadSize bytes, as a read() with that buffer would): the "Read" trace
 * fires per read, "PeerClosed" when a peer has closed and its data is read.
 */
class MagnetSinkApplication : public Application
{
  public:
    static TypeId GetTypeId();

    MagnetSinkApplication();
    ~MagnetSinkApplication() override;

    uint64_t GetTotalRx() const;
    uint64_t GetReads() const;

    /** Set an attribute of the listening socket (accepted ones inherit it) when it is created. */
    void SetSocketAttribute(const std::string& name, const AttributeValue& value);

    /** Signature of the "Read" trace: bytes one read delivered to the application. */
    typedef void (*ReadTracedCallback)(uint32_t bytes);

  protected:
    void DoDispose() override;

  private:
    void StartApplication() override;
    void StopApplication() override;

    void HandleAccept(Ptr<Socket> socket, const Address& from);
    void HandleRead(Ptr<Socket> socket);
    void HandlePeerClose(Ptr<Socket> socket);
    void HalfClose(Ptr<Socket> socket);

    Address m_local;
    TypeId m_tid;
    uint32_t m_readSize;
    Time m_halfCloseAt;    //!< when the connections shut down their sending side (negative: see below)
    Time m_halfCloseAfter; //!< ... else this long after each is accepted (negative: never)

    Ptr<Socket> m_listener;
    std::vector<std::pair<std::string, Ptr<AttributeValue>>> m_socketAttributes;
    std::vector<Ptr<Socket>> m_accepted;
    std::vector<Ptr<Socket>> m_closed; //!< connections whose peer closed (closed here too)
    uint64_t m_totalRx{0};
    uint64_t m_reads{0};

    TracedCallback<uint32_t> m_readTrace;
    TracedCallback<> m_peerClosedTrace;
};

} // namespace ns3

#endif /* MAGNET_SINK_APPLICATION_H */
