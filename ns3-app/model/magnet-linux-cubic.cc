/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "magnet-linux-cubic.h"

#include "magnet-linux-packet-count.h"

#include "ns3/boolean.h"
#include "ns3/simulator.h"
#include "ns3/uinteger.h"

#include <algorithm>

namespace ns3
{

NS_OBJECT_ENSURE_REGISTERED(MagnetLinuxCubic);

namespace
{

constexpr uint32_t kHz = 250;           // CONFIG_HZ, as MagnetLinuxTcpSocket's tick
constexpr int64_t kJiffyUs = 1000000 / kHz;
constexpr uint32_t kBetaScale = 1024;   // BICTCP_BETA_SCALE
constexpr uint32_t kBeta = 717;         // beta: 717/1024
constexpr uint32_t kBicScale = 41;      // bic_scale: C = 41 * 10 / 1024 = 0.4
constexpr uint32_t kCubeRttScale = kBicScale * 10;
constexpr uint32_t kFriendlyScale = 8 * (kBetaScale + kBeta) / 3 / (kBetaScale - kBeta); // beta_scale: 15
constexpr uint64_t kCubeFactor = (1ULL << 40) / (kBicScale * 10); // 2^(3 * BICTCP_HZ) / (C / 100 ms)
constexpr uint32_t kHystartMinSamples = 8;
constexpr uint32_t kHystartDelayMinUs = 4000;
constexpr uint32_t kHystartDelayMaxUs = 16000;
constexpr uint32_t kHystartAckDeltaUs = 2000;
constexpr uint64_t kGsoMaxSize = 65536; // sk_gso_max_size: TCP always has software GSO
constexpr uint32_t kPacingSsRatio = 200; // tcp_pacing_ss_ratio, %
constexpr uint32_t kPacingCaRatio = 120; // tcp_pacing_ca_ratio, %

uint32_t
Segments(uint32_t bytes, uint32_t segmentSize)
{
    return bytes / segmentSize;
}

/** Linux's cubic_root: a table of cube roots of the top bits, then one Newton-Raphson step. */
uint32_t
CubicRoot(uint64_t a)
{
    static const uint8_t v[] = {
        0,   54,  54,  54,  118, 118, 118, 118, 123, 129, 134, 138, 143, 147, 151, 156,
        157, 161, 164, 168, 170, 173, 176, 179, 181, 185, 187, 190, 192, 194, 197, 199,
        200, 202, 204, 206, 209, 211, 213, 215, 217, 219, 221, 222, 224, 225, 227, 229,
        231, 232, 234, 236, 237, 239, 240, 242, 244, 245, 246, 248, 250, 251, 252, 254,
    };
    uint32_t b = a ? 64 - __builtin_clzll(a) : 0; // fls64
    if (b < 7)
    {
        return (static_cast<uint32_t>(v[a]) + 35) >> 6;
    }
    b = ((b * 84) >> 8) - 1;
    uint32_t shift = static_cast<uint32_t>(a >> (b * 3));
    uint32_t x = (static_cast<uint32_t>(v[shift] + 10) << b) >> 6;
    x = 2 * x + static_cast<uint32_t>(a / (static_cast<uint64_t>(x) * (x - 1)));
    return (x * 341) >> 10; // / 3
}

/** The ACK-train allowance for delays of the sender's GSO bursts (hystart_ack_delay), us. */
uint32_t
HystartAckDelay(Ptr<const TcpSocketState> tcb)
{
    // sk_pacing_rate as tcp_update_pacing_rate sets it for every socket (fq or not).
    uint64_t srtt = tcb->m_srtt.Get().GetMicroSeconds();
    if (srtt == 0)
    {
        return 0;
    }
    uint32_t cwnd = Segments(tcb->m_cWnd, tcb->m_segmentSize);
    uint32_t ratio = cwnd < Segments(tcb->m_ssThresh, tcb->m_segmentSize) / 2 ? kPacingSsRatio : kPacingCaRatio;
    uint64_t rate = uint64_t{tcb->m_segmentSize} * ratio * 10000 * std::max(cwnd, 1U) / srtt; // bytes/s
    return rate ? static_cast<uint32_t>(std::min<uint64_t>(1000, kGsoMaxSize * 4 * 1000000 / rate)) : 0;
}

uint32_t
NowUs()
{
    return static_cast<uint32_t>(Simulator::Now().GetMicroSeconds()); // tcp_mstamp
}

} // namespace

TypeId
MagnetLinuxCubic::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::MagnetLinuxCubic")
            .SetParent<MagnetLinuxReno>()
            .SetGroupName("Internet")
            .AddConstructor<MagnetLinuxCubic>()
            .AddAttribute("HyStart",
                          "HyStart (ACK train and delay), as net.ipv4 tcp_cubic's hystart",
                          BooleanValue(true),
                          MakeBooleanAccessor(&MagnetLinuxCubic::m_hystart),
                          MakeBooleanChecker())
            .AddAttribute("HyStartLowWindow",
                          "HyStart runs from this window on (hystart_low_window), packets",
                          UintegerValue(16),
                          MakeUintegerAccessor(&MagnetLinuxCubic::m_hystartLowWindow),
                          MakeUintegerChecker<uint32_t>());
    return tid;
}

