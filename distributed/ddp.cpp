#include "distributed/ddp.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "core/backend.h"
#include "core/error.h"
#include "core/profiler.h"
#include "distributed/dist.h"

namespace mantissa::nn {

using dist::ReduceOp;

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Per-tensor descriptor exchanged at construction: dtype, rank, then up to kMaxDims sizes.
constexpr int64_t kMaxDims = 8;
constexpr int64_t kDescLen = 2 + kMaxDims;
}  // namespace

// One flat communication buffer for a group of parameters on one device with one dtype.
//   buffer: [sum of numel] in the communication dtype; offsets[i] where parameter i starts.
struct DistributedDataParallel::Bucket {
  std::vector<size_t> params;  // indices into params_
  std::vector<int64_t> offsets;
  int64_t numel = 0;
  Device device = Device::cpu();
  DType grad_dtype = DType::Float32;
  DType comm_dtype = DType::Float32;
  bool gather_sum = false;  // 16-bit over MPI (no 16-bit sum): all-gather, add in fp32
  bool wide_sum = false;    // 16-bit over NCCL: the rounded values all-reduced in fp32
  Tensor buffer;            // [numel] comm_dtype
  Tensor gathered;          // [world, numel] comm_dtype (gather_sum only)
  Tensor wide;              // [numel] fp32 (wide_sum only)
  size_t pending = 0;       // gradients still to arrive in this backward pass
  bool launched = false;
  std::unique_ptr<dist::Work> work;
};

DistributedDataParallel::DistributedDataParallel(Module& module, DistributedDataParallelOptions options)
    : module_(&module), options_(options), alive_(std::make_shared<bool>(true)) {
  MT_CHECK(dist::is_initialized(), "DistributedDataParallel", "call mantissa::dist::init() first");
  MT_CHECK(options_.bucket_cap_mb > 0, "DistributedDataParallel", "bucket_cap_mb must be positive, got ",
           options_.bucket_cap_mb);
  MT_CHECK(!options_.comm_dtype || is_floating(*options_.comm_dtype), "DistributedDataParallel",
           "comm_dtype must be a floating dtype, got ", dtype_name(*options_.comm_dtype));
  register_module("module", module);
  for (const Tensor& p : module.parameters())
    if (p.requires_grad()) params_.push_back(p);

  check_same_model_everywhere();
  std::vector<Tensor> state;
  for (auto& [name, t] : module.named_parameters()) state.push_back(t);
  for (auto& [name, t] : module.named_buffers()) state.push_back(t);
  broadcast_from_rank0(state);
  build_buckets();

  for (size_t i = 0; i < params_.size(); ++i) {
    std::weak_ptr<bool> alive = alive_;
    autograd::register_post_accumulate_grad_hook(params_[i], [this, alive, i](const Tensor&) {
      if (alive.lock()) on_grad_ready(i);
    });
  }
}

DistributedDataParallel::~DistributedDataParallel() { alive_.reset(); }

void DistributedDataParallel::check_same_model_everywhere() {
  const NamedTensors named = [&] {
    NamedTensors all = module_->named_parameters();
    for (auto& b : module_->named_buffers()) all.push_back(b);
    return all;
  }();
  dist::Communicator& comm = dist::communicator(Device::cpu());
  const int world = comm.world_size();
  // Same number of tensors?
  Tensor count = full({1}, double(named.size()), {.dtype = DType::Int64});
  std::vector<int64_t> counts = comm.all_gather(count).to_vector<int64_t>();
  for (int r = 1; r < world; ++r)
    MT_CHECK(counts[size_t(r)] == counts[0], "DistributedDataParallel", "the model differs between ranks: rank 0 has ",
             counts[0], " parameters and buffers, rank ", r, " has ", counts[size_t(r)]);
  // Same dtype and shape, tensor by tensor?
  Tensor desc = zeros({int64_t(named.size()), kDescLen}, {.dtype = DType::Int64});
  int64_t* d = desc.data_ptr<int64_t>();
  for (size_t i = 0; i < named.size(); ++i) {
    const Tensor& t = named[i].second;
    MT_CHECK(t.dim() <= kMaxDims, "DistributedDataParallel", "'", named[i].first, "' has ", t.dim(),
             " dimensions; at most ", kMaxDims, " are supported");
    int64_t* row = d + int64_t(i) * kDescLen;
    row[0] = t.defined() ? int64_t(t.dtype()) : -1;
    row[1] = t.dim();
    for (int64_t k = 0; k < t.dim(); ++k) row[2 + k] = t.size(k);
  }
  const Tensor all = comm.all_gather(desc);  // [world, n, kDescLen]
  const int64_t* a = all.data_ptr<int64_t>();
  const int64_t stride = int64_t(named.size()) * kDescLen;
  auto show = [](const int64_t* row) {
    std::string s = row[0] < 0 ? "undefined" : dtype_name(DType(row[0]));
    s += " [";
    for (int64_t k = 0; k < row[1]; ++k) s += (k ? ", " : "") + std::to_string(row[2 + k]);
    return s + "]";
  };
  for (int r = 1; r < world; ++r)
    for (size_t i = 0; i < named.size(); ++i) {
      const int64_t* r0 = a + int64_t(i) * kDescLen;
      const int64_t* rr = a + r * stride + int64_t(i) * kDescLen;
      MT_CHECK(std::equal(r0, r0 + kDescLen, rr), "DistributedDataParallel", "the model differs between ranks: '",
               named[i].first, "' is ", show(r0), " on rank 0 but ", show(rr), " on rank ", r);
    }
}

