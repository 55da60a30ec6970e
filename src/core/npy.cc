#include "core/npy.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <string_view>
#include <system_error>
#include <vector>

#include "core/utf8.h"

namespace strata {

// .npy stores little-endian data and we copy it verbatim.
static_assert(std::endian::native == std::endian::little, "npy I/O assumes a little-endian host");

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
// magic + major + minor + 2-byte (v1) or 4-byte (v2/v3) header length.
constexpr size_t kPreambleV1 = kMagicLen + 2 + 2;
constexpr size_t kPreambleV2 = kMagicLen + 2 + 4;
constexpr size_t kHeaderAlign = 64;

struct DescrEntry {
  char kind;  // numpy kind character: 'f', 'i', 'u', 'b'
  int size;
  DataType dtype;
};
constexpr DescrEntry kDescrs[] = {
    {'f', 4, DataType::kFloat},  {'f', 8, DataType::kDouble}, {'f', 2, DataType::kFloat16}, {'i', 8, DataType::kInt64},
    {'i', 4, DataType::kInt32},  {'i', 2, DataType::kInt16},  {'i', 1, DataType::kInt8},    {'u', 1, DataType::kUInt8},
    {'u', 2, DataType::kUInt16}, {'u', 4, DataType::kUInt32}, {'u', 8, DataType::kUInt64},  {'b', 1, DataType::kBool},
};

// Quotes untrusted text for an error message: printable ASCII only, bounded length.
std::string Quote(std::string_view s) {
  constexpr size_t kMax = 40;
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < kMax; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    }
  }
  if (s.size() > kMax) out += "...";
  return out + "'";
}

// numpy's fixed-width strings: 'U' (UTF-32 code points, little-endian) and 'S' (bytes), each
// padded with zeros to the width; they become string tensors.
constexpr uint64_t kMaxStringWidth = uint64_t{1} << 24;

// An element type as stored in the file: a DataType, and for strings the kind and width.
struct NpyType {
  DataType dtype = DataType::kUndefined;
  char string_kind = 0;  // 'U' or 'S' for kString
  uint64_t width = 0;    // characters ('U') or bytes ('S') per element
  uint64_t ElementBytes() const {
    return string_kind == 'U' ? 4 * width : (string_kind == 'S' ? width : DataTypeSize(dtype));
  }
};

// Maps a numpy descr string to an element type.
Result<NpyType> ParseDescr(std::string_view d, const std::string& what) {
  if (d.size() < 3) return Unsupported(what, ": unsupported .npy dtype ", Quote(d));
  char order = d[0];
  char kind = d[1];
  if (order != '<' && order != '>' && order != '|' && order != '=')
    return Unsupported(what, ": unsupported .npy dtype ", Quote(d));
  uint64_t size = 0;
  for (char c : d.substr(2)) {
    if (c < '0' || c > '9' || size > kMaxStringWidth) return Unsupported(what, ": unsupported .npy dtype ", Quote(d));
    size = size * 10 + static_cast<uint64_t>(c - '0');
  }
  if (kind == 'U' || kind == 'S') {
    // numpy writes at least width 1 (an array of empty strings is '<U1'); width 0 would let a
    // tiny file claim any number of elements.
    if (size == 0) return Unsupported(what, ": .npy string dtype ", Quote(d), " has width 0");
    if (size > kMaxStringWidth)
      return Unsupported(what, ": .npy string width ", size, " is above the limit of ", kMaxStringWidth);
    if (kind == 'U' && order == '>')
      return Unsupported(what, ": big-endian .npy data (dtype ", Quote(d), ") is not supported; save it little-endian");
    return NpyType{DataType::kString, kind, size};
  }
  for (const DescrEntry& e : kDescrs) {
    if (e.kind != kind || static_cast<uint64_t>(e.size) != size) continue;
    // Byte order only matters for multi-byte types; '=' and '|' mean native, which is little here.
    if (size > 1 && order == '>')
      return Unsupported(what, ": big-endian .npy data (dtype ", Quote(d), ") is not supported; save it little-endian");
    return NpyType{e.dtype, 0, 0};
  }
  return Unsupported(what, ": unsupported .npy dtype ", Quote(d),
                     " (supported: float16/32/64, int8/16/32/64, uint8/16/32/64, bool, and strings U and S)");
}

