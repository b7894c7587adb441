package flightsvc

import (
	"context"
	"runtime"
	"time"

	aflight "github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/rs/zerolog"

	"github.com/tileflight/tileflight/access"
	"github.com/tileflight/tileflight/calls"
	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/internal/idletrim"
	"github.com/tileflight/tileflight/metrics"
	"github.com/tileflight/tileflight/reader/tileio"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/tdbarray"
)

// Config is what the service needs from the daemon.
type Config struct {
	// Store holds the arrays (the data directory).
	Store storage.Store
	// Log receives the service's own messages (the access log is separate).
	Log zerolog.Logger
	// MemoryBudget bounds the decoded bytes one query may hold at once
	// (0: the reader's default).
	MemoryBudget int64
	// MaxWorkingSet bounds what one query must hold at once to make
	// progress (e.g. one tile per fragment of a merge), beyond the budget;
	// a query needing more fails fast with ResourceExhausted. 0: the
	// reader's default (4x the budget, at least 1 GiB).
	MaxWorkingSet int64
	// CacheEntries bounds the schemas and fragments whose decoded metadata
	// stays cached between queries (0: array.DefaultCacheEntries).
	CacheEntries int
	// CacheBytes bounds the decoded metadata those entries hold (0:
	// array.DefaultCacheBytes).
	CacheBytes int64
	// TileCacheBytes bounds the decoded tiles kept between queries
	// (tileio.Cache); 0: none.
	TileCacheBytes int64
	// Workers bounds the goroutines one query uses to fetch and unfilter
	// tiles (0: GOMAXPROCS).
	Workers int
	// MaxConcurrentStreams bounds the DoGet and DoPut calls running at once
	// across all connections; one more is refused with ResourceExhausted
	// (0: 4 per CPU, at least 32).
	MaxConcurrentStreams int
	// MaxPutBytes bounds the Arrow bytes one DoPut may send; a write is
	// held in memory until it commits (0: 1 GiB).
	MaxPutBytes int64
	// MaxMessageBytes is the daemon's -max-message-bytes, which
	// server_info reports (0: DefaultMaxMessageBytes); the check itself is
	// MessageSizeInterceptor's.
	MaxMessageBytes int64
	// Version is the daemon's version, which server_info reports.
	Version string
	// SQL tells server_info that Flight SQL shares the port.
	SQL bool
	// MaxFragmentBytes, when > 0, is passed to the writer: larger writes
	// become several fragments committed together.
	MaxFragmentBytes int64
	// VacuumGrace is how old an uncommitted fragment must be before a
	// fragments vacuum removes it (0: never).
	VacuumGrace time.Duration
	// TempGrace is how long a temporary entry a dead process left
	// (storage.TempCleaner) stays untouched before a vacuum removes it.
	TempGrace time.Duration
	// EncryptionKey opens AES-256-GCM encrypted arrays.
	EncryptionKey []byte
	// Auth, when it has credentials, turns authentication on: the
	// Handshake trades credentials for a bearer token, every call carries
	// a principal (AuthInterceptors), read-only principals may not write,
	// and arrays outside a principal's prefixes do not exist for it.
	Auth *access.Authenticator
	// Cluster, when set, spreads GetFlightInfo's endpoints over this node
	// and its live peers (see cluster.go); nil: endpoints carry no
	// locations (= this server).
	Cluster *Cluster

	// Metrics, when not nil, receives what DoPut commits and aborts (see
	// also AccessLogWith and Gauges).
	Metrics *metrics.Metrics

	// IdleTrim, when > 0, is how long no DoGet, DoPut or action must run
	// before the service drops the pooled buffers queries left behind;
	// IdleRelease, when > 0, how long before it also returns the free heap
	// to the operating system (internal/idletrim). 0: never.
	IdleTrim, IdleRelease time.Duration

	// Calls, when set, is the registry of running calls that the
	// list_queries and cancel_query actions read (its interceptor,
	// installed by the daemon, registers them).
	Calls *calls.Registry
	// MaxQueriesPerPeer bounds the stream slots one client may hold at
	// once (a client: the credential's name, or without one the client's
	// connection). 0: half of MaxConcurrentStreams.
	MaxQueriesPerPeer int
	// Compaction, when set, hears of every committed write (automatic
	// compaction: package compact).
	Compaction Notifier
	// QueueWait is how long a DoGet or DoPut waits for a free stream slot
	// (at most until its own deadline) before RESOURCE_EXHAUSTED. 0:
	// refuse at once.
	QueueWait time.Duration
}

