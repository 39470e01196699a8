"""BenchmarkKernels and BenchmarkAttention: the elementwise ops, layer norm, softmax and attention."""

from torchpeer.harness import *  # noqa: F401,F403  the shared timing, guard and helpers

def kernel_shapes(short):
    return [(1, 128)] if short else [(8, 128), (8, 384)]


def kernel_dtypes(short):
    return ["f32"] if short else ["f32", "f16", "bf16"]


KERNEL_OPS = ["relu", "gelu", "layernorm", "softmax", "attention"]


def elementwise_setup(ctx, op_name, dt, batch, seq):
    """relu and gelu (exact, erf) on [batch·seq, 3072]; softmax over the last
    dimension of [batch, 12, seq, seq]."""
    dtype, dev = DTYPES[dt], ctx.device
    if op_name == "softmax":
        shape, seed, flops_per = (batch, HEADS, seq, seq), 14, 5
    else:
        shape, seed = (batch * seq, FFN), 10
        flops_per = 1 if op_name == "relu" else 8
    x = uniform(seed, shape, dtype, dev)
    n = x.numel()
    up = dt == "f16" and op_name in ctx.upcast
    f = {
        "relu": torch.relu,
        "gelu": F.gelu,
        "softmax": lambda t: torch.softmax(t, -1),
    }[op_name]
    f_out = {
        # torch.relu is clamp_min(x, 0); relu.out is a generated wrapper
        # that allocates and copies, clamp_min.out writes in place.
        "relu": lambda t, o: torch.clamp_min(t, 0, out=o),
        "gelu": lambda t, o: torch.ops.aten.gelu.out(t, out=o),
        "softmax": lambda t, o: torch.ops.aten._softmax.out(t, -1, False, out=o),
    }[op_name]
    box = [None]
    if ctx.alloc or ctx.compile:
        fc = ctx.wrap(f)
        if up:
            op = lambda: box.__setitem__(0, fc(x.float()).to(dtype))
        else:
            op = lambda: box.__setitem__(0, fc(x))
        result = lambda: box[0]
    else:
        out = torch.empty_like(x)
        if up:
            x32, o32 = torch.empty(shape, device=dev), torch.empty(shape, device=dev)
            op = upcast_op([x], out, lambda: f_out(x32, o32), [x32], o32)
        else:
            op = lambda: f_out(x, out)
        result = lambda: out

    def check():
        return rel_err(result(), f(x.detach().to("cpu", torch.float64)))

    size = torch.finfo(dtype).bits // 8
    return Work(op, check, flops=flops_per * n, nbytes=2.0 * n * size)


def layernorm_setup(ctx, dt, batch, seq):
    """LayerNorm over the last dimension of [batch·seq, 768], eps 1e-12."""
    dtype, dev = DTYPES[dt], ctx.device
    rows, d = batch * seq, HIDDEN
    x, g, b = uniform(11, (rows, d), dtype, dev), uniform(12, (d,), dtype, dev), uniform(13, (d,), dtype, dev)
    up = dt == "f16" and "layernorm" in ctx.upcast
    # torch has no out= kernel for layer norm (native_layer_norm.out is a
    # generated wrapper that allocates and copies, slower than this): the
    # op allocates its output in every mode. It is at most 9.4 MB, below
    # glibc's mmap threshold, so the allocation is cheap.
    ln = ctx.wrap(lambda t, gg, bb: F.layer_norm(t, (d,), gg, bb, LN_EPS))
    box = [None]
    if up and (ctx.alloc or ctx.compile):
        op = lambda: box.__setitem__(0, ln(x.float(), g.float(), b.float()).to(dtype))
    elif up:
        x32, g32, b32 = torch.empty(rows, d, device=dev), torch.empty(d, device=dev), torch.empty(d, device=dev)
        out = torch.empty_like(x)

        def op():
            x32.copy_(x)
            g32.copy_(g)
            b32.copy_(b)
            out.copy_(ln(x32, g32, b32))
            box[0] = out
    else:
        op = lambda: box.__setitem__(0, ln(x, g, b))
    result = lambda: box[0]

    def check():
        xd, gd, bd = (t.detach().to("cpu", torch.float64) for t in (x, g, b))
        return rel_err(result(), F.layer_norm(xd, (d,), gd, bd, LN_EPS))

    size = torch.finfo(dtype).bits // 8
    n = rows * d
    return Work(op, check, flops=8.0 * n, nbytes=(2.0 * n + 2 * d) * size)


