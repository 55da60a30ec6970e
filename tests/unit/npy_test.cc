#include "core/npy.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "test_files.h"

namespace strata {
namespace {

using testing::ReadFile;
using testing::TempDir;

std::string FixturePath(const std::string& name) { return std::string(STRATA_SOURCE_DIR) + "/tests/data/npy/" + name; }

// Builds a .npy image from a raw header dict (no padding) and data bytes.
std::string MakeNpy(const std::string& dict, const std::string& data, int major = 1) {
  std::string out = "\x93NUMPY";
  out.push_back(static_cast<char>(major));
  out.push_back(0);
  std::string header = dict + "\n";
  size_t len = header.size();
  int len_bytes = major == 1 ? 2 : 4;
  for (int i = 0; i < len_bytes; ++i) out.push_back(static_cast<char>((len >> (8 * i)) & 0xff));
  return out + header + data;
}

std::string F32Dict(const std::string& shape) {
  return "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
}

std::string Floats(std::vector<float> v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

// Parses `bytes` and expects failure with `code` and every string in `needles` in the message.
void ExpectParseError(const std::string& bytes, StatusCode code, std::vector<std::string> needles) {
  auto r = ParseNpy(bytes.data(), bytes.size(), "case.npy");
  ASSERT_FALSE(r.ok()) << "parsed unexpectedly";
  EXPECT_EQ(r.status().code(), code) << r.status().ToString();
  EXPECT_NE(r.status().message().find("case.npy"), std::string::npos) << r.status().ToString();
  for (const auto& n : needles)
    EXPECT_NE(r.status().message().find(n), std::string::npos) << "missing '" << n << "' in " << r.status().ToString();
}

template <typename T>
std::vector<T> Values(const Tensor& t) {
  const T* p = t.data<T>();
  return std::vector<T>(p, p + t.num_elements());
}

// The values make_fixtures.py writes into every 2x3 fixture.
const std::vector<double> kFloats = {-1.5, -0.5, 0.0, 0.25, 2.0, 1024.0};

template <typename T>
std::vector<T> ExpectedInts() {
  if constexpr (std::is_signed_v<T>) {
    return {-2, -1, 0, 1, 2, std::numeric_limits<T>::max()};
  } else {
    return {0, 1, 2, 3, 4, std::numeric_limits<T>::max()};
  }
}

TEST(NpyRead, NumpyWrittenFilesOfEveryDtype) {
  struct Case {
    const char* file;
    DataType dtype;
  };
  const Case cases[] = {
      {"float32.npy", DataType::kFloat}, {"float64.npy", DataType::kDouble}, {"float16.npy", DataType::kFloat16},
      {"int8.npy", DataType::kInt8},     {"int16.npy", DataType::kInt16},    {"int32.npy", DataType::kInt32},
      {"int64.npy", DataType::kInt64},   {"uint8.npy", DataType::kUInt8},    {"uint16.npy", DataType::kUInt16},
      {"uint32.npy", DataType::kUInt32}, {"uint64.npy", DataType::kUInt64},  {"bool.npy", DataType::kBool},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.file);
    auto r = ReadNpy(FixturePath(c.file));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const Tensor& t = *r;
    EXPECT_EQ(t.dtype(), c.dtype);
    EXPECT_EQ(t.shape(), (Shape{2, 3}));
    switch (c.dtype) {
      case DataType::kFloat:
        EXPECT_EQ(Values<float>(t), std::vector<float>(kFloats.begin(), kFloats.end()));
        break;
      case DataType::kDouble:
        EXPECT_EQ(Values<double>(t), kFloats);
        break;
      case DataType::kFloat16:
        for (int i = 0; i < 6; ++i) EXPECT_EQ(static_cast<float>(t.data<Float16>()[i]), kFloats[i]);
        break;
      case DataType::kInt8:
        EXPECT_EQ(Values<int8_t>(t), ExpectedInts<int8_t>());
        break;
      case DataType::kInt16:
        EXPECT_EQ(Values<int16_t>(t), ExpectedInts<int16_t>());
        break;
      case DataType::kInt32:
        EXPECT_EQ(Values<int32_t>(t), ExpectedInts<int32_t>());
        break;
      case DataType::kInt64:
        EXPECT_EQ(Values<int64_t>(t), ExpectedInts<int64_t>());
        break;
      case DataType::kUInt8:
        EXPECT_EQ(Values<uint8_t>(t), ExpectedInts<uint8_t>());
        break;
      case DataType::kUInt16:
        EXPECT_EQ(Values<uint16_t>(t), ExpectedInts<uint16_t>());
        break;
      case DataType::kUInt32:
        EXPECT_EQ(Values<uint32_t>(t), ExpectedInts<uint32_t>());
        break;
      case DataType::kUInt64:
        EXPECT_EQ(Values<uint64_t>(t), ExpectedInts<uint64_t>());
        break;
      case DataType::kBool:
        EXPECT_EQ(Values<bool>(t), (std::vector<bool>{true, false, true, true, false, false}));
        break;
      default:
        FAIL();
    }
  }
}

TEST(NpyRead, FormatVersions2And3) {
  for (const char* file : {"v2_float32.npy", "v3_float32.npy"}) {
    SCOPED_TRACE(file);
    auto r = ReadNpy(FixturePath(file));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->dtype(), DataType::kFloat);
    EXPECT_EQ(r->shape(), (Shape{2, 3}));
    EXPECT_EQ(Values<float>(*r), std::vector<float>(kFloats.begin(), kFloats.end()));
  }
}

TEST(NpyRead, ScalarEmptyAndVector) {
  auto s = ReadNpy(FixturePath("scalar_float64.npy"));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->shape(), Shape{});
  EXPECT_EQ(s->data<double>()[0], 3.5);

