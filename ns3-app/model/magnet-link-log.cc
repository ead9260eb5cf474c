/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "magnet-link-log.h"

#include "magnet-trace.h"

#include "ns3/abort.h"
#include "ns3/point-to-point-net-device.h"
#include "ns3/queue.h"
#include "ns3/simulator.h"

#include <cstdio>
#include <cstring>

namespace ns3
{

namespace
{

constexpr uint32_t kPppHeader = 2; // the device queue holds PPP frames; linkem counts IP bytes
constexpr uint8_t kQueueDrop = 1;  // replay/linkem/core.h: enum lk_reason
constexpr uint8_t kRandomLoss = 2;
constexpr char kMagic[8] = {'L', 'I', 'N', 'K', 'E', 'M', 'L', 'G'};
constexpr uint32_t kVersion = 1;

} // namespace

MagnetLinkLog::MagnetLinkLog(Ptr<NetDevice> tx, Ptr<NetDevice> rx, Time before, Time after)
    : m_before(before),
      m_after(after)
{
    auto p2p = DynamicCast<PointToPointNetDevice>(tx);
    NS_ABORT_MSG_UNLESS(p2p, "MagnetLinkLog: the bottleneck is not a point-to-point device");
    m_queue = p2p->GetQueue();
    m_queue->TraceConnectWithoutContext("Enqueue", MakeCallback(&MagnetLinkLog::OnEnqueue, this));
    m_queue->TraceConnectWithoutContext("Drop", MakeCallback(&MagnetLinkLog::OnDrop, this));
    m_queue->TraceConnectWithoutContext("Dequeue", MakeCallback(&MagnetLinkLog::OnDequeue, this));
    rx->TraceConnectWithoutContext("PhyRxEnd", MakeCallback(&MagnetLinkLog::OnArrive, this));
    rx->TraceConnectWithoutContext("PhyRxDrop", MakeCallback(&MagnetLinkLog::OnLoss, this));
}

const std::vector<MagnetLinkLog::Record>&
MagnetLinkLog::GetRecords() const
{
    return m_records;
}

MagnetLinkLog::Record&
MagnetLinkLog::Add(Ptr<const Packet> packet, uint32_t queued, uint32_t queuedBytes)
{
    Record r{};
    r.arrivalNs = (Simulator::Now() - m_before).GetNanoSeconds();
    r.departureNs = -1;
    r.waitNs = -1;
    r.bytes = packet->GetSize() - kPppHeader;
    r.queuePackets = queued;
    r.queueBytes = queuedBytes - kPppHeader * queued;
    m_records.push_back(r);
    return m_records.back();
}

void
MagnetLinkLog::OnEnqueue(Ptr<const Packet> packet)
{
    // The queue already holds it: what it found is the rest.
    m_waiting.push_back(m_records.size());
    Add(packet, m_queue->GetNPackets() - 1, m_queue->GetNBytes() - packet->GetSize());
}

void
MagnetLinkLog::OnDrop(Ptr<const Packet> packet)
{
    Add(packet, m_queue->GetNPackets(), m_queue->GetNBytes()).reason = kQueueDrop;
}

void
MagnetLinkLog::OnDequeue(Ptr<const Packet> packet)
{
    if (!m_waiting.empty())
    {
        Record& r = m_records[m_waiting.front()];
        r.waitNs = (Simulator::Now() - m_before).GetNanoSeconds() - r.arrivalNs;
        m_flying.push_back(m_waiting.front());
        m_waiting.pop_front();
    }
}

void
MagnetLinkLog::OnArrive(Ptr<const Packet> packet)
{
    if (!m_flying.empty())
    {
        m_records[m_flying.front()].departureNs = (Simulator::Now() + m_after).GetNanoSeconds();
        m_flying.pop_front();
    }
}

void
MagnetLinkLog::OnLoss(Ptr<const Packet> packet)
{
    if (!m_flying.empty())
    {
        m_records[m_flying.front()].reason = kRandomLoss;
        m_flying.pop_front();
    }
}

void
MagnetLinkLog::Write(const std::string& path) const
{
    std::string tmp = path + ".tmp";
    FILE* f = std::fopen(tmp.c_str(), "wb");
    if (!f)
    {
        throw MagnetTraceError(path, std::strerror(errno));
    }
    uint32_t sizes[2] = {kVersion, sizeof(Record)};
    bool ok = std::fwrite(kMagic, 1, sizeof kMagic, f) == sizeof kMagic &&
              std::fwrite(sizes, sizeof sizes, 1, f) == 1 &&
              (m_records.empty() ||
               std::fwrite(m_records.data(), sizeof(Record), m_records.size(), f) == m_records.size());
    ok = std::fclose(f) == 0 && ok;
    if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0)
    {
        std::remove(tmp.c_str());
        throw MagnetTraceError(path, "cannot write the link log");
    }
}

} // namespace ns3
