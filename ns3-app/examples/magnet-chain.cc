/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The successive-stack study (ALS 2001, Table II) in ns-3: an application's
 * demand through N TCP stacks in sequence, each over its own path (hops, a
 * bottleneck, loss, jitter, MTU, cross traffic), each written as a magnet
 * trace (OUT/stack-K.magnet, OUT/stack-K.new.npy: the new bytes of each
 * segment on its wire) with a summary (OUT/summary.json).  `magnet replay
 * ns3` builds and drives this program (replay/ns3.py).
 *
 *   magnet-chain --demand=ftp.magnet --stacks=4 --out=DIR [--rate=20Mbps,10Mbps --delay=30ms ...]
 *
 * Path flags take one value per stack separated by commas, the last repeated.
 *
 * --bulkReference also moves each stack's bytes with ns-3's BulkSendApplication
 * over an identical link, to measure what the replay costs in comparison.
 *
 * --app=D.csv replays every connection of a whole application's demand at once
 * over the first stack's path instead (MagnetAppScenario): OUT/connections.csv,
 * OUT/adus.csv, OUT/client.magnet, OUT/server.magnet, OUT/summary.json.
 */
#include "magnet-app-scenario.h"
#include "magnet-chain-helper.h"
#include "magnet-units.h"

#include "ns3/command-line.h"
#include "ns3/data-rate.h"

#include <chrono>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

using namespace ns3;

namespace
{

/** Peak resident memory (VmHWM) since the last reset, bytes; Linux only. */
uint64_t
PeakRss()
{
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line))
    {
        if (line.rfind("VmHWM:", 0) == 0)
        {
            return std::stoull(line.substr(6)) * 1024;
        }
    }
    return 0;
}

void
ResetPeakRss()
{
    std::ofstream("/proc/self/clear_refs") << "5";
}

std::string
Quote(const std::string& s)
{
    std::ostringstream out;
    out << std::quoted(s);
    return out.str();
}

std::string
Bool(bool value)
{
    return value ? "true" : "false";
}

std::string
CrossLine(const MagnetChainConfig& c)
{
    std::string items;
    for (const auto& x : c.cross)
    {
        items += (items.empty() ? "" : "; ") + x.Describe(c.PathOf(1).rateBps);
    }
    std::string played = c.crossSchedules.empty()
                             ? ""
                             : " (UDP datagrams played from the schedules replay/cross.py drew, as the real "
                               "sender sends them)";
    return "cross traffic on each bottleneck, from a node before it to one after it (the path's "
           "round trip), from " + MagnetFormatTime(c.crossLead) + " before the demand's time zero: " + items +
           played;
}

void
PrintConfig(const MagnetChain& chain, size_t writes, uint64_t bytes)
{
    const MagnetChainConfig& c = chain.GetConfig();
    std::cout << "ns-3 " MAGNET_NS3_VERSION ": " << c.stacks << " TCP stack(s) in sequence, "
              << (c.live ? "relay (relays write each read at once)"
                         : "offline (stack k's wire output replayed as stack k+1's writes)")
              << "\n";
    bool same = true;
    for (uint32_t k = 2; k <= c.stacks; ++k)
    {
        same = same && chain.Describe(k) == chain.Describe(1);
    }
    for (uint32_t k = 1; k <= (same ? 1 : c.stacks); ++k)
    {
        std::cout << (same ? "  every path: " : "  stack " + std::to_string(k) + "'s path: ")
                  << chain.Describe(k) << "\n";
    }
    if (!c.cross.empty())
    {
        std::cout << "  " << CrossLine(c) << "\n";
    }
    std::cout << "  TCP:";
    for (const auto& [name, value] : chain.TcpSettings())
    {
        std::cout << " " << name << "=" << value;
    }
    std::cout << "\n  demand: " << writes << " writes, " << bytes << " bytes\n";
}

std::string
Nanoseconds(Time t, bool known = true)
{
    return known ? std::to_string(t.GetNanoSeconds()) : "null";
}

