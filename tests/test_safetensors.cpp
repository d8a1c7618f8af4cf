// safetensors: round trips, byte-exact agreement with the reference implementation,
// every malformed-file error, and the atomic save.
// Reference bytes are from the Hugging Face safetensors crate's own tests
// (safetensors/src/tensor.rs: test_serialization, test_serialization_forced_alignement,
// test_empty, test_deserialization).
#include <gtest/gtest.h>
#include <mantissa.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

namespace mt = mantissa;
namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

namespace {

class SafeTensors : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("mantissa_st_" + std::string(info->name()) + "_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    fs::permissions(dir_, fs::perms::owner_all, fs::perm_options::add);
    fs::remove_all(dir_);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

void write_file(const std::string& path, const Bytes& b) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

Bytes read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), {});
}

// A safetensors file: the little-endian header length, the header text, then `data`.
Bytes st_file(const std::string& header, const Bytes& data = {}) {
  Bytes b;
  for (int k = 0; k < 8; ++k) b.push_back(uint8_t(uint64_t(header.size()) >> (8 * k)));
  b.insert(b.end(), header.begin(), header.end());
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

Bytes raw_bytes(const mt::Tensor& t) {
  mt::Tensor c = t.contiguous();
  const auto* p = static_cast<const uint8_t*>(c.raw_data());
  return Bytes(p, p + c.nbytes());
}

template <typename Fn>
void expect_error(Fn fn, std::initializer_list<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "expected mantissa::Error";
  } catch (const mt::Error& e) {
    const std::string msg = e.what();
    for (const std::string& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  }
}

}  // namespace

