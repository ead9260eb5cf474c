/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Tests of the magnet replay application, in ns-3's TestSuite style:
 * demand files in either byte order, writes issued at trace times when the
 * path is not the bottleneck, bytes conserved when TCP's buffer is full, and
 * through chains of stacks (offline and live); writes beyond 2^32 bytes; and
 * the models of the paths: linkem's loss draws, the Poisson source, cross
 * traffic sharing a bottleneck, jitter that keeps order, a queue in bytes that counts
 * IP bytes as linkem's; PSH on write ends in the Linux profile.  Run: magnet-replay-test
 * (magnet's build: TestRunner options apply, e.g. --verbose), or ns-3's test.py
 * --suite=magnet-replay in an ns-3 tree.
 */
#include "magnet-app-replay-helper.h"
#include "magnet-chain-helper.h"
#include "magnet-linkem-loss-model.h"
#include "magnet-poisson-application.h"
#include "magnet-replay-helper.h"
#include "magnet-tcp-profile.h"

#include "ns3/boolean.h"
#include "ns3/config.h"
#include "ns3/double.h"
#include "ns3/error-model.h"
#include "ns3/inet-socket-address.h"
#include "ns3/internet-stack-helper.h"
#include "ns3/ipv4-global-routing-helper.h"
#include "ns3/ipv4-header.h"
#include "ns3/packet-sink-helper.h"
#include "ns3/packet-sink.h"
#include "ns3/point-to-point-helper.h"
#include "ns3/ppp-header.h"
#include "ns3/pointer.h"
#include "ns3/point-to-point-net-device.h"
#include "ns3/queue.h"
#include "ns3/random-variable-stream.h"
#include "ns3/rng-seed-manager.h"
#include "ns3/simulator.h"
#include "ns3/string.h"
#include "ns3/tcp-header.h"
#include "ns3/tcp-socket-factory.h"
#include "ns3/test.h"
#include "ns3/traffic-control-helper.h"
#include "ns3/udp-socket-factory.h"
#include "ns3/uinteger.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <cstring>
#include <fstream>
#include <unistd.h>

using namespace ns3;

namespace
{

/** Writes of random sizes at random, increasing times (seeded). */
MagnetDemand
RandomDemand(uint32_t n, uint32_t maxSize, int64_t maxGapNs, uint32_t seed)
{
    auto sizes = CreateObject<UniformRandomVariable>();
    sizes->SetStream(seed);
    MagnetDemand demand;
    int64_t t = 0;
    for (uint32_t i = 0; i < n; ++i)
    {
        demand.push_back({t, 1 + sizes->GetInteger(0, maxSize - 1)});
        t += 1000 + static_cast<int64_t>(sizes->GetValue(0, static_cast<double>(maxGapNs)));
    }
    return demand;
}

/** Periodic writes: `size` bytes every `period`. */
MagnetDemand
PeriodicDemand(uint32_t n, uint32_t size, Time period)
{
    MagnetDemand demand;
    for (uint32_t i = 0; i < n; ++i)
    {
        demand.push_back({static_cast<int64_t>(i) * period.GetNanoSeconds(), size});
    }
    return demand;
}

std::string
TempPath(const std::string& name)
{
    const char* dir = std::getenv("TMPDIR");
    return std::string(dir ? dir : "/tmp") + "/mgns3-test-" + std::to_string(getpid()) + "-" + name;
}

/** Write `demand` as SOCK_SEND records of stream `sockid` (plus noise the reader must skip). */
void
WriteDemandTrace(const std::string& path, const MagnetDemand& demand, uint64_t sockid)
{
    MagnetTraceWriter w(path, MAGNET_CLOCK_SYNTHETIC, "test", MAGNET_BIT_SOCK_SEND, "");
    for (const auto& e : demand)
    {
        w.Record(sockid, 1000000000 + e.timeNs, MAGNET_SOCK_SEND, static_cast<int32_t>(e.size));
        w.Record(sockid, 1000000000 + e.timeNs + 1, MAGNET_DEV_SEND, 1448);
        w.Record(sockid, 1000000000 + e.timeNs + 2, MAGNET_SOCK_SEND, -11); // EAGAIN: not demand
    }
    w.Close();
}

/** Byte-swap every record of a 24-byte-record trace in place: the other machine's byte order. */
void
SwapTrace(const std::string& path)
{
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    for (size_t off = 0; off + MAGNET_CORE_SIZE <= bytes.size(); off += MAGNET_CORE_SIZE)
    {
        magnet_core r;
        std::memcpy(&r, bytes.data() + off, sizeof r);
        uint32_t size = static_cast<uint32_t>(r.size);
        // META text chunks are raw bytes in file order: they keep their order.
        bool text = r.event == MAGNET_META &&
                    ((size & 0xFFFF) == MAGNET_META_PRODUCER || (size & 0xFFFF) == MAGNET_META_FILTER);
        r.sockid = text ? r.sockid : __builtin_bswap64(r.sockid);
        r.timestamp = __builtin_bswap64(r.timestamp);
        r.event = __builtin_bswap32(r.event);
        r.size = static_cast<int32_t>(__builtin_bswap32(size));
        std::memcpy(bytes.data() + off, &r, sizeof r);
    }
    f.seekp(0);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

/** Two nodes joined by one point-to-point link, TCP segment size `mss`. */
struct Link
{
    NodeContainer nodes;
    NetDeviceContainer devices;
    Ipv4InterfaceContainer addresses;

    Link(const std::string& rate, const std::string& delay, uint32_t mss, uint32_t sndBuf)
    {
        Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(mss));
        Config::SetDefault("ns3::TcpSocket::SndBufSize", UintegerValue(sndBuf));
        nodes.Create(2);
        PointToPointHelper p2p;
        p2p.SetDeviceAttribute("DataRate", StringValue(rate));
        p2p.SetChannelAttribute("Delay", StringValue(delay));
        devices = p2p.Install(nodes);
        InternetStackHelper().Install(nodes);
        Ipv4AddressHelper ip("10.9.0.0", "255.255.255.0");
        addresses = ip.Assign(devices);
        TrafficControlHelper().Uninstall(devices);
    }

    /** A replay of `demand` on the first node into a sink on the second. */
    std::pair<Ptr<MagnetReplayApplication>, Ptr<MagnetSinkApplication>> Install(
        const MagnetDemand& demand,
        Time startOffset = Seconds(0))
    {
        MagnetReplayHelper replay("ns3::TcpSocketFactory", InetSocketAddress(addresses.GetAddress(1), 9));
        replay.SetDemand(demand);
        replay.SetAttribute("StartOffset", TimeValue(startOffset));
        MagnetSinkHelper sinks("ns3::TcpSocketFactory", InetSocketAddress(Ipv4Address::GetAny(), 9));
        return {DynamicCast<MagnetReplayApplication>(replay.Install(nodes.Get(0)).Get(0)),
                DynamicCast<MagnetSinkApplication>(sinks.Install(nodes.Get(1)).Get(0))};
    }
};

} // namespace

// --------------------------------------------------------------- demand file ---

/** The demand read back equals the demand written, in either byte order, stream by stream. */
class MagnetDemandFileTestCase : public TestCase
{
  public:
    MagnetDemandFileTestCase()
        : TestCase("demand files: round trip, both byte orders, stream choice, bad input")
    {
    }

  private:
    void DoRun() override
    {
        MagnetDemand demand = RandomDemand(500, 70000, 50000000, 3);
        std::string path = TempPath("demand.magnet");
        WriteDemandTrace(path, demand, 7);
        NS_TEST_ASSERT_MSG_EQ((ReadMagnetDemand(path) == demand), true, "native round trip");
        NS_TEST_ASSERT_MSG_EQ((ReadMagnetDemand(path, 7) == demand), true, "by stream id");
        SwapTrace(path);
        NS_TEST_ASSERT_MSG_EQ((ReadMagnetDemand(path) == demand), true, "byte-swapped file");
        NS_TEST_ASSERT_MSG_EQ(Throws(path, 8), true, "a stream with no writes is refused");

        {
            MagnetTraceWriter w(path, MAGNET_CLOCK_SYNTHETIC, "test", 0, "");
            w.Record(1, 10, MAGNET_SOCK_SEND, 100);
            w.Record(2, 20, MAGNET_SOCK_SEND, 200);
            w.Close();
        }
        NS_TEST_ASSERT_MSG_EQ(Throws(path, 0), true, "two streams without a choice are refused");
        NS_TEST_ASSERT_MSG_EQ(ReadMagnetDemand(path, 2).at(0).size, 200, "stream 2 chosen");

        std::ofstream(path, std::ios::app) << "xyz"; // a truncated final record
        NS_TEST_ASSERT_MSG_EQ(Throws(path, 0), true, "a truncated trace is refused");
        std::ofstream(path, std::ios::trunc) << std::string(48, 'a');
        NS_TEST_ASSERT_MSG_EQ(Throws(path, 0), true, "a file that is not a trace is refused");
        std::remove(path.c_str());
        NS_TEST_ASSERT_MSG_EQ(Throws(path, 0), true, "a missing file is refused");
    }

    static bool Throws(const std::string& path, uint64_t sockid)
    {
        try
        {
            ReadMagnetDemand(path, sockid);
        }
        catch (const MagnetTraceError& e)
        {
            return std::string(e.what()).rfind(path + ": ", 0) == 0;
        }
        return false;
    }
};

// ------------------------------------------------------------ write timing ---

/** On a path that is not the bottleneck, every write goes out whole, exactly at its trace time. */
class MagnetWriteTimingTestCase : public TestCase
{
  public:
    MagnetWriteTimingTestCase()
        : TestCase("writes issued at trace times when the path is not the bottleneck")
    {
    }

  private:
    std::vector<std::pair<Time, uint32_t>> m_writes;

    void OnWrite(uint32_t bytes, Time due)
    {
        m_writes.emplace_back(Simulator::Now(), bytes);
    }

    void DoRun() override
    {
        MagnetDemand demand = RandomDemand(400, 30000, 20000000, 5); // <= 12 Mb/s offered
        Link link("1Gbps", "5ms", 1448, 1 << 20);
        auto [app, sink] = link.Install(demand, MilliSeconds(3));
        app->TraceConnectWithoutContext("Write", MakeCallback(&MagnetWriteTimingTestCase::OnWrite, this));
        Simulator::Run();

        const auto& stats = app->GetStats();
        NS_TEST_ASSERT_MSG_EQ(m_writes.size(), demand.size(), "one Send() per write");
        Time origin = stats.connected + MilliSeconds(3);
        for (size_t i = 0; i < demand.size(); ++i)
        {
            NS_TEST_ASSERT_MSG_EQ(m_writes[i].first, origin + NanoSeconds(demand[i].timeNs),
                                  "write " << i << " at its trace time");
            NS_TEST_ASSERT_MSG_EQ(m_writes[i].second, demand[i].size, "write " << i << " whole");
        }
        NS_TEST_ASSERT_MSG_EQ(stats.lateWrites, 0, "no write late");
        NS_TEST_ASSERT_MSG_EQ(sink->GetTotalRx(), MagnetDemandBytes(demand), "bytes conserved");
        Simulator::Destroy();
    }
};

// ------------------------------------------------------------- full buffer ---

/** When the send buffer is full the remainder waits: nothing dropped, lag recorded, order kept. */
class MagnetFullBufferTestCase : public TestCase
{
  public:
    MagnetFullBufferTestCase()
        : TestCase("a full send buffer delays writes, never drops bytes")
    {
    }

  private:
    uint64_t m_bytes{0};
    Time m_lastDue;
    bool m_ordered{true};

    void OnWrite(uint32_t bytes, Time due)
    {
        m_bytes += bytes;
        m_ordered = m_ordered && due >= m_lastDue;
        m_lastDue = due;
    }

    void DoRun() override
    {
        MagnetDemand demand = PeriodicDemand(40, 65536, MilliSeconds(10)); // 52 Mb/s offered
        Link link("2Mbps", "20ms", 1448, 16384);
        auto [app, sink] = link.Install(demand);
        app->TraceConnectWithoutContext("Write", MakeCallback(&MagnetFullBufferTestCase::OnWrite, this));
        Simulator::Run();

        const auto& stats = app->GetStats();
        uint64_t total = MagnetDemandBytes(demand);
        NS_TEST_ASSERT_MSG_EQ(m_bytes, total, "every byte handed to TCP");
        NS_TEST_ASSERT_MSG_EQ(sink->GetTotalRx(), total, "every byte delivered");
        NS_TEST_ASSERT_MSG_GT(stats.sendCalls, demand.size(), "writes were split");
        NS_TEST_ASSERT_MSG_GT(stats.lateWrites, 0, "lag recorded");
        NS_TEST_ASSERT_MSG_GT(stats.maxLag, Seconds(1), "the link drains 2.6 MB in about 10 s");
        NS_TEST_ASSERT_MSG_EQ(m_ordered, true, "writes go out in order");
        Simulator::Destroy();
    }
};

// ------------------------------------------------------------------ chains ---

/** Through every stack of a chain, bytes are conserved and the next stack replays this one's wire. */
class MagnetChainTestCase : public TestCase
{
  public:
    MagnetChainTestCase(bool live)
        : TestCase(std::string("chain of 3 stacks, ") + (live ? "live relays" : "offline re-replay")),
          m_live(live)
    {
    }

  private:
    bool m_live;

    void DoRun() override
    {
        MagnetChainConfig config;
        config.stacks = 3;
        config.live = m_live;
        config.paths[0].rateBps = 10000000;
        MagnetDemand demand = PeriodicDemand(100, 10240, MilliSeconds(20)); // 4 Mb/s
        std::vector<MagnetStackResult> results = MagnetChain(config).Run(demand);
        NS_TEST_ASSERT_MSG_EQ(results.size(), 3, "three stacks ran");
        uint64_t total = MagnetDemandBytes(demand);
        for (size_t k = 0; k < results.size(); ++k)
        {
            const auto& r = results[k];
            NS_TEST_ASSERT_MSG_EQ(r.demandBytes, total, "stack " << r.stack << " given every byte");
            NS_TEST_ASSERT_MSG_EQ(r.app.bytesSent, total, "stack " << r.stack << " sent every byte");
            NS_TEST_ASSERT_MSG_EQ(r.sinkBytes, total, "stack " << r.stack << " delivered every byte");
            NS_TEST_ASSERT_MSG_EQ(r.counts.devSendBytes, total, "no loss, no retransmission");
            NS_TEST_ASSERT_MSG_LT_OR_EQ(r.counts.devSendBytes / r.counts.devSend, r.segmentSize,
                                        "segments no larger than the MSS");
            if (!m_live && k > 0)
            {
                NS_TEST_ASSERT_MSG_EQ(r.demandWrites, results[k - 1].counts.devSend,
                                      "stack " << r.stack << " writes = stack " << k << "'s segments");
            }
            if (m_live && k > 0)
            {
                NS_TEST_ASSERT_MSG_EQ(r.demandWrites, results[k - 1].sinkReads,
                                      "relay " << r.stack << " writes = stack " << k << "'s reads");
            }
        }
    }
};

// ------------------------------------------------------------ 64-bit sizes ---

/** A write of more than 2^32 bytes is one write of that many bytes, not of its low 32 bits. */
class MagnetHugeWriteTestCase : public TestCase
{
  public:
    MagnetHugeWriteTestCase()
        : TestCase("a write of 2^32 + 100 bytes goes out whole, not as 100 bytes")
    {
    }

  private:
    void DoRun() override
    {
        const uint64_t huge = (uint64_t{1} << 32) + 100;
        Link link("1Gbps", "1ms", 1448, 1 << 20);
        auto [app, sink] = link.Install({{0, huge}});
        app->SetStopTime(MilliSeconds(300));
        sink->SetStopTime(MilliSeconds(300));
        Simulator::Stop(MilliSeconds(300));
        Simulator::Run();
        const auto& stats = app->GetStats();
        NS_TEST_ASSERT_MSG_EQ(stats.writesDue, 1, "one write");
        NS_TEST_ASSERT_MSG_EQ(stats.bytesDue, huge, "of 2^32 + 100 bytes");
        NS_TEST_ASSERT_MSG_GT(sink->GetTotalRx(), 10000000, "more than its low 32 bits went out");
        Simulator::Destroy();
    }
};

// ------------------------------------------------------------ loss models ---

/**
 * linkem's loss draws (MagnetLinkemLossModel): Bernoulli at its rate, the Gilbert-Elliott
 * chain at its long-run rate in bursts of 1/R, its draws the seed's, again after Reset.
 * That they are linkem's own, decision for decision, tests/test_ns3.py checks against
 * linkem's core.c.
 */
class MagnetLinkemLossTestCase : public TestCase
{
  public:
    MagnetLinkemLossTestCase()
        : TestCase("linkem's loss: Bernoulli rate, Gilbert-Elliott rate and bursts, seeded draws")
    {
    }

  private:
    static Ptr<MagnetLinkemLossModel> Model(uint64_t seed, bool ge, double p, double r, double bad,
                                            double good)
    {
        return CreateObjectWithAttributes<MagnetLinkemLossModel>(
            "Seed", UintegerValue(seed), "GilbertElliott", BooleanValue(ge), "P", DoubleValue(p),
            "R", DoubleValue(r), "LossBad", DoubleValue(bad), "LossGood", DoubleValue(good));
    }

    static std::vector<bool> Draw(Ptr<MagnetLinkemLossModel> model, uint32_t n)
    {
        std::vector<bool> lost(n);
        for (uint32_t i = 0; i < n; ++i)
        {
            lost[i] = model->IsCorrupt(Create<Packet>(100));
        }
        return lost;
    }

    void DoRun() override
    {
        const uint32_t n = 400000;
        auto bernoulli = Model(4, false, 0.01, 1, 1, 0);
        std::vector<bool> first = Draw(bernoulli, n);
        double rate = std::count(first.begin(), first.end(), true) / double(n);
        NS_TEST_ASSERT_MSG_EQ_TOL(rate, 0.01, 0.001, "Bernoulli at 1 %");
        bernoulli->Reset();
        NS_TEST_ASSERT_MSG_EQ((Draw(bernoulli, n) == first), true, "Reset: the seed's draws again");
        std::vector<bool> other = Draw(Model(5, false, 0.01, 1, 1, 0), n);
        uint32_t both = 0;
        for (uint32_t i = 0; i < n; ++i)
        {
            both += first[i] && other[i];
        }
        // Independent seeds share 1 % of the ~4000 losses (40); related draws would share more.
        NS_TEST_ASSERT_MSG_LT(both, 80U, "seeds 4 and 5 share " << both << " losses");

        auto ge = Model(6, true, 0.01, 0.25, 1.0, 0.0);
        uint32_t lost = 0;
        uint32_t bursts = 0;
        bool previous = false;
        for (uint32_t i = 0; i < n; ++i)
        {
            bool now = ge->IsCorrupt(Create<Packet>(100));
            lost += now;
            bursts += now && !previous;
            previous = now;
        }
        double expected = 0.01 / (0.01 + 0.25); // 3.85 %
        NS_TEST_ASSERT_MSG_EQ_TOL(lost / double(n), expected, 0.1 * expected, "long-run loss rate");
        NS_TEST_ASSERT_MSG_EQ_TOL(lost / double(bursts), 4.0, 0.4, "bursts of 1/R = 4 packets");
        NS_TEST_ASSERT_MSG_EQ(ge->GetLost(), lost, "counts its losses");
        NS_TEST_ASSERT_MSG_EQ(ge->GetPackets(), n, "counts its packets");

        // Loss 50 % in the bad state, 1 % in the good one, switching often: a mixture.
        std::vector<bool> mixed = Draw(Model(7, true, 0.5, 0.5, 0.5, 0.01), n);
        double mixedRate = std::count(mixed.begin(), mixed.end(), true) / double(n);
        NS_TEST_ASSERT_MSG_EQ_TOL(mixedRate, 0.255, 0.01, "(50 % + 1 %) / 2");
    }
};

/**
 * The chain's seeds give independent draws of ns-3's own generator (cross traffic,
 * jitter; the loss is linkem's): a 1 % loss model under seed 2 or 3 loses
 * other packets than under seed 1 (as independent draws would, about 1 % of them), and
 * seed 1's draws are what they were (run k of seed 1).
 */
class MagnetSeedTestCase : public TestCase
{
  public:
    MagnetSeedTestCase()
        : TestCase("seeds: independent loss draws for each seed, seed 1 unchanged")
    {
    }

  private:
    static std::vector<bool> Losses(uint32_t seed, uint32_t run, uint32_t n)
    {
        MagnetChainConfig config;
        config.seed = seed;
        MagnetChain(config).SelectDraws(run);
        auto model = CreateObjectWithAttributes<RateErrorModel>(
            "ErrorRate", DoubleValue(0.01), "ErrorUnit", StringValue("ERROR_UNIT_PACKET"));
        model->AssignStreams(7); // each run of a chain numbers its models' streams alike
        std::vector<bool> lost(n);
        for (uint32_t i = 0; i < n; ++i)
        {
            lost[i] = model->IsCorrupt(Create<Packet>(100));
        }
        return lost;
    }

    void DoRun() override
    {
        const uint32_t n = 20000;
        std::vector<bool> first = Losses(1, 1, n);
        uint32_t lostFirst = std::count(first.begin(), first.end(), true);
        NS_TEST_ASSERT_MSG_EQ_TOL(lostFirst / double(n), 0.01, 0.002, "seed 1 loses about 1 %");
        for (uint32_t seed : {2U, 3U})
        {
            std::vector<bool> other = Losses(seed, 1, n);
            uint32_t both = 0;
            for (uint32_t i = 0; i < n; ++i)
            {
                both += first[i] && other[i];
            }
            // Independent draws share 1 % of seed 1's ~200 losses (2, at most 10 by chance).
            NS_TEST_ASSERT_MSG_LT(both, 10U, "seed " << seed << " loses " << both << " of seed 1's "
                                                    << lostFirst << " packets too");
        }
        // Seed 1's draws are ns-3's seed 1, run k, as before the seeds were made independent.
        RngSeedManager::SetSeed(1);
        RngSeedManager::SetRun(2);
        auto plain = CreateObject<UniformRandomVariable>();
        plain->SetStream(7);
        double expected = plain->GetValue();
        MagnetChainConfig config;
        MagnetChain(config).SelectDraws(2);
        auto chosen = CreateObject<UniformRandomVariable>();
        chosen->SetStream(7);
        NS_TEST_ASSERT_MSG_EQ(chosen->GetValue(), expected, "seed 1, stack 2: ns-3's seed 1, run 2");
    }
};

// ----------------------------------------------------------- cross traffic ---

/** MagnetPoissonApplication: its mean rate, and exponential gaps (coefficient of variation 1). */
class MagnetPoissonTestCase : public TestCase
{
  public:
    MagnetPoissonTestCase()
        : TestCase("Poisson UDP source: mean rate and exponential gaps")
    {
    }

  private:
    std::vector<Time> m_sent;

    void OnTx(Ptr<const Packet> packet)
    {
        m_sent.push_back(Simulator::Now());
    }

    void DoRun() override
    {
        Link link("1Gbps", "1ms", 1448, 1 << 20);
        auto app = CreateObjectWithAttributes<MagnetPoissonApplication>(
            "Remote", AddressValue(InetSocketAddress(link.addresses.GetAddress(1), 7)),
            "PacketSize", UintegerValue(1000), "DataRate", DataRateValue(DataRate("10Mbps")));
        app->AssignStreams(5);
        link.nodes.Get(0)->AddApplication(app);
        app->SetStopTime(Seconds(20));
        PacketSinkHelper sinks("ns3::UdpSocketFactory", InetSocketAddress(Ipv4Address::GetAny(), 7));
        auto sink = DynamicCast<PacketSink>(sinks.Install(link.nodes.Get(1)).Get(0));
        app->TraceConnectWithoutContext("Tx", MakeCallback(&MagnetPoissonTestCase::OnTx, this));
        Simulator::Run();

        double rate = sink->GetTotalRx() * 8.0 / 20.0;
        NS_TEST_ASSERT_MSG_EQ_TOL(rate, 10e6, 0.3e6, "10 Mbit/s on average");
        double sum = 0;
        double squares = 0;
        for (size_t i = 1; i < m_sent.size(); ++i)
        {
            double gap = (m_sent[i] - m_sent[i - 1]).GetSeconds();
            sum += gap;
            squares += gap * gap;
        }
        double n = m_sent.size() - 1;
        double mean = sum / n;
        double cv = std::sqrt(squares / n - mean * mean) / mean;
        NS_TEST_ASSERT_MSG_EQ_TOL(mean, 0.0008, 0.00003, "gaps of 1000 B at 10 Mbit/s");
        NS_TEST_ASSERT_MSG_EQ_TOL(cv, 1.0, 0.05, "exponential gaps: CV 1");
        Simulator::Destroy();
    }
};

/**
 * Cross traffic across a bottleneck: bulk TCP flows fill it, Poisson and
 * Pareto on/off UDP take their share of it; all of it crosses the bottleneck.
 */
class MagnetCrossTrafficTestCase : public TestCase
{
  public:
    MagnetCrossTrafficTestCase(const std::string& what,
                               std::string cross,
                               double share,
                               double tolerance,
                               double seconds,
                               double ipPerPayload = 1.0)
        : TestCase("cross traffic on a 10 Mbit per s bottleneck: " + what),
          m_cross(std::move(cross)),
          m_share(share),
          m_tolerance(tolerance),
          m_seconds(seconds),
          m_ipPerPayload(ipPerPayload)
    {
    }

  private:
    std::string m_cross;
    double m_share;
    double m_tolerance;
    double m_seconds;
    double m_ipPerPayload; //!< a UDP share counts IP bytes: (payload + 28) / payload
    uint64_t m_bottleneckBytes{0};

    void OnBottleneck(Ptr<const Packet> packet)
    {
        m_bottleneckBytes += packet->GetSize();
    }

    void DoRun() override
    {
        Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(1448));
        MagnetPathConfig config;
        config.rateBps = 10000000;
        config.delay = MilliSeconds(20);
        config.hops = 3;
        NodeContainer nodes;
        nodes.Create(2);
        InternetStackHelper().Install(nodes);
        Ipv4AddressHelper ip("10.0.0.0", "255.255.255.252");
        MagnetPath path = MagnetPathHelper(config).Install(nodes.Get(0), nodes.Get(1), ip);
        MagnetCrossTraffic cross({MagnetCrossConfig::Parse(m_cross)}, config);
        cross.Install(path, ip, Seconds(0), 1448, TcpSocketFactory::GetTypeId());
        Ipv4GlobalRoutingHelper::PopulateRoutingTables();
        path.BottleneckTx()->TraceConnectWithoutContext(
            "PhyTxEnd", MakeCallback(&MagnetCrossTrafficTestCase::OnBottleneck, this));
        const double seconds = m_seconds;
        Simulator::Stop(Seconds(seconds));
        Simulator::Run();
        double delivered = cross.DeliveredBytes() * m_ipPerPayload * 8.0 / seconds / config.rateBps;
        NS_TEST_ASSERT_MSG_EQ_TOL(delivered, m_share, m_tolerance, "share of the bottleneck delivered");
        NS_TEST_ASSERT_MSG_GT_OR_EQ(m_bottleneckBytes, cross.DeliveredBytes(),
                                    "it all crossed the bottleneck");
        Simulator::Destroy();
    }
};

