"""The Python binding from an extracted release archive (scripts/check-archives.sh).

usage: PYTHONPATH=PREFIX/lib/python3/dist-packages python3 archive_smoke.py PREFIX [REFUSED_PROVIDER ...]

Imports strata, checks that it loaded the archive's own libstrata, classifies the bundled
digit samples on the CPU, and checks that each REFUSED_PROVIDER asked for by name raises
strata.ProviderError naming why, while providers="auto" falls back to the CPU. Prints one
line per check; exits 1 on the first failure.
"""
import os
import sys

import numpy as np

import strata

prefix = os.path.realpath(sys.argv[1])
lib = os.path.realpath(strata.library_path)
if not lib.startswith(prefix + os.sep):
    sys.exit(f"FAIL python: loaded {lib}, not the archive's libstrata under {prefix}")
print(f"python: strata {strata.__version__} imported; library {lib}")
ex = os.path.join(prefix, "share", "strata", "examples")
samples = np.load(os.path.join(ex, "digits_samples.npy"))
labels = np.load(os.path.join(ex, "digits_labels.npy"))
model = os.path.join(ex, "digits.onnx")
for providers in ("cpu", "auto"):
    with strata.Session(model, providers=providers) as s:
        (probs,) = s.run(None, {"image": samples})
        if not (probs.argmax(1) == labels).all():
            sys.exit(f"FAIL python: providers={providers}: wrong classes {probs.argmax(1)} (want {labels})")
        used = sorted({a.provider for a in s.node_providers()})
        print(f"python: providers={providers}: {len(labels)}/{len(labels)} samples right on {','.join(used)}")
for name in sys.argv[2:]:
    try:
        strata.Session(model, providers=[name])
    except strata.ProviderError as e:
        print(f"python: providers=[{name!r}] refused: {e}")
    else:
        sys.exit(f"FAIL python: providers=[{name!r}] was accepted")
print("python: OK")
