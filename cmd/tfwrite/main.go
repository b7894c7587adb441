// Command tfwrite drives package writer from the command line for the
// Python tests (which check what TileDB reads from our fragments) and for
// the crash test, which kills it mid-write. Not a user tool.
//
//	tfwrite create ARRAY SCHEMA.json
//	tfwrite write ARRAY INPUT.arrow [-subarray JSON] [-layout col-major] [-timestamp MS] [-max-bytes N] [-repeat N]
//	             [-stream] [-fail-at K [-late]]
//
// -stream feeds the input's record batches one at a time to a streaming
// writer (the input may then hold several batches); -fail-at K makes the
// K-th (0-based) mutating store operation fail (-late: fail after it took
// effect), so tests can check what TileDB sees after a failed write.
//
//	tfwrite drop ARRAY
//	tfwrite meta ARRAY JSON-OBJECT
//	tfwrite dump ARRAY
//
// -key KEY, anywhere on the line, is the array's AES-256-GCM key (32
// bytes, as TileDB's sm.encryption_key): create makes an encrypted array
// with it, the other commands open one.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/tileflight/tileflight/format/arraymeta"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/storage/errorfs"
	"github.com/tileflight/tileflight/writer"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "tfwrite:", err)
		os.Exit(1)
	}
}

func openArray(path string) (storage.Store, string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, "", err
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return nil, "", err
	}
	st, err := storage.NewLocal(filepath.Dir(abs))
	if err != nil {
		return nil, "", err
	}
	return st, filepath.Base(abs), nil
}

// takeKey removes "-key KEY" (or -key=KEY, --key) from args.
func takeKey(args []string) ([]string, []byte, error) {
	var out []string
	var key []byte
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-key" || a == "--key":
			if i+1 == len(args) {
				return nil, nil, fmt.Errorf("-key needs a value")
			}
			key = []byte(args[i+1])
			i++
		case strings.HasPrefix(a, "-key=") || strings.HasPrefix(a, "--key="):
			key = []byte(a[strings.IndexByte(a, '=')+1:])
		default:
			out = append(out, a)
		}
	}
	return out, key, nil
}

func run(args []string) error {
	args, key, err := takeKey(args)
	if err != nil {
		return err
	}
	aopt := writer.ArrayOptions{EncryptionKey: key}
	if len(args) < 2 {
		return fmt.Errorf("usage: tfwrite create|write|drop|meta|dump ARRAY [ARGS]")
	}
	ctx := context.Background()
	st, dir, err := openArray(args[1])
	if err != nil {
		return err
	}
	switch args[0] {
	case "dump":
		return dumpArray(ctx, st, dir, key, os.Stdout)
	case "drop":
		return writer.DropArrayWith(ctx, st, dir, aopt)
	case "create":
		if len(args) != 3 {
			return fmt.Errorf("usage: tfwrite create ARRAY SCHEMA.json")
		}
		b, err := os.ReadFile(args[2])
		if err != nil {
			return err
		}
		s, err := schema.FromJSON(b)
		if err != nil {
			return err
		}
		return writer.CreateArrayWith(ctx, st, dir, s, aopt)
	case "meta":
		if len(args) != 3 {
			return fmt.Errorf("usage: tfwrite meta ARRAY JSON")
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(args[2]), &m); err != nil {
			return err
		}
		vals := map[string]arraymeta.Value{}
		var del []string
		for k, x := range m {
			if x == nil {
				del = append(del, k)
				continue
			}
			v, err := arraymeta.FromJSON(x)
			if err != nil {
				return err
			}
			vals[k] = v
		}
		if len(vals) > 0 {
			if _, err := writer.PutMetadataWith(ctx, st, dir, vals, 0, aopt); err != nil {
				return err
			}
		}
		if len(del) > 0 {
			_, err := writer.DeleteMetadataWith(ctx, st, dir, del, 0, aopt)
			return err
		}
		return nil
	case "write":
		return write(ctx, st, dir, args[2:], key)
	}
	return fmt.Errorf("unknown command %q", args[0])
}

