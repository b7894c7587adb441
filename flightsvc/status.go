package flightsvc

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tileflight/tileflight/errkind"
)

// toStatus maps an error from any layer to a gRPC status. Errors that
// already are statuses pass through; a canceled or timed-out call keeps
// that code; any other error gets the code of its kind as
// errkind.Classify finds it: the lower packages' sentinels carry their
// kinds (a failed decryption is FailedPrecondition, a filter we cannot run
// Unimplemented, a checksum mismatch or corrupt or truncated on-disk data
// DataLoss, an object store that kept failing Unavailable); anything
// unclassified is Internal, because it is a bug to fix.
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
	if c, ok := kindCodes[errkind.Classify(err)]; ok {
		return c
	}
	return codes.Internal // no kind (or one this table does not know yet)
}

// kindCodes maps each kind to its gRPC code.
var kindCodes = map[error]codes.Code{
	errkind.InvalidArgument:    codes.InvalidArgument,
	errkind.NotFound:           codes.NotFound,
	errkind.AlreadyExists:      codes.AlreadyExists,
	errkind.PermissionDenied:   codes.PermissionDenied,
	errkind.Unauthenticated:    codes.Unauthenticated,
	errkind.ResourceExhausted:  codes.ResourceExhausted,
	errkind.DataLoss:           codes.DataLoss,
	errkind.Unimplemented:      codes.Unimplemented,
	errkind.FailedPrecondition: codes.FailedPrecondition,
	errkind.Unavailable:        codes.Unavailable,
	errkind.Internal:           codes.Internal,
}
