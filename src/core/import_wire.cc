// Wire-format pre-pass that keeps large initializer payloads out of protobuf.
//
// ModelProto::ParseFromArray copies every raw_data payload into a std::string, so a parsed
// 400 MB model holds the weights twice (file bytes + protobuf strings) and the copy costs
// a few hundred milliseconds. This pass walks the serialized model without parsing it and
// re-emits it with each large main-graph initializer's raw_data replaced by a one-byte
// placeholder, recording where the payload sits in the original bytes. The importer then
// parses the small stripped model and reads each payload straight into its final tensor
// (or maps it). The pass is an optimization only: anything it does not expect (groups,
// repeated graph fields, bad varints) makes it give up, and the importer parses the
// original bytes as before, so errors come from the normal path.
#include <cstring>

#include "core/import_internal.h"

namespace strata::import {

namespace {

// ModelProto.graph, GraphProto.initializer, TensorProto.raw_data.
constexpr uint32_t kModelGraphField = 7;
constexpr uint32_t kGraphInitializerField = 5;
constexpr uint32_t kTensorRawDataField = 9;
constexpr uint32_t kWireVarint = 0, kWire64 = 1, kWireLen = 2, kWire32 = 5;

class Reader {
 public:
  Reader(const uint8_t* p, size_t n) : p_(p), end_(p + n) {}
  bool done() const { return p_ == end_; }
  const uint8_t* pos() const { return p_; }

  bool Varint(uint64_t* v) {
    uint64_t r = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ == end_) return false;
      uint8_t b = *p_++;
      r |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) {
        *v = r;
        return true;
      }
    }
    return false;
  }
  // Reads a tag and skips the field's value. For length-delimited fields, *payload and
  // *len describe the bytes. Returns false on anything malformed or unsupported.
  bool Field(uint32_t* number, uint32_t* wire, const uint8_t** payload, size_t* len) {
    uint64_t tag;
    if (!Varint(&tag) || (tag >> 3) == 0 || (tag >> 3) > 0x1fffffff) return false;
    *number = static_cast<uint32_t>(tag >> 3);
    *wire = static_cast<uint32_t>(tag & 7);
    switch (*wire) {
      case kWireVarint: {
        uint64_t ignored;
        return Varint(&ignored);
      }
      case kWire64:
        return Skip(8);
      case kWire32:
        return Skip(4);
      case kWireLen: {
        uint64_t n;
        if (!Varint(&n) || n > static_cast<uint64_t>(end_ - p_)) return false;
        *payload = p_;
        *len = static_cast<size_t>(n);
        p_ += n;
        return true;
      }
      default:  // groups (3, 4) and invalid wire types
        return false;
    }
  }

 private:
  bool Skip(size_t n) {
    if (static_cast<size_t>(end_ - p_) < n) return false;
    p_ += n;
    return true;
  }
  const uint8_t* p_;
  const uint8_t* end_;
};

void PutVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

void PutLenField(uint32_t number, const std::string& payload, std::string* out) {
  PutVarint((static_cast<uint64_t>(number) << 3) | kWireLen, out);
  PutVarint(payload.size(), out);
  out->append(payload);
}

struct Scan {
  const uint8_t* base;
  size_t threshold;
  std::vector<InlineRange>* table;
};

// Re-emits one TensorProto without a large raw_data; appends its table entry.
bool StripTensor(const Scan& s, const uint8_t* p, size_t n, std::string* out) {
  Reader r(p, n);
  InlineRange range;
  int raw_fields = 0;
  while (!r.done()) {
    const uint8_t* start = r.pos();
    uint32_t number, wire;
    const uint8_t* payload = nullptr;
    size_t len = 0;
    if (!r.Field(&number, &wire, &payload, &len)) return false;
    if (number == kTensorRawDataField && wire == kWireLen) {
      // protobuf keeps the last occurrence; a repeat is too odd to special-case.
      if (++raw_fields > 1) return false;
      if (len >= s.threshold) {
        range.offset = static_cast<uint64_t>(payload - s.base);
        range.length = len;
        range.stripped = true;
        // One byte, not zero: onnx's checker counts an empty raw_data as no value field.
        PutVarint((kTensorRawDataField << 3) | kWireLen, out);
        PutVarint(1, out);
        out->push_back('\0');
        continue;
      }
    }
    out->append(reinterpret_cast<const char*>(start), static_cast<size_t>(r.pos() - start));
  }
  s.table->push_back(range);
  return true;
}

bool StripGraph(const Scan& s, const uint8_t* p, size_t n, std::string* out) {
  Reader r(p, n);
  std::string tensor;
  while (!r.done()) {
    const uint8_t* start = r.pos();
    uint32_t number, wire;
    const uint8_t* payload = nullptr;
    size_t len = 0;
    if (!r.Field(&number, &wire, &payload, &len)) return false;
    if (number == kGraphInitializerField && wire == kWireLen) {
      tensor.clear();
      if (!StripTensor(s, payload, len, &tensor)) return false;
      PutLenField(kGraphInitializerField, tensor, out);
      continue;
    }
    out->append(reinterpret_cast<const char*>(start), static_cast<size_t>(r.pos() - start));
  }
  return true;
}

}  // namespace

bool StripLargeRawData(const void* data, size_t size, size_t threshold, std::string* stripped,
                       std::vector<InlineRange>* table) {
  stripped->clear();
  table->clear();
  const auto* base = static_cast<const uint8_t*>(data);
  Scan s{base, threshold, table};
  Reader r(base, size);
  int graphs = 0;
  while (!r.done()) {
    const uint8_t* start = r.pos();
    uint32_t number, wire;
    const uint8_t* payload = nullptr;
    size_t len = 0;
    if (!r.Field(&number, &wire, &payload, &len)) return false;
    if (number == kModelGraphField && wire == kWireLen) {
      if (++graphs > 1) return false;  // protobuf would merge them; leave that to protobuf
      std::string graph;
      graph.reserve(len < (1 << 20) ? len : (1 << 20));
      if (!StripGraph(s, payload, len, &graph)) return false;
      PutLenField(kModelGraphField, graph, stripped);
      continue;
    }
    stripped->append(reinterpret_cast<const char*>(start), static_cast<size_t>(r.pos() - start));
  }
  for (const auto& e : *table)
    if (e.stripped) return true;
  return false;  // nothing large: parsing the original is just as cheap
}

}  // namespace strata::import
