package flightsvc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"

	aflight "github.com/apache/arrow-go/v18/arrow/flight"

	"github.com/tileflight/tileflight/access"
	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/query"
	"github.com/tileflight/tileflight/reader/ndarray"
	"github.com/tileflight/tileflight/tdbarray"
	"github.com/tileflight/tileflight/writer"
)

// Action bodies are small JSON objects; anything larger is refused
// before it is parsed.
const maxActionBody = 16 << 20

type actionDef struct {
	desc    string
	mutates bool
	run     func(s *Service, ctx context.Context, body []byte) (any, error)
}

var actions = map[string]actionDef{
	"list_arrays": {
		desc: `List the arrays under the data directory. Body: empty or {"prefix": "climate/"}. Result: a JSON list of names.`,
		run:  (*Service).actListArrays,
	},
	"describe": {
		desc: `Describe an array. Body: {"array": NAME}. Result: the array's schema JSON (docs/protocol.md, "Schema JSON"), with "fragment_count" (visible fragments) and "last_compaction" (the newest consolidated fragment: {"fragment", "timestamps"}, or null).`,
		run:  (*Service).actDescribe,
	},
	"create_array": {
		desc:    `Create an array. Body: schema JSON with "array": NAME, and "encrypted": true to encrypt it with the daemon's key. Result: the schema JSON as created (TileDB's defaults filled in).`,
		mutates: true,
		run:     (*Service).actCreate,
	},
	"drop_array": {
		desc:    `Delete an array and all its data. Body: {"array": NAME}. Result: {"dropped": NAME}.`,
		mutates: true,
		run:     (*Service).actDrop,
	},
	"list_fragments": {
		desc: `List an array's visible fragments. Body: {"array": NAME, "timestamp": optional t or [start, end]}. Result: a list of {"name", "timestamps": [start, end], "cell_num", "non_empty_domain": {dim: [lo, hi]}, "dense", "version"}, oldest first.`,
		run:  (*Service).actListFragments,
	},
	"get_metadata": {
		desc: `Read array metadata. Body: {"array": NAME, "timestamp": optional}. Result: a JSON object key -> value (a scalar for one value, a list for several; strings as strings, bytes as base64).`,
		run:  (*Service).actGetMetadata,
	},
	"put_metadata": {
		desc:    `Write array metadata. Body: {"array": NAME, "metadata": {key: scalar or list}, "timestamp": optional t}. Integers are stored as int64, other numbers as float64, strings as UTF-8. Result: {"keys": n}.`,
		mutates: true,
		run:     (*Service).actPutMetadata,
	},
}

// ListActions describes every action DoAction accepts.
func (s *Service) ListActions(_ *aflight.Empty, stream aflight.FlightService_ListActionsServer) error {
	names := make([]string, 0, len(actions))
	for n := range actions {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := stream.Send(&aflight.ActionType{Type: n, Description: actions[n].desc}); err != nil {
			return err
		}
	}
	return nil
}

// DoAction runs one action and answers with one JSON result.
func (s *Service) DoAction(a *aflight.Action, stream aflight.FlightService_DoActionServer) error {
	ctx := stream.Context()
	def, ok := actions[a.GetType()]
	if !ok {
		names := make([]string, 0, len(actions))
		for n := range actions {
			names = append(names, n)
		}
		sort.Strings(names)
		return toStatus(errkind.Errorf(errkind.InvalidArgument, "unknown action %q (actions: %s)", a.GetType(), strings.Join(names, ", ")))
	}
	if def.mutates {
		if err := requireWrite(ctx, "action "+a.GetType()); err != nil {
			return toStatus(err)
		}
	}
	if len(a.Body) > maxActionBody {
		return toStatus(errkind.Errorf(errkind.ResourceExhausted, "action %s: body of %d bytes, at most %d", a.Type, len(a.Body), maxActionBody))
	}
	// Actions (consolidation, ...) read and write tiles too: no idle trim
	// while one runs, and a panic (recovered by the interceptor) still
	// ends it.
	out, err := func() (any, error) {
		defer s.idle.Begin()()
		return def.run(s, ctx, a.Body)
	}()
	if err != nil {
		return toStatus(fmt.Errorf("action %s: %w", a.Type, err))
	}
	b, err := json.Marshal(out)
	if err != nil {
		return toStatus(fmt.Errorf("action %s: encoding the result: %w", a.Type, err))
	}
	return stream.Send(&aflight.Result{Body: b})
}

// arrayBody is the body most actions take.
type arrayBody struct {
	Array     *string         `json:"array"`
	Timestamp json.RawMessage `json:"timestamp"`
}

// parseBody decodes a JSON object body strictly into v.
func parseBody(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return errkind.Errorf(errkind.InvalidArgument, "bad JSON body: %v", err)
	}
	if dec.More() {
		return errkind.Errorf(errkind.InvalidArgument, "trailing data after the JSON body")
	}
	return nil
}

