/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef MAGNET_LINUX_RTT_ESTIMATOR_H
#define MAGNET_LINUX_RTT_ESTIMATOR_H

#include "ns3/rtt-estimator.h"
#include "ns3/sequence-number.h"

namespace ns3
{

/**
 * @brief Linux's RTT estimator and RTO (net/ipv4/tcp_input.c: tcp_rtt_estimator, tcp_set_rto).
 *
 * The smoothed RTT is Jacobson's 7/8 average; the variation is Linux's rttvar:
 * the mean deviation's largest value over each round trip, never below the
 * minimum RTO (200 ms), decaying by a quarter per round trip towards that
 * maximum.  The RTO is srtt + rttvar, so it is never below srtt + 200 ms,
 * where RFC 6298 (ns-3's RttMeanDeviation) gives max(srtt + 4 rttvar, MinRto).
 *
 * GetVariation() returns rttvar / 4, so that TcpSocketBase's RTO formula
 * (estimate + max(granularity, 4 variation), at least MinRto) is Linux's
 * when its clock granularity and MinRto are below rttvar.  The round trips
 * are counted in sequence space, as Linux does: the socket says where it is
 * with SetWindow() before each measurement.
 */
class MagnetLinuxRttEstimator : public RttEstimator
{
  public:
    static TypeId GetTypeId();

    MagnetLinuxRttEstimator();
    MagnetLinuxRttEstimator(const MagnetLinuxRttEstimator& other);
    ~MagnetLinuxRttEstimator() override;

    TypeId GetInstanceTypeId() const override;
    void Measurement(Time rtt) override;
    Ptr<RttEstimator> Copy() const override;
    void Reset() override;

    /** The sender's oldest unacknowledged and next sequence numbers (snd_una, snd_nxt). */
    void SetWindow(SequenceNumber32 una, SequenceNumber32 nxt);

    /** srtt + rttvar, Linux's RTO before back-off; zero without a measurement. */
    Time GetRto() const;

  private:
    void Publish();

    Time m_rtoMin;      //!< tcp_rto_min_us: rttvar's floor
    int64_t m_srtt8{0}; //!< srtt_us: 8 x the smoothed RTT, us
    int64_t m_mdev4{0}; //!< mdev_us: 4 x the mean deviation, us
    int64_t m_mdevMax{0};
    int64_t m_rttvar{0};
    SequenceNumber32 m_rttSeq; //!< the round trip ends when snd_una passes this
    SequenceNumber32 m_una;
    SequenceNumber32 m_nxt;
};

} // namespace ns3

#endif /* MAGNET_LINUX_RTT_ESTIMATOR_H */
