#include "sparsgd/torch/text_corpus.hpp"

#include <filesystem>
#include <sstream>
#include <unordered_map>

#include "sparsgd/core/error.hpp"
#include "sparsgd/core/file_io.hpp"

namespace sparsgd::torch_layer {
namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    throw InvalidArgument("text corpus file " + path.string() +
                          " not found: --task lm reads train.txt, valid.txt and test.txt (one sentence a line, words "
                          "separated by spaces, as in the Penn Treebank's ptb.*.txt) from --data DIR");
  }
  // Far above any corpus this model trains on (the Penn Treebank's train.txt is 5 MB).
  std::string text = read_regular_file(path, std::uint64_t{4} << 30, "text corpus file");
  if (const auto nul = text.find('\0'); nul != std::string::npos) {
    throw InvalidData("text corpus file " + path.string() + " is not text (a NUL byte at offset " + std::to_string(nul) +
                      ")");
  }
  return text;
}

class Vocabulary {
 public:
  std::int64_t add(const std::string& word) {
    const auto [it, inserted] = ids_.try_emplace(word, static_cast<std::int64_t>(words_.size()));
    if (inserted) words_.push_back(word);
    return it->second;
  }
  std::int64_t find(const std::string& word) const {
    const auto it = ids_.find(word);
    return it == ids_.end() ? -1 : it->second;
  }
  std::vector<std::string>& words() { return words_; }

 private:
  std::unordered_map<std::string, std::int64_t> ids_;
  std::vector<std::string> words_;
};

// Calls `token(word)` for each word of each line, then for the end of the sentence.
template <typename Token>
void for_each_token(const std::string& text, Token&& token) {
  std::istringstream lines(text);
  std::string line, word;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    while (words >> word) token(word);
    token(std::string(kEndOfSentence));
  }
}

}  // namespace

TextCorpus load_text_corpus(const std::string& dir) {
  const fs::path root(dir);
  // All three read (and so checked to exist) before any is parsed.
  const std::string train_text = read_text(root / "train.txt");
  const std::string valid_text = read_text(root / "valid.txt");
  const std::string test_text = read_text(root / "test.txt");
  Vocabulary vocabulary;
  vocabulary.add(kEndOfSentence);
  TextCorpus corpus;
  for_each_token(train_text, [&](const std::string& w) { corpus.train.push_back(vocabulary.add(w)); });
  if (corpus.train.size() < 2) {
    throw InvalidData("text corpus file " + (root / "train.txt").string() + " holds " +
                      std::to_string(corpus.train.size()) + " tokens; a language model needs at least 2");
  }
  std::int64_t unknown = vocabulary.find(kUnknownWord);
  auto lookup = [&](const std::string& w) {
    std::int64_t id = vocabulary.find(w);
    if (id < 0) {
      if (unknown < 0) unknown = vocabulary.add(kUnknownWord);
      id = unknown;
    }
    return id;
  };
  for_each_token(valid_text, [&](const std::string& w) { corpus.valid.push_back(lookup(w)); });
  for_each_token(test_text, [&](const std::string& w) { corpus.test.push_back(lookup(w)); });
  corpus.vocabulary = std::move(vocabulary.words());
  return corpus;
}

}  // namespace sparsgd::torch_layer
