/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "magnet-gilbert-elliott-error-model.h"

#include "ns3/double.h"

namespace ns3
{

NS_OBJECT_ENSURE_REGISTERED(MagnetGilbertElliottErrorModel);

TypeId
MagnetGilbertElliottErrorModel::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::MagnetGilbertElliottErrorModel")
            .SetParent<ErrorModel>()
            .SetGroupName("Network")
            .AddConstructor<MagnetGilbertElliottErrorModel>()
            .AddAttribute("P",
                          "Probability of moving from the good to the bad state, per packet.",
                          DoubleValue(0.0),
                          MakeDoubleAccessor(&MagnetGilbertElliottErrorModel::m_p),
                          MakeDoubleChecker<double>(0.0, 1.0))
            .AddAttribute("R",
                          "Probability of moving from the bad to the good state, per packet.",
                          DoubleValue(1.0),
                          MakeDoubleAccessor(&MagnetGilbertElliottErrorModel::m_r),
                          MakeDoubleChecker<double>(0.0, 1.0))
            .AddAttribute("LossBad",
                          "Loss probability in the bad state.",
                          DoubleValue(1.0),
                          MakeDoubleAccessor(&MagnetGilbertElliottErrorModel::m_lossBad),
                          MakeDoubleChecker<double>(0.0, 1.0))
            .AddAttribute("LossGood",
                          "Loss probability in the good state.",
                          DoubleValue(0.0),
                          MakeDoubleAccessor(&MagnetGilbertElliottErrorModel::m_lossGood),
                          MakeDoubleChecker<double>(0.0, 1.0));
    return tid;
}

MagnetGilbertElliottErrorModel::MagnetGilbertElliottErrorModel()
    : m_uniform(CreateObject<UniformRandomVariable>())
{
}

int64_t
MagnetGilbertElliottErrorModel::AssignStreams(int64_t stream)
{
    m_uniform->SetStream(stream);
    return 1;
}

bool
MagnetGilbertElliottErrorModel::IsBad() const
{
    return m_bad;
}

uint64_t
MagnetGilbertElliottErrorModel::GetPackets() const
{
    return m_packets;
}

uint64_t
MagnetGilbertElliottErrorModel::GetLost() const
{
    return m_lost;
}

double
MagnetGilbertElliottErrorModel::MeanLoss() const
{
    if (m_p + m_r == 0)
    {
        return m_lossGood;
    }
    double bad = m_p / (m_p + m_r);
    return bad * m_lossBad + (1 - bad) * m_lossGood;
}

bool
MagnetGilbertElliottErrorModel::DoCorrupt(Ptr<Packet> p)
{
    // The loss is drawn in the current state, then the state moves.
    bool lost = m_uniform->GetValue() < (m_bad ? m_lossBad : m_lossGood);
    if (m_uniform->GetValue() < (m_bad ? m_r : m_p))
    {
        m_bad = !m_bad;
    }
    m_packets++;
    m_lost += lost;
    return lost;
}

void
MagnetGilbertElliottErrorModel::DoReset()
{
    m_bad = false;
}

} // namespace ns3
