# tileflight: the two commands a newcomer needs are `make serve` and `make test`.
SHELL := /bin/bash
GO ?= go
PYTHON ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
DATA ?= ./data
LISTEN ?= 127.0.0.1:8815
FUZZTIME ?= 10s
BENCHTIME ?= 1x
# nodynamic: the WebP encoder (github.com/gen2brain/webp) runs libwebp
# compiled to WebAssembly inside the binary, never a system libwebp.so
# through dlopen, so that flightd stays one static binary that behaves the
# same everywhere.
export GOFLAGS ?= -mod=mod -tags=nodynamic

.PHONY: all setup pyclient jdbc sparkjar sparkjar-install build test test-go race fmtvet gotest pytest vet serve fuzz bench bench-array bench-b2nd bench-cond bench-ingest bench-kernels bench-s3 bench-spark bench-sql bench-sql-groupby diff-cond fixtures docs clean soak soak-compact ingest-gib

all: build

# setup: Go modules and the pinned Python environment (idempotent).
setup: $(VENV)/.stamp pyclient
	$(GO) mod download

# pyclient: the tileflight Python package (python/) installed editable into
# the venv; skipped when the venv already imports it from this checkout.
pyclient: $(VENV)/.stamp
	@$(VPY) -c "import sys, tileflight; sys.exit(not tileflight.__file__.startswith('$(abspath python/src)/'))" 2>/dev/null \
	  || $(VENV)/bin/pip install --quiet --no-deps --no-build-isolation -e ./python

$(VENV)/.stamp: python_tests/requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip >/dev/null 2>&1 || true
	$(VENV)/bin/pip install --quiet -r python_tests/requirements.txt
	touch $@

# The version stamp: `flightd version` prints it (see cmd/flightd/ops.go).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT)

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/flightd ./cmd/flightd

