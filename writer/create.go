package writer

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/format/arraymeta"
	"github.com/tileflight/tileflight/format/names"
	"github.com/tileflight/tileflight/format/schema"
	"github.com/tileflight/tileflight/storage"
)

// Exists reports whether an array (any format version) lives at dir.
func Exists(ctx context.Context, st storage.Store, dir string) (bool, error) {
	if _, err := st.Stat(ctx, storage.Join(dir, names.LegacySchemaFile)); err == nil {
		return true, nil
	} else if !errors.Is(err, storage.ErrNotFound) {
		return false, err
	}
	ents, err := st.List(ctx, storage.Join(dir, names.SchemaDir))
	if err != nil {
		return false, err
	}
	for _, e := range ents {
		if !e.IsDir {
			return true, nil
		}
	}
	return false, nil
}

// CreateArray validates s and creates an array with it at dir: the
// enumeration files under __schema/__enumerations, then the schema file
// under __schema (the array exists from that last Put on). TileDB's empty
// directories are not made: object stores have none and TileDB opens the
// array without them. An existing array is an AlreadyExists error. On
// success s.Name holds the schema file name (and s.Version defaults to the
// current format version).
func CreateArray(ctx context.Context, st storage.Store, dir string, s *schema.ArraySchema) error {
	return CreateArrayWith(ctx, st, dir, s, ArrayOptions{})
}

// CreateArrayWith is CreateArray with options: given an encryption key,
// the array is created encrypted (schema and enumeration files sealed
// with it), and every later write must give the same key.
func CreateArrayWith(ctx context.Context, st storage.Store, dir string, s *schema.ArraySchema, opt ArrayOptions) error {
	if err := checkKeySize(opt.EncryptionKey); err != nil {
		return fmt.Errorf("create array %q: %w", dir, err)
	}
	if s == nil {
		return invalidf("create array %q: nil schema", dir)
	}
	if s.Version == 0 {
		s.Version = schema.CurrentVersion
	}
	if err := s.Validate(); err != nil {
		return errkind.Wrap(errkind.InvalidArgument, fmt.Errorf("create array %q: %w", dir, err))
	}
	ok, err := Exists(ctx, st, dir)
	if err != nil {
		return fmt.Errorf("create array %q: %w", dir, err)
	}
	if ok {
		return errkind.Errorf(errkind.AlreadyExists, "create array %q: an array already exists there", dir)
	}
	for i := range s.Enumerations {
		ref := &s.Enumerations[i]
		if ref.Enum == nil {
			return invalidf("create array %q: enumeration %q has no values", dir, ref.Name)
		}
		e := *ref.Enum
		e.Name, e.PathName = ref.Name, ref.PathName
		p, err := schema.EncodeEnumeration(&e)
		if err != nil {
			return errkind.Wrap(errkind.InvalidArgument, fmt.Errorf("create array %q: %w", dir, err))
		}
		b, err := encodeGeneric(p, s.Version, opt.EncryptionKey)
		if err != nil {
			return errkind.Wrap(errkind.InvalidArgument, fmt.Errorf("create array %q: %w", dir, err))
		}
		key := storage.Join(dir, names.SchemaDir, names.EnumerationsDir, ref.PathName)
		if err := st.Put(ctx, key, b); err != nil {
			return fmt.Errorf("create array %q: %w", dir, err)
		}
	}
	n := names.New(0, 0, 0)
	p, err := schema.Encode(s)
	if err != nil {
		return errkind.Wrap(errkind.InvalidArgument, fmt.Errorf("create array %q: %w", dir, err))
	}
	b, err := encodeGeneric(p, s.Version, opt.EncryptionKey)
	if err != nil {
		return fmt.Errorf("create array %q: %w", dir, err)
	}
	if err := st.Put(ctx, storage.Join(dir, names.SchemaKey(n)), b); err != nil {
		return fmt.Errorf("create array %q: %w", dir, err)
	}
	s.Name = n.String()
	return nil
}

// DropArray deletes the array at dir: commits first, so that an
// interrupted drop leaves no half-visible fragment, the schema last. An
// encrypted array is dropped only with its key (DropArrayWith), as TileDB
// does.
func DropArray(ctx context.Context, st storage.Store, dir string) error {
	return DropArrayWith(ctx, st, dir, ArrayOptions{})
}

