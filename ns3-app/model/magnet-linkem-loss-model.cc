/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "magnet-linkem-loss-model.h"

#include "ns3/boolean.h"
#include "ns3/double.h"
#include "ns3/uinteger.h"

namespace ns3
{

NS_OBJECT_ENSURE_REGISTERED(MagnetLinkemLossModel);

namespace
{

uint64_t
SplitMix64(uint64_t& x)
{
    uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

uint64_t
Rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

} // namespace

TypeId
MagnetLinkemLossModel::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::MagnetLinkemLossModel")
            .SetParent<ErrorModel>()
            .SetGroupName("Network")
            .AddConstructor<MagnetLinkemLossModel>()
            .AddAttribute("Seed",
                          "linkem's generator seed of this direction (DirectionSeed).",
                          UintegerValue(0),
                          MakeUintegerAccessor(&MagnetLinkemLossModel::m_seed),
                          MakeUintegerChecker<uint64_t>())
            .AddAttribute("GilbertElliott",
                          "false: Bernoulli loss with probability P; true: a Gilbert-Elliott chain.",
                          BooleanValue(false),
                          MakeBooleanAccessor(&MagnetLinkemLossModel::m_ge),
                          MakeBooleanChecker())
            .AddAttribute("P",
                          "Bernoulli: the loss probability; Gilbert-Elliott: P(good -> bad) per packet.",
                          DoubleValue(0.0),
                          MakeDoubleAccessor(&MagnetLinkemLossModel::m_p),
                          MakeDoubleChecker<double>(0.0, 1.0))
            .AddAttribute("R",
                          "Gilbert-Elliott: P(bad -> good) per packet.",
                          DoubleValue(1.0),
                          MakeDoubleAccessor(&MagnetLinkemLossModel::m_r),
                          MakeDoubleChecker<double>(0.0, 1.0))
            .AddAttribute("LossBad",
                          "Gilbert-Elliott: the loss probability in the bad state.",
                          DoubleValue(1.0),
                          MakeDoubleAccessor(&MagnetLinkemLossModel::m_lossBad),
                          MakeDoubleChecker<double>(0.0, 1.0))
            .AddAttribute("LossGood",
                          "Gilbert-Elliott: the loss probability in the good state.",
                          DoubleValue(0.0),
                          MakeDoubleAccessor(&MagnetLinkemLossModel::m_lossGood),
                          MakeDoubleChecker<double>(0.0, 1.0))
            .AddAttribute("JitterDraws",
                          "A packet that gets through takes one more draw (linkem's jitter).",
                          BooleanValue(false),
                          MakeBooleanAccessor(&MagnetLinkemLossModel::m_jitterDraws),
                          MakeBooleanChecker());
    return tid;
}

uint64_t
MagnetLinkemLossModel::DirectionSeed(uint64_t seed, bool reverse)
{
    return seed * 2 + (reverse ? 1 : 0); // replay/linkem/linkem.c: build_paths()
}

uint64_t
MagnetLinkemLossModel::GetPackets() const
{
    return m_packets;
}

uint64_t
MagnetLinkemLossModel::GetLost() const
{
    return m_lost;
}

bool
MagnetLinkemLossModel::IsBad() const
{
    return m_bad;
}

void
MagnetLinkemLossModel::Start()
{
    uint64_t x = m_seed;
    for (auto& word : m_s)
    {
        word = SplitMix64(x);
    }
    m_bad = false;
    m_started = true;
}

uint64_t
MagnetLinkemLossModel::Next()
{
    uint64_t* s = m_s;
    uint64_t result = Rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = Rotl(s[3], 45);
    return result;
}

double
MagnetLinkemLossModel::Unit()
{
    return static_cast<double>(Next() >> 11) * 0x1.0p-53;
}

bool
MagnetLinkemLossModel::DoCorrupt(Ptr<Packet> p)
{
    if (!m_started)
    {
        Start(); // attributes are set after construction: seed at the first packet
    }
    bool lost;
    if (!m_ge)
    {
        lost = m_p > 0 && Unit() < m_p;
    }
    else
    {
        // The loss is drawn in the current state, then the state moves.
        lost = Unit() < (m_bad ? m_lossBad : m_lossGood);
        if (m_bad ? Unit() < m_r : Unit() < m_p)
        {
            m_bad = !m_bad;
        }
    }
    if (!lost && m_jitterDraws)
    {
        Next();
    }
    m_packets++;
    m_lost += lost;
    return lost;
}

void
MagnetLinkemLossModel::DoReset()
{
    m_started = false;
}

} // namespace ns3
