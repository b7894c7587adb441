package sendconn

import (
	"bytes"
	"net"
	"testing"
	"time"
)

// FuzzWindows: whatever a peer sends, following its frames never panics
// and never gathers more than a SETTINGS frame's worth of payload.
func FuzzWindows(f *testing.F) {
	f.Add(append(append(append([]byte{}, preface...), settings(1000)...), windowUpdate(0, 5)...), uint8(3))
	f.Add(append(append([]byte{}, preface...), frame(frameHeaders, 0x4, 7, []byte{1, 2})...), uint8(1))
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"), uint8(5))
	f.Fuzz(func(t *testing.T, in []byte, step uint8) {
		var w windows
		w.init()
		n := int(step)%17 + 1
		for off := 0; off < len(in); off += n {
			w.feed(in[off:min(off+n, len(in))])
			if cap(w.payload) > 2*maxSettingsLen {
				t.Fatalf("payload gathered to %d bytes", cap(w.payload))
			}
		}
		for s := range uint32(9) {
			w.sent(s, 100, s%2 == 0)
			w.blocked(s)
		}
	})
}

// FuzzPassThrough: whatever bytes gRPC writes and however it splits them,
// held or not, the peer receives them unchanged.
func FuzzPassThrough(f *testing.F) {
	f.Add(append(frame(frameData, 0, 1, pattern(5000, 1)), frame(frameHeaders, flagEndStream, 1, nil)...), uint16(4100), uint16(9), true)
	f.Add(bytes.Repeat(frame(frameData, 0, 1, pattern(maxFrame, 2)), 3), uint16(16393), uint16(4096), false)
	f.Add([]byte{0, 0, 200, 0, 0, 0, 0, 0, 1, 1, 2, 3}, uint16(1), uint16(3), true)
	f.Fuzz(func(t *testing.T, in []byte, first, step uint16, hold bool) {
		// A pipe, not a socket: a fuzzing run would use up the
		// ephemeral ports.
		srv, peerc := net.Pipe()
		c := newConn(srv, time.Hour)
		defer c.Close()
		defer peerc.Close()
		done := make(chan []byte)
		go func() { done <- arrived(t, peerc, len(in), 10*time.Second) }()
		var id uint64
		if hold {
			id = c.Hold([][]byte{in})
		}
		cut := min(int(first), len(in))
		pieces := [][]byte{in[:cut]}
		for off := cut; off < len(in); off += int(step) + 1 {
			pieces = append(pieces, in[off:min(off+int(step)+1, len(in))])
		}
		writeAs(t, c, pieces)
		if hold {
			c.Done(id, func() {})
		} else {
			c.flushNow()
		}
		if got := <-done; !bytes.Equal(got, in) {
			t.Fatal("the peer received other bytes")
		}
	})
}
