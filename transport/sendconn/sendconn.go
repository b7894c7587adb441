// Package sendconn owns the daemon's plaintext TCP connections as gRPC's
// server transport sees them, so that a DoGet's record buffers reach the
// kernel without first being copied into gRPC's write buffer.
//
// gRPC-Go copies every outgoing byte into a per-connection write buffer
// and offers no hook around it. With that buffer off
// (grpc.WriteBufferSize(0)) its HTTP/2 writer hands the connection each
// frame header and each slice of a frame's payload as they are. A Conn
// follows the frames in that byte stream and gathers them into one writev
// of up to FlushBytes: payload slices that lie inside buffers a sender has
// declared (Hold) are referenced where they are; everything else (frame
// headers, gRPC's own pooled buffers, other calls' messages) is copied,
// as the write buffer did.
//
// A referenced buffer must stay untouched until its bytes are written:
// the sender declares a message's buffers (Hold) before gRPC's SendMsg
// and, once gRPC has passed them on, hands their release to Done, which
// runs it at once when nothing referenced is pending, else after the
// next write.
//
// When bytes are written: once FlushBytes are pending; at the end of
// every frame that is not DATA (headers, trailers, pings, settings,
// window updates go out at once) and of a DATA frame that ends its
// stream; when the frame just passed leaves the peer's flow-control
// window for its stream or for the connection below one full frame (gRPC
// would then wait for a window update that the peer sends only once it
// has the bytes; the Conn follows the windows from the SETTINGS and
// WINDOW_UPDATE frames it reads); when a held message is passed on and
// no other one is queued (gRPC's writer is about to wait for the sender,
// where it would flush its own buffer); and otherwise after IdleFlush at
// the latest (messages that were not held, from a producer that pauses).
// A window followed wrongly costs time, never a byte.
//
// Only plaintext connections qualify: under TLS the bytes a Conn sees are
// records, not frames. The daemon uses Conns unless -zero-copy-send=false
// (transport.Config.ZeroCopySend).
//
// # What it depends on in grpc-go
//
// Checked against grpc-go v1.85.0 (the version in go.mod; the project has
// used no other since sendconn was written). A Conn relies on how that
// gRPC writes and reads a server connection, none of which is API:
//
//   - With grpc.WriteBufferSize(0) the framer's writer passes every Write
//     straight to the net.Conn (internal/transport/http_util.go,
//     bufWriter.Write) and its Flush writes nothing.
//   - A DATA frame is written as its 9-byte header, then each slice of
//     its payload, one Write each (framer.writeData), the slices being
//     those of the message's mem.BufferSlice (loopyWriter.processData:
//     reader.Peek), so the very buffers transport's codec handed over
//     (mem.NewBuffer over the record's buffers), not copies; and a slice
//     of a message is released (its mem.Buffer freed) only after the
//     Write that carried it returned.
//   - DATA frames carry at most 16 KiB of payload (http2MaxFrameLen): the
//     flow-control windows are followed assuming that (windows.go).
//   - gRPC reads the connection through its Read method (it reads a raw
//     socket only for *net.TCPConn and a few other concrete types), so a
//     Conn sees the peer's SETTINGS and WINDOW_UPDATE frames.
//   - peer.FromContext gives a call both the remote and the local
//     address (FromContext finds the Conn by them).
//
// A grpc-go that changes any of these either copies again or waits for
// IdleFlush, silently: the canary test of package transport
// (TestCanaryZeroCopyDoGet: a real DoGet over loopback to arrow-go's
// Flight client, checking Totals) fails then. Run it on every grpc-go
// upgrade and write the version here once it passes.
package sendconn

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"google.golang.org/grpc/peer"
)

