"""ONNX-ML models for ml_parity.py and ml_bench.py: scikit-learn estimators written into
ai.onnx.ml nodes the way skl2onnx lays them out, and hand-made corner cases.

Each case is Case(name, what, model, feeds, reference, ort_alt): an onnx ModelProto, its
seeded inputs, (for the scikit-learn ones) a function that says how many rows of strata's
outputs agree with scikit-learn's own predictions, and optionally the model ONNX Runtime
runs instead (see below).
"""
import collections

import numpy as np
from onnx import TensorProto, helper, numpy_helper

# ort_alt: (model, feeds) that ONNX Runtime runs instead, where it lacks a kernel for the
# case's input type: the same model on the input converted exactly to a type it has.
Case = collections.namedtuple("Case", "name what model feeds reference ort_alt", defaults=(None,))
ML = "ai.onnx.ml"


def ml_model(nodes, inputs, outputs, ml_opset=3, initializers=()):
    g = helper.make_graph(nodes, "ml", inputs, outputs, list(initializers))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ML, ml_opset)],
                             producer_name="strata-ml-parity")


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


# ---------------------------------------------------------------- tree ensembles


def tree_attrs(trees, leaf_weights, prefix, mode="BRANCH_LEQ"):
    """nodes_* and <prefix>_* attributes for sklearn Tree objects; leaf_weights(t, tree, i) gives
    the (class or target id, weight) votes of leaf i of tree t."""
    a = collections.defaultdict(list)
    for t, tree in enumerate(trees):
        for i in range(tree.node_count):
            left, right = int(tree.children_left[i]), int(tree.children_right[i])
            a["nodes_treeids"].append(t)
            a["nodes_nodeids"].append(i)
            if left == -1:
                a["nodes_modes"].append("LEAF")
                a["nodes_featureids"].append(0)
                a["nodes_values"].append(0.0)
                a["nodes_truenodeids"].append(0)
                a["nodes_falsenodeids"].append(0)
                for k, w in leaf_weights(t, tree, i):
                    a[prefix + "_treeids"].append(t)
                    a[prefix + "_nodeids"].append(i)
                    a[prefix + "_ids"].append(int(k))
                    a[prefix + "_weights"].append(float(w))
            else:
                a["nodes_modes"].append(mode)
                a["nodes_featureids"].append(int(tree.feature[i]))
                a["nodes_values"].append(float(np.float32(tree.threshold[i])))
                a["nodes_truenodeids"].append(left)
                a["nodes_falsenodeids"].append(right)
    return dict(a)


def classifier_model(attrs, n_features, labels, **extra):
    labels = list(labels)
    lab = {"classlabels_strings": labels} if isinstance(labels[0], str) else {"classlabels_int64s": labels}
    node = helper.make_node("TreeEnsembleClassifier", ["X"], ["label", "probabilities"], domain=ML, **attrs, **lab,
                            **extra)
    ltype = TensorProto.STRING if isinstance(labels[0], str) else TensorProto.INT64
    return ml_model([node], [vi("X", TensorProto.FLOAT, ["N", n_features])],
                    [vi("label", ltype, ["N"]), vi("probabilities", TensorProto.FLOAT, ["N", len(labels)])])


def regressor_model(attrs, n_features, n_targets, in_type=TensorProto.FLOAT, **extra):
    node = helper.make_node("TreeEnsembleRegressor", ["X"], ["Y"], domain=ML, n_targets=n_targets, **attrs, **extra)
    return ml_model([node], [vi("X", in_type, ["N", n_features])], [vi("Y", TensorProto.FLOAT, ["N", n_targets])])


def agree_labels(model_pred):
    def f(got):
        lab = got["label"]
        return "sklearn labels %d/%d" % (int(np.sum(lab == model_pred)), len(model_pred))
    return f


