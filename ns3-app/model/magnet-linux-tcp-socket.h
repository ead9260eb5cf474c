/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef MAGNET_LINUX_TCP_SOCKET_H
#define MAGNET_LINUX_TCP_SOCKET_H

#include "magnet-linux-packet-count.h"

#include "ns3/event-id.h"
#include "ns3/socket-factory.h"
#include "ns3/tcp-socket-base.h"

#include <deque>
#include <functional>
#include <map>
#include <set>
#include <vector>

namespace ns3
{

/**
 * @brief ns-3's TCP with the Linux 6.x mechanisms ns-3 lacks.
 *
 * TcpSocketBase does congestion control, SACK, recovery and the
 * timestamps; this subclass makes the rest behave as Linux's
 * (net/ipv4/tcp_input.c, tcp_output.c, tcp.c, tcp_timer.c of Linux 6.18):
 *
 * - **ACKs** (the receiver): quick ACKs for the first segments and after
 *   an idle gap longer than the RTO (tcp_incr_quickack: up to 16); the
 *   delayed-ACK timeout "ato" starting at 40 ms and adapting to the gaps
 *   between segments (tcp_event_data_recv), bounded by the smoothed RTT and
 *   200 ms (tcp_send_delayed_ack, on the kernel's 4 ms tick); an ACK as soon
 *   as more than one full segment is unacknowledged (__tcp_ack_snd_check);
 *   an ACK at once when the application has read everything and a pushed
 *   segment was among it (tcp_cleanup_rbuf, tcp_measure_rcv_mss); a missed
 *   delayed ACK doubling ato; ping-pong mode when this end answers within
 *   ato; every segment sent with an ACK, a FIN too, clears the delayed ACK and counts down the
 *   quick ACKs (tcp_event_ack_sent: ns-3's SendEmptyPacket(FIN) adds the ACK flag inside, and
 *   the delayed ACK left ~40 ms after such a FIN).  A tag on a segment stands for the PSH flag
 *   (added as it leaves).
 * - **PSH where Linux puts it**: on the last segment of every transmitted skb
 *   of two or more segments (__tcp_transmit_skb forces it on GSO skbs,
 *   tcp_gso_segment keeps it on the last segment only), an skb being what one
 *   tcp_write_xmit step sends: at most tcp_tso_segs segments (tcp_tso_autosize,
 *   from the pacing rate; at least 2), cwnd's room, the peer's window and the
 *   data queued allow; and on the segment ending a write-queue skb tcp_mark_push
 *   marked: a write's end (tcp_push), unless the next write appended to that
 *   skb while it was unsent (tcp_sendmsg_locked clears the mark), and an skb
 *   filled more than half the peer's largest window past the last mark
 *   (forced_push).  ns-3 marked every write's end.
 * - **TSO deferral** (TsoDefer; tcp_tso_should_defer, 6.18): Linux builds GSO skbs on every
 *   route (sk_setup_caps adds NETIF_F_GSO for TCP), TUN devices without TSO too, so before each
 *   skb of more than one segment tcp_write_xmit asks whether to wait: outside Recovery and Loss,
 *   with something sent within 1 ms (tcp_wstamp_ns), with less room (cwnd's, the peer's window's)
 *   than a full tcp_tso_segs skb, than the skb when it is not the write queue's last, and than a
 *   third of min(cwnd, the peer's window) (tcp_tso_win_divisor), and the ACK of the retransmission
 *   queue's head expected (its send + srtt) within min(srtt / 2, 1 ms), it sends nothing until the
 *   next ACK (or write): a lone segment of room waits for a second (cwnd-limited, as
 *   tcp_cwnd_validate is told); an skb that fits but is the queue's last waits for more data
 *   unless it carries the FIN.  The skb (tcp_grow_skb takes the next one's data up to the quota):
 *   the write queue's as tcp_sendmsg_locked built it (MarkWrite).  Not for loss probes or
 *   resends.  ns-3 sent whatever the window allowed on every ACK.
 * - **Nagle** as Minshall's variant (tcp_nagle_check): a short segment is
 *   held only while an earlier short segment is unacknowledged.  Closing
 *   (close or shutdown with data unsent) puts the FIN on the last segment and
 *   sends at once with Nagle off (tcp_send_fin: __tcp_push_pending_frames with
 *   TCP_NAGLE_OFF; tcp_nagle_test passes a segment with a FIN); ns-3 only
 *   marked the socket to close once the buffer was sent, and Nagle still held
 *   a write's short tail until the ACK of an earlier short segment.
 * - **RTT and RTO**: samples from each segment's send time, to the
 *   microsecond (Linux prefers them to the timestamp echo, which it uses
 *   only for retransmitted data), and Linux's estimator and RTO
 *   (MagnetLinuxRttEstimator: srtt + rttvar, rttvar at least 200 ms); the RTO
 *   restarts from now on every ACK of new data (tcp_rearm_rto) and when the head
 *   is resent (tcp_xmit_retransmit_queue), where ns-3 restarts it on the first
 *   partial ACK of a recovery only; from the head's last send instead when a loss
 *   probe or RACK's reordering timer held its place (tcp_rearm_rto: tcp_rto_delta_us).
 * - **The host's way in** (AckLag, ReplyLag, properties of the host, 0: an ideal host): a
 *   segment arriving at the host is processed by TCP that long after (Linux's softirq: the
 *   device's interrupt, GRO, IP, tcp_v4_rcv), a segment carrying data AckLag after (where the
 *   softirq's ACK leaves: Linux ~9.5 us), a pure ACK ReplyLag after (where the data it releases
 *   leaves: Linux ~5 us); SYN, RST and a FIN without data at once.  In order: a segment is
 *   processed at max(its arrival + its lag, the previous segment's processing), none overtakes
 *   another.  Both 0: every segment processed as it arrives, no event scheduled.  A segment left
 *   waiting when the socket releases its endpoint is dropped (ns-3 would not deliver it).
 * - **The reading application's wake-up** (ReaderWakeup, a property of the host, 0: an
 *   ideal host): data made readable wakes the reader that long after (Linux decides on
 *   the ACK in its softirq; the woken task's recvmsg comes later), one wake-up reading
 *   everything then readable; what Linux does at the read (tcp_cleanup_rbuf's ACK,
 *   tcp_rcv_space_adjust) happens then.  A FIN still tells the application at once (ns-3's
 *   close notification, whose handler reads what is left).
 * - **Slow start after idle** (tcp_cwnd_restart): a send after more than
 *   an RTO with nothing in flight restarts from the initial window.
 * - **Buffers with autotuning**: the receive window of tcp_rmem (131072
 *   bytes of memory, data as scaling_ratio of it) grown per round trip with
 *   what the application read (tcp_rcv_space_adjust, 6.18's tcp_rcvbuf_grow;
 *   and by the out-of-order span, tcp_data_queue_ofo) up to tcp_rmem[2],
 *   advertised as rcv_ssthresh grows (tcp_grow_window: each growth asks for
 *   a quick ACK; an out-of-order segment grows it before it is charged,
 *   tcp_data_queue_ofo, so up to the clamp); the send buffer of tcp_wmem expanded to twice the
 *   congestion window (tcp_sndbuf_expand) up to tcp_wmem[2].  SO_RCVBUF and
 *   SO_SNDBUF (the attributes, 0: autotuned) double the value and fix it.
 * - **Tail loss probe** (tcp_schedule_loss_probe, tcp_send_loss_probe):
 *   with SACK and nothing being recovered, a probe 2 srtt after the last
 *   send (plus 200 ms with one segment out), new data if there is some
 *   within the window, else the last segment again; only with nothing
 *   SACKed (Linux's TCP_CA_Open: once a SACK shows a hole, RACK's timer
 *   replaces the probe).
 * - **RACK** (tcp_recovery.c; net.ipv4.tcp_recovery bit 1, with SACK): a
 *   segment is lost once one sent after it is delivered and RACK's RTT plus a
 *   reordering window has passed since it was sent (tcp_rack_detect_loss, in
 *   send order, retransmissions too: a lost retransmission is resent); the
 *   window min_rtt/4, at most srtt, or 0 in recovery or with as many segments
 *   SACKed as the reordering degree (3) while no reordering was seen
 *   (tcp_rack_reo_wnd; no DSACKs from ns-3, so one step); a reordering timer
 *   for the segments still within it (tcp_rack_reo_timeout), in the RTO's
 *   place.  Recovery starts when a segment is marked lost (tcp_time_to_recover:
 *   with RACK, duplicate ACKs do not count), lost segments are resent first,
 *   and in Recovery only they (tcp_xmit_retransmit_queue; with SACK ns-3's RFC 6675
 *   rule 3 is off, and so is ProcessAck's resend on a partial ACK).  Off, ns-3's RFC 6675 rules detect loss.
 * - **Packets, not bytes** (MagnetLinuxPacketCount): the congestion control
 *   and the recovery get the packets an ACK delivered (tcp_newly_delivered),
 *   and a segment goes while the packets in flight are fewer than cwnd's
 *   packets (tcp_cwnd_test), a short segment being one packet as a full one
 *   (without SACK, a duplicate ACK one packet delivered, a cumulative ACK
 *   max(acked - sacked_out, 1): tcp_add_reno_sack, tcp_remove_reno_sacks);
 *   the window grows while it limits the flow (tcp_is_cwnd_limited: filled in
 *   this window of data, or in slow start under twice the most packets out,
 *   as tcp_cwnd_validate keeps them), and on any ACK tcp_may_raise_cwnd allows
 *   outside CWR and Recovery (in Disorder too: tcp_cong_control).
 * - **F-RTO** (RFC 5682 as tcp_input.c does it, net.ipv4.tcp_frto = 2, with or
 *   without SACK): an RTO from Open, Disorder or CWR, or a recurring one with no
 *   progress, starts it (tcp_enter_loss: tp->frto).  On the first ACK of the resent
 *   head, new data goes instead of more resends (tcp_process_loss step 2.b,
 *   REXMIT_NEW in tcp_xmit_recovery); an ACK or SACK of data never resent and sent
 *   before the RTO then shows it spurious and undoes it (tcp_try_undo_loss with
 *   frto_undo: losses unmarked, cwnd and ssthresh back, Open), a SACK or duplicate
 *   ACK shows the loss real and the resends go on.  Without SACK, duplicate ACKs
 *   in Loss once data above high_seq is out count as packets delivered
 *   (tcp_add_reno_sack, at most packets_out - lost_out), which clocks the resends.
 *   An ACK of new data echoing a time before the episode's first retransmission undoes the RTO
 *   at once (tcp_try_undo_loss(sk, false): tcp_may_undo, tcp_packet_delayed).
 * - **A write sends new data only** (tcp_push, tcp_write_xmit); lost segments are resent on
 *   ACKs and timers (tcp_xmit_retransmit_queue): ns-3's write ran SendPendingData, which resends
 *   NextSeg's lost segments first.
 * - **Loss resends every lost segment first** (with SACK; tcp_xmit_retransmit_queue on each ACK
 *   in Loss), in order, before new data: NextSeg gave new data before a lost segment above the
 *   highest SACKed one.
 * - **The RTO's marks** (tcp_timeout_mark_lost): with RACK, segments other than the head
 *   sent within RACK's RTT are not marked lost and stay in flight (cwnd = in flight + 1);
 *   ns-3 marked every one.
 * - **The RTO's ssthresh** (tcp_enter_loss): cut only "if it has not yet been made inside
 *   this window": not in Recovery (snd_una short of high_seq), nor again in Loss without
 *   progress since the last RTO; ns-3 cut it in Recovery too.
 * - **Recovery held at high_seq without SACK** (tcp_try_undo_recovery,
 *   tcp_is_non_sack_preventing_reopen): the ACK that reaches high_seq exactly takes one
 *   PRR step and re-arms the RTO, marks and resends nothing, and its duplicates start no
 *   second fast retransmission; the first ACK above it ends Recovery.  ns-3 went to Open.
 * - **Giving up** (tcp_write_timeout): an RTO with no progress since the last
 *   one gives up once the time tcp_retries2 (15) RTOs from TCP_RTO_MIN would
 *   take, doubling up to TCP_RTO_MAX, has passed since the episode's first
 *   retransmission (retransmits_timed_out: 924.6 s), not after ns-3's 6 RTOs;
 *   the RTO doubles up to 120 s (ns-3: 60 s); the SYN's timer stays at 1 s
 *   for tcp_syn_linear_timeouts (4) retransmissions before doubling.
 * - **A receiver that closed first** (FIN_WAIT_1, FIN_WAIT_2: Linux's tcp_rcv_state_process,
 *   not tcp_rcv_established): its RTT for autotuning comes from the window's measure alone,
 *   no timestamp samples (tcp_rcv_rtt_measure_ts), so its buffer first grows once a window of
 *   data is in; the peer's FIN on its last data is queued after the data and ACKed with it
 *   (ns-3's ProcessWait put it at the segment's first byte and left it unACKed), with one ACK
 *   for both (tcp_fin sends it before tcp_ack_snd_check looks at the data: the profile, taking
 *   the data first, ACKed it at once in quick-ACK mode, then the FIN).
 * - **A SYN on a synchronized connection** (tcp_validate_incoming, RFC 5961 4.2): the peer's
 *   resent SYN-ACK (this end's ACK of it lost) or SYN draws a challenge ACK, at most one per
 *   500 ms (tcp_invalid_ratelimit), and is discarded; ns-3 reset cwnd on it and sent nothing,
 *   so a lost last ACK of the handshake left a peer with nothing to send in SYN_RCVD until it
 *   gave up.
 * - **The FIN after data in flight** (tcp_shutdown, tcp_send_fin): a half-close with every byte
 *   written already sent sends the FIN at once, a segment of its own (a FIN passes the cwnd
 *   test, tcp_cwnd_test); ns-3's ShutdownSend sent it only on an empty buffer or with a data
 *   segment still to send, so with every byte sent and some unACKed it never did (Close() did).
 * - **The FIN's timer** (tcp_retransmit_timer, tcp_schedule_loss_probe): a FIN alone in flight
 *   (every byte before it ACKed) is resent as data is: with SACK one loss probe first (2 srtt +
 *   200 ms, at most the RTO), then on the RTO, doubling (icsk_backoff) up to tcp_rto_max; ns-3
 *   resent it every RTO, never doubled (SendEmptyPacket recomputes the RTO on each send).
 * - **CLOSING** (the two FINs crossed; tcp_rcv_state_process): a segment wholly before rcv_wup
 *   or beyond the window (tcp_sequence) draws a duplicate ACK (a bare ACK's rate-limited) and
 *   its ACK is not taken; an ACK of what was never sent, a challenge ACK; the ACK of this end's
 *   FIN -- at any acceptable sequence, a FIN again on it too -- moves to TIME_WAIT and nothing is
 *   sent for it (snd_una == write_seq: tcp_time_wait, the segment consumed); an ACK short of
 *   the FIN is taken, the FIN staying on its timer, and the peer's FIN again draws a duplicate
 *   ACK.  ns-3 (ProcessClosing) went to TIME_WAIT on any bare ACK at rcv_nxt, ignored one
 *   elsewhere that ACKed the FIN, and on a FIN+ACK sent an ACK and closed (no TIME_WAIT).  A
 *   pure ACK sent while this end's FIN is out carries snd_nxt, past the FIN
 *   (tcp_acceptable_seq), where ns-3 numbered it m_nextTxSequence + 1, short of that once a
 *   resend had moved m_nextTxSequence back.
 * - **A segment in TIME_WAIT** (tcp_timewait_state_process): anything but a bare ACK at rcv_nxt
 *   or a RST -- the peer's FIN resent because this end's last ACK was lost -- is ACKed at once
 *   (a segment without data or FIN at most once per 500 ms, tcp_oow_rate_limited), and one
 *   with an ACK restarts the TIME_WAIT timer; ns-3 ignored it, and the peer stayed in LAST_ACK
 *   resending its FIN.  Nothing else is sent from TIME_WAIT: tcp_time_wait and tcp_done stop the
 *   socket's timers (tcp_clear_xmit_timers); ns-3's TimeWait() cancels its own only, and the
 *   profile's loss probe resent data from TIME_WAIT, its delayed ACK left from it.
 * - **A listener's RST** (tcp_rcv_state_process in LISTEN, tcp_v4_send_reset): a segment with an
 *   ACK that reaches the listening socket -- its connection gone (reset, closed) -- draws a RST
 *   whose sequence is the segment's ACK number; ns-3's listener ignored it (ProcessListen), and
 *   the peer resent to it until it gave up.  (Where no socket listens, ns-3's TcpL4Protocol
 *   already resets: NoEndPointsFound.)
 */
class MagnetLinuxTcpSocket : public TcpSocketBase
{
  public:
    static TypeId GetTypeId();

