/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef MAGNET_UNITS_H
#define MAGNET_UNITS_H

/*
 * The few values magnet-chain's flags carry, parsed strictly (std::invalid_argument
 * naming `what` and the text) and printed exactly.  The units' dialect is the
 * Python side's (magnetlib.knobs); it hands ns-3 plain numbers and ns-3's own
 * spellings ("20000000bps", "30000000ns").
 */
#include "ns3/nstime.h"

#include <string>
#include <vector>

namespace ns3
{

/** `text` cut at each `sep` (empty parts kept). */
std::vector<std::string> MagnetSplit(const std::string& text, char sep);

double MagnetProbability(const std::string& text, const std::string& what); //!< a fraction in [0, 1]
uint32_t MagnetCount(const std::string& text, const std::string& what);     //!< a whole number
uint64_t MagnetRate(const std::string& text, const std::string& what);      //!< bit/s, 0 or none: no limit
Time MagnetTime(const std::string& text, const std::string& what);          //!< ns-3 Time syntax

std::string MagnetFormatRate(uint64_t bps); //!< 20000000 -> "20Mbps" (exact)
std::string MagnetFormatTime(Time t);       //!< 30 ms -> "30ms" (exact)

} // namespace ns3

#endif /* MAGNET_UNITS_H */
