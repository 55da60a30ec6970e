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
//
// From a file it reads through a small window with pread (StripLargeRawDataFromFile), so
// the mapped file is never touched: on a VM each first touch of a mapped page costs a
// hypervisor exit (13-25 us with the kernel's fault-around, 5-9 us even after
// MADV_POPULATE_READ; a pread of a few hundred bytes ~2 us), and the scan touches a page
// at every initializer.
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

#include "core/import_internal.h"

namespace strata::import {

namespace {

// ModelProto.graph, GraphProto.initializer, TensorProto.raw_data.
constexpr uint32_t kModelGraphField = 7;
constexpr uint32_t kGraphInitializerField = 5;
constexpr uint32_t kTensorRawDataField = 9;
constexpr uint32_t kWireVarint = 0, kWire64 = 1, kWireLen = 2, kWire32 = 5;

// The serialized model in memory. Offsets are below size() whenever the Reader asks.
class MemoryBytes {
 public:
  MemoryBytes(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  size_t size() const { return n_; }
  bool Byte(size_t off, uint8_t* b) {
    *b = p_[off];
    return true;
  }
  bool Append(size_t off, size_t len, std::string* out) {
    out->append(reinterpret_cast<const char*>(p_ + off), len);
    return true;
  }

 private:
  const uint8_t* p_;
  size_t n_;
};

// The serialized model in a file, read through a window: the scan reads the bytes between
// large payloads and skips the payloads. A failed or short read ends the scan (false), and
// the caller parses the mapped bytes instead, which reports the problem.
class FileBytes {
 public:
  FileBytes(int fd, size_t n) : fd_(fd), n_(n) {}
  size_t size() const { return n_; }
  bool failed() const { return failed_; }
  bool Byte(size_t off, uint8_t* b) {
    if ((off < begin_ || off >= end_) && !Fill(off)) return false;
    *b = window_[off - begin_];
    return true;
  }
  bool Append(size_t off, size_t len, std::string* out) {
    if (off >= begin_ && off + len <= end_) {
      out->append(reinterpret_cast<const char*>(window_.data() + (off - begin_)), len);
      return true;
    }
    const size_t at = out->size();
    out->resize(at + len);
    return Read(off, len, reinterpret_cast<uint8_t*>(&(*out)[at]));
  }

 private:
  bool Fill(size_t off) {
    const size_t len = std::min(window_.size(), n_ - off);
    if (!Read(off, len, window_.data())) return false;
    begin_ = off;
    end_ = off + len;
    return true;
  }
  bool Read(size_t off, size_t len, uint8_t* dst) {
    while (len > 0) {
      RunReadHookForTesting();
      const ssize_t got = ::pread(fd_, dst, len, static_cast<off_t>(off));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        failed_ = true;
        return false;
      }
      dst += got;
      off += static_cast<size_t>(got);
      len -= static_cast<size_t>(got);
    }
    return true;
  }

  int fd_;
  size_t n_;
  bool failed_ = false;                  // a read failed or came back short
  size_t begin_ = 0, end_ = 0;           // the window's bytes in the file
  std::array<uint8_t, 16384> window_{};  // 4 pages: small, so a first import touches few
};

template <typename Bytes>
class Reader {
 public:
  Reader(Bytes& b, size_t begin, size_t n) : b_(b), p_(begin), end_(begin + n) {}
  bool done() const { return p_ == end_; }
  size_t pos() const { return p_; }