TEST_F(SafeTensors, RoundTripsEveryDtype) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::map<std::string, mt::Tensor> in = {
      {"f32", mt::from_vector<float>({1.5f, -0.f, inf, nan, 3e-42f, 7}, {2, 3})},
      {"f64", mt::from_vector<double>({1e-310, -1e300, 0.1}, {3, 1})},
      {"f16", mt::from_vector<float>({1, -2.5f, 65504, 6e-8f}, {4}).to(mt::kHalf)},
      {"bf16", mt::from_vector<float>({1, -2.5f, 3e38f, 1e-39f}, {2, 2}).to(mt::kBFloat16)},
      {"i64", mt::from_vector<int64_t>({std::numeric_limits<int64_t>::min(), -1, 1LL << 40}, {3})},
      {"i32", mt::from_vector<int32_t>({-7, 2147483647}, {1, 2, 1})},
      {"u8", mt::from_vector<uint8_t>({0, 255, 128}, {3})},
      {"bool", mt::from_vector<bool>({true, false, true}, {3})},
      {"scalar", mt::scalar_tensor(2.5)},
      {"empty", mt::zeros({0, 3}, {.dtype = mt::kInt32})},
      {"transposed", mt::arange(6, {.dtype = mt::kFloat32}).reshape({2, 3}).t()},
  };
  mt::save_safetensors(path("m.safetensors"), in);
  EXPECT_FALSE(fs::exists(path("m.safetensors.tmp")));
  mt::SafeTensors out = mt::load_safetensors(path("m.safetensors"));
  EXPECT_TRUE(out.metadata.empty());
  ASSERT_EQ(out.tensors.size(), in.size());
  for (const auto& [name, t] : in) {
    SCOPED_TRACE(name);
    const mt::Tensor& r = out.tensors.at(name);
    EXPECT_EQ(r.dtype(), t.dtype());
    EXPECT_EQ(r.sizes(), t.sizes());
    EXPECT_EQ(raw_bytes(r), raw_bytes(t));  // bit-exact, NaN and -0 included
  }
  EXPECT_EQ(out.tensors.at("transposed").to_vector<float>(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
}

TEST_F(SafeTensors, Metadata) {
  std::map<std::string, std::string> meta = {
      {"format", "pt"}, {"step", "1000"}, {"note", "ünïcode \"quoted\"\n"}, {"empty", ""}};
  mt::save_safetensors(path("m"), {{"w", mt::ones({2})}}, meta);
  mt::SafeTensors f = mt::load_safetensors(path("m"));
  EXPECT_EQ(f.metadata, meta);
  mt::save_safetensors(path("only_meta"), {}, {{"k", "v"}});
  EXPECT_EQ(mt::load_safetensors(path("only_meta")).metadata.at("k"), "v");
}

TEST_F(SafeTensors, MatchesTheReferenceWriterByteForByte) {
  mt::Tensor x = mt::from_vector<float>({0, 1, 2, 3, 4, 5}, {1, 2, 3});
  mt::save_safetensors(path("a"), {{"attn.0", x}});
  EXPECT_EQ(read_file(path("a")),
            (Bytes{64,  0,   0,   0,   0,   0,  0,  0,  123, 34, 97,  116, 116, 110, 46,  48,  34,  58,  123, 34,
                   100, 116, 121, 112, 101, 34, 58, 34, 70,  51, 50,  34,  44,  34,  115, 104, 97,  112, 101, 34,
                   58,  91,  49,  44,  50,  44, 51, 93, 44,  34, 100, 97,  116, 97,  95,  111, 102, 102, 115, 101,
                   116, 115, 34,  58,  91,  48, 44, 50, 52,  93, 125, 125, 0,   0,   0,   0,   0,   0,   128, 63,
                   0,   0,   0,   64,  0,   0,  64, 64, 0,   0,  128, 64,  0,   0,   160, 64}));
  // A 7-space pad keeps the data 8-byte aligned.
  mt::save_safetensors(path("b"), {{"attn0", x.reshape({1, 1, 2, 3})}});
  EXPECT_EQ(read_file(path("b")),
            (Bytes{72,  0,   0,   0,  0,  0,  0,  0,  123, 34,  97, 116, 116, 110, 48,  34,  58,  123, 34,  100, 116,
                   121, 112, 101, 34, 58, 34, 70, 51, 50,  34,  44, 34,  115, 104, 97,  112, 101, 34,  58,  91,  49,
                   44,  49,  44,  50, 44, 51, 93, 44, 34,  100, 97, 116, 97,  95,  111, 102, 102, 115, 101, 116, 115,
                   34,  58,  91,  48, 44, 50, 52, 93, 125, 125, 32, 32,  32,  32,  32,  32,  32,  0,   0,   0,   0,
                   0,   0,   128, 63, 0,  0,  0,  64, 0,   0,   64, 64,  0,   0,   128, 64,  0,   0,   160, 64}));
  mt::save_safetensors(path("c"), {});
  EXPECT_EQ(read_file(path("c")), (Bytes{8, 0, 0, 0, 0, 0, 0, 0, 123, 125, 32, 32, 32, 32, 32, 32}));
  mt::save_safetensors(path("d"), {}, {{"framework", "pt"}});
  EXPECT_EQ(read_file(path("d")), (Bytes{40,  0,   0,   0,  0,  0,  0,   0,   123, 34,  95,  95,  109, 101, 116, 97,
                                         100, 97,  116, 97, 95, 95, 34,  58,  123, 34,  102, 114, 97,  109, 101, 119,
                                         111, 114, 107, 34, 58, 34, 112, 116, 34,  125, 125, 32,  32,  32,  32,  32}));
}

TEST_F(SafeTensors, OrdersDataByAlignmentThenName) {
  mt::save_safetensors(path("o"), {{"a", mt::zeros({3}, {.dtype = mt::kUInt8})},
                                   {"b", mt::zeros({1}, {.dtype = mt::kFloat64})},
                                   {"c", mt::zeros({1}, {.dtype = mt::kHalf})},
                                   {"d", mt::zeros({1}, {.dtype = mt::kInt64})},
                                   {"e", mt::zeros({1}, {.dtype = mt::kBool})}});
  Bytes b = read_file(path("o"));
  uint64_t n = 0;
  for (int k = 7; k >= 0; --k) n = n << 8 | b[size_t(k)];
  const std::string header(b.begin() + 8, b.begin() + 8 + long(n));
  EXPECT_EQ(header.size() % 8, 0u);
  EXPECT_EQ(header.substr(0, header.find_last_not_of(' ') + 1),
            "{\"d\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]},"
            "\"b\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[8,16]},"
            "\"c\":{\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[16,18]},"
            "\"a\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[18,21]},"
            "\"e\":{\"dtype\":\"BOOL\",\"shape\":[1],\"data_offsets\":[21,22]}}");
}

TEST_F(SafeTensors, LoadsTheReferenceExample) {
  write_file(path("ref"), st_file(R"({"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}})", Bytes(16, 0)));
  mt::SafeTensors f = mt::load_safetensors(path("ref"));
  ASSERT_EQ(f.tensors.size(), 1u);
  EXPECT_EQ(f.tensors.at("test").dtype(), mt::kInt32);
  EXPECT_EQ(f.tensors.at("test").sizes(), (mt::Shape{2, 2}));
  EXPECT_EQ(f.tensors.at("test").to_vector<int32_t>(), (std::vector<int32_t>{0, 0, 0, 0}));
  // Any key order, whitespace and padding; zero-size tensors anywhere their offsets allow.
  write_file(path("ws"), st_file(" {\n \"z\" : {\"shape\":[0],\"data_offsets\":[0,0],\"dtype\":\"F32\"},"
                                 "\"x\": {\"data_offsets\": [0, 2], \"dtype\": \"U8\", \"shape\": [2]} }   ",
                                 {7, 9}));
  expect_error([&] { mt::load_safetensors(path("ws")); }, {"'{'"});  // the header must start with '{'
  write_file(path("ws2"), st_file("{\n \"z\" : {\"shape\":[0],\"data_offsets\":[0,0],\"dtype\":\"F32\"},"
                                  "\"x\": {\"data_offsets\": [0, 2], \"dtype\": \"U8\", \"shape\": [2]} }   ",
                                  {7, 9}));
  mt::SafeTensors g = mt::load_safetensors(path("ws2"));
  EXPECT_EQ(g.tensors.at("x").to_vector<uint8_t>(), (Bytes{7, 9}));
  EXPECT_EQ(g.tensors.at("z").numel(), 0);
}