const (
	// FlushBytes is how many pending bytes make a write: the size of the
	// write buffer the daemon gives gRPC when it does not use Conns.
	FlushBytes = 256 << 10
	// zeroCopyMin is the smallest payload slice referenced rather than
	// copied: below it an iovec costs more than the copy.
	zeroCopyMin = 4 << 10
	// IdleFlush bounds how long pending bytes wait for a write when
	// nothing else triggers one. (Go's timers fire up to about a
	// millisecond late on an otherwise idle process.)
	IdleFlush = 100 * time.Microsecond
	// maxFrame is the largest HTTP/2 DATA payload gRPC-Go sends.
	maxFrame = 16 << 10
	// arenaBytes is the capacity of a Conn's buffer of copied bytes.
	arenaBytes = FlushBytes + maxFrame
)

// HTTP/2 (RFC 9113) framing a Conn follows.
const (
	frameHeaderLen    = 9
	frameData         = 0x0
	frameHeaders      = 0x1
	frameRSTStream    = 0x3
	frameSettings     = 0x4
	frameWindowUpdate = 0x8
	flagEndStream     = 0x1
	flagAck           = 0x1
	settingInitialWin = 0x4
	defaultWindow     = 65535
	clientPrefaceLen  = 24
	maxSettingsLen    = 6 * 64
	// maxStreams bounds the streams a Conn follows: past it (a peer
	// with that many streams open at once) the windows are no longer
	// followed and flushes fall back to IdleFlush.
	maxStreams = 1 << 14
)

var registry sync.Map // key(remote, local) -> *Conn

// Stats counts what the process's Conns have done since it started
// (Totals). The canary of the send path compares Referenced with Held:
// a gRPC that stops handing a Conn the held buffers as they are (copies
// them into a buffer of its own, coalesces a frame's header with its
// payload) leaves Referenced at zero.
type Stats struct {
	Conns int64 // connections accepted as Conns
	// Held is the bytes of the buffers senders declared (Hold), counting
	// only those a Conn may reference (at least 4 KiB each).
	Held int64
	// Referenced is the DATA payload bytes written from held buffers by
	// reference; Copied the DATA payload bytes written as copies (of
	// gRPC's own buffers, or too small a piece to reference).
	Referenced, Copied int64
	Writes             int64 // writes to sockets (each one writev)
	// Read is the bytes gRPC read through Conns: the peer's SETTINGS and
	// WINDOW_UPDATE frames are followed only when gRPC reads that way.
	Read int64
	// LargestData is the largest DATA frame payload gRPC wrote: the
	// windows are followed assuming at most 16 KiB.
	LargestData int64
}

var totals struct {
	conns, held, referenced, copied, writes, largestData, read atomic.Int64
}

// Totals returns the counters of every Conn of the process.
func Totals() Stats {
	return Stats{
		Conns: totals.conns.Load(), Held: totals.held.Load(),
		Referenced: totals.referenced.Load(), Copied: totals.copied.Load(),
		Writes: totals.writes.Load(), LargestData: totals.largestData.Load(),
		Read: totals.read.Load(),
	}
}

// noteData records a DATA frame's payload length in LargestData.
func noteData(n int64) {
	for {
		cur := totals.largestData.Load()
		if n <= cur || totals.largestData.CompareAndSwap(cur, n) {
			return
		}
	}
}

func key(remote, local net.Addr) string { return remote.String() + ">" + local.String() }

// FromContext is the Conn a gRPC call runs on, or nil when it runs on
// another kind of connection.
func FromContext(ctx context.Context) *Conn {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil || p.LocalAddr == nil {
		return nil
	}
	c, _ := registry.Load(key(p.Addr, p.LocalAddr))
	conn, _ := c.(*Conn)
	return conn
}

// Listener wraps a TCP listener: each connection it accepts is a Conn.
// Serve it with grpc.WriteBufferSize(0).
type Listener struct {
	net.Listener
	// IdleFlush replaces the package's IdleFlush when not zero (tests).
	IdleFlush time.Duration
}

