# The BPF toolchain of magnet's BPF programs (capture/, and the sockops program of
# replay/linkem/): clang builds the programs against vmlinux.h, the running kernel's
# types (CO-RE: relocated at load time); bpftool makes vmlinux.h, links objects and
# generates the skeletons the libbpf loaders include. Included by their Makefiles,
# which set OUTPUT and NAME (the prefix of the messages) first.

CLANG       ?= clang
BPFTOOL     ?= $(firstword $(shell command -v bpftool 2>/dev/null) /usr/sbin/bpftool)
VMLINUX_BTF ?= /sys/kernel/btf/vmlinux
ARCH        := $(shell uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/' -e 's/ppc64le/powerpc/' \
                                    -e 's/riscv64/riscv/' -e 's/s390x/s390/' -e 's/loongarch64/loongarch/')
BPF_CFLAGS  := -g -O2 -target bpf -mcpu=v3 -D__TARGET_ARCH_$(ARCH) -Wall -Wno-unused-function
LIBBPF_CFLAGS := $(shell pkg-config --cflags libbpf 2>/dev/null)
LIBBPF_LIBS := $(or $(shell pkg-config --libs libbpf 2>/dev/null),-lbpf) -lelf -lz

.PHONY: check-bpf-tools

check-bpf-tools:
	@missing=""; for t in $(CLANG) $(BPFTOOL) pkg-config; do command -v $$t >/dev/null 2>&1 || missing="$$missing $$t"; done; \
	[ -f /usr/include/bpf/libbpf.h ] || missing="$$missing libbpf-dev"; \
	if [ -n "$$missing" ]; then \
	  echo "$(NAME): missing:$$missing (Debian: apt-get install clang llvm libbpf-dev bpftool libelf-dev zlib1g-dev pkg-config, or run 'make capture' at the top level as root)" >&2; \
	  exit 1; fi

$(OUTPUT):
	@mkdir -p $@

$(OUTPUT)/vmlinux.h: | $(OUTPUT) check-bpf-tools
	@[ -r $(VMLINUX_BTF) ] || { echo "$(NAME): $(VMLINUX_BTF) is missing: this kernel has no BTF (it needs CONFIG_DEBUG_INFO_BTF=y); set VMLINUX_BTF=FILE to a BTF file for it" >&2; exit 1; }
	$(BPFTOOL) btf dump file $(VMLINUX_BTF) format c > $@.tmp && mv $@.tmp $@
