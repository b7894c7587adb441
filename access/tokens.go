package access

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"strings"
)

// tokenEntry is one line of a tokens file.
type tokenEntry struct {
	hash     [sha256.Size]byte
	name     string // for the logs; "" means the fingerprint
	level    Level
	prefixes []string
}

// Tokens is a parsed set of bearer tokens. Lookups go by the SHA-256 of
// the presented token, so neither a map probe nor a comparison takes a
// time that depends on how much of a guess was right.
type Tokens struct {
	byHash map[[sha256.Size]byte]*tokenEntry
}

// Len is the number of tokens.
func (t *Tokens) Len() int {
	if t == nil {
		return 0
	}
	return len(t.byHash)
}

// ParseTokens reads tokens-file text: one token per line,
//
//	TOKEN [rw|ro] [NAME] [prefix=PATH ...]
//
// ("TOKEN:rw" is also accepted; the access defaults to rw). Fields after
// the token are told apart by their form: "rw"/"ro" is the access,
// "prefix=PATH" a prefix, any other word the name. "#" starts a comment.
// Entries may also be separated by "," or ";" so that one environment
// variable can hold several. A malformed entry is an error naming its
// line (or entry) number.
func ParseTokens(text string) (*Tokens, error) {
	t := &Tokens{byHash: map[[sha256.Size]byte]*tokenEntry{}}
	lineNo := 0
	for _, line := range strings.Split(text, "\n") {
		lineNo++
		if j := strings.IndexByte(line, '#'); j >= 0 {
			line = line[:j]
		}
		entries := strings.FieldsFunc(line, func(r rune) bool { return r == ',' || r == ';' })
		for k, entry := range entries {
			where := fmt.Sprintf("line %d", lineNo)
			if len(entries) > 1 {
				where = fmt.Sprintf("line %d, entry %d", lineNo, k+1)
			}
			if err := t.addEntry(entry); err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
		}
	}
	return t, nil
}

func (t *Tokens) addEntry(entry string) error {
	entry = strings.TrimSpace(entry)
	if entry == "" {
		return nil
	}
	fields := strings.Fields(entry)
	if tok, lvl, ok := strings.Cut(fields[0], ":"); ok {
		fields = append([]string{tok, lvl}, fields[1:]...)
	}
	e := &tokenEntry{level: ReadWrite}
	tok := fields[0]
	if tok == "" {
		return fmt.Errorf("empty token")
	}
	levelSet := false
	for _, f := range fields[1:] {
		switch {
		case strings.EqualFold(f, "rw") || strings.EqualFold(f, "ro"):
			if levelSet {
				return fmt.Errorf("access given twice (%q)", f)
			}
			levelSet = true
			e.level = ReadWrite
			if strings.EqualFold(f, "ro") {
				e.level = ReadOnly
			}
		case strings.HasPrefix(f, "prefix="):
			p := strings.TrimPrefix(f, "prefix=")
			if p == "" || strings.HasPrefix(p, "/") || strings.Contains(p, "..") {
				return fmt.Errorf("prefix %q: want a relative array path such as prefix=lab/", p)
			}
			e.prefixes = append(e.prefixes, p)
		case strings.Contains(f, "="):
			return fmt.Errorf("unknown field %q: want \"TOKEN rw|ro [NAME] [prefix=PATH ...]\"", f)
		default:
			if e.name != "" {
				return fmt.Errorf("unexpected field %q after the name %q: want \"TOKEN rw|ro [NAME] [prefix=PATH ...]\"", f, e.name)
			}
			if !levelSet {
				return fmt.Errorf("access %q: want rw or ro", f)
			}
			e.name = f
		}
	}
	e.hash = sha256.Sum256([]byte(tok))
	t.byHash[e.hash] = e
	return nil
}

// merge adds the tokens of o, which win on duplicates.
func (t *Tokens) merge(o *Tokens) {
	for h, e := range o.byHash {
		t.byHash[h] = e
	}
}

// lookup finds the token's entry.
func (t *Tokens) lookup(tok string) (*tokenEntry, bool) {
	if t.Len() == 0 {
		return nil, false
	}
	h := sha256.Sum256([]byte(tok))
	e, ok := t.byHash[h]
	if !ok || subtle.ConstantTimeCompare(e.hash[:], h[:]) != 1 {
		return nil, false
	}
	return e, true
}

// principal is the Principal a token entry grants.
func (e *tokenEntry) principal() *Principal {
	name := e.name
	if name == "" {
		name = fingerprint(e.hash)
	}
	return &Principal{Name: name, Level: e.level, Prefixes: e.prefixes}
}

// TokenName is what the access log calls a token of t: the name its line
// gave, or else "sha256:" and the first 12 hex digits of the token's
// SHA-256 (printf %s TOKEN | sha256sum), never the secret itself.
func (t *Tokens) TokenName(tok string) string {
	if e, ok := t.lookup(tok); ok && e.name != "" {
		return e.name
	}
	return fingerprint(sha256.Sum256([]byte(tok)))
}

func fingerprint(h [sha256.Size]byte) string { return "sha256:" + hex.EncodeToString(h[:6]) }
