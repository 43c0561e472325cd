#include "sparsgd/torch/language_model.hpp"

#include <torch/torch.h>

#include "sparsgd/core/error.hpp"

namespace sparsgd::torch_layer {

std::int64_t parameter_count(const LstmShape& s) {
  // The embedding; each layer's input and recurrent weights (4 gates) and their two biases; the
  // decoder's weight (unless tied to the embedding) and bias.
  const std::int64_t layer = 8 * s.hidden * s.hidden + 8 * s.hidden;
  return s.vocabulary * s.hidden + s.layers * layer + (s.tied ? 0 : s.vocabulary * s.hidden) + s.vocabulary;
}

WordLstm::WordLstm(const LstmShape& shape) : shape_(shape) {
  SPARSGD_ENFORCE(shape.vocabulary >= 2, "the language model needs a vocabulary of at least 2 words, got "
                                             << shape.vocabulary);
  SPARSGD_ENFORCE(shape.hidden >= 1 && shape.hidden <= 65536, "--hidden-size must be in [1, 65536], got " << shape.hidden);
  SPARSGD_ENFORCE(shape.layers >= 1, "the LSTM needs at least one layer");
  SPARSGD_ENFORCE(shape.dropout >= 0.0 && shape.dropout < 1.0, "--dropout must be in [0, 1), got " << shape.dropout);
  embedding_ = register_module("embedding", torch::nn::Embedding(shape.vocabulary, shape.hidden));
  // Dropout between layers is applied here rather than by torch::nn::LSTM, whose masks would come
  // from the process-wide generator that in-process workers share.
  lstm_ = register_module("lstm", torch::nn::LSTM(torch::nn::LSTMOptions(shape.hidden, shape.hidden)
                                                      .num_layers(shape.layers)
                                                      .batch_first(true)));
  // As in Zaremba et al. and PyTorch's example: embedding and decoder uniform in [-0.1, 0.1]. Tied,
  // the decoder uses the embedding's tensor, which stays one parameter (one gradient, one entry in
  // the exchange).
  torch::NoGradGuard no_grad;
  embedding_->weight.uniform_(-0.1, 0.1);
  if (!shape.tied) {
    decoder_weight_ = register_parameter("decoder_weight", torch::empty({shape.vocabulary, shape.hidden}).uniform_(-0.1, 0.1));
  }
  decoder_bias_ = register_parameter("decoder_bias", torch::zeros({shape.vocabulary}));
}

torch::Tensor WordLstm::dropout(const torch::Tensor& x, at::Generator* generator) {
  if (!is_training() || shape_.dropout == 0.0) return x;
  const double keep = 1.0 - shape_.dropout;
  auto mask = torch::empty_like(x).bernoulli_(keep, generator ? c10::optional<at::Generator>(*generator) : c10::nullopt);
  return x * mask / keep;
}

torch::Tensor WordLstm::forward(const torch::Tensor& tokens, RecurrentState& state, at::Generator* generator) {
  const std::int64_t batch = tokens.size(0);
  if (!state.defined()) {
    state.h = torch::zeros({shape_.layers, batch, shape_.hidden});
    state.c = torch::zeros({shape_.layers, batch, shape_.hidden});
  }
  auto x = dropout(embedding_->forward(tokens), generator);
  // Layer by layer, so that dropout between layers draws from the worker's generator.
  std::vector<torch::Tensor> hs, cs;
  const auto& weights = lstm_->all_weights();
  for (std::int64_t layer = 0; layer < shape_.layers; ++layer) {
    const auto at = static_cast<std::size_t>(4 * layer);
    const std::vector<torch::Tensor> params{weights[at], weights[at + 1], weights[at + 2], weights[at + 3]};
    auto [out, hl, cl] = torch::lstm(x, {state.h[layer].unsqueeze(0), state.c[layer].unsqueeze(0)}, params,
                                     /*has_biases=*/true, /*num_layers=*/1, /*dropout=*/0.0,
                                     /*train=*/is_training(), /*bidirectional=*/false, /*batch_first=*/true);
    x = dropout(out, generator);
    hs.push_back(hl);
    cs.push_back(cl);
  }
  const auto h = torch::cat(hs, 0);
  const auto c = torch::cat(cs, 0);
  state.h = h.detach();
  state.c = c.detach();
  return torch::linear(x, shape_.tied ? embedding_->weight : decoder_weight_, decoder_bias_);
}

}  // namespace sparsgd::torch_layer
