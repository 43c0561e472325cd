// Links the installed library and runs one compression step with error feedback.
#include <cstdio>
#include <vector>

#include <sparsgd/compress/compressor.hpp>
#include <sparsgd/compress/error_feedback.hpp>
#include <sparsgd/core/density.hpp>

int main() {
  const std::size_t n = 1000;
  std::vector<float> gradient(n);
  for (std::size_t i = 0; i < n; ++i) gradient[i] = static_cast<float>(i % 17) - 8.0f;
  sparsgd::compress::ErrorFeedback feedback(n);
  auto compressor = sparsgd::compress::make_compressor({.name = "topk"});
  sparsgd::SparseVector sent;
  auto acc = feedback.accumulate(gradient);
  compressor->compress(acc, sparsgd::k_from_density(n, 0.01), {.iteration = 0}, sent);
  feedback.commit(sent);
  std::printf("selected %zu of %zu\n", sent.size(), n);
  return sent.size() == 10 ? 0 : 1;
}
