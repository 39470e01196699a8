// Package resnet is torchvision's ResNet family (resnet18 … resnet152,
// ResNeXt and Wide ResNet, "v1.5": the stride of a bottleneck on its 3×3
// convolution) for inference over the kernels.Vision ops: torchvision
// state_dicts saved as safetensors, BatchNorm folded into the
// convolutions at load (or kept as its own op, to check the folding), and
// bias, residual add and ReLU fused into each convolution's epilogue.
// Images are NCHW float32 at the interface and NHWC on the device (see
// kernels.Vision). Model.Quantize turns a loaded model into W8A8 static
// int8 (kernels.QuantConv and kernels.Quant), calibrated on batches of
// images through the float model; Model.QuantizedTensors writes it as a
// compressed-tensors checkpoint, which Load reads back.
package resnet

import (
	"fmt"
	"slices"
	"strings"
)

// Block is a residual block's kind.
type Block uint8

// Blocks.
const (
	// Basic is two 3×3 convolutions (resnet18, resnet34); expansion 1.
	Basic Block = iota + 1
	// Bottleneck is 1×1, 3×3 (grouped, strided), 1×1 (every deeper
	// model); expansion 4.
	Bottleneck
)

// Expansion is the ratio of a block's output channels to its planes.
func (b Block) Expansion() int {
	if b == Bottleneck {
		return 4
	}
	return 1
}

// Config is one member of the family: torchvision's ResNet(block,
// layers, num_classes, groups, width_per_group).
type Config struct {
	// Name is torchvision's constructor name ("resnet50").
	Name string
	// Block is the kind of every residual block.
	Block Block
	// Layers is the number of blocks of each of the four stages.
	Layers [4]int
	// Groups and WidthPerGroup shape a bottleneck's 3×3 convolution:
	// width = planes·WidthPerGroup/64·Groups (1 and 64 for plain ResNets).
	Groups, WidthPerGroup int
	// NumClasses is the classifier's size (1000 for ImageNet; a
	// checkpoint's fc decides it, see FromCheckpoint).
	NumClasses int
}

// family lists torchvision's constructors with ImageNet's 1000 classes.
var family = []Config{
	{Name: "resnet18", Block: Basic, Layers: [4]int{2, 2, 2, 2}},
	{Name: "resnet34", Block: Basic, Layers: [4]int{3, 4, 6, 3}},
	{Name: "resnet50", Block: Bottleneck, Layers: [4]int{3, 4, 6, 3}},
	{Name: "resnet101", Block: Bottleneck, Layers: [4]int{3, 4, 23, 3}},
	{Name: "resnet152", Block: Bottleneck, Layers: [4]int{3, 8, 36, 3}},
	{Name: "resnext50_32x4d", Block: Bottleneck, Layers: [4]int{3, 4, 6, 3}, Groups: 32, WidthPerGroup: 4},
	{Name: "resnext101_32x8d", Block: Bottleneck, Layers: [4]int{3, 4, 23, 3}, Groups: 32, WidthPerGroup: 8},
	{Name: "resnext101_64x4d", Block: Bottleneck, Layers: [4]int{3, 4, 23, 3}, Groups: 64, WidthPerGroup: 4},
	{Name: "wide_resnet50_2", Block: Bottleneck, Layers: [4]int{3, 4, 6, 3}, WidthPerGroup: 128},
	{Name: "wide_resnet101_2", Block: Bottleneck, Layers: [4]int{3, 4, 23, 3}, WidthPerGroup: 128},
}

// Names lists the family's members, as ByName accepts them.
func Names() []string {
	out := make([]string, len(family))
	for i, c := range family {
		out[i] = c.Name
	}
	return out
}

// ByName returns the named member of the family with 1000 classes.
func ByName(name string) (Config, error) {
	i := slices.IndexFunc(family, func(c Config) bool { return c.Name == name })
	if i < 0 {
		return Config{}, fmt.Errorf("resnet: unknown model %q (want one of %s)", name, strings.Join(Names(), ", "))
	}
	c := family[i]
	if c.Groups == 0 {
		c.Groups, c.WidthPerGroup = 1, max(c.WidthPerGroup, 64)
	}
	c.NumClasses = 1000
	return c, nil
}

// Validate checks that the config describes a buildable model.
func (c Config) Validate() error {
	switch {
	case c.Block != Basic && c.Block != Bottleneck:
		return fmt.Errorf("resnet: %s: unknown block kind %d", c.Name, c.Block)
	case c.Groups < 1 || c.WidthPerGroup < 1:
		return fmt.Errorf("resnet: %s: groups %d and width per group %d must be positive", c.Name, c.Groups, c.WidthPerGroup)
	case c.Block == Basic && (c.Groups != 1 || c.WidthPerGroup != 64):
		return fmt.Errorf("resnet: %s: basic blocks need groups 1 and width per group 64, as torchvision's", c.Name)
	case c.NumClasses < 1:
		return fmt.Errorf("resnet: %s: %d classes, want at least one", c.Name, c.NumClasses)
	}
	for i, n := range c.Layers {
		if n < 1 {
			return fmt.Errorf("resnet: %s: stage %d has %d blocks, want at least one", c.Name, i+1, n)
		}
	}
	return nil
}

// width is the channel count inside a block of the given planes.
func (c Config) width(planes int) int {
	if c.Block == Basic {
		return planes
	}
	return planes * c.WidthPerGroup / 64 * c.Groups
}

// Features is the channel count the classifier reads: 512·expansion.
func (c Config) Features() int { return 512 * c.Block.Expansion() }

// MinSize is the smallest input height and width: 32, where the last
// stage's output is 1×1.
const MinSize = 32
