#include "data/gz_reader.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace mantissa::data::detail {

namespace fs = std::filesystem;

namespace {
constexpr size_t kInputChunk = size_t(1) << 17;
z_stream* zs(void* p) { return static_cast<z_stream*>(p); }
}  // namespace

GzReader::GzReader(std::string path, std::string op) : path_(std::move(path)), op_(std::move(op)) {
  std::error_code ec;
  const fs::file_status st = fs::status(path_, ec);
  MT_CHECK(!ec || ec == std::errc::no_such_file_or_directory, op_, "cannot access '", path_, "': ", ec.message());
  MT_CHECK(fs::exists(st), op_, "file '", path_, "' does not exist");
  MT_CHECK(fs::is_regular_file(st), op_, "'", path_, "' is not a regular file");
  // O_NONBLOCK: should the path have become a FIFO since the check, opening still returns.
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  MT_CHECK(fd_ >= 0, op_, "cannot open '", path_, "': ", std::strerror(errno));
  file_size_ = fs::file_size(path_, ec);
  MT_CHECK(!ec, op_, "cannot get the size of '", path_, "': ", ec.message());

  refill();
  compressed_ = in_.size() >= 2 && in_[0] == 0x1f && in_[1] == 0x8b;
  if (compressed_) {
    auto* s = new z_stream{};
    s->next_in = in_.data();
    s->avail_in = unsigned(in_.size());
    // 16 + MAX_WBITS: gzip wrapper only; inflate checks the trailer's CRC-32 and length.
    if (inflateInit2(s, 16 + MAX_WBITS) != Z_OK) {
      delete s;
      MT_FAIL(op_, "cannot start decompressing '", path_, "': out of memory");
    }
    stream_ = s;
  }
}

GzReader::~GzReader() {
  if (stream_) {
    inflateEnd(zs(stream_));
    delete zs(stream_);
  }
  if (fd_ >= 0) ::close(fd_);
}

bool GzReader::refill() {
  // No bigger than the file: reading a small file allocates little (the fuzz harnesses read
  // thousands a second).
  in_.resize(size_t(std::min<uint64_t>(kInputChunk, std::max<uint64_t>(file_size_, 1))));
  for (;;) {
    const ssize_t r = ::read(fd_, in_.data(), in_.size());
    if (r < 0 && errno == EINTR) continue;
    MT_CHECK(r >= 0, op_, "cannot read '", path_, "': ", std::strerror(errno));
    in_.resize(size_t(r));
    return r > 0;
  }
}

size_t GzReader::read(void* dst, size_t n) {
  char* out = static_cast<char*>(dst);
  return compressed_ ? read_gzip(out, n) : read_plain(out, n);
}

size_t GzReader::read_plain(char* dst, size_t n) {
  // What the constructor read to look for the gzip magic first, then straight from the file.
  const size_t take = std::min(n, in_.size() - plain_pos_);
  if (take) std::memcpy(dst, in_.data() + plain_pos_, take);
  plain_pos_ += take;
  size_t got = take;
  while (got < n) {
    const ssize_t r = ::read(fd_, dst + got, std::min<size_t>(n - got, size_t(1) << 30));
    if (r < 0 && errno == EINTR) continue;
    MT_CHECK(r >= 0, op_, "cannot read '", path_, "': ", std::strerror(errno));
    if (r == 0) break;
    got += size_t(r);
  }
  return got;
}

size_t GzReader::read_gzip(char* dst, size_t n) {
  z_stream* s = zs(stream_);
  size_t got = 0;
  while (got < n && !finished_) {
    if (s->avail_in == 0) {
      MT_CHECK(refill(), op_, "'", path_, "' is truncated: the gzip stream is cut short after ", produced_ + got,
               " decompressed bytes (no end-of-stream marker and trailer)");
      s->next_in = in_.data();
      s->avail_in = unsigned(in_.size());
    }
    // avail_out is an unsigned int: decompress in chunks below 2^31.
    const unsigned chunk = unsigned(std::min<size_t>(n - got, size_t(1) << 30));
    s->next_out = reinterpret_cast<unsigned char*>(dst + got);
    s->avail_out = chunk;
    const int rc = inflate(s, Z_NO_FLUSH);
    got += chunk - s->avail_out;
    if (rc == Z_STREAM_END) {
      // Another gzip member may follow (concatenated .gz files are valid); anything else is junk.
      // Its 2-byte magic may straddle two reads: keep the unread byte and append a refill.
      if (s->avail_in < 2) {
        const std::vector<unsigned char> rest(s->next_in, s->next_in + s->avail_in);
        if (refill()) {
          in_.insert(in_.begin(), rest.begin(), rest.end());
        } else {
          in_ = rest;
        }
        s->next_in = in_.data();
        s->avail_in = unsigned(in_.size());
      }
      if (s->avail_in == 0) {
        finished_ = true;
        break;
      }
      MT_CHECK(s->avail_in >= 2 && s->next_in[0] == 0x1f && s->next_in[1] == 0x8b, op_, "'", path_,
               "' has unexpected bytes after the end of its gzip stream (after ", produced_ + got,
               " decompressed bytes); the file is corrupt");
      MT_CHECK(inflateReset(s) == Z_OK, op_, "cannot decompress '", path_, "'");
      continue;
    }
    if (rc == Z_BUF_ERROR && s->avail_in == 0) continue;  // needs more input: refilled at the top
    MT_CHECK(rc == Z_OK, op_, "'", path_, "' holds corrupt gzip data after ", produced_ + got, " decompressed bytes: ",
             s->msg              ? s->msg
             : rc == Z_MEM_ERROR ? "out of memory"
                                 : "inflate failed");
  }
  produced_ += got;
  return got;
}

uint64_t max_decompressed_size(uint64_t file_size) {
  const uint64_t ratio_bound = file_size > (UINT64_MAX >> 8) ? UINT64_MAX : file_size << 8;
  return std::max<uint64_t>(ratio_bound, uint64_t(16) << 20);
}

}  // namespace mantissa::data::detail
