#!/usr/bin/env node
// Reference for tokenizer.json: Hugging Face's tokenizers library (the npm
// package "tokenizers", Rust compiled for Node) encodes and decodes what
// zbench's models/tokenizer must encode and decode identically.
//
// Usage:
//
//   node testdata/reference/tokenizer.mjs --llama2 OUTDIR
//       Rebuilds Llama 2's tokenizer.json from the vocabulary and merges
//       inside the npm package llama-tokenizer-js (the Llama 2 / TinyLlama
//       vocabulary, 32000 tokens and 61249 merges), in the two layouts of the
//       Hugging Face checkpoints: OUTDIR/tokenizer.json as Llama 2's (legacy:
//       a Prepend and Replace normalizer, merges as "a b" strings) and
//       OUTDIR/metaspace/tokenizer.json as transformers writes with
//       legacy=false (no normalizer, a Metaspace pre-tokenizer with
//       prepend_scheme "first" and split false, merges as [a, b] pairs), each
//       with a tokenizer_config.json; then writes OUTDIR/expected.json: for
//       each layout, what tokenizers gives for the cases of
//       testdata/reference/tokenizer_cases.json, README.md and a set of id
//       sequences to decode. The vocabulary is Meta's: OUTDIR belongs under
//       .cache/ and is never committed (scripts/install-tokenizer-ref.sh).
//
//   node testdata/reference/tokenizer.mjs --expect TOKENIZER_JSON
//       Reads {"texts": [...], "decodes": [[id, ...], ...]} on stdin and
//       prints {"encode": [{"ids", "plain", "decoded"}], "decode": [text]}:
//       for each text its ids with the special tokens added (tokenizers'
//       add_special_tokens) and without, and the decoding of the former;
//       for each id sequence its text. Decoding skips special tokens.
//       testdata/reference/tokenizer.py uses it for the tiny goldens.
//
// The packages are found in $ZBENCH_TOKENIZER_REF/node_modules (default
// .cache/tokenizer-ref/node_modules), where scripts/install-tokenizer-ref.sh
// puts them.

import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const REF = process.env.ZBENCH_TOKENIZER_REF || path.join(ROOT, '.cache', 'tokenizer-ref');
const MODULES = path.join(REF, 'node_modules');

function die(msg) {
  process.stderr.write(`tokenizer.mjs: ${msg}\n`);
  process.exit(1);
}

function loadTokenizers() {
  const dir = path.join(MODULES, 'tokenizers');
  if (!fs.existsSync(dir)) die(`no ${dir}: run scripts/install-tokenizer-ref.sh`);
  const require = createRequire(import.meta.url);
  const pkg = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'));
  return { Tokenizer: require(dir).Tokenizer, version: pkg.version };
}

// encodeAll returns, for each text, its ids with and without special tokens
// and the decoding (skipping special tokens) of the former, and the
// decoding of each id sequence.
async function encodeAll(tok, texts, decodes) {
  const encode = [];
  for (const text of texts) {
    const ids = (await tok.encode(text, null, { addSpecialTokens: true })).getIds();
    const plain = (await tok.encode(text, null, { addSpecialTokens: false })).getIds();
    encode.push({ ids, plain, decoded: await tok.decode(ids, true) });
  }
  const decode = [];
  for (const ids of decodes) decode.push(await tok.decode(ids, true));
  return { encode, decode };
}

function readStdin() {
  return fs.readFileSync(0, 'utf8');
}

async function expect(file) {
  const { Tokenizer } = loadTokenizers();
  const tok = Tokenizer.fromFile(file);
  const req = JSON.parse(readStdin());
  const res = await encodeAll(tok, req.texts, req.decodes);
  process.stdout.write(JSON.stringify(res) + '\n');
}