    MagnetLinuxTcpSocket();
    MagnetLinuxTcpSocket(const MagnetLinuxTcpSocket& sock);
    ~MagnetLinuxTcpSocket() override;

    TypeId GetInstanceTypeId() const override;

    int Send(Ptr<Packet> p, uint32_t flags) override;
    uint32_t GetTxAvailable() const override;
    Ptr<Packet> Recv(uint32_t maxSize, uint32_t flags) override;
    void SetTcpNoDelay(bool noDelay) override;
    bool GetTcpNoDelay() const override;
    int Close() override;
    int ShutdownSend() override;

    /** What the receiver side did, for tests: ACKs sent, and of them delayed ones. */
    struct AckStats
    {
        uint64_t acks{0};     //!< pure ACKs sent while established
        uint64_t quick{0};    //!< ... in quick-ACK mode
        uint64_t delayed{0};  //!< ... by the delayed-ACK timer
        uint64_t onRead{0};   //!< ... when the reader drained the queue (tcp_cleanup_rbuf)
        uint64_t immediate{0}; //!< ... at once for out-of-order data, a hole filled, a duplicate
        uint64_t probes{0};   //!< tail loss probes sent
    };

    /** What the sender's loss detection did, for tests. */
    struct LossStats
    {
        uint64_t rackLost{0};    //!< segments RACK marked lost (never-retransmitted ones)
        uint64_t lostRetrans{0}; //!< retransmissions RACK found lost (LINUX_MIB_TCPLOSTRETRANSMIT)
        uint64_t reoTimeouts{0}; //!< RACK's reordering timer fired
        uint64_t rtos{0};        //!< retransmission timeouts with data out
        uint64_t frtoNew{0};     //!< F-RTO sent new data on the ACK of the resent head (step 2.b)
        uint64_t spuriousRtos{0}; //!< F-RTO found an RTO spurious and undid it (LINUX_MIB_TCPSPURIOUSRTOS)
        uint64_t lossUndos{0};    //!< Loss undone, by F-RTO or by timestamps (LINUX_MIB_TCPLOSSUNDO)
    };

