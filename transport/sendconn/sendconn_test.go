package sendconn

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/peer"
)

// frame is one HTTP/2 frame's bytes.
func frame(typ, flags byte, stream uint32, payload []byte) []byte {
	b := make([]byte, frameHeaderLen, frameHeaderLen+len(payload))
	b[0], b[1], b[2] = byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload))
	b[3], b[4] = typ, flags
	binary.BigEndian.PutUint32(b[5:], stream)
	return append(b, payload...)
}

// header is a frame header announcing n payload bytes.
func header(typ, flags byte, stream uint32, n int) []byte {
	b := make([]byte, frameHeaderLen)
	b[0], b[1], b[2] = byte(n>>16), byte(n>>8), byte(n)
	b[3], b[4] = typ, flags
	binary.BigEndian.PutUint32(b[5:], stream)
	return b
}

func settings(initialWindow uint32) []byte {
	p := make([]byte, 6)
	binary.BigEndian.PutUint16(p, settingInitialWin)
	binary.BigEndian.PutUint32(p[2:], initialWindow)
	return frame(frameSettings, 0, 0, p)
}

func windowUpdate(stream, inc uint32) []byte {
	p := make([]byte, 4)
	binary.BigEndian.PutUint32(p, inc)
	return frame(frameWindowUpdate, 0, stream, p)
}

var preface = []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")

// pair is a Conn (the server's side, as gRPC would get it from the
// Listener) and the peer's end of the same TCP connection.
func pair(t testing.TB, idle time.Duration) (*Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	l := Listener{Listener: ln, IdleFlush: idle}
	peerc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	nc, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	c := nc.(*Conn)
	t.Cleanup(func() { c.Close(); peerc.Close() })
	return c, peerc
}

// tell sends the peer's bytes and has the Conn read them, as gRPC's
// reader would.
func tell(t testing.TB, c *Conn, peerc net.Conn, b []byte) {
	t.Helper()
	if _, err := peerc.Write(b); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, make([]byte, len(b))); err != nil {
		t.Fatal(err)
	}
}

// arrived reads n bytes at the peer within d, or fails.
func arrived(t testing.TB, peerc net.Conn, n int, d time.Duration) []byte {
	t.Helper()
	peerc.SetReadDeadline(time.Now().Add(d))
	defer peerc.SetReadDeadline(time.Time{})
	b := make([]byte, n)
	if _, err := io.ReadFull(peerc, b); err != nil {
		t.Fatalf("%d bytes did not arrive: %v", n, err)
	}
	return b
}

// nothingArrives checks that the peer gets no byte for d.
func nothingArrives(t testing.TB, peerc net.Conn, d time.Duration) {
	t.Helper()
	peerc.SetReadDeadline(time.Now().Add(d))
	defer peerc.SetReadDeadline(time.Time{})
	var b [1]byte
	n, err := peerc.Read(b[:])
	var ne net.Error
	if n > 0 || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("bytes arrived early (%d, %v)", n, err)
	}
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) + seed
	}
	return b
}

// writeAs hands w's bytes to c the way gRPC's writer does for a DATA
// frame (the 9-byte header, then the payload's slices), or in the pieces
// split gives.
func writeAs(t testing.TB, c *Conn, pieces [][]byte) {
	t.Helper()
	for _, p := range pieces {
		if n, err := c.Write(p); err != nil || n != len(p) {
			t.Fatalf("Write(%d bytes) = %d, %v", len(p), n, err)
		}
	}
}

// TestPassThrough: whatever the frames and however gRPC splits its
// writes, the peer receives exactly the bytes written, held buffers
// referenced or copied.
func TestPassThrough(t *testing.T) {
	big := pattern(600<<10, 1)
	small := pattern(300, 2)
	trailers := frame(frameHeaders, flagEndStream|0x4, 1, []byte{0x88})
	cases := []struct {
		name   string
		hold   [][]byte
		pieces func() [][]byte
	}{
		{"whole frames", nil, func() [][]byte {
			return [][]byte{frame(frameHeaders, 0x4, 1, []byte{0x88}), frame(frameData, 0, 1, small), trailers}
		}},
		{"header, then held payload slices", [][]byte{big}, func() [][]byte {
			var ps [][]byte
			for off := 0; off < len(big); off += maxFrame {
				end := min(off+maxFrame, len(big))
				mid := off + (end-off)/2
				ps = append(ps, header(frameData, 0, 1, end-off), big[off:mid], big[mid:end])
			}
			return append(ps, trailers)
		}},
		{"unheld payload is copied", nil, func() [][]byte {
			var ps [][]byte
			for off := 0; off < len(big); off += maxFrame {
				end := min(off+maxFrame, len(big))
				ps = append(ps, frame(frameData, 0, 3, big[off:end]))
			}
			return append(ps, trailers)
		}},
		{"byte by byte", nil, func() [][]byte {
			all := append(frame(frameData, 0, 1, small), frame(frameData, flagEndStream, 1, small)...)
			var ps [][]byte
			for i := range all {
				ps = append(ps, all[i:i+1])
			}
			return ps
		}},
		{"empty frames", nil, func() [][]byte {
			return [][]byte{frame(frameData, 0, 1, nil), frame(frameSettings, flagAck, 0, nil), trailers}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, peerc := pair(t, time.Hour)
			tell(t, c, peerc, append(append([]byte{}, preface...), windowUpdate(0, 1<<30)...))
			tell(t, c, peerc, append(frame(frameHeaders, 0x4, 1, []byte{0x82}), frame(frameHeaders, 0x4, 3, []byte{0x82})...))
			tell(t, c, peerc, append(settings(1<<30), windowUpdate(1, 1<<20)...))
			pieces := tc.pieces()
			var want []byte
			for _, p := range pieces {
				want = append(want, p...)
			}
			var id uint64
			if tc.hold != nil {
				id = c.Hold(tc.hold)
			}
			done := make(chan []byte)
			go func() { done <- arrived(t, peerc, len(want), 10*time.Second) }()
			writeAs(t, c, pieces)
			if tc.hold != nil {
				c.Done(id, func() {})
			}
			if got := <-done; !bytes.Equal(got, want) {
				t.Fatalf("the peer received other bytes (%d)", len(got))
			}
		})
	}
}

