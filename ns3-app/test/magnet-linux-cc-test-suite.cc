/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The Linux profile's congestion control and recovery (MagnetLinuxCubic,
 * MagnetLinuxReno, MagnetLinuxPrrRecovery) on scripted ACKs, beside ns-3's
 * TcpCubic, TcpNewReno and TcpPrrRecovery given the same: HyStart's two exits,
 * Reno's growth and PRR's sending rate, as Linux 6.x's tcp_cubic.c,
 * tcp_reno_cong_avoid and tcp_cwnd_reduction compute them; and the
 * window the Linux profile's socket leaves recovery with (CUBIC and Reno).
 */
#include "magnet-linux-cubic.h"
#include "magnet-linux-prr-recovery.h"
#include "magnet-linux-reno.h"
#include "magnet-replay-helper.h"
#include "magnet-tcp-profile.h"

#include "ns3/config.h"
#include "ns3/error-model.h"
#include "ns3/inet-socket-address.h"
#include "ns3/ipv4-address-helper.h"
#include "ns3/point-to-point-helper.h"
#include "ns3/object-factory.h"
#include "ns3/pointer.h"
#include "ns3/simulator.h"
#include "ns3/string.h"
#include "ns3/tcp-cubic.h"
#include "ns3/tcp-linux-reno.h"
#include "ns3/tcp-prr-recovery.h"
#include "ns3/tcp-socket-state.h"
#include "ns3/test.h"
#include "ns3/uinteger.h"

#include <algorithm>
#include <functional>
#include <limits>

namespace ns3
{

namespace
{

constexpr uint32_t kMss = 1448;

Ptr<TcpSocketState>
SlowStartTcb(uint32_t cwnd)
{
    auto tcb = CreateObject<TcpSocketState>();
    tcb->m_segmentSize = kMss;
    tcb->m_cWnd = cwnd * kMss;
    tcb->m_ssThresh = std::numeric_limits<uint32_t>::max();
    tcb->m_highTxMark = SequenceNumber32(1 + 20 * kMss);
    tcb->m_srtt = MilliSeconds(60);
    return tcb;
}

/**
 * Slow start at a window of 20 on a 60 ms path, the first round `round`
 * segments long: ACK i (of one segment) arrives at `spacing` * i with RTT
 * rtts(i).  Returns when slow start ended (ssthresh set), or -1 ms.
 */
Time
HystartExit(Ptr<TcpCongestionOps> cc,
            Time spacing,
            uint32_t round,
            uint32_t acks,
            std::function<Time(uint32_t)> rtts)
{
    Ptr<TcpSocketState> tcb = SlowStartTcb(20);
    tcb->m_highTxMark = SequenceNumber32(1 + round * kMss);
    Time exit = MilliSeconds(-1);
    cc->Init(tcb);
    for (uint32_t i = 1; i <= acks; ++i)
    {
        Simulator::Schedule(spacing * i, [=, &exit]() {
            tcb->m_lastAckedSeq = SequenceNumber32(1 + i * kMss);
            if (i == round + 1)
            {
                tcb->m_highTxMark = SequenceNumber32(1 + 3 * round * kMss); // the next round was sent
            }
            tcb->m_lastRtt = rtts(i);
            cc->PktsAcked(tcb, 1, rtts(i));
            if (exit.IsNegative() && tcb->m_ssThresh.Get() != std::numeric_limits<uint32_t>::max())
            {
                exit = Simulator::Now();
            }
        });
    }
    Simulator::Run();
    Simulator::Destroy();
    return exit;
}

} // namespace

/**
 * HyStart's delay exit: one round of 60 ms samples, then a round of 69 ms ones
 * (3 ms apart: no ACK train).  Linux leaves slow start at the 9th sample of the
 * second round (69 > 60 + clamp(60 / 8, 4, 16) ms); TcpCubic's threshold is
 * the least RTT itself (a doubled RTT) and it stays in slow start.
 */
class LinuxHystartDelayTestCase : public TestCase
{
  public:
    LinuxHystartDelayTestCase()
        : TestCase("HyStart leaves slow start when the RTT grows by an eighth (4-16 ms), as Linux")
    {
    }

