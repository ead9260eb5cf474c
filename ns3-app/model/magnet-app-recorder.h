/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef MAGNET_APP_RECORDER_H
#define MAGNET_APP_RECORDER_H

#include "magnet-app-demand.h"
#include "magnet-connection-application.h"
#include "magnet-trace.h"

#include "ns3/net-device.h"

#include <memory>
#include <string>
#include <unordered_map>

namespace ns3
{

/** Records and bytes of one side of a whole-application replay, per layer. */
struct MagnetSideCounts
{
    uint64_t sockSend{0}, sockSendBytes{0};
    uint64_t sockRecv{0}, sockRecvBytes{0};
    uint64_t devSend{0}, devSendBytes{0};
    uint64_t devRecv{0}, devRecvBytes{0};
};

/**
 * @brief Records one side (client or server) of a whole-application replay as a
 * magnet trace, in the form of a real capture of that host: SOCK_SEND and
 * SOCK_RECV per socket call of its connection applications, DEV_SEND and
 * DEV_RECV per data segment its device took to send (MacTx, before its queue: copies
 * the bottleneck then drops included) or received (TCP payload bytes).
 * The sockid of every record is the connection's number, on both sides.
 */
class MagnetSideRecorder
{
  public:
    /** `path` empty: count only, write no trace. */
    MagnetSideRecorder(const std::string& path, MagnetSide side, const std::string& description);

    /** Record this side's application of a connection. */
    void Attach(Ptr<MagnetConnectionApplication> app);
    /** Record the data segments this device sends and receives (this side's link). */
    void AttachDevice(Ptr<NetDevice> device);
    /** Complete the trace file. */
    void Close();

    const MagnetSideCounts& GetCounts() const;

  private:
    void OnWrite(uint32_t connection, uint32_t bytes);
    void OnRead(uint32_t connection, uint32_t bytes);
    void OnEstablished(uint32_t connection, uint16_t local, uint16_t remote);
    void OnDevTx(Ptr<const Packet> packet);
    void OnDevRx(Ptr<const Packet> packet);
    /** The connection a segment between these ports belongs to; 0: none of ours. */
    uint32_t Connection(uint16_t local, uint16_t remote) const;
    void Record(uint32_t connection, uint32_t event, uint32_t size);

    std::unique_ptr<MagnetTraceWriter> m_writer;
    std::unordered_map<uint32_t, uint32_t> m_ports; //!< (local port << 16 | remote port) -> connection
    MagnetSideCounts m_counts;
};

} // namespace ns3

#endif /* MAGNET_APP_RECORDER_H */
