package cond

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/tileflight/tileflight/errkind"
)

// Limits that keep a hostile condition from asking for unbounded work.
const (
	// MaxDepth bounds the nesting of parentheses, `not` and signs.
	MaxDepth = 64
	// MaxTerms bounds the comparisons and list members of one condition.
	MaxTerms = 1 << 16
	// MaxLen bounds the condition text.
	MaxLen = 1 << 20
)

// SyntaxError is a condition that does not parse or does not bind; Pos is
// the byte offset in the condition text where the problem is.
type SyntaxError struct {
	Text string
	Pos  int
	Msg  string
}

func (e *SyntaxError) Error() string {
	near := ""
	if e.Pos < len(e.Text) {
		rest := e.Text[e.Pos:]
		if len(rest) > 20 {
			rest = rest[:20] + "..."
		}
		near = fmt.Sprintf(" (at %q)", rest)
	} else {
		near = " (at the end)"
	}
	return fmt.Sprintf("filter: position %d%s: %s", e.Pos, near, e.Msg)
}

// Unwrap makes every syntax or binding error an InvalidArgument.
func (e *SyntaxError) Unwrap() error { return errkind.InvalidArgument }

type tokKind uint8

const (
	tEOF tokKind = iota
	tName
	tInt
	tFloat
	tStr
	tBytes
	tOp
)

type token struct {
	kind tokKind
	pos  int
	text string // the source text (names, operators, numbers)
	str  string // decoded string or bytes literal
}

type parser struct {
	src   string
	toks  []token
	i     int
	depth int
	terms int
}

// Parse parses a condition in TileDB-Py's QueryCondition syntax.
func Parse(text string) (Expr, error) {
	if len(text) > MaxLen {
		return nil, &SyntaxError{Text: "", Pos: 0, Msg: fmt.Sprintf("%d bytes is longer than the %d a condition may have", len(text), MaxLen)}
	}
	if !utf8.ValidString(text) {
		return nil, &SyntaxError{Text: text, Pos: firstInvalid(text), Msg: "not valid UTF-8"}
	}
	p := &parser{src: text}
	if err := p.lex(); err != nil {
		return nil, err
	}
	if p.peek().kind == tEOF {
		return nil, p.errAt(0, "empty condition")
	}
	e, err := p.orTest()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tEOF {
		return nil, p.errAt(t.pos, fmt.Sprintf("unexpected %s after a complete condition", describe(t)))
	}
	return e, nil
}

func firstInvalid(s string) int {
	for i, r := range s {
		if r == utf8.RuneError {
			return i
		}
	}
	return 0
}

func (p *parser) errAt(pos int, msg string) error {
	return &SyntaxError{Text: p.src, Pos: pos, Msg: msg}
}

func describe(t token) string {
	switch t.kind {
	case tEOF:
		return "end of condition"
	case tStr, tBytes:
		return "string " + t.text
	case tOp:
		return fmt.Sprintf("%q", t.text)
	}
	return t.text
}

func (p *parser) peek() token { return p.toks[p.i] }
func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}

func (p *parser) isOp(s string) bool {
	t := p.peek()
	return t.kind == tOp && t.text == s
}

func (p *parser) isKw(s string) bool {
	t := p.peek()
	return t.kind == tName && t.text == s
}

func (p *parser) enter(pos int) error {
	p.depth++
	if p.depth > MaxDepth {
		return p.errAt(pos, fmt.Sprintf("nested deeper than %d", MaxDepth))
	}
	return nil
}

func (p *parser) leave() { p.depth-- }

func (p *parser) term(pos int) error {
	p.terms++
	if p.terms > MaxTerms {
		return p.errAt(pos, fmt.Sprintf("more than %d terms", MaxTerms))
	}
	return nil
}

// or_test := and_test ('or' and_test)*
func (p *parser) orTest() (Expr, error) {
	l, err := p.andTest()
	if err != nil {
		return nil, err
	}
	for p.isKw("or") {
		t := p.next()
		r, err := p.andTest()
		if err != nil {
			return nil, err
		}
		l = &Logical{P: t.pos, Op: OpOr, L: l, R: r}
	}
	return l, nil
}