/**
 * With the linux model the bulk flows start late by draws of the real sender's measured
 * lateness (MagnetCrossTraffic::DrawStarts): within its range, the same for one seed and
 * stack, other for another seed (each a new phase of the flows, as each real run).
 */
class MagnetCrossStartsTestCase : public TestCase
{
  public:
    MagnetCrossStartsTestCase()
        : TestCase("cross traffic: bulk flows' starts drawn per seed within the measured lateness")
    {
    }

  private:
    static std::vector<int64_t> Starts(uint32_t seed, uint32_t stack)
    {
        // As MagnetChain::SelectDraws: seed 1, run (seed - 1) << 32 | stack.
        RngSeedManager::SetSeed(1);
        RngSeedManager::SetRun(static_cast<uint64_t>(seed - 1) << 32 | stack);
        MagnetCrossTraffic cross({MagnetCrossConfig::Parse("tcp:4")}, MagnetPathConfig());
        cross.DrawStarts(MagnetCrossTraffic::kStartStream + stack);
        std::vector<int64_t> out;
        for (uint32_t f = 0; f < 8; ++f) // both directions' four flows
        {
            out.push_back(cross.BulkOffset(f % 4).GetNanoSeconds());
        }
        return out;
    }

    void DoRun() override
    {
        std::set<std::vector<int64_t>> seen;
        for (uint32_t seed : {1, 2, 3})
        {
            for (uint32_t stack : {1, 2})
            {
                auto starts = Starts(seed, stack);
                NS_TEST_ASSERT_MSG_EQ((starts == Starts(seed, stack)), true, "one seed and stack: one draw");
                seen.insert(starts);
                for (uint32_t f = 0; f < starts.size(); ++f)
                {
                    double us = (starts[f] - 10000000LL * (f % 4)) / 1e3;
                    const auto& late = MagnetCrossTraffic::kBulkLateUs[f % 4]; // flow f % 4's
                    NS_TEST_ASSERT_MSG_GT_OR_EQ(us, std::begin(late)[0] - 1e-3, "no earlier than measured");
                    NS_TEST_ASSERT_MSG_LT_OR_EQ(us, std::end(late)[-1] + 1e-3, "no later than measured");
                }
            }
        }
        NS_TEST_ASSERT_MSG_EQ(seen.size(), 6, "every seed and stack its own starts");
        // Without DrawStarts (ns-3's own TCP model): exactly 10 ms apart.
        MagnetCrossTraffic fixed({MagnetCrossConfig::Parse("tcp:4")}, MagnetPathConfig());
        NS_TEST_ASSERT_MSG_EQ(fixed.BulkOffset(3), MilliSeconds(30), "ns-3's model: 10 ms apart");
    }
};

