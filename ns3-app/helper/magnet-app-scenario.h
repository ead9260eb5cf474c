/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef MAGNET_APP_SCENARIO_H
#define MAGNET_APP_SCENARIO_H

#include "magnet-app-recorder.h"
#include "magnet-app-replay-helper.h"
#include "magnet-chain-helper.h"
#include "magnet-tcp-demux.h"

#include <string>
#include <vector>

namespace ns3
{

/** What a whole-application replay did. */
struct MagnetAppRunResult
{
    std::vector<MagnetConnectionResult> connections;
    std::vector<MagnetAduResult> adus;
    MagnetSideCounts counts[2];      //!< client, server
    MagnetStackCounts bottleneck[2]; //!< drops at the bottleneck, each direction (its queueDrops, lossDrops)
    uint64_t crossBytes{0};
    Time crossTime;
    Time end;                        //!< simulated time when it stopped
    MagnetCost cost;
    MagnetTcpDemux::Counts demux;    //!< segments by the hashed lookup, summed over the nodes
    std::vector<std::string> traces; //!< client.magnet, server.magnet (empty: none written)

    bool Complete() const;
    std::string FirstFailure() const; //!< "connection C: status" of the first that failed
};

/**
 * @brief Every connection of a whole application replayed at once between two
 * nodes, the client side and the server side, joined by one path (the chain's
 * first path: duplex or not, its cross traffic), with the chain's TCP.
 * Writes OUT/connections.csv, OUT/adus.csv and one trace per side
 * (OUT/client.magnet, OUT/server.magnet) when the config has an outDir.
 */
class MagnetAppScenario
{
  public:
    MagnetAppScenario(MagnetChainConfig config, bool openLoop);

    /**
     * Find each received segment's connection by a hash lookup (MagnetTcpDemux, the
     * default) or by ns-3's own walk over every endpoint of the node (O(sockets) a
     * packet).  The simulation is the same either way; RunReference follows it too.
     */
    void SetHashedDemux(bool hashed);

    MagnetAppRunResult Run(std::shared_ptr<const MagnetAppDemand> demand);

    /**
     * The same connections as plain ns-3 applications, for the cost of a replay:
     * per connection and direction with data, an OnOffApplication over TCP from
     * the connection's open, sending that side's bytes at an even rate over the
     * connection's span in the demand (its last row less its open), writes of its
     * mean write size; PacketSinks read.  The same path, cross traffic and TCP;
     * stopped at `until` (the replay's end); the same socket lookup.  Returns its
     * cost and the bytes the sinks received.
     */
    std::pair<MagnetCost, uint64_t> RunReference(const MagnetAppDemand& demand, Time until);

    /** Stop when nothing moved for this long (the connections not done are incomplete). */
    static constexpr int64_t kStallSeconds = 120;

  private:
    MagnetChainConfig m_config;
    bool m_openLoop;
    bool m_hashedDemux{true};

    /** Every node's TCP behind a MagnetTcpDemux, if so configured; what they did, summed. */
    void InstallDemux() const;
    MagnetTcpDemux::Counts DemuxCounts() const;
};

} // namespace ns3

#endif /* MAGNET_APP_SCENARIO_H */