// and_test := not_test ('and' not_test)*
func (p *parser) andTest() (Expr, error) {
	l, err := p.notTest()
	if err != nil {
		return nil, err
	}
	for p.isKw("and") {
		t := p.next()
		r, err := p.notTest()
		if err != nil {
			return nil, err
		}
		l = &Logical{P: t.pos, Op: OpAnd, L: l, R: r}
	}
	return l, nil
}

// not_test := 'not' not_test | comparison
func (p *parser) notTest() (Expr, error) {
	if p.isKw("not") {
		t := p.next()
		if err := p.enter(t.pos); err != nil {
			return nil, err
		}
		defer p.leave()
		x, err := p.notTest()
		if err != nil {
			return nil, err
		}
		return &NotExpr{P: t.pos, X: x}, nil
	}
	return p.comparison()
}

// comparison := bitor (comp_op bitor)*
func (p *parser) comparison() (Expr, error) {
	first, err := p.bitOr()
	if err != nil {
		return nil, err
	}
	c := &Compare{P: first.Pos(), Operands: []Expr{first}}
	for {
		t := p.peek()
		var op CmpOp
		switch {
		case t.kind == tOp && (t.text == "==" || t.text == "!=" || t.text == "<" || t.text == "<=" || t.text == ">" || t.text == ">="):
			op = map[string]CmpOp{"<": CmpLT, "<=": CmpLE, ">": CmpGT, ">=": CmpGE, "==": CmpEQ, "!=": CmpNE}[t.text]
			p.next()
		case t.kind == tName && t.text == "in":
			op = CmpIn
			p.next()
		case t.kind == tName && t.text == "not" && p.toks[p.i+1].kind == tName && p.toks[p.i+1].text == "in":
			op = CmpNotIn
			p.next()
			p.next()
		case t.kind == tName && t.text == "is":
			return nil, p.errAt(t.pos, "the `is` operator is not supported (write `== None` or `!= None`)")
		case t.kind == tOp && t.text == "<>":
			return nil, p.errAt(t.pos, "`<>` is not an operator (write `!=`)")
		default:
			if len(c.Ops) == 0 {
				return first, nil
			}
			return c, nil
		}
		if err := p.term(t.pos); err != nil {
			return nil, err
		}
		r, err := p.bitOr()
		if err != nil {
			return nil, err
		}
		c.Ops = append(c.Ops, op)
		c.OpPos = append(c.OpPos, t.pos)
		c.Operands = append(c.Operands, r)
	}
}

// bitor := bitxor ('|' bitxor)*   (TileDB-Py: | is or, at Python's precedence)
func (p *parser) bitOr() (Expr, error) {
	l, err := p.bitAnd()
	if err != nil {
		return nil, err
	}
	for p.isOp("|") {
		t := p.next()
		r, err := p.bitAnd()
		if err != nil {
			return nil, err
		}
		l = &Logical{P: t.pos, Op: OpOr, Bit: true, L: l, R: r}
	}
	if p.isOp("^") {
		return nil, p.errAt(p.peek().pos, "the `^` operator is not supported (use `and`, `or`, `&`, `|`)")
	}
	return l, nil
}

// bitand := factor ('&' factor)*
func (p *parser) bitAnd() (Expr, error) {
	l, err := p.factor()
	if err != nil {
		return nil, err
	}
	for p.isOp("&") {
		t := p.next()
		r, err := p.factor()
		if err != nil {
			return nil, err
		}
		l = &Logical{P: t.pos, Op: OpAnd, Bit: true, L: l, R: r}
	}
	if t := p.peek(); t.kind == tOp {
		switch t.text {
		case "+", "-", "*", "/", "//", "%", "**", "<<", ">>", "@":
			return nil, p.errAt(t.pos, fmt.Sprintf("arithmetic (%q) is not supported in a condition", t.text))
		}
	}
	return l, nil
}

