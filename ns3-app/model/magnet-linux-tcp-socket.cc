/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "magnet-linux-tcp-socket.h"

#include "magnet-linux-cubic.h"

#include "magnet-linux-rtt-estimator.h"
#include "magnet-tx-scoreboard.h"

#include "ns3/boolean.h"
#include "ns3/double.h"
#include "ns3/log.h"
#include "ns3/node.h"
#include "ns3/object-factory.h"
#include "ns3/simulator.h"
#include "ns3/tag.h"
#include "ns3/tcp-congestion-ops.h"
#include "ns3/tcp-l4-protocol.h"
#include "ns3/tcp-option-sack.h"
#include "ns3/tcp-option-ts.h"
#include "ns3/tcp-rate-ops.h"
#include "ns3/tcp-recovery-ops.h"
#include "ns3/tcp-rx-buffer.h"
#include "ns3/tcp-tx-buffer.h"
#include "ns3/uinteger.h"

#include <algorithm>
#include <cstdlib>
#include <vector>

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("MagnetLinuxTcpSocket");
NS_OBJECT_ENSURE_REGISTERED(MagnetLinuxTcpSocket);
NS_OBJECT_ENSURE_REGISTERED(MagnetLinuxTcpSocketFactory);

namespace
{

// MAGNET_RACK_ORDER_CHECK=1: RACK's send order, walked in part and merged, is compared with
// a sort of the whole sent list (aborts if they differ where RACK reads it).
const bool g_rackOrderCheck = std::getenv("MAGNET_RACK_ORDER_CHECK") != nullptr;

// Constants of Linux's TCP (include/net/tcp.h), in bytes.
constexpr uint32_t kMssDefault = 536;    // TCP_MSS_DEFAULT
constexpr uint32_t kMinMss = 88;         // TCP_MIN_MSS
constexpr uint32_t kTcpHeader = 20;      // sizeof(struct tcphdr)
constexpr uint32_t kSkbOverhead = 576;   // MAX_TCP_HEADER + skb_shared_info, per send buffer
constexpr uint32_t kSkbStruct = 256;     // SKB_DATA_ALIGN(sizeof(struct sk_buff))
constexpr uint32_t kInitCwnd = 10;       // TCP_INIT_CWND
constexpr uint32_t kGsoMaxSize = 65536;  // sk_gso_max_size without BIG TCP (GSO_LEGACY_MAX_SIZE)
constexpr uint32_t kMinTsoSegs = 2;      // tcp_min_tso_segs
constexpr uint32_t kReorderingPlusOne = 4;
constexpr uint32_t kReordering = 3;      // tcp_reordering (TCP_FASTRETRANS_THRESH)
constexpr uint32_t kPingPongThresh = 1;  // TCP_PINGPONG_THRESH
constexpr uint32_t kMaxReordering = 300; // tcp_max_reordering
constexpr int64_t kTimeoutMinUs = 2000;  // TCP_TIMEOUT_MIN_US
constexpr int64_t kInvalidRateLimitMs = 500; // tcp_invalid_ratelimit
// With RACK, Linux counts no duplicate ACKs (tcp_time_to_recover): a threshold never reached
// turns off TcpSocketBase's and TcpTxBuffer's (small enough that x segment size fits 32 bits).
constexpr uint32_t kNoDupThresh = 1U << 20;

/** A segment Linux would send with PSH set (MarkPushed). */
class MagnetPushTag : public Tag
{
  public:
    static TypeId GetTypeId()
    {
        static TypeId tid = TypeId("ns3::MagnetPushTag").SetParent<Tag>().AddConstructor<MagnetPushTag>();
        return tid;
    }

    TypeId GetInstanceTypeId() const override
    {
        return GetTypeId();
    }

    uint32_t GetSerializedSize() const override
    {
        return 0;
    }

    void Serialize(TagBuffer) const override
    {
    }

    void Deserialize(TagBuffer) override
    {
    }

    void Print(std::ostream& os) const override
    {
        os << "PSH";
    }
};

uint64_t
RoundUpPow2(uint64_t v)
{
    uint64_t p = 1;
    while (p < v)
    {
        p <<= 1;
    }
    return p;
}

} // namespace

TypeId
MagnetLinuxTcpSocket::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::MagnetLinuxTcpSocket")
            .SetParent<TcpSocketBase>()
            .SetGroupName("Internet")
            .AddConstructor<MagnetLinuxTcpSocket>()
            .AddAttribute("Tick", "The kernel's jiffy: its timers run on it (HZ = 250: 4 ms).",
                          TimeValue(MilliSeconds(4)),
                          MakeTimeAccessor(&MagnetLinuxTcpSocket::m_tick),
                          MakeTimeChecker(NanoSeconds(1)))
            .AddAttribute("AtoMin", "TCP_ATO_MIN and TCP_DELACK_MIN: the delayed-ACK timeout's start.",
                          TimeValue(MilliSeconds(40)),
                          MakeTimeAccessor(&MagnetLinuxTcpSocket::m_atoMin),
                          MakeTimeChecker(NanoSeconds(1)))
            .AddAttribute("DelAckMax", "icsk_delack_max: the longest an ACK is delayed (TCP_DELACK_MAX).",
                          TimeValue(MilliSeconds(200)),
                          MakeTimeAccessor(&MagnetLinuxTcpSocket::m_delAckMax),
                          MakeTimeChecker(NanoSeconds(1)))
            .AddAttribute("MaxQuickAcks", "TCP_MAX_QUICKACKS: segments ACKed at once at the start.",
                          UintegerValue(16),
                          MakeUintegerAccessor(&MagnetLinuxTcpSocket::m_maxQuickAcks),
                          MakeUintegerChecker<uint32_t>())
            .AddAttribute("QuickAckAlways", "The route option quickack: every segment ACKed at once.",
                          BooleanValue(false),
                          MakeBooleanAccessor(&MagnetLinuxTcpSocket::m_quickAckAlways),
                          MakeBooleanChecker())
            .AddAttribute("SlowStartAfterIdle", "tcp_slow_start_after_idle.",
                          BooleanValue(true),
                          MakeBooleanAccessor(&MagnetLinuxTcpSocket::m_slowStartAfterIdle),
                          MakeBooleanChecker())
            .AddAttribute("TailLossProbe", "tcp_early_retrans = 3: tail loss probes (with SACK).",
                          BooleanValue(true),
                          MakeBooleanAccessor(&MagnetLinuxTcpSocket::m_tlp),
                          MakeBooleanChecker())
            .AddAttribute("Rack",
                          "tcp_recovery bit 1 (TCP_RACK_LOSS_DETECTION): RACK detects loss (with "
                          "SACK); off, ns-3's RFC 6675 rules do.",
                          BooleanValue(true),
                          MakeBooleanAccessor(&MagnetLinuxTcpSocket::m_rack),
                          MakeBooleanChecker())
            .AddAttribute("Frto",
                          "tcp_frto (2): F-RTO after an RTO (RFC 5682 as Linux does it: new data on "
                          "the ACK of the resent head, undo if data never resent is then (S)ACKed).",
                          BooleanValue(true),
                          MakeBooleanAccessor(&MagnetLinuxTcpSocket::m_frtoOn),
                          MakeBooleanChecker())
            .AddAttribute("RmemDefault", "tcp_rmem[1]: the receive memory a socket starts with.",
                          UintegerValue(131072),
                          MakeUintegerAccessor(&MagnetLinuxTcpSocket::m_rmemDefault),
                          MakeUintegerChecker<uint32_t>(1))
            .AddAttribute("RmemMax", "tcp_rmem[2]: what autotuning may grow it to.",
                          UintegerValue(33554432),
                          MakeUintegerAccessor(&MagnetLinuxTcpSocket::m_rmemMax),
                          MakeUintegerChecker<uint32_t>(1))
            .AddAttribute("WmemDefault", "tcp_wmem[1]: the send memory a socket starts with.",
                          UintegerValue(16384),
                          MakeUintegerAccessor(&MagnetLinuxTcpSocket::m_wmemDefault),
                          MakeUintegerChecker<uint32_t>(1))
            .AddAttribute("WmemMax", "tcp_wmem[2]: what expansion may grow it to.",
                          UintegerValue(4194304),
                          MakeUintegerAccessor(&MagnetLinuxTcpSocket::m_wmemMax),
                          MakeUintegerChecker<uint32_t>(1))
            .AddAttribute("SoRcvBuf", "SO_RCVBUF as given (Linux doubles it and stops autotuning); 0: autotune.",
                          UintegerValue(0),
                          MakeUintegerAccessor(&MagnetLinuxTcpSocket::m_soRcvBuf),
                          MakeUintegerChecker<uint32_t>())
            .AddAttribute("SoSndBuf", "SO_SNDBUF as given (Linux doubles it and stops expanding it); 0: autotune.",
                          UintegerValue(0),
                          MakeUintegerAccessor(&MagnetLinuxTcpSocket::m_soSndBuf),
                          MakeUintegerChecker<uint32_t>())
            .AddAttribute("ScalingRatio",
                          "Data per byte of receive memory for a full-sized segment (scaling_ratio "
                          "/ 256; 0.625 measured for 1500-byte frames from a TUN device).",
                          DoubleValue(0.625),
                          MakeDoubleAccessor(&MagnetLinuxTcpSocket::m_scalingRatio),
                          MakeDoubleChecker<double>(0.01, 1.0))
            .AddAttribute("Retries2",
                          "tcp_retries2: an RTO without progress gives up once the time this many RTOs "
                          "from TCP_RTO_MIN would take, doubling up to RtoMax, has passed since the "
                          "first retransmission (tcp_write_timeout; ns-3's DataRetries does not apply).",
                          UintegerValue(15),
                          MakeUintegerAccessor(&MagnetLinuxTcpSocket::m_retries2),
                          MakeUintegerChecker<uint32_t>(1, 30))
            .AddAttribute("RtoMax", "tcp_rto_max_ms (TCP_RTO_MAX): where the backed-off RTO stops doubling.",
                          TimeValue(Seconds(120)),
                          MakeTimeAccessor(&MagnetLinuxTcpSocket::m_rtoMax),
                          MakeTimeChecker(MilliSeconds(200)))
            .AddAttribute("SynLinearTimeouts",
                          "tcp_syn_linear_timeouts: the SYN's first timeouts keep TCP_TIMEOUT_INIT "
                          "(ConnTimeout) before it doubles; ns-3's ConnCount counts every SYN sent.",
                          UintegerValue(4),
                          MakeUintegerAccessor(&MagnetLinuxTcpSocket::m_synLinear),
                          MakeUintegerChecker<uint32_t>(0, 20))
            .AddAttribute("ReaderWakeup",
                          "The host's wake-up of the reading application: data made readable is read "
                          "this long after (the woken task's recvmsg, after the softirq's ACK decision), "
                          "everything readable then in one wake-up; 0: at once (an ideal host).",
                          TimeValue(Time(0)),
                          MakeTimeAccessor(&MagnetLinuxTcpSocket::m_readerWakeup),
                          MakeTimeChecker(Time(0)))
            .AddAttribute("AckLag",
                          "The host's way in for a segment carrying data: from its arrival at the host "
                          "to its processing by TCP, where the softirq's ACK for it leaves (Linux: the "
                          "interrupt, GRO, IP, tcp_v4_rcv); segments stay in order; 0: at once (an "
                          "ideal host).",
                          TimeValue(Time(0)),
                          MakeTimeAccessor(&MagnetLinuxTcpSocket::m_ackLag),
                          MakeTimeChecker(Time(0)))
            .AddAttribute("ReplyLag",
                          "The host's way in for a pure ACK: from its arrival at the host to its "
                          "processing by TCP, where the data it releases leaves; segments stay in "
                          "order; 0: at once (an ideal host).",
                          TimeValue(Time(0)),
                          MakeTimeAccessor(&MagnetLinuxTcpSocket::m_replyLag),
                          MakeTimeChecker(Time(0)))
            .AddAttribute("TsoDefer",
                          "tcp_tso_should_defer: before an skb of more than one segment (Linux builds "
                          "GSO skbs on every route), wait for the next ACK when less than a full skb "
                          "of room is left and an ACK is due within 1 ms.",
                          BooleanValue(true),
                          MakeBooleanAccessor(&MagnetLinuxTcpSocket::m_tsoDefer),
                          MakeBooleanChecker());
    return tid;
}

MagnetLinuxTcpSocket::MagnetLinuxTcpSocket()
{
    InitPacketCount();
}

MagnetLinuxTcpSocket::MagnetLinuxTcpSocket(const MagnetLinuxTcpSocket& sock)
    : TcpSocketBase(sock),
      m_tick(sock.m_tick),
      m_atoMin(sock.m_atoMin),
      m_delAckMax(sock.m_delAckMax),
      m_maxQuickAcks(sock.m_maxQuickAcks),
      m_quickAckAlways(sock.m_quickAckAlways),
      m_slowStartAfterIdle(sock.m_slowStartAfterIdle),
      m_tlp(sock.m_tlp),
      m_rack(sock.m_rack),
      m_frtoOn(sock.m_frtoOn),
      m_rmemDefault(sock.m_rmemDefault),
      m_rmemMax(sock.m_rmemMax),
      m_wmemDefault(sock.m_wmemDefault),
      m_wmemMax(sock.m_wmemMax),
      m_soRcvBuf(sock.m_soRcvBuf),
      m_soSndBuf(sock.m_soSndBuf),
      m_scalingRatio(sock.m_scalingRatio),
      m_retries2(sock.m_retries2),
      m_rtoMax(sock.m_rtoMax),
      m_synLinear(sock.m_synLinear),
      m_readerWakeup(sock.m_readerWakeup),
      m_ackLag(sock.m_ackLag),
      m_replyLag(sock.m_replyLag),
      m_tsoDefer(sock.m_tsoDefer),
      m_userNoDelay(sock.m_userNoDelay),
      m_sndBuf(sock.m_sndBuf)
{
    // A forked (accepted) socket starts its connection afresh: only the settings are copied.
    InitPacketCount();
}

void
MagnetLinuxTcpSocket::InitPacketCount()
{
    // TcpSocketBase made a TcpRateLinux (and a new one for a fork): this one also counts
    // the items it is given as delivered.
    m_packets = CreateObject<MagnetLinuxPacketCount>();
    m_packets->SetTxBuffer(m_txBuffer);
    m_rateOps = m_packets;
    m_tcb->AggregateObject(m_packets);
}

uint32_t
MagnetLinuxTcpSocket::CwndPackets() const
{
    return m_tcb->m_cWnd.Get() / m_tcb->m_segmentSize;
}

MagnetLinuxTcpSocket::~MagnetLinuxTcpSocket() = default;

TypeId
MagnetLinuxTcpSocket::GetInstanceTypeId() const
{
    return GetTypeId();
}

Ptr<TcpSocketBase>
MagnetLinuxTcpSocket::Fork()
{
    return CopyObject<MagnetLinuxTcpSocket>(this);
}

void
MagnetLinuxTcpSocket::DoDispose()
{
    Simulator::Cancel(m_delAckTimer);
    Simulator::Cancel(m_probeTimer);
    Simulator::Cancel(m_reoTimer);
    Simulator::Cancel(m_readerEvent);
    Simulator::Cancel(m_hostEvent);
    m_hostQueue.clear();
    TcpSocketBase::DoDispose();
}

const MagnetLinuxTcpSocket::AckStats&
MagnetLinuxTcpSocket::GetAckStats() const
{
    return m_stats;
}

const MagnetLinuxTcpSocket::LossStats&
MagnetLinuxTcpSocket::GetLossStats() const
{
    return m_lossStats;
}

uint64_t
MagnetLinuxTcpSocket::GetTsoDeferrals() const
{
    return m_tsoDeferrals;
}

uint64_t
MagnetLinuxTcpSocket::GetTsoEarlyChecks() const
{
    return m_tsoEarlyChecks;
}

Time
MagnetLinuxTcpSocket::GetAto() const
{
    return FromJiffies(m_ato);
}

uint32_t
MagnetLinuxTcpSocket::GetWindowClamp() const
{
    return m_windowClamp;
}

uint32_t
MagnetLinuxTcpSocket::GetRcvSsthresh() const
{
    return m_rcvSsthresh;
}

Time
MagnetLinuxTcpSocket::GetRcvRtt() const
{
    return m_rcvRtt;
}

uint32_t
MagnetLinuxTcpSocket::GetRcvBuf() const
{
    return static_cast<uint32_t>(m_rcvBuf);
}

uint32_t
MagnetLinuxTcpSocket::GetRcvqSpace() const
{
    return m_rcvqSpace;
}

uint32_t
MagnetLinuxTcpSocket::GetSndBuf() const
{
    return static_cast<uint32_t>(m_sndBuf);
}

// ----------------------------------------------------------------- time ---
int64_t
MagnetLinuxTcpSocket::Jiffies(Time t) const
{
    return t.GetNanoSeconds() / m_tick.GetNanoSeconds();
}

Time
MagnetLinuxTcpSocket::FromJiffies(int64_t j) const
{
    return NanoSeconds(j * m_tick.GetNanoSeconds());
}

namespace
{

/** usecs_to_jiffies: a duration in whole ticks, rounded up. */
int64_t
Ticks(Time d, Time tick)
{
    return (d.GetNanoSeconds() + tick.GetNanoSeconds() - 1) / tick.GetNanoSeconds();
}

} // namespace

// ------------------------------------------------------------ receiving ---
bool
MagnetLinuxTcpSocket::Pushed(Ptr<const Packet> packet) const
{
    ByteTagIterator it = packet->GetByteTagIterator();
    while (it.HasNext())
    {
        if (it.Next().GetTypeId() == MagnetPushTag::GetTypeId())
        {
            return true;
        }
    }
    return false;
}

void
MagnetLinuxTcpSocket::ReceivedData(Ptr<Packet> packet, const TcpHeader& tcpHeader)
{
    InitBufferSpace();
    Ptr<TcpRxBuffer> rx = m_tcb->m_rxBuffer;
    SequenceNumber32 expected = rx->NextRxSequence();
    if (!m_seqInit)
    {
        m_seqInit = true;
        m_copiedSeq = m_rcvqSeq = m_oooEnd = expected;
        m_rcvqTime = Simulator::Now();
    }
    uint32_t len = packet->GetSize();
    bool pushed = Pushed(packet);
    bool inOrder = tcpHeader.GetSequenceNumber() <= expected;
    if (!rx->Add(packet, tcpHeader))
    {
        // Nothing new (a retransmission) or out of the window: tcp_data_queue's out_of_window.
        EnterQuickAckMode(m_maxQuickAcks);
        m_pending |= kSched;
        m_stats.immediate++;
        SendAck();
        return;
    }
    if (inOrder)
    {
        EventDataRecv(len, pushed, tcpHeader);
    }
    else if (m_sackEnabled && len >= 128)
    {
        // With SACK, tcp_data_queue_ofo grows the window before the segment is charged
        // to the socket (tcp_grow_window, then skb_set_owner_r): with the reader caught
        // up, rcv_ssthresh reaches the clamp, a segment above what in-order data lets it
        // reach, and the ACK per two segments then waits for the reader (__tcp_ack_snd_check:
        // the window would not advance).  Short segments are left out, as tcp_grow_window's
        // truesize check leaves them out in Linux (this model has no truesize).
        GrowWindow(len, len);
    }
    if (!inOrder)
    {
        // tcp_data_queue_ofo ends by provisioning the buffer for the out-of-order data
        // (tcp_rcvbuf_grow with the last measurement, Linux 6.16 on).
        m_oooEnd = std::max(m_oooEnd, tcpHeader.GetSequenceNumber() + len);
        RcvBufGrow(m_rcvqSpace);
    }
    // Linux decides on the ACK in its softirq, before the woken reader takes the data
    // (its window check sees the segment still queued); ns-3's reader takes it at once,
    // from within NotifyDataRecv: decide first, then let it read.
    bool hole = rx->Size() > rx->Available();
    bool filled = rx->NextRxSequence() > expected + len;
    if (hole || filled)
    {
        // Out-of-order data, or a hole filled: Linux ACKs at once (the first three of a
        // run of duplicate ACKs; later ones it compresses by up to 1 ms).
        m_pending |= kSched;
        m_stats.immediate++;
        SendAck();
    }
    else
    {
        AckSndCheck();
    }
    bool advanced = rx->NextRxSequence() > expected;
    if (advanced && !m_shutdownRecv)
    {
        WakeReader();
    }
    if (advanced && rx->Finished() && (tcpHeader.GetFlags() & TcpHeader::FIN) == 0)
    {
        DoPeerClose();
    }
}