    const AckStats& GetAckStats() const;
    const LossStats& GetLossStats() const;
    Time GetAto() const;             //!< the current delayed-ACK timeout
    uint32_t GetWindowClamp() const; //!< the largest window it will advertise now
    uint32_t GetRcvSsthresh() const; //!< rcv_ssthresh: the window's growth so far
    uint32_t GetRcvBuf() const;      //!< sk_rcvbuf: memory, bytes
    uint32_t GetRcvqSpace() const;   //!< rcvq_space.space: what the reader took in an RTT, at most
    Time GetRcvRtt() const;          //!< rcv_rtt_est: the receiver's RTT estimate (0: none yet)
    uint64_t GetTsoDeferrals() const; //!< sends tcp_tso_should_defer held back (TsoDefer)
    uint64_t GetTsoEarlyChecks() const; //!< tcp_tso_should_defer asked before a write was counted (0)
    uint32_t GetSndBuf() const;      //!< sk_sndbuf: memory, bytes

  protected:
    Ptr<TcpSocketBase> Fork() override;
    void ReceivedData(Ptr<Packet> packet, const TcpHeader& tcpHeader) override;
    uint32_t SendDataPacket(SequenceNumber32 seq, uint32_t maxSize, bool withAck) override;
    void SendEmptyPacket(uint8_t flags) override;
    uint32_t AvailableWindow() const override;
    uint16_t AdvertisedWindowSize(bool scale = true) const override;
    Time CalculateRttSample(const TcpHeader& tcpHeader, const RttHistory& rttHistory) override;
    void EstimateRtt(const TcpHeader& tcpHeader) override;
    void ProcessAck(const SequenceNumber32& ackNumber,
                    bool scoreboardUpdated,
                    uint32_t currentDelivered,
                    const SequenceNumber32& oldHeadSequence,
                    bool receivedData) override;
    void ReceivedAck(Ptr<Packet> packet, const TcpHeader& tcpHeader) override;
    void ReTxTimeout() override;
    void DoForwardUp(Ptr<Packet> packet, const Address& fromAddress, const Address& toAddress) override;
    /** TCP's processing of a segment, once the host has brought it in (AckLag, ReplyLag). */
    void ProcessSegment(Ptr<Packet> packet, const Address& fromAddress, const Address& toAddress);
    /** ... by state (ProcessSegment's body). */
    void HandleSegment(Ptr<Packet> packet, const Address& fromAddress, const Address& toAddress);
    /** tcp_clear_xmit_timers (tcp_time_wait, tcp_done): the profile's timers stopped. */
    void ClearXmitTimers();
    /** tcp_replace_ts_recent: the TSval this end echoes, from an acceptable segment at or before rcv_wup. */
    void ReplaceTsRecent(const TcpHeader& header, uint32_t payload);
    /** tcp_validate_incoming: a SYN on a synchronized connection draws a challenge ACK (rate-limited). */
    void SynChallenge();
    /** LAST_ACK: the peer's FIN again, this end's FIN not ACKed -- its ACK taken, a duplicate ACK sent. */
    void LastAckFinAgain(Ptr<Packet> packet, const Address& fromAddress, const Address& toAddress);
    /** CLOSING: a segment as tcp_rcv_state_process takes it (acceptable? the FIN's ACK: TIME_WAIT). */
    void ClosingSegment(Ptr<Packet> packet, const TcpHeader& header, const Address& fromAddress, const Address& toAddress);
    /** __tcp_oow_rate_limited: true if an out-of-window ACK went within tcp_invalid_ratelimit (else notes one now). */
    bool OowRateLimited();
    /** CLOSING: an ACK short of this end's FIN (or the peer's FIN again) -- taken, the FIN kept on its timer. */
    void ClosingShortAck(Ptr<Packet> packet, const Address& fromAddress, const Address& toAddress);
    /** tcp_timewait_state_process: a segment in TIME_WAIT ACKed unless a bare ACK at rcv_nxt or a RST. */
    void TimeWaitSegment(const TcpHeader& header, uint32_t payload);
    /** tcp_v4_send_reset from a listening socket: the RST a segment with an ACK draws. */
    void ListenerReset(const TcpHeader& header, const Address& fromAddress, const Address& toAddress);
    void DoDispose() override;
    void NotifyConstructionCompleted() override;

