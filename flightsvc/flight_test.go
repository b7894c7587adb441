package flightsvc

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	arrarray "github.com/apache/arrow-go/v18/arrow/array"
	aflight "github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tileflight/tileflight/access"
	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/transport"
	"github.com/tileflight/tileflight/writer"
)

func TestDescriptorQuery(t *testing.T) {
	cases := []struct {
		fd    *aflight.FlightDescriptor
		array string
		kind  error
	}{
		{&aflight.FlightDescriptor{Type: aflight.DescriptorPATH, Path: []string{"a/b"}}, "a/b", nil},
		{&aflight.FlightDescriptor{Type: aflight.DescriptorPATH, Path: []string{"a", "b"}}, "a/b", nil},
		{&aflight.FlightDescriptor{Type: aflight.DescriptorCMD, Cmd: []byte(`{"array":"x","layout":"global"}`)}, "x", nil},
		{nil, "", errkind.InvalidArgument},
		{&aflight.FlightDescriptor{Type: aflight.DescriptorPATH}, "", errkind.InvalidArgument},
		{&aflight.FlightDescriptor{Type: aflight.DescriptorPATH, Path: []string{"..", "x"}}, "", errkind.InvalidArgument},
		{&aflight.FlightDescriptor{Type: aflight.DescriptorPATH, Path: []string{"a", ""}}, "", errkind.InvalidArgument},
		{&aflight.FlightDescriptor{Type: aflight.DescriptorPATH, Path: []string{"/etc"}}, "", errkind.InvalidArgument},
		{&aflight.FlightDescriptor{Type: aflight.DescriptorCMD, Cmd: []byte(`{"array":"x","bogus":1}`)}, "", errkind.InvalidArgument},
		{&aflight.FlightDescriptor{Type: aflight.DescriptorUNKNOWN}, "", errkind.InvalidArgument},
	}
	for i, c := range cases {
		q, err := descriptorQuery(c.fd)
		if c.kind != nil {
			if !errors.Is(err, c.kind) {
				t.Errorf("%d: %v, want %v", i, err, c.kind)
			}
			continue
		}
		if err != nil || q.Array != c.array {
			t.Errorf("%d: %v %v", i, q, err)
		}
	}
}

