// Internal: reads a file that may or may not be gzip-compressed (zlib reads plain
// files through the same calls), with errors that name the file. Not part of the
// public API (zlib stays a private dependency).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace mantissa::data::detail {

class GzReader {
 public:
  // Opens `path` for reading; `op` names the caller in error messages ("read_idx").
  GzReader(std::string path, std::string op);
  ~GzReader();
  GzReader(const GzReader&) = delete;
  GzReader& operator=(const GzReader&) = delete;

  // Reads up to n bytes; returns how many were read (fewer only at the end of the
  // data, including a gzip stream that ends early). Throws on a corrupt stream.
  size_t read(void* dst, size_t n);
  // True when the file is gzip-compressed (valid after the first read).
  bool compressed() const;
  // Size of the file on disk (compressed size for .gz).
  uint64_t file_size() const { return file_size_; }
  // True when the gzip stream ended before its trailer (a truncated .gz file).
  bool stream_truncated() const { return truncated_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_, op_;
  void* file_ = nullptr;  // gzFile
  uint64_t file_size_ = 0;
  bool truncated_ = false;
};

}  // namespace mantissa::data::detail
