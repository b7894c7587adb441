// Command flightd serves TileDB arrays and Blosc2 NDArray files over Apache
// Arrow Flight, and inspects arrays on disk.
//
//	flightd [flags]          serve the data directory
//	flightd inspect PATH     print an array's schema, fragments and metadata
//	flightd version          print the version and commit (also -version)
//
// Every flag can also be set through an environment variable named
// TILEFLIGHT_ followed by the flag name in upper case with dashes as
// underscores (-log-format: TILEFLIGHT_LOG_FORMAT), and in a TOML file
// given with -config (keys are the flag names). A flag given on the
// command line wins over the environment, which wins over the file.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	aflight "github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/tileflight/tileflight/access"
	"github.com/tileflight/tileflight/calls"
	"github.com/tileflight/tileflight/compact"
	"github.com/tileflight/tileflight/flightsvc"
	"github.com/tileflight/tileflight/internal/idletrim"
	"github.com/tileflight/tileflight/metrics"
	"github.com/tileflight/tileflight/mux"
	"github.com/tileflight/tileflight/reader/tileio"
	"github.com/tileflight/tileflight/sqlsvc"
	"github.com/tileflight/tileflight/sqlsvc/native"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/tdbarray"
	"github.com/tileflight/tileflight/tracing"
	"github.com/tileflight/tileflight/transport"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "inspect" {
		os.Exit(runInspect(os.Args[2:], os.Stdout, os.Stderr))
	}
	if len(os.Args) > 1 && (os.Args[1] == "version" || os.Args[1] == "--version") {
		printVersion(os.Stdout)
		os.Exit(0)
	}
	os.Exit(runServe(context.Background(), os.Args[1:], os.Stderr, nil))
}

type serveConfig struct {
	data            string
	listen          string
	logFormat       string
	logLevel        string
	demo            bool
	tlsCert         string
	tlsKey          string
	maxMessageBytes int64
	maxStreams      uint
	memoryBudget    int64
	maxWorkingSet   int64
	workers         int
	maxQueries      int
	maxPutBytes     int64
	maxFragBytes    int64
	keyFile         string
	key             string
	tokensFile      string
	tokens          string
	tlsClientCA     string
	stallTimeout    time.Duration
	sqlTimeout      time.Duration
	sqlMemory       int64
	queueWait       time.Duration
	maxPerPeer      int
	jwtKeys         string
	jwtIssuer       string
	jwtAudience     string
	shutdownTimeout time.Duration
	vacuumGrace     time.Duration
	compactAfter    int
	compactWorkers  int
	compactLease    time.Duration
	tempGrace       time.Duration
	fsync           string
	s3              s3Flags
	advertise       string
	peers           string
	peerInterval    time.Duration
	version         bool
	metricsListen   string
	idleTimeout     time.Duration
	idleTrim        time.Duration
	idleRelease     time.Duration
	// getenv is where NO_COLOR is read (tests give their own).
	getenv         func(string) string
	pprofListen    string
	memoryLimit    int64
	tileCacheBytes int64
	metaCacheBytes int64
	zeroCopySend   bool
	otlpEndpoint   string
	// configFile and printConfig: -config and -print-config (config.go);
	// flags is the parsed set -print-config reads.
	configFile  string
	printConfig bool
	flags       *flag.FlagSet
}

// errUsage marks a command-line error the flag package has already
// printed (with the usage), so that it is not printed twice.
var errUsage = errors.New("usage")