// DropArrayWith is DropArray for an array that may be encrypted: the key
// is checked against the newest schema before anything is deleted.
func DropArrayWith(ctx context.Context, st storage.Store, dir string, opt ArrayOptions) error {
	ok, err := Exists(ctx, st, dir)
	if err != nil {
		return fmt.Errorf("drop array %q: %w", dir, err)
	}
	if !ok {
		return errkind.Errorf(errkind.NotFound, "drop array %q: no array there", dir)
	}
	// A damaged schema does not keep an array from being dropped; a
	// missing or wrong key does.
	if _, err := loadSchemaPayload(ctx, st, dir, opt.EncryptionKey); err != nil && !errors.Is(err, errkind.DataLoss) {
		return fmt.Errorf("drop array: %w", err)
	}
	for _, sub := range []string{names.CommitsDir, names.FragmentMetaDir, names.FragmentsDir, names.MetaDir, names.LabelsDir} {
		if err := st.DeletePrefix(ctx, storage.Join(dir, sub)); err != nil {
			return fmt.Errorf("drop array %q: %w", dir, err)
		}
	}
	if err := st.DeletePrefix(ctx, dir); err != nil {
		return fmt.Errorf("drop array %q: %w", dir, err)
	}
	return nil
}

// PutMetadata writes the given keys as one new array metadata file
// stamped t (0: now) and returns its name.
func PutMetadata(ctx context.Context, st storage.Store, dir string, values map[string]arraymeta.Value, t uint64) (string, error) {
	return PutMetadataWith(ctx, st, dir, values, t, ArrayOptions{})
}

// PutMetadataWith is PutMetadata for an array that may be encrypted: the
// metadata file is sealed with opt.EncryptionKey, which must be the
// array's key.
func PutMetadataWith(ctx context.Context, st storage.Store, dir string, values map[string]arraymeta.Value, t uint64, opt ArrayOptions) (string, error) {
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var es []arraymeta.Entry
	for _, k := range keys {
		es = append(es, arraymeta.Entry{Key: k, Value: values[k]})
	}
	return writeMeta(ctx, st, dir, es, t, opt.EncryptionKey)
}

// DeleteMetadata writes one metadata file deleting the given keys.
func DeleteMetadata(ctx context.Context, st storage.Store, dir string, keys []string, t uint64) (string, error) {
	return DeleteMetadataWith(ctx, st, dir, keys, t, ArrayOptions{})
}

// DeleteMetadataWith is DeleteMetadata for an array that may be encrypted.
func DeleteMetadataWith(ctx context.Context, st storage.Store, dir string, keys []string, t uint64, opt ArrayOptions) (string, error) {
	var es []arraymeta.Entry
	for _, k := range keys {
		es = append(es, arraymeta.Entry{Key: k, Deleted: true})
	}
	return writeMeta(ctx, st, dir, es, t, opt.EncryptionKey)
}

func writeMeta(ctx context.Context, st storage.Store, dir string, es []arraymeta.Entry, t uint64, key []byte) (string, error) {
	ok, err := Exists(ctx, st, dir)
	if err != nil {
		return "", fmt.Errorf("array metadata %q: %w", dir, err)
	}
	if !ok {
		return "", errkind.Errorf(errkind.NotFound, "array metadata %q: no array there", dir)
	}
	for _, e := range es {
		if e.Key == "" {
			return "", invalidf("array metadata %q: empty key", dir)
		}
	}
	if _, err := loadSchemaPayload(ctx, st, dir, key); err != nil {
		return "", fmt.Errorf("array metadata: %w", err)
	}
	if len(es) == 0 {
		// TileDB writes no file for an empty change.
		return "", nil
	}
	p, err := arraymeta.EncodePayload(es)
	if err != nil {
		return "", errkind.Wrap(errkind.InvalidArgument, fmt.Errorf("array metadata %q: %w", dir, err))
	}
	b, err := encodeGeneric(p, FormatVersion, key)
	if err != nil {
		return "", fmt.Errorf("array metadata %q: %w", dir, err)
	}
	n := names.New(t, t, 0)
	mk := storage.Join(dir, names.MetaKey(n))
	if err := st.Put(ctx, mk, b); err != nil {
		return "", fmt.Errorf("array metadata: write %q: %w", mk, err)
	}
	return n.String(), nil
}

