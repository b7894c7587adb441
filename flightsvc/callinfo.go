package flightsvc

import (
	"context"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/tileflight/tileflight/calls"
	"github.com/tileflight/tileflight/metrics"
)

// CallInfo collects what the access log reports about one RPC (package
// calls). Handlers fill it in through the context as they learn the array
// name and stream rows and bytes.
type CallInfo = calls.Info

// callInfo returns the CallInfo of the current RPC (a throwaway one when
// the context has none, so handlers never need to check).
func callInfo(ctx context.Context) *CallInfo { return calls.From(ctx) }

func logCall(c *CallInfo, ctx context.Context, ev *zerolog.Event, method string, start time.Time, err error) {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		ev = ev.Str("peer", p.Addr.String())
	}
	if t := c.Token(); t != "" {
		ev = ev.Str("token", t)
	}
	if u := c.User(); u != "" {
		ev = ev.Str("user", u)
	}
	if cn := c.CertCN(); cn != "" {
		ev = ev.Str("cert_cn", cn)
	}
	if a := c.Array(); a != "" {
		ev = ev.Str("array", a)
	}
	if q := c.SQL(); q != "" {
		if len(q) > 200 {
			q = q[:200]
		}
		ev = ev.Str("sql", q)
	}
	if as := c.Arrays(); len(as) > 0 {
		ev = ev.Strs("arrays", as)
	}
	st := status.Convert(err)
	ev.Str("method", method).
		Int64("rows", c.Rows()).
		Int64("bytes", c.Bytes()).
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
		resp, err := handler(calls.WithInfo(ctx, ci), req)
		logCall(ci, ctx, level(err), info.FullMethod, start, err)
		m.ObserveCall(info.FullMethod, ci.Rows(), ci.Bytes())
		return resp, err
	}
	stream := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ci := &CallInfo{}
		start := time.Now()
		err := handler(srv, &ctxStream{ServerStream: ss, ctx: calls.WithInfo(ss.Context(), ci)})
		logCall(ci, ss.Context(), level(err), info.FullMethod, start, err)
		m.ObserveCall(info.FullMethod, ci.Rows(), ci.Bytes())
		return err
	}
	return unary, stream
}

type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *ctxStream) Context() context.Context { return s.ctx }
