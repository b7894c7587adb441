package sendconn

import "encoding/binary"

// windows follows the peer's flow-control windows for what the server
// sends (RFC 9113 section 6.9): the connection's and each stream's, from
// the SETTINGS and WINDOW_UPDATE frames the peer sends and the DATA
// frames the server writes. It only decides when to write early, so a
// peer's malformed frames just stop it (bad); gRPC itself answers them.
type windows struct {
	conn    int64
	initial int64
	streams map[uint32]int64
	opened  uint32 // the highest stream the peer has opened
	bad     bool

	// the incoming frame being read
	preface int // client connection preface bytes still to skip
	hdr     [frameHeaderLen]byte
	hdrN    int
	typ     byte
	flags   byte
	stream  uint32
	left    int
	payload []byte // a SETTINGS or WINDOW_UPDATE payload, gathered
}

func (w *windows) init() {
	w.conn = defaultWindow
	w.initial = defaultWindow
	w.streams = map[uint32]int64{}
	w.preface = clientPrefaceLen
}

// sent accounts for a DATA frame of n bytes on stream s.
func (w *windows) sent(s uint32, n int, end bool) {
	w.conn -= int64(n)
	if end {
		delete(w.streams, s)
		return
	}
	win, ok := w.streams[s]
	if !ok {
		if len(w.streams) >= maxStreams {
			w.bad = true
			return
		}
		win = w.initial
	}
	w.streams[s] = win - int64(n)
}

// end forgets stream s (trailers sent, or a reset).
func (w *windows) end(s uint32) { delete(w.streams, s) }

// blocked says whether gRPC may have to wait for the peer before it can
// send another full frame on stream s.
func (w *windows) blocked(s uint32) bool {
	if w.bad {
		return false
	}
	if w.conn < maxFrame {
		return true
	}
	win, ok := w.streams[s]
	return ok && win < maxFrame
}

// feed follows the bytes the peer sent.
func (w *windows) feed(p []byte) {
	for len(p) > 0 && !w.bad {
		if w.preface > 0 {
			k := min(w.preface, len(p))
			w.preface -= k
			p = p[k:]
			continue
		}
		if w.hdrN < frameHeaderLen {
			k := copy(w.hdr[w.hdrN:], p)
			w.hdrN += k
			p = p[k:]
			if w.hdrN < frameHeaderLen {
				continue
			}
			w.left = int(w.hdr[0])<<16 | int(w.hdr[1])<<8 | int(w.hdr[2])
			w.typ, w.flags = w.hdr[3], w.hdr[4]
			w.stream = binary.BigEndian.Uint32(w.hdr[5:]) & 0x7fffffff
			w.payload = w.payload[:0]
			switch {
			case w.typ == frameSettings && w.flags&flagAck == 0 && (w.left%6 != 0 || w.left > maxSettingsLen),
				w.typ == frameWindowUpdate && w.left != 4:
				w.bad = true
				return
			}
			if w.left == 0 {
				w.frameDone()
			}
			continue
		}
		k := min(w.left, len(p))
		if w.typ == frameSettings || w.typ == frameWindowUpdate {
			w.payload = append(w.payload, p[:k]...)
		}
		w.left -= k
		p = p[k:]
		if w.left == 0 {
			w.frameDone()
		}
	}
}

// frameDone applies the frame just read.
func (w *windows) frameDone() {
	w.hdrN = 0
	switch w.typ {
	case frameSettings:
		if w.flags&flagAck != 0 {
			return
		}
		for b := w.payload; len(b) >= 6; b = b[6:] {
			if binary.BigEndian.Uint16(b) != settingInitialWin {
				continue
			}
			// A new initial window moves every open stream's window by
			// the difference (section 6.9.2).
			v := int64(binary.BigEndian.Uint32(b[2:]))
			for s, win := range w.streams {
				w.streams[s] = win + v - w.initial
			}
			w.initial = v
		}
	case frameHeaders:
		// A peer opens streams in increasing order (section 5.1.1): a
		// HEADERS frame on a higher one opens it, with the initial window.
		if w.stream > w.opened {
			w.opened = w.stream
			if len(w.streams) >= maxStreams {
				w.bad = true
				return
			}
			w.streams[w.stream] = w.initial
		}
	case frameRSTStream:
		w.end(w.stream)
	case frameWindowUpdate:
		inc := int64(binary.BigEndian.Uint32(w.payload) & 0x7fffffff)
		if w.stream == 0 {
			w.conn += inc
		} else if win, ok := w.streams[w.stream]; ok {
			w.streams[w.stream] = win + inc
		}
		// An update for a stream that has ended is late; left out.
	}
}
