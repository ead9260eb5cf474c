/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "magnet-tx-scoreboard.h"

namespace ns3
{

namespace
{

// A pointer to a private member, by explicit instantiation: the access rules do not
// apply to the names in an explicit instantiation ([temp.spec.general]), and the
// friend function the instantiation defines (declared below) hands the pointer out.
template <typename Tag, typename Tag::type Member>
struct Expose
{
    friend typename Tag::type Get(Tag)
    {
        return Member;
    }
};

// The members, each by a tag type naming its pointer type, and the function returning it.
struct SentList { using type = std::list<TcpTxItem*> TcpTxBuffer::*; };
struct LostOut { using type = uint32_t TcpTxBuffer::*; };
struct RetransOut { using type = uint32_t TcpTxBuffer::*; };
struct ItemLost { using type = bool TcpTxItem::*; };
struct ItemStart { using type = SequenceNumber32 TcpTxItem::*; };
SentList::type Get(SentList);
LostOut::type Get(LostOut);
RetransOut::type Get(RetransOut);
ItemLost::type Get(ItemLost);
ItemStart::type Get(ItemStart);

template struct Expose<SentList, &TcpTxBuffer::m_sentList>;
template struct Expose<LostOut, &TcpTxBuffer::m_lostOut>;
template struct Expose<RetransOut, &TcpTxBuffer::m_retrans>;
template struct Expose<ItemLost, &TcpTxItem::m_lost>;
template struct Expose<ItemStart, &TcpTxItem::m_startSeq>;

} // namespace

const MagnetTxScoreboard::Items&
MagnetTxScoreboard::Sent(const TcpTxBuffer& buffer)
{
    return buffer.*Get(SentList());
}

SequenceNumber32
MagnetTxScoreboard::Start(const TcpTxItem& item)
{
    return item.*Get(ItemStart());
}

bool
MagnetTxScoreboard::IsLost(const TcpTxItem& item)
{
    return item.*Get(ItemLost());
}

bool
MagnetTxScoreboard::MarkLost(TcpTxBuffer& buffer, TcpTxItem& item)
{
    if (item.IsSacked())
    {
        return false;
    }
    const uint32_t size = item.GetPacket()->GetSize();
    if (item.*Get(ItemLost()))
    {
        if (!item.m_retrans)
        {
            return false;
        }
        ClearRetransmitted(buffer, item); // NextSeg may resend it
        return true;
    }
    item.*Get(ItemLost()) = true;
    buffer.*Get(LostOut()) += size;
    return false;
}

void
MagnetTxScoreboard::ClearLost(TcpTxBuffer& buffer, TcpTxItem& item)
{
    if (item.*Get(ItemLost()))
    {
        item.*Get(ItemLost()) = false;
        buffer.*Get(LostOut()) -= item.GetPacket()->GetSize();
    }
}

void
MagnetTxScoreboard::ClearRetransmitted(TcpTxBuffer& buffer, TcpTxItem& item)
{
    if (item.m_retrans)
    {
        item.m_retrans = false;
        buffer.*Get(RetransOut()) -= item.GetPacket()->GetSize();
    }
}

} // namespace ns3
