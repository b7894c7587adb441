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
export GOFLAGS ?= -mod=mod

.PHONY: all setup pyclient jdbc sparkjar build test test-go race gotest pytest vet serve fuzz bench bench-array bench-b2nd bench-cond bench-kernels bench-s3 bench-spark bench-sql diff-cond fixtures docs clean soak

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

# The checks every change passes before its tests: gofmt, go vet and
# staticcheck (a pinned Go tool in tools/go.mod, so the project's go.mod
# does not carry it). staticcheck.conf says which checks are off and why.
vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.venv/*')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt -w needed on:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) tool -modfile=tools/go.mod staticcheck ./...

# The packages whose goroutines share memory: their tests also run under
# the race detector in every `make test`.
RACE_PKGS ?= ./transport/... ./internal/idletrim/... ./internal/bufpool/... ./calls/... ./access/... ./mux/... ./flightsvc/... ./reader/... ./storage/... ./lifecycle/...

race:
	$(GO) test -race -short -count=1 $(RACE_PKGS)

# test-go: the Go-only loop, about a minute on two cores: the checks, then
# every Go test (fixture-driven conformance tests run when the fixtures
# exist, as after one `make test`).
test-go: vet
	TILEFLIGHT_FIXTURES=$(abspath $(FIXTURES)) $(GO) test -count=1 ./...

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

# Spark count()/sum() through tileflight.spark vs Spark over the same data
# in Parquet (appends to benchmarks/RESULTS.md; minutes, not in `make test`).
bench-spark: setup build sparkjar
	$(VPY) benchmarks/spark_read.py --flightd bin/flightd --out benchmarks/RESULTS.md

# More random filters and aggregates against TileDB than the CI run
# (COND_ARRAYS arrays, a random seed unless COND_SEED is given).
COND_ARRAYS ?= 80
diff-cond: setup build
	TILEFLIGHT_COND_SEED=$${COND_SEED:-$$RANDOM} TILEFLIGHT_COND_ARRAYS=$(COND_ARRAYS) $(PYENV) $(VPY) -m pytest -q python_tests/test_diff_cond.py

# Aggregates and filters against in-process TileDB (appends to RESULTS.md).
bench-cond: setup build
	$(VPY) benchmarks/cond_read.py --flightd bin/flightd --out benchmarks/RESULTS.md

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

# The Spark connector in Java (spark-connector/, format "tileflight-jvm"):
# compiled against the jars of the venv's pyspark (Maven Central serves Spark
# only up to 4.2.0), Arrow Flight's Java client fetched by Maven and shaded in.
SPARK_JAR := spark-connector/target/tileflight-spark.jar
SPARK_JARS = $(shell $(VPY) -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')
$(SPARK_JAR): $(VENV)/.stamp spark-connector/pom.xml $(shell find spark-connector/src -type f 2>/dev/null)
	cd spark-connector && mvn -q -B package -Dspark.jars="$(SPARK_JARS)" \
	  -Dspark.version=$$($(abspath $(VPY)) -c 'import pyspark; print(pyspark.__version__)') \
	  -Dscala.version=$$(basename "$(SPARK_JARS)"/scala-library-*.jar .jar | sed 's/scala-library-//')

sparkjar: $(SPARK_JAR)