void
MagnetLinuxTcpSocket::EventDataRecv(uint32_t len, bool pushed, const TcpHeader& header)
{
    m_pending |= kSched;
    MeasureRcvMss(len, pushed);
    RcvRttMeasure(header, len);
    const int64_t now = Jiffies(Simulator::Now());
    const int64_t atoMin = Ticks(m_atoMin, m_tick);
    const int64_t rto = Ticks(m_rto.Get(), m_tick);
    if (m_ato == 0)
    {
        // The first data: start the delayed-ACK engine in quick-ACK mode.
        IncrQuickAck(m_maxQuickAcks);
        m_ato = atoMin;
    }
    else
    {
        int64_t m = now - m_lrcvtime;
        if (m <= atoMin / 2)
        {
            m_ato = (m_ato >> 1) + atoMin / 2;
        }
        else if (m < m_ato)
        {
            m_ato = std::min((m_ato >> 1) + m, rto);
        }
        else if (m > rto)
        {
            IncrQuickAck(m_maxQuickAcks); // a long gap: ACK quickly again
        }
    }
    m_lrcvtime = now;
    if (len >= 128)
    {
        GrowWindow(len);
    }
}

void
MagnetLinuxTcpSocket::MeasureRcvMss(uint32_t len, bool pushed)
{
    uint32_t lss = m_lastSegSize;
    m_lastSegSize = 0;
    if (len >= m_rcvMss)
    {
        if (len != m_rcvMss && m_ratio != m_scalingRatio)
        {
            // The first segment of a new size tells the skb's truesize: scaling_ratio.
            m_ratio = m_scalingRatio;
            m_windowClamp = std::max(m_windowClamp, WinFromSpace(m_rcvBuf)); // tcp_set_window_clamp
            m_rcvSsthresh = std::max(m_rcvSsthresh, std::min(m_rcvWnd, m_windowClamp));
            m_rcvqSpace = std::min(m_rcvqSpace, m_windowClamp);
        }
        m_rcvMss = std::min(len, m_tcb->m_segmentSize);
        if (pushed)
        {
            m_pending |= kPushed; // a full segment ending a write: ACK once the reader drains it
        }
        return;
    }
    // A short segment.  Counted with its header as Linux does (timestamps: 12 bytes more).
    uint32_t header = kTcpHeader + (m_timestampEnabled ? 12 : 0);
    uint32_t withHeader = len + header;
    if (withHeader >= kMssDefault + kTcpHeader || (withHeader >= kMinMss + kTcpHeader && !pushed))
    {
        m_lastSegSize = len;
        if (len == lss)
        {
            m_rcvMss = len; // two alike: the peer's segments are this small
            return;
        }
    }
    if (m_pending & kPushed)
    {
        m_pending |= kPushed2;
    }
    m_pending |= kPushed;
}

void
MagnetLinuxTcpSocket::IncrQuickAck(uint32_t max)
{
    uint32_t quickacks = m_rcvWnd / (2 * std::max<uint32_t>(1, m_rcvMss));
    if (quickacks == 0)
    {
        quickacks = 2;
    }
    m_quick = std::max(m_quick, std::min(quickacks, max));
}

void
MagnetLinuxTcpSocket::EnterQuickAckMode(uint32_t max)
{
    IncrQuickAck(max);
    m_pingpong = 0;
    m_ato = Ticks(m_atoMin, m_tick);
}

bool
MagnetLinuxTcpSocket::InPingPongMode() const
{
    return m_pingpong >= kPingPongThresh;
}

bool
MagnetLinuxTcpSocket::InQuickAckMode() const
{
    return m_quickAckAlways || (m_quick && !InPingPongMode());
}

void
MagnetLinuxTcpSocket::AckSndCheck()
{
    if (!(m_pending & kSched) || m_finFollows)
    {
        return;
    }
    auto unacked = static_cast<uint32_t>(m_tcb->m_rxBuffer->NextRxSequence() - m_rcvWup);
    if ((unacked > m_rcvMss && SelectWindow() >= m_rcvWnd) || InQuickAckMode() || (m_pending & kNow))
    {
        if (InQuickAckMode())
        {
            m_stats.quick++;
        }
        SendAck();
        return;
    }
    SendDelayedAck();
}

void
MagnetLinuxTcpSocket::SendDelayedAck()
{
    int64_t ato = m_ato;
    const int64_t delackMin = Ticks(m_atoMin, m_tick);
    if (ato > delackMin)
    {
        int64_t maxAto = Ticks(MilliSeconds(500), m_tick); // HZ / 2
        if (InPingPongMode() || (m_pending & kPushed))
        {
            maxAto = Ticks(MilliSeconds(200), m_tick); // TCP_DELACK_MAX
        }
        if (m_tcb->m_srtt.Get().IsStrictlyPositive())
        {
            maxAto = std::min(maxAto, std::max(Ticks(m_tcb->m_srtt.Get(), m_tick), delackMin));
        }
        ato = std::min(ato, maxAto);
    }
    ato = std::min(ato, Ticks(m_delAckMax, m_tick));
    const int64_t now = Jiffies(Simulator::Now());
    int64_t timeout = now + ato;
    if (m_pending & kTimer)
    {
        if (m_ackTimeout <= now + (ato >> 2))
        {
            SendAck(); // the timer is about to fire anyway
            return;
        }
        timeout = std::min(timeout, m_ackTimeout);
    }
    m_pending |= kSched | kTimer;
    if (timeout != m_ackTimeout || !m_delAckTimer.IsPending())
    {
        m_ackTimeout = timeout;
        Simulator::Cancel(m_delAckTimer);
        m_delAckTimer = Simulator::Schedule(FromJiffies(timeout) - Simulator::Now(),
                                            &MagnetLinuxTcpSocket::DelAckTimer, this);
    }
}

void
MagnetLinuxTcpSocket::DelAckTimer()
{
    if (!(m_pending & kTimer))
    {
        return;
    }
    m_pending &= ~kTimer;
    if (m_pending & kSched)
    {
        if (!InPingPongMode())
        {
            m_ato = std::min(m_ato << 1, Ticks(m_rto.Get(), m_tick)); // missed: inflate ato
        }
        else
        {
            m_pingpong = 0;
            m_ato = Ticks(m_atoMin, m_tick);
        }
        m_stats.delayed++;
        SendAck();
    }
}

void
MagnetLinuxTcpSocket::SendAck()
{
    if (m_state == ESTABLISHED || m_state == FIN_WAIT_1 || m_state == FIN_WAIT_2)
    {
        m_stats.acks++;
    }
    SendEmptyPacket(TcpHeader::ACK);
}

void
MagnetLinuxTcpSocket::AckSent()
{
    // tcp_event_ack_sent: tcp_dec_quickack_mode, then the delayed ACK is no longer owed.
    if (m_quick)
    {
        uint32_t pkts = (m_pending & kSched) ? 1 : 0;
        if (pkts >= m_quick)
        {
            m_quick = 0;
            m_ato = m_ato ? Ticks(m_atoMin, m_tick) : 0;
        }
        else
        {
            m_quick -= pkts;
        }
    }
    m_pending = 0;
    Simulator::Cancel(m_delAckTimer);
}

void
MagnetLinuxTcpSocket::CleanupRbuf(uint32_t copied)
{
    if (m_finFollows)
    {
        return; // a read from within the softirq (ReaderWakeup 0): the FIN's ACK is on its way
    }
    Ptr<TcpRxBuffer> rx = m_tcb->m_rxBuffer;
    bool timeToAck = false;
    if (m_pending & kSched)
    {
        bool drained = rx->Size() == 0;
        timeToAck = static_cast<uint32_t>(rx->NextRxSequence() - m_rcvWup) > m_rcvMss ||
                    (copied > 0 &&
                     ((m_pending & kPushed2) || ((m_pending & kPushed) && !InPingPongMode())) &&
                     drained);
    }
    if (copied > 0 && !timeToAck && !rx->GotFin())
    {
        // A read that doubles the window the peer may use is worth an ACK.
        int64_t now = static_cast<int64_t>(m_rcvWup + m_rcvWnd - rx->NextRxSequence());
        uint32_t current = static_cast<uint32_t>(std::max<int64_t>(0, now));
        if (2 * static_cast<uint64_t>(current) <= m_windowClamp)
        {
            uint32_t next = SelectWindow();
            timeToAck = next && next >= 2 * static_cast<uint64_t>(current);
        }
    }
    if (timeToAck)
    {
        m_stats.onRead++;
        SendAck();
    }
}

void
MagnetLinuxTcpSocket::WakeReader()
{
    // The softirq has queued the data and decided on its ACK; the reader runs once the
    // host has woken it.  Data arriving while it is woken joins that read.
    if (m_readerWakeup.IsZero())
    {
        ReadNow();
    }
    else if (!m_readerEvent.IsPending())
    {
        m_readerEvent = Simulator::Schedule(m_readerWakeup, &MagnetLinuxTcpSocket::ReadNow, this);
    }
}

void
MagnetLinuxTcpSocket::ReadNow()
{
    // The woken reader reads everything readable (tcp_recvmsg), then tcp_cleanup_rbuf
    // decides on an ACK once for what it copied.  Nothing left (the close handler read it):
    // no read.
    if (m_shutdownRecv || (!m_readerWakeup.IsZero() && m_tcb->m_rxBuffer->Available() == 0))
    {
        return;
    }
    m_inReceive = true;
    m_readInReceive = 0;
    NotifyDataRecv();
    m_inReceive = false;
    if (m_readInReceive)
    {
        CleanupRbuf(m_readInReceive);
    }
}

Ptr<Packet>
MagnetLinuxTcpSocket::Recv(uint32_t maxSize, uint32_t flags)
{
    Ptr<Packet> out = TcpSocketBase::Recv(maxSize, flags);
    uint32_t copied = out ? out->GetSize() : 0;
    if (copied && m_seqInit)
    {
        m_copiedSeq += copied;
        RcvSpaceAdjust();
        if (m_inReceive)
        {
            m_readInReceive += copied;
        }
        else
        {
            CleanupRbuf(copied);
        }
    }
    return out;
}

// --------------------------------------------------- the receive window ---
uint32_t
MagnetLinuxTcpSocket::WinFromSpace(uint64_t space) const
{
    return static_cast<uint32_t>(std::min<uint64_t>(UINT32_MAX, static_cast<uint64_t>(space * m_ratio)));
}

uint64_t
MagnetLinuxTcpSocket::SpaceFromWin(uint64_t win) const
{
    return static_cast<uint64_t>(static_cast<double>(win) / m_ratio);
}

void
MagnetLinuxTcpSocket::InitBufferSpace()
{
    if (m_bufferInit)
    {
        return;
    }
    m_bufferInit = true;
    // TcpSocketBase would refuse data beyond its buffer: make it as large as
    // Linux's could grow (and the window scale Linux's, from tcp_rmem[2]); the
    // window advertised is this model's.
    m_tcb->m_rxBuffer->SetMaxBufferSize(std::max(m_rmemMax, 2 * m_soRcvBuf));
    m_rcvBuf = m_soRcvBuf ? 2 * static_cast<uint64_t>(m_soRcvBuf) : m_rmemDefault;
    m_ratio = 0.5; // TCP_DEFAULT_SCALING_RATIO, until a full segment has been seen
    const uint32_t mss = m_tcb->m_segmentSize;
    const uint32_t full = WinFromSpace(m_rcvBuf);
    m_rcvWnd = full > mss ? full - full % mss : full; // tcp_select_initial_window
    m_windowClamp = full;                             // tcp_init_buffer_space ...
    if (m_windowClamp > 2 * mss && m_windowClamp + mss > full)
    {
        m_windowClamp = std::max(2 * mss, full - mss); // ... reserving one segment
    }
    m_rcvSsthresh = std::min(m_rcvWnd, m_windowClamp);
    m_rcvqSpace = std::min({m_rcvSsthresh, m_rcvWnd, kInitCwnd * mss});
    m_rcvMss = std::max(kMinMss, std::min({mss, m_rcvWnd / 2, kMssDefault})); // tcp_initialize_rcv_mss
}

uint32_t
MagnetLinuxTcpSocket::FreeSpace(uint32_t uncharged) const
{
    // tcp_space: the memory left, as window; queued data costs its truesize, but for
    // `uncharged` bytes of it (a segment queued but not yet charged).
    uint64_t used = SpaceFromWin(m_tcb->m_rxBuffer->Size() - std::min(uncharged, m_tcb->m_rxBuffer->Size()));
    return m_rcvBuf > used ? WinFromSpace(m_rcvBuf - used) : 0;
}

uint32_t
MagnetLinuxTcpSocket::SelectWindow() const
{
    // __tcp_select_window
    uint32_t mss = m_rcvMss;
    uint32_t freeSpace = FreeSpace();
    uint32_t allowed = WinFromSpace(m_rcvBuf);
    uint32_t full = std::min(m_windowClamp, allowed);
    if (mss > full)
    {
        mss = full;
        if (mss == 0)
        {
            return 0;
        }
    }
    const uint32_t unit = 1u << m_rcvWindShift;
    if (freeSpace < full / 2)
    {
        const_cast<MagnetLinuxTcpSocket*>(this)->m_quick = 0;
        freeSpace -= freeSpace % unit;
        if (freeSpace < allowed / 16 || freeSpace < mss)
        {
            return 0;
        }
    }
    freeSpace = std::min(freeSpace, m_rcvSsthresh);
    if (m_rcvWindShift)
    {
        return (freeSpace + unit - 1) / unit * unit;
    }
    uint32_t window = m_rcvWnd;
    if (window + mss <= freeSpace || window > freeSpace)
    {
        window = freeSpace - freeSpace % mss;
    }
    else if (mss == full && freeSpace > window + full / 2)
    {
        window = freeSpace;
    }
    return window;
}

uint16_t
MagnetLinuxTcpSocket::AdvertisedWindowSize(bool scale) const
{
    auto self = const_cast<MagnetLinuxTcpSocket*>(this);
    self->InitBufferSpace();
    if (!scale)
    {
        return static_cast<uint16_t>(std::min<uint32_t>(m_rcvWnd, m_maxWinSize)); // SYN: unscaled
    }
    Ptr<TcpRxBuffer> rx = m_tcb->m_rxBuffer;
    SequenceNumber32 next = rx->NextRxSequence();
    uint32_t window;
    if (rx->GotFin())
    {
        window = m_rcvWnd; // nothing more will come: keep what was offered
    }
    else
    {
        // tcp_select_window: never shrink the offered right edge.
        int64_t offered = static_cast<int64_t>(m_rcvWup + m_rcvWnd - next);
        uint32_t current = static_cast<uint32_t>(std::max<int64_t>(0, offered));
        window = SelectWindow();
        if (window < current)
        {
            const uint32_t unit = 1u << m_rcvWindShift;
            window = (current + unit - 1) / unit * unit;
        }
    }
    self->m_rcvWnd = window;
    self->m_rcvWup = next;
    self->m_advWnd = window;
    return static_cast<uint16_t>(std::min<uint32_t>(window >> m_rcvWindShift, m_maxWinSize));
}

void
MagnetLinuxTcpSocket::GrowWindow(uint32_t len, uint32_t uncharged)
{
    // tcp_grow_window: a full-sized segment of a well-sized skb raises rcv_ssthresh by
    // two segments, up to the clamp and the memory left, and asks for a quick ACK.
    int64_t room = static_cast<int64_t>(std::min(m_windowClamp, FreeSpace(uncharged))) - m_rcvSsthresh;
    if (room <= 0)
    {
        return;
    }
    uint32_t incr = std::max(2 * m_tcb->m_segmentSize, 2 * len);
    m_rcvSsthresh += static_cast<uint32_t>(std::min<int64_t>(room, incr));
    m_quick |= 1;
}

void
MagnetLinuxTcpSocket::RcvSpaceAdjust()
{
    // tcp_rcv_space_adjust: once a receiver's RTT, what the application read in it (less
    // what is still queued) grows the buffer if it is more than last time.
    Time now = Simulator::Now();
    if (m_rcvRtt.IsZero() || now - m_rcvqTime < m_rcvRtt)
    {
        return;
    }
    int64_t inq = m_tcb->m_rxBuffer->NextRxSequence() - m_copiedSeq;
    int64_t copied = static_cast<int64_t>(m_copiedSeq - m_rcvqSeq) - inq;
    if (copied > static_cast<int64_t>(m_rcvqSpace))
    {
        RcvBufGrow(static_cast<uint32_t>(copied));
    }
    m_rcvqSeq = m_copiedSeq;
    m_rcvqTime = now;
}

void
MagnetLinuxTcpSocket::RcvBufGrow(uint32_t newval)
{
    // tcp_rcvbuf_grow (Linux 6.18): a window of twice what was read in the last RTT (DRS
    // is always one RTT late), plus twice its growth over the RTT before (slow start),
    // plus the span of the out-of-order queue; the buffer that holds it, up to tcp_rmem[2].
    // (Linux before 6.16 added 16 segments to the window before its growth was scaled.)
    const uint32_t oldval = std::max<uint32_t>(1, m_rcvqSpace);
    m_rcvqSpace = newval;
    if (m_soRcvBuf)
    {
        return; // SOCK_RCVBUF_LOCK
    }
    uint64_t rcvwin = 2 * static_cast<uint64_t>(newval);
    uint64_t grow = newval > oldval ? rcvwin * (newval - oldval) / oldval : 0;
    rcvwin += grow << 1;
    Ptr<TcpRxBuffer> rx = m_tcb->m_rxBuffer;
    if (rx->Size() > rx->Available() && m_oooEnd > rx->NextRxSequence())
    {
        rcvwin += m_oooEnd - rx->NextRxSequence();
    }
    uint64_t rcvbuf = std::min<uint64_t>(SpaceFromWin(rcvwin), m_rmemMax);
    if (rcvbuf > m_rcvBuf)
    {
        m_rcvBuf = rcvbuf;
        m_windowClamp = WinFromSpace(rcvbuf);
    }
}

void
MagnetLinuxTcpSocket::RcvRttMeasure(const TcpHeader& header, uint32_t len)
{
    // The receiver's RTT (rcv_rtt_est), which paces autotuning: from the timestamp
    // the peer echoes (tcp_rcv_rtt_measure_ts), else once per window of data
    // (tcp_rcv_rtt_measure, which only lowers it).  Only tcp_rcv_established takes the
    // timestamp's sample: a receiver that has sent its FIN (FIN_WAIT_1, FIN_WAIT_2: data
    // goes through tcp_rcv_state_process to tcp_data_queue) has the window's alone.
    auto update = [this](Time sample, bool windowed) {
        if (m_rcvRtt.IsZero() || sample < m_rcvRtt)
        {
            m_rcvRtt = sample;
        }
        else if (!windowed)
        {
            m_rcvRtt = m_rcvRtt - m_rcvRtt / 8 + sample / 8;
        }
    };
    Time now = Simulator::Now();
    SequenceNumber32 next = m_tcb->m_rxBuffer->NextRxSequence();
    if (m_rcvRttTime.IsZero() || next >= m_rcvRttSeq)
    {
        if (!m_rcvRttTime.IsZero())
        {
            update(std::max(now - m_rcvRttTime, MicroSeconds(1)), true);
        }
        m_rcvRttSeq = next + m_rcvWnd;
        m_rcvRttTime = now;
    }
    if (m_timestampEnabled && m_state == ESTABLISHED && header.HasOption(TcpOption::TS))
    {
        auto ts = DynamicCast<const TcpOptionTS>(header.GetOption(TcpOption::TS));
        uint32_t ecr = ts->GetEcho();
        if (ecr && ecr != m_lastTsEcr && len >= m_rcvMss)
        {
            m_lastTsEcr = ecr;
            update(std::max(TcpOptionTS::ElapsedTimeFromTsValue(ecr), MilliSeconds(1)), false);
        }
    }
}