MagnetLinuxCubic::MagnetLinuxCubic() = default;

MagnetLinuxCubic::MagnetLinuxCubic(const MagnetLinuxCubic& other) = default;

MagnetLinuxCubic::~MagnetLinuxCubic() = default;

std::string
MagnetLinuxCubic::GetName() const
{
    return "MagnetLinuxCubic";
}

uint32_t
MagnetLinuxCubic::GetDelayMin() const
{
    return m_delayMin;
}

uint32_t
MagnetLinuxCubic::Jiffies() const
{
    // tcp_jiffies32, one past the tick count so that 0 can mean "no epoch" as in Linux.
    return static_cast<uint32_t>(Simulator::Now().GetMicroSeconds() / kJiffyUs) + 1;
}

void
MagnetLinuxCubic::Reset()
{
    m_cnt = m_lastMaxCwnd = m_lastCwnd = m_lastTime = 0;
    m_originPoint = m_k = m_delayMin = m_epochStart = 0;
    m_ackCnt = m_tcpCwnd = 0;
    m_found = false;
}

void
MagnetLinuxCubic::HystartReset(Ptr<const TcpSocketState> tcb)
{
    m_roundStart = m_lastAck = NowUs();
    m_endSeq = tcb->m_highTxMark; // snd_nxt
    m_currRtt = ~0U;
    m_sampleCnt = 0;
}

void
MagnetLinuxCubic::Init(Ptr<TcpSocketState> tcb)
{
    Reset();
    if (m_hystart)
    {
        HystartReset(tcb);
    }
}

void
MagnetLinuxCubic::Update(uint32_t cwnd, uint32_t acked)
{
    m_ackCnt += acked;
    uint32_t now = Jiffies();
    if (m_lastCwnd == cwnd && static_cast<int32_t>(now - m_lastTime) <= static_cast<int32_t>(kHz / 32))
    {
        return;
    }
    // The cubic function is evaluated at most once a jiffy; a reduction restarts the epoch.
    if (!(m_epochStart && now == m_lastTime))
    {
        m_lastCwnd = cwnd;
        m_lastTime = now;
        if (m_epochStart == 0)
        {
            m_epochStart = now;
            m_ackCnt = acked;
            m_tcpCwnd = cwnd;
            if (m_lastMaxCwnd <= cwnd)
            {
                m_k = 0;
                m_originPoint = cwnd;
            }
            else
            {
                m_k = CubicRoot(kCubeFactor * (m_lastMaxCwnd - cwnd));
                m_originPoint = m_lastMaxCwnd;
            }
        }
        // t: time since the epoch began plus the least RTT, in 1/1024 s.
        uint64_t t = static_cast<int32_t>(now - m_epochStart);
        t += (m_delayMin + kJiffyUs - 1) / kJiffyUs; // usecs_to_jiffies
        t = (t << 10) / kHz;
        uint64_t offs = t < m_k ? m_k - t : t - m_k;
        auto delta = static_cast<uint32_t>((kCubeRttScale * offs * offs * offs) >> 40);
        uint32_t target = t < m_k ? m_originPoint - delta : m_originPoint + delta;
        m_cnt = target > cwnd ? cwnd / (target - cwnd) : 100 * cwnd;
        if (m_lastMaxCwnd == 0 && m_cnt > 20)
        {
            m_cnt = 20; // no loss yet: at least 5 % per RTT
        }
    }
    // TCP friendliness: never slower than Reno with the same beta would grow.
    uint32_t delta = (cwnd * kFriendlyScale) >> 3;
    while (delta && m_ackCnt > delta)
    {
        m_ackCnt -= delta;
        m_tcpCwnd++;
    }
    if (m_tcpCwnd > cwnd)
    {
        m_cnt = std::min(m_cnt, cwnd / (m_tcpCwnd - cwnd));
    }
    m_cnt = std::max(m_cnt, 2U);
}

void
MagnetLinuxCubic::IncreaseWindow(Ptr<TcpSocketState> tcb, uint32_t segmentsAcked)
{
    uint32_t acked = Delivered(tcb, segmentsAcked);
    if (!MagnetLinuxPacketCount::IsCwndLimited(tcb)) // tcp_is_cwnd_limited
    {
        return;
    }
    if (Segments(tcb->m_cWnd, tcb->m_segmentSize) < Segments(tcb->m_ssThresh, tcb->m_segmentSize))
    {
        // tcp_slow_start: up to ssthresh; what is left of the ACK counts in avoidance.
        acked = SlowStart(tcb, acked);
        if (acked == 0)
        {
            return;
        }
    }
    Update(Segments(tcb->m_cWnd, tcb->m_segmentSize), acked);
    CongAvoidAi(tcb, m_cwndCnt, m_cnt, acked); // tcp_cong_avoid_ai(tp, ca->cnt, acked)
}

