"""The Python binding (python/strata) end to end against libstrata.

Run by CTest (test `python_binding`) as
  STRATA_LIBRARY=<build>/lib/libstrata.so.0 PYTHONPATH=python python3 -m unittest discover -s tests/python
The models come from the repository (examples/, tests/data/) or are built here with
Debian's python3-onnx and passed to the session as bytes.
"""
import os
import subprocess
import sys
import threading
import time
import unittest

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import strata

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DIGITS = os.path.join(ROOT, "examples", "digits.onnx")
SAMPLES = np.load(os.path.join(ROOT, "examples", "digits_samples.npy"))
LABELS = np.load(os.path.join(ROOT, "examples", "digits_labels.npy"))
STRINGS = os.path.join(ROOT, "tests", "data", "capi", "strings.onnx")
ALIASES = os.path.join(ROOT, "tests", "data", "capi", "aliases.onnx")
ENDLESS = os.path.join(ROOT, "tests", "data", "run_control", "endless_loop.onnx")
ZIPMAP = os.path.join(ROOT, "tests", "data", "capi", "zipmap.onnx")
MAPS = os.path.join(ROOT, "tests", "data", "capi", "maps.onnx")
SEQUENCES = os.path.join(ROOT, "tests", "data", "capi", "sequences.onnx")


def model_bytes(nodes, inputs, outputs, initializers=(), opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]).SerializeToString()


def relu_model(elem=TensorProto.FLOAT, shape=("N", 3)):
    return model_bytes([helper.make_node("Relu", ["x"], ["y"])], [helper.make_tensor_value_info("x", elem, shape)],
                       [helper.make_tensor_value_info("y", elem, shape)])


