#include "corpus.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace mt = mantissa;

namespace gpt_example {

const char* const kFortuneDir = "/usr/share/games/fortunes";
const std::vector<std::string> kFortuneFiles = {"fortunes", "literature", "riddles", "humorists", "wisdom", "science",
                                                "work",     "education",  "food",    "love",      "kids",   "law"};

std::vector<char32_t> decode_utf8(const std::string& s, const std::string& source) {
  std::vector<char32_t> out;
  out.reserve(s.size());
  size_t i = 0;
  auto bad = [&](const char* why) { MT_FAIL("text", source, " is not valid UTF-8: ", why, " at byte ", i); };
  while (i < s.size()) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    int len = b0 < 0x80 ? 1 : (b0 >> 5) == 0x6 ? 2 : (b0 >> 4) == 0xE ? 3 : (b0 >> 3) == 0x1E ? 4 : 0;
    if (len == 0) bad("an invalid leading byte");
    if (i + size_t(len) > s.size()) bad("a truncated sequence");
    char32_t c = len == 1 ? b0 : len == 2 ? (b0 & 0x1F) : len == 3 ? (b0 & 0x0F) : (b0 & 0x07);
    for (int k = 1; k < len; ++k) {
      const auto b = static_cast<unsigned char>(s[i + size_t(k)]);
      if ((b >> 6) != 0x2) bad("a missing continuation byte");
      c = (c << 6) | (b & 0x3F);
    }
    const char32_t min_for_len[] = {0, 0, 0x80, 0x800, 0x10000};
    if (c < min_for_len[len]) bad("an overlong encoding");
    if (c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) bad("a code point outside Unicode");
    out.push_back(c);
    i += size_t(len);
  }
  return out;
}

std::string encode_utf8(char32_t c) {
  std::string s;
  if (c < 0x80) {
    s += char(c);
  } else if (c < 0x800) {
    s += char(0xC0 | (c >> 6));
    s += char(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    s += char(0xE0 | (c >> 12));
    s += char(0x80 | ((c >> 6) & 0x3F));
    s += char(0x80 | (c & 0x3F));
  } else {
    s += char(0xF0 | (c >> 18));
    s += char(0x80 | ((c >> 12) & 0x3F));
    s += char(0x80 | ((c >> 6) & 0x3F));
    s += char(0x80 | (c & 0x3F));
  }
  return s;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  MT_CHECK(f.good(), "text", "cannot open ", path);
  std::ostringstream os;
  os << f.rdbuf();
  MT_CHECK(!f.bad(), "text", "error while reading ", path);
  return os.str();
}

std::string read_fortunes() {
  std::string text;
  for (const std::string& name : kFortuneFiles) {
    const std::string path = std::string(kFortuneDir) + "/" + name;
    MT_CHECK(std::filesystem::exists(path), "text", "the default corpus file ", path,
             " is missing: install the Debian package `fortunes` (apt-get install fortunes), or pass --text FILE");
    std::istringstream in(read_file(path));
    std::string line;
    while (std::getline(in, line)) text += (line == "%" ? "" : line) + "\n";
  }
  return text;
}

int64_t Vocab::id(char32_t c) const {
  auto it = std::lower_bound(chars.begin(), chars.end(), c);
  return it != chars.end() && *it == c ? int64_t(it - chars.begin()) : -1;
}

std::string Vocab::to_utf8() const {
  std::string s;
  for (char32_t c : chars) s += encode_utf8(c);
  return s;
}

Vocab Vocab::from_text(const std::vector<char32_t>& text) {
  Vocab v{text};
  std::sort(v.chars.begin(), v.chars.end());
  v.chars.erase(std::unique(v.chars.begin(), v.chars.end()), v.chars.end());
  return v;
}

Corpus make_corpus(const std::vector<char32_t>& text, int64_t context, double val_fraction) {
  MT_CHECK(!text.empty(), "text", "the text is empty");
  const auto n = int64_t(text.size());
  const int64_t n_val = int64_t(double(n) * val_fraction), n_train = n - n_val;
  MT_CHECK(n_train > context + 1 && n_val > context + 1, "text", "the text has ", n, " characters: its ", n_train,
           "-character training part and ", n_val, "-character validation part (the last ", int(val_fraction * 100),
           " %) must each be longer than the context + 1 (", context + 1,
           "); use a longer text or a smaller --context");
  Corpus c;
  c.vocab = Vocab::from_text(text);
  std::vector<int64_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) ids[i] = c.vocab.id(text[i]);
  c.train.assign(ids.begin(), ids.begin() + n_train);
  c.val.assign(ids.begin() + n_train, ids.end());
  return c;
}

namespace {

// SplitMix64: a well-mixed 64-bit hash of a counter.
uint64_t mix(uint64_t z) {
  z += 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

Batch windows(const std::vector<int64_t>& data, int64_t batch, int64_t context, auto start_of) {
  std::vector<int64_t> x(size_t(batch * context)), y(size_t(batch * context));
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t s = start_of(b);
    std::copy_n(data.begin() + s, context, x.begin() + b * context);
    std::copy_n(data.begin() + s + 1, context, y.begin() + b * context);
  }
  return {mt::from_vector(x, {batch, context}), mt::from_vector(y, {batch, context})};
}

}  // namespace

Batch train_batch(const std::vector<int64_t>& data, int64_t batch, int64_t context, uint64_t seed, int64_t step,
                  int64_t first) {
  const auto starts = uint64_t(int64_t(data.size()) - context);  // windows [s, s + context] fit
  return windows(data, batch, context, [&](int64_t b) {
    return int64_t(mix(mix(mix(seed) ^ uint64_t(step)) ^ uint64_t(first + b)) % starts);
  });
}

Batch val_batch(const std::vector<int64_t>& data, int64_t batch, int64_t context, int64_t index, int64_t count) {
  const int64_t starts = int64_t(data.size()) - context, total = batch * count;
  return windows(data, batch, context, [&](int64_t b) { return (index * batch + b) * starts / total; });
}

}  // namespace gpt_example
