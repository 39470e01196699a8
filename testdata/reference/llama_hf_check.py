"""Checks testdata/reference/llama.py against Hugging Face transformers'
LlamaForCausalLM, on a host that has transformers (the GPU host; it is not
installable here).

Every case of testdata/golden/llama.safetensors (llama.py's float64 logits)
is run through transformers' model loaded with the same weights (the tiny
checkpoint's file, or the case's seeded synthetic weights built by llama.py,
rounded through its gguf_type where it has one) with position_ids from the
attention mask as generate computes them, in float64 and float32, eager
attention and SDPA; the logits of the real positions must agree within
1e-5 (float64: HF rounds RMSNorm and the softmax to float32) and 1e-4
(float32). Then transformers' greedy generate
on the tiny checkpoint, each prompt of testdata/golden/llama-generate
.safetensors alone and the three batched with left padding, must give the
golden's ids exactly.

  python3 testdata/reference/llama_hf_check.py [--device cuda] [--skip-tinyllama]

Prints one line per check and exits 1 if any fails, 2 without transformers.
"""

import argparse
import contextlib
import json
import os
import sys

import torch

import bert as bert_ref
import llama as llama_ref

GOLDEN = os.path.join(llama_ref.REPO, "testdata", "golden", "llama.safetensors")
GEN_GOLDEN = os.path.join(llama_ref.REPO, "testdata", "golden", "llama-generate.safetensors")
TOL = {torch.float64: 1e-5, torch.float32: 1e-4}


def hf_model(transformers, cfg_dict, state_dict, attn, dtype, device):
    """transformers' LlamaForCausalLM of the config with state_dict's
    weights (HF names; no lm_head.weight when tied), with the attention
    implementation attn, in dtype on device (also the peer's, in
    baselines/peers/torch_bench.py --llama hf)."""
    cfg = transformers.LlamaConfig(**cfg_dict)
    # Built on the device (torch 2's device context): the default
    # initialization, which load_state_dict overwrites, then runs there, in
    # milliseconds on a GPU instead of seconds on the host.
    where = torch.device(device) if hasattr(torch, "set_default_device") else contextlib.nullcontext()
    with where:
        model = transformers.LlamaForCausalLM._from_config(cfg, attn_implementation=attn, torch_dtype=torch.float32)
    missing, unexpected = model.load_state_dict(state_dict, strict=False)
    allowed = {"lm_head.weight"} if cfg.tie_word_embeddings else set()
    if set(missing) - allowed or unexpected:
        raise ValueError(f"transformers' LlamaForCausalLM: missing {missing}, unexpected {unexpected}")
    if cfg.tie_word_embeddings and model.lm_head.weight.data_ptr() != model.model.embed_tokens.weight.data_ptr():
        raise ValueError("tie_word_embeddings: lm_head is not embed_tokens")
    return model.to(device=device, dtype=dtype).eval()


def case_weights(meta):
    """The state_dict of a golden case's weights, float32 on the CPU."""
    cfg = llama_ref.LlamaConfig.from_dict(meta["config"])
    model = llama_ref.LlamaForCausalLM(cfg)
    if meta["weights"] == "synthetic":
        llama_ref.synthetic_(model, meta["seed"])
    else:
        path = os.path.join(llama_ref.REPO, meta["weights"], "model.safetensors")
        _, tensors = bert_ref.parse_safetensors(open(path, "rb").read())
        model.load_state_dict(tensors)
    if meta.get("gguf_type"):
        llama_ref.gguf_round_(model, meta["gguf_type"])
    return model.state_dict()


def generate_positions(mask):
    """position_ids as transformers' generate computes them from the mask."""
    pos = mask.long().cumsum(-1) - 1
    return pos.masked_fill_(mask == 0, 1)


def rel_err(got, want):
    return float((got - want).norm() / want.norm())


