package nn

import (
	"fmt"
	"math"
	"slices"

	"github.com/zbench/zbench/kernels"
)

// Schedules are the learning-rate schedules Schedule knows, named as
// transformers' lr_scheduler_type.
var Schedules = []string{"constant", "linear", "cosine"}

// Schedule is a learning-rate schedule with transformers' semantics
// (get_constant_schedule_with_warmup, get_linear_schedule_with_warmup,
// get_cosine_schedule_with_warmup): a linear warm-up over Warmup updates,
// then the peak rate held (constant) or decayed to zero at update Total
// (linear, or cosine over half a period).
type Schedule struct {
	Kind          string // one of Schedules
	Warmup, Total int
}

// Validate checks the kind and the counts.
func (s Schedule) Validate() error {
	if !slices.Contains(Schedules, s.Kind) {
		return fmt.Errorf("learning-rate schedule %q: want one of %v", s.Kind, Schedules)
	}
	if s.Warmup < 0 || s.Total < 0 {
		return fmt.Errorf("learning-rate schedule: warm-up %d and total %d updates must not be negative", s.Warmup, s.Total)
	}
	return nil
}

// Factor is the multiplier of the peak rate for the update that follows
// k completed ones (so the first update, k = 0, has rate 0 when there is
// a warm-up, as in transformers).
func (s Schedule) Factor(k int) float64 {
	if k < s.Warmup {
		return float64(k) / float64(max(1, s.Warmup))
	}
	progress := float64(k-s.Warmup) / float64(max(1, s.Total-s.Warmup))
	switch s.Kind {
	case "linear":
		return max(0, 1-progress)
	case "cosine":
		return max(0, 0.5*(1+math.Cos(math.Pi*progress)))
	}
	return 1
}

// GradNorm returns the L2 norm of every gradient together (downloaded and
// summed in float64): the global norm that gradient clipping bounds.
func (s *TrainState) GradNorm() (float64, error) {
	var sum float64
	for _, p := range s.Params {
		g, err := kernels.ToFloat32(s.Grads.Get(p.Name))
		if err != nil {
			return 0, fmt.Errorf("gradient of %s: %w", p.Name, err)
		}
		for _, v := range g {
			sum += float64(v) * float64(v)
		}
	}
	return math.Sqrt(sum), nil
}

// ClipGradNorm scales every gradient by maxNorm/(norm + 1e-6) when the
// global norm exceeds maxNorm, as torch.nn.utils.clip_grad_norm_ does, and
// returns the norm before clipping. maxNorm ≤ 0 only measures.
func (s *TrainState) ClipGradNorm(maxNorm float64) (float64, error) {
	norm, err := s.GradNorm()
	if err != nil || maxNorm <= 0 {
		return norm, err
	}
	if c := maxNorm / (norm + 1e-6); c < 1 {
		for _, p := range s.Params {
			g := s.Grads.Get(p.Name)
			if err := s.Values.be.Scale(g, g, float32(c)); err != nil {
				return norm, fmt.Errorf("clipping the gradient of %s: %w", p.Name, err)
			}
		}
	}
	return norm, nil
}
