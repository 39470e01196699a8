package tokenizer

// A Stream decodes token ids one at a time, as a model generates them, so
// that text can be printed as it comes: Push returns the text that the
// ids so far have made final, which holds back a character whose bytes
// are split over byte-fallback tokens until it is complete, and Flush
// returns the rest. The texts Push and Flush return, joined, are what
// Decode returns for the same ids. A Stream is not safe for concurrent
// use.
type Stream struct {
	d decoder
}

// NewStream returns a Stream at the start of a text.
func (t *Tokenizer) NewStream() *Stream {
	return &Stream{d: t.m.newDecoder()}
}

// Push adds the next id and returns the text that became final. An id the
// tokenizer does not have (one Decode refuses) adds nothing.
func (s *Stream) Push(id int) string {
	return s.d.push(id)
}

// Flush returns the text not yet returned (such as an incomplete
// character's U+FFFDs) and starts the Stream over at the start of a new
// text.
func (s *Stream) Flush() string {
	return s.d.flush()
}
