package errkind

import (
	"errors"
	"io"
	"testing"
)

func TestKinds(t *testing.T) {
	cases := []struct {
		err  error
		kind error
		msg  string
	}{
		{Errorf(InvalidArgument, "array %q: no column %q", "a", "z"), InvalidArgument, `array "a": no column "z"`},
		{Errorf(DataLoss, "fragment f: %v", io.ErrUnexpectedEOF), DataLoss, "fragment f: unexpected EOF"},
		{Wrap(NotFound, errors.New("array b")), NotFound, "array b"},
		{errors.New("plain"), nil, "plain"},
	}
	for _, c := range cases {
		if Of(c.err) != c.kind {
			t.Errorf("%v: kind %v, want %v", c.err, Of(c.err), c.kind)
		}
		if c.err.Error() != c.msg {
			t.Errorf("message %q, want %q", c.err.Error(), c.msg)
		}
	}
	if !errors.Is(Errorf(DataLoss, "x: %v", io.ErrUnexpectedEOF), io.ErrUnexpectedEOF) {
		t.Error("cause lost")
	}
	if Wrap(DataLoss, nil) != nil {
		t.Error("Wrap(nil) should be nil")
	}
}