// Accept returns the next connection, a Conn when it is TCP.
func (l Listener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if _, ok := nc.(*net.TCPConn); !ok {
		return nc, nil
	}
	c := newConn(nc, l.IdleFlush)
	c.key = key(nc.RemoteAddr(), nc.LocalAddr())
	registry.Store(c.key, c)
	totals.conns.Add(1)
	return c, nil
}

// newConn wraps nc (a *net.TCPConn, whose net.Buffers writes are one
// writev; any net.Conn in tests).
func newConn(nc net.Conn, idle time.Duration) *Conn {
	if idle == 0 {
		idle = IdleFlush
	}
	c := &Conn{sock: nc, idle: idle}
	c.st.msgs = map[uint64]bool{}
	c.st.win.init()
	return c
}

var arenas = sync.Pool{New: func() any { b := make([]byte, 0, arenaBytes); return &b }}

// Conn is one server connection (see the package comment).
type Conn struct {
	sock net.Conn
	key  string // in the registry (empty: not registered)
	idle time.Duration

	// wmu is the write path's: held while writing to the socket, so never
	// taken by Read (a peer that stops reading while it writes to us must
	// not stop our reading).
	wmu     sync.Mutex
	out     net.Buffers // pending, in order
	arena   *[]byte     // copied bytes (nil when nothing is copied); fixed capacity, so its slices stay put
	tail    bool        // out's last entry ends where arena does
	pending int
	timer   *time.Timer
	armed   bool
	err     error
	frame   outFrame
	// pendRef and pendCopied are the DATA payload bytes of out
	// referenced and copied (Stats, counted once written).
	pendRef, pendCopied int

	// smu guards st; it is never held during I/O. Lock order: wmu, smu.
	smu sync.Mutex
	st  state
}

// state is what the write path shares with senders and the read path.
type state struct {
	held     []span
	nextID   uint64
	msgs     map[uint64]bool // held messages not yet done: whether gRPC has queued them (Sent)
	queued   int             // of those, how many are queued
	retained int             // entries of out that reference held buffers
	deferred []func()        // releases waiting for the next write
	closed   bool
	win      windows
}

type span struct {
	lo, hi uintptr
	id     uint64
}

// outFrame is where the Conn is in the frames gRPC writes.
type outFrame struct {
	hdr       [frameHeaderLen]byte
	hdrN      int
	inPayload bool
	left      int
	data      bool
	flushEnd  bool // write once the frame is complete
}

// Read reads what the peer sent, following its flow-control frames.
func (c *Conn) Read(p []byte) (int, error) {
	n, err := c.sock.Read(p)
	if n > 0 {
		totals.read.Add(int64(n))
		c.smu.Lock()
		c.st.win.feed(p[:n])
		c.smu.Unlock()
	}
	return n, err
}

// Hold declares the buffers of a message about to be sent (before gRPC's
// SendMsg): the Conn may write slices of them where they are. The id is
// for Sent and Done.
func (c *Conn) Hold(bufs [][]byte) uint64 {
	c.smu.Lock()
	defer c.smu.Unlock()
	c.st.nextID++
	id := c.st.nextID
	c.st.msgs[id] = false
	held := 0
	for _, b := range bufs {
		if len(b) < zeroCopyMin {
			continue
		}
		lo := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
		c.st.held = append(c.st.held, span{lo: lo, hi: lo + uintptr(len(b)), id: id})
		held += len(b)
	}
	totals.held.Add(int64(held))
	return id
}

// Sent says that gRPC has queued Hold's id (SendMsg returned): its writer
// has it to write next, if it has not written it already.
func (c *Conn) Sent(id uint64) {
	c.smu.Lock()
	defer c.smu.Unlock()
	if queued, ok := c.st.msgs[id]; ok && !queued {
		c.st.msgs[id] = true
		c.st.queued++
	}
}

