package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/format/commits"
	"github.com/tileflight/tileflight/format/datatype"
	"github.com/tileflight/tileflight/format/names"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/query"
	"github.com/tileflight/tileflight/reader"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/tdbarray"
	"github.com/tileflight/tileflight/writer"
)

// pendingVac is the suffix of the intent file a fragment consolidation
// writes before it commits its fragment: the .vac file's contents, named
// after the new fragment. TileDB ignores files of unknown suffixes in
// __commits. If the process dies between the commit and the .vac file,
// the next consolidation or vacuum of the array writes the .vac file from
// it (rollForward), so that the superseded fragments do not stay visible
// beside the new one for long.
const pendingVac = ".vac.pending"

// amplification is TileDB's default sm.consolidation.amplification.
const amplification = 1.0

// interval is a dense dimension range as integers (uint64 dimensions as
// their bit patterns, compared unsigned).
type interval struct {
	lo, hi int64
}

type denseDims struct {
	s        *schema.ArraySchema
	unsigned []bool
}

func (d denseDims) less(i int, a, b int64) bool {
	if d.unsigned[i] {
		return uint64(a) < uint64(b)
	}
	return a < b
}

func (d denseDims) ned(f *tdbarray.Fragment) ([]interval, error) {
	m := f.NonEmptyDomain()
	if len(m) != len(d.s.Dimensions) {
		return nil, fmt.Errorf("fragment %s: non-empty domain has %d dimensions, the schema %d", f.Name, len(m), len(d.s.Dimensions))
	}
	out := make([]interval, len(m))
	for i, r := range m {
		t := d.s.Dimensions[i].Type
		if len(r.Start) != t.Size() || len(r.End) != t.Size() {
			return nil, fmt.Errorf("fragment %s: dimension %q: malformed non-empty domain", f.Name, d.s.Dimensions[i].Name)
		}
		if d.unsigned[i] {
			out[i] = interval{int64(schema.AsUint64(t, r.Start)), int64(schema.AsUint64(t, r.End))}
		} else {
			out[i] = interval{schema.AsInt64(t, r.Start), schema.AsInt64(t, r.End)}
		}
	}
	return out, nil
}

func (d denseDims) expand(u, r []interval) []interval {
	if u == nil {
		return append([]interval(nil), r...)
	}
	for i := range u {
		if d.less(i, r[i].lo, u[i].lo) {
			u[i].lo = r[i].lo
		}
		if d.less(i, u[i].hi, r[i].hi) {
			u[i].hi = r[i].hi
		}
	}
	return u
}

func (d denseDims) overlap(a, b []interval) bool {
	if a == nil || b == nil {
		return false
	}
	for i := range a {
		if d.less(i, a[i].hi, b[i].lo) || d.less(i, b[i].hi, a[i].lo) {
			return false
		}
	}
	return true
}

func (d denseDims) cells(r []interval) *big.Int {
	n := big.NewInt(1)
	for i, x := range r {
		var w big.Int
		if d.unsigned[i] {
			w.SetUint64(uint64(x.hi) - uint64(x.lo))
		} else {
			w.Sub(big.NewInt(x.hi), big.NewInt(x.lo))
		}
		n.Mul(n, w.Add(&w, big.NewInt(1)))
	}
	return n
}

// toTiles expands r to whole space tiles.
func (d denseDims) toTiles(r []interval) []interval {
	out := make([]interval, len(r))
	for i, x := range r {
		dim := &d.s.Dimensions[i]
		if len(dim.TileExtent) != dim.Type.Size() {
			// No extent: one tile spans the domain.
			lo, hi := d.domain(i)
			out[i] = interval{lo, hi}
			continue
		}
		ext := int64(schema.AsUint64(dim.Type, dim.TileExtent))
		if d.unsigned[i] {
			lo0 := schema.AsUint64(dim.Type, dim.Lo())
			e := uint64(ext)
			out[i] = interval{int64((uint64(x.lo)-lo0)/e*e + lo0), int64(((uint64(x.hi)-lo0)/e+1)*e - 1 + lo0)}
		} else {
			lo0 := schema.AsInt64(dim.Type, dim.Lo())
			out[i] = interval{(x.lo-lo0)/ext*ext + lo0, ((x.hi-lo0)/ext+1)*ext - 1 + lo0}
		}
	}
	return out
}

