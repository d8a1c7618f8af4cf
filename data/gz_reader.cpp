#include "data/gz_reader.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace mantissa::data::detail {

namespace fs = std::filesystem;

GzReader::GzReader(std::string path, std::string op) : path_(std::move(path)), op_(std::move(op)) {
  std::error_code ec;
  const fs::file_status st = fs::status(path_, ec);
  MT_CHECK(!ec || ec == std::errc::no_such_file_or_directory, op_, "cannot access '", path_, "': ", ec.message());
  MT_CHECK(fs::exists(st), op_, "file '", path_, "' does not exist");
  MT_CHECK(fs::is_regular_file(st), op_, "'", path_, "' is not a regular file");
  file_size_ = fs::file_size(path_, ec);
  MT_CHECK(!ec, op_, "cannot get the size of '", path_, "': ", ec.message());
  errno = 0;
  gzFile f = gzopen(path_.c_str(), "rb");
  MT_CHECK(f != nullptr, op_, "cannot open '", path_, "': ", errno ? std::strerror(errno) : "out of memory");
  gzbuffer(f, 1 << 17);  // the default 8 KiB makes big reads slow
  file_ = f;
}

GzReader::~GzReader() {
  if (file_) gzclose_r(static_cast<gzFile>(file_));
}

size_t GzReader::read(void* dst, size_t n) {
  auto f = static_cast<gzFile>(file_);
  char* out = static_cast<char*>(dst);
  size_t got = 0;
  while (got < n) {
    // gzread takes an unsigned count and returns an int: read in chunks below 2^31.
    const unsigned chunk = unsigned(std::min<size_t>(n - got, size_t(1) << 30));
    const int r = gzread(f, out + got, chunk);
    if (r < 0) {
      int errnum = 0;
      const char* msg = gzerror(f, &errnum);
      MT_FAIL(op_, "cannot read '", path_, "' (corrupt gzip data?): ", errnum == Z_ERRNO ? std::strerror(errno) : msg);
    }
    if (r == 0) break;
    got += size_t(r);
  }
  if (got < n) {
    int errnum = 0;
    gzerror(f, &errnum);
    truncated_ = errnum == Z_BUF_ERROR;  // zlib's "unexpected end of file"
  }
  return got;
}

bool GzReader::compressed() const { return gzdirect(static_cast<gzFile>(file_)) == 0; }

}  // namespace mantissa::data::detail