void DistributedDataParallel::broadcast_from_rank0(const std::vector<Tensor>& tensors) {
  NoGradGuard no_grad;
  for (const Tensor& t : tensors) {
    if (!t.defined()) continue;
    dist::Communicator& comm = dist::communicator(t.device());
    if (t.is_contiguous()) {
      comm.broadcast(t, 0);
      // The data changed under the tensor: cached AMP working copies must be remade.
      t.bump_version();
    } else {
      Tensor c = t.contiguous();
      comm.broadcast(c, 0);
      Tensor(t).copy_(c);
    }
  }
}

void DistributedDataParallel::build_buckets() {
  const double cap_bytes = options_.bucket_cap_mb * 1024 * 1024;
  // Reverse registration order: roughly the order backward finishes the gradients.
  for (size_t k = params_.size(); k-- > 0;) {
    const Tensor& p = params_[k];
    const DType comm_dtype = options_.comm_dtype.value_or(p.dtype());
    Bucket* b = buckets_.empty() ? nullptr : buckets_.back().get();
    const bool fits = b && b->device == p.device() && b->grad_dtype == p.dtype() &&
                      double(b->numel + p.numel()) * double(element_size(comm_dtype)) <= cap_bytes;
    if (!fits) {
      buckets_.push_back(std::make_unique<Bucket>());
      b = buckets_.back().get();
      b->device = p.device();
      b->grad_dtype = p.dtype();
      b->comm_dtype = comm_dtype;
      // MPI cannot sum 16-bit floats (it would widen to fp32 and lose the point of compressing).
      b->gather_sum = is_reduced_float(comm_dtype) && p.device().is_cpu();
      // NCCL would add 16-bit buffers in 16 bits: sum the 16-bit values in fp32 instead, so
      // both engines give "16-bit values, fp32 sum".
      b->wide_sum = is_reduced_float(comm_dtype) && !p.device().is_cpu();
    }
    b->params.push_back(k);
    b->offsets.push_back(b->numel);
    b->numel += p.numel();
  }
  slot_of_.assign(params_.size(), {0, 0});
  const int world = dist::world_size();
  for (size_t bi = 0; bi < buckets_.size(); ++bi) {
    Bucket& b = *buckets_[bi];
    for (size_t j = 0; j < b.params.size(); ++j) slot_of_[b.params[j]] = {bi, j};
    b.buffer = zeros({b.numel}, {.dtype = b.comm_dtype, .device = b.device});
    if (b.gather_sum) b.gathered = zeros({world, b.numel}, {.dtype = b.comm_dtype, .device = b.device});
    if (b.wide_sum) b.wide = zeros({b.numel}, {.dtype = DType::Float32, .device = b.device});
  }
}

std::vector<size_t> DistributedDataParallel::bucket_sizes() const {
  std::vector<size_t> sizes;
  for (const auto& b : buckets_) sizes.push_back(b->params.size());
  return sizes;
}

Tensor DistributedDataParallel::forward(const Tensor& x) {
  MT_CHECK(!in_backward_, "DistributedDataParallel::forward",
           "the previous backward pass did not finish reducing gradients (it threw?)");
  if (options_.broadcast_buffers && dist::world_size() > 1) {
    std::vector<Tensor> buffers;
    for (auto& [name, t] : module_->named_buffers()) buffers.push_back(t);
    if (!buffers.empty()) broadcast_from_rank0(buffers);
  }
  return (*module_)(x);
}

