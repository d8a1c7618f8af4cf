// ModuleDict (named submodules, state-dict prefixes, lookups) and AnyModule (a module of any
// forward signature behind one type: several inputs, non-tensor arguments and results, run-time
// checks of the call against the signature).
#include "test_util.h"

namespace mt = mantissa;
namespace nn = mantissa::nn;
using mt::Tensor;
using testing::HasSubstr;

namespace {
// Two inputs and an integer: the kind of forward a Sequential cannot hold.
struct Mix : nn::Module {
  nn::Linear proj{4, 4};
  Mix() { register_module("proj", proj); }
  Tensor forward(const Tensor& a, const Tensor& b, int64_t times) {
    Tensor h = proj(a) + b;
    for (int64_t i = 1; i < times; ++i) h = h + b;
    return h;
  }
};
struct Stats : nn::Module {
  std::pair<Tensor, Tensor> forward(const Tensor& x) const { return {mt::mean(x), mt::amax(x)}; }
};
}  // namespace

TEST(ModuleDict, NamesPrefixTheStateDictAndLookupsAreChecked) {
  mt::manual_seed(1);
  nn::ModuleDict heads;
  heads.insert("cls", nn::Linear(8, 3));
  heads.insert("box", std::make_shared<nn::Linear>(8, 4));
  EXPECT_EQ(heads.keys(), (std::vector<std::string>{"cls", "box"}));
  EXPECT_TRUE(heads.contains("box"));
  EXPECT_FALSE(heads.contains("seg"));
  EXPECT_EQ(heads.state_dict().keys(), (std::vector<std::string>{"cls.weight", "cls.bias", "box.weight", "box.bias"}));
  Tensor x = mt::randn({2, 8});
  auto& box = heads.at<nn::Linear>("box");
  EXPECT_EQ(heads["box"](x).sizes(), (mt::Shape{2, 4}));
  EXPECT_TRUE(mt::all(heads["cls"](x) ==
                      nn::functional::linear(x, heads.at<nn::Linear>("cls").weight, heads.at<nn::Linear>("cls").bias))
                  .item<bool>());
  EXPECT_EQ(box.out_features, 4);
  EXPECT_ERROR(heads["seg"], HasSubstr("ModuleDict"), HasSubstr("'seg'"), HasSubstr("cls, box"));
  EXPECT_ERROR(heads.at<nn::ReLU>("cls"), HasSubstr("not the requested type"));
  EXPECT_ERROR(heads.insert("cls", nn::ReLU()), HasSubstr("cls"));  // names are unique
}

TEST(AnyModule, CallsForwardsOfAnySignature) {
  mt::manual_seed(2);
  auto mix = std::make_shared<Mix>();
  nn::AnyModule any(mix);
  EXPECT_EQ(any.signature(), "Tensor(Tensor, Tensor, int64_t)");
  Tensor a = mt::randn({3, 4}), b = mt::randn({3, 4});
  Tensor want = mix->forward(a, b, 3);
  Tensor got = any.forward(a, b, int64_t(3));
  EXPECT_TRUE(mt::all(got == want).item<bool>());
  EXPECT_EQ(&any.module(), mix.get());
  EXPECT_EQ(any.module().parameters().size(), 2u);
  // Gradients flow as through a direct call.
  Tensor w = mt::randn({3, 4}).requires_grad_();
  mt::sum(any.forward(a, w, int64_t(2))).backward();
  EXPECT_TRUE(mt::all(w.grad() == 2.0).item<bool>());
  // A const forward with a pair result.
  nn::AnyModule stats(std::make_shared<Stats>());
  auto [m, mx] = stats.forward<std::pair<Tensor, Tensor>>(mt::from_vector<float>({1, 2, 6}));
  EXPECT_EQ(m.item<float>(), 3.0f);
  EXPECT_EQ(mx.item<float>(), 6.0f);
  // An overloaded forward, named by its signature.
  auto cell = std::make_shared<nn::GRUCell>(2, 3);
  auto typed = nn::AnyModule::of<nn::GRUCell, Tensor(const Tensor&, const Tensor&)>(cell);
  EXPECT_EQ(typed.forward(mt::randn({1, 2}), mt::zeros({1, 3})).sizes(), (mt::Shape{1, 3}));
}

TEST(AnyModule, MismatchedCallsNameTheSignature) {
  nn::AnyModule any(std::make_shared<Mix>());
  Tensor a = mt::randn({3, 4});
  EXPECT_ERROR(any.forward(a, a), HasSubstr("takes 3 arguments, got 2"), HasSubstr("Tensor(Tensor, Tensor, int64_t)"));
  EXPECT_ERROR(any.forward(a, a, 2.5), HasSubstr("argument 2 is a double, expected int64_t"));
  EXPECT_ERROR(any.forward<double>(a, a, int64_t(1)), HasSubstr("returns Tensor, not the requested double"));
  EXPECT_ERROR(nn::AnyModule().forward(a), HasSubstr("empty AnyModule"));
}
