package errkind

import "errors"

// Two more kinds, used by sentinels (see Sentinel) and Classify.
var (
	// Unavailable: a dependency (the object store) stayed unreachable or
	// kept failing after every retry; the same call may succeed later.
	Unavailable = errors.New("unavailable")
	// Internal: the package that detects the condition cannot tell whose
	// fault it is (the user's input or the stored data); the caller that
	// knows wraps the error with that kind. Reaching the service
	// unclassified, it is a bug to fix.
	Internal = errors.New("internal")
)

// Rank says how a sentinel's kind weighs against the kinds wrapped around
// it on the way up.
type Rank int

const (
	// Plain: the kind counts as if the sentinel had been made with
	// Errorf: errors.Is(s, kind) holds and Of finds it.
	Plain Rank = iota
	// Overrides: the kind wins over every kind wrapped around the
	// sentinel (or beside it), because outer layers that cannot tell the
	// condition apart classify it more generally (a reader wraps what it
	// cannot decode as DataLoss; a failed decryption under it is the
	// operator's key, FailedPrecondition). Of does not see it (so
	// "errkind.Of(err) == nil" tests keep their meaning); Classify does.
	Overrides
	// Fallback: the kind counts only when nothing else classifies the
	// error. Of does not see it; Classify does.
	Fallback
)

// Sentinel is an error value declared once by the package that detects a
// condition, carrying its kind. Callers match it with errors.Is as any
// sentinel; Classify finds its kind through any wrapping.
type Sentinel struct {
	kind  error
	rank  Rank
	msg   string
	cause error
}

// New returns a sentinel of the given kind and rank with message msg.
func New(kind error, rank Rank, msg string) *Sentinel {
	return &Sentinel{kind: kind, rank: rank, msg: msg}
}

// NewWrapping is New for a sentinel that refines another: its message is
// msg + ": " + cause's, and errors.Is(s, cause) holds.
func NewWrapping(kind error, rank Rank, msg string, cause error) *Sentinel {
	return &Sentinel{kind: kind, rank: rank, msg: msg + ": " + cause.Error(), cause: cause}
}

func (s *Sentinel) Error() string { return s.msg }

// Kind returns the sentinel's kind.
func (s *Sentinel) Kind() error { return s.kind }

// Rank returns how the sentinel's kind weighs (see Rank).
func (s *Sentinel) Rank() Rank { return s.rank }

// Unwrap exposes the cause and, for a Plain sentinel, the kind.
func (s *Sentinel) Unwrap() []error {
	var out []error
	if s.rank == Plain {
		out = append(out, s.kind)
	}
	if s.cause != nil {
		out = append(out, s.cause)
	}
	return out
}

// overridePriority orders the kinds of Overrides sentinels found together
// in one error: what the operator must fix first, then what cannot be
// done, then lost data, then what may succeed on a retry.
var overridePriority = []error{FailedPrecondition, Unimplemented, DataLoss, Unavailable}

// Classify returns the kind the outside world sees for err: the kind of
// an Overrides sentinel anywhere in err's tree (by overridePriority when
// there are several); else Of(err) or the kinds Unavailable and Internal
// made with Errorf or Wrap; else the kind of a Fallback sentinel
// (Internal only when no other is found); else nil.
func Classify(err error) error {
	if err == nil {
		return nil
	}
	var over, fall []*Sentinel
	walk(err, func(s *Sentinel) {
		switch s.rank {
		case Overrides:
			over = append(over, s)
		case Fallback:
			fall = append(fall, s)
		}
	})
	if len(over) > 0 {
		for _, k := range overridePriority {
			for _, s := range over {
				if s.kind == k {
					return k
				}
			}
		}
		return over[0].kind
	}
	if k := Of(err); k != nil {
		return k
	}
	// The two kinds Of does not list (kept out so that its answers do not
	// change for the callers that test it).
	for _, k := range []error{Unavailable, Internal} {
		if errors.Is(err, k) {
			return k
		}
	}
	for _, s := range fall {
		if s.kind != Internal {
			return s.kind
		}
	}
	if len(fall) > 0 {
		return fall[0].kind
	}
	return nil
}

// walk calls f for every Sentinel in err's tree, depth first, in the order
// errors.Is visits them.
func walk(err error, f func(*Sentinel)) {
	for err != nil {
		if s, ok := err.(*Sentinel); ok {
			f(s)
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e, f)
			}
			return
		default:
			return
		}
	}
}
