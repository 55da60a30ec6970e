#!/usr/bin/python3
"""ORT parity of text models: com.microsoft Tokenizer in each mode, and scikit-learn text
classifiers written the way skl2onnx converts them (StringNormalizer -> Tokenizer ->
TfIdfVectorizer -> Normalizer -> LinearClassifier -> ZipMap), strata against ONNX Runtime 1.30.

ONNX Runtime runs through its C API in ort_maps (as in map_parity.py, whose runner this
uses), strata through its Python binding. Tokens, labels and map keys must be equal; scores
within --tol (relative). For the scikit-learn pipelines the table also gives how many rows'
probabilities agree with scikit-learn's predict_proba within 1e-5.

  /usr/bin/python3 bench/compare-ort/text_parity.py [--tol 1e-6] [--markdown FILE] [--work DIR]

Needs the release build and bench/ort (bash bench/compare-ort/run.sh --quick installs it).
Exit status 1 when a case differs.
"""
import sys

import numpy as np
from onnx import TensorProto, helper

from map_parity import Case, run_cases, seq_map_type
from ml_models import ml_model, node, vi

TEXTS = np.array(["The cat sat on the mat.", "Dogs (and cats) don't sit; they RUN!", "", "a b c",
                  "naïve café, déjà vu", "e-mail me @ home?\nOK [now]"], dtype=object)
# skl2onnx's default separators, escaped for RE2 (each is a regular expression).
SEPARATORS = [" ", "\\.", "\\?", ",", ";", ":", "!", "\\(", "\\)", "\n", '"', "'", "-", "\\[", "\\]", "@"]


def tokenizer_model(shape, **attrs):
    g = helper.make_graph([helper.make_node("Tokenizer", ["text"], ["tokens"], domain="com.microsoft", **attrs)],
                          "tok", [vi("text", TensorProto.STRING, list(shape))],
                          [vi("tokens", TensorProto.STRING, list(shape) + ["T"])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])


def tokenizer_cases():
    base = {"mark": 0, "mincharnum": 1, "pad_value": "#"}
    cases = []
    for name, what, attrs in [
            ("tok_tokenexp", "tokenexp [a-zA-Z0-9_]+ (skl2onnx's default)", {"tokenexp": "[a-zA-Z0-9_]+"}),
            ("tok_tokenexp_min2_mark", "tokenexp, mincharnum 2, mark", {"tokenexp": "[a-zA-Z0-9_]+", "mincharnum": 2,
                                                                         "mark": 1}),
            ("tok_unicode_letters", "tokenexp \\pL+ (UTF-8 letters)", {"tokenexp": "\\pL+"}),
            ("tok_separators", "skl2onnx's 16 default separators", {"separators": SEPARATORS}),
            ("tok_separators_regex_min3", "separators [ .,;!?]+ and \\s, mincharnum 3",
             {"separators": ["[ .,;!?]+", "\\s"], "mincharnum": 3}),
            ("tok_chars_mark", "characters (separators [\"\"]), mark, pad _", {"separators": [""], "mark": 1,
                                                                              "pad_value": "_"}),
            ("tok_chars_tokenexp_dot", "characters (tokenexp .)", {"tokenexp": "."})]:
        a = dict(base, **attrs)
        cases.append(Case(name, what, tokenizer_model(["N"], **a), {"text": TEXTS}))
    cases.append(Case("tok_batch_2d", "[N, C] input, tokenexp", tokenizer_model(["N", 2], tokenexp="[a-z]+", **base),
                      {"text": TEXTS.reshape(3, 2)}))
    cases.append(Case("tok_no_tokens", "no token in any string (last dim 0)",
                      tokenizer_model(["N"], tokenexp="[0-9]+", **dict(base, mark=1)), {"text": TEXTS[:2]}))
    return cases


