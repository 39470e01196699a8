#!/usr/bin/env python3
"""Reference for zbench's tokenizer (models/tokenizer): SentencePiece itself
(Debian's python3-sentencepiece) for tokenizer.model, and Hugging Face's
tokenizers (through testdata/reference/tokenizer.mjs) for tokenizer.json.

Trains a tiny SentencePiece BPE model the way Llama's was made (byte
fallback, split digits, whitespace-only pieces allowed, identity
normalization, no removal of extra whitespace, the dummy prefix; unk 0,
bos 1, eos 2, no pad) with vocab_size 512 on text this project wrote
(testdata/reference/tokenizer_corpus.txt: the README and notes), converts it
to a tokenizer.json as transformers' LlamaConverter does (the Llama 2
layout: Prepend and Replace normalizer, byte-fallback BPE with fuse_unk,
merges from the pieces' scores, <unk> <s> </s> as special added tokens, the
<s> template, the Replace/ByteFallback/Fuse/Strip decoder), and records what
both reference libraries encode and decode.

Files written:

  testdata/golden/llama-tiny/tokenizer.model        the SentencePiece model
  testdata/golden/llama-tiny/tokenizer.json         its tokenizer.json
  testdata/golden/llama-tiny/tokenizer_config.json  add_bos_token true,
                                                    add_eos_token false
  testdata/golden/tokenizer-tiny.json               the expected results:
      "files": sha256 of the model and tokenizer.json they were made with;
      "cases": for each text of testdata/reference/tokenizer_cases.json,
          "spm" from SentencePiece (ids: encode with add_bos, plain: without,
          decoded: decode of ids) and "hf" from tokenizers (ids: with
          add_special_tokens, plain: without, decoded: decode of ids,
          skipping special tokens);
      "decodes": id sequences (byte-fallback runs whole, cut short, invalid
          and interrupted; special and unknown tokens; seeded random ones)
          with the text each library decodes them to.
  testdata/golden/tokenizer-variants/*.model, *.json
                                                    variants of the tiny
      tokenizer that exercise what Llama's does not: SentencePiece models
      with user-defined and control symbols and remove_extra_whitespaces,
      without byte fallback, without the dummy prefix, and with UNUSED
      pieces; tokenizer.json files with the Metaspace pre-tokenizer and
      decoder (every prepend_scheme, split or not, the old add_prefix_space
      form), added tokens with single_word, lstrip, rstrip and normalized,
      no byte fallback with and without fuse_unk, ignore_merges, no decoder
      or post-processor, and a template adding EOS;
  testdata/golden/tokenizer-variants.json          their expected results,
      as "cases" and "decodes" above, from the variant's own library.

Usage:

  /usr/bin/python3 testdata/reference/tokenizer.py           # write
  /usr/bin/python3 testdata/reference/tokenizer.py --check   # verify current

It needs python3-sentencepiece, Node.js and the npm package tokenizers:
scripts/install-tokenizer-ref.sh --golden installs them (make golden runs
it). Training is deterministic for a given SentencePiece version (one
thread, every sentence used), which --check relies on.
"""

import hashlib
import io
import json
import os
import random
import subprocess
import sys

import sentencepiece as spm

import golden_files

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = "testdata/reference/tokenizer.py"
CASES = "testdata/reference/tokenizer_cases.json"
CORPUS = "testdata/reference/tokenizer_corpus.txt"
TINY = "testdata/golden/llama-tiny"
GOLDEN = "testdata/golden/tokenizer-tiny.json"
SEED = 20240611

# Llama 2's trainer options, where they matter at this size.
TRAIN = dict(
    model_type="bpe",
    vocab_size=512,
    byte_fallback=True,
    split_digits=True,
    allow_whitespace_only_pieces=True,
    normalization_rule_name="identity",
    remove_extra_whitespaces=False,
    add_dummy_prefix=True,
    character_coverage=0.9995,
    max_sentencepiece_length=16,
    unk_id=0,
    bos_id=1,
    eos_id=2,
    pad_id=-1,
    num_threads=1,
    minloglevel=2,
)


