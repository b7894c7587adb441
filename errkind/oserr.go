package errkind

import (
	"errors"
	"syscall"
)

// FromOS marks err with the kind its operating-system cause deserves, so
// that a full or broken disk reaches the client as what it is rather than
// as an unclassified (Internal: "a bug") error. The message keeps err's
// text after a prefix an operator recognises at once:
//
//   - ENOSPC, EDQUOT: ResourceExhausted, "storage is full" / "storage
//     quota exceeded". Nothing partial is visible (writes are staged and
//     renamed), and the call may succeed once space is freed.
//   - EROFS: FailedPrecondition, "storage is read-only": no write can
//     succeed until an operator remounts the data directory read-write,
//     so a client retrying at once (Unavailable) would only spin.
//   - EIO: DataLoss, "storage I/O error": the device failed to read or
//     write the bytes; the data it holds may be damaged.
//
// Any other error, nil, and an error that already has a kind are
// returned as they are.
func FromOS(err error) error {
	if err == nil || Of(err) != nil {
		return err
	}
	var kind error
	var what string
	switch {
	case errors.Is(err, syscall.ENOSPC):
		kind, what = ResourceExhausted, "storage is full"
	case errors.Is(err, syscall.EDQUOT):
		kind, what = ResourceExhausted, "storage quota exceeded"
	case errors.Is(err, syscall.EROFS):
		kind, what = FailedPrecondition, "storage is read-only"
	case errors.Is(err, syscall.EIO):
		kind, what = DataLoss, "storage I/O error"
	default:
		return err
	}
	return &kindError{kind: kind, msg: what + ": " + err.Error(), wrapped: err}
}
