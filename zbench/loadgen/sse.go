package loadgen

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// maxEventBytes bounds one server-sent event's line: a chunk of a
// completion is a few hundred bytes.
const maxEventBytes = 1 << 20

// ErrStream marks a response stream that breaks the server-sent events
// format or the API's chunk format.
var ErrStream = errors.New("bad response stream")

// sseReader reads the data payloads of a text/event-stream response: the
// value of each "data:" field, events separated by blank lines, comments
// (lines starting with ':') and other fields skipped.
type sseReader struct {
	s *bufio.Scanner
}

func newSSEReader(r io.Reader) *sseReader {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 0, 4096), maxEventBytes)
	return &sseReader{s: s}
}

// next returns the next event's data (its data lines joined by '\n'),
// io.EOF at the end of the stream.
func (r *sseReader) next() ([]byte, error) {
	var data []byte
	have := false
	for r.s.Scan() {
		line := r.s.Bytes()
		if len(line) == 0 {
			if have {
				return data, nil
			}
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		if string(field) != "data" {
			continue
		}
		value = bytes.TrimPrefix(value, []byte(" "))
		if have {
			data = append(data, '\n')
		}
		data, have = append(data, value...), true
	}
	if err := r.s.Err(); err != nil {
		return nil, fmt.Errorf("reading events: %w: %w", ErrStream, err)
	}
	if have {
		return data, nil
	}
	return nil, io.EOF
}
