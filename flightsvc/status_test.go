package flightsvc

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/filters"
	"github.com/tileflight/tileflight/filters/codecs"
	"github.com/tileflight/tileflight/format/wire"
)

func TestToStatus(t *testing.T) {
	cases := []struct {
		err  error
		code codes.Code
	}{
		{errkind.Errorf(errkind.InvalidArgument, "bad"), codes.InvalidArgument},
		{errkind.Errorf(errkind.NotFound, "array x"), codes.NotFound},
		{errkind.Errorf(errkind.DataLoss, "tile 3"), codes.DataLoss},
		{errkind.Errorf(errkind.Unimplemented, "webp encode"), codes.Unimplemented},
		{fmt.Errorf("fragment f: %w", wire.ErrCorrupt), codes.DataLoss},
		{fmt.Errorf("fragment f: %w", wire.ErrTruncated), codes.DataLoss},
		{fmt.Errorf("stream: %w", context.Canceled), codes.Canceled},
		{status.Error(codes.ResourceExhausted, "busy"), codes.ResourceExhausted},
		{errors.New("nil map"), codes.Internal},
		// Filter sentinels win over the DataLoss that readers wrap around
		// what they cannot classify.
		{errkind.Wrap(errkind.DataLoss, fmt.Errorf("tile 2: aes_256_gcm: %w", codecs.ErrDecrypt)), codes.FailedPrecondition},
		{fmt.Errorf("schema: %w", codecs.ErrDecrypt), codes.FailedPrecondition},
		{errkind.Wrap(errkind.DataLoss, fmt.Errorf("attribute \"a\": webp: %w", codecs.ErrUnimplemented)), codes.Unimplemented},
		{fmt.Errorf("tile 0: %w", filters.ErrChecksum), codes.DataLoss},
		{fmt.Errorf("tile 0: %w", codecs.ErrChecksum), codes.DataLoss},
	}
	for _, c := range cases {
		st, _ := status.FromError(toStatus(c.err))
		if st.Code() != c.code {
			t.Errorf("%v: %v, want %v", c.err, st.Code(), c.code)
		}
		if st.Message() != c.err.Error() && c.code != codes.ResourceExhausted {
			t.Errorf("message changed: %q", st.Message())
		}
	}
	if toStatus(nil) != nil {
		t.Error("nil")
	}
}