  private:
    void DoRun() override
    {
        auto rtts = [](uint32_t i) { return MilliSeconds(i <= 20 ? 60 : 69); };
        Time linux = HystartExit(CreateObject<MagnetLinuxCubic>(), MilliSeconds(3), 20, 40, rtts);
        NS_TEST_ASSERT_MSG_EQ(linux, MilliSeconds(3 * 29), "the 9th sample of the second round");
        Time ns3 = HystartExit(CreateObject<TcpCubic>(), MilliSeconds(3), 20, 40, rtts);
        NS_TEST_ASSERT_MSG_EQ(ns3.IsNegative(), true, "ns-3's TcpCubic waits for a doubled RTT");
    }
};

/**
 * HyStart's ACK train: ACKs 1 ms apart with a steady 60 ms RTT.  Linux (no
 * pacing) ends slow start once the round's train lasts over (60 ms + 1 ms of
 * GSO allowance) / 2, at the ACK 31 ms into it; TcpCubic waits for 60 ms
 * (50 ACKs here).
 */
class LinuxHystartTrainTestCase : public TestCase
{
  public:
    LinuxHystartTrainTestCase()
        : TestCase("HyStart's ACK train ends slow start after half the least RTT, as Linux")
    {
    }

  private:
    void DoRun() override
    {
        auto rtts = [](uint32_t) { return MilliSeconds(60); };
        Time linux = HystartExit(CreateObject<MagnetLinuxCubic>(), MilliSeconds(1), 60, 50, rtts);
        NS_TEST_ASSERT_MSG_EQ(linux, MilliSeconds(31), "the ACK 31 ms into the round");
        Time ns3 = HystartExit(CreateObject<TcpCubic>(), MilliSeconds(1), 60, 50, rtts);
        NS_TEST_ASSERT_MSG_EQ(ns3.IsNegative(), true, "ns-3's TcpCubic waits a whole RTT");
    }
};

/**
 * Slow start from the initial window of 10 over a 60 ms path whose link
 * carries a segment every 0.5 ms: each ACK (of one segment) grows the window by
 * one and sends two, so round k is a train of 10 x 2^(k-1) ACKs 0.5 ms apart,
 * with a gap before the next.  The RTT samples are held at the path's 60 ms
 * (the queue the doubling builds is left out), so that only the ACK train can
 * end slow start.  Returns the window it ended at (0: not within `acks`).
 */
uint32_t
HystartTrainExitWindow(Ptr<TcpCongestionOps> cc, uint32_t acks)
{
    Ptr<TcpSocketState> tcb = SlowStartTcb(10);
    tcb->m_highTxMark = SequenceNumber32(1);
    tcb->m_isCwndLimited = true;
    cc->Init(tcb); // established, nothing sent yet
    uint32_t sent = 0;
    Time linkFree; // when the link has carried what was sent so far
    uint32_t exitWindow = 0;
    std::function<void(uint32_t)> ack;
    auto send = [&](uint32_t count) {
        for (uint32_t n = 0; n < count && sent < acks; ++n)
        {
            ++sent;
            linkFree = std::max(linkFree, Simulator::Now()) + MicroSeconds(500);
            uint32_t seq = sent;
            Simulator::Schedule(linkFree + MicroSeconds(59500) - Simulator::Now(), [&ack, seq]() { ack(seq); });
        }
        tcb->m_highTxMark = SequenceNumber32(1 + sent * kMss);
    };
    ack = [&](uint32_t i) {
        if (exitWindow)
        {
            return;
        }
        tcb->m_lastAckedSeq = SequenceNumber32(1 + i * kMss);
        tcb->m_lastRtt = MilliSeconds(60);
        cc->PktsAcked(tcb, 1, MilliSeconds(60));
        if (tcb->m_ssThresh.Get() != std::numeric_limits<uint32_t>::max())
        {
            exitWindow = tcb->m_ssThresh.Get() / kMss;
            return;
        }
        cc->IncreaseWindow(tcb, 1);
        send(2);
    };
    send(10);
    Simulator::Run();
    Simulator::Destroy();
    return exitWindow;
}

/**
 * HyStart's rounds follow the flights from the connection's first ACK, also
 * while the window is below hystart_low_window (tcp_cubic.c since Linux 6.14,
 * "fix incorrect HyStart round start detection"): the third round's train (40
 * ACKs over 19.5 ms) is too short, the fourth's (80 over 39.5 ms) passes
 * (60 + 1) / 2 ms at its 63rd ACK, at a window of 80 + 62.  Rounds started at
 * the first ACK with a window of 16 end mid-flight, and their trains break at
 * the gaps between flights.
 */
class LinuxHystartRoundsTestCase : public TestCase
{
  public:
    LinuxHystartRoundsTestCase()
        : TestCase("HyStart's rounds start with the connection's first ACK, as Linux 6.14+")
    {
    }