def agree_values(model_pred, key="Y", tol=1e-4):
    def f(got):
        y = got[key].reshape(model_pred.shape)
        ok = np.abs(y - model_pred) <= tol * np.maximum(1.0, np.abs(model_pred))
        return "sklearn values %d/%d" % (int(np.sum(ok)), ok.size)
    return f


def data(n_rows, n_features, seed, n_classes=0):
    from sklearn.datasets import make_classification, make_regression
    if n_classes:
        x, y = make_classification(n_samples=n_rows, n_features=n_features, n_informative=min(n_features - 2, 6),
                                   n_classes=n_classes, n_clusters_per_class=1, random_state=seed)
    else:
        x, y = make_regression(n_samples=n_rows, n_features=n_features, n_targets=1, noise=0.1, random_state=seed)
    return x.astype(np.float32), y


def sklearn_tree_cases():
    from sklearn.ensemble import (ExtraTreesRegressor, GradientBoostingClassifier, GradientBoostingRegressor,
                                  RandomForestClassifier, RandomForestRegressor)
    from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor
    cases = []

    def proba_leaf(scale):
        def f(t, tree, i):
            v = tree.value[i][0]
            return [(k, scale * w / v.sum()) for k, w in enumerate(v)]
        return f

    def positive_leaf(scale):  # a binary model's probability of class 1 only
        def f(t, tree, i):
            v = tree.value[i][0]
            return [(1, scale * v[1] / v.sum())]
        return f

    # rf_clf2_both votes for both classes: ONNX Runtime's two-class rule then labels a row 1 as
    # soon as class 1 has any probability (strata does the same: labels agree with ORT, not
    # with scikit-learn); rf_clf2 votes for class 1 only, the binary layout that predicts right.
    for name, n_classes, est, leaf in (
            ("dt_clf3", 3, DecisionTreeClassifier(max_depth=8, random_state=0), proba_leaf),
            ("rf_clf4", 4, RandomForestClassifier(n_estimators=30, max_depth=9, random_state=0), proba_leaf),
            ("rf_clf2", 2, RandomForestClassifier(n_estimators=20, max_depth=7, random_state=1), positive_leaf),
            ("rf_clf2_both", 2, RandomForestClassifier(n_estimators=20, max_depth=7, random_state=1), proba_leaf)):
        x, y = data(600, 10, 1 + n_classes, n_classes)
        est.fit(x, y)
        trees = [e.tree_ for e in getattr(est, "estimators_", [est])]
        attrs = tree_attrs(trees, leaf(1.0 / len(trees)), "class")
        xt = x[:200]
        cases.append(Case(name, "%s, %d classes" % (type(est).__name__, n_classes),
                          classifier_model(attrs, x.shape[1], est.classes_.tolist()), {"X": xt},
                          agree_labels(est.predict(xt))))

    # Gradient boosting: binary (class 0 votes, LOGISTIC, one base value) and multiclass (SOFTMAX).
    for n_classes in (2, 3):
        x, y = data(600, 8, 10 + n_classes, n_classes)
        gb = GradientBoostingClassifier(n_estimators=25, max_depth=3, learning_rate=0.3, random_state=0).fit(x, y)
        stages = gb.estimators_
        trees, ids = [], []
        for m in range(stages.shape[0]):
            for k in range(stages.shape[1]):
                trees.append(stages[m, k].tree_)
                ids.append(k)
        lr = gb.learning_rate
        attrs = tree_attrs(trees, lambda t, tree, i: [(ids[t], lr * tree.value[i][0][0])], "class")
        init = gb._raw_predict_init(x[:1])[0]
        xt = x[:200]
        cases.append(Case("gb_clf%d" % n_classes, "GradientBoostingClassifier, %d classes" % n_classes,
                          classifier_model(attrs, x.shape[1], gb.classes_.tolist(), base_values=[float(v) for v in init],
                                           post_transform="LOGISTIC" if n_classes == 2 else "SOFTMAX"),
                          {"X": xt}, agree_labels(gb.predict(xt))))

    x, y = data(600, 12, 21)
    for name, est, agg in (("dt_reg", DecisionTreeRegressor(max_depth=10, random_state=0), "SUM"),
                           ("rf_reg", RandomForestRegressor(n_estimators=40, max_depth=10, random_state=0), "SUM"),
                           ("et_reg_avg", ExtraTreesRegressor(n_estimators=25, max_depth=8, random_state=0), "AVERAGE")):
        est.fit(x, y)
        trees = [e.tree_ for e in getattr(est, "estimators_", [est])]
        scale = 1.0 / len(trees) if agg == "SUM" else 1.0
        attrs = tree_attrs(trees, lambda t, tree, i: [(0, scale * tree.value[i][0][0])], "target")
        xt = x[:200]
        cases.append(Case(name, "%s (%s)" % (type(est).__name__, agg),
                          regressor_model(attrs, x.shape[1], 1, aggregate_function=agg), {"X": xt},
                          agree_values(est.predict(xt).astype(np.float32), tol=1e-4)))
    gb = GradientBoostingRegressor(n_estimators=60, max_depth=4, learning_rate=0.1, random_state=0).fit(x, y)
    trees = [e.tree_ for e in gb.estimators_[:, 0]]
    attrs = tree_attrs(trees, lambda t, tree, i: [(0, gb.learning_rate * tree.value[i][0][0])], "target")
    xt = x[:200]
    cases.append(Case("gb_reg", "GradientBoostingRegressor",
                      regressor_model(attrs, x.shape[1], 1, base_values=[float(gb._raw_predict_init(x[:1])[0, 0])]),
                      {"X": xt}, agree_values(gb.predict(xt).astype(np.float32), tol=1e-4)))
    return cases


