/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "magnet-tcp-frame.h"

namespace ns3
{

namespace
{

constexpr uint16_t kPppIpv4 = 0x0021;
constexpr uint8_t kIpProtoTcp = 6;

uint32_t
Be32(const uint8_t* p)
{
    return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | p[3];
}

} // namespace

bool
MagnetParseTcpFrame(Ptr<const Packet> packet, MagnetTcpFrame& out)
{
    uint8_t b[2 + 60 + 14];
    uint32_t n = packet->CopyData(b, sizeof b);
    if (n < 2 + 20 || (uint16_t{b[0]} << 8 | b[1]) != kPppIpv4)
    {
        return false;
    }
    const uint8_t* ip = b + 2;
    uint32_t ihl = (ip[0] & 0x0F) * 4u;
    if ((ip[0] >> 4) != 4 || ip[9] != kIpProtoTcp || 2 + ihl + 14 > n)
    {
        return false;
    }
    const uint8_t* tcp = ip + ihl;
    uint32_t total = uint32_t{ip[2]} << 8 | ip[3];
    uint32_t headers = ihl + (tcp[12] >> 4) * 4u;
    out.sport = static_cast<uint16_t>(tcp[0] << 8 | tcp[1]);
    out.dport = static_cast<uint16_t>(tcp[2] << 8 | tcp[3]);
    out.seq = Be32(tcp + 4);
    out.payload = total > headers ? total - headers : 0;
    return true;
}

} // namespace ns3