  private:
    void DoRun() override
    {
        uint32_t window = HystartTrainExitWindow(CreateObject<MagnetLinuxCubic>(), 600);
        NS_TEST_ASSERT_MSG_EQ(window, 142U, "the ACK train 31 ms into the fourth round");
    }
};

/**
 * PRR with SACK: a window of 100 segments, ssthresh 70, each ACK SACKs one
 * segment and the sender sends whatever the window lets it.  Linux sends
 * ceil(70 / 100 x delivered) segments (7 after 10 ACKs) and ends a window later
 * with 70 in flight; ns-3's TcpPrrRecovery counts each duplicate ACK on top of
 * what it SACKed, and sends 14 after 10.
 */
class LinuxPrrTestCase : public TestCase
{
  public:
    LinuxPrrTestCase()
        : TestCase("PRR sends ssthresh over cwnd of what the SACKs delivered, as Linux")
    {
    }

  private:
    /** Segments sent after each of `acks` SACKs, and what is in flight at the end. */
    static std::pair<uint32_t, uint32_t> Sent(Ptr<TcpRecoveryOps> prr, uint32_t acks, uint32_t* inFlight)
    {
        auto tcb = CreateObject<TcpSocketState>();
        tcb->m_segmentSize = kMss;
        tcb->m_cWnd = 100 * kMss;
        tcb->m_ssThresh = 70 * kMss;
        uint32_t flight = 100;
        uint32_t sent = 0;
        uint32_t sentAfter10 = 0;
        for (uint32_t i = 1; i <= acks; ++i)
        {
            tcb->m_bytesInFlight = --flight * kMss; // one more segment SACKed
            if (i == 1)
            {
                prr->EnterRecovery(tcb, 3, 100 * kMss, kMss);
            }
            else
            {
                prr->DoRecovery(tcb, kMss, true);
            }
            while (tcb->m_cWnd.Get() >= (flight + 1) * kMss)
            {
                prr->UpdateBytesSent(kMss);
                tcb->m_bytesInFlight = ++flight * kMss;
                ++sent;
            }
            sentAfter10 = i == 10 ? sent : sentAfter10;
        }
        *inFlight = flight;
        return {sentAfter10, sent};
    }

    void DoRun() override
    {
        uint32_t flight = 0;
        auto [linux10, linux] = Sent(CreateObject<MagnetLinuxPrrRecovery>(), 100, &flight);
        NS_TEST_ASSERT_MSG_EQ(linux10, 7, "ceil(0.7 x 10) after 10 SACKed segments");
        NS_TEST_ASSERT_MSG_EQ(linux, 70, "a window delivered: ssthresh sent");
        NS_TEST_ASSERT_MSG_EQ(flight, 70, "and ssthresh in flight");
        auto [ns310, ns3] = Sent(CreateObject<TcpPrrRecovery>(), 100, &flight);
        NS_TEST_ASSERT_MSG_EQ(ns310, 14, "ns-3's TcpPrrRecovery: twice Linux's rate at first");
    }
};

/**
 * The window on the ACK that ends fast recovery: 400 kB written at once over
 * 20 Mbit/s and 15 ms each way (the Linux profile's socket, CUBIC and PRR), one
 * data segment lost in slow start (the 124th packet to arrive).  The ACK that
 * ends recovery acknowledges the retransmission and every segment SACKed
 * since; Linux sets cwnd to ssthresh (tcp_end_cwnd_reduction) and then grows
 * it by the packets this ACK newly delivered (tcp_cong_control's acked_sacked,
 * from tcp_newly_delivered: the retransmission, one packet), which a new CUBIC
 * epoch does not (its count needs two).  TcpSocketBase passed every segment
 * from the old snd_una, and the window left recovery that many ACKs ahead
 * (cwnd 50 for ssthresh 49 here), where Linux 6.18's traces over linkem show
 * cwnd = ssthresh after each recovery.  Without SACK the ending ACK delivers
 * one packet too: Linux counted each duplicate ACK as a packet delivered
 * (tcp_add_reno_sack) and counts a cumulative ACK as max(acked - sacked_out, 1)
 * (tcp_remove_reno_sacks); the profile counted every segment the ACK freed.
 */
class LinuxRecoveryExitTestCase : public TestCase
{
  public:
    LinuxRecoveryExitTestCase()
        : TestCase("the ACK that ends recovery grows cwnd by what it delivered, as Linux")
    {
    }

