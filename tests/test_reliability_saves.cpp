// Saves that cannot be redirected or lost (docs/reliability.md "Saving"): the temporary file
// is created uniquely next to the destination and never through a planted link; a full disk
// or `ulimit -f` leaves the previous checkpoint and no temporary behind; temporaries of killed
// saves are removed by the next successful save, but not one a live writer holds.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "core/atomic_file.h"
#include "test_util.h"

namespace mt = mantissa;
namespace fs = std::filesystem;
using testing::HasSubstr;

namespace {

class Saves : public testing::Test {
 protected:
  void SetUp() override {
    const auto* info = testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("mantissa_saves_" + std::string(info->name()) + "_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::set<std::string> names() const {
    std::set<std::string> s;
    for (const auto& e : fs::directory_iterator(dir_)) s.insert(e.path().filename().string());
    return s;
  }
  static std::string read(const std::string& p) {
    std::ifstream f(p, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  static void write(const std::string& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }
  fs::path dir_;
};

const std::map<std::string, mt::Tensor> kSmall{{"w", mt::from_vector<float>({1, 2, 3})}};

}  // namespace

// A link planted at the temporary name older versions used (PATH.tmp), and one at a name of
// the new form: neither is followed, truncated nor removed; the victim keeps its bytes.
TEST_F(Saves, PlantedSymlinkAtTheTempPathIsNeverFollowed) {
  const std::string victim = path("victim.txt"), ckpt = path("ckpt.safetensors");
  write(victim, "precious");
  fs::create_symlink(victim, ckpt + ".tmp");
  fs::create_symlink(victim, ckpt + ".tmp.AAAAAA");
  mt::save_safetensors(ckpt, kSmall);
  mt::save_safetensors(ckpt, kSmall);
  EXPECT_EQ(read(victim), "precious");
  EXPECT_TRUE(fs::is_symlink(ckpt + ".tmp"));
  EXPECT_TRUE(fs::is_symlink(ckpt + ".tmp.AAAAAA"));
  EXPECT_EQ(mt::load_safetensors(ckpt).tensors.at("w").to_vector<float>(), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(names(), (std::set<std::string>{"victim.txt", "ckpt.safetensors", "ckpt.safetensors.tmp",
                                            "ckpt.safetensors.tmp.AAAAAA"}));
}

// Two writers of one path get two temporaries; each commit replaces the file whole.
TEST_F(Saves, ConcurrentWritersOfOnePathShareNoTemporary) {
  const std::string ckpt = path("ckpt.safetensors");
  mt::AtomicFile a("test", ckpt), b("test", ckpt);
  EXPECT_NE(a.temp_path(), b.temp_path());
  EXPECT_EQ(fs::path(a.temp_path()).parent_path(), dir_);
  a.write("first", 5);
  b.write("second", 6);
  a.commit();  // b's temporary is held (flock): the cleanup after a's commit leaves it
  EXPECT_TRUE(fs::exists(b.temp_path()));
  b.commit();
  EXPECT_EQ(read(ckpt), "second");
  EXPECT_EQ(names(), (std::set<std::string>{"ckpt.safetensors"}));
}

// Temporaries left by killed saves (no writer holds them) are removed by the next successful
// save of the same path; other files, and a temporary a live writer holds, are kept.
TEST_F(Saves, StaleTemporariesOfTheSamePathAreRemovedOnTheNextSave) {
  const std::string ckpt = path("ckpt.safetensors");
  for (const char* n : {"ckpt.safetensors.tmp.k1ll3d", "ckpt.safetensors.tmp.ZZZZZZ", "other.safetensors.tmp.k1ll3d",
                        "ckpt.safetensors.tmp.toolong", "ckpt.safetensors.tmp"})
    write(path(n), "partial");
  const std::string held = path("ckpt.safetensors.tmp.h0ld3n");
  write(held, "in progress");
  const int fd = ::open(held.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  mt::save_safetensors(ckpt, kSmall);
  ::close(fd);
  EXPECT_EQ(names(),
            (std::set<std::string>{"ckpt.safetensors", "other.safetensors.tmp.k1ll3d", "ckpt.safetensors.tmp.toolong",
                                   "ckpt.safetensors.tmp", "ckpt.safetensors.tmp.h0ld3n"}));
}

// `ulimit -f` (RLIMIT_FSIZE) during a save: an error naming the path and saying the previous
// checkpoint is unchanged (no SIGXFSZ death), the previous bytes intact, no temporary left.
TEST_F(Saves, FileSizeLimitDuringSaveKeepsThePreviousCheckpoint) {
  const std::string ckpt = path("ckpt.safetensors");
  mt::save_safetensors(ckpt, kSmall);
  const std::string before = read(ckpt);
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  if (old.rlim_max != RLIM_INFINITY && old.rlim_max < (1 << 20)) GTEST_SKIP() << "hard RLIMIT_FSIZE already tiny";
  rlimit low = old;
  low.rlim_cur = 64 * 1024;  // the soft limit only: raised back below
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &low), 0);
  std::string message;
  try {
    mt::save_safetensors(ckpt, {{"big", mt::zeros({1 << 18})}});  // 1 MiB of data
  } catch (const mt::Error& e) {
    message = e.what();
  }
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &old), 0);
  EXPECT_THAT(message, HasSubstr("save_safetensors"));
  EXPECT_THAT(message, HasSubstr("'" + ckpt + "'"));
  EXPECT_THAT(message, HasSubstr("unchanged"));
  EXPECT_THAT(message, HasSubstr(std::strerror(EFBIG)));
  EXPECT_EQ(read(ckpt), before);
  EXPECT_EQ(names(), (std::set<std::string>{"ckpt.safetensors"}));
}

// The same through a checkpoint: save_checkpoint goes through the one atomic writer.
TEST_F(Saves, CheckpointSaveUnderTheLimitFailsCleanly) {
  const std::string ckpt = path("run.safetensors");
  mt::nn::Linear net(256, 256);
  mt::optim::Checkpoint parts{.model = &net};
  mt::optim::save_checkpoint(ckpt, parts, {.epoch = 1, .extra = {}});
  const std::string before = read(ckpt);
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  rlimit low = old;
  low.rlim_cur = before.size() / 2;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &low), 0);
  std::string message;
  try {
    mt::optim::save_checkpoint(ckpt, parts, {.epoch = 2, .extra = {}});
  } catch (const mt::Error& e) {
    message = e.what();
  }
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &old), 0);
  EXPECT_THAT(message, HasSubstr("'" + ckpt + "'"));
  EXPECT_THAT(message, HasSubstr("unchanged"));
  EXPECT_EQ(read(ckpt), before);
  EXPECT_EQ(mt::optim::load_checkpoint(ckpt, parts).epoch, 1);
  EXPECT_EQ(names(), (std::set<std::string>{"run.safetensors"}));
}