// ------------------------------------------------------------------ paths ---

/** Jitter delays packets by up to its amount, and never reorders them. */
class MagnetJitterTestCase : public TestCase
{
  public:
    MagnetJitterTestCase()
        : TestCase("jitter: extra delay up to the setting, packets in order")
    {
    }

  private:
    std::vector<std::pair<Time, uint32_t>> m_arrivals; //!< (one-way delay, sequence)
    std::map<uint32_t, Time> m_sent;

    void OnTx(Ptr<const Packet> packet)
    {
        m_sent[packet->GetUid()] = Simulator::Now();
    }

    void OnRx(Ptr<const Packet> packet)
    {
        m_arrivals.emplace_back(Simulator::Now() - m_sent[packet->GetUid()], packet->GetUid());
    }

    void DoRun() override
    {
        MagnetPathConfig config;
        config.rateBps = 100000000;
        config.delay = MilliSeconds(10);
        config.jitter = MilliSeconds(5);
        NodeContainer nodes;
        nodes.Create(2);
        InternetStackHelper().Install(nodes);
        Ipv4AddressHelper ip("10.0.0.0", "255.255.255.252");
        MagnetPath path = MagnetPathHelper(config).Install(nodes.Get(0), nodes.Get(1), ip);
        path.BottleneckTx()->TraceConnectWithoutContext("PhyTxBegin",
                                                        MakeCallback(&MagnetJitterTestCase::OnTx, this));
        path.BottleneckRx()->TraceConnectWithoutContext("PhyRxEnd",
                                                        MakeCallback(&MagnetJitterTestCase::OnRx, this));
        auto app = CreateObjectWithAttributes<MagnetPoissonApplication>(
            "Remote", AddressValue(InetSocketAddress(path.receiverAddress, 7)),
            "PacketSize", UintegerValue(1000), "DataRate", DataRateValue(DataRate("20Mbps")));
        nodes.Get(0)->AddApplication(app);
        app->SetStopTime(Seconds(5));
        Simulator::Run();
        Time serial = MicroSeconds(82); // 1030 B (UDP, IP, PPP) at 100 Mbit/s: 82.4 us
        Time least = Time::Max();
        Time most;
        uint32_t reordered = 0;
        for (size_t i = 0; i < m_arrivals.size(); ++i)
        {
            least = std::min(least, m_arrivals[i].first);
            most = std::max(most, m_arrivals[i].first);
            reordered += i > 0 && m_arrivals[i].second < m_arrivals[i - 1].second;
        }
        NS_TEST_ASSERT_MSG_GT(m_arrivals.size(), 10000, "packets went through");
        NS_TEST_ASSERT_MSG_EQ(reordered, 0, "order kept");
        NS_TEST_ASSERT_MSG_GT_OR_EQ(least, MilliSeconds(10) + serial, "at least the delay");
        NS_TEST_ASSERT_MSG_GT(most, MilliSeconds(14), "jitter spread the delays");
        Simulator::Destroy();
    }
};