// Recursive-descent parser for the header's Python dict literal, e.g.
//   {'descr': '<f4', 'fortran_order': False, 'shape': (8, 1, 8, 8), }
// It accepts exactly what numpy's writers produce (plus insignificant whitespace,
// either quote style and Python 2 'L' suffixes on dims) and rejects anything else.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& what) : s_(text), what_(what) {}

  Status Parse(NpyType* dtype, Shape* shape) {
    std::optional<NpyType> descr;
    std::optional<bool> fortran;
    std::optional<Shape> dims;
    SkipSpace();
    if (!Eat('{')) return Error("the header is not a Python dict (expected '{')");
    while (true) {
      SkipSpace();
      if (Eat('}')) break;
      std::string key;
      RETURN_IF_ERROR(ParseString(&key));
      SkipSpace();
      if (!Eat(':')) return Error("expected ':' after key " + Quote(key));
      SkipSpace();
      if (key == "descr") {
        if (descr) return Error("duplicate key 'descr'");
        if (Peek() == '[')
          return Unsupported(what_, ": structured .npy dtypes (a field list in 'descr') are not supported");
        std::string d;
        RETURN_IF_ERROR(ParseString(&d));
        ASSIGN_OR_RETURN(descr, ParseDescr(d, what_));
      } else if (key == "fortran_order") {
        if (fortran) return Error("duplicate key 'fortran_order'");
        bool f = false;
        RETURN_IF_ERROR(ParseBool(&f));
        fortran = f;
      } else if (key == "shape") {
        if (dims) return Error("duplicate key 'shape'");
        Shape sh;
        RETURN_IF_ERROR(ParseShape(&sh));
        dims = std::move(sh);
      } else {
        return Error("unexpected key " + Quote(key) + " (expected 'descr', 'fortran_order' and 'shape')");
      }
      SkipSpace();
      if (Eat(',')) continue;
      if (Eat('}')) break;
      return Error("expected ',' or '}' in the header dict");
    }
    SkipSpace();
    if (pos_ != s_.size()) return Error("unexpected bytes after the header dict");
    if (!descr) return Error("the header has no 'descr'");
    if (!fortran) return Error("the header has no 'fortran_order'");
    if (!dims) return Error("the header has no 'shape'");
    if (*fortran)
      return Unsupported(what_,
                         ": Fortran-order (column-major) .npy arrays are not supported; save with "
                         "np.ascontiguousarray(a)");
    *dtype = *descr;
    *shape = std::move(*dims);
    return Status::Ok();
  }

 private:
  Status Error(const std::string& msg) const {
    return InvalidArgument(what_, ": malformed .npy header: ", msg, " (at header offset ", pos_, ", near ",
                           Quote(s_.substr(pos_ >= 12 ? pos_ - 12 : 0)), ")");
  }
  char Peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  bool Eat(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void SkipSpace() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  bool AtWord(std::string_view w) const {
    if (s_.substr(pos_, w.size()) != w) return false;
    size_t end = pos_ + w.size();
    if (end >= s_.size()) return true;
    char c = s_[end];
    return !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_');
  }

  Status ParseString(std::string* out) {
    char q = Peek();
    if (q != '\'' && q != '"') return Error("expected a quoted string");
    ++pos_;
    size_t start = pos_;
    while (pos_ < s_.size() && s_[pos_] != q) {
      if (s_[pos_] == '\\') return Error("escape sequences in header strings are not supported");
      if (s_[pos_] == '\n') return Error("unterminated string");
      ++pos_;
    }
    if (pos_ >= s_.size()) return Error("unterminated string");
    *out = std::string(s_.substr(start, pos_ - start));
    ++pos_;
    return Status::Ok();
  }

  Status ParseBool(bool* out) {
    if (AtWord("True")) {
      pos_ += 4;
      *out = true;
    } else if (AtWord("False")) {
      pos_ += 5;
      *out = false;
    } else {
      return Error("'fortran_order' must be True or False");
    }
    return Status::Ok();
  }

  Status ParseDim(int64_t* out) {
    bool negative = Eat('-');
    if (!negative) Eat('+');
    if (Peek() < '0' || Peek() > '9') return Error("expected an integer dimension in 'shape'");
    uint64_t v = 0;
    bool overflow = false;
    while (Peek() >= '0' && Peek() <= '9') {
      uint64_t digit = static_cast<uint64_t>(s_[pos_] - '0');
      if (v > (static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) - digit) / 10) overflow = true;
      if (!overflow) v = v * 10 + digit;
      ++pos_;
    }
    if (Peek() == 'L' || Peek() == 'l') ++pos_;  // Python 2 long literal
    if (overflow) return Error("a dimension in 'shape' does not fit in int64");
    if (negative && v != 0) return Error("'shape' has a negative dimension");
    *out = static_cast<int64_t>(v);
    return Status::Ok();
  }

  Status ParseShape(Shape* out) {
    if (!Eat('(')) return Error("'shape' must be a tuple such as (2, 3) or (5,)");
    out->clear();
    bool trailing_comma = false;
    while (true) {
      SkipSpace();
      if (Eat(')')) break;
      if (out->size() >= 64) return Error("'shape' has more than 64 dimensions");
      int64_t d = 0;
      RETURN_IF_ERROR(ParseDim(&d));
      out->push_back(d);
      SkipSpace();
      trailing_comma = Eat(',');
      if (trailing_comma) continue;
      if (Eat(')')) break;
      return Error("expected ',' or ')' in 'shape'");
    }
    // "(5)" is the integer 5 in Python, not a tuple; numpy rejects it too.
    if (out->size() == 1 && !trailing_comma) return Error("'shape' must be a tuple; a 1-d shape is written (5,)");
    return Status::Ok();
  }

  std::string_view s_;
  const std::string& what_;
  size_t pos_ = 0;
};

