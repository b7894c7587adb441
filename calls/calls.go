// Package calls keeps track of the calls a daemon is running: what each
// one is (its kind, the array or the SQL text it is about, who made it and
// from where, when it started), how far it has got (rows and bytes), and
// how to stop it. The access log reads a call's Info when the call ends;
// the list_queries and cancel_query actions read and stop the running
// ones through a Registry; the Registry's watchdog stops streams that
// have made no progress for too long.
//
// It knows nothing of Flight's messages or of the engine: services fill
// in an Info through the call's context as they learn what it is about.
package calls

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"

	"github.com/tileflight/tileflight/access"
)

// Info is what is known about one call. Every method is safe to use from
// any goroutine, and on a nil Info (they do nothing).
type Info struct {
	array   atomic.Pointer[string]
	sql     atomic.Pointer[string]
	kind    atomic.Pointer[string]
	token   atomic.Pointer[string]
	user    atomic.Pointer[string]
	cert    atomic.Pointer[string]
	arrays  atomic.Pointer[[]string]
	ticket  atomic.Pointer[[]byte]
	rows    atomic.Int64
	bytes   atomic.Int64
	blocked atomic.Int64 // unix nanos since the call has waited on its peer; 0: not waiting
}

type infoKey struct{}

// WithInfo returns ctx carrying info.
func WithInfo(ctx context.Context, info *Info) context.Context {
	return context.WithValue(ctx, infoKey{}, info)
}

// From returns the Info of the call ctx belongs to: a throwaway one when
// the context has none, so that callers never need to check.
func From(ctx context.Context) *Info {
	if ci, ok := ctx.Value(infoKey{}).(*Info); ok {
		return ci
	}
	return &Info{}
}

func load(p *atomic.Pointer[string]) string {
	if s := p.Load(); s != nil {
		return *s
	}
	return ""
}

// SetArray records the array a call is about.
func (c *Info) SetArray(name string) { c.array.Store(&name) }

// Array is the array the call is about, or "".
func (c *Info) Array() string { return load(&c.array) }

// MaxSQLText is how much of a statement's text a call keeps.
const MaxSQLText = 1000

// SetSQL records the statement a call runs (cut at MaxSQLText bytes) and
// makes its kind "sql".
func (c *Info) SetSQL(text string) {
	if len(text) > MaxSQLText {
		text = text[:MaxSQLText]
	}
	c.sql.Store(&text)
	k := "sql"
	c.kind.Store(&k)
}

// SQL is the statement the call runs, or "".
func (c *Info) SQL() string { return load(&c.sql) }

// AddArrays records arrays a SQL statement read or wrote.
func (c *Info) AddArrays(names ...string) {
	for {
		old := c.arrays.Load()
		var next []string
		if old != nil {
			next = append(next, *old...)
		}
		for _, n := range names {
			if !contains(next, n) {
				next = append(next, n)
			}
		}
		if c.arrays.CompareAndSwap(old, &next) {
			return
		}
	}
}

