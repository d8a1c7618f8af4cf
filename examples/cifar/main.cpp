// Trains a CIFAR ResNet (He et al. 2016: depth 20/32/44/56/110) with batch norm, random
// crop + flip augmentation, Nesterov SGD (weight decay on conv/linear weights only), a
// warmup + cosine (or one-cycle) schedule and optional mixed precision, and reports test
// accuracy after every epoch.
//
//   cifar                                            # Fashion-MNIST (Debian package) through ResNet-20
//   cifar --data-dir cifar-10-batches-bin --epochs 180 --amp bf16
//   cifar --data-dir cifar-100-binary --labels coarse --depth 56 --device cuda --amp fp16
//   cifar --save run.safetensors                    # and later: --resume run.safetensors
//   cifar --profile trace.json --amp-report --amp fp16 --metrics run.jsonl
#include <mantissa.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>

#include "../common/onnx_export.h"
#include "../common/run_log.h"
#include "data.h"

namespace mt = mantissa;
namespace nn = mantissa::nn;
namespace md = mantissa::data;
namespace F = mantissa::nn::functional;

namespace {

struct Eval {
  double loss = 0, accuracy = 0;
};

Eval evaluate(nn::Module& net, md::DataLoader& loader, std::optional<mt::DType> amp) {
  mt::NoGradGuard no_grad;
  net.eval();  // batch norm uses its running estimates
  double loss_sum = 0;
  int64_t correct = 0, seen = 0;
  for (auto& [x, y] : loader) {
    mt::Tensor logits;
    {
      mt::amp::Autocast ac(amp.value_or(mt::kHalf), amp.has_value());
      logits = net(x);
    }
    loss_sum += F::cross_entropy(logits, y, {.reduction = nn::Reduction::Sum}).item<double>();
    correct += mt::sum(mt::argmax(logits, 1) == y).item<int64_t>();
    seen += y.size(0);
  }
  net.train();
  return {loss_sum / double(seen), 100.0 * double(correct) / double(seen)};
}

void progress(int epoch, int epochs, int64_t batch, int64_t batches, double loss, double lr, double images_per_s) {
  const int width = 30;
  const int filled = int(double(width) * double(batch) / double(batches));
  std::printf("\repoch %d/%d [%s%s] %4lld/%lld  loss %.4f  lr %.4f  %.0f images/s", epoch, epochs,
              std::string(size_t(filled), '#').c_str(), std::string(size_t(width - filled), '.').c_str(),
              (long long)batch, (long long)batches, loss, lr, images_per_s);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Train a CIFAR ResNet with augmentation and optional mixed precision"};
  std::string dataset = "auto", data_dir, labels = "fine", amp_name = "off", device_name = "cpu";
  std::string schedule = "cosine", save_path, resume_path, export_path;
  int depth = 20, epochs = 5, stop_after = 0;
  int64_t batch_size = 128, limit = 0, workers = 1;
  double lr = 0.1, momentum = 0.9, weight_decay = 5e-4, label_smoothing = 0, warmup_epochs = 1;
  uint64_t seed = 0;
  bool no_augment = false;
  app.add_option("--dataset", dataset,
                 "cifar10, cifar100, fashion-mnist, or auto: what --data-dir holds (no --data-dir: Fashion-MNIST "
                 "from /usr/share/datasets/fashion-mnist)")
      ->check(CLI::IsMember({"auto", "cifar10", "cifar100", "fashion-mnist"}));
  app.add_option("--data-dir", data_dir,
                 "cifar-10-batches-bin, cifar-100-binary (binary versions) or a directory of MNIST IDX files");
  app.add_option("--labels", labels, "CIFAR-100 labels: fine (100 classes) or coarse (20)")
      ->check(CLI::IsMember({"fine", "coarse"}));
  app.add_option("--depth", depth, "ResNet depth, 6n + 2")->check(CLI::IsMember({8, 14, 20, 32, 44, 56, 110}));
  app.add_option("--epochs", epochs, "training epochs")->check(CLI::PositiveNumber);
  app.add_option("--batch-size", batch_size, "batch size")->check(CLI::PositiveNumber);
  app.add_option("--lr", lr, "peak learning rate")->check(CLI::PositiveNumber);
  app.add_option("--momentum", momentum, "Nesterov momentum")->check(CLI::Range(0.0, 1.0));
  app.add_option("--weight-decay", weight_decay, "weight decay of conv and linear weights (not BN, not biases)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--label-smoothing", label_smoothing, "label smoothing of the cross-entropy")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--schedule", schedule, "cosine (linear warmup, cosine decay) or onecycle")
      ->check(CLI::IsMember({"cosine", "onecycle"}));
  app.add_option("--warmup-epochs", warmup_epochs, "linear warmup of the cosine schedule (at most 20% of the run)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--amp", amp_name, "mixed precision: off, fp16 (with loss scaling) or bf16")
      ->check(CLI::IsMember({"off", "fp16", "bf16"}));
  app.add_option("--device", device_name, "cpu or cuda[:N]");
  app.add_option("--seed", seed, "random seed (weights, shuffling, augmentation)");
  app.add_flag("--no-augment", no_augment, "train without random crop and flip");
  app.add_option("--workers", workers,
                 "threads preparing training batches (augmentation, upload); the batches are the same with any count")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--save", save_path, "write a checkpoint here after every epoch");
  app.add_option("--resume", resume_path, "resume from this checkpoint (continues exactly where it was saved)");
  app.add_option("--export", export_path, "write the trained model as ONNX here (after training, or from --resume)");
  app.add_option("--stop-after", stop_after,
                 "stop after this epoch, as if interrupted (the schedule still spans --epochs; --resume continues)")
      ->check(CLI::PositiveNumber);
  app.add_option("--limit", limit, "use only the first N training and test images (quick runs)")
      ->check(CLI::NonNegativeNumber);
  examples::RunLogOptions log_opts;
  examples::add_run_log_options(app, log_opts);
  CLI11_PARSE(app, argc, argv);

  try {
    const mt::Device device = mt::Device::parse(device_name);
    mt::manual_seed(seed);
    cifar::DataSet data;
    try {
      data = cifar::load(dataset, data_dir, labels == "coarse", limit);
    } catch (const mt::Error& e) {
      std::cerr << "cifar: cannot read the data set: " << e.what() << "\n"
                << "Pass --data-dir with the extracted binary version of CIFAR-10 (cifar-10-batches-bin) or "
                   "CIFAR-100 (cifar-100-binary), or install Debian's dataset-fashion-mnist for the default run.\n";
      return 2;
    }
    // Augmentation and normalization run on the loader's worker threads; the random crop and
    // flip are drawn from a generator seeded by (seed, epoch, batch), so a resumed run sees
    // exactly the batches the interrupted one would have.
    md::Compose augment{md::RandomCrop(32, 4), md::RandomHorizontalFlip()};
    auto normalize = [&data](md::Batch b) {
      b.data = cifar::to_network_input(b.data, data);
      return b;
    };
    md::DataLoader train_loader(md::TensorDataset(data.train.images, data.train.labels),
                                {.batch_size = batch_size,
                                 .shuffle = true,
                                 .seed = seed,
                                 .drop_last = true,  // no tiny last batch for batch norm
                                 .workers = workers,
                                 .batch_transform = normalize,
                                 .random_transform = no_augment ? md::Compose{} : augment,
                                 .device = device});
    md::DataLoader test_loader(md::TensorDataset(data.test.images, data.test.labels),
                               {.batch_size = 500, .batch_transform = normalize, .device = device});
    MT_CHECK(train_loader.size() > 0, "cifar", "the training set has ", data.train.images.size(0),
             " images, fewer than one batch of ", batch_size);

    nn::CifarResNet net(depth, {.num_classes = data.num_classes});
    net.to(device);
    mt::optim::SGD opt(mt::optim::weight_decay_groups(net.named_parameters(), weight_decay),
                       {.lr = lr, .momentum = momentum, .nesterov = momentum > 0});
    std::optional<mt::DType> amp;
    if (amp_name == "fp16") amp = mt::kHalf;
    if (amp_name == "bf16") amp = mt::kBFloat16;
    // fp16 needs loss scaling; bf16 has fp32's range and does not.
    mt::amp::GradScaler scaler({.enabled = amp_name == "fp16"});
    // Stepped per batch over the whole run.
    const int64_t total_steps = int64_t(epochs) * train_loader.size();
    std::unique_ptr<mt::optim::LRScheduler> sched;
    if (schedule == "cosine") {
      const int64_t warmup = std::min<int64_t>(int64_t(warmup_epochs * double(train_loader.size())), total_steps / 5);
      sched = std::make_unique<mt::optim::WarmupCosineLR>(opt, warmup, total_steps);
    } else {
      sched = std::make_unique<mt::optim::OneCycleLR>(opt, lr, total_steps);
    }
    mt::optim::Checkpoint parts{.model = &net, .optimizer = &opt, .scheduler = sched.get(), .scaler = &scaler};

    int start_epoch = 0;
    if (!resume_path.empty()) {
      start_epoch = int(mt::optim::load_checkpoint(resume_path, parts).epoch);
      std::printf("resumed from %s at epoch %d\n", resume_path.c_str(), start_epoch);
      train_loader.set_state({seed, start_epoch, 0});
    }
    std::printf("data: %s, %lld train / %lld test images, %lld classes, mean", data.name.c_str(),
                (long long)data.train.images.size(0), (long long)data.test.images.size(0), (long long)data.num_classes);
    for (double m : data.mean) std::printf(" %.1f", m);
    std::printf(", std");
    for (double s : data.stddev) std::printf(" %.1f", s);
    std::printf(" (of 255)\nmodel: ResNet-%d, %lld parameters; amp: %s; device: %s; augmentation: %s\n", depth,
                (long long)net.num_parameters(), amp_name.c_str(), device.str().c_str(),
                no_augment ? "off" : "crop 32 pad 4 + flip");

    examples::StepProfiler step_profiler(log_opts, true, total_steps - int64_t(start_epoch) * train_loader.size());
    examples::MetricsLog metrics(log_opts.metrics_path);
    int64_t global_step = int64_t(start_epoch) * train_loader.size();
    Eval last;
    double total_train_s = 0;
    int64_t total_images = 0;
    for (int epoch = start_epoch; epoch < epochs; ++epoch) {
      const auto t0 = std::chrono::steady_clock::now();
      int64_t b = 0, seen = 0;
      double running = 0;
      for (auto& [x, y] : train_loader) {
        step_profiler.begin_step();
        mt::Tensor loss;
        {
          mt::amp::Autocast ac(amp.value_or(mt::kHalf), amp.has_value());
          loss = F::cross_entropy(net(x), y, {.label_smoothing = label_smoothing});
        }
        opt.zero_grad();
        scaler.backward(loss);
        scaler.step(opt);
        scaler.update();
        const double lr_now = *opt.param_groups()[0].lr;
        sched->step();
        const double l = loss.item<double>();
        step_profiler.end_step();
        running = b == 0 ? l : 0.95 * running + 0.05 * l;
        seen += y.size(0);
        ++b;
        ++global_step;
        if (b % 10 == 0 || b == train_loader.size()) {
          const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          progress(epoch + 1, epochs, b, train_loader.size(), running, *opt.param_groups()[0].lr, double(seen) / s);
          if (metrics.enabled())
            metrics.train({global_step, epoch + 1, l, lr_now, scaler.scale(), scaler.skipped_steps(),
                           total_images + seen, examples::peak_memory(device)});
        }
      }
      const double epoch_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      total_train_s += epoch_s;
      total_images += seen;
      step_profiler.finish();  // the profiled window outlasted the epoch: report what it saw
      last = evaluate(net, test_loader, amp);
      metrics.eval(global_step, epoch + 1, {{"test_loss", last.loss}, {"test_accuracy", last.accuracy}});
      std::printf("\nepoch %d: train %.1f s (%.0f images/s), train loss %.4f, test loss %.4f, test accuracy %.2f%%\n",
                  epoch + 1, epoch_s, double(seen) / epoch_s, running, last.loss, last.accuracy);
      if (!save_path.empty()) mt::optim::save_checkpoint(save_path, parts, {.epoch = epoch + 1, .extra = {}});
      if (stop_after > 0 && epoch + 1 >= stop_after && epoch + 1 < epochs) {
        std::printf("stopped after epoch %d of %d\n", epoch + 1, epochs);
        return 0;
      }
    }
    if (!export_path.empty())
      examples::export_onnx(net, mt::zeros({1, 3, 32, 32}), export_path, amp, device, "image", "logits");
    const int trained = std::max(0, epochs - start_epoch);
    std::printf(
        "final: dataset=%s depth=%d amp=%s epochs=%d test_accuracy=%.2f%% test_loss=%.4f time_per_epoch=%.1fs "
        "images_per_s=%.0f loss_scale=%g skipped_steps=%lld\n",
        data.name.c_str(), depth, amp_name.c_str(), epochs, last.accuracy, last.loss,
        trained > 0 ? total_train_s / trained : 0.0, total_train_s > 0 ? double(total_images) / total_train_s : 0.0,
        scaler.scale(), (long long)scaler.skipped_steps());
    return 0;
  } catch (const mt::Error& e) {
    std::cerr << "cifar: " << e.what() << "\n";
    return 1;
  }
}