// factor := ('-' | '+') factor | atom
func (p *parser) factor() (Expr, error) {
	t := p.peek()
	if t.kind == tOp && (t.text == "-" || t.text == "+") {
		p.next()
		if err := p.enter(t.pos); err != nil {
			return nil, err
		}
		defer p.leave()
		x, err := p.factor()
		if err != nil {
			return nil, err
		}
		if l, ok := x.(*Literal); ok && !l.Val && (l.Kind == LitInt || l.Kind == LitFloat || l.Kind == LitBool) {
			// Fold the sign as TileDB-Py does (the value is multiplied
			// by -1; True becomes -1).
			n := *l
			n.P = t.pos
			n.Text = t.text + l.Text
			if t.text == "-" {
				if n.Kind == LitFloat {
					n.Float = -n.Float
				} else {
					n.Int = new(big.Int).Neg(l.Int)
					n.Kind = LitInt
				}
			} else if n.Kind == LitBool {
				n.Kind = LitInt
			}
			return &n, nil
		}
		return &Neg{P: t.pos, X: x}, nil
	}
	if t.kind == tOp && t.text == "~" {
		return nil, p.errAt(t.pos, "the `~` operator is not supported (use `not`)")
	}
	return p.atom()
}

// atom := '(' or_test ')' | '[' [items] ']' | NAME ['(' arg ')'] | literal
func (p *parser) atom() (Expr, error) {
	t := p.next()
	switch t.kind {
	case tEOF:
		return nil, p.errAt(t.pos, "unexpected end of condition")
	case tInt:
		return p.intLit(t)
	case tFloat:
		return floatLit(p, t)
	case tStr, tBytes:
		if err := p.term(t.pos); err != nil {
			return nil, err
		}
		l := &Literal{P: t.pos, Kind: LitStr, Str: t.str, Text: t.text}
		if t.kind == tBytes {
			l.Kind = LitBytes
		}
		// Python joins adjacent string literals ('a' 'b' == 'ab').
		for q := p.peek(); q.kind == tStr || q.kind == tBytes; q = p.peek() {
			if (q.kind == tBytes) != (l.Kind == LitBytes) {
				return nil, p.errAt(q.pos, "cannot join bytes and str literals")
			}
			p.next()
			l.Str += q.str
			l.Text += " " + q.text
		}
		return l, nil
	case tName:
		switch t.text {
		case "None":
			return &Literal{P: t.pos, Kind: LitNone, Text: "None"}, nil
		case "True", "False":
			v := int64(0)
			if t.text == "True" {
				v = 1
			}
			return &Literal{P: t.pos, Kind: LitBool, Int: big.NewInt(v), Text: t.text}, nil
		case "and", "or", "not", "in", "is", "if", "else", "lambda", "for":
			return nil, p.errAt(t.pos, fmt.Sprintf("unexpected keyword %q (a field name that is a Python keyword must be written attr(%q))", t.text, t.text))
		}
		if p.isOp("(") {
			return p.call(t)
		}
		if p.isOp(".") {
			return nil, p.errAt(p.peek().pos, fmt.Sprintf("unexpected \".\" after %q (a name with a dot must be written attr(\"%s...\"))", t.text, t.text))
		}
		return &Name{P: t.pos, Name: t.text}, nil
	case tOp:
		switch t.text {
		case "(":
			if err := p.enter(t.pos); err != nil {
				return nil, err
			}
			defer p.leave()
			if p.isOp(")") {
				return nil, p.errAt(p.peek().pos, "empty parentheses")
			}
			e, err := p.orTest()
			if err != nil {
				return nil, err
			}
			if p.isOp(",") {
				return nil, p.errAt(p.peek().pos, "tuples are not supported (a set of values is a list: `x in [1, 2]`)")
			}
			if !p.isOp(")") {
				return nil, p.errAt(p.peek().pos, fmt.Sprintf("expected \")\" to close the \"(\" at position %d, found %s", t.pos, describe(p.peek())))
			}
			p.next()
			return e, nil
		case "[":
			if err := p.enter(t.pos); err != nil {
				return nil, err
			}
			defer p.leave()
			l := &List{P: t.pos}
			for !p.isOp("]") {
				e, err := p.bitOr()
				if err != nil {
					return nil, err
				}
				if err := p.term(e.Pos()); err != nil {
					return nil, err
				}
				l.Elems = append(l.Elems, e)
				if p.isOp(",") {
					p.next()
					continue
				}
				if !p.isOp("]") {
					return nil, p.errAt(p.peek().pos, fmt.Sprintf("expected \",\" or \"]\" in the list opened at position %d, found %s", t.pos, describe(p.peek())))
				}
			}
			p.next()
			return l, nil
		}
	}
	return nil, p.errAt(t.pos, fmt.Sprintf("unexpected %s", describe(t)))
}

