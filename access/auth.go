package access

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// Config says where the credentials come from.
type Config struct {
	TokensFile string    // tokens file; "" for none
	TokensEnv  string    // tokens given inline (TILEFLIGHT_TOKENS, -tokens)
	JWT        JWTConfig // JWT checking, when KeysFile is set
	// RequireClientCert is set when the listener demands client
	// certificates (mTLS): the certificate's CN then names the principal
	// of calls that carry no other credential.
	RequireClientCert bool
}

// Authenticator checks the credentials of each call. Its token set and
// JWT keys can be re-read while it serves (Reload); calls in flight keep
// the set they started with.
type Authenticator struct {
	cfg   Config
	state atomic.Pointer[authState]
	mu    sync.Mutex // serializes Reload
	now   func() time.Time
}

type authState struct {
	tokens *Tokens
	jwt    *jwtVerifier
}

// New loads the credentials of cfg. A malformed tokens file or key set is
// an error naming the file and line: a daemon must not start with a
// credential set other than the one its operator wrote.
func New(cfg Config) (*Authenticator, error) {
	a := &Authenticator{cfg: cfg, now: time.Now}
	st, err := a.load()
	if err != nil {
		return nil, err
	}
	a.state.Store(st)
	return a, nil
}

// NewWithTokens is an Authenticator over a token set built in code (tests,
// embedded servers).
func NewWithTokens(t *Tokens) *Authenticator {
	a := &Authenticator{now: time.Now}
	if t == nil {
		t = &Tokens{}
	}
	a.state.Store(&authState{tokens: t})
	return a
}

func (a *Authenticator) load() (*authState, error) {
	st := &authState{tokens: &Tokens{byHash: map[[32]byte]*tokenEntry{}}}
	if a.cfg.TokensFile != "" {
		b, err := os.ReadFile(a.cfg.TokensFile)
		if err != nil {
			return nil, fmt.Errorf("tokens file: %w", err)
		}
		ft, err := ParseTokens(string(b))
		if err != nil {
			return nil, fmt.Errorf("tokens file %s: %w", a.cfg.TokensFile, err)
		}
		st.tokens.merge(ft)
	}
	if a.cfg.TokensEnv != "" {
		et, err := ParseTokens(a.cfg.TokensEnv)
		if err != nil {
			return nil, fmt.Errorf("TILEFLIGHT_TOKENS: %w", err)
		}
		st.tokens.merge(et)
	}
	if a.cfg.JWT.KeysFile != "" {
		v, err := loadJWT(a.cfg.JWT)
		if err != nil {
			return nil, err
		}
		st.jwt = v
	}
	return st, nil
}

// Reload re-reads the tokens file and the JWT keys. On an error the old
// set stays in force and the error says why; on success a removed token
// is refused from its next call on, and nothing else changes.
func (a *Authenticator) Reload() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	st, err := a.load()
	if err != nil {
		return err
	}
	a.state.Store(st)
	return nil
}

// Enabled reports whether calls must carry credentials.
func (a *Authenticator) Enabled() bool {
	if a == nil {
		return false
	}
	st := a.state.Load()
	return st.tokens.Len() > 0 || st.jwt != nil
}

// TokenCount is the number of tokens in force.
func (a *Authenticator) TokenCount() int {
	if a == nil {
		return 0
	}
	return a.state.Load().tokens.Len()
}

const (
	handshakeMethod = "/arrow.flight.protocol.FlightService/Handshake"
	healthPrefix    = "/grpc.health.v1.Health/"
	// Reflection describes the services (public knowledge, like
	// ListActions' names), so that grpcurl works without a token.
	reflectionPrefix = "/grpc.reflection."
)

// Hint is what an unauthenticated caller is told to do.
const Hint = "send the header \"authorization: Bearer <token>\" (pyarrow: FlightCallOptions(headers=[(b\"authorization\", b\"Bearer <token>\")]), or client.authenticate_basic_token(\"any\", \"<token>\") first; ADBC and JDBC: username any, password the token)"

