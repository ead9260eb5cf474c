/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef MAGNET_LINK_LOG_H
#define MAGNET_LINK_LOG_H

#include "ns3/net-device.h"
#include "ns3/nstime.h"
#include "ns3/packet.h"
#include "ns3/queue.h"

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

namespace ns3
{

/**
 * @brief A per-packet log of a path's bottleneck, in linkem's link-log format
 * (replay/linkem/core.h: struct lk_record; replay/linklog.py reads it).
 *
 * Every packet that reaches the bottleneck's sending device is one record:
 * when it entered the path (its arrival at the bottleneck less the delay of
 * the hops before it), when it leaves it (its arrival at the far end of the
 * bottleneck plus the delay of the hops after it; -1 if dropped), how long it
 * waited in the queue before its serialisation began, its IP bytes, the queue
 * it found (packets and IP bytes waiting, the one being serialised not
 * counted) and why it was dropped (1: the queue was full, 2: the link lost
 * it).  Records are kept in arrival order and written on Close().
 */
class MagnetLinkLog
{
  public:
    /** The record, on disk as linkem writes it (40 bytes, native byte order). */
    struct Record
    {
        int64_t arrivalNs;
        int64_t departureNs;
        int64_t waitNs;
        uint32_t bytes;
        uint32_t queuePackets;
        uint32_t queueBytes;
        uint8_t reason;
        uint8_t pad[3];
    };

    static_assert(sizeof(Record) == 40, "linkem's record layout");

    /**
     * Log the packets `tx` sends to `rx` (a point-to-point bottleneck), `before`
     * and `after` the delays of the path's other hops on either side of it.
     */
    MagnetLinkLog(Ptr<NetDevice> tx, Ptr<NetDevice> rx, Time before, Time after);

    /** Write the log to `path` (atomically); throws MagnetTraceError. */
    void Write(const std::string& path) const;

    const std::vector<Record>& GetRecords() const;

  private:
    void OnEnqueue(Ptr<const Packet> packet);
    void OnDrop(Ptr<const Packet> packet);
    void OnDequeue(Ptr<const Packet> packet);
    void OnArrive(Ptr<const Packet> packet);
    void OnLoss(Ptr<const Packet> packet);
    Record& Add(Ptr<const Packet> packet, uint32_t queued, uint32_t queuedBytes);

    Ptr<Queue<Packet>> m_queue;
    Time m_before;
    Time m_after;
    std::vector<Record> m_records;
    // The queue and the link keep order, so records are matched by it: a packet's uid
    // does not tell it apart (TCP's segments of one write share the write's).
    std::deque<size_t> m_waiting; //!< records of the packets in the queue, in order
    std::deque<size_t> m_flying;  //!< ... of those on the link, in order
};

} // namespace ns3

#endif /* MAGNET_LINK_LOG_H */
