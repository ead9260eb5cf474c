/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef MAGNET_LINUX_CUBIC_H
#define MAGNET_LINUX_CUBIC_H

#include "magnet-linux-reno.h"

namespace ns3
{

/**
 * @brief Linux 6.x's CUBIC (net/ipv4/tcp_cubic.c with tcp_slow_start and
 * tcp_cong_avoid_ai of tcp_cong.c), in Linux's integer arithmetic, packets,
 * jiffies (HZ 250) and microseconds.
 *
 * Where ns-3's TcpCubic differs (measured on four bulk flows sharing a
 * 100-packet queue, docs/ns3-replay.md):
 * - HyStart's delay exit: Linux leaves slow start when a round's least RTT
 *   exceeds the least ever by clamp(min / 8, 4 ms, 16 ms), 7.5 ms on a 60 ms
 *   path; TcpCubic waits for clamp(min, 4 ms, 1 s), a doubled RTT.
 * - HyStart's ACK train: Linux exits when the ACKs of one round, each within
 *   2 ms of the last, span more than (min RTT + the ACK delay allowance) / 2
 *   (unpaced); TcpCubic waits for a whole min RTT.
 * - HyStart's samples: Linux's are each ACK's RTT (tcp_clean_rtx_queue's
 *   ca_rtt_us, pkts_acked's rtt_us); TcpSocketBase passes the smoothed RTT.
 *   MagnetLinuxTcpSocket gives AckSample Linux's sample, at Linux's point in the
 *   ACK (after the SACKs are tagged, before recovery and the window change): the
 *   last newly ACKed segment's RTT (none if the ACK covers one ever resent),
 *   replaced by the last newly SACKed never-resent segment's, else for an ACK of
 *   new data the timestamp echo's, else none.  TcpSocketBase's m_lastRtt differs
 *   in recovery: a duplicate ACK kept the previous ACK's sample (its PktsAcked
 *   still called), and the ACK that fills a hole timed the highest segment SACKed
 *   before it, an RTT or more too long.  Without that socket (the model driven
 *   alone) PktsAcked takes m_lastRtt.
 * - HyStart's rounds: since Linux 6.14 a round starts at the first ACK after
 *   the last one's data, from the connection's first ACK on; only the exits
 *   wait for a window of 16.  A round first started at a window of 16 ends
 *   mid-flight and its ACK train breaks at the gap between flights.
 * - slow start stops at ssthresh, the rest of the ACK goes to congestion
 *   avoidance; the CUBIC target is recomputed at most once a jiffy (and only
 *   after HZ/32 with an unchanged window); the window may grow by more than one
 *   packet per ACK (tcp_cong_avoid_ai); delay samples are ignored for a second
 *   (not 10 ms) after an epoch starts.
 * - the ACK that ends recovery grows the window by the packets it newly
 *   delivered (tcp_cong_control's acked_sacked); TcpSocketBase passes every
 *   segment from the old snd_una, those SACKed earlier too, and each recovery
 *   ended a CUBIC step (a segment at small windows) ahead of Linux.
 *
 * Not modelled: the epoch shift after an idle period (cubictcp_cwnd_event needs
 * the socket's last send time) and undo (TcpSocketBase has no undo).
 */
class MagnetLinuxCubic : public MagnetLinuxReno
{
  public:
    static TypeId GetTypeId();

    MagnetLinuxCubic();
    MagnetLinuxCubic(const MagnetLinuxCubic& other);
    ~MagnetLinuxCubic() override;

    std::string GetName() const override;
    void Init(Ptr<TcpSocketState> tcb) override;
    uint32_t GetSsThresh(Ptr<const TcpSocketState> tcb, uint32_t bytesInFlight) override;
    void IncreaseWindow(Ptr<TcpSocketState> tcb, uint32_t segmentsAcked) override;
    void PktsAcked(Ptr<TcpSocketState> tcb, uint32_t segmentsAcked, const Time& rtt) override;
    void CongestionStateSet(Ptr<TcpSocketState> tcb, const TcpSocketState::TcpCongState_t newState) override;
    Ptr<TcpCongestionOps> Fork() override;

    /**
     * cubictcp_acked: one ACK's RTT sample (`rttUs`; negative: none), `una` the
     * snd_una it leaves.  MagnetLinuxTcpSocket calls it once per ACK; from then on
     * PktsAcked leaves HyStart and delay_min to it.
     */
    virtual void AckSample(Ptr<TcpSocketState> tcb, SequenceNumber32 una, int64_t rttUs);

    /** The least RTT seen (delay_min), us; 0 before the first sample. */
    uint32_t GetDelayMin() const;

  private:
    uint32_t Jiffies() const;
    void Reset();                                   // bictcp_reset
    void HystartReset(Ptr<const TcpSocketState> tcb); // bictcp_hystart_reset
    void Sample(Ptr<TcpSocketState> tcb, SequenceNumber32 una, int64_t rttUs);
    void HystartUpdate(Ptr<TcpSocketState> tcb, SequenceNumber32 una, uint32_t delay);
    void Update(uint32_t cwnd, uint32_t acked);     // bictcp_update: m_cnt

    bool m_hystart;
    bool m_socketSamples{false}; //!< AckSample gives the samples (MagnetLinuxTcpSocket)
    uint32_t m_hystartLowWindow;

    uint32_t m_cnt{0};
    uint32_t m_lastMaxCwnd{0};
    uint32_t m_lastCwnd{0};
    uint32_t m_lastTime{0};
    uint32_t m_originPoint{0};
    uint32_t m_k{0};        //!< bic_K, 1/1024 s
    uint32_t m_delayMin{0}; //!< us
    uint32_t m_epochStart{0}; //!< jiffies; 0: no epoch
    uint32_t m_ackCnt{0};
    uint32_t m_tcpCwnd{0};
    uint8_t m_sampleCnt{0};
    bool m_found{false};
    uint32_t m_roundStart{0}; //!< us
    SequenceNumber32 m_endSeq;
    uint32_t m_lastAck{0};    //!< us
    uint32_t m_currRtt{0};    //!< us
};

} // namespace ns3

#endif /* MAGNET_LINUX_CUBIC_H */
