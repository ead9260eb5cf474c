# magnet: `make demo` and `make test` set up everything they need, then run.
#
#   make demo     capture, measure and replay (the headline study, a few minutes)
#   make test     the whole test suite (root, BPF and ns-3 parts skip with a reason where missing)
#   make bench    the benchmarks (minutes; figures on stdout)
#   make fuzz     the fuzz tests of traces and pcaps at 100x their examples, then the signal
#                 fuzzer (replays and studies under signals at random moments; ~20 minutes)
#   make setup    only the set-up: Debian packages and the .venv virtualenv
#   make setup-apps  the Debian packages of the suite of real applications (experiments/apps/)

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
OUT    ?= out

# Debian packages, by what needs them.
APT_BUILD := gcc make
APT_PCAP  := tcpdump ethtool iproute2
APT_NS3   := g++
APT_BENCH := libpcap-dev

.PHONY: all setup system-deps demo test bench fuzz header clean help ns3

all: help

help:
	@sed -n '1,/^$$/p' Makefile | sed 's/^# \{0,1\}//'

# Install missing Debian packages (as root); elsewhere say what is missing, and
# fail under CI, where a missing prerequisite must not turn into skipped tests.
define apt_ensure
	@missing=$$(for p in $(1); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "setup: installing Debian packages:" $$missing; \
	    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing || exit 1; \
	  else \
	    echo "setup: missing Debian packages (not root, not installing):" $$missing >&2; \
	    [ -z "$$CI" ] || exit 1; \
	  fi; \
	fi
endef

system-deps:
	$(call apt_ensure,$(APT_BUILD))
	$(call apt_ensure,$(APT_PCAP))
	$(call apt_ensure,$(APT_NS3))
	$(call apt_ensure,$(APT_BENCH))

# Reinstalled when the packaging or the set of packages changes.
$(STAMP): setup.cfg pyproject.toml $(wildcard */__init__.py)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip setuptools wheel
	$(PY) -m pip install -q -e '.[test,parquet,library]'
	touch $@

setup: system-deps $(STAMP)

# ns-3 for the C++ replay (headers and libraries; --no-deps skips the 76 s cppyy
# build of the Python bindings), then ns3-app/ built once into a cache keyed by
# a hash of its sources (python -m magnet.replay.ns3 build).
NS3_STAMP := $(VENV)/.ns3-installed
$(NS3_STAMP): $(STAMP)
	$(PY) -m pip install -q --no-deps 'ns3==3.44.*'
	touch $@

ns3: setup $(NS3_STAMP)
	$(PY) -m magnet.replay.ns3 build

# ns-3's Python bindings (cppyy, built by pip: about 76 s and 520 MB once), for
# the test that drives ns3-app from a user's Python program (docs/ns3-replay.md).
NS3_PY_STAMP := $(VENV)/.ns3-bindings-installed
$(NS3_PY_STAMP): $(NS3_STAMP)
	$(PY) -m pip install -q 'ns3==3.44.*'
	touch $@

# The headline (experiments/demo.py): capture an FTP-like transfer, extract its
# demand, replay it through four stacks in ns-3 and in real TCP, print Table II.
demo: setup ns3
	$(PY) -m magnet.experiments.demo --out $(OUT)/demo

# Two phases, one command: the tests marked `cpu` (parsing, ns-3, hypothesis: nothing real-time)
# on every core at once (pytest-xdist), then the rest one at a time, as their timing checks,
# namespaces and captures need; it fails when either phase does.  `pytest` alone runs them all
# one at a time.  --durations: the slowest tests (DURATIONS=0: every one), so that the suite's
# time stays in view: 725 tests in 11.7 min (2.2 + 9.6; CI on a clean clone, quiet, round 14),
# 11.2 in round 13, 13.3 in round 12 and 14.7 in one phase (716 tests, round 11); the aim is about 10.
DURATIONS ?= 15
test: setup ns3 setup-apps $(NS3_PY_STAMP)
	@status=0; \
	echo "$(PY) -m pytest -q --durations=$(DURATIONS) -m cpu -n auto --dist loadfile"; \
	$(PY) -m pytest -q --durations=$(DURATIONS) -m cpu -n auto --dist loadfile || status=$$?; \
	echo "$(PY) -m pytest -q --durations=$(DURATIONS) -m 'not cpu'"; \
	$(PY) -m pytest -q --durations=$(DURATIONS) -m 'not cpu' || status=$$?; \
	exit $$status

# The suite of real applications (experiments/apps/, docs/apps.md): nginx, redis, memcached,
# openssh-server, mosquitto, nghttp2-client... installed when missing (as root; under CI a
# package that cannot be installed fails the set-up). The tests run every recipe.
.PHONY: setup-apps
setup-apps: setup
	$(PY) -m magnet.experiments.apps install

# The fuzz tests of `make test` at 100x the examples (about 10 minutes), then
# tcpdump's regression captures; MAGNET_FUZZ_EXAMPLES sets the count.  Then the
# signal fuzzer (tests/interrupts.py): SIGNAL_TRIALS runs of each command that
# honours signals, signalled at a random moment or fork, each checked for exit
# 130 and nothing left behind (root and ns-3 for most; about 10 minutes).
FUZZ_EXAMPLES ?= 30000
SIGNAL_TRIALS ?= 10
fuzz: setup ns3
	MAGNET_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(PY) -m pytest -q -p no:cacheprovider \
		tests/test_trace.py::test_corruption_never_raises_anything_but_trace_error \
		tests/test_pcap_reader.py::test_fuzzed_pcaps_never_crash \
		tests/test_pcap_reader.py::test_tcpdump_corpus tests/test_pcap_reader.py::test_commands_on_hostile_captures
	$(PY) -m tests.interrupts --trials $(SIGNAL_TRIALS)

bench: setup ns3
	$(PY) -m magnet.experiments.bench_parse
	$(PY) -m magnet.experiments.bench_pcap
	$(PY) -m magnet.experiments.bench_ns3
	$(PY) -m magnet.experiments.bench_ns3_app
	$(PY) -m magnet.experiments.bench_library
	$(PY) -m magnet.experiments.bench_preload
	$(PY) -m magnet.experiments.bench_analysis
	@if [ "$$(id -u)" = 0 ]; then $(PY) -m magnet.experiments.bench_replay; \
	else $(PY) -m magnet.experiments.bench_replay --loopback; fi
	@if [ "$$(id -u)" = 0 ]; then $(PY) -m magnet.experiments.bench_apps_replay; \
	else $(PY) -m magnet.experiments.bench_apps_replay --loopback; fi
	@if [ "$$(id -u)" = 0 ]; then $(PY) -m magnet.experiments.bench_linkem; \
	else echo "bench: bench_linkem needs root (TUN devices, namespaces): skipped" >&2; fi
	@if [ "$$(id -u)" = 0 ]; then $(PY) -m magnet.experiments.bench_capture_cost; \
	else echo "bench: bench_capture_cost needs root (BPF, namespaces): skipped" >&2; fi

# Regenerate the C header from the format description.
header: $(STAMP)
	$(PY) -m magnetlib.codegen capture/magnet_format.h

clean:
	rm -rf $(VENV) $(OUT) .pytest_cache .hypothesis *.egg-info

# capture/: the kernel capture (BPF, libbpf CO-RE) and magnet-read, built into
# the per-user cache (python -m magnet.capture build); the capture without root
# (libmagnet-preload.so) is built on first use. The tools for their tests and
# benchmarks come with it (strace: bench_preload compares with it).
APT_CAPTURE := clang llvm libbpf-dev bpftool libelf-dev zlib1g-dev pkg-config \
               iperf3 tcpdump ethtool iproute2 vsftpd curl strace

.PHONY: capture capture-deps bench-capture
capture-deps:
	$(call apt_ensure,$(APT_CAPTURE))

capture: setup capture-deps
	@if command -v clang >/dev/null 2>&1 && [ -e /usr/include/bpf/libbpf.h ]; then \
	  $(PY) -m magnet.capture build; \
	else \
	  echo "capture: clang or libbpf-dev missing: magnet-read not built (its tests skip)" >&2; \
	  [ -z "$$CI" ]; \
	fi

test demo bench fuzz: capture

# The paper's Table I on this machine (minutes; --quick: under two).
bench-capture: setup capture
	$(PY) -m magnet.experiments.bench_capture

# The link emulator of `magnet replay tcp` against its targets (root, iperf3; 3 minutes).
.PHONY: bench-linkem
bench-linkem: setup
	$(PY) -m magnet.experiments.bench_linkem --out experiments/results/linkem

# Timing fidelity of `magnet replay tcp` (root: namespaces and the capture; 2 minutes).
.PHONY: bench-replay
bench-replay: setup capture
	$(PY) -m magnet.experiments.bench_replay

# magnet as a user installs it: a wheel from a copy of the checkout, a fresh venv, every command from /tmp.
.PHONY: install-check
install-check: setup capture
	$(PY) -m tests.install_check