TEST_F(SafeTensors, MalformedFiles) {
  const std::string p = path("bad.safetensors");
  auto check = [&](const Bytes& file, std::initializer_list<std::string> parts) {
    write_file(p, file);
    expect_error([&] { mt::load_safetensors(p); }, parts);
  };
  const std::string ok_entry = R"("t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  const Bytes eight(8, 0);

  check({1, 2, 3}, {p, "3 bytes, too short"});
  check({}, {p, "0 bytes, too short"});
  Bytes len_past = st_file("{}");
  len_past[0] = 200;
  check(len_past, {p, "header length 200 runs past", "2 bytes follow"});
  check(st_file("{\"t\":"), {p, "malformed JSON"});
  check(st_file("[1, 2]"), {p, "'{'"});
  check(st_file("{\"t\": 3}"), {p, "tensor 't'", "must be an object"});
  check(st_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},"
                "\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}}"),
        {p, "repeats the key 'a'"});
  check(st_file(R"({"t":{"dtype":"Q7","shape":[2],"data_offsets":[0,2]}})", {0, 0}),
        {p, "tensor 't'", "unknown dtype 'Q7'"});
  check(st_file(R"({"t":{"dtype":"I8","shape":[2],"data_offsets":[0,2]}})", {0, 0}),
        {p, "tensor 't'", "'I8' has no Mantissa dtype"});
  check(st_file(R"({"t":{"dtype":3,"shape":[2],"data_offsets":[0,8]}})", eight), {p, "tensor 't'", "dtype must be"});
  check(st_file(R"({"t":{"dtype":"F32","data_offsets":[0,8]}})", eight), {p, "tensor 't'", "needs dtype, shape"});
  check(st_file(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"strides":[1]}})", eight),
        {p, "tensor 't'", "unknown field 'strides'"});
  check(st_file(R"({"t":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", eight), {p, "tensor 't'", "shape"});
  check(st_file(R"({"t":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", eight), {p, "tensor 't'", "shape"});
  check(st_file(R"({"t":{"dtype":"F32","shape":2,"data_offsets":[0,8]}})", eight), {p, "tensor 't'", "shape"});
  check(st_file(R"({"t":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", eight),
        {p, "tensor 't'", "overflows"});
  check(st_file(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", eight), {p, "tensor 't'", "[begin, end]"});
  check(st_file(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[-1,7]}})", eight),
        {p, "tensor 't'", "[begin, end]"});
  check(st_file(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", eight), {p, "tensor 't'", "end before"});
  check(st_file("{" + ok_entry + "}", Bytes(6, 0)), {p, "tensor 't'", "[0, 8] run past the 6 data bytes"});
  check(st_file(R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", eight),
        {p, "tensor 't'", "span 8 bytes", "[3] of F32 needs 12"});
  check(st_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                eight),
        {p, "tensor 'b'", "overlap tensor 'a'"});
  check(st_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                Bytes(12, 0)),
        {p, "tensor 'b'", "bytes [4, 8)", "no tensor"});
  check(st_file(R"({"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", eight), {p, "tensor 'b'", "bytes [0, 4)"});
  check(st_file("{" + ok_entry + "}", Bytes(11, 0)), {p, "3 trailing bytes"});
  check(st_file("{}", {1}), {p, "1 trailing bytes"});
  check(st_file(R"({"__metadata__":{"k":1}})"), {p, "__metadata__ value of 'k' must be a string"});
  check(st_file(R"({"__metadata__":[]})"), {p, "__metadata__ must be an object"});
  check(st_file(R"({"t":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}})", {1, 0, 2}),
        {p, "tensor 't'", "BOOL element 2 is byte 2"});
  check(st_file("{\"t\xff\":1}"), {p, "malformed JSON"});  // invalid UTF-8
  expect_error([&] { mt::load_safetensors(path("missing")); }, {path("missing"), "cannot open"});
  expect_error([&] { mt::load_safetensors(dir_.string()); }, {dir_.string(), "not a regular file"});
}

TEST_F(SafeTensors, HeaderSizeLimit) {
  // A sparse file just big enough for a 100 MB + 1 header length to fit inside it.
  const std::string p = path("huge");
  Bytes b = st_file("{}");
  const uint64_t n = 100'000'001;
  for (int k = 0; k < 8; ++k) b[size_t(k)] = uint8_t(n >> (8 * k));
  write_file(p, b);
  fs::resize_file(p, 8 + n);
  expect_error([&] { mt::load_safetensors(p); }, {p, "exceeds the 100000000-byte limit"});
}

TEST_F(SafeTensors, SaveErrors) {
  expect_error([&] { mt::save_safetensors(path("x"), {{"__metadata__", mt::ones({1})}}); }, {"reserved"});
  expect_error([&] { mt::save_safetensors(path("x"), {{"u", mt::Tensor()}}); }, {"'u'", "undefined"});
  expect_error([&] { mt::save_safetensors(path("x"), {{"bad\xff", mt::ones({1})}}); }, {path("x"), "JSON"});
  expect_error(
      [&] {
        mt::save_safetensors(path("no/such/dir/x"), {{"w", mt::ones({1})}});
      },
      {path("no/such/dir/x.tmp"), "cannot create"});
  EXPECT_FALSE(fs::exists(path("x")));
}

TEST_F(SafeTensors, FailedSaveLeavesThePreviousFile) {
  const std::string p = path("ckpt.safetensors");
  mt::save_safetensors(p, {{"w", mt::full({4}, 1.0)}});
  const Bytes before = read_file(p);
  auto unchanged = [&] {
    EXPECT_EQ(read_file(p), before);
    EXPECT_EQ(mt::load_safetensors(p).tensors.at("w").to_vector<float>(), (std::vector<float>{1, 1, 1, 1}));
  };

  // (A directory at the old fixed temporary name no longer blocks a save: temporaries are
  // uniquely named, tests/test_reliability_saves.cpp.)

  // The write fails halfway: a file-size limit makes write() return EFBIG.
  {
    struct rlimit old {};
    ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
    auto old_handler = signal(SIGXFSZ, SIG_IGN);
    struct rlimit lim = old;
    lim.rlim_cur = 4096;
    ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &lim), 0);
    try {
      mt::save_safetensors(p, {{"w", mt::full({100000}, 2.0)}});
      ADD_FAILURE() << "expected mantissa::Error";
    } catch (const mt::Error& e) {
      EXPECT_NE(std::string(e.what()).find("cannot write"), std::string::npos) << e.what();
    }
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, old_handler);
  }
  unchanged();
  EXPECT_FALSE(fs::exists(p + ".tmp"));

  // The rename fails: the target is a directory.
  const std::string d = path("dir.safetensors");
  fs::create_directory(d);
  expect_error([&] { mt::save_safetensors(d, {{"w", mt::ones({1})}}); }, {"cannot rename", d});
  EXPECT_TRUE(fs::is_directory(d));
  EXPECT_FALSE(fs::exists(d + ".tmp"));

  // The directory is not writable (root ignores permissions, so only checked as a user).
  if (geteuid() != 0) {
    fs::permissions(dir_, fs::perms::owner_read | fs::perms::owner_exec);
    expect_error([&] { mt::save_safetensors(p, {{"w", mt::full({4}, 3.0)}}); }, {p + ".tmp", "cannot create"});
    fs::permissions(dir_, fs::perms::owner_all);
    unchanged();
  }

  // A successful save replaces the file.
  mt::save_safetensors(p, {{"w", mt::full({2}, 5.0)}});
  EXPECT_EQ(mt::load_safetensors(p).tensors.at("w").to_vector<float>(), (std::vector<float>{5, 5}));
  EXPECT_FALSE(fs::exists(p + ".tmp"));
}
