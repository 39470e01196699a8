package lora

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
)

// File names of a PEFT adapter directory.
const (
	ConfigFile  = "adapter_config.json"
	WeightsFile = "adapter_model.safetensors"
)

// ReadConfig reads and parses the adapter_config.json at path (see
// ParseConfig).
func ReadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("LoRA config: %w", err)
	}
	return ParseConfig(path, data)
}

// unsupported are fields of adapter_config.json that change the computation
// beyond plain LoRA, with what they do; each must be absent or at its
// default (null, false, "", [] or {}).
var unsupported = []struct{ field, what string }{
	{"use_dora", "DoRA"},
	{"fan_in_fan_out", "transposed (Conv1D) weights"},
	{"modules_to_save", "fully trained extra modules"},
	{"layers_to_transform", "adapting only some layers"},
	{"rank_pattern", "per-module ranks"},
	{"alpha_pattern", "per-module alphas"},
	{"exclude_modules", "excluded modules"},
	{"lora_bias", "a bias on lora_B"},
	{"layer_replication", "replicated layers"},
	{"trainable_token_indices", "trainable token embeddings"},
	{"target_parameters", "adapted parameters"},
	{"alora_invocation_tokens", "activated LoRA"},
	{"use_qalora", "QALoRA"},
	{"arrow_config", "Arrow routing"},
}

