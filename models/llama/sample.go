package llama

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/zbench/zbench/kernels"
)

// Sampling says how the next token is chosen from the logits, with the
// semantics of Hugging Face's generate and its logits processors, applied
// in its order: repetition penalty, temperature, top-k, top-p, then a draw
// from the softmax. A zero Temperature is greedy decoding (the largest
// logit after the repetition penalty).
type Sampling struct {
	// Temperature divides the logits; 0 means greedy.
	Temperature float64
	// TopK keeps the K largest logits; 0 keeps all.
	TopK int
	// TopP keeps the smallest set of largest-probability tokens whose
	// probabilities sum to at least TopP (nucleus sampling); 0 or 1 keeps
	// all.
	TopP float64
	// RepetitionPenalty divides the positive logits (and multiplies the
	// negative ones) of every token already in the sequence, prompt
	// included (CTRL's penalty, as transformers applies it); 0 or 1 is off.
	RepetitionPenalty float64
	// Seed seeds the draws: the same seed gives the same tokens.
	Seed uint64
}

// Validate names the first parameter out of range.
func (p Sampling) Validate() error {
	switch {
	case !(p.Temperature >= 0) || math.IsInf(p.Temperature, 0):
		return fmt.Errorf("llama: temperature %g, want ≥ 0: %w", p.Temperature, ErrInput)
	case p.TopK < 0:
		return fmt.Errorf("llama: top-k %d, want ≥ 0: %w", p.TopK, ErrInput)
	case !(p.TopP >= 0 && p.TopP <= 1):
		return fmt.Errorf("llama: top-p %g, want in [0, 1]: %w", p.TopP, ErrInput)
	case !(p.RepetitionPenalty >= 0) || math.IsInf(p.RepetitionPenalty, 0):
		return fmt.Errorf("llama: repetition penalty %g, want > 0 (1 is off): %w", p.RepetitionPenalty, ErrInput)
	}
	return nil
}

// penalised reports whether the repetition penalty is on.
func (p Sampling) penalised() bool { return p.RepetitionPenalty != 0 && p.RepetitionPenalty != 1 }

// OnDevice reports whether the choice is the device's argmax of the raw
// logits: greedy without a repetition penalty.
func (p Sampling) OnDevice() bool { return p.Temperature == 0 && !p.penalised() }

// Sampler draws tokens with one seeded generator.
type Sampler struct {
	p     Sampling
	rng   *rand.Rand
	probs []float64
	order []int
	hit   []bool // tokens penalised in this Pick
}

// NewSampler returns a sampler of p.
func NewSampler(p Sampling) (*Sampler, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &Sampler{p: p, rng: rand.New(rand.NewPCG(p.Seed, 0x5a3b1e))}, nil
}

// Pick chooses the next token from one sequence's logits; seen are the
// tokens of the sequence so far (for the repetition penalty). logits is
// modified.
func (s *Sampler) Pick(logits []float32, seen []int) int {
	if s.p.penalised() {
		pen := float32(s.p.RepetitionPenalty)
		if len(s.hit) != len(logits) {
			s.hit = make([]bool, len(logits))
		}
		clear(s.hit)
		for _, id := range seen {
			if id < 0 || id >= len(logits) || s.hit[id] {
				continue // each token once, however often it was seen
			}
			s.hit[id] = true
			if logits[id] < 0 {
				logits[id] *= pen
			} else {
				logits[id] /= pen
			}
		}
	}
	if s.p.Temperature == 0 {
		return kernels.IndexOfMax(logits)
	}
	// Candidates in decreasing logit order (stable: lower ids first on ties).
	s.order = s.order[:0]
	for i := range logits {
		s.order = append(s.order, i)
	}
	slices.SortStableFunc(s.order, func(a, b int) int { return cmp.Compare(logits[b], logits[a]) })
	n := len(s.order)
	if k := s.p.TopK; k > 0 && k < n {
		n = k
	}
	// Softmax over the candidates at the temperature, in float64.
	s.probs = s.probs[:0]
	top := float64(logits[s.order[0]]) / s.p.Temperature
	sum := 0.0
	for _, id := range s.order[:n] {
		e := math.Exp(float64(logits[id])/s.p.Temperature - top)
		s.probs = append(s.probs, e)
		sum += e
	}
	if p := s.p.TopP; p > 0 && p < 1 {
		// Keep the smallest prefix whose mass reaches p (at least one).
		acc := 0.0
		for i, e := range s.probs {
			acc += e / sum
			if acc >= p {
				n = i + 1
				break
			}
		}
		s.probs = s.probs[:n]
		sum = 0
		for _, e := range s.probs {
			sum += e
		}
	}
	u := s.rng.Float64() * sum
	for i, e := range s.probs {
		if u < e {
			return s.order[i]
		}
		u -= e
	}
	return s.order[len(s.probs)-1]
}
