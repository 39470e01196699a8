"""BenchmarkResNet: the torchvision ResNets, float and int8."""

from torchpeer.harness import *  # noqa: F401,F403  the shared timing, guard and helpers
from torchpeer.matmul import use_int8_engine

RESNET_GOLDEN = os.path.join(os.path.dirname(REFERENCE_DIR), "golden", "resnet.safetensors")
RESNET_MODEL, RESNET_CASE, RESNET_SIZE = "resnet50", "resnet50_224", 224
# models/resnet's Config.FLOPs(1, 224, 224) of resnet50: the hooks' count
# must agree.
RESNET_FLOPS_PER_IMAGE = 8.178368512e9
# bench_test's resnetTolerance: 1e-4 in f32 (torchvision's own float32
# model is 3.8e-7 off the float64 reference on resnet50_224), else
# bench_test's benchTolerance, whose deepModels leave resnet50 at the
# kernels' tolerances (tf32 takes f16's).
# int8 is bench_test's resnetInt8Tolerance of resnet50_224 (zbench's W8A8
# model measures 1.5e-2 to 1.6e-2 there).
RESNET_TOLERANCE = {"f32": 1e-4, "tf32": 2e-3, "f16": 2e-3, "bf16": 1.6e-2, "int8": 3e-2}
# bench_test's calibration of its int8 ResNets (resnetCalibBatches,
# resnetCalibSeed): this many batches of N(0, 1) images of the benchmark's
# size, one image each (benchResNetInt8 calibrates on single images), the
# i-th from a generator seeded RESNET_CALIB_SEED + i, apart from the
# benchmark's inputs (uniform, seeded with the batch size) and the golden's.
RESNET_CALIB_BATCHES, RESNET_CALIB_SEED = 8, 9000

_resnet = {}


def resnet_cases(short, gpu):
    """BenchmarkResNet's (dtype, batch), in bench_test's order
    (resnetBenchPrecisions, resnetBatches, then benchResNetInt8's int8 at
    the same batches; int8 is skipped on GPUs). --short runs f32 at batch
    1 alone (bench_test's -short adds int8 at batch 1)."""
    if short:
        return [("f32", 1)]
    if not gpu:
        return [(dt, b) for dt in ("f32", "int8") for b in (1, 8)]
    return [(dt, b) for dt in ("f32", "tf32", "f16", "bf16", "int8") for b in (1, 4, 8, 16, 32, 64, 128, 256, 512)]


def resnet_memory_format(ctx):
    """The torch memory format of --resnet-memory-format (Ctx)."""
    return torch.channels_last if ctx.resnet_format == "channels_last" else torch.contiguous_format


def conv_flops(model, x):
    """The FLOPs of model(x): two per multiply-add of every Conv2d
    (2·N·Ho·Wo·Co·Ci/G·Kh·Kw) and Linear (2·N·in·out), from forward hooks;
    pooling, BatchNorm, additions and ReLU are not counted, as in
    models/resnet."""
    total = [0]

    def hook(mod, inputs, out):
        if isinstance(mod, torch.nn.Conv2d):
            total[0] += 2 * out.numel() * mod.weight[0].numel()  # weight [Co, Ci/G, Kh, Kw]
        else:
            total[0] += 2 * out.numel() * mod.in_features

    hooks = [m.register_forward_hook(hook) for m in model.modules()
             if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))]
    try:
        with torch.no_grad():
            model(x)
    finally:
        for h in hooks:
            h.remove()
    return float(total[0])


def resnet_base():
    """(the float32 CPU model with the synthetic weights, FLOPs per
    224×224 image, the golden case's pixel_values and logits), made once.
    The reference is imported here: torchvision is needed for ResNet
    alone."""
    if not _resnet:
        try:
            import resnet as resnet_ref
        except ImportError as e:
            raise NotImplementedError(f"testdata/reference/resnet.py needs torchvision: {e}")
        model = resnet_ref.resnet(RESNET_MODEL)
        flops = conv_flops(model, torch.zeros(1, 3, RESNET_SIZE, RESNET_SIZE))
        if flops != RESNET_FLOPS_PER_IMAGE:
            raise RuntimeError(f"torchvision {RESNET_MODEL} counts {flops:.10g} FLOPs per {RESNET_SIZE}² image, "
                               f"models/resnet {RESNET_FLOPS_PER_IMAGE:.10g}: the architectures differ")
        with open(RESNET_GOLDEN, "rb") as f:
            _, cases = bert_ref.parse_safetensors(f.read())
        pixels, logits = cases[RESNET_CASE + "/pixel_values"], cases[RESNET_CASE + "/logits"]
        _resnet.update(model=model, flops=flops, pixels=pixels, logits=logits)
    return _resnet


