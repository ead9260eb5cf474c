/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef MAGNET_LINKEM_LOSS_MODEL_H
#define MAGNET_LINKEM_LOSS_MODEL_H

#include "ns3/error-model.h"

#include <cstdint>

namespace ns3
{

/**
 * @brief Random loss drawn exactly as linkem draws it (replay/linkem/core.c), so
 * that ns-3 and real TCP over linkem lose the same packets for the same seed.
 *
 * One generator per direction: xoshiro256** seeded by splitmix64 from linkem's
 * seed of the direction (DirectionSeed: twice the path's seed, plus one for
 * the reverse direction).  Every packet the model sees takes one draw, uniform
 * in [0, 1) from the top 53 bits: Bernoulli, it is lost if the draw is below P
 * (no draw when P is 0); Gilbert-Elliott, it is lost if the draw is below the
 * state's loss probability, then a second draw moves the chain good -> bad
 * below P, bad -> good below R (it starts good).  With JitterDraws, a packet
 * that gets through takes one more draw, as linkem draws its jitter from the
 * same generator after the loss.  On the bottleneck's receiving device it sees
 * the packets that left the queue, linkem's point of loss: a packet the queue
 * dropped takes no draw in either.
 */
class MagnetLinkemLossModel : public ErrorModel
{
  public:
    static TypeId GetTypeId();

    /** linkem's generator seed for one direction of a path run with `--seed seed`. */
    static uint64_t DirectionSeed(uint64_t seed, bool reverse);

    uint64_t GetPackets() const; //!< packets seen
    uint64_t GetLost() const;    //!< packets lost
    bool IsBad() const;          //!< Gilbert-Elliott: the chain is in its bad state

  private:
    bool DoCorrupt(Ptr<Packet> p) override;
    void DoReset() override;
    void Start(); //!< the generator at the seed, the chain good
    uint64_t Next();
    double Unit(); //!< uniform in [0, 1)

    uint64_t m_seed{0};
    bool m_ge{false};
    double m_p{0};
    double m_r{1};
    double m_lossBad{1};
    double m_lossGood{0};
    bool m_jitterDraws{false};
    bool m_started{false};
    uint64_t m_s[4]{};
    bool m_bad{false};
    uint64_t m_packets{0};
    uint64_t m_lost{0};
};

} // namespace ns3

#endif /* MAGNET_LINKEM_LOSS_MODEL_H */
