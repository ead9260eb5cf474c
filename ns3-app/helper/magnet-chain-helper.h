/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef MAGNET_CHAIN_HELPER_H
#define MAGNET_CHAIN_HELPER_H

#include "magnet-link-log.h"
#include "magnet-path-helper.h"
#include "magnet-replay-application.h"
#include "magnet-stack-recorder.h"
#include "magnet-tcp-profile.h"

#include "ns3/ipv4-address-helper.h"
#include "ns3/node.h"

#include <memory>
#include <string>
#include <vector>

namespace ns3
{

/** The successive-stack study: how N TCP stacks in sequence modulate a demand. */
struct MagnetChainConfig
{
    std::vector<MagnetPathConfig> paths{MagnetPathConfig()}; //!< per stack, the last repeated
    MagnetTcpConfig tcp;
    std::vector<MagnetCrossConfig> cross; //!< on every stack's bottleneck
    uint32_t stacks{4};
    /**
     * false (offline, as the paper's Table II): stack k runs alone, then the
     * data segments it put on its wire become stack k+1's writes (sizes and
     * times).  true (relay): relay nodes in one simulation write each read
     * they get from stack k into stack k+1 at once.
     */
    bool live{false};
    bool newDataOnly{false};   //!< offline: drop retransmitted bytes from the next demand
    Time startOffset;          //!< connection established -> demand time zero
    Time crossLead{Seconds(2)}; //!< with cross traffic: its start -> the demand's time zero
    /**
     * A directory of UDP cross-traffic schedules to play (stack-K-cross-I.magnet: stack
     * K's item I, replay/cross.py's UdpSchedule); empty: ns-3 draws its own.
     */
    std::string crossSchedules;
    bool linkLog{false}; //!< write each stack's bottleneck log (stack-K.linklog, linkem's format)
    uint32_t seed{1};
    std::string outDir; //!< stack-K.magnet traces go here; empty: none written

    const MagnetPathConfig& PathOf(uint32_t k) const; //!< stack k's path (1-based)
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
    uint64_t givenBytes{0};   //!< the bytes of the demand this stack was given (relay: to relay)
    uint64_t demandWrites{0};
    uint64_t demandBytes{0};
    MagnetReplayApplication::Stats app;
    MagnetStackCounts counts;
    MagnetRttStats rtt;       //!< the sender's
    uint32_t segmentSize{0};  //!< TCP payload of a full segment on this stack's path
    uint64_t crossBytes{0};   //!< cross traffic delivered across the bottleneck
    bool crossExhausted{false}; //!< a played UDP schedule ran out before the stack ended
    Time crossTime;           //!< ... in this much time
    uint64_t sinkBytes{0};
    uint64_t sinkReads{0};
    MagnetCost cost; //!< offline: this stack's simulation; live: the whole chain's
    std::string trace;
    std::string newBytes; //!< stack-K.new.npy: new bytes of each DEV_SEND (empty: not written)
    std::string linkLog;  //!< stack-K.linklog: the bottleneck's per-packet log (empty: not written)
    std::string reverseLinkLog; //!< duplex: stack-K.reverse.linklog, the reverse direction's
    std::string failure;  //!< why its connection failed or broke (empty: it did not)
};

/** @brief Builds and runs chains of simulated TCP stacks, each over its own path. */
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

    /**
     * Make the chain's TCP settings the defaults, ns-3's own where the chain sets
     * none (Run does it too; Config::SetDefault persists in the process).  The
     * segment size is per stack, set on each stack's sockets.  Selects stack 1's draws.
     */
    void ApplyDefaults() const;

    /**
     * Make ns-3's random numbers from now on those of the config's seed and stack k
     * (cross traffic, jitter; the loss draws are linkem's, MagnetPathConfig::seed).
     */
    void SelectDraws(uint32_t k) const;

    /** The TCP settings new sockets get now, as (setting, value): to state what was used. */
    std::vector<std::pair<std::string, std::string>> TcpSettings() const;

    /** Stack k's path and socket settings in words, as applied. */
    std::string Describe(uint32_t k) const;

    /** Throws std::invalid_argument naming what is wrong (a TCP variant ns-3 lacks: those it has). */
    static void Validate(const MagnetChainConfig& config);

  private:
    struct Stack
    {
        Ptr<MagnetReplayApplication> app;
        Ptr<MagnetSinkApplication> sink;
        MagnetPath path;
        std::unique_ptr<MagnetStackRecorder> recorder;
        std::unique_ptr<MagnetCrossTraffic> cross;
        std::unique_ptr<MagnetLinkLog> linkLog;
        std::unique_ptr<MagnetLinkLog> reverseLog; //!< duplex: the reverse direction's
    };

    Stack BuildStack(uint32_t k, Ptr<Node> sender, Ptr<Node> receiver, Ipv4AddressHelper& ip,
                     Time crossStart);
    void StopWhenDone(std::vector<Stack>& stacks);
    void StackDone();
    void StackFailed();
    MagnetStackResult Collect(uint32_t k, const Stack& stack, MagnetCost cost, uint64_t given) const;
    std::vector<MagnetStackResult> RunOffline(MagnetDemand demand);
    std::vector<MagnetStackResult> RunLive(MagnetDemand demand);
    std::string TracePath(uint32_t k, const std::string& suffix = ".magnet") const;
    std::vector<std::string> CrossSchedules(uint32_t k) const; //!< per cross item ("": ns-3's source)

    MagnetChainConfig m_config;
    MagnetTcpProfile m_profile;
    uint32_t m_running{0}; //!< stacks whose sink has not yet seen the end (with cross traffic)
};

} // namespace ns3

#endif /* MAGNET_CHAIN_HELPER_H */