// parseServeFlags parses args with environment fallbacks.
func parseServeFlags(args []string, stderr io.Writer, getenv func(string) string) (*serveConfig, error) {
	c := &serveConfig{getenv: getenv}
	fs := flag.NewFlagSet("flightd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.data, "data", "./data", "data directory to serve (created if missing), or s3://bucket/prefix")
	fs.StringVar(&c.listen, "listen", "127.0.0.1:8815", "HOST:PORT to listen on (port 0 picks a free port)")
	fs.StringVar(&c.logFormat, "log-format", "console", "log format: json or console")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.BoolVar(&c.demo, "demo", false, "create demo arrays in an empty data directory")
	fs.StringVar(&c.tlsCert, "tls-cert", "", "TLS certificate file (PEM); with -tls-key enables TLS")
	fs.StringVar(&c.tlsKey, "tls-key", "", "TLS private key file (PEM)")
	c.maxMessageBytes = flightsvc.DefaultMaxMessageBytes
	fs.Var(sizeFlag{&c.maxMessageBytes}, "max-message-bytes", "largest gRPC message accepted (a `size`: bytes, or with a unit: 64MiB); a larger DoPut record batch is refused with an error naming this flag (clients learn it from the server_info action and cut their batches under it)")
	fs.UintVar(&c.maxStreams, "max-streams", 64, "most concurrent streams per connection")
	c.memoryBudget = tileio.DefaultMemoryBudget
	fs.Var(sizeFlag{&c.memoryBudget}, "memory-budget", "decoded bytes one query may hold at once (a `size`: bytes, or with a unit: 512MiB, 1GiB)")
	fs.Var(sizeFlag{&c.maxWorkingSet}, "max-working-set", "most decoded bytes (a `size`) a query may need at once to make progress (one tile per merged fragment, a sorted slab); a query needing more fails with ResourceExhausted (0: 4x -memory-budget, at least 1 GiB)")
	fs.IntVar(&c.workers, "workers", 0, "goroutines one query uses to fetch and unfilter tiles (0: one per CPU)")
	c.sqlMemory = sqlsvc.DefaultMemory
	fs.Var(sizeFlag{&c.sqlMemory}, "sql-memory", "most memory (a `size`) one Flight SQL statement's engine may hold: rows kept by ORDER BY, joins and window functions, GROUP BY groups and DISTINCT entries; past it RESOURCE_EXHAUSTED and its memory is freed (0: no bound)")
	fs.DurationVar(&c.sqlTimeout, "sql-timeout", 10*time.Minute, "longest a Flight SQL statement may run (planning, execution, streaming its result); past it DEADLINE_EXCEEDED and its memory is freed (0: no bound but the client's deadline)")
	fs.DurationVar(&c.stallTimeout, "stall-timeout", time.Minute, "cancel a DoGet, DoPut or action whose client has made no progress (not reading what is sent, or not sending) for this long, and free its memory (0: never)")
	fs.DurationVar(&c.queueWait, "queue-wait", 10*time.Second, "how long a DoGet or DoPut waits for a free -max-queries slot (at most its own deadline) before RESOURCE_EXHAUSTED (0: refuse at once)")
	fs.IntVar(&c.maxPerPeer, "max-queries-per-peer", 0, "most DoGet/DoPut calls one client (its credential's name, or without one its connection) may run at once; more are refused with RESOURCE_EXHAUSTED (0: half of -max-queries)")
	fs.IntVar(&c.maxQueries, "max-queries", 0, "DoGet/DoPut calls running at once; more are refused with RESOURCE_EXHAUSTED (0: 4 per CPU, at least 32)")
	c.maxPutBytes, c.maxFragBytes = 1<<30, 64<<20
	fs.Var(sizeFlag{&c.maxPutBytes}, "max-put-bytes", "most Arrow bytes (a `size`) one DoPut may send in all")
	fs.Var(sizeFlag{&c.maxFragBytes}, "max-fragment-bytes", "a DoPut cuts a fragment each time this `size` of input is buffered and writes it while the next is received; its fragments commit together (a DoPut peaks at about 5x this in memory; a dense DoPut of fixed-size attributes, filtered tile by tile as cells arrive, holds about 1x this of input)")
	fs.StringVar(&c.keyFile, "encryption-key-file", "", "file holding the 32-byte AES-256-GCM key that opens encrypted arrays")
	fs.StringVar(&c.key, "encryption-key", "", "the 32-byte AES-256-GCM key itself (prefer TILEFLIGHT_ENCRYPTION_KEY or -encryption-key-file: flags show in ps)")
	fs.StringVar(&c.tokensFile, "tokens-file", "", "file of bearer tokens, one \"TOKEN rw|ro [NAME] [prefix=PATH ...]\" per line (prefixes limit a token to the arrays under them); turns authentication on; SIGHUP re-reads it")
	fs.StringVar(&c.tokens, "tokens", "", "bearer tokens \"TOKEN rw|ro\", separated by commas (prefer TILEFLIGHT_TOKENS or -tokens-file: flags show in ps)")
	fs.StringVar(&c.tlsClientCA, "tls-client-ca", "", "CA certificate file (PEM): with -tls-cert, clients must present a certificate it signed (mTLS); the certificate's CN is logged as the peer's identity")
	fs.StringVar(&c.jwtKeys, "jwt-keys", "", "JWKS file of the public keys (RS256, ES256, EdDSA) that sign accepted JWT bearer tokens; turns authentication on; SIGHUP re-reads it")
	fs.StringVar(&c.jwtIssuer, "jwt-issuer", "", "the \"iss\" a JWT must carry (empty: any)")
	fs.StringVar(&c.jwtAudience, "jwt-audience", "", "an \"aud\" a JWT must carry (empty: any)")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long SIGINT/SIGTERM waits for streams to drain")
	fs.DurationVar(&c.vacuumGrace, "vacuum-grace", time.Hour, "a fragments vacuum removes uncommitted fragments (staged writes never committed, leftovers of failed writes) older than this (0: none); an automatic compaction is vacuumed this long after it (queries opened before keep reading their snapshot)")
	fs.IntVar(&c.compactAfter, "compact-after", 0, "automatic compaction: once an array has this many fragments newer than its last consolidation, consolidate them (mode fragments, TileDB's rules) in the background, then vacuum after -vacuum-grace (0: off; e.g. 64)")
	fs.IntVar(&c.compactWorkers, "compact-workers", 1, "arrays compacted at once by automatic compaction (each reads with this many tile workers): the share of the machine compaction may take")
	fs.DurationVar(&c.compactLease, "compact-lease", time.Minute, "how long the per-array compaction lease lasts unless renewed (renewed every third of it); one node of a cluster compacts an array at a time, and a node killed holding one delays that array's compaction this long")
	fs.StringVar(&c.fsync, "fsync", "always", "local -data only: always (every file a write stores is flushed to the disk before the write is acknowledged: it survives a power loss) or never (files are left to the kernel's writeback: a write stays whole or absent and survives the daemon being killed, but a power loss or kernel crash may lose the last acknowledged writes)")
	fs.DurationVar(&c.tempGrace, "temp-grace", 10*time.Minute, "startup and every vacuum remove the hidden .tfput-* entries (staged writes, dropped arrays) that a killed process left in a local -data, once untouched this long; a running process's are never removed")
	c.s3.register(fs)
	fs.StringVar(&c.advertise, "advertise", "", "this node's URL for clients, grpc://HOST:PORT (grpc+tls:// with TLS); turns on cluster locations in GetFlightInfo")
	fs.StringVar(&c.peers, "peers", "", "the other nodes serving the same -data, grpc://HOST:PORT,... (this node's own URL may be listed); needs -advertise")
	fs.DurationVar(&c.peerInterval, "peer-check-interval", 2*time.Second, "how often each peer's gRPC health is checked")
	fs.BoolVar(&c.version, "version", false, "print the version and commit, then exit")
	fs.StringVar(&c.metricsListen, "metrics-listen", "", "HOST:PORT serving Prometheus metrics on /metrics (off when empty)")
	fs.DurationVar(&c.idleTimeout, "idle-timeout", 30*time.Minute, "close client connections idle (no call running) this long (0: never)")
	fs.DurationVar(&c.idleTrim, "idle-trim", idletrim.DefaultDropPools, "once no DoGet, DoPut or action has run this long, drop the buffers queries left pooled (0: never)")
	fs.DurationVar(&c.idleRelease, "idle-release", idletrim.DefaultReturnToOS, "once no DoGet, DoPut or action has run this long, return the daemon's free memory to the OS, pooled buffers included if -idle-trim is longer (0: never; the next query faults it back in)")
	fs.StringVar(&c.pprofListen, "pprof", "", "HOST:PORT to serve Go's net/http/pprof profiles on (off when empty; keep it on loopback: it has no authentication)")
	c.tileCacheBytes = tileio.DefaultCacheBytes
	fs.Var(sizeFlag{&c.tileCacheBytes}, "tile-cache-bytes", "decoded tiles kept between queries (a `size`; tiles above an eighth of it are not kept); 0: no cache")
	c.metaCacheBytes = tdbarray.DefaultCacheBytes
	fs.Var(sizeFlag{&c.metaCacheBytes}, "metadata-cache-bytes", "decoded schemas and fragment metadata kept between queries (a `size`)")
	fs.BoolVar(&c.zeroCopySend, "zero-copy-send", true, "plaintext only: DoGet record buffers go to the socket by reference, without gRPC's copy into its write buffer (transport/sendconn); false: gRPC's own 256 KiB write buffer, as under TLS")
	fs.Var(memoryLimitFlag{&c.memoryLimit}, "memory-limit", "soft limit (a `size`) on the Go heap, making the garbage collector work harder near it (debug.SetMemoryLimit); 0: GOMEMLIMIT if set, else -memory-budget + 256 MiB; -1: none. Unless GOGC is set the collector also runs at GOGC=50")
	fs.StringVar(&c.otlpEndpoint, "otlp-endpoint", "", "OpenTelemetry collector receiving traces over OTLP/gRPC: HOST:PORT or http://HOST:PORT (plaintext), https://HOST:PORT (TLS); spans for each call, plan, storage read and encode (off when empty; OTEL_EXPORTER_OTLP_ENDPOINT alone does not turn it on)")
	registerConfigFlags(fs, c)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: flightd [flags]\n       flightd inspect [-s3-* flags] PATH|s3://bucket/prefix/array\n       flightd version\n\nflags (each also read from TILEFLIGHT_<NAME>, then the -config file; sizes accept units: 512MiB, 1GiB):\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, errUsage // the flag package printed it and the usage
	}
	if c.version {
		return c, nil
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err := applySettings(fs, getenv); err != nil {
		return nil, err
	}
	c.flags = fs
	if (c.tlsCert == "") != (c.tlsKey == "") {
		return nil, errors.New("-tls-cert and -tls-key go together")
	}
	if c.maxFragBytes <= 0 {
		return nil, fmt.Errorf("-max-fragment-bytes %d: want > 0", c.maxFragBytes)
	}
	if c.keyFile != "" && c.key != "" {
		return nil, errors.New("give -encryption-key or -encryption-key-file, not both")
	}
	if c.keyFile != "" {
		b, err := os.ReadFile(c.keyFile)
		if err != nil {
			return nil, fmt.Errorf("-encryption-key-file: %v", err)
		}
		// A trailing newline is an editor's, not the key's.
		c.key = strings.TrimRight(string(b), "\r\n")
	}
	if c.key != "" && len(c.key) != 32 {
		return nil, fmt.Errorf("encryption key: %d bytes, AES-256-GCM keys are 32", len(c.key))
	}
	if c.compactAfter < 0 || c.compactAfter == 1 {
		return nil, fmt.Errorf("-compact-after %d: want 0 (off) or at least 2 fragments", c.compactAfter)
	}
	if c.compactWorkers < 1 {
		return nil, fmt.Errorf("-compact-workers %d: want at least 1", c.compactWorkers)
	}
	if c.compactLease < 3*time.Second {
		return nil, fmt.Errorf("-compact-lease %s: want at least 3s (it is renewed every third of it)", c.compactLease)
	}
	if c.peers != "" && c.advertise == "" {
		return nil, errors.New("-peers needs -advertise (this node's own URL)")
	}
	if c.logFormat != "json" && c.logFormat != "console" {
		return nil, fmt.Errorf("-log-format %q: want json or console", c.logFormat)
	}
	if _, err := storage.ParseSyncPolicy(c.fsync); err != nil {
		return nil, fmt.Errorf("-fsync: %w", err)
	}
	return c, nil
}

func newLogger(c *serveConfig, w io.Writer) (zerolog.Logger, error) {
	level, err := zerolog.ParseLevel(c.logLevel)
	if err != nil {
		return zerolog.Nop(), fmt.Errorf("-log-level %q: %v", c.logLevel, err)
	}
	if c.logFormat == "console" {
		getenv := c.getenv
		if getenv == nil {
			getenv = os.Getenv
		}
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.RFC3339, NoColor: !colorOK(w, getenv)}
	}
	return zerolog.New(w).Level(level).With().Timestamp().Logger(), nil
}

