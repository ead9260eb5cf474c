/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef MAGNET_LINUX_PACKET_COUNT_H
#define MAGNET_LINUX_PACKET_COUNT_H

#include "ns3/tcp-rate-ops.h"
#include "ns3/tcp-socket-state.h"
#include "ns3/tcp-tx-buffer.h"

namespace ns3
{

/**
 * @brief The Linux profile's segments counted as Linux counts its packets.
 *
 * Linux's TCP counts skbs: tcp_ack hands the congestion control the packets an
 * ACK newly delivered (tcp_newly_delivered: what tcp_clean_rtx_queue cumulatively
 * ACKed that was not SACKed before, plus what tcp_sacktag_write_queue newly
 * SACKed, tp->delivered), and tcp_cwnd_test lets a segment go while the packets
 * in flight (tcp_packets_in_flight: packets_out - (sacked_out + lost_out) +
 * retrans_out) are fewer than cwnd.  A 205-byte segment is one packet to both.
 * TcpSocketBase counts bytes (an ACK of 205 bytes acks no segment, and frees
 * 205 bytes of window).  Here a sent TcpTxItem is one packet (an item is one
 * transmitted segment, at most an MSS, as tcp_skb_pcount is 1 for an skb of at
 * most an MSS):
 *
 * - delivered: as TcpRateLinux, which TcpSocketBase gives each item once as it
 *   is delivered (DiscardUpTo, and the SACK scoreboard's Update), also counting
 *   the items (the socket replaces its rate estimator with this one);
 * - in flight: Linux's terms item by item (sent, less SACKed and lost, plus
 *   retransmitted and not SACKed), read from TcpTxBuffer's sent list.
 *
 * The socket aggregates it to its TcpSocketState, where the recovery (PRR) finds it.
 */
class MagnetLinuxPacketCount : public TcpRateLinux
{
  public:
    static TypeId GetTypeId();

    void SkbDelivered(TcpTxItem* skb) override;

    void SetTxBuffer(Ptr<const TcpTxBuffer> buffer);

    /**
     * Without SACK (tcp_is_reno) Linux counts a duplicate ACK as a packet delivered
     * (tcp_add_reno_sack: sacked_out grows by one), and a cumulative ACK of `acked`
     * packets as max(acked - sacked_out, 1) (tcp_remove_reno_sacks: one filled the hole,
     * the duplicate ACKs counted the rest).  TcpTxBuffer marks a segment SACKed for a
     * duplicate ACK (AddRenoSack) and hands every segment a cumulative ACK frees to
     * SkbDelivered, the marked ones too.  The socket calls, per ACK on such a
     * connection: RenoAckStart as it arrives (sacked_out: the segments marked now),
     * RenoAcked once TcpTxBuffer has freed what it acknowledges, RenoDupAck if it
     * marked a segment.
     */
    void RenoAckStart();
    void RenoAcked();
    void RenoDupAck();
    /**
     * Without SACK, in Loss (F-RTO's new data, or any, above high_seq): tcp_process_loss
     * counts duplicate ACKs in sacked_out (tcp_add_reno_sack) with every segment marked
     * lost, so none carries the mark; they leave the flight (InFlight) and count in the
     * next cumulative ACK's tcp_remove_reno_sacks (RenoAckStart).
     */
    void SetLossSacked(uint32_t n);
    uint32_t GetLossSacked() const;
    uint64_t GetDelivered() const; //!< tp->delivered: packets delivered so far
    uint32_t PacketsOut() const;   //!< tp->packets_out: sent and not cumulatively ACKed
    uint32_t InFlight() const;     //!< tcp_packets_in_flight

    /**
     * The packets in flight of the socket this tcb belongs to; with no count
     * aggregated (a tcb alone, as in tests), the bytes in flight in segments,
     * rounded up.
     */
    static uint32_t InFlight(Ptr<const TcpSocketState> tcb);

    /**
     * The socket is about to send from seq: if it is the sent list's tail (new data,
     * which TcpTxBuffer::CopyFromSequence only appends, GetNewSegment), AfterSend
     * adds the one clean item to the in-flight count kept for this event.
     */
    void BeforeSend(SequenceNumber32 seq);
    void AfterSend();

    /**
     * tcp_cwnd_validate, as tcp_write_xmit calls it (after sending new data, or
     * with data queued and the window full): how fully the window is used is
     * kept for the window of data out, `nxt` being snd_nxt.  A cwnd-limited
     * send marks the window so until snd_una passes what was out then; short
     * of that, the most packets out in the window is kept.
     */
    void CwndValidate(bool cwndLimited, SequenceNumber32 nxt);
    bool CwndLimitedFlag() const; //!< tp->is_cwnd_limited

    /**
     * tcp_is_cwnd_limited: the window was filled in this window of data, or, in
     * slow start, cwnd is under twice the most packets out (an application
     * sending 9 packets of an initial 10 may grow it to 18).  With no count
     * aggregated (a tcb alone, as in tests), the tcb's m_isCwndLimited.
     */
    static bool IsCwndLimited(Ptr<const TcpSocketState> tcb);

  private:
    /**
     * What the in-flight count depends on that an operation of TcpTxBuffer changes:
     * within one event and between two sends, the retransmitted bytes only fall, the
     * SACKed bytes only rise unless the head moves (or an RTO clears them), the lost
     * bytes fall only as SACKed bytes rise, and items split or merge only as they are
     * sent (or as the head moves): equal keys, equal flags.
     */
    struct Key
    {
        uint64_t event{~uint64_t{0}};
        size_t items{0};
        SequenceNumber32 head;
        SequenceNumber32 tail;
        uint32_t sacked{0};
        uint32_t lost{0};
        uint32_t retrans{0};
        bool operator==(const Key&) const = default;
    };

    Key CurrentKey() const;
    uint32_t Walk() const;

    Ptr<const TcpTxBuffer> m_buffer;
    uint64_t m_delivered{0};
    mutable Key m_key;            //!< the state m_inFlight was counted in
    mutable uint32_t m_inFlight{0};
    mutable bool m_valid{false};
    bool m_appending{false};      //!< BeforeSend saw a valid count and the tail
    bool m_reno{false};           //!< between RenoAckStart and RenoAcked
    uint32_t m_renoSackedOut{0};  //!< tp->sacked_out without SACK, as the ACK arrived
    uint32_t m_renoAcked{0};      //!< packets this ACK freed (pkts_acked)
    uint32_t m_lossSacked{0};     //!< sacked_out counted in Loss, no segment marked
    bool m_cwndLimited{false};    //!< tp->is_cwnd_limited
    uint32_t m_maxPacketsOut{0};  //!< tp->max_packets_out
    SequenceNumber32 m_cwndUsageSeq; //!< tp->cwnd_usage_seq: snd_nxt when they were set
    bool m_cwndUsageSet{false};   //!< ... once the first send set it
};

} // namespace ns3

#endif /* MAGNET_LINUX_PACKET_COUNT_H */
