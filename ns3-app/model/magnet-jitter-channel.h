/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef MAGNET_JITTER_CHANNEL_H
#define MAGNET_JITTER_CHANNEL_H

#include "ns3/nstime.h"
#include "ns3/point-to-point-channel.h"
#include "ns3/random-variable-stream.h"

namespace ns3
{

/**
 * @brief A point-to-point channel whose packets take Delay plus up to Jitter
 * (uniform, per packet), in order: a packet never arrives before the one
 * sent ahead of it in the same direction (it waits for it instead), so the
 * jitter never reorders, as in magnet's userspace link emulator.
 */
class MagnetJitterChannel : public PointToPointChannel
{
  public:
    static TypeId GetTypeId();

    MagnetJitterChannel();

    bool TransmitStart(Ptr<const Packet> p, Ptr<PointToPointNetDevice> src, Time txTime) override;

    /** Use stream numbers from `stream` on; returns how many were used. */
    int64_t AssignStreams(int64_t stream);

  private:
    Time m_jitter;
    Ptr<UniformRandomVariable> m_uniform;
    Time m_lastArrival[2]; //!< per direction (0: from device 0)
};

} // namespace ns3

#endif /* MAGNET_JITTER_CHANNEL_H */