// arrayOf parses {"array": ..., "timestamp": ...} and checks the array.
func (s *Service) arrayOf(ctx context.Context, body []byte) (string, *query.Timestamp, error) {
	var b arrayBody
	if err := parseBody(body, &b); err != nil {
		return "", nil, err
	}
	if b.Array == nil {
		return "", nil, errkind.Errorf(errkind.InvalidArgument, `body needs "array": the array's name`)
	}
	callInfo(ctx).SetArray(*b.Array)
	var ts *query.Timestamp
	if len(b.Timestamp) > 0 && string(b.Timestamp) != "null" {
		// Reuse the query parser's timestamp rules.
		q, err := query.Parse([]byte(`{"array":"x","timestamp":` + string(b.Timestamp) + `}`))
		if err != nil {
			return "", nil, err
		}
		ts = q.Timestamp
	}
	if err := s.checkArray(ctx, *b.Array); err != nil {
		return "", nil, err
	}
	return *b.Array, ts, nil
}

// openArrayOf opens the array an action body names, at the body's
// timestamp range.
func (s *Service) openArrayOf(ctx context.Context, body []byte) (string, *tdbarray.Array, error) {
	name, ts, err := s.arrayOf(ctx, body)
	if err != nil {
		return "", nil, err
	}
	a, err := s.openArray(ctx, name, ts)
	if err != nil {
		return "", nil, err
	}
	return name, a, nil
}

func (s *Service) actListArrays(ctx context.Context, body []byte) (any, error) {
	var b struct {
		Prefix string `json:"prefix"`
	}
	if len(bytes.TrimSpace(body)) > 0 {
		if err := parseBody(body, &b); err != nil {
			return nil, err
		}
	}
	if strings.ContainsRune(b.Prefix, 0) {
		return nil, errkind.Errorf(errkind.InvalidArgument, "prefix %q: NUL byte", b.Prefix)
	}
	arrays, err := s.listArrays(ctx, b.Prefix)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(arrays))
	for _, e := range arrays {
		names = append(names, e.Name)
	}
	return names, nil
}

func (s *Service) actDescribe(ctx context.Context, body []byte) (any, error) {
	name, a, err := s.openArrayOf(ctx, body)
	if err != nil {
		return nil, err
	}
	if a.B2ND != nil {
		return DescribeB2ND(a.B2ND), nil
	}
	b, err := schema.ToJSONArray(a.Schema, name)
	if err != nil {
		return nil, fmt.Errorf("array %q: %w", name, err)
	}
	b = withEncrypted(b, a.Encrypted)
	return json.RawMessage(withMembers(b,
		"fragment_count", len(a.Fragments),
		"last_compaction", lastCompaction(a))), nil
}

// compactionJSON is describe's "last_compaction": the fragment and the
// timestamps of the writes it merged (the same on every node and store:
// nothing of the storage's clock).
type compactionJSON struct {
	Fragment   string    `json:"fragment"`
	Timestamps [2]uint64 `json:"timestamps"`
}

// lastCompaction finds the newest visible fragment that a consolidation
// wrote (its name spans a time range; a write's is one instant), nil
// when there is none.
func lastCompaction(a *tdbarray.Array) *compactionJSON {
	var last *tdbarray.Fragment
	for _, f := range a.Fragments {
		if f.Start < f.End && (last == nil || f.End >= last.End) {
			last = f
		}
	}
	if last == nil {
		return nil
	}
	return &compactionJSON{Fragment: last.Name, Timestamps: [2]uint64{last.Start, last.End}}
}

// describeOnly are describe's members that are not part of the schema
// JSON: create_array ignores them, so that describe's output fed back
// makes an array like it.
var describeOnly = []string{"fragment_count", "last_compaction"}

// withMembers appends members, in order, to the JSON object b (as
// withEncrypted does: the schema JSON keeps its order).
func withMembers(b []byte, members ...any) []byte {
	b = bytes.TrimRight(b, " \t\r\n")
	if len(b) < 2 || b[len(b)-1] != '}' {
		return b
	}
	out := append([]byte(nil), b[:len(b)-1]...)
	for i := 0; i+1 < len(members); i += 2 {
		raw, err := json.Marshal(members[i+1])
		if err != nil {
			return b
		}
		if len(bytes.TrimSpace(out)) > 1 { // not "{"
			out = append(out, ',')
		}
		out = append(out, fmt.Sprintf("%q:", members[i])...)
		out = append(out, raw...)
	}
	return append(out, '}')
}