func (d denseDims) domain(i int) (int64, int64) {
	dim := &d.s.Dimensions[i]
	if d.unsigned[i] {
		return int64(schema.AsUint64(dim.Type, dim.Lo())), int64(schema.AsUint64(dim.Type, dim.Hi()))
	}
	return schema.AsInt64(dim.Type, dim.Lo()), schema.AsInt64(dim.Type, dim.Hi())
}

func (d denseDims) str(i int, v int64) string {
	if d.unsigned[i] {
		return strconv.FormatUint(uint64(v), 10)
	}
	return strconv.FormatInt(v, 10)
}

// consolidateFragments does what TileDB's FragmentConsolidator does with
// its default configuration (one step, every fragment of the range, an
// amplification of 1.0): the fragments whose timestamps lie in the range
// become one fragment named __<first start>_<last end>_<uuid>_<v>,
// committed, then a .vac file of the same name lists them.
//
// Dense arrays: the cells of the union of the fragments' non-empty
// domains are read as a read at the range sees them (newest wins, fill
// values where none wrote) and written as one dense write of that union.
// As in TileDB, nothing happens when the union overlaps a fragment older
// than the range, or holds more cells than the fragments' tile-expanded
// domains together.
func consolidateFragments(ctx context.Context, st storage.Store, dir string, opt Options) (*Result, error) {
	if err := rollForward(ctx, st, dir); err != nil {
		return nil, err
	}
	// TileDB's window ends at UINT64_MAX unless told otherwise, so that
	// fragments stamped ahead of the clock are consolidated too. The
	// array is opened whole: the consolidated fragment is written in the
	// latest schema whatever the window.
	end := opt.End
	if end == 0 {
		end = math.MaxUint64
	}
	all, err := tdbarray.Open(ctx, st, dir, tdbarray.Options{End: math.MaxUint64, EncryptionKey: opt.EncryptionKey})
	if err != nil {
		return nil, err
	}
	s := all.Schema
	if !s.IsDense() {
		return consolidateSparse(ctx, st, dir, all, opt, end)
	}
	dd := denseDims{s: s, unsigned: make([]bool, len(s.Dimensions))}
	for i, d := range s.Dimensions {
		if !d.Type.IsInteger() && !d.Type.IsDatetime() && !d.Type.IsTime() {
			return nil, errkind.Errorf(errkind.Unimplemented, "dense dimension %q of type %s", d.Name, d.Type)
		}
		dd.unsigned[i] = d.Type == datatype.Uint64
	}
	var anterior, union []interval
	var picked []*tdbarray.Fragment
	sum := new(big.Int)
	for _, f := range all.Fragments {
		ned, err := dd.ned(f)
		if err != nil {
			return nil, errkind.Wrap(errkind.DataLoss, err)
		}
		switch {
		case f.Start < opt.Start:
			anterior = dd.expand(anterior, ned)
		case f.End <= end:
			picked = append(picked, f)
			union = dd.expand(union, ned)
			sum.Add(sum, dd.cells(dd.toTiles(ned)))
		}
	}
	if len(picked) < 2 {
		return &Result{}, nil
	}
	if dd.overlap(union, anterior) {
		return &Result{}, nil
	}
	ratio, _ := new(big.Float).Quo(new(big.Float).SetInt(dd.cells(union)), new(big.Float).SetInt(sum)).Float64()
	if ratio > amplification {
		return &Result{}, nil
	}

	// Read the union at the range, write it back as one fragment.
	q := &query.Query{Array: dir, Layout: query.LayoutRowMajor, Limit: -1,
		Timestamp: &query.Timestamp{Start: opt.Start, End: end}}
	for _, a := range s.Attributes {
		q.Columns = append(q.Columns, a.Name)
	}
	sub := make([][2]int64, len(union))
	for i, r := range union {
		sub[i] = [2]int64{r.lo, r.hi}
		q.Subarray = append(q.Subarray, query.DimRanges{Dim: s.Dimensions[i].Name, Ranges: []query.Range{{
			Lo: query.Value{Num: json.Number(dd.str(i, r.lo))}, Hi: query.Value{Num: json.Number(dd.str(i, r.hi))}}}})
	}
	rd, err := reader.Open(ctx, st, q, reader.Options{EncryptionKey: opt.EncryptionKey, Workers: opt.Workers})
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	t1, t2 := picked[0].Start, picked[len(picked)-1].End
	dw, err := writer.NewDenseWriter(ctx, st, dir, s, sub, schema.RowMajor, writer.Options{
		Timestamp: t2, TimestampStart: t1, MaxFragmentBytes: opt.MaxFragmentBytes, EncryptionKey: opt.EncryptionKey})
	if err != nil {
		return nil, err
	}
	defer dw.Abort()
	for {
		rec, err := rd.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		err = dw.Append(rec)
		rec.Release()
		if err != nil {
			return nil, err
		}
	}
	staged, err := dw.Stage()
	if err != nil {
		return nil, err
	}
	return commitConsolidated(ctx, st, dir, picked, staged.Fragments, writeVersion(s), all.Dir)
}

