/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef MAGNET_GILBERT_ELLIOTT_ERROR_MODEL_H
#define MAGNET_GILBERT_ELLIOTT_ERROR_MODEL_H

#include "ns3/error-model.h"
#include "ns3/random-variable-stream.h"

namespace ns3
{

/**
 * @brief Bursty packet loss: a Gilbert-Elliott two-state Markov chain.
 *
 * In state good a packet is lost with probability LossGood, in state bad
 * with LossBad; after each packet the chain moves good -> bad with
 * probability P and bad -> good with R (netem's `gemodel` and magnet's
 * userspace link emulator draw in the same order).  It starts good.  The
 * long-run loss rate is (P * LossBad + R * LossGood) / (P + R); bursts in
 * the bad state last 1/R packets on average.  ns-3 has no such model built in
 * (BurstErrorModel drops bursts of a random size at a fixed rate).
 */
class MagnetGilbertElliottErrorModel : public ErrorModel
{
  public:
    static TypeId GetTypeId();

    MagnetGilbertElliottErrorModel();

    /** Use stream numbers from `stream` on; returns how many were used. */
    int64_t AssignStreams(int64_t stream);

    bool IsBad() const;
    uint64_t GetPackets() const; //!< packets seen
    uint64_t GetLost() const;    //!< packets lost

    /** The long-run loss probability of the chain. */
    double MeanLoss() const;

  private:
    bool DoCorrupt(Ptr<Packet> p) override;
    void DoReset() override;

    double m_p;
    double m_r;
    double m_lossBad;
    double m_lossGood;
    Ptr<UniformRandomVariable> m_uniform;
    bool m_bad{false};
    uint64_t m_packets{0};
    uint64_t m_lost{0};
};

} // namespace ns3

#endif /* MAGNET_GILBERT_ELLIOTT_ERROR_MODEL_H */
