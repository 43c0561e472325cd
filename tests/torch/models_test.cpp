#include "sparsgd/torch/models.hpp"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

#include "sparsgd/core/error.hpp"
#include "sparsgd/torch/language_model.hpp"

namespace {

using sparsgd::torch_layer::make_model;
using sparsgd::torch_layer::model_names;
using sparsgd::torch_layer::LstmShape;
using sparsgd::torch_layer::parameter_count;
using sparsgd::torch_layer::WordLstm;

TEST(Models, NamesAreStable) {
  EXPECT_EQ(model_names(), (std::vector<std::string>{"mlp", "cnn", "resnet20", "vgg16"}));
}

TEST(Models, UnknownNameListsTheValidOnes) {
  try {
    make_model("vgg19");
    FAIL() << "expected sparsgd::InvalidArgument";
  } catch (const sparsgd::InvalidArgument& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("'vgg19'"), std::string::npos) << msg;
    for (const auto& name : model_names()) EXPECT_NE(msg.find(name), std::string::npos) << msg;
  }
  EXPECT_THROW(make_model(""), sparsgd::InvalidArgument);
  EXPECT_THROW(make_model("MLP"), sparsgd::InvalidArgument);
}

class ModelTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ModelTest, LogitsHaveShapeBatchByTen) {
  torch::manual_seed(0);
  auto model = make_model(GetParam());
  for (const bool training : {true, false}) {
    model->train(training);
    for (const std::int64_t batch : {1, 5}) {
      const auto out = model->forward(torch::randn({batch, 1, 28, 28}));
      EXPECT_EQ(out.sizes(), (std::vector<std::int64_t>{batch, 10})) << "training=" << training;
      EXPECT_EQ(out.scalar_type(), torch::kFloat32);
      EXPECT_TRUE(torch::isfinite(out).all().item<bool>());
    }
  }
}

// Exact counts pin the architectures that docs/DESIGN.md and the experiments describe:
//   mlp:  784*256+256 + 256*128+128 + 128*10+10 = 235,146
//   cnn:  (25*32+32) + (32*25*64+64) + (3136*128+128) + (128*10+10) = 454,922
//   resnet20: CIFAR ResNet-20 (269,722, "0.27M") less the 2*16*9 weights of the two input
//   channels a grayscale image lacks = 269,434.
TEST_P(ModelTest, ParameterCount) {
  const std::map<std::string, std::int64_t> expected{{"mlp", 235146}, {"cnn", 454922}, {"resnet20", 269434}};
  auto model = make_model(GetParam());
  const std::int64_t count = parameter_count(*model);
  EXPECT_EQ(count, expected.at(GetParam()));

  // Frozen parameters are not trainable and are not counted.
  auto params = model->parameters();
  ASSERT_FALSE(params.empty());
  params.front().set_requires_grad(false);
  EXPECT_EQ(parameter_count(*model), count - params.front().numel());
}

// The memory check counts a language model's parameters from its shape, before building it: the
// count must be the built model's, for every shape.
TEST(Models, LanguageModelParameterCountFromItsShapeIsTheBuiltModels) {
  for (const std::int64_t vocabulary : {2, 13, 1000}) {
    for (const std::int64_t hidden : {1, 7, 64}) {
      for (const std::int64_t layers : {1, 2, 3}) {
        for (const bool tied : {false, true}) {
          const LstmShape shape{vocabulary, hidden, layers, tied, 0.0};
          WordLstm model(shape);
          EXPECT_EQ(parameter_count(shape), parameter_count(model))
              << "vocabulary " << vocabulary << ", hidden " << hidden << ", layers " << layers << ", tied " << tied;
        }
      }
    }
  }
  // The largest --hidden-size is counted without being allocated: 2 layers of 8 x 65536^2.
  EXPECT_EQ(parameter_count(LstmShape{10, 65536, 2, false, 0.0}),
            2 * (8LL * 65536 * 65536 + 8 * 65536) + 2 * 10 * 65536 + 10);
}