  auto e = ReadNpy(FixturePath("empty_float32.npy"));
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->shape(), (Shape{0, 3}));
  EXPECT_EQ(e->num_elements(), 0);

  auto v = ReadNpy(FixturePath("vector_int64.npy"));
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->shape(), Shape{5});
  EXPECT_EQ(Values<int64_t>(*v), (std::vector<int64_t>{0, 1, 2, 3, 4}));
}

TEST(NpyRead, ExampleDigitsSamples) {
  auto x = ReadNpy(std::string(STRATA_SOURCE_DIR) + "/examples/digits_samples.npy");
  ASSERT_TRUE(x.ok()) << x.status().ToString();
  EXPECT_EQ(x->dtype(), DataType::kFloat);
  EXPECT_EQ(x->shape(), (Shape{8, 1, 8, 8}));
  for (float f : Values<float>(*x)) {
    EXPECT_GE(f, 0.0f);
    EXPECT_LE(f, 1.0f);
  }
  auto y = ReadNpy(std::string(STRATA_SOURCE_DIR) + "/examples/digits_labels.npy");
  ASSERT_TRUE(y.ok()) << y.status().ToString();
  EXPECT_EQ(y->dtype(), DataType::kInt64);
  EXPECT_EQ(y->shape(), Shape{8});
}

TEST(NpyRead, UnsupportedLayoutsAndDtypes) {
  struct Case {
    const char* file;
    const char* needle;
  };
  const Case cases[] = {
      {"fortran_float32.npy", "Fortran-order"},
      {"bigendian_float32.npy", "big-endian"},
      {"complex64.npy", "'<c8'"},
      {"structured.npy", "structured"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.file);
    auto r = ReadNpy(FixturePath(c.file));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kUnsupported) << r.status().ToString();
    EXPECT_NE(r.status().message().find(c.file), std::string::npos) << r.status().ToString();
    EXPECT_NE(r.status().message().find(c.needle), std::string::npos) << r.status().ToString();
  }
}

TEST(NpyRead, MissingFileAndDirectory) {
  auto r = ReadNpy("/nonexistent/dir/x.npy");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("/nonexistent/dir/x.npy"), std::string::npos);

  TempDir dir;
  auto d = ReadNpy(dir.File(""));
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(d.status().message().find("directory"), std::string::npos) << d.status().ToString();
}