// Layout of a .npy image as described by its preamble and header.
struct NpyLayout {
  NpyType type;
  Shape shape;
  size_t data_offset = 0;  // first byte of the array data
  uint64_t data_bytes = 0;
};

// Reads the fixed preamble (magic, version, header length). `bytes` holds the first
// `n` bytes of the image. Returns the total header size (preamble + dict).
Result<uint64_t> ParsePreamble(const uint8_t* bytes, size_t n, const std::string& what) {
  // Checked first: `bytes` may be null when n == 0, and memcmp must not see null.
  if (n == 0) return InvalidArgument(what, ": truncated .npy file (it is empty)");
  if (n < kMagicLen || std::memcmp(bytes, kMagic, kMagicLen) != 0) {
    if (n < kMagicLen && std::memcmp(bytes, kMagic, n) == 0)
      return InvalidArgument(what, ": truncated .npy file (", n, " bytes, shorter than the magic string)");
    return InvalidArgument(what, ": not a .npy file (bad magic bytes; expected \\x93NUMPY)");
  }
  if (n < kMagicLen + 2) return InvalidArgument(what, ": truncated .npy file (no format version)");
  int major = bytes[6];
  int minor = bytes[7];
  if (major < 1 || major > 3 || minor != 0)
    return Unsupported(what, ": unsupported .npy format version ", major, ".", minor, " (supported: 1.0, 2.0, 3.0)");
  size_t preamble = major == 1 ? kPreambleV1 : kPreambleV2;
  if (n < preamble) return InvalidArgument(what, ": truncated .npy file (header length field is cut off)");
  uint64_t header_len =
      major == 1
          ? (uint64_t{bytes[8]} | uint64_t{bytes[9]} << 8)
          : (uint64_t{bytes[8]} | uint64_t{bytes[9]} << 8 | uint64_t{bytes[10]} << 16 | uint64_t{bytes[11]} << 24);
  return preamble + header_len;
}

// Parses the header dict. `bytes` holds the whole header (`header_total` bytes);
// `file_size` is the size of the whole image, used to validate the data length.
Result<NpyLayout> ParseHeader(const uint8_t* bytes, uint64_t header_total, uint64_t file_size,
                              const std::string& what) {
  int major = bytes[6];
  size_t preamble = major == 1 ? kPreambleV1 : kPreambleV2;
  std::string_view text(reinterpret_cast<const char*>(bytes) + preamble, header_total - preamble);
  // v1/v2 headers are latin-1 and v3 headers UTF-8, but every valid key and value is ASCII;
  // NUL bytes would make the message unprintable, so reject them up front.
  for (char c : text) {
    if (c == '\0') return InvalidArgument(what, ": malformed .npy header: it contains a NUL byte");
  }
  NpyLayout layout;
  RETURN_IF_ERROR(HeaderParser(text, what).Parse(&layout.type, &layout.shape));
  ASSIGN_OR_RETURN(int64_t count, CheckedNumElements(layout.shape, what + ": .npy shape"));
  const uint64_t esize = layout.type.ElementBytes();
  if (static_cast<uint64_t>(count) > std::numeric_limits<uint64_t>::max() / esize)
    return InvalidArgument(what, ": .npy shape ", ShapeToString(layout.shape), " byte size overflows");
  layout.data_bytes = static_cast<uint64_t>(count) * layout.type.ElementBytes();
  layout.data_offset = static_cast<size_t>(header_total);
  uint64_t available = file_size - header_total;
  if (available < layout.data_bytes)
    return InvalidArgument(what, ": .npy data is shorter than its shape needs: ", DataTypeName(layout.type.dtype),
                           ShapeToString(layout.shape), " needs ", layout.data_bytes, " bytes but only ", available,
                           " follow the header");
  if (available > layout.data_bytes)
    return InvalidArgument(what, ": .npy file has ", available - layout.data_bytes, " unexpected bytes after the ",
                           layout.data_bytes, " bytes of ", DataTypeName(layout.type.dtype),
                           ShapeToString(layout.shape), " data");
  if (layout.data_bytes > std::numeric_limits<size_t>::max())
    return InvalidArgument(what, ": .npy data is too large for this machine");
  return layout;
}