// Notifier hears that a write committed fragments to an array.
type Notifier interface {
	Notify(array string, fragments int)
}

// exclusive is what a compaction policy offers the consolidate and vacuum
// actions: run fn while no compaction of the array runs anywhere.
type exclusive interface {
	Exclusive(ctx context.Context, array string, fn func(context.Context) error) error
}

// exclusively runs fn under the compaction policy's Exclusive when it has
// one, else at once.
func (s *Service) exclusively(ctx context.Context, array string, fn func(context.Context) error) error {
	if ex, ok := s.cfg.Compaction.(exclusive); ok {
		return ex.Exclusive(ctx, array, fn)
	}
	return fn(ctx)
}

// notifyWrite tells the compaction policy about a committed write.
func (s *Service) notifyWrite(array string, fragments int) {
	if s.cfg.Compaction != nil {
		s.cfg.Compaction.Notify(array, fragments)
	}
}

// Service implements the Flight RPCs.
type Service struct {
	aflight.BaseFlightServer
	cfg     Config
	streams chan struct{}
	slots   peerSlots
	// cache keeps decoded schemas and fragment metadata between queries.
	cache *tdbarray.Cache
	// tiles keeps decoded tiles between queries (nil: none).
	tiles *tileio.Cache
	// idle gives memory back once no call has run for cfg.IdleTrim and
	// cfg.IdleRelease (nil: never); streams and actions hold it off.
	idle *idletrim.Trimmer
}

// NewService returns a Flight service over cfg.Store.
func NewService(cfg Config) *Service {
	if cfg.MaxConcurrentStreams <= 0 {
		cfg.MaxConcurrentStreams = max(32, 4*runtime.GOMAXPROCS(0))
	}
	if cfg.MaxPutBytes <= 0 {
		cfg.MaxPutBytes = 1 << 30
	}
	if cfg.MaxQueriesPerPeer <= 0 {
		cfg.MaxQueriesPerPeer = max(1, cfg.MaxConcurrentStreams/2)
	}
	s := &Service{cfg: cfg, streams: make(chan struct{}, cfg.MaxConcurrentStreams), cache: tdbarray.NewCacheBytes(cfg.CacheEntries, cfg.CacheBytes),
		tiles: tileio.NewCache(cfg.TileCacheBytes)}
	s.idle = idletrim.New(idleStages(cfg.IdleTrim, cfg.IdleRelease,
		func() {
			n := idletrim.DropPools()
			cfg.Log.Debug().Int64("bytes", n).Msg("idle: pooled buffers dropped")
		},
		func() {
			t := time.Now()
			idletrim.ReturnToOS()
			cfg.Log.Debug().Dur("took", time.Since(t)).Msg("idle: free memory returned to the OS")
		})...)
	return s
}

// idleStages are the service's two idle stages: drop the pooled buffers
// after trim, return the free heap to the OS after release (either 0:
// never). A release due before the trim (-idle-release 1s beside the
// default -idle-trim of 30 s) drops the pools at the same moment, just
// before it: pooled buffers are free memory kept for reuse, and a release
// that left them would give back only part of what is free.
func idleStages(trim, release time.Duration, dropPools, returnToOS func()) []idletrim.Stage {
	if release > 0 && trim > release {
		trim = release
	}
	return []idletrim.Stage{{After: trim, Do: dropPools}, {After: release, Do: returnToOS}}
}

// requireWrite refuses a mutation to callers that authenticated with a
// read-only credential.
func requireWrite(ctx context.Context, what string) error {
	if !access.CanWrite(ctx) {
		return errkind.Errorf(errkind.PermissionDenied, "%s needs a read-write token; this one is read-only", what)
	}
	return nil
}
