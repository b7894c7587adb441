package flightsvc

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	aflight "github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Access is what a bearer token allows.
type Access uint8

// The access levels of a token.
const (
	ReadOnly Access = iota + 1
	ReadWrite
)

func (a Access) String() string {
	switch a {
	case ReadOnly:
		return "ro"
	case ReadWrite:
		return "rw"
	}
	return "none"
}

// Tokens maps bearer tokens to what they allow. A nil or empty Tokens
// means authentication is off.
type Tokens map[string]Access

type accessKey struct{}

// ParseTokens reads token lines "TOKEN rw" or "TOKEN ro" (also "TOKEN:rw";
// the level defaults to rw). Lines may also be separated by "," or ";"
// so that one environment variable can hold several; "#" starts a comment.
func ParseTokens(text string) (Tokens, error) {
	t := Tokens{}
	split := func(r rune) bool { return r == '\n' || r == ',' || r == ';' }
	for i, line := range strings.FieldsFunc(text, split) {
		if j := strings.IndexByte(line, '#'); j >= 0 {
			line = line[:j]
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		fields := strings.Fields(strings.Replace(line, ":", " ", 1))
		level := "rw"
		switch len(fields) {
		case 1:
		case 2:
			level = fields[1]
		case 3:
			// "TOKEN rw NAME": the name the access log shows for it.
			level = fields[1]
			tokenNames.Store(fields[0], fields[2])
		default:
			return nil, fmt.Errorf("token entry %d: want \"TOKEN rw|ro [NAME]\"", i+1)
		}
		switch strings.ToLower(level) {
		case "rw":
			t[fields[0]] = ReadWrite
		case "ro":
			t[fields[0]] = ReadOnly
		default:
			return nil, fmt.Errorf("token entry %d: access %q: want rw or ro", i+1, level)
		}
	}
	return t, nil
}

// LoadTokens merges the tokens of a file (may be "") and of an
// environment value (may be "").
func LoadTokens(file, env string) (Tokens, error) {
	t := Tokens{}
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("tokens file: %w", err)
		}
		ft, err := ParseTokens(string(b))
		if err != nil {
			return nil, fmt.Errorf("tokens file %s: %w", file, err)
		}
		for k, v := range ft {
			t[k] = v
		}
	}
	if env != "" {
		et, err := ParseTokens(env)
		if err != nil {
			return nil, fmt.Errorf("TILEFLIGHT_TOKENS: %w", err)
		}
		for k, v := range et {
			t[k] = v
		}
	}
	return t, nil
}

// tokenNames maps a token to the name its entry gave ("TOKEN rw NAME").
// It is a process-wide map rather than part of Tokens so that Tokens stays
// the plain token -> access map its users build; a token named in one
// file has that name wherever it is used.
var tokenNames sync.Map

// TokenName is what the access log calls a token: the name its entry gave,
// or else "sha256:" and the first 12 hex digits of the token's SHA-256
// (printf %s TOKEN | sha256sum), never the secret itself.
func TokenName(tok string) string {
	if v, ok := tokenNames.Load(tok); ok {
		return v.(string)
	}
	sum := sha256.Sum256([]byte(tok))
	return "sha256:" + hex.EncodeToString(sum[:6])
}

// lookup compares in constant time per token so that response timing does
// not reveal how much of a guess was right.
func (t Tokens) lookup(tok string) (Access, bool) {
	var found Access
	for k, v := range t {
		if subtle.ConstantTimeCompare([]byte(k), []byte(tok)) == 1 {
			found = v
		}
	}
	return found, found != 0
}

// tokenFrom extracts the token of an authorization header: "Bearer TOKEN",
// or "Basic base64(user:TOKEN)" (the token as the password; a lone user
// name counts when the password is empty).
func tokenFrom(header string) (string, bool) {
	scheme, rest, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok {
		return "", false
	}
	rest = strings.TrimSpace(rest)
	switch strings.ToLower(scheme) {
	case "bearer":
		return rest, rest != ""
	case "basic":
		b, err := base64.StdEncoding.DecodeString(rest)
		if err != nil {
			return "", false
		}
		user, pass, _ := strings.Cut(string(b), ":")
		if pass == "" {
			pass = user
		}
		return pass, pass != ""
	}
	return "", false
}

