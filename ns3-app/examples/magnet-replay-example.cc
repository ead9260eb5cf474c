/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The smallest use of MagnetReplayApplication: replay a demand over one TCP
 * connection on a point-to-point link and record it as a magnet trace.
 *
 *   magnet-replay-example [--demand=x.magnet] [--trace=out.magnet] [--rate=10Mbps --delay=20ms]
 *
 * Without --demand it replays an FTP-like demand (10 KB every 20 ms for 5 s).
 */
#include "magnet-replay-helper.h"
#include "magnet-stack-recorder.h"

#include "ns3/command-line.h"
#include "ns3/config.h"
#include "ns3/inet-socket-address.h"
#include "ns3/internet-stack-helper.h"
#include "ns3/ipv4-address-helper.h"
#include "ns3/point-to-point-helper.h"
#include "ns3/simulator.h"
#include "ns3/string.h"
#include "ns3/uinteger.h"

#include <iostream>

using namespace ns3;

int
main(int argc, char* argv[])
{
    std::string demandFile;
    std::string tracePath;
    std::string rate = "10Mbps";
    std::string delay = "20ms";
    CommandLine cmd(__FILE__);
    cmd.AddValue("demand", "a magnet trace whose SOCK_SEND records are the demand", demandFile);
    cmd.AddValue("trace", "write the replay as a magnet trace here", tracePath);
    cmd.AddValue("rate", "link rate", rate);
    cmd.AddValue("delay", "one-way link delay", delay);
    cmd.Parse(argc, argv);
    Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(1448)); // ns-3's default is 536

    NodeContainer nodes;
    nodes.Create(2);
    PointToPointHelper p2p;
    p2p.SetDeviceAttribute("DataRate", StringValue(rate));
    p2p.SetChannelAttribute("Delay", StringValue(delay));
    NetDeviceContainer devices = p2p.Install(nodes);
    InternetStackHelper().Install(nodes);
    Ipv4InterfaceContainer addresses = Ipv4AddressHelper("10.1.1.0", "255.255.255.0").Assign(devices);

    MagnetReplayHelper replay("ns3::TcpSocketFactory", InetSocketAddress(addresses.GetAddress(1), 9));
    MagnetDemand demand;
    try
    {
        for (int i = 0; demandFile.empty() && i < 250; ++i)
        {
            demand.push_back({i * 20000000LL, 10240});
        }
        if (!demandFile.empty())
        {
            demand = ReadMagnetDemand(demandFile);
        }
    }
    catch (const MagnetTraceError& e)
    {
        std::cerr << "magnet-replay-example: " << e.what() << "\n";
        return 2;
    }
    replay.SetDemand(demand);
    auto app = DynamicCast<MagnetReplayApplication>(replay.Install(nodes.Get(0)).Get(0));
    MagnetSinkHelper sinks("ns3::TcpSocketFactory", InetSocketAddress(Ipv4Address::GetAny(), 9));
    auto sink = DynamicCast<MagnetSinkApplication>(sinks.Install(nodes.Get(1)).Get(0));

    MagnetStackRecorder recorder(tracePath, 1, "magnet-replay-example: " + rate + ", " + delay);
    recorder.Attach(app, devices.Get(0), devices.Get(1), sink, 9);
    Simulator::Run();
    recorder.Close();

    const auto& stats = app->GetStats();
    const auto& counts = recorder.GetCounts();
    std::cout << "demand: " << demand.size() << " writes, " << MagnetDemandBytes(demand) << " bytes\n"
              << "sent: " << stats.sendCalls << " Send() calls, " << stats.bytesSent << " bytes, "
              << stats.lateWrites << " writes late (max " << stats.maxLag.GetSeconds() << " s)\n"
              << "wire: " << counts.devSend << " data segments, mean "
              << (counts.devSend ? counts.devSendBytes / counts.devSend : 0) << " bytes\n"
              << "delivered: " << sink->GetTotalRx() << " bytes in " << sink->GetReads() << " reads\n";
    Simulator::Destroy();
    return sink->GetTotalRx() == MagnetDemandBytes(demand) ? 0 : 1;
}
