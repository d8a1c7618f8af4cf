#include "core/atomic_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <random>
#include <utility>

#include "core/error.h"

namespace mantissa {

namespace {

constexpr const char* kTempInfix = ".tmp.";
constexpr int kSuffixLen = 6;
constexpr char kSuffixChars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

std::string errno_text(int e) { return std::strerror(e); }

// A fresh suffix; not from the default generator, whose stream belongs to the user.
std::string random_suffix() {
  static std::atomic<uint64_t> counter{0};
  thread_local std::mt19937_64 rng(std::random_device{}() ^ (uint64_t(::getpid()) << 32));
  uint64_t v = rng() ^ counter.fetch_add(0x9e3779b97f4a7c15ULL);
  std::string s(kSuffixLen, 'x');
  for (char& c : s) {
    c = kSuffixChars[v % (sizeof kSuffixChars - 1)];
    v /= sizeof kSuffixChars - 1;
  }
  return s;
}

bool is_temp_of(const std::string& name, const std::string& base) {
  const std::string prefix = base + kTempInfix;
  if (name.size() != prefix.size() + kSuffixLen || name.compare(0, prefix.size(), prefix) != 0) return false;
  for (size_t i = prefix.size(); i < name.size(); ++i)
    if (!std::strchr(kSuffixChars, name[i])) return false;
  return true;
}

// Removes the regular files named like temporaries of `path` that no live writer holds
// (their writer's flock is gone with it). Best effort: a save has already succeeded.
void remove_stale_temps(const std::string& path, const std::string& keep) {
  const std::filesystem::path p(path);
  const std::string dir = p.parent_path().empty() ? "." : p.parent_path().string();
  const std::string base = p.filename().string();
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (!is_temp_of(name, base)) continue;
    std::string full = dir;
    full += '/';
    full += name;
    if (full == keep) continue;
    // O_NOFOLLOW | O_NONBLOCK: a planted link or FIFO is neither followed nor waited on.
    const int fd = ::open(full.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat st {};
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && ::flock(fd, LOCK_EX | LOCK_NB) == 0) ::unlink(full.c_str());
    ::close(fd);
  }
  ::closedir(d);
}

// SIGXFSZ's default action kills the process; ignored, an over-limit write fails with EFBIG.
void ignore_sigxfsz() {
  struct sigaction old {};
  if (::sigaction(SIGXFSZ, nullptr, &old) != 0 || (old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL) return;
  struct sigaction ign {};
  ign.sa_handler = SIG_IGN;
  sigemptyset(&ign.sa_mask);
  ::sigaction(SIGXFSZ, &ign, nullptr);
}

}  // namespace

AtomicFile::AtomicFile(const char* op, std::string path) : op_(op), path_(std::move(path)) {
  ignore_sigxfsz();
  for (int attempt = 0; attempt < 100; ++attempt) {
    tmp_ = path_ + kTempInfix + random_suffix();
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd_ >= 0 || errno != EEXIST) break;
  }
  if (fd_ < 0) {
    const std::string err = errno_text(errno);
    const std::string tried = std::exchange(tmp_, std::string());
    MT_FAIL(op_, "cannot create the temporary file '", tried, "' for '", path_, "': ", err, " (the previous '", path_,
            "', if any, is unchanged)");
  }
  // Marks the temporary as in use, so another save's cleanup leaves it alone.
  (void)::flock(fd_, LOCK_EX | LOCK_NB);
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
}

void AtomicFile::fail(const std::string& what) {
  const std::string err = errno_text(errno);
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
  const std::string tmp = std::exchange(tmp_, std::string());
  MT_FAIL(op_, what, " '", path_, "' (temporary '", tmp, "', removed): ", err, "; the previous '", path_,
          "', if any, is unchanged");
}

void AtomicFile::write(const void* data, size_t n) {
  MT_CHECK(fd_ >= 0 && !tmp_.empty(), op_, "internal: write to '", path_, "' after commit or failure");
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd_, p, std::min<size_t>(n, size_t(1) << 30));
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) fail("cannot write");
    if (w == 0) {
      errno = ENOSPC;  // a write that makes no progress: treat as a full device
      fail("cannot write");
    }
    p += w;
    n -= size_t(w);
  }
}

void AtomicFile::commit() {
  MT_CHECK(fd_ >= 0 && !tmp_.empty(), op_, "internal: commit of '", path_, "' twice or after failure");
  if (::fsync(fd_) != 0) fail("cannot sync");
  // Keep the flock until the rename: close() releases it.
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) fail("cannot rename the temporary file to");
  const std::string done = std::exchange(tmp_, std::string());
  // The data was synced before the rename: a close error now cannot lose it.
  (void)::close(std::exchange(fd_, -1));
  // Make the rename itself durable; best effort, the data is already safe on disk.
  const std::string dir = std::filesystem::path(path_).parent_path().string();
  const int d = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (d >= 0) {
    (void)::fsync(d);
    ::close(d);
  }
  remove_stale_temps(path_, done);
}

}  // namespace mantissa
