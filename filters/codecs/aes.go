package codecs

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"fmt"
	"io"

	"github.com/tileflight/tileflight/filters/stage"
	"github.com/tileflight/tileflight/format/wire"
)

const (
	aesIVSize  = 12
	aesTagSize = 16
	aesPartMD  = 4 + 4 + aesIVSize + aesTagSize
)

// aesGCM is TileDB's internal AES-256-GCM filter, appended to every
// pipeline of an encrypted array. Unlike the other filters it encrypts the
// incoming metadata too: every metadata part and then every data part is
// sealed with its own random 12-byte IV into one data output, and its own
// metadata (sizes, IV, tag per part) is the only metadata it emits.
type aesGCM struct {
	sameType
	aead cipher.AEAD
	rand io.Reader
}

func newAES(opts Options) (stage.Stage, error) {
	if len(opts.EncryptionKey) != 32 {
		return nil, fmt.Errorf("aes_256_gcm: the key must be 32 bytes, got %d", len(opts.EncryptionKey))
	}
	block, err := aes.NewCipher(opts.EncryptionKey)
	if err != nil {
		return nil, fmt.Errorf("aes_256_gcm: %w", err)
	}
	aead, err := cipher.NewGCM(block) // 12-byte nonce, 16-byte tag
	if err != nil {
		return nil, fmt.Errorf("aes_256_gcm: %w", err)
	}
	r := opts.Rand
	if r == nil {
		r = rand.Reader
	}
	return aesGCM{aead: aead, rand: r}, nil
}

func (a aesGCM) Forward(_ *stage.Context, in stage.Buffers) (stage.Buffers, error) {
	nparts := len(in.Meta) + len(in.Data)
	meta := wire.NewWriter(make([]byte, 0, 8+nparts*aesPartMD))
	meta.Uint32(uint32(len(in.Meta)))
	meta.Uint32(uint32(len(in.Data)))
	out := make([]byte, 0, stage.Size(in.Meta)+stage.Size(in.Data)+aesTagSize)
	var iv [aesIVSize]byte
	for _, parts := range [2][][]byte{in.Meta, in.Data} {
		for _, p := range parts {
			if _, err := io.ReadFull(a.rand, iv[:]); err != nil {
				return stage.Buffers{}, fmt.Errorf("aes_256_gcm: generating an IV: %w", err)
			}
			start := len(out)
			out = a.aead.Seal(out, iv[:], p, nil)
			tag := out[len(out)-aesTagSize:]
			meta.Uint32(uint32(len(p)))
			meta.Uint32(uint32(len(p)))
			meta.Write(iv[:])
			meta.Write(tag)
			out = out[:start+len(p)] // the tag lives in the metadata
		}
	}
	return stage.Buffers{Meta: [][]byte{meta.Bytes()}, Data: [][]byte{out}}, nil
}

func (a aesGCM) Reverse(_ *stage.Context, in stage.Buffers) (stage.Buffers, error) {
	data := stage.Concat(in.Data)
	r := wire.NewReader(stage.Concat(in.Meta))
	nm := r.Count(4, aesPartMD, "aes_256_gcm: number of metadata parts")
	nd := r.Count(4, aesPartMD, "aes_256_gcm: number of data parts")
	if r.Err() == nil {
		r.CheckCount(uint64(nm)+uint64(nd), aesPartMD, "aes_256_gcm: parts")
	}
	if r.Err() != nil {
		return stage.Buffers{}, fmt.Errorf("aes_256_gcm: metadata: %w", r.Err())
	}
	decrypt := func(kind string, count int) ([]byte, error) {
		var out []byte
		for i := range count {
			plain := r.Uint32("plaintext length")
			enc := r.Uint32("encrypted length")
			iv := r.Bytes(aesIVSize, "IV")
			tag := r.Bytes(aesTagSize, "tag")
			if r.Err() != nil {
				return nil, fmt.Errorf("aes_256_gcm: metadata: %s part %d: %w", kind, i, r.Err())
			}
			if plain != enc {
				return nil, fmt.Errorf("aes_256_gcm: %w: %s part %d: plaintext length %d differs from encrypted length %d",
					wire.ErrCorrupt, kind, i, plain, enc)
			}
			if uint64(enc) > uint64(len(data)) {
				return nil, fmt.Errorf("aes_256_gcm: %w: %s part %d: %d encrypted bytes, %d left", wire.ErrTruncated, kind, i, enc, len(data))
			}
			// GCM wants the tag right after the ciphertext; decrypt in
			// place in the output, which then keeps only the plaintext.
			start := len(out)
			out = append(append(out, data[:enc]...), tag...)
			if _, err := a.aead.Open(out[start:start], iv, out[start:], nil); err != nil {
				return nil, fmt.Errorf("aes_256_gcm: %w: %s part %d", ErrDecrypt, kind, i)
			}
			out = out[:start+int(enc)]
			data = data[enc:]
		}
		return out, nil
	}
	meta, err := decrypt("metadata", nm)
	if err != nil {
		return stage.Buffers{}, err
	}
	plain, err := decrypt("data", nd)
	if err != nil {
		return stage.Buffers{}, err
	}
	out := stage.Buffers{Data: [][]byte{plain}}
	if len(meta) > 0 {
		out.Meta = [][]byte{meta}
	}
	return out, nil
}
