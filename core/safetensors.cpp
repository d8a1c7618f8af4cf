#include "core/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/launch.h"

namespace mantissa {

// Tensor bytes are copied as they are in memory; the format is little-endian.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

// A header larger than this is rejected before it is read, as the reference reader does.
constexpr uint64_t kMaxHeader = 100'000'000;
// A valid header nests 3 deep ({name: {shape: [...]}}); deeper input is hostile, and a
// limit keeps every later recursion over the parsed value (printing, destroying) shallow.
constexpr size_t kMaxDepth = 16;
// Arrays in a valid header are shapes and data_offsets: more elements than this is hostile (a
// 100 MB shape of 49 million 1s took 30 s of CPU and 2.8 GB to reject after parsing).
constexpr size_t kMaxArray = 64;
// Untrusted text quoted in an error message is cut to this many bytes.
constexpr size_t kMaxQuoted = 80;

std::string clipped(const std::string& s) {
  return s.size() <= kMaxQuoted ? s : s.substr(0, kMaxQuoted) + "... (" + std::to_string(s.size()) + " bytes)";
}

// A short description of an untrusted JSON value for an error message: scalars quoted
// (clipped), arrays and objects by their size only.
std::string brief(const json& v) {
  if (v.is_array()) return "an array of " + std::to_string(v.size()) + " elements";
  if (v.is_object()) return "an object of " + std::to_string(v.size()) + " keys";
  return clipped(v.dump());
}

// One streaming pass over the header before it is parsed: rejects nesting deeper than
// kMaxDepth, repeated keys (a JSON parser would silently keep one of them) and arrays longer
// than kMaxArray, in time linear in the header's size.
class HeaderScan : public json::json_sax_t {
 public:
  std::string error;

  bool null() override { return element(); }
  bool boolean(bool) override { return element(); }
  bool number_integer(number_integer_t) override { return element(); }
  bool number_unsigned(number_unsigned_t) override { return element(); }
  bool number_float(number_float_t, const string_t&) override { return element(); }
  bool string(string_t&) override { return element(); }
  bool binary(binary_t&) override { return element(); }
  bool start_object(std::size_t) override {
    if (!element()) return false;
    keys_.emplace_back();
    arrays_.push_back(-1);
    return enter();
  }
  bool key(string_t& k) override {
    if (keys_.back().insert(k).second) return true;
    error = "the header repeats the key '" + clipped(k) + "'";
    return false;
  }
  bool end_object() override {
    keys_.pop_back();
    arrays_.pop_back();
    --depth_;
    return true;
  }
  bool start_array(std::size_t) override {
    if (!element()) return false;
    arrays_.push_back(0);
    return enter();
  }
  bool end_array() override {
    arrays_.pop_back();
    --depth_;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& ex) override {
    error = "malformed JSON header: " + clipped(ex.what());
    return false;
  }