// -------------------------------------------------------------- sending ---
int
MagnetLinuxTcpSocket::Send(Ptr<Packet> p, uint32_t flags)
{
    SlowStartAfterIdleCheck();
    if (m_state == ESTABLISHED || m_state == CLOSE_WAIT)
    {
        // tcp_sendmsg asks whether sending is application-limited before it queues the
        // write (tcp_rate_check_app_limited); TcpSocketBase asks after, when the write
        // itself makes it look unlimited, and BBR then takes an idle flow's delivery rate
        // for the path's and paces its next writes out slowly.
        m_rateOps->CalculateAppLimited(m_tcb->m_cWnd, m_tcb->m_bytesInFlight, m_tcb->m_segmentSize,
                                       m_txBuffer->TailSequence(), m_tcb->m_nextTxSequence,
                                       m_txBuffer->GetLost(), m_txBuffer->GetRetransmitsCount());
    }
    uint32_t buffered = m_txBuffer->Size();
    const bool scheduled = m_sendPendingDataEvent.IsPending();
    // TcpSocketBase::Send queues the write and asks AvailableWindow whether to schedule a send,
    // before MarkWrite below counts the write: tcp_tso_should_defer must not decide then (it saw
    // the send head the write's size too low, could move the next skb's start there and counted
    // a deferral for an skb that does not exist).  Linux queues the write's skbs
    // (tcp_sendmsg_locked), then tcp_push runs tcp_write_xmit once: SendOnWrite below.
    m_inWrite = true;
    int sent = TcpSocketBase::Send(p, flags);
    m_inWrite = false;
    if (!scheduled && m_sendPendingDataEvent.IsPending())
    {
        // The write's push (tcp_push: tcp_write_xmit), in place of TcpSocketBase's SendPendingData
        // (still 1 ns later, so that the application may write more first).
        m_sendPendingDataEvent.Cancel();
        m_sendPendingDataEvent = Simulator::Schedule(TimeStep(1), &MagnetLinuxTcpSocket::SendOnWrite, this);
    }
    if (m_txBuffer->Size() > buffered)
    {
        // The PSH marks as offsets in the stream (MarkWrite), a segment tagged as it leaves
        // (MarkPushed).  Not byte tags on the writes: ns-3's TcpTxBuffer cuts segments from
        // the head of its data and keeps the tags of what it cut, so every segment would
        // carry the tag of each write since a segment last ended on a write's end (about
        // 1,400 with writes of 1..2895 bytes), copied and walked per segment.
        const uint64_t from = m_written;
        m_written += m_txBuffer->Size() - buffered;
        MarkWrite(from);
        if (!m_pushTraced)
        {
            m_pushTraced = TraceConnectWithoutContext("Tx", MakeCallback(&MagnetLinuxTcpSocket::MarkPushed, this));
        }
    }
    return sent;
}

void
MagnetLinuxTcpSocket::SendOnWrite()
{
    // tcp_push after a write sends new data only (tcp_write_xmit walks the write queue from
    // sk_send_head); lost segments are resent on ACKs and timers (tcp_xmit_retransmit_queue from
    // tcp_xmit_recovery, tcp_retransmit_timer, tcp_rack_reo_timeout).  TcpSocketBase's
    // SendPendingData takes NextSeg's lost segments first: with one not yet resent and room in
    // the window (after F-RTO's new data on an ACK, or between ACKs) a write resent it.
    if (m_tcb->m_congState.Get() >= TcpSocketState::CA_RECOVERY && LostUnsent())
    {
        SendNewData();
        return;
    }
    SendPendingData(m_connected);
}

bool
MagnetLinuxTcpSocket::LostUnsent() const
{
    for (const TcpTxItem* item : MagnetTxScoreboard::Sent(*m_txBuffer))
    {
        if (MagnetTxScoreboard::IsLost(*item) && !item->IsRetrans() && !item->IsSacked())
        {
            return true;
        }
    }
    return false;
}

void
MagnetLinuxTcpSocket::MarkWrite(uint64_t from)
{
    // tcp_sendmsg_locked copies a write (now m_written - from bytes) into the write queue's
    // last skb while that is unsent and shorter than size_goal, then into new skbs of
    // size_goal.  tcp_mark_push sets PSH on an skb and pushed_seq to write_seq.
    m_maxWindow = std::max(m_maxWindow, m_rWnd.Get());
    const uint64_t goal = SizeGoal();
    const SequenceNumber32 tail = m_txBuffer->TailSequence();
    const SequenceNumber32 nxt = m_tcb->m_highTxMark.Get();
    const uint64_t unsent = tail > nxt ? static_cast<uint32_t>(tail - nxt) : 0;
    const uint64_t sentEnd = m_written - std::min(unsent, m_written);
    uint64_t skb = from; // the write starts a new skb...
    bool appended = false;
    if (sentEnd < from)
    {
        // ... unless data before it is unsent: the queue's last skb (after a split, its
        // unsent part: tso_fragment), filled up to size_goal.  Its first copy clears the
        // PSH tcp_push gave it ("if (!copied) ... &= ~TCPHDR_PSH").
        const uint64_t last = std::max(m_tailSkb, sentEnd);
        if (from - last < goal)
        {
            skb = last;
            appended = true;
            if (!m_writeEnds.empty() && m_writeEnds.back() == from)
            {
                m_writeEnds.pop_back();
            }
        }
    }
    while (!m_skbStarts.empty() && m_skbStarts.front() <= sentEnd)
    {
        m_skbStarts.pop_front(); // sent: the send head starts at sentEnd
    }
    if (!appended && skb > sentEnd)
    {
        m_skbStarts.push_back(skb); // where the send head's skb will end (TsoShouldDefer)
    }
    while (m_written - skb > goal)
    {
        // An skb full with more to copy: forced_push marks it once write_seq is more than
        // half the peer's largest window past pushed_seq.
        skb += goal;
        m_skbStarts.push_back(skb);
        if (skb - m_pushedSeq > m_maxWindow / 2)
        {
            m_writeEnds.push_back(skb);
            m_pushedSeq = skb;
        }
    }
    m_tailSkb = skb;
    m_writeEnds.push_back(m_written); // the write's tcp_push marks the last skb
    m_pushedSeq = m_written;
}

uint32_t
MagnetLinuxTcpSocket::SizeGoal() const
{
    // tcp_xmit_size_goal: sk_gso_max_size, at most half the peer's largest window
    // (tcp_bound_to_half_wnd), in whole segments.
    const uint32_t mss = m_tcb->m_segmentSize;
    uint32_t goal = kGsoMaxSize;
    if (m_maxWindow)
    {
        goal = std::min(goal, m_maxWindow > kMssDefault ? m_maxWindow / 2 : m_maxWindow);
    }
    return std::max(goal / mss * mss, mss);
}

uint32_t
MagnetLinuxTcpSocket::TsoSegs() const
{
    // tcp_tso_autosize: what sk_pacing_rate sends in 2^-10 s (sk_pacing_shift), plus
    // sk_gso_max_size >> (min_rtt_us >> tcp_tso_rtt_log = 9) on paths under 16 ms, at most
    // sk_gso_max_size, in segments, at least tcp_min_tso_segs.  The pacing rate
    // (tcp_update_pacing_rate): mss x max(cwnd, in flight) / srtt, x2 while cwnd is under
    // ssthresh / 2 (tcp_pacing_ss_ratio), else x1.2 (tcp_pacing_ca_ratio); no srtt, no bound.
    const uint64_t mss = m_tcb->m_segmentSize;
    uint64_t bytes = kGsoMaxSize;
    const int64_t srttUs = m_tcb->m_srtt.Get().GetMicroSeconds();
    if (srttUs > 0)
    {
        const uint64_t packets = std::max(CwndPackets(), m_packets->InFlight());
        const uint64_t ratio = m_tcb->m_cWnd.Get() < m_tcb->m_ssThresh.Get() / 2 ? 200 : 120;
        bytes = (mss * ratio * packets * 10000 / static_cast<uint64_t>(srttUs)) >> 10;
    }
    if (m_minRtt != Time::Max())
    {
        const uint64_t r = static_cast<uint64_t>(m_minRtt.GetMicroSeconds()) >> 9;
        if (r < 32)
        {
            bytes += kGsoMaxSize >> r;
        }
    }
    bytes = std::min<uint64_t>(bytes, kGsoMaxSize);
    return std::max(static_cast<uint32_t>(bytes / mss), kMinTsoSegs);
}

void
MagnetLinuxTcpSocket::GsoStep(SequenceNumber32 seq)
{
    const Time now = Simulator::Now();
    if (m_gsoLeft == 0 || seq != m_gsoNext || now != m_gsoTime)
    {
        // tcp_write_xmit's next skb: cwnd's room (tcp_cwnd_test: at most half cwnd, "at least
        // 2 GSO packets in flight"), at most tcp_tso_segs segments (tcp_grow_skb takes the
        // next skb's data into a shorter one), cut at the peer's window and at what is queued
        // (tcp_mss_split_point: a short last segment only if Nagle lets it go).
        const uint32_t mss = m_tcb->m_segmentSize;
        const uint32_t inFlight = m_packets->InFlight();
        const uint32_t cwnd = CwndPackets();
        const uint32_t room = cwnd > inFlight ? std::min(std::max(cwnd / 2, 1U), cwnd - inFlight)
                                              : 1; // a probe: one (push_one 2)
        const uint32_t out = seq - m_txBuffer->HeadSequence();
        const uint32_t window = m_rWnd.Get() > out ? m_rWnd.Get() - out : 0;
        const uint32_t bytes = std::min(m_txBuffer->SizeFromSequence(seq), window);
        const uint32_t segs = bytes / mss + (bytes % mss && m_noDelay ? 1 : 0);
        m_gsoSegs = std::max(1U, std::min({TsoSegs(), room, segs}));
        m_gsoLeft = m_gsoSegs;
        m_gsoTime = now;
    }
    m_gsoPsh = m_gsoSegs < 2 ? 0 : (m_gsoLeft == 1 ? 2 : 1);
}

bool
MagnetLinuxTcpSocket::TsoShouldDefer() const
{
    // tcp_write_xmit, before each skb at the send head: tcp_cwnd_test's quota, tcp_grow_skb,
    // tcp_set_skb_tso_segs, and for more than one segment tcp_tso_should_defer (push_one 0: not a
    // loss probe's).  Resends (tcp_xmit_retransmit_queue) never wait.
    if (m_inWrite)
    {
        m_tsoEarlyChecks++; // never: the write not yet in the skb bookkeeping (Send)
    }
    if (!m_tsoDefer || m_sendingProbe || m_txBuffer->GetLost() > 0 ||
        m_tcb->m_congState.Get() >= TcpSocketState::CA_RECOVERY)
    {
        return false; // "if (icsk->icsk_ca_state >= TCP_CA_Recovery) goto send_now"
    }
    const SequenceNumber32 nxt = m_tcb->m_highTxMark.Get();
    const Time now = Simulator::Now();
    if (m_gsoLeft > 0 && nxt == m_gsoNext && now == m_gsoTime)
    {
        return false; // a segment of the skb being sent (GsoStep)
    }
    const uint32_t unsent = m_txBuffer->SizeFromSequence(nxt);
    const uint32_t inFlight = m_packets->InFlight();
    const uint32_t cwnd = CwndPackets();
    if (!unsent || inFlight >= cwnd)
    {
        return false;
    }
    const uint64_t mss = m_tcb->m_segmentSize;
    const uint32_t maxSegs = TsoSegs();
    const uint32_t quota = std::min({std::max(cwnd / 2, 1U), cwnd - inFlight, maxSegs});
    // The send head's skb: from nxt to where the write queue's next skb starts (MarkWrite);
    // tcp_grow_skb moves up to the quota's missing bytes from the next skb into it.
    const uint64_t head = m_written - static_cast<uint32_t>(m_txBuffer->TailSequence() - nxt);
    while (!m_skbStarts.empty() && m_skbStarts.front() <= head)
    {
        m_skbStarts.pop_front();
    }
    uint64_t end = m_skbStarts.empty() ? m_written : m_skbStarts.front();
    if (end - head < quota * mss && !m_skbStarts.empty())
    {
        const uint64_t nextEnd = m_skbStarts.size() > 1 ? m_skbStarts[1] : m_written;
        end = std::min(head + quota * mss, nextEnd);
        if (end == nextEnd)
        {
            m_skbStarts.pop_front(); // the next skb eaten whole (tcp_eat_one_skb)
            if (m_skbStarts.empty())
            {
                m_tailSkb = head; // ... it was the last: the send head's skb is now
            }
        }
        else
        {
            m_skbStarts.front() = end;
        }
    }
    const uint64_t len = end - head;
    const bool last = m_skbStarts.empty();
    if (len <= mss)
    {
        return false; // one segment: tcp_nagle_test decides, not this
    }
    const SequenceNumber32 una = m_txBuffer->HeadSequence();
    const auto out = static_cast<uint32_t>(nxt - una);
    const uint64_t sendWin = m_rWnd.Get() > out ? m_rWnd.Get() - out : 0;
    if (sendWin < mss)
    {
        return false; // tcp_snd_wnd_test fails: nothing goes whatever this says
    }
    // "Avoid bursty behavior by allowing defer only if the last write was recent (1 ms)."
    if (m_wstamp == Time::Min() || now - m_wstamp > MilliSeconds(1))
    {
        return false;
    }
    const uint64_t congWin = (cwnd - inFlight) * mss;
    const uint64_t limit = std::min(sendWin, congWin);
    if (limit >= maxSegs * mss)
    {
        return false; // a full-sized skb can go
    }
    if (!last && limit >= len)
    {
        return false; // the middle of the queue gets no more data: all of it can go
    }
    // tcp_tso_win_divisor (3): at least a third of the window is free
    const uint64_t chunk = std::min<uint64_t>(m_rWnd.Get(), cwnd * mss) / 3;
    if (limit >= chunk)
    {
        return false;
    }
    // The retransmission queue's head: its ACK expected at its send + srtt; if that is more
    // than min(srtt / 2, 1 ms) away, do not wait (6.18, "tcp: fix tcp_tso_should_defer() vs
    // large RTT").
    const auto& sent = MagnetTxScoreboard::Sent(*m_txBuffer);
    if (sent.empty())
    {
        return false;
    }
    const Time srtt = m_tcb->m_srtt.Get();
    const Time threshold = std::min(srtt / 2, MilliSeconds(1));
    if (sent.front()->GetLastSent() + srtt - now > threshold)
    {
        return false;
    }
    bool wait = true;
    if (congWin < sendWin)
    {
        if (congWin <= len)
        {
            // cwnd-limited: tcp_write_xmit tells tcp_cwnd_validate so
            m_packets->CwndValidate(true, nxt);
            m_tcb->m_isCwndLimited = true;
        }
        else
        {
            wait = !(last && m_closeOnEmpty); // application-limited: more data may come, not after the FIN
        }
    }
    else if (sendWin > len)
    {
        wait = !(last && m_closeOnEmpty);
    }
    if (wait)
    {
        m_tsoDeferrals++;
    }
    return wait;
}

void
MagnetLinuxTcpSocket::MarkPushed(Ptr<const Packet> packet, const TcpHeader& header, Ptr<const TcpSocketBase>)
{
    uint32_t len = packet->GetSize();
    if (len == 0)
    {
        return;
    }
    // Stream offsets: the buffer's tail is at m_written.
    uint64_t end = m_written - static_cast<uint32_t>(m_txBuffer->TailSequence() - header.GetSequenceNumber()) + len;
    uint64_t acked = m_written - m_txBuffer->Size();
    while (!m_writeEnds.empty() && m_writeEnds.front() <= acked)
    {
        m_writeEnds.pop_front(); // acknowledged: never sent again
    }
    bool push = m_gsoPsh == 2; // __tcp_transmit_skb: PSH on a GSO skb, tcp_gso_segment: on its last segment
    if (m_gsoPsh == 0)
    {
        // Alone in its skb: PSH if tcp_mark_push marked the skb it ends (tso_fragment leaves
        // the mark on the second part).
        auto next = std::upper_bound(m_writeEnds.begin(), m_writeEnds.end(), end - len);
        push = next != m_writeEnds.end() && *next <= end;
    }
    if (push)
    {
        packet->AddByteTag(MagnetPushTag()); // the segment's own tag list: nothing else holds it
    }
}

uint32_t
MagnetLinuxTcpSocket::GetTxAvailable() const
{
    if (m_connected && !m_sndBufInit)
    {
        // Linux sizes the send buffer as the connection is established (tcp_init_buffer_space):
        // twice ten segments' memory, 46080 bytes for a 1448-byte MSS.
        const_cast<MagnetLinuxTcpSocket*>(this)->SndBufExpand();
    }
    return TcpSocketBase::GetTxAvailable();
}

void
MagnetLinuxTcpSocket::SetTcpNoDelay(bool noDelay)
{
    m_userNoDelay = noDelay;
    TcpSocketBase::SetTcpNoDelay(noDelay);
}

bool
MagnetLinuxTcpSocket::GetTcpNoDelay() const
{
    return m_userNoDelay;
}

int
MagnetLinuxTcpSocket::Close()
{
    return PushFin([this]() { return TcpSocketBase::Close(); });
}

int
MagnetLinuxTcpSocket::ShutdownSend()
{
    // tcp_shutdown -> tcp_send_fin: with every byte written already sent (the write queue
    // empty, the retransmission queue not), the FIN is an skb of its own, pushed at once
    // (__tcp_push_pending_frames, TCP_NAGLE_OFF; tcp_cwnd_test lets a FIN go whatever cwnd).
    // TcpSocketBase::ShutdownSend sends it only on an empty buffer, else with the last data
    // segment it sends: with every byte sent and some of it unACKed, only if that segment is
    // resent, else never (its Close() sends it, DoClose).  So: the FIN now, after the last
    // byte sent, and the state Close() would give.
    const bool allSent = !m_shutdownSend && m_txBuffer->Size() > 0 &&
                         m_txBuffer->SizeFromSequence(m_tcb->m_highTxMark) == 0 &&
                         (m_state == ESTABLISHED || m_state == CLOSE_WAIT);
    const int r = PushFin([this]() { return TcpSocketBase::ShutdownSend(); });
    if (allSent && (m_state == ESTABLISHED || m_state == CLOSE_WAIT) && (m_endPoint || m_endPoint6))
    {
        // SendEmptyPacket numbers a FIN with m_nextTxSequence, which a resend may have left
        // short of the last byte sent.
        const SequenceNumber32 next = m_tcb->m_nextTxSequence;
        m_tcb->m_nextTxSequence = m_tcb->m_highTxMark.Get();
        SendEmptyPacket(TcpHeader::FIN);
        m_tcb->m_nextTxSequence = next;
        m_state = m_state == ESTABLISHED ? FIN_WAIT_1 : LAST_ACK;
    }
    return r;
}

int
MagnetLinuxTcpSocket::PushFin(const std::function<int()>& close)
{
    // tcp_send_fin (from tcp_close and tcp_shutdown): the FIN goes on the last unsent
    // segment and __tcp_push_pending_frames(sk, mss, TCP_NAGLE_OFF) sends at once what
    // the windows allow.  TcpSocketBase, with data unsent, only set m_closeOnEmpty and
    // waited for an ACK to send more, Nagle holding the short tail until then.  Once per
    // close, as tcp_close_state moves the state once: an application closing again from the
    // send callback this push raises (NotifySend) pushes nothing more.
    bool closing = m_closeOnEmpty;
    int r = close();
    if (!closing && m_closeOnEmpty && (m_state == ESTABLISHED || m_state == CLOSE_WAIT) &&
        m_txBuffer->SizeFromSequence(m_tcb->m_nextTxSequence) > 0)
    {
        SendPendingData(m_connected);
    }
    return r;
}

void
MagnetLinuxTcpSocket::UpdateNagle() const
{
    // Minshall's Nagle (tcp_nagle_check, tcp_minshall_check): TcpSocketBase holds a
    // short segment while anything is unacknowledged unless m_noDelay; Linux only
    // while an earlier short segment is.
    bool shortOut = m_sentShort && m_sndSml > m_txBuffer->HeadSequence() &&
                    m_sndSml <= m_tcb->m_highTxMark.Get();
    // Nagle is for new data: Linux retransmits (after an RTO, in recovery) whatever the size.
    bool retransmitting = m_txBuffer->GetLost() > 0 || m_tcb->m_congState == TcpSocketState::CA_LOSS ||
                          m_tcb->m_congState == TcpSocketState::CA_RECOVERY;
    // Closing: the short segment TcpSocketBase would hold is the last, the one with the FIN,
    // which tcp_nagle_test never holds ("Don't use the nagle rule ... for the final FIN").
    const_cast<MagnetLinuxTcpSocket*>(this)->m_noDelay =
        m_userNoDelay || !shortOut || retransmitting || m_closeOnEmpty;
}

