"""The Llama workloads (prefill, decode, generate) and the LoRA training step."""

import concurrent.futures

from torchpeer.harness import *  # noqa: F401,F403  the shared timing, guard and helpers

LLAMA_GOLDEN = os.path.join(os.path.dirname(REFERENCE_DIR), "golden", "llama.safetensors")
# model name: (HF config dict, synthetic seed, the golden case Verify uses)
LLAMA_MODELS = {
    "tinyllama": (llama_ref.TINYLLAMA_CONFIG, llama_ref.TINYLLAMA_SEED, "tinyllama"),
    "tiny": (llama_ref.TINY_CONFIG, llama_ref.TINY_SEED, "tiny"),
    # BenchmarkLlamaLoRA's CPU model: TinyLlama's first two layers (the
    # same synthetic weights), its embeddings, norm and head.
    "tinyllama-2l": (dict(llama_ref.TINYLLAMA_CONFIG, num_hidden_layers=2), llama_ref.TINYLLAMA_SEED, None),
}
_llama_weights = {}


def llama_weights(name):
    """The model's seeded synthetic state_dict (float32, CPU), made once."""
    if name not in _llama_weights:
        cfg_dict, seed, _ = LLAMA_MODELS[name]
        cfg = llama_ref.LlamaConfig.from_dict(cfg_dict)
        _llama_weights.clear()  # one model's weights at a time
        if hasattr(torch, "set_default_device"):
            # torch 2: the parameters' names and shapes from a model on the
            # meta device, with no default initialization to overwrite, and
            # the values made on every core (numpy releases the GIL).
            with torch.device("meta"):
                m = llama_ref.LlamaForCausalLM(cfg)
            def make(item):
                n, p = item
                return n, llama_ref.synthetic_tensor(n, seed, list(p.shape)).to(p.dtype)

            with concurrent.futures.ThreadPoolExecutor() as pool:
                _llama_weights[name] = dict(pool.map(make, m.state_dict().items()))
        else:
            _llama_weights[name] = llama_ref.synthetic_(llama_ref.LlamaForCausalLM(cfg), seed).state_dict()
    return _llama_weights[name]


def ref_model(cfg, weights):
    """llama.py's model of cfg holding weights (a state_dict; its tensors,
    under torch 2, which builds the model on the meta device, with no
    default initialization to overwrite)."""
    if hasattr(torch, "set_default_device"):
        with torch.device("meta"):
            m = llama_ref.LlamaForCausalLM(cfg)
        m.load_state_dict(weights, assign=True)
        return m
    m = llama_ref.LlamaForCausalLM(cfg)
    m.load_state_dict(weights)
    return m


def llama_cases(short, gpu):
    """(model, dtypes, prefill (batch, seq)s, decode (batch, ctx)s, generate
    (prompt, new)s) as bench_test's Llama benchmarks choose them."""
    if short:
        return "tiny", ["f32"], [(1, 128)], [(1, 128)], [(32, 16)]
    if gpu:
        return ("tinyllama", ["f16", "bf16"], [(1, 512), (8, 512), (32, 512)],
                [(b, c) for b in (1, 8, 32) for c in (128, 512, 2048)], [(128, 100)])
    return "tinyllama", ["f32", "bf16"], [(1, 128)], [(1, 128)], [(32, 16)]


def llama_work(cfg, kind, batch, n, dt_size):
    """FLOPs and least bytes of a prefill of n tokens or a decode step at
    context n: models/llama's PrefillWork and DecodeWork."""
    H, I, V, L = cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size, cfg.num_hidden_layers
    qd, kvd = cfg.num_attention_heads * cfg.head_dim, cfg.num_key_value_heads * cfg.head_dim
    macs = 2 * H * qd + 2 * H * kvd + 3 * H * I
    weights = dt_size * (L * (macs + 2 * H) + H + V * H)
    hd = 2 * 2 * cfg.head_dim * cfg.num_attention_heads
    if kind == "prefill":
        flops = L * (batch * n * 2 * macs + batch * hd * n * (n + 1) / 2) + batch * 2 * H * V
        cache = 2 * L * batch * n * kvd * dt_size
        return flops, weights + batch * n * H * dt_size + cache
    k = n + 1
    flops = L * batch * (2 * macs + hd * k) + batch * 2 * H * V
    return flops, weights + batch * H * dt_size + 2 * L * batch * k * kvd * dt_size


