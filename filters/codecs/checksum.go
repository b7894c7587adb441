package codecs

import (
	"bytes"
	"crypto/md5"
	"crypto/sha256"
	"fmt"
	"hash"

	"github.com/tileflight/tileflight/filters/stage"
	"github.com/tileflight/tileflight/format/wire"
)

// checksum is TileDB's MD5 or SHA-256 checksum filter: data and metadata
// pass through; its own metadata records the size and digest of every
// input metadata part and every input data part.
type checksum struct {
	sameType
	md5 bool
}

func (c checksum) name() string {
	if c.md5 {
		return "checksum_md5"
	}
	return "checksum_sha256"
}

func (c checksum) newHash() hash.Hash {
	if c.md5 {
		return md5.New()
	}
	return sha256.New()
}

func (c checksum) digestSize() int {
	if c.md5 {
		return md5.Size
	}
	return sha256.Size
}

func (c checksum) Forward(_ *stage.Context, in stage.Buffers) (stage.Buffers, error) {
	h := c.newHash()
	w := wire.NewWriter(make([]byte, 0, 8+(len(in.Meta)+len(in.Data))*(8+c.digestSize())))
	w.Uint32(uint32(len(in.Meta)))
	w.Uint32(uint32(len(in.Data)))
	for _, parts := range [2][][]byte{in.Meta, in.Data} {
		for _, p := range parts {
			h.Reset()
			h.Write(p)
			w.Uint64(uint64(len(p)))
			w.Write(h.Sum(nil))
		}
	}
	return stage.Buffers{Meta: prependMeta(w.Bytes(), in.Meta), Data: in.Data}, nil
}

func (c checksum) Reverse(_ *stage.Context, in stage.Buffers) (stage.Buffers, error) {
	name, ds := c.name(), c.digestSize()
	r := wire.NewReader(stage.Concat(in.Meta))
	nm := r.Count(4, 8+ds, name+": number of metadata checksums")
	nd := r.Count(4, 8+ds, name+": number of data checksums")
	if r.Err() == nil {
		r.CheckCount(uint64(nm)+uint64(nd), 8+ds, name+": checksums")
	}
	if r.Err() != nil {
		return stage.Buffers{}, fmt.Errorf("%s: metadata: %w", name, r.Err())
	}
	type sum struct {
		size   uint64
		digest []byte
	}
	sums := make([]sum, nm+nd)
	for i := range sums {
		sums[i].size = r.Uint64("checksummed size")
		sums[i].digest = r.Bytes(ds, "digest")
	}
	if r.Err() != nil {
		return stage.Buffers{}, fmt.Errorf("%s: metadata: %w", name, r.Err())
	}
	// The metadata checksums cover what follows this filter's metadata,
	// the data checksums the data, each part after the previous one.
	h := c.newHash()
	verify := func(kind string, src []byte, list []sum) error {
		for i, s := range list {
			if s.size > uint64(len(src)) {
				return fmt.Errorf("%s: %w: %s part %d: checksum covers %d bytes, %d left",
					name, wire.ErrTruncated, kind, i, s.size, len(src))
			}
			h.Reset()
			h.Write(src[:s.size])
			if got := h.Sum(nil); !bytes.Equal(got, s.digest) {
				return fmt.Errorf("%s: %w: %s part %d (%d bytes): stored %x, computed %x",
					name, ErrChecksum, kind, i, s.size, s.digest, got)
			}
			src = src[s.size:]
		}
		return nil
	}
	if err := verify("metadata", r.Rest(), sums[:nm]); err != nil {
		return stage.Buffers{}, err
	}
	if err := verify("data", stage.Concat(in.Data), sums[nm:]); err != nil {
		return stage.Buffers{}, err
	}
	return stage.Buffers{Meta: rest(r), Data: in.Data}, nil
}