void DistributedDataParallel::on_grad_ready(size_t param_index) {
  if (!sync_) return;
  if (!in_backward_) {
    // First gradient of this backward pass: arm the buckets and the end-of-backward flush.
    in_backward_ = true;
    next_launch_ = 0;
    for (auto& b : buckets_) {
      b->pending = b->params.size();
      b->launched = false;
    }
    autograd::queue_callback([this, alive = std::weak_ptr<bool>(alive_)] {
      if (alive.lock()) finish_backward();
    });
  }
  Bucket& b = *buckets_[slot_of_[param_index].first];
  if (b.pending > 0) --b.pending;
  launch_ready_buckets();
  // Open MPI advances non-blocking collectives only inside MPI calls: poke the ones in flight.
  for (size_t i = 0; i < next_launch_; ++i)
    if (buckets_[i]->work) buckets_[i]->work->test();
}

void DistributedDataParallel::launch_ready_buckets() {
  while (next_launch_ < buckets_.size() && buckets_[next_launch_]->pending == 0) launch(*buckets_[next_launch_++]);
}

void DistributedDataParallel::launch(Bucket& b) {
  profiler::Range range("ddp.launch_bucket");
  const auto t0 = Clock::now();
  NoGradGuard no_grad;
  for (size_t j = 0; j < b.params.size(); ++j) {
    const Tensor& p = params_[b.params[j]];
    Tensor slot = b.buffer.narrow(0, b.offsets[j], p.numel());
    const Tensor g = p.grad();
    if (g.defined())
      slot.copy_(g.reshape({p.numel()}));
    else
      slot.zero_();
  }
  stats_.pack_seconds += seconds_since(t0);
  dist::Communicator& comm = dist::communicator(b.device);
  if (b.wide_sum) backend_for(b.device).copy(b.buffer, b.wide);
  if (b.gather_sum)
    b.work = comm.all_gather_async(b.buffer, b.gathered);
  else
    b.work = comm.all_reduce_async(b.wide_sum ? b.wide : b.buffer, ReduceOp::Sum);
  b.launched = true;
  stats_.buckets += 1;
  stats_.bytes += double(b.buffer.nbytes());
}

void DistributedDataParallel::finish_backward() {
  in_backward_ = false;
  // Buckets with a parameter that got no gradient on this rank start now (zeros for it).
  for (; next_launch_ < buckets_.size(); ++next_launch_) launch(*buckets_[next_launch_]);
  autograd::FoundInfSink* sink = autograd::found_inf_sink();
  const double inv_world = 1.0 / double(dist::world_size());
  NoGradGuard no_grad;
  for (auto& bp : buckets_) {
    Bucket& b = *bp;
    {
      profiler::Range range("ddp.wait");
      const auto t0 = Clock::now();
      b.work->wait();
      b.work.reset();
      stats_.wait_seconds += seconds_since(t0);
    }
    const auto t0 = Clock::now();
    // Average in the gradient's dtype (fp32 for 16-bit transport): no further 16-bit rounding.
    Tensor sum = b.gather_sum ? b.gathered.to(DType::Float32).sum({0}) : b.wide_sum ? b.wide : b.buffer;
    if (sum.dtype() != b.grad_dtype) sum = sum.to(b.grad_dtype);
    sum = sum * inv_world;
    const Tensor flag = sink ? sink->flag_for(b.device) : Tensor();
    for (size_t j = 0; j < b.params.size(); ++j) {
      const Tensor& p = params_[b.params[j]];
      Tensor g = p.grad();
      if (!g.defined() || !g.is_contiguous()) {
        g = make_tensor(p.sizes(), p.dtype(), p.device());
        p.set_grad(g);
      }
      // Write the average into .grad; a non-finite value (fp16 transport overflow) raises the flag.
      backend_for(b.device).accumulate_grad(sum.narrow(0, b.offsets[j], p.numel()).reshape(p.sizes()), g, true, flag);
      g.bump_version();
      if (sink) sink->checked(g);  // so GradScaler::step does not check it again
    }
    stats_.pack_seconds += seconds_since(t0);
  }
  if (sink) {
    // Every rank skips the step if any rank overflowed: max-reduce the flags.
    std::vector<Device> devices;
    for (auto& b : buckets_)
      if (std::find(devices.begin(), devices.end(), b->device) == devices.end()) devices.push_back(b->device);
    for (Device d : devices) dist::communicator(d).all_reduce(sink->flag_for(d), ReduceOp::Max);
  }
  stats_.reductions += 1;
}

}  // namespace mantissa::nn
