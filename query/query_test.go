package query

import (
	"errors"
	"strings"
	"testing"

	"github.com/tileflight/tileflight/errkind"
)

func TestParseDesignExample(t *testing.T) {
	q, err := Parse([]byte(`{
  "array": "climate/temp",
  "columns": ["x", "y", "temp"],
  "subarray": {"x": [[0, 99]], "y": [[10, 20], [30, 40]]},
  "layout": "row-major",
  "timestamp": [0, 1700000000000],
  "batch_rows": 65536,
  "limit": 1000000,
  "partitions": 4
}`))
	if err != nil {
		t.Fatal(err)
	}
	if q.Array != "climate/temp" || len(q.Columns) != 3 || q.Layout != LayoutRowMajor ||
		q.Timestamp.End != 1700000000000 || q.BatchRows != 65536 || q.Limit != 1000000 || q.Partitions != 4 {
		t.Fatalf("%+v", q)
	}
	if len(q.Subarray) != 2 || q.Subarray[0].Dim != "x" || q.Subarray[1].Dim != "y" || len(q.Subarray[1].Ranges) != 2 {
		t.Fatalf("subarray %+v", q.Subarray)
	}
	if q.Subarray[1].Ranges[1].Hi.Num != "40" {
		t.Fatalf("range %+v", q.Subarray[1].Ranges[1])
	}
	// The canonical rendering parses back to the same query.
	b, _ := q.MarshalJSON()
	q2, err := Parse(b)
	if err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	b2, _ := q2.MarshalJSON()
	if string(b) != string(b2) {
		t.Fatalf("%s != %s", b, b2)
	}
}

func TestParseDefaults(t *testing.T) {
	q, err := Parse([]byte(`{"array":"a"}`))
	if err != nil {
		t.Fatal(err)
	}
	if q.Columns != nil || q.Subarray != nil || q.Layout != LayoutDefault || q.Timestamp != nil || q.Limit != -1 || q.BatchRows != 0 {
		t.Fatalf("%+v", q)
	}
	q, err = Parse([]byte(`{"array":"a","timestamp":5,"subarray":{"s":[["a","c"]]},"limit":0}`))
	if err != nil {
		t.Fatal(err)
	}
	if *q.Timestamp != (Timestamp{0, 5}) || !q.Subarray[0].Ranges[0].Lo.IsStr || q.Limit != 0 {
		t.Fatalf("%+v", q)
	}
	// int64 bounds keep full precision.
	q, err = Parse([]byte(`{"array":"a","subarray":{"d":[[-9223372036854775808, 18446744073709551615]]}}`))
	if err != nil || q.Subarray[0].Ranges[0].Hi.Num != "18446744073709551615" {
		t.Fatalf("%v %+v", err, q)
	}
}

