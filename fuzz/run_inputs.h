// The inputs strata_fuzz_run feeds a session (fuzz/run_fuzzer.cc), shared with the replay of
// its committed finds (HostileCorpus.RunsFailCleanly in tests/unit/hostile_test.cc), so that
// a file under tests/data/hostile/run runs on exactly the inputs the fuzzer gave it.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/session.h"
#include "core/tensor.h"

namespace strata::fuzz {

constexpr int64_t kMaxInputElements = int64_t{1} << 14;
constexpr int64_t kMaxTotalElements = int64_t{1} << 16;

// FNV-1a over the input: picks open dims and the value pattern, so the same bytes always
// run the same inputs (a crash reproduces from its artifact alone).
inline uint64_t Hash(const uint8_t* data, size_t size) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < size; ++i) h = (h ^ data[i]) * 1099511628211ull;
  return h;
}

// The i-th value of a pattern: mostly small numbers, every 8th or so an awkward one.
inline double FloatValue(uint64_t h, int64_t i) {
  static const double kValues[] = {0.0, 1.0, -1.0, 0.5, 2.0, -3.0, 0.25, 7.0, -0.5, 3.0, 1.5, -2.0};
  const double inf = std::numeric_limits<double>::infinity();
  static const double kAwkward[] = {std::nan(""), inf, -inf, 1e30, -1e30, 1e-40, -0.0, 65504.0};
  const uint64_t x = (h >> 7) + static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull;
  const uint64_t r = (x ^ (x >> 29)) * 0xBF58476D1CE4E5B9ull;
  if ((r >> 40) % 8 == 0) return kAwkward[(r >> 20) % 8];
  return kValues[(r >> 8) % 12];
}
inline int64_t IntValue(uint64_t h, int64_t i) {
  static const int64_t kValues[] = {0, 1, 2, -1, 3, 1, 0, 2, -2, 4, 1, 5};
  static const int64_t kAwkward[] = {std::numeric_limits<int64_t>::max(),
                                     std::numeric_limits<int64_t>::min(),
                                     std::numeric_limits<int32_t>::max(),
                                     std::numeric_limits<int32_t>::min(),
                                     65536,
                                     -65536,
                                     255,
                                     1000000};
  const uint64_t x = (h >> 11) + static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull;
  const uint64_t r = (x ^ (x >> 31)) * 0x94D049BB133111EBull;
  if ((r >> 40) % 8 == 0) return kAwkward[(r >> 20) % 8];
  return kValues[(r >> 8) % 12];
}

inline uint16_t Half(float f) {  // float -> IEEE half by truncation (NaN and infinities kept)
  uint32_t b = 0;
  std::memcpy(&b, &f, 4);
  const uint32_t sign = (b >> 16) & 0x8000u;
  const int32_t e = static_cast<int32_t>((b >> 23) & 0xFF) - 127 + 15;
  if (((b >> 23) & 0xFF) == 0xFF) return static_cast<uint16_t>(sign | 0x7C00u | ((b & 0x7FFFFFu) ? 0x200u : 0u));
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7C00u);
  if (e <= 0) return static_cast<uint16_t>(sign);
  return static_cast<uint16_t>(sign | (static_cast<uint32_t>(e) << 10) | ((b >> 13) & 0x3FFu));
}

// Fills t with the pattern for its type; false for types this target does not make.
// Integer scalars (rank 0) get small values only: they are trip counts, depths and sizes, and
// a Loop of INT64_MAX iterations the harness asked for would be a timeout, not a finding.
inline bool Fill(Tensor& t, uint64_t h) {
  const int64_t n = t.num_elements();
  const bool scalar = t.rank() == 0;
  void* p = n > 0 ? t.raw_mutable_data() : nullptr;
  for (int64_t i = 0; i < n; ++i) {
    const double f = FloatValue(h, i);
    const int64_t v = scalar ? std::abs(IntValue(h, i) % 6) : IntValue(h, i);
    switch (t.dtype()) {
      case DataType::kFloat:
        static_cast<float*>(p)[i] = static_cast<float>(f);
        break;
      case DataType::kDouble:
        static_cast<double*>(p)[i] = f;
        break;
      case DataType::kFloat16:
        static_cast<uint16_t*>(p)[i] = Half(static_cast<float>(f));
        break;
      case DataType::kBFloat16: {
        const float ff = static_cast<float>(f);
        uint32_t b = 0;
        std::memcpy(&b, &ff, 4);
        static_cast<uint16_t*>(p)[i] = static_cast<uint16_t>(b >> 16);
        break;
      }
      case DataType::kInt64:
        static_cast<int64_t*>(p)[i] = v;
        break;
      case DataType::kInt32:
        static_cast<int32_t*>(p)[i] = static_cast<int32_t>(v);
        break;
      case DataType::kInt16:
        static_cast<int16_t*>(p)[i] = static_cast<int16_t>(v);
        break;
      case DataType::kInt8:
        static_cast<int8_t*>(p)[i] = static_cast<int8_t>(static_cast<uint64_t>(v) * 37u);
        break;
      case DataType::kUInt8:
        static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(static_cast<uint64_t>(v) * 37u);
        break;
      case DataType::kUInt16:
        static_cast<uint16_t*>(p)[i] = static_cast<uint16_t>(v);
        break;
      case DataType::kUInt32:
        static_cast<uint32_t*>(p)[i] = static_cast<uint32_t>(v);
        break;
      case DataType::kUInt64:
        static_cast<uint64_t*>(p)[i] = static_cast<uint64_t>(v);
        break;
      case DataType::kBool:
        static_cast<bool*>(p)[i] = (v & 1) != 0;
        break;
      case DataType::kString:
        static_cast<std::string*>(p)[i] = std::string(static_cast<size_t>(v & 3), 'a');
        break;
      default:
        return false;
    }
  }
  return true;
}

