"""BenchmarkBERT and BenchmarkBERTTrain: BERT-base inference and the 6-layer training step."""

from torchpeer.harness import *  # noqa: F401,F403  the shared timing, guard and helpers
from torchpeer.matmul import use_int8_engine

BERT_SEED = bert_ref.BASE_SEED
BERT_BASE = bert_ref.BASE_CONFIG
BERT_TRAIN = dict(bert_ref.BASE_CONFIG, num_hidden_layers=6)  # BenchmarkBERTTrain's 6 layers
BERT_MASK_ID = 103  # [MASK] of bert-base-uncased's vocabulary
BERT_TRAIN_SEQ = 128
BERT_TRAIN_LR, BERT_TRAIN_WD = 1e-4, 0.01

_bert_weights = {}


def bert_weights(kind):
    """The float32 CPU state dict of the synthetic weights of "base"
    (BertModel) or "train" (the 6-layer BertForMaskedLM), made once."""
    if kind not in _bert_weights:
        if kind == "base":
            m = bert_ref.BertModel(bert_ref.BertConfig.from_dict(BERT_BASE))
        else:
            m = bert_ref.BertForMaskedLM(bert_ref.BertConfig.from_dict(BERT_TRAIN))
        _bert_weights[kind] = bert_ref.synthetic_(m, BERT_SEED).state_dict()
    return _bert_weights[kind]


def bert_cases(short, gpu):
    """BenchmarkBERT's (dtype, batch, seq): f32 and int8 on CPUs (int8 is
    dynamic quantization, which runs on CPUs only); every float dtype on
    GPUs."""
    if not gpu:
        points = [(1, 128)] if short else [(1, 128), (8, 128), (1, 384)]
        return [(dt, b, s) for dt in ("f32", "int8") for b, s in points]
    if short:
        return [("f32", 1, 128), ("f16", 8, 128)]
    return [(dt, b, s) for dt in ("f32", "f16", "bf16", "mixed") for b in (1, 8, 32) for s in (128, 384)]


def bert_train_cases(short, gpu):
    """BenchmarkBERTTrain's (dtype, batch) at seq 128."""
    if not gpu:
        return [("f32", 1)] if short else [("f32", 8)]
    if short:
        return [("f32", 8)]
    return [(dt, b) for dt in ("f32", "bf16") for b in (8, 32)]


def bert_inputs(cfg, batch, seq):
    """BenchmarkBERT's peer inputs on the CPU: [batch, seq] random ids
    (seeded), an all-ones attention mask and zero token types, int64."""
    g = torch.Generator().manual_seed(21)
    ids = torch.randint(0, cfg.vocab_size, (batch, seq), generator=g)
    return ids, torch.ones_like(ids), torch.zeros_like(ids)


def bert_setup(ctx, dt, batch, seq):
    """BERT-base inference of [batch, seq] random ids; dtype=int8 is the
    float32 model under quantize_dynamic (nn.Linear to qint8)."""
    need_f16(ctx, dt)
    if dt == "int8" and ctx.cuda:
        raise NotImplementedError("dynamic quantization (quantize_dynamic) runs on CPUs only")
    cfg = bert_ref.BertConfig.from_dict(BERT_BASE)
    dev = ctx.device
    wdtype = torch.float32 if dt in ("mixed", "int8") else DTYPES[dt]
    model = bert_ref.BertModel(cfg, sdpa=ctx.has_sdpa, attn_dtype=torch.float16 if dt == "mixed" else None)
    model.load_state_dict(bert_weights("base"))
    model.to(device=dev, dtype=wdtype).eval()
    ids, mask, types = (t.to(dev) for t in bert_inputs(cfg, batch, seq))
    if dt == "int8":
        # Eager mode quantization, eager under --compile too.
        use_int8_engine()
        model = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
        fwd = model
    else:
        fwd = ctx.wrap(lambda a, m, t: model(a, m, t))
    box = [None]

    def op():
        with torch.no_grad():
            box[0] = fwd(ids, mask, types)

    def check():
        rows = sorted({0, batch - 1})
        ref = bert_ref.BertModel(cfg)
        if dt == "int8":  # the unquantized weights
            ref.load_state_dict(bert_weights("base"))
        else:
            ref.load_state_dict({k: v.float() for k, v in model.state_dict().items()})
        ref.to(device=dev, dtype=torch.float64).eval()
        with torch.no_grad():
            h, p = ref(ids[rows], mask[rows], types[rows])
        want = torch.cat([h.flatten(), p.flatten()])
        del ref, h, p
        free_device_memory(ctx)
        h, p = box[0]
        return rel_err(torch.cat([h[rows].flatten(), p[rows].flatten()]), want)

    return Work(op, check, rates=[(batch, "seq/s")], peak=True)


def bert_train_setup(ctx, dt, batch, seq=BERT_TRAIN_SEQ):
    """One AdamW step of the 6-layer BertForMaskedLM on a fixed [batch, seq]
    batch."""
    need_f16(ctx, dt)
    if dt == "bf16" and not ctx.cuda:
        raise NotImplementedError("bf16 training (autocast) runs on CUDA only")
    cfg = bert_ref.BertConfig.from_dict(BERT_TRAIN)
    dev = ctx.device
    model = bert_ref.BertForMaskedLM(cfg, sdpa=ctx.has_sdpa)
    model.load_state_dict(bert_weights("train"))
    model.to(dev).train()  # the modules have no dropout
    ids, types, labels = bert_ref.mlm_batch(torch.Generator().manual_seed(22), cfg, batch, seq, BERT_MASK_ID)
    ids, types, labels = ids.to(dev), types.to(dev), labels.to(dev)
    mask = torch.ones_like(ids)

    # The float64 logits of the first row under the initial weights, kept
    # on the CPU (outside peak-B).
    ref = bert_ref.BertForMaskedLM(cfg)
    ref.load_state_dict(model.state_dict())
    ref.to(device=dev, dtype=torch.float64)
    with torch.no_grad():
        want = ref(ids[:1], mask[:1], types[:1])[1][0].cpu()
    del ref
    free_device_memory(ctx)

    params = list(model.parameters())
    opt = torch.optim.AdamW([{"params": [p for p in params if p.dim() >= 2], "weight_decay": BERT_TRAIN_WD},
                             {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}],
                            lr=BERT_TRAIN_LR)
    fwd = ctx.wrap(lambda a, m, t, y: model(a, m, t, y))
    first = {"logits": None, "pending": True}

    def op():
        opt.zero_grad(set_to_none=True)
        if dt == "bf16":
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
                loss, logits = fwd(ids, mask, types, labels)
        else:
            loss, logits = fwd(ids, mask, types, labels)
        if first["pending"]:  # the warm-up step's, for the check
            first["logits"], first["pending"] = logits[0].detach().to("cpu", torch.float64), False
        del logits
        loss.backward()
        opt.step()

    def check():
        return rel_err(first["logits"], want)

    return Work(op, check, rates=[(batch * seq, "tok/s")], peak=True)


# ---------------------------------------------------------------- Llama
