package writer

import (
	"context"
	"errors"
	"fmt"

	"github.com/tileflight/tileflight/errkind"
	"github.com/tileflight/tileflight/filters"
	"github.com/tileflight/tileflight/filters/codecs"
	"github.com/tileflight/tileflight/format/gentile"
	"github.com/tileflight/tileflight/format/names"
	"github.com/tileflight/tileflight/storage"
)

// Encrypted arrays. TileDB encrypts every file of such an array with one
// AES-256-GCM key: generic tiles (schema, enumerations, fragment
// metadata, array metadata) carry the encryption type in their header and
// the AES filter at the end of their pipeline, and data tiles get the AES
// filter appended to their field's pipeline. Writing into an encrypted
// array without its key, or encrypting into a plain one, would leave files
// TileDB refuses to open, so every write checks the key against the
// array's schema file before storing anything.

// ArrayOptions carry what creating, loading, dropping an array or writing
// its metadata needs besides its location.
type ArrayOptions struct {
	// EncryptionKey is the array's AES-256-GCM key (32 bytes); empty for
	// an unencrypted array. Creating with a key makes an encrypted array.
	EncryptionKey []byte
}

// encryptionAES is the generic tile header's encryption type for
// AES-256-GCM (0 is none).
const encryptionAES = gentile.EncryptionAES256GCM

// KeySize is the length of an AES-256-GCM key.
const KeySize = 32

func checkKeySize(key []byte) error {
	if len(key) != 0 && len(key) != KeySize {
		return invalidf("encryption key: AES-256-GCM needs %d bytes, got %d", KeySize, len(key))
	}
	return nil
}

// genericFilterer is the Filterer for the generic tiles of an array with
// the given key (nil: gentile's default, unencrypted); gentile's codec
// marks and encrypts the tiles as TileDB does.
func genericFilterer(key []byte) gentile.Filterer {
	if len(key) == 0 {
		return nil
	}
	return filters.GenericTileCodec{EncryptionKey: key}
}

// encodeGeneric wraps payload in a generic tile, encrypted when key is set.
func encodeGeneric(payload []byte, version uint32, key []byte) ([]byte, error) {
	return gentile.Encode(payload, version, genericFilterer(key))
}

// openGeneric decodes the generic tile b (the file key) with key, and
// says clearly what is wrong when the key does not fit the file: missing
// (InvalidArgument), given for a plain file (InvalidArgument) or wrong
// (FailedPrecondition, as a failed decryption is everywhere else).
func openGeneric(b []byte, file string, key []byte) ([]byte, error) {
	h, err := gentile.DecodeHeader(b)
	if err != nil {
		return nil, errkind.Wrap(errkind.DataLoss, fmt.Errorf("%s: %w", file, err))
	}
	switch {
	case h.EncryptionType != 0 && len(key) == 0:
		return nil, errkind.Errorf(errkind.InvalidArgument, "%s: the array is encrypted (AES-256-GCM): give its key", file)
	case h.EncryptionType == 0 && len(key) != 0:
		return nil, errkind.Errorf(errkind.InvalidArgument, "%s: the array is not encrypted, but an encryption key was given", file)
	case h.EncryptionType != 0 && h.EncryptionType != encryptionAES:
		return nil, fmt.Errorf("%s: encryption type %d: %w", file, h.EncryptionType, errkind.Unimplemented)
	}
	_, payload, _, err := gentile.Decode(b, filters.GenericTileCodec{EncryptionKey: key})
	if errors.Is(err, codecs.ErrDecrypt) {
		return nil, errkind.Wrap(errkind.FailedPrecondition, fmt.Errorf("%s: wrong encryption key: %w", file, err))
	}
	if err != nil {
		if errkind.Of(err) != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		return nil, errkind.Wrap(errkind.DataLoss, fmt.Errorf("%s: %w", file, err))
	}
	return payload, nil
}

// schemaKey is the store key of the schema file named name.
func schemaKey(dir, name string) string {
	if name == names.LegacySchemaFile {
		return storage.Join(dir, names.LegacySchemaFile)
	}
	return storage.Join(dir, names.SchemaDir, name)
}

// checkArrayKey proves, before a write stores anything, that key is the
// encryption key of the array at dir (none for a plain array) by
// decrypting the schema file the write is made against.
func checkArrayKey(ctx context.Context, st storage.Store, dir, schemaName string, key []byte) error {
	if err := checkKeySize(key); err != nil {
		return fmt.Errorf("array %q: %w", dir, err)
	}
	k := schemaKey(dir, schemaName)
	b, err := st.Get(ctx, k)
	if errors.Is(err, storage.ErrNotFound) {
		return errkind.Errorf(errkind.NotFound, "array %q: schema file %s not found (load the schema with LoadSchema)", dir, k)
	}
	if err != nil {
		return fmt.Errorf("array %q: %w", dir, err)
	}
	if _, err := openGeneric(b, k, key); err != nil {
		return fmt.Errorf("array %q: %w", dir, err)
	}
	return nil
}
