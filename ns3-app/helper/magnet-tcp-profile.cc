/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "magnet-tcp-profile.h"

#include "magnet-linux-cubic.h"
#include "magnet-linux-prr-recovery.h"
#include "magnet-linux-reno.h"
#include "magnet-linux-tcp-socket.h"
#include "magnet-units.h"

#include "ns3/boolean.h"
#include "ns3/config.h"
#include "ns3/internet-stack-helper.h"
#include "ns3/string.h"
#include "ns3/tcp-congestion-ops.h"
#include "ns3/tcp-socket-factory.h"
#include "ns3/uinteger.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>

namespace ns3
{

namespace
{

constexpr uint32_t kIpTcpHeaders = 40;
constexpr uint32_t kTimestampOption = 12; // 10 bytes, padded to 12: Linux and ns-3 alike
const Time kLinuxDelAckMax = MilliSeconds(200); // TCP_DELACK_MAX: a cap below it is allowed

/** "TcpCubic" or "ns3::TcpCubic" -> "ns3::TcpCubic". */
std::string
Ns3Name(const std::string& cc)
{
    return cc.rfind("ns3::", 0) == 0 ? cc : "ns3::" + cc;
}

/** ns-3's own default of an attribute, "ns3::Type::Name" (whatever SetDefault did since). */
Ptr<const AttributeValue>
Ns3Default(const std::string& path)
{
    auto cut = path.rfind("::");
    TypeId::AttributeInformation info;
    NS_ABORT_UNLESS(TypeId::LookupByName(path.substr(0, cut)).LookupAttributeByName(path.substr(cut + 2), &info));
    return info.originalInitialValue;
}

void
SetDefaultOr(const std::string& path, bool given, const AttributeValue& value)
{
    Config::SetDefault(path, given ? value : *Ns3Default(path));
}

/** The value new objects of `type` get for attribute `name`, as text ("0.2s" for times). */
std::string
Current(const std::string& type, const std::string& name)
{
    TypeId::AttributeInformation info;
    if (!TypeId::LookupByName(type).LookupAttributeByName(name, &info))
    {
        return "?";
    }
    std::ostringstream value;
    if (auto time = DynamicCast<const TimeValue>(info.initialValue))
    {
        value << time->Get().GetSeconds() << "s"; // "0.2s", not "+2e+08ns"
    }
    else
    {
        value << info.initialValue->SerializeToString(info.checker);
    }
    return value.str();
}

std::vector<std::string>
CongestionControls()
{
    std::vector<std::string> names;
    for (uint16_t i = 0; i < TypeId::GetRegisteredN(); ++i)
    {
        TypeId tid = TypeId::GetRegistered(i);
        if (tid != TcpCongestionOps::GetTypeId() && tid.IsChildOf(TcpCongestionOps::GetTypeId()) &&
            tid.HasConstructor())
        {
            names.push_back(tid.GetName().substr(5)); // without "ns3::"
        }
    }
    std::sort(names.begin(), names.end());
    return names;
}

} // namespace

// ---------------------------------------------------------------- config ---
uint32_t
MagnetTcpConfig::Mss(uint32_t mtu) const
{
    uint32_t path = mtu - kIpTcpHeaders;
    return mss ? std::min(mss, path) : path;
}

uint32_t
MagnetTcpConfig::SegmentSize(uint32_t mtu) const
{
    return Mss(mtu) - (timestamps ? kTimestampOption : 0);
}

bool
MagnetTcpConfig::Linux() const
{
    return model == "linux";
}

// --------------------------------------------------------------- profile ---
MagnetTcpProfile::MagnetTcpProfile(MagnetTcpConfig tcp)
    : m_tcp(std::move(tcp))
{
    Validate(m_tcp);
}

const MagnetTcpConfig&
MagnetTcpProfile::GetConfig() const
{
    return m_tcp;
}

void
MagnetTcpProfile::Validate(const MagnetTcpConfig& tcp)
{
    if (tcp.model != "linux" && tcp.model != "ns3")
    {
        throw std::invalid_argument("TCP model '" + tcp.model + "': linux or ns3");
    }
    TypeId tid;
    if (!TypeId::LookupByNameFailSafe(Ns3Name(tcp.cc), &tid) ||
        !tid.IsChildOf(TcpCongestionOps::GetTypeId()))
    {
        std::string known;
        for (const auto& name : CongestionControls())
        {
            known += (known.empty() ? "" : ", ") + name;
        }
        throw std::invalid_argument("unknown TCP variant '" + tcp.cc + "' (ns-3 " MAGNET_NS3_VERSION
                                    " has " + known + ")");
    }
    if (tcp.readSize == 0 || (tcp.mss && tcp.mss <= kTimestampOption))
    {
        throw std::invalid_argument("the read size and the MSS must be positive (MSS above 12)");
    }
    for (const auto& [name, value] : {std::pair<const char*, Time>{"readerWakeup", tcp.readerWakeup},
                                      {"ackLag", tcp.ackLag},
                                      {"replyLag", tcp.replyLag}})
    {
        if (value.IsStrictlyNegative() || (!tcp.Linux() && !value.IsZero()))
        {
            throw std::invalid_argument(std::string("--") + name + " " + std::to_string(value.GetNanoSeconds()) +
                                        "ns" +
                                        ": a time of 0 or more, for the linux model (ns-3's TcpSocketBase "
                                        "reads, and takes every segment, at once)");
        }
    }
    if (tcp.Linux() && tcp.delAckTimeout > kLinuxDelAckMax)
    {
        throw std::invalid_argument("--delAckTimeout " + MagnetFormatTime(tcp.delAckTimeout) +
                                    ": Linux delays an ACK 200 ms at most (a cap can only lower it)");
    }
    if (tcp.Linux() && tcp.delAckCount > 2)
    {
        throw std::invalid_argument("--delAckCount " + std::to_string(tcp.delAckCount) +
                                    ": Linux ACKs every second full-sized segment (2) or, with the "
                                    "route's quickack, every one (1); the ns3 TCP model takes any");
    }
}

void
MagnetTcpProfile::InstallStack(NodeContainer nodes)
{
    InternetStackHelper().Install(nodes);
    for (auto node = nodes.Begin(); node != nodes.End(); ++node)
    {
        (*node)->AggregateObject(CreateObject<MagnetLinuxTcpSocketFactory>());
    }
}

TypeId
MagnetTcpProfile::SocketFactory() const
{
    return m_tcp.Linux() ? MagnetLinuxTcpSocketFactory::GetTypeId() : TcpSocketFactory::GetTypeId();
}

std::string
MagnetTcpProfile::CongestionControl() const
{
    const std::string cc = Ns3Name(m_tcp.cc);
    if (m_tcp.Linux() && cc == "ns3::TcpCubic")
    {
        return "ns3::MagnetLinuxCubic";
    }
    // Linux's reno is Reno's window with NewReno's recovery (the socket's): both run as it.
    if (m_tcp.Linux() && (cc == "ns3::TcpNewReno" || cc == "ns3::TcpLinuxReno"))
    {
        return MagnetLinuxReno::GetTypeId().GetName();
    }
    return cc;
}

void
MagnetTcpProfile::ApplyDefaults() const
{
    const MagnetTcpConfig& tcp = m_tcp;
    const bool linux = tcp.Linux();
    const bool bbr = Ns3Name(tcp.cc) == "ns3::TcpBbr";
    const bool timeout = !tcp.delAckTimeout.IsStrictlyNegative();
    // The linux model's CUBIC, Reno and PRR are Linux's (ns-3's TcpCubic, TcpNewReno,
    // TcpLinuxReno and TcpPrrRecovery differ: MagnetLinuxCubic, MagnetLinuxReno,
    // MagnetLinuxPrrRecovery); other congestion controls are ns-3's.
    Config::SetDefault("ns3::TcpL4Protocol::SocketType", TypeIdValue(TypeId::LookupByName(CongestionControl())));
    SetDefaultOr("ns3::TcpL4Protocol::RecoveryType", linux, TypeIdValue(MagnetLinuxPrrRecovery::GetTypeId()));
    Config::SetDefault("ns3::TcpSocket::TcpNoDelay", BooleanValue(!tcp.nagle));
    Config::SetDefault("ns3::TcpSocketBase::Sack", BooleanValue(tcp.sack));
    Config::SetDefault("ns3::TcpSocketBase::Timestamp", BooleanValue(tcp.timestamps));
    Config::SetDefault("ns3::TcpSocketBase::WindowScaling", BooleanValue(tcp.windowScaling));
    // The ns3 model: ns-3's TcpSocketBase with the knobs given, its own defaults otherwise.
    SetDefaultOr("ns3::TcpSocket::DelAckCount", !linux && tcp.delAckCount > 0, UintegerValue(tcp.delAckCount));
    SetDefaultOr("ns3::TcpSocket::DelAckTimeout", !linux && timeout, TimeValue(tcp.delAckTimeout));
    SetDefaultOr("ns3::TcpSocket::SndBufSize", !linux && tcp.sndBuf > 0, UintegerValue(tcp.sndBuf));
    SetDefaultOr("ns3::TcpSocket::RcvBufSize", !linux && tcp.rcvBuf > 0, UintegerValue(tcp.rcvBuf));
    // The linux model: Linux 6.18's values (TCP_RTO_MIN, TCP_TIMEOUT_INIT, TCP_INIT_CWND;
    // BBR paces itself, CUBIC does not without the fq qdisc).
    SetDefaultOr("ns3::TcpSocketBase::MinRto", linux, TimeValue(MilliSeconds(200)));
    SetDefaultOr("ns3::TcpSocket::ConnTimeout", linux, TimeValue(Seconds(1)));
    // tcp_write_timeout in SYN_SENT: the SYN and tcp_syn_retries (6) + tcp_syn_linear_timeouts
    // (4) retransmissions (ns-3 counts every SYN sent); data gives up by time (Retries2).
    SetDefaultOr("ns3::TcpSocket::ConnCount", linux, UintegerValue(1 + 6 + 4));
    SetDefaultOr("ns3::TcpSocket::InitialCwnd", linux, UintegerValue(10));
    SetDefaultOr("ns3::TcpSocketState::EnablePacing", linux && bbr, BooleanValue(true));
    SetDefaultOr("ns3::MagnetLinuxTcpSocket::QuickAckAlways", tcp.delAckCount == 1, BooleanValue(true));
    SetDefaultOr("ns3::MagnetLinuxTcpSocket::DelAckMax", timeout,
                 TimeValue(std::min(tcp.delAckTimeout, kLinuxDelAckMax)));
    SetDefaultOr("ns3::MagnetLinuxTcpSocket::SoSndBuf", tcp.sndBuf > 0, UintegerValue(tcp.sndBuf));
    SetDefaultOr("ns3::MagnetLinuxTcpSocket::SoRcvBuf", tcp.rcvBuf > 0, UintegerValue(tcp.rcvBuf));
    SetDefaultOr("ns3::MagnetLinuxTcpSocket::ReaderWakeup", linux, TimeValue(tcp.readerWakeup));
    SetDefaultOr("ns3::MagnetLinuxTcpSocket::AckLag", linux, TimeValue(tcp.ackLag));
    SetDefaultOr("ns3::MagnetLinuxTcpSocket::ReplyLag", linux, TimeValue(tcp.replyLag));
}

std::vector<std::pair<std::string, std::string>>
MagnetTcpProfile::Settings() const
{
    std::vector<std::pair<std::string, std::string>> s{{"Model", m_tcp.model}};
    const std::pair<const char*, const char*> common[] = {
        {"ns3::TcpL4Protocol", "SocketType"},  {"ns3::TcpSocket", "InitialCwnd"},
        {"ns3::TcpSocket", "TcpNoDelay"},      {"ns3::TcpSocketBase", "Sack"},
        {"ns3::TcpSocketBase", "Timestamp"},   {"ns3::TcpSocketBase", "WindowScaling"},
        {"ns3::TcpL4Protocol", "RecoveryType"}, {"ns3::TcpSocketState", "EnablePacing"},
    };
    for (const auto& [type, name] : common)
    {
        s.emplace_back(name, Current(type, name));
    }
    if (!m_tcp.Linux())
    {
        for (const char* name : {"SndBufSize", "RcvBufSize", "DelAckCount", "DelAckTimeout"})
        {
            s.emplace_back(name, Current("ns3::TcpSocket", name));
        }
        s.emplace_back("MinRto", Current("ns3::TcpSocketBase", "MinRto"));
        return s;
    }
    const std::string linux = "ns3::MagnetLinuxTcpSocket";
    auto buffer = [&](const char* so, const char* def, const char* max) {
        std::string given = Current(linux, so);
        return given != "0" ? "SO " + given + " (doubled, fixed)"
                            : Current(linux, def) + " autotuned up to " + Current(linux, max);
    };
    s.insert(s.end(), {
        {"Rto", "srtt+rttvar, rttvar>=" + Current("ns3::MagnetLinuxRttEstimator", "RtoMin") +
                    " (RTT samples from send times)"},
        {"Nagle", m_tcp.nagle ? "Minshall (a short segment waits only for an earlier short one)" : "off"},
        {"DelAck", Current(linux, "QuickAckAlways") == "true"
                       ? "every segment at once (quickack)"
                       : "quick x" + Current(linux, "MaxQuickAcks") + " at start and after idle, ato from " +
                             Current(linux, "AtoMin") + " adapting, at most srtt and " +
                             Current(linux, "DelAckMax") + ", every 2nd full segment, at once when a "
                             "pushed segment is read"},
        {"RcvBuf", buffer("SoRcvBuf", "RmemDefault", "RmemMax")},
        {"SndBuf", buffer("SoSndBuf", "WmemDefault", "WmemMax")},
        {"SlowStartAfterIdle", Current(linux, "SlowStartAfterIdle")},
        {"GiveUp", "SYN x" + Current("ns3::TcpSocket", "ConnCount") + " (" + Current(linux, "SynLinearTimeouts") +
                       " linear), data after tcp_retries2=" + Current(linux, "Retries2") +
                       "'s time from the first retransmission, RTO doubling up to " + Current(linux, "RtoMax")},
        {"ReaderWakeup", MagnetFormatTime(m_tcp.readerWakeup)},
        {"AckLag", MagnetFormatTime(m_tcp.ackLag)},
        {"ReplyLag", MagnetFormatTime(m_tcp.replyLag)},
        {"TailLossProbe", Current(linux, "TailLossProbe")},
        {"Rack", Current(linux, "Rack") == "true"
                     ? "on (loss when a later-sent segment is delivered; reo_wnd min_rtt/4, 0 in recovery)"
                     : "off (RFC 6675: three duplicate ACKs or SACKed segments above)"},
    });
    return s;
}

} // namespace ns3