VARIANTS = "testdata/golden/tokenizer-variants"
VARIANTS_GOLDEN = "testdata/golden/tokenizer-variants.json"


def path(rel):
    return os.path.join(REPO, rel)


def train(**options):
    """The tiny model (with options changed), as serialized ModelProto
    bytes."""
    with open(path(CORPUS), encoding="utf-8") as f:
        lines = [line for line in f.read().split("\n") if line.strip()]
    out = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=out, **dict(TRAIN, **options))
    return out.getvalue()


# The protobuf wire format, enough to change a piece's type (Debian's
# python3-sentencepiece comes without the protobuf runtime).

def _varint(data, i):
    v = shift = 0
    while True:
        b = data[i]
        i += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return v, i


def _put_varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _fields(data):
    """(number, wire type, raw field bytes, payload) of each field."""
    i = 0
    while i < len(data):
        start = i
        key, i = _varint(data, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _varint(data, i)
            payload = v
        elif wt == 1:
            payload, i = data[i:i + 8], i + 8
        elif wt == 2:
            n, i = _varint(data, i)
            payload, i = data[i:i + n], i + n
        elif wt == 5:
            payload, i = data[i:i + 4], i + 4
        else:
            raise ValueError(f"wire type {wt}")
        yield num, wt, data[start:i], payload


def set_piece_types(model_bytes, types):
    """The model with the pieces named in types (piece -> type number)
    given those types."""
    out = bytearray()
    for num, wt, raw, payload in _fields(model_bytes):
        if num == 1 and wt == 2:
            piece = next(p for n, _, _, p in _fields(payload) if n == 1).decode("utf-8")
            if piece in types:
                body = b"".join(r for n, _, r, _ in _fields(payload) if n != 3)
                body += _put_varint(3 << 3) + _put_varint(types[piece])
                raw = _put_varint(1 << 3 | 2) + _put_varint(len(body)) + body
        out += raw
    return bytes(out)


def merges_of(pieces):
    """Merges of a BPE vocabulary as transformers' SentencePieceExtractor
    makes them: every split of a piece into two pieces of the vocabulary,
    ordered by the score of the piece they make (highest first, stable),
    then by the ids of the two parts."""
    vocab = {p: i for i, (p, _) in enumerate(pieces)}
    merges = []
    for piece, score in pieces:
        local = []
        for k in range(1, len(piece)):
            left, right = piece[:k], piece[k:]
            if left in vocab and right in vocab:
                local.append((left, right, score))
        local.sort(key=lambda m: (vocab[m[0]], vocab[m[1]]))
        merges.extend(local)
    merges.sort(key=lambda m: m[2], reverse=True)
    return [[a, b] for a, b, _ in merges]


def to_tokenizer_json(model_bytes):
    """The tokenizer.json of the model, in the Llama 2 layout."""
    return dump_json(tokenizer_doc(model_bytes))


def dump_json(doc):
    return (json.dumps(doc, ensure_ascii=False, indent=1) + "\n").encode("utf-8")


def tokenizer_doc(model_bytes):
    sp = spm.SentencePieceProcessor(model_proto=model_bytes)
    ids = range(sp.get_piece_size())
    pieces = [(sp.id_to_piece(i), sp.get_score(i)) for i in ids]
    added = [
        {"id": i, "content": sp.id_to_piece(i), "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True}
        for i in ids if sp.is_control(i) or sp.is_unknown(i)
    ]
    doc = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
        ]},
        "pre_tokenizer": None,
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "<s>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}},
        },
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "ByteFallback"},
            {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0},
        ]},
        "model": {
            "type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
            "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
            "vocab": {p: i for i, (p, _) in enumerate(pieces)},
            "merges": merges_of(pieces),
        },
    }
    return doc