std::string
StackJson(const MagnetStackResult& r)
{
    const auto& a = r.app;
    const auto& c = r.counts;
    std::ostringstream j;
    j << "{\"stack\": " << r.stack << ", \"trace\": " << Quote(r.trace)
      << ", \"bytes_given\": " << r.givenBytes << ", \"failure\": " << Quote(r.failure)
      << ", \"new_bytes\": " << Quote(r.newBytes) << ", \"link_log\": " << Quote(r.linkLog)
      << ", \"writes_due\": " << r.demandWrites << ", \"bytes_due\": " << r.demandBytes
      << ", \"send_calls\": " << a.sendCalls << ", \"bytes_sent\": " << a.bytesSent
      << ", \"late_writes\": " << a.lateWrites << ", \"max_lag_ns\": " << a.maxLag.GetNanoSeconds()
      << ", \"total_lag_ns\": " << a.totalLag.GetNanoSeconds()
      << ", \"connected_ns\": " << a.connected.GetNanoSeconds()
      << ", \"segment_size\": " << r.segmentSize
      << ", \"tcp_send\": " << c.tcpSend << ", \"tcp_retrans\": " << c.tcpRetrans
      << ", \"tcp_retrans_bytes\": " << c.tcpRetransBytes << ", \"dev_send\": " << c.devSend
      << ", \"dev_send_bytes\": " << c.devSendBytes << ", \"dev_retrans\": " << c.devRetrans
      << ", \"dev_recv\": " << c.devRecv << ", \"dev_recv_bytes\": " << c.devRecvBytes
      << ", \"reads\": " << r.sinkReads << ", \"bytes_received\": " << r.sinkBytes
      << ", \"srtt_mean_ns\": " << Nanoseconds(r.rtt.SrttMean(), r.rtt.srttUpdates > 0)
      << ", \"srtt_last_ns\": " << Nanoseconds(r.rtt.srttLast, r.rtt.srttUpdates > 0)
      << ", \"rtt_min_ns\": " << Nanoseconds(r.rtt.sampleMin, r.rtt.samples > 0)
      << ", \"rtt_samples\": " << r.rtt.samples
      << ", \"bottleneck_queue_drops\": " << c.queueDrops
      << ", \"bottleneck_queue_drops_own\": " << c.queueDropsOwn
      << ", \"bottleneck_loss_drops\": " << c.lossDrops
      << ", \"bottleneck_loss_drops_own\": " << c.lossDropsOwn
      << ", \"cross_bytes\": " << r.crossBytes << ", \"cross_ns\": " << r.crossTime.GetNanoSeconds()
      << ", \"cross_schedule_exhausted\": " << Bool(r.crossExhausted)
      << ", \"wall_s\": " << r.cost.wallSeconds << ", \"cpu_s\": " << r.cost.cpuSeconds << "}";
    return j.str();
}

std::string
PathJson(const MagnetChain& chain, uint32_t k)
{
    const MagnetChainConfig& c = chain.GetConfig();
    const MagnetPathConfig& p = c.PathOf(k);
    std::ostringstream j;
    j << "{\"stack\": " << k << ", \"rate_bps\": " << p.rateBps
      << ", \"delay_ns\": " << p.delay.GetNanoSeconds() << ", \"hop_delays_ns\": [";
    for (uint32_t h = 0; h < p.hops; ++h)
    {
        j << (h ? ", " : "") << p.HopDelay(h).GetNanoSeconds();
    }
    j << "], \"hops\": " << p.hops << ", \"bottleneck_hop\": " << p.Bottleneck() + 1
      << ", \"queue\": " << Quote(p.queue) << ", \"loss\": {\"p\": " << p.loss.p
      << ", \"r\": " << (p.loss.Bursty() ? std::to_string(p.loss.r) : "null")
      << ", \"bad\": " << p.loss.bad << ", \"good\": " << p.loss.good
      << ", \"mean\": " << p.loss.Mean() << "}, \"jitter_ns\": " << p.jitter.GetNanoSeconds()
      << ", \"mtu\": " << p.mtu << ", \"duplex\": " << Bool(p.duplex) << ", \"seed\": " << p.seed
      << ", \"mss\": " << c.tcp.Mss(p.mtu)
      << ", \"segment_size\": " << c.tcp.SegmentSize(p.mtu)
      << ", \"description\": " << Quote(chain.Describe(k)) << "}";
    return j.str();
}