  private:
    struct Exit
    {
        uint32_t cwnd{0};     //!< the window once the ACK that ended recovery was processed
        uint32_t ssthresh{0};
        uint32_t recoveries{0};
    };

    static Exit Run(const std::string& cc, bool sack)
    {
        MagnetTcpConfig tcp;
        tcp.cc = cc;
        tcp.sack = sack;
        MagnetTcpProfile profile(tcp);
        profile.ApplyDefaults();
        Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(tcp.SegmentSize(1500)));
        NodeContainer nodes;
        nodes.Create(2);
        PointToPointHelper p2p;
        p2p.SetDeviceAttribute("DataRate", StringValue("20Mbps"));
        p2p.SetChannelAttribute("Delay", StringValue("15ms"));
        NetDeviceContainer devices = p2p.Install(nodes);
        MagnetTcpProfile::InstallStack(nodes);
        Ipv4InterfaceContainer addresses = Ipv4AddressHelper("10.9.0.0", "255.255.255.0").Assign(devices);
        auto errors = CreateObject<ReceiveListErrorModel>();
        errors->SetList({123});
        devices.Get(1)->SetAttribute("ReceiveErrorModel", PointerValue(errors));

        std::string factory = profile.SocketFactory().GetName();
        MagnetSinkHelper(factory, InetSocketAddress(Ipv4Address::GetAny(), 9)).Install(nodes.Get(1));
        MagnetReplayHelper replay(factory, InetSocketAddress(addresses.GetAddress(1), 9));
        replay.SetDemand({{0, 400000}});
        auto app = DynamicCast<MagnetReplayApplication>(replay.Install(nodes.Get(0)).Get(0));

        Exit exit;
        uint32_t cwnd = 0;
        Time ended = Time::Max();
        auto onCwnd = [&](uint32_t, uint32_t now) {
            cwnd = now;
            if (Simulator::Now() == ended)
            {
                exit.cwnd = now / kMss;
            }
        };
        auto onSsthresh = [&](uint32_t, uint32_t now) { exit.ssthresh = now / kMss; };
        auto onState = [&](TcpSocketState::TcpCongState_t from, TcpSocketState::TcpCongState_t to) {
            if (from == TcpSocketState::CA_RECOVERY && to == TcpSocketState::CA_OPEN && !exit.recoveries++)
            {
                ended = Simulator::Now();
                exit.cwnd = cwnd / kMss; // until the window changes on the same ACK
            }
        };
        Simulator::Schedule(MilliSeconds(40), [&]() {
            Ptr<Socket> socket = app->GetSocket();
            socket->TraceConnectWithoutContext("CongestionWindow", Callback<void, uint32_t, uint32_t>(onCwnd));
            socket->TraceConnectWithoutContext("SlowStartThreshold", Callback<void, uint32_t, uint32_t>(onSsthresh));
            socket->TraceConnectWithoutContext(
                "CongState",
                Callback<void, TcpSocketState::TcpCongState_t, TcpSocketState::TcpCongState_t>(onState));
        });
        Simulator::Stop(Seconds(2));
        Simulator::Run();
        Simulator::Destroy();
        return exit;
    }

    void DoRun() override
    {
        for (bool sack : {true, false})
        {
            for (const char* cc : {"TcpCubic", "TcpNewReno"}) // MagnetLinuxCubic, MagnetLinuxReno
            {
                Exit exit = Run(cc, sack);
                const std::string what = std::string(cc) + (sack ? "" : " without SACK");
                NS_TEST_ASSERT_MSG_EQ(exit.recoveries, 1U, what << ": one loss, one fast recovery");
                NS_TEST_ASSERT_MSG_GT(exit.ssthresh, 10U,
                                      what << ": a reduction from a window well past the initial one");
                NS_TEST_ASSERT_MSG_EQ(exit.cwnd, exit.ssthresh,
                                      what << ": cwnd = ssthresh: the retransmission alone is newly delivered");
            }
        }
    }
};

