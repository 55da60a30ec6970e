// Runs one model in ONNX Runtime through its C API with tensor, map and sequence-of-map
// feeds, and prints every output as JSON: the reference side of map_parity.py (ONNX Runtime's
// node binding cannot pass maps or sequences). Usage: ort_maps MODEL FEEDS.json [ITERS]
// With ITERS, the run is also timed ITERS times after 10 warm-up runs, each including the
// release of its outputs, and the JSON gets "median_ms" (text_bench.py).
//
// FEEDS.json: {"name": {"kind": "tensor", "dtype": "float"|"double"|"int64"|"string",
//                       "shape": [...], "data": [...]}
//              | {"kind": "map", "key": "int64"|"string", "value": <dtype>, "keys": [...],
//                 "values": [...]}}
// Output: {"outputs": [{"name": ..., <a value>}]} where a value is a tensor as above, a map
// {"kind": "map", "keys": [...], "values": [...]} or {"kind": "seq", "items": [<values>]}.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ort_check.h"

namespace {

using nlohmann::json;
using ort_tools::Check;
using ort_tools::Die;
using ort_tools::g_ort;

ONNXTensorElementDataType ElemType(const std::string& t) {
  if (t == "float") return ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
  if (t == "double") return ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE;
  if (t == "int64") return ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64;
  if (t == "string") return ONNX_TENSOR_ELEMENT_DATA_TYPE_STRING;
  Die("unknown dtype '" + t + "'");
}

// A tensor of `dtype` and `shape` holding `data` (flat). The caller releases it.
OrtValue* MakeTensor(OrtAllocator* alloc, const std::string& dtype, const std::vector<int64_t>& shape,
                     const json& data) {
  OrtValue* v = nullptr;
  Check(g_ort->CreateTensorAsOrtValue(alloc, shape.data(), shape.size(), ElemType(dtype), &v), "CreateTensor");
  const size_t n = data.size();
  if (dtype == "string") {
    std::vector<std::string> s = data.get<std::vector<std::string>>();
    std::vector<const char*> p;
    for (const auto& x : s) p.push_back(x.c_str());
    if (n) Check(g_ort->FillStringTensor(v, p.data(), p.size()), "FillStringTensor");
    return v;
  }
  void* raw = nullptr;
  Check(g_ort->GetTensorMutableData(v, &raw), "GetTensorMutableData");
  for (size_t i = 0; i < n; ++i) {
    if (dtype == "float") static_cast<float*>(raw)[i] = data[i].get<float>();
    if (dtype == "double") static_cast<double*>(raw)[i] = data[i].get<double>();
    if (dtype == "int64") static_cast<int64_t*>(raw)[i] = data[i].get<int64_t>();
  }
  return v;
}

json TensorJson(const OrtValue* v) {
  OrtTensorTypeAndShapeInfo* info = nullptr;
  Check(g_ort->GetTensorTypeAndShape(v, &info), "GetTensorTypeAndShape");
  ONNXTensorElementDataType t;
  size_t rank = 0, n = 0;
  Check(g_ort->GetTensorElementType(info, &t), "GetTensorElementType");
  Check(g_ort->GetDimensionsCount(info, &rank), "GetDimensionsCount");
  std::vector<int64_t> shape(rank);
  Check(g_ort->GetDimensions(info, shape.data(), rank), "GetDimensions");
  Check(g_ort->GetTensorShapeElementCount(info, &n), "GetTensorShapeElementCount");
  g_ort->ReleaseTensorTypeAndShapeInfo(info);
  json out = {{"kind", "tensor"}, {"shape", shape}};
  json data = json::array();
  if (t == ONNX_TENSOR_ELEMENT_DATA_TYPE_STRING) {
    out["dtype"] = "string";
    for (size_t i = 0; i < n; ++i) {
      size_t len = 0;
      Check(g_ort->GetStringTensorElementLength(v, i, &len), "GetStringTensorElementLength");
      std::string s(len, '\0');
      if (len) Check(g_ort->GetStringTensorElement(v, len, i, s.data()), "GetStringTensorElement");
      data.push_back(s);
    }
  } else {
    if (t == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) {
      out["dtype"] = "float";
    } else if (t == ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE) {
      out["dtype"] = "double";
    } else if (t == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64) {
      out["dtype"] = "int64";
    } else {
      Die("output element type " + std::to_string(static_cast<int>(t)) + " is not handled");
    }
    void* raw = nullptr;
    Check(g_ort->GetTensorMutableData(const_cast<OrtValue*>(v), &raw), "GetTensorMutableData");
    for (size_t i = 0; i < n; ++i) {
      if (t == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) data.push_back(static_cast<const float*>(raw)[i]);
      if (t == ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE) data.push_back(static_cast<const double*>(raw)[i]);
      if (t == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64) data.push_back(static_cast<const int64_t*>(raw)[i]);
    }
  }
  out["data"] = data;
  return out;
}

json ValueJson(OrtAllocator* alloc, const OrtValue* v) {
  ONNXType type;
  Check(g_ort->GetValueType(v, &type), "GetValueType");
  if (type == ONNX_TYPE_TENSOR) return TensorJson(v);
  if (type == ONNX_TYPE_MAP) {
    OrtValue *k = nullptr, *x = nullptr;
    Check(g_ort->GetValue(v, 0, alloc, &k), "GetValue(map keys)");
    Check(g_ort->GetValue(v, 1, alloc, &x), "GetValue(map values)");
    json out = {{"kind", "map"}, {"keys", TensorJson(k)["data"]}, {"values", TensorJson(x)["data"]}};
    g_ort->ReleaseValue(k);
    g_ort->ReleaseValue(x);
    return out;
  }
  if (type == ONNX_TYPE_SEQUENCE) {
    size_t n = 0;
    Check(g_ort->GetValueCount(v, &n), "GetValueCount");
    json items = json::array();
    for (size_t i = 0; i < n; ++i) {
      OrtValue* item = nullptr;
      Check(g_ort->GetValue(v, static_cast<int>(i), alloc, &item), "GetValue(sequence item)");
      items.push_back(ValueJson(alloc, item));
      g_ort->ReleaseValue(item);
    }
    return {{"kind", "seq"}, {"items", items}};
  }
  Die("output value type " + std::to_string(static_cast<int>(type)) + " is not handled");
}

}  // namespace

