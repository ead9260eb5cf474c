/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The successive-stack study (ALS 2001, Table II) in ns-3: an application's
 * demand through N TCP stacks in sequence, each over its own point-to-point
 * link, each written as a magnet trace (OUT/stack-K.magnet) with a summary
 * (OUT/summary.json).  `magnet replay ns3` builds and drives this program.
 *
 *   magnet-chain --demand=ftp.magnet --stacks=4 --out=DIR [--rate=20Mbps --delay=30ms ...]
 *
 * --bulkReference also moves each stack's bytes with ns-3's BulkSendApplication
 * over an identical link, to measure what the replay costs in comparison.
 */
#include "magnet-chain-helper.h"

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

void
PrintConfig(const MagnetChainConfig& c, size_t writes, uint64_t bytes)
{
    const MagnetLinkConfig& l = c.link;
    std::cout << "ns-3 " MAGNET_NS3_VERSION ": " << c.stacks << " TCP stack(s) in sequence, "
              << (c.live ? "live (relays write each read at once)"
                         : "offline (stack k's wire output replayed as stack k+1's writes)")
              << "\n  each link: point-to-point " << l.rate << ", " << l.delay
              << " one-way, DropTail queue " << l.queue << ", loss " << l.loss << "\n  TCP:";
    for (const auto& [name, value] : MagnetChain::TcpSettings())
    {
        std::cout << " " << name << "=" << value;
    }
    std::cout << "\n  demand: " << writes << " writes, " << bytes << " bytes\n";
}

std::string
StackJson(const MagnetStackResult& r)
{
    const auto& a = r.app;
    const auto& c = r.counts;
    std::ostringstream j;
    j << "{\"stack\": " << r.stack << ", \"trace\": " << Quote(r.trace)
      << ", \"writes_due\": " << r.demandWrites << ", \"bytes_due\": " << r.demandBytes
      << ", \"send_calls\": " << a.sendCalls << ", \"bytes_sent\": " << a.bytesSent
      << ", \"late_writes\": " << a.lateWrites << ", \"max_lag_ns\": " << a.maxLag.GetNanoSeconds()
      << ", \"total_lag_ns\": " << a.totalLag.GetNanoSeconds()
      << ", \"connected_ns\": " << a.connected.GetNanoSeconds()
      << ", \"tcp_send\": " << c.tcpSend << ", \"tcp_retrans\": " << c.tcpRetrans
      << ", \"tcp_retrans_bytes\": " << c.tcpRetransBytes << ", \"dev_send\": " << c.devSend
      << ", \"dev_send_bytes\": " << c.devSendBytes << ", \"dev_retrans\": " << c.devRetrans
      << ", \"dev_recv\": " << c.devRecv << ", \"dev_recv_bytes\": " << c.devRecvBytes
      << ", \"reads\": " << r.sinkReads << ", \"bytes_received\": " << r.sinkBytes
      << ", \"wall_s\": " << r.cost.wallSeconds << ", \"cpu_s\": " << r.cost.cpuSeconds << "}";
    return j.str();
}

