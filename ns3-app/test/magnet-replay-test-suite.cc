/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Tests of the magnet replay application, in ns-3's TestSuite style:
 * demand files in either byte order, writes issued at trace times when the
 * path is not the bottleneck, bytes conserved when TCP's buffer is full, and
 * through chains of stacks (offline and live).  Run: magnet-replay-test
 * (TestRunner options apply, e.g. --verbose).
 */
#include "magnet-chain-helper.h"
#include "magnet-replay-helper.h"

#include "ns3/config.h"
#include "ns3/inet-socket-address.h"
#include "ns3/internet-stack-helper.h"
#include "ns3/point-to-point-helper.h"
#include "ns3/random-variable-stream.h"
#include "ns3/simulator.h"
#include "ns3/string.h"
#include "ns3/test.h"
#include "ns3/traffic-control-helper.h"
#include "ns3/uinteger.h"

#include <cstdio>
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
        config.link.rate = "10Mbps";
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
            NS_TEST_ASSERT_MSG_LT_OR_EQ(r.counts.devSendBytes / r.counts.devSend, config.link.mss,
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
    }
};

static MagnetReplayTestSuite g_magnetReplayTestSuite;

int
main(int argc, char* argv[])
{
    return TestRunner::Run(argc, argv);
}
