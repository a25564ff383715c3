package scheme

import (
	"fmt"
	"strconv"
	"strings"
)

// srcPos is a position in a source file: 1-based line and column; columns
// count bytes from the start of the line.
type srcPos struct {
	Line, Column int
}

// SyntaxError is a reader or compile error at a source position: Line and
// Column are 1-based, Column counts bytes. Its Error method prints
// "file:line:column: message", the form editors recognise.
type SyntaxError struct {
	File         string
	Line, Column int
	Msg          string
}

// Error returns "file:line:column: message".
func (e *SyntaxError) Error() string {
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Column, e.Msg)
}

// datumKind is the kind of a datum the reader produced.
type datumKind uint8

const (
	kInt datumKind = iota + 1
	kBool
	kString
	kSymbol
	kList
)

// datum is one read S-expression with the position of its first byte.
type datum struct {
	kind datumKind
	pos  srcPos
	// off and end are the byte offsets [off, end) of the datum's source
	// text (for default values and properties kept as written).
	off, end int
	num      int64   // kInt, kBool (1/0)
	str      string  // kString (decoded bytes), kSymbol (name)
	list     []datum // kList
}

func (d *datum) isSym(name string) bool { return d.kind == kSymbol && d.str == name }

// String renders d in source syntax (for messages).
func (d *datum) String() string {
	switch d.kind {
	case kInt:
		return strconv.FormatInt(d.num, 10)
	case kBool:
		if d.num != 0 {
			return "#t"
		}
		return "#f"
	case kString:
		return strconv.Quote(d.str)
	case kSymbol:
		return d.str
	case kList:
		parts := make([]string, len(d.list))
		for i := range d.list {
			parts[i] = d.list[i].String()
		}
		return "(" + strings.Join(parts, " ") + ")"
	}
	return "?"
}

// maxDepth bounds list nesting so hostile input cannot exhaust the Go stack.
const maxDepth = 1000

type reader struct {
	file      string
	src       []byte
	off       int
	line, col int
}

// read parses every datum of src. The first error stops reading.
func read(file string, src []byte) ([]datum, error) {
	r := &reader{file: file, src: src, line: 1, col: 1}
	var out []datum
	for {
		if err := r.skipSpace(); err != nil {
			return nil, err
		}
		if r.off >= len(r.src) {
			return out, nil
		}
		d, err := r.datum(0)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
}

func (r *reader) errAt(p srcPos, format string, args ...any) error {
	return &SyntaxError{File: r.file, Line: p.Line, Column: p.Column, Msg: fmt.Sprintf(format, args...)}
}

func (r *reader) pos() srcPos { return srcPos{r.line, r.col} }

func (r *reader) peek() byte {
	if r.off < len(r.src) {
		return r.src[r.off]
	}
	return 0
}

func (r *reader) next() byte {
	c := r.src[r.off]
	r.off++
	if c == '\n' {
		r.line++
		r.col = 1
	} else {
		r.col++
	}
	return c
}

// skipSpace skips white space, ";" line comments and nested "#| |#" block
// comments.
func (r *reader) skipSpace() error {
	for r.off < len(r.src) {
		c := r.peek()
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			r.next()
		case c == ';':
			for r.off < len(r.src) && r.peek() != '\n' {
				r.next()
			}
		case c == '#' && r.off+1 < len(r.src) && r.src[r.off+1] == '|':
			start := r.pos()
			r.next()
			r.next()
			depth := 1
			for depth > 0 {
				if r.off >= len(r.src) {
					return r.errAt(start, "unterminated block comment")
				}
				switch {
				case r.peek() == '|' && r.off+1 < len(r.src) && r.src[r.off+1] == '#':
					r.next()
					r.next()
					depth--
				case r.peek() == '#' && r.off+1 < len(r.src) && r.src[r.off+1] == '|':
					r.next()
					r.next()
					depth++
				default:
					r.next()
				}
			}
		default:
			return nil
		}
	}
	return nil
}

func isDelimiter(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', '\f', '(', ')', '[', ']', '"', ';':
		return true
	}
	return false
}

func (r *reader) datum(depth int) (datum, error) {
	off := r.off
	d, err := r.datum0(depth)
	d.off, d.end = off, r.off
	return d, err
}

func (r *reader) datum0(depth int) (datum, error) {
	p := r.pos()
	c := r.peek()
	switch {
	case c == '(' || c == '[':
		if depth >= maxDepth {
			return datum{}, r.errAt(p, "lists nested deeper than %d", maxDepth)
		}
		closer := byte(')')
		if c == '[' {
			closer = ']'
		}
		r.next()
		d := datum{kind: kList, pos: p}
		for {
			if err := r.skipSpace(); err != nil {
				return datum{}, err
			}
			if r.off >= len(r.src) {
				return datum{}, r.errAt(p, "unclosed %q", string(c))
			}
			if c := r.peek(); c == ')' || c == ']' {
				if c != closer {
					return datum{}, r.errAt(r.pos(), "%q closes %q opened at %d:%d", string(c), string(closer), p.Line, p.Column)
				}
				r.next()
				return d, nil
			}
			e, err := r.datum(depth + 1)
			if err != nil {
				return datum{}, err
			}
			d.list = append(d.list, e)
		}
	case c == ')' || c == ']':
		return datum{}, r.errAt(p, "unexpected %q", string(c))
	case c == '"':
		return r.stringLit(p)
	case c == '\'' || c == '`' || c == ',':
		return datum{}, r.errAt(p, "quotation is not supported")
	}
	start := r.off
	for r.off < len(r.src) && !isDelimiter(r.peek()) {
		r.next()
	}
	tok := string(r.src[start:r.off])
	switch tok {
	case "#t", "#true":
		return datum{kind: kBool, pos: p, num: 1}, nil
	case "#f", "#false":
		return datum{kind: kBool, pos: p, num: 0}, nil
	}
	if looksNumeric(tok) {
		n, err := strconv.ParseInt(tok, 10, 64)
		if err != nil {
			return datum{}, r.errAt(p, "integer literal %s out of range or malformed", tok)
		}
		return datum{kind: kInt, pos: p, num: n}, nil
	}
	if strings.HasPrefix(tok, "#:") && len(tok) > 2 {
		// A keyword such as #:optional: a symbol no program can bind.
		return datum{kind: kSymbol, pos: p, str: tok}, nil
	}
	if tok[0] == '#' {
		return datum{}, r.errAt(p, "unknown syntax %s", tok)
	}
	return datum{kind: kSymbol, pos: p, str: tok}, nil
}

// looksNumeric reports whether tok is meant as a decimal integer: digits
// with an optional sign.
func looksNumeric(tok string) bool {
	s := tok
	if len(s) > 1 && (s[0] == '-' || s[0] == '+') {
		s = s[1:]
	}
	return s != "" && s[0] >= '0' && s[0] <= '9'
}

func (r *reader) stringLit(p srcPos) (datum, error) {
	r.next() // opening quote
	var b strings.Builder
	for {
		if r.off >= len(r.src) {
			return datum{}, r.errAt(p, "unterminated string")
		}
		c := r.next()
		switch c {
		case '"':
			return datum{kind: kString, pos: p, str: b.String()}, nil
		case '\\':
			if r.off >= len(r.src) {
				return datum{}, r.errAt(p, "unterminated string")
			}
			ep := r.pos()
			switch e := r.next(); e {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case '\\', '"':
				b.WriteByte(e)
			default:
				return datum{}, r.errAt(ep, "unknown string escape \\%c", e)
			}
		default:
			b.WriteByte(c)
		}
	}
}
