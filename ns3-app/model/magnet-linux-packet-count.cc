/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "magnet-linux-packet-count.h"

#include "magnet-tx-scoreboard.h"

#include "ns3/abort.h"
#include "ns3/simulator.h"
#include "ns3/tcp-tx-item.h"

#include <algorithm>
#include <cstdlib>

namespace ns3
{

NS_OBJECT_ENSURE_REGISTERED(MagnetLinuxPacketCount);

TypeId
MagnetLinuxPacketCount::GetTypeId()
{
    static TypeId tid = TypeId("ns3::MagnetLinuxPacketCount")
                            .SetParent<TcpRateLinux>()
                            .SetGroupName("Internet")
                            .AddConstructor<MagnetLinuxPacketCount>();
    return tid;
}

void
MagnetLinuxPacketCount::SkbDelivered(TcpTxItem* skb)
{
    // TcpRateLinux marks an item delivered (its delivered time Max) the first time it
    // sees it, SACKed or ACKed; a SACKed item ACKed later is not delivered again.
    if (skb->GetRateInformation().m_deliveredTime != Time::Max())
    {
        // tcp_count_delivered(tp, tcp_skb_pcount(skb), ...); without SACK, per ACK (RenoAcked).
        if (m_reno)
        {
            m_renoAcked++;
        }
        else
        {
            m_delivered++;
        }
    }
    TcpRateLinux::SkbDelivered(skb);
}

void
MagnetLinuxPacketCount::RenoAckStart()
{
    m_reno = true;
    m_renoAcked = 0;
    m_renoSackedOut = m_lossSacked;
    if (m_buffer->GetSacked() > 0)
    {
        for (const TcpTxItem* item : MagnetTxScoreboard::Sent(*m_buffer))
        {
            m_renoSackedOut += item->IsSacked();
        }
    }
}

void
MagnetLinuxPacketCount::RenoAcked()
{
    if (m_reno && m_renoAcked > 0)
    {
        // tcp_remove_reno_sacks: "One ACK acked hole. The rest eat duplicate ACKs."
        m_delivered += m_renoAcked > m_renoSackedOut ? m_renoAcked - m_renoSackedOut : 1;
    }
    m_reno = false;
    m_renoAcked = 0;
}

void
MagnetLinuxPacketCount::RenoDupAck()
{
    m_delivered++; // tcp_add_reno_sack: delivered = sacked_out - prior_sacked
}

void
MagnetLinuxPacketCount::SetLossSacked(uint32_t n)
{
    m_lossSacked = n;
}

uint32_t
MagnetLinuxPacketCount::GetLossSacked() const
{
    return m_lossSacked;
}

void
MagnetLinuxPacketCount::SetTxBuffer(Ptr<const TcpTxBuffer> buffer)
{
    m_buffer = buffer;
}

uint64_t
MagnetLinuxPacketCount::GetDelivered() const
{
    return m_delivered;
}

uint32_t
MagnetLinuxPacketCount::PacketsOut() const
{
    return static_cast<uint32_t>(MagnetTxScoreboard::Sent(*m_buffer).size());
}

MagnetLinuxPacketCount::Key
MagnetLinuxPacketCount::CurrentKey() const
{
    const auto& sent = MagnetTxScoreboard::Sent(*m_buffer);
    Key k;
    k.event = Simulator::GetEventCount();
    k.items = sent.size();
    k.head = m_buffer->HeadSequence();
    k.tail = sent.empty() ? k.head
                          : MagnetTxScoreboard::Start(*sent.back()) +
                                sent.back()->GetPacket()->GetSize();
    k.sacked = m_buffer->GetSacked();
    k.lost = m_buffer->GetLost();
    k.retrans = m_buffer->GetRetransmitsCount();
    return k;
}

uint32_t
MagnetLinuxPacketCount::Walk() const
{
    // packets_out - (sacked_out + lost_out) + retrans_out.  A SACKed segment is not
    // retransmitted in flight either (tcp_sacktag_one clears TCPCB_SACKED_RETRANS;
    // TcpTxBuffer::Update leaves the item's flag).
    uint32_t n = 0;
    for (const TcpTxItem* item : MagnetTxScoreboard::Sent(*m_buffer))
    {
        if (!item->IsSacked())
        {
            n += 1 + item->IsRetrans() - MagnetTxScoreboard::IsLost(*item);
        }
    }
    return n;
}

namespace
{
// MAGNET_PKTCOUNT_CHECK=1: every count kept is compared with a walk (aborts if they differ).
const bool g_check = std::getenv("MAGNET_PKTCOUNT_CHECK") != nullptr;
} // namespace

uint32_t
MagnetLinuxPacketCount::InFlight() const
{
    // The walk is the sent list's length (a BDP of packets); SendPendingData asks
    // before and after each segment, so the count is kept for the event (CurrentKey).
    const Key k = CurrentKey();
    if (!m_valid || !(k == m_key))
    {
        m_inFlight = Walk();
        m_key = k;
        m_valid = true;
    }
    else if (g_check)
    {
        NS_ABORT_MSG_UNLESS(m_inFlight == Walk(), "packet count kept " << m_inFlight << " walk " << Walk());
    }
    return m_inFlight - std::min(m_lossSacked, m_inFlight);
}

void
MagnetLinuxPacketCount::BeforeSend(SequenceNumber32 seq)
{
    m_appending = false;
    if (m_valid)
    {
        const Key k = CurrentKey();
        m_appending = k == m_key && seq == k.tail;
    }
}

void
MagnetLinuxPacketCount::AfterSend()
{
    // CopyFromSequence at the tail: GetNewSegment appends one item (not SACKed, lost
    // or retransmitted) and changes no other; anything else and the count is walked.
    const Key k = CurrentKey();
    Key expect = m_key;
    expect.items++;
    expect.tail = k.tail;
    const auto& sent = MagnetTxScoreboard::Sent(*m_buffer);
    if (m_appending && k == expect && k.tail != m_key.tail && !sent.back()->IsSacked() &&
        !sent.back()->IsRetrans() && !MagnetTxScoreboard::IsLost(*sent.back()) &&
        MagnetTxScoreboard::Start(*sent.back()) == m_key.tail)
    {
        m_inFlight++;
        m_key = k;
        if (g_check)
        {
            NS_ABORT_MSG_UNLESS(m_inFlight == Walk(), "packet count kept " << m_inFlight << " walk " << Walk());
        }
    }
    else
    {
        m_valid = false;
    }
    m_appending = false;
}

void
MagnetLinuxPacketCount::CwndValidate(bool cwndLimited, SequenceNumber32 nxt)
{
    const SequenceNumber32 una = m_buffer->HeadSequence();
    if (!m_cwndUsageSet || una >= m_cwndUsageSeq || cwndLimited ||
        (!m_cwndLimited && PacketsOut() > m_maxPacketsOut))
    {
        m_cwndLimited = cwndLimited;
        m_maxPacketsOut = PacketsOut();
        m_cwndUsageSeq = nxt;
        m_cwndUsageSet = true;
    }
}

bool
MagnetLinuxPacketCount::CwndLimitedFlag() const
{
    return m_cwndLimited;
}

bool
MagnetLinuxPacketCount::IsCwndLimited(Ptr<const TcpSocketState> tcb)
{
    auto count = tcb->GetObject<MagnetLinuxPacketCount>();
    if (!count)
    {
        return tcb->m_isCwndLimited;
    }
    if (count->m_cwndLimited)
    {
        return true;
    }
    if (tcb->m_cWnd < tcb->m_ssThresh) // tcp_in_slow_start
    {
        return tcb->m_cWnd / tcb->m_segmentSize < 2 * count->m_maxPacketsOut;
    }
    return false;
}

uint32_t
MagnetLinuxPacketCount::InFlight(Ptr<const TcpSocketState> tcb)
{
    if (auto count = tcb->GetObject<MagnetLinuxPacketCount>())
    {
        return count->InFlight();
    }
    const uint32_t seg = tcb->m_segmentSize;
    return (tcb->m_bytesInFlight.Get() + seg - 1) / seg;
}

} // namespace ns3
