package flightsvc

import (
	"context"
	"github.com/tileflight/tileflight/access"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/tileflight/tileflight/metrics"
	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// CallInfo collects what the access log reports about one RPC. Handlers
// fill it in through the context as they learn the array name and stream
// rows and bytes.
type CallInfo struct {
	array atomic.Pointer[string]
	token atomic.Pointer[string]
	user  atomic.Pointer[string]
	cert  atomic.Pointer[string]
	rows  atomic.Int64
	bytes atomic.Int64
}

type callInfoKey struct{}

// callInfo returns the CallInfo of the current RPC (a throwaway one when
// the context has none, so handlers never need to check).
func callInfo(ctx context.Context) *CallInfo {
	if ci, ok := ctx.Value(callInfoKey{}).(*CallInfo); ok {
		return ci
	}
	return &CallInfo{}
}

// SetArray records the array an RPC is about.
func (c *CallInfo) SetArray(name string) { c.array.Store(&name) }

// SetToken records the name of the token the call authenticated with.
func (c *CallInfo) SetToken(name string) { c.token.Store(&name) }

// SetPrincipal records who the call authenticated as: the credential's
// name, the Basic user name and the client certificate's CN, when given.
func (c *CallInfo) SetPrincipal(p *access.Principal) {
	if p == nil {
		return
	}
	if p.Name != "" {
		c.SetToken(p.Name)
	}
	if p.User != "" {
		c.user.Store(&p.User)
	}
	if p.CertCN != "" {
		c.cert.Store(&p.CertCN)
	}
}

// AddRows adds to the row count.
func (c *CallInfo) AddRows(n int64) { c.rows.Add(n) }

// AddBytes adds to the byte count.
func (c *CallInfo) AddBytes(n int64) { c.bytes.Add(n) }

func (c *CallInfo) log(ctx context.Context, ev *zerolog.Event, method string, start time.Time, err error) {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		ev = ev.Str("peer", p.Addr.String())
	}
	if t := c.token.Load(); t != nil {
		ev = ev.Str("token", *t)
	}
	if u := c.user.Load(); u != nil {
		ev = ev.Str("user", *u)
	}
	if cn := c.cert.Load(); cn != nil {
		ev = ev.Str("cert_cn", *cn)
	}
	if a := c.array.Load(); a != nil {
		ev = ev.Str("array", *a)
	}
	st := status.Convert(err)
	ev.Str("method", method).
		Int64("rows", c.rows.Load()).
		Int64("bytes", c.bytes.Load()).
		Dur("duration", time.Since(start)).
		Str("status", st.Code().String())
	if err != nil {
		ev = ev.Str("error", st.Message())
	}
	ev.Msg("call")
}

// AccessLog returns interceptors that write one log line per call with the
// peer, the credential's name (a token's name or fingerprint, a JWT's
// subject), the Basic user name and the client certificate's CN, method, array, rows, bytes,
// duration and status.
func AccessLog(log zerolog.Logger) (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	return AccessLogWith(log, nil)
}

// AccessLogWith is AccessLog that also reports each call's rows and bytes
// to m (which may be nil).
func AccessLogWith(log zerolog.Logger, m *metrics.Metrics) (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	level := func(err error) *zerolog.Event {
		if err != nil {
			return log.Warn()
		}
		return log.Info()
	}
	unary := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		ci := &CallInfo{}
		start := time.Now()
		resp, err := handler(context.WithValue(ctx, callInfoKey{}, ci), req)
		ci.log(ctx, level(err), info.FullMethod, start, err)
		m.ObserveCall(info.FullMethod, ci.rows.Load(), ci.bytes.Load())
		return resp, err
	}
	stream := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ci := &CallInfo{}
		start := time.Now()
		err := handler(srv, &ctxStream{ServerStream: ss, ctx: context.WithValue(ss.Context(), callInfoKey{}, ci)})
		ci.log(ss.Context(), level(err), info.FullMethod, start, err)
		m.ObserveCall(info.FullMethod, ci.rows.Load(), ci.bytes.Load())
		return err
	}
	return unary, stream
}

type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *ctxStream) Context() context.Context { return s.ctx }