  private:
    // ---- receiving: ACKs (icsk_ack) ----
    enum Pending : uint8_t
    {
        kSched = 1,   //!< ICSK_ACK_SCHED: an ACK is owed
        kTimer = 2,   //!< ICSK_ACK_TIMER: the delayed-ACK timer runs
        kPushed = 4,  //!< ICSK_ACK_PUSHED: a short (or pushed full) segment came
        kPushed2 = 8, //!< ICSK_ACK_PUSHED2: a second one did
        kNow = 16,    //!< ICSK_ACK_NOW: ACK the next segment at once
    };

    int64_t Jiffies(Time t) const;
    Time FromJiffies(int64_t j) const;
    void EventDataRecv(uint32_t len, bool pushed, const TcpHeader& header);
    void MeasureRcvMss(uint32_t len, bool pushed);
    void IncrQuickAck(uint32_t max);
    void EnterQuickAckMode(uint32_t max);
    bool InQuickAckMode() const;
    bool InPingPongMode() const;
    void AckSndCheck();
    void SendDelayedAck();
    void DelAckTimer();
    void SendAck();
    void AckSent();
    void CleanupRbuf(uint32_t copied);
    bool Pushed(Ptr<const Packet> packet) const;

    // ---- receiving: the window (autotuning) ----
    void InitBufferSpace();
    uint32_t WinFromSpace(uint64_t space) const;
    uint64_t SpaceFromWin(uint64_t win) const;
    uint32_t FreeSpace(uint32_t uncharged = 0) const;
    uint32_t SelectWindow() const;
    void GrowWindow(uint32_t len, uint32_t uncharged = 0);
    void RcvSpaceAdjust();
    void RcvBufGrow(uint32_t newval);
    void WakeReader(); //!< data became readable: the application reads, now or once woken
    void ReadNow();    //!< the application's read of what is readable, then tcp_cleanup_rbuf
    void RcvRttMeasure(const TcpHeader& header, uint32_t len);
    Time HostLag(Ptr<const Packet> packet) const; //!< AckLag, ReplyLag or 0, by what the segment carries
    void HostIn();                                //!< the host's next waiting segment reaches TCP

