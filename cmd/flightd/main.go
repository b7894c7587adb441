// Command flightd serves TileDB arrays and Blosc2 NDArray files over Apache
// Arrow Flight, and inspects arrays on disk.
//
//	flightd [flags]          serve the data directory
//	flightd inspect PATH     print an array's schema, fragments and metadata
//
// Every flag can also be set through an environment variable named
// TILEFLIGHT_ followed by the flag name in upper case with dashes as
// underscores (-log-format: TILEFLIGHT_LOG_FORMAT). A flag given on the
// command line wins over the environment.
package main

import (
	"context"
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

	"github.com/tileflight/tileflight/flight"
	"github.com/tileflight/tileflight/flightsql"
	"github.com/tileflight/tileflight/storage"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "inspect" {
		os.Exit(runInspect(os.Args[2:], os.Stdout, os.Stderr))
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
	maxMessageBytes int
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
	shutdownTimeout time.Duration
}

// parseServeFlags parses args with environment fallbacks.
func parseServeFlags(args []string, stderr io.Writer, getenv func(string) string) (*serveConfig, error) {
	c := &serveConfig{}
	fs := flag.NewFlagSet("flightd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.data, "data", "./data", "data directory to serve (created if missing)")
	fs.StringVar(&c.listen, "listen", "127.0.0.1:8815", "HOST:PORT to listen on (port 0 picks a free port)")
	fs.StringVar(&c.logFormat, "log-format", "console", "log format: json or console")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.BoolVar(&c.demo, "demo", false, "create demo arrays in an empty data directory")
	fs.StringVar(&c.tlsCert, "tls-cert", "", "TLS certificate file (PEM); with -tls-key enables TLS")
	fs.StringVar(&c.tlsKey, "tls-key", "", "TLS private key file (PEM)")
	fs.IntVar(&c.maxMessageBytes, "max-message-bytes", 64<<20, "largest gRPC message accepted")
	fs.UintVar(&c.maxStreams, "max-streams", 64, "most concurrent streams per connection")
	fs.Int64Var(&c.memoryBudget, "memory-budget", 512<<20, "decoded bytes one query may hold at once")
	fs.Int64Var(&c.maxWorkingSet, "max-working-set", 0, "most decoded bytes a query may need at once to make progress (one tile per merged fragment, a sorted slab); a query needing more fails with ResourceExhausted (0: 4x -memory-budget, at least 1 GiB)")
	fs.IntVar(&c.workers, "workers", 0, "goroutines one query uses to fetch and unfilter tiles (0: one per CPU)")
	fs.IntVar(&c.maxQueries, "max-queries", 0, "DoGet/DoPut calls running at once; more are refused with RESOURCE_EXHAUSTED (0: 4 per CPU, at least 32)")
	fs.Int64Var(&c.maxPutBytes, "max-put-bytes", 1<<30, "most Arrow bytes one DoPut may send in all")
	fs.Int64Var(&c.maxFragBytes, "max-fragment-bytes", 128<<20, "a DoPut cuts a fragment each time this many input bytes are buffered; its fragments commit together (a DoPut peaks at about 7x this in memory)")
	fs.StringVar(&c.keyFile, "encryption-key-file", "", "file holding the 32-byte AES-256-GCM key that opens encrypted arrays")
	fs.StringVar(&c.key, "encryption-key", "", "the 32-byte AES-256-GCM key itself (prefer TILEFLIGHT_ENCRYPTION_KEY or -encryption-key-file: flags show in ps)")
	fs.StringVar(&c.tokensFile, "tokens-file", "", "file of bearer tokens, one \"TOKEN rw|ro\" per line; turns authentication on")
	fs.StringVar(&c.tokens, "tokens", "", "bearer tokens \"TOKEN rw|ro\", separated by commas (prefer TILEFLIGHT_TOKENS or -tokens-file: flags show in ps)")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long SIGINT/SIGTERM waits for streams to drain")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: flightd [flags]\n       flightd inspect PATH\n\nflags (each also read from TILEFLIGHT_<NAME>):\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || envErr != nil {
			return
		}
		env := "TILEFLIGHT_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v := getenv(env); v != "" {
			if err := f.Value.Set(v); err != nil {
				envErr = fmt.Errorf("%s=%q: %v", env, v, err)
			}
		}
	})
	if envErr != nil {
		return nil, envErr
	}
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
	if c.logFormat != "json" && c.logFormat != "console" {
		return nil, fmt.Errorf("-log-format %q: want json or console", c.logFormat)
	}
	return c, nil
}