// Mulberry32: a small seeded generator, so that the id sequences are the
// same on every run.
function mulberry32(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// decodeSequences returns the id sequences whose decoding is checked:
// byte-fallback runs (complete, cut short, invalid, interrupted by other
// tokens), spaces at the start, special and unknown tokens, and seeded
// random sequences over the whole vocabulary with many byte tokens.
function decodeSequences(id, size) {
  const byte = (b) => id(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`);
  const bytes = (...bs) => bs.map(byte);
  const [bos, eos, unk, sp] = [id('<s>'), id('</s>'), id('<unk>'), id('▁')];
  const seqs = [
    [],
    bytes(0xf0, 0x9f, 0xa6, 0x99),
    bytes(0xf0, 0x9f),
    bytes(0x80),
    bytes(0xff),
    bytes(0x41, 0xe4),
    bytes(0xe4, 0x41),
    bytes(0xe4, 0xbd, 0xa0, 0xe4),
    [...bytes(0xe4, 0xbd), sp, byte(0xa0)],
    [...bytes(0xe4, 0xbd), eos, byte(0xa0)],
    [...bytes(0xe4, 0xbd), bos, ...bytes(0xa0, 0x0a)],
    [byte(0x0a), eos],
    [sp, sp],
    [bos, sp, sp],
    [bos, bos, sp, byte(0x41)],
    [eos, sp, byte(0x20)],
    [unk],
    [sp, unk, sp, unk, unk],
  ];
  const rand = mulberry32(20240611);
  const pick = (n) => Math.floor(rand() * n);
  for (let i = 0; i < 300; i++) {
    const n = 1 + pick(24);
    const seq = [];
    for (let j = 0; j < n; j++) {
      const r = rand();
      if (r < 0.3) seq.push(byte(pick(256)));
      else if (r < 0.4) seq.push([bos, eos, unk, sp][pick(4)]);
      else seq.push(pick(size));
    }
    seqs.push(seq);
  }
  return seqs;
}

async function llama2(outDir) {
  const { Tokenizer, version } = loadTokenizers();
  const ltDir = path.join(MODULES, 'llama-tokenizer-js');
  if (!fs.existsSync(ltDir)) die(`no ${ltDir}: run scripts/install-tokenizer-ref.sh`);
  const lt = JSON.parse(fs.readFileSync(path.join(ltDir, 'package.json'), 'utf8'));
  const mod = await import(pathToFileURL(path.join(ltDir, lt.main)).href);
  const data = mod.default;
  const vocabList = data.vocabById;
  if (vocabList.length !== 32000) die(`llama-tokenizer-js has ${vocabList.length} tokens, want 32000`);
  if (vocabList[29871] !== '▁' || vocabList[15043] !== '▁Hello') die('llama-tokenizer-js is not the Llama 2 vocabulary');
  const vocab = {};
  vocabList.forEach((t, i) => {
    if (Object.hasOwn(vocab, t)) die(`token ${JSON.stringify(t)} twice`);
    if (t.includes(' ')) die(`token ${JSON.stringify(t)} holds a space`);
    vocab[t] = i;
  });
  // data.merges maps "a b" to its priority, in merge order.
  const merges = [...data.merges.keys()];
  if (merges.length !== 61249) die(`llama-tokenizer-js has ${merges.length} merges, want 61249`);

  const added = (id, content) => ({
    id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true,
  });
  const common = {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: [added(0, '<unk>'), added(1, '<s>'), added(2, '</s>')],
  };
  const post = {
    type: 'TemplateProcessing',
    single: [{ SpecialToken: { id: '<s>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
    pair: [
      { SpecialToken: { id: '<s>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } },
      { SpecialToken: { id: '<s>', type_id: 1 } }, { Sequence: { id: 'B', type_id: 1 } },
    ],
    special_tokens: { '<s>': { id: '<s>', ids: [1], tokens: ['<s>'] } },
  };
  const decoder = {
    type: 'Sequence',
    decoders: [
      { type: 'Replace', pattern: { String: '▁' }, content: ' ' },
      { type: 'ByteFallback' },
      { type: 'Fuse' },
      { type: 'Strip', content: ' ', start: 1, stop: 0 },
    ],
  };
  const model = (mergesOut) => ({
    type: 'BPE', dropout: null, unk_token: '<unk>', continuing_subword_prefix: null,
    end_of_word_suffix: null, fuse_unk: true, byte_fallback: true, vocab, merges: mergesOut,
  });
  const layouts = {
    legacy: {
      dir: outDir,
      json: {
        ...common,
        normalizer: {
          type: 'Sequence',
          normalizers: [
            { type: 'Prepend', prepend: '▁' },
            { type: 'Replace', pattern: { String: ' ' }, content: '▁' },
          ],
        },
        pre_tokenizer: null,
        post_processor: post,
        decoder,
        model: model(merges),
      },
    },
    metaspace: {
      dir: path.join(outDir, 'metaspace'),
      json: {
        ...common,
        normalizer: null,
        pre_tokenizer: { type: 'Metaspace', replacement: '▁', prepend_scheme: 'first', split: false },
        post_processor: post,
        decoder,
        model: { ...model(merges.map((m) => m.split(' '))), ignore_merges: false },
      },
    },
  };
  const config = {
    add_bos_token: true, add_eos_token: false, bos_token: '<s>', eos_token: '</s>',
    unk_token: '<unk>', tokenizer_class: 'LlamaTokenizer', model_max_length: 2048,
  };

  const cases = JSON.parse(fs.readFileSync(path.join(ROOT, 'testdata', 'reference', 'tokenizer_cases.json'), 'utf8')).cases
    .map((c) => ({ name: c.name, text: c.file ? fs.readFileSync(path.join(ROOT, c.file), 'utf8') : c.text }));
  cases.push({ name: 'readme', text: fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8') });
  const texts = cases.map((c) => c.text);

  const expected = {
    about: 'Encodings and decodings of Llama 2\'s tokenizer.json by Hugging Face\'s tokenizers, written by testdata/reference/tokenizer.mjs --llama2',
    reference: `tokenizers ${version} (npm), vocabulary from llama-tokenizer-js ${lt.version}`,
    layouts: {},
  };
  for (const [name, layout] of Object.entries(layouts)) {
    fs.mkdirSync(layout.dir, { recursive: true });
    const file = path.join(layout.dir, 'tokenizer.json');
    fs.writeFileSync(file, JSON.stringify(layout.json, null, 2) + '\n');
    fs.writeFileSync(path.join(layout.dir, 'tokenizer_config.json'),
      JSON.stringify({ ...config, legacy: name === 'legacy' }, null, 2) + '\n');
    const tok = Tokenizer.fromFile(file);
    const idOf = (t) => {
      const v = tok.tokenToId(t);
      if (v === null || v === undefined) die(`no token ${t}`);
      return v;
    };
    const decodes = decodeSequences(idOf, tok.getVocabSize(true));
    const res = await encodeAll(tok, texts, decodes);
    expected.layouts[name] = {
      file: path.relative(outDir, file),
      cases: cases.map((c, i) => ({ name: c.name, text: c.text, ...res.encode[i] })),
      decodes: decodes.map((ids, i) => ({ ids, text: res.decode[i] })),
    };
    process.stderr.write(`tokenizer.mjs: ${file}: ${cases.length} texts, ${decodes.length} id sequences\n`);
  }
  fs.writeFileSync(path.join(outDir, 'expected.json'), JSON.stringify(expected) + '\n');
}

const args = process.argv.slice(2);
if (args.length === 2 && args[0] === '--llama2') {
  await llama2(path.resolve(args[1]));
} else if (args.length === 2 && args[0] === '--expect') {
  await expect(args[1]);
} else {
  die('usage: tokenizer.mjs --llama2 OUTDIR | --expect TOKENIZER_JSON');
}