    // ---- sending ----
    void UpdateNagle() const;
    int PushFin(const std::function<int()>& close); //!< close, then tcp_send_fin's push, Nagle off
    void SlowStartAfterIdleCheck();
    void SndBufExpand();
    bool OnlyUnlostLeft() const; //!< in Recovery with SACK, NextSeg has no lost segment or new data
    void ApplySndBuf();
    bool LinuxOpen() const;   //!< TCP_CA_Open or CWR with nothing SACKed or lost: a probe may go
    bool RetransmitsTimedOut() const; //!< retransmits_timed_out(sk, tcp_retries2, 0)
    void RenoSackOnAck(SequenceNumber32 ack); //!< without SACK: tcp_reset_reno_sack as snd_una advances
    bool RenoHoldsLoss(SequenceNumber32 ack, SequenceNumber32 una) const; //!< without SACK: Loss held at high_seq
    bool RenoHoldsRecovery(SequenceNumber32 ack) const; //!< without SACK: Recovery held at high_seq
    void BackOffSyn(uint8_t flags); //!< a SYN's timer as tcp_retransmit_timer backs it off
    /** A FIN alone in flight: its loss probe, then its RTO, doubling (armedBefore, rtoBefore: the RTO before the send). */
    void FinTimer(uint8_t flags, bool armedBefore, Time rtoBefore);
    void FinTimeout(uint8_t flags);                  //!< ... due: the FIN again
    bool ScheduleLossProbe(); //!< false: no probe is due (the RTO is the timer)
    /** A partial ACK in Recovery with SACK: TcpSocketBase's steps, less its resend. */
    void PartialAck(const SequenceNumber32& ackNumber, bool isDupack, uint32_t currentDelivered);
    /** tcp_rearm_rto; fromHead: a loss probe or RACK's timer held the RTO's place (icsk_pending). */
    void RearmRto(bool fromHead = false);
    Time RtoFromHead() const; //!< tcp_rto_delta_us: the RTO from the head's last send, in ticks
    /** tcp_cong_control's growth where TcpSocketBase has none (in Disorder, or on SACKs with reordering). */
    void RaiseCwnd(bool advanced, bool sacked, uint32_t delivered, TcpSocketState::TcpCongState_t baseState);
    bool Outstanding() const; //!< data (or, in LAST_ACK, the FIN) is out: the RTO must run
    void LossProbe();
    uint32_t PerMss() const;