std::string
ConfigJson(const MagnetChainConfig& c)
{
    const MagnetLinkConfig& l = c.link;
    std::ostringstream j;
    j << "{\"ns3_version\": " << Quote(MAGNET_NS3_VERSION) << ", \"stacks\": " << c.stacks
      << ", \"mode\": " << Quote(c.live ? "live" : "offline")
      << ", \"rate\": " << Quote(l.rate) << ", \"rate_bps\": " << DataRate(l.rate).GetBitRate()
      << ", \"delay\": " << Quote(l.delay) << ", \"delay_ns\": " << Time(l.delay).GetNanoSeconds()
      << ", \"queue\": " << Quote(l.queue) << ", \"mss\": " << l.mss << ", \"tcp\": " << Quote(l.tcp)
      << ", \"sndbuf\": " << l.sndBuf << ", \"rcvbuf\": " << l.rcvBuf << ", \"loss\": " << l.loss
      << ", \"new_data_only\": " << (c.newDataOnly ? "true" : "false")
      << ", \"start_offset_ns\": " << c.startOffset.GetNanoSeconds()
      << ", \"read_size\": " << c.readSize << ", \"seed\": " << c.seed
      << ", \"nagle\": " << (l.nagle ? "true" : "false") << ", \"tcp_settings\": {";
    const char* sep = "";
    for (const auto& [name, value] : MagnetChain::TcpSettings())
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
        if (r.app.bytesSent != r.demandBytes || r.sinkBytes != r.demandBytes)
        {
            std::cerr << "magnet-chain: stack " << r.stack << " was given " << r.demandBytes
                      << " bytes, handed " << r.app.bytesSent << " to TCP and delivered "
                      << r.sinkBytes << "\n";
            ok = false;
        }
    }
    return ok;
}

struct Options
{
    MagnetChainConfig chain;
    std::string demand;
    uint64_t stream{0};
    std::string summary;
    bool bulkReference{false};
    bool noTrace{false};
};

Options
Parse(int argc, char* argv[])
{
    Options o;
    MagnetChainConfig& c = o.chain;
    MagnetLinkConfig& l = c.link;
    bool live = false;
    bool newDataOnly = false;
    CommandLine cmd(__FILE__);
    cmd.AddValue("demand", "the demand: a magnet trace (its SOCK_SEND stream)", o.demand);
    cmd.AddValue("stream", "sockid of the stream to replay (0: the only one)", o.stream);
    cmd.AddValue("stacks", "number of TCP stacks in sequence", c.stacks);
    cmd.AddValue("rate", "link rate of each stack", l.rate);
    cmd.AddValue("delay", "one-way delay of each link", l.delay);
    cmd.AddValue("queue", "sender device DropTail queue size (e.g. 100p)", l.queue);
    cmd.AddValue("mss", "TCP segment size, bytes", l.mss);
    cmd.AddValue("tcp", "TCP congestion control (TcpNewReno, TcpCubic, ...)", l.tcp);
    cmd.AddValue("sndbuf", "TCP send buffer, bytes", l.sndBuf);
    cmd.AddValue("rcvbuf", "TCP receive buffer, bytes", l.rcvBuf);
    cmd.AddValue("loss", "packet loss rate on each link", l.loss);
    cmd.AddValue("nagle", "Nagle's algorithm (Linux's default; ns-3's is off)", l.nagle);
    cmd.AddValue("live", "relay live instead of replaying each stack's wire offline", live);
    cmd.AddValue("newDataOnly", "offline: leave retransmitted bytes out of the next demand", newDataOnly);
    cmd.AddValue("startOffset", "time from connection to the demand's time zero", c.startOffset);
    cmd.AddValue("readSize", "bytes per read at the sinks", c.readSize);
    cmd.AddValue("seed", "random seed (loss model)", c.seed);
    cmd.AddValue("out", "directory for stack-K.magnet and summary.json", c.outDir);
    cmd.AddValue("noTrace", "write no traces (benchmarking)", o.noTrace);
    cmd.AddValue("bulkReference", "also time BulkSendApplication moving the same bytes", o.bulkReference);
    cmd.Parse(argc, argv);
    c.live = live;
    c.newDataOnly = newDataOnly;
    if (o.demand.empty() || c.outDir.empty())
    {
        throw std::invalid_argument("--demand and --out are required");
    }
    o.summary = c.outDir + "/summary.json";
    if (o.noTrace)
    {
        c.outDir.clear();
    }
    return o;
}

int
Main(int argc, char* argv[])
{
    Options o = Parse(argc, argv);
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
    PrintConfig(o.chain, writes, bytes);

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
    json << "{\"config\": " << ConfigJson(o.chain) << ", \"demand_writes\": " << writes
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