# The checks every change passes before its tests: gofmt and go vet
# (fmtvet), then staticcheck (a pinned Go tool in tools/go.mod, so the
# project's go.mod does not carry it; staticcheck.conf says which checks
# are off and why).
fmtvet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.venv/*')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt -w needed on:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...

vet: fmtvet
	$(GO) tool -modfile=tools/go.mod staticcheck ./...

# The packages whose goroutines share memory: their tests also run under
# the race detector in every `make test`.
RACE_PKGS ?= ./transport/... ./internal/idletrim/... ./internal/bufpool/... ./calls/... ./access/... ./mux/... ./flightsvc/... ./reader/... ./storage/... ./lifecycle/...

race:
	$(GO) test -race -short -count=1 $(RACE_PKGS)

# test-go: the Go-only loop, about a minute on two cores: gofmt, go vet,
# then every Go test in -short mode (the few that read hundreds of MiB
# run in make test; fixture-driven conformance tests run when the fixtures
# exist, as after one `make test`).
test-go: fmtvet
	TILEFLIGHT_FIXTURES=$(abspath $(FIXTURES)) $(GO) test -short -count=1 ./...

gotest:
	$(GO) test -count=1 ./...

# Fixtures written by the tiledb package (the reference), shared by Go and
# Python tests. Regenerated when the generator changes.
FIXTURES := python_tests/.fixtures
$(FIXTURES)/.stamp: $(VENV)/.stamp $(wildcard python_tests/gen_*.py)
	rm -rf $(FIXTURES) && mkdir -p $(FIXTURES)
	@set -e; for g in python_tests/gen_*.py; do \
	  n=$$(basename $$g .py); n=$${n#gen_}; \
	  echo "fixtures: $$g -> $(FIXTURES)/$$n"; \
	  $(VPY) $$g $(FIXTURES)/$$n; \
	done
	touch $@

fixtures: $(FIXTURES)/.stamp

# docs/conformance.md is generated from the fixture matrix.
docs: fixtures
	$(VPY) python_tests/conformance_doc.py $(FIXTURES)/fixtures docs/conformance.md

# pytest drives the daemon that `build` just made (bin/flightd).
PYENV = TILEFLIGHT_FIXTURES=$(abspath $(FIXTURES)) TILEFLIGHT_FLIGHTD=$(abspath bin/flightd)

pytest: setup build fixtures jdbc sparkjar
	$(PYENV) $(VPY) -m pytest -q python_tests

test: setup vet build fixtures jdbc sparkjar
	TILEFLIGHT_FIXTURES=$(abspath $(FIXTURES)) $(GO) test -count=1 ./...
	$(MAKE) race
	$(PYENV) $(VPY) -m pytest -q python_tests

serve: build
	./bin/flightd -data $(DATA) -listen $(LISTEN) -demo

# Every fuzz target in the module, FUZZTIME each; runs them all and lists
# the ones that failed at the end.
fuzz:
	@failed=""; for pkg in $$($(GO) list ./...); do \
	  for t in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$t"; \
	    $(GO) test -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) $$pkg || failed="$$failed $$pkg.$$t"; \
	  done; \
	done; \
	if [ -n "$$failed" ]; then echo "fuzz targets that failed:$$failed"; exit 1; fi

# Issue 14's table (benchmarks/bench.py): every case against TileDB
# in-process, a Python Flight server over tiledb and an in-memory Go
# Flight server, interleaved rounds, medians of per-round ratios; rewrites
# benchmarks/RESULTS.md and results.png. BENCHARGS="--baseline OLD_FLIGHTD --baseline-label NAME"
# adds an older daemon to the same rounds.
bench: setup build
	$(GO) build -o bin/memflight ./benchmarks/memflight
	$(VPY) benchmarks/bench.py --flightd bin/flightd --memflight bin/memflight --out benchmarks/RESULTS.md $(BENCHARGS)

# Go benchmarks of the hot kernels (unfilter per codec, merge, sort, Arrow
# assembly, a DoGet batch handed to gRPC), allocations reported.
bench-kernels:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./filters/... ./arrowconv/ ./internal/radix/ ./reader/sparse/ ./writer/ ./transport/

bench-flight: setup build
	$(VPY) benchmarks/flight_read.py --flightd bin/flightd --out benchmarks/RESULTS.md

# .b2nd reads vs python-blosc2 in-process; appends a section to RESULTS.md.
bench-b2nd: setup build
	$(VPY) benchmarks/b2nd_read.py --flightd bin/flightd --rounds 24 --append benchmarks/RESULTS.md $(if $(B2ND_BASELINE),--baseline $(B2ND_BASELINE) --baseline-label "$(B2ND_BASELINE_LABEL)")

# S3 and cluster reads against a local moto server (appends to RESULTS.md).
# Issue 27: client.array(name)[box] into NumPy against TileDB-Py in-process
# (a 1 % box and the whole 256 MiB array; ARRAYARGS="--rows 1024 --cols 1024" for a quick run).
bench-array: setup build
	$(VPY) benchmarks/array_read.py --flightd bin/flightd $(ARRAYARGS)

bench-s3: setup build
	$(VPY) benchmarks/s3_read.py --flightd bin/flightd --out benchmarks/RESULTS.md

# The reliability campaigns at full size (kill -9, corruption, load, hostile
# clients; python_tests/soak/): about 8 minutes. Their figures are in
# docs/reliability.md; `make test` runs short versions (test_soak.py).
# SOAK_ARGS="--only kill9 --seed 7" narrows a run.
SOAK_ARGS ?=
soak: setup build
	cd python_tests && TILEFLIGHT_FLIGHTD=$(abspath bin/flightd) ../$(VPY) -m soak.run --out $(abspath soak-results.json) $(SOAK_ARGS)

# kill -9 of a compacting daemon at random moments, at full size (300
# trials, about 15 minutes; `make test` runs 30 in test_compaction.py).
# COMPACT_KILL_TRIALS and COMPACT_KILL_SEED change it.
COMPACT_KILL_TRIALS ?= 300
soak-compact: setup build
	COMPACT_KILL_TRIALS=$(COMPACT_KILL_TRIALS) $(PYENV) $(VPY) -m pytest -q -s python_tests/test_compaction.py -k kill9

# Spark count()/sum() through tileflight.spark vs Spark over the same data
# in Parquet (appends to benchmarks/RESULTS.md; minutes, not in `make test`).
bench-spark: setup build sparkjar
	$(VPY) benchmarks/spark_read.py --flightd bin/flightd --out benchmarks/RESULTS.md

# More random filters and aggregates against TileDB than the CI run
# (COND_ARRAYS arrays, a random seed unless COND_SEED is given).
COND_ARRAYS ?= 80
diff-cond: setup build
	TILEFLIGHT_COND_SEED=$${COND_SEED:-$$RANDOM} TILEFLIGHT_COND_ARRAYS=$(COND_ARRAYS) $(PYENV) $(VPY) -m pytest -q python_tests/test_diff_cond.py

# A real multi-GiB Python client write (INGEST_GIB GiB of 1.1 KB-string
# rows against a default daemon: staged DoPuts under -max-put-bytes, one
# commit), read back by TileDB; needs about 3x INGEST_GIB of free disk.
INGEST_GIB ?= 2
ingest-gib: setup build
	TILEFLIGHT_INGEST_GIB=$(INGEST_GIB) $(PYENV) $(VPY) -m pytest -q -s python_tests/test_ingest.py -k multi_gib

# Aggregates and filters against in-process TileDB (appends to RESULTS.md).
bench-cond: setup build
	$(VPY) benchmarks/cond_read.py --flightd bin/flightd --out benchmarks/RESULTS.md

# Streaming ingest (benchmarks/ingest.py): INGEST_PUTS 10,000-cell sparse
# DoPuts vs the tiledb package writing the same batches in-process, 16
# writers vs 1, then a full scan and a 1 % slab over the result before and
# after compaction; appended to benchmarks/RESULTS.md. INGEST_PUTS=100 is
# a quick run (INGESTARGS=--no-out keeps RESULTS.md as it is).
INGEST_PUTS ?= 1000
bench-ingest: setup build
	$(VPY) benchmarks/ingest.py --flightd bin/flightd --puts $(INGEST_PUTS) --out benchmarks/RESULTS.md $(INGESTARGS)

clean:
	rm -rf bin $(FIXTURES)

# The Flight SQL JDBC driver's check program (python_tests/test_flightsql.py
# runs it): Maven fetches the driver from Maven Central on a fresh machine.
JDBC_JAR := python_tests/jdbc/target/jdbccheck.jar
$(JDBC_JAR): python_tests/jdbc/pom.xml $(wildcard python_tests/jdbc/src/main/java/*.java)
	cd python_tests/jdbc && mvn -q -B package

jdbc: $(JDBC_JAR)

# Flight SQL benchmarks (ADBC vs DoGet; a selective WHERE vs DuckDB over a
# full DoGet), appended to benchmarks/RESULTS.md.
bench-sql: setup build
	$(VPY) benchmarks/sql_bench.py --flightd bin/flightd --out benchmarks/RESULTS.md

# GROUP BY (16 keys; two keys) and a 10 M x 10 k join over 10 M rows through
# ADBC vs DuckDB over the same data read by TileDB-Py into Arrow (a few
# minutes; appends to benchmarks/RESULTS.md). SQLGROUPBYARGS="--baseline OLD_FLIGHTD"
# measures an older build alongside.
SQLGROUPBYARGS ?=
bench-sql-groupby: setup build
	$(VPY) benchmarks/sql_groupby.py --flightd bin/flightd --out benchmarks/RESULTS.md $(SQLGROUPBYARGS)

# The Spark connector in Java (spark-connector/, format "tileflight-jvm";
# Maven coordinates io.tileflight:tileflight-spark_2.13): compiled against
# Spark from Maven Central (provided scope; the first build fetches it, later
# ones work offline), Arrow Flight's Java client shaded in, the version
# stamped from VERSION (a leading v dropped). `make sparkjar-install` puts it
# in the local Maven repository (~/.m2) for projects that depend on it.
SPARK_JAR := spark-connector/target/tileflight-spark.jar
MVN_VERSION = $(patsubst v%,%,$(VERSION))
# A stamp per version, so that a jar built for another VERSION is rebuilt.
SPARK_REV = spark-connector/target/.revision-$(MVN_VERSION)
$(SPARK_REV):
	mkdir -p $(@D) && rm -f $(@D)/.revision-* && touch $@

$(SPARK_JAR): $(SPARK_REV) spark-connector/pom.xml $(shell find spark-connector/src -type f 2>/dev/null)
	cd spark-connector && mvn -q -B package -Drevision=$(MVN_VERSION)

sparkjar-install: $(SPARK_JAR)
	cd spark-connector && mvn -q -B install -Drevision=$(MVN_VERSION)

sparkjar: $(SPARK_JAR)

# ---- Releases ---------------------------------------------------------------
# `make release VERSION=v0.1.0` fills dist/ with what a release page carries:
#   flightd_0.1.0_<os>_<arch>.tar.gz (.zip for Windows): a static flightd
#     (CGO_ENABLED=0, -trimpath, the version and commit stamped: `flightd
#     version`) with LICENSE, README.md, CHANGELOG.md and deploy/;
#   tileflight-0.1.0-py3-none-any.whl: the Python client, the Spark jar inside
#     (tileflight.spark.jvm_jar());
#   tileflight_server-0.1.0-py3-none-<platform>.whl: flightd for one platform,
#     what `pip install "tileflight[server]"` adds for tileflight.local();
#   tileflight-spark_2.13-0.1.0.jar: the Spark connector;
#   SHA256SUMS (`sha256sum -c SHA256SUMS` checks them).
# The Python and Maven versions in python/pyproject.toml,
# python/src/tileflight/__init__.py and spark-connector/pom.xml must already
# be VERSION's (release-check says which is not). PLATFORMS narrows the
# binaries (the test builds linux/amd64 alone); DIST moves the output.
PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64
DIST ?= dist
RELVER = $(patsubst v%,%,$(VERSION))
RELEASE_LDFLAGS = -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT)
SPARK_SCALA := 2.13

.PHONY: release release-check release-binaries release-python release-jar image image-save

release-check:
	@echo "$(VERSION)" | grep -Eq '^v[0-9]+\.[0-9]+\.[0-9]+$$' \
	  || { echo "release: VERSION=$(VERSION): want vMAJOR.MINOR.PATCH (make release VERSION=v0.1.0)"; exit 1; }
	@grep -q '^version = "$(RELVER)"$$' python/pyproject.toml \
	  || { echo "release: python/pyproject.toml's version is not $(RELVER)"; exit 1; }
	@grep -q '^__version__ = "$(RELVER)"$$' python/src/tileflight/__init__.py \
	  || { echo "release: python/src/tileflight/__init__.py's __version__ is not $(RELVER)"; exit 1; }
	@grep -q '^server = \["tileflight-server==$(RELVER)"\]$$' python/pyproject.toml \
	  || { echo "release: python/pyproject.toml's server extra does not pin tileflight-server==$(RELVER)"; exit 1; }
	@grep -q '<revision>$(RELVER)</revision>' spark-connector/pom.xml \
	  || { echo "release: spark-connector/pom.xml's revision (its default version) is not $(RELVER)"; exit 1; }

release: release-check
	rm -rf $(DIST) && mkdir -p $(DIST)
	$(MAKE) --no-print-directory release-binaries release-python release-jar
	rm -rf $(DIST)/.build
	cd $(DIST) && sha256sum $$(find . -maxdepth 1 -type f ! -name SHA256SUMS -printf '%f\n' | sort) > SHA256SUMS
	@echo "release $(VERSION):" && ls -l $(DIST)

# One static flightd per platform, each archived with the docs an operator
# needs, and each wrapped in a tileflight-server wheel.
release-binaries: release-check
	@set -e; mkdir -p $(DIST)/.build; for p in $(PLATFORMS); do \
	  os=$${p%/*}; arch=$${p#*/}; exe=flightd; [ $$os = windows ] && exe=flightd.exe; \
	  name=flightd_$(RELVER)_$${os}_$${arch}; dir=$(DIST)/.build/$$name; \
	  echo "release: $$name"; mkdir -p $$dir; \
	  CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags "$(RELEASE_LDFLAGS)" -o $$dir/$$exe ./cmd/flightd; \
	  cp LICENSE README.md CHANGELOG.md $$dir/ && cp -r deploy $$dir/; \
	  if [ $$os = windows ]; then (cd $(DIST)/.build && zip -qr ../$$name.zip $$name); \
	  else tar -C $(DIST)/.build --owner=0 --group=0 -czf $(DIST)/$$name.tar.gz $$name; fi; \
	  $(PYTHON) scripts/server_wheel.py --binary $$dir/$$exe --goos $$os --goarch $$arch --version $(RELVER) --out $(DIST) >/dev/null; \
	done

