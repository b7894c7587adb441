package schema

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/pipeline"
)

// The schema JSON of docs/protocol.md, "Schema JSON". Values of a field's type are JSON numbers
// (exact for 64-bit integers), strings for string/char/blob types (a list of
// byte values when not valid UTF-8), and "nan", "inf", "-inf" for non-finite
// floats. A filter list is a JSON list, or {"chunk_size": n, "filters": [...]}
// when its chunk size is not the default 64 KiB.

type jsonSchema struct {
	Array           string              `json:"array,omitempty"`
	Version         uint32              `json:"version,omitempty"`
	Type            string              `json:"type"`
	CellOrder       string              `json:"cell_order"`
	TileOrder       string              `json:"tile_order"`
	Capacity        *uint64             `json:"capacity,omitempty"`
	AllowsDups      bool                `json:"allows_duplicates"`
	Dimensions      []jsonDim           `json:"dimensions"`
	Attributes      []jsonAttr          `json:"attributes"`
	CoordsFilters   *jsonPipeline       `json:"coords_filters,omitempty"`
	OffsetsFilters  *jsonPipeline       `json:"offsets_filters,omitempty"`
	ValidityFilters *jsonPipeline       `json:"validity_filters,omitempty"`
	Enumerations    []jsonEnum          `json:"enumerations,omitempty"`
	CurrentDomain   map[string]jsonPair `json:"current_domain,omitempty"`
	Labels          []jsonLabel         `json:"dimension_labels,omitempty"`
}

type jsonPair [2]json.RawMessage

type jsonDim struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	CellValNum json.RawMessage `json:"cell_val_num,omitempty"`
	Domain     json.RawMessage `json:"domain"`
	Tile       json.RawMessage `json:"tile"`
	Filters    *jsonPipeline   `json:"filters,omitempty"`
}

type jsonAttr struct {
	Name        string          `json:"name"`
	Type        string          `json:"type"`
	CellValNum  json.RawMessage `json:"cell_val_num,omitempty"`
	Nullable    bool            `json:"nullable"`
	Fill        json.RawMessage `json:"fill,omitempty"`
	FillValid   bool            `json:"fill_valid,omitempty"`
	Order       string          `json:"order,omitempty"`
	Enumeration string          `json:"enumeration,omitempty"`
	Filters     *jsonPipeline   `json:"filters,omitempty"`
}

type jsonEnum struct {
	Name       string            `json:"name"`
	Path       string            `json:"path,omitempty"`
	Type       string            `json:"type,omitempty"`
	CellValNum json.RawMessage   `json:"cell_val_num,omitempty"`
	Ordered    bool              `json:"ordered"`
	Values     []json.RawMessage `json:"values"`
}

type jsonLabel struct {
	Name        string          `json:"name"`
	Dimension   string          `json:"dimension"`
	Order       string          `json:"order"`
	Type        string          `json:"type"`
	CellValNum  json.RawMessage `json:"cell_val_num,omitempty"`
	URI         string          `json:"uri"`
	RelativeURI bool            `json:"relative_uri"`
	AttrName    string          `json:"attr_name"`
	External    bool            `json:"external"`
}

type jsonFilter struct {
	Name        string   `json:"name"`
	Level       *int32   `json:"level,omitempty"`
	Reinterpret string   `json:"reinterpret_datatype,omitempty"`
	MaxWindow   *uint32  `json:"max_window,omitempty"`
	Scale       *float64 `json:"scale,omitempty"`
	Offset      *float64 `json:"offset,omitempty"`
	ByteWidth   *uint64  `json:"byte_width,omitempty"`
	Quality     *float32 `json:"quality,omitempty"`
	Format      string   `json:"format,omitempty"`
	Lossless    *bool    `json:"lossless,omitempty"`
}

type jsonPipeline struct {
	ChunkSize uint32
	Filters   []jsonFilter
}

func (p jsonPipeline) MarshalJSON() ([]byte, error) {
	fs := p.Filters
	if fs == nil {
		fs = []jsonFilter{}
	}
	if p.ChunkSize == pipeline.DefaultMaxChunkSize {
		return json.Marshal(fs)
	}
	return json.Marshal(struct {
		ChunkSize uint32       `json:"chunk_size"`
		Filters   []jsonFilter `json:"filters"`
	}{p.ChunkSize, fs})
}

