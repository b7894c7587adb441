// Package metrics owns what flightd exports to Prometheus: gRPC calls by
// method and code with latency histograms (through go-grpc-middleware's
// Prometheus provider), rows and bytes in and out, storage requests and
// bytes (a storage.Store wrapper), metadata and tile cache hits and misses,
// the build's version (tileflight_build_info), the reader's memory
// budget in use, DoPut fragments committed and writes aborted, automatic
// compactions (runs, fragments merged, seconds) and their vacuums, and the Go
// runtime and process collectors (goroutines, open file descriptors, RSS).
//
// It sits above storage and beside flight: flight reports into a *Metrics
// (every method is a no-op on nil, so tests and embedders need none), and
// cmd/flightd serves Handler on -metrics-listen.
package metrics

import (
	"net/http"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
)

// Namespace prefixes every tileflight metric.
const Namespace = "tileflight"

// Metrics is one daemon's set of collectors, registered on its own
// registry (never the global one, so that several daemons in one test
// process do not collide).
type Metrics struct {
	reg  *prometheus.Registry
	grpc *grpcprom.ServerMetrics

	rows       *prometheus.CounterVec // method, direction
	bytes      *prometheus.CounterVec // method, direction
	storeReqs  *prometheus.CounterVec // op, result
	storeBytes *prometheus.CounterVec // direction
	storeLat   *prometheus.HistogramVec
	fragments  prometheus.Counter
	aborted    prometheus.Counter
	putsOK     prometheus.Counter

	compactions     *prometheus.CounterVec // result
	compactMerged   prometheus.Counter
	compactSeconds  prometheus.Histogram
	compactVacuums  *prometheus.CounterVec // result
	compactVacuumed prometheus.Counter
}

// Gauges are values read when Prometheus scrapes; nil fields are left out.
type Gauges struct {
	// CacheHits and CacheMisses count metadata cache lookups.
	CacheHits, CacheMisses func() uint64
	// CacheEntries is the number of cached schemas and fragments.
	CacheEntries func() int
	// BudgetInUse is the decoded bytes all running queries hold.
	BudgetInUse func() int64
	// StreamsRunning and StreamsLimit are the DoGet/DoPut slots taken and
	// available (-max-queries).
	StreamsRunning, StreamsLimit func() int
	// ZstdSent and ZstdSentRaw count the tile bytes DoGets sent still
	// zstd-compressed ("compression": "zstd"), and what they hold.
	ZstdSent, ZstdSentRaw func() uint64
	// TileCacheHits and TileCacheMiss count decoded-tile cache lookups
	// (-tile-cache-bytes); TileCacheBytes is what it holds now.
	TileCacheHits, TileCacheMiss func() uint64
	TileCacheBytes               func() int64
}

// New returns a set of collectors with the Go and process collectors.
func New() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.grpc = grpcprom.NewServerMetrics(
		grpcprom.WithServerHandlingTimeHistogram(
			grpcprom.WithHistogramBuckets([]float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}),
		),
	)
	m.rows = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "rows_total",
		Help: "Rows streamed by Flight calls; direction is out (DoGet) or in (DoPut).",
	}, []string{"method", "direction"})
	m.bytes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "arrow_bytes_total",
		Help: "Arrow buffer bytes streamed by Flight calls; direction is out (DoGet) or in (DoPut).",
	}, []string{"method", "direction"})
	m.storeReqs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "storage_requests_total",
		Help: "Requests to the storage backend by operation (get, get_range, put, put_dir: the files of one new fragment, list, delete, delete_prefix, stat) and result (ok, not_found, error).",
	}, []string{"op", "result"})
	m.storeBytes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "storage_bytes_total",
		Help: "Bytes read from (direction=read) and written to (direction=write) the storage backend.",
	}, []string{"direction"})
	m.storeLat = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "storage_request_seconds",
		Help:    "Latency of storage backend requests by operation.",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 5},
	}, []string{"op"})
	m.fragments = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: Namespace, Name: "doput_fragments_committed_total",
		Help: "Fragments made visible by DoPut commits.",
	})
	m.putsOK = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: Namespace, Name: "doput_commits_total",
		Help: "DoPut calls that committed (each atomically, with one or more fragments).",
	})
	m.aborted = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: Namespace, Name: "doput_aborted_total",
		Help: "DoPut calls that began writing and were rolled back (bad data, a limit, the client hanging up); their fragments were deleted.",
	})
	m.compactions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "compactions_total",
		Help: "Automatic compactions (-compact-after) by result: done (fragments merged), nothing (TileDB's rules left nothing to merge), failed (nothing partial visible; see the log).",
	}, []string{"result"})
	m.compactMerged = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: Namespace, Name: "compaction_fragments_merged_total",
		Help: "Fragments merged into consolidated ones by automatic compactions.",
	})
	m.compactSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "compaction_seconds",
		Help:    "Time automatic compactions took (every result); its _sum is the seconds spent compacting.",
		Buckets: []float64{.01, .05, .1, .5, 1, 5, 10, 30, 60, 300, 1800},
	})
	m.compactVacuums = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "compaction_vacuums_total",
		Help: "Vacuums run -vacuum-grace after automatic compactions, by result (done, failed).",
	}, []string{"result"})
	m.compactVacuumed = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: Namespace, Name: "compaction_vacuumed_total",
		Help: "Fragments, commit and .vac files removed by the vacuums after automatic compactions.",
	})
	for _, r := range []string{"done", "nothing", "failed"} {
		m.compactions.WithLabelValues(r)
	}
	m.compactVacuums.WithLabelValues("done")
	m.compactVacuums.WithLabelValues("failed")
	m.reg.MustRegister(m.grpc, m.rows, m.bytes, m.storeReqs, m.storeBytes, m.storeLat, m.fragments, m.putsOK, m.aborted,
		m.compactions, m.compactMerged, m.compactSeconds, m.compactVacuums, m.compactVacuumed,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// SetGauges registers values read at scrape time. Call it once.
func (m *Metrics) SetGauges(g Gauges) {
	if m == nil {
		return
	}
	counter := func(name, help string, f func() uint64) {
		if f != nil {
			m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help},
				func() float64 { return float64(f()) }))
		}
	}
	gauge := func(name, help string, f func() float64) {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: Namespace, Name: name, Help: help}, f))
	}
	counter("metadata_cache_hits_total", "Schema and fragment metadata lookups answered by the cache.", g.CacheHits)
	counter("metadata_cache_misses_total", "Schema and fragment metadata lookups that read and decoded the file.", g.CacheMisses)
	counter("zstd_passthrough_bytes_total", "Tile bytes DoGets sent as they are stored, zstd-compressed, without decompressing them (\"compression\": \"zstd\").", g.ZstdSent)
	counter("zstd_passthrough_raw_bytes_total", "The bytes the zstd tile bytes DoGets sent compressed decompress to.", g.ZstdSentRaw)
	counter("tile_cache_hits_total", "Decoded tiles found in the tile cache (-tile-cache-bytes).", g.TileCacheHits)
	counter("tile_cache_misses_total", "Tile cache lookups that read and decoded the tile.", g.TileCacheMiss)
	if g.TileCacheBytes != nil {
		gauge("tile_cache_bytes", "Decoded tile bytes held by the tile cache.", func() float64 { return float64(g.TileCacheBytes()) })
	}
	if g.CacheEntries != nil {
		gauge("metadata_cache_entries", "Schemas and fragments whose decoded metadata is cached.", func() float64 { return float64(g.CacheEntries()) })
	}
	if g.BudgetInUse != nil {
		gauge("memory_budget_in_use_bytes", "Decoded tile bytes held under the memory budget by all running queries.", func() float64 { return float64(g.BudgetInUse()) })
	}
	if g.StreamsRunning != nil {
		gauge("streams_running", "DoGet and DoPut calls running now.", func() float64 { return float64(g.StreamsRunning()) })
	}
	if g.StreamsLimit != nil {
		gauge("streams_limit", "Most DoGet and DoPut calls that may run at once (-max-queries).", func() float64 { return float64(g.StreamsLimit()) })
	}
}