    // ---- sending: RACK loss detection (tcp_recovery.c) ----
    void SackTagRetransmitted(const TcpHeader& header);
    bool RackOn() const;
    bool EverRetransmitted(SequenceNumber32 start, SequenceNumber32 end) const;
    /** This ACK's RTT sample for the congestion control (ca_rtt_us), us; -1: none. */
    int64_t AckRttUs(const TcpHeader& header) const;
    void RackOnAck(const TcpHeader& header);
    void RackAdvance(bool retrans, SequenceNumber32 end, Time xmit);
    uint32_t SackedSegments() const;
    Time ReoWnd() const;
    bool RackListed(const TcpTxItem& item) const; //!< on RACK's time-sorted list
    std::vector<TcpTxItem*> RackSendOrder() const; //!< that list in send order, as far as RACK reads it
    std::vector<TcpTxItem*> RackSortAll() const;   //!< the whole list, sorted by last send
    void CheckRackOrder(const std::vector<TcpTxItem*>& order) const;
    Time RackDetectLoss();     //!< the longest wait left (0: none)
    bool RackMarkLost();       //!< true: the reordering timer was armed
    void RackReoTimeout();
    void EnterRecoveryRack(uint32_t delivered);
    void XmitRetransmitQueue();
    /** Tx trace: tag a data segment Linux would send with PSH (Pushed). */
    void MarkPushed(Ptr<const Packet> packet, const TcpHeader& header, Ptr<const TcpSocketBase> socket);
    void MarkWrite(uint64_t written);    //!< tcp_sendmsg_locked's skbs and tcp_mark_push for a write
    uint32_t SizeGoal() const;           //!< tcp_xmit_size_goal: an skb's bytes in the write queue
    uint32_t TsoSegs() const;            //!< tcp_tso_segs: the segments of one transmitted skb at most
    /** tcp_tso_should_defer for the skb at the send head (after tcp_grow_skb): wait for an ACK. */
    bool TsoShouldDefer() const;
    void GsoStep(SequenceNumber32 seq);  //!< the transmitted skb a new segment belongs to
    void InitPacketCount();
    uint32_t CwndPackets() const; //!< tcp_snd_cwnd

    // ---- sending: F-RTO (tcp_enter_loss, tcp_process_loss) ----
    uint32_t CurrentSsthresh() const; //!< tcp_current_ssthresh, bytes
    void SetPrior(TcpSocketState::TcpCongState_t state, uint32_t cwnd, uint32_t ssthresh); //!< prior_cwnd, prior_ssthresh
    void OrigAckedOnAck(const TcpHeader& header); //!< FLAG_ORIG_SACK_ACKED, before TcpTxBuffer takes the ACK
    bool ProcessLoss(SequenceNumber32 ack, SequenceNumber32 una, bool sacked, bool receivedData);
    void UndoLoss(SequenceNumber32 ack, bool frtoUndo); //!< tcp_try_undo_loss's undo
    bool PacketDelayed() const; //!< tcp_packet_delayed: this ACK echoes a time before the first retransmission
    void SendNewData();                //!< tcp_write_xmit's new data only (tcp_xmit_recovery's REXMIT_NEW, a write's push)
    void SendOnWrite();                //!< a write's tcp_push, in place of TcpSocketBase's SendPendingData
    bool LostUnsent() const;           //!< a segment marked lost is not resent yet
    /** tcp_enter_loss and the head's resend; reduce: ssthresh is cut (and the loss told to the congestion control). */
    void EnterLoss(bool reduce);
    void TimeoutMarkLost(); //!< tcp_timeout_mark_lost: with RACK, not the recently sent ones

