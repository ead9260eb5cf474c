/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef MAGNET_LINUX_PRR_RECOVERY_H
#define MAGNET_LINUX_PRR_RECOVERY_H

#include "ns3/tcp-recovery-ops.h"

namespace ns3
{

/**
 * @brief Linux 6.x's proportional rate reduction (net/ipv4/tcp_input.c:
 * tcp_init_cwnd_reduction, tcp_cwnd_reduction), in packets as Linux counts.
 *
 * On each ACK in recovery the window becomes the packets in flight plus what
 * may be sent: while more than ssthresh is in flight, ssthresh / prior_cwnd of
 * the packets delivered (ACKed or SACKed) since recovery began, less those sent
 * since; below ssthresh, up to ssthresh, at least what this ACK delivered (one
 * more when it advanced snd_una).  ns-3's TcpPrrRecovery counts every duplicate
 * ACK as one more delivered segment on top of what its SACK blocks delivered,
 * so with SACK it sends about twice as fast as Linux through the first half of
 * recovery (1.4 segments per delivered one instead of 0.7); here a duplicate
 * ACK counts one segment only when it delivered nothing (no SACK: Linux's
 * tcp_add_reno_sack).  Linux's newly_lost (no extra segment on an ACK that
 * marked new losses) is not known here: every ACK that advances snd_una
 * counts as one that marked none.  The packets in flight are the socket's
 * (MagnetLinuxPacketCount: a short segment is a packet), and MagnetLinuxTcpSocket
 * gives the packets delivered as that many segments of bytes.
 */
class MagnetLinuxPrrRecovery : public TcpRecoveryOps
{
  public:
    static TypeId GetTypeId();

    MagnetLinuxPrrRecovery();
    MagnetLinuxPrrRecovery(const MagnetLinuxPrrRecovery& other);
    ~MagnetLinuxPrrRecovery() override;

    std::string GetName() const override;
    void EnterRecovery(Ptr<TcpSocketState> tcb,
                       uint32_t dupAckCount,
                       uint32_t unAckDataCount,
                       uint32_t deliveredBytes) override;
    void DoRecovery(Ptr<TcpSocketState> tcb, uint32_t deliveredBytes, bool isDupAck) override;
    void ExitRecovery(Ptr<TcpSocketState> tcb) override;
    void UpdateBytesSent(uint32_t bytesSent) override;
    Ptr<TcpRecoveryOps> Fork() override;

  private:
    uint32_t Packets(uint32_t bytes) const; //!< skbs: a short segment is a packet too

    uint32_t m_segmentSize{1};
    uint32_t m_priorCwnd{0};    //!< prior_cwnd: the window (packets) when recovery began
    uint32_t m_prrDelivered{0}; //!< prr_delivered: packets delivered since
    uint32_t m_prrOut{0};       //!< prr_out: packets sent since
};

} // namespace ns3

#endif /* MAGNET_LINUX_PRR_RECOVERY_H */