const (
	handshakeMethod = "/arrow.flight.protocol.FlightService/Handshake"
	healthPrefix    = "/grpc.health.v1.Health/"
	// Reflection describes the services (public knowledge, like ListActions'
	// names), so that grpcurl works without a token.
	reflectionPrefix = "/grpc.reflection."
)

const authHint = "send the header \"authorization: Bearer <token>\" (pyarrow: FlightCallOptions(headers=[(b\"authorization\", b\"Bearer <token>\")]), or client.authenticate_basic_token(\"any\", \"<token>\") first)"

// authorize checks the call's credentials and returns the context carrying
// the caller's access level.
func (t Tokens) authorize(ctx context.Context, method string) (context.Context, error) {
	if len(t) == 0 || method == handshakeMethod || strings.HasPrefix(method, healthPrefix) || strings.HasPrefix(method, reflectionPrefix) {
		return ctx, nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get("authorization")
	if len(vals) == 0 {
		return nil, status.Error(codes.Unauthenticated, "this server requires a token: "+authHint)
	}
	tok, ok := tokenFrom(vals[0])
	if !ok {
		return nil, status.Error(codes.Unauthenticated, "malformed authorization header: "+authHint)
	}
	a, ok := t.lookup(tok)
	if !ok {
		return nil, status.Error(codes.Unauthenticated, "unknown token: check it against the server's -tokens-file or TILEFLIGHT_TOKENS")
	}
	callInfo(ctx).SetToken(TokenName(tok))
	return context.WithValue(ctx, accessKey{}, a), nil
}

// AuthInterceptors check bearer tokens on every call but the Handshake, the
// health service and reflection. With no tokens they let everything through.
func AuthInterceptors(t Tokens) (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	unary := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		ctx, err := t.authorize(ctx, info.FullMethod)
		if err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
	stream := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx, err := t.authorize(ss.Context(), info.FullMethod)
		if err != nil {
			return err
		}
		return handler(srv, &ctxStream{ServerStream: ss, ctx: ctx})
	}
	return unary, stream
}

// Handshake implements the basic-auth-to-bearer flow of Flight clients
// (pyarrow's authenticate_basic_token): credentials come in the
// authorization header, "Basic base64(user:token)" or "Bearer token", and
// a valid token is answered with "authorization: Bearer token" in the
// response headers. A client that sends the token as a handshake payload
// gets it echoed back. Without tokens configured the handshake succeeds.
func (s *Service) Handshake(stream aflight.FlightService_HandshakeServer) error {
	ctx := stream.Context()
	tokens := s.cfg.Tokens
	var tok string
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get("authorization"); len(v) > 0 {
			t, ok := tokenFrom(v[0])
			if !ok {
				return status.Error(codes.Unauthenticated, "malformed authorization header: "+authHint)
			}
			tok = t
		}
	}
	// Drain the client's messages; a payload may hold the token.
	var payload []byte
	for {
		req, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if tok == "" && len(req.Payload) > 0 && len(req.Payload) < 4096 {
			payload = req.Payload
			tok = string(req.Payload)
		}
		break
	}
	if len(tokens) == 0 {
		return nil
	}
	if tok == "" {
		return status.Error(codes.Unauthenticated, "handshake without credentials: "+authHint)
	}
	if _, ok := tokens.lookup(tok); !ok {
		return status.Error(codes.Unauthenticated, "unknown token: check it against the server's -tokens-file or TILEFLIGHT_TOKENS")
	}
	if err := stream.SendHeader(metadata.Pairs("authorization", "Bearer "+tok)); err != nil {
		return err
	}
	if payload != nil {
		return stream.Send(&aflight.HandshakeResponse{Payload: payload})
	}
	return nil
}