# ---------------------------------------------------------------- hand-made trees


class RandomForestSpec:
    """Random full binary trees: depth d, random features and thresholds, leaf votes."""

    def __init__(self, n_trees, depth, n_features, n_targets, seed, modes=("BRANCH_LEQ",), missing_rate=0.0,
                 votes_per_leaf=1, targets=None, weight_lo=-1.0, weight_hi=1.0):
        rng = np.random.default_rng(seed)
        a = collections.defaultdict(list)
        targets = list(range(n_targets)) if targets is None else targets
        for t in range(n_trees):
            n_inner = 2 ** depth - 1
            for i in range(2 ** (depth + 1) - 1):
                a["nodes_treeids"].append(t)
                a["nodes_nodeids"].append(i)
                if i < n_inner:
                    a["nodes_modes"].append(str(rng.choice(modes)))
                    a["nodes_featureids"].append(int(rng.integers(0, n_features)))
                    a["nodes_values"].append(float(np.float32(rng.normal())))
                    a["nodes_truenodeids"].append(2 * i + 1)
                    a["nodes_falsenodeids"].append(2 * i + 2)
                    a["nodes_missing_value_tracks_true"].append(int(rng.random() < missing_rate))
                else:
                    a["nodes_modes"].append("LEAF")
                    a["nodes_featureids"].append(0)
                    a["nodes_values"].append(0.0)
                    a["nodes_truenodeids"].append(0)
                    a["nodes_falsenodeids"].append(0)
                    a["nodes_missing_value_tracks_true"].append(0)
                    for k in rng.choice(targets, size=min(votes_per_leaf, len(targets)), replace=False):
                        a["_leaf"].append((t, i, int(k), float(np.float32(rng.uniform(weight_lo, weight_hi)))))
        self.attrs = {k: v for k, v in a.items() if k != "_leaf"}
        self.leaves = a["_leaf"]

    def weights(self, prefix):
        out = dict(self.attrs)
        out[prefix + "_treeids"] = [v[0] for v in self.leaves]
        out[prefix + "_nodeids"] = [v[1] for v in self.leaves]
        out[prefix + "_ids"] = [v[2] for v in self.leaves]
        out[prefix + "_weights"] = [v[3] for v in self.leaves]
        return out


