// ai.onnx.ml TreeEnsembleRegressor and TreeEnsembleClassifier (ml opsets 1 and 3): the tree
// models of scikit-learn, XGBoost, LightGBM and CatBoost exports.
//
// Where the spec is open, the semantics are ONNX Runtime's CPU kernels' (the post-transforms
// are in ml_common.h), because converted models are validated against it:
//  - a tree starts at the first node of each run of equal nodes_treeids in attribute order;
//  - a single-target regressor takes each leaf's first weight, adds base_values[0] when it
//    has exactly one, and of the post-transforms applies PROBIT only;
//  - with several targets, a target that no reached leaf votes for is written as 0, base
//    value or not; a classifier with more than two classes starts each class at its base
//    value instead;
//  - a two-class classifier's label and second score column follow ONNX Runtime's binary
//    rules (FinishBinary below).
// Stricter than ONNX Runtime: an unknown mode, aggregate function or post transform, a child
// or weight that names no node, a cycle, a class or target id out of range, and a feature
// index past the input's width are errors naming them (ONNX Runtime maps unknown modes to
// BRANCH_NEQ and follows dangling children into freed memory).
//
// Speed: the nodes are flattened into one array of 16-byte records, and each kernel picks a
// descent loop specialised for the ensemble's one comparison (all BRANCH_LEQ for
// scikit-learn, all BRANCH_LT for LightGBM and XGBoost) and for whether any node sends
// missing values (NaN) to its true branch. Rows go in blocks with the trees as the outer
// loop, so a tree's nodes stay in cache across a block; blocks run in parallel. A single row
// descends its trees in parallel and then sums the leaves in tree order, so every result is
// the same for any thread count.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "core/kernel.h"
#include "core/kernel_stop.h"
#include "cpu/ml_common.h"
#include "cpu/register.h"