/**
 * A bottleneck queue in bytes holds what linkem's does: a packet joins if the IP bytes
 * waiting and its own fit (replay/linkem/core.c).  At 1 Mbit/s with a 15000-byte queue, 20
 * datagrams of 1500 IP bytes at once: one goes on the wire, 10 wait, 9 are dropped.  A
 * point-to-point device queues PPP frames (2 bytes more each): counted against the limit,
 * only 9 waited (and the map's 150000-byte queue held 99 full-sized packets, linkem 100).
 */
class MagnetByteQueueTestCase : public TestCase
{
  public:
    MagnetByteQueueTestCase()
        : TestCase("a bottleneck queue in bytes counts IP bytes, as linkem's")
    {
    }

  private:
    uint32_t m_drops{0};

    void OnDrop(Ptr<const Packet> packet)
    {
        ++m_drops;
    }

    static void Burst(Ptr<Socket> socket)
    {
        for (int i = 0; i < 20; ++i)
        {
            socket->Send(Create<Packet>(1472)); // 1500 IP bytes
        }
    }

    void DoRun() override
    {
        MagnetPathConfig config;
        config.rateBps = 1000000;
        config.delay = MilliSeconds(10);
        config.queue = "15000B";
        NodeContainer nodes;
        nodes.Create(2);
        InternetStackHelper().Install(nodes);
        Ipv4AddressHelper ip("10.0.0.0", "255.255.255.252");
        MagnetPath path = MagnetPathHelper(config).Install(nodes.Get(0), nodes.Get(1), ip);
        Ipv4GlobalRoutingHelper::PopulateRoutingTables();
        DynamicCast<PointToPointNetDevice>(path.BottleneckTx())
            ->GetQueue()
            ->TraceConnectWithoutContext("Drop", MakeCallback(&MagnetByteQueueTestCase::OnDrop, this));
        PacketSinkHelper sinks("ns3::UdpSocketFactory", InetSocketAddress(Ipv4Address::GetAny(), 9));
        auto sink = DynamicCast<PacketSink>(sinks.Install(nodes.Get(1)).Get(0));
        Ptr<Socket> socket = Socket::CreateSocket(nodes.Get(0), UdpSocketFactory::GetTypeId());
        socket->Connect(InetSocketAddress(path.receiverAddress, 9));
        Simulator::Schedule(Seconds(1), &MagnetByteQueueTestCase::Burst, socket);
        Simulator::Stop(Seconds(3));
        Simulator::Run();
        NS_TEST_ASSERT_MSG_EQ(m_drops, 9, "10 x 1500 IP bytes wait in 15000 bytes, the rest dropped");
        NS_TEST_ASSERT_MSG_EQ(sink->GetTotalRx(), 11 * 1472, "one on the wire and 10 from the queue delivered");
        Simulator::Destroy();
    }
};