def x_with_nans(rows, cols, seed, nan_rate=0.0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, cols)).astype(np.float32)
    if nan_rate:
        x[rng.random(x.shape) < nan_rate] = np.nan
    return x


def handmade_tree_cases():
    cases = []
    all_modes = ("BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ")
    # Regressors: aggregate functions, targets, base values, post transforms.
    for agg in ("SUM", "AVERAGE", "MIN", "MAX"):
        for n_targets, base in ((1, [0.25]), (3, [0.5, -1.0, 2.0]), (3, [])):
            spec = RandomForestSpec(9, 4, 6, n_targets, seed=hash((agg, n_targets)) % 1000, votes_per_leaf=2)
            extra = {"base_values": base} if base else {}
            name = "reg_%s_t%d%s" % (agg.lower(), n_targets, "_base" if base else "")
            cases.append(Case(name, "regressor %s, %d targets, %d base values" % (agg, n_targets, len(base)),
                              regressor_model(spec.weights("target"), 6, n_targets, aggregate_function=agg, **extra),
                              {"X": x_with_nans(37, 6, 3)}, None))
    for post in ("LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT"):
        spec = RandomForestSpec(5, 3, 4, 3, seed=7, votes_per_leaf=2, weight_lo=0.0, weight_hi=0.3)
        cases.append(Case("reg_post_%s" % post.lower(), "regressor 3 targets, %s" % post,
                          regressor_model(spec.weights("target"), 4, 3, post_transform=post),
                          {"X": x_with_nans(23, 4, 4)}, None))
    spec = RandomForestSpec(5, 3, 4, 1, seed=8, weight_lo=0.0, weight_hi=0.2)
    cases.append(Case("reg1_probit", "regressor 1 target, PROBIT",
                      regressor_model(spec.weights("target"), 4, 1, post_transform="PROBIT"),
                      {"X": x_with_nans(23, 4, 5)}, None))
    cases.append(Case("reg1_logistic", "regressor 1 target, LOGISTIC (ignored by both)",
                      regressor_model(spec.weights("target"), 4, 1, post_transform="LOGISTIC"),
                      {"X": x_with_nans(23, 4, 5)}, None))
    # Modes and NaN routing.
    spec = RandomForestSpec(12, 5, 8, 1, seed=9, modes=("BRANCH_LT",), missing_rate=0.5)
    cases.append(Case("lgbm_style_nan", "BRANCH_LT trees, NaN to the true branch, NaN inputs",
                      regressor_model(spec.weights("target"), 8, 1), {"X": x_with_nans(64, 8, 6, 0.2)}, None))
    spec = RandomForestSpec(12, 5, 8, 2, seed=10, modes=all_modes, missing_rate=0.3)
    cases.append(Case("mixed_modes_nan", "all six branch modes, NaN inputs",
                      regressor_model(spec.weights("target"), 8, 2), {"X": x_with_nans(64, 8, 7, 0.2)}, None))
    # Input types (integer inputs compare against float thresholds) and double tensor attributes.
    spec = RandomForestSpec(6, 4, 5, 1, seed=11)
    for t, dt in ((TensorProto.DOUBLE, np.float64), (TensorProto.INT64, np.int64), (TensorProto.INT32, np.int32)):
        x = (np.random.default_rng(12).normal(size=(31, 5)) * (3 if dt != np.float64 else 1)).astype(dt)
        # ONNX Runtime has no integer-input tree kernels: it runs the double-input model on the
        # same values (integers compare with float thresholds exactly as doubles do).
        alt = None if dt == np.float64 else (regressor_model(spec.weights("target"), 5, 1, in_type=TensorProto.DOUBLE),
                                             {"X": x.astype(np.float64)})
        cases.append(Case("input_%s" % np.dtype(dt).name, "regressor on %s input" % np.dtype(dt).name,
                          regressor_model(spec.weights("target"), 5, 1, in_type=t), {"X": x}, None, alt))
    attrs = spec.weights("target")
    dbl = {k: v for k, v in attrs.items() if k not in ("nodes_values", "target_weights")}
    dbl["nodes_values_as_tensor"] = numpy_helper.from_array(np.array(attrs["nodes_values"], np.float64) + 1e-9)
    dbl["target_weights_as_tensor"] = numpy_helper.from_array(np.array(attrs["target_weights"], np.float64))
    dbl["base_values_as_tensor"] = numpy_helper.from_array(np.array([0.125], np.float64))
    cases.append(Case("as_tensor_double", "opset 3 double-tensor thresholds, weights, base",
                      regressor_model(dbl, 5, 1, in_type=TensorProto.DOUBLE),
                      {"X": np.random.default_rng(13).normal(size=(31, 5))}, None))
    # Classifiers: multiclass with base values and transforms; the binary conventions.
    for post in ("NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO"):
        spec = RandomForestSpec(8, 4, 6, 4, seed=14, votes_per_leaf=2)
        cases.append(Case("clf4_%s" % post.lower(), "4 classes, base values, %s" % post,
                          classifier_model(spec.weights("class"), 6, [10, 20, 30, 40], post_transform=post,
                                           base_values=[0.1, -0.2, 0.3, 0.0]),
                          {"X": x_with_nans(41, 6, 8)}, None))
    spec = RandomForestSpec(8, 4, 6, 3, seed=15, votes_per_leaf=1, targets=[0, 2])
    cases.append(Case("clf3_unvoted_class", "3 string classes, class 1 never voted for",
                      classifier_model(spec.weights("class"), 6, ["cat", "dog", "eel"]), {"X": x_with_nans(41, 6, 9)},
                      None))
    binary = (
        ("bin_pos_only", "votes for class 1 only, all positive", dict(targets=[1], weight_lo=0.0, weight_hi=0.2), {}),
        ("bin_neg_votes_logistic", "votes for class 0 only, mixed signs, 1 base, LOGISTIC",
         dict(targets=[0]), {"base_values": [0.3], "post_transform": "LOGISTIC"}),
        ("bin_mixed_nobase", "votes for class 1 only, mixed signs, no base", dict(targets=[1]), {}),
        ("bin_both_votes", "votes for both classes, labels 3 and 7", dict(targets=[0, 1], votes_per_leaf=2), {}),
        ("bin_base2", "votes for class 1 only, 2 base values", dict(targets=[1]), {"base_values": [0.1, 0.2]}),
        ("bin_probit", "votes for class 1 only, PROBIT", dict(targets=[1], weight_lo=0.0, weight_hi=0.1),
         {"post_transform": "PROBIT"}),
        ("bin_class0_pos", "votes for class 0 only, all positive", dict(targets=[0], weight_lo=0.0, weight_hi=0.2), {}),
        ("bin_class0_pos_logistic", "votes for class 0 only, all positive, LOGISTIC",
         dict(targets=[0], weight_lo=0.0, weight_hi=0.2), {"post_transform": "LOGISTIC"}),
        ("bin_class0_mixed", "votes for class 0 only, mixed signs, no base", dict(targets=[0]), {}),
        ("bin_class0_mixed_base1", "votes for class 0 only, mixed signs, 1 base", dict(targets=[0]),
         {"base_values": [-0.1]}),
    )
    for name, what, kw, extra in binary:
        spec = RandomForestSpec(7, 3, 5, 2, seed=abs(hash(name)) % 1000, **kw)
        cases.append(Case(name, "binary: " + what, classifier_model(spec.weights("class"), 5, [3, 7], **extra),
                          {"X": x_with_nans(33, 5, 10)}, None))
    spec = RandomForestSpec(7, 3, 5, 2, seed=16, targets=[1])
    cases.append(Case("bin_strings", "binary, string labels",
                      classifier_model(spec.weights("class"), 5, ["no", "yes"]), {"X": x_with_nans(33, 5, 11)}, None))
    # Sizes: one row as a 1-D input, one row with many trees, no rows.
    spec = RandomForestSpec(100, 6, 10, 1, seed=17)
    cases.append(Case("one_row_100_trees", "100 trees, 1 row", regressor_model(spec.weights("target"), 10, 1),
                      {"X": x_with_nans(1, 10, 12)}, None))
    cases.append(Case("no_rows", "0 rows", regressor_model(spec.weights("target"), 10, 1),
                      {"X": np.zeros((0, 10), np.float32)}, None))
    return cases