// runServe runs the daemon until ctx ends or a signal arrives. ready, if
// not nil, receives the bound address once the server accepts calls.
func runServe(ctx context.Context, args []string, stderr io.Writer, ready chan<- string) int {
	return runServeOut(ctx, args, os.Stdout, stderr, ready)
}

// runServeOut is runServe with the stream -version prints to.
func runServeOut(ctx context.Context, args []string, stdout, stderr io.Writer, ready chan<- string) int {
	c, err := parseServeFlags(args, stderr, os.Getenv)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		if !errors.Is(err, errUsage) {
			fmt.Fprintf(stderr, "flightd: %v\n", err)
		}
		return 2
	}
	if c.version {
		printVersion(stdout)
		return 0
	}
	if c.printConfig {
		printConfig(stdout, c.flags)
		return 0
	}
	log, err := newLogger(c, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "flightd: %v\n", err)
		return 2
	}
	if err := serve(ctx, c, log, ready); err != nil {
		log.Error().Err(err).Msg("flightd stopped")
		return 1
	}
	return 0
}

func serve(ctx context.Context, c *serveConfig, log zerolog.Logger, ready chan<- string) error {
	store, closeStore, err := openStore(ctx, c.data, &c.s3)
	if err != nil {
		return fmt.Errorf("-data %s: %w", c.data, err)
	}
	defer closeStore()
	if err := setFsync(store, c.fsync); err != nil {
		return err
	}
	// What a killed daemon was writing (or dropping) when it died.
	if tc, ok := store.(storage.TempCleaner); ok {
		got, err := tc.CleanTemp(ctx, c.tempGrace)
		if err != nil {
			log.Warn().Err(err).Msg("cleaning temporary files a killed process left")
		}
		if len(got.Names) > 0 {
			log.Info().Int("entries", len(got.Names)).Int64("bytes", got.Bytes).Msg("removed temporary files a killed process left")
		}
	}
	// Every request the service makes to storage is counted (nil: off).
	var mets *metrics.Metrics
	if c.metricsListen != "" {
		mets = metrics.New()
	}
	store = mets.WrapStore(store)
	ver, _, _ := versionInfo()
	tracer, err := tracing.Setup(ctx, tracing.Config{Endpoint: c.otlpEndpoint, Version: ver})
	if err != nil {
		return err
	}
	defer flushTraces(tracer, log)
	if tracer != nil {
		log.Info().Str("otlp_endpoint", c.otlpEndpoint).Msg("tracing: spans go to the OTLP collector")
	}
	store = tracer.WrapStore(store)
	if c.demo {
		if err := createDemoArrays(ctx, store, log); err != nil {
			return fmt.Errorf("demo arrays: %w", err)
		}
	}
	applyMemoryLimit(c, log)
	if c.pprofListen != "" {
		stop, err := servePprof(c.pprofListen, log)
		if err != nil {
			return err
		}
		defer stop()
	}
	registry := calls.NewRegistry(c.stallTimeout)
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go registry.Watch(watchCtx)
	if c.tlsClientCA != "" && c.tlsCert == "" {
		return fmt.Errorf("-tls-client-ca needs -tls-cert and -tls-key: client certificates are checked in the TLS handshake")
	}
	auth, err := access.New(access.Config{
		TokensFile: c.tokensFile, TokensEnv: c.tokens,
		JWT:               access.JWTConfig{KeysFile: c.jwtKeys, Issuer: c.jwtIssuer, Audience: c.jwtAudience},
		RequireClientCert: c.tlsClientCA != "",
	})
	if err != nil {
		return err
	}
	cfg := flightsvc.Config{
		Store: store, Log: log, MemoryBudget: c.memoryBudget, MaxWorkingSet: c.maxWorkingSet, Workers: c.workers,
		MaxConcurrentStreams: c.maxQueries, MaxPutBytes: c.maxPutBytes, MaxFragmentBytes: c.maxFragBytes, VacuumGrace: c.vacuumGrace, TempGrace: c.tempGrace,
		Auth: auth, Calls: registry, MaxQueriesPerPeer: c.maxPerPeer, QueueWait: c.queueWait, Metrics: mets, TileCacheBytes: c.tileCacheBytes, CacheBytes: c.metaCacheBytes,
		IdleTrim: c.idleTrim, IdleRelease: c.idleRelease,
		MaxMessageBytes: c.maxMessageBytes, SQL: true,
	}
	cfg.Version, _, _ = versionInfo()
	if c.key != "" {
		cfg.EncryptionKey = []byte(c.key)
	}
	if c.advertise != "" {
		cl, err := flightsvc.NewCluster(c.advertise, strings.Split(c.peers, ","), c.peerInterval, log)
		if err != nil {
			return err
		}
		cfg.Cluster = cl
	}
	var svc *flightsvc.Service
	comp := compact.New(store, compact.Options{
		After: c.compactAfter, Workers: c.compactWorkers, VacuumGrace: c.vacuumGrace, LeaseTTL: c.compactLease,
		Owner: compactOwner(c.advertise), EncryptionKey: cfg.EncryptionKey, MaxFragmentBytes: c.maxFragBytes,
		Log: log, Metrics: mets,
		Arrays: func(ctx context.Context) ([]string, error) {
			es, err := svc.ListArrays(ctx, "")
			if err != nil {
				return nil, err
			}
			out := make([]string, 0, len(es))
			for _, e := range es {
				out = append(out, e.Name)
			}
			return out, nil
		},
	})
	if comp != nil {
		cfg.Compaction = comp
	}
	svc = flightsvc.NewService(cfg)
	// Flight SQL on the same port (docs/protocol.md, "Flight SQL").
	sqlServer, sqlImpl, err := sqlsvc.New(native.New(svc), log, ver)
	if err != nil {
		return fmt.Errorf("flight sql: %w", err)
	}
	sqlImpl.SetTimeout(c.sqlTimeout)
	sqlImpl.SetMemory(c.sqlMemory)
	sqlImpl.SetCalls(registry)

	unaryLog, streamLog := flightsvc.AccessLogWith(log, mets)
	unaryAuth, streamAuth := flightsvc.AuthInterceptors(auth)
	unaryRecover, streamRecover := flightsvc.Recover(log)
	unary := []grpc.UnaryServerInterceptor{unaryLog, unaryAuth, unaryRecover}
	// Innermost: a DoPut message over -max-message-bytes fails with an
	// error naming the flag (gRPC's own limit is set well above it).
	stream := []grpc.StreamServerInterceptor{streamLog, streamAuth, registry.Interceptors(), streamRecover, flightsvc.MessageSizeInterceptor(c.maxMessageBytes)}
	if mets != nil {
		// First, so that calls refused by auth or limits are counted.
		um, sm := mets.Interceptors()
		unary = append([]grpc.UnaryServerInterceptor{um}, unary...)
		stream = append([]grpc.StreamServerInterceptor{sm}, stream...)
	}
	opts := []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(unary...),
		grpc.ChainStreamInterceptor(stream...),
		grpc.MaxRecvMsgSize(flightsvc.GRPCRecvLimit(c.maxMessageBytes)),
		grpc.MaxConcurrentStreams(uint32(c.maxStreams)),
	}
	opts = append(opts, keepaliveOptions(c.idleTimeout)...)
	opts = append(opts, tracer.ServerOptions()...)
	scheme := "grpc"
	var serverTLS *access.ServerTLS
	tc := transport.Config{TLS: c.tlsCert != "", ZeroCopySend: c.zeroCopySend}
	if tc.TLS {
		st, err := access.NewServerTLS(access.TLSFiles{CertFile: c.tlsCert, KeyFile: c.tlsKey, ClientCAFile: c.tlsClientCA})
		if err != nil {
			return fmt.Errorf("TLS: %w", err)
		}
		serverTLS = st
		opts = append(opts, grpc.Creds(credentials.NewTLS(st.Config())))
		scheme = "grpc+tls"
	}
	opts = append(opts, transport.ServerOptions(tc)...)
	srv := grpc.NewServer(opts...)
	// The native service and Flight SQL share the port (and the
	// interceptors above) through the mux.
	aflight.RegisterFlightServiceServer(srv, mux.New(svc, sqlServer))
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	// Reflection lets grpcurl and other tools discover the services.
	reflection.Register(srv)
	if mets != nil {
		mets.SetGauges(svc.Gauges())
		mets.InitializeServer(srv)
		maddr, stop, err := serveMetrics(ctx, c.metricsListen, mets, storeReady(store), log)
		if err != nil {
			return err
		}
		defer stop()
		log.Info().Str("metrics", "http://"+maddr+"/metrics").Msgf("metrics on http://%s/metrics", maddr)
	}

	lis, err := net.Listen("tcp", c.listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", c.listen, err)
	}
	lis = transport.Listener(lis, tc)
	addr := lis.Addr().String()
	if host, _, _ := net.SplitHostPort(addr); !auth.Enabled() || scheme == "grpc" {
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			log.Warn().Str("listen", addr).Bool("auth", auth.Enabled()).Bool("tls", scheme != "grpc").
				Msg("serving beyond loopback without both tokens and TLS: anyone who can reach this address can read (and without tokens, write)")
		}
	}
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus("arrow.flight.protocol.FlightService", healthpb.HealthCheckResponse_SERVING)

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	log.Info().Str("data", c.data).Str("url", scheme+"://"+addr).Msgf("flightd ready on %s://%s", scheme, addr)
	if cfg.Cluster != nil {
		// Peers are checked in the background, once this node is ready;
		// it serves at once (peers starting together would otherwise wait
		// on each other).
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go cfg.Cluster.Start(cctx)
	}
	if comp != nil {
		comp.Start(ctx)
		defer comp.Close()
		log.Info().Int("after", c.compactAfter).Int("workers", c.compactWorkers).Dur("vacuum_grace", c.vacuumGrace).Msg("automatic compaction on")
	}
	if ready != nil {
		ready <- addr
	}

	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigc)
	stopReload := reloadOnHangup(auth, serverTLS, log)
	defer stopReload()
	select {
	case err := <-errc:
		return err
	case s := <-sigc:
		log.Info().Str("signal", s.String()).Msg("draining in-flight streams")
	case <-ctx.Done():
		log.Info().Msg("draining in-flight streams")
	}
	hs.Shutdown()
	done := make(chan struct{})
	go func() { srv.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(c.shutdownTimeout):
		log.Warn().Dur("timeout", c.shutdownTimeout).Msg("streams did not drain in time; stopping")
		srv.Stop()
	}
	// Running compactions stop at a safe point (nothing partial visible).
	comp.Close()
	log.Info().Msg("flightd stopped")
	return nil
}

// flushTraces sends the spans not yet exported before the daemon exits.
func flushTraces(p *tracing.Provider, log zerolog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		log.Warn().Err(err).Msg("traces not flushed")
	}
}

// compactOwner names this process in compaction leases: the node's URL
// (or host name), its pid and a random part, so that a restarted daemon
// never takes its dead predecessor's lease for its own.
func compactOwner(advertise string) string {
	node := advertise
	if node == "" {
		node, _ = os.Hostname()
	}
	var rnd [6]byte
	rand.Read(rnd[:])
	return fmt.Sprintf("%s pid %d %s", node, os.Getpid(), hex.EncodeToString(rnd[:]))
}
