/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef MAGNET_CONNECTION_APPLICATION_H
#define MAGNET_CONNECTION_APPLICATION_H

#include "magnet-app-demand.h"

#include "ns3/address.h"
#include "ns3/application.h"
#include "ns3/event-id.h"
#include "ns3/nstime.h"
#include "ns3/ptr.h"
#include "ns3/socket.h"
#include "ns3/tcp-socket.h"
#include "ns3/traced-callback.h"

#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ns3
{

class MagnetConnectionApplication;

/**
 * @brief One listening socket per node for the connections a whole-application
 * replay opens towards it: each accepted socket goes to the application of its
 * connection, known by the opener's port (the opener says it before connecting).
 */
class MagnetAcceptorApplication : public Application
{
  public:
    static TypeId GetTypeId();

    MagnetAcceptorApplication();
    ~MagnetAcceptorApplication() override;

    /** The connection from the opener's `port` belongs to `app`. */
    void Expect(uint16_t port, Ptr<MagnetConnectionApplication> app);

    /** Set an attribute of the listening socket (accepted sockets inherit it). */
    void SetSocketAttribute(const std::string& name, const AttributeValue& value);

  protected:
    void DoDispose() override;

  private:
    void StartApplication() override;
    void StopApplication() override;
    void HandleAccept(Ptr<Socket> socket, const Address& from);

    Address m_local;
    std::string m_tcpVariant;
    TypeId m_protocol;
    Ptr<Socket> m_listener;
    std::vector<std::pair<std::string, Ptr<AttributeValue>>> m_socketAttributes;
    std::unordered_map<uint16_t, Ptr<MagnetConnectionApplication>> m_expected;
};

/**
 * @brief One side of one connection of a whole-application demand, replayed closed-loop.
 *
 * The opener connects at the connection's open time (or think time after it
 * has read all of an earlier connection); the other side is handed the
 * accepted socket.  Each of this side's events runs in order: a send is due
 * its think time after the latest of this side having read its wait_bytes of
 * the peer's data, its previous event handed to TCP whole and the opener's
 * connect; it writes its bytes then, or once the connection is established if
 * that is later (what the send buffer cannot take waits for the socket's send
 * callback).  A close shuts the writing half (FIN) then, whatever the peer did
 * (as Linux's replay's shutdown(SHUT_WR); over ns-3's own TCP the second side to
 * close sends its FIN once it read the first's), a reset aborts (RST).  The side reads whatever arrives at all times.  Without a
 * close row, it closes after its last send once it has read everything the
 * peer sends.  OpenLoop: every event at its time in the original run instead.
 */
class MagnetConnectionApplication : public Application
{
  public:
    static TypeId GetTypeId();

    MagnetConnectionApplication();
    ~MagnetConnectionApplication() override;

    /** Replay `side` of connection `index` of `demand`. */
    void SetConnection(std::shared_ptr<const MagnetAppDemand> demand, size_t index, MagnetSide side);
    const MagnetAppConnection& GetConnection() const;
    MagnetSide GetSide() const;
    bool IsOpener() const;

    /** The other side of this connection. */
    void SetPeer(Ptr<MagnetConnectionApplication> peer);

    /**
     * Opener: connect to `remote` (the peer node's acceptor), telling `peerAcceptor`
     * which port the connection comes from (for the peer).
     */
    void SetRemote(const Address& remote, Ptr<MagnetAcceptorApplication> peerAcceptor);

    /** Opener of a connection with `after`: open think time after `earlier` has read everything. */
    void OpenAfter(Ptr<MagnetConnectionApplication> earlier);

    /** The acceptor's socket for this (accepting) side. */
    void Accepted(Ptr<Socket> socket);

    /** Set an attribute of the socket when it is created (opener only; an accepted one inherits). */
    void SetSocketAttribute(const std::string& name, const AttributeValue& value);

    /** What happened to this side, for the results. */
    struct Record
    {
        Time opened{Time::Max()};       //!< connect() called (opener) or accepted
        Time established{Time::Max()};
        Time closed{Time::Max()};       //!< its FIN handed to TCP, or its reset
        Time peerClosed{Time::Max()};   //!< the peer's FIN (after its data) read, or its reset
        Time done{Time::Max()};         //!< both of the above
        uint64_t bytesWritten{0};       //!< accepted by the socket
        uint64_t bytesRead{0};
        std::vector<Time> aduStart;     //!< this side's ADUs: their first write
        std::vector<Time> peerAduRead;  //!< the peer's ADUs: when their last byte was read here
        uint64_t lateEvents{0};         //!< open-loop: events due before the previous was handed to TCP
        std::string failure;            //!< empty: none
    };

    const Record& GetRecord() const;
    bool IsDone() const; //!< closed and read the peer's close (a failure is not done)
    /** A timer of its own runs: an open, a think time, open-loop events to come, SYN retries. */
    bool IsWaiting() const;

    /** Signature of the "Write" and "Read" traces: the connection's number and bytes. */
    typedef void (*BytesTracedCallback)(uint32_t connection, uint32_t bytes);
    /** Signature of the "Established" trace: connection, this side's port, the peer's port. */
    typedef void (*EstablishedTracedCallback)(uint32_t connection, uint16_t local, uint16_t remote);
    /** Signature of the "Done" trace: this side finished (or failed) this connection. */
    typedef void (*DoneTracedCallback)(uint32_t connection);

  protected:
    void DoDispose() override;

  private:
    void StartApplication() override;
    void StopApplication() override;

    void Open();
    void EarlierReadAll(uint32_t connection);
    void AcceptDone();
    void UseSocket(Ptr<Socket> socket);
    void ConnectionSucceeded(Ptr<Socket> socket);
    void ConnectionFailed(Ptr<Socket> socket);
    void Established();
    void HandleRead(Ptr<Socket> socket);
    void PeerClose(Ptr<Socket> socket);
    void StateChanged(TcpSocket::TcpStates_t from, TcpSocket::TcpStates_t to);
    void ErrorClose(Ptr<Socket> socket);
    void SendSpace(Ptr<Socket> socket, uint32_t available);

    Time OpenTime() const; //!< when the opener connected (Max: not yet)
    void Next();
    void Fire();
    void FireOpenLoop(size_t index);
    void Perform(const MagnetAppEvent& ev);
    void SendPending();
    void MaybeClose();
    void Shutdown();
    void CloseSocket();
    void Abort();
    void CheckDone();
    void Fail(const std::string& why);

    // Attributes
    uint32_t m_readSize;
    bool m_openLoop;
    std::string m_tcpVariant;
    TypeId m_protocol;

    std::shared_ptr<const MagnetAppDemand> m_demand;
    const MagnetAppConnection* m_connection{nullptr};
    MagnetSide m_side{MagnetSide::Client};
    const std::vector<MagnetAppEvent>* m_events{nullptr};
    uint64_t m_peerBytes{0};        //!< what the peer writes on this connection

    Address m_remote;
    Ptr<MagnetAcceptorApplication> m_peerAcceptor;
    Ptr<MagnetConnectionApplication> m_peer;
    Ptr<MagnetConnectionApplication> m_earlier;
    std::vector<std::pair<std::string, Ptr<AttributeValue>>> m_socketAttributes;

    Ptr<Socket> m_socket;
    size_t m_next{0};               //!< next event of this side
    bool m_waiting{false};          //!< its think time is running (or it waits for establishment)
    bool m_fireOnEstablish{false};  //!< the next row is due once the connection is established
    Time m_prevDone;                //!< when the previous row was handed to TCP whole
    Time m_waitMet;                 //!< when the next row's wait_bytes were read
    std::deque<uint64_t> m_pending; //!< bytes of writes not yet handed to TCP whole
    size_t m_adu{0};                //!< index of this side's current ADU
    bool m_closeDue{false};         //!< open-loop: close once the pending writes are out
    bool m_sending{false};
    bool m_readAllFired{false};
    bool m_finAfterPeer{false};     //!< ns-3's own TCP, closed after the peer: its FIN waits for the peer's
    bool m_shutdownWhenAcked{false}; //!< its FIN waits for every byte sent to be acknowledged
    size_t m_peerAdu{0};            //!< next peer ADU whose last byte is awaited
    EventId m_timer;
    std::vector<EventId> m_openLoopEvents;
    Record m_record;

    TracedCallback<uint32_t, uint32_t> m_writeTrace;
    TracedCallback<uint32_t, uint32_t> m_readTrace;
    TracedCallback<uint32_t, uint16_t, uint16_t> m_establishedTrace;
    TracedCallback<uint32_t> m_readAllTrace;
    TracedCallback<uint32_t> m_doneTrace;
};

} // namespace ns3

#endif /* MAGNET_CONNECTION_APPLICATION_H */
