package storage

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// CleanKey validates an object key and returns it unchanged when it is
// acceptable. Keys are checked rather than normalised: silently rewriting
// "a//b" or "a/./b" would let two spellings name one object, and a caller
// that builds such a key has a bug worth reporting.
func CleanKey(key string) (string, error) {
	if key == "" {
		return "", fmt.Errorf("%w: empty key", ErrInvalidPath)
	}
	if err := checkPath(key); err != nil {
		return "", err
	}
	return key, nil
}

// cleanDir validates a directory prefix; unlike a key it may be "" (the
// root). A trailing slash is tolerated because callers often build
// prefixes that way.
func cleanDir(dir string) (string, error) {
	dir = strings.TrimSuffix(dir, "/")
	if dir == "" {
		return "", nil
	}
	if err := checkPath(dir); err != nil {
		return "", err
	}
	return dir, nil
}

func checkPath(p string) error {
	if strings.HasPrefix(p, "/") {
		return fmt.Errorf("%w: %q is absolute", ErrInvalidPath, p)
	}
	if strings.ContainsRune(p, 0) {
		return fmt.Errorf("%w: %q contains a NUL byte", ErrInvalidPath, p)
	}
	if strings.ContainsRune(p, '\\') {
		return fmt.Errorf("%w: %q contains a backslash", ErrInvalidPath, p)
	}
	for _, seg := range strings.Split(p, "/") {
		switch seg {
		case "":
			return fmt.Errorf("%w: %q has an empty segment", ErrInvalidPath, p)
		case ".", "..":
			return fmt.Errorf("%w: %q has a %q segment", ErrInvalidPath, p, seg)
		}
	}
	return nil
}

// Join joins path segments with "/", skipping empty ones. It does not
// validate: the store does that when the key is used.
func Join(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		p = strings.Trim(p, "/")
		if p == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('/')
		}
		b.WriteString(p)
	}
	return b.String()
}

// checkRange validates a ranged read against an object of the given size.
func checkRange(key string, off, n, size int64) error {
	if off < 0 || n < 0 {
		return fmt.Errorf("storage: %q: invalid range offset %d length %d", key, off, n)
	}
	if off > size || n > size-off {
		return fmt.Errorf("storage: %q: range [%d, %d) past the end of the %d-byte object: %w", key, off, off+n, size, io.ErrUnexpectedEOF)
	}
	return nil
}

func ctxErr(ctx context.Context, op, key string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("storage: %s %q: %w", op, key, err)
	}
	return nil
}

func notFound(op, key string) error {
	return fmt.Errorf("storage: %s %q: %w", op, key, ErrNotFound)
}