class Values(unittest.TestCase):
    """Sequences are lists, maps dicts and empty optionals None, both ways."""

    def test_zipmap_rows_are_dicts(self):
        with strata.Session(ZIPMAP) as s:
            self.assertEqual([o.type for o in s.outputs], ["tensor(int64)", "tensor(float)",
                                                           "seq(map(int64,tensor(float)))",
                                                           "seq(map(string,tensor(float)))"])
            x = np.array([[1, 2], [-1, 0.5], [0, 0]], dtype=np.float32)
            label, probs, by_label, by_name = s.run(None, {"x": x})
            self.assertEqual(len(by_label), 3)
            for r in range(3):
                self.assertEqual(list(by_label[r]), [10, 20, 30])
                self.assertEqual(list(by_name[r]), ["cat", "dog", "eel"])
                self.assertEqual(list(by_label[r].values()), probs[r].tolist())
                self.assertEqual(max(by_label[r], key=by_label[r].get), label[r])
            self.assertIsInstance(by_label[0][10], float)
            (only,) = s.run(["by_name"], {"x": x[:0]})
            self.assertEqual(only, [])

    def test_dict_inputs(self):
        with strata.Session(MAPS) as s:
            self.assertEqual(s.inputs[0].type, "map(string,tensor(float))")
            row, dense = s.run(None, {"features": {"weight": 70.5, "age": 31, "shoe": 44},
                                      "sparse": {3: 3.5, 1: 1.5, 7: 7.5}})
            np.testing.assert_array_equal(row, [[31, 0, 70.5]])
            np.testing.assert_array_equal(dense, [[0, 1.5, 0, 3.5]])
            row, _ = s.run(None, {"features": {}, "sparse": {}})
            np.testing.assert_array_equal(row, [[0, 0, 0]])
            with self.assertRaisesRegex(strata.InvalidArgument, "map key 3 is not a str"):
                s.run(None, {"features": {3: 1.0}, "sparse": {}})
            with self.assertRaisesRegex(strata.InvalidArgument, "input 'sparse' is a map: feed a dict"):
                s.run(None, {"features": {}, "sparse": [1.0]})
            with self.assertRaisesRegex(strata.InvalidArgument, "input 'features' is None"):
                s.run(None, {"features": None, "sparse": {}})

    def test_sequence_and_optional_inputs(self):
        with strata.Session(SEQUENCES) as s:
            self.assertEqual(s.inputs[1].type, "optional(tensor(float))")
            a, b = np.arange(3, dtype=np.float32), np.ones(1, dtype=np.float32)
            count, same, has = s.run(None, {"items": [a, b], "maybe": None})
            self.assertEqual(count, 2)
            self.assertFalse(has)
            self.assertEqual(len(same), 2)
            np.testing.assert_array_equal(same[0], a)
            same[0][0] = 9  # a private copy
            self.assertEqual(a[0], 0)
            _, _, has = s.run(None, {"items": [[1.0, 2.0]], "maybe": b})
            self.assertTrue(has)
            count, same, _ = s.run(None, {"items": [], "maybe": None})
            self.assertEqual((count, same), (0, []))
            with self.assertRaisesRegex(strata.InvalidArgument, "feed a list"):
                s.run(None, {"items": a, "maybe": None})
            with self.assertRaisesRegex(strata.InvalidArgument, "sequence item 1"):
                s.run(None, {"items": [a, np.ones(1, dtype=np.int64)], "maybe": None})
            with self.assertRaisesRegex(strata.InvalidArgument, "a dict feeds only a map input"):
                s.run(None, {"items": [a], "maybe": {1: 2.0}})


    def test_text_classifier_strings_in_dicts_out(self):
        # skl2onnx's layout of a CountVectorizer + LogisticRegression: lowercase, tokenize,
        # count the vocabulary, score, ZipMap.
        ml = "ai.onnx.ml"
        vocab = ["cat", "dog", "fish"]
        nodes = [helper.make_node("StringNormalizer", ["text"], ["lower"], case_change_action="LOWER"),
                 helper.make_node("Tokenizer", ["lower"], ["tokens"], domain="com.microsoft", mark=0,
                                  mincharnum=2, pad_value="#", tokenexp="[a-z]+"),
                 helper.make_node("TfIdfVectorizer", ["tokens"], ["counts"], mode="TF", min_gram_length=1,
                                  max_gram_length=1, max_skip_count=0, ngram_counts=[0], ngram_indexes=[0, 1, 2],
                                  pool_strings=vocab),
                 helper.make_node("LinearClassifier", ["counts"], ["label", "scores"], domain=ml,
                                  coefficients=[1.0, 0, 0, 0, 1.0, 0, 0, 0, 1.0], intercepts=[0.0, 0.0, 0.0],
                                  classlabels_strings=vocab, post_transform="SOFTMAX"),
                 helper.make_node("ZipMap", ["scores"], ["by_class"], domain=ml, classlabels_strings=vocab)]
        seq_map = helper.make_sequence_type_proto(onnx.TypeProto())
        seq_map.sequence_type.elem_type.map_type.key_type = TensorProto.STRING
        seq_map.sequence_type.elem_type.map_type.value_type.CopyFrom(
            helper.make_tensor_type_proto(TensorProto.FLOAT, None))
        g = helper.make_graph(nodes, "text", [helper.make_tensor_value_info("text", TensorProto.STRING, ["N"])],
                              [helper.make_tensor_value_info("label", TensorProto.STRING, ["N"]),
                               helper.make_value_info("by_class", seq_map)])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ml, 1),
                                                helper.make_opsetid("com.microsoft", 1)])
        with strata.Session(m.SerializeToString()) as s:
            label, by_class = s.run(None, {"text": ["My DOG, my dog and a cat", "fish!", "Fish fish, cat"]})
            self.assertEqual(label.tolist(), ["dog", "fish", "fish"])
            self.assertEqual(list(by_class[0]), ["cat", "dog", "fish"])
            self.assertGreater(by_class[0]["dog"], by_class[0]["cat"])
            self.assertAlmostEqual(sum(by_class[2].values()), 1.0, places=6)


