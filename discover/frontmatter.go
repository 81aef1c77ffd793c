package discover

import (
	"bytes"
	"regexp"
	"strings"

	"github.com/rolecall/rolecall/resolve"
	"go.yaml.in/yaml/v3"
)

// frontmatter is a Markdown file split at its --- block.
type frontmatter struct {
	yaml     []byte // the text between the --- lines
	body     string // everything after the closing line, CRLF → LF
	bodyLine int    // the line the body starts on
}

// markdownDoc checks a Markdown file's text, splits it and parses its
// frontmatter (root is nil when the frontmatter is empty).
func markdownDoc(path string, code resolve.Code, data []byte) (d *ydoc, root *yaml.Node, fm *frontmatter, err *Error) {
	if line, msg := checkText(data); msg != "" {
		return nil, nil, nil, &Error{Code: code, File: path, Line: line, Message: msg}
	}
	if fm, err = splitFrontmatter(path, code, data); err != nil {
		return nil, nil, nil, err
	}
	d = &ydoc{path: path, code: code, off: 1}
	root, err = d.parse(fm.yaml)
	return d, root, fm, err
}

// splitFrontmatter splits "---\n<yaml>\n---\n<body>". The opening line must
// be the file's first line; the first later line that is exactly "---"
// (trailing blanks and CR allowed) closes the block. A UTF-8 byte order mark
// before the opening line is ignored.
func splitFrontmatter(path string, code resolve.Code, data []byte) (*frontmatter, *Error) {
	data = bytes.TrimPrefix(data, []byte("\xEF\xBB\xBF"))
	// bytes.Cut leaves rest nil when no newline ends the line.
	first, rest, _ := bytes.Cut(data, []byte("\n"))
	if !isFence(first) {
		return nil, &Error{Code: code, File: path, Line: 1, Message: "missing frontmatter: the file must start with a --- line"}
	}
	line := 2
	start := rest
	for len(rest) > 0 {
		l, after, _ := bytes.Cut(rest, []byte("\n"))
		if isFence(l) {
			return &frontmatter{
				yaml:     start[:len(start)-len(rest)],
				body:     lfLines(string(after)),
				bodyLine: line + 1,
			}, nil
		}
		rest = after
		line++
	}
	return nil, &Error{Code: code, File: path, Line: 1, Message: "frontmatter opened at line 1 is never closed by a --- line"}
}

func isFence(line []byte) bool {
	return string(bytes.TrimRight(line, " \t\r")) == "---"
}

// crlfRE is a CRLF line end. A run of CRs before a newline is one line
// end ("a\r\r\n" → "a\n"): replacing "\r\n" once would leave the "\r\n"
// of "\r\r\n" in place (found by FuzzFrontmatter).
var crlfRE = regexp.MustCompile(`\r+\n`)

// lfLines turns CRLF line ends into LF.
func lfLines(s string) string {
	if !strings.Contains(s, "\r\n") {
		return s
	}
	return crlfRE.ReplaceAllString(s, "\n")
}