uint32_t
MagnetLinuxTcpSocket::AvailableWindow() const
{
    UpdateNagle(); // SendPendingData asks for the window before each segment
    if (OnlyUnlostLeft() || m_frtoHold)
    {
        // m_frtoHold: tcp_xmit_recovery sent F-RTO's new data and returned, no resend on this ACK.
        return 0;
    }
    // tcp_cwnd_test: cwnd counts packets, a short segment takes one as a full one does.
    // TcpSocketBase's byte test stays for the peer's window (and, as a segment is at most
    // an MSS, its cwnd part is never the tighter).
    const uint32_t inFlight = m_packets->InFlight();
    const uint32_t cwnd = CwndPackets();
    const uint32_t quota = cwnd > inFlight ? (cwnd - inFlight) * m_tcb->m_segmentSize : 0;
    if (quota && !m_inWrite && TsoShouldDefer())
    {
        return 0; // tcp_write_xmit breaks before this skb: the next ACK (or write) sends it
    }
    if (!quota && m_txBuffer->SizeFromSequence(m_tcb->m_highTxMark) > 0)
    {
        // tcp_write_xmit (asked for the window as it starts) with new data queued and the
        // window full sends nothing, and is cwnd-limited (tcp_cwnd_validate).
        m_packets->CwndValidate(true, m_tcb->m_highTxMark);
        m_tcb->m_isCwndLimited = true;
    }
    if (m_packets->GetLossSacked() > 0)
    {
        // Duplicate ACKs counted in Loss without SACK (ProcessLoss) leave the packets in flight
        // but no segment's mark, and TcpTxBuffer's pipe: its cwnd part would be the tighter.
        const uint32_t pipe = BytesInFlight();
        return std::min(quota, m_rWnd.Get() > pipe ? m_rWnd.Get() - pipe : 0);
    }
    return std::min(quota, TcpSocketBase::AvailableWindow());
}

uint32_t
MagnetLinuxTcpSocket::SendDataPacket(SequenceNumber32 seq, uint32_t maxSize, bool withAck)
{
    bool fresh = seq >= m_tcb->m_highTxMark.Get();
    m_gsoPsh = 0;
    if (fresh)
    {
        GsoStep(seq);
    }
    m_packets->BeforeSend(seq);
    uint32_t sz = TcpSocketBase::SendDataPacket(seq, maxSize, withAck);
    m_packets->AfterSend();
    if (fresh && sz && m_gsoLeft)
    {
        m_gsoLeft--;
        m_gsoNext = seq + sz;
    }
    if (fresh && sz)
    {
        // tcp_write_xmit: is_cwnd_limited when the packets in flight fill cwnd, for
        // tcp_cwnd_validate (once per call there: validated after each new segment, the
        // call's last decides the same; TcpSocketBase compares bytes, per segment).
        m_packets->CwndValidate(m_packets->InFlight() >= CwndPackets(), m_tcb->m_highTxMark);
    }
    m_tcb->m_isCwndLimited = m_packets->CwndLimitedFlag();
    if (fresh && sz < m_tcb->m_segmentSize)
    {
        m_sndSml = seq + sz; // tcp_minshall_update
        m_sentShort = true;
    }
    if (fresh && sz)
    {
        m_lastSeq = seq;
        m_lastLen = sz;
    }
    if (!fresh && sz && !m_sendingProbe && seq == m_txBuffer->HeadSequence() && !m_reoTimer.IsPending())
    {
        // tcp_xmit_retransmit_queue: resending the head restarts the RTO from now (rearm_timer,
        // tcp_reset_xmit_timer with icsk_rto), unless RACK's reordering timer holds the place.
        // TcpSocketBase arms it only when none is pending.
        Simulator::Cancel(m_probeTimer);
        m_retxEvent.Cancel();
        m_retxEvent = Simulator::Schedule(m_rto, &MagnetLinuxTcpSocket::ReTxTimeout, this);
    }
    if (!fresh && sz)
    {
        auto [it, added] = m_retransmitted.emplace(seq, seq + sz);
        it->second = std::max(it->second, seq + sz);
        if (m_retransStamp == Time::Max() && !m_sendingProbe)
        {
            // tcp_retransmit_skb: "Save stamp of the first (attempted) retransmit" (a loss
            // probe's resend, __tcp_retransmit_skb, does not).
            m_retransStamp = Simulator::Now();
        }
    }
    if (sz)
    {
        m_wstamp = Simulator::Now(); // __tcp_transmit_skb: tcp_wstamp_ns (no pacing: the clock)
        // tcp_event_data_sent: answering within ato of receiving counts towards ping-pong.
        if (m_ato && Jiffies(Simulator::Now()) - m_lrcvtime < m_ato && m_pingpong < 255)
        {
            m_pingpong++;
        }
        m_lsndtime = Simulator::Now();
        m_sentData = true;
    }
    if (withAck)
    {
        AckSent();
    }
    if (fresh && sz && !m_sendingProbe)
    {
        ScheduleLossProbe();
    }
    return sz;
}

void
MagnetLinuxTcpSocket::SendEmptyPacket(uint8_t flags)
{
    const bool armedBefore = m_retxEvent.IsPending();
    const Time rtoBefore = m_rto.Get();
    // A pure ACK from a side whose FIN is out (FIN_WAIT_1, CLOSING, LAST_ACK) carries snd_nxt,
    // past the FIN (tcp_send_ack: tcp_acceptable_seq): TcpSocketBase numbers it
    // m_nextTxSequence + 1, short of that while a resend has moved m_nextTxSequence back.
    const bool finOut = (m_state == FIN_WAIT_1 || m_state == CLOSING || m_state == LAST_ACK) &&
                        !(flags & (TcpHeader::SYN | TcpHeader::FIN));
    const SequenceNumber32 next = m_tcb->m_nextTxSequence;
    if (finOut && next < m_tcb->m_highTxMark.Get())
    {
        m_tcb->m_nextTxSequence = m_tcb->m_highTxMark.Get();
    }
    TcpSocketBase::SendEmptyPacket(flags);
    m_wstamp = Simulator::Now(); // __tcp_transmit_skb: tcp_wstamp_ns, pure ACKs too
    if (finOut)
    {
        m_tcb->m_nextTxSequence = next;
    }
    if ((flags & TcpHeader::FIN) && !(flags & (TcpHeader::SYN | TcpHeader::RST)))
    {
        FinTimer(flags, armedBefore, rtoBefore);
    }
    // tcp_event_ack_sent on every segment with an ACK -- a FIN too: TcpSocketBase puts one on
    // every FIN (SendEmptyPacket(FIN) as Close() sends it), and a FIN that left without
    // clearing the delayed ACK was followed by that ACK, ato later, from FIN_WAIT_1 or TIME_WAIT.
    if (flags & (TcpHeader::ACK | TcpHeader::FIN))
    {
        AckSent();
    }
    else if ((flags & TcpHeader::SYN) && m_state == SYN_SENT)
    {
        BackOffSyn(flags);
    }
}

void
MagnetLinuxTcpSocket::BackOffSyn(uint8_t flags)
{
    // tcp_retransmit_timer in SYN_SENT: icsk_rto (TCP_TIMEOUT_INIT) doubles only once
    // icsk_backoff exceeds tcp_syn_linear_timeouts, up to tcp_rto_max; ns-3 doubles from the
    // first.  (tcp_write_timeout gives up after tcp_syn_retries + tcp_syn_linear_timeouts
    // retransmissions: the profile's ConnCount.)
    if (!m_retxEvent.IsPending() || m_synRetries <= m_synCount)
    {
        return;
    }
    const uint32_t retransmits = m_synRetries - m_synCount - 1;
    const uint32_t shift = std::min<uint32_t>(retransmits > m_synLinear ? retransmits - m_synLinear : 0, 30);
    m_rto = std::min(m_cnTimeout * static_cast<int64_t>(1U << shift), m_rtoMax);
    m_retxEvent.Cancel();
    m_retxEvent = Simulator::Schedule(m_rto, &MagnetLinuxTcpSocket::SendEmptyPacket, this, flags);
}

void
MagnetLinuxTcpSocket::FinTimer(uint8_t flags, bool armedBefore, Time rtoBefore)
{
    // The FIN is in Linux's retransmission queue as data is (tcp_send_fin: an skb, or the last
    // one's flag), timed by the one retransmission timer: with SACK, in Open, a loss probe
    // first (tcp_schedule_loss_probe: 2 srtt + TCP_RTO_MIN with one packet out, at most the
    // RTO; tcp_send_loss_probe resends the last skb and re-arms the RTO undoubled), then the
    // RTO (tcp_retransmit_timer: the head resent, icsk_backoff++, icsk_rto = min(icsk_rto << 1,
    // tcp_rto_max)).  TcpSocketBase::SendEmptyPacket resent a FIN every RTO, recomputed from
    // the estimator on each send, never doubled; its LastAckTimeout too.
    const bool first = !m_finSent;
    m_finSent = true;
    if (!m_endPoint && !m_endPoint6)
    {
        return;
    }
    if (m_tcb->m_highTxMark.Get() > m_txBuffer->HeadSequence())
    {
        // Data is out: its timers resend it, the FIN with its last segment (SendDataPacket),
        // and its RTO stays as it was (SendEmptyPacket recomputed it, undoing a backoff).
        // TcpSocketBase armed a resend of the bare FIN if no timer ran (a probe held the RTO's
        // place): the one timer is the data's.
        m_rto = rtoBefore;
        if (!armedBefore && m_retxEvent.IsPending())
        {
            m_retxEvent.Cancel();
            RearmRto();
        }
        return;
    }
    if (!m_finOut)
    {
        // Its first send, or its first alone (the data before it ACKed since; a resend on the
        // timer then stood for the probe).
        m_finOut = true;
        m_finRto = m_rto.Get();
        m_finBackoff = 0;
        m_finProbe = first && m_tlp && m_sackEnabled && LinuxOpen();
    }
    const Time rto = std::min(m_finRto * static_cast<int64_t>(int64_t{1} << std::min<uint32_t>(m_finBackoff, 30)), m_rtoMax);
    Time wait = rto;
    if (m_finProbe)
    {
        const Time srtt = m_tcb->m_srtt.Get();
        const Time pto = srtt.IsStrictlyPositive() ? FromJiffies(Ticks(2 * srtt, m_tick)) + MilliSeconds(200) : Seconds(1);
        wait = std::min(pto, rto);
    }
    m_rto = rto; // icsk_rto
    m_retxEvent.Cancel();
    Simulator::Cancel(m_probeTimer);
    Simulator::Cancel(m_reoTimer);
    m_lastAckEvent.Cancel();
    m_retxEvent = Simulator::Schedule(wait, &MagnetLinuxTcpSocket::FinTimeout, this, flags);
}

void
MagnetLinuxTcpSocket::FinTimeout(uint8_t flags)
{
    if ((!m_endPoint && !m_endPoint6) || (m_state != FIN_WAIT_1 && m_state != CLOSING && m_state != LAST_ACK))
    {
        return;
    }
    if (m_finProbe)
    {
        m_finProbe = false; // tcp_send_loss_probe: the FIN again, the RTO re-armed as it was
    }
    else
    {
        m_finBackoff++; // tcp_retransmit_timer: the FIN again, the RTO doubled
    }
    SendEmptyPacket(flags); // FinTimer arms the next
}

Time
MagnetLinuxTcpSocket::CalculateRttSample(const TcpHeader& tcpHeader, const RttHistory& rttHistory)
{
    // Linux times each segment from its send (to the microsecond) and uses the
    // timestamp echo (in ms) only for retransmitted data.
    Time rtt(0);
    if (tcpHeader.GetAckNumber() < rttHistory.seq + SequenceNumber32(rttHistory.count))
    {
        return rtt;
    }
    if (!rttHistory.retx)
    {
        rtt = std::max(Simulator::Now() - rttHistory.time, MicroSeconds(1));
    }
    else if (m_timestampEnabled && tcpHeader.HasOption(TcpOption::TS))
    {
        auto ts = DynamicCast<const TcpOptionTS>(tcpHeader.GetOption(TcpOption::TS));
        rtt = std::max(TcpOptionTS::ElapsedTimeFromTsValue(ts->GetEcho()), MilliSeconds(1));
    }
    if (rtt.IsStrictlyPositive())
    {
        m_rttSample = rtt; // the last one asked for is the latest segment's (ca_rtt_us)
    }
    return rtt;
}

void
MagnetLinuxTcpSocket::EstimateRtt(const TcpHeader& tcpHeader)
{
    if (auto linux = DynamicCast<MagnetLinuxRttEstimator>(m_rtt))
    {
        SequenceNumber32 una = std::max(m_txBuffer->HeadSequence(), tcpHeader.GetAckNumber());
        linux->SetWindow(una, m_tcb->m_highTxMark.Get());
    }
    m_minRttAtAck = m_minRtt;
    m_rttSample = Time(0);
    TcpSocketBase::EstimateRtt(tcpHeader);
    if (m_rttSample.IsStrictlyPositive())
    {
        m_minRtt = std::min(m_minRtt, m_rttSample); // tcp_update_rtt_min (its window: 300 s)
    }
}

void
MagnetLinuxTcpSocket::SlowStartAfterIdleCheck()
{
    // tcp_slow_start_after_idle_check / tcp_cwnd_restart
    if (!m_slowStartAfterIdle || !m_sentData || m_tcb->m_highTxMark.Get() > m_txBuffer->HeadSequence() ||
        m_congestionControl->HasCongControl())
    {
        return;
    }
    const int64_t rto = Ticks(m_rto.Get(), m_tick);
    int64_t delta = Jiffies(Simulator::Now()) - Jiffies(m_lsndtime);
    if (delta <= rto)
    {
        return;
    }
    const uint32_t seg = m_tcb->m_segmentSize;
    uint32_t cwnd = m_tcb->m_cWnd.Get() / seg;
    uint32_t restart = std::min(GetInitialCwnd(), cwnd);
    if (m_tcb->m_congState != TcpSocketState::CA_CWR && m_tcb->m_congState != TcpSocketState::CA_RECOVERY)
    {
        m_tcb->m_ssThresh = std::max(m_tcb->m_ssThresh.Get(), ((cwnd >> 1) + (cwnd >> 2)) * seg);
    }
    while ((delta -= rto) > 0 && cwnd > restart)
    {
        cwnd >>= 1;
    }
    m_tcb->m_cWnd = std::max(cwnd, restart) * seg;
    m_tcb->m_cWndInfl = m_tcb->m_cWnd;
}

bool
MagnetLinuxTcpSocket::OnlyUnlostLeft() const
{
    // tcp_xmit_retransmit_queue resends only segments marked lost (it skips any without
    // TCPCB_LOST), and tcp_write_xmit sends new data.  In Recovery with SACK, once NextSeg
    // has neither, it falls back on RFC 6675's rule 3, an unSACKed segment below the highest
    // SACKed one that is not marked lost: Linux sends nothing.
    if (!m_sackEnabled || m_tcb->m_congState != TcpSocketState::CA_RECOVERY)
    {
        return false;
    }
    SequenceNumber32 seq;
    SequenceNumber32 high;
    return !m_txBuffer->NextSeg(&seq, &high, false);
}

uint32_t
MagnetLinuxTcpSocket::PerMss() const
{
    // tcp_sndbuf_expand: the memory of one full segment's skb.
    uint32_t mssClamp = m_tcb->m_segmentSize + (m_timestampEnabled ? 12 : 0);
    return static_cast<uint32_t>(RoundUpPow2(mssClamp + kSkbOverhead) + kSkbStruct);
}

void
MagnetLinuxTcpSocket::ApplySndBuf()
{
    // Linux takes writes while the queued memory is below sk_sndbuf; with page
    // fragments that is about as many bytes of data (46336 for 46080 measured).
    m_txBuffer->SetMaxBufferSize(static_cast<uint32_t>(m_sndBuf));
}

void
MagnetLinuxTcpSocket::SndBufExpand()
{
    if (m_soSndBuf)
    {
        return;
    }
    const uint32_t seg = m_tcb->m_segmentSize;
    uint32_t cwnd = m_tcb->m_cWnd.Get() / seg;
    if (!m_sndBufInit)
    {
        m_sndBufInit = true; // the first expansion: as the connection is established
    }
    else if (m_packets->InFlight() >= cwnd)
    {
        return; // the window is full: tcp_should_expand_sndbuf says no
    }
    uint64_t segs = std::max({kInitCwnd, cwnd, kReorderingPlusOne});
    uint64_t sndmem = 2 * segs * PerMss();
    if (m_sndBuf < sndmem)
    {
        m_sndBuf = std::min<uint64_t>(sndmem, m_wmemMax);
        ApplySndBuf();
    }
}

