/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef MAGNET_APP_REPLAY_HELPER_H
#define MAGNET_APP_REPLAY_HELPER_H

#include "magnet-app-demand.h"
#include "magnet-connection-application.h"

#include "ns3/application-container.h"
#include "ns3/ipv4-address.h"
#include "ns3/node.h"
#include "ns3/object-factory.h"
#include "ns3/simple-ref-count.h"

#include <memory>
#include <string>
#include <vector>

namespace ns3
{

/** One connection of a whole-application replay, as connections.csv has it. */
struct MagnetConnectionResult
{
    uint32_t connection{0};
    MagnetSide opener{MagnetSide::Client};
    Time start{Time::Max()};      //!< the opener's connect(), from the replay's start (Max: never)
    Time completion{Time::Max()}; //!< both sides closed and read everything (Max: never)
    uint64_t bytesSent{0};        //!< client to server, as the client's socket accepted them
    uint64_t bytesReceived{0};    //!< server to client, as the client read them
    uint32_t adus{0};
    std::string status;           //!< "ok", or why it failed ("connect failed", "reset", "incomplete")
};

/** One ADU of a whole-application replay, as adus.csv has it. */
struct MagnetAduResult
{
    uint32_t connection{0};
    int32_t adu{0};
    MagnetSide side{MagnetSide::Client};
    uint64_t bytes{0};
    Time start{Time::Max()};    //!< its first write
    Time end{Time::Max()};      //!< its last byte read by the peer
    Time response{Time::Max()}; //!< answering an ADU of the peer: from that one's first write
                                //!< to this one's last byte read by the peer (Max: not an answer)
};

/**
 * @brief What MagnetAppReplayHelper installed: one application per connection
 * and side, and the results once the simulation ran.
 */
class MagnetAppReplay
{
  public:
    MagnetAppReplay() = default;

    ApplicationContainer GetApplications() const; //!< acceptors, then every connection's two sides
    uint32_t GetN() const;                        //!< connections
    Ptr<MagnetConnectionApplication> Get(uint32_t i, MagnetSide side) const;
    const MagnetAppDemand& GetDemand() const;

    /** The replay's time zero: every application starts then. */
    void Start(Time start);

    /**
     * Stop the simulation once every connection is complete or failed (cross
     * traffic never ends by itself); with `stall` > 0 also once nothing moved on
     * any connection for that long while none waits on a timer of its own (a
     * replay that cannot go on: the rest is reported incomplete).
     */
    void StopWhenDone(Time stall = Seconds(0));

    /** Every connection ok. */
    bool Complete() const;

    std::vector<MagnetConnectionResult> Connections() const;
    std::vector<MagnetAduResult> Adus() const;

    /** DIR/connections.csv and DIR/adus.csv (docs/app-demand.md's columns), `stack` in their first column. */
    void WriteResults(const std::string& dir, uint32_t stack = 1) const;

  private:
    friend class MagnetAppReplayHelper;

    /** Shared by copies of this object and held by the callbacks it connects. */
    struct State : public SimpleRefCount<State>
    {
        std::shared_ptr<const MagnetAppDemand> demand;
        std::vector<Ptr<MagnetConnectionApplication>> apps[2]; //!< per side, per connection
        ApplicationContainer acceptors;
        Time start;
        std::vector<uint8_t> finished; //!< per connection: sides finished
        uint32_t running{0};           //!< connections neither complete nor failed
        Time stall;
        uint64_t lastProgress{0};
        Time lastMoved;

        void SideFinished(uint32_t connection);
        void CheckStall();
        uint64_t Progress() const;
    };

    Ptr<State> m_state;
};

/**
 * @brief Installs a whole application's demand between a client node and a
 * server node: an acceptor on each, and one MagnetConnectionApplication per
 * connection and side, wired so that each connection opens from its side and
 * each `after` waits for its earlier connection.
 *
 *     MagnetAppReplayHelper helper("app.csv");
 *     helper.SetSocketAttribute("SegmentSize", UintegerValue(1448));
 *     MagnetAppReplay replay = helper.Install(client, clientAddress, server, serverAddress);
 *     replay.Start(Seconds(1));
 *     replay.StopWhenDone();
 *     Simulator::Run();
 *     replay.WriteResults("out");
 */
class MagnetAppReplayHelper
{
  public:
    /** Read the demand's CSV form (throws MagnetTraceError naming the file, row and connection). */
    explicit MagnetAppReplayHelper(const std::string& demandFile);
    explicit MagnetAppReplayHelper(std::shared_ptr<const MagnetAppDemand> demand);

    /** An attribute of every MagnetConnectionApplication (ReadSize, OpenLoop, TcpVariant). */
    void SetAttribute(const std::string& name, const AttributeValue& value);
    /** An attribute of every socket (e.g. SegmentSize: ns-3's default is 536 bytes). */
    void SetSocketAttribute(const std::string& name, const AttributeValue& value);
    /** The port both acceptors listen on (default 9). */
    void SetPort(uint16_t port);

    MagnetAppReplay Install(Ptr<Node> client,
                            Ipv4Address clientAddress,
                            Ptr<Node> server,
                            Ipv4Address serverAddress) const;

    const MagnetAppDemand& GetDemand() const;

  private:
    std::shared_ptr<const MagnetAppDemand> m_demand;
    ObjectFactory m_factory;
    std::vector<std::pair<std::string, Ptr<AttributeValue>>> m_socketAttributes;
    uint16_t m_port{9};
};

} // namespace ns3

#endif /* MAGNET_APP_REPLAY_HELPER_H */