// TestReleaseAfterWrite: a held buffer's release waits until its bytes
// are written; overwriting it afterwards (as a recycled batch would be)
// changes nothing the peer receives.
func TestReleaseAfterWrite(t *testing.T) {
	c, peerc := pair(t, time.Hour)
	tell(t, c, peerc, append(append([]byte{}, preface...), frame(frameHeaders, 0x4, 1, []byte{0x82})...))
	buf := pattern(2*maxFrame, 3)
	want := append(frame(frameData, 0, 1, buf[:maxFrame]), frame(frameData, 0, 1, buf[maxFrame:])...)
	id := c.Hold([][]byte{buf})
	c.Sent(id)
	// A second message is queued behind it, so nothing forces a write yet.
	next := c.Hold([][]byte{pattern(maxFrame, 4)})
	c.Sent(next)
	writeAs(t, c, [][]byte{header(frameData, 0, 1, maxFrame), buf[:maxFrame], header(frameData, 0, 1, maxFrame), buf[maxFrame:]})
	var released atomic.Bool
	c.Done(id, func() { released.Store(true) })
	if released.Load() {
		t.Fatal("released while its bytes were pending")
	}
	nothingArrives(t, peerc, 50*time.Millisecond)
	// No held message is queued any more: the Conn writes, then releases.
	c.Done(next, func() {})
	if !released.Load() {
		t.Fatal("not released once written")
	}
	for i := range buf {
		buf[i] = 0xA5
	}
	if got := arrived(t, peerc, len(want), 5*time.Second); !bytes.Equal(got, want) {
		t.Fatal("the peer received overwritten bytes")
	}
}

// TestWhenWritten: which frames make the Conn write at once, and that
// the others wait (for FlushBytes, or IdleFlush).
func TestWhenWritten(t *testing.T) {
	data := pattern(maxFrame, 5)
	cases := []struct {
		name   string
		peer   []byte // what the peer sends first, after the preface
		frames []byte
		now    bool
	}{
		{"ping", nil, frame(0x6, 0, 0, make([]byte, 8)), true},
		{"window update", nil, windowUpdate(0, 1000), true},
		{"trailers", frame(frameHeaders, 0x4, 1, nil), frame(frameHeaders, flagEndStream|0x4, 1, nil), true},
		{"data ending its stream", frame(frameHeaders, 0x4, 1, nil), frame(frameData, flagEndStream, 1, data), true},
		{"data, windows open", append(frame(frameHeaders, 0x4, 1, nil), windowUpdate(0, 1<<20)...), frame(frameData, 0, 1, data), false},
		// 65535 - 3 * 16384 < 16384: gRPC has to wait for the peer.
		{"data using up the connection's window", frame(frameHeaders, 0x4, 1, nil),
			bytes.Repeat(frame(frameData, 0, 1, data), 3), true},
		{"data using up the stream's window", append(append(settings(20000), frame(frameHeaders, 0x4, 1, nil)...), windowUpdate(0, 1<<20)...),
			frame(frameData, 0, 1, data), true},
		{"a stream's window update counts", append(append(settings(20000), frame(frameHeaders, 0x4, 1, nil)...), append(windowUpdate(0, 1<<20), windowUpdate(1, 1<<20)...)...),
			frame(frameData, 0, 1, data), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, peerc := pair(t, time.Hour)
			tell(t, c, peerc, append(append([]byte{}, preface...), tc.peer...))
			writeAs(t, c, [][]byte{tc.frames})
			if tc.now {
				arrived(t, peerc, len(tc.frames), 5*time.Second)
				return
			}
			nothingArrives(t, peerc, 50*time.Millisecond)
			writeAs(t, c, [][]byte{frame(frameHeaders, flagEndStream|0x4, 1, nil)})
			arrived(t, peerc, len(tc.frames)+frameHeaderLen, 5*time.Second)
		})
	}
	t.Run("idle flush", func(t *testing.T) {
		c, peerc := pair(t, time.Millisecond)
		tell(t, c, peerc, append(append([]byte{}, preface...), frame(frameHeaders, 0x4, 1, nil)...))
		f := frame(frameData, 0, 1, data[:100])
		writeAs(t, c, [][]byte{f})
		arrived(t, peerc, len(f), 5*time.Second)
	})
	t.Run("flush bytes", func(t *testing.T) {
		c, peerc := pair(t, time.Hour)
		tell(t, c, peerc, append(append(append([]byte{}, preface...), frame(frameHeaders, 0x4, 1, nil)...), append(settings(1<<30), windowUpdate(0, 1<<30)...)...))
		var all []byte
		for len(all) < FlushBytes {
			all = append(all, frame(frameData, 0, 1, data)...)
		}
		writeAs(t, c, [][]byte{all})
		arrived(t, peerc, len(all), 5*time.Second)
	})
}

