package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"github.com/tileflight/tileflight/metrics"
)

// version and commit are stamped by the Makefile:
//
//	go build -ldflags "-X main.version=$(git describe) -X main.commit=$(git rev-parse HEAD)"
//
// Without the stamp, versionInfo falls back to what the Go toolchain
// recorded (the module version of `go install`, and vcs.revision when
// built in a checkout without -buildvcs=false).
var (
	version = ""
	commit  = ""
)

// versionInfo returns the version, the commit ("unknown" when neither the
// stamp nor the build info has one) and whether the tree was modified.
func versionInfo() (ver, rev string, modified bool) {
	ver, rev = version, commit
	if bi, ok := debug.ReadBuildInfo(); ok {
		if ver == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			ver = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if rev == "" {
					rev = s.Value
				}
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	if ver == "" {
		ver = "dev"
	}
	if rev == "" {
		rev = "unknown"
	}
	return ver, rev, modified
}

// printVersion writes "flightd VERSION (commit C, goX.Y, os/arch)".
func printVersion(w io.Writer) {
	ver, rev, modified := versionInfo()
	if modified {
		rev += "-dirty"
	}
	fmt.Fprintf(w, "flightd %s (commit %s, %s, %s/%s)\n", ver, rev, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// sizeFlag is a byte size given as plain bytes ("1048576") or with units
// ("512MiB", "1GiB", "64 MB", "1.5GiB"), parsed by go-humanize: IEC units
// (KiB, MiB, GiB, TiB) are powers of 1024, SI units (kB, MB, GB) powers
// of 1000.
type sizeFlag struct{ p *int64 }

func (f sizeFlag) String() string {
	if f.p == nil {
		return "0"
	}
	return formatSize(*f.p)
}

func (f sizeFlag) Set(s string) error {
	v, err := parseSize(s)
	if err != nil {
		return err
	}
	*f.p = v
	return nil
}

// parseSize reads a byte size with optional units.
func parseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, errors.New("empty size")
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 {
			return 0, fmt.Errorf("size %q is negative", s)
		}
		return n, nil
	}
	if strings.HasPrefix(s, "-") {
		return 0, fmt.Errorf("size %q is negative", s)
	}
	v, err := humanize.ParseBytes(s)
	if err != nil {
		return 0, fmt.Errorf("size %q: want bytes, or a number with a unit such as 512MiB or 1GiB", s)
	}
	if v > math.MaxInt64 {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return int64(v), nil
}

// formatSize prints n in the largest IEC unit that divides it exactly, so
// that the printed default parses back to the same value.
func formatSize(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for i < len(units)-1 && n != 0 && n%1024 == 0 {
		n /= 1024
		i++
	}
	if i == 0 {
		return strconv.FormatInt(n, 10)
	}
	return strconv.FormatInt(n, 10) + units[i]
}

// colorOK reports whether console logs may carry ANSI colours: only on a
// terminal, and never when NO_COLOR is set (https://no-color.org).
func colorOK(w io.Writer, getenv func(string) string) bool {
	if getenv("NO_COLOR") != "" {
		return false
	}
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// serveMetrics serves m on addr until ctx ends, with /healthz (the process
// answers) and /readyz (ready answers nil: the data is reachable); it
// returns the bound address (port 0 picks one).
func serveMetrics(ctx context.Context, addr string, m *metrics.Metrics, ready func(context.Context) error, log zerolog.Logger) (string, func(), error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("-metrics-listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	ver, rev, _ := versionInfo()
	m.SetBuildInfo(ver, rev, runtime.Version())
	mux.Handle("/metrics", m.Handler())
	mux.Handle("/healthz", healthzHandler())
	mux.Handle("/readyz", readyzHandler(ready))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, "flightd: /metrics, /healthz, /readyz")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error().Err(err).Msg("metrics server stopped")
		}
	}()
	stop := func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}
	return lis.Addr().String(), stop, nil
}

// keepaliveOptions set the server's side of gRPC keepalive. The server
// pings a connection silent for 2 minutes and drops it when the ping is
// not answered within 20 s (a peer that vanished without a FIN), closes
// connections idle longer than idle (no call running; 0: never), and
// refuses clients that ping more often than every 10 s (a GOAWAY
// "too_many_pings"), while allowing pings on connections with no call,
// which is what pyarrow's and grpc-go's default keepalive do.
func keepaliveOptions(idle time.Duration) []grpc.ServerOption {
	params := keepalive.ServerParameters{Time: 2 * time.Minute, Timeout: 20 * time.Second}
	if idle > 0 {
		params.MaxConnectionIdle = idle
	}
	return []grpc.ServerOption{
		grpc.KeepaliveParams(params),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
	}
}

// memoryLimitFlag is a sizeFlag that also takes -1 (or "none"): no limit.
type memoryLimitFlag struct{ p *int64 }

func (f memoryLimitFlag) String() string {
	if f.p != nil && *f.p < 0 {
		return "-1"
	}
	return sizeFlag(f).String()
}

func (f memoryLimitFlag) Set(s string) error {
	if t := strings.TrimSpace(s); t == "-1" || strings.EqualFold(t, "none") {
		*f.p = -1
		return nil
	}
	return sizeFlag(f).Set(s)
}