namespace strata {
namespace {

using ml::PostTransform;
using ml::SecondClass;

constexpr const char* kMlDomain = "ai.onnx.ml";

enum class Mode : uint8_t { kLeq, kLt, kGte, kGt, kEq, kNeq, kLeaf };
enum class Agg : uint8_t { kSum, kAverage, kMin, kMax };

// One node. Until LayOutDepthFirst a leaf keeps its weights' range in yes/no; after it, a
// leaf points to itself both ways (a descent may take a fixed number of steps) and holds its
// first weight in `value`.
template <typename T>
struct TreeNode {
  T value;          // branch: threshold; leaf: first weight (0 if none)
  int32_t feature;  // column of the input row (0 for a leaf)
  int32_t yes;      // the child taken when the test holds
  int32_t no;       // the other child
  Mode mode;
  bool missing_yes;  // a NaN input takes `yes`
};

// A node as the descents read it: 16 bytes for float thresholds (4 to a cache line), the
// feature, mode and NaN routing packed in one word. A leaf points to itself both ways, so
// `yes == own index` marks it.
template <typename T>
struct RunNode {
  T value;        // branch: threshold; leaf: first weight (0 if none)
  uint32_t word;  // feature (bits 0-27), Mode (28-30), NaN takes `yes` (31)
  int32_t yes;
  int32_t no;
  int32_t feature() const { return static_cast<int32_t>(word & kFeatureMask); }
  Mode mode() const { return static_cast<Mode>((word >> 28) & 7); }
  uint32_t missing_yes() const { return word >> 31; }
  static constexpr uint32_t kFeatureMask = (1u << 28) - 1;
};

static_assert(sizeof(RunNode<float>) == 16, "four float nodes to a cache line");

template <typename T>
struct LeafWeight {
  int32_t target;
  T value;
};

// T: the type of thresholds, weights and sums: float, or double when the model gives them
// as double tensors (the *_as_tensor attributes of ml opset 3).
template <typename T>
struct Ensemble {
  std::vector<TreeNode<T>> nodes;  // while building; LayOutDepthFirst moves them into `run`
  std::vector<RunNode<T>> run;
  std::vector<int32_t> roots;
  std::vector<LeafWeight<T>> weights;
  std::vector<std::pair<int32_t, int32_t>> leaf_weights;  // per node: first weight, count
  std::vector<int32_t> depth;                             // per root: its longest path, in steps
  int64_t total_depth = 0;                                // their sum: about one row's node visits
  std::vector<T> base_values;
  int64_t n_targets = 0;
  Agg agg = Agg::kSum;
  PostTransform post = PostTransform::kNone;
  Mode mode = Mode::kLeaf;  // the branch mode of every node, or kLeaf when they differ
  bool has_missing = false;
  int64_t max_feature = -1;
};

// ---------------------------------------------------------------- attributes

// The float values of attribute `name`, or of `name`_as_tensor when that is given.
template <typename T>
Result<std::vector<T>> Values(const Node& node, const std::string& name) {
  if (const Attribute* a = node.FindAttr(name + "_as_tensor")) {
    if (a->type != Attribute::Type::kTensor)
      return InvalidArgument(node.Describe(), ": attribute ", name, "_as_tensor must be a tensor");
    const Tensor& t = a->t;
    const int64_t n = t.num_elements();
    std::vector<T> out(static_cast<size_t>(n));
    if (t.dtype() == DataType::kDouble) {
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(t.data<double>()[i]);
    } else if (t.dtype() == DataType::kFloat) {
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(t.data<float>()[i]);
    } else {
      return InvalidArgument(node.Describe(), ": attribute ", name, "_as_tensor must be float or double, got ",
                             DataTypeName(t.dtype()));
    }
    if (node.HasAttr(name))
      return InvalidArgument(node.Describe(), ": both ", name, " and ", name, "_as_tensor are set");
    return out;
  }
  const std::vector<float> f = node.GetFloats(name);
  return std::vector<T>(f.begin(), f.end());
}

// True when a value attribute comes as a double tensor: sums and thresholds are then double.
bool UsesDouble(const Node& node, const char* weights) {
  for (const std::string& n : {std::string("nodes_values"), std::string("nodes_hitrates"), std::string("base_values"),
                               std::string(weights) + "_weights"}) {
    const Attribute* a = node.FindAttr(n + "_as_tensor");
    if (a && a->type == Attribute::Type::kTensor && a->t.dtype() == DataType::kDouble) return true;
  }
  return false;
}

Result<Mode> ParseMode(const Node& node, const std::string& s, size_t i) {
  if (s == "BRANCH_LEQ") return Mode::kLeq;
  if (s == "BRANCH_LT") return Mode::kLt;
  if (s == "BRANCH_GTE") return Mode::kGte;
  if (s == "BRANCH_GT") return Mode::kGt;
  if (s == "BRANCH_EQ") return Mode::kEq;
  if (s == "BRANCH_NEQ") return Mode::kNeq;
  if (s == "LEAF") return Mode::kLeaf;
  return InvalidArgument(node.Describe(), ": nodes_modes[", i, "] is '", s,
                         "', not one of BRANCH_LEQ, BRANCH_LT, BRANCH_GTE, BRANCH_GT, BRANCH_EQ, BRANCH_NEQ, LEAF");
}

struct PairHash {
  size_t operator()(const std::pair<int64_t, int64_t>& p) const {
    return std::hash<int64_t>()(p.first * 1000003 ^ p.second);
  }
};

// Checks that no path from a root comes back to a node on it, so every descent ends.
template <typename T>
Status CheckAcyclic(const Node& node, const std::vector<TreeNode<T>>& nodes, const std::vector<int32_t>& roots,
                    const std::vector<int64_t>& tree_ids, const std::vector<int64_t>& node_ids) {
  std::vector<uint8_t> state(nodes.size(), 0);     // 0 new, 1 on the current path, 2 finished
  std::vector<std::pair<int32_t, uint8_t>> stack;  // node, children visited
  for (int32_t root : roots) {
    if (state[root] == 2) continue;
    stack.assign(1, {root, 0});
    state[root] = 1;
    while (!stack.empty()) {
      auto& [i, visited] = stack.back();
      const TreeNode<T>& n = nodes[i];
      if (n.mode == Mode::kLeaf || visited == 2) {
        state[i] = 2;
        stack.pop_back();
        continue;
      }
      const int32_t child = visited++ == 0 ? n.yes : n.no;
      if (state[child] == 1)
        return InvalidArgument(node.Describe(), ": tree ", tree_ids[child], " has a cycle through node ",
                               node_ids[child]);
      if (state[child] == 0) {
        state[child] = 1;
        stack.push_back({child, 0});
      }
    }
  }
  return Status::Ok();
}

// Renumbers the nodes tree by tree in depth-first order, true branch first, so a descent
// mostly moves forward through memory (the true child is usually the next record), and
// drops nodes no root reaches. A leaf's first weight is copied into its record: the
// single-target path then never reads the weight array. A leaf points to itself, so rows
// descended together can all take as many steps as the tree is deep (depth, per root).
template <typename T>
void LayOutDepthFirst(Ensemble<T>* e) {
  std::vector<int32_t> order, place(e->nodes.size(), -1), stack;
  order.reserve(e->nodes.size());
  for (int32_t& root : e->roots) {
    if (place[root] >= 0) {  // a root inside an earlier tree (ids interleaved across trees)
      root = place[root];
      continue;
    }
    stack.assign(1, root);
    while (!stack.empty()) {
      const int32_t i = stack.back();
      stack.pop_back();
      if (place[i] >= 0) continue;  // shared by two parents: placed once
      place[i] = static_cast<int32_t>(order.size());
      order.push_back(i);
      const TreeNode<T>& n = e->nodes[i];
      if (n.mode == Mode::kLeaf) continue;
      stack.push_back(n.no);
      stack.push_back(n.yes);
    }
    root = place[root];
  }
  std::vector<RunNode<T>> out(order.size());
  e->leaf_weights.assign(order.size(), {0, 0});
  for (size_t k = 0; k < order.size(); ++k) {
    const TreeNode<T>& n = e->nodes[order[k]];
    RunNode<T>& r = out[k];
    if (n.mode != Mode::kLeaf) {
      r.value = n.value;
      r.word =
          static_cast<uint32_t>(n.feature) | (static_cast<uint32_t>(n.mode) << 28) | (n.missing_yes ? 1u << 31 : 0u);
      r.yes = place[n.yes];
      r.no = place[n.no];
    } else {
      e->leaf_weights[k] = {n.yes, n.no};
      r.value = n.no > 0 ? e->weights[n.yes].value : T(0);
      r.word = static_cast<uint32_t>(Mode::kLeaf) << 28;
      r.yes = r.no = static_cast<int32_t>(k);
    }
  }
  e->nodes.clear();
  e->nodes.shrink_to_fit();
  e->run = std::move(out);
  // Longest path of each tree (the trees are acyclic: CheckAcyclic), children before parents.
  std::vector<int32_t> height(e->run.size(), -1);
  e->depth.clear();
  for (int32_t root : e->roots) {
    stack.assign(1, root);
    while (!stack.empty()) {
      const int32_t i = stack.back();
      const RunNode<T>& n = e->run[i];
      if (height[i] >= 0) {
        stack.pop_back();
      } else if (n.yes == i) {  // a leaf
        height[i] = 0;
        stack.pop_back();
      } else if (height[n.yes] >= 0 && height[n.no] >= 0) {
        height[i] = 1 + std::max(height[n.yes], height[n.no]);
        stack.pop_back();
      } else {
        if (height[n.yes] < 0) stack.push_back(n.yes);
        if (height[n.no] < 0) stack.push_back(n.no);
      }
    }
    e->depth.push_back(height[root]);
    e->total_depth += height[root];
  }
}

// Flattens the nodes_* and <w>_* attributes (w: "target" or "class") into an Ensemble.
template <typename T>
Result<Ensemble<T>> BuildEnsemble(const Node& node, const std::string& w, int64_t n_targets) {
  Ensemble<T> e;
  e.n_targets = n_targets;
  const std::vector<int64_t> tree_ids = node.GetInts("nodes_treeids"), node_ids = node.GetInts("nodes_nodeids"),
                             features = node.GetInts("nodes_featureids"), yes = node.GetInts("nodes_truenodeids"),
                             no = node.GetInts("nodes_falsenodeids"),
                             missing = node.GetInts("nodes_missing_value_tracks_true");
  const std::vector<std::string> modes = node.GetStrings("nodes_modes");
  ASSIGN_OR_RETURN(std::vector<T> values, Values<T>(node, "nodes_values"));
  const size_t n = tree_ids.size();
  if (n == 0) return InvalidArgument(node.Describe(), ": the ensemble has no nodes (nodes_treeids is empty)");
  if (n > static_cast<size_t>(INT32_MAX / 2)) return InvalidArgument(node.Describe(), ": ", n, " nodes is too many");
  const std::pair<const char*, size_t> sizes[] = {
      {"nodes_nodeids", node_ids.size()}, {"nodes_featureids", features.size()}, {"nodes_modes", modes.size()},
      {"nodes_values", values.size()},    {"nodes_truenodeids", yes.size()},     {"nodes_falsenodeids", no.size()}};
  for (const auto& [name, size] : sizes)
    if (size != n)
      return InvalidArgument(node.Describe(), ": ", name, " has ", size, " entries but nodes_treeids has ", n);
  if (missing.size() > n)
    return InvalidArgument(node.Describe(), ": nodes_missing_value_tracks_true has ", missing.size(), " entries for ",
                           n, " nodes");

  std::unordered_map<std::pair<int64_t, int64_t>, int32_t, PairHash> index;
  index.reserve(n);
  e.nodes.resize(n);
  bool first_branch = true, same_mode = true;
  for (size_t i = 0; i < n; ++i) {
    if (!index.emplace(std::make_pair(tree_ids[i], node_ids[i]), static_cast<int32_t>(i)).second)
      return InvalidArgument(node.Describe(), ": node ", node_ids[i], " of tree ", tree_ids[i], " is defined twice");
    ASSIGN_OR_RETURN(Mode m, ParseMode(node, modes[i], i));
    TreeNode<T>& t = e.nodes[i];
    t.value = values[i];
    t.mode = m;
    t.missing_yes = i < missing.size() && missing[i] == 1;
    t.feature = 0;
    t.yes = t.no = 0;
    if (m == Mode::kLeaf) continue;
    if (features[i] < 0 || features[i] > RunNode<T>::kFeatureMask)
      return InvalidArgument(node.Describe(), ": nodes_featureids[", i, "] is ", features[i]);
    t.feature = static_cast<int32_t>(features[i]);
    e.max_feature = std::max<int64_t>(e.max_feature, features[i]);
    e.has_missing = e.has_missing || t.missing_yes;
    if (first_branch) {
      e.mode = m;
      first_branch = false;
    } else if (m != e.mode) {
      same_mode = false;
    }
  }
  if (!same_mode) e.mode = Mode::kLeaf;
  for (size_t i = 0; i < n; ++i) {
    TreeNode<T>& t = e.nodes[i];
    if (t.mode == Mode::kLeaf) continue;
    for (const auto& [child, ids, what] :
         {std::make_tuple(&t.yes, &yes, "true"), std::make_tuple(&t.no, &no, "false")}) {
      auto it = index.find({tree_ids[i], (*ids)[i]});
      if (it == index.end())
        return InvalidArgument(node.Describe(), ": the ", what, " branch of node ", node_ids[i], " in tree ",
                               tree_ids[i], " names node ", (*ids)[i], ", which the tree does not have");
      *child = it->second;
    }
  }
  for (size_t i = 0; i < n; ++i)
    if (i == 0 || tree_ids[i] != tree_ids[i - 1]) e.roots.push_back(static_cast<int32_t>(i));
  RETURN_IF_ERROR(CheckAcyclic(node, e.nodes, e.roots, tree_ids, node_ids));

  // Leaf weights, grouped by node in attribute order (a counting sort).
  const std::vector<int64_t> w_ids = node.GetInts(w + "_ids"), w_nodes = node.GetInts(w + "_nodeids"),
                             w_trees = node.GetInts(w + "_treeids");
  ASSIGN_OR_RETURN(std::vector<T> w_values, Values<T>(node, w + "_weights"));
  const size_t nw = w_ids.size();
  if (w_nodes.size() != nw || w_trees.size() != nw || w_values.size() != nw)
    return InvalidArgument(node.Describe(), ": ", w, "_ids, ", w, "_nodeids, ", w, "_treeids and ", w,
                           "_weights must have the same length, got ", nw, ", ", w_nodes.size(), ", ", w_trees.size(),
                           ", ", w_values.size());
  if (nw > static_cast<size_t>(INT32_MAX / 2)) return InvalidArgument(node.Describe(), ": too many ", w, " weights");
  std::vector<int32_t> owner(nw), count(n + 1, 0);
  for (size_t k = 0; k < nw; ++k) {
    auto it = index.find({w_trees[k], w_nodes[k]});
    if (it == index.end())
      return InvalidArgument(node.Describe(), ": ", w, " weight ", k, " is for node ", w_nodes[k], " of tree ",
                             w_trees[k], ", which does not exist");
    if (w_ids[k] < 0 || w_ids[k] >= n_targets)
      return InvalidArgument(node.Describe(), ": ", w, "_ids[", k, "] is ", w_ids[k], ", outside [0, ", n_targets, ")");
    owner[k] = it->second;
    ++count[it->second + 1];
  }
  for (size_t i = 0; i < n; ++i) count[i + 1] += count[i];
  e.weights.resize(nw);
  std::vector<int32_t> fill(count.begin(), count.end() - 1);
  for (size_t k = 0; k < nw; ++k) e.weights[fill[owner[k]]++] = {static_cast<int32_t>(w_ids[k]), w_values[k]};
  for (size_t i = 0; i < n; ++i) {
    if (e.nodes[i].mode != Mode::kLeaf) continue;
    e.nodes[i].yes = count[i];
    e.nodes[i].no = count[i + 1] - count[i];
  }
  ASSIGN_OR_RETURN(e.base_values, Values<T>(node, "base_values"));
  ASSIGN_OR_RETURN(e.post, ml::ParsePostTransform(node));
  LayOutDepthFirst(&e);
  return e;
}

// ---------------------------------------------------------------- descent

template <typename In>
inline bool IsNan(In v) {
  if constexpr (std::is_floating_point_v<In>) return std::isnan(v);
  return false;
}

// The test of a branch node; integer inputs compare after the usual conversion to T.
template <typename In, typename T>
inline bool Holds(Mode m, In v, T t) {
  switch (m) {
    case Mode::kLeq:
      return v <= t;
    case Mode::kLt:
      return v < t;
    case Mode::kGte:
      return v >= t;
    case Mode::kGt:
      return v > t;
    case Mode::kEq:
      return v == t;
    case Mode::kNeq:
      return v != t;
    case Mode::kLeaf:
      break;
  }
  return false;
}

// Descends from node i to a leaf. kFixed: every branch uses that mode (kLeaf: read each
// node's own); kMissing: some node sends NaN to its true branch.
template <Mode kFixed, bool kMissing, typename In, typename T>
int32_t Descend(const RunNode<T>* nodes, int32_t i, const In* x) {
  for (;;) {
    const RunNode<T>& n = nodes[i];
    if (n.yes == i) return i;  // a leaf
    const In v = x[n.feature()];
    bool go_yes = Holds(kFixed == Mode::kLeaf ? n.mode() : kFixed, v, n.value);
    if constexpr (kMissing) go_yes = go_yes || (n.missing_yes() && IsNan(v));
    i = go_yes ? n.yes : n.no;
  }
}

// Descends kLanes (start node, row) pairs together, `depth` steps, one level of every lane
// per step, without branches: the lanes' chains of dependent loads are independent, so the
// CPU overlaps them (one descent alone waits on each load in turn), and a lane at its leaf
// keeps stepping onto the leaf itself. The lanes are several rows in one tree, or one row in
// several trees. A leaf reads feature 0, which exists whenever a tree has a branch.
constexpr int kLanes = 8;
template <Mode kFixed, bool kMissing, typename In, typename T>
void DescendLanes(const RunNode<T>* nodes, const int32_t* start, const In* const* row, int32_t depth, int32_t* leaf) {
  // A fixed lane count lets the lane loop unroll inside the step loop, and the child is
  // picked with a mask, not a branch the compiler might keep (a mispredicted branch per
  // level costs more than the level).
  int32_t at[kLanes];
  for (int r = 0; r < kLanes; ++r) at[r] = start[r];
  for (int32_t step = 0; step < depth; ++step) {
#pragma GCC unroll 8
    for (int r = 0; r < kLanes; ++r) {
      const RunNode<T>& nd = nodes[at[r]];
      const In v = row[r][nd.feature()];
      bool go_yes = Holds(kFixed == Mode::kLeaf ? nd.mode() : kFixed, v, nd.value);
      if constexpr (kMissing) go_yes = go_yes | ((nd.missing_yes() != 0) & IsNan(v));
      const int32_t mask = -static_cast<int32_t>(go_yes);
      at[r] = (nd.yes & mask) | (nd.no & ~mask);
    }
  }
  for (int r = 0; r < kLanes; ++r) leaf[r] = at[r];
}

template <typename In, typename T>
using DescendFn = int32_t (*)(const RunNode<T>*, int32_t, const In*);
template <typename In, typename T>
using DescendLanesFn = void (*)(const RunNode<T>*, const int32_t*, const In* const*, int32_t, int32_t*);

// The descent loops for an ensemble and input type, and the two ways of filling the lanes.
// Fewer than kLanes / 2 descents go one by one: padding them out to the lanes would cost more.
template <typename In, typename T>
struct Descender {
  const Ensemble<T>& e;
  DescendFn<In, T> one;
  DescendLanesFn<In, T> lanes;