void
MagnetLinuxTcpSocket::ProcessAck(const SequenceNumber32& ackNumber,
                                 bool scoreboardUpdated,
                                 uint32_t currentDelivered,
                                 const SequenceNumber32& oldHeadSequence,
                                 bool receivedData)
{
    // tcp_cong_control gets the packets this ACK delivered (tcp_newly_delivered), where
    // TcpSocketBase takes the bytes delivered in segments with the rest carried over (an
    // ACK of a 205-byte segment acked none).  Given them as whole segments of bytes, its
    // congestion control (segmentsAcked, lastAckedSackedBytes) and recovery (deliveredBytes)
    // count packets.
    m_packets->RenoAcked();
    const auto delivered = static_cast<uint32_t>(m_packets->GetDelivered() - m_priorDelivered);
    const uint32_t renoSacked = m_txBuffer->GetSacked();
    m_bytesAckedNotProcessed = 0;
    currentDelivered = delivered * m_tcb->m_segmentSize;
    m_tcb->m_lastAckedSackedBytes = currentDelivered;
    const auto priorState = m_tcb->m_congState.Get();
    const uint32_t priorCwnd = m_tcb->m_cWnd.Get();
    const uint32_t priorSsthresh = m_tcb->m_ssThresh.Get();
    if (ackNumber > oldHeadSequence)
    {
        m_packets->SetLossSacked(0); // tcp_process_loss, tcp_fastretrans_alert: tcp_reset_reno_sack
    }
    // tcp_fastretrans_alert in Loss: tcp_process_loss (F-RTO), before the window grows.
    const bool frtoNew = priorState == TcpSocketState::CA_LOSS &&
                         ProcessLoss(ackNumber, oldHeadSequence, scoreboardUpdated, receivedData);
    // tcp_fastretrans_alert with RACK: the segments this ACK shows lost are marked before
    // TcpSocketBase's recovery steps size the window (PRR counts them out of flight), and
    // recovery starts once any is lost (TcpSocketBase's own duplicate-ACK entry is off).
    bool rackTimer = false;
    m_lostRetrans = false;
    if (RackOn())
    {
        // Linux ends recovery (tcp_try_undo_recovery) before it looks for losses.
        const auto state = m_tcb->m_congState.Get();
        m_leavingRecovery = state >= TcpSocketState::CA_RECOVERY && ackNumber >= m_recover;
        rackTimer = RackMarkLost();
        m_leavingRecovery = false;
        BytesInFlight();
    }
    if (m_tcb->m_congState == TcpSocketState::CA_RECOVERY && ackNumber > oldHeadSequence &&
        ackNumber < m_recover)
    {
        PartialAck(ackNumber, scoreboardUpdated, currentDelivered);
        if (!m_sackEnabled)
        {
            // tcp_xmit_recovery's tcp_xmit_retransmit_queue: the head marked lost goes out
            // while tcp_snd_cwnd - tcp_packets_in_flight > 0 (cwnd from PRR's
            // tcp_cwnd_reduction), else it waits for a later ACK, or the RTO.
            XmitRetransmitQueue();
        }
    }
    else if (RenoHoldsRecovery(ackNumber))
    {
        // tcp_fastretrans_alert, Recovery with snd_una >= high_seq and no SACK:
        // tcp_reset_reno_sack, tcp_try_undo_recovery, and tcp_is_non_sack_preventing_reopen
        // returns at once while snd_una == high_seq: Recovery holds, nothing is marked lost
        // or resent (no tcp_xmit_recovery), no new recovery starts on duplicate ACKs of
        // high_seq (tcp_add_reno_sack is not reached, so they deliver nothing), and
        // tcp_cong_control's PRR (tcp_cwnd_reduction) still takes the packets the ACK that
        // reached high_seq delivered.  TcpSocketBase ended Recovery on that ACK (cwnd =
        // ssthresh, Open), and three duplicates of it started a fast retransmission.  Its
        // full-ACK exit ends Recovery on the first ACK above high_seq.
        m_txBuffer->ResetRenoSack();
        m_dupAckCount = 0;
        if (ackNumber > oldHeadSequence)
        {
            m_tcb->m_lastAckedSeq = ackNumber;
            if (!m_congestionControl->HasCongControl() && currentDelivered >= m_tcb->m_segmentSize)
            {
                m_recoveryOps->DoRecovery(m_tcb, currentDelivered, false);
            }
            m_congestionControl->PktsAcked(m_tcb, 1, m_tcb->m_srtt);
            NewAck(ackNumber, true); // the RTO is re-armed below as for any ACK of new data
            UpdatePacingRate();
        }
    }
    else
    {
        // tcp_is_non_sack_preventing_reopen: without SACK, an ACK that reaches the recovery
        // point (snd_una == high_seq) ends Loss in TcpSocketBase; taken as a partial ACK, Loss
        // holds.
        const bool hold = RenoHoldsLoss(ackNumber, oldHeadSequence);
        if (hold)
        {
            m_recover = ackNumber + SequenceNumber32(1);
        }
        TcpSocketBase::ProcessAck(ackNumber, scoreboardUpdated, currentDelivered, oldHeadSequence,
                                  receivedData);
        if (hold)
        {
            m_recover = ackNumber;
        }
    }
    const auto baseState = m_tcb->m_congState.Get();
    if (priorState < TcpSocketState::CA_RECOVERY && baseState == TcpSocketState::CA_RECOVERY)
    {
        SetPrior(priorState, priorCwnd, priorSsthresh); // TcpSocketBase::EnterRecovery: tcp_enter_recovery's
    }
    if (!m_sackEnabled && m_txBuffer->GetSacked() > renoSacked)
    {
        m_packets->RenoDupAck(); // a duplicate ACK marked a segment (AddRenoSack, one at most)
    }
    if (RackOn())
    {
        const auto state = m_tcb->m_congState.Get();
        bool open = state == TcpSocketState::CA_OPEN || state == TcpSocketState::CA_DISORDER ||
                    state == TcpSocketState::CA_CWR;
        if (m_txBuffer->GetLost() > 0 && (open || (state == TcpSocketState::CA_LOSS && m_lostRetrans)))
        {
            EnterRecoveryRack(currentDelivered); // from Loss: a retransmission was lost again
        }
        if (m_tcb->m_congState == TcpSocketState::CA_RECOVERY)
        {
            XmitRetransmitQueue();
        }
    }
    RaiseCwnd(ackNumber > oldHeadSequence, scoreboardUpdated, delivered, baseState);
    if (m_probeOut && ackNumber >= m_tlpHighSeq)
    {
        m_probeOut = false; // the probe's episode is over
    }
    SndBufExpand();
    if (rackTimer)
    {
        // RACK's reordering timer is the one timer now (FLAG_SET_XMIT_TIMER cleared).
        Simulator::Cancel(m_probeTimer);
        m_retxEvent.Cancel();
    }
    else if (ackNumber > oldHeadSequence)
    {
        // tcp_set_xmit_timer: an ACK of new data re-arms the probe, else the RTO, from now
        // (tcp_schedule_loss_probe(sk, true) bounds the probe by a whole icsk_rto, and
        // tcp_rearm_rto restarts the RTO; from the head's last send if the probe or RACK's
        // timer held its place as the ACK came).  TcpSocketBase restarts it on the first partial
        // ACK of a recovery only, and not in Disorder.
        Simulator::Cancel(m_probeTimer);
        Simulator::Cancel(m_reoTimer);
        if (Outstanding())
        {
            m_retxEvent.Cancel();
        }
        if (!ScheduleLossProbe())
        {
            RearmRto(m_timerEarly);
        }
    }
    // Any other ACK (a duplicate, the peer's data with the same ACK number) leaves the
    // one timer as it is: the probe took the RTO's place, and cancelling it here left
    // the connection with no timer at all, a lost tail never resent.
    if (frtoNew)
    {
        // tcp_xmit_recovery, REXMIT_NEW (after tcp_cong_control grew the window): new data
        // as the window allows (TCP_NAGLE_OFF); if any went, nothing else on this ACK,
        // else F-RTO is off and the lost segments go (SendPendingData).
        SendNewData();
        if (m_tcb->m_highTxMark.Get() > m_recover)
        {
            m_frtoHold = true;
            m_lossStats.frtoNew++;
        }
        else
        {
            m_frto = false;
        }
    }
    if (m_sackEnabled && m_tcb->m_congState == TcpSocketState::CA_LOSS && !m_frtoHold)
    {
        // tcp_xmit_recovery, REXMIT_LOST (tcp_process_loss on an ACK that neither undoes nor ends
        // Loss): tcp_xmit_retransmit_queue resends every segment marked lost, in order, as the
        // window allows, before tcp_write_xmit's new data.  NextSeg, in TcpSocketBase's
        // SendPendingData after this, gives new data before a lost segment above the highest
        // SACKed one (RFC 6675's rule 1 stops there).
        XmitRetransmitQueue();
    }
}

void
MagnetLinuxTcpSocket::RaiseCwnd(bool advanced, bool sacked, uint32_t delivered, TcpSocketState::TcpCongState_t baseState)
{
    // tcp_cong_control: outside CWR and Recovery the window grows by the packets delivered
    // on an ACK tcp_may_raise_cwnd allows: one that advanced snd_una (FLAG_DATA_ACKED), or,
    // with tp->reordering above tcp_reordering, any that delivered (FLAG_FORWARD_PROGRESS).
    // TcpSocketBase grows it only where the ACK advanced snd_una and leaves it in Open or
    // Loss: not in Disorder, where an ACK that also SACKed counts as a duplicate ACK.
    const auto state = m_tcb->m_congState.Get();
    if (delivered == 0 || state == TcpSocketState::CA_RECOVERY || state == TcpSocketState::CA_CWR)
    {
        return;
    }
    const bool grown = advanced && (baseState == TcpSocketState::CA_OPEN || baseState == TcpSocketState::CA_LOSS);
    const bool mayRaise = advanced || (m_reordering > kReordering && sacked);
    if (mayRaise && !grown)
    {
        m_congestionControl->IncreaseWindow(m_tcb, delivered);
        m_tcb->m_cWndInfl = m_tcb->m_cWnd;
    }
}

void
MagnetLinuxTcpSocket::PartialAck(const SequenceNumber32& ackNumber, bool isDupack, uint32_t currentDelivered)
{
    // TcpSocketBase::ProcessAck's partial ACK in Recovery, without its DoRetransmit: that sent
    // at once whatever NextSeg gave, a lost segment, else new data, else the head again
    // (marked lost or not), with no regard to the window.  With SACK, Linux's partial ACK
    // resends only segments marked lost, as the window allows (tcp_fastretrans_alert:
    // tcp_identify_packet_loss, then tcp_xmit_recovery's tcp_xmit_retransmit_queue), and new
    // data goes out by tcp_write_xmit, within the window too: XmitRetransmitQueue and
    // SendPendingData after this.  The rest is as TcpSocketBase does it.
    if (!m_sackEnabled)
    {
        // Without SACK, tcp_identify_packet_loss's tcp_newreno_mark_lost marks the first
        // unacked segment lost (tcp_mark_skb_lost), unless it is marked already (a resent
        // one is): MarkHeadAsLost would clear a resent head's mark and send it again.
        const auto& sent = MagnetTxScoreboard::Sent(*m_txBuffer);
        if (!sent.empty() && !MagnetTxScoreboard::IsLost(*sent.front()) && !sent.front()->IsRetrans())
        {
            m_txBuffer->MarkHeadAsLost();
        }
    }
    m_tcb->m_lastAckedSeq = ackNumber;
    if (isDupack)
    {
        DupAck(currentDelivered);
    }
    else
    {
        m_dupAckCount = 0;
    }
    if (!m_congestionControl->HasCongControl() && currentDelivered >= m_tcb->m_segmentSize)
    {
        m_recoveryOps->DoRecovery(m_tcb, currentDelivered, false);
    }
    m_congestionControl->PktsAcked(m_tcb, 1, m_tcb->m_srtt);
    NewAck(ackNumber, m_isFirstPartialAck);
    m_isFirstPartialAck = false;
    UpdatePacingRate();
}

Time
MagnetLinuxTcpSocket::RtoFromHead() const
{
    // tcp_rto_delta_us: the head's last (re)transmission + icsk_rto - now, as
    // usecs_to_jiffies(max(delta_us, 1)): at least a tick, rounded up to one.
    const auto& sent = MagnetTxScoreboard::Sent(*m_txBuffer);
    if (sent.empty())
    {
        return m_rto.Get();
    }
    const Time delta = sent.front()->GetLastSent() + m_rto.Get() - Simulator::Now();
    return FromJiffies(Ticks(std::max(delta, MicroSeconds(1)), m_tick));
}

void
MagnetLinuxTcpSocket::RearmRto(bool fromHead)
{
    // tcp_rearm_rto: data out always has a timer.  TcpSocketBase re-arms its RTO only on
    // some ACKs of new data (not in Disorder, not on later partial ACKs in recovery);
    // after a probe had taken the RTO's place that left none.
    // In LAST_ACK the FIN is out until its ACK closes the socket (Linux keeps it in the
    // retransmission queue like data).
    // With a loss probe or RACK's reordering timer in its place (icsk_pending ICSK_TIME_LOSS_PROBE
    // or ICSK_TIME_REO_TIMEOUT), it runs from the head's last send (tcp_rto_delta_us), not from now.
    if (Outstanding() && !m_retxEvent.IsPending() && !m_probeTimer.IsPending() && !m_reoTimer.IsPending())
    {
        m_retxEvent = Simulator::Schedule(fromHead ? RtoFromHead() : m_rto.Get(), &MagnetLinuxTcpSocket::ReTxTimeout, this);
    }
}

bool
MagnetLinuxTcpSocket::Outstanding() const
{
    return m_tcb->m_highTxMark.Get() > m_txBuffer->HeadSequence() || m_state == LAST_ACK;
}

// ------------------------------------------------------ tail loss probe ---
bool
MagnetLinuxTcpSocket::ScheduleLossProbe()
{
    // tcp_schedule_loss_probe
    SequenceNumber32 una = m_txBuffer->HeadSequence();
    SequenceNumber32 nxt = m_tcb->m_highTxMark.Get();
    if (!m_tlp || !m_sackEnabled || nxt <= una || !LinuxOpen() || m_probeOut)
    {
        return false;
    }
    Time srtt = m_tcb->m_srtt.Get();
    Time timeout = Seconds(1); // TCP_TIMEOUT_INIT
    if (srtt.IsStrictlyPositive())
    {
        bool one = m_packets->PacketsOut() == 1; // tp->packets_out == 1
        timeout = FromJiffies(Ticks(2 * srtt, m_tick)) + (one ? MilliSeconds(200) : 2 * m_tick);
    }
    // Linux has one retransmission timer: the probe takes the RTO's place (and its time,
    // if that comes first) and re-arms it once sent.
    Time rto = m_retxEvent.IsPending() ? Simulator::GetDelayLeft(m_retxEvent) : m_rto.Get();
    m_rtoAt = Simulator::Now() + rto;
    timeout = std::min(timeout, rto);
    m_retxEvent.Cancel();
    Simulator::Cancel(m_probeTimer);
    Simulator::Cancel(m_reoTimer);
    m_probeTimer = Simulator::Schedule(timeout, &MagnetLinuxTcpSocket::LossProbe, this);
    return true;
}

bool
MagnetLinuxTcpSocket::LinuxOpen() const
{
    // TCP_CA_Open (or CWR) as Linux means it: nothing SACKed or marked lost (tcp_left_out
    // is 0).  ns-3 goes back to Open on any ACK of new data, SACKed data still out.
    bool open = m_tcb->m_congState == TcpSocketState::CA_OPEN ||
                m_tcb->m_congState == TcpSocketState::CA_CWR;
    return open && m_txBuffer->GetSacked() == 0 && m_txBuffer->GetLost() == 0;
}

void
MagnetLinuxTcpSocket::LossProbe()
{
    // tcp_send_loss_probe: new data if the peer's window lets it go, else the last
    // segment again; then the RTO restarts from now.
    if (!m_endPoint && !m_endPoint6)
    {
        // Closed since the probe was armed (ns-3 cancels only its own timers when it
        // frees the endpoint): nothing to probe, and SendDataPacket would crash.
        return;
    }
    SequenceNumber32 una = m_txBuffer->HeadSequence();
    SequenceNumber32 nxt = m_tcb->m_highTxMark.Get();
    m_retxEvent.Cancel();
    if (!LinuxOpen())
    {
        // A SACK (or a loss) since the probe was armed, and RACK has not put its reordering
        // timer in the probe's place (or is off): a probe never resends SACKed data (ns-3
        // aborts if asked to); the RTO, at its time.
        m_retxEvent = Simulator::Schedule(std::max(m_rtoAt - Simulator::Now(), Time(0)),
                                          &MagnetLinuxTcpSocket::ReTxTimeout, this);
        return;
    }
    m_retxEvent = Simulator::Schedule(m_rto, &MagnetLinuxTcpSocket::ReTxTimeout, this);
    if (nxt <= una || m_probeOut)
    {
        return;
    }
    m_sendingProbe = true;
    uint32_t unsent = m_txBuffer->SizeFromSequence(nxt);
    uint32_t window = m_rWnd.Get() > static_cast<uint32_t>(nxt - una) ? m_rWnd.Get() - (nxt - una) : 0;
    uint32_t sent = 0;
    if (unsent && window)
    {
        sent = SendDataPacket(nxt, std::min({unsent, window, m_tcb->m_segmentSize}), true);
        m_tcb->m_nextTxSequence = std::max(m_tcb->m_nextTxSequence.Get(), nxt + sent);
    }
    else if (m_lastLen && m_lastSeq >= una)
    {
        sent = SendDataPacket(m_lastSeq, m_lastLen, true);
    }
    m_sendingProbe = false;
    if (!sent)
    {
        return;
    }
    m_stats.probes++;
    m_probeOut = true;
    m_tlpHighSeq = m_tcb->m_highTxMark.Get();
    m_retxEvent.Cancel(); // the RTO restarts from the probe
    m_retxEvent = Simulator::Schedule(m_rto, &MagnetLinuxTcpSocket::ReTxTimeout, this);
}

void
MagnetLinuxTcpSocket::ReceivedAck(Ptr<Packet> packet, const TcpHeader& tcpHeader)
{
    m_priorDelivered = m_packets->GetDelivered(); // tcp_ack: prior_delivered
    if (auto cubic = DynamicCast<MagnetLinuxCubic>(m_congestionControl))
    {
        // tcp_clean_rtx_queue hands the congestion control this ACK's RTT (pkts_acked) after
        // snd_una moved and the SACKs were tagged, before tcp_fastretrans_alert and the
        // window's change: HyStart sees the window and ssthresh this ACK found.
        const SequenceNumber32 una = std::max(m_txBuffer->HeadSequence(), tcpHeader.GetAckNumber());
        cubic->AckSample(m_tcb, una, AckRttUs(tcpHeader));
    }
    if (!m_sackEnabled)
    {
        m_packets->RenoAckStart(); // before RenoSackOnAck clears the duplicate ACKs' marks
    }
    if (m_sackEnabled)
    {
        SackTagRetransmitted(tcpHeader);
    }
    if (RackOn())
    {
        if (GetRetxThresh() != kNoDupThresh)
        {
            SetRetxThresh(kNoDupThresh);
        }
        RackOnAck(tcpHeader);
    }
    if (!m_sackEnabled)
    {
        RenoSackOnAck(tcpHeader.GetAckNumber());
    }
    OrigAckedOnAck(tcpHeader);
    m_ackEcho = 0;
    if (m_timestampEnabled && tcpHeader.HasOption(TcpOption::TS))
    {
        m_ackEcho = DynamicCast<const TcpOptionTS>(tcpHeader.GetOption(TcpOption::TS))->GetEcho();
    }
    m_timerEarly = m_probeTimer.IsPending() || m_reoTimer.IsPending();
    const SequenceNumber32 una = m_txBuffer->HeadSequence();
    TcpSocketBase::ReceivedAck(packet, tcpHeader);
    m_frtoHold = false;
    m_origAcked = false;
    if (m_txBuffer->HeadSequence() > una)
    {
        m_retransmits = 0; // tcp_ack: snd_una advanced
    }
    // tcp_fastretrans_alert in Open, tcp_try_to_open (tcp_retrans_stamp_cleanup), and Loss or
    // Recovery held at high_seq without SACK (tcp_is_non_sack_preventing_reopen): the episode
    // is over once no retransmission is out and the head was never resent.
    const auto state = m_tcb->m_congState.Get();
    const SequenceNumber32 head = m_txBuffer->HeadSequence();
    const bool held = !m_sackEnabled &&
                      (state == TcpSocketState::CA_LOSS || state == TcpSocketState::CA_RECOVERY) &&
                      head == m_recover;
    if ((state == TcpSocketState::CA_OPEN || state == TcpSocketState::CA_DISORDER || held) &&
        m_txBuffer->GetRetransmitsCount() == 0 && !EverRetransmitted(head, head + 1))
    {
        m_retransStamp = Time::Max();
    }
}

void
MagnetLinuxTcpSocket::RenoSackOnAck(SequenceNumber32 ack)
{
    // Without SACK, Linux counts duplicate ACKs (tp->sacked_out: tcp_add_reno_sack) and ties
    // none to a segment.  TcpTxBuffer marks one segment SACKed per duplicate ACK, and
    // DiscardUpTo moves a mark the cumulative ACK leaves on the head to the next segment and
    // marks the head lost, in any state: a delivered segment is resent.  tcp_fastretrans_alert
    // zeroes the count whenever snd_una advances outside Recovery (its default case and
    // tcp_process_loss: tcp_reset_reno_sack) and once snd_una reaches high_seq in Recovery
    // (held there, RenoHoldsRecovery, or ended); only a partial ACK in Recovery keeps it,
    // less the acked - 1 packets tcp_remove_reno_sacks takes off (as DiscardUpTo does), and marks the head lost
    // (tcp_newreno_mark_lost), as TcpSocketBase's partial ACK does.
    if (ack <= m_txBuffer->HeadSequence() || m_txBuffer->GetSacked() == 0)
    {
        return;
    }
    if (m_tcb->m_congState == TcpSocketState::CA_RECOVERY && ack < m_recover)
    {
        return;
    }
    m_txBuffer->ResetRenoSack();
}

bool
MagnetLinuxTcpSocket::RenoHoldsRecovery(SequenceNumber32 ack) const
{
    // tcp_try_undo_recovery: without SACK, Recovery is held while snd_una == high_seq
    // (tcp_is_non_sack_preventing_reopen): on the ACK that reaches high_seq and on its
    // duplicates; the first ACK above it ends Recovery (tcp_end_cwnd_reduction, Open).
    return !m_sackEnabled && m_tcb->m_congState == TcpSocketState::CA_RECOVERY && ack == m_recover;
}

bool
MagnetLinuxTcpSocket::RenoHoldsLoss(SequenceNumber32 ack, SequenceNumber32 una) const
{
    // tcp_process_loss: once snd_una reaches high_seq, tcp_try_undo_recovery leaves Loss for
    // Open, but without SACK tcp_is_non_sack_preventing_reopen holds the state "until
    // something *above* high_seq is ACKed" (a MUST to prevent false fast retransmits): the
    // copies of the go-back-N still coming draw duplicate ACKs of high_seq, which start no
    // recovery in Loss (tcp_newreno_mark_lost marks nothing there).  TcpSocketBase went to
    // Open, where three of them started a fast retransmission of data in flight.
    return !m_sackEnabled && m_tcb->m_congState == TcpSocketState::CA_LOSS && ack == m_recover && ack > una;
}

bool
MagnetLinuxTcpSocket::RetransmitsTimedOut() const
{
    // retransmits_timed_out(sk, tcp_retries2, 0): only after an RTO without progress
    // (icsk_retransmits), once tcp_model_timeout's time has passed since retrans_stamp: the
    // time `boundary` RTOs from TCP_RTO_MIN would take, doubling up to tcp_rto_max (15:
    // 1023 x 200 ms + 6 x 120 s = 924.6 s), in jiffies.
    if (m_retransmits == 0 || m_retransStamp == Time::Max())
    {
        return false;
    }
    const int64_t base = Ticks(MilliSeconds(200), m_tick); // TCP_RTO_MIN
    const int64_t max = Ticks(m_rtoMax, m_tick);
    uint32_t thresh = 0; // ilog2(rto_max / rto_base)
    while ((int64_t{2} << thresh) <= max / base)
    {
        ++thresh;
    }
    const int64_t timeout = m_retries2 <= thresh
                                ? ((int64_t{2} << m_retries2) - 1) * base
                                : ((int64_t{2} << thresh) - 1) * base + (m_retries2 - thresh) * max;
    return Simulator::Now() - m_retransStamp >= FromJiffies(timeout);
}