func newLogger(c *serveConfig, w io.Writer) (zerolog.Logger, error) {
	level, err := zerolog.ParseLevel(c.logLevel)
	if err != nil {
		return zerolog.Nop(), fmt.Errorf("-log-level %q: %v", c.logLevel, err)
	}
	if c.logFormat == "console" {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.RFC3339}
	}
	return zerolog.New(w).Level(level).With().Timestamp().Logger(), nil
}

// runServe runs the daemon until ctx ends or a signal arrives. ready, if
// not nil, receives the bound address once the server accepts calls.
func runServe(ctx context.Context, args []string, stderr io.Writer, ready chan<- string) int {
	c, err := parseServeFlags(args, stderr, os.Getenv)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "flightd: %v\n", err)
		return 2
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
	if err := os.MkdirAll(c.data, 0o755); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	store, err := storage.NewLocal(c.data)
	if err != nil {
		return fmt.Errorf("data directory %s: %w", c.data, err)
	}
	if c.demo {
		if err := createDemoArrays(ctx, store, log); err != nil {
			return fmt.Errorf("demo arrays: %w", err)
		}
	}
	tokens, err := flight.LoadTokens(c.tokensFile, c.tokens)
	if err != nil {
		return err
	}
	cfg := flight.Config{
		Store: store, Log: log, MemoryBudget: c.memoryBudget, MaxWorkingSet: c.maxWorkingSet, Workers: c.workers,
		MaxConcurrentStreams: c.maxQueries, MaxPutBytes: c.maxPutBytes, MaxFragmentBytes: c.maxFragBytes,
		Tokens: tokens,
	}
	if c.key != "" {
		cfg.EncryptionKey = []byte(c.key)
	}
	svc := flight.NewService(cfg)
	// Flight SQL on the same port (DESIGN §7).
	sqlServer, _, err := flightsql.New(svc, log, "1")
	if err != nil {
		return fmt.Errorf("flight sql: %w", err)
	}
	svc.SetSQL(sqlServer)

	unaryLog, streamLog := flight.AccessLog(log)
	unaryAuth, streamAuth := flight.AuthInterceptors(tokens)
	unaryRecover, streamRecover := flight.Recover(log)
	opts := []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(unaryLog, unaryAuth, unaryRecover),
		grpc.ChainStreamInterceptor(streamLog, streamAuth, streamRecover),
		grpc.MaxRecvMsgSize(c.maxMessageBytes),
		grpc.MaxConcurrentStreams(uint32(c.maxStreams)),
	}
	scheme := "grpc"
	if c.tlsCert != "" {
		creds, err := credentials.NewServerTLSFromFile(c.tlsCert, c.tlsKey)
		if err != nil {
			return fmt.Errorf("TLS: %w", err)
		}
		opts = append(opts, grpc.Creds(creds))
		scheme = "grpc+tls"
	}
	srv := grpc.NewServer(opts...)
	aflight.RegisterFlightServiceServer(srv, svc)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)

	lis, err := net.Listen("tcp", c.listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", c.listen, err)
	}
	addr := lis.Addr().String()
	if host, _, _ := net.SplitHostPort(addr); len(tokens) == 0 || scheme == "grpc" {
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			log.Warn().Str("listen", addr).Bool("auth", len(tokens) > 0).Bool("tls", scheme != "grpc").
				Msg("serving beyond loopback without both tokens and TLS: anyone who can reach this address can read (and without tokens, write)")
		}
	}
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus("arrow.flight.protocol.FlightService", healthpb.HealthCheckResponse_SERVING)

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	log.Info().Str("data", c.data).Str("url", scheme+"://"+addr).Msgf("flightd ready on %s://%s", scheme, addr)
	if ready != nil {
		ready <- addr
	}

	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigc)
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
	log.Info().Msg("flightd stopped")
	return nil
}