// Writing what we read from numpy's files reproduces them byte for byte: same header
// text, same 64-byte padding, same data.
TEST(NpyWrite, MatchesNumpyBytes) {
  for (const char* file : {"float32.npy", "float64.npy", "float16.npy", "int8.npy", "int16.npy", "int32.npy",
                           "int64.npy", "uint8.npy", "uint16.npy", "uint32.npy", "uint64.npy", "bool.npy",
                           "scalar_float64.npy", "empty_float32.npy", "vector_int64.npy"}) {
    SCOPED_TRACE(file);
    auto r = ReadNpy(FixturePath(file));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    auto bytes = SerializeNpy(*r);
    ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
    EXPECT_EQ(*bytes, ReadFile(FixturePath(file)));
  }
}

template <typename T>
Tensor Iota(Shape shape) {
  Tensor t = Tensor::Allocate(TypeToDataType<T>::value, shape).value();
  T* p = t.mutable_data<T>();
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    if constexpr (std::is_same_v<T, bool>) {
      p[i] = (i % 3) == 0;
    } else if constexpr (std::is_same_v<T, Float16>) {
      p[i] = Float16(static_cast<float>(i) * 0.5f - 3.0f);
    } else {
      p[i] = static_cast<T>(i * 7 - 11);
    }
  }
  return t;
}

TEST(NpyWrite, RoundTripAllDtypesAndShapes) {
  TempDir dir;
  const Shape shapes[] = {{}, {0}, {7}, {2, 3}, {2, 0, 4}, {1, 3, 4, 5}};
  const DataType dtypes[] = {DataType::kFloat,  DataType::kDouble, DataType::kFloat16, DataType::kInt64,
                             DataType::kInt32,  DataType::kInt16,  DataType::kInt8,    DataType::kUInt8,
                             DataType::kUInt16, DataType::kUInt32, DataType::kUInt64,  DataType::kBool};
  int n = 0;
  for (DataType dt : dtypes) {
    for (const Shape& shape : shapes) {
      SCOPED_TRACE(std::string(DataTypeName(dt)) + ShapeToString(shape));
      Tensor t;
      DispatchNumeric(dt, [&]<typename T>() { t = Iota<T>(shape); });
      ASSERT_TRUE(t.valid());
      // Built with append: GCC 12 warns falsely (-Wrestrict) on "t" + std::string.
      std::string name = std::to_string(n++);
      name.append(".npy");
      std::string path = dir.File(name);
      ASSERT_TRUE(WriteNpy(path, t).ok());
      auto back = ReadNpy(path);
      ASSERT_TRUE(back.ok()) << back.status().ToString();
      EXPECT_EQ(back->dtype(), dt);
      EXPECT_EQ(back->shape(), shape);
      ASSERT_EQ(back->byte_size(), t.byte_size());
      if (t.byte_size() > 0) {
        EXPECT_EQ(std::memcmp(back->raw_data(), t.raw_data(), t.byte_size()), 0);
      }
      // The in-memory path agrees with the file path.
      auto bytes = SerializeNpy(t);
      ASSERT_TRUE(bytes.ok());
      EXPECT_EQ(bytes->size() % 64, t.byte_size() % 64);
      auto parsed = ParseNpy(bytes->data(), bytes->size(), "mem");
      ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
      if (t.byte_size() > 0) {
        EXPECT_EQ(std::memcmp(parsed->raw_data(), t.raw_data(), t.byte_size()), 0);
      }
    }
  }
}

// numpy itself reads what we write (skipped where /usr/bin/python3 with numpy is absent).
TEST(NpyWrite, NumpyReadsOurFiles) {
  if (std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0) GTEST_SKIP() << "no python3-numpy";
  TempDir dir;
  ASSERT_TRUE(WriteNpy(dir.File("f.npy"), Iota<float>({2, 3})).ok());
  ASSERT_TRUE(WriteNpy(dir.File("h.npy"), Iota<Float16>({4})).ok());
  ASSERT_TRUE(WriteNpy(dir.File("b.npy"), Iota<bool>({5})).ok());
  ASSERT_TRUE(WriteNpy(dir.File("u.npy"), Iota<uint64_t>({})).ok());
  std::string script =
      "import numpy as np, sys\n"
      "d = sys.argv[1]\n"
      "f = np.load(d + '/f.npy'); assert f.dtype == np.float32 and f.shape == (2, 3), f\n"
      "assert (f.ravel() == np.arange(6) * 7 - 11).all(), f\n"
      "h = np.load(d + '/h.npy'); assert h.dtype == np.float16 and (h == np.arange(4) * 0.5 - 3).all(), h\n"
      "b = np.load(d + '/b.npy'); assert b.dtype == bool and b.tolist() == [True, False, False, True, False], b\n"
      "u = np.load(d + '/u.npy'); assert u.dtype == np.uint64 and u.shape == () and int(u) == 2**64 - 11, u\n";
  std::ofstream(dir.File("check.py")) << script;
  std::string cmd = "/usr/bin/python3 " + dir.File("check.py") + " " + dir.File("");
  EXPECT_EQ(std::system(cmd.c_str()), 0);
}

