// Program key -> loaded executable, in two tiers.
// Memory: an exact-key map of at most TORCH_TPU_CACHE_MEMORY_ENTRIES (default 4096, 1 to 2^20)
// executables, least recently used evicted first: every loaded executable holds a few memory mappings
// of JIT code, and a process has a limited number (vm.max_map_count, 65530 by default).
// Disk (TORCH_TPU_CACHE_DIR, off when empty): files named by a hash of the key text (program text,
// compile options, platform, xla_version and project version). Each entry stores that key text and a
// checksum and is written atomically (temp file + rename); on load it is used only when intact and
// written for the same key. A corrupt, foreign, unreadable or old-format entry is recompiled (and
// overwritten, with a warning); an entry path that is not a regular file is skipped. Every compile,
// hit and second is counted in metrics. With TORCH_TPU_DUMP_DIR set, each compile also writes its
// StableHLO text there, headed by its key hash and origin.
#pragma once
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "hlo/types.h"
#include "pjrt/client.h"

namespace tpu {

using WarnFn = std::function<void(const std::string&)>;

// A condition a program checks on the device (hlo::Check without its value): its status is one of
// the program's last outputs; the runtime raises `message` at the next host sync if it failed.
struct DeviceCheck {
  std::string message;  // "{}": the offending value
  bool index_error = true;
};

// A program to compile: its StableHLO text and what its caller wants kept with the executable.
struct Program {
  std::string text;
  std::vector<hlo::TensorType> results;  // logical result types (e.g. from PyTorch's meta kernels)
  std::string origin;  // who made it (an op and its Python line), when only known once it is made
  std::vector<DeviceCheck> checks;  // its last outputs are their statuses
  std::vector<hlo::Dims> strides;   // per result, its strides where they are not row-major, else empty
};

// A loaded executable, the types its @main takes (when its text says) and its Program's results.
struct Compiled {
  std::shared_ptr<pjrt::Executable> exe;
  std::optional<std::vector<hlo::TensorType>> params;
  std::vector<hlo::TensorType> results;
  std::vector<DeviceCheck> checks;
  std::vector<hlo::Dims> strides;
};

class CompileCache {
 public:
  CompileCache(const pjrt::Client& client, std::string disk_dir, std::string fingerprint, WarnFn warn);

  // `key` identifies the program in memory; `make_program` is called only on a memory miss.
  // `origin` (an op name and Python line, say) is recorded with compiles.
  std::shared_ptr<const Compiled> get(const std::string& key, const std::function<Program()>& make_program,
                                      const std::string& origin = "");
  void clear_memory();

  // XLA option overrides for programs compiled by this thread (pjrt::Client::option_overrides bytes;
  // part of the key): torch.compile(..., options=...).
  static void set_thread_overrides(std::string overrides);
  // While forbidden, a compile (a memory and disk miss) raises instead (torch_tpu.no_recompile()).
  static void set_compiles_forbidden(bool forbidden);
  const std::string& disk_dir() const { return dir_; }
  size_t memory_entries() const;                // executables held in memory now
  size_t memory_capacity() const { return capacity_; }

  // TORCH_TPU_CACHE_MEMORY_ENTRIES, checked: throws pjrt::Error (INVALID_ARGUMENT) naming it.
  static size_t capacity_from_env();

 private:
  std::shared_ptr<pjrt::Executable> load_or_compile(const std::string& program, const std::string& options,
                                                    const std::string& origin);
  void dump(const std::string& program, const std::string& key, const std::string& origin);
  // `writable`: false when the entry path must be left alone (not a regular file).
  std::shared_ptr<pjrt::Executable> read_disk(const std::string& path, const std::string& key, bool& writable);
  void write_disk(const std::string& path, const std::string& key, const std::string& bytes);

  const pjrt::Client& client_;
  std::string dir_, fingerprint_, options_;
  // XLA CPU: programs on small tensors compile at LLVM level 0 (half the compile time; the code runs as
  // fast where it has few elements to loop over), medium ones without the fusion emitters. Eager ops
  // compile one program per shape.
  std::string small_program_options_, medium_program_options_;
  std::string dump_dir_;  // TORCH_TPU_DUMP_DIR: every compiled program's text, key and origin
  WarnFn warn_;
  mutable std::mutex mu_;
  size_t capacity_;
  size_t mapping_budget_;
  int inserted_since_count_ = 0;
  std::list<std::string> recent_;  // keys, most recently used first
  struct Entry {
    std::shared_ptr<const Compiled> compiled;
    std::list<std::string>::iterator at;
  };
  std::unordered_map<std::string, Entry> memory_;
};

}  // namespace tpu