CONFIG = (json.dumps({
    "add_bos_token": True,
    "add_eos_token": False,
    "bos_token": "<s>",
    "eos_token": "</s>",
    "unk_token": "<unk>",
    "legacy": True,
    "model_max_length": 64,
    "tokenizer_class": "LlamaTokenizer",
}, indent=1) + "\n").encode("utf-8")


def cases():
    with open(path(CASES), encoding="utf-8") as f:
        out = []
        for c in json.load(f)["cases"]:
            text = c.get("text")
            if "file" in c:
                with open(path(c["file"]), encoding="utf-8", newline="") as g:
                    text = g.read()
            out.append((c["name"], text))
        return out


def decode_sequences(sp, random_count=300):
    """Id sequences whose decoding is checked (the recipe of tokenizer.mjs,
    with Python's generator for the random ones)."""
    def byte(b):
        return sp.piece_to_id("<0x%02X>" % b)

    def bs(*v):
        return [byte(b) for b in v]

    bos, eos, unk, space = sp.bos_id(), sp.eos_id(), sp.unk_id(), sp.piece_to_id("\u2581")
    seqs = [
        [],
        bs(0xF0, 0x9F, 0xA6, 0x99),
        bs(0xF0, 0x9F),
        bs(0x80),
        bs(0xFF),
        bs(0x41, 0xE4),
        bs(0xE4, 0x41),
        bs(0xE4, 0xBD, 0xA0, 0xE4),
        bs(0xE4, 0xBD) + [space, byte(0xA0)],
        bs(0xE4, 0xBD) + [eos, byte(0xA0)],
        bs(0xE4, 0xBD) + [bos] + bs(0xA0, 0x0A),
        [byte(0x0A), eos],
        [space, space],
        [bos, space, space],
        [bos, bos, space, byte(0x41)],
        [eos, space, byte(0x20)],
        [unk],
        [space, unk, space, unk, unk],
    ]
    rng = random.Random(SEED)
    for _ in range(random_count):
        seq = []
        for _ in range(rng.randint(1, 24)):
            r = rng.random()
            if r < 0.3:
                seq.append(byte(rng.randrange(256)))
            elif r < 0.4:
                seq.append(rng.choice([bos, eos, unk, space]))
            else:
                seq.append(rng.randrange(sp.get_piece_size()))
        seqs.append(seq)
    return seqs


def hf_expect(tokenizer_json, texts, decodes):
    """What tokenizers gives, through tokenizer.mjs --expect."""
    node_dir = os.environ.get("ZBENCH_TOKENIZER_REF", path(".cache/tokenizer-ref"))
    if not os.path.isdir(os.path.join(node_dir, "node_modules", "tokenizers")):
        sys.exit(f"{SCRIPT}: no npm package tokenizers under {node_dir}: run scripts/install-tokenizer-ref.sh --golden")
    tmp = path(".cache/tokenizer-tiny.json")
    os.makedirs(os.path.dirname(tmp), exist_ok=True)
    with open(tmp, "wb") as f:
        f.write(tokenizer_json)
    req = json.dumps({"texts": texts, "decodes": decodes}, ensure_ascii=False)
    res = subprocess.run(["node", path("testdata/reference/tokenizer.mjs"), "--expect", tmp],
                         input=req.encode("utf-8"), capture_output=True, check=False)
    os.remove(tmp)
    if res.returncode != 0:
        sys.exit(f"{SCRIPT}: tokenizer.mjs failed: {res.stderr.decode()}")
    return json.loads(res.stdout), tokenizers_version(node_dir)


def tokenizers_version(node_dir):
    with open(os.path.join(node_dir, "node_modules", "tokenizers", "package.json")) as f:
        return json.load(f)["version"]


