package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/tileflight/tileflight/b2nd"
	"github.com/tileflight/tileflight/flightsvc"
	"github.com/tileflight/tileflight/storage"
)

// inspectB2ND reports a Blosc2 NDArray: shape, chunks, blocks, dtype,
// codec, filters, chunk kinds and vlmeta.
func inspectB2ND(ctx context.Context, out io.Writer, st storage.Store, name string, asJSON bool) error {
	a, err := b2nd.Open(ctx, st, name)
	if err != nil {
		return err
	}
	d := flightsvc.DescribeB2ND(a)
	if asJSON {
		b, err := json.Marshal(d)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%s\n", b)
		return nil
	}
	kind := "contiguous frame (cframe)"
	if a.Sparse {
		kind = "sparse frame (sframe directory)"
	}
	fmt.Fprintf(out, "%s: Blosc2 NDArray, %s, %s\n", name, kind, humanBytes(a.Size))
	fmt.Fprintf(out, "  shape   %v\n  chunks  %v\n  blocks  %v\n  dtype   %s (%d bytes)\n", a.Shape, a.ChunkShape, a.BlockShape, a.Dtype.Str, a.ItemSize)
	fmt.Fprintf(out, "  codec   %s clevel %d\n  filters %v meta %v\n", d["codec"], a.Header.CLevel, d["filters"], d["filters_meta"])
	var fields []string
	for _, f := range a.Dtype.Fields {
		fields = append(fields, f.Name+" "+f.Dtype)
	}
	fmt.Fprintf(out, "  columns dim0..dim%d (int64), %s\n", len(a.Shape)-1, strings.Join(fields, ", "))
	kinds := d["chunk_kinds"].(map[string]int)
	var ks []string
	for k, n := range kinds {
		ks = append(ks, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(ks)
	fmt.Fprintf(out, "\nchunks (%d): %s\n", len(a.Offsets), strings.Join(ks, ", "))
	meta, err := flightsvc.B2NDMetadata(a)
	if err != nil {
		return err
	}
	keys := make([]string, 0, len(meta))
	for k := range meta {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintf(out, "\nvlmeta (%d key(s))\n", len(keys))
	for _, k := range keys {
		b, _ := json.Marshal(meta[k])
		fmt.Fprintf(out, "  %s = %s\n", k, b)
	}
	return nil
}
