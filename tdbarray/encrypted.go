package tdbarray

import (
	"context"

	"github.com/tileflight/tileflight/filters/codecs"
	"github.com/tileflight/tileflight/format/gentile"
	"github.com/tileflight/tileflight/format/names"
	"github.com/tileflight/tileflight/storage"
)

// The two ways opening an encrypted array fails for want of the right
// key (errors.Is matches them through any wrapping):
var (
	// ErrKeyRequired: the array is encrypted and no key was given.
	ErrKeyRequired = gentile.ErrKeyRequired
	// ErrDecrypt: a file did not decrypt with the key given (a wrong
	// key, or the file was altered).
	ErrDecrypt = codecs.ErrDecrypt
)

// SchemaEncrypted tells, from the generic tile header of the array's
// newest-listed schema file, whether the array at dir is encrypted
// (TileDB encrypts all of an array's files or none), without opening the
// array: for writes that must work on damaged arrays (put_metadata, drop).
// It returns the schema file's key; encrypted is false when no schema
// file can be read (the caller's write reports that, or ignores it).
func SchemaEncrypted(ctx context.Context, st storage.Store, dir string) (file string, encrypted bool) {
	files, err := st.List(ctx, dir+"/"+names.SchemaDir)
	if err != nil {
		return "", false
	}
	file = dir + "/" + names.LegacySchemaFile
	for _, e := range files {
		if !e.IsDir {
			file = dir + "/" + names.SchemaDir + "/" + e.Name
			break
		}
	}
	b, err := st.Get(ctx, file) // schema files are small
	if err != nil {
		return file, false
	}
	if h, err := gentile.DecodeHeader(b); err != nil || h.EncryptionType == 0 {
		return file, false
	}
	return file, true
}