class RefLlama:
    """llama.py's module: the reference implementation of the peer."""

    def __init__(self, model):
        self.model = model

    def logits(self, ids, mask):
        return self.model(ids, mask)

    def prefill(self, ids, mask):
        """Runs a prompt into a new KV cache, the last position's logits
        only; returns the cache."""
        cache = llama_ref.new_cache(self.model)
        self.model(ids, mask, cache, logits_to_keep=1)
        return cache

    def decode(self, cache, nxt, mask):
        """One step against the cache, which stays as it was: torch.cat
        makes the step's own copy, as Hugging Face's dynamic cache does."""
        return self.model(nxt, mask, [[k, v] for k, v in cache])

    def step(self, cache, ids, mask):
        """One step of a generation: the last position's logits [B, V],
        the cache extended."""
        return self.model(ids, mask, cache, logits_to_keep=1)[:, -1]


class HFLlama:
    """transformers' LlamaForCausalLM (the --llama hf peer)."""

    def __init__(self, model, transformers):
        self.model = model
        self.cache_type = transformers.DynamicCache
        params = inspect.signature(model.forward).parameters
        self.keep = ({"logits_to_keep": 1} if "logits_to_keep" in params
                     else {"num_logits_to_keep": 1} if "num_logits_to_keep" in params else {})

    def logits(self, ids, mask):
        # Positions from the mask, as generate computes them (forward
        # alone would number padded positions).
        pos = (mask.cumsum(-1) - 1).masked_fill_(mask == 0, 1)
        return self.model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=False).logits

    def prefill(self, ids, mask):
        cache = self.cache_type()
        self.model(input_ids=ids, attention_mask=mask, past_key_values=cache, use_cache=True, **self.keep)
        return cache

    def decode(self, cache, nxt, mask):
        past = cache.get_seq_length()
        out = self.model(input_ids=nxt, attention_mask=mask, past_key_values=cache, use_cache=True).logits
        cache.crop(past)
        return out


def llama_model(ctx, name, dt):
    """The peer's implementation (RefLlama or HFLlama) with the model's
    synthetic weights in dt, and its config."""
    need_f16(ctx, dt)
    cfg_dict, _, _ = LLAMA_MODELS[name]
    cfg = llama_ref.LlamaConfig.from_dict(cfg_dict)
    if ctx.llama == "hf":
        import transformers  # present: main checked
        model = llama_hf_check.hf_model(transformers, cfg_dict, llama_weights(name), "sdpa", DTYPES[dt], ctx.device)
        return HFLlama(model, transformers), cfg
    model = ref_model(cfg, llama_weights(name))
    return RefLlama(model.to(device=ctx.device, dtype=DTYPES[dt]).eval()), cfg


def llama_check(ctx, impl, name):
    """rel-err of the model's logits on its golden case against the
    reference's float64 logits, as bench_test's Verify computes it."""
    _, cases = bert_ref.parse_safetensors(open(LLAMA_GOLDEN, "rb").read())
    case = LLAMA_MODELS[name][2]
    ids = cases[case + "/input_ids"].long().to(ctx.device)
    mask = cases[case + "/attention_mask"].long().to(ctx.device)
    with torch.no_grad():
        got = impl.logits(ids, mask).double().cpu()
    return rel_err(got.flatten(), cases[case + "/logits"].double().flatten())


def llama_ids(seed, batch, n, vocab, device):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(3, vocab, (batch, n), generator=g).to(device)


def llama_prefill_setup(ctx, name, dt, batch, seq):
    """A prefill of batch prompts of seq tokens into an empty KV cache,
    with the logits of the last positions only (logits_to_keep=1, as HF's
    generate asks for them)."""
    impl, cfg = llama_model(ctx, name, dt)
    ids = llama_ids(batch * 100000 + seq, batch, seq, cfg.vocab_size, ctx.device)
    mask = torch.ones_like(ids)
    prefill = ctx.wrap(impl.prefill)

    def op():
        with torch.no_grad():
            prefill(ids, mask)

    flops, nbytes = llama_work(cfg, "prefill", batch, seq, torch.tensor([], dtype=DTYPES[dt]).element_size())
    return Work(op, lambda: llama_check(ctx, impl, name), flops, nbytes, rates=[(batch * seq, "tok/s")], peak=True)


def llama_decode_setup(ctx, name, dt, batch, ctx_len):
    """One KV-cached decode step of batch sequences at context ctx_len,
    every op at the same context (see RefLlama.decode, HFLlama.decode)."""
    impl, cfg = llama_model(ctx, name, dt)
    ids = llama_ids(batch * 100000 + ctx_len, batch, ctx_len, cfg.vocab_size, ctx.device)
    with torch.no_grad():
        cache = impl.prefill(ids, torch.ones_like(ids))
    nxt = torch.arange(3, 3 + batch, device=ctx.device)[:, None]
    mask = torch.ones(batch, ctx_len + 1, dtype=torch.int64, device=ctx.device)
    decode = ctx.wrap(impl.decode)

    def op():
        with torch.no_grad():
            decode(cache, nxt, mask)

    size = torch.tensor([], dtype=DTYPES[dt]).element_size()
    flops, nbytes = llama_work(cfg, "decode", batch, ctx_len, size)
    return Work(op, lambda: llama_check(ctx, impl, name), flops, nbytes, rates=[(batch, "tok/s")], peak=True)


