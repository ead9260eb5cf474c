/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef MAGNET_TX_SCOREBOARD_H
#define MAGNET_TX_SCOREBOARD_H

#include "ns3/sequence-number.h"
#include "ns3/tcp-tx-buffer.h"
#include "ns3/tcp-tx-item.h"

#include <list>

namespace ns3
{

/**
 * @brief The per-segment scoreboard of a TcpTxBuffer, for a loss detection of
 * its own (MagnetLinuxTcpSocket's RACK).
 *
 * TcpTxBuffer marks a segment lost only by its RFC 6675 rules (three SACKed
 * segments above, the head on three duplicate ACKs, all of it on an RTO), and
 * keeps the sent segments and their lost flags private, with no virtual method
 * to replace.  Linux marks any segment lost when a later-sent one is delivered
 * (tcp_mark_skb_lost).  This reads the sent list and sets the lost flag and the
 * counters that go with it, keeping the buffer's invariants (lost and retransmitted
 * bytes counted as its own code counts them); ns-3 then retransmits such a
 * segment as any other lost one (NextSeg).  The members are reached by the
 * explicit template instantiation rule that lets one name a private member there
 * (the pip wheel's ns-3 cannot be patched).
 */
class MagnetTxScoreboard
{
  public:
    using Items = std::list<TcpTxItem*>;

    /** The sent, unacknowledged segments, in sequence order (TcpTxBuffer::m_sentList). */
    static const Items& Sent(const TcpTxBuffer& buffer);
    /** The first sequence number of a segment that was sent. */
    static SequenceNumber32 Start(const TcpTxItem& item);
    static bool IsLost(const TcpTxItem& item);

    /**
     * tcp_mark_skb_lost: a SACKed segment stays as it is; a lost one that was
     * retransmitted loses its retransmitted mark (its retransmission is lost too:
     * NextSeg picks it again); any other one becomes lost.
     * @return true if a retransmission was lost (LINUX_MIB_TCPLOSTRETRANSMIT).
     */
    static bool MarkLost(TcpTxBuffer& buffer, TcpTxItem& item);

    /** An undo (tcp_undo_cwnd_reduction): the segment is no longer taken as lost. */
    static void ClearLost(TcpTxBuffer& buffer, TcpTxItem& item);

    /** The segment's retransmission is no longer in flight: its retransmitted mark goes. */
    static void ClearRetransmitted(TcpTxBuffer& buffer, TcpTxItem& item);
};

} // namespace ns3

#endif /* MAGNET_TX_SCOREBOARD_H */