  Descender(const Ensemble<T>& ens) : e(ens) {
    const bool m = e.has_missing;
    switch (e.mode) {
      case Mode::kLeq:
        one = m ? Descend<Mode::kLeq, true, In, T> : Descend<Mode::kLeq, false, In, T>;
        lanes = m ? DescendLanes<Mode::kLeq, true, In, T> : DescendLanes<Mode::kLeq, false, In, T>;
        break;
      case Mode::kLt:
        one = m ? Descend<Mode::kLt, true, In, T> : Descend<Mode::kLt, false, In, T>;
        lanes = m ? DescendLanes<Mode::kLt, true, In, T> : DescendLanes<Mode::kLt, false, In, T>;
        break;
      default:
        one = m ? Descend<Mode::kLeaf, true, In, T> : Descend<Mode::kLeaf, false, In, T>;
        lanes = m ? DescendLanes<Mode::kLeaf, true, In, T> : DescendLanes<Mode::kLeaf, false, In, T>;
        break;
    }
  }
  // Tree j for rows x, x + width, ... (n <= kLanes of them).
  void Rows(int64_t j, const In* x, int64_t width, int n, int32_t* leaf) const {
    const int32_t root = e.roots[j];
    if (n < kLanes / 2) {
      for (int r = 0; r < n; ++r) leaf[r] = one(e.run.data(), root, x + r * width);
      return;
    }
    int32_t start[kLanes], out[kLanes];
    const In* row[kLanes];
    for (int r = 0; r < kLanes; ++r) {
      start[r] = root;
      row[r] = x + std::min(r, n - 1) * width;  // spare lanes repeat the last row
    }
    lanes(e.run.data(), start, row, e.depth[j], out);
    std::copy(out, out + n, leaf);
  }
  // Trees [j0, j1) for one row: leaf[j - j0].
  void Trees(int64_t j0, int64_t j1, const In* x, int32_t* leaf) const {
    for (int64_t j = j0; j < j1; j += kLanes) {
      const int n = static_cast<int>(std::min<int64_t>(kLanes, j1 - j));
      if (n < kLanes / 2) {
        for (int r = 0; r < n; ++r) leaf[j - j0 + r] = one(e.run.data(), e.roots[j + r], x);
        continue;
      }
      int32_t start[kLanes], out[kLanes];
      const In* row[kLanes];
      int32_t depth = 0;
      for (int r = 0; r < kLanes; ++r) {
        const int64_t t = j + std::min(r, n - 1);  // spare lanes repeat the last tree
        start[r] = e.roots[t];
        row[r] = x;
        depth = std::max(depth, e.depth[t]);
      }
      lanes(e.run.data(), start, row, depth, out);
      std::copy(out, out + n, leaf + (j - j0));
    }
  }
};

// ---------------------------------------------------------------- the kernel

// A label as the classifier computes it: an index into the class labels, or (ONNX Runtime's
// two-class rule when the weights vote for both classes) the raw value 1 or 0.
struct Label {
  int64_t value = 0;
  bool raw = false;
};

template <typename T>
class TreeEnsembleKernel final : public OpKernel {
 public:
  TreeEnsembleKernel(Ensemble<T> e, bool classifier, std::vector<int64_t> int_labels,
                     std::vector<std::string> str_labels)
      : e_(std::move(e)),
        classifier_(classifier),
        int_labels_(std::move(int_labels)),
        str_labels_(std::move(str_labels)) {
    if (classifier_) {
      // Two classes with weights for one of them only: the binary case.
      std::vector<bool> seen(static_cast<size_t>(e_.n_targets), false);
      size_t distinct = 0;
      for (const auto& w : e_.weights) {
        if (!seen[w.target]) ++distinct;
        seen[w.target] = true;
        all_positive_ = all_positive_ && !(w.value < 0);
      }
      binary_case_ = e_.n_targets == 2 && distinct == 1;
    }
  }

