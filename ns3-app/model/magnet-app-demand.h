/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A whole application's demand: every TCP connection it opened, which side
 * opened it and when, and each side's writes and closes with what they waited
 * for (the peer's bytes read, a think time).  The table is magnet's
 * whole-application demand (docs/app-demand.md), one row per event:
 *
 *   connection,event,side,time_ns,size,adu,wait_bytes,think_ns,after
 *
 * ReadMagnetAppDemand() reads its CSV form and refuses bad input in one line
 * naming the file, the row and the connection.
 */
#ifndef MAGNET_APP_DEMAND_H
#define MAGNET_APP_DEMAND_H

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ns3
{

/** The two ends of a whole application: the client side and the server side. */
enum class MagnetSide : uint8_t
{
    Client = 0,
    Server = 1,
};

const char* MagnetSideName(MagnetSide side);
MagnetSide MagnetOtherSide(MagnetSide side);

/** One event of one side of a connection: a write, a close (FIN) or a reset (abort). */
struct MagnetAppEvent
{
    enum class Kind : uint8_t
    {
        Send,
        Close,
        Reset,
    };

    Kind kind{Kind::Send};
    int64_t timeNs{0};      //!< in the original run, from the application's first open
    uint64_t size{0};       //!< bytes written (Send)
    int32_t adu{-1};        //!< ADU of this side's sends (0-based); -1 for Close and Reset
    uint64_t waitBytes{0};  //!< the peer's bytes this side had read before the think time
    int64_t thinkNs{0};     //!< from the later of (waitBytes read, previous event, open) to this event
    uint64_t row{0};        //!< data row of the file (1-based), for messages
};

/** An application data unit: a run of one side's sends, in the order of its first send. */
struct MagnetAppAdu
{
    int32_t number{0};      //!< the file's ADU number (within the connection, both sides)
    uint64_t bytes{0};
    uint64_t endOffset{0};  //!< the side's stream offset just after its last byte
    uint64_t waitBytes{0};  //!< what its first send waited for (the request it answers, if any)
    int64_t timeNs{0};      //!< its first send in the original run
};

/** Everything one connection did. */
struct MagnetAppConnection
{
    uint32_t id{0};                  //!< the file's connection number
    MagnetSide opener{MagnetSide::Client};
    int64_t openNs{0};               //!< when it opened, from the application's first open
    uint32_t after{0};               //!< > 0: opens thinkNs after the opener read all of connection `after`
    int64_t afterThinkNs{0};
    std::array<std::vector<MagnetAppEvent>, 2> events; //!< per side, in order
    std::array<std::vector<MagnetAppAdu>, 2> adus;     //!< per side, in order

    const std::vector<MagnetAppEvent>& EventsOf(MagnetSide side) const;
    const std::vector<MagnetAppAdu>& AdusOf(MagnetSide side) const;
    uint64_t BytesOf(MagnetSide side) const; //!< what `side` writes on this connection
    bool Resets(MagnetSide side) const;      //!< `side` aborts the connection
};

/** A whole application's demand: its connections in the order of their opens. */
struct MagnetAppDemand
{
    std::string source; //!< the file it came from
    std::vector<MagnetAppConnection> connections;

    /** The index in `connections` of connection `id`; -1 if there is none. */
    int64_t IndexOf(uint32_t id) const;
    uint64_t Bytes() const;
};

/**
 * Read a whole-application demand from its CSV form.  Throws MagnetTraceError,
 * "PATH: row N (connection C): problem", for a file it cannot read, a missing
 * column, an unknown event or side, a number that is not one, a negative size,
 * think time or wait, a connection without an open or with two, an event
 * before its connection's open or after its side closed, a decreasing
 * wait_bytes, a wait for more bytes than the peer ever sends, an `after` that
 * names no earlier connection, or no connection at all.
 */
std::shared_ptr<const MagnetAppDemand> ReadMagnetAppDemand(const std::string& path);

} // namespace ns3

#endif /* MAGNET_APP_DEMAND_H */