// ---------------------------------------------------------- whole application ---

/**
 * A whole application's connections replayed at once: each opens at its time,
 * each answer goes out its think time after its request was read, a connection
 * with `after` opens its think time after the earlier one's last byte, and a
 * demand that names no earlier connection is refused with its row.
 */
class MagnetAppReplayTestCase : public TestCase
{
  public:
    MagnetAppReplayTestCase()
        : TestCase("whole application: connections at their times, answers after requests, after")
    {
    }

  private:
    void DoRun() override
    {
        std::string path = TempPath("app.csv");
        std::ofstream(path) << "connection,event,side,time_ns,size,adu,wait_bytes,think_ns,after\n"
                               "1,open,client,0,0,-1,0,0,0\n"
                               "1,send,client,0,1000,0,0,0,0\n"
                               "2,open,client,3000000,0,-1,0,0,0\n"
                               "2,send,client,3000000,2000,0,0,0,0\n"
                               "1,send,server,9000000,50000,1,1000,2000000,0\n"
                               "2,send,server,9000000,70000,1,2000,7000000,0\n"
                               "3,open,client,90000000,0,-1,0,5000000,2\n"
                               "3,send,server,95000000,10,0,0,0,0\n";
        Link link("10Mbps", "10ms", 1448, 1 << 20);
        MagnetAppReplayHelper helper(path);
        helper.SetSocketAttribute("SegmentSize", UintegerValue(1448));
        MagnetAppReplay replay = helper.Install(link.nodes.Get(0), link.addresses.GetAddress(0),
                                                link.nodes.Get(1), link.addresses.GetAddress(1));
        replay.Start(Seconds(1));
        replay.StopWhenDone();
        Simulator::Run();
        std::vector<MagnetConnectionResult> conns = replay.Connections();
        NS_TEST_ASSERT_MSG_EQ(conns.size(), 3, "three connections");
        for (const auto& c : conns)
        {
            NS_TEST_ASSERT_MSG_EQ(c.status, "ok", "connection " << c.connection);
        }
        NS_TEST_ASSERT_MSG_EQ(conns[0].start, Seconds(0), "opens at its time");
        NS_TEST_ASSERT_MSG_EQ(conns[1].start, MilliSeconds(3), "opens at its time");
        NS_TEST_ASSERT_MSG_EQ(conns[1].bytesReceived, 70000, "the answer read whole");
        std::vector<MagnetAduResult> adus = replay.Adus();
        // adus: (1, client 0), (1, server 1), (2, client 0), (2, server 1), (3, server 0)
        NS_TEST_ASSERT_MSG_EQ(adus[1].start, adus[0].end + MilliSeconds(2), "think time after the request");
        NS_TEST_ASSERT_MSG_EQ(adus[3].start, adus[2].end + MilliSeconds(7), "think time after the request");
        NS_TEST_ASSERT_MSG_EQ(adus[3].response, adus[3].end - adus[2].start, "response time");
        NS_TEST_ASSERT_MSG_EQ(conns[2].start, adus[3].end + MilliSeconds(5), "after connection 2");
        Simulator::Destroy();

        std::ofstream(path) << "connection,event,side,time_ns,size,adu,wait_bytes,think_ns,after\n"
                               "1,open,client,0,0,-1,0,0,4\n";
        std::string error;
        try
        {
            ReadMagnetAppDemand(path);
        }
        catch (const MagnetTraceError& e)
        {
            error = e.what();
        }
        NS_TEST_ASSERT_MSG_EQ(error, path + ": row 1 (connection 1): after 4: no earlier connection "
                                            "of that number", "bad input in one line");
        std::remove(path.c_str());
    }
};