Status CheckHeaderFits(uint64_t header_total, uint64_t file_size, const std::string& what) {
  if (header_total > file_size)
    return InvalidArgument(what, ": truncated .npy file: the header claims ", header_total, " bytes but the file has ",
                           file_size);
  return Status::Ok();
}

// bool elements other than 0/1 are undefined behaviour in C++; numpy treats any
// non-zero byte as True, so normalise instead of rejecting.
void NormaliseBools(Tensor& t) {
  if (t.dtype() != DataType::kBool) return;
  auto* p = static_cast<uint8_t*>(t.raw_mutable_data());
  for (int64_t i = 0, n = t.num_elements(); i < n; ++i) p[i] = p[i] != 0;
}

std::string ShapeTuple(const Shape& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

struct FileCloser {
  void operator()(std::FILE* f) const {
    if (f) std::fclose(f);
  }
};
using FilePtr = std::unique_ptr<std::FILE, FileCloser>;

std::string ErrnoText(int err) { return std::error_code(err, std::generic_category()).message(); }

// The string tensor of a 'U' or 'S' array: trailing zeros are padding, as numpy reads them;
// 'U' code points become UTF-8 (an invalid code point is an error naming the element).
Result<Tensor> DecodeStrings(const NpyLayout& layout, const uint8_t* data, const std::string& what) {
  ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(DataType::kString, layout.shape));
  auto* out = t.mutable_data<std::string>();
  const uint64_t w = layout.type.width;
  for (int64_t i = 0, n = t.num_elements(); i < n; ++i) {
    std::string& s = out[i];
    if (layout.type.string_kind == 'S') {
      const char* p = reinterpret_cast<const char*>(data) + static_cast<uint64_t>(i) * w;
      uint64_t len = w;
      while (len > 0 && p[len - 1] == '\0') --len;
      s.assign(p, static_cast<size_t>(len));
      continue;
    }
    const uint8_t* p = data + static_cast<uint64_t>(i) * 4 * w;
    uint64_t len = w;
    auto cp_at = [p](uint64_t k) {
      return uint32_t{p[4 * k]} | uint32_t{p[4 * k + 1]} << 8 | uint32_t{p[4 * k + 2]} << 16 |
             uint32_t{p[4 * k + 3]} << 24;
    };
    while (len > 0 && cp_at(len - 1) == 0) --len;
    for (uint64_t k = 0; k < len; ++k) {
      const uint32_t cp = cp_at(k);
      if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return InvalidArgument(what, ": .npy string element ", i, " holds ",
                               cp > 0x10FFFF ? "code point " : "surrogate ", cp, ", which is not Unicode text");
      AppendUtf8(cp, &s);
    }
  }
  return t;
}

// A string tensor as numpy stores it: 'U' (UTF-32) when every string is UTF-8 text, else 'S'
// (raw bytes), each padded to the longest. numpy drops trailing zeros when it reads either, so
// a string ending in NUL does not round-trip.
Status EncodeStrings(const Tensor& t, std::string* descr, std::string* data) {
  const auto* in = t.data<std::string>();
  const int64_t n = t.num_elements();
  std::vector<std::vector<uint32_t>> cps(static_cast<size_t>(n));
  bool text = true;
  size_t width = 1, bytes = 1;
  for (int64_t i = 0; i < n; ++i) {
    bytes = std::max(bytes, in[i].size());
    if (text && !Utf8Decode(in[i], &cps[static_cast<size_t>(i)])) text = false;
    if (text) width = std::max(width, cps[static_cast<size_t>(i)].size());
  }
  if (text && width > kMaxStringWidth)
    return Unsupported("a string of ", width, " characters is above the .npy limit of ", kMaxStringWidth);
  if (!text && bytes > kMaxStringWidth)
    return Unsupported("a string of ", bytes, " bytes is above the .npy limit of ", kMaxStringWidth);
  *descr = text ? "<U" + std::to_string(width) : "|S" + std::to_string(bytes);
  data->clear();
  data->reserve(static_cast<size_t>(n) * (text ? 4 * width : bytes));
  for (int64_t i = 0; i < n; ++i) {
    if (!text) {
      data->append(in[i]);
      data->append(bytes - in[i].size(), '\0');
      continue;
    }
    const auto& v = cps[static_cast<size_t>(i)];
    for (size_t k = 0; k < width; ++k) {
      const uint32_t cp = k < v.size() ? v[k] : 0;
      for (int b = 0; b < 4; ++b) data->push_back(static_cast<char>((cp >> (8 * b)) & 0xFF));
    }
  }
  return Status::Ok();
}

}  // namespace