def golden(model_bytes, tokenizer_json):
    sp = spm.SentencePieceProcessor(model_proto=model_bytes)
    named = cases()
    texts = [t for _, t in named]
    decodes = decode_sequences(sp)
    hf, hf_version = hf_expect(tokenizer_json, texts, decodes)

    lines = ["{"]
    lines.append(' "about": ' + json.dumps(
        f"Expected encodings and decodings of {TINY}/tokenizer.model (SentencePiece) and tokenizer.json "
        f"(tokenizers), written by {SCRIPT}") + ",")
    lines.append(' "reference": ' + json.dumps(
        {"sentencepiece": spm.__version__, "tokenizers": hf_version + " (npm)"}) + ",")
    lines.append(' "files": ' + json.dumps({
        "tokenizer.model": hashlib.sha256(model_bytes).hexdigest(),
        "tokenizer.json": hashlib.sha256(tokenizer_json).hexdigest(),
    }) + ",")
    lines.append(' "cases": [')
    for i, (name, text) in enumerate(named):
        ids = sp.encode(text, add_bos=True)
        case = {
            "name": name,
            "text": text,
            "spm": {"ids": ids, "plain": sp.encode(text), "decoded": sp.decode(ids)},
            "hf": hf["encode"][i],
        }
        lines.append("  " + json.dumps(case, ensure_ascii=False) + ("," if i + 1 < len(named) else ""))
    lines.append(" ],")
    lines.append(' "decodes": [')
    for i, ids in enumerate(decodes):
        d = {"ids": ids, "spm": sp.decode(ids), "hf": hf["decode"][i]}
        lines.append("  " + json.dumps(d, ensure_ascii=False) + ("," if i + 1 < len(decodes) else ""))
    lines.append(" ]")
    lines.append("}")
    return ("\n".join(lines) + "\n").encode("utf-8")


def without_bytes(seqs, size):
    """The sequences with ids a vocabulary of size pieces lacks left out
    (a model without byte pieces has no <0xXX> ids: piece_to_id gives unk)."""
    return [[i for i in s if i < size] for s in seqs]


def spm_variants(model):
    """SentencePiece variants of the tiny model: name -> model bytes."""
    sp = spm.SentencePieceProcessor(model_proto=model)
    # Merged pieces the cases use, made UNUSED: SentencePiece still merges
    # into them and then splits them back into the pieces they came from.
    unused = {p: 5 for p in ["\u2581t", "er", "\u2581the", "ing", "\u2581a"] if sp.piece_to_id(p) != sp.unk_id()}
    return {
        "spm-user-defined": train(user_defined_symbols=["<tool>", "zbench", "\u2581\u2581\u2581\u2581"],
                                  control_symbols=["<ctrl>"], remove_extra_whitespaces=True),
        "spm-no-byte-fallback": train(byte_fallback=False, vocab_size=400),
        "spm-no-dummy-prefix": train(add_dummy_prefix=False),
        "spm-unused": set_piece_types(model, unused),
    }