std::string
ConfigJson(const MagnetChain& chain)
{
    const MagnetChainConfig& c = chain.GetConfig();
    const MagnetTcpConfig& t = c.tcp;
    std::ostringstream j;
    j << "{\"ns3_version\": " << Quote(MAGNET_NS3_VERSION) << ", \"stacks\": " << c.stacks
      << ", \"mode\": " << Quote(c.live ? "relay" : "offline") << ", \"paths\": [";
    for (uint32_t k = 1; k <= c.stacks; ++k)
    {
        j << (k > 1 ? ", " : "") << PathJson(chain, k);
    }
    j << "], \"cross\": [";
    for (size_t i = 0; i < c.cross.size(); ++i)
    {
        const auto& x = c.cross[i];
        static const char* kinds[] = {"tcp", "poisson", "pareto"};
        j << (i ? ", " : "") << "{\"kind\": " << Quote(kinds[static_cast<int>(x.kind)])
          << ", \"flows\": " << x.flows << ", \"share\": " << x.share
          << ", \"packet_bytes\": " << x.packetBytes << ", \"on_ns\": " << x.on.GetNanoSeconds()
          << ", \"off_ns\": " << x.off.GetNanoSeconds()
          << ", \"description\": " << Quote(x.Describe(c.PathOf(1).rateBps)) << "}";
    }
    j << "], \"cross_lead_ns\": " << (c.cross.empty() ? 0 : c.crossLead.GetNanoSeconds())
      << ", \"tcp\": {\"model\": " << Quote(t.model) << ", \"cc\": " << Quote(t.cc) << ", \"nagle\": " << Bool(t.nagle)
      << ", \"sack\": " << Bool(t.sack) << ", \"timestamps\": " << Bool(t.timestamps)
      << ", \"window_scaling\": " << Bool(t.windowScaling)
      << ", \"delack_count\": " << t.delAckCount << ", \"delack_timeout_ns\": "
      << Nanoseconds(t.delAckTimeout, !t.delAckTimeout.IsStrictlyNegative())
      << ", \"mss\": " << t.mss << ", \"sndbuf\": " << t.sndBuf << ", \"rcvbuf\": " << t.rcvBuf
      << ", \"read_size\": " << t.readSize << "}"
      << ", \"new_data_only\": " << Bool(c.newDataOnly)
      << ", \"start_offset_ns\": " << c.startOffset.GetNanoSeconds() << ", \"seed\": " << c.seed
      << ", \"tcp_settings\": {";
    const char* sep = "";
    for (const auto& [name, value] : chain.TcpSettings())
    {
        j << sep << Quote(name) << ": " << Quote(value);
        sep = ", ";
    }
    j << "}}";
    return j.str();
}

/** Every stack must deliver exactly the bytes it was given: false (and why, on stderr) if not. */
bool
Conserved(const std::vector<MagnetStackResult>& results)
{
    bool ok = true;
    for (const auto& r : results)
    {
        if (r.app.bytesSent != r.givenBytes || r.sinkBytes != r.givenBytes)
        {
            std::cerr << "magnet-chain: stack " << r.stack << " was given " << r.givenBytes
                      << " bytes, handed " << r.app.bytesSent << " to TCP and delivered "
                      << r.sinkBytes << (r.failure.empty() ? "" : " (" + r.failure + ")") << "\n";
            ok = false;
        }
    }
    return ok;
}

struct Options
{
    MagnetChainConfig chain;
    std::string demand;
    std::string app;       //!< a whole application's demand (CSV) instead of one stream
    bool openLoop{false};  //!< --app: every event at its original time
    bool appReference{false}; //!< --app: also time the same connections as OnOffApplications
    bool hashedDemux{true};   //!< --app: MagnetTcpDemux finds each segment's socket (else ns-3's walk)
    uint64_t stream{0};
    std::string summary;
    bool bulkReference{false};
    bool noTrace{false};
};

/** The path flags, one value per stack separated by commas (the last repeated). */
struct PathFlags
{
    std::string rate{"20Mbps"};
    std::string delay{"30ms"};
    std::string queue{"100p"};
    std::string loss{"0"};
    std::string jitter{"0s"};
    std::string hops{"1"};
    std::string mtu{"1500"};
    std::string duplex{"0"};
    std::string seed{"1"};

