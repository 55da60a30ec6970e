#!/usr/bin/python3
"""How much of a reduced-precision run's error the model itself amplifies.

Rebuilds a benchmark model exactly as make_models.py does (same seed), then runs it in torch
(fp32) with every GEMM input -- the activations entering each Conv (groups == 1) and Linear,
and their weights -- rounded to a narrower format, accumulation staying fp32. That is what
`cuda.precision=fp16` does on the GPU (cuBLAS CUBLAS_COMPUTE_32F_FAST_16F), so the error
printed here is what a correct fp16 path should show; scripts/gpu-check.sh's fp16 tolerance is
set from it. Depthwise convs stay fp32, as on the GPU.

Formats: fp16 (11-bit significand, 5-bit exponent), tf32 (11-bit significand, fp32's exponent:
separates rounding from range), bf16 (8-bit significand).

Usage: /usr/bin/python3 bench/models/precision_emulation.py resnet50 mobilenet_v2 ...
Prints, per model and format, max |out - ref| / max |ref| on make_models.py's sample input.
"""

import os
import sys
import zlib

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_models  # noqa: E402  (the model builders)


def tf32(x):
    # Round to nearest (ties away from zero) at 10 explicit significand bits; fp32 range.
    i = x.contiguous().view(torch.int32)
    return ((i + 0x1000) & ~0x1FFF).view(torch.float32)


FORMATS = {"fp16": lambda x: x.half().float(), "tf32": tf32, "bf16": lambda x: x.bfloat16().float()}


def is_gemm(mod):
    return isinstance(mod, torch.nn.Linear) or (isinstance(mod, torch.nn.Conv2d) and mod.groups == 1)


def error(model, args, ref, rnd):
    saved, hooks = {}, []
    for name, mod in model.named_modules():
        if is_gemm(mod):
            hooks.append(mod.register_forward_pre_hook(lambda m, inp: (rnd(inp[0]),) + tuple(inp[1:])))
            saved[name] = mod.weight.data.clone()
            mod.weight.data = rnd(mod.weight.data)
    try:
        with torch.no_grad():
            out = model(*args)
    finally:
        for h in hooks:
            h.remove()
        for name, mod in model.named_modules():
            if name in saved:
                mod.weight.data = saved[name]
    return float((out - ref).abs().max() / ref.abs().max())


def main():
    names = sys.argv[1:] or ["resnet18", "mobilenet_v2", "resnet50"]
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    for name in names:
        torch.manual_seed(zlib.crc32(name.encode()))
        model, inputs, _ = make_models.build(name, False)
        model.eval()
        args = tuple(t for _, t in inputs)
        with torch.no_grad():
            ref = model(*args)
        print(name + ": " + ", ".join(f"{f} {error(model, args, ref, rnd):.2e}" for f, rnd in FORMATS.items()),
              flush=True)


if __name__ == "__main__":
    main()
