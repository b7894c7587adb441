// Package wire owns the little-endian byte encoding shared by every TileDB
// on-disk structure: a bounds-checked Reader that turns truncation into an
// error instead of a panic, and an append-only Writer.
//
// Every decoder in format/ reads through a Reader so that a corrupt or
// truncated file yields an error naming the field that could not be read,
// and so that no allocation is ever sized by an unchecked length field.
package wire

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/tileflight/tileflight/errkind"
)

// ErrTruncated is wrapped by every error caused by reading past the end.
var ErrTruncated error = errkind.New(errkind.DataLoss, errkind.Fallback, "truncated")

// ErrCorrupt is wrapped by errors caused by values that cannot be valid.
var ErrCorrupt error = errkind.New(errkind.DataLoss, errkind.Fallback, "corrupt")

// Reader decodes little-endian values from a byte slice. The first failure
// is sticky: later reads return zero values and Err reports the first error,
// so decoders may read a whole struct and check once.
type Reader struct {
	buf []byte
	off int
	err error
}

// NewReader returns a Reader over b. The Reader never modifies b.
func NewReader(b []byte) *Reader { return &Reader{buf: b} }

// Err returns the first error met, or nil.
func (r *Reader) Err() error { return r.err }

// Offset is the number of bytes consumed so far.
func (r *Reader) Offset() int { return r.off }

// Len is the number of bytes left.
func (r *Reader) Len() int { return len(r.buf) - r.off }

// Rest returns the unread bytes without consuming them.
func (r *Reader) Rest() []byte { return r.buf[r.off:] }

// Fail records err (if no error was recorded yet) and returns the recorded one.
func (r *Reader) Fail(err error) error {
	if r.err == nil {
		r.err = err
	}
	return r.err
}

// Failf records a corrupt-data error for field at the current offset.
func (r *Reader) Failf(format string, args ...any) error {
	return r.Fail(fmt.Errorf("%w: at byte %d: %s", ErrCorrupt, r.off, fmt.Sprintf(format, args...)))
}

func (r *Reader) need(n int, what string) bool {
	if r.err != nil {
		return false
	}
	if n < 0 || n > len(r.buf)-r.off {
		r.err = fmt.Errorf("%w: %s: need %d bytes at byte %d, have %d", ErrTruncated, what, n, r.off, len(r.buf)-r.off)
		return false
	}
	return true
}

// Bytes consumes n bytes and returns them (aliasing the input, not copied).
func (r *Reader) Bytes(n int, what string) []byte {
	if !r.need(n, what) {
		return nil
	}
	b := r.buf[r.off : r.off+n : r.off+n]
	r.off += n
	return b
}

// BytesU64 is Bytes with a 64-bit length as read from a file; a length that
// exceeds the remaining input fails before anything is allocated.
func (r *Reader) BytesU64(n uint64, what string) []byte {
	if n > uint64(r.Len()) {
		r.need(r.Len()+1, what) // records a truncation error with context
		if r.err == nil {
			r.err = fmt.Errorf("%w: %s: need %d bytes", ErrTruncated, what, n)
		}
		return nil
	}
	return r.Bytes(int(n), what)
}

// Skip consumes n bytes.
func (r *Reader) Skip(n int, what string) { r.Bytes(n, what) }

// Uint8 reads one byte.
func (r *Reader) Uint8(what string) uint8 {
	if !r.need(1, what) {
		return 0
	}
	v := r.buf[r.off]
	r.off++
	return v
}

// Bool reads one byte as a boolean (any non-zero value is true).
func (r *Reader) Bool(what string) bool { return r.Uint8(what) != 0 }

// Int8 reads one signed byte.
func (r *Reader) Int8(what string) int8 { return int8(r.Uint8(what)) }

// Uint16 reads a little-endian uint16.
func (r *Reader) Uint16(what string) uint16 {
	if !r.need(2, what) {
		return 0
	}
	v := binary.LittleEndian.Uint16(r.buf[r.off:])
	r.off += 2
	return v
}

// Uint32 reads a little-endian uint32.
func (r *Reader) Uint32(what string) uint32 {
	if !r.need(4, what) {
		return 0
	}
	v := binary.LittleEndian.Uint32(r.buf[r.off:])
	r.off += 4
	return v
}

// Int32 reads a little-endian int32.
func (r *Reader) Int32(what string) int32 { return int32(r.Uint32(what)) }

