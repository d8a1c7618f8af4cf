#include "data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "autograd/tensor_methods.h"
#include "core/error.h"
#include "data/gz_reader.h"

namespace mantissa::data {

namespace {

struct IdxType {
  uint8_t code;
  const char* name;
  size_t size;  // bytes per element in the file
  DType dtype;  // what read_idx returns (int8/int16 widen to int32: no narrower signed dtype)
};

constexpr IdxType kIdxTypes[] = {
    {0x08, "uint8", 1, kUInt8}, {0x09, "int8", 1, kInt32},      {0x0B, "int16", 2, kInt32},
    {0x0C, "int32", 4, kInt32}, {0x0D, "float32", 4, kFloat32}, {0x0E, "float64", 8, kFloat64},
};

const IdxType* find_type(uint8_t code) {
  for (const IdxType& t : kIdxTypes)
    if (t.code == code) return &t;
  return nullptr;
}

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08X", v);
  return buf;
}

uint32_t load_be32(const uint8_t* p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | uint32_t(p[3]);
}

// Converts n big-endian elements of `size` bytes in place to the host's byte order.
void swap_to_host(void* data, size_t n, size_t size) {
  if constexpr (std::endian::native == std::endian::big) return;
  auto* p = static_cast<uint8_t*>(data);
  if (size == 2) {
    for (size_t i = 0; i < n; ++i, p += 2) std::swap(p[0], p[1]);
  } else if (size == 4) {
    for (size_t i = 0; i < n; ++i, p += 4) {
      uint32_t v;
      std::memcpy(&v, p, 4);
      v = __builtin_bswap32(v);
      std::memcpy(p, &v, 4);
    }
  } else if (size == 8) {
    for (size_t i = 0; i < n; ++i, p += 8) {
      uint64_t v;
      std::memcpy(&v, p, 8);
      v = __builtin_bswap64(v);
      std::memcpy(p, &v, 8);
    }
  }
}

std::string shape_text(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

}  // namespace

Tensor read_idx(const std::string& path) {
  constexpr const char* op = "read_idx";
  detail::GzReader in(path, op);

  uint8_t magic[4];
  const size_t got_magic = in.read(magic, 4);
  MT_CHECK(got_magic == 4, op, "'", path, "' holds ", got_magic, " bytes, too few for the 4-byte IDX magic number");
  const IdxType* type = find_type(magic[2]);
  MT_CHECK(magic[0] == 0 && magic[1] == 0 && type != nullptr, op, "'", path, "' is not an IDX file: magic number ",
           hex32(load_be32(magic)),
           ", expected 0x0000TTNN with type TT one of 08 (uint8), 09 (int8), 0B (int16), 0C (int32), 0D (float32), "
           "0E (float64) and NN dimensions");
  const int ndim = magic[3];
  MT_CHECK(ndim >= 1, op, "'", path, "': the magic number ", hex32(load_be32(magic)), " declares 0 dimensions");

  std::vector<uint8_t> dims(size_t(ndim) * 4);
  const size_t header = 4 + dims.size();
  const size_t got_dims = in.read(dims.data(), dims.size());
  MT_CHECK(got_dims == dims.size(), op, "'", path, "' is truncated: the header of ", ndim, " dimensions needs ", header,
           " bytes but the ", in.compressed() ? "decompressed data ends" : "file ends", " after ", 4 + got_dims);

  Shape shape(static_cast<size_t>(ndim));
  uint64_t numel = 1, span = 1;
  bool overflow = false;
  for (int d = 0; d < ndim; ++d) {
    shape[size_t(d)] = int64_t(load_be32(&dims[size_t(d) * 4]));
    overflow |= __builtin_mul_overflow(numel, uint64_t(shape[size_t(d)]), &numel);
    // Zeros counted as 1: an empty tensor's strides must fit in int64 too.
    overflow |= __builtin_mul_overflow(span, std::max<uint64_t>(uint64_t(shape[size_t(d)]), 1), &span);
  }
  uint64_t payload = 0;
  overflow |= __builtin_mul_overflow(numel, uint64_t(type->size), &payload);
  constexpr uint64_t kMax = uint64_t(std::numeric_limits<int64_t>::max());
  MT_CHECK(!overflow && payload <= kMax && span <= kMax, op, "'", path, "': sizes ", shape_text(shape),
           " overflow int64 (the product of the sizes, zeros counted as 1, in bytes); the header is corrupt");

  // Check the claimed size against the file before allocating anything.
  const char* what = in.compressed() ? "decompressed data" : "file";
  if (!in.compressed()) {
    const uint64_t expected = header + payload, actual = in.file_size();
    MT_CHECK(actual >= expected, op, "'", path, "' is truncated: shape ", shape_text(shape), " of ", type->name,
             " needs ", payload, " payload bytes (", expected, " in all) but the file has ", actual, " bytes, only ",
             actual - header, " after the header");
    MT_CHECK(actual == expected, op, "'", path, "' has ", actual - expected,
             " unexpected bytes after the payload: shape ", shape_text(shape), " of ", type->name, " needs ", expected,
             " bytes in all but the file has ", actual);
  } else {
    // Checked before allocating: a corrupt or hostile header must not make us allocate.
    const uint64_t bound = detail::max_decompressed_size(in.file_size());
    MT_CHECK(payload <= bound, op, "'", path, "': the header claims shape ", shape_text(shape), " of ", type->name,
             " (", payload, " bytes), more than a ", in.file_size(), "-byte gzip file can hold under the ", bound,
             "-byte limit (256:1, at least 16 MiB); the header is corrupt, or the file is a decompression bomb");
  }

  Tensor out = make_tensor(shape, type->dtype, Device::cpu());
  const bool widen = element_size(type->dtype) != type->size;
  std::vector<uint8_t> staging(widen ? size_t(payload) : 0);
  void* dst = widen ? static_cast<void*>(staging.data()) : out.raw_data();
  size_t got = 0;
  try {
    got = in.read(dst, size_t(payload));
  } catch (const Error& e) {  // a cut or corrupt stream: add what the header promised
    throw Error(std::string(e.what()) + "; shape " + shape_text(shape) + " of " + type->name + " needs " +
                std::to_string(payload) + " payload bytes");
  }
  MT_CHECK(got == payload, op, "'", path, "' is truncated: shape ", shape_text(shape), " of ", type->name, " needs ",
           payload, " payload bytes but the ", what, " ends after ", got);
  if (in.compressed()) {
    uint8_t extra;
    MT_CHECK(in.read(&extra, 1) == 0, op, "'", path, "' has unexpected data after the ", payload,
             "-byte payload of shape ", shape_text(shape), " of ", type->name,
             "; the header's sizes do not match the file");
  }

  swap_to_host(dst, size_t(numel), type->size);
  if (widen) {
    auto* o = out.data_ptr<int32_t>();
    if (type->size == 1) {
      // int8 payload: the sign extension is the point.
      for (size_t i = 0; i < size_t(numel); ++i) o[i] = int8_t(staging[i]);  // NOLINT(bugprone-signed-char-misuse)
    } else {
      for (size_t i = 0; i < size_t(numel); ++i) {
        int16_t v;
        std::memcpy(&v, &staging[i * 2], 2);
        o[i] = v;
      }
    }
  }
  return out;
}

void write_idx(const std::string& path, const Tensor& t_in) {
  constexpr const char* op = "write_idx";
  MT_CHECK(t_in.defined(), op, "tensor is undefined");
  uint8_t code = 0;
  switch (t_in.dtype()) {
    case kUInt8:
      code = 0x08;
      break;
    case kInt32:
      code = 0x0C;
      break;
    case kFloat32:
      code = 0x0D;
      break;
    case kFloat64:
      code = 0x0E;
      break;
    default:
      MT_FAIL(op, "IDX has no type for ", t_in.dtype(), " (writing '", path,
              "'); convert to uint8, int32, float32 or float64 first");
  }
  MT_CHECK(t_in.dim() >= 1 && t_in.dim() <= 255, op, "IDX holds 1 to 255 dimensions, got shape ", t_in.shape_str());
  for (int64_t s : t_in.sizes())
    MT_CHECK(s <= int64_t(std::numeric_limits<uint32_t>::max()), op, "dimension size ", s,
             " does not fit IDX's 32-bit sizes (shape ", t_in.shape_str(), ")");
  Tensor t = t_in.to(Device::cpu()).contiguous();

  std::vector<uint8_t> bytes(4 + 4 * size_t(t.dim()) + t.nbytes());
  bytes[2] = code;
  bytes[3] = uint8_t(t.dim());
  for (int64_t d = 0; d < t.dim(); ++d) {
    const uint32_t s = uint32_t(t.size(d));
    for (int k = 0; k < 4; ++k) bytes[4 + size_t(d) * 4 + size_t(k)] = uint8_t(s >> (24 - 8 * k));
  }
  uint8_t* payload = bytes.data() + 4 + 4 * size_t(t.dim());
  if (t.nbytes()) std::memcpy(payload, t.raw_data(), t.nbytes());
  swap_to_host(payload, size_t(t.numel()), element_size(t.dtype()));  // host -> big-endian is the same swap

  const bool gz = path.size() >= 3 && path.compare(path.size() - 3, 3, ".gz") == 0;
  errno = 0;
  gzFile f = gzopen(path.c_str(), gz ? "wb" : "wbT");  // T: write uncompressed through the same calls
  MT_CHECK(f != nullptr, op, "cannot open '", path, "' for writing: ", errno ? std::strerror(errno) : "out of memory");
  size_t done = 0;
  while (done < bytes.size()) {
    const unsigned chunk = unsigned(std::min<size_t>(bytes.size() - done, size_t(1) << 30));
    const int w = gzwrite(f, bytes.data() + done, chunk);
    if (w <= 0) {
      int errnum = 0;
      std::string msg = gzerror(f, &errnum);
      if (errnum == Z_ERRNO) msg = std::strerror(errno);
      gzclose_w(f);
      MT_FAIL(op, "cannot write '", path, "': ", msg);
    }
    done += size_t(w);
  }
  const int rc = gzclose_w(f);
  MT_CHECK(rc == Z_OK, op, "cannot finish writing '", path, "': ", rc == Z_ERRNO ? std::strerror(errno) : "zlib error");
}

}  // namespace mantissa::data
