#include "sparsgd/torch/flat_parameters.hpp"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "sparsgd/core/error.hpp"
#include "sparsgd/torch/models.hpp"

namespace {

using sparsgd::torch_layer::FlatParameters;
using sparsgd::torch_layer::make_model;
using sparsgd::torch_layer::parameter_count;

// Three parameters of different ranks: 12 + 5 + 8 = 25 scalars.
std::vector<torch::Tensor> small_parameters() {
  return {torch::randn({3, 4}).requires_grad_(), torch::randn({5}).requires_grad_(),
          torch::randn({2, 2, 2}).requires_grad_()};
}

std::vector<float> iota(std::size_t n, float start) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

// The slice of `flat` that belongs to parameter i, shaped like it.
torch::Tensor slice_of(std::vector<float>& flat, const FlatParameters& fp, std::size_t i, const torch::Tensor& like) {
  return torch::from_blob(flat.data() + fp.layer_ranges()[i].first, like.sizes(), torch::kFloat32);
}

TEST(FlatParameters, RangesCoverTheBufferInParameterOrder) {
  for (const std::string name : {"mlp", "cnn", "resnet20"}) {  // the 28x28 models
    auto model = make_model(name);
    const auto params = model->parameters();
    FlatParameters fp(params);
    ASSERT_EQ(fp.layer_ranges().size(), params.size()) << name;
    EXPECT_EQ(fp.size(), static_cast<std::size_t>(parameter_count(*model))) << name;
    std::size_t expected_begin = 0;
    for (std::size_t i = 0; i < params.size(); ++i) {
      const auto [begin, end] = fp.layer_ranges()[i];
      EXPECT_EQ(begin, expected_begin) << name << " parameter " << i;
      EXPECT_EQ(end - begin, static_cast<std::size_t>(params[i].numel())) << name << " parameter " << i;
      expected_begin = end;
    }
    EXPECT_EQ(expected_begin, fp.size()) << name;
  }
}

TEST(FlatParameters, GatherGradientsConcatenatesBackwardResults) {
  torch::manual_seed(5);
  auto model = make_model("mlp");
  torch::nn::functional::cross_entropy(model->forward(torch::randn({3, 1, 28, 28})),
                                       torch::tensor({1, 2, 3}, torch::kInt64))
      .backward();
  const auto params = model->parameters();
  FlatParameters fp(params);
  std::vector<float> flat(fp.size(), std::numeric_limits<float>::quiet_NaN());
  fp.gather_gradients(flat);

  std::vector<torch::Tensor> pieces;
  for (const auto& p : params) pieces.push_back(p.grad().flatten());
  const auto expected = torch::cat(pieces);
  EXPECT_TRUE(torch::equal(torch::from_blob(flat.data(), {static_cast<std::int64_t>(flat.size())}), expected));
}

TEST(FlatParameters, ScatterThenGatherGradientsRoundTrips) {
  torch::manual_seed(6);
  auto params = small_parameters();
  params[1].mutable_grad() = torch::full({5}, 42.0f);  // overwritten, not accumulated into
  FlatParameters fp(params);
  const auto in = iota(fp.size(), 1.0f);
  fp.scatter_gradients(in);

  for (std::size_t i = 0; i < params.size(); ++i) {
    const auto& g = params[i].grad();
    ASSERT_TRUE(g.defined()) << "parameter " << i;  // defined where it was undefined
    EXPECT_EQ(g.sizes(), params[i].sizes());
    auto copy = in;
    EXPECT_TRUE(torch::equal(g, slice_of(copy, fp, i, params[i]))) << "parameter " << i;
  }
  std::vector<float> out(fp.size(), -1.0f);
  fp.gather_gradients(out);
  EXPECT_EQ(out, in);
}

TEST(FlatParameters, UndefinedGradientsGatherAsZeros) {
  torch::manual_seed(7);
  auto params = small_parameters();
  params[1].mutable_grad() = torch::full({5}, 2.5f);
  FlatParameters fp(params);
  std::vector<float> out(fp.size(), std::numeric_limits<float>::quiet_NaN());
  fp.gather_gradients(out);
  for (std::size_t i = 0; i < params.size(); ++i) {
    const auto [begin, end] = fp.layer_ranges()[i];
    const float expected = (i == 1) ? 2.5f : 0.0f;
    for (std::size_t j = begin; j < end; ++j) EXPECT_EQ(out[j], expected) << "parameter " << i << " entry " << j;
  }
}

TEST(FlatParameters, NonContiguousGradientsAreCopiedByValue) {
  auto p = torch::zeros({3, 4}).requires_grad_();
  p.mutable_grad() = torch::arange(12, torch::kFloat32).reshape({4, 3}).t();  // [3, 4], transposed strides
  ASSERT_FALSE(p.grad().is_contiguous());
  FlatParameters fp(std::vector<torch::Tensor>{p});
  std::vector<float> out(12);
  fp.gather_gradients(out);
  const auto expected = p.grad().contiguous();
  EXPECT_TRUE(torch::equal(torch::from_blob(out.data(), {3, 4}), expected));

  fp.scatter_gradients(iota(12, 100.0f));
  EXPECT_TRUE(torch::equal(p.grad(), torch::arange(100, 112, torch::kFloat32).reshape({3, 4})));
}

TEST(FlatParameters, ValuesRoundTrip) {
  torch::manual_seed(8);
  auto params = small_parameters();
  FlatParameters fp(params);
  std::vector<float> out(fp.size());
  fp.gather_values(out);
  std::vector<torch::Tensor> pieces;
  for (const auto& p : params) pieces.push_back(p.detach().flatten());
  EXPECT_TRUE(torch::equal(torch::from_blob(out.data(), {25}), torch::cat(pieces)));

  const auto in = iota(fp.size(), -10.0f);
  fp.scatter_values(in);
  fp.gather_values(out);
  EXPECT_EQ(out, in);
  for (const auto& p : params) {
    EXPECT_TRUE(p.is_leaf());
    EXPECT_TRUE(p.requires_grad());
    EXPECT_FALSE(p.grad_fn());
  }
}

// What broadcasting the initial parameters relies on: after scatter_values, a model built from
// another seed computes exactly what the source model computes.
TEST(FlatParameters, ScatterValuesMakesModelsIdentical) {
  for (const std::string name : {"mlp", "cnn", "resnet20"}) {  // the 28x28 models
    torch::manual_seed(1);
    auto source = make_model(name);
    torch::manual_seed(2);
    auto target = make_model(name);
    source->eval();
    target->eval();
    const auto x = torch::randn({2, 1, 28, 28});
    ASSERT_FALSE(torch::equal(source->forward(x), target->forward(x))) << name;

    FlatParameters from(source->parameters());
    FlatParameters to(target->parameters());
    std::vector<float> flat(from.size());
    from.gather_values(flat);
    to.scatter_values(flat);
    EXPECT_TRUE(torch::equal(source->forward(x), target->forward(x))) << name;

    // The copied parameters still train: backward through them works and reaches them.
    target->train();
    target->forward(x).sum().backward();
    for (const auto& p : target->parameters()) EXPECT_TRUE(p.grad().defined()) << name;
  }
}

// scatter_values goes through the version counter, so a graph that saved the old values cannot
// silently produce gradients for values that are no longer there.
TEST(FlatParameters, ScatterValuesInvalidatesPendingGraphs) {
  torch::manual_seed(9);
  auto model = make_model("mlp");
  FlatParameters fp(model->parameters());
  const auto loss = model->forward(torch::randn({2, 1, 28, 28})).sum();
  fp.scatter_values(std::vector<float>(fp.size(), 0.5f));
  EXPECT_THROW(loss.backward(), c10::Error);
}

TEST(FlatParameters, SizeMismatchThrows) {
  auto params = small_parameters();
  FlatParameters fp(params);
  ASSERT_EQ(fp.size(), 25u);
  for (const std::size_t n : {std::size_t{24}, std::size_t{26}, std::size_t{0}}) {
    std::vector<float> buf(n);
    EXPECT_THROW(fp.gather_gradients(buf), sparsgd::InvalidArgument) << n;
    EXPECT_THROW(fp.scatter_gradients(buf), sparsgd::InvalidArgument) << n;
    EXPECT_THROW(fp.gather_values(buf), sparsgd::InvalidArgument) << n;
    EXPECT_THROW(fp.scatter_values(buf), sparsgd::InvalidArgument) << n;
  }
}

TEST(FlatParameters, RejectsParametersItCannotCopyFlat) {
  const auto expect_rejected = [](std::vector<torch::Tensor> params, const std::string& why) {
    try {
      FlatParameters fp(std::move(params));
      ADD_FAILURE() << "expected sparsgd::InvalidArgument: " << why;
    } catch (const sparsgd::InvalidArgument& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("parameter 1 of 2"), std::string::npos) << msg;
      EXPECT_NE(msg.find(why), std::string::npos) << msg;
    }
  };
  const auto ok = torch::zeros({4});
  expect_rejected({ok, torch::zeros({4}, torch::kFloat64)}, "must be float32");
  expect_rejected({ok, torch::zeros({3, 4}).t()}, "must be contiguous");
  expect_rejected({ok, torch::Tensor()}, "undefined");

  // A gradient of the wrong type is reported when it is read.
  auto p = torch::zeros({4}).requires_grad_();
  FlatParameters fp(std::vector<torch::Tensor>{ok, p});
  p.mutable_grad() = torch::zeros({4}, torch::kFloat64);
  std::vector<float> out(8);
  EXPECT_THROW(fp.gather_gradients(out), sparsgd::InvalidArgument);
}

TEST(FlatParameters, EmptyListIsAnEmptyBuffer) {
  FlatParameters fp(std::vector<torch::Tensor>{});
  EXPECT_EQ(fp.size(), 0u);
  EXPECT_TRUE(fp.layer_ranges().empty());
  std::vector<float> none;
  fp.gather_gradients(none);
  fp.scatter_values(none);
  std::vector<float> one(1);
  EXPECT_THROW(fp.gather_values(one), sparsgd::InvalidArgument);
}

}  // namespace