TEST(NpyWrite, Errors) {
  auto bad_dir = WriteNpy("/nonexistent/dir/out.npy", Iota<float>({2}));
  EXPECT_EQ(bad_dir.code(), StatusCode::kIOError);
  EXPECT_NE(bad_dir.message().find("/nonexistent/dir/out.npy"), std::string::npos);

  auto bf = Tensor::Allocate(DataType::kBFloat16, {2}).value();
  auto bf_status = SerializeNpy(bf).status();
  EXPECT_EQ(bf_status.code(), StatusCode::kUnsupported);
  EXPECT_NE(bf_status.message().find("bfloat16"), std::string::npos);
  EXPECT_EQ(SerializeNpy(Tensor()).status().code(), StatusCode::kInvalidArgument);
}

TEST(NpyParse, BoolBytesAreNormalised) {
  std::string bytes =
      MakeNpy("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", std::string("\x00\x02\xff", 3));
  auto t = ParseNpy(bytes.data(), bytes.size(), "bools.npy");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const auto* raw = static_cast<const uint8_t*>(t->raw_data());
  EXPECT_EQ(raw[0], 0);
  EXPECT_EQ(raw[1], 1);
  EXPECT_EQ(raw[2], 1);
}

TEST(NpyParse, LenientButValidHeaders) {
  // Double quotes, no trailing comma, extra whitespace, Python 2 long dims, '=' byte order.
  std::string a = MakeNpy("  {\"shape\": (2L,  1L), \"fortran_order\": False, \"descr\": \"=f4\"}  ", Floats({1, 2}));
  auto r = ParseNpy(a.data(), a.size(), "a");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->shape(), (Shape{2, 1}));
  EXPECT_EQ(Values<float>(*r), (std::vector<float>{1, 2}));
  // One-byte types accept any byte-order character.
  std::string b = MakeNpy("{'descr': '>u1', 'fortran_order': False, 'shape': (2,), }", "\x05\x06");
  auto rb = ParseNpy(b.data(), b.size(), "b");
  ASSERT_TRUE(rb.ok()) << rb.status().ToString();
  EXPECT_EQ(Values<uint8_t>(*rb), (std::vector<uint8_t>{5, 6}));
}

TEST(NpyParse, BadMagicAndTruncation) {
  std::string good = MakeNpy(F32Dict("(2,)"), Floats({1, 2}));
  ExpectParseError("", StatusCode::kInvalidArgument, {"truncated"});
  ExpectParseError("PK\x03\x04 this is a zip", StatusCode::kInvalidArgument, {"bad magic"});
  ExpectParseError("\x93NUM", StatusCode::kInvalidArgument, {"truncated"});
  ExpectParseError(good.substr(0, 7), StatusCode::kInvalidArgument, {"truncated", "version"});
  ExpectParseError(good.substr(0, 9), StatusCode::kInvalidArgument, {"truncated", "header length"});
  ExpectParseError(good.substr(0, 30), StatusCode::kInvalidArgument, {"truncated", "header claims"});
  // Header length far past the end (v2: 4-byte length).
  const char kHuge[] = "\x93NUMPY\x02\x00\xff\xff\xff\x7f{}";
  std::string huge(kHuge, sizeof(kHuge) - 1);
  ExpectParseError(huge, StatusCode::kInvalidArgument, {"header claims 2147483659 bytes"});
  std::string v4 = good;
  v4[6] = 4;
  ExpectParseError(v4, StatusCode::kUnsupported, {"format version 4.0"});
  std::string v1_1 = good;
  v1_1[7] = 1;
  ExpectParseError(v1_1, StatusCode::kUnsupported, {"format version 1.1"});
}