class Basics(unittest.TestCase):

    def test_version_and_library(self):
        self.assertRegex(strata.__version__, r"^\d+\.\d+\.\d+")
        self.assertEqual(strata.api_version, 1)
        self.assertTrue(os.path.exists(strata.library_path), strata.library_path)
        if not os.environ.get("STRATA_LIBRARY"):  # found beside the package, as when installed
            libdir = os.path.join(os.path.dirname(strata.__file__), "..", "..", "..")
            self.assertEqual(os.path.dirname(os.path.realpath(strata.library_path)), os.path.realpath(libdir))

    def test_digits_classifies_every_sample(self):
        with strata.Session(DIGITS, threads=1) as s:
            self.assertEqual(s.inputs, [strata.ValueInfo("image", "float32", ("batch", 1, 8, 8), "tensor(float)")])
            self.assertEqual(s.outputs[0].name, "probabilities")
            self.assertEqual(s.outputs[0].shape[1], 10)
            (probs,) = s.run(None, {"image": SAMPLES})
            self.assertEqual(probs.dtype, np.float32)
            self.assertEqual(probs.shape, (len(LABELS), 10))
            np.testing.assert_array_equal(probs.argmax(1), LABELS)
            np.testing.assert_allclose(probs.sum(1), 1.0, rtol=1e-5)
            # By name, from memory, on 2 threads: the same numbers.
            with open(DIGITS, "rb") as f:
                mem = strata.Session(f.read(), threads=2)
            (again,) = mem.run(["probabilities"], {"image": SAMPLES})
            np.testing.assert_array_equal(again, probs)
            self.assertTrue(all(a.provider == "cpu" for a in s.node_providers()))

    def test_non_contiguous_and_list_inputs(self):
        s = strata.Session(relu_model())
        x = np.arange(-6, 6, dtype=np.float32).reshape(3, 4)
        view = x[:, 1:]  # a strided view: copied once, same answer
        self.assertFalse(view.flags.c_contiguous)
        (y,) = s.run(None, {"x": view})
        np.testing.assert_array_equal(y, np.maximum(view, 0))
        (y,) = s.run(None, {"x": [[-1, 2, -3]]})  # lists take the input's element type
        self.assertEqual(y.dtype, np.float32)
        np.testing.assert_array_equal(y, [[0, 2, 0]])
        swapped = x[:, :3].astype(">f4")  # big-endian: converted to native order
        (y,) = s.run(None, {"x": swapped})
        np.testing.assert_array_equal(y, np.maximum(x[:, :3], 0))

    def test_empty_tensors(self):
        (y,) = strata.Session(relu_model()).run(None, {"x": np.zeros((0, 3), np.float32)})
        self.assertEqual(y.shape, (0, 3))
        self.assertEqual(y.dtype, np.float32)

    def test_element_types(self):
        for elem, dt in ((TensorProto.FLOAT16, np.float16), (TensorProto.DOUBLE, np.float64),
                         (TensorProto.INT8, np.int8), (TensorProto.INT32, np.int32), (TensorProto.INT64, np.int64)):
            x = np.array([[-2, 0, 3]], dtype=dt)
            (y,) = strata.Session(relu_model(elem)).run(None, {"x": x})
            self.assertEqual(y.dtype, dt)
            np.testing.assert_array_equal(y, np.maximum(x, 0))
        m = model_bytes([helper.make_node("Not", ["x"], ["y"])], [helper.make_tensor_value_info("x", TensorProto.BOOL, [2])],
                        [helper.make_tensor_value_info("y", TensorProto.BOOL, [2])])
        (y,) = strata.Session(m).run(None, {"x": np.array([True, False])})
        np.testing.assert_array_equal(y, [False, True])

    def test_bfloat16_travels_as_bits(self):
        m = model_bytes([helper.make_node("Cast", ["x"], ["f"], to=TensorProto.FLOAT),
                         helper.make_node("Cast", ["f"], ["b"], to=TensorProto.BFLOAT16)],
                        [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [3])],
                        [helper.make_tensor_value_info("f", TensorProto.FLOAT, [3]),
                         helper.make_tensor_value_info("b", TensorProto.BFLOAT16, [3])])
        s = strata.Session(m)
        self.assertEqual(s.inputs[0].dtype, "bfloat16")
        vals = np.array([1.5, -2.0, 0.09375], dtype=np.float32)
        bits = (vals.view(np.uint32) >> 16).astype(np.uint16)
        f, b = s.run(None, {"x": bits})
        np.testing.assert_array_equal(f, vals)
        self.assertEqual(b.dtype, np.uint16)
        np.testing.assert_array_equal(b, bits)


class Strings(unittest.TestCase):

    def test_round_trip_keeps_every_byte(self):
        s = strata.Session(STRINGS)
        text = np.array(["abc", "", "x\0y", b"\xff\xfe"], dtype=object)
        same, upper = s.run(None, {"text": text})
        self.assertEqual(list(same), ["abc", "", "x\0y", b"\xff\xfe"])  # not UTF-8: returned as bytes
        self.assertEqual(list(upper[:3]), ["ABC", "", "X\0Y"])
        (same,) = s.run(["same"], {"text": np.array(["one", "two"])})  # numpy str arrays too
        self.assertEqual(same.tolist(), ["one", "two"])
        (same,) = s.run(["same"], {"text": np.array([b"a", b"b"])})
        self.assertEqual(same.tolist(), ["a", "b"])

    def test_bad_element_is_named(self):
        with self.assertRaisesRegex(strata.InvalidArgument, r"input 'text': element 1 is int, not str or bytes"):
            strata.Session(STRINGS).run(None, {"text": np.array(["a", 3], dtype=object)})