class FirstTokenTimer:
    """A generate streamer that notes when the first new token arrives
    (put is called with the prompt first, then each new token)."""

    def __init__(self):
        self.puts, self.first = 0, None

    def put(self, value):
        self.puts += 1
        if self.puts == 2:
            self.first = time.perf_counter()

    def end(self):
        pass


def llama_generate_setup(ctx, name, dt, prompt, new):
    """Greedy generation at batch 1: prefill, then new−1 cached decode steps.
    reference: each token chosen by argmax and read back (.item()), as a
    user's loop does; hf: model.generate. ttft-ms and the decode tok/s after
    the first token are averaged over every call, the warm-up included (as
    bench_test does)."""
    impl, cfg = llama_model(ctx, name, dt)
    ids = llama_ids(prompt, 1, prompt, cfg.vocab_size, ctx.device)
    mask = torch.ones(1, prompt, dtype=torch.int64, device=ctx.device)
    stats = {"calls": 0, "ttft": 0.0, "decode": 0.0, "steps": 0}

    if isinstance(impl, HFLlama):
        extra_args = {}
        if ctx.compile:
            impl.model.forward = torch.compile(impl.model.forward, mode="reduce-overhead", fullgraph=True)
            extra_args["cache_implementation"] = "static"

        def run():
            timer = FirstTokenTimer()
            t0 = time.perf_counter()
            impl.model.generate(input_ids=ids, attention_mask=mask, do_sample=False, max_new_tokens=new,
                                min_new_tokens=new, pad_token_id=0, streamer=timer, **extra_args)
            ctx.sync()
            return t0, timer.first, time.perf_counter()
    else:
        if ctx.compile:
            raise NotImplementedError("the reference's generate loop grows its shapes every step; "
                                      "use --llama hf for compiled generation")

        def run():
            t0 = time.perf_counter()
            cache = llama_ref.new_cache(impl.model)
            m = mask
            tok = int(impl.step(cache, ids, m)[0].argmax())
            t1 = time.perf_counter()
            for _ in range(new - 1):
                m = torch.ones(1, m.shape[1] + 1, dtype=torch.int64, device=ctx.device)
                tok = int(impl.step(cache, torch.tensor([[tok]], device=ctx.device), m)[0].argmax())
            return t0, t1, time.perf_counter()

    def op():
        with torch.no_grad():
            t0, t1, t2 = run()
        stats["calls"] += 1
        stats["ttft"] += t1 - t0
        stats["decode"] += t2 - t1
        stats["steps"] += new - 1

    def extra():
        return [(1e3 * stats["ttft"] / stats["calls"], "ttft-ms"), (stats["steps"] / stats["decode"], "tok/s")]

    size = torch.tensor([], dtype=DTYPES[dt]).element_size()
    flops, nbytes = llama_work(cfg, "prefill", 1, prompt, size)
    for i in range(new - 1):
        f, b = llama_work(cfg, "decode", 1, prompt + i, size)
        flops, nbytes = flops + f, nbytes + b
    return Work(op, lambda: llama_check(ctx, impl, name), flops, nbytes, peak=True, extra=extra)


# ---------------------------------------------------------------- LoRA

# BenchmarkLlamaLoRA's adapter and optimizer (PEFT's LoraConfig(r=8,
# lora_alpha=32, lora_dropout=0.1, target_modules=["q_proj", "v_proj"]);
# AdamW over the adapter, the gradients clipped to norm 1).
LORA_R, LORA_ALPHA, LORA_DROPOUT, LORA_TARGETS = 8, 32, 0.1, ["q_proj", "v_proj"]
LORA_LR, LORA_MAX_GRAD_NORM = 2e-4, 1.0
LORA_SEED = 23  # the initial adapter and the batch
# BenchmarkLlamaLoRA's model names: the LLAMA_MODELS entry of each.
LORA_MODELS = {"tiny": "tiny", "tinyllama-2l": "tinyllama-2l", "tinyllama-1.1b": "tinyllama"}


def lora_cases(short, gpu):
    """BenchmarkLlamaLoRA's (model, dtype, batch, seq)."""
    if short:
        return [("tiny", "f32", 1, 32)]
    if gpu:
        return [("tinyllama-1.1b", "bf16", b, 512) for b in (4, 8)]
    return [("tinyllama-2l", "f32", 1, 128)]