/**
 * The handshake's last ACK is lost and the client's FIN completes it: ns-3 hands the
 * server its socket from within that step, before the socket has left SYN_RCVD for
 * CLOSE_WAIT.  A server that wrote its answer from within the hand-over failed
 * (ERROR_NOTCONN) where Linux's accept() returns a socket in CLOSE_WAIT that takes
 * writes; the answer must go, and the connection end whole.
 */
class MagnetAppAcceptOnFinTestCase : public TestCase
{
  public:
    MagnetAppAcceptOnFinTestCase()
        : TestCase("whole application: a connection the client's FIN completes takes the server's answer")
    {
    }

  private:
    void DoRun() override
    {
        std::string path = TempPath("fin.csv");
        // Open loop, as a replay of packet times: the client closes at once, the
        // server's answer is due before the handshake can end.
        std::ofstream(path) << "connection,event,side,time_ns,size,adu,wait_bytes,think_ns,after\n"
                               "1,open,client,0,0,-1,0,0,0\n"
                               "1,close,client,0,0,-1,0,0,0\n"
                               "1,send,server,1000000,1000,0,0,0,0\n";
        Link link("10Mbps", "10ms", 1448, 1 << 20);
        auto errors = CreateObject<ReceiveListErrorModel>();
        errors->SetList({1}); // at the server: the SYN, then the handshake's ACK (lost), the FIN
        link.devices.Get(1)->SetAttribute("ReceiveErrorModel", PointerValue(errors));
        MagnetAppReplayHelper helper(path);
        helper.SetAttribute("OpenLoop", BooleanValue(true));
        MagnetAppReplay replay = helper.Install(link.nodes.Get(0), link.addresses.GetAddress(0),
                                                link.nodes.Get(1), link.addresses.GetAddress(1));
        replay.Start(Seconds(1));
        replay.StopWhenDone();
        Simulator::Stop(Seconds(10));
        Simulator::Run();
        std::vector<MagnetConnectionResult> conns = replay.Connections();
        NS_TEST_ASSERT_MSG_EQ(conns.at(0).status, "ok", "the connection completes");
        NS_TEST_ASSERT_MSG_EQ(conns.at(0).bytesReceived, 1000, "the answer read whole");
        Simulator::Destroy();
        std::remove(path.c_str());
    }
};

/** A frame that leaves with a FIN: when, in `fins`. */
static void
RecordFin(std::vector<Time>* fins, Ptr<const Packet> frame)
{
    Ptr<Packet> p = frame->Copy();
    PppHeader ppp;
    Ipv4Header ip;
    TcpHeader tcp;
    p->RemoveHeader(ppp);
    p->RemoveHeader(ip);
    p->RemoveHeader(tcp);
    if (tcp.GetFlags() & TcpHeader::FIN)
    {
        fins->push_back(Simulator::Now());
    }
}

/**
 * `path`'s demand between two nodes over a 10 Mbit/s, 10 ms link, `model`'s TCP profile
 * (linux, ns3): when each node's FINs left in fins[node] (0 the client), the client's
 * device receiving through `atClient` if given.
 */
static MagnetAppReplay
InstallClosesReplay(const std::string& path, const std::string& model, std::vector<Time> (&fins)[2],
                    Ptr<ErrorModel> atClient)
{
    MagnetTcpConfig config;
    config.model = model;
    MagnetTcpProfile profile(config);
    profile.ApplyDefaults();
    Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(1448));
    NodeContainer nodes;
    nodes.Create(2);
    PointToPointHelper p2p;
    p2p.SetDeviceAttribute("DataRate", StringValue("10Mbps"));
    p2p.SetChannelAttribute("Delay", StringValue("10ms"));
    NetDeviceContainer devices = p2p.Install(nodes);
    MagnetTcpProfile::InstallStack(nodes);
    Ipv4InterfaceContainer addresses = Ipv4AddressHelper("10.9.0.0", "255.255.255.0").Assign(devices);
    TrafficControlHelper().Uninstall(devices);
    for (uint32_t i = 0; i < 2; ++i)
    {
        devices.Get(i)->TraceConnectWithoutContext("MacTx", MakeBoundCallback(&RecordFin, &fins[i]));
    }
    if (atClient)
    {
        devices.Get(0)->SetAttribute("ReceiveErrorModel", PointerValue(atClient));
    }
    MagnetAppReplayHelper helper(path);
    helper.SetAttribute("Protocol", TypeIdValue(profile.SocketFactory()));
    helper.SetAttribute("TcpVariant", StringValue(profile.CongestionControl()));
    return helper.Install(nodes.Get(0), addresses.GetAddress(0), nodes.Get(1), addresses.GetAddress(1));
}

/**
 * Both sides of a connection close at their recorded times, the second before the
 * first's FIN reached it (a server closing a few ms after its answer, the client as
 * soon as it read the answer: 10 ms one way apart, their FINs cross).  Linux's replay
 * shuts each side's writing half at its row's time whatever the peer did, so the
 * client's FIN leaves when it closes; the application held it until the server's FIN
 * was read.  The FINs cross (CLOSING) and the connection ends whole, each side done
 * when the peer's FIN reached it (ns-3 notified it only once its own FIN was ACKed,
 * entering TIME_WAIT: a one-way delay later).  Over ns-3's own
 * TCP (which drops the ACK a FIN+ACK brings into ESTABLISHED, so the server, its FIN
 * waiting for its data's ACK, never closed) the client keeps the passive close: its
 * FIN once it read the server's, and the connection ends whole.
 */
class MagnetAppCrossingClosesTestCase : public TestCase
{
  public:
    explicit MagnetAppCrossingClosesTestCase(const std::string& model)
        : TestCase("whole application: each side's FIN at its close time, the two crossing (" + model + " TCP)"),
          m_model(model)
    {
    }

  private:
    std::string m_model;
    std::vector<Time> m_fins[2]; //!< per node (0 the client): when its FINs left

