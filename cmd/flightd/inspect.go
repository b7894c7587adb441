package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/tileflight/tileflight/format/arraymeta"
	"github.com/tileflight/tileflight/format/pipeline"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/tdbarray"
)

// runInspect implements `flightd inspect PATH`: a person-readable report of
// an array's schema, fragments and metadata.
func runInspect(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("flightd inspect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	ts := fs.Uint64("timestamp", 0, "open the array at this time (ms since the epoch; default now)")
	key := fs.String("key", os.Getenv("TILEFLIGHT_ENCRYPTION_KEY"), "AES-256-GCM key of an encrypted array (32 bytes; env TILEFLIGHT_ENCRYPTION_KEY)")
	asJSON := fs.Bool("json", false, "print the schema as schema JSON (docs/protocol.md, Schema JSON) instead of the report")
	var s3f s3Flags
	s3f.register(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: flightd inspect [flags] PATH|s3://bucket/prefix/array\n\nPrints an array's schema (dimensions, attributes, types, filters),\nits fragments and its metadata.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	ctx := context.Background()
	// PATH is a directory or s3://bucket/prefix/array.
	st, name, closeStore, err := openArrayPath(ctx, fs.Arg(0), &s3f)
	if err != nil {
		fmt.Fprintf(stderr, "flightd inspect: %v\n", err)
		return 1
	}
	defer closeStore()
	if strings.HasSuffix(name, ".b2nd") {
		if err := inspectB2ND(ctx, stdout, st, name, *asJSON); err != nil {
			fmt.Fprintf(stderr, "flightd inspect: %s: %v\n", fs.Arg(0), err)
			return 1
		}
		return 0
	}
	opt := tdbarray.Options{End: *ts}
	if *key != "" {
		opt.EncryptionKey = []byte(*key)
	}
	a, err := tdbarray.Open(ctx, st, name, opt)
	if err != nil {
		fmt.Fprintf(stderr, "flightd inspect: %s: %v\n", fs.Arg(0), err)
		return 1
	}
	if *asJSON {
		b, err := schema.ToJSONArray(a.Schema, name)
		if err != nil {
			fmt.Fprintf(stderr, "flightd inspect: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "%s\n", b)
		return 0
	}
	if err := writeReport(ctx, stdout, fs.Arg(0), a); err != nil {
		fmt.Fprintf(stderr, "flightd inspect: %s: %v\n", fs.Arg(0), err)
		return 1
	}
	return 0
}

func writeReport(ctx context.Context, out io.Writer, name string, a *tdbarray.Array) error {
	s := a.Schema
	fmt.Fprintf(out, "array %s\n", name)
	fmt.Fprintf(out, "  type %s, tile order %s, cell order %s", s.Type, s.TileOrder, s.CellOrder)
	if !s.IsDense() {
		fmt.Fprintf(out, ", capacity %d, duplicates %s", s.Capacity, map[bool]string{true: "allowed", false: "not allowed"}[s.AllowsDups])
	}
	fmt.Fprintf(out, "\n  schema %s (format version %d; %d schema file(s))\n", s.Name, s.Version, len(a.Schemas))

	fmt.Fprintf(out, "\ndimensions\n")
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for i := range s.Dimensions {
		d := &s.Dimensions[i]
		domain, tile := "(strings)", "-"
		if !d.IsVar() {
			domain = "[" + schema.FormatValue(d.Type, d.Lo()) + ", " + schema.FormatValue(d.Type, d.Hi()) + "]"
			if d.TileExtent != nil {
				tile = schema.FormatValue(d.Type, d.TileExtent)
			}
		}
		fmt.Fprintf(tw, "  %s\t%s%s\tdomain %s\ttile %s\tfilters %s\n", d.Name, d.Type, cellValNum(d.CellValNum), domain, tile, filtersString(s.DimensionFilters(i)))
	}
	tw.Flush()

	fmt.Fprintf(out, "\nattributes\n")
	tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for i := range s.Attributes {
		at := &s.Attributes[i]
		extra := ""
		if at.Nullable {
			extra = "nullable"
		}
		if at.EnumerationName != "" {
			extra = strings.TrimSpace(extra + " enumeration " + at.EnumerationName)
		}
		fmt.Fprintf(tw, "  %s\t%s%s\t%s\tfill %s\tfilters %s\n", at.Name, at.Type, cellValNum(at.CellValNum), extra, fillString(at), filtersString(at.Filters))
	}
	tw.Flush()
	fmt.Fprintf(out, "\n  coords filters %s\n  offsets filters %s\n  validity filters %s\n",
		filtersString(s.CoordsFilters), filtersString(s.OffsetsFilters), filtersString(s.ValidityFilters))
	for _, e := range s.Enumerations {
		if e.Enum == nil {
			continue
		}
		vals := make([]string, 0, min(e.Enum.Len(), 10))
		for i := 0; i < e.Enum.Len() && i < 10; i++ {
			vals = append(vals, strconv.Quote(schema.FormatValue(e.Enum.Type, e.Enum.Value(i))))
		}
		if e.Enum.Len() > 10 {
			vals = append(vals, fmt.Sprintf("... (%d in all)", e.Enum.Len()))
		}
		fmt.Fprintf(out, "  enumeration %s (%s, ordered %v): %s\n", e.Name, e.Enum.Type, e.Enum.Ordered, strings.Join(vals, ", "))
	}

	fmt.Fprintf(out, "\nfragments (%d visible at [%d, %d])\n", len(a.Fragments), a.Start, a.End)
	tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for _, f := range a.Fragments {
		footer := f.Meta.Footer()
		kind := "sparse"
		if footer.Dense {
			kind = "dense"
		}
		cells, err := f.CellNum()
		if err != nil {
			return err
		}
		var ned []string
		for d, r := range f.NonEmptyDomain() {
			ned = append(ned, f.Schema.Dimensions[d].Name+"="+tdbarray.FormatRange(&f.Schema.Dimensions[d], r))
		}
		size, err := fragmentSize(ctx, a, f)
		if err != nil {
			return err
		}
		fmt.Fprintf(tw, "  %s\t[%d, %d]\tv%d\t%s\t%d cells\t%s\t%s\n", f.Name, f.Start, f.End, footer.Version, kind, cells, strings.Join(ned, " "), humanBytes(size))
	}
	tw.Flush()
	if n := len(a.View.Conditions); n > 0 {
		fmt.Fprintf(out, "  %d delete/update commit(s) in range\n", n)
	}

	snap, err := a.Metadata(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\nmetadata (%d key(s))\n", len(snap.Values))
	keys := make([]string, 0, len(snap.Values))
	for k := range snap.Values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(out, "  %s = %s (%s)\n", k, metaString(snap.Values[k]), snap.Values[k].Type)
	}
	return nil
}

func cellValNum(n uint32) string {
	switch n {
	case 1:
		return ""
	case schema.VarNum:
		return " var"
	}
	return fmt.Sprintf(" x%d", n)
}

func fillString(at *schema.Attribute) string {
	if at.IsVar() || at.CellValNum != 1 {
		if len(at.FillValue) == 0 {
			return `""`
		}
		return strconv.Quote(string(at.FillValue))
	}
	v := schema.FormatValue(at.Type, at.FillValue)
	if at.Type.IsString() || at.Type.IsByteLike() {
		v = strconv.Quote(v)
	}
	if at.Nullable && !at.FillValid {
		v += " (null)"
	}
	return v
}

func filtersString(p pipeline.Pipeline) string {
	if len(p.Filters) == 0 {
		return "none"
	}
	parts := make([]string, len(p.Filters))
	for i, f := range p.Filters {
		var opts []string
		switch f.Type {
		case pipeline.Gzip, pipeline.Zstd, pipeline.LZ4, pipeline.Bzip2, pipeline.RLE, pipeline.Dictionary:
			opts = append(opts, fmt.Sprintf("level=%d", f.Level))
		case pipeline.Delta, pipeline.DoubleDelta:
			if f.Reinterpret.String() != "any" {
				opts = append(opts, "reinterpret="+f.Reinterpret.String())
			}
		case pipeline.BitWidthReduction, pipeline.PositiveDelta:
			opts = append(opts, fmt.Sprintf("window=%d", f.MaxWindow))
		case pipeline.ScaleFloat:
			opts = append(opts, fmt.Sprintf("scale=%g", f.Scale), fmt.Sprintf("offset=%g", f.Offset), fmt.Sprintf("bytewidth=%d", f.ByteWidth))
		case pipeline.WebP:
			opts = append(opts, fmt.Sprintf("quality=%g", f.WebPQuality), fmt.Sprintf("format=%d", f.WebPFormat), fmt.Sprintf("lossless=%v", f.WebPLossless))
		}
		parts[i] = f.Type.String()
		if len(opts) > 0 {
			parts[i] += "(" + strings.Join(opts, ",") + ")"
		}
	}
	s := strings.Join(parts, " -> ")
	if p.MaxChunkSize != pipeline.DefaultMaxChunkSize {
		s += fmt.Sprintf(" [chunks of %d bytes]", p.MaxChunkSize)
	}
	return s
}

func metaString(v arraymeta.Value) string {
	j, err := v.JSON()
	if err != nil {
		return fmt.Sprintf("<%v>", err)
	}
	b, err := json.Marshal(j)
	if err != nil {
		return fmt.Sprint(j)
	}
	s := string(b)
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

func fragmentSize(ctx context.Context, a *tdbarray.Array, f *tdbarray.Fragment) (int64, error) {
	entries, err := a.Store.List(ctx, filepath.ToSlash(filepath.Join(a.Dir, f.Path)))
	if err != nil {
		return 0, err
	}
	var n int64
	for _, e := range entries {
		n += e.Size
	}
	return n, nil
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
