package filters

import (
	"github.com/tileflight/tileflight/filters/codecs"
	"github.com/tileflight/tileflight/filters/stage"
	"github.com/tileflight/tileflight/format/pipeline"
)

// The non-compression filters come from package codecs.
func init() {
	otherStage = func(f pipeline.Filter, opts Options) (stage.Stage, error) {
		return codecs.New(f, codecs.Options{EncryptionKey: opts.EncryptionKey})
	}
	checksumErrs = append(checksumErrs, codecs.ErrChecksum)
}