  Status Compute(KernelContext& ctx) const override {
    const Node& node = ctx.node();
    const Tensor* x = ctx.input(0);
    if (!x) return InvalidArgument(node.Describe(), ": input X is missing");
    if (x->rank() != 1 && x->rank() != 2)
      return InvalidArgument(node.Describe(), ": X must be [N, F] or [F], got ", ShapeToString(x->shape()));
    const int64_t rows = x->rank() == 1 ? 1 : x->dim(0);
    const int64_t width = x->rank() == 1 ? x->dim(0) : x->dim(1);
    if (rows > 0 && e_.max_feature >= width)
      return InvalidArgument(node.Describe(), ": a node tests feature ", e_.max_feature, " but X has ", width,
                             " features per row");
    float* z = nullptr;
    Tensor* y_labels = nullptr;
    if (classifier_) {
      const DataType label_type = str_labels_.empty() ? DataType::kInt64 : DataType::kString;
      ASSIGN_OR_RETURN(y_labels, ctx.AllocateOutput(0, label_type, {rows}));
      ASSIGN_OR_RETURN(Tensor * scores, ctx.AllocateOutput(1, DataType::kFloat, {rows, e_.n_targets}));
      z = scores->mutable_data<float>();
    } else {
      ASSIGN_OR_RETURN(Tensor * y, ctx.AllocateOutput(0, DataType::kFloat, {rows, e_.n_targets}));
      z = y->mutable_data<float>();
    }
    if (rows == 0) return Status::Ok();
    std::vector<Label> labels(classifier_ ? static_cast<size_t>(rows) : 0);
    Status st;
    switch (x->dtype()) {
      case DataType::kFloat:
        st = Run(node, x->data<float>(), rows, width, z, labels.data(), ctx.pool());
        break;
      case DataType::kDouble:
        st = Run(node, x->data<double>(), rows, width, z, labels.data(), ctx.pool());
        break;
      case DataType::kInt64:
        st = Run(node, x->data<int64_t>(), rows, width, z, labels.data(), ctx.pool());
        break;
      case DataType::kInt32:
        st = Run(node, x->data<int32_t>(), rows, width, z, labels.data(), ctx.pool());
        break;
      default:
        return InvalidArgument(node.Describe(), ": X must be float, double, int64 or int32, got ",
                               DataTypeName(x->dtype()));
    }
    RETURN_IF_ERROR(st);
    if (classifier_) WriteLabels(labels, y_labels);
    return Status::Ok();
  }

