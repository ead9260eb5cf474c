/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef MAGNET_TCP_FRAME_H
#define MAGNET_TCP_FRAME_H

#include "ns3/packet.h"
#include "ns3/ptr.h"

#include <cstdint>

namespace ns3
{

/** What a TCP segment on a point-to-point link carries. */
struct MagnetTcpFrame
{
    uint16_t sport;
    uint16_t dport;
    uint32_t seq;
    uint32_t payload; //!< TCP payload bytes
};

/**
 * Parse PPP + IPv4 + TCP from a frame's first bytes (cheaper than copying and
 * deserialising the headers).  False for anything else.
 */
bool MagnetParseTcpFrame(Ptr<const Packet> packet, MagnetTcpFrame& out);

} // namespace ns3

#endif /* MAGNET_TCP_FRAME_H */
