#!/usr/bin/python3
"""Generates the fp32 ONNX models used by strata's benchmarks and model tests.

Every model is built in plain torch (torchvision for the CNNs), seeded from its
name so `--only` reproduces exactly what a full run writes, exported with
torch.onnx.export at opset 17 with static shapes, and checked with
onnx.checker (full check). Alongside each <name>.onnx the script writes

  <name>_input_<i>.npy   sample inputs, in the model's input order
  <name>_output_0.npy    torch's output for those inputs (the reference)

and a manifest.json describing every model's inputs and outputs (names,
dtypes, shapes, files). strata's outputs should match the references within
1e-4 relative error.

Models (input shapes):
  mlp           784->1024->1024->10, Gemm+Relu, Softmax; input float32[1,784]
  lstm          2-layer LSTM, input 128, hidden 256, batch_first;
                input float32[1,100,128] (batch, seq, feature), output [1,100,256]
  mobilenet_v2  torchvision, re-initialised (see below); input float32[1,3,224,224]
  resnet18      torchvision, random init; input float32[1,3,224,224]
  resnet50      torchvision, random init; input float32[1,3,224,224]
  bert          BERT-base-like encoder: 12 post-LN layers, hidden 768, 12 heads,
                FFN 3072, erf GELU, vocab 30522; inputs int64 input_ids[1,128] and
                int64 attention_mask[1,128] (the sample masks out the last 16
                tokens); output last_hidden_state float32[1,128,768]
  gpt2          GPT-2-like decoder: 6 pre-LN blocks, hidden 768, 12 heads, tanh
                GELU, causal mask, vocab 50257, no KV cache and no LM head;
                input int64 input_ids[1,64]; output last_hidden_state [1,64,768]

--small shrinks bert to 2 layers and gpt2 to 2 blocks (everything else is
already cheap enough); the tests use it.

Random-init CNNs: BatchNorm running statistics are calibrated by a few
training-mode forward passes on random images, so every layer sees roughly
normalised activations and the outputs are neither vanishing nor exploding.

Usage: /usr/bin/python3 bench/models/make_models.py [OUT_DIR] [--only a,b] [--small]
OUT_DIR defaults to bench/models/out/ (git-ignored).
"""

import argparse
import inspect
import json
import math
import os
import sys
import time
import warnings
import zlib

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F

OPSET = 17
HERE = os.path.dirname(os.path.abspath(__file__))
ALL_MODELS = ["mlp", "lstm", "mobilenet_v2", "resnet18", "resnet50", "bert", "gpt2"]


# ----------------------------------------------------------------------------- models

class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                                 nn.Linear(1024, 10))
        # Kaiming init keeps activations O(1), so the softmax is far from uniform and a
        # wrong kernel shows up in the probabilities.
        for m in self.net:
            if isinstance(m, nn.Linear):
                nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
                nn.init.uniform_(m.bias, -0.1, 0.1)

    def forward(self, x):
        return torch.softmax(self.net(x), dim=-1)


class LSTMModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(input_size=128, hidden_size=256, num_layers=2, batch_first=True)
        # Wider than torch's default U(-1/16, 1/16) so the gates actually saturate sometimes.
        for p in self.lstm.parameters():
            nn.init.uniform_(p, -0.15, 0.15)

    def forward(self, x):
        out, _ = self.lstm(x)
        return out