 private:
  bool enter() {
    if (++depth_ <= kMaxDepth) return true;
    error = "the header nests deeper than " + std::to_string(kMaxDepth) + " levels";
    return false;
  }
  // Counts a value inside an array (arrays_: element counts, -1 for an object level).
  bool element() {
    if (arrays_.empty() || arrays_.back() < 0 || ++arrays_.back() <= int64_t(kMaxArray)) return true;
    error = "the header holds an array of more than " + std::to_string(kMaxArray) + " elements (a shape has at most " +
            std::to_string(kMaxArray) + " dimensions, data_offsets 2)";
    return false;
  }
  std::vector<std::unordered_set<std::string>> keys_;
  std::vector<int64_t> arrays_;
  size_t depth_ = 0;
};

struct StDtype {
  const char* name;
  DType dtype;
  int rank;  // position in the reference's Dtype enum (increasing alignment): orders the data on save
};
constexpr StDtype kDtypes[] = {{"BOOL", kBool, 0}, {"U8", kUInt8, 1},     {"F16", kFloat16, 7},  {"BF16", kBFloat16, 8},
                               {"I32", kInt32, 9}, {"F32", kFloat32, 11}, {"F64", kFloat64, 12}, {"I64", kInt64, 13}};
// Valid in the format but without a Mantissa dtype: named in errors rather than called "unknown".
constexpr const char* kForeignDtypes[] = {"I8",      "I16",     "U16",     "U32",     "U64", "F8_E5M2",
                                          "F8_E4M3", "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4",  "C64"};

const StDtype& st_dtype(DType t) {
  for (const StDtype& d : kDtypes)
    if (d.dtype == t) return d;
  MT_FAIL("save_safetensors", "no safetensors dtype for ", t);  // unreachable: every DType is listed
}

std::string errno_text() { return std::strerror(errno); }

// Closes a file descriptor on scope exit.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Reads exactly n bytes at `offset`; returns how many were read (fewer at end of file).
size_t read_at(int fd, void* data, size_t n, uint64_t offset) {
  char* p = static_cast<char*>(data);
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::pread(fd, p + got, std::min<size_t>(n - got, size_t(1) << 30), off_t(offset + got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += size_t(r);
  }
  return got;
}

std::string shape_text(const std::vector<uint64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

}  // namespace

// ---------------------------------------------------------------- save

void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  constexpr const char* op = "save_safetensors";
  struct Entry {
    const std::string* name;
    Tensor t;  // contiguous, on the CPU
    const StDtype* dt;
  };
  std::vector<Entry> entries;
  for (const auto& [name, t] : tensors) {
    MT_CHECK(name != "__metadata__", op, "'__metadata__' is reserved for the metadata and cannot name a tensor (", path,
             ")");
    MT_CHECK(t.defined(), op, "tensor '", name, "' is undefined (", path, ")");
    entries.push_back({&name, launch::convert(launch::contiguous(t), t.dtype(), Device::cpu()), &st_dtype(t.dtype())});
  }
  // The reference writer's order: descending alignment (so every tensor stays aligned
  // after the 8-byte-padded header), then name.
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.dt->rank != b.dt->rank ? a.dt->rank > b.dt->rank : *a.name < *b.name;
  });

  // The header text is assembled entry by entry (the same bytes as dumping one ordered
  // object): an ordered object finds keys by linear search, quadratic for large models.
  std::string text = "{";
  try {
    if (!metadata.empty()) {
      json m = json::object();  // sorted by key, as the std::map it comes from
      for (const auto& [k, v] : metadata) m[k] = v;
      text += "\"__metadata__\":" + m.dump();
    }
    uint64_t offset = 0;
    for (const Entry& e : entries) {
      MT_CHECK(e.t.sizes().size() <= kMaxArray, op, "'", path, "': tensor '", clipped(*e.name), "' has ",
               e.t.sizes().size(), " dimensions; safetensors files hold at most ", kMaxArray);
      ordered_json info = ordered_json::object();
      info["dtype"] = e.dt->name;
      info["shape"] = e.t.sizes();
      info["data_offsets"] = {offset, offset + e.t.nbytes()};
      if (text.size() > 1) text += ',';
      text += json(*e.name).dump() + ":" + info.dump();
      offset += e.t.nbytes();
    }
  } catch (const json::exception& ex) {  // invalid UTF-8 in a name or a metadata string
    MT_FAIL(op, "cannot encode the header of '", path, "' as JSON: ", ex.what());
  }
  text += '}';
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t n = text.size();

  AtomicFile f(op, path);
  f.write(&n, 8);
  f.write(text.data(), text.size());
  for (const Entry& e : entries)
    if (e.t.nbytes()) f.write(e.t.raw_data(), e.t.nbytes());
  f.commit();
}

// ---------------------------------------------------------------- load

