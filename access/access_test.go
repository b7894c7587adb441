package access

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

func levelOf(t *Tokens, tok string) Level {
	e, ok := t.lookup(tok)
	if !ok {
		return 0
	}
	return e.level
}

func TestParseTokens(t *testing.T) {
	tok, err := ParseTokens("# comment\nalpha rw\nbeta ro\n\ngamma\ndelta:ro, eps rw\nzeta ro dash prefix=lab/ prefix=shared/x")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Level{"alpha": ReadWrite, "beta": ReadOnly, "gamma": ReadWrite, "delta": ReadOnly, "eps": ReadWrite, "zeta": ReadOnly}
	if tok.Len() != len(want) {
		t.Fatalf("%d tokens, want %d", tok.Len(), len(want))
	}
	for k, v := range want {
		if got := levelOf(tok, k); got != v {
			t.Errorf("%s: %v, want %v", k, got, v)
		}
	}
	e, _ := tok.lookup("zeta")
	if p := e.principal(); p.Name != "dash" || strings.Join(p.Prefixes, ",") != "lab/,shared/x" {
		t.Errorf("zeta: %+v", p)
	}
	for _, c := range []struct{ text, err string }{
		{"x admin", "line 1"},
		{"a b c", "line 1"},
		{"ok rw\nbad rw name extra", "line 2"},
		{"ok rw\n\n# c\nt ro prefix=", "line 4"},
		{"t ro prefix=/abs", "relative"},
		{"t ro prefix=../up", "relative"},
		{"t ro scope=x", "unknown field"},
		{"a rw, b xx", "line 1, entry 2"},
		{"t rw ro", "twice"},
	} {
		_, err := ParseTokens(c.text)
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%q: error %v, want one naming %q", c.text, err, c.err)
		}
	}
}

func TestTokenNames(t *testing.T) {
	tok, err := ParseTokens("s3cret-a rw alice\ns3cret-b ro")
	if err != nil || levelOf(tok, "s3cret-a") != ReadWrite || levelOf(tok, "s3cret-b") != ReadOnly {
		t.Fatalf("%v", err)
	}
	if n := tok.TokenName("s3cret-a"); n != "alice" {
		t.Errorf("named token: %q", n)
	}
	// Unnamed: a fingerprint, never the secret.
	if n := tok.TokenName("s3cret-b"); n != "sha256:5bcde0d53c39" {
		t.Errorf("unnamed token: %q", n)
	}
	if len(tok.TokenName("x")) != len("sha256:")+12 {
		t.Errorf("fingerprint length: %q", tok.TokenName("x"))
	}
}

func TestParseAuthorization(t *testing.T) {
	b64 := base64.StdEncoding.EncodeToString
	raw := base64.RawStdEncoding.EncodeToString
	cases := []struct {
		h, secret, user string
		ok              bool
	}{
		{"Bearer abc", "abc", "", true},
		{"bearer  abc ", "abc", "", true},
		{"Basic " + b64([]byte("user:secret")), "secret", "user", true},
		{"Basic " + b64([]byte("secret")), "secret", "", true},
		{"Basic !!!", "", "", false},
		{"Bearer", "", "", false},
		{"Digest x", "", "", false},
	}
	// ADBC and JDBC send base64 without padding: every user and password
	// length from 1 to 16 decodes, padded or not.
	for ul := 1; ul <= 16; ul++ {
		for pl := 1; pl <= 16; pl++ {
			u, p := strings.Repeat("u", ul), strings.Repeat("p", pl)
			cases = append(cases,
				struct {
					h, secret, user string
					ok              bool
				}{"Basic " + raw([]byte(u+":"+p)), p, u, true},
				struct {
					h, secret, user string
					ok              bool
				}{"Basic " + b64([]byte(u+":"+p)), p, u, true})
		}
	}
	for _, c := range cases {
		got, ok := parseAuthorization(c.h)
		if got.secret != c.secret || got.user != c.user || ok != c.ok {
			t.Errorf("%q: %+v %v, want %q %q %v", c.h, got, ok, c.secret, c.user, c.ok)
		}
	}
}

