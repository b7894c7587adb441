package sqlsvc

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"

	aflight "github.com/apache/arrow-go/v18/arrow/flight"
	flightpb "github.com/apache/arrow-go/v18/arrow/flight/gen/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/tileflight/tileflight/errkind"
)

// Flight SQL sessions (SetSessionOptions, GetSessionOptions,
// CloseSession). A session's options travel in its cookie itself (the
// JSON of the options, base64): the daemon keeps no session state, so a
// session is valid on every node, as statement handles are. The options
// tileflight knows are "catalog" (only "tileflight") and "schema", the
// db_schema unqualified table names resolve in (default "main").

// sessionCookie is the cookie name of the Flight session specification.
const sessionCookie = "arrow_flight_session_id"

// maxSessionCookie bounds what a client may send back as its session.
const maxSessionCookie = 4096

// sessionOptions are the options a session holds.
type sessionOptions struct {
	Catalog string `json:"catalog,omitempty"`
	Schema  string `json:"schema,omitempty"`
}

// sessionFrom reads the session of the call's cookie; a missing, foreign
// or malformed cookie is an empty session.
func sessionFrom(ctx context.Context) sessionOptions {
	var opts sessionOptions
	md, _ := metadata.FromIncomingContext(ctx)
	for _, line := range md.Get("cookie") {
		cookies, err := http.ParseCookie(line)
		if err != nil {
			continue
		}
		for _, c := range cookies {
			if c.Name != sessionCookie || len(c.Value) > maxSessionCookie {
				continue
			}
			b, err := base64.RawURLEncoding.DecodeString(c.Value)
			if err == nil && json.Unmarshal(b, &opts) == nil {
				return opts
			}
		}
	}
	return opts
}

// sendSession answers the session's cookie (a closed session: one that
// has expired).
func sendSession(ctx context.Context, opts sessionOptions, closed bool) {
	b, _ := json.Marshal(opts)
	c := http.Cookie{Name: sessionCookie, Value: base64.RawURLEncoding.EncodeToString(b)}
	if closed {
		c.Value, c.MaxAge = "", -1
	}
	_ = grpc.SetHeader(ctx, metadata.Pairs("set-cookie", c.String()))
}

type schemaKey struct{}

// withSchema makes schema the db_schema of the call's statements.
func withSchema(ctx context.Context, schema string) context.Context {
	if schema == "" {
		return ctx
	}
	return context.WithValue(ctx, schemaKey{}, schema)
}

// currentSchema is the db_schema unqualified names resolve in: the one a
// handle carried, else the session's, else "main".
func currentSchema(ctx context.Context) string {
	if s, ok := ctx.Value(schemaKey{}).(string); ok && s != "" {
		return s
	}
	if s := sessionFrom(ctx).Schema; s != "" {
		return s
	}
	return mainSchema
}

// SetSessionOptions sets "catalog" and "schema"; other names are
// INVALID_NAME, values of the wrong type or a catalog other than
// tileflight INVALID_VALUE, each in the result as the protocol asks.
func (s *Server) SetSessionOptions(ctx context.Context, req *aflight.SetSessionOptionsRequest) (*aflight.SetSessionOptionsResult, error) {
	opts := sessionFrom(ctx)
	res := &aflight.SetSessionOptionsResult{Errors: map[string]*aflight.SetSessionOptionsResultError{}}
	fail := func(name string, v flightpb.SetSessionOptionsResult_ErrorValue) {
		res.Errors[name] = &aflight.SetSessionOptionsResultError{Value: v}
	}
	for name, v := range req.GetSessionOptions() {
		str, isString := v.GetOptionValue().(*flightpb.SessionOptionValue_StringValue)
		switch strings.ToLower(name) {
		case "catalog":
			if !isString || str.StringValue != Catalog {
				fail(name, aflight.SetSessionOptionsResultErrorInvalidValue)
				continue
			}
			opts.Catalog = str.StringValue
		case "schema":
			if !isString || str.StringValue == "" || strings.Contains(str.StringValue, "..") {
				fail(name, aflight.SetSessionOptionsResultErrorInvalidValue)
				continue
			}
			opts.Schema = str.StringValue
		default:
			fail(name, aflight.SetSessionOptionsResultErrorInvalidName)
		}
	}
	sendSession(ctx, opts, false)
	return res, nil
}

// GetSessionOptions answers the session's options (catalog and schema,
// with their defaults).
func (s *Server) GetSessionOptions(ctx context.Context, _ *aflight.GetSessionOptionsRequest) (*aflight.GetSessionOptionsResult, error) {
	opts := sessionFrom(ctx)
	schema := opts.Schema
	if schema == "" {
		schema = mainSchema
	}
	vals, err := aflight.NewSessionOptionValues(map[string]any{"catalog": Catalog, "schema": schema})
	if err != nil {
		return nil, errkind.Errorf(errkind.Internal, "session options: %v", err)
	}
	return &aflight.GetSessionOptionsResult{SessionOptions: vals}, nil
}

// CloseSession ends the session: its cookie is expired. A call without a
// session closes nothing, and succeeds (ADBC closes every connection so).
func (s *Server) CloseSession(ctx context.Context, _ *aflight.CloseSessionRequest) (*aflight.CloseSessionResult, error) {
	sendSession(ctx, sessionOptions{}, true)
	return &aflight.CloseSessionResult{Status: aflight.CloseSessionResultClosed}, nil
}