// LoadSchema reads the newest schema of the array at dir with its
// enumerations, ready for the Write functions. (Opening an array at a
// timestamp is package tdbarray's business; a writer always writes against
// the latest schema, as TileDB does.) An encrypted array needs
// LoadSchemaWith and its key.
func LoadSchema(ctx context.Context, st storage.Store, dir string) (*schema.ArraySchema, error) {
	return LoadSchemaWith(ctx, st, dir, ArrayOptions{})
}

// LoadSchemaWith is LoadSchema for an array that may be encrypted. A
// missing key, or one given for an unencrypted array, is InvalidArgument;
// a wrong key FailedPrecondition.
func LoadSchemaWith(ctx context.Context, st storage.Store, dir string, opt ArrayOptions) (*schema.ArraySchema, error) {
	if err := checkKeySize(opt.EncryptionKey); err != nil {
		return nil, fmt.Errorf("array %q: %w", dir, err)
	}
	sp, err := loadSchemaPayload(ctx, st, dir, opt.EncryptionKey)
	if err != nil {
		return nil, err
	}
	s, err := schema.Decode(sp.payload)
	if err != nil {
		return nil, errkind.Wrap(errkind.DataLoss, fmt.Errorf("array %q: schema %s: %w", dir, sp.key, err))
	}
	s.Name = lastSeg(sp.key)
	for i := range s.Enumerations {
		ref := &s.Enumerations[i]
		ek := storage.Join(dir, names.SchemaDir, names.EnumerationsDir, ref.PathName)
		eb, err := st.Get(ctx, ek)
		if err != nil {
			return nil, fmt.Errorf("array %q: enumeration %q: %w", dir, ref.Name, err)
		}
		ep, err := openGeneric(eb, ek, opt.EncryptionKey)
		if err != nil {
			return nil, fmt.Errorf("array %q: enumeration %q: %w", dir, ref.Name, err)
		}
		if ref.Enum, err = schema.DecodeEnumeration(ep); err != nil {
			return nil, errkind.Wrap(errkind.DataLoss, fmt.Errorf("array %q: enumeration %q: %w", dir, ref.Name, err))
		}
	}
	return s, nil
}

type schemaPayload struct {
	key     string
	payload []byte
}

// loadSchemaPayload finds the newest schema file of the array at dir and
// decodes its generic tile with key (which must fit: see openGeneric).
func loadSchemaPayload(ctx context.Context, st storage.Store, dir string, key []byte) (*schemaPayload, error) {
	if err := checkKeySize(key); err != nil {
		return nil, fmt.Errorf("array %q: %w", dir, err)
	}
	ents, err := st.List(ctx, storage.Join(dir, names.SchemaDir))
	if err != nil {
		return nil, fmt.Errorf("array %q: %w", dir, err)
	}
	var files []string
	for _, e := range ents {
		if !e.IsDir {
			files = append(files, e.Name)
		}
	}
	sk := ""
	if len(files) > 0 {
		sort.Slice(files, func(i, j int) bool { return names.CompareSchemaFiles(files[i], files[j]) < 0 })
		sk = storage.Join(dir, names.SchemaDir, files[len(files)-1])
	} else {
		sk = storage.Join(dir, names.LegacySchemaFile)
	}
	b, err := st.Get(ctx, sk)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, errkind.Errorf(errkind.NotFound, "array %q: no array there", dir)
	}
	if err != nil {
		return nil, fmt.Errorf("array %q: %w", dir, err)
	}
	p, err := openGeneric(b, sk, key)
	if err != nil {
		return nil, fmt.Errorf("array %q: schema: %w", dir, err)
	}
	return &schemaPayload{key: sk, payload: p}, nil
}

func lastSeg(k string) string {
	for i := len(k) - 1; i >= 0; i-- {
		if k[i] == '/' {
			return k[i+1:]
		}
	}
	return k
}
