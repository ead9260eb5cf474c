/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef MAGNET_PATH_HELPER_H
#define MAGNET_PATH_HELPER_H

#include "ns3/application-container.h"
#include "ns3/error-model.h"
#include "ns3/ipv4-address-helper.h"
#include "ns3/net-device-container.h"
#include "ns3/node-container.h"
#include "ns3/nstime.h"
#include "ns3/packet-sink.h"
#include "ns3/random-variable-stream.h"

#include <string>
#include <vector>

namespace ns3
{

/** Random loss per packet: Bernoulli (r < 0) or a Gilbert-Elliott chain (magnetlib.knobs.Loss). */
struct MagnetLossConfig
{
    double p{0};    //!< Bernoulli: loss probability; Gilbert-Elliott: P(good -> bad) per packet
    double r{-1};   //!< Gilbert-Elliott: P(bad -> good) per packet; < 0: Bernoulli
    double bad{1};  //!< Gilbert-Elliott: loss probability in the bad state
    double good{0}; //!< Gilbert-Elliott: loss probability in the good state

    bool Bursty() const;
    double Mean() const; //!< the long-run loss probability

    /** "0.01" (Bernoulli) or "ge:P/R[/BAD[/GOOD]]", probabilities as fractions. */
    static MagnetLossConfig Parse(const std::string& text);
    std::string Describe() const;
};

/**
 * One stack's path (magnet.replay.scenario.Path): `hops` links in a row, the
 * middle one (hops / 2) the bottleneck with the rate, DropTail queue, loss and
 * jitter; the other hops fast and lossless.  The bottleneck's reverse direction
 * is fast and lossless too, unless `duplex`: then it has the same rate, queue
 * and loss (its own queue, its own draws), and cross traffic runs both ways.
 * The one-way delay is spread evenly over the hops (the remainder on the
 * last), the same in both directions.
 */
struct MagnetPathConfig
{
    uint64_t rateBps{20000000}; //!< the bottleneck's rate; 0: none (every hop fast)
    Time delay{MilliSeconds(30)};
    std::string queue{"100p"};  //!< ns-3 QueueSize of the bottleneck's queue: packets or bytes
    MagnetLossConfig loss;
    Time jitter;                //!< up to this much more per packet on the bottleneck, order kept
    uint32_t hops{1};
    uint32_t mtu{1500};
    bool duplex{false};         //!< the reverse direction is a link like the forward one
    uint64_t seed{1};           //!< linkem's --seed of this path: its loss draws (replay/cross.py path_seed)

    uint32_t Bottleneck() const; //!< index of the bottleneck hop (0-based)
    Time HopDelay(uint32_t hop) const;
    std::string Describe() const;
    /** Throws std::invalid_argument, "WHERE: problem", for a value ns-3 cannot apply. */
    void Validate(const std::string& where) const;
};

/**
 * Competing traffic on a bottleneck (magnet.replay.scenario.Cross): in the
 * data direction, and the same again in the reverse direction on a duplex path.
 */
struct MagnetCrossConfig
{
    enum class Kind
    {
        BulkTcp, //!< `flows` BulkSendApplications
        Poisson, //!< UDP, exponential gaps, fixed size (MagnetPoissonApplication)
        Pareto,  //!< UDP on/off (OnOffApplication, Pareto on and off times)
    };

    Kind kind{Kind::BulkTcp};
    uint32_t flows{1};
    double share{0};           //!< UDP: mean rate as a share of the bottleneck's
    uint32_t packetBytes{1000}; //!< UDP payload
    Time on{MilliSeconds(500)}; //!< Pareto: mean on time
    Time off{MilliSeconds(500)}; //!< Pareto: mean off time

    /** "tcp:N", "poisson:SHARE[/BYTES]" or "pareto:SHARE[/BYTES/ON/OFF]" (SHARE a fraction). */
    static MagnetCrossConfig Parse(const std::string& text);
    std::string Describe(uint64_t rateBps) const;
    /** Throws std::invalid_argument, "WHERE: problem", if it cannot run on `path`. */
    void Validate(const MagnetPathConfig& path, const std::string& where) const;
};

/** A path as built: its nodes (sender, routers, receiver) and links (hop i joins nodes i, i+1). */
struct MagnetPath
{
    NodeContainer nodes;
    std::vector<NetDeviceContainer> links;
    uint32_t bottleneck{0};
    Ipv4Address receiverAddress;

    Ptr<NetDevice> SenderDevice() const;     //!< where the sender's segments leave
    Ptr<NetDevice> ReceiverDevice() const;   //!< where they arrive at the receiver
    Ptr<NetDevice> BottleneckTx() const;
    Ptr<NetDevice> BottleneckRx() const;
    Ptr<Node> Head() const;                  //!< the node before the bottleneck
    Ptr<Node> Tail() const;                  //!< the node after it
};

/** Builds paths of point-to-point links between two nodes. */
class MagnetPathHelper
{
  public:
    static constexpr const char* kFastRate = "10Gbps";   //!< the hops that are not the bottleneck
    static constexpr const char* kFastQueue = "100000p"; //!< ... never drop

    /** The loss draws are linkem's for the config's seed. */
    explicit MagnetPathHelper(MagnetPathConfig config);

    /** The path from `sender` to `receiver` (routers made here), addresses from `ip`. */
    MagnetPath Install(Ptr<Node> sender, Ptr<Node> receiver, Ipv4AddressHelper& ip) const;

    /** A fast, lossless link of the path's MTU with this delay. */
    NetDeviceContainer FastLink(Ptr<Node> a, Ptr<Node> b, Time delay, Ipv4AddressHelper& ip) const;

