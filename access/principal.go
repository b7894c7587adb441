package access

import (
	"context"
	"strings"
)

// Level is what a credential allows.
type Level uint8

// The access levels.
const (
	ReadOnly Level = iota + 1
	ReadWrite
)

func (l Level) String() string {
	switch l {
	case ReadOnly:
		return "ro"
	case ReadWrite:
		return "rw"
	}
	return "none"
}

// Principal is the authenticated caller of one call.
type Principal struct {
	// Name is what the access log calls the credential: a token's name (or
	// its fingerprint), a JWT's subject, or a client certificate's CN when
	// that is all the call carries.
	Name string
	// User is the user name of Basic credentials, when the call sent one.
	User string
	// CertCN is the subject CN of the client certificate (mTLS), if any.
	CertCN string
	// Level is the access the credential grants.
	Level Level
	// Prefixes limit the arrays the caller reaches to those whose path
	// starts with one of them; none means every array.
	Prefixes []string
}

// Reaches reports whether the array (or .b2nd file) named name is within
// the principal's reach. A nil principal (authentication off) reaches
// everything.
func (p *Principal) Reaches(name string) bool {
	if p == nil || len(p.Prefixes) == 0 {
		return true
	}
	for _, pre := range p.Prefixes {
		if strings.HasPrefix(name, pre) {
			return true
		}
	}
	return false
}

// MayHoldReachable reports whether the folder dir (a path without a
// trailing slash; "" for the data root) may contain arrays within reach:
// true when a prefix lies below it or it lies below a prefix. Listings use
// it to show only the folders that lead somewhere.
func (p *Principal) MayHoldReachable(dir string) bool {
	if p == nil || len(p.Prefixes) == 0 || dir == "" {
		return true
	}
	for _, pre := range p.Prefixes {
		if strings.HasPrefix(pre, dir+"/") || strings.HasPrefix(dir+"/", pre) || strings.HasPrefix(dir, pre) {
			return true
		}
	}
	return false
}

// CanWrite reports whether the principal may change data. A nil principal
// (authentication off) may.
func (p *Principal) CanWrite() bool { return p == nil || p.Level == ReadWrite }

// Scoped reports whether the principal is limited to some arrays.
func (p *Principal) Scoped() bool { return p != nil && len(p.Prefixes) > 0 }

type principalKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext returns the call's principal, or nil when the call carries
// none (authentication off, or a call made inside the daemon).
func FromContext(ctx context.Context) *Principal {
	p, _ := ctx.Value(principalKey{}).(*Principal)
	return p
}

// Reaches reports whether the call's principal reaches the array name.
func Reaches(ctx context.Context, name string) bool { return FromContext(ctx).Reaches(name) }

// CanWrite reports whether the call's principal may change data.
func CanWrite(ctx context.Context) bool { return FromContext(ctx).CanWrite() }