// Exempt reports whether a method needs no credentials.
func Exempt(method string) bool {
	return method == handshakeMethod || strings.HasPrefix(method, healthPrefix) || strings.HasPrefix(method, reflectionPrefix)
}

// Authenticate checks the credentials of a call's incoming metadata and
// returns the principal they name. With authentication off it returns a
// nil principal (or, with client certificates, one that only names the
// peer and grants everything) and no error.
func (a *Authenticator) Authenticate(ctx context.Context) (*Principal, error) {
	cn := ClientCertCN(ctx)
	if !a.Enabled() {
		if cn != "" {
			return &Principal{Name: "cert:" + cn, CertCN: cn, Level: ReadWrite}, nil
		}
		return nil, nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get("authorization")
	if len(vals) == 0 {
		return nil, status.Error(codes.Unauthenticated, "this server requires credentials: "+Hint)
	}
	c, ok := parseAuthorization(vals[0])
	if !ok {
		return nil, status.Error(codes.Unauthenticated, "malformed authorization header: "+Hint)
	}
	p, err := a.check(c.secret)
	if err != nil {
		return nil, err
	}
	p.User, p.CertCN = c.user, cn
	return p, nil
}

// check finds what a secret grants: a JWT when it looks like one and JWTs
// are configured, else a token of the tokens file.
func (a *Authenticator) check(secret string) (*Principal, error) {
	st := a.state.Load()
	if st.jwt != nil && looksLikeJWT(secret) {
		p, err := st.jwt.verify(secret, a.now())
		if err != nil {
			return nil, status.Error(codes.Unauthenticated, err.Error())
		}
		return p, nil
	}
	e, ok := st.tokens.lookup(secret)
	if !ok {
		return nil, status.Error(codes.Unauthenticated, "unknown token: check it against the server's -tokens-file or TILEFLIGHT_TOKENS")
	}
	return e.principal(), nil
}

// CheckSecret is Authenticate for a secret that arrived another way (a
// Flight Handshake payload).
func (a *Authenticator) CheckSecret(secret string) (*Principal, error) {
	if !a.Enabled() {
		return nil, nil
	}
	return a.check(secret)
}

// ClientCertCN is the subject CN of the call's verified client
// certificate, or "".
func ClientCertCN(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok || p.AuthInfo == nil {
		return ""
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(ti.State.VerifiedChains) == 0 || len(ti.State.VerifiedChains[0]) == 0 {
		return ""
	}
	return ti.State.VerifiedChains[0][0].Subject.CommonName
}

// Interceptors authenticate every call but the Handshake, the health
// service and reflection, and put the principal on the call's context.
// seen, if not nil, is told each call's principal (the access log).
func (a *Authenticator) Interceptors(seen func(context.Context, *Principal)) (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	auth := func(ctx context.Context, method string) (context.Context, error) {
		if Exempt(method) {
			return ctx, nil
		}
		p, err := a.Authenticate(ctx)
		if err != nil {
			return nil, err
		}
		if p == nil {
			return ctx, nil
		}
		if seen != nil {
			seen(ctx, p)
		}
		return WithPrincipal(ctx, p), nil
	}
	unary := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		ctx, err := auth(ctx, info.FullMethod)
		if err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
	stream := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx, err := auth(ss.Context(), info.FullMethod)
		if err != nil {
			return err
		}
		return handler(srv, &ctxStream{ServerStream: ss, ctx: ctx})
	}
	return unary, stream
}

type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *ctxStream) Context() context.Context { return s.ctx }

// NewFromText is an Authenticator over tokens given as tokens-file text
// (tests, embedded servers).
func NewFromText(text string) (*Authenticator, error) {
	t, err := ParseTokens(text)
	if err != nil {
		return nil, err
	}
	return NewWithTokens(t), nil
}
