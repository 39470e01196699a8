#!/usr/bin/env python3
"""Reference for zbench's fine-tuning data (models/sft): Stanford Alpaca's
formatting of instruction data, with SentencePiece itself (Debian's
python3-sentencepiece) as the tokenizer.

Stanford Alpaca's train.py (github.com/tatsu-lab/stanford_alpaca) turns each
record {"instruction", "input", "output"} of an Alpaca JSON file into one
training example:

  source = PROMPT_DICT["prompt_input"] if input != "" else
           PROMPT_DICT["prompt_no_input"], filled in with the record
  target = output + EOS
  input_ids = tokenize(source + target)
  labels    = input_ids, with the first len(tokenize(source)) positions set
              to IGNORE_INDEX (-100)

where tokenize is Hugging Face's LlamaTokenizer (the legacy, slow one:
SentencePiece's encode with BOS prepended, "</s>" in the text read as the
EOS token). Here tokenize(source + output) is SentencePiece's encode with
add_bos, and EOS is appended as its id, which is what LlamaTokenizer makes
of the text "</s>" at the end. The prompt tokens, BOS included, are masked;
the response and EOS are learned. Alpaca's truncation to model_max_length is
left to the batching code (it is not part of the format).

The tokenizer is testdata/golden/llama-tiny/tokenizer.model (written by
testdata/reference/tokenizer.py: bos 1, eos 2); the records are
testdata/alpaca/sample.json (written for this project).

File written:

  testdata/golden/alpaca-tiny.json   compact JSON:
      "tokenizer": the tokenizer.model used (path from the repository root);
      "sample": the Alpaca file formatted;
      "files": sha256 of both, as they were when this script ran;
      "reference": the sentencepiece version;
      "examples": for every record of the sample, in order,
          {"input_ids": [...], "labels": [...]}.

Usage:

  /usr/bin/python3 testdata/reference/alpaca.py           # write
  /usr/bin/python3 testdata/reference/alpaca.py --check   # verify current

It needs python3-sentencepiece (apt-get install python3-sentencepiece;
scripts/install-tokenizer-ref.sh --golden installs it). The output depends
only on the two input files.
"""

import hashlib
import json
import os
import sys

import sentencepiece as spm

import golden_files

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = "testdata/reference/alpaca.py"
TOKENIZER = "testdata/golden/llama-tiny/tokenizer.model"
SAMPLE = "testdata/alpaca/sample.json"
GOLDEN = "testdata/golden/alpaca-tiny.json"

IGNORE_INDEX = -100

# Stanford Alpaca's train.py, verbatim.
PROMPT_DICT = {
    "prompt_input": (
        "Below is an instruction that describes a task, paired with an input that provides further context. "
        "Write a response that appropriately completes the request.\n\n"
        "### Instruction:\n{instruction}\n\n### Input:\n{input}\n\n### Response:"
    ),
    "prompt_no_input": (
        "Below is an instruction that describes a task. "
        "Write a response that appropriately completes the request.\n\n"
        "### Instruction:\n{instruction}\n\n### Response:"
    ),
}


def read(rel):
    with open(os.path.join(REPO, rel), "rb") as f:
        return f.read()


def source(example):
    """The prompt of an Alpaca record, as train.py's SupervisedDataset makes
    it."""
    if example.get("input", "") != "":
        return PROMPT_DICT["prompt_input"].format_map(example)
    return PROMPT_DICT["prompt_no_input"].format_map(example)


def format_example(sp, example):
    """One record's input_ids and labels (train.py's preprocess)."""
    src = source(example)
    input_ids = sp.encode(src + example["output"], add_bos=True) + [sp.eos_id()]
    source_len = len(sp.encode(src, add_bos=True))
    labels = list(input_ids)
    labels[:source_len] = [IGNORE_INDEX] * min(source_len, len(labels))
    return {"input_ids": input_ids, "labels": labels}


def outputs():
    model = read(TOKENIZER)
    sample = read(SAMPLE)
    sp = spm.SentencePieceProcessor(model_proto=model)
    assert sp.bos_id() == 1 and sp.eos_id() == 2, (sp.bos_id(), sp.eos_id())
    records = json.loads(sample.decode("utf-8"))
    examples = [format_example(sp, r) for r in records]
    for r, e in zip(records, examples):
        # EOS ends every example and is learned.
        assert e["labels"][-1] == sp.eos_id(), r
    doc = {
        "about": f"Alpaca-formatted examples of {SAMPLE} tokenized with {TOKENIZER}, written by {SCRIPT}",
        "tokenizer": TOKENIZER,
        "sample": SAMPLE,
        "files": {
            TOKENIZER: hashlib.sha256(model).hexdigest(),
            SAMPLE: hashlib.sha256(sample).hexdigest(),
        },
        "reference": {"sentencepiece": spm.__version__},
        "examples": examples,
    }
    data = json.dumps(doc, separators=(",", ":"), ensure_ascii=False) + "\n"
    return {GOLDEN: data.encode("utf-8")}


def main():
    return golden_files.main(__doc__, outputs, REPO, SCRIPT)


if __name__ == "__main__":
    sys.exit(main())
