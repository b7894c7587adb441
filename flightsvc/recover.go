package flightsvc

import (
	"context"
	"fmt"
	"runtime/debug"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Recover returns interceptors that turn a panic in a handler into an
// Internal status for that call alone, logged with its stack: a bug met by
// one request must never stop the daemon and every other client's streams
// (docs/protocol.md, "Queries, tickets and descriptors"). They belong innermost, after the access log, so the log
// line still reports the call.
func Recover(log zerolog.Logger) (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	report := func(method string, p any) error {
		log.Error().Str("method", method).Str("panic", fmt.Sprint(p)).Str("stack", string(debug.Stack())).Msg("handler panicked; the call fails, the daemon keeps serving")
		return status.Errorf(codes.Internal, "internal error in %s (a bug, logged by the server): %v", method, p)
	}
	unary := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
		defer func() {
			if p := recover(); p != nil {
				resp, err = nil, report(info.FullMethod, p)
			}
		}()
		return handler(ctx, req)
	}
	stream := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = report(info.FullMethod, p)
			}
		}()
		return handler(srv, ss)
	}
	return unary, stream
}