int main(int argc, char** argv) {
  ort_tools::g_tool = "ort_maps";
  if (argc != 3 && argc != 4) Die("usage: ort_maps MODEL FEEDS.json [ITERS]");
  const int iters = argc == 4 ? std::atoi(argv[3]) : 0;
  ort_tools::InitApi();
  std::ifstream f(argv[2]);
  if (!f) Die(std::string("cannot read ") + argv[2]);
  const json feeds = json::parse(f);

  OrtEnv* env = nullptr;
  Check(g_ort->CreateEnv(ORT_LOGGING_LEVEL_ERROR, "ort_maps", &env), "CreateEnv");
  OrtSessionOptions* so = ort_tools::BenchSessionOptions(1);
  OrtSession* session = nullptr;
  Check(g_ort->CreateSession(env, argv[1], so, &session), "CreateSession");
  OrtAllocator* alloc = nullptr;
  Check(g_ort->GetAllocatorWithDefaultOptions(&alloc), "GetAllocatorWithDefaultOptions");

  std::vector<std::string> in_names;
  std::vector<OrtValue*> ins, parts;
  for (const auto& [name, spec] : feeds.items()) {
    in_names.push_back(name);
    if (spec["kind"] == "tensor") {
      ins.push_back(MakeTensor(alloc, spec["dtype"], spec["shape"].get<std::vector<int64_t>>(), spec["data"]));
    } else {
      const int64_t n = static_cast<int64_t>(spec["keys"].size());
      OrtValue* kv[2] = {MakeTensor(alloc, spec["key"], {n}, spec["keys"]),
                         MakeTensor(alloc, spec["value"], {n}, spec["values"])};
      OrtValue* map = nullptr;
      Check(g_ort->CreateValue(kv, 2, ONNX_TYPE_MAP, &map), "CreateValue(map)");
      parts.insert(parts.end(), kv, kv + 2);
      ins.push_back(map);
    }
  }
  const std::vector<std::string> out_names = ort_tools::OutputNames(session, alloc);
  const size_t n_out = out_names.size();
  std::vector<const char*> in_p, out_p;
  for (const auto& s : in_names) in_p.push_back(s.c_str());
  for (const auto& s : out_names) out_p.push_back(s.c_str());
  std::vector<OrtValue*> outs(n_out, nullptr);
  Check(g_ort->Run(session, nullptr, in_p.data(), ins.data(), ins.size(), out_p.data(), n_out, outs.data()), "Run");
  json result = {{"outputs", json::array()}};
  for (size_t i = 0; i < n_out; ++i) {
    json o = ValueJson(alloc, outs[i]);
    o["name"] = out_names[i];
    result["outputs"].push_back(o);
    g_ort->ReleaseValue(outs[i]);
  }
  if (iters > 0) {
    std::vector<double> ms;
    for (int i = -10; i < iters; ++i) {
      std::vector<OrtValue*> o(n_out, nullptr);
      const auto t0 = std::chrono::steady_clock::now();
      Check(g_ort->Run(session, nullptr, in_p.data(), ins.data(), ins.size(), out_p.data(), n_out, o.data()), "Run");
      for (OrtValue* v : o) g_ort->ReleaseValue(v);
      const auto t1 = std::chrono::steady_clock::now();
      if (i >= 0) ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    result["median_ms"] = ms[ms.size() / 2];
  }
  std::cout << result.dump() << "\n";
  for (OrtValue* v : ins) g_ort->ReleaseValue(v);
  for (OrtValue* v : parts) g_ort->ReleaseValue(v);
  g_ort->ReleaseSession(session);
  g_ort->ReleaseSessionOptions(so);
  g_ort->ReleaseEnv(env);
  return 0;
}