/**
 * Reno as the linux profile runs `--cc newreno` and `reno` (Linux's
 * tcp_reno_cong_avoid and tcp_reno_ssthresh), on scripted ACKs:
 * - an application-limited flow (3 packets a round, so never cwnd-limited:
 *   is_cwnd_limited false) keeps its initial window of 10 for 100 rounds;
 *   ns-3's TcpNewReno grows it by every packet ACKed;
 * - a cwnd-limited bulk flow in congestion avoidance grows one packet per
 *   window of packets ACKed (20 -> 21 after 20, -> 22 after 21 more), whether
 *   an ACK covers one packet or two; slow start's rest of an ACK counts there;
 * - ssthresh is half the window in packets (11 -> 5; ns-3's TcpLinuxReno 5.5
 *   segments), and a reduction clears the avoidance count.
 */
class LinuxRenoTestCase : public TestCase
{
  public:
    LinuxRenoTestCase()
        : TestCase("Reno grows the window only while it limits the flow, a packet a window, as Linux")
    {
    }

  private:
    static Ptr<TcpCongestionOps> ProfileReno(const std::string& cc)
    {
        MagnetTcpConfig tcp;
        tcp.model = "linux";
        tcp.cc = cc;
        ObjectFactory factory(MagnetTcpProfile(tcp).CongestionControl());
        return factory.Create<TcpCongestionOps>();
    }

    /** The window (packets) after `rounds` rounds of `perRound` packets ACKed one by one. */
    static uint32_t AppLimited(Ptr<TcpCongestionOps> cc, uint32_t rounds, uint32_t perRound)
    {
        Ptr<TcpSocketState> tcb = SlowStartTcb(10);
        cc->Init(tcb);
        for (uint32_t i = 0; i < rounds * perRound; ++i)
        {
            tcb->m_isCwndLimited = perRound >= tcb->m_cWnd / kMss; // in flight fills cwnd
            cc->IncreaseWindow(tcb, 1);
        }
        return tcb->m_cWnd / kMss;
    }

    /** Congestion avoidance at `cwnd`, cwnd-limited: the window after `acks` ACKs of `each` packets. */
    static uint32_t Bulk(Ptr<TcpCongestionOps> cc, Ptr<TcpSocketState> tcb, uint32_t acks, uint32_t each)
    {
        tcb->m_isCwndLimited = true;
        for (uint32_t i = 0; i < acks; ++i)
        {
            cc->IncreaseWindow(tcb, each);
        }
        return tcb->m_cWnd / kMss;
    }

    void DoRun() override
    {
        for (const char* name : {"TcpNewReno", "TcpLinuxReno"})
        {
            NS_TEST_ASSERT_MSG_EQ(AppLimited(ProfileReno(name), 100, 3), 10U,
                                  name << ": an application-limited window stays at 10");
        }
        NS_TEST_ASSERT_MSG_EQ(AppLimited(CreateObject<TcpNewReno>(), 100, 3), 310U,
                              "ns-3's TcpNewReno: slow start on every packet ACKed");

        Ptr<TcpCongestionOps> reno = ProfileReno("TcpNewReno");
        Ptr<TcpSocketState> tcb = SlowStartTcb(20);
        tcb->m_ssThresh = 20 * kMss;
        NS_TEST_ASSERT_MSG_EQ(Bulk(reno, tcb, 19, 1), 20U, "19 of 20 packets ACKed");
        NS_TEST_ASSERT_MSG_EQ(Bulk(reno, tcb, 1, 1), 21U, "a window of 20 ACKed: one more");
        NS_TEST_ASSERT_MSG_EQ(Bulk(reno, tcb, 10, 2), 21U, "20 of 21 in ACKs of two");
        NS_TEST_ASSERT_MSG_EQ(Bulk(reno, tcb, 1, 2), 22U, "22 of 21: one more, one counted");
        NS_TEST_ASSERT_MSG_EQ(Bulk(reno, tcb, 10, 2), 22U, "21 of 22 counted");
        reno->CongestionStateSet(tcb, TcpSocketState::CA_RECOVERY); // tcp_init_cwnd_reduction
        NS_TEST_ASSERT_MSG_EQ(Bulk(reno, tcb, 1, 1), 22U, "the count cleared: 1 of 22");

        tcb = SlowStartTcb(10);
        tcb->m_ssThresh = 15 * kMss;
        NS_TEST_ASSERT_MSG_EQ(Bulk(reno, tcb, 1, 8), 15U, "slow start up to ssthresh");
        NS_TEST_ASSERT_MSG_EQ(Bulk(reno, tcb, 1, 12), 16U, "3 of the 8 and 12 more: a window of 15");

        tcb->m_cWnd = 11 * kMss;
        NS_TEST_ASSERT_MSG_EQ(reno->GetSsThresh(tcb, 0), 5 * kMss, "tcp_reno_ssthresh: 11 >> 1");
        tcb->m_cWnd = 3 * kMss;
        NS_TEST_ASSERT_MSG_EQ(reno->GetSsThresh(tcb, 0), 2 * kMss, "at least 2");
        tcb->m_cWnd = 11 * kMss;
        NS_TEST_ASSERT_MSG_EQ(CreateObject<TcpLinuxReno>()->GetSsThresh(tcb, 0), 11 * kMss / 2,
                              "ns-3's TcpLinuxReno: half the bytes, 5.5 segments");
    }
};