SafeTensors load_safetensors(const std::string& path) {
  constexpr const char* op = "load_safetensors";
  auto where = [&](const std::string& key) {
    return key.empty() ? "'" + path + "': " : "'" + path + "': tensor '" + clipped(key) + "': ";
  };

  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is rejected just below.
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
  if (f.fd < 0) {
    const std::string err = errno_text();
    MT_FAIL(op, "cannot open '", path, "': ", err);
  }
  struct stat st {};
  MT_CHECK(::fstat(f.fd, &st) == 0 && S_ISREG(st.st_mode), op, "'", path,
           "' is not a regular file (a pipe, device or directory cannot hold a safetensors file)");
  const uint64_t file_size = uint64_t(st.st_size);

  MT_CHECK(file_size >= 8, op, where(""), "file is ", file_size,
           " bytes, too short for the 8-byte header length that starts a safetensors file");
  uint8_t len[8];
  MT_CHECK(read_at(f.fd, len, 8, 0) == 8, op, where(""), "cannot read the header length: ", errno_text());
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | len[i];
  MT_CHECK(n <= file_size - 8, op, where(""), "header length ", n, " runs past the end of the file (", file_size - 8,
           " bytes follow the length field); truncated, or not a safetensors file");
  MT_CHECK(n <= kMaxHeader, op, where(""), "header length ", n, " exceeds the ", kMaxHeader, "-byte limit");
  const uint64_t data_start = 8 + n, data_size = file_size - data_start;

  std::string text(size_t(n), '\0');
  MT_CHECK(read_at(f.fd, text.data(), text.size(), 8) == n, op, where(""), "cannot read the ", n,
           "-byte header: ", errno_text());
  MT_CHECK(!text.empty() && text[0] == '{', op, where(""), "the header must be a JSON object starting with '{'");
  // JSON has no raw NUL bytes (not even in strings); padding after the object must be spaces.
  MT_CHECK(text.find('\0') == std::string::npos, op, where(""), "the header holds a NUL byte at offset ",
           8 + text.find('\0'), "; only spaces may pad it");

  HeaderScan scan;
  if (!json::sax_parse(text, &scan)) MT_FAIL(op, where(""), scan.error);
  json header;
  try {
    header = json::parse(text);
  } catch (const json::exception& ex) {  // unreachable after the scan; kept as a guard
    MT_FAIL(op, where(""), "malformed JSON header: ", clipped(ex.what()));
  }
  MT_CHECK(header.is_object(), op, where(""), "the header must be a JSON object, got ", header.type_name());

  struct Info {
    std::string name;
    const StDtype* dt;
    Shape shape;
    uint64_t begin, end;
  };
  std::vector<Info> infos;
  SafeTensors out;
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      MT_CHECK(value.is_object(), op, where(""), "__metadata__ must be an object of strings, got ", value.type_name());
      for (const auto& [mk, mv] : value.items()) {
        MT_CHECK(mv.is_string(), op, where(""), "__metadata__ value of '", clipped(mk), "' must be a string, got ",
                 brief(mv));
        out.metadata[mk] = mv.get<std::string>();
      }
      continue;
    }
    MT_CHECK(value.is_object(), op, where(key), "entry must be an object with dtype, shape and data_offsets, got ",
             brief(value));
    for (const auto& [field, unused] : value.items()) {
      (void)unused;
      // An unknown field could change how the bytes are meant (strides, byte order): refuse to guess.
      MT_CHECK(field == "dtype" || field == "shape" || field == "data_offsets", op, where(key), "unknown field '",
               clipped(field), "' (expected dtype, shape and data_offsets)");
    }
    MT_CHECK(value.contains("dtype") && value.contains("shape") && value.contains("data_offsets"), op, where(key),
             "entry needs dtype, shape and data_offsets, got ", brief(value));

    const json& jd = value["dtype"];
    MT_CHECK(jd.is_string(), op, where(key), "dtype must be a string, got ", brief(jd));
    const std::string dname = jd.get<std::string>();
    const StDtype* dt = nullptr;
    for (const StDtype& d : kDtypes)
      if (dname == d.name) dt = &d;
    if (!dt) {
      const bool foreign =
          std::any_of(std::begin(kForeignDtypes), std::end(kForeignDtypes), [&](const char* s) { return dname == s; });
      MT_FAIL(op, where(key), foreign ? "dtype '" : "unknown dtype '", clipped(dname),
              foreign ? "' has no Mantissa dtype" : "'", "; supported: F32, F64, F16, BF16, I64, I32, U8, BOOL");
    }

    const json& js = value["shape"];
    MT_CHECK(js.is_array(), op, where(key), "shape must be an array of non-negative integers, got ", brief(js));
    std::vector<uint64_t> dims;
    uint64_t numel = 1, span = 1;
    bool overflow = false;
    for (const json& d : js) {
      MT_CHECK(d.is_number_unsigned(), op, where(key), "shape must be an array of non-negative integers, got ",
               brief(d), " in it");
      dims.push_back(d.get<uint64_t>());
      overflow |= __builtin_mul_overflow(numel, dims.back(), &numel);
      // Zeros counted as 1: the strides of an empty tensor must fit in int64 too.
      overflow |= __builtin_mul_overflow(span, std::max<uint64_t>(dims.back(), 1), &span);
    }
    uint64_t nbytes = 0;
    overflow |= __builtin_mul_overflow(numel, uint64_t(element_size(dt->dtype)), &nbytes);
    MT_CHECK(!overflow && nbytes <= uint64_t(INT64_MAX) && span <= uint64_t(INT64_MAX), op, where(key), "shape ",
             shape_text(dims), " overflows int64 (the product of the sizes, zeros counted as 1, in bytes)");

    const json& jo = value["data_offsets"];
    MT_CHECK(jo.is_array() && jo.size() == 2 && jo[0].is_number_unsigned() && jo[1].is_number_unsigned(), op,
             where(key), "data_offsets must be [begin, end] with non-negative integers, got ", brief(jo));
    const uint64_t begin = jo[0].get<uint64_t>(), end = jo[1].get<uint64_t>();
    MT_CHECK(begin <= end, op, where(key), "data_offsets [", begin, ", ", end, "] end before they begin");
    MT_CHECK(end <= data_size, op, where(key), "data_offsets [", begin, ", ", end, "] run past the ", data_size,
             " data bytes after the header (file truncated?)");
    MT_CHECK(end - begin == nbytes, op, where(key), "data_offsets [", begin, ", ", end, "] span ", end - begin,
             " bytes but shape ", shape_text(dims), " of ", dname, " needs ", nbytes);

    Shape shape(dims.begin(), dims.end());
    infos.push_back({key, dt, std::move(shape), begin, end});
  }

  // The data must be covered exactly: tensors back to back from offset 0 to the end of the file.
  std::sort(infos.begin(), infos.end(),
            [](const Info& a, const Info& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  uint64_t pos = 0;
  for (size_t i = 0; i < infos.size(); ++i) {
    const Info& t = infos[i];
    MT_CHECK(t.begin >= pos, op, where(t.name), "data_offsets [", t.begin, ", ", t.end, "] overlap tensor '",
             infos[i - 1].name, "' [", infos[i - 1].begin, ", ", infos[i - 1].end, "]");
    MT_CHECK(t.begin == pos, op, where(t.name), "data_offsets [", t.begin, ", ", t.end, "] leave bytes [", pos, ", ",
             t.begin, ") that belong to no tensor");
    pos = t.end;
  }
  MT_CHECK(pos == data_size, op, where(""), data_size - pos, " trailing bytes after the last tensor (the data is ",
           data_size, " bytes but the tensors cover ", pos, ")");

  for (const Info& t : infos) {
    Tensor x = make_tensor(t.shape, t.dt->dtype, Device::cpu());
    const size_t nb = x.nbytes();
    errno = 0;
    MT_CHECK(read_at(f.fd, x.raw_data(), nb, data_start + t.begin) == nb, op, where(t.name), "cannot read ", nb,
             " bytes at offset ", data_start + t.begin, ": ", errno ? errno_text() : "file shrank while reading");
    if (t.dt->dtype == kBool) {
      const auto* b = static_cast<const uint8_t*>(x.raw_data());
      for (size_t i = 0; i < nb; ++i)
        MT_CHECK(b[i] <= 1, op, where(t.name), "BOOL element ", i, " is byte ", int(b[i]), "; expected 0 or 1");
    }
    out.tensors[t.name] = std::move(x);
  }
  return out;
}

}  // namespace mantissa