 private:
  void WriteLabels(const std::vector<Label>& labels, Tensor* y) const {
    if (str_labels_.empty()) {
      int64_t* out = y->mutable_data<int64_t>();
      for (size_t i = 0; i < labels.size(); ++i)
        out[i] = labels[i].raw ? labels[i].value : int_labels_[labels[i].value];
    } else {
      std::string* out = y->mutable_data<std::string>();
      for (size_t i = 0; i < labels.size(); ++i) out[i] = str_labels_[labels[i].value];
    }
  }

  // Adds one leaf to a row's single score (the single-target regressor).
  void Add1(const RunNode<T>& leaf, T& score, bool& has) const {
    const T w = leaf.value;  // the first weight, or 0 (LayOutDepthFirst)
    switch (e_.agg) {
      case Agg::kSum:
      case Agg::kAverage:
        score += w;
        break;
      case Agg::kMin:
        score = (!has || w < score) ? w : score;
        break;
      case Agg::kMax:
        score = (!has || w > score) ? w : score;
        break;
    }
    has = true;
  }
  float Finish1(T score, bool has) const {
    const T origin = e_.base_values.size() == 1 ? e_.base_values[0] : T(0);
    T v;
    switch (e_.agg) {
      case Agg::kSum:
        v = score + origin;
        break;
      case Agg::kAverage:
        v = score / static_cast<T>(e_.roots.size()) + origin;
        break;
      default:
        v = has ? score + origin : origin;
        break;
    }
    return e_.post == PostTransform::kProbit ? ml::Probit(static_cast<float>(v)) : static_cast<float>(v);
  }
  // Adds one leaf's weights to a row's scores (several targets or classes).
  void AddN(int32_t leaf, T* score, uint8_t* has) const {
    const auto [first, count] = e_.leaf_weights[leaf];
    const LeafWeight<T>* w = e_.weights.data() + first;
    const bool minmax = !classifier_ && (e_.agg == Agg::kMin || e_.agg == Agg::kMax);
    for (int32_t k = 0; k < count; ++k) {
      const int32_t t = w[k].target;
      const T v = w[k].value;
      if (!minmax) {
        score[t] += v;
      } else if (!has[t] || (e_.agg == Agg::kMin ? v < score[t] : v > score[t])) {
        score[t] = v;
      }
      has[t] = 1;
    }
  }
  void FinishRegressor(T* score, const uint8_t* has, float* z, std::vector<float>& buf) const;
  Label FinishClassifier(T* score, uint8_t* has, float* z, std::vector<float>& buf) const;

