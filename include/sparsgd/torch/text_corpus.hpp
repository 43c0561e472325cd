#pragma once
// A word-level corpus in the layout of the Penn Treebank as language-modelling work uses it
// (Mikolov's PTB: train.txt, valid.txt, test.txt, one sentence a line, words separated by spaces):
// each line's words followed by an end-of-sentence token, as ids into a vocabulary built from the
// training text. Torch-free.

#include <cstdint>
#include <string>
#include <vector>

namespace sparsgd::torch_layer {

inline constexpr const char* kEndOfSentence = "<eos>";
inline constexpr const char* kUnknownWord = "<unk>";

struct TextCorpus {
  std::vector<std::string> vocabulary;  // id -> word: <eos> first, then train.txt's words in order of appearance
  std::vector<std::int64_t> train, valid, test;
};

// Reads DIR/train.txt, DIR/valid.txt and DIR/test.txt. Words of valid.txt or test.txt that the
// training text lacks become <unk> (added to the vocabulary if train.txt has none). A missing file
// throws InvalidArgument naming it; a file that is not text (a NUL byte), or a training text with
// fewer than 2 tokens, throws InvalidData naming the file.
TextCorpus load_text_corpus(const std::string& dir);

}  // namespace sparsgd::torch_layer
