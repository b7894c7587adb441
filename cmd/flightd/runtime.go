package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"runtime/debug"
	"time"

	"github.com/rs/zerolog"

	"github.com/tileflight/tileflight/reader/tileio"
)

// memoryLimit is the soft heap limit the daemon runs under. Decoded tiles
// are large, short-lived allocations: with the default GOGC the heap may
// grow to twice the live tiles before a collection, so a streamed scan
// would hold its budget twice over. A limit just above what a query may
// hold (its budget, plus the tile cache, the compressed tiles in flight
// and gRPC's buffers) makes the collector return that memory in time;
// under heavier load the heap may still grow past it (the limit is soft). GOMEMLIMIT,
// when set, is the operator's choice and is kept.
func memoryLimit(c *serveConfig, getenv func(string) string) int64 {
	switch {
	case c.memoryLimit > 0:
		return c.memoryLimit
	case c.memoryLimit < 0:
		return -1
	case getenv("GOMEMLIMIT") != "":
		return 0 // the runtime read it at start
	}
	budget := c.memoryBudget
	if budget <= 0 {
		budget = tileio.DefaultMemoryBudget
	}
	return budget + 256<<20
}

// gcPercent is the collector's pace unless GOGC says otherwise. The
// daemon's heap is mostly large pointer-free buffers (tiles, Arrow
// bodies), which a collection does not scan, so collecting twice as often
// as Go's default costs little CPU and keeps the heap at 1.5x what is
// live rather than 2x.
const gcPercent = 50

func applyMemoryLimit(c *serveConfig, log zerolog.Logger) {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	switch n := memoryLimit(c, os.Getenv); {
	case n > 0:
		debug.SetMemoryLimit(n)
		log.Debug().Int64("bytes", n).Msg("Go memory limit")
	case n < 0:
		debug.SetMemoryLimit(1<<63 - 1)
	}
}

// servePprof serves net/http/pprof on its own listener, so that profiles
// never share the Flight port (and its authentication story). It returns
// a function that stops it.
func servePprof(addr string, log zerolog.Logger) (func(), error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("-pprof %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error().Err(err).Msg("pprof server stopped")
		}
	}()
	if ip := net.ParseIP(hostOf(lis.Addr().String())); ip == nil || !ip.IsLoopback() {
		log.Warn().Str("pprof", lis.Addr().String()).Msg("pprof served beyond loopback: anyone who can reach it can profile the daemon")
	}
	log.Info().Str("pprof", "http://"+lis.Addr().String()+"/debug/pprof/").Msg("pprof profiles served")
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}

func hostOf(addr string) string {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return h
}