// Uint64 reads a little-endian uint64.
func (r *Reader) Uint64(what string) uint64 {
	if !r.need(8, what) {
		return 0
	}
	v := binary.LittleEndian.Uint64(r.buf[r.off:])
	r.off += 8
	return v
}

// Int64 reads a little-endian int64.
func (r *Reader) Int64(what string) int64 { return int64(r.Uint64(what)) }

// Float32 reads a little-endian IEEE-754 float32.
func (r *Reader) Float32(what string) float32 { return math.Float32frombits(r.Uint32(what)) }

// Float64 reads a little-endian IEEE-754 float64.
func (r *Reader) Float64(what string) float64 { return math.Float64frombits(r.Uint64(what)) }

// Count reads a uint32 or uint64 element count (per width) and checks that
// count*minElemSize bytes could still follow, so that a corrupt count never
// drives a huge allocation. minElemSize of 0 is treated as 1.
func (r *Reader) Count(width int, minElemSize int, what string) int {
	var n uint64
	switch width {
	case 4:
		n = uint64(r.Uint32(what))
	default:
		n = r.Uint64(what)
	}
	if r.err != nil {
		return 0
	}
	if minElemSize < 1 {
		minElemSize = 1
	}
	if n > uint64(r.Len())/uint64(minElemSize) {
		r.Failf("%s: count %d cannot fit in the %d bytes left", what, n, r.Len())
		return 0
	}
	return int(n)
}

// CheckCount verifies that n elements of at least minElemSize bytes could
// still be read; it records an error and returns false otherwise.
func (r *Reader) CheckCount(n uint64, minElemSize int, what string) bool {
	if r.err != nil {
		return false
	}
	if minElemSize < 1 {
		minElemSize = 1
	}
	if n > uint64(r.Len())/uint64(minElemSize) {
		r.Failf("%s: count %d cannot fit in the %d bytes left", what, n, r.Len())
		return false
	}
	return true
}

// String reads n bytes as a string (copied).
func (r *Reader) String(n int, what string) string { return string(r.Bytes(n, what)) }

// Writer appends little-endian values to a growing buffer.
type Writer struct {
	buf []byte
}

// NewWriter returns a Writer that appends to b[:0]'s backing array if any.
func NewWriter(b []byte) *Writer { return &Writer{buf: b[:0]} }

// Bytes returns the encoded bytes.
func (w *Writer) Bytes() []byte { return w.buf }

// Len is the number of bytes written.
func (w *Writer) Len() int { return len(w.buf) }

// Write appends raw bytes.
func (w *Writer) Write(b []byte) { w.buf = append(w.buf, b...) }

// String appends the bytes of s.
func (w *Writer) String(s string) { w.buf = append(w.buf, s...) }

// Uint8 appends one byte.
func (w *Writer) Uint8(v uint8) { w.buf = append(w.buf, v) }

// Bool appends 1 or 0.
func (w *Writer) Bool(v bool) {
	if v {
		w.buf = append(w.buf, 1)
	} else {
		w.buf = append(w.buf, 0)
	}
}

// Uint16 appends a little-endian uint16.
func (w *Writer) Uint16(v uint16) { w.buf = binary.LittleEndian.AppendUint16(w.buf, v) }

// Uint32 appends a little-endian uint32.
func (w *Writer) Uint32(v uint32) { w.buf = binary.LittleEndian.AppendUint32(w.buf, v) }

// Int32 appends a little-endian int32.
func (w *Writer) Int32(v int32) { w.Uint32(uint32(v)) }

// Uint64 appends a little-endian uint64.
func (w *Writer) Uint64(v uint64) { w.buf = binary.LittleEndian.AppendUint64(w.buf, v) }

// Int64 appends a little-endian int64.
func (w *Writer) Int64(v int64) { w.Uint64(uint64(v)) }

// Float32 appends a little-endian float32.
func (w *Writer) Float32(v float32) { w.Uint32(math.Float32bits(v)) }

// Float64 appends a little-endian float64.
func (w *Writer) Float64(v float64) { w.Uint64(math.Float64bits(v)) }

// PatchUint32 overwrites 4 bytes at off (for sizes known only afterwards).
func (w *Writer) PatchUint32(off int, v uint32) { binary.LittleEndian.PutUint32(w.buf[off:], v) }

// PatchUint64 overwrites 8 bytes at off.
func (w *Writer) PatchUint64(off int, v uint64) { binary.LittleEndian.PutUint64(w.buf[off:], v) }
