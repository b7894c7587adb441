package errkind

import (
	"errors"
	"fmt"
	"testing"
)

func TestSentinels(t *testing.T) {
	corrupt := New(DataLoss, Fallback, "corrupt")
	checksum := NewWrapping(DataLoss, Overrides, "checksum mismatch", corrupt)
	decrypt := New(FailedPrecondition, Overrides, "decryption failed")
	unavailable := New(Unavailable, Overrides, "storage unavailable")
	odd := New(Internal, Fallback, "invalid path")
	key := New(FailedPrecondition, Plain, "no key")
	cases := []struct {
		name     string
		err      error
		of, kind error
	}{
		{"fallback alone", corrupt, nil, DataLoss},
		{"fallback under a kind", Errorf(InvalidArgument, "fragment: %v", corrupt), InvalidArgument, InvalidArgument},
		{"overrides under a kind", Wrap(DataLoss, fmt.Errorf("tile 2: %w", decrypt)), DataLoss, FailedPrecondition},
		{"overrides alone", fmt.Errorf("get: %w", unavailable), nil, Unavailable},
		{"overrides by priority", errors.Join(unavailable, checksum, decrypt), nil, FailedPrecondition},
		{"wrapping sentinel", checksum, nil, DataLoss},
		{"plain", fmt.Errorf("schema: %w", key), FailedPrecondition, FailedPrecondition},
		{"internal loses to another fallback", errors.Join(odd, corrupt), nil, DataLoss},
		{"internal alone", fmt.Errorf("k: %w", odd), nil, Internal},
		{"Errorf of a new kind", Errorf(Unavailable, "s3"), nil, Unavailable},
		{"nothing", errors.New("plain"), nil, nil},
		{"nil", nil, nil, nil},
	}
	for _, c := range cases {
		if got := Of(c.err); got != c.of {
			t.Errorf("%s: Of %v, want %v", c.name, got, c.of)
		}
		if got := Classify(c.err); got != c.kind {
			t.Errorf("%s: Classify %v, want %v", c.name, got, c.kind)
		}
	}
	if !errors.Is(checksum, corrupt) || checksum.Error() != "checksum mismatch: corrupt" {
		t.Errorf("NewWrapping: %q", checksum)
	}
	if !errors.Is(key, FailedPrecondition) || errors.Is(decrypt, FailedPrecondition) {
		t.Error("only a Plain sentinel matches its kind with errors.Is")
	}
	if decrypt.Kind() != FailedPrecondition || decrypt.Rank() != Overrides {
		t.Error("Kind/Rank")
	}
}