def hf_variants(doc):
    """tokenizer.json variants of the tiny tokenizer: name -> document."""
    def variant(change):
        d = json.loads(json.dumps(doc))
        change(d)
        return d

    def metaspace(scheme, split, decoder=True, legacy=False):
        def change(d):
            d["normalizer"] = None
            pre = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": scheme, "split": split}
            if legacy:
                pre = {"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": scheme != "never"}
            d["pre_tokenizer"] = pre
            if decoder:
                d["decoder"] = {"type": "Sequence", "decoders": [{"type": "ByteFallback"}, dict(pre)]}
        return change

    def added(d):
        def tok(content, **flags):
            t = {"id": None, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
                 "normalized": False, "special": False}
            t.update(flags)
            return t
        extra = [tok("zbench", single_word=True), tok("<tool>", lstrip=True, rstrip=True),
                 tok("benchmark", normalized=True), tok("<ctrl>", special=True), tok("ctrl", normalized=True)]
        n = len(d["model"]["vocab"])
        for t in extra:
            t["id"] = d["model"]["vocab"].get(t["content"], n)
            if t["content"] not in d["model"]["vocab"]:
                n += 1
        d["added_tokens"] += extra

    def no_fallback(fuse):
        def change(d):
            m = d["model"]
            m["byte_fallback"] = False
            m["fuse_unk"] = fuse
        return change

    def no_decoder(d):
        d["decoder"] = None
        d["post_processor"] = None

    def eos_template(d):
        d["post_processor"]["single"].append({"SpecialToken": {"id": "</s>", "type_id": 0}})
        d["post_processor"]["special_tokens"]["</s>"] = {"id": "</s>", "ids": [2], "tokens": ["</s>"]}

    def ignore_merges(d):
        d["model"]["ignore_merges"] = True

    return {
        "hf-metaspace-first": variant(metaspace("first", False)),
        "hf-metaspace-always-split": variant(metaspace("always", True)),
        "hf-metaspace-never": variant(metaspace("never", True)),
        "hf-metaspace-add-prefix-space": variant(metaspace("always", True, legacy=True)),
        "hf-added-tokens": variant(added),
        "hf-no-byte-fallback": variant(no_fallback(False)),
        "hf-no-byte-fallback-fuse-unk": variant(no_fallback(True)),
        "hf-ignore-merges": variant(ignore_merges),
        "hf-no-decoder": variant(no_decoder),
        "hf-eos-template": variant(eos_template),
    }


def variants_golden(model, doc):
    """The variants' files and their expected results."""
    files = {}
    entries = []
    texts = [(n, t) for n, t in cases() if n != "corpus"]
    sp = spm.SentencePieceProcessor(model_proto=model)
    decodes = decode_sequences(sp, random_count=60)
    for name, data in spm_variants(model).items():
        rel = f"{VARIANTS}/{name}.model"
        files[rel] = data
        v = spm.SentencePieceProcessor(model_proto=data)
        seqs = without_bytes(decodes, v.get_piece_size())
        entries.append({
            "name": name, "file": os.path.basename(rel), "sha256": hashlib.sha256(data).hexdigest(),
            "cases": [{"name": n, "text": t, "ids": v.encode(t, add_bos=True), "plain": v.encode(t),
                       "decoded": v.decode(v.encode(t, add_bos=True))} for n, t in texts],
            "decodes": [{"ids": s, "text": v.decode(s)} for s in seqs],
        })
    for name, d in hf_variants(doc).items():
        rel = f"{VARIANTS}/{name}.json"
        data = dump_json(d)
        files[rel] = data
        res, _ = hf_expect(data, [t for _, t in texts], decodes)
        entries.append({
            "name": name, "file": os.path.basename(rel), "sha256": hashlib.sha256(data).hexdigest(),
            "cases": [dict(name=n, text=t, **res["encode"][i]) for i, (n, t) in enumerate(texts)],
            "decodes": [{"ids": s, "text": res["decode"][i]} for i, s in enumerate(decodes)],
        })
    lines = ["{", ' "about": ' + json.dumps(
        f"Expected encodings and decodings of the tokenizer variants in {VARIANTS}, each from its own "
        f"reference library (SentencePiece for .model, tokenizers for .json), written by {SCRIPT}") + ",",
        ' "variants": [']
    for i, e in enumerate(entries):
        lines.append("  " + json.dumps(e, ensure_ascii=False) + ("," if i + 1 < len(entries) else ""))
    lines += [" ]", "}"]
    files[VARIANTS_GOLDEN] = ("\n".join(lines) + "\n").encode("utf-8")
    return files


def outputs():
    model = train()
    tj = to_tokenizer_json(model)
    out = {
        f"{TINY}/tokenizer.model": model,
        f"{TINY}/tokenizer.json": tj,
        f"{TINY}/tokenizer_config.json": CONFIG,
        GOLDEN: golden(model, tj),
    }
    out.update(variants_golden(model, tokenizer_doc(model)))
    return out


def main():
    return golden_files.main(__doc__, outputs, REPO, SCRIPT)



if __name__ == "__main__":
    sys.exit(main())