def resnet_setup(ctx, dt, batch):
    """ResNet-50 inference of [batch, 3, 224, 224] seeded random pixels
    (uniform in [-1, 1)), model and input in dt and in the memory format
    of --resnet-memory-format."""
    need_f16(ctx, dt)
    base = resnet_base()
    dtype, dev, fmt = DTYPES[dt], ctx.device, resnet_memory_format(ctx)
    model = copy.deepcopy(base["model"]).to(device=dev, dtype=dtype, memory_format=fmt).eval()
    size = RESNET_SIZE
    x = uniform(batch, (batch, 3, size, size), dtype, dev).contiguous(memory_format=fmt)
    fwd = ctx.wrap(lambda t: model(t))
    grad_off = getattr(torch, "inference_mode", torch.no_grad)

    def op():
        with grad_off():
            fwd(x)

    def check():
        px = base["pixels"].to(device=dev, dtype=dtype).contiguous(memory_format=fmt)
        with grad_off():
            got = fwd(px)
        return rel_err(got, base["logits"])

    weights = sum(t.numel() * t.element_size() for t in model.state_dict().values() if t.is_floating_point())
    return Work(op, check, flops=base["flops"] * batch, nbytes=weights + batch * 3 * size * size * 4,
                rates=[(batch, "img/s")], peak=True)


def resnet_int8_model(ctx):
    """The FX graph mode static int8 model of resnet_base()'s float32 one,
    in the memory format of --resnet-memory-format, and its weight bytes,
    made once: prepare_fx with get_default_qconfig_mapping of the int8
    engine (fusing conv-bn-relu), calibrated on RESNET_CALIB_BATCHES
    N(0, 1) images, convert_fx."""
    if "int8" not in _resnet:
        try:
            from torch.ao.quantization import get_default_qconfig_mapping
            from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx
        except ImportError as e:
            raise NotImplementedError(f"torch {torch.__version__} has no FX graph mode quantization "
                                      f"with QConfigMapping (torch >= 1.13): {e}")
        engine = use_int8_engine()
        base = resnet_base()
        fmt = resnet_memory_format(ctx)
        model = copy.deepcopy(base["model"]).to(memory_format=fmt).eval()
        shape = (1, 3, RESNET_SIZE, RESNET_SIZE)
        example = torch.zeros(shape).contiguous(memory_format=fmt)
        prepared = prepare_fx(model, get_default_qconfig_mapping(engine), (example,))
        with torch.no_grad():
            for i in range(RESNET_CALIB_BATCHES):
                g = torch.Generator().manual_seed(RESNET_CALIB_SEED + i)
                prepared(torch.randn(shape, generator=g).contiguous(memory_format=fmt))
        qmodel = convert_fx(prepared).eval()
        # What zbench's WeightBytes counts of its int8 model: the int8
        # weights, a float32 scale per output channel (per tensor: one)
        # and the float32 biases.
        nbytes = 0
        for m in qmodel.modules():
            if not callable(getattr(m, "weight", None)):
                continue
            w = m.weight()
            if not isinstance(w, torch.Tensor) or not w.is_quantized:
                continue
            per_channel = w.qscheme() in (torch.per_channel_affine, torch.per_channel_symmetric)
            scales = w.q_per_channel_scales().numel() if per_channel else 1
            bias = m.bias() if callable(getattr(m, "bias", None)) else None
            nbytes += w.numel() * w.element_size() + 4 * scales + (4 * bias.numel() if bias is not None else 0)
        _resnet["int8"] = (qmodel, nbytes)
    return _resnet["int8"]


def resnet_int8_setup(ctx, batch):
    """BenchmarkResNet dtype=int8: ResNet-50 inference of [batch, 3, 224,
    224] seeded random pixels (uniform in [-1, 1), float32 in and out)
    through the FX graph mode static int8 model (resnet_int8_model), eager
    (--compile too). CPUs only."""
    if ctx.cuda:
        raise NotImplementedError("FX graph mode static quantization (prepare_fx, convert_fx) runs on CPUs only: "
                                  "its quantized convolutions have no CUDA kernels")
    base = resnet_base()
    model, weights = resnet_int8_model(ctx)
    fmt = resnet_memory_format(ctx)
    size = RESNET_SIZE
    x = uniform(batch, (batch, 3, size, size), torch.float32, ctx.device).contiguous(memory_format=fmt)
    grad_off = getattr(torch, "inference_mode", torch.no_grad)

    def op():
        with grad_off():
            model(x)

    def check():
        # The int8 model's logits on the golden case against torchvision's
        # float64 ones, as the f32 point's (its float32 model is 3.8e-7
        # from them: also the error against the float32 reference).
        px = base["pixels"].to(torch.float32).contiguous(memory_format=fmt)
        with grad_off():
            got = model(px)
        return rel_err(got, base["logits"])

    return Work(op, check, flops=base["flops"] * batch, nbytes=weights + batch * 3 * size * size * 4,
                rates=[(batch, "img/s")], peak=True)
