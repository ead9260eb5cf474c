/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "magnet-linux-packet-count.h"

#include "magnet-tx-scoreboard.h"

#include "ns3/tcp-tx-item.h"

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
        m_delivered++; // tcp_count_delivered(tp, tcp_skb_pcount(skb), ...)
    }
    TcpRateLinux::SkbDelivered(skb);
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

uint32_t
MagnetLinuxPacketCount::InFlight() const
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
