#!/usr/bin/python3
"""Generates the models the strata test suite compares against torch.

Thin wrapper around bench/models/make_models.py:
    make_models.py OUT_DIR --small --only resnet18,mobilenet_v2,bert,lstm,mlp

Usage: /usr/bin/python3 tests/models/make_test_models.py OUT_DIR [--force]

OUT_DIR receives <name>.onnx, <name>_input_<i>.npy, <name>_output_0.npy and
manifest.json (see make_models.py). Put it under the build folder, e.g.
build/release/test_models; it is never committed.

Tests call this at test time, possibly from several processes at once, so it
  * takes an exclusive lock on OUT_DIR/.lock while it works, and
  * skips regeneration when OUT_DIR/.stamp matches make_models.py's contents,
    the arguments and the torch version, and every file in the manifest exists
    (--force regenerates anyway).
Exit status 0 on success; non-zero with a message on stderr otherwise.
"""

import fcntl
import hashlib
import importlib.metadata
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MAKE_MODELS = os.path.join(HERE, "..", "..", "bench", "models", "make_models.py")
MODELS = "resnet18,mobilenet_v2,bert,lstm,mlp"
ARGS = ["--small", "--only", MODELS]


def stamp_text():
    with open(MAKE_MODELS, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    # Package metadata, not `import torch`: importing torch costs seconds on every cached call.
    try:
        torch_version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        torch_version = "none"
    return json.dumps({"make_models_sha256": digest, "args": ARGS, "torch": torch_version}, sort_keys=True)


def up_to_date(out_dir, stamp):
    try:
        with open(os.path.join(out_dir, ".stamp")) as f:
            if f.read() != stamp:
                return False
        with open(os.path.join(out_dir, "manifest.json")) as f:
            manifest = json.load(f)
    except (OSError, ValueError):
        return False
    names = {m["name"] for m in manifest.get("models", [])}
    if not set(MODELS.split(",")) <= names:
        return False
    for m in manifest["models"]:
        files = [m["model"]] + [io["file"] for io in m["inputs"] + m["outputs"]]
        if not all(os.path.isfile(os.path.join(out_dir, f)) for f in files):
            return False
    return True


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__, file=sys.stderr)
        return 2
    out_dir = os.path.abspath(sys.argv[1])
    force = "--force" in sys.argv[2:]
    os.makedirs(out_dir, exist_ok=True)
    stamp = stamp_text()
    start = time.time()
    with open(os.path.join(out_dir, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another test process may be generating right now
        if not force and up_to_date(out_dir, stamp):
            print(f"test models in {out_dir} are up to date")
            return 0
        try:
            os.remove(os.path.join(out_dir, ".stamp"))
        except FileNotFoundError:
            pass
        rc = subprocess.call([sys.executable, MAKE_MODELS, out_dir] + ARGS)
        if rc != 0:
            print(f"make_test_models: make_models.py failed with exit status {rc}", file=sys.stderr)
            return 1
        with open(os.path.join(out_dir, ".stamp"), "w") as f:
            f.write(stamp)
    print(f"generated test models in {out_dir} in {time.time() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
