/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "magnet-replay-helper.h"

#include "ns3/string.h"

namespace ns3
{

MagnetReplayHelper::MagnetReplayHelper(const std::string& protocol,
                                       const Address& remote,
                                       const std::string& demandFile)
    : ApplicationHelper(MagnetReplayApplication::GetTypeId())
{
    m_factory.Set("Protocol", StringValue(protocol));
    m_factory.Set("Remote", AddressValue(remote));
    m_factory.Set("DemandFile", StringValue(demandFile));
}

void
MagnetReplayHelper::SetDemand(MagnetDemand demand)
{
    m_demand = std::move(demand);
}

Ptr<Application>
MagnetReplayHelper::DoInstall(Ptr<Node> node)
{
    Ptr<Application> app = ApplicationHelper::DoInstall(node);
    if (m_demand)
    {
        DynamicCast<MagnetReplayApplication>(app)->SetDemand(*m_demand);
    }
    return app;
}

MagnetSinkHelper::MagnetSinkHelper(const std::string& protocol, const Address& local)
    : ApplicationHelper(MagnetSinkApplication::GetTypeId())
{
    m_factory.Set("Protocol", StringValue(protocol));
    m_factory.Set("Local", AddressValue(local));
}

} // namespace ns3
