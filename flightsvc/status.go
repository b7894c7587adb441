package flightsvc

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/filters"
	"github.com/tileflight/tileflight/filters/codecs"
	"github.com/tileflight/tileflight/format/wire"
	"github.com/tileflight/tileflight/storage"
)

// toStatus maps an error from any layer to a gRPC status. Errors that
// already are statuses pass through; errors of a kind (package errkind)
// get that kind's code; a failed decryption is FailedPrecondition (see
// codeOf), a filter we cannot run Unimplemented; corrupt or truncated on-disk data is DataLoss;
// anything unclassified is Internal, because it is a bug to fix.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Error(codeOf(err), err.Error())
}

func codeOf(err error) codes.Code {
	switch {
	case errors.Is(err, context.Canceled):
		return codes.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded
	}
	// Filter failures carry sentinels of their own packages. They are
	// looked at before the kind because deeper layers wrap whatever they
	// cannot classify as DataLoss, which would hide them.
	switch {
	case errors.Is(err, codecs.ErrDecrypt):
		// AES-GCM cannot tell a wrong key from altered bytes, and the key
		// is the daemon's (-encryption-key), not the client's: the call
		// cannot succeed until the operator acts.
		return codes.FailedPrecondition
	case errors.Is(err, codecs.ErrUnimplemented):
		return codes.Unimplemented
	case errors.Is(err, filters.ErrChecksum), errors.Is(err, codecs.ErrChecksum):
		return codes.DataLoss
	}
	// An object store that stayed unreachable or kept failing after every
	// retry: the call may succeed later, so the client may retry.
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