    void DoRun() override
    {
        std::string path = TempPath("closes.csv");
        // The server answers at once and closes 5 ms after its answer went; the client
        // closes as soon as it has read the answer, about 5 ms before the server's FIN
        // reaches it.
        std::ofstream(path) << "connection,event,side,time_ns,size,adu,wait_bytes,think_ns,after\n"
                               "1,open,client,0,0,-1,0,0,0\n"
                               "1,send,client,0,1000,0,0,0,0\n"
                               "1,send,server,30000000,1000,1,1000,0,0\n"
                               "1,close,server,35000000,0,-1,1000,5000000,0\n"
                               "1,close,client,41000000,0,-1,1000,0,0\n";
        MagnetAppReplay replay = InstallClosesReplay(path, m_model, m_fins, nullptr);
        replay.Start(Seconds(1));
        replay.StopWhenDone();
        Simulator::Stop(Seconds(30));
        Simulator::Run();

        std::vector<MagnetConnectionResult> conns = replay.Connections();
        NS_TEST_ASSERT_MSG_EQ(conns.at(0).status, "ok", "the connection ends whole");
        NS_TEST_ASSERT_MSG_EQ(conns.at(0).bytesReceived, 1000, "the answer read whole");
        const auto& client = replay.Get(0, MagnetSide::Client)->GetRecord();
        const auto& server = replay.Get(0, MagnetSide::Server)->GetRecord();
        NS_TEST_ASSERT_MSG_EQ((server.closed < client.closed), true, "the server closes first");
        NS_TEST_ASSERT_MSG_EQ((client.closed < server.closed + MilliSeconds(10)), true,
                              "the client closes before the server's FIN can reach it (10 ms one way)");
        NS_TEST_ASSERT_MSG_EQ((m_fins[0].empty() || m_fins[1].empty()), false, "both sent a FIN");
        if (m_model == "linux")
        {
            NS_TEST_ASSERT_MSG_EQ(m_fins[1].front(), server.closed, "the server's FIN leaves when it closes");
            NS_TEST_ASSERT_MSG_EQ(m_fins[0].front(), client.closed, "the client's FIN leaves when it closes");
            // Each side reads the peer's FIN when it arrives (10 ms and a 66-byte frame's
            // 53 us after it left), as Linux's read() returns 0 then, not when its own
            // FIN's ACK comes back (10 ms later).
            NS_TEST_ASSERT_MSG_EQ((client.peerClosed < server.closed + MilliSeconds(11)), true,
                                  "the client reads the server's FIN on its arrival");
            NS_TEST_ASSERT_MSG_EQ((server.peerClosed < client.closed + MilliSeconds(11)), true,
                                  "the server reads the client's FIN on its arrival");
        }
        else
        {
            NS_TEST_ASSERT_MSG_EQ(m_fins[0].front(), client.peerClosed, "ns-3's TCP: the client's FIN once it read the server's");
        }
        NS_TEST_ASSERT_MSG_EQ(m_fins[0].size(), 1, "the client's FIN is not resent");
        NS_TEST_ASSERT_MSG_EQ(m_fins[1].size(), 1, "the server's FIN is not resent");
        NS_TEST_ASSERT_MSG_EQ((client.done != Time::Max() && server.done != Time::Max()), true, "both sides done");
        Simulator::Destroy();
        std::remove(path.c_str());
    }
};

/** Loses the first frame carrying a FIN that arrives at its device (as a full queue would). */
class FirstFinErrorModel : public ErrorModel
{
  public:
    uint32_t dropped{0};

  private:
    bool DoCorrupt(Ptr<Packet> frame) override
    {
        Ptr<Packet> p = frame->Copy();
        PppHeader ppp;
        Ipv4Header ip;
        TcpHeader tcp;
        p->RemoveHeader(ppp);
        p->RemoveHeader(ip);
        p->RemoveHeader(tcp);
        if (dropped == 0 && (tcp.GetFlags() & TcpHeader::FIN))
        {
            dropped++;
            return true;
        }
        return false;
    }

    void DoReset() override
    {
    }
};

/**
 * The two FINs cross as in MagnetAppCrossingClosesTestCase, and the server's is lost (a full
 * queue: redis-benchmark over 4 bulk cross flows).  The client closes once it read the
 * answer's first segment (of three); its FIN ACKs that one only, so the server goes
 * FIN_WAIT_1 -> CLOSING, its FIN still out.  The client's ACK of the second segment (at
 * rcv_nxt, short of the FIN) then reached it in CLOSING and ns-3 (ProcessClosing) took it for
 * the FIN's: TIME_WAIT, every TcpSocketBase timer cancelled.  Here the profile's loss probe,
 * still armed for the third segment, resent it with the FIN 68 ms later, from TIME_WAIT; in
 * redis-benchmark's runs all the data was ACKed, nothing resent the FIN and the client stayed
 * in FIN_WAIT_2 for ever (the connection incomplete).  Linux leaves CLOSING only once its FIN
 * is ACKed (tcp_rcv_state_process) and resends the FIN on its timer (at least 200 ms on).
 */
class MagnetAppCrossingFinLostTestCase : public TestCase
{
  public:
    MagnetAppCrossingFinLostTestCase()
        : TestCase("whole application: crossing FINs, the server's lost, resent from CLOSING (linux TCP)")
    {
    }

  private:
    std::vector<Time> m_fins[2]; //!< per node (0 the client): when its FINs left

    void DoRun() override
    {
        std::string path = TempPath("closes-lost.csv");
        std::ofstream(path) << "connection,event,side,time_ns,size,adu,wait_bytes,think_ns,after\n"
                               "1,open,client,0,0,-1,0,0,0\n"
                               "1,send,client,0,1000,0,0,0,0\n"
                               "1,send,server,30000000,3000,1,1000,0,0\n"
                               "1,close,server,35000000,0,-1,1000,5000000,0\n"
                               "1,close,client,41000000,0,-1,1000,0,0\n";
        auto loss = CreateObject<FirstFinErrorModel>();
        MagnetAppReplay replay = InstallClosesReplay(path, "linux", m_fins, loss); // lost at the client
        replay.Start(Seconds(1));
        replay.StopWhenDone();
        Simulator::Stop(Seconds(30));
        Simulator::Run();

        std::vector<MagnetConnectionResult> conns = replay.Connections();
        const auto& client = replay.Get(0, MagnetSide::Client)->GetRecord();
        const auto& server = replay.Get(0, MagnetSide::Server)->GetRecord();
        NS_TEST_ASSERT_MSG_EQ(loss->dropped, 1, "a FIN lost on its way to the client");
        NS_TEST_ASSERT_MSG_EQ(conns.at(0).status, "ok", "the connection ends whole");
        NS_TEST_ASSERT_MSG_EQ((m_fins[1].empty() || m_fins[0].empty()), false, "both sent a FIN");
        NS_TEST_ASSERT_MSG_EQ(m_fins[1].front(), server.closed, "the server's FIN (the lost one) leaves when it closes");
        NS_TEST_ASSERT_MSG_EQ((m_fins[0].front() < server.closed + MilliSeconds(10)), true,
                              "the client's FIN leaves before the server's could have reached it: they cross");
        NS_TEST_ASSERT_MSG_EQ(m_fins[1].size(), 2, "the server's FIN resent once, on its timer");
        NS_TEST_ASSERT_MSG_EQ((m_fins[1].size() > 1 && m_fins[1][1] > m_fins[1][0] + MilliSeconds(200)), true,
                              "the resend waits for the timer (Linux's RTO floor is 200 ms): FINs at "
                                  << m_fins[1].front().As(Time::MS) << ", " << m_fins[1].back().As(Time::MS));
        NS_TEST_ASSERT_MSG_EQ(conns.at(0).bytesReceived, 3000, "the answer read whole");
        NS_TEST_ASSERT_MSG_EQ((client.peerClosed != Time::Max() && m_fins[1].size() > 1 &&
                               client.peerClosed > m_fins[1][1]), true,
                              "the client reads the server's FIN once its resend arrives");
        NS_TEST_ASSERT_MSG_EQ((client.done != Time::Max() && server.done != Time::Max()), true, "both sides done");
        Simulator::Destroy();
        std::remove(path.c_str());
    }
};

// --------------------------------------------------- PSH on the Linux profile ---

/**
 * Over the Linux profile, every write due at once (the buffer always full, so
 * TCP cuts segments across writes) and 2 % loss.  Linux pushes the last segment
 * of each transmitted skb of two or more segments (__tcp_transmit_skb,
 * tcp_gso_segment), and a Send()'s end only while no later Send() appended to
 * its skb before it left (tcp_sendmsg_locked clears tcp_push's mark): with the
 * buffer always full most ends lose it.  The profile pushed every Send()'s end.
 */
