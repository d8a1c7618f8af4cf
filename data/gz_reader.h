// Internal: reads a file that may or may not be gzip-compressed, with errors that name
// the file. A .gz must be whole: its stream must reach its end-of-stream marker and
// trailer (CRC-32 and length checked), and nothing but further gzip members may follow.
// Not part of the public API (zlib stays a private dependency).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mantissa::data::detail {

// The most decompressed data a reader accepts from a .gz of `file_size` bytes: 256 times
// the file (real data sets compress 2-10x), at least 16 MiB. Deflate can expand 1032:1,
// so without this a 1 MB file could make a reader allocate a gigabyte (a decompression bomb).
uint64_t max_decompressed_size(uint64_t file_size);

class GzReader {
 public:
  // Opens `path` for reading (regular files only: a FIFO or device is rejected before it
  // is opened, so it cannot block); `op` names the caller in error messages ("read_idx").
  GzReader(std::string path, std::string op);
  ~GzReader();
  GzReader(const GzReader&) = delete;
  GzReader& operator=(const GzReader&) = delete;

  // Reads up to n bytes; returns how many were read, fewer only at the clean end of the
  // data. Throws mantissa::Error naming the file on corrupt gzip data (including a CRC or
  // length mismatch), on a gzip stream cut short, and on junk after the stream.
  size_t read(void* dst, size_t n);
  // True when the file is gzip-compressed (known once the file is open).
  bool compressed() const { return compressed_; }
  // Size of the file on disk (compressed size for .gz).
  uint64_t file_size() const { return file_size_; }
  const std::string& path() const { return path_; }

 private:
  // Refills the input buffer from the file; returns false at the end of the file.
  bool refill();
  size_t read_plain(char* dst, size_t n);
  size_t read_gzip(char* dst, size_t n);

  std::string path_, op_;
  int fd_ = -1;
  void* stream_ = nullptr;  // z_stream, when compressed
  uint64_t file_size_ = 0, produced_ = 0;
  size_t plain_pos_ = 0;  // bytes of in_ already returned (plain files)
  bool compressed_ = false, finished_ = false;
  std::vector<unsigned char> in_;
};

}  // namespace mantissa::data::detail