const char* NpyDescr(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat:
      return "<f4";
    case DataType::kDouble:
      return "<f8";
    case DataType::kFloat16:
      return "<f2";
    case DataType::kInt64:
      return "<i8";
    case DataType::kInt32:
      return "<i4";
    case DataType::kInt16:
      return "<i2";
    case DataType::kInt8:
      return "|i1";
    case DataType::kUInt8:
      return "|u1";
    case DataType::kUInt16:
      return "<u2";
    case DataType::kUInt32:
      return "<u4";
    case DataType::kUInt64:
      return "<u8";
    case DataType::kBool:
      return "|b1";
    default:
      return nullptr;
  }
}

Result<Tensor> ParseNpy(const void* data, size_t size, const std::string& what) {
  if (data == nullptr && size != 0) return InvalidArgument(what, ": null .npy buffer with non-zero size");
  static const uint8_t kEmpty = 0;
  const auto* bytes = data ? static_cast<const uint8_t*>(data) : &kEmpty;
  ASSIGN_OR_RETURN(uint64_t header_total, ParsePreamble(bytes, size, what));
  RETURN_IF_ERROR(CheckHeaderFits(header_total, size, what));
  ASSIGN_OR_RETURN(NpyLayout layout, ParseHeader(bytes, header_total, size, what));
  if (layout.type.dtype == DataType::kString) return DecodeStrings(layout, bytes + layout.data_offset, what);
  ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(layout.type.dtype, layout.shape));
  if (layout.data_bytes > 0) std::memcpy(t.raw_mutable_data(), bytes + layout.data_offset, layout.data_bytes);
  NormaliseBools(t);
  return t;
}

Result<Tensor> ReadNpy(const std::string& path) {
  std::error_code ec;
  auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) return NotFound(path, ": no such .npy file");
  if (std::filesystem::is_directory(status)) return InvalidArgument(path, ": is a directory, not a .npy file");
  FilePtr f(std::fopen(path.c_str(), "rb"));
  if (!f) return MakeStatus(StatusCode::kIOError, path, ": cannot open: ", ErrnoText(errno));
  // The size comes from seeking, which also works for files that are not regular
  // (and fails cleanly for pipes), rather than trusting the header.
  if (std::fseek(f.get(), 0, SEEK_END) != 0)
    return MakeStatus(StatusCode::kIOError, path, ": cannot seek: ", ErrnoText(errno));
  long end = std::ftell(f.get());
  if (end < 0) return MakeStatus(StatusCode::kIOError, path, ": cannot determine the file size: ", ErrnoText(errno));
  std::rewind(f.get());
  const uint64_t file_size = static_cast<uint64_t>(end);

  auto read_exact = [&](void* dst, size_t n) -> Status {
    if (n == 0) return Status::Ok();
    if (std::fread(dst, 1, n, f.get()) != n) {
      if (std::ferror(f.get())) return MakeStatus(StatusCode::kIOError, path, ": read failed: ", ErrnoText(errno));
      return MakeStatus(StatusCode::kIOError, path, ": file shrank while it was being read");
    }
    return Status::Ok();
  };

  // Read the preamble first so a huge header length is rejected before we allocate.
  std::vector<uint8_t> head(static_cast<size_t>(std::min<uint64_t>(file_size, kPreambleV2)));
  RETURN_IF_ERROR(read_exact(head.data(), head.size()));
  ASSIGN_OR_RETURN(uint64_t header_total, ParsePreamble(head.data(), head.size(), path));
  RETURN_IF_ERROR(CheckHeaderFits(header_total, file_size, path));
  size_t have = head.size();
  head.resize(static_cast<size_t>(header_total));
  if (header_total > have) {
    RETURN_IF_ERROR(read_exact(head.data() + have, static_cast<size_t>(header_total) - have));
  } else if (header_total < have) {
    // A v1 header shorter than the v2 preamble we read speculatively: step back.
    if (std::fseek(f.get(), static_cast<long>(header_total), SEEK_SET) != 0)
      return MakeStatus(StatusCode::kIOError, path, ": cannot seek: ", ErrnoText(errno));
  }
  ASSIGN_OR_RETURN(NpyLayout layout, ParseHeader(head.data(), header_total, file_size, path));
  if (layout.type.dtype == DataType::kString) {
    std::vector<uint8_t> raw(static_cast<size_t>(layout.data_bytes));
    RETURN_IF_ERROR(read_exact(raw.data(), raw.size()));
    return DecodeStrings(layout, raw.data(), path);
  }
  ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(layout.type.dtype, layout.shape));
  RETURN_IF_ERROR(read_exact(t.raw_mutable_data(), static_cast<size_t>(layout.data_bytes)));
  NormaliseBools(t);
  return t;
}