/** The linux model runs Linux's CUBIC and PRR; the ns3 model ns-3's own. */
class LinuxProfileCcTestCase : public TestCase
{
  public:
    LinuxProfileCcTestCase()
        : TestCase("the linux profile selects MagnetLinuxCubic and MagnetLinuxPrrRecovery")
    {
    }

  private:
    static std::string Default(const std::string& name)
    {
        TypeId::AttributeInformation info;
        TypeId::LookupByName("ns3::TcpL4Protocol").LookupAttributeByName(name, &info);
        return info.initialValue->SerializeToString(info.checker);
    }

    void DoRun() override
    {
        MagnetTcpConfig tcp;
        tcp.model = "linux";
        MagnetTcpProfile(tcp).ApplyDefaults();
        NS_TEST_ASSERT_MSG_EQ(Default("SocketType"), "ns3::MagnetLinuxCubic", "Linux's CUBIC");
        NS_TEST_ASSERT_MSG_EQ(Default("RecoveryType"), "ns3::MagnetLinuxPrrRecovery", "Linux's PRR");
        NS_TEST_ASSERT_MSG_EQ(MagnetTcpProfile(tcp).CongestionControl(), "ns3::MagnetLinuxCubic",
                              "the replay's own sockets too (their TcpVariant)");
        tcp.cc = "TcpNewReno";
        MagnetTcpProfile(tcp).ApplyDefaults();
        NS_TEST_ASSERT_MSG_EQ(Default("SocketType"), "ns3::MagnetLinuxReno", "Linux's Reno");
        tcp.cc = "TcpBbr";
        MagnetTcpProfile(tcp).ApplyDefaults();
        NS_TEST_ASSERT_MSG_EQ(Default("SocketType"), "ns3::TcpBbr", "other controls are ns-3's");
        tcp.model = "ns3";
        tcp.cc = "TcpCubic";
        MagnetTcpProfile(tcp).ApplyDefaults();
        NS_TEST_ASSERT_MSG_EQ(Default("SocketType"), "ns3::TcpCubic", "the ns3 model: ns-3's CUBIC");
        NS_TEST_ASSERT_MSG_EQ(MagnetTcpProfile(tcp).CongestionControl(), "ns3::TcpCubic", "for its replays too");
        NS_TEST_ASSERT_MSG_EQ(Default("RecoveryType"), "ns3::TcpPrrRecovery", "and ns-3's PRR");
    }
};

class MagnetLinuxCcTestSuite : public TestSuite
{
  public:
    MagnetLinuxCcTestSuite()
        : TestSuite("magnet-linux-cc", Type::UNIT)
    {
        AddTestCase(new LinuxHystartDelayTestCase, Duration::QUICK);
        AddTestCase(new LinuxHystartTrainTestCase, Duration::QUICK);
        AddTestCase(new LinuxHystartRoundsTestCase, Duration::QUICK);
        AddTestCase(new LinuxPrrTestCase, Duration::QUICK);
        AddTestCase(new LinuxRecoveryExitTestCase, Duration::QUICK);
        AddTestCase(new LinuxRenoTestCase, Duration::QUICK);
        AddTestCase(new LinuxProfileCcTestCase, Duration::QUICK);
    }
};

static MagnetLinuxCcTestSuite g_magnetLinuxCcTestSuite;

} // namespace ns3
