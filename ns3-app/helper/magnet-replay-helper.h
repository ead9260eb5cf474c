/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef MAGNET_REPLAY_HELPER_H
#define MAGNET_REPLAY_HELPER_H

#include "magnet-replay-application.h"
#include "magnet-sink-application.h"

#include "ns3/application-helper.h"

#include <optional>

namespace ns3
{

/**
 * @brief Installs MagnetReplayApplications, like ns-3's BulkSendHelper.
 *
 *     MagnetReplayHelper replay("ns3::TcpSocketFactory", sinkAddress, "ftp.magnet");
 *     replay.SetAttribute("TcpVariant", StringValue("TcpCubic"));
 *     ApplicationContainer apps = replay.Install(node);
 */
class MagnetReplayHelper : public ApplicationHelper
{
  public:
    /** `demandFile`: a magnet trace (its SOCK_SEND stream); empty to use SetDemand. */
    MagnetReplayHelper(const std::string& protocol,
                       const Address& remote,
                       const std::string& demandFile = "");

    /** Give every application installed from now on this demand (instead of a file). */
    void SetDemand(MagnetDemand demand);

  protected:
    Ptr<Application> DoInstall(Ptr<Node> node) override;

  private:
    std::optional<MagnetDemand> m_demand;
};

/** @brief Installs MagnetSinkApplications, like ns-3's PacketSinkHelper. */
class MagnetSinkHelper : public ApplicationHelper
{
  public:
    MagnetSinkHelper(const std::string& protocol, const Address& local);
};

} // namespace ns3

#endif /* MAGNET_REPLAY_HELPER_H */