func (s *Service) actCreate(ctx context.Context, body []byte) (any, error) {
	var head struct {
		Array *string `json:"array"`
	}
	if err := json.Unmarshal(body, &head); err != nil {
		return nil, errkind.Errorf(errkind.InvalidArgument, "bad JSON body: %v", err)
	}
	if head.Array == nil {
		return nil, errkind.Errorf(errkind.InvalidArgument, `the schema JSON needs "array": the new array's name`)
	}
	name := *head.Array
	callInfo(ctx).SetArray(name)
	if err := query.ValidateArrayName(name); err != nil {
		return nil, err
	}
	if !access.Reaches(ctx, name) {
		// Refused before anything is looked at, so the answer says
		// nothing about whether such an array exists.
		return nil, errkind.Errorf(errkind.PermissionDenied, "array %q: this token may only create arrays under its prefixes %q", name, access.FromContext(ctx).Prefixes)
	}
	if ndarray.IsB2ND(name) {
		return s.createB2ND(ctx, name, body)
	}
	body, encrypted, err := takeEncrypted(body)
	if err != nil {
		return nil, errkind.Errorf(errkind.InvalidArgument, "array %q: %v", name, err)
	}
	var key []byte
	if encrypted {
		if len(s.cfg.EncryptionKey) == 0 {
			return nil, errkind.Errorf(errkind.FailedPrecondition, `array %q: "encrypted": true, but this flightd has no encryption key to create it with (-encryption-key-file)`, name)
		}
		key = s.cfg.EncryptionKey
	}
	sch, err := schema.FromJSON(body)
	if err != nil {
		return nil, errkind.Errorf(errkind.InvalidArgument, "array %q: %v", name, err)
	}
	if err := s.checkParents(ctx, name); err != nil {
		return nil, err
	}
	if err := writer.CreateArrayWith(ctx, s.cfg.Store, name, sch, writer.ArrayOptions{EncryptionKey: key}); err != nil {
		return nil, fmt.Errorf("array %q: %w", name, storageErr(err))
	}
	b, err := schema.ToJSONArray(sch, name)
	if err != nil {
		return nil, err
	}
	// What describe answers for the new array.
	return json.RawMessage(withMembers(withEncrypted(b, encrypted), "fragment_count", 0, "last_compaction", nil)), nil
}

// takeEncrypted removes create_array's "encrypted" flag, which is not
// part of the schema JSON, from body. The daemon's key is used only when
// the client asks for it: a daemon holding a key for its encrypted arrays
// still creates plain ones by default, as TileDB does without an
// encryption type configured.
func takeEncrypted(body []byte) ([]byte, bool, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil {
		return nil, false, err
	}
	dropped := false
	for _, k := range describeOnly {
		if _, ok := obj[k]; ok {
			delete(obj, k)
			dropped = true
		}
	}
	raw, ok := obj["encrypted"]
	if !ok {
		if dropped {
			out, err := json.Marshal(obj)
			return out, false, err
		}
		return body, false, nil
	}
	var enc bool
	if err := json.Unmarshal(raw, &enc); err != nil {
		return nil, false, fmt.Errorf(`"encrypted" must be true or false, not %s`, raw)
	}
	delete(obj, "encrypted")
	out, err := json.Marshal(obj)
	return out, enc, err
}

// withEncrypted adds "encrypted": true to the schema JSON object b of an
// encrypted array, so that describe's output fed back to create_array
// makes an array like it; plain arrays' JSON is left as the schema
// package writes it.
func withEncrypted(b []byte, encrypted bool) []byte {
	b = bytes.TrimRight(b, " \t\r\n")
	if !encrypted || len(b) < 2 || b[len(b)-1] != '}' {
		return b
	}
	out := append([]byte(nil), b[:len(b)-1]...)
	if len(bytes.TrimSpace(out)) > 1 { // not "{}"
		out = append(out, ',')
	}
	return append(out, `"encrypted":true}`...)
}

// checkParents refuses to create an array inside another array (its
// directory would read as part of the outer array's files).
func (s *Service) checkParents(ctx context.Context, name string) error {
	segs := strings.Split(name, "/")
	for i := 1; i < len(segs); i++ {
		parent := strings.Join(segs[:i], "/")
		ok, err := tdbarray.IsArray(ctx, s.cfg.Store, parent)
		if err != nil {
			return storageErr(err)
		}
		if ok {
			return errkind.Errorf(errkind.InvalidArgument, "array %q: %q is an array; arrays cannot nest", name, parent)
		}
	}
	return nil
}

func (s *Service) actDrop(ctx context.Context, body []byte) (any, error) {
	name, _, err := s.arrayOf(ctx, body)
	if err != nil {
		return nil, err
	}
	if ndarray.IsB2ND(name) {
		if err := s.dropB2ND(ctx, name); err != nil {
			return nil, err
		}
		return map[string]string{"dropped": name}, nil
	}
	key, err := s.writeKey(ctx, name)
	if err != nil {
		return nil, err
	}
	if err := writer.DropArrayWith(ctx, s.cfg.Store, name, writer.ArrayOptions{EncryptionKey: key}); err != nil {
		return nil, fmt.Errorf("array %q: %w", name, storageErr(err))
	}
	return map[string]string{"dropped": name}, nil
}

