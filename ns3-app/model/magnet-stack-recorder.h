/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef MAGNET_STACK_RECORDER_H
#define MAGNET_STACK_RECORDER_H

#include "magnet-replay-application.h"
#include "magnet-sink-application.h"
#include "magnet-trace.h"

#include "ns3/net-device.h"
#include "ns3/sequence-number.h"

#include <memory>
#include <string>
#include <vector>

namespace ns3
{

/** A data segment a stack put on its link: when, its TCP payload, and how much of it was new. */
struct MagnetWireSegment
{
    int64_t ns;
    uint32_t size;
    uint32_t newBytes; //!< size minus bytes sent before (0: a retransmission)
};

/** Events and bytes a recorder saw, per layer. */
struct MagnetStackCounts
{
    uint64_t sockSend{0}, sockSendBytes{0};
    uint64_t tcpSend{0}, tcpSendBytes{0}, tcpRetrans{0}, tcpRetransBytes{0};
    uint64_t devSend{0}, devSendBytes{0}, devRetrans{0};
    uint64_t devRecv{0}, devRecvBytes{0};
    uint64_t sockRecv{0}, sockRecvBytes{0};
    // At the path's bottleneck (AttachBottleneck): packets of every flow dropped by
    // its queue or lost on its link, and of them this stack's data segments.
    uint64_t queueDrops{0}, queueDropsOwn{0}, lossDrops{0}, lossDropsOwn{0};
};

/** What the sender's TCP measured of the round trip (its RTT and LastRTT traces). */
struct MagnetRttStats
{
    uint64_t srttUpdates{0};
    double srttSumNs{0};
    Time srttLast;         //!< smoothed RTT at the end
    uint64_t samples{0};   //!< RTT samples (LastRTT changes)
    Time sampleMin;        //!< the smallest sample (0: none)

    Time SrttMean() const; //!< mean of the smoothed RTT over its updates (0: none)
};

/**
 * @brief Records one simulated TCP stack as a magnet trace.
 *
 * The stack is a MagnetReplayApplication, the point-to-point device its
 * segments leave by, the device at the other end and the MagnetSinkApplication
 * reading them.  Recorded, with sizes in TCP payload bytes and simulated ns:
 * SOCK_SEND per Send() the socket accepted, TCP_SEND / TCP_RETRANS per data
 * segment TCP emits, DEV_SEND when a data segment starts on the wire,
 * DEV_RECV when one arrives intact, SOCK_RECV per read at the sink.  Pure
 * ACKs, SYN and FIN carry no data and are not recorded.  The data segments
 * on the wire are also kept in memory (GetWire) to drive a next stack.
 */
class MagnetStackRecorder
{
  public:
    /** `path` empty: count and keep the wire only, write no trace. */
    MagnetStackRecorder(const std::string& path, uint64_t sockid, const std::string& description);
    ~MagnetStackRecorder();

    /**
     * Record the stack: its application, the device its segments leave by,
     * the device at the path's far end and the sink.  Only TCP segments to
     * `sinkPort` on those devices are the stack's (cross traffic may share them).
     */
    void Attach(Ptr<MagnetReplayApplication> app,
                Ptr<NetDevice> sender,
                Ptr<NetDevice> receiver,
                Ptr<MagnetSinkApplication> sink,
                uint16_t sinkPort);

    /** Count drops at the bottleneck: `tx`'s queue, and losses `rx`'s error model makes. */
    void AttachBottleneck(Ptr<NetDevice> tx, Ptr<NetDevice> rx);

    /** Complete the trace file. */
    void Close();

    const std::vector<MagnetWireSegment>& GetWire() const;
    const MagnetStackCounts& GetCounts() const;
    const MagnetRttStats& GetRtt() const;

    /**
     * The wire output as the demand of a next stack: every data segment (as
     * a packet capture of the link would have it), or only the new data in
     * each (retransmitted bytes left out, so every byte is replayed once).
     */
    MagnetDemand WireDemand(bool newDataOnly) const;

  private:
    void OnWrite(uint32_t bytes, Time due);
    void OnTcpTx(Ptr<const Packet> packet, const TcpHeader& header, Ptr<const TcpSocketBase> socket);
    void OnDevTx(Ptr<const Packet> packet);
    void OnDevRx(Ptr<const Packet> packet);
    void OnRead(uint32_t bytes);
    void OnSrtt(Time before, Time now);
    void OnLastRtt(Time before, Time now);
    void OnQueueDrop(Ptr<const Packet> packet);
    void OnLoss(Ptr<const Packet> packet);
    bool Own(Ptr<const Packet> packet, uint32_t* seq = nullptr, uint32_t* payload = nullptr) const;
    void Record(uint32_t event, uint32_t size);

    /** The highest sequence number sent so far: tells new data from retransmissions. */
    struct HighMark
    {
        bool set{false};
        SequenceNumber32 high;
        uint32_t NewBytes(uint32_t seq, uint32_t size);
    };

    uint64_t m_sockid;
    std::unique_ptr<MagnetTraceWriter> m_writer;
    std::vector<MagnetWireSegment> m_wire;
    MagnetStackCounts m_counts;
    MagnetRttStats m_rtt;
    uint16_t m_port{0};
    HighMark m_tcpHigh;
    HighMark m_devHigh;
};

} // namespace ns3

#endif /* MAGNET_STACK_RECORDER_H */
