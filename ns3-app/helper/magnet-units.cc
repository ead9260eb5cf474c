/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "magnet-units.h"

#include "ns3/data-rate.h"

#include <cmath>
#include <stdexcept>

namespace ns3
{

namespace
{

[[noreturn]] void
Bad(const std::string& what, const std::string& text, const std::string& expected)
{
    throw std::invalid_argument(what + " '" + text + "': " + expected);
}

/** The largest unit that shows `value` exactly. */
std::string
WithUnit(uint64_t value, std::initializer_list<std::pair<uint64_t, const char*>> units)
{
    for (const auto& [scale, name] : units)
    {
        if (value % scale == 0)
        {
            return std::to_string(value / scale) + name;
        }
    }
    return std::to_string(value);
}

} // namespace

std::vector<std::string>
MagnetSplit(const std::string& text, char sep)
{
    std::vector<std::string> parts;
    size_t start = 0;
    for (size_t end; (end = text.find(sep, start)) != std::string::npos; start = end + 1)
    {
        parts.push_back(text.substr(start, end - start));
    }
    parts.push_back(text.substr(start));
    return parts;
}

double
MagnetProbability(const std::string& text, const std::string& what)
{
    size_t used = 0;
    double value = -1;
    try
    {
        value = std::stod(text, &used);
    }
    catch (const std::exception&)
    {
    }
    if (used != text.size() || text.empty() || !(value >= 0 && value <= 1))
    {
        Bad(what, text, "a probability, a fraction from 0 to 1");
    }
    return value;
}

uint32_t
MagnetCount(const std::string& text, const std::string& what)
{
    if (text.empty() || text.size() > 9 || text.find_first_not_of("0123456789") != std::string::npos)
    {
        Bad(what, text, "a whole number");
    }
    return static_cast<uint32_t>(std::stoul(text));
}

uint64_t
MagnetRate(const std::string& text, const std::string& what)
{
    if (text == "0" || text == "none")
    {
        return 0;
    }
    DataRateValue rate;
    if (!rate.DeserializeFromString(text, MakeDataRateChecker()) || rate.Get().GetBitRate() == 0)
    {
        Bad(what, text, "a rate such as 20000000bps or 20Mbps, or none");
    }
    return rate.Get().GetBitRate();
}

Time
MagnetTime(const std::string& text, const std::string& what)
{
    TimeValue time;
    if (!time.DeserializeFromString(text, MakeTimeChecker()) || time.Get().IsStrictlyNegative())
    {
        Bad(what, text, "a time such as 30ms or 30000000ns");
    }
    return time.Get();
}

std::string
MagnetFormatRate(uint64_t bps)
{
    return WithUnit(bps, {{1000000000, "Gbps"}, {1000000, "Mbps"}, {1000, "kbps"}, {1, "bps"}});
}

std::string
MagnetFormatTime(Time t)
{
    auto ns = static_cast<uint64_t>(t.GetNanoSeconds());
    return ns == 0 ? "0s" : WithUnit(ns, {{1000000000, "s"}, {1000000, "ms"}, {1000, "us"}, {1, "ns"}});
}

} // namespace ns3