  private:
    NetDeviceContainer Link(Ptr<Node> a, Ptr<Node> b, uint32_t hop, Ipv4AddressHelper& ip) const;
    Ptr<ErrorModel> Errors(bool reverse) const; //!< a direction's loss model, linkem's draws

    MagnetPathConfig m_config;
};

/**
 * Cross traffic on one path's bottleneck: one node attached before it (to
 * the bottleneck's head) sends, one attached after it (to its tail) receives,
 * over fast links whose delays give the cross flows the path's round trip.
 */
class MagnetCrossTraffic
{
  public:
    MagnetCrossTraffic(std::vector<MagnetCrossConfig> cross, MagnetPathConfig path);

    /**
     * Build the nodes, links and applications; the applications start at
     * `start`, TCP flows 10 ms apart (flow i at start + 10 ms x i, plus its
     * drawn lateness after DrawStarts) with segments of `segmentSize` bytes,
     * their sockets from `tcpFactory` (MagnetTcpProfile::SocketFactory).
     */
    void Install(const MagnetPath& path, Ipv4AddressHelper& ip, Time start, uint32_t segmentSize,
                 TypeId tcpFactory);

    /**
     * Play these schedules (magnet traces of the datagrams, replay/cross.py's
     * UdpSchedule), one per cross item, instead of drawing with ns-3's own
     * sources; an empty name keeps ns-3's source for that item.  Before Install.
     * The schedules are the forward direction's: on a duplex path ns-3 draws the
     * reverse direction's cross traffic.
     */
    void SetSchedules(std::vector<std::string> files);

    /**
     * Start each bulk TCP flow late by a draw of what the real sender's flows were
     * (replay/cross.py connects flow i 10 ms x i after its origin, and a thread's
     * wake-up and socket set-up add the measured lateness, kBulkLateUs[i]), drawn from
     * RNG stream `stream` of the current run (the scenario's seed and stack,
     * MagnetChain::SelectDraws): every seed and stack its own phase of the flows'
     * sawtooth, as every real run and stack is.  Without it (ns-3's own TCP model)
     * the flows start exactly 10 ms apart.  Before Install.
     */
    void DrawStarts(int64_t stream);

    /** A played schedule ran out before the end: that source sent nothing after it. */
    bool ScheduleExhausted() const;

    /**
     * The TCP payload of a full segment of sockets made from now on: ns-3 has
     * no per-application setting for BulkSendApplication's socket.
     */
    static void SetSegmentSize(uint32_t bytes);

    uint64_t DeliveredBytes() const; //!< payload bytes the cross sinks received
    Time GetStart() const;

    static constexpr uint16_t kFirstPort = 5001; //!< cross item i uses port kFirstPort + i
    static constexpr uint16_t kReverseFirstPort = 6001; //!< ... and kReverseFirstPort + i back
    static constexpr int64_t kStartStream = 1000; //!< DrawStarts' stream of stack k: this + k
    /**
     * How late (us) the real sender (replay/cross.py) connects bulk flow i after its due
     * time (origin + 10 ms x i): per flow index i = 0..3 (row i; later flows: row 3), its
     * 5 % quantiles, 0-100 %, each over 104 connects: 13 real replays (`magnet replay tcp`
     * of the agreement's vsftpd demand, --rate 20Mbps --delay 30ms --queue 1bdp --cross
     * tcp:4 --duplex on --stacks 4) x 4 stacks x both directions, on this 2-core VM at load
     * 0.9-4.0 (median 2.2), 2026-11-27.  Medians 0.64, 0.41, 0.40, 0.69 ms (flows 0 and 3
     * later than 1 and 2 in both halves of the runs; the directions and the stacks alike),
     * 0.18-6.06 ms in all.  (A loopback stand-in's first flows had a median of 0.33 ms.)
     * The demand's time zero is exactly CROSS_LEAD_NS after the origin in both engines, so
     * the flows' lead to it varies by this alone.
     */
    static constexpr double kBulkLateUs[4][21] = {
        {234, 272, 284, 300, 311, 376, 472, 510, 539, 578, 642, 738, 940, 1285, 1456, 1822, 2096, 2471, 2949, 4889, 6062},
        {180, 214, 237, 251, 260, 270, 280, 299, 321, 340, 408, 427, 439, 451, 467, 533, 583, 1085, 2084, 3377, 4520},
        {200, 234, 246, 253, 262, 267, 291, 307, 318, 372, 403, 421, 436, 455, 475, 495, 521, 571, 719, 1690, 5440},
        {210, 244, 302, 412, 458, 519, 552, 578, 610, 647, 691, 722, 738, 765, 817, 917, 1024, 1155, 1351, 1899, 4893}};

    /** Bulk flow i's start after the cross traffic's: 10 ms x i, plus a drawn lateness if DrawStarts. */
    Time BulkOffset(uint32_t flow);

  private:
    /**
     * The cross items from `from` to sinks on `to` (at `sinkAddress`), ports from
     * `firstPort`; UDP items with a schedule in `schedules` play it.
     */
    void InstallDirection(Ptr<Node> from, Ptr<Node> to, Ipv4Address sinkAddress, uint16_t firstPort,
                          Time start, uint32_t segmentSize, TypeId tcpFactory,
                          const std::vector<std::string>& schedules);

    std::vector<MagnetCrossConfig> m_cross;
    MagnetPathConfig m_path;
    std::vector<Ptr<PacketSink>> m_sinks;
    std::vector<std::string> m_schedules;
    std::vector<Ptr<Application>> m_played;
    Ptr<UniformRandomVariable> m_late; //!< DrawStarts' draws (null: none)
    Time m_start;
};

} // namespace ns3

#endif /* MAGNET_PATH_HELPER_H */