void
MagnetLinuxTcpSocket::ReTxTimeout()
{
    Simulator::Cancel(m_probeTimer);
    Simulator::Cancel(m_reoTimer);
    m_probeOut = false;
    if (m_txBuffer->Size() > 0 && m_tcb->m_highTxMark.Get() > m_txBuffer->HeadSequence())
    {
        m_lossStats.rtos++;
    }
    if (m_state == LAST_ACK && m_txBuffer->Size() == 0)
    {
        // Only the FIN is out: resend it (ns-3 does in FIN_WAIT_1 and CLOSING only, as
        // it closes LAST_ACK on any ACK); ns-3 keeps resending it while it goes unACKed.
        SendEmptyPacket(TcpHeader::FIN | TcpHeader::ACK);
        return;
    }
    const bool data = m_txBuffer->Size() > 0 && m_tcb->m_highTxMark.Get() > m_txBuffer->HeadSequence();
    if (!data || m_state == SYN_SENT || m_state == SYN_RCVD || m_state == CLOSED || m_state == TIME_WAIT)
    {
        TcpSocketBase::ReTxTimeout();
        return;
    }
    // tcp_retransmit_timer: tcp_write_timeout gives up by time (ns-3, after DataRetries RTOs
    // of one segment): ns-3's own drop (no RST, as tcp_write_err sends none) at Linux's time.
    if (RetransmitsTimedOut())
    {
        m_dataRetrCount = 0;
        TcpSocketBase::ReTxTimeout();
        return;
    }
    // tcp_enter_loss reduces ssthresh "if it has not yet been made inside this window": from
    // Open or Disorder, once snd_una has reached high_seq, or in Loss after progress since the
    // last RTO (icsk_retransmits 0); then it keeps prior_cwnd and prior_ssthresh (what an undo
    // restores).  An RTO in Recovery, or a recurring one in Loss, keeps ssthresh and the priors.
    // F-RTO for an RTO that starts recovery or recurs with no progress (icsk_retransmits); the
    // count of duplicate ACKs goes (tcp_timeout_mark_lost: tcp_reset_reno_sack).
    const auto state = m_tcb->m_congState.Get();
    const bool reduce = state <= TcpSocketState::CA_DISORDER || m_recover <= m_txBuffer->HeadSequence() ||
                        (state == TcpSocketState::CA_LOSS && m_retransmits == 0);
    if (reduce)
    {
        m_priorSsthresh = CurrentSsthresh();
        m_priorCwnd = m_tcb->m_cWnd.Get();
        m_undoMarker = true; // tcp_init_undo
    }
    m_frto = m_frtoOn && (state < TcpSocketState::CA_RECOVERY || m_retransmits > 0);
    m_packets->SetLossSacked(0);
    m_retransmits++;
    EnterLoss(reduce);
}

void
MagnetLinuxTcpSocket::EnterLoss(bool reduce)
{
    // TcpSocketBase::ReTxTimeout's steps for data, but ssthresh as tcp_enter_loss sets it: ns-3
    // cut it on every RTO but one in Loss with the head already resent (in Recovery too,
    // where Linux keeps the one the recovery set), and told the congestion control of a loss
    // (CA_EVENT_LOSS, CUBIC's last_max_cwnd) each time.
    const uint32_t inFlight = BytesInFlight();
    m_dupAckCount = 0;
    if (!m_sackEnabled)
    {
        m_txBuffer->ResetRenoSack();
    }
    TimeoutMarkLost();
    m_recover = m_tcb->m_highTxMark; // high_seq = snd_nxt
    m_recoverActive = true;
    m_rto = std::min(2 * m_rto.Get(), m_rtoMax); // icsk_rto = min(icsk_rto << 1, tcp_rto_max); ns-3 stops at 60 s
    m_history.clear();
    if (reduce)
    {
        m_tcb->m_ssThresh = m_congestionControl->GetSsThresh(m_tcb, inFlight);
        m_congestionControl->CwndEvent(m_tcb, TcpSocketState::CA_EVENT_LOSS);
    }
    m_congestionControl->CongestionStateSet(m_tcb, TcpSocketState::CA_LOSS);
    m_tcb->m_congState = TcpSocketState::CA_LOSS;
    m_tcb->m_cWnd = (m_packets->InFlight() + 1) * m_tcb->m_segmentSize; // tcp_packets_in_flight + 1
    m_tcb->m_cWndInfl = m_tcb->m_cWnd;
    m_pacingTimer.Cancel();
    SendPendingData(m_connected); // the head (tcp_retransmit_timer); its RTO is armed as it goes
}

void
MagnetLinuxTcpSocket::TimeoutMarkLost()
{
    // tcp_timeout_mark_lost: every segment not SACKed is lost, its retransmission too; but with
    // RACK (tcp_is_rack) one other than the head sent within RACK's RTT (tcp_rack_skb_timeout(tp,
    // skb, 0) > 0) is not: "Don't mark recently sent ones lost yet".  It stays in flight, and
    // cwnd is the packets in flight + 1.  TcpTxBuffer::SetSentListLost marked every one.
    // (Without SACK the profile keeps no RACK RTT: all are marked.)
    if (!RackOn())
    {
        m_txBuffer->SetSentListLost(!m_sackEnabled);
        return;
    }
    const Time now = Simulator::Now();
    bool head = true;
    for (TcpTxItem* item : MagnetTxScoreboard::Sent(*m_txBuffer))
    {
        const bool recent = !head && (m_rackRtt - (now - item->GetLastSent())).IsStrictlyPositive();
        head = false;
        if (item->IsSacked() || !recent)
        {
            // tcp_mark_skb_lost (a SACKed one stays as it is); no retransmission of it is in
            // flight (a loss probe's resend, which Linux never counts as one, included).
            MagnetTxScoreboard::MarkLost(*m_txBuffer, *item);
            MagnetTxScoreboard::ClearRetransmitted(*m_txBuffer, *item);
        }
    }
}

// ------------------------------------------------------------------ RACK ---
namespace
{

/** tcp_skb_sent_after: sent later, or at the same time and ending later. */
bool
SentAfter(Time t1, Time t2, SequenceNumber32 end1, SequenceNumber32 end2)
{
    return t1 > t2 || (t1 == t2 && end1 > end2);
}

SequenceNumber32
End(const TcpTxItem& item)
{
    return MagnetTxScoreboard::Start(item) + item.GetSeqSize();
}

TcpOptionSack::SackList
SackBlocks(const TcpHeader& header)
{
    if (!header.HasOption(TcpOption::SACK))
    {
        return {};
    }
    return DynamicCast<const TcpOptionSack>(header.GetOption(TcpOption::SACK))->GetSackList();
}

/** A segment a SACK block covers whole (TcpTxBuffer::Update's rule). */
bool
InBlock(const TcpOptionSack::SackList& blocks, SequenceNumber32 start, SequenceNumber32 end)
{
    return std::any_of(blocks.begin(), blocks.end(),
                       [&](const auto& b) { return start >= b.first && end <= b.second; });
}

} // namespace

void
MagnetLinuxTcpSocket::SackTagRetransmitted(const TcpHeader& header)
{
    // tcp_sacktag_one: a segment marked lost and resent, now SACKed, is out of flight.
    // TcpTxBuffer::Update clears its lost mark but keeps its retransmitted one, and so
    // counted it in flight until the cumulative ACK.
    const TcpOptionSack::SackList blocks = SackBlocks(header);
    for (TcpTxItem* item : MagnetTxScoreboard::Sent(*m_txBuffer))
    {
        const SequenceNumber32 start = MagnetTxScoreboard::Start(*item);
        if (!item->IsSacked() && item->IsRetrans() && MagnetTxScoreboard::IsLost(*item) &&
            start >= header.GetAckNumber() && InBlock(blocks, start, End(*item)))
        {
            MagnetTxScoreboard::ClearRetransmitted(*m_txBuffer, *item);
        }
    }
}

bool
MagnetLinuxTcpSocket::RackOn() const
{
    return m_rack && m_sackEnabled;
}

int64_t
MagnetLinuxTcpSocket::AckRttUs(const TcpHeader& header) const
{
    // The sample tcp_clean_rtx_queue gives pkts_acked (tcp_ack_update_rtt's rs->rtt_us, us; -1:
    // none): the last segment this ACK newly ACKs, unless it ACKs one ever resent (Karn:
    // FLAG_RETRANS_DATA_ACKED), or segments SACKed before; the last one it newly SACKs that was
    // never resent (tcp_sacktag_one's last_sackt) takes its place; with neither, an ACK of new
    // data is timed by its timestamp echo (tcp_rtt_tsopt_us).  Before this ACK is applied.
    const SequenceNumber32 ack = header.GetAckNumber();
    const SequenceNumber32 una = m_txBuffer->HeadSequence();
    const auto& sent = MagnetTxScoreboard::Sent(*m_txBuffer);
    if (sent.empty() || ack < una || ack > m_tcb->m_highTxMark)
    {
        return -1; // nothing in flight, an old ACK or one of unsent data: no tcp_clean_rtx_queue
    }
    const TcpOptionSack::SackList blocks = m_sackEnabled ? SackBlocks(header) : TcpOptionSack::SackList();
    bool retransAcked = false;
    bool acked = false;
    bool sacked = false;
    Time lastAckt;
    Time lastSackt;
    for (const TcpTxItem* item : sent)
    {
        const SequenceNumber32 start = MagnetTxScoreboard::Start(*item);
        const SequenceNumber32 end = End(*item);
        const bool resent = EverRetransmitted(start, end);
        if (end <= ack)
        {
            if (resent)
            {
                retransAcked = true;
            }
            else if (!item->IsSacked())
            {
                acked = true;
                lastAckt = item->GetLastSent();
            }
        }
        else if (!item->IsSacked() && !resent && InBlock(blocks, start, end))
        {
            sacked = true;
            lastSackt = item->GetLastSent();
        }
    }
    const Time now = Simulator::Now();
    bool seqRtt = acked && !retransAcked;
    int64_t rtt = seqRtt ? (now - lastAckt).GetMicroSeconds() : -1;
    if (sacked)
    {
        rtt = (now - lastSackt).GetMicroSeconds();
        seqRtt = true; // seq_rtt_us = sack_rtt_us: no timestamp fallback
    }
    if (!seqRtt && ack > una && m_timestampEnabled && header.HasOption(TcpOption::TS))
    {
        const uint32_t echo = DynamicCast<const TcpOptionTS>(header.GetOption(TcpOption::TS))->GetEcho();
        if (echo != 0)
        {
            rtt = std::max(TcpOptionTS::ElapsedTimeFromTsValue(echo), MilliSeconds(1)).GetMicroSeconds();
        }
    }
    return rtt;
}

bool
MagnetLinuxTcpSocket::EverRetransmitted(SequenceNumber32 start, SequenceNumber32 end) const
{
    // TCPCB_RETRANS: TcpTxItem's flag is TCPCB_SACKED_RETRANS only (an RTO clears it).
    auto it = m_retransmitted.upper_bound(start);
    if (it != m_retransmitted.begin() && std::prev(it)->second > start)
    {
        return true;
    }
    return it != m_retransmitted.end() && it->first < end;
}

void
MagnetLinuxTcpSocket::RackAdvance(bool retrans, SequenceNumber32 end, Time xmit)
{
    // tcp_rack_advance
    const Time rtt = Simulator::Now() - xmit;
    if (retrans && rtt < m_minRttAtAck)
    {
        return; // the original or the retransmission: ambiguous, unless an RTT has passed
    }
    m_rackAdvanced = true;
    m_rackRtt = rtt;
    if (!m_rackValid || SentAfter(xmit, m_rackXmit, end, m_rackEnd))
    {
        m_rackValid = true;
        m_rackXmit = xmit;
        m_rackEnd = end;
    }
}

void
MagnetLinuxTcpSocket::RackOnAck(const TcpHeader& header)
{
    // What tcp_sacktag_one and tcp_clean_rtx_queue see of the segments this ACK
    // delivers (before TcpTxBuffer records it): RACK's advance, and reordering
    // (tcp_check_sack_reordering) when one never retransmitted arrives below the
    // highest SACKed.
    const SequenceNumber32 ack = header.GetAckNumber();
    const SequenceNumber32 head = m_txBuffer->HeadSequence();
    while (!m_retransmitted.empty() && m_retransmitted.begin()->second <= head)
    {
        m_retransmitted.erase(m_retransmitted.begin());
    }
    m_rackPassed.erase(m_rackPassed.begin(), m_rackPassed.lower_bound(head));
    if (ack < head)
    {
        return;
    }
    const TcpOptionSack::SackList blocks = SackBlocks(header);
    uint32_t echo = 0;
    if (m_timestampEnabled && header.HasOption(TcpOption::TS))
    {
        echo = DynamicCast<const TcpOptionTS>(header.GetOption(TcpOption::TS))->GetEcho();
    }
    const MagnetTxScoreboard::Items& sent = MagnetTxScoreboard::Sent(*m_txBuffer);
    SequenceNumber32 fack = head; // tcp_highest_sack_seq before this ACK
    for (const TcpTxItem* item : sent)
    {
        if (item->IsSacked())
        {
            fack = std::max(fack, End(*item));
        }
    }
    SequenceNumber32 newFack = fack;
    SequenceNumber32 reord = m_tcb->m_highTxMark.Get();
    for (const TcpTxItem* item : sent)
    {
        const SequenceNumber32 start = MagnetTxScoreboard::Start(*item);
        const SequenceNumber32 end = End(*item);
        if (item->IsSacked())
        {
            continue; // delivered before
        }
        bool acked = end <= ack;
        bool sacked = !acked && InBlock(blocks, start, end);
        if (!acked && !sacked)
        {
            continue;
        }
        bool retrans = EverRetransmitted(start, end);
        // tcp_skb_spurious_retrans: the echo shows the original was ACKed, not the retransmission.
        bool spurious = acked && retrans && echo &&
                        echo < static_cast<uint32_t>(item->GetLastSent().GetMilliSeconds());
        if (!spurious)
        {
            RackAdvance(retrans, end, item->GetLastSent());
        }
        if (!retrans && start < reord)
        {
            reord = start;
        }
        if (sacked)
        {
            newFack = std::max(newFack, end);
        }
    }
    if (reord < fack)
    {
        // tcp_check_sack_reordering: a segment never retransmitted arrived below the highest SACKed.
        uint32_t metric = newFack - reord;
        uint32_t mss = m_tcb->m_segmentSize;
        if (metric > m_reordering * mss)
        {
            m_reordering = std::min((metric + mss - 1) / mss, kMaxReordering);
        }
        m_reordSeen = true;
    }
}

uint32_t
MagnetLinuxTcpSocket::SackedSegments() const
{
    uint32_t n = 0;
    for (const TcpTxItem* item : MagnetTxScoreboard::Sent(*m_txBuffer))
    {
        n += item->IsSacked() ? 1 : 0;
    }
    return n;
}

Time
MagnetLinuxTcpSocket::ReoWnd() const
{
    // tcp_rack_reo_wnd
    if (!m_reordSeen)
    {
        if (m_tcb->m_congState >= TcpSocketState::CA_RECOVERY && !m_leavingRecovery)
        {
            return Time(0); // no reordering seen: no wait in recovery
        }
        if (SackedSegments() >= m_reordering)
        {
            return Time(0); // ... nor once as many are SACKed as DUPACK's threshold
        }
    }
    // min_rtt / 4 per step (steps grow with DSACKs: ns-3's receiver sends none, so one),
    // at most srtt.
    Time quarter = m_minRtt == Time::Max() ? Time::Max() : MicroSeconds(m_minRtt.GetMicroSeconds() >> 2);
    return std::min(quarter, m_tcb->m_srtt.Get());
}

Time
MagnetLinuxTcpSocket::RackDetectLoss()
{
    // tcp_rack_detect_loss: over the segments in the order they were (re)sent, up to the
    // last one delivered, those not delivered within RACK's RTT plus the reordering window
    // are lost; the longest any other still has to wait is returned.
    if (!m_rackValid)
    {
        return Time(0);
    }
    const Time now = Simulator::Now();
    const Time reoWnd = ReoWnd();
    const std::vector<TcpTxItem*> order = RackSendOrder();
    Time wait(0);
    for (TcpTxItem* item : order)
    {
        if (!SentAfter(m_rackXmit, item->GetLastSent(), m_rackEnd, End(*item)))
        {
            break;
        }
        Time remaining = m_rackRtt + reoWnd - (now - item->GetLastSent());
        if (remaining.IsStrictlyPositive())
        {
            wait = std::max(wait, remaining);
            continue;
        }
        if (item->IsSacked())
        {
            m_rackPassed.insert(MagnetTxScoreboard::Start(*item)); // off the time-sorted list
            continue;
        }
        bool wasLost = MagnetTxScoreboard::IsLost(*item);
        if (MagnetTxScoreboard::MarkLost(*m_txBuffer, *item))
        {
            m_lossStats.lostRetrans++;
            m_lostRetrans = true;
        }
        else if (!wasLost)
        {
            m_lossStats.rackLost++;
        }
    }
    return wait;
}

bool
MagnetLinuxTcpSocket::RackListed(const TcpTxItem& item) const
{
    // On tp->tsorted_sent_queue: not a lost segment waiting to be resent (tcp_rack_detect_loss
    // skips those), not a SACKed one whose wait ran out (taken off the list).
    bool lostUnsent = MagnetTxScoreboard::IsLost(item) && !item.IsRetrans();
    return !lostUnsent && !(item.IsSacked() && m_rackPassed.count(MagnetTxScoreboard::Start(item)));
}

std::vector<TcpTxItem*>
MagnetLinuxTcpSocket::RackSendOrder() const
{
    // tp->tsorted_sent_queue: the segments in the order they were last sent (Linux moves one
    // to the tail as it is resent, tcp_update_skb_after_send), ties in sequence order.  Those
    // never resent went in sequence order; the few resent (m_retransmitted) are sorted in by
    // their last send.  The walk ends at the first one never resent that was not sent before
    // RACK's latest delivered segment, once past every resent one: tcp_rack_detect_loss stops
    // there, and every segment after it in sequence order was sent after it.
    SequenceNumber32 resentEnd = m_txBuffer->HeadSequence();
    for (const auto& [start, end] : m_retransmitted)
    {
        resentEnd = std::max(resentEnd, end);
    }
    std::vector<TcpTxItem*> fresh;
    std::vector<TcpTxItem*> resent;
    Time last = Time::Min();
    for (TcpTxItem* item : MagnetTxScoreboard::Sent(*m_txBuffer))
    {
        if (!RackListed(*item))
        {
            continue;
        }
        const SequenceNumber32 start = MagnetTxScoreboard::Start(*item);
        if (EverRetransmitted(start, End(*item)))
        {
            resent.push_back(item);
            continue;
        }
        if (item->GetLastSent() < last)
        {
            return RackSortAll(); // not expected: every resend is in m_retransmitted
        }
        last = item->GetLastSent();
        fresh.push_back(item);
        if (start >= resentEnd && !SentAfter(m_rackXmit, last, m_rackEnd, End(*item)))
        {
            break;
        }
    }
    auto before = [](const TcpTxItem* a, const TcpTxItem* b) {
        return a->GetLastSent() < b->GetLastSent() ||
               (a->GetLastSent() == b->GetLastSent() && MagnetTxScoreboard::Start(*a) < MagnetTxScoreboard::Start(*b));
    };
    std::sort(resent.begin(), resent.end(), before);
    std::vector<TcpTxItem*> order(fresh.size() + resent.size());
    std::merge(fresh.begin(), fresh.end(), resent.begin(), resent.end(), order.begin(), before);
    if (g_rackOrderCheck)
    {
        CheckRackOrder(order);
    }
    return order;
}

std::vector<TcpTxItem*>
MagnetLinuxTcpSocket::RackSortAll() const
{
    // The whole list sorted by last send (a stable sort keeps sequence order for ties).
    std::vector<TcpTxItem*> all;
    for (TcpTxItem* item : MagnetTxScoreboard::Sent(*m_txBuffer))
    {
        if (RackListed(*item))
        {
            all.push_back(item);
        }
    }
    std::stable_sort(all.begin(), all.end(), [](const TcpTxItem* a, const TcpTxItem* b) {
        return a->GetLastSent() < b->GetLastSent();
    });
    return all;
}