func (p *parser) intLit(t token) (Expr, error) {
	if err := p.term(t.pos); err != nil {
		return nil, err
	}
	s := t.text
	if len(s) > 1 && s[0] == '0' && strings.IndexFunc(s, func(r rune) bool { return r != '0' && r != '_' }) >= 0 && s[1] != 'x' && s[1] != 'X' && s[1] != 'o' && s[1] != 'O' && s[1] != 'b' && s[1] != 'B' {
		return nil, p.errAt(t.pos, fmt.Sprintf("leading zeros in decimal integer %q are not permitted (Python syntax)", s))
	}
	if strings.HasSuffix(s, "_") || strings.Contains(s, "__") {
		return nil, p.errAt(t.pos, fmt.Sprintf("invalid number %q", s))
	}
	v, ok := new(big.Int).SetString(s, 0)
	if !ok {
		return nil, p.errAt(t.pos, fmt.Sprintf("invalid number %q", s))
	}
	if v.BitLen() > 256 {
		return nil, p.errAt(t.pos, fmt.Sprintf("integer %q is far too large for any field type", s))
	}
	return &Literal{P: t.pos, Kind: LitInt, Int: v, Text: s}, nil
}

func floatLit(p *parser, t token) (Expr, error) {
	if err := p.term(t.pos); err != nil {
		return nil, err
	}
	s := t.text
	if strings.HasSuffix(s, "_") || strings.Contains(s, "__") || strings.Contains(s, "_.") || strings.Contains(s, "._") {
		return nil, p.errAt(t.pos, fmt.Sprintf("invalid number %q", s))
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		// Python turns an overflowing literal into an infinity (1e999)
		// and an underflowing one into zero.
		ne, ok := err.(*strconv.NumError)
		if !ok || ne.Err != strconv.ErrRange {
			return nil, p.errAt(t.pos, fmt.Sprintf("invalid number %q", s))
		}
		if !math.IsInf(f, 0) {
			f = 0
		}
	}
	return &Literal{P: t.pos, Kind: LitFloat, Float: f, Text: s}, nil
}

// call := NAME '(' arg ')' with NAME one of attr, dim, val.
func (p *parser) call(fn token) (Expr, error) {
	open := p.next()
	if err := p.enter(open.pos); err != nil {
		return nil, err
	}
	defer p.leave()
	switch fn.text {
	case "attr", "dim", "val":
	default:
		return nil, p.errAt(fn.pos, fmt.Sprintf("unknown function %q (valid casts are attr(), dim() and val())", fn.text))
	}
	if p.isOp(")") {
		return nil, p.errAt(p.peek().pos, fmt.Sprintf("%s() takes exactly one argument", fn.text))
	}
	arg, err := p.factor()
	if err != nil {
		return nil, err
	}
	if p.isOp(",") {
		return nil, p.errAt(p.peek().pos, fmt.Sprintf("%s() takes exactly one argument", fn.text))
	}
	if p.isOp("=") {
		return nil, p.errAt(p.peek().pos, fmt.Sprintf("%s() takes no keyword arguments", fn.text))
	}
	if !p.isOp(")") {
		return nil, p.errAt(p.peek().pos, fmt.Sprintf("expected \")\" to close %s(, found %s", fn.text, describe(p.peek())))
	}
	p.next()
	lit, ok := arg.(*Literal)
	if !ok {
		return nil, p.errAt(arg.Pos(), fmt.Sprintf("the argument of %s() must be a constant", fn.text))
	}
	if fn.text == "val" {
		if lit.Val {
			return nil, p.errAt(arg.Pos(), "val() of val()")
		}
		v := *lit
		v.P = fn.pos
		v.Val = true
		return &v, nil
	}
	if lit.Kind != LitStr {
		return nil, p.errAt(arg.Pos(), fmt.Sprintf("the argument of %s() must be a string (the field name)", fn.text))
	}
	k := NameAttr
	if fn.text == "dim" {
		k = NameDim
	}
	return &Name{P: fn.pos, Kind: k, Name: lit.Str}, nil
}

