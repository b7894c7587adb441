package flightsvc

import (
	"context"
	"io"

	aflight "github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tileflight/tileflight/access"
)

// AuthInterceptors authenticate every call but the Handshake, the health
// service and reflection (package access), and record who called in the
// access log. With no credentials configured they let everything through.
func AuthInterceptors(a *access.Authenticator) (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	return a.Interceptors(func(ctx context.Context, p *access.Principal) {
		callInfo(ctx).SetPrincipal(p)
	})
}

// Handshake implements the basic-auth-to-bearer flow of Flight clients
// (pyarrow's authenticate_basic_token, ADBC, JDBC): credentials come in
// the authorization header, "Basic base64(user:token)" or "Bearer token",
// and valid ones are answered with "authorization: Bearer token" in the
// response headers, the bearer token for the session. A client that sends
// the token as a handshake payload gets it echoed back. Without
// credentials configured the handshake succeeds.
func (s *Service) Handshake(stream aflight.FlightService_HandshakeServer) error {
	ctx := stream.Context()
	enabled := s.cfg.Auth.Enabled()
	// The header is read once here and its secret checked once below
	// (the interceptors leave the Handshake to this method).
	var secret, user string
	if md, ok := metadata.FromIncomingContext(ctx); ok && len(md.Get("authorization")) > 0 {
		var valid bool
		if secret, user, valid = access.ParseAuthorization(md.Get("authorization")[0]); !valid && enabled {
			return status.Error(codes.Unauthenticated, "malformed authorization header: "+access.Hint)
		}
	}
	// The client's first message, if any, may hold the token.
	var payload []byte
	req, err := stream.Recv()
	if err != nil && err != io.EOF {
		return err
	}
	if err == nil && secret == "" && len(req.Payload) > 0 && len(req.Payload) < 4096 {
		payload = req.Payload
		secret = string(req.Payload)
	}
	cn := access.ClientCertCN(ctx)
	if !enabled {
		if cn != "" {
			callInfo(ctx).SetPrincipal(&access.Principal{Name: "cert:" + cn, CertCN: cn, Level: access.ReadWrite})
		}
		return nil
	}
	if secret == "" {
		return status.Error(codes.Unauthenticated, "handshake without credentials: "+access.Hint)
	}
	p, err := s.cfg.Auth.CheckSecret(secret)
	if err != nil {
		return err
	}
	p.User, p.CertCN = user, cn
	callInfo(ctx).SetPrincipal(p)
	if err := stream.SendHeader(metadata.Pairs("authorization", "Bearer "+secret)); err != nil {
		return err
	}
	if payload != nil {
		return stream.Send(&aflight.HandshakeResponse{Payload: payload})
	}
	return nil
}