TEST_P(ModelTest, SameSeedSameInitialization) {
  torch::manual_seed(7);
  auto a = make_model(GetParam());
  torch::manual_seed(7);
  auto b = make_model(GetParam());
  torch::manual_seed(8);
  auto c = make_model(GetParam());

  const auto pa = a->named_parameters();
  const auto pb = b->named_parameters();
  const auto pc = c->named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  bool any_differs_with_other_seed = false;
  for (const auto& item : pa) {
    EXPECT_TRUE(torch::equal(item.value(), pb[item.key()])) << item.key();
    any_differs_with_other_seed |= !torch::equal(item.value(), pc[item.key()]);
  }
  EXPECT_TRUE(any_differs_with_other_seed);
}

TEST_P(ModelTest, BackwardReachesEveryParameter) {
  torch::manual_seed(1);
  auto model = make_model(GetParam());
  model->train();
  const auto x = torch::randn({5, 1, 28, 28});
  const auto y = torch::tensor({0, 3, 9, 3, 7}, torch::kInt64);
  torch::nn::functional::cross_entropy(model->forward(x), y).backward();
  for (const auto& item : model->named_parameters()) {
    const auto& g = item.value().grad();
    ASSERT_TRUE(g.defined()) << item.key();
    EXPECT_EQ(g.sizes(), item.value().sizes()) << item.key();
    EXPECT_TRUE(torch::isfinite(g).all().item<bool>()) << item.key();
    EXPECT_GT(g.abs().sum().item<float>(), 0.0f) << item.key();
  }
}

INSTANTIATE_TEST_SUITE_P(AllModels, ModelTest, ::testing::Values("mlp", "cnn", "resnet20"),
                         [](const auto& info) { return info.param; });

// The gTop-k paper's CIFAR-10 networks at their published sizes: ResNet-20 0.27M, VGG-16 about 15M.
//   vgg16: 13 convolutions with bias (14,714,688) + their batch norms (2 x 4,224) + fc 512*10+10.
TEST(Models, CifarNetworksHaveThePapersSizesAndShapes) {
  using sparsgd::torch_layer::kCifar10Shape;
  const std::map<std::string, std::int64_t> expected{{"resnet20", 269722}, {"vgg16", 14728266}};
  for (const auto& [name, count] : expected) {
    torch::manual_seed(0);
    auto model = make_model(name, kCifar10Shape);
    EXPECT_EQ(parameter_count(*model), count) << name;
    model->train();
    const auto x = torch::randn({3, 3, 32, 32});
    const auto out = model->forward(x);
    EXPECT_EQ(out.sizes(), (std::vector<std::int64_t>{3, 10})) << name;
    torch::nn::functional::cross_entropy(out, torch::tensor({1, 4, 9}, torch::kInt64)).backward();
    for (const auto& item : model->named_parameters()) {
      ASSERT_TRUE(item.value().grad().defined()) << name << " " << item.key();
      EXPECT_TRUE(torch::isfinite(item.value().grad()).all().item<bool>()) << name << " " << item.key();
    }
  }
  // cnn and mlp follow the image size; vgg16 refuses one its five poolings cannot take.
  EXPECT_EQ(make_model("cnn", kCifar10Shape)->forward(torch::randn({2, 3, 32, 32})).sizes(),
            (std::vector<std::int64_t>{2, 10}));
  EXPECT_EQ(make_model("mlp", kCifar10Shape)->forward(torch::randn({2, 3, 32, 32})).sizes(),
            (std::vector<std::int64_t>{2, 10}));
  try {
    make_model("vgg16");  // Fashion-MNIST's 28x28
    ADD_FAILURE() << "vgg16 accepted 28x28 images";
  } catch (const sparsgd::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("32x32"), std::string::npos) << e.what();
  }
}

// Batch norm keeps running statistics as buffers: updated by training forwards, used (and left
// alone) in evaluation, and not counted as parameters.
TEST(Models, ResNet20BatchNormStatistics) {
  torch::manual_seed(3);
  auto model = make_model("resnet20");
  const auto buffers = model->named_buffers();
  ASSERT_TRUE(buffers.contains("bn1.running_mean"));
  const auto before = buffers["bn1.running_mean"].clone();
  const auto x = torch::randn({4, 1, 28, 28}) + 2.0;

  model->eval();
  model->forward(x);
  EXPECT_TRUE(torch::equal(buffers["bn1.running_mean"], before));

  model->train();
  model->forward(x);
  EXPECT_FALSE(torch::equal(buffers["bn1.running_mean"], before));
}

}  // namespace