// A map input (ai.onnx.ml DictVectorizer, CastMap): 0 to 3 distinct keys (int64 keys around
// zero, negatives included; string keys "a", "aa", ...) with pattern values. False for key or
// value types this target does not make.
inline bool MakeMapFeed(const TypeInfo& type, uint64_t h, Value* out) {
  const int64_t n = static_cast<int64_t>(h % 4);
  auto keys = Tensor::Allocate(type.map_key, Shape{n});
  auto values = Tensor::Allocate(type.elem_type, Shape{n});
  if (!keys.ok() || !values.ok() || !Fill(*values, h)) return false;
  for (int64_t i = 0; i < n; ++i) {
    if (type.map_key == DataType::kInt64) {
      keys->mutable_data<int64_t>()[i] = static_cast<int64_t>((h >> 3) % 5) - 2 + 3 * i;
    } else if (type.map_key == DataType::kString) {
      keys->mutable_data<std::string>()[i] = std::string(static_cast<size_t>(i + 1), 'a');
    } else {
      return false;
    }
  }
  auto m = MakeMap(*keys, *values, "fuzz map");
  if (!m.ok()) return false;
  *out = std::move(*m);
  return true;
}

// The feeds for one run of `session` made from the fuzz input `data`: false when an input is
// neither a tensor of known rank nor a map, or the inputs exceed the element bounds (the
// session is then not run). Dims the model leaves open are 1 to 3, picked from the input's hash.
inline bool MakeRunFeeds(const Session& session, const uint8_t* data, size_t size,
                         std::vector<std::pair<std::string, Value>>* feeds) {
  const uint64_t h = Hash(data, size);
  int64_t total = 0;
  int k = 0;
  for (const ValueInfo& vi : session.inputs()) {
    if (vi.type.kind == TypeInfo::Kind::kMap) {
      Value m;
      if (!MakeMapFeed(vi.type, h + static_cast<uint64_t>(feeds->size()), &m)) return false;
      feeds->emplace_back(vi.name, std::move(m));
      continue;
    }
    if (vi.type.kind != TypeInfo::Kind::kTensor || !vi.type.has_shape) return false;
    Shape shape;
    int64_t elems = 1;
    for (const Dim& d : vi.type.dims) {
      const int64_t v = d.known() ? d.value : static_cast<int64_t>((h >> (2 * (k++ % 24))) % 3) + 1;
      if (v > kMaxInputElements || (v > 0 && elems > kMaxInputElements / v)) return false;
      elems *= v;
      shape.push_back(v);
    }
    total += elems;
    if (total > kMaxTotalElements) return false;
    auto t = Tensor::Allocate(vi.type.elem_type, shape);
    if (!t.ok() || !Fill(*t, h + static_cast<uint64_t>(feeds->size()))) return false;
    feeds->emplace_back(vi.name, Value(std::move(*t)));
  }
  return true;
}

// Session options of the run target: one thread, every optimization, no tensor above 4 MiB,
// no run past 5 s. A Loop whose constant trip count and condition never end it is the
// model's meaning, not a bug: the deadline ends it cleanly (CANCELLED) instead of tripping
// libFuzzer's -timeout. So does a kernel of unbounded cost that checks the run's limits
// (core/kernel_stop.h); one that does not and hangs still trips the timeout.
inline SessionOptions RunOptions() {
  SessionOptions opts;
  opts.threads = 1;
  opts.optimization_level = 99;
  opts.memory_cap_bytes = size_t{4} << 20;
  opts.run_timeout_ms = 5000;
  return opts;
}

}  // namespace strata::fuzz