TEST(NpyParse, UnparsableHeaders) {
  const std::string data = Floats({1, 2});
  struct Case {
    std::string dict;
    std::string needle;
  };
  const Case cases[] = {
      {"", "not a Python dict"},
      {"['descr', '<f4']", "not a Python dict"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), ", "expected a quoted string"},
      {"{'descr': '<f4' 'fortran_order': False, 'shape': (2,)}", "expected ',' or '}'"},
      {"{'descr' '<f4', 'fortran_order': False, 'shape': (2,)}", "expected ':'"},
      {"{'descr': '<f4}", "unterminated string"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,)", "expected ',' or '}'"},
      {"{'descr: '<f4'}", "expected ':'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} x", "unexpected bytes after"},
      {"{'descr': '<f4', 'fortran_order': false, 'shape': (2,)}", "True or False"},
      {"{'descr': '<f4', 'fortran_order': Falsey, 'shape': (2,)}", "True or False"},
      {"{'descr': '<f4', 'fortran_order': 0, 'shape': (2,)}", "True or False"},
      {"{'descr': '<f4', 'shape': (2,)}", "no 'fortran_order'"},
      {"{'fortran_order': False, 'shape': (2,)}", "no 'descr'"},
      {"{'descr': '<f4', 'fortran_order': False}", "no 'shape'"},
      {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", "duplicate key 'descr'"},
      {"{'descr': '<f4', 'fortran_order': False, 'fortran_order': False, 'shape': (2,)}", "duplicate key"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'shape': (2,)}", "duplicate key 'shape'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1}", "unexpected key 'extra'"},
      {"{'descr': 4, 'fortran_order': False, 'shape': (2,)}", "expected a quoted string"},
      {"{'descr': '<\\f4', 'fortran_order': False, 'shape': (2,)}", "escape sequences"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2)}", "a 1-d shape is written (5,)"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': [2]}", "must be a tuple"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,,)}", "expected an integer"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2 2)}", "expected ',' or ')'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2.0,)}", "expected ',' or ')'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (-2,)}", "negative dimension"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", "does not fit in int64"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,", "expected an integer"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2", "expected ',' or ')'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': " + std::string(100, '('), "expected an integer"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (" +
           [] {
             std::string s;
             for (int i = 0; i < 65; ++i) s += "1, ";
             return s;
           }() +
           ")}",
       "more than 64 dimensions"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.dict);
    ExpectParseError(MakeNpy(c.dict, data), StatusCode::kInvalidArgument, {"malformed .npy header", c.needle});
  }
  std::string nul = MakeNpy(F32Dict("(2,)"), data);
  nul[15] = '\0';
  ExpectParseError(nul, StatusCode::kInvalidArgument, {"NUL byte"});
}

TEST(NpyParse, UnsupportedDescrs) {
  for (const char* descr : {"<c8", "|O", "<M8[s]", "<f3", "<i16", "xx", "<f99999999999999", "<U99999999999", ""}) {
    SCOPED_TRACE(descr);
    ExpectParseError(MakeNpy(std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (2,)}", "ab"),
                     StatusCode::kUnsupported, {"unsupported .npy dtype"});
  }
  ExpectParseError(MakeNpy("{'descr': '>i4', 'fortran_order': False, 'shape': (1,)}", "abcd"), StatusCode::kUnsupported,
                   {"big-endian"});
  ExpectParseError(MakeNpy("{'descr': [('x', '<f4')], 'fortran_order': False, 'shape': (1,)}", "abcd"),
                   StatusCode::kUnsupported, {"structured"});
  ExpectParseError(MakeNpy("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2)}", Floats({1, 2, 3, 4})),
                   StatusCode::kUnsupported, {"Fortran-order"});
}