    std::vector<MagnetPathConfig> Paths() const
    {
        std::vector<std::vector<std::string>> lists;
        size_t stacks = 1;
        for (const auto* text : {&rate, &delay, &queue, &loss, &jitter, &hops, &mtu, &duplex, &seed})
        {
            lists.push_back(MagnetSplit(*text, ','));
            stacks = std::max(stacks, lists.back().size());
        }
        std::vector<MagnetPathConfig> paths(stacks);
        for (size_t k = 0; k < stacks; ++k)
        {
            auto value = [&](size_t flag) { return lists[flag][std::min(k, lists[flag].size() - 1)]; };
            MagnetPathConfig& p = paths[k];
            p.rateBps = MagnetRate(value(0), "--rate");
            p.delay = MagnetTime(value(1), "--delay");
            p.queue = value(2);
            p.loss = MagnetLossConfig::Parse(value(3));
            p.jitter = MagnetTime(value(4), "--jitter");
            p.hops = MagnetCount(value(5), "--hops");
            p.mtu = MagnetCount(value(6), "--mtu");
            p.duplex = MagnetCount(value(7), "--duplex") != 0;
            p.seed = MagnetCount(value(8), "--pathSeed");
        }
        return paths;
    }
};

Options
Parse(int argc, char* argv[])
{
    Options o;
    MagnetChainConfig& c = o.chain;
    MagnetTcpConfig& t = c.tcp;
    PathFlags path;
    std::string mode = "offline";
    std::string cross;
    std::string delAckTimeout = "-1ns";
    bool newDataOnly = false;
    CommandLine cmd(__FILE__);
    cmd.AddValue("demand", "the demand: a magnet trace (its SOCK_SEND stream)", o.demand);
    cmd.AddValue("app", "instead: a whole application's demand (CSV), every connection at once", o.app);
    cmd.AddValue("openLoop", "--app: every event at its original time (no waits, no think times)", o.openLoop);
    cmd.AddValue("appReference", "--app: also time the same connections as plain OnOffApplications",
                 o.appReference);
    cmd.AddValue("hashedDemux",
                 "--app: find each segment's socket by a hash lookup (0: by ns-3's walk over every "
                 "endpoint; the same simulation, slower with many connections)",
                 o.hashedDemux);
    cmd.AddValue("stream", "sockid of the stream to replay (0: the only one)", o.stream);
    cmd.AddValue("stacks", "number of TCP stacks in sequence", c.stacks);
    cmd.AddValue("mode", "offline (stack k+1 replays stack k's wire) or relay", mode);
    cmd.AddValue("rate", "bottleneck rate per stack (20Mbps; 0 or none: no bottleneck)", path.rate);
    cmd.AddValue("delay", "one-way delay of each stack's path", path.delay);
    cmd.AddValue("queue", "the bottleneck's DropTail queue (100p or 150000B)", path.queue);
    cmd.AddValue("loss", "random loss at the bottleneck: 0.01, or ge:P/R[/BAD[/GOOD]]", path.loss);
    cmd.AddValue("jitter", "extra delay per packet at the bottleneck, up to this, order kept", path.jitter);
    cmd.AddValue("hops", "links in each path, the middle one the bottleneck", path.hops);
    cmd.AddValue("mtu", "MTU of each path", path.mtu);
    cmd.AddValue("duplex", "1: the reverse direction has the rate, queue and loss too, and cross "
                           "traffic runs both ways; 0: delay and jitter only", path.duplex);
    cmd.AddValue("pathSeed", "linkem's --seed of each path, whose loss draws it makes (magnet gives "
                             "stack k replay/cross.py's path_seed(--seed, k))", path.seed);
    cmd.AddValue("cross", "cross traffic, comma-separated: tcp:N, poisson:SHARE[/BYTES], "
                          "pareto:SHARE[/BYTES/ON/OFF]", cross);
    cmd.AddValue("crossSchedules", "a directory of UDP cross-traffic schedules to play "
                                   "(stack-K-cross-I.magnet; replay/cross.py draws them)", c.crossSchedules);
    cmd.AddValue("crossLead", "with cross traffic: how long it runs before the demand's time zero",
                 c.crossLead);
    cmd.AddValue("tcpModel", "linux (Linux 6.x's TCP: MagnetLinuxTcpSocket) or ns3 (ns-3's TcpSocketBase)",
                 t.model);
    cmd.AddValue("cc", "congestion control (TcpNewReno, TcpLinuxReno, TcpCubic, TcpBbr, ...)", t.cc);
    cmd.AddValue("nagle", "Nagle's algorithm (Linux's default; ns-3's is off)", t.nagle);
    cmd.AddValue("sack", "selective acknowledgements", t.sack);
    cmd.AddValue("timestamps", "TCP timestamps", t.timestamps);
    cmd.AddValue("windowScaling", "window scaling", t.windowScaling);
    cmd.AddValue("delAckCount", "segments per delayed ACK (0: ns-3's default)", t.delAckCount);
    cmd.AddValue("delAckTimeout", "delayed-ACK timeout (negative: ns-3's default)", delAckTimeout);
    cmd.AddValue("mss", "TCP MSS as TCP_MAXSEG (0: each path's MTU - 40)", t.mss);
    cmd.AddValue("sndbuf", "TCP send buffer, bytes (0: ns-3's default)", t.sndBuf);
    cmd.AddValue("rcvbuf", "TCP receive buffer, bytes (0: ns-3's default)", t.rcvBuf);
    cmd.AddValue("readSize", "bytes per read at the sinks", t.readSize);
    cmd.AddValue("readerWakeup", "linux model: the host's wake-up of each receiving application, "
                                 "data readable -> its read (0: at once)", t.readerWakeup);
    cmd.AddValue("ackLag", "linux model: the host's way in for a segment carrying data, its arrival -> "
                           "its processing by TCP, where the softirq's ACK leaves (0: at once)", t.ackLag);
    cmd.AddValue("replyLag", "linux model: the host's way in for a pure ACK, its arrival -> its "
                             "processing by TCP, where the data it releases leaves (0: at once)", t.replyLag);
    cmd.AddValue("newDataOnly", "offline: leave retransmitted bytes out of the next demand", newDataOnly);
    cmd.AddValue("startOffset", "time from connection to the demand's time zero", c.startOffset);
    cmd.AddValue("seed", "random seed of ns-3's draws (jitter, cross traffic; loss: --pathSeed)", c.seed);
    cmd.AddValue("out", "directory for stack-K.magnet and summary.json", c.outDir);
    cmd.AddValue("linkLog", "also write each stack's bottleneck log (stack-K.linklog, linkem's format)",
                 c.linkLog);
    cmd.AddValue("noTrace", "write no traces (benchmarking)", o.noTrace);
    cmd.AddValue("bulkReference", "also time BulkSendApplication moving the same bytes", o.bulkReference);
    cmd.Parse(argc, argv);
    if (mode != "offline" && mode != "relay")
    {
        throw std::invalid_argument("--mode '" + mode + "': offline or relay");
    }
    c.live = mode == "relay";
    c.newDataOnly = newDataOnly;
    c.paths = path.Paths();
    for (const auto& item : cross.empty() ? std::vector<std::string>{} : MagnetSplit(cross, ','))
    {
        c.cross.push_back(MagnetCrossConfig::Parse(item));
    }
    TimeValue timeout;
    if (!timeout.DeserializeFromString(delAckTimeout, MakeTimeChecker()))
    {
        throw std::invalid_argument("--delAckTimeout '" + delAckTimeout + "' is not a time");
    }
    t.delAckTimeout = timeout.Get();
    if ((o.demand.empty() == o.app.empty()) || c.outDir.empty())
    {
        throw std::invalid_argument("--out and one of --demand and --app are required");
    }
    o.summary = c.outDir + "/summary.json";
    if (o.noTrace)
    {
        c.outDir.clear();
    }
    return o;
}

