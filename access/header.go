package access

import (
	"encoding/base64"
	"strings"
)

// creds are what an authorization header carries.
type creds struct {
	secret string // the bearer token, a JWT, or Basic's password
	user   string // Basic's user name, if any
}

// parseAuthorization reads an authorization header: "Bearer SECRET", or
// "Basic base64(user:password)" where the password is the secret (a lone
// user name counts as the secret when the password is empty). Clients
// differ in base64 padding: ADBC and the Flight SQL JDBC driver send none,
// pyarrow sends it; both are accepted, as is the URL-safe alphabet.
func parseAuthorization(header string) (creds, bool) {
	scheme, rest, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok {
		return creds{}, false
	}
	rest = strings.TrimSpace(rest)
	switch strings.ToLower(scheme) {
	case "bearer":
		return creds{secret: rest}, rest != ""
	case "basic":
		b, ok := decodeBase64(rest)
		if !ok {
			return creds{}, false
		}
		user, pass, found := strings.Cut(string(b), ":")
		if !found || pass == "" {
			return creds{secret: user}, user != ""
		}
		return creds{secret: pass, user: user}, true
	}
	return creds{}, false
}

// decodeBase64 decodes standard or URL-safe base64, padded or not.
func decodeBase64(s string) ([]byte, bool) {
	s = strings.TrimRight(s, "=")
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, true
		}
	}
	return nil, false
}

// ParseAuthorization reads an authorization header: its secret (the
// bearer token, or Basic's password) and Basic's user name; ok is false
// when the header is malformed.
func ParseAuthorization(header string) (secret, user string, ok bool) {
	c, ok := parseAuthorization(header)
	return c.secret, c.user, ok
}
