/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The test program of magnet's own build (replay/ns3.py): ns-3's TestRunner
 * over the suites linked with it.  In an ns-3 source tree the suites join
 * ns-3's test-runner instead, and this file is not built.
 */
#include "ns3/test.h"

int
main(int argc, char* argv[])
{
    return ns3::TestRunner::Run(argc, argv);
}