class RefLoRA:
    """llama.py's model with lora.py's LoraLinear (PEFT's semantics)."""

    def __init__(self, cfg_dict, weights, init, dropout, wdtype, device):
        model = ref_model(llama_ref.LlamaConfig.from_dict(cfg_dict), weights)
        params = lora_ref.inject(model, LORA_R, LORA_ALPHA, LORA_TARGETS, dropout)
        lora_ref.load_adapter(params, init)
        model.to(device=device, dtype=wdtype)
        lora_ref.set_lora_dtype(model, torch.float32 if wdtype != torch.float64 else wdtype)
        self.model = model

    def loss(self, ids, labels):
        return lora_ref.causal_lm_loss(self.model(ids), labels)


class HFLoRA:
    """transformers' LlamaForCausalLM under peft's get_peft_model (the
    --llama hf peer): adapters in float32 over the base weights' dtype, as
    peft's autocast_adapter_dtype keeps them."""

    def __init__(self, cfg_dict, weights, init, dropout, wdtype, device):
        import peft  # present: lora_setup checked
        import transformers  # present: main checked
        base = llama_hf_check.hf_model(transformers, cfg_dict, weights, "sdpa", wdtype, device)
        cfg = peft.LoraConfig(r=LORA_R, lora_alpha=LORA_ALPHA, lora_dropout=dropout, target_modules=LORA_TARGETS,
                              task_type="CAUSAL_LM")
        model = peft.get_peft_model(base, cfg)
        adapter_dtype = torch.float32 if wdtype != torch.float64 else wdtype
        loaded = set()
        with torch.no_grad():
            for name, p in model.named_parameters():
                if not p.requires_grad:
                    continue
                saved = name.replace(".default.", ".")  # peft's saved name, as lora.py's
                if saved not in init:
                    raise ValueError(f"peft adapter parameter {name} ({saved}) is not in lora.py's adapter")
                p.data = init[saved].to(device=device, dtype=adapter_dtype)
                loaded.add(saved)
        if loaded != set(init):
            raise ValueError(f"peft's adapter lacks {sorted(set(init) - loaded)}")
        self.model = model

    def loss(self, ids, labels):
        return self.model(input_ids=ids, labels=labels, use_cache=False).loss


def lora_setup(ctx, name, dt, batch, seq):
    """One LoRA training step per op (forward, loss, backward, gradient
    clipping, AdamW step, zero_grad(set_to_none=True)) on a fixed batch of
    random ids (no padding, labels = ids), the base frozen."""
    if dt == "bf16" and not ctx.cuda:
        raise NotImplementedError("bf16 training (autocast) runs on CUDA only")
    key = LORA_MODELS[name]
    cfg_dict = LLAMA_MODELS[key][0]
    weights = llama_weights(key)
    impl_type = RefLoRA
    if ctx.llama == "hf":
        try:
            import peft  # noqa: F401
        except ImportError:
            raise NotImplementedError("--llama hf: BenchmarkLlamaLoRA needs peft (not installed)")
        impl_type = HFLoRA
    g = torch.Generator().manual_seed(LORA_SEED)
    ids = torch.randint(3, cfg_dict["vocab_size"], (batch, seq), generator=g).to(ctx.device)
    labels = ids.clone()
    # lora.py's initial adapter: B nonzero, so that the adapter takes part
    # in the loss the check compares.
    shapes = lora_ref.adapter_shapes(llama_ref.LlamaConfig.from_dict(cfg_dict), LORA_R, LORA_TARGETS)
    init = lora_ref.init_adapter(shapes, g)

    # The float64 loss of the batch under the initial weights, no dropout,
    # by the reference (lora.py over llama.py, whichever --llama runs), on
    # the device (outside peak-B).
    ref = RefLoRA(cfg_dict, weights, init, 0.0, torch.float64, ctx.device)
    ref.model.eval()
    with torch.no_grad():
        want = ref.loss(ids, labels).detach().cpu()
    del ref
    free_device_memory(ctx)

    impl = impl_type(cfg_dict, weights, init, LORA_DROPOUT, DTYPES[dt], ctx.device)
    impl.model.train()
    params = [p for p in impl.model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=LORA_LR)
    fwd = ctx.wrap(impl.loss)
    first = {"loss": None}

    def step():
        if dt == "bf16":
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
                loss = fwd(ids, labels)
        else:
            loss = fwd(ids, labels)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, LORA_MAX_GRAD_NORM)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    def op():
        if first["loss"] is None:
            # The first warm-up (outside the timer) also runs the checked
            # step: without dropout, to be comparable with the float64
            # loss; then the timed kind of step (a compiled forward meets
            # train mode there, not in the timer).
            impl.model.eval()
            first["loss"] = step().detach().to("cpu", torch.float64)
            impl.model.train()
        step()

    return Work(op, lambda: rel_err(first["loss"], want), rates=[(batch * seq, "tok/s")], peak=True)


# ---------------------------------------------------------------- ResNet
