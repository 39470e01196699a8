package kernels

import (
	"fmt"
	"reflect"
)

// Group returns be's op group G (FP8, Quant, WeightQuant, QuantConv,
// Vision, Decoder, DecoderBackward, Capturer, …), or an error wrapping
// ErrUnsupported that names the backend and the group when be does not
// implement it or, for FP8, its device cannot run it (FP8.FP8Supported).
func Group[G any](be Backend) (G, error) {
	g, ok := be.(G)
	if !ok {
		name := reflect.TypeFor[G]().Name()
		return g, fmt.Errorf("the %s backend has no %s ops (kernels.%s): %w", be.Name(), name, name, ErrUnsupported)
	}
	if f, ok := any(&g).(*FP8); ok { // G is FP8
		if err := (*f).FP8Supported(); err != nil {
			return g, err
		}
	}
	return g, nil
}
