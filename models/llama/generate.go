package llama

import (
	"fmt"
	"time"
)

// GenerateOptions qualify Session.Generate.
type GenerateOptions struct {
	// MaxNewTokens is the number of tokens to generate per sequence.
	MaxNewTokens int
	Sampling     Sampling
	// StopAtEOS ends a sequence at its first end-of-sequence token (which
	// is kept); generation ends when every sequence has ended.
	StopAtEOS bool
}

// Generation is the outcome of Generate.
type Generation struct {
	// Tokens are the new tokens of each sequence.
	Tokens [][]int
	// FirstToken is the time from the start of the prefill to the first
	// token chosen: time to first token.
	FirstToken time.Duration
	// Steps are the durations of each decode step that followed, one
	// token per sequence each, the choice included.
	Steps []time.Duration
}

// Generate prefills the prompts and decodes up to o.MaxNewTokens tokens
// per sequence, calling emit (when not nil) with each new token as soon
// as it is chosen. Every step synchronises with the device, since the
// chosen tokens come back to the host.
func (s *Session) Generate(prompts [][]int, o GenerateOptions, emit func(seq, id int) error) (*Generation, error) {
	if o.MaxNewTokens <= 0 {
		return nil, fmt.Errorf("llama: max new tokens %d, want > 0: %w", o.MaxNewTokens, ErrInput)
	}
	sampler, err := NewSampler(o.Sampling)
	if err != nil {
		return nil, err
	}
	for b, p := range prompts {
		if len(p)+o.MaxNewTokens > s.maxLen+1 {
			return nil, fmt.Errorf("llama: prompt %d of %d tokens and %d new tokens exceed the session's %d: %w",
				b, len(p), o.MaxNewTokens, s.maxLen, ErrInput)
		}
	}
	seen := make([][]int, len(prompts))
	for b, p := range prompts {
		seen[b] = append([]int(nil), p...)
	}
	g := &Generation{Tokens: make([][]int, len(prompts))}
	done := make([]bool, len(prompts))
	start := time.Now()
	if err := s.Prefill(prompts); err != nil {
		return nil, err
	}
	next := make([]int, len(prompts))
	for step := range o.MaxNewTokens {
		if step > 0 {
			t := time.Now()
			if err := s.Decode(next); err != nil {
				return nil, err
			}
			if err := s.choose(sampler, seen, next); err != nil {
				return nil, err
			}
			g.Steps = append(g.Steps, time.Since(t))
		} else {
			if err := s.choose(sampler, seen, next); err != nil {
				return nil, err
			}
			g.FirstToken = time.Since(start)
		}
		active := false
		for b, id := range next {
			if done[b] {
				continue
			}
			g.Tokens[b] = append(g.Tokens[b], id)
			seen[b] = append(seen[b], id)
			if emit != nil {
				if err := emit(b, id); err != nil {
					return nil, err
				}
			}
			done[b] = o.StopAtEOS && s.m.Config.IsEOS(id)
			active = active || !done[b]
		}
		if !active {
			break
		}
	}
	return g, nil
}

// choose sets next to each sequence's next token from the last logits.
func (s *Session) choose(sampler *Sampler, seen [][]int, next []int) error {
	if sampler.p.OnDevice() {
		ids, err := s.Greedy()
		if err != nil {
			return err
		}
		copy(next, ids)
		return nil
	}
	logits, err := s.Logits()
	if err != nil {
		return fmt.Errorf("llama: logits: %w", err)
	}
	V := s.m.Config.VocabSize
	for b := range next {
		next[b] = sampler.Pick(logits[b*V:(b+1)*V], seen[b])
	}
	return nil
}