class Ownership(unittest.TestCase):

    def test_outputs_are_private_and_outlive_the_session(self):
        s = strata.Session(ALIASES)
        x = np.array([2.0, -1.0], dtype=np.float32)
        weights, passthrough, relu, relu_again = s.run(None, {"x": x})
        weights[0] = 100.0
        passthrough[0] = 200.0
        relu[1] = 300.0
        self.assertEqual(x[0], 2.0)
        self.assertEqual(relu_again[1], 0.0)
        (w2,) = s.run(["weights"], {"x": x})
        np.testing.assert_array_equal(w2, [1.5, -2.5, 3.5])
        s.close()
        del s
        np.testing.assert_array_equal(relu_again, [2.0, 0.0])  # still readable after the session is gone


class Errors(unittest.TestCase):

    def test_load_errors_name_the_problem(self):
        with self.assertRaises(strata.NotFound) as cm:
            strata.Session("/nonexistent/model.onnx")
        self.assertIn("/nonexistent/model.onnx", str(cm.exception))
        self.assertEqual(cm.exception.code, "NOT_FOUND")
        with self.assertRaises(strata.InvalidModel):
            strata.Session(b"this is not a model")
        with self.assertRaisesRegex(strata.InvalidArgument, "must be a str"):
            strata.Session(42)

    def test_option_errors(self):
        with self.assertRaisesRegex(strata.InvalidArgument, "no_such_option"):
            strata.Session(DIGITS, options={"no_such_option": 1})
        with self.assertRaisesRegex(strata.InvalidArgument, "threads must be an int"):
            strata.Session(DIGITS, threads="two")
        with self.assertRaises(strata.InvalidArgument):
            strata.Session(DIGITS, threads=-3)
        with self.assertRaisesRegex(strata.InvalidArgument, "timeout_ms"):
            strata.RunOptions(timeout_ms=-1)
        with self.assertRaisesRegex(strata.InvalidArgument, "no_such_key"):
            strata.RunOptions(no_such_key=1)

    def test_a_named_provider_fails_loudly(self):
        with self.assertRaises(strata.NotFound) as cm:
            strata.Session(DIGITS, providers=["no-such-accelerator"])
        self.assertIn("no provider named 'no-such-accelerator'", str(cm.exception))
        unusable = [p for p in strata.providers() if p.status != "OK"]
        for p in unusable:  # e.g. cuda on a machine without its driver
            with self.assertRaises(strata.ProviderError) as cm:
                strata.Session(DIGITS, providers=[p.name, "cpu"])
            self.assertIn(p.name, str(cm.exception))
            self.assertIn(p.detail, str(cm.exception))
        # "auto" falls back to the CPU when nothing better is usable.
        s = strata.Session(DIGITS, providers="auto")
        (probs,) = s.run(None, {"image": SAMPLES})
        np.testing.assert_array_equal(probs.argmax(1), LABELS)

    def test_run_errors_name_the_input_or_output(self):
        s = strata.Session(DIGITS)
        with self.assertRaisesRegex(strata.InvalidArgument, "nope"):
            s.run(None, {"nope": SAMPLES})
        with self.assertRaisesRegex(strata.InvalidArgument, "image"):
            s.run(None, {"image": SAMPLES.astype(np.float64)})
        with self.assertRaisesRegex(strata.InvalidArgument, "image"):
            s.run(None, {"image": SAMPLES.reshape(8, 64)})
        with self.assertRaisesRegex(strata.Error, "image"):
            s.run(None, {})
        with self.assertRaisesRegex(strata.Error, "no_output"):
            s.run(["no_output"], {"image": SAMPLES})
        with self.assertRaisesRegex(strata.Unsupported, "complex"):
            s.run(None, {"image": SAMPLES.astype(np.complex64)})
        with self.assertRaisesRegex(strata.InvalidArgument, "feeds must be a dict"):
            s.run(None, [SAMPLES])
        s.close()
        with self.assertRaisesRegex(strata.InvalidArgument, "closed"):
            s.run(None, {"image": SAMPLES})

    def test_missing_library_is_named_at_import(self):
        env = dict(os.environ, STRATA_LIBRARY="/nonexistent/libstrata.so.0")
        r = subprocess.run([sys.executable, "-c", "import strata"], env=env, capture_output=True, text=True)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("ImportError", r.stderr)
        self.assertIn("/nonexistent/libstrata.so.0 (STRATA_LIBRARY): no such file", r.stderr)