TEST(NpyParse, DataLengthChecks) {
  ExpectParseError(MakeNpy(F32Dict("(3,)"), Floats({1, 2})), StatusCode::kInvalidArgument,
                   {"shorter than its shape needs", "needs 12 bytes but only 8"});
  ExpectParseError(MakeNpy(F32Dict("(1,)"), Floats({1, 2})), StatusCode::kInvalidArgument, {"4 unexpected bytes"});
  // Huge but representable element counts fail on the data check, before any allocation.
  ExpectParseError(MakeNpy(F32Dict("(1000000000, 1000000000)"), Floats({1})), StatusCode::kInvalidArgument,
                   {"shorter than its shape needs"});
  // Element count overflows int64; byte count overflows uint64.
  ExpectParseError(MakeNpy(F32Dict("(4294967296, 4294967296, 4)"), ""), StatusCode::kInvalidArgument, {"overflows"});
  ExpectParseError(MakeNpy(F32Dict("(4611686018427387904, 2)"), ""), StatusCode::kInvalidArgument, {"overflows"});
  ExpectParseError(MakeNpy("{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904,)}", ""),
                   StatusCode::kInvalidArgument, {"overflows"});
  // A zero dimension makes any other size fine.
  std::string zero = MakeNpy(F32Dict("(0, 9223372036854775807)"), "");
  auto r = ParseNpy(zero.data(), zero.size(), "zero");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->num_elements(), 0);
}

TEST(NpyParse, NullBuffer) {
  EXPECT_EQ(ParseNpy(nullptr, 10, "null").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseNpy(nullptr, 0, "null").status().code(), StatusCode::kInvalidArgument);
}

TEST(NpyRead, MalformedFilesNameThePath) {
  TempDir dir;
  std::string path = dir.File("short.npy");
  std::string bytes = MakeNpy(F32Dict("(4,)"), Floats({1, 2}));
  std::ofstream(path, std::ios::binary) << bytes;
  auto r = ReadNpy(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find(path), std::string::npos);
  EXPECT_NE(r.status().message().find("shorter than its shape needs"), std::string::npos);

  // A tiny v1 file: the reader's speculative 12-byte preamble read must step back.
  std::string tiny_path = dir.File("tiny.npy");
  std::string tiny = MakeNpy(F32Dict("()"), Floats({7}));
  std::ofstream(tiny_path, std::ios::binary) << tiny;
  auto t = ReadNpy(tiny_path);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->data<float>()[0], 7.0f);

  std::string empty_path = dir.File("empty.npy");
  std::ofstream(empty_path, std::ios::binary).flush();
  auto e = ReadNpy(empty_path);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
}

// Random corruption never crashes and only ever yields OK, INVALID_ARGUMENT or UNSUPPORTED.
TEST(NpyParse, FuzzedInputsFailCleanly) {
  std::vector<std::string> seeds;
  for (const char* f : {"float32.npy", "bool.npy", "v3_float32.npy", "scalar_float64.npy", "empty_float32.npy"})
    seeds.push_back(ReadFile(FixturePath(f)));
  seeds.push_back(MakeNpy(F32Dict("(2,)"), Floats({1, 2})));
  std::mt19937 rng(1234);
  const char kTokens[] = "{}()[],:' \"\n0123456789-LTrueFalse<>|=fiub\x93\x00\xff";
  int ok = 0;
  for (const std::string& seed : seeds) {
    // Every truncation.
    for (size_t n = 0; n <= seed.size(); ++n) {
      auto r = ParseNpy(seed.data(), n, "fuzz");
      if (r.ok()) {
        ++ok;
        continue;
      }
      EXPECT_TRUE(r.status().code() == StatusCode::kInvalidArgument || r.status().code() == StatusCode::kUnsupported)
          << r.status().ToString();
    }
    // Random byte mutations, biased towards header syntax.
    for (int iter = 0; iter < 3000; ++iter) {
      std::string s = seed;
      int edits = 1 + static_cast<int>(rng() % 4);
      for (int e = 0; e < edits && !s.empty(); ++e) {
        size_t pos = rng() % std::min<size_t>(s.size(), 140);
        switch (rng() % 3) {
          case 0:
            s[pos] = static_cast<char>(rng() & 0xff);
            break;
          case 1:
            s[pos] = kTokens[rng() % (sizeof(kTokens) - 1)];
            break;
          default:
            s.erase(pos, 1 + rng() % 3);
            break;
        }
      }
      auto r = ParseNpy(s.data(), s.size(), "fuzz");
      if (r.ok()) {
        ++ok;
        EXPECT_LE(r->byte_size(), s.size());
      } else {
        EXPECT_TRUE(r.status().code() == StatusCode::kInvalidArgument || r.status().code() == StatusCode::kUnsupported)
            << r.status().ToString();
      }
    }
  }
  EXPECT_GT(ok, static_cast<int>(seeds.size()));  // sanity: untouched prefixes of full length parse
}