// SetBuildInfo exports tileflight_build_info{version, commit, goversion} 1,
// the series dashboards join on to show what each daemon runs.
func (m *Metrics) SetBuildInfo(version, commit, goVersion string) {
	if m == nil {
		return
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "build_info",
		Help:        "Always 1; the labels say which flightd build is running.",
		ConstLabels: prometheus.Labels{"version": version, "commit": commit, "goversion": goVersion},
	})
	g.Set(1)
	m.reg.MustRegister(g)
}

// Interceptors return the gRPC interceptors that count calls by method and
// code and time them. Put them first in the chain so that calls refused
// by authentication or limits are counted too.
func (m *Metrics) Interceptors() (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	return m.grpc.UnaryServerInterceptor(), m.grpc.StreamServerInterceptor()
}

// InitializeServer zeroes the per-method series of every registered
// service, so that dashboards see each method before its first call.
func (m *Metrics) InitializeServer(s *grpc.Server) {
	if m != nil {
		m.grpc.InitializeMetrics(s)
	}
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg, EnableOpenMetrics: true})
}

// Registry is the daemon's registry (for tests and embedders).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// ObserveCall records what one Flight call streamed. Calls that stream
// nothing (actions, schema lookups) record nothing.
func (m *Metrics) ObserveCall(method string, rows, bytes int64) {
	if m == nil || (rows == 0 && bytes == 0) {
		return
	}
	dir := "out"
	if method == "/arrow.flight.protocol.FlightService/DoPut" || method == "/arrow.flight.protocol.FlightService/DoExchange" {
		dir = "in"
	}
	m.rows.WithLabelValues(method, dir).Add(float64(rows))
	m.bytes.WithLabelValues(method, dir).Add(float64(bytes))
}

// PutCommitted records a DoPut that made fragments visible.
func (m *Metrics) PutCommitted(fragments int) {
	if m == nil {
		return
	}
	m.putsOK.Inc()
	m.fragments.Add(float64(fragments))
}

// PutAborted records a DoPut whose writes were rolled back.
func (m *Metrics) PutAborted() {
	if m != nil {
		m.aborted.Inc()
	}
}

// CompactionDone records one automatic compaction (compact.Recorder).
func (m *Metrics) CompactionDone(merged int, took time.Duration, err error) {
	if m == nil {
		return
	}
	result := "done"
	switch {
	case err != nil:
		result = "failed"
	case merged == 0:
		result = "nothing"
	}
	m.compactions.WithLabelValues(result).Inc()
	m.compactMerged.Add(float64(merged))
	m.compactSeconds.Observe(took.Seconds())
}

// VacuumDone records the vacuum after a compaction (compact.Recorder).
func (m *Metrics) VacuumDone(removed int, err error) {
	if m == nil {
		return
	}
	if err != nil {
		m.compactVacuums.WithLabelValues("failed").Inc()
		return
	}
	m.compactVacuums.WithLabelValues("done").Inc()
	m.compactVacuumed.Add(float64(removed))
}
