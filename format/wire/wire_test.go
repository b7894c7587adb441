package wire

import (
	"errors"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	w := NewWriter(nil)
	w.Uint8(7)
	w.Uint16(0x1234)
	w.Uint32(0xdeadbeef)
	w.Uint64(1 << 40)
	w.Int32(-5)
	w.Float64(2.5)
	w.Float32(-1.25)
	w.Bool(true)
	w.String("abc")
	r := NewReader(w.Bytes())
	if got := r.Uint8("a"); got != 7 {
		t.Fatalf("uint8 %d", got)
	}
	if got := r.Uint16("b"); got != 0x1234 {
		t.Fatalf("uint16 %x", got)
	}
	if got := r.Uint32("c"); got != 0xdeadbeef {
		t.Fatalf("uint32 %x", got)
	}
	if got := r.Uint64("d"); got != 1<<40 {
		t.Fatalf("uint64 %d", got)
	}
	if got := r.Int32("e"); got != -5 {
		t.Fatalf("int32 %d", got)
	}
	if got := r.Float64("f"); got != 2.5 {
		t.Fatalf("float64 %v", got)
	}
	if got := r.Float32("g"); got != -1.25 {
		t.Fatalf("float32 %v", got)
	}
	if !r.Bool("h") {
		t.Fatal("bool")
	}
	if got := r.String(3, "i"); got != "abc" {
		t.Fatalf("string %q", got)
	}
	if r.Err() != nil || r.Len() != 0 {
		t.Fatalf("err %v len %d", r.Err(), r.Len())
	}
}

func TestTruncationIsStickyAndNamed(t *testing.T) {
	r := NewReader([]byte{1, 2, 3})
	_ = r.Uint32("schema version")
	_ = r.Uint8("next")
	if !errors.Is(r.Err(), ErrTruncated) {
		t.Fatalf("want ErrTruncated, got %v", r.Err())
	}
	if got := r.Err().Error(); got == "" || !contains(got, "schema version") {
		t.Fatalf("error should name the field: %q", got)
	}
}

func TestCountRejectsHugeLengths(t *testing.T) {
	w := NewWriter(nil)
	w.Uint64(1 << 60)
	r := NewReader(w.Bytes())
	if n := r.Count(8, 8, "num tiles"); n != 0 || !errors.Is(r.Err(), ErrCorrupt) {
		t.Fatalf("n=%d err=%v", n, r.Err())
	}
	r = NewReader(w.Bytes())
	if b := r.BytesU64(1<<60, "blob"); b != nil || !errors.Is(r.Err(), ErrTruncated) {
		t.Fatalf("err=%v", r.Err())
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}