func TestReaches(t *testing.T) {
	var none *Principal
	p := &Principal{Prefixes: []string{"lab/", "shared/x"}}
	for _, c := range []struct {
		name string
		want bool
	}{{"lab/a", true}, {"lab/deep/b", true}, {"shared/x", true}, {"shared/xy/z", true}, {"shared/y", false}, {"labx/a", false}, {"other", false}} {
		if got := p.Reaches(c.name); got != c.want {
			t.Errorf("Reaches(%q) = %v", c.name, got)
		}
		if !none.Reaches(c.name) {
			t.Errorf("no principal must reach %q", c.name)
		}
	}
	for _, c := range []struct {
		dir  string
		want bool
	}{{"", true}, {"lab", true}, {"lab/sub", true}, {"shared", true}, {"shared/x", true}, {"shared/y", false}, {"other", false}, {"la", false}} {
		if got := p.MayHoldReachable(c.dir); got != c.want {
			t.Errorf("MayHoldReachable(%q) = %v", c.dir, got)
		}
	}
}

func incoming(header string) context.Context {
	return metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", header))
}

func TestAuthenticateAndReload(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "tokens")
	write := func(text string) {
		if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("keep rw k\ngone ro g prefix=lab/\n")
	a, err := New(Config{TokensFile: file})
	if err != nil {
		t.Fatal(err)
	}
	p, err := a.Authenticate(incoming("Bearer gone"))
	if err != nil || p.Name != "g" || p.Level != ReadOnly || !p.Scoped() {
		t.Fatalf("%+v %v", p, err)
	}
	if _, err := a.Authenticate(incoming("Bearer nope")); status.Code(err) != codes.Unauthenticated {
		t.Errorf("unknown token: %v", err)
	}
	if _, err := a.Authenticate(context.Background()); status.Code(err) != codes.Unauthenticated {
		t.Errorf("no header: %v", err)
	}
	// A bad file on reload keeps the old set.
	write("keep rw k\nbroken xx\n")
	if err := a.Reload(); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("reload of a bad file: %v", err)
	}
	if _, err := a.Authenticate(incoming("Bearer gone")); err != nil {
		t.Errorf("old set must stay after a failed reload: %v", err)
	}
	// A good file replaces it: the removed token is refused.
	write("keep rw k\n")
	if err := a.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Authenticate(incoming("Bearer gone")); status.Code(err) != codes.Unauthenticated {
		t.Errorf("removed token still accepted: %v", err)
	}
	if _, err := a.Authenticate(incoming("Bearer keep")); err != nil {
		t.Errorf("kept token refused: %v", err)
	}
	// A daemon refuses to start on a bad file, naming the line.
	write("a rw\n\nb maybe\n")
	if _, err := New(Config{TokensFile: file}); err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("start with a bad file: %v", err)
	}
}

// jwks writes a JWKS file of the public halves of keys and returns it.
func jwks(t *testing.T, keys map[string]crypto.Signer) string {
	var set jose.JSONWebKeySet
	for kid, k := range keys {
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.Public(), KeyID: kid, Use: "sig"})
	}
	b, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