class MagnetPushedWriteEndsTestCase : public TestCase
{
  public:
    MagnetPushedWriteEndsTestCase()
        : TestCase("linux profile: PSH on transmitted skbs' last segments, a Send()'s end losing it to the next Send()")
    {
    }

  private:
    uint64_t m_written{0};
    std::set<uint64_t> m_sendEnds; //!< stream offsets just past each Send()
    SequenceNumber32 m_isn;
    uint64_t m_high{0};        //!< end of the furthest data received
    uint32_t m_segments{0}, m_pushed{0}, m_resent{0}, m_ends{0}, m_endsPushed{0};

    void OnWrite(uint32_t bytes, Time due)
    {
        m_sendEnds.insert(m_written += bytes);
    }

    void OnMacRx(Ptr<const Packet> frame)
    {
        Ptr<Packet> p = frame->Copy();
        PppHeader ppp;
        Ipv4Header ip;
        TcpHeader tcp;
        p->RemoveHeader(ppp);
        p->RemoveHeader(ip);
        p->RemoveHeader(tcp);
        if (tcp.GetDestinationPort() != 9)
        {
            return; // the receiver's ACKs
        }
        if (tcp.GetFlags() & TcpHeader::SYN)
        {
            m_isn = tcp.GetSequenceNumber();
        }
        if (p->GetSize() == 0)
        {
            return;
        }
        uint64_t start = tcp.GetSequenceNumber() - m_isn - 1;
        auto next = m_sendEnds.upper_bound(start);
        bool end = next != m_sendEnds.end() && *next <= start + p->GetSize();
        bool pushed = false;
        for (ByteTagIterator it = p->GetByteTagIterator(); it.HasNext();)
        {
            pushed = pushed || it.Next().GetTypeId().GetName() == "ns3::MagnetPushTag";
        }
        m_segments++;
        m_pushed += pushed;
        m_resent += start < m_high; // the link keeps order: earlier data is resent data
        m_high = std::max(m_high, start + p->GetSize());
        m_ends += end;
        m_endsPushed += end && pushed;
    }

    void DoRun() override
    {
        MagnetTcpProfile profile{MagnetTcpConfig{}};
        profile.ApplyDefaults();
        Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(1448));
        NodeContainer nodes;
        nodes.Create(2);
        MagnetTcpProfile::InstallStack(nodes);
        PointToPointHelper p2p;
        p2p.SetDeviceAttribute("DataRate", StringValue("10Mbps"));
        p2p.SetChannelAttribute("Delay", StringValue("10ms"));
        NetDeviceContainer devices = p2p.Install(nodes);
        Ipv4AddressHelper ip("10.9.0.0", "255.255.255.0");
        Ipv4InterfaceContainer addresses = ip.Assign(devices);
        auto loss = CreateObject<RateErrorModel>();
        loss->SetAttribute("ErrorRate", DoubleValue(0.02));
        loss->SetAttribute("ErrorUnit", StringValue("ERROR_UNIT_PACKET"));
        devices.Get(1)->SetAttribute("ReceiveErrorModel", PointerValue(loss));
        devices.Get(1)->TraceConnectWithoutContext("MacRx",
                                                   MakeCallback(&MagnetPushedWriteEndsTestCase::OnMacRx, this));

        MagnetDemand demand = RandomDemand(3000, 2895, 0, 11);
        for (auto& write : demand)
        {
            write.timeNs = 0;
        }
        std::string factory = profile.SocketFactory().GetName();
        MagnetReplayHelper replay(factory, InetSocketAddress(addresses.GetAddress(1), 9));
        replay.SetDemand(demand);
        replay.SetAttribute("TcpVariant", StringValue(profile.CongestionControl()));
        MagnetSinkHelper sinks(factory, InetSocketAddress(Ipv4Address::GetAny(), 9));
        replay.Install(nodes.Get(0)).Get(0)->TraceConnectWithoutContext(
            "Write", MakeCallback(&MagnetPushedWriteEndsTestCase::OnWrite, this));
        auto sink = DynamicCast<MagnetSinkApplication>(sinks.Install(nodes.Get(1)).Get(0));
        Simulator::Run();

        NS_TEST_ASSERT_MSG_EQ(sink->GetTotalRx(), MagnetDemandBytes(demand), "every byte delivered");
        NS_TEST_ASSERT_MSG_GT(m_sendEnds.size(), demand.size(), "writes that waited for space were split");
        NS_TEST_ASSERT_MSG_GT(m_resent, 10, "segments were retransmitted");
        NS_TEST_ASSERT_MSG_GT(m_pushed, m_segments / 4, "skbs of two segments end pushed");
        NS_TEST_ASSERT_MSG_LT(m_pushed, m_segments * 3 / 4, "their first segments are not");
        NS_TEST_ASSERT_MSG_GT(m_ends, m_segments / 4, "many segments hold a Send()'s end");
        NS_TEST_ASSERT_MSG_LT(m_endsPushed, m_ends * 3 / 4, "most lost the push to the next Send()");
        Simulator::Destroy();
    }
};

class MagnetReplayTestSuite : public TestSuite
{
  public:
    MagnetReplayTestSuite()
        : TestSuite("magnet-replay", Type::UNIT)
    {
        AddTestCase(new MagnetDemandFileTestCase, Duration::QUICK);
        AddTestCase(new MagnetWriteTimingTestCase, Duration::QUICK);
        AddTestCase(new MagnetFullBufferTestCase, Duration::QUICK);
        AddTestCase(new MagnetChainTestCase(false), Duration::QUICK);
        AddTestCase(new MagnetChainTestCase(true), Duration::QUICK);
        AddTestCase(new MagnetHugeWriteTestCase, Duration::QUICK);
        AddTestCase(new MagnetLinkemLossTestCase, Duration::QUICK);
        AddTestCase(new MagnetSeedTestCase, Duration::QUICK);
        AddTestCase(new MagnetPoissonTestCase, Duration::QUICK);
        AddTestCase(new MagnetCrossTrafficTestCase("2 bulk TCP flows fill it", "tcp:2", 0.93, 0.07, 30),
                    Duration::QUICK);
        // Deterministic (fixed seed); 1000-byte payloads are 1028 IP bytes.
        AddTestCase(new MagnetCrossTrafficTestCase("Poisson UDP at 30 %", "poisson:0.3", 0.3, 0.005, 30,
                                                   1028.0 / 1000),
                    Duration::QUICK);
        // Pareto (shape 1.5) means converge slowly: about 3000 on/off cycles.
        AddTestCase(new MagnetCrossTrafficTestCase("Pareto on-off UDP at 50 %",
                                                   "pareto:0.5/1000/20ms/20ms", 0.5, 0.1, 120,
                                                   1028.0 / 1000),
                    Duration::QUICK);
        AddTestCase(new MagnetCrossStartsTestCase, Duration::QUICK);
        AddTestCase(new MagnetJitterTestCase, Duration::QUICK);
        AddTestCase(new MagnetByteQueueTestCase, Duration::QUICK);
        AddTestCase(new MagnetAppReplayTestCase, Duration::QUICK);
        AddTestCase(new MagnetAppAcceptOnFinTestCase, Duration::QUICK);
        AddTestCase(new MagnetPushedWriteEndsTestCase, Duration::QUICK);
        // Last: these set a profile's defaults.
        AddTestCase(new MagnetAppCrossingClosesTestCase("linux"), Duration::QUICK);
        AddTestCase(new MagnetAppCrossingClosesTestCase("ns3"), Duration::QUICK);
        AddTestCase(new MagnetAppCrossingFinLostTestCase, Duration::QUICK);
    }
};

static MagnetReplayTestSuite g_magnetReplayTestSuite;
