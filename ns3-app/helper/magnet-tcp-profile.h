/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef MAGNET_TCP_PROFILE_H
#define MAGNET_TCP_PROFILE_H

#include "ns3/node-container.h"
#include "ns3/nstime.h"
#include "ns3/type-id.h"

#include <string>
#include <utility>
#include <vector>

namespace ns3
{

/**
 * The TCP every socket runs (magnet.replay.scenario.Tcp) and the model it
 * runs with: "linux" (MagnetLinuxTcpSocket, Linux 6.x's TCP as far as ns-3
 * can express it, the default) or "ns3" (TcpSocketBase with ns-3's own
 * defaults where a knob is not given).  0 or negative: the model's default.
 */
struct MagnetTcpConfig
{
    std::string model{"linux"}; //!< linux or ns3
    std::string cc{"TcpCubic"}; //!< an ns-3 TcpCongestionOps (TcpNewReno, TcpLinuxReno, TcpCubic, ...)
    bool nagle{true};           //!< as Linux has it unless TCP_NODELAY (ns-3's default is off)
    bool sack{true};
    bool timestamps{true};
    bool windowScaling{true};
    uint32_t delAckCount{0};    //!< segments per delayed ACK (linux: 1 or 2)
    Time delAckTimeout{NanoSeconds(-1)}; //!< ns3: the timeout; linux: its cap (delack_max)
    uint32_t mss{0};            //!< TCP's MSS as Linux's TCP_MAXSEG; 0: each path's MTU - 40
    uint32_t sndBuf{0};         //!< SO_SNDBUF, bytes (linux: doubled, no autotuning)
    uint32_t rcvBuf{0};         //!< SO_RCVBUF, bytes (linux: doubled, no autotuning)
    uint32_t readSize{65536};   //!< the receiving application's read buffer
    Time readerWakeup{0};       //!< linux: the host's wake-up of the reading application (0: at once)
    Time ackLag{0};             //!< linux: the host's way in for a data segment, arrival -> TCP (0: at once)
    Time replyLag{0};           //!< linux: the host's way in for a pure ACK, arrival -> TCP (0: at once)

    /** The MSS on a path of this MTU: the given one, at most MTU - 40 (IP and TCP headers). */
    uint32_t Mss(uint32_t mtu) const;
    /** TCP payload per full segment (ns-3's SegmentSize): the MSS less 12 with timestamps. */
    uint32_t SegmentSize(uint32_t mtu) const;
    bool Linux() const;
};

/**
 * @brief The TCP profile of a simulation: one place that makes every socket
 * magnet creates (the stacks', the cross traffic's, a whole application's)
 * the TCP of `MagnetTcpConfig`.
 *
 *     MagnetTcpProfile profile(tcp);
 *     profile.ApplyDefaults();                 // Config::SetDefault of every knob
 *     MagnetTcpProfile::InstallStack(nodes);   // InternetStackHelper + the Linux socket factory
 *     BulkSendHelper bulk(profile.SocketFactory().GetName(), remote);
 *     Ptr<Socket> s = Socket::CreateSocket(node, profile.SocketFactory());
 *
 * With the linux model the factory makes MagnetLinuxTcpSocket (its
 * congestion control is the node's TcpL4Protocol::SocketType); with ns3 it
 * is ns-3's TcpSocketFactory.
 */
class MagnetTcpProfile
{
  public:
    explicit MagnetTcpProfile(MagnetTcpConfig tcp);

    /** Throws std::invalid_argument naming the knob a model cannot apply. */
    static void Validate(const MagnetTcpConfig& tcp);

    /**
     * Make the profile the defaults of new sockets (Config::SetDefault, which
     * persists in the process: every knob is set, to ns-3's own value where
     * the ns3 model leaves it).
     */
    void ApplyDefaults() const;

    /** The Internet stack on `nodes`, able to make the linux model's sockets. */
    static void InstallStack(NodeContainer nodes);

    /** The socket factory applications must be given (their Protocol attribute). */
    TypeId SocketFactory() const;

    /** The congestion control applications must be given (their TcpVariant attribute): the
     *  linux model's CUBIC is MagnetLinuxCubic, every other one ns-3's. */
    std::string CongestionControl() const;

    /** What new sockets get now, as (setting, value): to state what was used. */
    std::vector<std::pair<std::string, std::string>> Settings() const;

    const MagnetTcpConfig& GetConfig() const;

  private:
    MagnetTcpConfig m_tcp;
};

} // namespace ns3

#endif /* MAGNET_TCP_PROFILE_H */