class SelfAttention(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.head_dim = hidden // heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, hidden)

    def split(self, x):
        b, s, _ = x.shape
        return x.view(b, s, self.heads, self.head_dim).transpose(1, 2)  # [b, heads, s, d]

    def forward(self, x, additive_mask):
        q, k, v = self.split(self.query(x)), self.split(self.key(x)), self.split(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim) + additive_mask
        ctx = torch.matmul(torch.softmax(scores, dim=-1), v)
        b, _, s, _ = ctx.shape
        return self.out(ctx.transpose(1, 2).reshape(b, s, self.heads * self.head_dim))


class BertLayer(nn.Module):
    """Post-LN transformer encoder layer as in BERT."""

    def __init__(self, hidden, heads, ffn):
        super().__init__()
        self.attn = SelfAttention(hidden, heads)
        self.ln1 = nn.LayerNorm(hidden, eps=1e-12)
        self.ffn_in = nn.Linear(hidden, ffn)
        self.ffn_out = nn.Linear(ffn, hidden)
        self.ln2 = nn.LayerNorm(hidden, eps=1e-12)

    def forward(self, x, additive_mask):
        x = self.ln1(x + self.attn(x, additive_mask))
        return self.ln2(x + self.ffn_out(F.gelu(self.ffn_in(x))))


class Bert(nn.Module):
    def __init__(self, layers, hidden=768, heads=12, ffn=3072, vocab=30522, max_pos=512):
        super().__init__()
        self.word = nn.Embedding(vocab, hidden)
        self.position = nn.Embedding(max_pos, hidden)
        self.token_type = nn.Embedding(2, hidden)
        self.ln = nn.LayerNorm(hidden, eps=1e-12)
        self.layers = nn.ModuleList([BertLayer(hidden, heads, ffn) for _ in range(layers)])
        self.register_buffer("position_ids", torch.arange(max_pos).unsqueeze(0), persistent=False)
        init_transformer(self)

    def forward(self, input_ids, attention_mask):
        seq = input_ids.shape[1]
        # Single-segment input: every token has token type 0.
        x = self.word(input_ids) + self.position(self.position_ids[:, :seq]) + self.token_type.weight[0]
        x = self.ln(x)
        # 1 = attend, 0 = padding; padding keys get a large negative score.
        additive = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * -10000.0
        for layer in self.layers:
            x = layer(x, additive)
        return x


class GPT2Block(nn.Module):
    """Pre-LN decoder block as in GPT-2."""

    def __init__(self, hidden, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(hidden, eps=1e-5)
        self.attn = SelfAttention(hidden, heads)
        self.ln2 = nn.LayerNorm(hidden, eps=1e-5)
        self.fc = nn.Linear(hidden, 4 * hidden)
        self.proj = nn.Linear(4 * hidden, hidden)

    def forward(self, x, additive_mask):
        x = x + self.attn(self.ln1(x), additive_mask)
        return x + self.proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT2(nn.Module):
    def __init__(self, blocks, hidden=768, heads=12, vocab=50257, max_pos=1024):
        super().__init__()
        self.wte = nn.Embedding(vocab, hidden)
        self.wpe = nn.Embedding(max_pos, hidden)
        self.blocks = nn.ModuleList([GPT2Block(hidden, heads) for _ in range(blocks)])
        self.ln_f = nn.LayerNorm(hidden, eps=1e-5)
        self.register_buffer("position_ids", torch.arange(max_pos).unsqueeze(0), persistent=False)
        init_transformer(self)

    def forward(self, input_ids):
        seq = input_ids.shape[1]
        x = self.wte(input_ids) + self.wpe(self.position_ids[:, :seq])
        # Static shapes: the causal mask folds into a [1,1,seq,seq] constant.
        causal = torch.triu(torch.full((seq, seq), -10000.0), diagonal=1)[None, None]
        for block in self.blocks:
            x = block(x, causal)
        return self.ln_f(x)


def init_transformer(model):
    """BERT/GPT-2 style init: N(0, 0.02) weights, zero biases, unit LayerNorms."""
    for m in model.modules():
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
            if isinstance(m, nn.Linear):
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)


def calibrated_cnn(model):
    """Kaiming-initialises convs and sets BN running stats from real activations."""
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.BatchNorm2d):
            # Random (but positive) affine parameters so BN is not a no-op the runtime could
            # get right by accident, then a cumulative average over the calibration passes.
            nn.init.uniform_(m.weight, 0.5, 1.5)
            nn.init.uniform_(m.bias, -0.1, 0.1)
            m.reset_running_stats()
            m.momentum = None
        elif isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=0.01)
            if m.bias is not None:  # Swin's attention projections have none
                nn.init.zeros_(m.bias)
    model.train()
    with torch.no_grad():
        model(torch.randn(4, 3, 224, 224))  # one batch gives per-channel stats over 4*H*W values
    return model.eval()


def build(name, small):
    """Returns (module, [(input_name, tensor)], output_name)."""
    import torchvision  # only the CNNs need it

    image = [("input", torch.randn(1, 3, 224, 224))]
    if name == "mlp":
        return MLP(), [("input", torch.rand(1, 784))], "probabilities"
    if name == "lstm":
        return LSTMModel(), [("input", torch.randn(1, 100, 128))], "output"
    if name == "mobilenet_v2":
        return calibrated_cnn(torchvision.models.mobilenet_v2(weights=None)), image, "logits"
    if name == "resnet18":
        return calibrated_cnn(torchvision.models.resnet18(weights=None)), image, "logits"
    if name == "resnet50":
        return calibrated_cnn(torchvision.models.resnet50(weights=None)), image, "logits"
    if name == "bert":
        ids = torch.randint(0, 30522, (1, 128), dtype=torch.int64)
        mask = torch.ones(1, 128, dtype=torch.int64)
        mask[:, -16:] = 0
        return Bert(layers=2 if small else 12), [("input_ids", ids), ("attention_mask", mask)], "last_hidden_state"
    if name == "gpt2":
        ids = torch.randint(0, 50257, (1, 64), dtype=torch.int64)
        return GPT2(blocks=2 if small else 6), [("input_ids", ids)], "last_hidden_state"
    raise ValueError(name)


# ----------------------------------------------------------------------------- export