// lex splits the whole text into tokens up front (the text is bounded).
func (p *parser) lex() error {
	s := p.src
	i := 0
	for {
		for i < len(s) {
			c := s[i]
			if c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' {
				i++
				continue
			}
			if c == '\\' && i+1 < len(s) && s[i+1] == '\n' {
				i += 2
				continue
			}
			if c == '#' {
				for i < len(s) && s[i] != '\n' {
					i++
				}
				continue
			}
			break
		}
		if i >= len(s) {
			p.toks = append(p.toks, token{kind: tEOF, pos: len(s)})
			return nil
		}
		start := i
		c := s[i]
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case c == '\'' || c == '"':
			t, n, err := p.lexString(i, "")
			if err != nil {
				return err
			}
			p.toks = append(p.toks, t)
			i = n
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9':
			t, n, err := p.lexNumber(i)
			if err != nil {
				return err
			}
			p.toks = append(p.toks, t)
			i = n
		case c == '_' || unicode.IsLetter(r):
			j := i + size
			for j < len(s) {
				r2, sz := utf8.DecodeRuneInString(s[j:])
				if r2 == '_' || unicode.IsLetter(r2) || unicode.IsDigit(r2) || unicode.Is(unicode.Mn, r2) || unicode.Is(unicode.Mc, r2) {
					j += sz
					continue
				}
				break
			}
			word := s[i:j]
			if j < len(s) && (s[j] == '\'' || s[j] == '"') && isStrPrefix(word) {
				t, n, err := p.lexString(j, strings.ToLower(word))
				if err != nil {
					return err
				}
				t.pos = start
				t.text = s[start:n]
				p.toks = append(p.toks, t)
				i = n
				continue
			}
			p.toks = append(p.toks, token{kind: tName, pos: i, text: word})
			i = j
		default:
			op := ""
			for _, cand := range []string{"**", "//", "<<", ">>", "==", "!=", "<=", ">=", "<>", "(", ")", "[", "]", ",", "&", "|", "^", "~", "<", ">", "-", "+", "*", "/", "%", "@", ".", "=", ":", "{", "}"} {
				if strings.HasPrefix(s[i:], cand) {
					op = cand
					break
				}
			}
			if op == "" {
				return p.errAt(i, fmt.Sprintf("unexpected character %q", r))
			}
			switch op {
			case "{", "}", ":", "*", "/", "//", "%", "**", "@", "<<", ">>":
				if op == "{" || op == "}" {
					return p.errAt(i, "sets and dicts are not supported (a set of values is a list: `x in [1, 2]`)")
				}
			case "=":
				// "=" alone is assignment (or a keyword argument).
				if !strings.HasPrefix(s[i:], "==") {
					p.toks = append(p.toks, token{kind: tOp, pos: i, text: op})
					i++
					continue
				}
			}
			p.toks = append(p.toks, token{kind: tOp, pos: i, text: op})
			i += len(op)
		}
		if len(p.toks) > 4*MaxTerms {
			return p.errAt(start, fmt.Sprintf("more than %d tokens", 4*MaxTerms))
		}
	}
}

func isStrPrefix(w string) bool {
	switch strings.ToLower(w) {
	case "r", "u", "b", "br", "rb":
		return true
	case "f", "fr", "rf":
		return true // refused with a message in lexString
	}
	return false
}

