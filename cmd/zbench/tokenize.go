package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/zbench/zbench/models/tokenizer"
)

const tokenizeSynopsis = "--tokenizer FILE|DIR [--decode] [--no-special] [--format text|json] TEXT|IDS"

const tokenizeDoc = `
Tokenize encodes TEXT to token ids with a Llama-family tokenizer
(tokenizer.json or tokenizer.model, or a checkpoint directory holding one
and its tokenizer_config.json), or with --decode turns comma-separated IDS
back into text, so that a prompt can be checked against Hugging Face's
tokenizer before it is generated from.

Encoding adds the special tokens the tokenizer adds (BOS for Llama) unless
--no-special is given. Text output is the ids separated by commas (the form
'zbench generate --prompt-ids' takes), or the decoded text; --format json
prints {"ids": [...], "text": "..."} with the token count.`

// tokenizeResult is tokenize's --format json output.
type tokenizeResult struct {
	IDs    []int  `json:"ids"`
	Text   string `json:"text"`
	Tokens int    `json:"tokens"`
}

func runTokenize(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("tokenize", tokenizeSynopsis, tokenizeDoc, stderr)
	var (
		path      = fs.String("tokenizer", "", "tokenizer.json or tokenizer.model `file`, or a checkpoint directory (required)")
		decode    = fs.Bool("decode", false, "decode comma-separated ids to text")
		noSpecial = fs.Bool("no-special", false, "do not add the tokenizer's special tokens (BOS) when encoding")
		format    = fs.String("format", "text", "output format: text or json")
	)
	pos, err := parseArgs(fs, args, stdout)
	if err != nil {
		return err
	}
	switch {
	case *path == "":
		return usageErrorf("missing required flag --tokenizer (see 'zbench tokenize -h')")
	case len(pos) != 1:
		return usageErrorf("want one argument, the text (or the ids with --decode), got %d", len(pos))
	case *format != "text" && *format != "json":
		return usageErrorf("unknown --format %q (want text or json)", *format)
	case *decode && *noSpecial:
		return usageErrorf("--no-special applies to encoding, not to --decode")
	}
	var res tokenizeResult
	if *decode {
		if res.IDs, err = parseIDs(pos[0]); err != nil {
			return usageErrorf("ids: %v", err)
		}
	}
	tok, err := tokenizer.Load(*path)
	if err != nil {
		return err
	}
	if *decode {
		if res.Text, err = tok.Decode(res.IDs); err != nil {
			return err
		}
	} else {
		res.Text, res.IDs = pos[0], tok.Encode(pos[0], !*noSpecial)
	}
	res.Tokens = len(res.IDs)
	if res.IDs == nil {
		res.IDs = []int{}
	}
	if *format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	if *decode {
		_, err = fmt.Fprintln(stdout, res.Text)
		return err
	}
	s := make([]string, len(res.IDs))
	for i, id := range res.IDs {
		s[i] = strconv.Itoa(id)
	}
	_, err = fmt.Fprintln(stdout, strings.Join(s, ","))
	return err
}