func TestDenseSubarray(t *testing.T) {
	s, err := schema.FromJSON([]byte(`{"type":"dense","dimensions":[
		{"name":"r","type":"uint64","domain":[0,9],"tile":5},{"name":"c","type":"uint64","domain":[1,4],"tile":2}],
		"attributes":[{"name":"v","type":"float64"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		cmd   string
		cells int64
		ok    bool
	}{
		{`{"array":"a"}`, 40, true},
		{`{"array":"a","subarray":{"r":[[2,4]]}}`, 12, true},
		{`{"array":"a","subarray":{"r":[[2,4]],"c":[[2,2]]},"layout":"col-major"}`, 3, true},
		{`{"array":"a","subarray":{"r":[[2,40]]}}`, 0, false},
		{`{"array":"a","subarray":{"r":[[4,2]]}}`, 0, false},
		{`{"array":"a","subarray":{"r":[[1,2],[4,5]]}}`, 0, false},
		{`{"array":"a","subarray":{"zz":[[1,2]]}}`, 0, false},
		{`{"array":"a","subarray":{"r":[["a","b"]]}}`, 0, false},
		{`{"array":"a","subarray":{"r":[[1.5,2]]}}`, 0, false},
		{`{"array":"a","layout":"global"}`, 0, false},
	}
	for _, c := range cases {
		q, err := descriptorQuery(&aflight.FlightDescriptor{Type: aflight.DescriptorCMD, Cmd: []byte(c.cmd)})
		if err != nil {
			t.Fatalf("%s: %v", c.cmd, err)
		}
		d, err := denseSubarray(q, s)
		if !c.ok {
			if err == nil || !errors.Is(err, errkind.InvalidArgument) {
				t.Errorf("%s: %v", c.cmd, err)
			}
			continue
		}
		if err != nil || d.cells != c.cells {
			t.Errorf("%s: %+v %v", c.cmd, d, err)
		}
	}
}

// serve runs the service on a loopback port and returns a client.
func serve(t *testing.T, cfg Config) aflight.Client {
	t.Helper()
	return serveService(t, NewService(cfg))
}

// serveService is serve for a service the test keeps a hold of.
func serveService(t *testing.T, svc *Service) aflight.Client {
	t.Helper()
	ua, sa := AuthInterceptors(svc.cfg.Auth)
	ul, sl := AccessLog(zerolog.Nop())
	// The daemon's transport (transport.ServerOptions: sendCodec,
	// sendconn) under the tests, as in cmd/flightd.
	tc := transport.Config{ZeroCopySend: true}
	streamChain := []grpc.StreamServerInterceptor{sl, sa}
	if svc.cfg.Calls != nil {
		streamChain = append(streamChain, svc.cfg.Calls.Interceptors())
	}
	srv := grpc.NewServer(append([]grpc.ServerOption{grpc.ChainUnaryInterceptor(ul, ua), grpc.ChainStreamInterceptor(streamChain...)},
		transport.ServerOptions(tc)...)...)
	aflight.RegisterFlightServiceServer(srv, svc)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(transport.Listener(lis, tc))
	t.Cleanup(srv.Stop)
	c, err := aflight.NewClientWithMiddleware(lis.Addr().String(), nil, nil, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func doPut(ctx context.Context, c aflight.Client, fd *aflight.FlightDescriptor, rec arrow.RecordBatch) (map[string]any, error) {
	stream, err := c.DoPut(ctx)
	if err != nil {
		return nil, err
	}
	w := aflight.NewRecordWriter(stream)
	w.SetFlightDescriptor(fd)
	if err := w.Write(rec); err != nil {
		// The server refused the call: its status arrives on Recv.
		_, rerr := stream.Recv()
		return nil, rerr
	}
	w.Close()
	stream.CloseSend()
	res, err := stream.Recv()
	if err != nil {
		return nil, err
	}
	var out map[string]any
	return out, json.Unmarshal(res.AppMetadata, &out)
}

// keyedStrings is a DoPut batch of a sparse array with an integer
// dimension k and a string attribute s.
func keyedStrings(ks []int32, ss []string) arrow.RecordBatch {
	b := arrarray.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema([]arrow.Field{
		{Name: "k", Type: arrow.PrimitiveTypes.Int32}, {Name: "s", Type: arrow.BinaryTypes.String}}, nil))
	b.Field(0).(*arrarray.Int32Builder).AppendValues(ks, nil)
	b.Field(1).(*arrarray.StringBuilder).AppendValues(ss, nil)
	return b.NewRecordBatch()
}

// A sparse array written through DoPut reads back through DoGet, and the
// mutation is refused to a read-only token.
func TestPutGetAndAuthInProcess(t *testing.T) {
	ctx := context.Background()
	st := storage.NewMem()
	s, err := schema.FromJSON([]byte(`{"type":"sparse","dimensions":[{"name":"k","type":"int64","domain":[0,1000],"tile":10}],
		"attributes":[{"name":"s","type":"string_utf8","cell_val_num":"var"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := writer.CreateArray(ctx, st, "g/a", s); err != nil {
		t.Fatal(err)
	}
	auth, err := access.NewFromText("w rw\nr ro")
	if err != nil {
		t.Fatal(err)
	}
	c := serve(t, Config{Store: st, Auth: auth})
	rw := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer w")
	ro := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer r")

	rec := keyedStrings([]int32{7, 3, 5}, []string{"seven", "three", "five"})
	defer rec.Release()
	path := &aflight.FlightDescriptor{Type: aflight.DescriptorPATH, Path: []string{"g", "a"}}

	if _, err := doPut(ctx, c, path, rec); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("no token: %v", err)
	}
	if _, err := doPut(ro, c, path, rec); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("read-only token: %v", err)
	}
	res, err := doPut(rw, c, path, rec)
	if err != nil {
		t.Fatal(err)
	}
	if res["rows"].(float64) != 3 || len(res["fragments"].([]any)) != 1 {
		t.Fatalf("%v", res)
	}

	stream, err := c.DoGet(ro, &aflight.Ticket{Ticket: []byte(`{"array":"g/a","layout":"row-major"}`)})
	if err != nil {
		t.Fatal(err)
	}
	rd, err := aflight.NewRecordReader(stream)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Release()
	var ks []int64
	var ss []string
	for rd.Next() {
		r := rd.RecordBatch()
		ks = append(ks, r.Column(0).(*arrarray.Int64).Int64Values()...)
		for i := 0; i < int(r.NumRows()); i++ {
			ss = append(ss, r.Column(1).(*arrarray.LargeString).Value(i))
		}
	}
	if err := rd.Err(); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	if strings.Join(ss, ",") != "three,five,seven" || len(ks) != 3 || ks[0] != 3 {
		t.Fatalf("%v %v", ks, ss)
	}

	// Actions: read-only may describe but not drop.
	desc, err := c.DoAction(ro, &aflight.Action{Type: "describe", Body: []byte(`{"array":"g/a"}`)})
	if err != nil {
		t.Fatal(err)
	}
	r, err := desc.Recv()
	if err != nil || !strings.Contains(string(r.Body), `"array":"g/a"`) {
		t.Fatalf("describe: %v %s", err, r.GetBody())
	}
	drop, _ := c.DoAction(ro, &aflight.Action{Type: "drop_array", Body: []byte(`{"array":"g/a"}`)})
	if _, err := drop.Recv(); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("drop with a read-only token: %v", err)
	}
}

// Any CMD descriptor is a query or an InvalidArgument error, never a panic.
func FuzzDescriptorQuery(f *testing.F) {
	f.Add([]byte(`{"array":"a/b","subarray":{"x":[[0,9]]},"timestamp":[1,2]}`), "a/b")
	f.Add([]byte(`{`), "..")
	f.Fuzz(func(t *testing.T, cmd []byte, path string) {
		if _, err := descriptorQuery(&aflight.FlightDescriptor{Type: aflight.DescriptorCMD, Cmd: cmd}); err != nil && !errors.Is(err, errkind.InvalidArgument) {
			t.Fatalf("CMD %q: %v", cmd, err)
		}
		if _, err := descriptorQuery(&aflight.FlightDescriptor{Type: aflight.DescriptorPATH, Path: strings.Split(path, "\x1f")}); err != nil && !errors.Is(err, errkind.InvalidArgument) {
			t.Fatalf("PATH %q: %v", path, err)
		}
	})
}

// action runs one DoAction and returns its one result body.
func action(ctx context.Context, c aflight.Client, typ, body string) ([]byte, error) {
	stream, err := c.DoAction(ctx, &aflight.Action{Type: typ, Body: []byte(body)})
	if err != nil {
		return nil, err
	}
	r, err := stream.Recv()
	if err != nil {
		return nil, err
	}
	return r.Body, nil
}

// doGetKs reads the int64 column k of a row-major read of array.
func doGetKs(ctx context.Context, c aflight.Client, array string) ([]int64, error) {
	stream, err := c.DoGet(ctx, &aflight.Ticket{Ticket: []byte(`{"array":"` + array + `","layout":"row-major"}`)})
	if err != nil {
		return nil, err
	}
	rd, err := aflight.NewRecordReader(stream)
	if err != nil {
		return nil, err
	}
	defer rd.Release()
	var ks []int64
	for rd.Next() {
		ks = append(ks, rd.RecordBatch().Column(0).(*arrarray.Int64).Int64Values()...)
	}
	if err := rd.Err(); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return ks, nil
}

// The daemon's key writes encrypted arrays (create_array with
// "encrypted": true, DoPut, put_metadata, drop_array) and is not applied
// to plain ones; a daemon without the key, or with another, is refused
// with FailedPrecondition and changes nothing.
func TestEncryptedWrites(t *testing.T) {
	ctx := context.Background()
	st := storage.NewMem()
	key := []byte("0123456789abcdeF0123456789abcdeF")
	other := []byte("X123456789abcdeF0123456789abcdeF")
	keyed := serve(t, Config{Store: st, EncryptionKey: key})
	keyless := serve(t, Config{Store: st})
	wrong := serve(t, Config{Store: st, EncryptionKey: other})

	sch := func(name string, extra string) string {
		return `{"array":"` + name + `","type":"sparse"` + extra + `,"dimensions":[{"name":"k","type":"int64","domain":[0,1000],"tile":10}],
			"attributes":[{"name":"v","type":"int32"}]}`
	}
	b := arrarray.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema([]arrow.Field{
		{Name: "k", Type: arrow.PrimitiveTypes.Int64}, {Name: "v", Type: arrow.PrimitiveTypes.Int32}}, nil))
	b.Field(0).(*arrarray.Int64Builder).AppendValues([]int64{9, 2, 5}, nil)
	b.Field(1).(*arrarray.Int32Builder).AppendValues([]int32{90, 20, 50}, nil)
	rec := b.NewRecordBatch()
	defer rec.Release()
	fd := func(name string) *aflight.FlightDescriptor {
		return &aflight.FlightDescriptor{Type: aflight.DescriptorPATH, Path: []string{name}}
	}

	// Creation: only on request, and only with a key.
	if _, err := action(ctx, keyless, "create_array", sch("enc", `,"encrypted":true`)); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("create encrypted without a key: %v", err)
	}
	if _, err := action(ctx, keyed, "create_array", sch("enc", `,"encrypted":"yes"`)); status.Code(err) != codes.InvalidArgument {
		t.Fatalf(`"encrypted":"yes": %v`, err)
	}
	out, err := action(ctx, keyed, "create_array", sch("enc", `,"encrypted":true`))
	if err != nil || !strings.Contains(string(out), `"encrypted":true`) {
		t.Fatalf("create encrypted: %v %s", err, out)
	}
	for _, c := range []struct {
		name, extra string
	}{{"plain", ""}, {"plain2", `,"encrypted":false`}} {
		out, err := action(ctx, keyed, "create_array", sch(c.name, c.extra))
		if err != nil || strings.Contains(string(out), "encrypted") {
			t.Fatalf("create %s on a keyed daemon: %v %s", c.name, err, out)
		}
	}
	if _, err := writer.LoadSchemaWith(ctx, st, "enc", writer.ArrayOptions{EncryptionKey: key}); err != nil {
		t.Fatalf("the created array is not encrypted with the daemon's key: %v", err)
	}
	if _, err := writer.LoadSchema(ctx, st, "plain"); err != nil {
		t.Fatalf("create_array without \"encrypted\" made an encrypted array: %v", err)
	}

	// Writes and reads: the keyed daemon on both arrays.
	for _, name := range []string{"enc", "plain"} {
		if _, err := doPut(ctx, keyed, fd(name), rec); err != nil {
			t.Fatalf("DoPut %s: %v", name, err)
		}
		ks, err := doGetKs(ctx, keyed, name)
		if err != nil || len(ks) != 3 || ks[0] != 2 || ks[2] != 9 {
			t.Fatalf("DoGet %s: %v %v", name, ks, err)
		}
		if _, err := action(ctx, keyed, "put_metadata", `{"array":"`+name+`","metadata":{"unit":"m"}}`); err != nil {
			t.Fatalf("put_metadata %s: %v", name, err)
		}
		md, err := action(ctx, keyed, "get_metadata", `{"array":"`+name+`"}`)
		if err != nil || string(md) != `{"unit":"m"}` {
			t.Fatalf("get_metadata %s: %v %s", name, err, md)
		}
		desc, err := action(ctx, keyed, "describe", `{"array":"`+name+`"}`)
		if err != nil || strings.Contains(string(desc), `"encrypted":true`) != (name == "enc") {
			t.Fatalf("describe %s: %v %s", name, err, desc)
		}
	}
	// The keyless and the wrong-keyed daemon still serve the plain array.
	for _, c := range []aflight.Client{keyless, wrong} {
		if _, err := doPut(ctx, c, fd("plain"), rec); err != nil {
			t.Fatalf("DoPut plain: %v", err)
		}
	}

	// Refusals leave the encrypted array as it was: one fragment, one
	// metadata file.
	count := func(dir string) int {
		es, err := st.List(ctx, "enc/"+dir)
		if err != nil {
			t.Fatal(err)
		}
		return len(es)
	}
	frags, metas := count("__fragments"), count("__meta")
	refusals := []struct {
		what string
		do   func(c aflight.Client) error
	}{
		{"DoPut", func(c aflight.Client) error { _, err := doPut(ctx, c, fd("enc"), rec); return err }},
		{"put_metadata", func(c aflight.Client) error {
			_, err := action(ctx, c, "put_metadata", `{"array":"enc","metadata":{"x":1}}`)
			return err
		}},
		{"drop_array", func(c aflight.Client) error { _, err := action(ctx, c, "drop_array", `{"array":"enc"}`); return err }},
		{"DoGet", func(c aflight.Client) error { _, err := doGetKs(ctx, c, "enc"); return err }},
	}
	for _, c := range []struct {
		daemon string
		client aflight.Client
	}{{"keyless", keyless}, {"wrong key", wrong}} {
		for _, r := range refusals {
			err := r.do(c.client)
			if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), `"enc"`) || !strings.Contains(err.Error(), "encrypt") {
				t.Errorf("%s daemon: %s into the encrypted array: %v, want FailedPrecondition naming the array and the encryption", c.daemon, r.what, err)
			}
		}
	}
	if f, m := count("__fragments"), count("__meta"); f != frags || m != metas {
		t.Fatalf("refused writes changed the array: fragments %d -> %d, metadata %d -> %d", frags, f, metas, m)
	}

	if _, err := action(ctx, keyed, "drop_array", `{"array":"enc"}`); err != nil {
		t.Fatalf("drop with the key: %v", err)
	}
	if ok, err := writer.Exists(ctx, st, "enc"); err != nil || ok {
		t.Fatalf("dropped array still there: %v %v", ok, err)
	}
}

// create_array's "encrypted" flag is taken out of any JSON body without a
// panic, leaving a body without it; describe's marking keeps JSON valid.
func FuzzTakeEncrypted(f *testing.F) {
	f.Add([]byte(`{"array":"a","encrypted":true,"type":"sparse"}`))
	f.Add([]byte(`{"encrypted":false}`))
	f.Add([]byte(`{"encrypted":1}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(` {"a":1} `))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		out, _, err := takeEncrypted(b)
		if err != nil {
			return
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatalf("%q -> %q: %v", b, out, err)
		}
		if _, ok := m["encrypted"]; ok {
			t.Fatalf("%q -> %q still says encrypted", b, out)
		}
		if m == nil { // JSON null: create_array refuses it before (no "array")
			return
		}
		marked := withEncrypted(out, true)
		var mm map[string]json.RawMessage
		if err := json.Unmarshal(marked, &mm); err != nil || string(mm["encrypted"]) != "true" {
			t.Fatalf("withEncrypted(%q) = %q: %v", out, marked, err)
		}
	})
}
