/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "magnet-linux-reno.h"

#include "magnet-linux-packet-count.h"

#include <algorithm>

namespace ns3
{

NS_OBJECT_ENSURE_REGISTERED(MagnetLinuxReno);

TypeId
MagnetLinuxReno::GetTypeId()
{
    static TypeId tid = TypeId("ns3::MagnetLinuxReno")
                            .SetParent<TcpCongestionOps>()
                            .SetGroupName("Internet")
                            .AddConstructor<MagnetLinuxReno>();
    return tid;
}

MagnetLinuxReno::MagnetLinuxReno() = default;

MagnetLinuxReno::MagnetLinuxReno(const MagnetLinuxReno& other) = default;

MagnetLinuxReno::~MagnetLinuxReno() = default;

std::string
MagnetLinuxReno::GetName() const
{
    return "MagnetLinuxReno";
}

uint32_t
MagnetLinuxReno::CwndPackets(Ptr<const TcpSocketState> tcb)
{
    return tcb->m_cWnd / tcb->m_segmentSize;
}

uint32_t
MagnetLinuxReno::SlowStart(Ptr<TcpSocketState> tcb, uint32_t acked)
{
    const uint32_t cwnd = CwndPackets(tcb);
    const uint32_t grown = std::min(cwnd + acked, tcb->m_ssThresh.Get() / tcb->m_segmentSize);
    tcb->m_cWnd = grown * tcb->m_segmentSize;
    return acked - (grown - cwnd);
}

void
MagnetLinuxReno::CongAvoidAi(Ptr<TcpSocketState> tcb, uint32_t& cwndCnt, uint32_t w, uint32_t acked)
{
    uint32_t cwnd = CwndPackets(tcb);
    if (cwndCnt >= w) // credits from a larger w: one packet, gently
    {
        cwndCnt = 0;
        cwnd++;
    }
    cwndCnt += acked;
    if (cwndCnt >= w)
    {
        uint32_t delta = cwndCnt / w;
        cwndCnt -= delta * w;
        cwnd += delta;
    }
    tcb->m_cWnd = cwnd * tcb->m_segmentSize;
}

uint32_t
MagnetLinuxReno::Delivered(Ptr<const TcpSocketState> tcb, uint32_t segmentsAcked)
{
    uint32_t acked = segmentsAcked;
    if (m_ending)
    {
        // tcp_cong_control's acked_sacked (tcp_newly_delivered): the packets this ACK
        // delivered.  On the ACK that ends recovery TcpSocketBase counts every segment
        // from the old snd_una, those SACKed (and so delivered) earlier too.
        m_ending = false;
        acked = (tcb->m_lastAckedSackedBytes + tcb->m_segmentSize - 1) / tcb->m_segmentSize;
    }
    return acked;
}

void
MagnetLinuxReno::IncreaseWindow(Ptr<TcpSocketState> tcb, uint32_t segmentsAcked)
{
    // tcp_reno_cong_avoid: the window grows only while it limits what is sent.
    uint32_t acked = Delivered(tcb, segmentsAcked);
    if (!MagnetLinuxPacketCount::IsCwndLimited(tcb)) // tcp_is_cwnd_limited
    {
        return;
    }
    if (tcb->m_cWnd < tcb->m_ssThresh) // tcp_in_slow_start
    {
        acked = SlowStart(tcb, acked);
        if (acked == 0)
        {
            return;
        }
    }
    CongAvoidAi(tcb, m_cwndCnt, CwndPackets(tcb), acked);
}

uint32_t
MagnetLinuxReno::GetSsThresh(Ptr<const TcpSocketState> tcb, uint32_t bytesInFlight [[maybe_unused]])
{
    // tcp_reno_ssthresh: half the window in packets, at least 2.
    return std::max(CwndPackets(tcb) >> 1, 2U) * tcb->m_segmentSize;
}

void
MagnetLinuxReno::PktsAcked(Ptr<TcpSocketState> tcb [[maybe_unused]],
                           uint32_t segmentsAcked [[maybe_unused]],
                           const Time& rtt [[maybe_unused]])
{
    m_ending = false; // a later ACK: TcpSocketBase's count is what it delivered again
}

void
MagnetLinuxReno::CongestionStateSet(Ptr<TcpSocketState> tcb, const TcpSocketState::TcpCongState_t newState)
{
    if (newState == TcpSocketState::CA_RECOVERY || newState == TcpSocketState::CA_CWR ||
        newState == TcpSocketState::CA_LOSS)
    {
        m_cwndCnt = 0; // tcp_init_cwnd_reduction, tcp_enter_loss
    }
    // The ACK that ends recovery (its IncreaseWindow follows, as tcp_cong_avoid does).
    m_ending = newState == TcpSocketState::CA_OPEN && tcb->m_congState == TcpSocketState::CA_RECOVERY;
}

Ptr<TcpCongestionOps>
MagnetLinuxReno::Fork()
{
    return CopyObject<MagnetLinuxReno>(this);
}

} // namespace ns3
