// Writing a file so that readers see the previous content or the new one, never a mix.
//
//   mt::AtomicFile f("save_safetensors", "run.safetensors");
//   f.write(header.data(), header.size());   // ... as many writes as needed
//   f.commit();                              // fsync, rename over the path, sync the folder
//
// The data goes to a temporary file created next to `path` under a new unique name
// (PATH.tmp.XXXXXX, O_CREAT | O_EXCL | O_NOFOLLOW: a planted file or symbolic link is never
// opened, and two processes saving to one path never share a temporary). While it is
// written the temporary holds an exclusive flock; after a successful commit, temporaries of
// the same path that nobody holds (left by a killed save) are removed. Any failure (a full
// disk, RLIMIT_FSIZE, a failed rename) removes the temporary and throws mantissa::Error
// naming `op`, the path and the cause, adding that the previous file is unchanged; so does
// destroying an AtomicFile that was not committed. While a file is written, SIGXFSZ is
// ignored if it had its default action (which kills the process), so exceeding `ulimit -f`
// is an error, not a crash.
#pragma once
#include <cstddef>
#include <string>

namespace mantissa {

class AtomicFile {
 public:
  AtomicFile(const char* op, std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t n);
  void commit();
  const std::string& temp_path() const { return tmp_; }

 private:
  [[noreturn]] void fail(const std::string& what);

  const char* op_;
  std::string path_, tmp_;
  int fd_ = -1;
};

}  // namespace mantissa