// TestCloseUnblocks: closing a Conn whose peer does not read ends the
// write blocked on it, and releases what waited.
func TestCloseUnblocks(t *testing.T) {
	c, peerc := pair(t, time.Hour)
	tell(t, c, peerc, append(append(append([]byte{}, preface...), frame(frameHeaders, 0x4, 1, nil)...), append(settings(1<<30), windowUpdate(0, 1<<30)...)...))
	buf := pattern(64<<20, 6)
	id := c.Hold([][]byte{buf})
	errc := make(chan error, 1)
	go func() {
		for off := 0; off < len(buf); off += maxFrame {
			for _, p := range [][]byte{header(frameData, 0, 1, maxFrame), buf[off : off+maxFrame]} {
				if _, err := c.Write(p); err != nil {
					errc <- err
					return
				}
			}
		}
		errc <- nil
	}()
	time.Sleep(100 * time.Millisecond)
	var released atomic.Bool
	c.Close()
	select {
	case err := <-errc:
		if err == nil {
			t.Fatal("64 MiB written to a peer that reads nothing")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the write stayed blocked after Close")
	}
	c.Done(id, func() { released.Store(true) })
	if !released.Load() {
		t.Fatal("a release after Close waited")
	}
	if _, err := c.Write([]byte{0}); err == nil {
		t.Fatal("Write after Close succeeded")
	}
}

// TestFromContext finds a call's Conn from its peer, and nothing for
// another connection or after Close.
func TestFromContext(t *testing.T) {
	c, _ := pair(t, time.Hour)
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: c.RemoteAddr(), LocalAddr: c.LocalAddr()})
	if FromContext(ctx) != c {
		t.Fatal("the call's Conn was not found")
	}
	if FromContext(context.Background()) != nil {
		t.Fatal("a Conn for a context without a peer")
	}
	c.Close()
	if FromContext(ctx) != nil {
		t.Fatal("a closed Conn was found")
	}
}

// TestWindowsForget: streams that end (trailers, a reset either way) are
// no longer followed, nor are window updates that come after.
func TestWindowsForget(t *testing.T) {
	var w windows
	w.init()
	w.feed(preface)
	w.feed(append(frame(frameHeaders, 0x4, 1, nil), frame(frameHeaders, 0x4, 3, nil)...))
	w.sent(1, 100, false)
	w.sent(3, 100, false)
	if len(w.streams) != 2 {
		t.Fatalf("%d streams followed, want 2", len(w.streams))
	}
	w.end(1)                                                    // our trailers
	w.feed(frame(frameRSTStream, 0, 3, make([]byte, 4)))        // the peer's reset
	w.feed(append(windowUpdate(1, 10), windowUpdate(3, 10)...)) // late updates
	w.feed(frame(frameHeaders, 0x4, 1, nil))                    // not a new stream: 1 <= 3
	if len(w.streams) != 0 || w.bad {
		t.Fatalf("streams %v, bad %v", w.streams, w.bad)
	}
}

// TestSentAfterDone: gRPC may pass a message on before SendMsg returns to
// its sender; the late Sent leaves nothing counted as queued.
func TestSentAfterDone(t *testing.T) {
	c, _ := pair(t, time.Hour)
	id := c.Hold([][]byte{pattern(zeroCopyMin, 7)})
	c.Done(id, func() {})
	c.Sent(id)
	c.smu.Lock()
	defer c.smu.Unlock()
	if c.st.queued != 0 || len(c.st.msgs) != 0 || len(c.st.held) != 0 {
		t.Fatalf("queued %d, messages %v, held %v", c.st.queued, c.st.msgs, c.st.held)
	}
}
