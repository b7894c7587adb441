package flightsvc

import (
	"context"
	"errors"
	"io"
	"sort"
	"strings"
	"testing"

	aflight "github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tileflight/tileflight/access"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/writer"
)

// TestScopedTokenReachesOnlyItsPrefixes: a token with prefix=lab/ sees
// lab/a and nothing else, on every RPC and every action. An array outside
// its reach answers NOT_FOUND exactly as an array that does not exist
// (creating one is PERMISSION_DENIED, decided before anything is looked
// at). Every action the service lists must have a case here: adding an
// action without deciding its scope check fails this test.
func TestScopedTokenReachesOnlyItsPrefixes(t *testing.T) {
	ctx := context.Background()
	st := storage.NewMem()
	s, err := schema.FromJSON([]byte(`{"type":"sparse","dimensions":[{"name":"k","type":"int32","domain":[0,100],"tile":10}],
		"attributes":[{"name":"s","type":"string_utf8","cell_val_num":"var"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"lab/a", "other/b"} {
		if err := writer.CreateArray(ctx, st, name, s); err != nil {
			t.Fatal(err)
		}
	}
	auth, err := access.NewFromText("all rw\nlab rw labteam prefix=lab/")
	if err != nil {
		t.Fatal(err)
	}
	c := serve(t, Config{Store: st, Auth: auth})
	lab := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer lab")
	all := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer all")

	rec := keyedStrings([]int32{7}, []string{"seven"})
	defer rec.Release()
	for _, name := range []string{"lab/a", "other/b"} {
		if _, err := doPut(all, c, &aflight.FlightDescriptor{Type: aflight.DescriptorPATH, Path: strings.Split(name, "/")}, rec); err != nil {
			t.Fatal(err)
		}
	}

	// Listings: the scoped token sees only lab/a.
	if got := listFlights(t, c, lab); strings.Join(got, ",") != "lab/a" {
		t.Errorf("ListFlights with prefix=lab/: %v", got)
	}
	if got := listFlights(t, c, all); strings.Join(got, ",") != "lab/a,other/b" {
		t.Errorf("ListFlights unscoped: %v", got)
	}
	body, err := action(lab, c, "list_arrays", "")
	if err != nil || strings.Contains(string(body), "other") || !strings.Contains(string(body), "lab/a") {
		t.Errorf("list_arrays with prefix=lab/: %s %v", body, err)
	}

	notFound := func(what string, err error) {
		t.Helper()
		if status.Code(err) != codes.NotFound {
			t.Errorf("%s on an array outside the token's prefixes: %v, want NotFound", what, err)
		} else if !strings.Contains(err.Error(), "no such array") {
			t.Errorf("%s: %v: must read as a missing array", what, err)
		}
	}
	other := `{"array":"other/b"}`
	pathDesc := &aflight.FlightDescriptor{Type: aflight.DescriptorPATH, Path: []string{"other", "b"}}
	cmdDesc := &aflight.FlightDescriptor{Type: aflight.DescriptorCMD, Cmd: []byte(other)}

	// RPCs.
	_, err = c.GetFlightInfo(lab, pathDesc)
	notFound("GetFlightInfo PATH", err)
	_, err = c.GetFlightInfo(lab, cmdDesc)
	notFound("GetFlightInfo CMD", err)
	_, err = c.GetSchema(lab, pathDesc)
	notFound("GetSchema", err)
	// A ticket made for another token.
	info, err := c.GetFlightInfo(all, cmdDesc)
	if err != nil {
		t.Fatal(err)
	}
	notFound("DoGet of another token's endpoint ticket", doGetErr(lab, c, info.Endpoint[0].Ticket.Ticket))
	notFound("DoGet of a ticket", doGetErr(lab, c, []byte(other)))
	_, err = doPut(lab, c, pathDesc, rec)
	notFound("DoPut", err)

	// Every action: a body naming other/b.
	cases := map[string]struct {
		body string
		code codes.Code
	}{
		"list_arrays":      {`{"prefix":"other/"}`, codes.OK}, // checked below: lists nothing
		"describe":         {other, codes.NotFound},
		"create_array":     {`{"array":"other/new","type":"sparse","dimensions":[{"name":"k","type":"int32","domain":[0,9],"tile":5}],"attributes":[{"name":"v","type":"int32"}]}`, codes.PermissionDenied},
		"drop_array":       {other, codes.NotFound},
		"list_fragments":   {other, codes.NotFound},
		"get_metadata":     {other, codes.NotFound},
		"put_metadata":     {`{"array":"other/b","metadata":{"k":1}}`, codes.NotFound},
		"commit_fragments": {`{"array":"other/b","fragments":["__1_1_00000000000000000000000000000000_22"]}`, codes.NotFound},
		"abort_fragments":  {`{"array":"other/b","fragments":["__1_1_00000000000000000000000000000000_22"]}`, codes.NotFound},
		"consolidate":      {other, codes.NotFound},
		"vacuum":           {other, codes.NotFound},
		"delete":           {`{"array":"other/b","filter":"k == 7"}`, codes.NotFound},
		"evolve_schema":    {`{"array":"other/b","add_attributes":[{"name":"z","type":"int32"}]}`, codes.NotFound},
		// Not about an array: scoped by owner (a read-only token sees and
		// cancels only its own queries; see TestListAndCancelQueries).
		"list_queries": {``, codes.OK},
		// The daemon's limits and features: names no array.
		"server_info":  {``, codes.OK},
		"cancel_query": {`{"id":"999999"}`, codes.NotFound},
	}
	var listed []string
	stream, err := c.ListActions(lab, &aflight.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	for {
		a, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(a.Type, "_") || a.Type == "describe" || a.Type == "consolidate" || a.Type == "vacuum" || a.Type == "delete" {
			listed = append(listed, a.Type) // the JSON protocol's actions (Flight SQL's are CamelCase)
		}
	}
	sort.Strings(listed)
	for _, name := range listed {
		c0, ok := cases[name]
		if !ok {
			t.Errorf("action %q has no case in TestScopedTokenReachesOnlyItsPrefixes: decide how it checks a token's prefixes", name)
			continue
		}
		body, err := action(lab, c, name, c0.body)
		if status.Code(err) != c0.code {
			t.Errorf("action %s on other/b: %v, want %v", name, err, c0.code)
		}
		if c0.code == codes.NotFound && strings.Contains(c0.body, "other/b") && err != nil && !strings.Contains(err.Error(), "no such array") {
			t.Errorf("action %s: %v: must read as a missing array", name, err)
		}
		if name == "list_arrays" && strings.Contains(string(body), "other") {
			t.Errorf("list_arrays {prefix: other/} with prefix=lab/: %s", body)
		}
	}
	// Nothing of other/b changed: the unscoped token still reads its row.
	if err := doGetErr(all, c, []byte(other)); err != nil {
		t.Errorf("other/b after the scoped token's attempts: %v", err)
	}
	// And the scoped token does reach its own array.
	if err := doGetErr(lab, c, []byte(`{"array":"lab/a"}`)); err != nil {
		t.Errorf("lab/a with prefix=lab/: %v", err)
	}
}

func listFlights(t *testing.T, c aflight.Client, ctx context.Context) []string {
	t.Helper()
	stream, err := c.ListFlights(ctx, &aflight.Criteria{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for {
		info, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, strings.Join(info.FlightDescriptor.Path, "/"))
	}
	sort.Strings(names)
	return names
}

// doGetErr reads a whole DoGet and returns its error.
func doGetErr(ctx context.Context, c aflight.Client, ticket []byte) error {
	stream, err := c.DoGet(ctx, &aflight.Ticket{Ticket: ticket})
	if err != nil {
		return err
	}
	rd, err := aflight.NewRecordReader(stream)
	if err != nil {
		return err
	}
	defer rd.Release()
	for rd.Next() {
	}
	if err := rd.Err(); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}
