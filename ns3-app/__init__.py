"""magnet.ns3app: the sources of the ns-3 application (model/, helper/, examples/,
test/), shipped with magnet and built on first use by magnet.replay.ns3."""