# The client wheel, built from a copy of python/ with the Spark jar put in
# tileflight/jars/ (package data), so that jvm_jar() finds it after pip install.
release-python: release-check sparkjar
	rm -rf $(DIST)/.build/python && mkdir -p $(DIST)/.build && cp -r python $(DIST)/.build/python
	rm -rf $(DIST)/.build/python/build $(DIST)/.build/python/src/*.egg-info
	mkdir -p $(DIST)/.build/python/src/tileflight/jars && cp $(SPARK_JAR) $(DIST)/.build/python/src/tileflight/jars/tileflight-spark.jar
	cp LICENSE $(DIST)/.build/python/LICENSE
	$(VPY) -m pip wheel --quiet --no-deps --no-build-isolation -w $(DIST) $(DIST)/.build/python

release-jar: release-check sparkjar
	cp $(SPARK_JAR) $(DIST)/tileflight-spark_$(SPARK_SCALA)-$(RELVER).jar

# The container image (Containerfile): tileflight:$(IMAGE_TAG) for
# linux/$(IMAGE_ARCH), built by the first of podman, buildah or docker
# found. `make image-save` writes it as an OCI archive to dist/.
IMAGE ?= tileflight
IMAGE_TAG ?= $(patsubst v%,%,$(VERSION))
IMAGE_ARCH ?= $(shell $(GO) env GOARCH)
IMAGE_CTX := bin/image-context
CONTAINER_BUILDER ?= $(shell for b in podman buildah docker; do command -v $$b >/dev/null 2>&1 && { echo $$b; break; }; done)
CA_BUNDLE ?= /etc/ssl/certs/ca-certificates.crt

image:
	@[ -n "$(CONTAINER_BUILDER)" ] || { echo "image: no podman, buildah or docker on this machine (apt-get install podman)"; exit 1; }
	@[ -f $(CA_BUNDLE) ] || { echo "image: no CA bundle at $(CA_BUNDLE) (apt-get install ca-certificates, or CA_BUNDLE=FILE)"; exit 1; }
	rm -rf $(IMAGE_CTX) && mkdir -p $(IMAGE_CTX)/data
	CGO_ENABLED=0 GOOS=linux GOARCH=$(IMAGE_ARCH) $(GO) build -trimpath -ldflags "$(RELEASE_LDFLAGS)" -o $(IMAGE_CTX)/flightd ./cmd/flightd
	cp $(CA_BUNDLE) $(IMAGE_CTX)/ca-certificates.crt
	printf 'root:x:0:0:root:/:/sbin/nologin\nflightd:x:65532:65532:flightd:/data:/sbin/nologin\n' > $(IMAGE_CTX)/passwd
	printf 'root:x:0:\nflightd:x:65532:\n' > $(IMAGE_CTX)/group
	$(if $(filter buildah,$(CONTAINER_BUILDER)),buildah bud,$(CONTAINER_BUILDER) build) --platform linux/$(IMAGE_ARCH) \
	  --build-arg VERSION=$(VERSION) -f Containerfile -t $(IMAGE):$(IMAGE_TAG) $(IMAGE_CTX)
	@echo "image: $(IMAGE):$(IMAGE_TAG) (built with $(CONTAINER_BUILDER))"

image-save: image
	mkdir -p $(DIST)
	@out=$(DIST)/tileflight_$(IMAGE_TAG)_linux_$(IMAGE_ARCH).oci.tar; set -x; case $(CONTAINER_BUILDER) in \
	  podman) podman save --format oci-archive -o $$out $(IMAGE):$(IMAGE_TAG);; \
	  buildah) buildah push $(IMAGE):$(IMAGE_TAG) oci-archive:$$out;; \
	  *) $(CONTAINER_BUILDER) save -o $$out $(IMAGE):$(IMAGE_TAG);; \
	esac