func (p *jsonPipeline) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	p.ChunkSize = pipeline.DefaultMaxChunkSize
	if len(b) > 0 && b[0] == '{' {
		var o struct {
			ChunkSize *uint32      `json:"chunk_size"`
			Filters   []jsonFilter `json:"filters"`
		}
		if err := strictUnmarshal(b, &o); err != nil {
			return err
		}
		if o.ChunkSize != nil {
			p.ChunkSize = *o.ChunkSize
		}
		p.Filters = o.Filters
		return nil
	}
	return strictUnmarshal(b, &p.Filters)
}

func strictUnmarshal(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

var webpFormats = [...]string{"none", "rgb", "bgr", "rgba", "bgra"}

func pipelineToJSON(p pipeline.Pipeline) *jsonPipeline {
	out := &jsonPipeline{ChunkSize: p.MaxChunkSize, Filters: []jsonFilter{}}
	for _, f := range p.Filters {
		jf := jsonFilter{Name: f.Type.String()}
		switch {
		case f.Type.IsCompression():
			lv := f.Level
			jf.Level = &lv
			if (f.Type == pipeline.Delta || f.Type == pipeline.DoubleDelta) && f.Reinterpret != datatype.Any {
				jf.Reinterpret = f.Reinterpret.String()
			}
		case f.Type == pipeline.BitWidthReduction || f.Type == pipeline.PositiveDelta:
			mw := f.MaxWindow
			jf.MaxWindow = &mw
		case f.Type == pipeline.ScaleFloat:
			sc, of, bw := f.Scale, f.Offset, f.ByteWidth
			jf.Scale, jf.Offset, jf.ByteWidth = &sc, &of, &bw
		case f.Type == pipeline.WebP:
			q, l := f.WebPQuality, f.WebPLossless
			jf.Quality, jf.Lossless = &q, &l
			if int(f.WebPFormat) < len(webpFormats) {
				jf.Format = webpFormats[f.WebPFormat]
			} else {
				jf.Format = strconv.Itoa(int(f.WebPFormat))
			}
		}
		out.Filters = append(out.Filters, jf)
	}
	return out
}

func pipelineFromJSON(p *jsonPipeline) (pipeline.Pipeline, error) {
	out := pipeline.Pipeline{MaxChunkSize: p.ChunkSize}
	for i, jf := range p.Filters {
		t, err := pipeline.ParseFilterType(jf.Name)
		if err != nil {
			return out, fmt.Errorf("filter %d: %w", i, err)
		}
		f := pipeline.Filter{Type: t, Reinterpret: datatype.Any}
		bad := func(opt string) error {
			return fmt.Errorf("filter %d (%s): option %q does not apply", i, t, opt)
		}
		if c, ok := pipeline.CompressorFor(t); ok {
			f.Compressor, f.Level = c, -1
			if jf.Level != nil {
				f.Level = *jf.Level
			}
		} else if jf.Level != nil {
			return out, bad("level")
		}
		if jf.Reinterpret != "" {
			if t != pipeline.Delta && t != pipeline.DoubleDelta {
				return out, bad("reinterpret_datatype")
			}
			if f.Reinterpret, err = datatype.Parse(jf.Reinterpret); err != nil {
				return out, fmt.Errorf("filter %d (%s): reinterpret_datatype: %w", i, t, err)
			}
		}
		switch t {
		case pipeline.BitWidthReduction, pipeline.PositiveDelta:
			f.MaxWindow = 256
			if t == pipeline.PositiveDelta {
				f.MaxWindow = 1024
			}
			if jf.MaxWindow != nil {
				f.MaxWindow = *jf.MaxWindow
			}
		case pipeline.ScaleFloat:
			f.Scale, f.Offset, f.ByteWidth = 1, 0, 8
			if jf.Scale != nil {
				f.Scale = *jf.Scale
			}
			if jf.Offset != nil {
				f.Offset = *jf.Offset
			}
			if jf.ByteWidth != nil {
				f.ByteWidth = *jf.ByteWidth
			}
		case pipeline.WebP:
			f.WebPQuality = 100
			if jf.Quality != nil {
				f.WebPQuality = *jf.Quality
			}
			if jf.Lossless != nil {
				f.WebPLossless = *jf.Lossless
			}
			if jf.Format != "" {
				found := false
				for k, n := range webpFormats {
					if strings.EqualFold(jf.Format, n) {
						f.WebPFormat, found = pipeline.WebPFormat(k), true
					}
				}
				if !found {
					return out, fmt.Errorf("filter %d (webp): format %q: want rgb, bgr, rgba or bgra", i, jf.Format)
				}
			}
		}
		if jf.MaxWindow != nil && t != pipeline.BitWidthReduction && t != pipeline.PositiveDelta {
			return out, bad("max_window")
		}
		if (jf.Scale != nil || jf.Offset != nil || jf.ByteWidth != nil) && t != pipeline.ScaleFloat {
			return out, bad("scale/offset/byte_width")
		}
		if (jf.Quality != nil || jf.Lossless != nil || jf.Format != "") && t != pipeline.WebP {
			return out, bad("quality/format/lossless")
		}
		out.Filters = append(out.Filters, f)
	}
	return out, nil
}

// valueToJSON renders one value of t.
func valueToJSON(t datatype.Datatype, b []byte) json.RawMessage {
	if t.IsByteLike() {
		return bytesToJSON(b)
	}
	if t.IsFloat() {
		f := AsFloat64(t, b)
		switch {
		case math.IsNaN(f):
			return json.RawMessage(`"nan"`)
		case math.IsInf(f, 1):
			return json.RawMessage(`"inf"`)
		case math.IsInf(f, -1):
			return json.RawMessage(`"-inf"`)
		}
	}
	return json.RawMessage(FormatValue(t, b))
}

func bytesToJSON(b []byte) json.RawMessage {
	if utf8.Valid(b) {
		out, _ := json.Marshal(string(b))
		return out
	}
	ints := make([]int, len(b))
	for i, c := range b {
		ints[i] = int(c)
	}
	out, _ := json.Marshal(ints)
	return out
}

func isNull(raw json.RawMessage) bool {
	s := bytes.TrimSpace(raw)
	return len(s) == 0 || string(s) == "null"
}

// valueFromJSON parses one value of t (not byte-like) into its bytes,
// refusing values the type cannot hold exactly.
func valueFromJSON(t datatype.Datatype, raw json.RawMessage) ([]byte, error) {
	s := strings.TrimSpace(string(raw))
	if isNull(raw) {
		return nil, errors.New("null value")
	}
	b := make([]byte, t.Size())
	if t.IsFloat() {
		var f float64
		switch strings.ToLower(strings.Trim(s, `"`)) {
		case "nan":
			f = math.NaN()
		case "inf", "+inf", "infinity":
			f = math.Inf(1)
		case "-inf", "-infinity":
			f = math.Inf(-1)
		default:
			bits := 64
			if t == datatype.Float32 {
				bits = 32
			}
			v, err := strconv.ParseFloat(s, bits)
			if err != nil {
				return nil, fmt.Errorf("%s is not a %s", s, t)
			}
			f = v
		}
		if t == datatype.Float32 {
			bitsOf := math.Float32bits(float32(f))
			if math.IsNaN(f) {
				bitsOf = 0x7fc00000
			}
			binary.LittleEndian.PutUint32(b, bitsOf)
		} else {
			bitsOf := math.Float64bits(f)
			if math.IsNaN(f) {
				bitsOf = 0x7ff8000000000000
			}
			binary.LittleEndian.PutUint64(b, bitsOf)
		}
		return b, nil
	}
	if !t.IsInteger() {
		return nil, fmt.Errorf("type %s takes no numeric value", t)
	}
	size := t.Size()
	if t.IsSigned() {
		v, err := parseInt(s)
		if err != nil {
			return nil, fmt.Errorf("%s is not an integer", s)
		}
		lo, hi := int64(-1)<<(8*size-1), int64(uint64(1)<<(8*size-1)-1)
		if v < lo || v > hi {
			return nil, fmt.Errorf("%d is out of range for %s", v, t)
		}
		putUint(b, uint64(v))
		return b, nil
	}
	v, err := parseUint(s)
	if err != nil {
		return nil, fmt.Errorf("%s is not a non-negative integer", s)
	}
	if size < 8 && v >= uint64(1)<<(8*size) || t == datatype.Bool && v > 1 {
		return nil, fmt.Errorf("%d is out of range for %s", v, t)
	}
	putUint(b, v)
	return b, nil
}

func parseInt(s string) (int64, error) {
	if v, err := strconv.ParseInt(s, 10, 64); err == nil {
		return v, nil
	}
	if s == "true" || s == "false" {
		if s == "true" {
			return 1, nil
		}
		return 0, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != math.Trunc(f) || f < -(1<<63) || f >= 1<<63 {
		return 0, errors.New("not an integer")
	}
	return int64(f), nil
}

func parseUint(s string) (uint64, error) {
	if v, err := strconv.ParseUint(s, 10, 64); err == nil {
		return v, nil
	}
	if s == "true" {
		return 1, nil
	}
	if s == "false" {
		return 0, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != math.Trunc(f) || f < 0 || f >= 1<<64 {
		return 0, errors.New("not an integer")
	}
	return uint64(f), nil
}

func putUint(b []byte, v uint64) {
	for i := range b {
		b[i] = byte(v >> (8 * i))
	}
}

// bytesFromJSON parses a string or a list of byte values.
func bytesFromJSON(raw json.RawMessage) ([]byte, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return []byte(s), nil
	}
	var ints []int
	if err := json.Unmarshal(raw, &ints); err != nil {
		return nil, errors.New("want a string or a list of byte values")
	}
	out := make([]byte, len(ints))
	for i, v := range ints {
		if v < 0 || v > 255 {
			return nil, fmt.Errorf("byte value %d out of range", v)
		}
		out[i] = byte(v)
	}
	return out, nil
}

func cellValNumToJSON(n uint32) json.RawMessage {
	if n == VarNum {
		return json.RawMessage(`"var"`)
	}
	return json.RawMessage(strconv.FormatUint(uint64(n), 10))
}

func cellValNumFromJSON(raw json.RawMessage, def uint32) (uint32, error) {
	if isNull(raw) {
		return def, nil
	}
	s := strings.TrimSpace(string(raw))
	if s == `"var"` {
		return VarNum, nil
	}
	v, err := strconv.ParseUint(s, 10, 32)
	if err != nil || v == 0 || uint32(v) == VarNum {
		return 0, fmt.Errorf("cell_val_num %s: want a positive number or \"var\"", s)
	}
	return uint32(v), nil
}

// ToJSON renders s as schema JSON. Enumeration values are included for the
// enumerations whose Enum is loaded.
func ToJSON(s *ArraySchema) ([]byte, error) { return ToJSONArray(s, "") }

// ToJSONArray is ToJSON with the "array" member set (what describe returns).
func ToJSONArray(s *ArraySchema, array string) ([]byte, error) {
	if s == nil || len(s.Dimensions) == 0 {
		return nil, errors.New("schema json: no schema")
	}
	capacity := s.Capacity
	j := jsonSchema{
		Array:           array,
		Version:         s.Version,
		Type:            s.Type.String(),
		CellOrder:       s.CellOrder.String(),
		TileOrder:       s.TileOrder.String(),
		Capacity:        &capacity,
		AllowsDups:      s.AllowsDups,
		Dimensions:      []jsonDim{},
		Attributes:      []jsonAttr{},
		CoordsFilters:   pipelineToJSON(s.CoordsFilters),
		OffsetsFilters:  pipelineToJSON(s.OffsetsFilters),
		ValidityFilters: pipelineToJSON(s.ValidityFilters),
	}
	for i := range s.Dimensions {
		d := &s.Dimensions[i]
		jd := jsonDim{Name: d.Name, Type: d.Type.String(), Filters: pipelineToJSON(d.Filters),
			Domain: json.RawMessage("null"), Tile: json.RawMessage("null")}
		if d.IsVar() {
			jd.CellValNum = cellValNumToJSON(VarNum)
		}
		if lo := d.Lo(); lo != nil {
			jd.Domain = json.RawMessage("[" + string(valueToJSON(d.Type, lo)) + ", " + string(valueToJSON(d.Type, d.Hi())) + "]")
		}
		if d.TileExtent != nil {
			jd.Tile = valueToJSON(d.Type, d.TileExtent)
		}
		j.Dimensions = append(j.Dimensions, jd)
	}
	for i := range s.Attributes {
		a := &s.Attributes[i]
		ja := jsonAttr{Name: a.Name, Type: a.Type.String(), CellValNum: cellValNumToJSON(a.CellValNum),
			Nullable: a.Nullable, FillValid: a.FillValid, Enumeration: a.EnumerationName, Filters: pipelineToJSON(a.Filters)}
		if a.Order != UnorderedData {
			ja.Order = a.Order.String()
		}
		ja.Fill = fillToJSON(a)
		j.Attributes = append(j.Attributes, ja)
	}
	for _, e := range s.Enumerations {
		je := jsonEnum{Name: e.Name, Path: e.PathName}
		if en := e.Enum; en != nil {
			je.Type = en.Type.String()
			je.CellValNum = cellValNumToJSON(en.CellValNum)
			je.Ordered = en.Ordered
			je.Values = []json.RawMessage{}
			for k := 0; k < en.Len(); k++ {
				je.Values = append(je.Values, enumValueToJSON(en, en.Value(k)))
			}
		}
		j.Enumerations = append(j.Enumerations, je)
	}
	if cd := s.CurrentDomain; cd != nil && !cd.Empty && len(cd.Ranges) == len(s.Dimensions) {
		j.CurrentDomain = map[string]jsonPair{}
		for i, r := range cd.Ranges {
			d := &s.Dimensions[i]
			if d.IsVar() {
				j.CurrentDomain[d.Name] = jsonPair{bytesToJSON(r.Start), bytesToJSON(r.End)}
			} else {
				j.CurrentDomain[d.Name] = jsonPair{valueToJSON(d.Type, r.Start), valueToJSON(d.Type, r.End)}
			}
		}
	}
	for _, l := range s.Labels {
		dim := ""
		if int(l.DimIndex) < len(s.Dimensions) {
			dim = s.Dimensions[l.DimIndex].Name
		}
		j.Labels = append(j.Labels, jsonLabel{Name: l.Name, Dimension: dim, Order: l.Order.String(), Type: l.Type.String(),
			CellValNum: cellValNumToJSON(l.CellValNum), URI: l.URI, RelativeURI: l.RelativeURI, AttrName: l.AttrName, External: l.External})
	}
	return json.Marshal(j)
}

func enumValueToJSON(e *Enumeration, v []byte) json.RawMessage {
	if e.Type.IsByteLike() || e.Type.IsString() {
		return bytesToJSON(v)
	}
	return cellToJSON(e.Type, v)
}

// cellToJSON renders one value, or a list for several values of t.
func cellToJSON(t datatype.Datatype, b []byte) json.RawMessage {
	n := t.Size()
	if n == 0 || len(b) == n {
		return valueToJSON(t, b)
	}
	parts := make([]string, 0, len(b)/n)
	for i := 0; i+n <= len(b); i += n {
		parts = append(parts, string(valueToJSON(t, b[i:i+n])))
	}
	return json.RawMessage("[" + strings.Join(parts, ", ") + "]")
}

func fillToJSON(a *Attribute) json.RawMessage {
	if a.Type.IsByteLike() || a.Type.IsString() {
		return bytesToJSON(a.FillValue)
	}
	return cellToJSON(a.Type, a.FillValue)
}

// cellFromJSON parses a value, or a list of values, of t; byte-like types
// take a string or a list of bytes.
func cellFromJSON(t datatype.Datatype, raw json.RawMessage) ([]byte, error) {
	if t.IsByteLike() || t.IsString() {
		return bytesFromJSON(raw)
	}
	s := bytes.TrimSpace(raw)
	if len(s) > 0 && s[0] == '[' {
		var items []json.RawMessage
		if err := json.Unmarshal(s, &items); err != nil {
			return nil, err
		}
		var out []byte
		for i, it := range items {
			v, err := valueFromJSON(t, it)
			if err != nil {
				return nil, fmt.Errorf("value %d: %w", i, err)
			}
			out = append(out, v...)
		}
		return out, nil
	}
	return valueFromJSON(t, raw)
}

func defaultCellValNum(t datatype.Datatype) uint32 {
	switch {
	case t.IsString(), t == datatype.Blob, t == datatype.GeomWKB, t == datatype.GeomWKT:
		return VarNum
	}
	return 1
}

// FromJSON builds a schema from schema JSON the way tiledb.ArraySchema
// would from the same description: TileDB's defaults for what is left out
// (capacity 10000, zstd coords and offsets filters, rle validity filters,
// per-type fill values, null tile extents set to the domain range except for
// Hilbert order), at CurrentVersion. The result is validated; errors name
// the field at fault. A "version" member is ignored.
func FromJSON(b []byte) (*ArraySchema, error) {
	var j jsonSchema
	if err := strictUnmarshal(b, &j); err != nil {
		return nil, fmt.Errorf("schema json: %w", err)
	}
	s, err := fromJSON(&j)
	if err != nil {
		return nil, fmt.Errorf("schema json: %w", err)
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("schema json: %w", err)
	}
	return s, nil
}

func fromJSON(j *jsonSchema) (*ArraySchema, error) {
	s := &ArraySchema{Version: CurrentVersion, Capacity: DefaultCapacity, AllowsDups: j.AllowsDups}
	switch strings.ToLower(j.Type) {
	case "", "dense":
		s.Type = Dense
	case "sparse":
		s.Type = Sparse
	default:
		return nil, fmt.Errorf("type %q: want dense or sparse", j.Type)
	}
	var err error
	if j.CellOrder != "" {
		if s.CellOrder, err = ParseLayout(j.CellOrder); err != nil {
			return nil, fmt.Errorf("cell_order: %w", err)
		}
	}
	if j.TileOrder != "" {
		if s.TileOrder, err = ParseLayout(j.TileOrder); err != nil {
			return nil, fmt.Errorf("tile_order: %w", err)
		}
	}
	if j.Capacity != nil {
		s.Capacity = *j.Capacity
	}
	zstd := pipeline.Filter{Type: pipeline.Zstd, Compressor: pipeline.CompZstd, Level: -1, Reinterpret: datatype.Any}
	rle := pipeline.Filter{Type: pipeline.RLE, Compressor: pipeline.CompRLE, Level: -1, Reinterpret: datatype.Any}
	pl := func(name string, p *jsonPipeline, def ...pipeline.Filter) (pipeline.Pipeline, error) {
		if p == nil {
			return pipeline.Pipeline{MaxChunkSize: pipeline.DefaultMaxChunkSize, Filters: def}, nil
		}
		out, err := pipelineFromJSON(p)
		if err != nil {
			return out, fmt.Errorf("%s: %w", name, err)
		}
		return out, nil
	}
	if s.CoordsFilters, err = pl("coords_filters", j.CoordsFilters, zstd); err != nil {
		return nil, err
	}
	if s.OffsetsFilters, err = pl("offsets_filters", j.OffsetsFilters, zstd); err != nil {
		return nil, err
	}
	if s.ValidityFilters, err = pl("validity_filters", j.ValidityFilters, rle); err != nil {
		return nil, err
	}
	if len(j.Dimensions) == 0 {
		return nil, errors.New("dimensions: at least one dimension is required")
	}
	for i, jd := range j.Dimensions {
		d, err := dimFromJSON(&jd, s.CellOrder)
		if err != nil {
			return nil, fmt.Errorf("dimensions[%d] %q: %w", i, jd.Name, err)
		}
		s.Dimensions = append(s.Dimensions, d)
	}
	for i, ja := range j.Attributes {
		a, err := attrFromJSON(&ja)
		if err != nil {
			return nil, fmt.Errorf("attributes[%d] %q: %w", i, ja.Name, err)
		}
		s.Attributes = append(s.Attributes, a)
	}
	for i, je := range j.Enumerations {
		ref, err := enumFromJSON(&je)
		if err != nil {
			return nil, fmt.Errorf("enumerations[%d] %q: %w", i, je.Name, err)
		}
		s.Enumerations = append(s.Enumerations, ref)
	}
	for i, jl := range j.Labels {
		l, err := labelFromJSON(&jl, s)
		if err != nil {
			return nil, fmt.Errorf("dimension_labels[%d] %q: %w", i, jl.Name, err)
		}
		s.Labels = append(s.Labels, l)
	}
	s.CurrentDomain = &CurrentDomain{Empty: true}
	if len(j.CurrentDomain) > 0 {
		cd := &CurrentDomain{Type: NDRectangle}
		for k := range j.CurrentDomain {
			if s.DimensionIndex(k) < 0 {
				return nil, fmt.Errorf("current_domain: no dimension %q", k)
			}
		}
		for i := range s.Dimensions {
			d := &s.Dimensions[i]
			pair, ok := j.CurrentDomain[d.Name]
			if !ok {
				return nil, fmt.Errorf("current_domain: dimension %q missing", d.Name)
			}
			var r Range
			for k, raw := range pair {
				var v []byte
				var err error
				if d.IsVar() {
					v, err = bytesFromJSON(raw)
				} else {
					v, err = valueFromJSON(d.Type, raw)
				}
				if err != nil {
					return nil, fmt.Errorf("current_domain: dimension %q: %w", d.Name, err)
				}
				if k == 0 {
					r.Start = v
				} else {
					r.End = v
				}
			}
			cd.Ranges = append(cd.Ranges, r)
		}
		s.CurrentDomain = cd
	}
	// TileDB's WebP filter records the tile extents of the two dimensions.
	if len(s.Dimensions) == 2 {
		y, _ := s.Dimensions[0].TileExtentUint64()
		x, _ := s.Dimensions[1].TileExtentUint64()
		for i := range s.Attributes {
			for k := range s.Attributes[i].Filters.Filters {
				f := &s.Attributes[i].Filters.Filters[k]
				if f.Type == pipeline.WebP {
					f.WebPYExtent, f.WebPXExtent = uint16(y), uint16(x)
				}
			}
		}
	}
	return s, nil
}

func dimFromJSON(jd *jsonDim, cellOrder Layout) (Dimension, error) {
	d := Dimension{Name: jd.Name}
	var err error
	if d.Type, err = datatype.Parse(jd.Type); err != nil {
		return d, fmt.Errorf("type: %w", err)
	}
	def := uint32(1)
	if d.Type == datatype.StringASCII {
		def = VarNum
	}
	if d.CellValNum, err = cellValNumFromJSON(jd.CellValNum, def); err != nil {
		return d, err
	}
	if jd.Filters != nil {
		if d.Filters, err = pipelineFromJSON(jd.Filters); err != nil {
			return d, fmt.Errorf("filters: %w", err)
		}
	} else {
		d.Filters = pipeline.Pipeline{MaxChunkSize: pipeline.DefaultMaxChunkSize}
	}
	if d.IsVar() {
		if !isNull(jd.Domain) || !isNull(jd.Tile) {
			return d, errors.New("domain and tile must be null for a string dimension")
		}
		return d, nil
	}
	if isNull(jd.Domain) {
		return d, errors.New("domain: [low, high] is required")
	}
	var pair []json.RawMessage
	if err := json.Unmarshal(jd.Domain, &pair); err != nil || len(pair) != 2 {
		return d, errors.New("domain: want [low, high]")
	}
	for k, raw := range pair {
		v, err := valueFromJSON(d.Type, raw)
		if err != nil {
			return d, fmt.Errorf("domain[%d]: %w", k, err)
		}
		d.Domain = append(d.Domain, v...)
	}
	if !isNull(jd.Tile) {
		if d.TileExtent, err = valueFromJSON(d.Type, jd.Tile); err != nil {
			return d, fmt.Errorf("tile: %w", err)
		}
	} else if cellOrder != Hilbert {
		if d.TileExtent, err = rangeExtent(&d); err != nil {
			return d, fmt.Errorf("tile: %w", err)
		}
	}
	return d, nil
}

// rangeExtent is TileDB's replacement for a null tile extent: the whole
// domain range (plus one for integers).
func rangeExtent(d *Dimension) ([]byte, error) {
	b := make([]byte, d.Type.Size())
	switch {
	case d.Type == datatype.Float32:
		lo, hi, _ := d.DomainFloat64()
		binary.LittleEndian.PutUint32(b, math.Float32bits(float32(hi)-float32(lo)))
	case d.Type == datatype.Float64:
		lo, hi, _ := d.DomainFloat64()
		binary.LittleEndian.PutUint64(b, math.Float64bits(hi-lo))
	default:
		lo, hi, _ := d.DomainUint64()
		bits := 8 * d.Type.Size()
		span := hi - lo
		if bits < 64 {
			span &= uint64(1)<<bits - 1
		}
		if bits == 64 && span == math.MaxUint64 || bits < 64 && span == uint64(1)<<bits-1 {
			return nil, errors.New("the domain spans the whole type: give a tile extent")
		}
		putUint(b, span+1)
	}
	return b, nil
}

func attrFromJSON(ja *jsonAttr) (Attribute, error) {
	a := Attribute{Name: ja.Name, Nullable: ja.Nullable, FillValid: ja.FillValid, EnumerationName: ja.Enumeration}
	var err error
	if a.Type, err = datatype.Parse(ja.Type); err != nil {
		return a, fmt.Errorf("type: %w", err)
	}
	if a.CellValNum, err = cellValNumFromJSON(ja.CellValNum, defaultCellValNum(a.Type)); err != nil {
		return a, err
	}
	if ja.Filters != nil {
		if a.Filters, err = pipelineFromJSON(ja.Filters); err != nil {
			return a, fmt.Errorf("filters: %w", err)
		}
	} else {
		a.Filters = pipeline.Pipeline{MaxChunkSize: pipeline.DefaultMaxChunkSize}
	}
	if ja.Order != "" {
		if a.Order, err = ParseDataOrder(ja.Order); err != nil {
			return a, fmt.Errorf("order: %w", err)
		}
	}
	a.FillValue = DefaultFill(a.Type, a.CellValNum)
	if !isNull(ja.Fill) {
		v, err := cellFromJSON(a.Type, ja.Fill)
		if err != nil {
			return a, fmt.Errorf("fill: %w", err)
		}
		cs := a.CellSize()
		n := a.Type.Size()
		switch {
		case a.IsVar():
			if len(v) == 0 || len(v)%n != 0 {
				return a, errors.New("fill: a var-sized fill needs at least one value")
			}
		case uint64(len(v)) == uint64(n) && cs > uint64(n) && !(a.Type.IsByteLike() || a.Type.IsString()):
			v = bytes.Repeat(v, int(a.CellValNum)) // one value fills every slot of the cell
		case uint64(len(v)) != cs:
			return a, fmt.Errorf("fill: %d bytes, a cell has %d", len(v), cs)
		}
		a.FillValue = v
	}
	return a, nil
}

func enumFromJSON(je *jsonEnum) (EnumerationRef, error) {
	ref := EnumerationRef{Name: je.Name, PathName: je.Path}
	if je.Name == "" {
		return ref, errors.New("name is required")
	}
	if ref.PathName == "" {
		ref.PathName = "__" + strings.ReplaceAll(uuid.NewString(), "-", "") + "_0"
	} else if strings.ContainsAny(ref.PathName, "/\\") || ref.PathName == "." || ref.PathName == ".." {
		return ref, fmt.Errorf("path %q: want a plain file name", ref.PathName)
	}
	if je.Type == "" {
		return ref, errors.New("type is required")
	}
	if je.Values == nil {
		return ref, errors.New("values is required (use [] for none)")
	}
	e := &Enumeration{Name: je.Name, PathName: ref.PathName, Ordered: je.Ordered}
	var err error
	if e.Type, err = datatype.Parse(je.Type); err != nil {
		return ref, fmt.Errorf("type: %w", err)
	}
	if e.CellValNum, err = cellValNumFromJSON(je.CellValNum, defaultCellValNum(e.Type)); err != nil {
		return ref, err
	}
	seen := map[string]bool{}
	for i, raw := range je.Values {
		v, err := cellFromJSON(e.Type, raw)
		if err != nil {
			return ref, fmt.Errorf("values[%d]: %w", i, err)
		}
		if !e.IsVar() && uint64(len(v)) != uint64(e.Type.Size())*uint64(e.CellValNum) {
			return ref, fmt.Errorf("values[%d]: %d bytes, want %d", i, len(v), e.Type.Size()*int(e.CellValNum))
		}
		if seen[string(v)] {
			return ref, fmt.Errorf("values[%d]: duplicate value", i)
		}
		seen[string(v)] = true
		if e.IsVar() {
			var off [8]byte
			binary.LittleEndian.PutUint64(off[:], uint64(len(e.Data)))
			e.Offsets = append(e.Offsets, off[:]...)
		}
		e.Data = append(e.Data, v...)
	}
	if err := e.check(); err != nil {
		return ref, err
	}
	ref.Enum = e
	return ref, nil
}

func labelFromJSON(jl *jsonLabel, s *ArraySchema) (DimensionLabel, error) {
	l := DimensionLabel{Name: jl.Name, URI: jl.URI, RelativeURI: jl.RelativeURI, AttrName: jl.AttrName, External: jl.External}
	i := s.DimensionIndex(jl.Dimension)
	if i < 0 {
		return l, fmt.Errorf("dimension %q: no such dimension", jl.Dimension)
	}
	l.DimIndex = uint32(i)
	var err error
	if l.Order, err = ParseDataOrder(jl.Order); err != nil {
		return l, fmt.Errorf("order: %w", err)
	}
	if l.Type, err = datatype.Parse(jl.Type); err != nil {
		return l, fmt.Errorf("type: %w", err)
	}
	if l.CellValNum, err = cellValNumFromJSON(jl.CellValNum, defaultCellValNum(l.Type)); err != nil {
		return l, err
	}
	return l, nil
}
