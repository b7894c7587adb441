package flightsvc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/tileflight/tileflight/arrowconv"
	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/filters"
	"github.com/tileflight/tileflight/filters/codecs"
	"github.com/tileflight/tileflight/format/gentile"
	"github.com/tileflight/tileflight/format/names"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/format/wire"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/storage/errorfs"
)

// legacyCodeOf is codeOf as it was when status.go matched the lower
// packages' sentinels itself (before they carried their kinds). Kept
// here as the reference the kind-only mapping must reproduce.
func legacyCodeOf(err error) codes.Code {
	switch {
	case errors.Is(err, context.Canceled):
		return codes.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded
	}
	switch {
	case errors.Is(err, codecs.ErrDecrypt):
		return codes.FailedPrecondition
	case errors.Is(err, codecs.ErrUnimplemented):
		return codes.Unimplemented
	case errors.Is(err, filters.ErrChecksum), errors.Is(err, codecs.ErrChecksum):
		return codes.DataLoss
	}
	if errors.Is(err, storage.ErrUnavailable) {
		return codes.Unavailable
	}
	switch errkind.Of(err) {
	case errkind.InvalidArgument:
		return codes.InvalidArgument
	case errkind.NotFound:
		return codes.NotFound
	case errkind.AlreadyExists:
		return codes.AlreadyExists
	case errkind.PermissionDenied:
		return codes.PermissionDenied
	case errkind.Unauthenticated:
		return codes.Unauthenticated
	case errkind.ResourceExhausted:
		return codes.ResourceExhausted
	case errkind.DataLoss:
		return codes.DataLoss
	case errkind.Unimplemented:
		return codes.Unimplemented
	case errkind.FailedPrecondition:
		return codes.FailedPrecondition
	}
	if errors.Is(err, wire.ErrCorrupt) || errors.Is(err, wire.ErrTruncated) {
		return codes.DataLoss
	}
	return codes.Internal
}

// Every sentinel of the lower packages, alone and wrapped the ways the
// layers wrap them, maps to the code it mapped to when status.go matched
// it by name; and the message is untouched.
func TestSentinelCodes(t *testing.T) {
	sentinels := []struct {
		name string
		err  error
		code codes.Code // alone, wrapped with fmt.Errorf
		msg  string
	}{
		{"wire.ErrTruncated", wire.ErrTruncated, codes.DataLoss, "truncated"},
		{"wire.ErrCorrupt", wire.ErrCorrupt, codes.DataLoss, "corrupt"},
		{"codecs.ErrChecksum", codecs.ErrChecksum, codes.DataLoss, "checksum mismatch: corrupt"},
		{"codecs.ErrDecrypt", codecs.ErrDecrypt, codes.FailedPrecondition, "decryption failed (wrong key or corrupt data)"},
		{"codecs.ErrUnimplemented", codecs.ErrUnimplemented, codes.Unimplemented, "not implemented"},
		{"filters.ErrChecksum", filters.ErrChecksum, codes.DataLoss, "checksum mismatch"},
		{"filters.ErrUnsupported", filters.ErrUnsupported, codes.Internal, "unsupported"},
		{"storage.ErrUnavailable", storage.ErrUnavailable, codes.Unavailable, "storage unavailable"},
		{"storage.ErrInvalidPath", storage.ErrInvalidPath, codes.Internal, "invalid storage path"},
		{"storage.ErrNotFound", storage.ErrNotFound, codes.Internal, "file does not exist"},
		{"errorfs.ErrInjected", errorfs.ErrInjected, codes.Internal, "injected storage fault"},
		{"gentile.ErrKeyRequired", gentile.ErrKeyRequired, codes.FailedPrecondition, "the array is encrypted (AES-256-GCM) and no key was given"},
		{"schema.ErrInvalid", schema.ErrInvalid, codes.Internal, "invalid array schema"},
		{"schema.ErrUnsupportedVersion", schema.ErrUnsupportedVersion, codes.Internal, "unsupported array format version"},
		{"names.ErrNotTimestamped", names.ErrNotTimestamped, codes.Internal, "not a timestamped name"},
		{"names.ErrBadEscape", names.ErrBadEscape, codes.Internal, "invalid escape in data file name"},
		{"arrowconv.ErrMismatch", arrowconv.ErrMismatch, codes.Internal, "column does not match the field"},
		{"arrowconv.ErrUnsupported", arrowconv.ErrUnsupported, codes.Internal, "unsupported"},
	}
	kinds := []error{errkind.InvalidArgument, errkind.NotFound, errkind.AlreadyExists, errkind.PermissionDenied,
		errkind.Unauthenticated, errkind.ResourceExhausted, errkind.DataLoss, errkind.Unimplemented, errkind.FailedPrecondition}
	for _, s := range sentinels {
		if s.err.Error() != s.msg {
			t.Errorf("%s: message %q, want %q", s.name, s.err.Error(), s.msg)
		}
		for _, err := range []error{s.err, fmt.Errorf("fragment f: tile 3: %w", s.err)} {
			if got := codeOf(err); got != s.code {
				t.Errorf("%s: %q: %v, want %v", s.name, err, got, s.code)
			}
		}
		// Wrapped by every kind (as Wrap and as Errorf), beside a context
		// error, and beside each other sentinel: the same code as before.
		var wrapped []error
		for _, k := range kinds {
			wrapped = append(wrapped, errkind.Wrap(k, fmt.Errorf("x: %w", s.err)), errkind.Errorf(k, "y: %v", s.err))
		}
		wrapped = append(wrapped, errors.Join(s.err, context.Canceled), fmt.Errorf("%w: %w", io.ErrUnexpectedEOF, s.err))
		for _, o := range sentinels {
			wrapped = append(wrapped, errors.Join(s.err, o.err), errkind.Wrap(errkind.DataLoss, errors.Join(o.err, s.err)))
		}
		for _, err := range wrapped {
			if got, want := codeOf(err), legacyCodeOf(err); got != want {
				t.Errorf("%s: %q: %v, want %v as before", s.name, err, got, want)
			}
		}
	}
}
