// Package dialect owns the SQL spellings of PostgreSQL and DuckDB that
// Flight SQL accepts on top of the engine's own (go-mysql-server's MySQL
// dialect): it rewrites a statement's text, token by token, into the
// engine's SQL before the engine parses it. Quoted strings, quoted
// identifiers and comments are never looked into; parentheses are
// matched, so that every rewrite sees whole expressions.
//
// What it rewrites: expr::TYPE and the type names of CAST, ILIKE,
// agg(...) FILTER (WHERE ...), percentile_cont/percentile_disc(p) WITHIN
// GROUP (ORDER BY x), string_agg, median, quantile_cont and
// quantile_disc. The functions the rewrites call that the engine lacks
// (QuantileFunc, BoolFunc) and date_trunc are registered by sqlsvc.
package dialect

import "strings"

// kind is the class of a token.
type kind uint8

const (
	kSpace  kind = iota // white space and comments
	kWord               // an unquoted word: keyword or identifier
	kIdent              // a quoted identifier: "x" or `x`
	kString             // a string literal: 'x'
	kNumber             // a number literal
	kOp                 // an operator or punctuation (not parentheses)
	kComma              // ,
	kGroup              // a parenthesized group (a node, not a token)
)

// node is a token or a parenthesized group of nodes.
type node struct {
	kind kind
	text string // the token's text (for a group: "")
	kids []*node
	// open says whether a group's closing parenthesis was there.
	closed bool
}

func (n *node) is(word string) bool {
	return n != nil && n.kind == kWord && strings.EqualFold(n.text, word)
}

func (n *node) isOp(op string) bool { return n != nil && n.kind == kOp && n.text == op }

// write appends the SQL of n.
func (n *node) write(b *strings.Builder) {
	if n.kind != kGroup {
		b.WriteString(n.text)
		return
	}
	b.WriteByte('(')
	for _, k := range n.kids {
		k.write(b)
	}
	if n.closed {
		b.WriteByte(')')
	}
}

func render(ns []*node) string {
	var b strings.Builder
	for _, n := range ns {
		n.write(&b)
	}
	return b.String()
}

// lex splits SQL into tokens as the engine's lexer does: strings take
// single quotes (doubled or backslash-escaped inside), identifiers double
// quotes or backquotes (doubled inside), comments are -- to the end of
// the line, # to the end of the line and /* ... */. An unterminated
// quote or comment runs to the end of the text (the engine then reports
// the syntax error).
func lex(s string) []*node {
	var out []*node
	i := 0
	add := func(k kind, j int) {
		out = append(out, &node{kind: k, text: s[i:j]})
		i = j
	}
	for i < len(s) {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			j := i + 1
			for j < len(s) && (s[j] == ' ' || s[j] == '\t' || s[j] == '\n' || s[j] == '\r' || s[j] == '\f' || s[j] == '\v') {
				j++
			}
			add(kSpace, j)
		case c == '-' && strings.HasPrefix(s[i:], "--"), c == '#':
			j := strings.IndexByte(s[i:], '\n')
			if j < 0 {
				j = len(s) - i
			}
			// A line comment becomes a block comment: the engine wants a
			// space after "--", which PostgreSQL and DuckDB do not.
			body := strings.ReplaceAll(s[i:i+j], "*/", "* /")
			out = append(out, &node{kind: kSpace, text: "/*" + body + "*/"})
			i += j
		case c == '/' && strings.HasPrefix(s[i:], "/*"):
			j := strings.Index(s[i+2:], "*/")
			if j < 0 {
				add(kSpace, len(s))
			} else {
				add(kSpace, i+2+j+2)
			}
		case c == '\'':
			add(kString, quoted(s, i, '\'', true))
		case c == '"':
			add(kIdent, quoted(s, i, '"', false))
		case c == '`':
			add(kIdent, quoted(s, i, '`', false))
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9':
			add(kNumber, scanNumber(s, i))
		case isWordStart(c):
			j := i + 1
			for j < len(s) && isWordByte(s[j]) {
				j++
			}
			add(kWord, j)
		case c == ',':
			add(kComma, i+1)
		default:
			add(kOp, i+operator(s[i:]))
		}
	}
	return out
}

// quoted is the end of the quoted token starting at i: the quote doubled
// stands for itself; backslash escapes the next byte where esc.
func quoted(s string, i int, q byte, esc bool) int {
	j := i + 1
	for j < len(s) {
		switch {
		case esc && s[j] == '\\':
			j += 2
		case s[j] == q && j+1 < len(s) && s[j+1] == q:
			j += 2
		case s[j] == q:
			return j + 1
		default:
			j++
		}
	}
	return len(s)
}

func scanNumber(s string, i int) int {
	j := i
	if strings.HasPrefix(s[i:], "0x") || strings.HasPrefix(s[i:], "0X") || strings.HasPrefix(s[i:], "0b") || strings.HasPrefix(s[i:], "0B") {
		j += 2
		for j < len(s) && isWordByte(s[j]) {
			j++
		}
		return j
	}
	for j < len(s) && (s[j] >= '0' && s[j] <= '9' || s[j] == '.') {
		j++
	}
	if j < len(s) && (s[j] == 'e' || s[j] == 'E') {
		k := j + 1
		if k < len(s) && (s[k] == '+' || s[k] == '-') {
			k++
		}
		if k < len(s) && s[k] >= '0' && s[k] <= '9' {
			j = k
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
		}
	}
	// 1abc is a word to the engine's lexer (an identifier may start with
	// digits).
	for j < len(s) && isWordByte(s[j]) {
		j++
	}
	return j
}

func isWordStart(c byte) bool {
	return c == '_' || c == '$' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

func isWordByte(c byte) bool { return isWordStart(c) || c >= '0' && c <= '9' }

// operators of more than one byte, longest first.
var operators = []string{"<=>", "->>", "::", "<=", ">=", "<>", "!=", "||", "&&", "<<", ">>", "->", ":="}

func operator(s string) int {
	for _, op := range operators {
		if strings.HasPrefix(s, op) {
			return len(op)
		}
	}
	return 1
}

// tree groups tokens by parentheses. A closing parenthesis without its
// opening one stays a token (the engine reports it).
func tree(toks []*node) []*node {
	root := &node{kind: kGroup}
	stack := []*node{root}
	for _, t := range toks {
		top := stack[len(stack)-1]
		switch {
		case t.isOp("("):
			g := &node{kind: kGroup}
			top.kids = append(top.kids, g)
			stack = append(stack, g)
		case t.isOp(")") && len(stack) > 1:
			top.closed = true
			stack = stack[:len(stack)-1]
		default:
			top.kids = append(top.kids, t)
		}
	}
	return root.kids
}