std::string
CountsJson(const MagnetSideCounts& c)
{
    std::ostringstream j;
    j << "{\"sock_send\": " << c.sockSend << ", \"sock_send_bytes\": " << c.sockSendBytes
      << ", \"sock_recv\": " << c.sockRecv << ", \"sock_recv_bytes\": " << c.sockRecvBytes
      << ", \"dev_send\": " << c.devSend << ", \"dev_send_bytes\": " << c.devSendBytes
      << ", \"dev_recv\": " << c.devRecv << ", \"dev_recv_bytes\": " << c.devRecvBytes << "}";
    return j.str();
}

std::string
DropsJson(const MagnetStackCounts& c)
{
    std::ostringstream j;
    j << "{\"queue_drops\": " << c.queueDrops << ", \"loss_drops\": " << c.lossDrops << "}";
    return j.str();
}

void
WriteSummary(const std::string& path, const std::string& json)
{
    std::ofstream out(path + ".tmp");
    out << json;
    out.close();
    if (!out || std::rename((path + ".tmp").c_str(), path.c_str()) != 0)
    {
        throw MagnetTraceError(path, "cannot write the summary");
    }
}

/** --app: every connection of a whole application at once; 1 if any connection failed. */
int
RunApp(const Options& o)
{
    std::shared_ptr<const MagnetAppDemand> demand = ReadMagnetAppDemand(o.app);
    const MagnetChainConfig& c = o.chain;
    MagnetChain chain(c);
    chain.ApplyDefaults();
    uint32_t serverOpens = 0;
    for (const auto& conn : demand->connections)
    {
        serverOpens += conn.opener == MagnetSide::Server;
    }
    std::cout << "ns-3 " MAGNET_NS3_VERSION ": whole-application replay, " << demand->connections.size()
              << " connections (" << serverOpens << " opened by the server), "
              << (o.openLoop ? "open loop (every event at its original time)"
                             : "closed loop (waits and think times)")
              << "\n  path: " << chain.Describe(1) << "\n";
    if (!c.cross.empty())
    {
        std::cout << "  " << CrossLine(c) << (c.PathOf(1).duplex ? ", both directions" : "") << "\n";
    }
    std::cout << "  TCP:";
    for (const auto& [name, value] : chain.TcpSettings())
    {
        std::cout << " " << name << "=" << value;
    }
    std::cout << "\n  demand: " << demand->Bytes() << " bytes\n";
    ResetPeakRss();
    MagnetAppScenario scenario(c, o.openLoop);
    scenario.SetHashedDemux(o.hashedDemux);
    MagnetAppRunResult r = scenario.Run(demand);
    uint64_t peak = PeakRss();
    std::ostringstream reference;
    if (o.appReference)
    {
        ResetPeakRss();
        auto [cost, bytes] = scenario.RunReference(*demand, r.end);
        reference << ", \"reference\": {\"wall_s\": " << cost.wallSeconds << ", \"cpu_s\": "
                  << cost.cpuSeconds << ", \"peak_rss\": " << PeakRss() << ", \"bytes\": " << bytes
                  << "}";
        std::cout << "  the same connections as OnOffApplications: " << bytes << " bytes in "
                  << cost.wallSeconds << " s wall\n";
    }
    uint32_t failed = 0;
    for (const auto& conn : r.connections)
    {
        failed += conn.status != "ok";
    }
    std::cout << "  " << r.connections.size() - failed << " of " << r.connections.size()
              << " connections complete, simulated " << r.end.GetSeconds() << " s in "
              << r.cost.wallSeconds << " s wall\n";
    std::ostringstream j;
    j << "{\"config\": " << ConfigJson(chain) << ", \"app\": " << Quote(o.app)
      << ", \"open_loop\": " << Bool(o.openLoop) << ", \"connections\": " << r.connections.size()
      << ", \"failed\": " << failed << ", \"first_failure\": " << Quote(r.FirstFailure())
      << ", \"demand_bytes\": " << demand->Bytes() << ", \"sim_end_ns\": " << r.end.GetNanoSeconds()
      << ", \"wall_s\": " << r.cost.wallSeconds << ", \"cpu_s\": " << r.cost.cpuSeconds
      << ", \"peak_rss\": " << peak << reference.str() << ", \"hashed_demux\": "
      << Bool(o.hashedDemux) << ", \"demux\": {\"hits\": " << r.demux.hits << ", \"passed\": "
      << r.demux.passed << ", \"rebuilds\": " << r.demux.rebuilds << "}, \"client\": " << CountsJson(r.counts[0])
      << ", \"server\": " << CountsJson(r.counts[1]) << ", \"bottleneck_forward\": "
      << DropsJson(r.bottleneck[0]) << ", \"bottleneck_reverse\": " << DropsJson(r.bottleneck[1])
      << ", \"cross_bytes\": " << r.crossBytes << ", \"cross_ns\": " << r.crossTime.GetNanoSeconds()
      << ", \"traces\": [";
    for (size_t i = 0; i < r.traces.size(); ++i)
    {
        j << (i ? ", " : "") << Quote(r.traces[i]);
    }
    j << "]}\n";
    WriteSummary(o.summary, j.str());
    if (failed)
    {
        std::cerr << "magnet-chain: " << o.app << ": " << failed << " of " << r.connections.size()
                  << " connections failed (" << r.FirstFailure()
                  << (failed > 1 ? ", ..." : "") << "; connections.csv has each)\n";
        return 1;
    }
    return 0;
}

