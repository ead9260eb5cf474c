/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef MAGNET_LINUX_RENO_H
#define MAGNET_LINUX_RENO_H

#include "ns3/tcp-congestion-ops.h"

namespace ns3
{

/**
 * @brief Linux 6.x's Reno (tcp_reno_cong_avoid, tcp_reno_ssthresh of
 * net/ipv4/tcp_cong.c), in packets.  Linux has no separate NewReno: its Reno
 * module is the congestion control, NewReno's recovery is the socket's.
 *
 * Where ns-3's TcpNewReno differs: the window grows on every ACK, also when
 * the application and not the window limits the flow (tcp_reno_cong_avoid
 * returns unless tcp_is_cwnd_limited).  Where ns-3's TcpLinuxReno differs:
 * ssthresh is half the window in bytes (cwnd 11: 5.5 segments, Linux 5
 * packets), the avoidance count survives a reduction (Linux clears
 * snd_cwnd_cnt in tcp_init_cwnd_reduction and tcp_enter_loss), and an ACK
 * slow start used up may still spend that count.
 *
 * MagnetLinuxCubic builds on it as tcp_cubic.c on tcp_cong.c: the cwnd-limited
 * test, the packets an ACK delivered, tcp_slow_start and tcp_cong_avoid_ai.
 *
 * Not modelled: undo (tcp_reno_undo_cwnd; TcpSocketBase has no undo).
 */
class MagnetLinuxReno : public TcpCongestionOps
{
  public:
    static TypeId GetTypeId();

    MagnetLinuxReno();
    MagnetLinuxReno(const MagnetLinuxReno& other);
    ~MagnetLinuxReno() override;

    std::string GetName() const override;
    uint32_t GetSsThresh(Ptr<const TcpSocketState> tcb, uint32_t bytesInFlight) override;
    void IncreaseWindow(Ptr<TcpSocketState> tcb, uint32_t segmentsAcked) override;
    void PktsAcked(Ptr<TcpSocketState> tcb, uint32_t segmentsAcked, const Time& rtt) override;
    void CongestionStateSet(Ptr<TcpSocketState> tcb, const TcpSocketState::TcpCongState_t newState) override;
    Ptr<TcpCongestionOps> Fork() override;

    /**
     * tcp_slow_start: cwnd grows by the packets ACKed, up to ssthresh.
     * @return the packets of the ACK left for congestion avoidance
     */
    static uint32_t SlowStart(Ptr<TcpSocketState> tcb, uint32_t acked);
    /**
     * tcp_cong_avoid_ai: cwnd grows by one for every `w` packets ACKed,
     * counted in `cwndCnt` (tp->snd_cwnd_cnt).
     */
    static void CongAvoidAi(Ptr<TcpSocketState> tcb, uint32_t& cwndCnt, uint32_t w, uint32_t acked);
    /** tcp_snd_cwnd: the window in packets. */
    static uint32_t CwndPackets(Ptr<const TcpSocketState> tcb);

  protected:
    /** The packets this ACK delivered, as tcp_cong_control's acked_sacked (tcp_newly_delivered). */
    uint32_t Delivered(Ptr<const TcpSocketState> tcb, uint32_t segmentsAcked);

    uint32_t m_cwndCnt{0}; //!< tp->snd_cwnd_cnt (in Linux the socket's)

  private:
    bool m_ending{false};  //!< this ACK ends recovery: it grows by what it delivered
};

} // namespace ns3

#endif /* MAGNET_LINUX_RENO_H */
