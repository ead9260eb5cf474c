/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef MAGNET_REPLAY_APPLICATION_H
#define MAGNET_REPLAY_APPLICATION_H

#include "magnet-trace.h"

#include "ns3/address.h"
#include "ns3/application.h"
#include "ns3/event-id.h"
#include "ns3/nstime.h"
#include "ns3/ptr.h"
#include "ns3/socket.h"
#include "ns3/tcp-header.h"
#include "ns3/tcp-socket-base.h"
#include "ns3/traced-callback.h"

#include <deque>
#include <string>
#include <utility>
#include <vector>

namespace ns3
{

/**
 * A socket of `factory` on `node`; for a TCP factory and a non-empty
 * `tcpVariant` ("TcpCubic" or "ns3::TcpCubic"), with that congestion control.
 */
Ptr<Socket> MagnetCreateSocket(Ptr<Node> node, TypeId factory, const std::string& tcpVariant);

/**
 * @brief Replays an application's demand over TCP: Send(size) at each trace time.
 *
 * The demand is a series of (time, bytes) writes, read from a magnet trace's
 * SOCK_SEND stream (DemandFile, the compact form `magnet demand -o x.magnet`
 * writes) or given with SetDemand().  Its time zero is StartOffset after the
 * connection is established, or Origin if that is later.  When TCP's send buffer cannot take a write, the
 * remainder waits (in order) and goes out from the socket's send callback:
 * bytes are never dropped, and how late each write completed is recorded.
 *
 * Without a demand the application relays: Write() hands it bytes due now
 * and Finish() says no more will come (a live chain of stacks uses this).
 */
class MagnetReplayApplication : public Application
{
  public:
    static TypeId GetTypeId();

    MagnetReplayApplication();
    ~MagnetReplayApplication() override;

    /** Replay this demand (instead of DemandFile). */
    void SetDemand(MagnetDemand demand);
    const MagnetDemand& GetDemand() const;

    /** A write of `bytes` due now (relay use); sent once connected. */
    void Write(uint32_t bytes);
    /** No more writes will come: close when everything is handed to TCP (if CloseAtEnd). */
    void Finish();

    Ptr<Socket> GetSocket() const;

    /**
     * Set an attribute of the socket when it is created (e.g. "SegmentSize"
     * for this connection only): ns-3's Config defaults are per process.
     */
    void SetSocketAttribute(const std::string& name, const AttributeValue& value);

    /** What happened, for reports and tests. */
    struct Stats
    {
        uint64_t writesDue{0};    //!< writes that came due (demand events or Write calls)
        uint64_t bytesDue{0};     //!< their bytes
        uint64_t sendCalls{0};    //!< Send() calls the socket accepted
        uint64_t bytesSent{0};    //!< bytes the socket accepted
        uint64_t lateWrites{0};   //!< writes whose last byte went out after their due time
        Time maxLag;              //!< the largest such delay
        Time totalLag;            //!< their sum
        Time connected;           //!< when the connection was established
    };

    const Stats& GetStats() const;

    /** Why the connection failed or broke; empty if it did not. */
    const std::string& GetFailure() const;

    /** Signature of the "Write" trace: bytes the socket accepted in one Send(), and when they were due. */
    typedef void (*WriteTracedCallback)(uint32_t bytes, Time due);

    /** Signature of the "Failed" trace: the connection failed or broke; the rest is not sent. */
    typedef void (*FailedTracedCallback)();

  protected:
    void DoDispose() override;

  private:
    void StartApplication() override;
    void StopApplication() override;

    void ConnectionSucceeded(Ptr<Socket> socket);
    void ConnectionFailed(Ptr<Socket> socket);
    void SendSpace(Ptr<Socket> socket, uint32_t available);
    void ForwardTcpTx(Ptr<const Packet> packet,
                      const TcpHeader& header,
                      Ptr<const TcpSocketBase> socket);
    void ForwardSrtt(Time before, Time now);
    void ForwardLastRtt(Time before, Time now);
    void SocketClosedByError(Ptr<Socket> socket);
    void Fail(const std::string& why);

    void ScheduleNextWrite();
    void IssueWrite();
    void Due(uint64_t bytes);
    void SendPending();
    void MaybeClose();

    /** A write not yet fully handed to TCP. */
    struct Pending
    {
        Time due;
        uint64_t left;
    };

    // Attributes
    Address m_peer;
    Address m_local;
    TypeId m_tid;
    std::string m_tcpVariant;
    std::string m_demandFile;
    uint64_t m_streamId;
    Time m_startOffset;
    Time m_fixedOrigin;     //!< the Origin attribute (0: none)
    bool m_closeAtEnd;

    Ptr<Socket> m_socket;
    std::vector<std::pair<std::string, Ptr<AttributeValue>>> m_socketAttributes;
    MagnetDemand m_demand;
    bool m_relay{true};     //!< no demand: writes come from Write()
    size_t m_next{0};       //!< next demand event
    Time m_origin;          //!< simulation time of the demand's time zero
    std::deque<Pending> m_pending;
    bool m_connected{false};
    bool m_finished{false}; //!< no more writes will come
    bool m_closed{false};
    bool m_sending{false};  //!< inside SendPending
    EventId m_writeEvent;
    Stats m_stats;
    std::string m_failure;

    TracedCallback<uint32_t, Time> m_writeTrace;
    TracedCallback<Ptr<const Packet>, const TcpHeader&, Ptr<const TcpSocketBase>> m_tcpTxTrace;
    TracedCallback<Time, Time> m_srttTrace;
    TracedCallback<Time, Time> m_lastRttTrace;
    TracedCallback<> m_failedTrace;
};

} // namespace ns3

#endif /* MAGNET_REPLAY_APPLICATION_H */
