// Shared plumbing of the oneDNN kernels: the engine and stream, dtype mapping, per-shape
// primitive caches and the per-call buffers (reordered operands, scratchpads) taken from
// Mantissa's caching CPU allocator.
#pragma once
#include <dnnl.hpp>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "core/cpu/onednn.h"

namespace mantissa::cpu::onednn {

using dnnl::memory;
using Dims = memory::dims;

const dnnl::engine& engine();
dnnl::stream& stream();  // one per thread (streams are not thread-safe)

// oneDNN's data type for a Mantissa dtype it can run; nullopt for the others.
std::optional<memory::data_type> data_type(DType t);

// Held while primitives are created or destroyed (Cache below), so no two threads are ever
// inside oneDNN's global primitive cache at once. Two threads creating the same primitive
// share oneDNN's cached primitive and descriptor, and under ThreadSanitizer the reading
// thread's key comparison races with the creating thread's descriptor: the synchronization
// (if any) is inside libdnnl, which TSan cannot see (docs/reliability.md "Threads"). Creation
// is the cold path (once per kernel, shape and thread; JIT compilation dominates it).
std::mutex& creation_mutex();

// Counts of the calling thread's primitive caches (CacheCounts, core/cpu/onednn.h).
CacheCounts& thread_counts();

// Every primitive of a kernel is created once per shape key and kept, in a per-thread map
// (no lock on the hot path; calls come from the thread that runs the graph). A key whose
// primitive oneDNN cannot create is remembered as unsupported, so the fallback costs a lookup.
template <typename Entry>
class Cache {
 public:
  Cache() = default;
  Cache(const Cache&) = delete;
  Cache& operator=(const Cache&) = delete;
  // At thread exit: releasing a primitive may free what oneDNN's cache shares with others.
  ~Cache() {
    std::lock_guard<std::mutex> lock(creation_mutex());
    map_.clear();
  }

  // The entry for `key`, made by make() on first use; null when make() threw dnnl::error.
  template <typename Make>
  const Entry* get(const std::vector<int64_t>& key, Make&& make) {
    auto it = map_.find(key);
    if (it == map_.end()) {
      std::optional<Entry> e;
      {
        std::lock_guard<std::mutex> lock(creation_mutex());
        try {
          e.emplace(make());
        } catch (const dnnl::error&) {
          e.reset();
        }
      }
      it = map_.emplace(key, std::move(e)).first;
      ++thread_counts().made;
    } else {
      ++thread_counts().hits;
    }
    return it->second ? &*it->second : nullptr;
  }

 private:
  std::map<std::vector<int64_t>, std::optional<Entry>> map_;
};

// One operand of a primitive: its plain (user) layout and the one the primitive chose; when
// they differ, the reorder between them is created with the entry. NCHW <-> nChw16c (the
// activations of every convolution with 16k channels) is our own tiled transposition instead:
// oneDNN 2.6's reorder ran it 4-5x slower (a third of the ResNet-20 bf16 convolution time).
struct Operand {
  memory::desc user, prim;
  std::optional<dnnl::reorder> to_prim, to_user;
  bool blocked16 = false;
  Operand() = default;
  // is_input: reorders user -> prim; otherwise prim -> user.
  Operand(const memory::desc& user_md, const memory::desc& prim_md, bool is_input);
};

// Buffers of one kernel call, returned to the allocator when it ends.
class Call {
 public:
  Call() = default;
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;
  ~Call();
  void* scratch(size_t nbytes);
  // The operand in the primitive's layout: the user's memory, or a reordered copy of it.
  memory input(const Operand& o, const void* data);
  // Memory for the primitive to write; finish() copies it to the user's layout if needed.
  memory output(const Operand& o, void* data);
  void finish(const Operand& o, const memory& written, void* data);
  std::unordered_map<int, memory>& args() { return args_; }
  // Runs `p` on the stream with args() and the scratchpad of `scratch_md`.
  void execute(const dnnl::primitive& p, const memory::desc& scratch_md);

 private:
  std::vector<std::pair<void*, size_t>> owned_;
  std::unordered_map<int, memory> args_;
};

}  // namespace mantissa::cpu::onednn