uint32_t
MagnetLinuxCubic::GetSsThresh(Ptr<const TcpSocketState> tcb, uint32_t bytesInFlight [[maybe_unused]])
{
    // cubictcp_recalc_ssthresh: of the window, not of what is in flight.
    uint32_t cwnd = Segments(tcb->m_cWnd, tcb->m_segmentSize);
    m_epochStart = 0;
    if (cwnd < m_lastMaxCwnd)
    {
        m_lastMaxCwnd = cwnd * (kBetaScale + kBeta) / (2 * kBetaScale); // fast convergence
    }
    else
    {
        m_lastMaxCwnd = cwnd;
    }
    return std::max(cwnd * kBeta / kBetaScale, 2U) * tcb->m_segmentSize;
}

void
MagnetLinuxCubic::PktsAcked(Ptr<TcpSocketState> tcb, uint32_t segmentsAcked, const Time& rtt)
{
    MagnetLinuxReno::PktsAcked(tcb, segmentsAcked, rtt);
    if (!m_socketSamples)
    {
        // Driven without MagnetLinuxTcpSocket: this ACK's sample as TcpSocketBase keeps it.
        const int64_t last = tcb->m_lastRtt.Get().GetMicroSeconds();
        Sample(tcb, tcb->m_lastAckedSeq, last > 0 ? last : -1);
    }
}

void
MagnetLinuxCubic::AckSample(Ptr<TcpSocketState> tcb, SequenceNumber32 una, int64_t rttUs)
{
    m_socketSamples = true;
    Sample(tcb, una, rttUs);
}

void
MagnetLinuxCubic::Sample(Ptr<TcpSocketState> tcb, SequenceNumber32 una, int64_t rttUs)
{
    // cubictcp_acked
    if (rttUs < 0)
    {
        return; // no sample on this ACK
    }
    if (m_epochStart && static_cast<int32_t>(Jiffies() - m_epochStart) < static_cast<int32_t>(kHz))
    {
        return; // right after a reduction the samples still hold its queue
    }
    auto delay = static_cast<uint32_t>(std::max<int64_t>(rttUs, 1));
    if (m_delayMin == 0 || m_delayMin > delay)
    {
        m_delayMin = delay;
    }
    const uint32_t cwnd = Segments(tcb->m_cWnd, tcb->m_segmentSize);
    if (!m_found && m_hystart && cwnd < Segments(tcb->m_ssThresh, tcb->m_segmentSize))
    {
        HystartUpdate(tcb, una, delay);
    }
}

void
MagnetLinuxCubic::HystartUpdate(Ptr<TcpSocketState> tcb, SequenceNumber32 una, uint32_t delay)
{
    if (una > m_endSeq) // snd_una passed the round's end
    {
        HystartReset(tcb);
    }
    // Rounds follow the flights from the first ACK on; the exits wait for a window
    // of hystart_low_window (Linux 6.14: a round started there ends mid-flight).
    const uint32_t cwnd = Segments(tcb->m_cWnd, tcb->m_segmentSize);
    if (cwnd < m_hystartLowWindow)
    {
        return;
    }
    // ACK train: closely spaced ACKs of one round lasting over half the least RTT (unpaced).
    uint32_t now = NowUs();
    if (static_cast<int32_t>(now - m_lastAck) <= static_cast<int32_t>(kHystartAckDeltaUs))
    {
        m_lastAck = now;
        uint32_t threshold = (m_delayMin + HystartAckDelay(tcb)) >> 1;
        if (static_cast<int32_t>(now - m_roundStart) > static_cast<int32_t>(threshold))
        {
            m_found = true;
            tcb->m_ssThresh = cwnd * tcb->m_segmentSize;
        }
    }
    // Delay: the round's least RTT over 8 samples above the least ever by min/8 in [4, 16] ms.
    m_currRtt = std::min(m_currRtt, delay);
    if (m_sampleCnt < kHystartMinSamples)
    {
        m_sampleCnt++;
    }
    else if (m_currRtt > m_delayMin + std::clamp(m_delayMin >> 3, kHystartDelayMinUs, kHystartDelayMaxUs))
    {
        m_found = true;
        tcb->m_ssThresh = cwnd * tcb->m_segmentSize;
    }
}

void
MagnetLinuxCubic::CongestionStateSet(Ptr<TcpSocketState> tcb, const TcpSocketState::TcpCongState_t newState)
{
    MagnetLinuxReno::CongestionStateSet(tcb, newState); // snd_cwnd_cnt, the recovery's end
    if (newState == TcpSocketState::CA_LOSS)
    {
        Reset();
        HystartReset(tcb);
    }
}

Ptr<TcpCongestionOps>
MagnetLinuxCubic::Fork()
{
    return CopyObject<MagnetLinuxCubic>(this);
}

} // namespace ns3