// regexChars are the characters whose presence in a string target_modules
// makes it a regular expression, which PEFT matches against full module
// names.
const regexChars = `.*+?[](){}|^$\`

// ParseConfig parses adapter_config.json's content, data, named name in
// messages. peft_type must be "LORA" and task_type "CAUSAL_LM" or absent;
// target_modules is a list of Modules' names (or their paths, such as
// "self_attn.q_proj", which PEFT's suffix match accepts), "all-linear", or
// a single name as a string; absent, it is PEFT's default for Llama
// (DefaultTargets). r must be an integer, lora_alpha and lora_dropout
// numbers. Fields that change the computation beyond plain LoRA (a
// regular-expression target_modules, bias other than "none", use_dora,
// modules_to_save, layers_to_transform, rank_pattern, alpha_pattern,
// fan_in_fan_out, lora_bias, ...) give an error naming the field and ending
// "not supported". Other fields are ignored, since PEFT adds some each
// release. Every error names name and wraps ErrConfig; the result passes
// Validate.
func ParseConfig(name string, data []byte) (Config, error) {
	fail := func(format string, args ...any) (Config, error) {
		return Config{}, fmt.Errorf("%s: %s: %w", name, fmt.Sprintf(format, args...), ErrConfig)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil || fields == nil {
		msg := "not a JSON object"
		if err != nil {
			msg += ": " + err.Error()
		}
		return fail("%s", msg)
	}
	present := func(f string) bool {
		raw, ok := fields[f]
		return ok && string(raw) != "null"
	}
	str := func(f string) (string, bool, error) {
		if !present(f) {
			return "", false, nil
		}
		var s string
		if err := json.Unmarshal(fields[f], &s); err != nil {
			return "", false, fmt.Errorf("%s = %s: want a string", f, abbreviate(fields[f]))
		}
		return s, true, nil
	}

	switch s, ok, err := str("peft_type"); {
	case err != nil:
		return fail("%v", err)
	case !ok:
		return fail(`peft_type is missing, want "LORA"`)
	case s != "LORA":
		return fail(`peft_type %q: not supported, want "LORA"`, s)
	}
	switch s, ok, err := str("task_type"); {
	case err != nil:
		return fail("%v", err)
	case ok && s != "CAUSAL_LM":
		return fail(`task_type %q: not supported, want "CAUSAL_LM"`, s)
	}
	switch s, ok, err := str("bias"); {
	case err != nil:
		return fail("%v", err)
	case ok && s != "none":
		return fail(`bias = %q: not supported (trained biases), want "none"`, s)
	}
	for _, u := range unsupported {
		if raw, ok := fields[u.field]; ok && !isDefault(raw) {
			return fail("%s = %s: not supported (%s)", u.field, abbreviate(raw), u.what)
		}
	}

	var c Config
	if !present("r") {
		return fail("r is missing")
	}
	r, err := strconv.ParseInt(string(fields["r"]), 10, 0)
	if err != nil {
		return fail("r = %s: want an integer", abbreviate(fields["r"]))
	}
	c.R = int(r)
	if !present("lora_alpha") {
		return fail("lora_alpha is missing")
	}
	if c.Alpha, err = number(fields["lora_alpha"]); err != nil {
		return fail("lora_alpha = %s: want a finite number", abbreviate(fields["lora_alpha"]))
	}
	if present("lora_dropout") {
		if c.Dropout, err = number(fields["lora_dropout"]); err != nil {
			return fail("lora_dropout = %s: want a number", abbreviate(fields["lora_dropout"]))
		}
	}
	if present("use_rslora") {
		if err := json.Unmarshal(fields["use_rslora"], &c.RSLoRA); err != nil {
			return fail("use_rslora = %s: want true or false", abbreviate(fields["use_rslora"]))
		}
	}
	if c.BaseModel, _, err = str("base_model_name_or_path"); err != nil {
		return fail("%v", err)
	}
	if c.Targets, err = parseTargetModules(fields["target_modules"]); err != nil {
		return fail("%v", err)
	}
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("%s: %w", name, err)
	}
	return c, nil
}

// parseTargetModules parses target_modules' value (see ParseConfig). Its
// errors carry no file name and do not wrap ErrConfig.
func parseTargetModules(raw json.RawMessage) ([]string, error) {
	if raw == nil || string(raw) == "null" {
		return slices.Clone(DefaultTargets), nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		switch {
		case s == AllLinear:
			return slices.Clone(Modules), nil
		case slices.Contains(Modules, s):
			return []string{s}, nil
		case strings.ContainsAny(s, regexChars):
			return nil, fmt.Errorf("target_modules = %q, a regular expression: not supported; list module names (%s)", s, strings.Join(Modules, ", "))
		}
		return nil, fmt.Errorf("target_modules = %q: not supported; valid: %s", s, validNames())
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("target_modules = %s: want a list of module names", abbreviate(raw))
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("target_modules is empty; name at least one of %s", strings.Join(Modules, ", "))
	}
	seen := map[string]bool{}
	for _, name := range list {
		m, ok := moduleOf(name)
		if !ok {
			return nil, fmt.Errorf("target_modules: %q: not supported; zbench adapts only %s", name, strings.Join(Modules, ", "))
		}
		seen[m] = true
	}
	return inOrder(seen), nil
}

// moduleOf returns the module that a name of target_modules' list names:
// the module's name or its Path, which PEFT's suffix match treats alike.
func moduleOf(name string) (string, bool) {
	for _, m := range Modules {
		if name == m || name == modulePath(m) {
			return m, true
		}
	}
	return "", false
}

// number parses a JSON number (not a string holding one, which
// json.Number would accept). raw is a valid JSON value.
func number(raw json.RawMessage) (float64, error) {
	if len(raw) == 0 || (raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) {
		return 0, errors.New("not a number")
	}
	return strconv.ParseFloat(string(raw), 64)
}

// isDefault reports whether a field's raw value is absent-like: null,
// false, "", [] or {}.
func isDefault(raw json.RawMessage) bool {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return false
	}
	switch b.String() {
	case "null", "false", `""`, "[]", "{}":
		return true
	}
	return false
}

// abbreviate returns a JSON value for messages, compacted and cut short.
func abbreviate(raw json.RawMessage) string {
	var b bytes.Buffer
	s := string(raw)
	if json.Compact(&b, raw) == nil {
		s = b.String()
	}
	if len(s) > 40 {
		s = strings.ToValidUTF8(s[:37], "") + "..."
	}
	return s
}

// Marshal returns the config as PEFT writes adapter_config.json for a LoRA
// adapter of a causal LM: PEFT's fields, those this package does not
// support at their defaults, as Python's json.dumps(indent=2,
// sort_keys=True) formats them (no final newline). An invalid config is an
// error.
func (c Config) Marshal() ([]byte, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	targets := make([]string, len(c.Targets))
	for i, t := range c.Targets {
		targets[i] = pyString(t)
	}
	base := "null"
	if c.BaseModel != "" {
		base = pyString(c.BaseModel)
	}
	fields := map[string]string{
		"alpha_pattern":           "{}",
		"base_model_name_or_path": base,
		"bias":                    `"none"`,
		"fan_in_fan_out":          "false",
		"inference_mode":          "true",
		"init_lora_weights":       "true",
		"layers_pattern":          "null",
		"layers_to_transform":     "null",
		"lora_alpha":              pyNumber(c.Alpha),
		"lora_dropout":            pyFloat(c.Dropout),
		"modules_to_save":         "null",
		"peft_type":               `"LORA"`,
		"r":                       strconv.Itoa(c.R),
		"rank_pattern":            "{}",
		"revision":                "null",
		"target_modules":          "[\n    " + strings.Join(targets, ",\n    ") + "\n  ]",
		"task_type":               `"CAUSAL_LM"`,
		"use_dora":                "false",
		"use_rslora":              strconv.FormatBool(c.RSLoRA),
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	b.WriteString("{")
	for i, k := range keys {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("\n  " + pyString(k) + ": " + fields[k])
	}
	b.WriteString("\n}")
	return []byte(b.String()), nil
}

// pyNumber formats x as PEFT's lora_alpha usually is, an int when x is
// integral and not huge, and otherwise as Python's repr of a float.
func pyNumber(x float64) string {
	if x == math.Trunc(x) && math.Abs(x) < 1e16 {
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return pyFloat(x)
}

// pyFloat formats a finite x as Python's repr of a float: the shortest
// digits that round trip, positional for exponents from -4 to 15 (with
// ".0" when integral), scientific otherwise ("1e-05", "1.5e+16").
func pyFloat(x float64) string {
	if x == 0 {
		if math.Signbit(x) {
			return "-0.0"
		}
		return "0.0"
	}
	e := strconv.FormatFloat(x, 'e', -1, 64)
	exp, _ := strconv.Atoi(e[strings.IndexByte(e, 'e')+1:])
	if exp < -4 || exp >= 16 {
		return e
	}
	s := strconv.FormatFloat(x, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

// pyString quotes s as Python's json.dumps does with ensure_ascii: every
// character outside printable ASCII as \uXXXX (UTF-16), invalid UTF-8 as
// U+FFFD.
func pyString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r >= 0x20 && r < 0x7f:
			b.WriteRune(r)
		case r > 0xffff:
			r -= 0x10000
			fmt.Fprintf(&b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
