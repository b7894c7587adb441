package access

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// JWTConfig is how JWT bearer tokens are checked.
type JWTConfig struct {
	KeysFile string // a JWKS document (RS256, ES256 and EdDSA keys)
	Issuer   string // required "iss", if not empty
	Audience string // required in "aud", if not empty
}

// jwtVerifier checks JWTs against one loaded key set.
type jwtVerifier struct {
	cfg  JWTConfig
	keys jose.JSONWebKeySet
}

// jwtAlgorithms are the signatures accepted: the ones the key types of a
// JWKS file here may hold. "none" and HMAC are never accepted.
var jwtAlgorithms = []jose.SignatureAlgorithm{jose.RS256, jose.ES256, jose.EdDSA}

// The claims tileflight reads besides the registered ones.
type tileflightClaims struct {
	Access   string   `json:"tileflight_access"`
	Prefixes []string `json:"tileflight_prefixes"`
}

func loadJWT(cfg JWTConfig) (*jwtVerifier, error) {
	b, err := os.ReadFile(cfg.KeysFile)
	if err != nil {
		return nil, fmt.Errorf("JWT keys: %w", err)
	}
	v := &jwtVerifier{cfg: cfg}
	if err := json.Unmarshal(b, &v.keys); err != nil {
		return nil, fmt.Errorf("JWT keys %s: not a JWKS document: %w", cfg.KeysFile, err)
	}
	if len(v.keys.Keys) == 0 {
		return nil, fmt.Errorf("JWT keys %s: no keys", cfg.KeysFile)
	}
	for i, k := range v.keys.Keys {
		if k.KeyID == "" {
			return nil, fmt.Errorf("JWT keys %s: key %d has no \"kid\"", cfg.KeysFile, i+1)
		}
		if !k.IsPublic() {
			return nil, fmt.Errorf("JWT keys %s: key %q is not a public key (a JWKS file for verification holds public keys only)", cfg.KeysFile, k.KeyID)
		}
	}
	return v, nil
}

// looksLikeJWT tells a compact JWS ("header.payload.signature") from an
// opaque token.
func looksLikeJWT(s string) bool { return strings.Count(s, ".") == 2 && strings.HasPrefix(s, "eyJ") }

// verify checks the token's signature, time window, issuer and audience
// and returns the principal its claims describe. The error says what
// failed, for the client (no secret is in it).
func (v *jwtVerifier) verify(raw string, now time.Time) (*Principal, error) {
	tok, err := jwt.ParseSigned(raw, jwtAlgorithms)
	if err != nil {
		return nil, fmt.Errorf("JWT: %v", err)
	}
	if len(tok.Headers) != 1 {
		return nil, fmt.Errorf("JWT: want one signature")
	}
	kid := tok.Headers[0].KeyID
	keys := v.keys.Key(kid)
	if kid == "" || len(keys) == 0 {
		return nil, fmt.Errorf("JWT: unknown key id %q", kid)
	}
	var std jwt.Claims
	var ours tileflightClaims
	if err := tok.Claims(keys[0].Key, &std, &ours); err != nil {
		return nil, fmt.Errorf("JWT: bad signature: %v", err)
	}
	exp := jwt.Expected{Issuer: v.cfg.Issuer, Time: now}
	if v.cfg.Audience != "" {
		exp.AnyAudience = jwt.Audience{v.cfg.Audience}
	}
	if err := std.ValidateWithLeeway(exp, 30*time.Second); err != nil {
		return nil, fmt.Errorf("JWT: %v", err)
	}
	if std.Expiry == nil {
		return nil, fmt.Errorf("JWT: no \"exp\" claim (tokens without an expiry are refused)")
	}
	p := &Principal{Name: "jwt:" + std.Subject, Level: ReadOnly}
	switch strings.ToLower(ours.Access) {
	case "rw":
		p.Level = ReadWrite
	case "ro", "":
	default:
		return nil, fmt.Errorf("JWT: tileflight_access %q: want \"rw\" or \"ro\"", ours.Access)
	}
	for _, pre := range ours.Prefixes {
		if pre == "" || strings.HasPrefix(pre, "/") || strings.Contains(pre, "..") {
			return nil, fmt.Errorf("JWT: tileflight_prefixes entry %q: want a relative array path", pre)
		}
	}
	if ours.Prefixes != nil && len(ours.Prefixes) == 0 {
		// An explicit empty list reaches nothing, unlike an absent claim.
		ours.Prefixes = []string{"\x00none"}
	}
	p.Prefixes = ours.Prefixes
	return p, nil
}
