/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "magnet-linux-prr-recovery.h"

#include "magnet-linux-packet-count.h"

#include "ns3/tcp-socket-state.h"

#include <algorithm>

namespace ns3
{

NS_OBJECT_ENSURE_REGISTERED(MagnetLinuxPrrRecovery);

TypeId
MagnetLinuxPrrRecovery::GetTypeId()
{
    static TypeId tid = TypeId("ns3::MagnetLinuxPrrRecovery")
                            .SetParent<TcpRecoveryOps>()
                            .SetGroupName("Internet")
                            .AddConstructor<MagnetLinuxPrrRecovery>();
    return tid;
}

MagnetLinuxPrrRecovery::MagnetLinuxPrrRecovery() = default;

MagnetLinuxPrrRecovery::MagnetLinuxPrrRecovery(const MagnetLinuxPrrRecovery& other) = default;

MagnetLinuxPrrRecovery::~MagnetLinuxPrrRecovery() = default;

std::string
MagnetLinuxPrrRecovery::GetName() const
{
    return "MagnetLinuxPrrRecovery";
}

uint32_t
MagnetLinuxPrrRecovery::Packets(uint32_t bytes) const
{
    return (bytes + m_segmentSize - 1) / m_segmentSize;
}

void
MagnetLinuxPrrRecovery::EnterRecovery(Ptr<TcpSocketState> tcb,
                                      uint32_t dupAckCount [[maybe_unused]],
                                      uint32_t unAckDataCount [[maybe_unused]],
                                      uint32_t deliveredBytes)
{
    // tcp_init_cwnd_reduction: ssthresh is already the congestion control's, cwnd still the old one.
    m_segmentSize = tcb->m_segmentSize;
    m_priorCwnd = std::max(1U, tcb->m_cWnd.Get() / m_segmentSize);
    m_prrDelivered = 0;
    m_prrOut = 0;
    DoRecovery(tcb, deliveredBytes, true);
}

void
MagnetLinuxPrrRecovery::DoRecovery(Ptr<TcpSocketState> tcb, uint32_t deliveredBytes, bool isDupAck)
{
    // tcp_cwnd_reduction(sk, newly_acked_sacked, newly_lost = 0, flag)
    uint32_t delivered = Packets(deliveredBytes);
    if (delivered == 0 && isDupAck)
    {
        delivered = 1; // no SACK: the duplicate ACK stands for one segment that left
    }
    if (delivered == 0)
    {
        return;
    }
    m_prrDelivered += delivered;
    const auto ssthresh = static_cast<int64_t>(tcb->m_ssThresh.Get() / m_segmentSize);
    const auto inFlight = static_cast<int64_t>(MagnetLinuxPacketCount::InFlight(tcb));
    const int64_t room = ssthresh - inFlight;
    int64_t send;
    if (room < 0)
    {
        // Proportional: ceil(ssthresh * prr_delivered / prior_cwnd) - prr_out.
        send = (ssthresh * m_prrDelivered + m_priorCwnd - 1) / m_priorCwnd - m_prrOut;
    }
    else
    {
        // Slow start back up to ssthresh, one extra packet when snd_una advanced.
        send = std::max<int64_t>(static_cast<int64_t>(m_prrDelivered) - m_prrOut, delivered);
        send = std::min(room, send + (isDupAck ? 0 : 1));
    }
    send = std::max<int64_t>(send, m_prrOut > 0 ? 0 : 1); // the fast retransmit always leaves
    tcb->m_cWnd = static_cast<uint32_t>(std::max<int64_t>(inFlight + send, 0)) * m_segmentSize;
    tcb->m_cWndInfl = tcb->m_cWnd;
}

void
MagnetLinuxPrrRecovery::ExitRecovery(Ptr<TcpSocketState> tcb)
{
    // tcp_end_cwnd_reduction: TcpSocketBase has set cwnd to ssthresh already.
    tcb->m_cWndInfl = tcb->m_cWnd;
}

void
MagnetLinuxPrrRecovery::UpdateBytesSent(uint32_t bytesSent)
{
    m_prrOut += Packets(bytesSent);
}

Ptr<TcpRecoveryOps>
MagnetLinuxPrrRecovery::Fork()
{
    return CopyObject<MagnetLinuxPrrRecovery>(this);
}

} // namespace ns3