int
Main(int argc, char* argv[])
{
    Options o = Parse(argc, argv);
    if (!o.app.empty())
    {
        return RunApp(o);
    }
    uint64_t lost = 0;
    MagnetDemand demand = ReadMagnetDemand(o.demand, o.stream, &lost);
    if (lost)
    {
        std::cerr << "magnet-chain: note: " << o.demand << ": the capture lost " << lost
                  << " records: the demand may lack writes\n";
    }
    size_t writes = demand.size();
    uint64_t bytes = MagnetDemandBytes(demand);
    MagnetChain chain(o.chain);
    chain.ApplyDefaults();
    PrintConfig(chain, writes, bytes);

    ResetPeakRss();
    auto start = std::chrono::steady_clock::now();
    std::vector<MagnetStackResult> results = chain.Run(std::move(demand));
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    uint64_t peak = PeakRss();

    std::ostringstream bulk;
    if (o.bulkReference)
    {
        ResetPeakRss();
        bulk << ", \"bulk_reference\": [";
        for (const auto& r : results)
        {
            uint32_t size = static_cast<uint32_t>(std::max<uint64_t>(1, r.demandBytes / std::max<uint64_t>(1, r.demandWrites)));
            MagnetCost cost = chain.RunBulkSend(r.demandBytes, size);
            bulk << (r.stack > 1 ? ", " : "") << "{\"stack\": " << r.stack << ", \"bytes\": "
                 << r.demandBytes << ", \"send_size\": " << size << ", \"wall_s\": "
                 << cost.wallSeconds << ", \"cpu_s\": " << cost.cpuSeconds << "}";
            std::cout << "  BulkSend reference, stack " << r.stack << ": " << r.demandBytes
                      << " bytes in " << size << "-byte writes, " << cost.wallSeconds
                      << " s wall, " << cost.cpuSeconds << " s CPU\n";
        }
        bulk << "], \"bulk_peak_rss\": " << PeakRss();
    }
    for (const auto& r : results)
    {
        std::cout << "  stack " << r.stack << ": " << r.demandWrites << " writes, "
                  << r.counts.devSend << " segments on the wire (" << r.counts.devRetrans
                  << " retransmitted), " << r.sinkBytes << " of " << r.demandBytes
                  << " bytes delivered, " << r.app.lateWrites << " writes late (max "
                  << r.app.maxLag.GetSeconds() << " s), " << r.cost.wallSeconds << " s wall\n";
    }
    bool conserved = Conserved(results);
    std::ofstream json(o.summary + ".tmp");
    json << "{\"config\": " << ConfigJson(chain) << ", \"demand_writes\": " << writes
         << ", \"demand_bytes\": " << bytes << ", \"wall_s\": " << wall
         << ", \"peak_rss\": " << peak << ", \"conserved\": " << (conserved ? "true" : "false")
         << bulk.str() << ", \"stacks\": [";
    for (size_t i = 0; i < results.size(); ++i)
    {
        json << (i ? ", " : "") << StackJson(results[i]);
    }
    json << "]}\n";
    json.close();
    if (!json || std::rename((o.summary + ".tmp").c_str(), o.summary.c_str()) != 0)
    {
        throw MagnetTraceError(o.summary, "cannot write the summary");
    }
    return conserved ? 0 : 1;
}

} // namespace

int
main(int argc, char* argv[])
{
    try
    {
        return Main(argc, argv);
    }
    catch (const MagnetTraceError& e)
    {
        std::cerr << "magnet-chain: " << e.what() << "\n";
        return 2;
    }
    catch (const std::invalid_argument& e)
    {
        std::cerr << "magnet-chain: " << e.what() << "\n";
        return 2;
    }
    catch (const std::exception& e)
    {
        std::cerr << "magnet-chain: " << e.what() << "\n";
        return 1;
    }
}
