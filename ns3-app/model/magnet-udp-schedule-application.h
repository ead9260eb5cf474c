/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef MAGNET_UDP_SCHEDULE_APPLICATION_H
#define MAGNET_UDP_SCHEDULE_APPLICATION_H

#include "magnet-trace.h"

#include "ns3/event-id.h"
#include "ns3/socket.h"
#include "ns3/source-application.h"
#include "ns3/traced-callback.h"

namespace ns3
{

/**
 * @brief UDP traffic played from a schedule: one datagram per entry, of its
 * size, at its time after the start.
 *
 * The schedule is a magnet trace's SOCK_SEND stream (Schedule, read as a
 * demand is) or given with SetSchedule.  magnet's cross traffic draws its
 * Poisson and Pareto on/off sources once (replay/cross.py, UdpSchedule) and
 * both engines play them: the real sender in real time, ns-3 with this.
 */
class MagnetUdpScheduleApplication : public SourceApplication
{
  public:
    static TypeId GetTypeId();

    MagnetUdpScheduleApplication();
    ~MagnetUdpScheduleApplication() override;

    void SetSchedule(MagnetDemand schedule);

    uint64_t GetPacketsSent() const;
    uint64_t GetBytesSent() const;
    /** The schedule ran out before the application was stopped: it sent every datagram. */
    bool Exhausted() const;
    /** When the schedule's last datagram is due (absolute simulation time, once started). */
    Time GetEnd() const;

  protected:
    void DoDispose() override;

  private:
    void StartApplication() override;
    void StopApplication() override;
    void ScheduleNext();
    void SendPacket();

    std::string m_file;
    MagnetDemand m_schedule;
    size_t m_next{0};
    Time m_origin;
    Ptr<Socket> m_socket;
    EventId m_sendEvent;
    uint64_t m_packets{0};
    uint64_t m_bytes{0};
    TracedCallback<Ptr<const Packet>> m_txTrace;
};

} // namespace ns3

#endif /* MAGNET_UDP_SCHEDULE_APPLICATION_H */
