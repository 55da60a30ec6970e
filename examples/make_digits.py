#!/usr/bin/python3
"""Trains the small digits CNN shipped as examples/digits.onnx and exports it.

Data: scikit-learn's 8x8 handwritten digits (1797 images, 10 classes), pixels
scaled from [0,16] to [0,1]. A stratified 25% split is held out for testing and
never used in training. Everything is seeded and CPU-only, so reruns produce the
same weights on the same torch build.

Writes (next to this script unless --out is given):
  digits.onnx          opset 13, input "image" float32[batch,1,8,8],
                       output "probabilities" float32[batch,10]
  digits_samples.npy   float32 [8,1,8,8], first 8 images of the test split
  digits_labels.npy    int64 [8], their true labels

Usage: /usr/bin/python3 examples/make_digits.py [--out DIR] [--epochs N]
"""

import argparse
import os
import random
import sys
import time

import numpy as np
import onnx
import torch
import torch.nn as nn
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

SEED = 20240611
NUM_SAMPLES = 8


class DigitsNet(nn.Module):
    """Conv(1->8)+Relu+MaxPool -> Conv(8->16)+Relu+MaxPool -> Flatten -> Gemm(64->10) -> Softmax."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, kernel_size=3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),  # 8x8 -> 4x4
            nn.Conv2d(8, 16, kernel_size=3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),  # 4x4 -> 2x2
        )
        self.classifier = nn.Linear(16 * 2 * 2, 10)

    def logits(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))

    def forward(self, x):
        # Softmax is part of the exported graph so callers get probabilities directly.
        return torch.softmax(self.logits(x), dim=1)


def seed_everything(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True)


def load_data():
    digits = load_digits()
    x = (digits.images.astype(np.float32) / 16.0)[:, None, :, :]  # [N,1,8,8] in [0,1]
    y = digits.target.astype(np.int64)
    return train_test_split(x, y, test_size=0.25, random_state=SEED % (2**31), stratify=y)


def train(model, x_train, y_train, epochs):
    opt = torch.optim.Adam(model.parameters(), lr=3e-3, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs)
    loss_fn = nn.CrossEntropyLoss()
    xt = torch.from_numpy(x_train)
    yt = torch.from_numpy(y_train)
    gen = torch.Generator().manual_seed(SEED)
    batch = 32
    for epoch in range(epochs):
        model.train()
        perm = torch.randperm(len(xt), generator=gen)
        total = 0.0
        for i in range(0, len(xt), batch):
            idx = perm[i:i + batch]
            opt.zero_grad()
            loss = loss_fn(model.logits(xt[idx]), yt[idx])
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
        sched.step()
        if epoch % 10 == 0 or epoch == epochs - 1:
            print(f"epoch {epoch:3d}  train loss {total / len(xt):.4f}")


def accuracy(model, x, y):
    model.eval()
    with torch.no_grad():
        pred = model(torch.from_numpy(x)).argmax(dim=1).numpy()
    return float((pred == y).mean())


def export(model, path):
    model.eval()
    dummy = torch.zeros(1, 1, 8, 8)
    torch.onnx.export(model, dummy, path, opset_version=13, input_names=["image"],
                      output_names=["probabilities"],
                      dynamic_axes={"image": {0: "batch"}, "probabilities": {0: "batch"}},
                      do_constant_folding=True)
    m = onnx.load(path)
    onnx.checker.check_model(m, full_check=True)
    m.doc_string = "strata example: 8x8 handwritten digit classifier (sklearn load_digits), see examples/README.md"
    m.producer_name = "strata examples/make_digits.py"
    onnx.save(m, path)
    ops = sorted({n.op_type for n in m.graph.node})
    domains = {n.domain for n in m.graph.node}
    if domains - {"", "ai.onnx"}:
        sys.exit(f"error: export produced non-standard op domains {domains}")
    print(f"exported {path} ({os.path.getsize(path)} bytes), ops: {', '.join(ops)}")


def _numpy_eval(model_proto, image):
    """Minimal numpy interpreter for exactly the ops this export uses.

    Fallback for onnx < 1.13, which has no onnx.reference. It reads only the
    ONNX file (weights come from its initializers), so it checks the export
    independently of torch.
    """
    from onnx import numpy_helper
    env = {t.name: numpy_helper.to_array(t) for t in model_proto.graph.initializer}
    env[model_proto.graph.input[0].name] = image.astype(np.float64)
    for node in model_proto.graph.node:
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        ins = [env[n] for n in node.input]
        if node.op_type == "Conv":
            x, w = ins[0], ins[1]
            b = ins[2] if len(ins) > 2 else np.zeros(w.shape[0])
            if tuple(attrs.get("strides", [1, 1])) != (1, 1) or tuple(attrs.get("dilations", [1, 1])) != (1, 1) \
                    or attrs.get("group", 1) != 1:
                raise RuntimeError(f"fallback evaluator: unsupported Conv attributes {attrs}")
            p = attrs.get("pads", [0, 0, 0, 0])
            xp = np.pad(x, ((0, 0), (0, 0), (p[0], p[2]), (p[1], p[3])))
            kh, kw = w.shape[2], w.shape[3]
            oh, ow = xp.shape[2] - kh + 1, xp.shape[3] - kw + 1
            y = np.zeros((x.shape[0], w.shape[0], oh, ow))
            for i in range(kh):
                for j in range(kw):
                    y += np.einsum("nchw,oc->nohw", xp[:, :, i:i + oh, j:j + ow], w[:, :, i, j])
            out = y + b[None, :, None, None]
        elif node.op_type == "Relu":
            out = np.maximum(ins[0], 0)
        elif node.op_type == "MaxPool":
            if list(attrs.get("kernel_shape")) != [2, 2] or list(attrs.get("strides")) != [2, 2] \
                    or any(attrs.get("pads", [0, 0, 0, 0])):
                raise RuntimeError(f"fallback evaluator: unsupported MaxPool attributes {attrs}")
            x = ins[0]
            n, c, h, w = x.shape
            out = x[:, :, :h // 2 * 2, :w // 2 * 2].reshape(n, c, h // 2, 2, w // 2, 2).max(axis=(3, 5))
        elif node.op_type == "Flatten":
            axis = attrs.get("axis", 1)
            out = ins[0].reshape(int(np.prod(ins[0].shape[:axis])), -1)
        elif node.op_type == "Gemm":
            a, b = ins[0], ins[1]
            if attrs.get("transA", 0):
                a = a.T
            if attrs.get("transB", 0):
                b = b.T
            out = attrs.get("alpha", 1.0) * (a @ b)
            if len(ins) > 2:
                out = out + attrs.get("beta", 1.0) * ins[2]
        elif node.op_type == "Softmax":
            x = ins[0] - ins[0].max(axis=attrs.get("axis", -1), keepdims=True)
            e = np.exp(x)
            out = e / e.sum(axis=attrs.get("axis", -1), keepdims=True)
        else:
            raise RuntimeError(f"fallback evaluator: unexpected op {node.op_type}")
        env[node.output[0]] = out
    return env[model_proto.graph.output[0].name].astype(np.float32)


def verify_export(model, path, samples):
    """Runs the exported file outside torch and prints the max difference to torch."""
    with torch.no_grad():
        expected = model(torch.from_numpy(samples)).numpy()
    try:
        from onnx.reference import ReferenceEvaluator
        got = ReferenceEvaluator(path).run(None, {"image": samples})[0]
        how = "onnx.reference"
    except ImportError:
        print(f"onnx {onnx.__version__} has no onnx.reference; using the built-in numpy evaluator instead")
        got = _numpy_eval(onnx.load(path), samples)
        how = "numpy evaluator"
    diff = float(np.abs(expected - got).max())
    print(f"max |torch - {how}| = {diff:.3e}")
    if diff > 1e-5:
        sys.exit("error: exported model disagrees with torch")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)), help="output folder")
    ap.add_argument("--epochs", type=int, default=40)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    start = time.time()
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    seed_everything(SEED)
    x_train, x_test, y_train, y_test = load_data()
    print(f"train {len(x_train)} images, test {len(x_test)} images (held out)")

    model = DigitsNet()
    train(model, x_train, y_train, args.epochs)
    train_acc = accuracy(model, x_train, y_train)
    test_acc = accuracy(model, x_test, y_test)
    print(f"train accuracy {train_acc * 100:.2f}%  test accuracy {test_acc * 100:.2f}%")

    onnx_path = os.path.join(args.out, "digits.onnx")
    export(model, onnx_path)

    samples = np.ascontiguousarray(x_test[:NUM_SAMPLES], dtype=np.float32)
    labels = np.ascontiguousarray(y_test[:NUM_SAMPLES], dtype=np.int64)
    np.save(os.path.join(args.out, "digits_samples.npy"), samples)
    np.save(os.path.join(args.out, "digits_labels.npy"), labels)
    with torch.no_grad():
        sample_pred = model(torch.from_numpy(samples)).argmax(dim=1).numpy()
    print(f"sample labels      {labels.tolist()}")
    print(f"sample predictions {sample_pred.tolist()}")

    verify_export(model, onnx_path, samples)
    print(f"done in {time.time() - start:.1f} s")
    if test_acc < 0.95:
        sys.exit(f"error: test accuracy {test_acc:.4f} is below the 95% target")


if __name__ == "__main__":
    main()
