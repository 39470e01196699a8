"""BenchmarkGPT2: GPT-2 small (testdata/reference/gpt2.py's GPT2LMHeadModel
with its seeded weights) under torch.no_grad, its rel-err over the golden's
last-position logits."""

from torchpeer.harness import *  # noqa: F401,F403  the shared timing, guard and helpers

import gpt2 as gpt2_ref  # noqa: E402  (testdata/reference, on the path the harness sets)
from bert import parse_safetensors  # noqa: E402

GPT2_GOLDEN = os.path.join(REPO_DIR, "testdata", "golden", "gpt2.safetensors")
GPT2_CASE = "small"


def gpt2_cases(short, gpu):
    """BenchmarkGPT2's (dtype, batch, seq), as bench_test's gpt2DTypes and
    gpt2Shapes."""
    if short:
        return [("f32", 1, 128)]
    shapes = [(1, 128), (8, 128), (32, 128), (8, 1024)] if gpu else [(1, 128)]
    return [(dt, b, s) for dt in ("f32", "f16", "bf16") for b, s in shapes]


def gpt2_golden():
    """The golden case's input_ids [batch, seq] and last-position logits."""
    with open(GPT2_GOLDEN, "rb") as f:
        _, t = parse_safetensors(f.read())
    return t[GPT2_CASE + "/input_ids"].long(), t[GPT2_CASE + "/logits"].double()


def gpt2_setup(ctx, dt, batch, seq):
    """GPT-2 small in dt over [batch, seq] ids: the forward pass to time, and
    its check against the golden (on the golden's own ids when the shape
    differs)."""
    need_f16(ctx, dt)
    ids_ref, want = gpt2_golden()
    cfg = gpt2_ref.GPT2Config(gpt2_ref.SMALL_CONFIG)
    model = gpt2_ref.synthetic_(gpt2_ref.GPT2LMHeadModel(cfg), gpt2_ref.SMALL_SEED)
    model.to(device=ctx.dev, dtype=DTYPES[dt]).eval()
    if (batch, seq) == tuple(ids_ref.shape):
        ids = ids_ref
    else:
        ids = torch.randint(0, cfg.vocab_size, (batch, seq), generator=torch.Generator().manual_seed(batch * 1000 + seq))
    ids = ids.to(ctx.dev)
    box = [None]

    def op():
        with torch.no_grad():
            box[0] = model(ids)

    def check():
        logits = box[0]
        if tuple(ids.shape) != tuple(ids_ref.shape):
            with torch.no_grad():
                logits = model(ids_ref.to(ctx.dev))
        return rel_err(logits[:, -1:], want)

    return Work(op, check, rates=[(batch * seq, "tok/s")])


def benchmarks(ctx, short):
    """BenchmarkGPT2's benchmarks, for the peer's list."""
    return [Bench(f"BenchmarkGPT2/dev={ctx.dev}/dtype={dt}/batch={b}/seq={s}", dt,
                  lambda dt=dt, b=b, s=s: gpt2_setup(ctx, dt, b, s), tol=MODEL_TOLERANCE[dt])
            for dt, b, s in gpt2_cases(short, ctx.cuda)]