// Done says that gRPC has passed on every byte of Hold's id (or dropped
// the message): release, which frees its buffers, runs once none of
// their bytes waits to be written: at once, or after the next write.
// When no other held message is queued, what is pending is written now:
// gRPC's writer is about to wait for the sender (as it would flush its
// own buffer).
func (c *Conn) Done(id uint64, release func()) {
	c.smu.Lock()
	kept := c.st.held[:0]
	for _, s := range c.st.held {
		if s.id != id {
			kept = append(kept, s)
		}
	}
	clear(c.st.held[len(kept):])
	c.st.held = kept
	if c.st.msgs[id] {
		c.st.queued--
	}
	delete(c.st.msgs, id)
	idle := c.st.queued == 0
	now := c.st.retained == 0 || c.st.closed
	if !now {
		c.st.deferred = append(c.st.deferred, release)
	}
	c.smu.Unlock()
	if now {
		release()
	}
	if idle {
		c.flushNow()
	}
}

// flushNow writes what is pending and runs the releases that then may.
func (c *Conn) flushNow() {
	c.wmu.Lock()
	c.flush()
	c.unlockReleasing()
}

// unlockReleasing releases wmu, then runs the releases that may run now.
func (c *Conn) unlockReleasing() {
	run := c.afterWrite()
	c.wmu.Unlock()
	for _, f := range run {
		f()
	}
}

// reference says whether b lies in a held buffer and, if so, counts it
// as referenced by a pending write.
func (c *Conn) reference(b []byte) bool {
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	hi := lo + uintptr(len(b))
	c.smu.Lock()
	defer c.smu.Unlock()
	for _, s := range c.st.held {
		if lo >= s.lo && hi <= s.hi {
			c.st.retained++
			return true
		}
	}
	return false
}

// Write takes bytes of gRPC's frames (see the package comment).
func (c *Conn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	n, err := c.write(p)
	c.unlockReleasing()
	return n, err
}

func (c *Conn) write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n := len(p)
	f := &c.frame
	for len(p) > 0 && c.err == nil {
		if !f.inPayload {
			k := copy(f.hdr[f.hdrN:], p)
			c.copyOut(p[:k])
			p = p[k:]
			f.hdrN += k
			if f.hdrN < frameHeaderLen {
				continue
			}
			f.hdrN = 0
			f.left = int(f.hdr[0])<<16 | int(f.hdr[1])<<8 | int(f.hdr[2])
			typ, flags := f.hdr[3], f.hdr[4]
			stream := binary.BigEndian.Uint32(f.hdr[5:]) & 0x7fffffff
			f.data = typ == frameData
			f.flushEnd = !f.data || flags&flagEndStream != 0
			f.inPayload = true
			// The windows this frame leaves are known from its header; a
			// window update read before its end only makes the write
			// decided here an early one.
			c.smu.Lock()
			switch {
			case f.data:
				noteData(int64(f.left))
				c.st.win.sent(stream, f.left, flags&flagEndStream != 0)
				f.flushEnd = f.flushEnd || c.st.win.blocked(stream)
			case typ == frameHeaders && flags&flagEndStream != 0, typ == frameRSTStream:
				c.st.win.end(stream)
			}
			c.smu.Unlock()
		} else {
			k := min(len(p), f.left)
			chunk := p[:k]
			if f.data && k >= zeroCopyMin && c.reference(chunk) {
				c.out = append(c.out, chunk)
				c.pending += k
				c.pendRef += k
				c.tail = false
			} else {
				if f.data {
					c.pendCopied += k
				}
				c.copyOut(chunk)
			}
			p = p[k:]
			f.left -= k
		}
		if f.inPayload && f.left == 0 {
			f.inPayload = false
			if f.flushEnd || c.pending >= FlushBytes {
				c.flush()
			}
		}
	}
	if c.err == nil && c.pending >= FlushBytes {
		c.flush()
	}
	if c.err != nil {
		return n - len(p), c.err
	}
	if c.pending > 0 && !c.armed {
		c.armed = true
		if c.timer == nil {
			c.timer = time.AfterFunc(c.idle, c.onTimer)
		} else {
			c.timer.Reset(c.idle)
		}
	}
	return n, nil
}

