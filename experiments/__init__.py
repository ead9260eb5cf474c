"""The studies of the MAGNeT papers, reproduced (python -m experiments.NAME), and the benchmarks."""
