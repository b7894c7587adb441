package lifecycle

import (
	"context"
	"time"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/format/commits"
	"github.com/tileflight/tileflight/format/gentile"
	"github.com/tileflight/tileflight/format/names"
	"github.com/tileflight/tileflight/query/cond"
	"github.com/tileflight/tileflight/storage"
	"github.com/tileflight/tileflight/writer"
)

// Delete writes a delete commit as TileDB's delete query does: one
// __commits/__t_t_<uuid>_<v>.del generic tile holding the condition of
// the cells to keep (TileDB's negation of filter; on enumerated attributes
// rewritten to indexes first, as TileDB stores it), stamped t (0: now).
// From then on every read at or after t, TileDB's and ours, leaves out
// the cells that match filter in fragments written before t. It is one
// object, so it is atomic. It returns the commit's path.
func Delete(ctx context.Context, st storage.Store, dir, filter string, t uint64, key []byte) (string, error) {
	s, err := writer.LoadSchemaWith(ctx, st, dir, writer.ArrayOptions{EncryptionKey: key})
	if err != nil {
		return "", err
	}
	if s.IsDense() {
		return "", errkind.Errorf(errkind.InvalidArgument, "array %q is dense: TileDB deletes cells of sparse arrays only", dir)
	}
	c, err := cond.Compile(filter, s)
	if err != nil {
		return "", err
	}
	// On enumerated attributes the tree already compares indexes, as the
	// delete commit TileDB writes does.
	if err := c.DeleteCheck(); err != nil {
		return "", err
	}
	keep, err := c.Keep()
	if err != nil {
		return "", errkind.Wrap(errkind.InvalidArgument, err)
	}
	p, err := commits.EncodeCondition(keep)
	if err != nil {
		return "", errkind.Wrap(errkind.InvalidArgument, err)
	}
	v := writeVersion(s)
	body, err := gentile.Encode(p, v, filterer(key))
	if err != nil {
		return "", err
	}
	if t == 0 {
		t = uint64(time.Now().UnixMilli())
	}
	n := names.New(t, t, v).WithExt(names.ExtDelete)
	rel := names.CommitsDir + "/" + n.String()
	if err := st.Put(ctx, storage.Join(dir, rel), body); err != nil {
		return "", err
	}
	return rel, nil
}