  template <typename In>
  Status Run(const Node& node, const In* x, int64_t rows, int64_t width, float* z, Label* labels,
             ThreadPool* pool) const;

  Ensemble<T> e_;
  bool classifier_;
  std::vector<int64_t> int_labels_;
  std::vector<std::string> str_labels_;
  bool binary_case_ = false;
  bool all_positive_ = true;
};

template <typename T>
void TreeEnsembleKernel<T>::FinishRegressor(T* score, const uint8_t* has, float* z, std::vector<float>& buf) const {
  const size_t n = static_cast<size_t>(e_.n_targets);
  const bool use_base = e_.base_values.size() == n;
  buf.resize(n);
  const T n_trees = static_cast<T>(e_.roots.size());
  for (size_t k = 0; k < n; ++k) {
    T v = score[k];
    const T base = use_base ? e_.base_values[k] : T(0);
    switch (e_.agg) {
      case Agg::kSum:
        v = v + base;
        break;
      case Agg::kAverage:
        v = v / n_trees + base;
        break;
      default:
        v = base + v;
        break;
    }
    buf[k] = has[k] ? static_cast<float>(v) : 0.0f;
  }
  ml::TransformScores(buf, e_.post, SecondClass::kNone);
  std::copy(buf.begin(), buf.end(), z);
}

// ONNX Runtime's classifier finish: base values, the label, the second column of a
// two-class model with one score.
template <typename T>
Label TreeEnsembleKernel<T>::FinishClassifier(T* score, uint8_t* has, float* z, std::vector<float>& buf) const {
  const size_t n = static_cast<size_t>(e_.n_targets);
  const std::vector<T>& base = e_.base_values;
  Label label;
  SecondClass second = SecondClass::kNone;
  size_t used = n;
  if (n > 2) {
    for (size_t k = 0; k < base.size() && k < n; ++k) {
      score[k] = has[k] ? score[k] + base[k] : base[k];
      has[k] = 1;
    }
    int64_t best = -1;
    T best_score = 0;
    for (size_t k = 0; k < n; ++k) {
      if (has[k] && (best == -1 || score[k] > best_score)) {
        best = static_cast<int64_t>(k);
        best_score = score[k];
      }
    }
    label.value = best < 0 ? 0 : best;  // no class scored: the first (ONNX Runtime reads index -1)
  } else {
    if (base.size() == 2) {
      if (has[1]) {
        // ONNX Runtime's rule: base_values[0] is unused and class 0 is the negation.
        score[1] = base[1] + score[0];
        score[0] = -score[1];
        has[1] = 1;
      } else {
        score[1] += base[1];
        score[0] += base[0];
      }
    } else if (base.size() == 1) {
      score[0] += base[0];
      if (!has[1]) used = 1;
    } else if (base.empty()) {
      second = SecondClass::kMixedNegative;
      if (!has[1]) used = 1;
    }
    const T pos = (used == 2 && has[1]) ? score[1] : (has[0] ? score[0] : T(0));
    if (binary_case_) {
      const bool positive = all_positive_ ? pos > T(0.5) : pos > T(0);
      second = all_positive_ ? SecondClass::kNegFirst
                             : (positive ? SecondClass::kMixedPositive : SecondClass::kMixedNegative);
      label.value = positive ? 1 : 0;
    } else {
      label.value = pos > T(0) ? 1 : 0;
      label.raw = true;
    }
  }
  buf.resize(used);
  for (size_t k = 0; k < used; ++k) buf[k] = has[k] ? static_cast<float>(score[k]) : 0.0f;
  ml::TransformScores(buf, e_.post, second);
  for (size_t k = 0; k < n; ++k) z[k] = k < buf.size() ? buf[k] : 0.0f;
  return label;
}

template <typename T>
template <typename In>
Status TreeEnsembleKernel<T>::Run(const Node& node, const In* x, int64_t rows, int64_t width, float* z, Label* labels,
                                  ThreadPool* pool) const {
  const Descender<In, T> descend(e_);
  const RunNode<T>* nodes = e_.run.data();
  const int64_t n_trees = static_cast<int64_t>(e_.roots.size());
  const int64_t nt = e_.n_targets;
  const bool single = !classifier_ && nt == 1;
  const int threads = pool ? pool->num_threads() : 1;
  const int64_t total_depth = e_.total_depth;
  KernelStop stop(node);

  // Adds the leaves of every tree, in tree order, to row r's scores and finishes the row.
  auto finish_row = [&](int64_t r, const int32_t* leaves, std::vector<T>& score, std::vector<uint8_t>& has,
                        std::vector<float>& buf) {
    if (single) {
      T s = 0;
      bool h = false;
      for (int64_t j = 0; j < n_trees; ++j) Add1(nodes[leaves[j]], s, h);
      z[r] = Finish1(s, h);
      return;
    }
    std::fill(score.begin(), score.end(), T(0));
    std::fill(has.begin(), has.end(), 0);
    for (int64_t j = 0; j < n_trees; ++j) AddN(leaves[j], score.data(), has.data());
    if (classifier_) {
      labels[r] = FinishClassifier(score.data(), has.data(), z + r * nt, buf);
    } else {
      FinishRegressor(score.data(), has.data(), z + r * nt, buf);
    }
  };

  // A few rows: each row descends its trees kLanes at a time (the rows are too few to fill
  // the lanes), one row with many trees on several threads; the sums go in tree order.
  if (rows < kLanes / 2) {
    std::vector<int32_t> leaves(static_cast<size_t>(n_trees));
    std::vector<T> score(static_cast<size_t>(nt));
    std::vector<uint8_t> has(static_cast<size_t>(nt));
    std::vector<float> buf;
    for (int64_t r = 0; r < rows; ++r) {
      const In* xr = x + r * width;
      if (threads > 1 && total_depth >= 8192) {  // else the hand-off costs more than it saves
        pool->ParallelFor((n_trees + kLanes - 1) / kLanes, 4, [&](int64_t b, int64_t e) {
          int64_t pending = 0;
          if (!stop.Continue(pending, (e - b) * kLanes * 64)) return;
          descend.Trees(b * kLanes, std::min(n_trees, e * kLanes), xr, leaves.data() + b * kLanes);
        });
        RETURN_IF_ERROR(stop.status());
      } else {
        descend.Trees(0, n_trees, xr, leaves.data());
      }
      finish_row(r, leaves.data(), score, has, buf);
    }
    return Status::Ok();
  }

  // Blocks of rows, trees outer within a block (a tree's nodes stay in cache across the
  // block), kLanes rows descending together. Enough blocks for every thread.
  int64_t block = 64;
  if (threads > 1) block = std::clamp<int64_t>((rows + threads - 1) / threads, kLanes, 64);
  const int64_t n_blocks = (rows + block - 1) / block;
  auto run_blocks = [&](int64_t b0, int64_t b1) {
    std::vector<T> score(static_cast<size_t>(block * nt));
    std::vector<uint8_t> has(static_cast<size_t>(block * nt));
    std::vector<float> buf;
    int32_t leaf[kLanes];
    int64_t pending = 0;
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t r0 = b * block, r1 = std::min(rows, r0 + block), nr = r1 - r0;
      if (!stop.Continue(pending, nr * n_trees * 16)) return;
      std::fill(score.begin(), score.begin() + nr * nt, T(0));
      std::fill(has.begin(), has.begin() + nr * nt, 0);
      for (int64_t j = 0; j < n_trees; ++j) {
        for (int64_t g = 0; g < nr; g += kLanes) {
          const int n = static_cast<int>(std::min<int64_t>(kLanes, nr - g));
          descend.Rows(j, x + (r0 + g) * width, width, n, leaf);
          if (single) {
            for (int r = 0; r < n; ++r) {
              bool h = has[g + r] != 0;
              Add1(nodes[leaf[r]], score[g + r], h);
              has[g + r] = h;
            }
          } else {
            for (int r = 0; r < n; ++r) AddN(leaf[r], score.data() + (g + r) * nt, has.data() + (g + r) * nt);
          }
        }
      }
      for (int64_t r = 0; r < nr; ++r) {
        if (single) {
          z[r0 + r] = Finish1(score[r], has[r] != 0);
        } else if (classifier_) {
          labels[r0 + r] = FinishClassifier(score.data() + r * nt, has.data() + r * nt, z + (r0 + r) * nt, buf);
        } else {
          FinishRegressor(score.data() + r * nt, has.data() + r * nt, z + (r0 + r) * nt, buf);
        }
      }
    }
  };
  if (pool && threads > 1 && n_blocks > 1) {
    pool->ParallelFor(n_blocks, 1, run_blocks);
  } else {
    run_blocks(0, n_blocks);
  }
  return stop.status();
}

// ---------------------------------------------------------------- registration

template <typename T>
Result<std::unique_ptr<OpKernel>> MakeKernel(const Node& node, bool classifier) {
  if (!classifier) {
    const int64_t n_targets = node.GetInt("n_targets", 1);
    if (n_targets < 1 || n_targets > (int64_t{1} << 20))
      return InvalidArgument(node.Describe(), ": n_targets is ", n_targets);
    ASSIGN_OR_RETURN(Ensemble<T> e, BuildEnsemble<T>(node, "target", n_targets));
    const std::string agg = node.GetString("aggregate_function", "SUM");
    if (agg == "SUM") {
      e.agg = Agg::kSum;
    } else if (agg == "AVERAGE") {
      e.agg = Agg::kAverage;
    } else if (agg == "MIN") {
      e.agg = Agg::kMin;
    } else if (agg == "MAX") {
      e.agg = Agg::kMax;
    } else {
      return InvalidArgument(node.Describe(), ": aggregate_function '", agg, "' is not one of SUM, AVERAGE, MIN, MAX");
    }
    return std::unique_ptr<OpKernel>(new TreeEnsembleKernel<T>(std::move(e), false, {}, {}));
  }
  std::vector<int64_t> ints = node.GetInts("classlabels_int64s");
  std::vector<std::string> strs = node.GetStrings("classlabels_strings");
  if (ints.empty() == strs.empty())
    return InvalidArgument(node.Describe(), ": exactly one of classlabels_int64s and classlabels_strings must be set");
  const int64_t n_classes = static_cast<int64_t>(std::max(ints.size(), strs.size()));
  if (n_classes < 2)
    return Unsupported(node.Describe(), ": a classifier with ", n_classes, " class label is not supported");
  ASSIGN_OR_RETURN(Ensemble<T> e, BuildEnsemble<T>(node, "class", n_classes));
  return std::unique_ptr<OpKernel>(new TreeEnsembleKernel<T>(std::move(e), true, std::move(ints), std::move(strs)));
}

void RegisterTree(KernelRegistry& r, const char* op, bool classifier) {
  KernelDef d;
  d.domain = kMlDomain;
  d.op_type = op;
  d.since_version = 1;
  d.types = {DataType::kFloat, DataType::kDouble, DataType::kInt64, DataType::kInt32};
  d.type_input = 0;
  d.factory = [classifier](const KernelInit& init) -> Result<std::unique_ptr<OpKernel>> {
    const char* weights = classifier ? "class" : "target";
    return UsesDouble(init.node, weights) ? MakeKernel<double>(init.node, classifier)
                                          : MakeKernel<float>(init.node, classifier);
  };
  r.Register(std::move(d));
}

}  // namespace

void RegisterMlTreeKernels(KernelRegistry& r) {
  RegisterTree(r, "TreeEnsembleRegressor", false);
  RegisterTree(r, "TreeEnsembleClassifier", true);
}

}  // namespace strata