// lexString reads a Python string literal starting at the quote at i.
func (p *parser) lexString(i int, prefix string) (token, int, error) {
	s := p.src
	if strings.Contains(prefix, "f") {
		return token{}, 0, p.errAt(i-len(prefix), "f-strings are not supported")
	}
	raw := strings.Contains(prefix, "r")
	isBytes := strings.Contains(prefix, "b")
	q := s[i : i+1]
	if strings.HasPrefix(s[i:], q+q+q) {
		q = q + q + q
	}
	j := i + len(q)
	var b strings.Builder
	for {
		if j >= len(s) {
			return token{}, 0, p.errAt(i, "unterminated string literal")
		}
		if strings.HasPrefix(s[j:], q) {
			j += len(q)
			break
		}
		c := s[j]
		if c == '\n' && len(q) == 1 {
			return token{}, 0, p.errAt(i, "unterminated string literal (end of line)")
		}
		if isBytes && c >= 0x80 {
			return token{}, 0, p.errAt(j, "bytes literals may only hold ASCII characters")
		}
		if c != '\\' {
			b.WriteByte(c)
			j++
			continue
		}
		if j+1 >= len(s) {
			return token{}, 0, p.errAt(i, "unterminated string literal")
		}
		e := s[j+1]
		if raw {
			// Raw strings keep the backslash; it still escapes a quote.
			b.WriteByte('\\')
			b.WriteByte(e)
			j += 2
			continue
		}
		switch e {
		case '\n':
			j += 2
		case '\\', '\'', '"':
			b.WriteByte(e)
			j += 2
		case 'a':
			b.WriteByte(7)
			j += 2
		case 'b':
			b.WriteByte(8)
			j += 2
		case 'f':
			b.WriteByte(12)
			j += 2
		case 'n':
			b.WriteByte('\n')
			j += 2
		case 'r':
			b.WriteByte('\r')
			j += 2
		case 't':
			b.WriteByte('\t')
			j += 2
		case 'v':
			b.WriteByte(11)
			j += 2
		case '0', '1', '2', '3', '4', '5', '6', '7':
			k := j + 1
			v := 0
			for k < len(s) && k < j+4 && s[k] >= '0' && s[k] <= '7' {
				v = v*8 + int(s[k]-'0')
				k++
			}
			if isBytes {
				b.WriteByte(byte(v))
			} else {
				b.WriteRune(rune(v))
			}
			j = k
		case 'x', 'u', 'U':
			n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			if e != 'x' && isBytes {
				b.WriteByte('\\')
				b.WriteByte(e)
				j += 2
				continue
			}
			if j+2+n > len(s) {
				return token{}, 0, p.errAt(j, fmt.Sprintf("truncated \\%c escape", e))
			}
			v, err := strconv.ParseUint(s[j+2:j+2+n], 16, 32)
			if err != nil {
				return token{}, 0, p.errAt(j, fmt.Sprintf("bad \\%c escape", e))
			}
			switch {
			case isBytes:
				b.WriteByte(byte(v))
			case v > unicode.MaxRune || v >= 0xD800 && v < 0xE000:
				return token{}, 0, p.errAt(j, fmt.Sprintf("\\%c escape %s is not a valid character", e, s[j+2:j+2+n]))
			default:
				b.WriteRune(rune(v))
			}
			j += 2 + n
		case 'N':
			return token{}, 0, p.errAt(j, "\\N{...} escapes are not supported")
		default:
			// Python keeps unknown escapes as they are.
			b.WriteByte('\\')
			j++
		}
	}
	k := tStr
	if isBytes {
		k = tBytes
	}
	str := b.String()
	if !isBytes && !utf8.ValidString(str) {
		return token{}, 0, p.errAt(i, "string literal is not valid UTF-8")
	}
	return token{kind: k, pos: i, text: s[i:j], str: str}, j, nil
}

// lexNumber reads a Python integer or float literal starting at i.
func (p *parser) lexNumber(i int) (token, int, error) {
	s := p.src
	j := i
	isFloat := false
	if s[j] == '0' && j+1 < len(s) && strings.ContainsRune("xXoObB", rune(s[j+1])) {
		j += 2
		for j < len(s) && (isHex(s[j]) || s[j] == '_') {
			j++
		}
	} else {
		for j < len(s) && (s[j] >= '0' && s[j] <= '9' || s[j] == '_') {
			j++
		}
		if j < len(s) && s[j] == '.' {
			isFloat = true
			j++
			for j < len(s) && (s[j] >= '0' && s[j] <= '9' || s[j] == '_') {
				j++
			}
		}
		if j < len(s) && (s[j] == 'e' || s[j] == 'E') {
			k := j + 1
			if k < len(s) && (s[k] == '+' || s[k] == '-') {
				k++
			}
			if k < len(s) && s[k] >= '0' && s[k] <= '9' {
				isFloat = true
				j = k
				for j < len(s) && (s[j] >= '0' && s[j] <= '9' || s[j] == '_') {
					j++
				}
			}
		}
	}
	if j < len(s) {
		r, _ := utf8.DecodeRuneInString(s[j:])
		if r == 'j' || r == 'J' {
			return token{}, 0, p.errAt(i, "complex numbers are not supported")
		}
		if r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || r == '.' {
			return token{}, 0, p.errAt(i, fmt.Sprintf("invalid number %q", s[i:j+utf8.RuneLen(r)]))
		}
	}
	k := tInt
	if isFloat {
		k = tFloat
	}
	return token{kind: k, pos: i, text: s[i:j]}, j, nil
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}