func TestParseRejects(t *testing.T) {
	cases := []struct{ in, want string }{
		{`not json`, "bad JSON"},
		{`{}`, `"array" is required`},
		{`{"array":"a","colums":["x"]}`, "unknown field"},
		{`{"array":"/etc/passwd"}`, "empty segment"},
		{`{"array":"a/../b"}`, `".." segments`},
		{`{"array":"a/__schema"}`, `starts with "__"`},
		{"{\"array\":\"a\\u0000b\"}", "not allowed"},
		{`{"array":"a b"}`, "not allowed"},
		{`{"array":"a","layout":"diagonal"}`, "layout"},
		{`{"array":"a","batch_rows":0}`, "batch_rows"},
		{`{"array":"a","limit":-1}`, "negative"},
		{`{"array":"a","partitions":100000}`, "partitions"},
		{`{"array":"a","timestamp":[5,1]}`, "after end"},
		{`{"array":"a","timestamp":-3}`, "non-negative"},
		{`{"array":"a","timestamp":"now"}`, "timestamp"},
		{`{"array":"a","subarray":[1,2]}`, "must be an object"},
		{`{"array":"a","subarray":{"x":[[1]]}}`, "want [lo, hi]"},
		{`{"array":"a","subarray":{"x":[]}}`, "empty list"},
		{`{"array":"a","subarray":{"x":[[1,"b"]]}}`, "mix"},
		{`{"array":"a","subarray":{"x":[[true,false]]}}`, "numbers or strings"},
		{`{"array":"a","columns":["x","x"]}`, "twice"},
		{`{"array":"a"} {"array":"b"}`, "trailing"},
		{"\xff", "UTF-8"},
	}
	for _, c := range cases {
		_, err := Parse([]byte(c.in))
		if err == nil {
			t.Errorf("%s: accepted", c.in)
			continue
		}
		if !errors.Is(err, errkind.InvalidArgument) {
			t.Errorf("%s: kind %v", c.in, errkind.Of(err))
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %q does not mention %q", c.in, err, c.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"array":"a/b","subarray":{"x":[[1,2],[3,4]]},"timestamp":[1,2],"columns":["x"]}`))
	f.Add([]byte(`{"array":"a","subarray":{"s":[["a","z"]]},"layout":"global","limit":3}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		q, err := Parse(b)
		if err != nil {
			return
		}
		out, _ := q.MarshalJSON()
		if _, err := Parse(out); err != nil {
			t.Fatalf("canonical form %s does not parse: %v", out, err)
		}
	})
}

func TestParseFilterAndAggregates(t *testing.T) {
	q, err := Parse([]byte(`{"array":"a","filter":"v > 0.5 and s in ['x', 'y']","aggregates":{"v":["sum","mean"],"*":["count"],"s":["null_count"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if q.Filter != "v > 0.5 and s in ['x', 'y']" {
		t.Fatalf("filter %q", q.Filter)
	}
	var cols []string
	for _, a := range q.Aggregates {
		cols = append(cols, a.Column())
	}
	if strings.Join(cols, ",") != "sum(v),mean(v),count(*),null_count(s)" {
		t.Fatalf("aggregates %v", cols)
	}
	b, _ := q.MarshalJSON()
	q2, err := Parse(b)
	if err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if b2, _ := q2.MarshalJSON(); string(b2) != string(b) {
		t.Fatalf("%s != %s", b2, b)
	}
	for _, c := range []struct{ in, msg string }{
		{`{"array":"a","filter":""}`, "empty"},
		{`{"array":"a","filter":"v >"}`, "position 3"},
		{`{"array":"a","filter":5}`, "bad JSON"},
		{`{"array":"a","aggregates":[]}`, "must be an object"},
		{`{"array":"a","aggregates":{}}`, "no aggregate"},
		{`{"array":"a","aggregates":{"v":[]}}`, "empty list"},
		{`{"array":"a","aggregates":{"v":["median"]}}`, "unknown operation"},
		{`{"array":"a","aggregates":{"*":["sum"]}}`, "only \"count\""},
		{`{"array":"a","aggregates":{"v":["sum","sum"]}}`, "twice"},
		{`{"array":"a","aggregates":{"v":["sum"],"v":["max"]}}`, "twice"},
		{`{"array":"a","aggregates":{"v":"sum"}}`, "list of operations"},
	} {
		_, err := Parse([]byte(c.in))
		if !errors.Is(err, errkind.InvalidArgument) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: %v, want InvalidArgument containing %q", c.in, err, c.msg)
		}
	}
}

// compression takes none (the default) or zstd, and survives the canonical
// rendering that endpoint tickets use.
func TestParseCompression(t *testing.T) {
	for _, c := range []struct {
		json, want string
		err        bool
	}{
		{`{"array":"a"}`, "", false},
		{`{"array":"a","compression":"none"}`, "", false},
		{`{"array":"a","compression":"zstd"}`, CompressionZstd, false},
		{`{"array":"a","compression":"lz4"}`, "", true},
		{`{"array":"a","compression":"ZSTD"}`, "", true},
		{`{"array":"a","compression":1}`, "", true},
	} {
		q, err := Parse([]byte(c.json))
		if c.err {
			if !errors.Is(err, errkind.InvalidArgument) {
				t.Errorf("%s: %v, want InvalidArgument", c.json, err)
			}
			continue
		}
		if err != nil || q.Compression != c.want {
			t.Errorf("%s: %+v %v", c.json, q, err)
			continue
		}
		b, _ := q.MarshalJSON()
		q2, err := Parse(b)
		if err != nil || q2.Compression != c.want {
			t.Errorf("%s: rendered %s: %+v %v", c.json, b, q2, err)
		}
	}
}