// numpy's fixed-width strings: 'U' (UTF-32) and 'S' (bytes) files written by numpy itself
// (tests/data/npy/make_fixtures.py) read as string tensors, and string tensors write back as
// files numpy reads the same.
TEST(NpyStrings, ReadsNumpyUnicodeAndBytes) {
  auto u = ReadNpy(FixturePath("unicode.npy"));
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->dtype(), DataType::kString);
  EXPECT_EQ(Values<std::string>(*u), (std::vector<std::string>{"ab", "c"}));
  auto t = ReadNpy(FixturePath("strings_utf8.npy"));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(ShapeToString(t->shape()), "[2,3]");
  EXPECT_EQ(Values<std::string>(*t), (std::vector<std::string>{"gr\xc3\xbc\xc3\x9f"
                                                               "e",
                                                               "", "\xe6\x97\xa5\xe6\x9c\xac", std::string("a\0b", 3),
                                                               "\xf0\x9d\x84\x9e", "x"}));
  auto b = ReadNpy(FixturePath("bytes.npy"));
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  // 'S' keeps bytes as they are; only trailing zeros are padding.
  EXPECT_EQ(Values<std::string>(*b), (std::vector<std::string>{"ab", std::string("\xff\0z", 3), ""}));
}

TEST(NpyStrings, RoundTripAsUnicodeOrBytes) {
  for (const auto& strings : {std::vector<std::string>{"", "caf\xc3\xa9", "longer one"},
                              std::vector<std::string>{"ok", "not \xff utf-8", std::string("x\0y", 3)}}) {
    Tensor t = Tensor::FromVector<std::string>(strings, {3});
    auto bytes = SerializeNpy(t);
    ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
    const bool text = strings[1].find('\xff') == std::string::npos;
    EXPECT_NE(bytes->find(text ? "'<U10'" : "'|S11'"), std::string::npos) << bytes->substr(0, 80);
    auto back = ParseNpy(bytes->data(), bytes->size(), "mem");
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(Values<std::string>(*back), strings);
  }
}

TEST(NpyStrings, BadStringsAreNamed) {
  // A code point past U+10FFFF and a surrogate are not text.
  std::string big("\x00\x00\x11\x00", 4), surrogate("\x00\xd8\x00\x00", 4);
  ExpectParseError(MakeNpy("{'descr': '<U1', 'fortran_order': False, 'shape': (1,)}", big),
                   StatusCode::kInvalidArgument, {"string element 0", "not Unicode text"});
  ExpectParseError(
      MakeNpy("{'descr': '<U1', 'fortran_order': False, 'shape': (2,)}", std::string("a\0\0\0", 4) + surrogate),
      StatusCode::kInvalidArgument, {"string element 1", "surrogate"});
  ExpectParseError(MakeNpy("{'descr': '<U0', 'fortran_order': False, 'shape': (1000000000,)}", ""),
                   StatusCode::kUnsupported, {"width 0"});
  ExpectParseError(MakeNpy("{'descr': '>U1', 'fortran_order': False, 'shape': (1,)}", std::string("\0\0\0a", 4)),
                   StatusCode::kUnsupported, {"big-endian"});
  ExpectParseError(MakeNpy("{'descr': '<U2', 'fortran_order': False, 'shape': (2,)}", std::string(12, 'a')),
                   StatusCode::kInvalidArgument, {"shorter than its shape needs", "needs 16 bytes"});
}

}  // namespace
}  // namespace strata