// copyOut appends a copy of b to the pending bytes.
func (c *Conn) copyOut(b []byte) {
	for len(b) > 0 && c.err == nil {
		if c.arena == nil {
			c.arena = arenas.Get().(*[]byte)
		}
		a := *c.arena
		room := cap(a) - len(a)
		if room == 0 {
			c.flush()
			continue
		}
		k := min(room, len(b))
		start := len(a)
		a = append(a, b[:k]...)
		*c.arena = a
		if c.tail {
			last := &c.out[len(c.out)-1]
			*last = (*last)[:len(*last)+k]
		} else {
			c.out = append(c.out, a[start:start+k:cap(a)])
			c.tail = true
		}
		c.pending += k
		b = b[k:]
	}
}

// flush writes what is pending, in one writev.
func (c *Conn) flush() {
	if c.pending == 0 || c.err != nil {
		return
	}
	bufs := c.out
	if _, err := bufs.WriteTo(c.sock); err != nil {
		c.err = err
	} else {
		totals.writes.Add(1)
		totals.referenced.Add(int64(c.pendRef))
		totals.copied.Add(int64(c.pendCopied))
	}
	c.pendRef, c.pendCopied = 0, 0
	clear(c.out)
	c.out = c.out[:0]
	if c.arena != nil {
		*c.arena = (*c.arena)[:0]
		arenas.Put(c.arena)
		c.arena = nil
	}
	c.tail = false
	c.pending = 0
	c.smu.Lock()
	c.st.retained = 0
	c.smu.Unlock()
}

// afterWrite returns the releases that may run now (wmu held).
func (c *Conn) afterWrite() []func() {
	c.smu.Lock()
	defer c.smu.Unlock()
	if c.st.retained > 0 && c.err == nil {
		return nil
	}
	if c.err != nil {
		// Nothing pending will be written: nothing references the
		// buffers any more.
		c.st.retained = 0
	}
	run := c.st.deferred
	c.st.deferred = nil
	return run
}

func (c *Conn) onTimer() {
	c.wmu.Lock()
	c.armed = false
	c.wmu.Unlock()
	c.flushNow()
}

// Close closes the connection; releases still waiting run. The socket is
// closed first, so that a write blocked on a peer that does not read
// returns.
func (c *Conn) Close() error {
	err := c.sock.Close()
	c.wmu.Lock()
	if c.err == nil {
		c.err = net.ErrClosed
	}
	if c.timer != nil {
		c.timer.Stop()
	}
	clear(c.out)
	c.out = nil
	c.pending, c.pendRef, c.pendCopied = 0, 0, 0
	if c.arena != nil {
		arenas.Put(c.arena)
		c.arena = nil
	}
	c.smu.Lock()
	c.st.closed = true
	c.st.retained = 0
	run := c.st.deferred
	c.st.deferred = nil
	c.smu.Unlock()
	c.wmu.Unlock()
	if c.key != "" {
		registry.CompareAndDelete(c.key, c)
	}
	for _, f := range run {
		f()
	}
	return err
}

// LocalAddr, RemoteAddr and the deadlines are the socket's.
func (c *Conn) LocalAddr() net.Addr                { return c.sock.LocalAddr() }
func (c *Conn) RemoteAddr() net.Addr               { return c.sock.RemoteAddr() }
func (c *Conn) SetDeadline(t time.Time) error      { return c.sock.SetDeadline(t) }
func (c *Conn) SetReadDeadline(t time.Time) error  { return c.sock.SetReadDeadline(t) }
func (c *Conn) SetWriteDeadline(t time.Time) error { return c.sock.SetWriteDeadline(t) }

// SyscallConn is the socket's (channelz reads socket options through it).
func (c *Conn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.sock.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.ErrUnsupported
}

var _ syscall.Conn = (*Conn)(nil)