Result<std::string> SerializeNpy(const Tensor& t) {
  if (!t.valid()) return InvalidArgument("cannot write an absent (invalid) tensor as .npy");
  std::string string_descr, string_data;
  if (t.dtype() == DataType::kString) RETURN_IF_ERROR(EncodeStrings(t, &string_descr, &string_data));
  const char* descr = t.dtype() == DataType::kString ? string_descr.c_str() : NpyDescr(t.dtype());
  if (!descr) return Unsupported("cannot write ", DataTypeName(t.dtype()), " tensors as .npy");
  ASSIGN_OR_RETURN(int64_t count, CheckedNumElements(t.shape(), "tensor"));
  const size_t data_bytes =
      t.dtype() == DataType::kString ? string_data.size() : static_cast<size_t>(count) * DataTypeSize(t.dtype());
  if (t.dtype() != DataType::kString && data_bytes > 0 &&
      (!t.buffer() || t.byte_offset() + data_bytes > t.buffer()->size()))
    return InvalidArgument("tensor ", DataTypeName(t.dtype()), ShapeToString(t.shape()),
                           " is larger than its buffer; cannot write it as .npy");

  std::string dict =
      std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + ShapeTuple(t.shape()) + ", }";
  // Pad with spaces so the data starts on a 64-byte boundary; the header ends in '\n'.
  size_t preamble = kPreambleV1;
  size_t total = preamble + dict.size() + 1;
  total = (total + kHeaderAlign - 1) / kHeaderAlign * kHeaderAlign;
  if (total - preamble > 0xffff) {
    preamble = kPreambleV2;
    total = (preamble + dict.size() + 1 + kHeaderAlign - 1) / kHeaderAlign * kHeaderAlign;
  }
  const uint64_t header_len = total - preamble;

  std::string out;
  out.reserve(total + data_bytes);
  out.append(kMagic, kMagicLen);
  out.push_back(static_cast<char>(preamble == kPreambleV1 ? 1 : 2));
  out.push_back(0);
  for (size_t i = 0; i < preamble - kMagicLen - 2; ++i)
    out.push_back(static_cast<char>((header_len >> (8 * i)) & 0xff));
  out += dict;
  out.append(total - out.size() - 1, ' ');
  out.push_back('\n');
  if (t.dtype() == DataType::kString) {
    out += string_data;
  } else if (data_bytes > 0) {
    const char* src = static_cast<const char*>(t.raw_data());
    if (t.dtype() == DataType::kBool) {
      for (size_t i = 0; i < data_bytes; ++i) out.push_back(src[i] ? 1 : 0);
    } else {
      out.append(src, data_bytes);
    }
  }
  return out;
}

Status WriteNpy(const std::string& path, const Tensor& t) {
  ASSIGN_OR_RETURN(std::string bytes, SerializeNpy(t));
  FilePtr f(std::fopen(path.c_str(), "wb"));
  if (!f) return MakeStatus(StatusCode::kIOError, path, ": cannot open for writing: ", ErrnoText(errno));
  errno = 0;
  bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f.get()) == bytes.size();
  int err = errno;
  if (std::fclose(f.release()) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    std::remove(path.c_str());
    return MakeStatus(StatusCode::kIOError, path, ": write failed: ", err ? ErrnoText(err) : "short write");
  }
  return Status::Ok();
}

}  // namespace strata
