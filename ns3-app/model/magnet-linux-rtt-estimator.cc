/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "magnet-linux-rtt-estimator.h"

#include <algorithm>

namespace ns3
{

NS_OBJECT_ENSURE_REGISTERED(MagnetLinuxRttEstimator);

TypeId
MagnetLinuxRttEstimator::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::MagnetLinuxRttEstimator")
            .SetParent<RttEstimator>()
            .SetGroupName("Internet")
            .AddConstructor<MagnetLinuxRttEstimator>()
            .AddAttribute("RtoMin",
                          "The minimum RTO (tcp_rto_min_us): the floor of rttvar.",
                          TimeValue(MilliSeconds(200)),
                          MakeTimeAccessor(&MagnetLinuxRttEstimator::m_rtoMin),
                          MakeTimeChecker(Time(0)));
    return tid;
}

MagnetLinuxRttEstimator::MagnetLinuxRttEstimator() = default;

MagnetLinuxRttEstimator::MagnetLinuxRttEstimator(const MagnetLinuxRttEstimator& other) = default;

MagnetLinuxRttEstimator::~MagnetLinuxRttEstimator() = default;

TypeId
MagnetLinuxRttEstimator::GetInstanceTypeId() const
{
    return GetTypeId();
}

Ptr<RttEstimator>
MagnetLinuxRttEstimator::Copy() const
{
    return CopyObject<MagnetLinuxRttEstimator>(this);
}

void
MagnetLinuxRttEstimator::Reset()
{
    RttEstimator::Reset();
    m_srtt8 = m_mdev4 = m_mdevMax = m_rttvar = 0;
}

void
MagnetLinuxRttEstimator::SetWindow(SequenceNumber32 una, SequenceNumber32 nxt)
{
    m_una = una;
    m_nxt = nxt;
}

void
MagnetLinuxRttEstimator::Measurement(Time rtt)
{
    const int64_t rtoMin = m_rtoMin.GetMicroSeconds();
    int64_t m = std::max<int64_t>(1, rtt.GetMicroSeconds());
    if (m_srtt8 != 0)
    {
        m -= m_srtt8 >> 3; // the error of the estimate
        m_srtt8 += m;      // srtt = 7/8 srtt + 1/8 sample
        if (m < 0)
        {
            // A falling RTT moves mdev with a finer gain (alpha * beta), as Linux does.
            m = -m - (m_mdev4 >> 2);
            if (m > 0)
            {
                m >>= 3;
            }
        }
        else
        {
            m -= m_mdev4 >> 2;
        }
        m_mdev4 += m; // mdev = 3/4 mdev + 1/4 |error|
        if (m_mdev4 > m_mdevMax)
        {
            m_mdevMax = m_mdev4;
            m_rttvar = std::max(m_rttvar, m_mdevMax);
        }
        if (m_una > m_rttSeq)
        {
            // A round trip ended: rttvar decays towards this trip's largest mdev.
            if (m_mdevMax < m_rttvar)
            {
                m_rttvar -= (m_rttvar - m_mdevMax) >> 2;
            }
            m_rttSeq = m_nxt;
            m_mdevMax = rtoMin;
        }
    }
    else
    {
        m_srtt8 = m << 3;
        m_mdev4 = m << 1; // the first RTO is 3 x the RTT
        m_rttvar = std::max(m_mdev4, rtoMin);
        m_mdevMax = m_rttvar;
        m_rttSeq = m_nxt;
    }
    m_srtt8 = std::max<int64_t>(1, m_srtt8);
    m_nSamples++;
    Publish();
}

void
MagnetLinuxRttEstimator::Publish()
{
    m_estimatedRtt = MicroSeconds(m_srtt8 >> 3);
    m_estimatedVariation = NanoSeconds(m_rttvar * 250); // rttvar / 4, exactly, in ns
}

Time
MagnetLinuxRttEstimator::GetRto() const
{
    return m_srtt8 ? MicroSeconds((m_srtt8 >> 3) + m_rttvar) : Time(0);
}

} // namespace ns3