void
MagnetLinuxTcpSocket::CheckRackOrder(const std::vector<TcpTxItem*>& order) const
{
    // RackSortAll must agree with `order` up to the first segment not sent before RACK's latest.
    const std::vector<TcpTxItem*> all = RackSortAll();
    for (size_t i = 0; i < all.size(); ++i)
    {
        NS_ABORT_MSG_UNLESS(i < order.size() && order[i] == all[i], "RACK's send order differs from a sort at " << i);
        if (!SentAfter(m_rackXmit, all[i]->GetLastSent(), m_rackEnd, End(*all[i])))
        {
            break;
        }
    }
}

bool
MagnetLinuxTcpSocket::RackMarkLost()
{
    // tcp_rack_mark_lost: a reordering timer for the segments still within their window.
    if (!m_rackAdvanced)
    {
        return false;
    }
    m_rackAdvanced = false;
    Time wait = RackDetectLoss();
    if (wait.IsZero())
    {
        return false;
    }
    Time timeout = std::min(FromJiffies(Ticks(wait + MicroSeconds(kTimeoutMinUs), m_tick)), m_rto.Get());
    Simulator::Cancel(m_reoTimer);
    m_reoTimer = Simulator::Schedule(timeout, &MagnetLinuxTcpSocket::RackReoTimeout, this);
    return true;
}

void
MagnetLinuxTcpSocket::EnterRecoveryRack(uint32_t delivered)
{
    // tcp_enter_recovery (tcp_init_cwnd_reduction unless already reducing in CWR).
    SetPrior(m_tcb->m_congState, m_tcb->m_cWnd, m_tcb->m_ssThresh);
    bool reducing = m_tcb->m_congState == TcpSocketState::CA_CWR;
    if (!reducing)
    {
        m_recover = m_tcb->m_highTxMark;
        m_tcb->m_ssThresh = m_congestionControl->GetSsThresh(m_tcb, BytesInFlight());
    }
    m_recoverActive = true;
    m_congestionControl->CongestionStateSet(m_tcb, TcpSocketState::CA_RECOVERY);
    m_tcb->m_congState = TcpSocketState::CA_RECOVERY;
    if (!reducing && !m_congestionControl->HasCongControl())
    {
        m_recoveryOps->EnterRecovery(m_tcb, m_dupAckCount, UnAckDataCount(), delivered);
    }
}

void
MagnetLinuxTcpSocket::XmitRetransmitQueue()
{
    // tcp_xmit_retransmit_queue, its lost segments: in sequence order while the window
    // has room (NextSeg would skip one above the highest SACKed, a lost tail's).
    SequenceNumber32 from = m_txBuffer->HeadSequence();
    while (m_txBuffer->GetRetransmitsCount() < m_txBuffer->GetLost() && m_packets->InFlight() < CwndPackets())
    {
        const TcpTxItem* next = nullptr;
        for (const TcpTxItem* item : MagnetTxScoreboard::Sent(*m_txBuffer))
        {
            if (MagnetTxScoreboard::Start(*item) >= from && MagnetTxScoreboard::IsLost(*item) &&
                !item->IsRetrans() && !item->IsSacked())
            {
                next = item;
                break;
            }
        }
        if (!next)
        {
            break;
        }
        SequenceNumber32 seq = MagnetTxScoreboard::Start(*next);
        uint32_t sz = SendDataPacket(seq, next->GetPacket()->GetSize(), true);
        if (!sz)
        {
            break;
        }
        from = seq + sz; // a resent head restarted the RTO (SendDataPacket)
    }
}

void
MagnetLinuxTcpSocket::RackReoTimeout()
{
    // tcp_rack_reo_timeout
    if (!m_endPoint && !m_endPoint6)
    {
        return;
    }
    m_lossStats.reoTimeouts++;
    uint32_t priorInFlight = BytesInFlight();
    RackDetectLoss();
    if (BytesInFlight() != priorInFlight)
    {
        if (m_tcb->m_congState != TcpSocketState::CA_RECOVERY)
        {
            EnterRecoveryRack(m_tcb->m_segmentSize); // tcp_cwnd_reduction(sk, 1, ...)
        }
        XmitRetransmitQueue();
    }
    // tcp_rearm_rto: the one timer is the RTO again, from the head's last send (icsk_pending is
    // still ICSK_TIME_REO_TIMEOUT here, and tcp_xmit_retransmit_queue did not re-arm on resending
    // the head either).
    Simulator::Cancel(m_probeTimer);
    m_retxEvent.Cancel();
    RearmRto(true);
}

// ----------------------------------------------------------------- F-RTO ---
uint32_t
MagnetLinuxTcpSocket::CurrentSsthresh() const
{
    // tcp_current_ssthresh: in CWR or Recovery ssthresh, else at least 3/4 of cwnd.
    const auto state = m_tcb->m_congState.Get();
    const uint32_t ssthresh = m_tcb->m_ssThresh.Get();
    if (state == TcpSocketState::CA_CWR || state == TcpSocketState::CA_RECOVERY)
    {
        return ssthresh;
    }
    const uint32_t cwnd = CwndPackets();
    return std::max(ssthresh, ((cwnd >> 1) + (cwnd >> 2)) * m_tcb->m_segmentSize);
}

void
MagnetLinuxTcpSocket::SetPrior(TcpSocketState::TcpCongState_t state, uint32_t cwnd, uint32_t ssthresh)
{
    // tcp_enter_recovery: tcp_init_undo (undo_marker), prior_ssthresh = 0, then, unless already
    // reducing (CWR), tcp_current_ssthresh, and prior_cwnd (tcp_init_cwnd_reduction).
    m_undoMarker = true;
    if (state == TcpSocketState::CA_CWR || state == TcpSocketState::CA_RECOVERY)
    {
        m_priorSsthresh = 0;
        return;
    }
    const uint32_t packets = cwnd / m_tcb->m_segmentSize;
    m_priorSsthresh = std::max(ssthresh, ((packets >> 1) + (packets >> 2)) * m_tcb->m_segmentSize);
    m_priorCwnd = cwnd;
}

void
MagnetLinuxTcpSocket::OrigAckedOnAck(const TcpHeader& header)
{
    // FLAG_ORIG_SACK_ACKED: tcp_clean_rtx_queue (cumulatively ACKed) and tcp_sacktag_one (newly
    // SACKed) set it for a segment never retransmitted (not TCPCB_RETRANS) ending at or below
    // high_seq.  Without SACK, not if the ACK also covers a retransmitted one
    // (FLAG_RETRANS_DATA_ACKED: "non-SACK case cannot confirm that progress was due to
    // original transmission").  Read before TcpTxBuffer takes the ACK.
    m_origAcked = false;
    if (!m_frto || m_tcb->m_congState != TcpSocketState::CA_LOSS)
    {
        return;
    }
    const SequenceNumber32 ack = header.GetAckNumber();
    const TcpOptionSack::SackList blocks = m_sackEnabled ? SackBlocks(header) : TcpOptionSack::SackList();
    bool retransAcked = false;
    for (const TcpTxItem* item : MagnetTxScoreboard::Sent(*m_txBuffer))
    {
        const SequenceNumber32 start = MagnetTxScoreboard::Start(*item);
        const SequenceNumber32 end = End(*item);
        const bool acked = end <= ack;
        if (!acked && !m_sackEnabled)
        {
            break;
        }
        if (m_sackEnabled && (item->IsSacked() || (!acked && !InBlock(blocks, start, end))))
        {
            continue; // delivered before, or not now
        }
        if (EverRetransmitted(start, end))
        {
            retransAcked = retransAcked || acked;
            continue;
        }
        m_origAcked = m_origAcked || end <= m_recover;
    }
    if (!m_sackEnabled && retransAcked)
    {
        m_origAcked = false;
    }
}

bool
MagnetLinuxTcpSocket::ProcessLoss(SequenceNumber32 ack, SequenceNumber32 una, bool sacked, bool receivedData)
{
    // tcp_process_loss (high_seq is m_recover, snd_nxt m_highTxMark).  True: REXMIT_NEW.
    const bool advanced = ack > una;
    if (advanced && m_undoMarker && PacketDelayed())
    {
        // tcp_try_undo_loss(sk, false): tcp_may_undo (undo_marker, and with no DSACKs from ns-3's
        // receiver undo_retrans is never 0: tcp_packet_delayed) on an ACK of new data that echoes
        // a time before the episode's first retransmission: an original was delivered, the RTO was
        // spurious, undone at once (F-RTO would wait for an ACK of data never resent).
        UndoLoss(ack, false);
        return false;
    }
    const bool recovered = ack >= m_recover;
    const bool dupack = !advanced && !receivedData; // num_dupack
    const SequenceNumber32 nxt = m_tcb->m_highTxMark.Get();
    if (m_frto)
    {
        // F-RTO RFC 5682 sec 3.1 (the SACK-enhanced version, also without SACK).
        if (m_origAcked)
        {
            UndoLoss(ack, true); // step 3.b: data never resent was delivered, the RTO was spurious
            return false;
        }
        if (nxt > m_recover)
        {
            if (sacked || dupack)
            {
                m_frto = false; // step 3.a: the loss was real
            }
        }
        else if (advanced && !recovered)
        {
            m_recover = nxt;
            // Step 2.b: new data, if any is queued and the peer's window takes it.
            if (m_txBuffer->SizeFromSequence(nxt) > 0 && m_rWnd.Get() > static_cast<uint32_t>(nxt - ack))
            {
                return true;
            }
            m_frto = false;
        }
    }
    if (recovered || m_sackEnabled || !(nxt > m_recover && dupack))
    {
        return false; // (recovered: tcp_try_undo_recovery, TcpSocketBase and RenoHoldsLoss)
    }
    // Without SACK: "A Reno DUPACK means new data in F-RTO step 2.b above are delivered.
    // Lower inflight to clock out (re)transmissions" (tcp_add_reno_sack, limited by
    // tcp_limit_reno_sacked to packets_out less the lost ones, at least one).
    uint32_t lost = 0;
    for (const TcpTxItem* item : MagnetTxScoreboard::Sent(*m_txBuffer))
    {
        lost += MagnetTxScoreboard::IsLost(*item) ? 1 : 0;
    }
    const uint32_t out = m_packets->PacketsOut();
    const uint32_t holes = std::min(std::max(lost, 1U), out);
    const uint32_t prior = m_packets->GetLossSacked();
    const uint32_t now = std::min(prior + 1, out - holes);
    if (now > prior)
    {
        m_packets->SetLossSacked(now);
        m_packets->RenoDupAck(); // tcp_count_delivered(sacked_out - prior_sacked)
    }
    return false;
}

void
MagnetLinuxTcpSocket::UndoLoss(SequenceNumber32 ack, bool frtoUndo)
{
    // tcp_try_undo_loss: tcp_undo_cwnd_reduction(sk, true) unmarks every loss, sets cwnd to
    // undo_cwnd (tcp_reno_undo_cwnd, CUBIC's too: max(cwnd, prior_cwnd)) and ssthresh back to
    // prior_ssthresh if that is higher, has RACK look again (rack.advanced) and clears
    // undo_marker; icsk_retransmits = 0; then Open, unless without SACK snd_una is at high_seq
    // (tcp_is_non_sack_preventing_reopen: Loss held, RenoHoldsLoss) or the undo was by
    // timestamps (without SACK only F-RTO's undo reopens).
    for (TcpTxItem* item : MagnetTxScoreboard::Sent(*m_txBuffer))
    {
        MagnetTxScoreboard::ClearLost(*m_txBuffer, *item);
    }
    if (m_priorSsthresh)
    {
        if (!m_congestionControl->HasCongControl())
        {
            m_tcb->m_cWnd = std::max(m_tcb->m_cWnd.Get(), m_priorCwnd);
            m_tcb->m_cWndInfl = m_tcb->m_cWnd;
        }
        m_tcb->m_ssThresh = std::max(m_tcb->m_ssThresh.Get(), m_priorSsthresh);
    }
    m_rackAdvanced = true;
    m_undoMarker = false;
    m_retransmits = 0;
    m_lossStats.lossUndos++;
    m_lossStats.spuriousRtos += frtoUndo ? 1 : 0;
    if (!m_sackEnabled && (ack == m_recover || !frtoUndo))
    {
        return;
    }
    m_congestionControl->CongestionStateSet(m_tcb, TcpSocketState::CA_OPEN);
    m_tcb->m_congState = TcpSocketState::CA_OPEN;
    m_recoverActive = false; // from Open a new recovery may start at once (tcp_time_to_recover)
}

bool
MagnetLinuxTcpSocket::PacketDelayed() const
{
    // tcp_packet_delayed: retrans_stamp set, and the ACK's echo (ms, as ns-3's and Linux's
    // timestamps without usec_ts) before it (tcp_tsopt_ecr_before).
    if (!m_ackEcho || m_retransStamp == Time::Max())
    {
        return false;
    }
    const auto stamp = static_cast<uint32_t>(m_retransStamp.GetMilliSeconds());
    return static_cast<int32_t>(m_ackEcho - stamp) < 0;
}

void
MagnetLinuxTcpSocket::SendNewData()
{
    // tcp_write_xmit: new data while the window and the peer's window allow (no resend: NextSeg
    // would give the lost segments first).  F-RTO's push is TCP_NAGLE_OFF; a write's tcp_push
    // keeps Nagle, which the profile turns off while lost segments are out (UpdateNagle).
    if (!m_endPoint && !m_endPoint6)
    {
        return;
    }
    const uint32_t seg = m_tcb->m_segmentSize;
    while (m_packets->InFlight() < CwndPackets())
    {
        const SequenceNumber32 una = m_txBuffer->HeadSequence();
        const SequenceNumber32 nxt = m_tcb->m_highTxMark.Get();
        const uint32_t unsent = m_txBuffer->SizeFromSequence(nxt);
        const auto out = static_cast<uint32_t>(nxt - una);
        const uint32_t window = m_rWnd.Get() > out ? m_rWnd.Get() - out : 0;
        if (!unsent || !window)
        {
            break;
        }
        const uint32_t sz = SendDataPacket(nxt, std::min({unsent, window, seg}), true);
        if (!sz)
        {
            break;
        }
        m_tcb->m_nextTxSequence = std::max(m_tcb->m_nextTxSequence.Get(), nxt + sz);
    }
}

Time
MagnetLinuxTcpSocket::HostLag(Ptr<const Packet> packet) const
{
    TcpHeader header;
    if (!packet->PeekHeader(header))
    {
        return Time(0);
    }
    if (packet->GetSize() > header.GetSerializedSize())
    {
        return m_ackLag; // data (a FIN with it too): the softirq's ACK leaves after this
    }
    const uint8_t flags = header.GetFlags() & ~(TcpHeader::PSH | TcpHeader::URG | TcpHeader::CWR | TcpHeader::ECE);
    // A pure ACK: what it releases leaves after this.  SYN, RST and a FIN without data: at once
    // (the handshakes' timing is not what the lags were measured on; a listening socket's SYN
    // forks a new socket).
    return flags == TcpHeader::ACK ? m_replyLag : Time(0);
}

void
MagnetLinuxTcpSocket::DoForwardUp(Ptr<Packet> packet, const Address& fromAddress, const Address& toAddress)
{
    // The host's way in (AckLag, ReplyLag): TCP processes a segment its lag after it arrived,
    // and never before the one that arrived before it.  An ideal host (both 0): at once.
    if (m_ackLag.IsZero() && m_replyLag.IsZero())
    {
        ProcessSegment(packet, fromAddress, toAddress);
        return;
    }
    Time due = Simulator::Now() + HostLag(packet);
    if (!m_hostQueue.empty())
    {
        due = std::max(due, m_hostQueue.back().due);
    }
    if (m_hostQueue.empty() && due == Simulator::Now())
    {
        ProcessSegment(packet, fromAddress, toAddress);
        return;
    }
    m_hostQueue.push_back({packet, fromAddress, toAddress, due});
    if (!m_hostEvent.IsPending())
    {
        m_hostEvent = Simulator::Schedule(due - Simulator::Now(), &MagnetLinuxTcpSocket::HostIn, this);
    }
}

void
MagnetLinuxTcpSocket::HostIn()
{
    // Held for the processing: closing may release the last other reference (the endpoint's).
    Ptr<MagnetLinuxTcpSocket> self(this);
    HostSegment segment = m_hostQueue.front();
    m_hostQueue.pop_front();
    if (!m_hostQueue.empty())
    {
        m_hostEvent = Simulator::Schedule(m_hostQueue.front().due - Simulator::Now(), &MagnetLinuxTcpSocket::HostIn,
                                          this);
    }
    // Its endpoint released since it arrived (closed, reset): ns-3 would not have delivered it.
    if (m_endPoint == nullptr && m_endPoint6 == nullptr)
    {
        return;
    }
    ProcessSegment(segment.packet, segment.from, segment.to);
}

void
MagnetLinuxTcpSocket::ProcessSegment(Ptr<Packet> packet, const Address& fromAddress, const Address& toAddress)
{
    // TcpSocketBase's TimeWait() cancels its own timers (CancelAllTimers) and CloseAndNotify()
    // frees the endpoint; the profile's ran on (ClearXmitTimers).
    Ptr<MagnetLinuxTcpSocket> self(this); // the segment may close it
    const TcpStates_t before = m_state;
    HandleSegment(packet, fromAddress, toAddress);
    if (m_state != before && (m_state == TIME_WAIT || m_state == CLOSED))
    {
        ClearXmitTimers();
    }
}

void
MagnetLinuxTcpSocket::ClearXmitTimers()
{
    // tcp_time_wait and tcp_done stop the socket's timers (tcp_clear_xmit_timers ->
    // inet_csk_clear_xmit_timers: icsk_pending, the one retransmission timer the loss probe and
    // RACK's reordering timer take the place of, and the delayed ACK, icsk_ack.pending = 0);
    // what answers in TIME_WAIT is the timewait socket (tcp_timewait_state_process).  The
    // profile's loss probe, armed for data still out when CLOSING took an ACK for its FIN's,
    // resent that data from TIME_WAIT; its delayed ACK left from TIME_WAIT.
    Simulator::Cancel(m_probeTimer);
    Simulator::Cancel(m_reoTimer);
    Simulator::Cancel(m_delAckTimer);
    m_pending = 0;
}

