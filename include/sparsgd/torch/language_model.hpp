#pragma once
// The built-in word-level language model: an embedding, a stack of LSTM layers and a decoder to
// the vocabulary (Zaremba et al. 2014; PyTorch's word_language_model example; the gTop-k paper's
// LSTM-PTB and the rTop-k paper's PTB task), trained with truncated backpropagation through time.

#include <cstdint>
#include <memory>
#include <string>

#include <ATen/core/Generator.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/rnn.h>
#include <torch/types.h>

namespace sparsgd::torch_layer {

struct LstmShape {
  std::int64_t vocabulary = 0;
  std::int64_t hidden = 200;  // embedding and LSTM width
  std::int64_t layers = 2;
  bool tied = false;          // the decoder shares the embedding's weights (Press and Wolf 2017)
  double dropout = 0.0;       // on the embedding, between layers and before the decoder
};

// What one batch leaves for the next under truncated BPTT: the LSTM's (h, c), [layers, B, hidden]
// each. Undefined tensors mean zeros (the start of an epoch or of an evaluation).
struct RecurrentState {
  torch::Tensor h, c;
  bool defined() const { return h.defined(); }
};

// The trainable scalars a WordLstm of this shape holds, without building it: the memory check
// comes before any large allocation.
std::int64_t parameter_count(const LstmShape& shape);

class WordLstm final : public torch::nn::Module {
 public:
  // Throws InvalidArgument for a vocabulary under 2, a width or layer count under 1, or a dropout
  // outside [0, 1).
  explicit WordLstm(const LstmShape& shape);

  // tokens [B, T] int64 -> logits [B, T, vocabulary]; `state` is read (zeros when undefined) and
  // replaced by the state after the last token, detached from the graph so that the next segment's
  // backward stops here. Dropout masks come from `generator` (a worker's own, so that in-process
  // workers draw reproducibly); it is used only in training mode with dropout > 0.
  torch::Tensor forward(const torch::Tensor& tokens, RecurrentState& state, at::Generator* generator = nullptr);

  const LstmShape& shape() const { return shape_; }

 private:
  torch::Tensor dropout(const torch::Tensor& x, at::Generator* generator);

  LstmShape shape_;
  torch::nn::Embedding embedding_{nullptr};
  torch::nn::LSTM lstm_{nullptr};
  torch::Tensor decoder_weight_, decoder_bias_;
};

}  // namespace sparsgd::torch_layer
