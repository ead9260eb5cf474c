/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef MAGNET_CHAIN_HELPER_H
#define MAGNET_CHAIN_HELPER_H

#include "magnet-replay-application.h"
#include "magnet-stack-recorder.h"

#include "ns3/ipv4-address-helper.h"
#include "ns3/ipv4-interface-container.h"
#include "ns3/net-device-container.h"
#include "ns3/node.h"

#include <string>
#include <vector>

namespace ns3
{

/** One TCP stack's link and socket settings. */
struct MagnetLinkConfig
{
    std::string rate{"20Mbps"};     //!< link rate (the bottleneck)
    std::string delay{"30ms"};      //!< one-way propagation delay
    std::string queue{"100p"};      //!< the sender device's DropTail queue (no queue disc)
    uint32_t mss{1448};             //!< TCP segment size (payload bytes)
    std::string tcp{"TcpNewReno"};  //!< congestion control
    uint32_t sndBuf{131072};        //!< TCP send buffer, bytes
    uint32_t rcvBuf{131072};        //!< TCP receive buffer, bytes
    double loss{0};                 //!< packet loss rate on the link (receiver's error model)
    bool nagle{true};               //!< Nagle's algorithm, as Linux has it unless TCP_NODELAY
};

/** The successive-stack study: how N TCP stacks in sequence modulate a demand. */
struct MagnetChainConfig
{
    MagnetLinkConfig link;
    uint32_t stacks{4};
    /**
     * false (offline, as the paper's Table II): stack k runs alone, then the
     * data segments it put on its link become stack k+1's writes (sizes and
     * times).  true (live): relay nodes in one simulation write each read
     * they get from stack k into stack k+1 at once.
     */
    bool live{false};
    bool newDataOnly{false}; //!< offline: drop retransmitted bytes from the next demand
    Time startOffset;        //!< connection established -> demand time zero
    uint32_t readSize{65536};
    uint32_t seed{1};
    std::string outDir; //!< stack-K.magnet traces go here; empty: none written
};

/** What a simulation cost: wall seconds, and CPU seconds (less disturbed by other work). */
struct MagnetCost
{
    double wallSeconds{0};
    double cpuSeconds{0};
};

/** What one stack did. */
struct MagnetStackResult
{
    uint32_t stack{0};
    uint64_t demandWrites{0};
    uint64_t demandBytes{0};
    MagnetReplayApplication::Stats app;
    MagnetStackCounts counts;
    uint64_t sinkBytes{0};
    uint64_t sinkReads{0};
    MagnetCost cost; //!< offline: this stack's simulation; live: the whole chain's
    std::string trace;
};

/** @brief Builds and runs chains of simulated TCP stacks, each over its own point-to-point link. */
class MagnetChain
{
  public:
    explicit MagnetChain(MagnetChainConfig config);

    /** Run the chain on `demand` (the first stack's writes; pass it moved to save a copy). */
    std::vector<MagnetStackResult> Run(MagnetDemand demand);

    /**
     * ns-3's BulkSendApplication moving `bytes` in `sendSize` writes over one
     * link configured like the chain's: the reference cost.
     */
    MagnetCost RunBulkSend(uint64_t bytes, uint32_t sendSize);

    const MagnetChainConfig& GetConfig() const;

    /** Make the chain's TCP settings the defaults (Run does it too; Config::SetDefault persists). */
    void ApplyDefaults() const;

    /** The TCP settings new sockets get now, as (attribute, value): to state what was used. */
    static std::vector<std::pair<std::string, std::string>> TcpSettings();

    /** Throws std::invalid_argument naming a malformed rate, delay, queue or TCP variant. */
    static void Validate(const MagnetChainConfig& config);

  private:
    struct Hop
    {
        NetDeviceContainer devices;
        Ipv4InterfaceContainer addresses;
    };

    struct Stack
    {
        Ptr<MagnetReplayApplication> app;
        Ptr<MagnetSinkApplication> sink;
        Hop hop;
        std::unique_ptr<MagnetStackRecorder> recorder;
    };

    Hop BuildHop(Ptr<Node> a, Ptr<Node> b, Ipv4AddressHelper& ip) const;
    Stack BuildStack(uint32_t k, Ptr<Node> sender, Ptr<Node> receiver, Ipv4AddressHelper& ip) const;
    MagnetStackResult Collect(uint32_t k, const Stack& stack, MagnetCost cost) const;
    std::vector<MagnetStackResult> RunOffline(MagnetDemand demand);
    std::vector<MagnetStackResult> RunLive(MagnetDemand demand);
    std::string TracePath(uint32_t k) const;

    MagnetChainConfig m_config;
};

} // namespace ns3

#endif /* MAGNET_CHAIN_HELPER_H */