func write(ctx context.Context, st storage.Store, dir string, args []string, key []byte) error {
	if len(args) < 1 {
		return fmt.Errorf("usage: tfwrite write ARRAY INPUT.arrow [flags]")
	}
	input := args[0]
	fs := flag.NewFlagSet("write", flag.ContinueOnError)
	sub := fs.String("subarray", "", "dense: JSON list of [lo, hi] per dimension")
	layout := fs.String("layout", "row-major", "dense input order")
	ts := fs.Uint64("timestamp", 0, "fragment timestamp (ms)")
	maxBytes := fs.Int64("max-bytes", 0, "split into fragments above this input size")
	repeat := fs.Int("repeat", 1, "write the input this many times (crash test)")
	stream := fs.Bool("stream", false, "write batch by batch through a streaming writer")
	failAt := fs.Int64("fail-at", -1, "fail the K-th mutating store operation")
	late := fs.Bool("late", false, "with -fail-at: the failed operation still takes effect")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	s, err := writer.LoadSchemaWith(ctx, st, dir, writer.ArrayOptions{EncryptionKey: key})
	if err != nil {
		return err
	}
	f, err := os.Open(input)
	if err != nil {
		return err
	}
	defer f.Close()
	rd, err := ipc.NewFileReader(f, ipc.WithAllocator(memory.NewGoAllocator()))
	if err != nil {
		return fmt.Errorf("%s: %w", input, err)
	}
	defer rd.Close()
	if *failAt >= 0 {
		var inj errorfs.Injector = errorfs.FailNth(*failAt, errorfs.Mutating)
		if *late {
			inj = errorfs.Late(inj)
		}
		st = errorfs.Wrap(st, inj)
	}
	var subarray [][2]int64
	l := schema.RowMajor
	if s.IsDense() {
		if err := json.Unmarshal([]byte(*sub), &subarray); err != nil {
			return fmt.Errorf("-subarray: %w", err)
		}
		if l, err = schema.ParseLayout(*layout); err != nil {
			return err
		}
	}
	opt := writer.Options{Timestamp: *ts, MaxFragmentBytes: *maxBytes, EncryptionKey: key}
	if *stream {
		for i := 0; i < *repeat; i++ {
			res, err := streamWrite(ctx, st, dir, s, rd, subarray, l, opt)
			if err != nil {
				return err
			}
			b, _ := json.Marshal(res)
			fmt.Println(string(b))
		}
		return nil
	}
	if rd.NumRecords() != 1 {
		return fmt.Errorf("%s: want exactly one record batch, got %d", input, rd.NumRecords())
	}
	rec, err := rd.RecordBatch(0)
	if err != nil {
		return err
	}
	cols, err := writer.FromArrow(s, rec)
	if err != nil {
		return err
	}
	for i := 0; i < *repeat; i++ {
		var res *writer.Result
		if s.IsDense() {
			res, err = writer.WriteDense(ctx, st, dir, s, subarray, l, cols, opt)
			if err != nil {
				return err
			}
		} else {
			res, err = writer.WriteSparse(ctx, st, dir, s, cols, opt)
			if err != nil {
				return err
			}
		}
		b, _ := json.Marshal(res)
		fmt.Println(string(b))
	}
	return nil
}

// streamWrite writes every batch of rd through a streaming writer.
func streamWrite(ctx context.Context, st storage.Store, dir string, s *schema.ArraySchema, rd *ipc.FileReader, subarray [][2]int64, l schema.Layout, opt writer.Options) (*writer.Result, error) {
	type streamer interface {
		Append(arrow.RecordBatch) error
		Commit() (*writer.Result, error)
		Abort() error
	}
	var w streamer
	var err error
	if s.IsDense() {
		w, err = writer.NewDenseWriter(ctx, st, dir, s, subarray, l, opt)
	} else {
		w, err = writer.NewSparseWriter(ctx, st, dir, s, opt)
	}
	if err != nil {
		return nil, err
	}
	defer w.Abort()
	for i := 0; i < rd.NumRecords(); i++ {
		rec, err := rd.RecordBatch(i)
		if err != nil {
			return nil, err
		}
		if err := w.Append(rec); err != nil {
			return nil, err
		}
	}
	return w.Commit()
}