type fragmentJSON struct {
	Name           string         `json:"name"`
	Timestamps     [2]uint64      `json:"timestamps"`
	CellNum        uint64         `json:"cell_num"`
	NonEmptyDomain map[string]any `json:"non_empty_domain"`
	Dense          bool           `json:"dense"`
	Version        uint32         `json:"version"`
}

func (s *Service) actListFragments(ctx context.Context, body []byte) (any, error) {
	name, a, err := s.openArrayOf(ctx, body)
	if err != nil {
		return nil, err
	}
	out := make([]fragmentJSON, 0, len(a.Fragments)) // none for a .b2nd
	for _, f := range a.Fragments {
		cells, err := f.CellNum()
		if err != nil {
			return nil, fmt.Errorf("array %q: fragment %s: %w", name, f.Name, err)
		}
		footer := f.Meta.Footer()
		fj := fragmentJSON{Name: f.Name, Timestamps: [2]uint64{f.Start, f.End}, CellNum: cells,
			NonEmptyDomain: map[string]any{}, Dense: footer.Dense, Version: footer.Version}
		for d, r := range f.NonEmptyDomain() {
			if d >= len(f.Schema.Dimensions) {
				break
			}
			dim := &f.Schema.Dimensions[d]
			fj.NonEmptyDomain[dim.Name] = []any{jsonValue(dim.Type, r.Start), jsonValue(dim.Type, r.End)}
		}
		out = append(out, fj)
	}
	return out, nil
}

// jsonValue renders one coordinate as JSON: strings for string dimensions,
// integers for integer and datetime ones, numbers for floats.
func jsonValue(t datatype.Datatype, b []byte) any {
	switch {
	case t.IsString() || t.IsByteLike():
		return string(b)
	case t.IsFloat():
		f := schema.AsFloat64(t, b)
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return fmt.Sprint(f)
		}
		return f
	case t.IsInteger() && !t.IsSigned():
		return schema.AsUint64(t, b)
	}
	return schema.AsInt64(t, b)
}

func (s *Service) actGetMetadata(ctx context.Context, body []byte) (any, error) {
	name, a, err := s.openArrayOf(ctx, body)
	if err != nil {
		return nil, err
	}
	if a.B2ND != nil {
		return B2NDMetadata(a.B2ND)
	}
	m, err := a.MetadataJSON(ctx)
	if err != nil {
		return nil, fmt.Errorf("array %q: %w", name, err)
	}
	return m, nil
}

func (s *Service) actPutMetadata(ctx context.Context, body []byte) (any, error) {
	var b struct {
		Array     *string                    `json:"array"`
		Metadata  map[string]json.RawMessage `json:"metadata"`
		Timestamp *uint64                    `json:"timestamp"`
	}
	if err := parseBody(body, &b); err != nil {
		return nil, errkind.Errorf(errkind.InvalidArgument, `%v (want {"array": NAME, "metadata": {key: value}})`, err)
	}
	if b.Array == nil {
		return nil, errkind.Errorf(errkind.InvalidArgument, `body needs "array": the array's name`)
	}
	name := *b.Array
	callInfo(ctx).SetArray(name)
	if err := s.checkArray(ctx, name); err != nil {
		return nil, err
	}
	if ndarray.IsB2ND(name) {
		if b.Metadata == nil {
			return nil, errkind.Errorf(errkind.InvalidArgument, `array %q: body needs "metadata": an object of key -> value`, name)
		}
		if b.Timestamp != nil {
			return nil, errkind.Errorf(errkind.InvalidArgument, "array %q: a .b2nd array has no timestamps", name)
		}
		return s.putB2NDMetadata(ctx, name, b.Metadata)
	}
	key, err := s.writeKey(ctx, name)
	if err != nil {
		return nil, err
	}
	if b.Metadata == nil {
		return nil, errkind.Errorf(errkind.InvalidArgument, `array %q: body needs "metadata": an object of key -> value`, name)
	}
	values, err := writer.MetadataFromJSON(b.Metadata)
	if err != nil {
		return nil, fmt.Errorf("array %q: %w", name, err)
	}
	var t uint64
	if b.Timestamp != nil {
		t = *b.Timestamp
	}
	if len(values) > 0 {
		if _, err := writer.PutMetadataWith(ctx, s.cfg.Store, name, values, t, writer.ArrayOptions{EncryptionKey: key}); err != nil {
			return nil, fmt.Errorf("array %q: %w", name, storageErr(err))
		}
	}
	return map[string]int{"keys": len(values)}, nil
}