def attention_setup(ctx, dt, batch, seq, heads=HEADS, hdim=HEAD_D, causal=False, row_step=None):
    """softmax(q·kᵀ/√hdim)·v with q, k, v [batch, heads, seq, hdim], causal
    or not. The check recomputes every row_step-th query row of every head
    in float64 (bench_test's attentionBench), or with row_step None every
    row."""
    dtype, dev = DTYPES[dt], ctx.device
    shape = (batch, heads, seq, hdim)
    q, k, v = (uniform(s, shape, dtype, dev) for s in (15, 16, 17))
    up = dt == "f16" and "attention" in ctx.upcast
    scale = 1 / math.sqrt(hdim)
    box = [None]
    if ctx.has_sdpa or ctx.alloc or ctx.compile:
        # scaled_dot_product_attention has no out= form: it allocates (the
        # output only, [batch, heads, seq, hdim]).
        fc = ctx.wrap(lambda a, b, c: attention_ref_ops(ctx, a, b, c, causal))
        if up:
            op = lambda: box.__setitem__(0, fc(q.float(), k.float(), v.float()).to(dtype))
        else:
            op = lambda: box.__setitem__(0, fc(q, k, v))
        result = lambda: box[0]
    else:
        # Eager matmul-softmax-matmul on preallocated buffers: the scale is
        # folded into the first GEMM (baddbmm with beta=0 ignores its input);
        # causal masks the scores above the diagonal in place.
        bh = batch * heads
        cdt = torch.float32 if up else dtype
        q3, k3, v3 = (torch.empty(bh, seq, hdim, dtype=cdt, device=dev) for _ in range(3))
        s3, p3 = torch.empty(bh, seq, seq, dtype=cdt, device=dev), torch.empty(bh, seq, seq, dtype=cdt, device=dev)
        o3 = torch.empty(bh, seq, hdim, dtype=cdt, device=dev)
        out = torch.empty(shape, dtype=dtype, device=dev)
        mask = torch.ones(seq, seq, dtype=torch.bool, device=dev).triu(1) if causal else None
        if up:
            srcs = [q.view(bh, seq, hdim), k.view(bh, seq, hdim), v.view(bh, seq, hdim)]
        else:
            q3, k3, v3 = (t.view(bh, seq, hdim) for t in (q, k, v))
            o3 = out.view(bh, seq, hdim)

        def eager():
            torch.baddbmm(s3, q3, k3.transpose(1, 2), beta=0, alpha=scale, out=s3)
            if mask is not None:
                s3.masked_fill_(mask, float("-inf"))
            torch.ops.aten._softmax.out(s3, -1, False, out=p3)
            torch.bmm(p3, v3, out=o3)

        if up:
            op = upcast_op(srcs, out.view(bh, seq, hdim), eager, [q3, k3, v3], o3)
        else:
            op = eager
        result = lambda: out

    def check():
        if row_step is None:
            qd, kd, vd = (t.detach().to("cpu", torch.float64) for t in (q, k, v))
            s = (qd @ kd.transpose(-2, -1)) * scale
            if causal:
                s = s.masked_fill(torch.ones(seq, seq, dtype=torch.bool).triu(1), float("-inf"))
            return rel_err(result(), torch.softmax(s, -1) @ vd)
        # The sampled rows, in float64 on the device (the full k and v in
        # float64 are 256 MiB each at the GPU sizes).
        rows = torch.arange(0, seq, row_step, device=q.device)
        qd = q.detach()[:, :, rows, :].double()
        kd, vd = k.detach().double(), v.detach().double()
        s = (qd @ kd.transpose(-2, -1)) * scale  # [batch, heads, rows, seq]
        if causal:  # row i sees keys 0…i
            keys = torch.arange(seq, device=q.device)
            s = s.masked_fill(keys[None, :] > rows[:, None], float("-inf"))
        want = torch.softmax(s, -1) @ vd
        got = result().detach()[:, :, rows, :]
        return rel_err(got, want)

    size = torch.finfo(dtype).bits // 8
    n = batch * heads * seq * hdim
    flops = 4.0 * batch * heads * seq * seq * hdim
    if causal:  # only the lower triangle of the scores is computed
        flops /= 2
    return Work(op, check, flops=flops, nbytes=4.0 * n * size)


def attention_shapes(short, gpu):
    """bench_test's attentionShapes: (batch, heads, seq, hdim, causal)."""
    if not gpu:
        if short:
            return [(1, 4, 128, 64, False)]
        return [(1, 12, 512, 64, False), (1, 12, 512, 64, True)]
    if short:
        return [(16, 16, 1024, 128, False)]
    return [(16384 // seq, 2048 // hdim, seq, hdim, causal)
            for hdim in (64, 128) for seq in (1024, 4096) for causal in (False, True)]


def attention_dtypes(short, gpu):
    """BenchmarkAttention's dtypes: f32 on CPUs, f16 and bf16 on GPUs
    (the first only with -short)."""
    dts = ["f16", "bf16"] if gpu else ["f32"]
    return dts[:1] if short else dts


# ---------------------------------------------------------------- BERT


def kernel_setup(ctx, op_name, dt, batch, seq):
    if op_name == "layernorm":
        return layernorm_setup(ctx, dt, batch, seq)
    if op_name == "attention":
        return attention_setup(ctx, dt, batch, seq)
    return elementwise_setup(ctx, op_name, dt, batch, seq)


# ---------------------------------------------------------------- selection