def export_kwargs():
    # Newer torch defaults to the dynamo exporter; ask for the TorchScript one where the flag exists.
    return {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}


def generate(name, out_dir, small):
    start = time.time()
    torch.manual_seed(zlib.crc32(name.encode()))
    model, inputs, output_name = build(name, small)
    model.eval()
    args = tuple(t for _, t in inputs)
    with torch.no_grad():
        reference = model(*args)
    path = os.path.join(out_dir, f"{name}.onnx")
    with torch.no_grad():
        torch.onnx.export(model, args, path, opset_version=OPSET, input_names=[n for n, _ in inputs],
                          output_names=[output_name], do_constant_folding=True, **export_kwargs())
    m = onnx.load(path)
    if m.ir_version > 8:
        # A newer onnx package stamps its own IR version; opset 17 needs no more than IR 8,
        # the newest that strata's libonnx (1.12) reads.
        m.ir_version = 8
        onnx.save(m, path)
    onnx.checker.check_model(m, full_check=True)
    foreign = sorted({f"{n.domain}::{n.op_type}" for n in m.graph.node if n.domain not in ("", "ai.onnx")})
    if foreign:
        raise RuntimeError(f"{name}: export produced ops outside ai.onnx: {foreign}")
    for vi in list(m.graph.input) + list(m.graph.output):
        tt = vi.type.tensor_type
        if not tt.HasField("shape") or any(not d.HasField("dim_value") for d in tt.shape.dim):
            raise RuntimeError(f"{name}: graph {vi.name!r} does not have a static shape")

    entry = {"name": name, "model": os.path.basename(path), "small": small, "inputs": [], "outputs": []}
    for i, (input_name, t) in enumerate(inputs):
        f = f"{name}_input_{i}.npy"
        np.save(os.path.join(out_dir, f), t.numpy())
        entry["inputs"].append({"name": input_name, "file": f, "dtype": str(t.numpy().dtype),
                                "shape": list(t.shape)})
    ref = reference.numpy().astype(np.float32)
    f = f"{name}_output_0.npy"
    np.save(os.path.join(out_dir, f), ref)
    entry["outputs"].append({"name": output_name, "file": f, "dtype": "float32", "shape": list(ref.shape)})

    ops = sorted({n.op_type for n in m.graph.node})
    mb = os.path.getsize(path) / 1e6
    print(f"{name:13s} {mb:7.1f} MB  {len(m.graph.node):4d} nodes  out {list(ref.shape)} std {ref.std():.3g}  "
          f"{time.time() - start:5.1f} s  ops: {' '.join(ops)}", flush=True)
    if not np.isfinite(ref).all() or ref.std() < 1e-6:
        raise RuntimeError(f"{name}: reference output is degenerate (std {ref.std()})")
    return entry


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir", nargs="?", default=os.path.join(HERE, "out"), help="output folder")
    ap.add_argument("--only", default="", help="comma-separated subset of: " + ",".join(ALL_MODELS))
    ap.add_argument("--small", action="store_true", help="2-layer bert and 2-block gpt2, for tests")
    ap.add_argument("--keep-going", action="store_true",
                    help="report a model that fails and go on with the others (exit status 1 at the end)")
    args = ap.parse_args()

    names = [n.strip() for n in args.only.split(",") if n.strip()] or ALL_MODELS
    unknown = [n for n in names if n not in ALL_MODELS]
    if unknown:
        ap.error(f"unknown model(s) {', '.join(unknown)}; choose from {', '.join(ALL_MODELS)}")
    os.makedirs(args.out_dir, exist_ok=True)
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    # The TorchScript exporter warns about LSTM batch sizes and constant shape inference;
    # shapes here are static, so the warnings are noise.
    warnings.filterwarnings("ignore", category=UserWarning, module=r"torch\.onnx")
    start = time.time()

    manifest_path = os.path.join(args.out_dir, "manifest.json")
    manifest = {}
    if os.path.exists(manifest_path):  # keep entries of models not regenerated this time
        try:
            with open(manifest_path) as f:
                manifest = {e["name"]: e for e in json.load(f)["models"]}
        except (OSError, ValueError, KeyError, TypeError):
            manifest = {}
    failed = []
    for name in names:
        try:
            manifest[name] = generate(name, args.out_dir, args.small)
        except Exception as e:  # noqa: BLE001 - --keep-going reports any failure and moves on
            if not args.keep_going:
                raise
            print(f"{name}: FAILED: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
            failed.append(name)
    with open(manifest_path, "w") as f:
        json.dump({"opset": OPSET, "torch": torch.__version__, "rtol": 1e-4,
                   "models": [manifest[n] for n in ALL_MODELS if n in manifest]}, f, indent=1)
    print(f"wrote {len(names) - len(failed)} model(s) to {args.out_dir} in {time.time() - start:.1f} s"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