// commitConsolidated makes the staged fragments of a consolidation visible
// and then hides what they replace: intent file, commit, .vac file, intent
// removed.
func commitConsolidated(ctx context.Context, st storage.Store, dir string, picked []*tdbarray.Fragment, staged []string, v uint32, arrayURI string) (*Result, error) {
	res := &Result{}
	var lines []string
	for _, f := range picked {
		lines = append(lines, commits.VacuumLine(f.Path, v, arrayURI))
		res.Consolidated = append(res.Consolidated, f.Name)
	}
	vac := commits.EncodeVacuum(lines)
	first, err := names.Parse(staged[0])
	if err != nil {
		return nil, err
	}
	vacKey := names.CommitsDir + "/" + first.WithExt(names.ExtVacuum).String()
	pending := vacKey[:len(vacKey)-len(names.ExtVacuum)] + pendingVac
	if err := st.Put(ctx, storage.Join(dir, pending), vac); err != nil {
		writer.AbortFragments(context.WithoutCancel(ctx), st, dir, staged)
		return nil, err
	}
	cs, err := writer.CommitFragments(ctx, st, dir, staged)
	if err != nil {
		// The commit may have landed (a lost reply): the intent file
		// stays for rollForward to settle.
		return nil, err
	}
	if err := st.Put(ctx, storage.Join(dir, vacKey), vac); err != nil {
		return nil, err
	}
	if err := st.Delete(ctx, storage.Join(dir, pending)); err != nil {
		return nil, err
	}
	for _, f := range staged {
		res.Written = append(res.Written, names.FragmentsDir+"/"+f)
	}
	res.Written = append(res.Written, cs.Commit, vacKey)
	return res, nil
}

// rollForward finishes fragment consolidations that died between their
// commit and their .vac file.
func rollForward(ctx context.Context, st storage.Store, dir string) error {
	files, err := listFiles(ctx, st, dir, names.CommitsDir)
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for _, f := range files {
		have[f] = true
	}
	for _, f := range files {
		if !strings.HasSuffix(f, pendingVac) {
			continue
		}
		base := strings.TrimSuffix(f, pendingVac)
		n, err := names.Parse(base)
		if err != nil {
			continue
		}
		ok, err := writer.IsCommitted(ctx, st, dir, n.String())
		if err != nil {
			return err
		}
		if !ok {
			continue // not committed: in progress, or the grace vacuum's
		}
		if !have[base+names.ExtVacuum] {
			b, err := st.Get(ctx, storage.Join(dir, names.CommitsDir, f))
			if err != nil {
				return err
			}
			if err := st.Put(ctx, storage.Join(dir, names.CommitsDir, base+names.ExtVacuum), b); err != nil {
				return err
			}
		}
		if err := st.Delete(ctx, storage.Join(dir, names.CommitsDir, f)); err != nil {
			return err
		}
	}
	return nil
}