@torch.no_grad()
def check_logits(transformers, device, skip):
    meta, tensors = bert_ref.parse_safetensors(open(GOLDEN, "rb").read())
    failed = 0
    for case in sorted(k for k in meta if k not in ("reference", "script", "format")):
        if case in skip:
            print(f"logits {case}: skipped (--skip-tinyllama)")
            continue
        m = json.loads(meta[case])
        sd = case_weights(m)
        ids = tensors[case + "/input_ids"].long().to(device)
        mask = tensors[case + "/attention_mask"].long().to(device)
        real = mask.bool().cpu()
        want = tensors[case + "/logits"].double()[real]
        for dtype in (torch.float64, torch.float32):
            for attn in ("eager", "sdpa"):
                model = hf_model(transformers, m["config"], sd, attn, dtype, device)
                out = model(input_ids=ids, attention_mask=mask, position_ids=generate_positions(mask), use_cache=False)
                err = rel_err(out.logits.double().cpu()[real], want)
                if err != err and attn == "eager" and dtype == torch.float64 and not real.all():
                    # Seen with transformers 5.17 on an H200: eager float64
                    # attention with padding gives NaN logits at the real
                    # positions too (and greedy generate all-zero ids for
                    # the padded rows), where SDPA and float32 agree with
                    # the reference: transformers', not ours to compare.
                    print(f"logits {case} float64 eager: not compared (transformers' eager float64 attention gives NaN with padding)")
                    del model
                    continue
                ok = err <= TOL[dtype]
                failed += not ok
                print(f"logits {case} {str(dtype)[6:]} {attn}: rel-err {err:.3g} (tolerance {TOL[dtype]:g}) {'ok' if ok else 'FAIL'}")
                del model
        del sd
    return failed


@torch.no_grad()
def check_generate(transformers, device):
    _, gen = bert_ref.parse_safetensors(open(GEN_GOLDEN, "rb").read())
    prompts, want = [], []
    for i in range(3):
        prompts.append(gen[f"prompt{i}/prompt_ids"].tolist())
        want.append(gen[f"prompt{i}/ids"].tolist())
    new = len(want[0])
    sd = case_weights({"config": llama_ref.TINY_CONFIG, "weights": llama_ref.TINY_DIR})
    # SDPA: eager float64 attention in transformers gives NaN with left
    # padding (check_logits).
    model = hf_model(transformers, llama_ref.TINY_CONFIG, sd, "sdpa", torch.float64, device)
    failed = 0

    def run(batch):
        L = max(len(p) for p in batch)
        ids = torch.zeros(len(batch), L, dtype=torch.int64)
        mask = torch.zeros(len(batch), L, dtype=torch.int64)
        for b, p in enumerate(batch):
            ids[b, L - len(p):] = torch.tensor(p)
            mask[b, L - len(p):] = 1
        out = model.generate(input_ids=ids.to(device), attention_mask=mask.to(device), do_sample=False,
                             max_new_tokens=new, min_new_tokens=new, pad_token_id=0)
        return [row[L:].tolist() for row in out.cpu()]

    for i, p in enumerate(prompts):
        got = run([p])[0]
        failed += got != want[i]
        print(f"generate prompt{i} alone: {'ids equal' if got == want[i] else f'FAIL: {got} != {want[i]}'}")
    got = run(prompts)
    failed += got != want
    print(f"generate batched, left padding: {'ids equal' if got == want else f'FAIL: {got} != {want}'}")
    return failed


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--skip-tinyllama", action="store_true", help="leave out the TinyLlama-1.1B cases (4.4 GB of weights)")
    args = ap.parse_args()
    try:
        import transformers
    except ImportError:
        print("llama_hf_check: transformers is not installed (run it on the GPU host)", file=sys.stderr)
        return 2
    print(f"transformers {transformers.__version__}, torch {torch.__version__}, device {args.device}")
    torch.manual_seed(0)
    skip = {"tinyllama", "tinyllama_q4_0"} if args.skip_tinyllama else set()
    failed = check_logits(transformers, args.device, skip) + check_generate(transformers, args.device)
    print("llama_hf_check: " + ("PASS" if not failed else f"{failed} FAILED"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