class RunControl(unittest.TestCase):

    def test_deadline_and_terminate(self):
        s = strata.Session(ENDLESS)
        x = np.zeros(1, np.float32)
        t0 = time.monotonic()
        with self.assertRaises(strata.Cancelled):
            s.run(None, {"x": x}, strata.RunOptions(timeout_ms=50))
        self.assertLess(time.monotonic() - t0, 30)
        ro = strata.RunOptions()
        for stop in (ro.terminate, s.terminate_runs):
            errors = []

            def run():
                try:
                    s.run(None, {"x": x}, ro)
                except strata.Error as e:
                    errors.append(e)

            th = threading.Thread(target=run)
            th.start()
            # The GIL is released while the model runs, so this thread can end it.
            deadline = time.monotonic() + 30
            while th.is_alive() and time.monotonic() < deadline:
                time.sleep(0.02)
                stop()
            th.join(30)
            self.assertFalse(th.is_alive())
            self.assertEqual(len(errors), 1)
            self.assertIsInstance(errors[0], strata.Cancelled)

    def test_concurrent_runs_agree(self):
        s = strata.Session(DIGITS, threads=1)
        (ref,) = s.run(None, {"image": SAMPLES})
        results = []

        def work():
            for _ in range(20):
                results.append(s.run(None, {"image": SAMPLES})[0])

        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(len(results), 80)
        for r in results:
            np.testing.assert_array_equal(r, ref)


class Binding(unittest.TestCase):

    def test_runs_in_place_and_rereads_inputs(self):
        s = strata.Session(DIGITS, threads=1)
        (ref,) = s.run(None, {"image": SAMPLES})
        x = SAMPLES.copy()
        out = np.zeros((len(LABELS), 10), np.float32)
        b = strata.IoBinding(s)
        b.bind_input("image", x)
        b.bind_output("probabilities", out)
        b.run()
        np.testing.assert_array_equal(out, ref)
        x[:] = SAMPLES[::-1]  # bound inputs are read in place on every run
        b.run()
        np.testing.assert_array_equal(out, ref[::-1])
        self.assertIsInstance(b.outputs_in_place, bool)

    def test_binding_errors(self):
        s = strata.Session(DIGITS)
        b = strata.IoBinding(s)
        with self.assertRaisesRegex(strata.InvalidArgument, "C-contiguous"):
            b.bind_input("image", np.zeros((1, 1, 8, 16), np.float32)[..., ::2])
        ro = np.zeros((8, 10), np.float32)
        ro.flags.writeable = False
        with self.assertRaisesRegex(strata.InvalidArgument, "read-only"):
            b.bind_output("probabilities", ro)
        with self.assertRaisesRegex(strata.InvalidArgument, "probabilities"):
            b.bind_output("probabilities", np.zeros((8, 10), np.float64))
        with self.assertRaisesRegex(strata.InvalidArgument, "nope"):
            b.bind_input("nope", SAMPLES)
        with self.assertRaisesRegex(strata.InvalidArgument, "numpy array"):
            b.bind_input("image", [1, 2])
        s.close()
        with self.assertRaisesRegex(strata.InvalidArgument, "closed"):
            b.run()


class Providers(unittest.TestCase):

    def test_report_and_capabilities(self):
        report = strata.providers()
        for p in report:
            self.assertIsInstance(p, strata.ProviderInfo)
            self.assertIn(p.status, {"OK", "NOT_FOUND", "MISSING_DEPENDENCY", "ABI_MISMATCH", "UNSUPPORTED_CPU",
                                     "NO_DEVICE", "INIT_FAILED", "INVALID", "CRASHED"})
        self.assertFalse(strata.has_capability("no.such.capability"))
        self.assertIsInstance(strata.has_capability("cpu.avx512f"), bool)

    def test_pack_weights(self):
        n, k, bs = 16, 64, 32
        rng = np.random.default_rng(1)
        b = rng.integers(0, 256, size=(n, k // bs, bs // 2), dtype=np.uint8)
        scales = rng.random(n * (k // bs), dtype=np.float32)
        p1 = strata.pack_weights("cuda-sm80", b, scales, bits=4, n=n, k=k, block_size=bs)
        p2 = strata.pack_weights("cuda-sm80", b.copy(), scales.copy(), bits=4, n=n, k=k, block_size=bs)
        self.assertIsInstance(p1, bytes)
        self.assertGreaterEqual(len(p1), b.nbytes)
        self.assertEqual(p1, p2)
        with self.assertRaisesRegex(strata.InvalidArgument, "cuda-sm80"):
            strata.pack_weights("tpu-v9", b, scales, bits=4, n=n, k=k, block_size=bs)


if __name__ == "__main__":
    unittest.main()