# ---------------------------------------------------------------- linear models, SVMs, preprocessing


def node(op, ins, outs, **attrs):
    return helper.make_node(op, ins, outs, domain=ML, **attrs)


def sklearn_other_cases():
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LinearRegression, LogisticRegression
    from sklearn.preprocessing import Binarizer, Normalizer, StandardScaler
    from sklearn.svm import SVC, SVR, LinearSVC
    cases = []
    f32 = np.float32

    def fl(a):
        return [float(v) for v in np.asarray(a, np.float64).reshape(-1)]

    # Imputer -> Scaler -> LinearClassifier (SOFTMAX), the usual scikit-learn pipeline.
    x, y = data(500, 8, 31, 3)
    xn = x.copy()
    xn[np.random.default_rng(1).random(xn.shape) < 0.1] = np.nan
    imp = SimpleImputer(strategy="mean").fit(xn)
    sc = StandardScaler().fit(imp.transform(xn))
    lr = LogisticRegression(max_iter=500).fit(sc.transform(imp.transform(xn)), y)
    nodes = [node("Imputer", ["X"], ["imputed"], imputed_value_floats=fl(imp.statistics_),
                  replaced_value_float=float("nan")),
             node("Scaler", ["imputed"], ["scaled"], offset=fl(sc.mean_), scale=fl(1.0 / sc.scale_)),
             node("LinearClassifier", ["scaled"], ["label", "probabilities"], coefficients=fl(lr.coef_),
                  intercepts=fl(lr.intercept_), classlabels_ints=lr.classes_.tolist(), multi_class=1,
                  post_transform="SOFTMAX")]
    m = ml_model(nodes, [vi("X", TensorProto.FLOAT, ["N", 8])],
                 [vi("label", TensorProto.INT64, ["N"]), vi("probabilities", TensorProto.FLOAT, ["N", 3])], ml_opset=1)
    xt = xn[:200]
    want = lr.predict(sc.transform(imp.transform(xt)))
    cases.append(Case("pipe_impute_scale_logreg", "Imputer -> Scaler -> LinearClassifier (LogisticRegression, 3 classes)",
                      m, {"X": xt}, agree_labels(want)))

    # Binary logistic regression, one coefficient row, LOGISTIC.
    xb, yb = data(400, 6, 32, 2)
    lrb = LogisticRegression().fit(xb, yb)
    m = ml_model([node("LinearClassifier", ["X"], ["label", "probabilities"], coefficients=fl(lrb.coef_),
                       intercepts=fl(lrb.intercept_), classlabels_ints=[0, 1], post_transform="LOGISTIC")],
                 [vi("X", TensorProto.FLOAT, ["N", 6])],
                 [vi("label", TensorProto.INT64, ["N"]), vi("probabilities", TensorProto.FLOAT, ["N", 2])], ml_opset=1)
    cases.append(Case("logreg_binary", "LinearClassifier, binary, one row, LOGISTIC", m, {"X": xb[:150]},
                      agree_labels(lrb.predict(xb[:150]))))
    # LinearSVC, string labels, no transform.
    svc = LinearSVC(dual=False).fit(x, y)
    m = ml_model([node("LinearClassifier", ["X"], ["label", "scores"], coefficients=fl(svc.coef_),
                       intercepts=fl(svc.intercept_), classlabels_strings=["a", "b", "c"])],
                 [vi("X", TensorProto.FLOAT, ["N", 8])],
                 [vi("label", TensorProto.STRING, ["N"]), vi("scores", TensorProto.FLOAT, ["N", 3])], ml_opset=1)
    cases.append(Case("linear_svc_strings", "LinearClassifier (LinearSVC), string labels", m, {"X": x[:150]},
                      agree_labels(np.array(["a", "b", "c"], dtype=object)[svc.predict(x[:150])])))

    # Regressors.
    xr, yr = data(400, 10, 33)
    yr2 = np.stack([yr, 0.5 * yr + 1], axis=1)
    lin = LinearRegression().fit(xr, yr2)
    m = ml_model([node("LinearRegressor", ["X"], ["Y"], coefficients=fl(lin.coef_), intercepts=fl(lin.intercept_),
                       targets=2)],
                 [vi("X", TensorProto.FLOAT, ["N", 10])], [vi("Y", TensorProto.FLOAT, ["N", 2])], ml_opset=1)
    cases.append(Case("linear_regression_2", "LinearRegressor, 2 targets", m, {"X": xr[:150]},
                      agree_values(lin.predict(xr[:150]).astype(f32), tol=1e-3)))
    xs = StandardScaler().fit_transform(xr).astype(f32)
    svr = SVR(kernel="rbf", gamma=0.1, C=10.0).fit(xs[:200], yr[:200] / 100)
    m = ml_model([node("SVMRegressor", ["X"], ["Y"], kernel_type="RBF", kernel_params=[0.1, 0.0, 3.0],
                       support_vectors=fl(svr.support_vectors_), coefficients=fl(svr.dual_coef_),
                       rho=fl(svr.intercept_), n_supports=int(svr.support_vectors_.shape[0]))],
                 [vi("X", TensorProto.FLOAT, ["N", 10])], [vi("Y", TensorProto.FLOAT, ["N", 1])], ml_opset=1)
    cases.append(Case("svr_rbf", "SVMRegressor (SVR, RBF)", m, {"X": xs[:150]},
                      agree_values(svr.predict(xs[:150]).astype(f32).reshape(-1, 1), tol=1e-3)))

    # SVC with probabilities (libsvm's pairwise coupling) and without.
    xsc = StandardScaler().fit_transform(x).astype(f32)
    for kernel, params in (("rbf", [0.2, 0.0, 3.0]), ("poly", [0.2, 1.0, 3.0]), ("sigmoid", [0.05, 0.0, 3.0]),
                           ("linear", [0.0, 0.0, 3.0])):
        for prob in (True, False):
            sv = SVC(kernel=kernel, gamma=params[0], coef0=params[1], degree=int(params[2]), probability=prob,
                     random_state=0).fit(xsc[:300], y[:300])
            attrs = dict(kernel_type=kernel.upper(), kernel_params=params, support_vectors=fl(sv.support_vectors_),
                         vectors_per_class=sv.n_support_.tolist(), coefficients=fl(sv.dual_coef_),
                         rho=fl(sv.intercept_), classlabels_ints=sv.classes_.tolist())
            if prob:
                attrs.update(prob_a=fl(sv.probA_), prob_b=fl(sv.probB_))
            m = ml_model([node("SVMClassifier", ["X"], ["label", "scores"], **attrs)],
                         [vi("X", TensorProto.FLOAT, ["N", 8])],
                         [vi("label", TensorProto.INT64, ["N"]), vi("scores", TensorProto.FLOAT, ["N", 3])],
                         ml_opset=1)
            cases.append(Case("svc_%s%s" % (kernel, "_prob" if prob else ""),
                              "SVMClassifier (SVC %s%s, 3 classes)" % (kernel, ", probabilities" if prob else ""),
                              m, {"X": xsc[300:450]}, agree_labels(sv.predict(xsc[300:450]))))

    # Preprocessing nodes.
    xp = x[:100]
    for norm in ("MAX", "L1", "L2"):
        m = ml_model([node("Normalizer", ["X"], ["Y"], norm=norm)], [vi("X", TensorProto.FLOAT, ["N", 8])],
                     [vi("Y", TensorProto.FLOAT, ["N", 8])], ml_opset=1)
        ref = Normalizer(norm="l2").transform(xp) if norm == "L2" else None
        cases.append(Case("normalizer_%s" % norm.lower(), "Normalizer %s" % norm, m, {"X": xp},
                          agree_values(ref.astype(f32), tol=1e-5) if ref is not None else None))
    m = ml_model([node("Binarizer", ["X"], ["Y"], threshold=0.25)], [vi("X", TensorProto.FLOAT, ["N", 8])],
                 [vi("Y", TensorProto.FLOAT, ["N", 8])], ml_opset=1)
    cases.append(Case("binarizer", "Binarizer", m, {"X": xp},
                      agree_values(Binarizer(threshold=0.25).transform(xp).astype(f32), tol=0)))
    cats = np.random.default_rng(5).integers(0, 5, size=(40, 2)).astype(np.int64)
    m = ml_model([node("OneHotEncoder", ["X"], ["Y"], cats_int64s=[0, 1, 2, 3, 4], zeros=1)],
                 [vi("X", TensorProto.INT64, ["N", 2])], [vi("Y", TensorProto.FLOAT, ["N", 2, 5])], ml_opset=1)
    cases.append(Case("onehot_int64", "OneHotEncoder int64", m, {"X": cats}, None))
    words = np.array(["cat", "dog", "eel", "fox", "cat", "gnu", "dog"], dtype=object)
    m = ml_model([node("LabelEncoder", ["X"], ["Y"], keys_strings=["cat", "dog", "eel", "fox"],
                       values_int64s=[3, 1, 4, 1], default_int64=-7)],
                 [vi("X", TensorProto.STRING, ["N"])], [vi("Y", TensorProto.INT64, ["N"])], ml_opset=2)
    cases.append(Case("label_encoder_v2", "LabelEncoder v2 string -> int64", m, {"X": words}, None))
    m = ml_model([node("CategoryMapper", ["X"], ["Y"], cats_strings=["cat", "dog", "eel"], cats_int64s=[7, 8, 9],
                       default_int64=-1)],
                 [vi("X", TensorProto.STRING, ["N"])], [vi("Y", TensorProto.INT64, ["N"])], ml_opset=1)
    cases.append(Case("category_mapper", "CategoryMapper string -> int64", m, {"X": words}, None))
    m = ml_model([node("ArrayFeatureExtractor", ["X", "idx"], ["Y"])],
                 [vi("X", TensorProto.FLOAT, ["N", 8]), vi("idx", TensorProto.INT64, [3])],
                 [vi("Y", TensorProto.FLOAT, ["N", 3])], ml_opset=1)
    cases.append(Case("array_feature_extractor", "ArrayFeatureExtractor", m,
                      {"X": xp, "idx": np.array([7, 0, 3], np.int64)}, None))
    # Its inputs share one type (ONNX Runtime refuses a float + int64 model at load).
    for t, feeds in ((TensorProto.FLOAT, {"A": xp[:20, :3].copy(), "B": xp[:20, 5:].copy()}),
                     (TensorProto.INT64, {"A": cats[:20, :1].copy(), "B": cats[:20]})):
        widths = [feeds["A"].shape[1], feeds["B"].shape[1]]
        m = ml_model([node("FeatureVectorizer", ["A", "B"], ["Y"], inputdimensions=[2, 3])],
                     [vi("A", t, ["N", widths[0]]), vi("B", t, ["N", widths[1]])],
                     [vi("Y", TensorProto.FLOAT, ["N", 5])], ml_opset=1)
        cases.append(Case("feature_vectorizer_%s" % ("float" if t == TensorProto.FLOAT else "int64"),
                          "FeatureVectorizer, widths %s into [2, 3] (truncated / padded)" % widths, m, feeds, None))
    return cases


def all_cases():
    return sklearn_tree_cases() + handmade_tree_cases() + sklearn_other_cases()