// Arrays are the arrays a SQL statement touched (AddArrays).
func (c *Info) Arrays() []string {
	if p := c.arrays.Load(); p != nil {
		return append([]string(nil), *p...)
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// SetTicket records the ticket a DoGet redeems (Flight SQL's
// CancelFlightInfo names the calls to stop by their tickets).
func (c *Info) SetTicket(t []byte) {
	t = append([]byte(nil), t...)
	c.ticket.Store(&t)
}

// Ticket is the ticket the call redeems, or nil.
func (c *Info) Ticket() []byte {
	if p := c.ticket.Load(); p != nil {
		return *p
	}
	return nil
}

// SetKind sets what kind of call this is (doget, doput, sql, action).
func (c *Info) SetKind(kind string) { c.kind.Store(&kind) }

// Kind is the call's kind.
func (c *Info) Kind() string { return load(&c.kind) }

// SetToken records the name of the credential the call authenticated with.
func (c *Info) SetToken(name string) { c.token.Store(&name) }

// Token is the credential's name, or "".
func (c *Info) Token() string { return load(&c.token) }

// SetPrincipal records who the call authenticated as: the credential's
// name, the Basic user name and the client certificate's CN, when given.
func (c *Info) SetPrincipal(p *access.Principal) {
	if p == nil {
		return
	}
	if p.Name != "" {
		c.SetToken(p.Name)
	}
	if p.User != "" {
		c.user.Store(&p.User)
	}
	if p.CertCN != "" {
		c.cert.Store(&p.CertCN)
	}
}

// User is the Basic user name, or "".
func (c *Info) User() string { return load(&c.user) }

// CertCN is the client certificate's CN, or "".
func (c *Info) CertCN() string { return load(&c.cert) }

// AddRows adds to the row count.
func (c *Info) AddRows(n int64) { c.rows.Add(n) }

// AddBytes adds to the byte count.
func (c *Info) AddBytes(n int64) { c.bytes.Add(n) }

// Rows is the rows the call has sent or received.
func (c *Info) Rows() int64 { return c.rows.Load() }

// Bytes is the bytes the call has sent or received.
func (c *Info) Bytes() int64 { return c.bytes.Load() }

// Waiting marks the call as waiting on its peer (a send the peer's flow
// control holds back, a receive of a message that does not come) until
// the returned func is called. The Registry's watchdog stops calls that
// wait longer than the stall timeout.
func (c *Info) Waiting() (done func()) {
	c.blocked.Store(time.Now().UnixNano())
	return func() { c.blocked.Store(0) }
}

// waitingSince is when the current wait began, or the zero time.
func (c *Info) waitingSince() time.Time {
	if n := c.blocked.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// ErrCancelled is the cause of a call stopped by cancel_query; it is a
// context.Canceled, so that it maps to CANCELLED.
var ErrCancelled = fmt.Errorf("cancelled by cancel_query: %w", context.Canceled)

// ErrCancelledFlightInfo is the cause of a call stopped by Flight SQL's
// CancelFlightInfo; it is a context.Canceled.
var ErrCancelledFlightInfo = fmt.Errorf("cancelled by CancelFlightInfo: %w", context.Canceled)

// ErrStalled is the cause of a call the watchdog stopped.
var ErrStalled = fmt.Errorf("stalled: the client made no progress for longer than -stall-timeout: %w", context.Canceled)

// Call is one running call in a Registry.
type Call struct {
	ID      string
	Method  string
	Peer    string
	Owner   string // the principal's name; "" with authentication off
	Started time.Time
	Info    *Info
	cancel  context.CancelCauseFunc
}

// Registry is the set of running calls.
type Registry struct {
	mu    sync.Mutex
	calls map[string]*Call
	next  atomic.Int64
	stall time.Duration
}

// NewRegistry returns an empty registry whose watchdog (Watch) stops
// calls waiting on their peer for longer than stall (0: never).
func NewRegistry(stall time.Duration) *Registry {
	return &Registry{calls: map[string]*Call{}, stall: stall}
}

// tracked are the methods the registry lists: the streams that do work.
var tracked = map[string]string{
	"/arrow.flight.protocol.FlightService/DoGet":      "doget",
	"/arrow.flight.protocol.FlightService/DoPut":      "doput",
	"/arrow.flight.protocol.FlightService/DoAction":   "action",
	"/arrow.flight.protocol.FlightService/DoExchange": "doexchange",
}

// Start registers a call and returns its context, which cancel_query and
// the watchdog cancel, and the func that unregisters it.
func (r *Registry) Start(ctx context.Context, method string) (context.Context, *Call, func()) {
	info := From(ctx)
	if info.Kind() == "" {
		info.SetKind(tracked[method])
	}
	cctx, cancel := context.WithCancelCause(ctx)
	c := &Call{ID: strconv.FormatInt(r.next.Add(1), 10), Method: method, Started: time.Now(), Info: info, cancel: cancel}
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		c.Peer = p.Addr.String()
	}
	if p := access.FromContext(ctx); p != nil {
		c.Owner = p.Name
	}
	r.mu.Lock()
	r.calls[c.ID] = c
	r.mu.Unlock()
	return cctx, c, func() {
		r.mu.Lock()
		delete(r.calls, c.ID)
		r.mu.Unlock()
		cancel(nil)
	}
}

// Snapshot is what list_queries shows of a call.
type Snapshot struct {
	ID      string    `json:"id"`
	Kind    string    `json:"kind"`
	Array   string    `json:"array,omitempty"`
	SQL     string    `json:"sql,omitempty"`
	User    string    `json:"user,omitempty"`
	Peer    string    `json:"peer"`
	Started time.Time `json:"started"`
	Rows    int64     `json:"rows"`
	Bytes   int64     `json:"bytes"`
}

// visible reports whether the principal may see (and cancel) a call: one
// that may write sees all, a read-only one only its own.
func visible(p *access.Principal, c *Call) bool {
	return p.CanWrite() || c.Owner == p.Name
}

// List returns the running calls the caller may see, oldest first.
func (r *Registry) List(ctx context.Context) []Snapshot {
	who := access.FromContext(ctx)
	r.mu.Lock()
	var out []Snapshot
	for _, c := range r.calls {
		if !visible(who, c) {
			continue
		}
		user := c.Info.User()
		if user == "" {
			user = c.Owner
		}
		out = append(out, Snapshot{ID: c.ID, Kind: c.Info.Kind(), Array: c.Info.Array(), SQL: c.Info.SQL(), User: user,
			Peer: c.Peer, Started: c.Started.UTC(), Rows: c.Info.Rows(), Bytes: c.Info.Bytes()})
	}
	r.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Started.Equal(out[j].Started) {
			return out[i].Started.Before(out[j].Started)
		}
		return len(out[i].ID) < len(out[j].ID) || len(out[i].ID) == len(out[j].ID) && out[i].ID < out[j].ID
	})
	return out
}

