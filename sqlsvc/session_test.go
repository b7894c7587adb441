package sqlsvc

import (
	"context"
	"strings"
	"testing"

	aflight "github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// TestSessions: SetSessionOptions answers a cookie that makes "schema" the
// db_schema of unqualified table names on later calls (statement tickets
// carry it, so any node runs them); unknown names and wrong values are
// reported per option; GetSessionOptions reads the cookie back;
// CloseSession succeeds with or without a session and expires the cookie.
func TestSessions(t *testing.T) {
	sc, _ := serveSQL(t)
	ctx := context.Background()
	str := func(v string) *aflight.SessionOptionValue {
		o, err := aflight.NewSessionOptionValue(v)
		if err != nil {
			t.Fatal(err)
		}
		return &o
	}
	var hdr metadata.MD
	res, err := sc.SetSessionOptions(ctx, &aflight.SetSessionOptionsRequest{SessionOptions: map[string]*aflight.SessionOptionValue{
		"schema": str("g"), "catalog": str("tileflight"), "colour": str("red"), "nope": nil,
	}}, grpc.Header(&hdr))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Errors) != 2 || res.Errors["colour"] == nil || res.Errors["nope"] == nil {
		t.Errorf("errors: %v", res.Errors)
	}
	cookies := hdr.Get("set-cookie")
	if len(cookies) != 1 || !strings.HasPrefix(cookies[0], sessionCookie+"=") {
		t.Fatalf("set-cookie: %v", cookies)
	}
	cookie := strings.SplitN(cookies[0], ";", 2)[0]
	withSession := metadata.AppendToOutgoingContext(ctx, "cookie", cookie)

	got, err := sc.GetSessionOptions(withSession, &aflight.GetSessionOptionsRequest{})
	if err != nil || got.SessionOptions["schema"].GetStringValue() != "g" || got.SessionOptions["catalog"].GetStringValue() != "tileflight" {
		t.Fatalf("GetSessionOptions: %v %v", got, err)
	}
	// "pts" alone resolves in the session's schema, g.
	if out, _, err := rows(t, sc, "SELECT count(*) FROM pts"); err == nil {
		t.Errorf("without the session, pts must not resolve: %v", out)
	}
	info, err := sc.Execute(withSession, "SELECT count(*) FROM pts")
	if err != nil {
		t.Fatalf("with the session: %v", err)
	}
	// The ticket carries the schema: the DoGet needs no cookie.
	if got := readAll(t, sc, info); len(got) != 1 {
		t.Errorf("rows %v", got)
	}
	var closeHdr metadata.MD
	cr, err := sc.CloseSession(withSession, &aflight.CloseSessionRequest{}, grpc.Header(&closeHdr))
	if err != nil || cr.Status != aflight.CloseSessionResultClosed {
		t.Fatalf("CloseSession: %v %v", cr, err)
	}
	if c := closeHdr.Get("set-cookie"); len(c) != 1 || !strings.Contains(c[0], "Max-Age=0") {
		t.Errorf("closing must expire the cookie: %v", c)
	}
	if _, err := sc.CloseSession(ctx, &aflight.CloseSessionRequest{}); err != nil {
		t.Errorf("CloseSession without a session: %v", err)
	}
	// A malformed cookie is no session, never an error.
	bad := metadata.AppendToOutgoingContext(ctx, "cookie", sessionCookie+"=!!!not-base64; =x; "+sessionCookie+"=e30garbage")
	if got, err := sc.GetSessionOptions(bad, &aflight.GetSessionOptionsRequest{}); err != nil || got.SessionOptions["schema"].GetStringValue() != "main" {
		t.Errorf("malformed cookie: %v %v", got, err)
	}
}
