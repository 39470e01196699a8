package main

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/zbench/zbench/models/nn"
	"github.com/zbench/zbench/models/quant"
	"github.com/zbench/zbench/models/safetensors"
)

// A modelEntry is one model the command runs, registered once with what
// it supports: infer, quantize, generate and finetune find it by its
// --model name through modelFor.
type modelEntry struct {
	name string
	// load loads the model of an infer job, and read reads its input
	// file as the model's named inputs; dtypes are the --dtype values it
	// takes. stateDict models read weights alone (a torchvision
	// state_dict as safetensors, no config.json); images models take
	// --image (pixel_values, logits).
	load func(inferJob) (nn.Runnable, error)
	// inferDoc is the model's paragraph of infer's help: what it reads
	// from the input file and writes to the output.
	inferDoc          string
	read              func(*safetensors.File) (map[string]nn.Values, error)
	dtypes            []string
	stateDict, images bool
	// quantize quantizes the model and writes its checkpoint; schemes are
	// the --scheme values it takes and quantizeFlags the model-dependent
	// quantize flags it reads (the others are refused when set), calib
	// whether it needs --calib, and seq its default --seq or --size.
	quantize      func(quantizeJob) (quantizeReport, error)
	schemes       []quant.Scheme
	quantizeFlags []string
	calib         bool
	defaultSize   int
	// generates is set for the models generate and finetune load (a
	// Llama-family checkpoint directory as --model).
	generates bool
}

// quantizeModelFlags are quantize's flags that only some models read.
var quantizeModelFlags = []string{"config", "dtype", "method", "percentile", "bins", "batches", "batch", "seq", "size"}

// calibrationFlags are the quantize flags of W8A8 static calibration.
var calibrationFlags = []string{"method", "percentile", "bins", "batches", "batch"}

// registry is every model of the command, each registered once, by the
// init of its file (bert.go, llama.go, resnet.go).
var registry []modelEntry

// register adds models to the registry; a name registered twice panics.
func register(models ...modelEntry) {
	for _, m := range models {
		if slices.ContainsFunc(registry, func(r modelEntry) bool { return r.name == m.name }) {
			panic("zbench: model " + m.name + " registered twice")
		}
		registry = append(registry, m)
	}
}

// A capability is what a command needs of a model.
type capability string

const (
	canInfer    capability = "infer"
	canQuantize capability = "quantize"
	canGenerate capability = "generate"
)

// has reports whether m supports c.
func (m modelEntry) has(c capability) bool {
	switch c {
	case canInfer:
		return m.load != nil
	case canQuantize:
		return m.quantize != nil
	case canGenerate:
		return m.generates
	}
	return false
}

// modelNames are the names of the registered models that support c, in
// alphabetical order.
func modelNames(c capability) []string {
	var names []string
	for _, m := range registry {
		if m.has(c) {
			names = append(names, m.name)
		}
	}
	slices.Sort(names)
	return names
}

// modelFor returns the registered model name that supports c, or a usage
// error listing those that do.
func modelFor(c capability, name string) (modelEntry, error) {
	i := slices.IndexFunc(registry, func(m modelEntry) bool { return m.name == name })
	if i < 0 || !registry[i].has(c) {
		return modelEntry{}, usageErrorf("unknown --model %q (want %s)", name, strings.Join(modelNames(c), ", "))
	}
	return registry[i], nil
}

// checkGenerates checks that the checkpoint whose config.json is path is
// of a model family registered for generate and finetune, naming those
// there are where it is not. A config the model's loader cannot read is
// left to the loader to report.
func checkGenerates(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var c struct {
		ModelType string `json:"model_type"`
	}
	if json.Unmarshal(data, &c) != nil || c.ModelType == "" {
		return nil
	}
	if _, err := modelFor(canGenerate, c.ModelType); err != nil {
		return fmt.Errorf("%s: model_type %q: generate and finetune run %s", path, c.ModelType, strings.Join(modelNames(canGenerate), ", "))
	}
	return nil
}
