// The text side of the character-level GPT example: reading UTF-8 text (the default
// corpus is a fixed list of files from Debian's `fortunes` package), the character
// vocabulary, the train/validation split and the batches of random windows.
#pragma once
#include <mantissa.h>

#include <cstdint>
#include <string>
#include <vector>

namespace gpt_example {

// The default corpus: these files of /usr/share/games/fortunes, in this order.
extern const char* const kFortuneDir;
extern const std::vector<std::string> kFortuneFiles;

// Code points of a UTF-8 string; throws mantissa::Error naming the byte offset of the first
// malformed sequence.
std::vector<char32_t> decode_utf8(const std::string& bytes, const std::string& source);
std::string encode_utf8(char32_t c);

// The default corpus as one text: the files above with the "%" separator lines of the
// fortune format turned into blank lines. Throws naming any missing file.
std::string read_fortunes();
// A whole file; throws when it cannot be read.
std::string read_file(const std::string& path);

// The sorted set of characters of a text; ids are positions in it.
struct Vocab {
  std::vector<char32_t> chars;
  int64_t size() const { return int64_t(chars.size()); }
  int64_t id(char32_t c) const;  // -1 when absent
  // The vocabulary as UTF-8 (its characters in order), and back.
  std::string to_utf8() const;
  static Vocab from_text(const std::vector<char32_t>& text);
};

struct Corpus {
  Vocab vocab;
  std::vector<int64_t> train, val;  // token ids; val is the last 10 % of the text
};

// Splits `text` (the last val_fraction is validation) and checks that each part holds at
// least one window of context + 1 characters.
Corpus make_corpus(const std::vector<char32_t>& text, int64_t context, double val_fraction = 0.1);

// Inputs and next-character targets, int64 [batch, context] each.
struct Batch {
  mantissa::Tensor x, y;
};
// Rows first .. first + batch - 1 of training batch number `step`: window starts drawn from a
// hash of (seed, step, row), so the data position of a run is its step count (exact resume
// needs nothing else), and rank r of a data-parallel run takes rows r * batch onwards of the
// same global batch.
Batch train_batch(const std::vector<int64_t>& data, int64_t batch, int64_t context, uint64_t seed, int64_t step,
                  int64_t first = 0);
// Validation batch `index` of `count`: windows evenly spaced over the validation text.
Batch val_batch(const std::vector<int64_t>& data, int64_t batch, int64_t context, int64_t index, int64_t count);

}  // namespace gpt_example