// The errors of Cancel.
var (
	ErrUnknownCall = errors.New("no running query has that id (it may have finished)")
	ErrNotYours    = errors.New("a read-only token may cancel only its own queries")
)

// Cancel stops the call with the given id. A read-only caller may stop
// only its own calls; an id that is not running is ErrUnknownCall.
func (r *Registry) Cancel(ctx context.Context, id string) error {
	who := access.FromContext(ctx)
	r.mu.Lock()
	c, ok := r.calls[strings.TrimSpace(id)]
	r.mu.Unlock()
	if !ok {
		return ErrUnknownCall
	}
	if !visible(who, c) {
		return ErrNotYours
	}
	c.cancel(ErrCancelled)
	return nil
}

// CancelWhere stops, with cause, every running call the caller may see
// for which match is true (Flight SQL's CancelFlightInfo names its query
// by tickets) and says how many.
func (r *Registry) CancelWhere(ctx context.Context, cause error, match func(*Call) bool) int {
	who := access.FromContext(ctx)
	r.mu.Lock()
	var hit []*Call
	for _, c := range r.calls {
		if visible(who, c) && match(c) {
			hit = append(hit, c)
		}
	}
	r.mu.Unlock()
	for _, c := range hit {
		c.cancel(cause)
	}
	return len(hit)
}

// Count is the number of running calls.
func (r *Registry) Count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}

// Watch stops, every tick until ctx ends, the calls that have waited on
// their peer for longer than the stall timeout. It returns at once when
// the registry has no stall timeout.
func (r *Registry) Watch(ctx context.Context) {
	if r.stall <= 0 {
		return
	}
	tick := time.NewTicker(max(r.stall/10, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			r.stopStalled(now)
		}
	}
}

func (r *Registry) stopStalled(now time.Time) {
	r.mu.Lock()
	var stalled []*Call
	for _, c := range r.calls {
		if since := c.Info.waitingSince(); !since.IsZero() && now.Sub(since) > r.stall {
			stalled = append(stalled, c)
		}
	}
	r.mu.Unlock()
	for _, c := range stalled {
		c.cancel(ErrStalled)
	}
}

// Interceptors register the tracked streams (DoGet, DoPut, DoAction,
// DoExchange) for the life of the call; install them after
// authentication, so that a call's owner is known.
func (r *Registry) Interceptors() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if _, ok := tracked[info.FullMethod]; !ok {
			return handler(srv, ss)
		}
		ctx, c, done := r.Start(ss.Context(), info.FullMethod)
		defer done()
		return handler(srv, &waitingStream{ServerStream: ss, ctx: ctx, info: c.Info})
	}
}

// waitingStream marks its call as waiting on the peer while a message is
// being sent (gRPC blocks a send while the peer's flow-control window is
// full, which is what a client that stopped reading looks like) or
// received (a client that stopped sending).
//
// A send or receive blocked on the peer does not watch the call's
// context: gRPC only gives up on it when the stream ends, and a server
// ends a stream by returning from its handler. So each runs on a helper
// goroutine, and when the call is cancelled (cancel_query, the stall
// watchdog) the handler is told at once and returns; gRPC then ends the
// stream, which releases the helper. Until the helper has returned no
// other message is sent or received on the stream (gRPC allows one
// sender and one receiver at a time).
type waitingStream struct {
	grpc.ServerStream
	ctx  context.Context
	info *Info
	send pending
	recv pending
}

// pending is the helper goroutine of the last send (or receive), if it
// has not returned.
type pending struct{ done chan error }

func (p *pending) run(ctx context.Context, info *Info, op func() error) error {
	if p.done != nil {
		select {
		case err := <-p.done:
			p.done = nil
			if err != nil {
				return err
			}
		default:
			return context.Cause(ctx) // the last one is still blocked: the call was cancelled
		}
	}
	if err := ctx.Err(); err != nil {
		return context.Cause(ctx)
	}
	waited := info.Waiting()
	defer waited()
	done := make(chan error, 1)
	go func() { done <- op() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		p.done = done
		return context.Cause(ctx)
	}
}

func (s *waitingStream) Context() context.Context { return s.ctx }

func (s *waitingStream) SendMsg(m any) error {
	return s.send.run(s.ctx, s.info, func() error { return s.ServerStream.SendMsg(m) })
}

func (s *waitingStream) RecvMsg(m any) error {
	return s.recv.run(s.ctx, s.info, func() error { return s.ServerStream.RecvMsg(m) })
}
