// Package errkind classifies errors for the outside world. Deep layers wrap
// one of these sentinels (fmt.Errorf("%w: ...", errkind.InvalidArgument))
// and the Flight layer maps the kind to a gRPC status code; the message
// keeps all the context added on the way up.
//
// A package that detects a condition callers match with errors.Is
// declares its sentinel with New (sentinel.go), so that the sentinel
// carries its kind and the Flight layer, calling Classify, needs no lower
// package to map an error to a code.
package errkind

import (
	"errors"
	"fmt"
)

// The kinds. Each corresponds to one gRPC status code.
var (
	InvalidArgument    = errors.New("invalid argument")
	NotFound           = errors.New("not found")
	AlreadyExists      = errors.New("already exists")
	PermissionDenied   = errors.New("permission denied")
	Unauthenticated    = errors.New("unauthenticated")
	ResourceExhausted  = errors.New("resource exhausted")
	DataLoss           = errors.New("data loss")
	Unimplemented      = errors.New("unimplemented")
	FailedPrecondition = errors.New("failed precondition")
)

// Errorf returns an error of the given kind with a formatted message. The
// message does not repeat the kind's name: "array x: no attribute y".
func Errorf(kind error, format string, args ...any) error {
	return &kindError{kind: kind, msg: fmt.Sprintf(format, args...), wrapped: wrappedOf(args)}
}

// Wrap marks err as being of the given kind, keeping its message.
func Wrap(kind error, err error) error {
	if err == nil {
		return nil
	}
	return &kindError{kind: kind, msg: err.Error(), wrapped: err}
}

type kindError struct {
	kind    error
	msg     string
	wrapped error
}

func (e *kindError) Error() string { return e.msg }

// Unwrap exposes both the kind and any wrapped cause to errors.Is/As.
func (e *kindError) Unwrap() []error {
	if e.wrapped != nil {
		return []error{e.kind, e.wrapped}
	}
	return []error{e.kind}
}

func wrappedOf(args []any) error {
	for _, a := range args {
		if err, ok := a.(error); ok {
			return err
		}
	}
	return nil
}

// Of returns the kind of err (the first one found), or nil.
func Of(err error) error {
	for _, k := range []error{InvalidArgument, NotFound, AlreadyExists, PermissionDenied,
		Unauthenticated, ResourceExhausted, DataLoss, Unimplemented, FailedPrecondition} {
		if errors.Is(err, k) {
			return k
		}
	}
	return nil
}
