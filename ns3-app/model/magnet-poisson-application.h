/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef MAGNET_POISSON_APPLICATION_H
#define MAGNET_POISSON_APPLICATION_H

#include "ns3/data-rate.h"
#include "ns3/event-id.h"
#include "ns3/random-variable-stream.h"
#include "ns3/socket.h"
#include "ns3/source-application.h"
#include "ns3/traced-callback.h"

namespace ns3
{

/**
 * @brief Poisson UDP traffic: packets of PacketSize bytes with exponential gaps,
 * DataRate on average (the gaps' mean is one packet's bits over DataRate).
 *
 * ns-3's OnOffApplication sends at a constant rate while on; this is the
 * memoryless source of a Poisson arrival process, for cross traffic.
 */
class MagnetPoissonApplication : public SourceApplication
{
  public:
    static TypeId GetTypeId();

    MagnetPoissonApplication();
    ~MagnetPoissonApplication() override;

    /** Use stream numbers from `stream` on; returns how many were used. */
    int64_t AssignStreams(int64_t stream);

    uint64_t GetPacketsSent() const;
    uint64_t GetBytesSent() const;

  protected:
    void DoDispose() override;

  private:
    void StartApplication() override;
    void StopApplication() override;
    void ScheduleNext();
    void SendPacket();

    uint32_t m_packetSize;
    DataRate m_rate;
    Ptr<ExponentialRandomVariable> m_gap;
    Ptr<Socket> m_socket;
    EventId m_sendEvent;
    uint64_t m_packets{0};
    uint64_t m_bytes{0};
    TracedCallback<Ptr<const Packet>> m_txTrace;
};

} // namespace ns3

#endif /* MAGNET_POISSON_APPLICATION_H */