def pipeline_cases():
    """TfidfVectorizer (or CountVectorizer) + LogisticRegression on a small seeded corpus,
    converted by hand the way skl2onnx writes it."""
    from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    rng = np.random.default_rng(7)
    topics = [["goal", "match", "team", "score", "league", "coach"],
              ["vote", "party", "election", "senate", "policy", "law"],
              ["cpu", "memory", "kernel", "compiler", "cache", "thread"]]
    filler = ["the", "a", "of", "and", "to", "in", "is", "it", "on", "with"]
    docs, labels = [], []
    for i in range(240):
        t = i % 3
        words = [rng.choice(topics[t]) if rng.random() < 0.45 else rng.choice(filler + sum(topics, []))
                 for _ in range(int(rng.integers(4, 16)))]
        docs.append(" ".join(w.upper() if rng.random() < 0.1 else w for w in words) + ".")
        labels.append(t)
    docs = np.array(docs, dtype=object)
    cases = []
    for vec_name, vec in [("tfidf", TfidfVectorizer(token_pattern=r"[a-zA-Z0-9_][a-zA-Z0-9_]+")),
                          ("count", CountVectorizer(token_pattern=r"[a-zA-Z0-9_][a-zA-Z0-9_]+"))]:
        x = vec.fit_transform(docs[:180])
        clf = LogisticRegression(max_iter=1000).fit(x, labels[:180])
        vocab = sorted(vec.vocabulary_, key=vec.vocabulary_.get)
        tfidf = {"mode": "TFIDF", "weights": [float(w) for w in vec.idf_]} if vec_name == "tfidf" else {"mode": "TF"}
        # locale C: ONNX Runtime builds the locale "<name>.UTF-8", and this machine has only C.UTF-8
        # (its default, en_US, fails to load here).
        nodes = [helper.make_node("StringNormalizer", ["text"], ["lower"], case_change_action="LOWER", locale="C"),
                 helper.make_node("Tokenizer", ["lower"], ["tokens"], domain="com.microsoft", mark=0, mincharnum=2,
                                  pad_value="#", tokenexp="[a-zA-Z0-9_]+"),
                 helper.make_node("TfIdfVectorizer", ["tokens"], ["counts"], min_gram_length=1, max_gram_length=1,
                                  max_skip_count=0, ngram_counts=[0], ngram_indexes=list(range(len(vocab))),
                                  pool_strings=vocab, **tfidf)]
        last = "counts"
        if vec_name == "tfidf":
            nodes.append(node("Normalizer", ["counts"], ["normalized"], norm="L2"))
            last = "normalized"
        nodes += [node("LinearClassifier", [last], ["output_label", "probabilities"],
                       coefficients=[float(c) for c in clf.coef_.reshape(-1)],
                       intercepts=[float(c) for c in clf.intercept_], classlabels_ints=[0, 1, 2], multi_class=1,
                       post_transform="SOFTMAX"),
                  node("ZipMap", ["probabilities"], ["output_probability"], classlabels_int64s=[0, 1, 2])]
        m = ml_model(nodes, [vi("text", TensorProto.STRING, ["N"])],
                     [vi("output_label", TensorProto.INT64, ["N"]),
                      helper.make_value_info("output_probability", seq_map_type("int64"))], ml_opset=1)
        m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
        test = docs[180:]
        want = clf.predict_proba(vec.transform(test))

        def check(got, want=want):
            p = np.array([[row[k] for k in (0, 1, 2)] for row in got["output_probability"]])
            ok = np.abs(p - want) <= 1e-5 * np.maximum(1.0, np.abs(want))
            return "sklearn probabilities %d/%d rows" % (int(np.sum(ok.all(1))), len(want))
        cases.append(Case(f"sklearn_{vec_name}_logreg",
                          f"{'TfidfVectorizer' if vec_name == 'tfidf' else 'CountVectorizer'} -> LogisticRegression "
                          "-> ZipMap (60 documents)", m, {"text": test}, check))
    return cases


if __name__ == "__main__":
    sys.exit(run_cases(__doc__, lambda: tokenizer_cases() + pipeline_cases(), "text_parity_"))
