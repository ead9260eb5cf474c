/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "magnet-jitter-channel.h"

#include "ns3/node.h"
#include "ns3/packet.h"
#include "ns3/point-to-point-net-device.h"
#include "ns3/simulator.h"

namespace ns3
{

NS_OBJECT_ENSURE_REGISTERED(MagnetJitterChannel);

TypeId
MagnetJitterChannel::GetTypeId()
{
    static TypeId tid = TypeId("ns3::MagnetJitterChannel")
                            .SetParent<PointToPointChannel>()
                            .SetGroupName("PointToPoint")
                            .AddConstructor<MagnetJitterChannel>()
                            .AddAttribute("Jitter",
                                          "Extra delay per packet, uniform from 0 to this; "
                                          "packets keep their order.",
                                          TimeValue(Seconds(0)),
                                          MakeTimeAccessor(&MagnetJitterChannel::m_jitter),
                                          MakeTimeChecker(Seconds(0)));
    return tid;
}

MagnetJitterChannel::MagnetJitterChannel()
    : m_uniform(CreateObject<UniformRandomVariable>())
{
}

int64_t
MagnetJitterChannel::AssignStreams(int64_t stream)
{
    m_uniform->SetStream(stream);
    return 1;
}

bool
MagnetJitterChannel::TransmitStart(Ptr<const Packet> p, Ptr<PointToPointNetDevice> src, Time txTime)
{
    uint32_t wire = src == GetSource(0) ? 0 : 1;
    Ptr<PointToPointNetDevice> dst = GetDestination(wire);
    Time extra = NanoSeconds(static_cast<int64_t>(
        m_uniform->GetValue(0, static_cast<double>(m_jitter.GetNanoSeconds() + 1))));
    Time arrival = std::max(Simulator::Now() + txTime + GetDelay() + extra, m_lastArrival[wire]);
    m_lastArrival[wire] = arrival;
    Simulator::ScheduleWithContext(dst->GetNode()->GetId(),
                                   arrival - Simulator::Now(),
                                   &PointToPointNetDevice::Receive,
                                   dst,
                                   p->Copy());
    return true;
}

} // namespace ns3
