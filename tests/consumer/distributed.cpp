// Uses the installed mantissa::distributed (distributed/dist.h through the package's include
// root): a world of one (a plain start), an all-reduce and one DistributedDataParallel step,
// whose gradients must equal the unwrapped model's. Exits 0 when they do.
#include <distributed/dist.h>
#include <mantissa.h>

#include <cstdio>

namespace mt = mantissa;

int main() {
  mt::dist::init();
  mt::Tensor t = mt::from_vector<float>({1, 2, 3});
  mt::dist::all_reduce(t);  // one rank: unchanged
  mt::manual_seed(0);
  mt::nn::Linear plain(3, 2), wrapped_net(3, 2);
  wrapped_net.load_state_dict(plain.state_dict());
  mt::nn::DistributedDataParallel ddp(wrapped_net);
  mt::Tensor x = mt::from_vector<float>({1, -1, 2, 0.5f, 0, 1}, {2, 3});
  mt::sum(plain(x)).backward();
  mt::sum(ddp(x)).backward();
  const bool ok = t.to_vector<float>() == std::vector<float>{1, 2, 3} && mt::dist::world_size() == 1 &&
                  plain.weight.grad().to_vector<float>() == wrapped_net.weight.grad().to_vector<float>();
  std::printf("consumer_distributed: world %d, all_reduce and DDP step: %s\n", mt::dist::world_size(),
              ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}
