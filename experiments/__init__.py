"""The studies of the MAGNeT papers, reproduced (python -m magnet.experiments.NAME), and the benchmarks."""