  bool Varint(uint64_t* v) {
    uint64_t r = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      uint8_t b;
      if (p_ == end_ || !b_.Byte(p_, &b)) return false;
      ++p_;
      r |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) {
        *v = r;
        return true;
      }
    }
    return false;
  }
  // Reads a tag and skips the field's value. For length-delimited fields, *payload (an
  // offset) and *len describe the bytes. Returns false on anything malformed or unsupported.
  bool Field(uint32_t* number, uint32_t* wire, size_t* payload, size_t* len) {
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
    if (end_ - p_ < n) return false;
    p_ += n;
    return true;
  }
  Bytes& b_;
  size_t p_;
  size_t end_;
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

template <typename Bytes>
struct Scan {
  Bytes& bytes;
  size_t threshold;
  std::vector<InlineRange>* table;
};

// Re-emits one TensorProto without a large raw_data; appends its table entry.
template <typename Bytes>
bool StripTensor(const Scan<Bytes>& s, size_t p, size_t n, std::string* out) {
  Reader<Bytes> r(s.bytes, p, n);
  InlineRange range;
  int raw_fields = 0;
  while (!r.done()) {
    const size_t start = r.pos();
    uint32_t number, wire;
    size_t payload = 0, len = 0;
    if (!r.Field(&number, &wire, &payload, &len)) return false;
    if (number == kTensorRawDataField && wire == kWireLen) {
      // protobuf keeps the last occurrence; a repeat is too odd to special-case.
      if (++raw_fields > 1) return false;
      if (len >= s.threshold) {
        range.offset = static_cast<uint64_t>(payload);
        range.length = len;
        range.stripped = true;
        // One byte, not zero: onnx's checker counts an empty raw_data as no value field.
        PutVarint((kTensorRawDataField << 3) | kWireLen, out);
        PutVarint(1, out);
        out->push_back('\0');
        continue;
      }
    }
    if (!s.bytes.Append(start, r.pos() - start, out)) return false;
  }
  s.table->push_back(range);
  return true;
}

template <typename Bytes>
bool StripGraph(const Scan<Bytes>& s, size_t p, size_t n, std::string* out) {
  Reader<Bytes> r(s.bytes, p, n);
  std::string tensor;
  while (!r.done()) {
    const size_t start = r.pos();
    uint32_t number, wire;
    size_t payload = 0, len = 0;
    if (!r.Field(&number, &wire, &payload, &len)) return false;
    if (number == kGraphInitializerField && wire == kWireLen) {
      tensor.clear();
      if (!StripTensor(s, payload, len, &tensor)) return false;
      PutLenField(kGraphInitializerField, tensor, out);
      continue;
    }
    if (!s.bytes.Append(start, r.pos() - start, out)) return false;
  }
  return true;
}

// kStripped, kWhole (the scan read every byte and stripped nothing: *stripped is an
// equivalent serialization of the whole model) or kGaveUp; the file wrapper adds kReadFailed.
template <typename Bytes>
StripResult Strip(Bytes& bytes, size_t threshold, std::string* stripped, std::vector<InlineRange>* table) {
  stripped->clear();
  table->clear();
  Scan<Bytes> s{bytes, threshold, table};
  Reader<Bytes> r(bytes, 0, bytes.size());
  int graphs = 0;
  while (!r.done()) {
    const size_t start = r.pos();
    uint32_t number, wire;
    size_t payload = 0, len = 0;
    if (!r.Field(&number, &wire, &payload, &len)) return StripResult::kGaveUp;
    if (number == kModelGraphField && wire == kWireLen) {
      // protobuf would merge repeated graphs; leave that to protobuf
      if (++graphs > 1) return StripResult::kGaveUp;
      std::string graph;
      graph.reserve(len < (1 << 20) ? len : (1 << 20));
      if (!StripGraph(s, payload, len, &graph)) return StripResult::kGaveUp;
      PutLenField(kModelGraphField, graph, stripped);
      continue;
    }
    if (!bytes.Append(start, r.pos() - start, stripped)) return StripResult::kGaveUp;
  }
  for (const auto& e : *table)
    if (e.stripped) return StripResult::kStripped;
  return StripResult::kWhole;
}

}  // namespace

bool StripLargeRawData(const void* data, size_t size, size_t threshold, std::string* stripped,
                       std::vector<InlineRange>* table) {
  MemoryBytes bytes(static_cast<const uint8_t*>(data), size);
  // Nothing large: parsing the original is just as cheap as parsing the copy.
  return Strip(bytes, threshold, stripped, table) == StripResult::kStripped;
}

StripResult StripLargeRawDataFromFile(int fd, size_t size, size_t threshold, std::string* stripped,
                                      std::vector<InlineRange>* table) {
  FileBytes bytes(fd, size);
  const StripResult r = Strip(bytes, threshold, stripped, table);
  return bytes.failed() ? StripResult::kReadFailed : r;
}

}  // namespace strata::import