void
MagnetLinuxTcpSocket::HandleSegment(Ptr<Packet> packet, const Address& fromAddress, const Address& toAddress)
{
    // In LAST_ACK (the peer closed first, and this end's FIN left with its last data) ns-3
    // takes any ACK for the FIN's and closes (ProcessLastAck), with data still out, lost
    // ones never resent.  Linux processes every ACK there (tcp_ack) and closes only when
    // the FIN is ACKed: an ACK short of it is taken as in CLOSE_WAIT.
    TcpHeader header;
    const bool parsed = packet->PeekHeader(header);
    // TIME_WAIT: TcpSocketBase traces the segment and does nothing; Linux ACKs what is not a
    // bare ACK at rcv_nxt (TimeWaitSegment).
    if (parsed && m_state == TIME_WAIT)
    {
        const uint32_t payload = packet->GetSize() - header.GetSerializedSize();
        TcpSocketBase::DoForwardUp(packet, fromAddress, toAddress);
        if (m_state == TIME_WAIT)
        {
            TimeWaitSegment(header, payload);
        }
        return;
    }
    // LISTEN: a segment with an ACK (its connection gone) draws a RST (ListenerReset).
    if (parsed && m_state == LISTEN && (header.GetFlags() & TcpHeader::ACK) && !(header.GetFlags() & TcpHeader::RST))
    {
        ListenerReset(header, fromAddress, toAddress);
        return;
    }
    // A SYN on a synchronized connection: a challenge ACK, the SYN discarded (SynChallenge).
    if (parsed && (header.GetFlags() & TcpHeader::SYN) && !(header.GetFlags() & TcpHeader::RST) &&
        (m_state == ESTABLISHED || m_state == CLOSE_WAIT || m_state == FIN_WAIT_1 || m_state == FIN_WAIT_2 ||
         m_state == CLOSING || m_state == LAST_ACK))
    {
        SynChallenge();
        return;
    }
    if (parsed)
    {
        ReplaceTsRecent(header, packet->GetSize() - header.GetSerializedSize());
    }
    // LAST_ACK: the peer's FIN again (its ACK of this end's FIN, or this end's FIN, lost), not
    // ACKing this end's FIN (LastAckFinAgain).
    if (parsed && m_state == LAST_ACK && (header.GetFlags() & TcpHeader::FIN) && (header.GetFlags() & TcpHeader::ACK) &&
        !(header.GetFlags() & (TcpHeader::SYN | TcpHeader::RST)) && header.GetAckNumber() <= m_tcb->m_highTxMark.Get())
    {
        LastAckFinAgain(packet, fromAddress, toAddress);
        return;
    }
    // FIN_WAIT_1, FIN_WAIT_2 (this end sent its FIN first): the peer's FIN on its last data.
    // ns-3 (ProcessWait) puts the FIN at the segment's first byte, behind the data it has just
    // queued, so its ACK leaves the FIN unacknowledged and the peer, in LAST_ACK, resends it
    // (to be ACKed from TIME_WAIT).  Linux queues the data, then the FIN after it
    // (tcp_data_queue, tcp_fin).  So: the data (as an ACK), then the FIN alone, at its place.
    if (parsed && (m_state == FIN_WAIT_1 || m_state == FIN_WAIT_2) && (header.GetFlags() & TcpHeader::FIN) &&
        (header.GetFlags() & TcpHeader::ACK) && !(header.GetFlags() & (TcpHeader::SYN | TcpHeader::RST)) &&
        packet->GetSize() > header.GetSerializedSize())
    {
        Ptr<Packet> data = packet->Copy();
        TcpHeader dataHeader;
        data->RemoveHeader(dataHeader);
        const uint32_t payload = data->GetSize();
        dataHeader.SetFlags(dataHeader.GetFlags() & ~TcpHeader::FIN);
        data->AddHeader(dataHeader);
        Ptr<MagnetLinuxTcpSocket> self(this); // the FIN may close it
        // One ACK for both, as the FIN's (tcp_fin sends it from within tcp_data_queue, before
        // tcp_ack_snd_check looks at the data's): the data's ACK decision waits for the FIN.
        m_finFollows = true;
        TcpSocketBase::DoForwardUp(data, fromAddress, toAddress);
        m_finFollows = false;
        if (m_state == FIN_WAIT_1 || m_state == FIN_WAIT_2)
        {
            Ptr<Packet> fin = Create<Packet>();
            TcpHeader finHeader = header;
            finHeader.SetSequenceNumber(header.GetSequenceNumber() + payload);
            finHeader.SetFlags(header.GetFlags() & ~TcpHeader::PSH);
            fin->AddHeader(finHeader);
            TcpSocketBase::DoForwardUp(fin, fromAddress, toAddress);
        }
        if (m_state != TIME_WAIT && m_state != CLOSED)
        {
            AckSndCheck(); // the FIN sent none (out of order): the data's as it would have been
        }
        return;
    }
    bool ackOnly = parsed &&
                   (header.GetFlags() & ~(TcpHeader::PSH | TcpHeader::URG | TcpHeader::CWR |
                                          TcpHeader::ECE)) == TcpHeader::ACK;
    // CLOSING (the two FINs crossed): every segment but a RST as tcp_rcv_state_process takes it
    // (ClosingSegment).
    if (parsed && m_state == CLOSING && !(header.GetFlags() & (TcpHeader::SYN | TcpHeader::RST)))
    {
        ClosingSegment(packet, header, fromAddress, toAddress);
        return;
    }
    if (m_state != LAST_ACK || !ackOnly || header.GetAckNumber() > m_tcb->m_highTxMark.Get())
    {
        TcpSocketBase::DoForwardUp(packet, fromAddress, toAddress);
        return;
    }
    m_state = CLOSE_WAIT;
    TcpSocketBase::DoForwardUp(packet, fromAddress, toAddress);
    if (m_state == CLOSE_WAIT)
    {
        m_state = LAST_ACK;
        // Taken as in CLOSE_WAIT, an ACK of all the data cancelled the timer that resends
        // the FIN (nothing is out there once the data is ACKed): re-arm it.
        RearmRto();
    }
}

void
MagnetLinuxTcpSocket::ClosingSegment(Ptr<Packet> packet, const TcpHeader& header, const Address& fromAddress,
                                     const Address& toAddress)
{
    // tcp_rcv_state_process in CLOSING (this end's FIN and the peer's crossed; the peer's is in
    // and ACKed).  ns-3's ProcessClosing went to TIME_WAIT on a bare ACK whose sequence is
    // rcv_nxt, whatever it ACKed (b18d4c4 took those short of the FIN to ClosingShortAck),
    // ignored one at any other sequence even when it ACKed the FIN, and closed at once (no
    // TIME_WAIT) with an ACK on a FIN+ACK.  Linux:
    // - no ACK flag: discarded;
    // - tcp_validate_incoming: a segment wholly before rcv_wup, or starting beyond the window
    //   (tcp_sequence), is not acceptable: a duplicate ACK (a bare ACK's at most once per
    //   tcp_invalid_ratelimit, tcp_oow_rate_limited), the segment discarded, its ACK not taken;
    // - tcp_ack: an ACK of what was never sent (after snd_nxt, the FIN counted) draws a
    //   challenge ACK (rate-limited) and is discarded;
    // - snd_una reaching write_seq (this ACK covers the FIN): tcp_time_wait, and the segment
    //   is consumed -- no ACK for it, the peer's FIN again included, whatever its sequence;
    // - else the ACK is taken and the FIN stays on its timer (ClosingShortAck).
    const uint8_t flags = header.GetFlags();
    if (!(flags & TcpHeader::ACK))
    {
        return;
    }
    const uint32_t payload = packet->GetSize() - header.GetSerializedSize();
    const bool fin = flags & TcpHeader::FIN;
    const SequenceNumber32 seq = header.GetSequenceNumber();
    const SequenceNumber32 end = seq + payload + (fin ? 1 : 0);
    if (end < m_rcvWup || seq > m_rcvWup + m_rcvWnd)
    {
        if (payload > 0 || fin || !OowRateLimited())
        {
            SendAck(); // tcp_send_dupack
        }
        return;
    }
    const SequenceNumber32 sndNxt = m_tcb->m_highTxMark.Get() + 1;
    if (header.GetAckNumber() > sndNxt)
    {
        if (!OowRateLimited())
        {
            SendAck(); // tcp_send_challenge_ack
        }
        return;
    }
    if (header.GetAckNumber() == sndNxt)
    {
        // TIME_WAIT as ns-3's ProcessClosing enters it (a bare ACK at rcv_nxt: TimeWait()).
        TcpHeader bare = header;
        bare.SetFlags(TcpHeader::ACK);
        bare.SetSequenceNumber(m_tcb->m_rxBuffer->NextRxSequence());
        Ptr<Packet> ack = Create<Packet>();
        ack->AddHeader(bare);
        TcpSocketBase::DoForwardUp(ack, fromAddress, toAddress);
        return;
    }
    ClosingShortAck(packet, fromAddress, toAddress);
}

bool
MagnetLinuxTcpSocket::OowRateLimited()
{
    // __tcp_oow_rate_limited: one out-of-window ACK (a duplicate ACK for a bare ACK not
    // acceptable, a challenge ACK) per tcp_invalid_ratelimit, from tp->last_oow_ack_time.
    if (m_challengeAckSent && Simulator::Now() - m_lastChallengeAck < MilliSeconds(kInvalidRateLimitMs))
    {
        return true;
    }
    m_challengeAckSent = true;
    m_lastChallengeAck = Simulator::Now();
    return false;
}

void
MagnetLinuxTcpSocket::ClosingShortAck(Ptr<Packet> packet, const Address& fromAddress, const Address& toAddress)
{
    // CLOSING: this end's FIN crossed the peer's and awaits its ACK.  ns-3 (ProcessClosing)
    // takes any ACK at rcv_nxt for it (TimeWait: every timer cancelled) and closes on the
    // peer's FIN again (CloseAndNotify), this end's FIN ACKed or not.  When that FIN was lost
    // (a full queue), the peer ACKed only the data before it -- and was left in FIN_WAIT_2 for
    // ever, the FIN never resent (seen with redis-benchmark's crossing closes, 4 cross flows).
    // Linux (tcp_rcv_state_process) takes the ACK (tcp_ack) and leaves CLOSING for TIME_WAIT only
    // once snd_una reaches write_seq; the FIN stays in the retransmission queue on its timer
    // (tcp_retransmit_timer).  The peer's FIN again lies before rcv_nxt: a duplicate ACK at once
    // (tcp_data_queue, out of window).  So: the ACK as in CLOSE_WAIT (ProcessWait: ReceivedAck
    // alone), the FIN's timer kept, and the duplicate ACK for a FIN.
    Ptr<Packet> ack = packet->Copy();
    TcpHeader ackHeader;
    ack->RemoveHeader(ackHeader);
    const bool fin = ackHeader.GetFlags() & TcpHeader::FIN;
    const uint32_t payload = ack->GetSize();
    ackHeader.SetFlags(ackHeader.GetFlags() & ~TcpHeader::FIN);
    ack->AddHeader(ackHeader);
    Ptr<MagnetLinuxTcpSocket> self(this); // an ACK may close it
    m_state = CLOSE_WAIT;
    TcpSocketBase::DoForwardUp(ack, fromAddress, toAddress);
    if (m_state != CLOSE_WAIT)
    {
        return;
    }
    m_state = CLOSING;
    // Taken as in CLOSE_WAIT, an ACK of all the data cancelled the one timer (NewAck): the
    // FIN is still out.  TcpSocketBase::ReTxTimeout resends it in CLOSING (FinTimer: backoff).
    if (!m_retxEvent.IsPending() && !m_probeTimer.IsPending() && !m_reoTimer.IsPending())
    {
        m_retxEvent = Simulator::Schedule(m_rto, &MagnetLinuxTcpSocket::ReTxTimeout, this);
    }
    if (fin && payload == 0)
    {
        SendAck();
    }
}

void
MagnetLinuxTcpSocket::LastAckFinAgain(Ptr<Packet> packet, const Address& fromAddress, const Address& toAddress)
{
    // In LAST_ACK the peer's FIN is in; it comes again when the peer (FIN_WAIT_1) resends it
    // because this end's ACK of it was lost -- and this end's FIN with it, both dropped at a
    // full queue.  ns-3 took any FIN+ACK there for the end (ProcessLastAck: CloseAndNotify):
    // the socket gone, this end's FIN never resent, the peer resent its FIN to the listener
    // until the run ended, its close never complete.  Linux (tcp_rcv_state_process) takes the
    // segment's ACK (tcp_ack; LAST_ACK ends only once snd_una reaches the FIN), and its FIN,
    // before rcv_nxt, goes to tcp_data_queue as out of window: a duplicate ACK at once
    // (tcp_enter_quickack_mode, with a D-SACK ns-3 does not send).  This end's FIN stays out,
    // resent on its RTO.  So: the segment without its FIN, as an ACK in LAST_ACK (ProcessSegment),
    // then the duplicate ACK (snd_nxt past the FIN, rcv_nxt) when the FIN brought no data.
    Ptr<Packet> ack = packet->Copy();
    TcpHeader header;
    ack->RemoveHeader(header);
    const uint32_t payload = ack->GetSize();
    header.SetFlags(header.GetFlags() & ~TcpHeader::FIN);
    ack->AddHeader(header);
    Ptr<MagnetLinuxTcpSocket> self(this); // an ACK may close it
    ProcessSegment(ack, fromAddress, toAddress);
    if (m_state == LAST_ACK && payload == 0)
    {
        SendAck();
    }
}

void
MagnetLinuxTcpSocket::TimeWaitSegment(const TcpHeader& header, uint32_t payload)
{
    // tcp_timewait_state_process, TIME_WAIT proper (PAWS aside): a bare ACK at rcv_nxt only
    // restarts the timer; a RST there ends TIME_WAIT (tcp_rfc1337 0); a SYN without ACK may
    // open a new connection (TCP_TW_SYN: not modelled, ignored as ns-3 does); any other
    // segment is out of window -- the peer's FIN resent because this end's ACK of it was
    // lost, its data resent -- and "ACKed immediately" (TCP_TW_ACK: tcp_v4_timewait_ack,
    // tw_snd_nxt and tw_rcv_nxt), the timer restarted if it has an ACK
    // (inet_twsk_reschedule, TCP_TIMEWAIT_LEN).  The ACK is rate-limited per TIME_WAIT socket
    // (tcp_timewait_check_oow_rate_limit: one per tcp_invalid_ratelimit, 500 ms) except for
    // a segment with data or a FIN (tcp_oow_rate_limited: "not likely part of an ACK loop").
    // ns-3 ignored every segment in TIME_WAIT: the peer, in LAST_ACK, resent its FIN until the
    // run ended, never closing.
    const uint8_t flags = header.GetFlags();
    const SequenceNumber32 seq = header.GetSequenceNumber();
    const uint32_t len = payload + ((flags & TcpHeader::SYN) ? 1 : 0) + ((flags & TcpHeader::FIN) ? 1 : 0);
    const SequenceNumber32 rcvNxt = m_tcb->m_rxBuffer->NextRxSequence();
    const bool restart = (flags & TcpHeader::ACK) || (seq == rcvNxt && len == 0);
    if (seq == rcvNxt && (len == 0 || (flags & TcpHeader::RST)))
    {
        if (flags & TcpHeader::RST)
        {
            CloseAndNotify(); // TIME_WAIT assassination (tcp_rfc1337 0)
            return;
        }
    }
    else if ((flags & TcpHeader::RST) || ((flags & TcpHeader::SYN) && !(flags & TcpHeader::ACK)))
    {
        return; // an old RST, or a new SYN
    }
    else
    {
        const bool limited = len == 0 || (flags & TcpHeader::SYN);
        if (!limited || !m_twAckSent || Simulator::Now() - m_lastTwAck >= MilliSeconds(kInvalidRateLimitMs))
        {
            if (limited)
            {
                m_twAckSent = true;
                m_lastTwAck = Simulator::Now();
            }
            // snd_nxt is past this end's FIN (ns-3 moves m_nextTxSequence there only on the
            // FIN's ACK, which CLOSING's way into TIME_WAIT does not take).
            m_tcb->m_nextTxSequence = std::max(m_tcb->m_nextTxSequence.Get(), m_tcb->m_highTxMark.Get() + 1);
            SendEmptyPacket(TcpHeader::ACK);
        }
    }
    if (restart)
    {
        m_timewaitEvent.Cancel();
        m_timewaitEvent = Simulator::Schedule(Seconds(2 * m_msl), &MagnetLinuxTcpSocket::CloseAndNotify, this);
    }
}

void
MagnetLinuxTcpSocket::ListenerReset(const TcpHeader& header, const Address& fromAddress, const Address& toAddress)
{
    // tcp_rcv_state_process, TCP_LISTEN: "if (th->ack) return 1" -- tcp_v4_do_rcv then resets
    // (tcp_v4_send_reset): a segment with an ACK that reaches the listener belongs to no
    // connection here, its own gone (reset, or closed: LAST_ACK's end, TIME_WAIT's).  The RST's
    // sequence is the segment's ACK number (the peer's rcv_nxt as it sent it: in window), no
    // ACK flag, no options (tcp_v4_send_reset puts no timestamp).  ns-3's listener
    // (ProcessListen) ignored it: a peer whose RST from the closed socket was lost resent its
    // data or FIN to the listener until it gave up (tcp_retries2's 924.6 s).
    TcpHeader rst;
    rst.SetFlags(TcpHeader::RST);
    rst.SetSequenceNumber(header.GetAckNumber());
    rst.SetAckNumber(SequenceNumber32(0));
    rst.SetSourcePort(header.GetDestinationPort());
    rst.SetDestinationPort(header.GetSourcePort());
    rst.SetWindowSize(0);
    Ptr<Packet> p = Create<Packet>();
    m_txTrace(p, rst, this);
    m_tcp->SendPacket(p, rst, toAddress, fromAddress, m_boundnetdevice);
}

void
MagnetLinuxTcpSocket::SynChallenge()
{
    // tcp_validate_incoming: a SYN on a synchronized connection (RFC 5961 4.2) -- the peer's
    // SYN-ACK resent because this end's ACK of it was lost, a SYN resent -- draws a challenge
    // ACK (tcp_send_challenge_ack: snd_nxt, rcv_nxt; per socket at most one per
    // tcp_invalid_ratelimit, 500 ms: __tcp_oow_rate_limited; the host-wide
    // tcp_challenge_ack_limit is off since Linux 6.0) and is discarded.  ns-3 took the SYN's
    // options and reset cwnd and ssthresh on it (DoForwardUp), then ignored it
    // (ProcessEstablished: "no action") and sent nothing: when the handshake's last ACK was
    // lost, a peer in SYN_RCVD with nothing to send resent its SYN-ACK until it gave up, the
    // connection never accepted.
    if (!OowRateLimited())
    {
        SendAck();
    }
}

void
MagnetLinuxTcpSocket::ReplaceTsRecent(const TcpHeader& header, uint32_t payload)
{
    // tcp_replace_ts_recent, from tcp_ack (FLAG_UPDATE_TS_RECENT) once tcp_validate_incoming
    // passed the segment: ts_recent, the value every ACK echoes, takes the TSval of an
    // acceptable segment (tcp_sequence: end_seq not before rcv_wup; an ACK neither older than
    // snd_una nor beyond snd_nxt) that starts at or before rcv_wup (!after(seq, rcv_wup)) and
    // passes PAWS (tcp_paws_check: TSval not before ts_recent).  So a segment resent after its
    // ACK was lost, data the receiver already has, is echoed in the ACK it draws, and the
    // sender's RTT sample (tcp_rtt_tsopt_us) is the resend's.  ns-3 takes a TSval only from a
    // segment at rcv_nxt (ProcessOptionTimestamp) and echoed the original's: an RTT sample of
    // RTO + RTT, which inflated srtt and rttvar and the next RTOs.
    const uint8_t flags = header.GetFlags();
    if (!m_timestampEnabled || !header.HasOption(TcpOption::TS) || !(flags & TcpHeader::ACK) ||
        (flags & (TcpHeader::SYN | TcpHeader::RST)) ||
        (m_state != ESTABLISHED && m_state != CLOSE_WAIT && m_state != FIN_WAIT_1 &&
         m_state != FIN_WAIT_2 && m_state != CLOSING && m_state != LAST_ACK))
    {
        return;
    }
    const SequenceNumber32 seq = header.GetSequenceNumber();
    const SequenceNumber32 end = seq + payload + ((flags & TcpHeader::FIN) ? 1 : 0);
    const SequenceNumber32 ack = header.GetAckNumber();
    if (end < m_rcvWup || seq > m_rcvWup || ack < m_txBuffer->HeadSequence() || ack > m_tcb->m_highTxMark.Get())
    {
        return;
    }
    auto ts = DynamicCast<const TcpOptionTS>(header.GetOption(TcpOption::TS));
    if (static_cast<int32_t>(m_timestampToEcho - ts->GetTimestamp()) <= 0)
    {
        m_timestampToEcho = ts->GetTimestamp();
    }
}

void
MagnetLinuxTcpSocket::NotifyConstructionCompleted()
{
    TcpSocketBase::NotifyConstructionCompleted();
    m_sndBuf = m_soSndBuf ? 2 * static_cast<uint64_t>(m_soSndBuf) : m_wmemDefault;
    ApplySndBuf();
}

// --------------------------------------------------------------- factory ---
TypeId
MagnetLinuxTcpSocketFactory::GetTypeId()
{
    static TypeId tid = TypeId("ns3::MagnetLinuxTcpSocketFactory")
                            .SetParent<SocketFactory>()
                            .SetGroupName("Internet")
                            .AddConstructor<MagnetLinuxTcpSocketFactory>();
    return tid;
}

Ptr<Socket>
MagnetLinuxTcpSocketFactory::CreateSocket()
{
    Ptr<Node> node = GetObject<Node>();
    Ptr<TcpL4Protocol> tcp = node ? node->GetObject<TcpL4Protocol>() : nullptr;
    NS_ABORT_MSG_UNLESS(tcp, "MagnetLinuxTcpSocketFactory: aggregate it to a node with TCP");
    TypeIdValue cc;
    TypeIdValue recovery;
    tcp->GetAttribute("SocketType", cc);
    tcp->GetAttribute("RecoveryType", recovery);
    ObjectFactory ccFactory(cc.Get().GetName());
    ObjectFactory recoveryFactory(recovery.Get().GetName());
    auto socket = CreateObject<MagnetLinuxTcpSocket>();
    socket->SetNode(node);
    socket->SetTcp(tcp);
    socket->SetRtt(CreateObject<MagnetLinuxRttEstimator>());
    socket->SetCongestionControlAlgorithm(ccFactory.Create<TcpCongestionOps>());
    socket->SetRecoveryAlgorithm(recoveryFactory.Create<TcpRecoveryOps>());
    return socket;
}

} // namespace ns3