func sign(t *testing.T, alg jose.SignatureAlgorithm, key crypto.Signer, kid string, claims ...any) string {
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	if err != nil {
		t.Fatal(err)
	}
	b := jwt.Signed(sig)
	for _, c := range claims {
		b = b.Claims(c)
	}
	s, err := b.Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestJWT(t *testing.T) {
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	_, edKey, _ := ed25519.GenerateKey(rand.Reader)
	otherKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	file := jwks(t, map[string]crypto.Signer{"r": rsaKey, "e": ecKey, "d": edKey})
	a, err := New(Config{JWT: JWTConfig{KeysFile: file, Issuer: "https://idp", Audience: "tileflight"}})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	good := jwt.Claims{Subject: "ana", Issuer: "https://idp", Audience: jwt.Audience{"tileflight"},
		Expiry: jwt.NewNumericDate(now.Add(time.Hour)), IssuedAt: jwt.NewNumericDate(now)}
	scope := map[string]any{"tileflight_access": "rw", "tileflight_prefixes": []string{"lab/"}}
	with := func(f func(*jwt.Claims)) jwt.Claims { c := good; f(&c); return c }
	cases := []struct {
		name string
		tok  string
		ok   bool
	}{
		{"RS256", sign(t, jose.RS256, rsaKey, "r", good, scope), true},
		{"ES256", sign(t, jose.ES256, ecKey, "e", good, scope), true},
		{"EdDSA", sign(t, jose.EdDSA, edKey, "d", good, scope), true},
		{"expired", sign(t, jose.ES256, ecKey, "e", with(func(c *jwt.Claims) { c.Expiry = jwt.NewNumericDate(now.Add(-time.Hour)) })), false},
		{"not yet valid", sign(t, jose.ES256, ecKey, "e", with(func(c *jwt.Claims) { c.NotBefore = jwt.NewNumericDate(now.Add(time.Hour)) })), false},
		{"no expiry", sign(t, jose.ES256, ecKey, "e", with(func(c *jwt.Claims) { c.Expiry = nil })), false},
		{"wrong audience", sign(t, jose.ES256, ecKey, "e", with(func(c *jwt.Claims) { c.Audience = jwt.Audience{"other"} })), false},
		{"wrong issuer", sign(t, jose.ES256, ecKey, "e", with(func(c *jwt.Claims) { c.Issuer = "https://evil" })), false},
		{"unknown kid", sign(t, jose.ES256, ecKey, "zz", good), false},
		{"bad signature", sign(t, jose.ES256, otherKey, "e", good), false},
		{"bad access claim", sign(t, jose.ES256, ecKey, "e", good, map[string]any{"tileflight_access": "admin"}), false},
	}
	for _, c := range cases {
		p, err := a.Authenticate(incoming("Bearer " + c.tok))
		if c.ok != (err == nil) {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if err != nil {
			if status.Code(err) != codes.Unauthenticated {
				t.Errorf("%s: code %v", c.name, status.Code(err))
			}
			continue
		}
		if p.Name != "jwt:ana" || p.Level != ReadWrite || !p.Reaches("lab/a") || p.Reaches("other/a") {
			t.Errorf("%s: principal %+v", c.name, p)
		}
	}
	// No access claim: read-only, every array.
	p, err := a.Authenticate(incoming("Bearer " + sign(t, jose.ES256, ecKey, "e", good)))
	if err != nil || p.Level != ReadOnly || p.Scoped() {
		t.Errorf("default claims: %+v %v", p, err)
	}
	// A forged token whose header says "none".
	parts := strings.Split(sign(t, jose.ES256, ecKey, "e", good), ".")
	none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","kid":"e"}`)) + "." + parts[1] + "."
	if _, err := a.Authenticate(incoming("Bearer " + none)); status.Code(err) != codes.Unauthenticated {
		t.Errorf("alg none: %v", err)
	}
}

func FuzzParseTokens(f *testing.F) {
	f.Add("a rw\nb ro\n# c\n")
	f.Add("x:ro,y;z rw")
	f.Add("t ro name prefix=lab/ prefix=x")
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := ParseTokens(s)
		if err == nil {
			for _, e := range tok.byHash {
				if e.level != ReadOnly && e.level != ReadWrite {
					t.Fatalf("%q -> level %v", s, e.level)
				}
				for _, p := range e.prefixes {
					if p == "" || strings.HasPrefix(p, "/") {
						t.Fatalf("%q -> prefix %q", s, p)
					}
				}
			}
		}
	})
}

func FuzzAuthorizationHeader(f *testing.F) {
	f.Add("Bearer abc")
	f.Add("Basic dXNlcjpzZWNyZXQ=")
	f.Add("Basic dTpw")
	f.Add("Bearer eyJhbGciOiJub25lIn0.e30.")
	a, err := NewFromText("abc rw")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, h string) {
		c, ok := parseAuthorization(h)
		if ok && c.secret == "" {
			t.Fatalf("%q: ok with an empty secret", h)
		}
		p, err := a.Authenticate(incoming(h))
		if err == nil && (p == nil || p.Level != ReadWrite) {
			t.Fatalf("%q: accepted as %+v", h, p)
		}
		if err != nil && status.Code(err) != codes.Unauthenticated {
			t.Fatalf("%q: code %v", h, status.Code(err))
		}
	})
}