    // Attributes
    Time m_tick;           //!< the kernel's jiffy (HZ = 250: 4 ms)
    Time m_atoMin;         //!< TCP_ATO_MIN, TCP_DELACK_MIN: 40 ms
    Time m_delAckMax;      //!< icsk_delack_max: 200 ms (TCP_DELACK_MAX)
    uint32_t m_maxQuickAcks; //!< TCP_MAX_QUICKACKS: 16
    bool m_quickAckAlways; //!< route option quickack: every segment ACKed at once
    bool m_slowStartAfterIdle;
    bool m_tlp;            //!< tcp_early_retrans = 3: tail loss probes
    bool m_rack;           //!< tcp_recovery & TCP_RACK_LOSS_DETECTION
    bool m_frtoOn;         //!< tcp_frto (2): F-RTO
    uint32_t m_rmemDefault, m_rmemMax, m_wmemDefault, m_wmemMax; //!< tcp_rmem, tcp_wmem
    uint32_t m_soRcvBuf, m_soSndBuf; //!< SO_RCVBUF, SO_SNDBUF as given (0: autotune)
    double m_scalingRatio; //!< data per byte of receive memory, for a full-sized segment
    uint32_t m_retries2;   //!< tcp_retries2: the time 15 backed-off RTOs would take, then give up
    Time m_rtoMax;         //!< tcp_rto_max_ms (TCP_RTO_MAX): the backed-off RTO's cap
    uint32_t m_synLinear;  //!< tcp_syn_linear_timeouts: SYN timeouts before the backoff
    Time m_readerWakeup;   //!< the host: data readable -> the woken reader's read (0: at once)
    Time m_ackLag;         //!< the host: a data segment's arrival -> its processing (0: at once)
    Time m_replyLag;       //!< the host: a pure ACK's arrival -> its processing (0: at once)
    bool m_tsoDefer;       //!< tcp_tso_should_defer: GSO skbs (always on in Linux 6.x) may wait for an ACK

    // Receiver state
    uint8_t m_pending{0};
    mutable uint32_t m_quick{0};
    uint32_t m_pingpong{0};
    int64_t m_ato{0};      //!< jiffies; 0: no data received yet
    int64_t m_lrcvtime{0}; //!< jiffies of the last data received
    int64_t m_ackTimeout{0};
    EventId m_delAckTimer;
    uint32_t m_rcvMss{0};
    uint32_t m_lastSegSize{0};
    SequenceNumber32 m_rcvWup; //!< rcv_nxt when the last ACK was sent
    bool m_seqInit{false};     //!< the sequence bookkeeping below starts with the first data
    bool m_inReceive{false};   //!< inside ReceivedData: reads defer their ACK check
    bool m_finFollows{false};  //!< the peer's data before its FIN (FIN_WAIT_1/2): the FIN's ACK covers it
    uint32_t m_readInReceive{0};
    EventId m_readerEvent;     //!< the reader's pending wake-up (ReaderWakeup)
    bool m_challengeAckSent{false}; //!< an out-of-window ACK was sent (last_oow_ack_time set)
    Time m_lastChallengeAck;         //!< when (tcp_invalid_ratelimit counts from it)
    bool m_twAckSent{false};         //!< TIME_WAIT answered a segment without data or FIN (tw_last_oow_ack_time set)
    Time m_lastTwAck;                //!< when (tcp_invalid_ratelimit counts from it)
    bool m_finSent{false};           //!< this end's FIN went out
    bool m_finOut{false};            //!< ... and is alone in flight, FinTimer timing it
    bool m_finProbe{false};          //!< ... its next resend is the loss probe (no backoff)
    uint32_t m_finBackoff{0};        //!< ... its RTOs so far (icsk_backoff)
    Time m_finRto;                   //!< ... the RTO when it started (icsk_rto before the backoff)

    /** A segment on its way through the host (AckLag, ReplyLag). */
    struct HostSegment
    {
        Ptr<Packet> packet;
        Address from;
        Address to;
        Time due; //!< when TCP processes it
    };

    std::deque<HostSegment> m_hostQueue; //!< segments arrived, not yet processed, in arrival order
    EventId m_hostEvent;                 //!< the head's processing
    AckStats m_stats;

    // Receive window (bytes of data unless said otherwise)
    bool m_bufferInit{false};
    double m_ratio{0.5};         //!< scaling_ratio now (TCP_DEFAULT_SCALING_RATIO until measured)
    uint64_t m_rcvBuf{0};        //!< sk_rcvbuf: memory
    uint32_t m_windowClamp{0};
    uint32_t m_rcvSsthresh{0};
    mutable uint32_t m_rcvWnd{0};
    uint32_t m_rcvqSpace{0};
    SequenceNumber32 m_rcvqSeq;   //!< copied_seq at the measurement's start
    Time m_rcvqTime;
    SequenceNumber32 m_copiedSeq; //!< what the application has read
    SequenceNumber32 m_oooEnd;    //!< the end of the highest out-of-order data received
    Time m_rcvRtt;                //!< rcv_rtt_est: the receiver's RTT estimate (0: none)
    SequenceNumber32 m_rcvRttSeq; //!< the windowed measurement ends when rcv_nxt passes this
    Time m_rcvRttTime;            //!< ... which started then
    uint32_t m_lastTsEcr{0};

    // Sender state
    bool m_userNoDelay{false};
    SequenceNumber32 m_sndSml; //!< end of the last short segment sent (snd_sml)
    bool m_sentShort{false};
    SequenceNumber32 m_lastSeq; //!< the last segment of new data sent: what a probe resends
    uint32_t m_lastLen{0};
    Time m_lsndtime;           //!< when data was last sent
    bool m_sentData{false};
    uint64_t m_sndBuf{0};      //!< sk_sndbuf: memory
    bool m_sndBufInit{false};  //!< sized for the connection (tcp_init_buffer_space)
    EventId m_probeTimer;
    Time m_rtoAt;              //!< when the RTO the probe took the place of was due
    SequenceNumber32 m_tlpHighSeq; //!< a probe is out for this episode (tlp_high_seq)
    bool m_probeOut{false};
    bool m_sendingProbe{false};
    uint64_t m_written{0};             //!< bytes the application has written
    std::deque<uint64_t> m_writeEnds;  //!< stream offsets of the PSH marks (tcp_mark_push) not acknowledged
    mutable uint64_t m_tailSkb{0};     //!< stream offset where the write queue's last skb starts
    mutable std::deque<uint64_t> m_skbStarts; //!< ... and where its skbs after the send head's start (unsent)
    Time m_wstamp{Time::Min()};        //!< tcp_wstamp_ns: when this end last transmitted (any segment)
    mutable uint64_t m_tsoDeferrals{0}; //!< TsoShouldDefer's waits
    bool m_inWrite{false};             //!< in TcpSocketBase::Send: the write not yet counted (MarkWrite)
    mutable uint64_t m_tsoEarlyChecks{0}; //!< TsoShouldDefer's runs with m_inWrite (a test's check)
    uint64_t m_pushedSeq{0};           //!< tp->pushed_seq, as a stream offset
    uint32_t m_maxWindow{0};           //!< tp->max_window: the largest window the peer offered
    uint32_t m_gsoSegs{0};             //!< segments of the skb being transmitted
    uint32_t m_gsoLeft{0};             //!< ... of them still to go
    SequenceNumber32 m_gsoNext;        //!< ... the next one's sequence
    Time m_gsoTime{Time::Max()};       //!< ... when it went
    uint8_t m_gsoPsh{0};               //!< the segment leaving: 0 alone in its skb, 1 not its skb's last, 2 its last
    bool m_pushTraced{false};          //!< MarkPushed is connected to this socket's Tx trace
    Time m_retransStamp{Time::Max()};  //!< retrans_stamp: the episode's first retransmission (Max: none)
    uint32_t m_retransmits{0};         //!< icsk_retransmits: RTOs since snd_una last advanced
    bool m_frto{false};                //!< tp->frto: this Loss episode runs F-RTO
    bool m_origAcked{false};           //!< this ACK (S)ACKed data never resent, below high_seq (FLAG_ORIG_SACK_ACKED)
    bool m_frtoHold{false};            //!< this ACK sent F-RTO's new data: nothing else goes on it
    bool m_timerEarly{false};          //!< as this ACK came, the probe or RACK's timer held the RTO's place
    uint32_t m_priorCwnd{0};           //!< tp->prior_cwnd, bytes
    uint32_t m_priorSsthresh{0};       //!< tp->prior_ssthresh, bytes (0: nothing to undo to)
    bool m_undoMarker{false};          //!< tp->undo_marker set: the reduction may be undone
    uint32_t m_ackEcho{0};             //!< this ACK's timestamp echo (0: none)

    // RACK (tp->rack, the reordering state)
    bool m_rackValid{false};     //!< rack.mstamp set
    Time m_rackXmit;             //!< rack.mstamp: the latest send time among delivered segments
    SequenceNumber32 m_rackEnd;  //!< rack.end_seq
    Time m_rackRtt;              //!< rack.rtt_us
    bool m_rackAdvanced{false};  //!< rack.advanced
    bool m_lostRetrans{false};   //!< a retransmission was found lost on this ACK (FLAG_LOST_RETRANS)
    bool m_leavingRecovery{false}; //!< this ACK ends Recovery or Loss (reo_wnd as in Open)
    uint32_t m_reordering{3};    //!< tp->reordering, segments (tcp_reordering)
    bool m_reordSeen{false};     //!< tp->reord_seen
    Time m_minRtt{Time::Max()};  //!< tcp_min_rtt: the least RTT sample
    Time m_minRttAtAck{Time::Max()}; //!< ... before this ACK's sample (as tcp_rack_advance sees it)
    Time m_rttSample;            //!< the last sample CalculateRttSample gave
    std::map<SequenceNumber32, SequenceNumber32> m_retransmitted; //!< ranges ever resent (TCPCB_EVER_RETRANS)
    std::set<SequenceNumber32> m_rackPassed; //!< SACKed segments off RACK's time-sorted list
    EventId m_reoTimer;          //!< ICSK_TIME_REO_TIMEOUT, in the RTO's place
    LossStats m_lossStats;
    Ptr<MagnetLinuxPacketCount> m_packets; //!< also the rate estimator (m_rateOps)
    uint64_t m_priorDelivered{0};      //!< packets delivered before this ACK (prior_delivered)
};

/**
 * @brief Makes MagnetLinuxTcpSockets: aggregate it to a node that has TCP,
 * and give applications its TypeId as their Protocol.
 */
class MagnetLinuxTcpSocketFactory : public SocketFactory
{
  public:
    static TypeId GetTypeId();

    /** A MagnetLinuxTcpSocket of the node's TCP (its SocketType and RecoveryType). */
    Ptr<Socket> CreateSocket() override;
};

} // namespace ns3

#endif /* MAGNET_LINUX_TCP_SOCKET_H */
