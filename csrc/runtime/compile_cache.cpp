#include "runtime/compile_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "runtime/metrics.h"
#include "runtime/sha256.h"
#include "runtime/signature.h"

namespace tpu {
namespace fs = std::filesystem;

namespace {
// Entry layout (version 2): magic, 8-byte key size, 8-byte payload size, 32-byte SHA-256 of key and
// payload together, the key text the entry was written for, the payload (a serialized executable).
// The key is compared on load, so an entry is never used for another program, whatever its name.
// Version 1 entries (no key) and other versions share the "TPUEXE" prefix: they are recompiled.
constexpr char kMagic[8] = {'T', 'P', 'U', 'E', 'X', 'E', '2', '\n'};
constexpr size_t kMagicPrefix = 6;  // "TPUEXE": an entry of some version of this format
constexpr size_t kHeader = sizeof(kMagic) + 8 + 8 + 32;

constexpr size_t kDefaultCapacity = 4096;
constexpr size_t kMaxCapacity = size_t{1} << 20;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string errno_text(int err) { return std::strerror(err); }

// The memory mappings this process holds. XLA CPU's JIT code takes several per executable (a few to
// tens), and a process may hold only vm.max_map_count of them: beyond, compiles fail ("Cannot allocate
// memory") and leave the C++ unwinder unusable.
size_t process_mappings() {
  int fd = ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  size_t lines = 0;
  char buf[1 << 16];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) lines += std::count(buf, buf + n, '\n');
  ::close(fd);
  return lines;
}

constexpr int kMappingCheckEvery = 32;  // new executables between two counts

// Reads a whole file; returns false with `error` set when it cannot.
bool read_file(const std::string& path, std::string& data, std::string& error) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // never blocks on a fifo
  if (fd < 0) {
    error = errno_text(errno);
    return false;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    error = S_ISDIR(st.st_mode) ? "it is a directory" : "it is not a regular file";
    ::close(fd);
    return false;
  }
  data.clear();
  data.reserve(static_cast<size_t>(st.st_size));
  char chunk[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      error = errno_text(errno);
      ::close(fd);
      return false;
    }
    if (n == 0) break;
    data.append(chunk, static_cast<size_t>(n));
  }
  ::close(fd);
  return true;
}
}  // namespace

// A count from the environment, checked as torch_tpu/_plugin.py checks it: unset or blank gives `fallback`.
size_t env_count(const char* name, size_t fallback, size_t lo, size_t hi, const std::string& what) {
  const char* v = std::getenv(name);
  if (!v) return fallback;
  std::string text(v);
  size_t b = text.find_first_not_of(" \t"), e = text.find_last_not_of(" \t");
  if (b == std::string::npos) return fallback;
  std::string t = text.substr(b, e - b + 1);
  bool digits = !t.empty() && t.size() <= 12 && t.find_first_not_of("0123456789") == std::string::npos;
  size_t n = digits ? static_cast<size_t>(std::stoull(t)) : 0;
  if (!digits || n < lo || n > hi)
    throw pjrt::Error(pjrt::abi::ErrorCode::INVALID_ARGUMENT,
                      std::string(name) + "='" + text + "' is not valid: expected " + what + " from " + std::to_string(lo) +
                          " to " + std::to_string(hi) + " (default " + std::to_string(fallback) + ")");
  return n;
}

size_t CompileCache::capacity_from_env() {
  return env_count("TORCH_TPU_CACHE_MEMORY_ENTRIES", kDefaultCapacity, 1, kMaxCapacity, "a whole number of executables");
}

CompileCache::CompileCache(const pjrt::Client& client, std::string disk_dir, std::string fingerprint,
                           WarnFn warn)
    : client_(client), dir_(std::move(disk_dir)), fingerprint_(std::move(fingerprint)),
      options_(pjrt::Client::default_compile_options()), warn_(std::move(warn)),
      capacity_(capacity_from_env()) {
  // TORCH_TPU_CACHE_MAPPINGS, else half of vm.max_map_count: above it, the memory tier sheds executables
  size_t limit = 0;
  std::ifstream("/proc/sys/vm/max_map_count") >> limit;
  mapping_budget_ = env_count("TORCH_TPU_CACHE_MAPPINGS", (limit ? limit : 65530) / 2, 64, size_t{1} << 30,
                              "a whole number of memory mappings");
  // Small programs are compile-bound: LLVM level 0 and XLA's older loop emitters compile them in about a
  // third of the default's time; medium ones keep LLVM's optimizer but skip the fusion emitters (1.6x
  // faster to compile, the same run time at that size). Large fused graphs stay on the defaults (the fusion
  // emitters run a softmax over 16K elements twice as fast).
  if (client.platform_name() == "cpu") {
    small_program_options_ = pjrt::Client::option_overrides(
        {{"xla_backend_optimization_level", int64_t{0}}, {"xla_cpu_use_fusion_emitters", false}});
    medium_program_options_ = pjrt::Client::option_overrides({{"xla_cpu_use_fusion_emitters", false}});
  }
  if (const char* d = std::getenv("TORCH_TPU_DUMP_DIR"); d && *d) dump_dir_ = d;
}

namespace {
thread_local std::string thread_overrides;
std::atomic<bool> compiles_forbidden{false};
}  // namespace

void CompileCache::set_thread_overrides(std::string overrides) { thread_overrides = std::move(overrides); }
void CompileCache::set_compiles_forbidden(bool forbidden) { compiles_forbidden = forbidden; }

size_t CompileCache::memory_entries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return memory_.size();
}

std::shared_ptr<const Compiled> CompileCache::get(const std::string& program_key,
                                                  const std::function<Program()>& make_program,
                                                  const std::string& origin) {
  std::string with_overrides;
  if (!thread_overrides.empty()) with_overrides = program_key + '\0' + thread_overrides;
  const std::string& key = thread_overrides.empty() ? program_key : with_overrides;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = memory_.find(key); it != memory_.end()) {
      metrics::count(metrics::MemoryHits);
      recent_.splice(recent_.begin(), recent_, it->second.at);
      return it->second.compiled;
    }
  }
  // Unlocked: making a program may run other ops (a rejected call's error comes from CPU's kernel run
  // on copies of device tensors). Two threads missing the same key both compile; the first one stays.
  Program program = make_program();
  // the thread's overrides come last: an option set there wins
  // A random op's own program (a few KB of text) skips the fusion emitters at any size: they expand ThreeFry
  // into a loop that those compile 5-10x slower (0.7 s for rand(5000)) and run no faster. A fused graph
  // with a dropout in it keeps them.
  constexpr int64_t kSmallElements = 256, kMediumElements = 4096;
  constexpr size_t kDrawProgramChars = 8192;
  int64_t largest = small_program_options_.empty() ? -1 : largest_tensor(program.text);
  bool draws = program.text.size() <= kDrawProgramChars && program.text.find("rng_bit_generator") != std::string::npos;
  std::string size_options = largest < 0                          ? std::string()
                             : largest <= kSmallElements           ? small_program_options_
                             : largest <= kMediumElements || draws ? medium_program_options_
                                                                   : std::string();
  std::string options = options_ + size_options + thread_overrides;
  auto compiled = std::make_shared<const Compiled>(
      Compiled{load_or_compile(program.text, options, program.origin.empty() ? origin : program.origin),
               main_parameters(program.text), std::move(program.results), std::move(program.checks),
               std::move(program.strides)});
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = memory_.find(key); it != memory_.end()) return it->second.compiled;
  recent_.push_front(key);
  memory_.emplace(key, Entry{compiled, recent_.begin()});
  // beyond the entry capacity, or (counted now and then) the mapping budget, least recently used
  // executables go; in-flight executions keep theirs alive
  size_t keep = capacity_;
  if (++inserted_since_count_ >= kMappingCheckEvery) {
    inserted_since_count_ = 0;
    if (process_mappings() > mapping_budget_) keep = memory_.size() / 2;
  }
  while (memory_.size() > keep) {
    memory_.erase(recent_.back());
    recent_.pop_back();
    metrics::add("cache.memory_evictions");
  }
  return compiled;
}

void CompileCache::clear_memory() {
  std::lock_guard<std::mutex> lock(mu_);
  memory_.clear();
  recent_.clear();
}

std::shared_ptr<pjrt::Executable> CompileCache::load_or_compile(const std::string& program, const std::string& options,
                                                                const std::string& origin) {
  std::string path, key;
  bool writable = false;
  if (!dir_.empty()) {
    key = program + '\0' + options + '\0' + fingerprint_;
    path = (fs::path(dir_) / (sha256_hex(key) + ".pjrt")).string();
    try {
      if (auto exe = read_disk(path, key, writable)) return exe;
    } catch (const pjrt::Error&) {
      throw;  // the plugin refused (a forked child): not the entry's fault
    } catch (const std::exception& e) {  // never let the disk tier fail a compile
      warn_("torch_tpu: compile cache entry " + path + " could not be read (" + e.what() + "); recompiling");
      metrics::add("cache.disk_unreadable");
      writable = false;
    }
  }
  if (compiles_forbidden)
    throw pjrt::Error(pjrt::abi::ErrorCode::FAILED_PRECONDITION,
                      "tpu: a new program must be compiled inside torch_tpu.no_recompile(): " +
                          (origin.empty() ? std::string("(origin unknown)") : origin) +
                          ". Warm up with the same shapes and arguments first, or leave the block.");
  if (!dump_dir_.empty()) dump(program, program + '\0' + options, origin);
  auto t0 = std::chrono::steady_clock::now();
  std::shared_ptr<pjrt::Executable> exe = client_.compile(program, options);
  double secs = seconds_since(t0);
  metrics::add("compiles");
  metrics::add("compile_seconds", secs);
  if (!origin.empty()) metrics::add("compiles_by:" + origin);
  if (writable) {
    try {
      write_disk(path, key, exe->serialize());
    } catch (const std::exception& e) {
      warn_("torch_tpu: cannot write compile cache entry " + path + " (" + e.what() + "); continuing without it");
    }
  }
  return exe;
}

void CompileCache::dump(const std::string& program, const std::string& key, const std::string& origin) {
  try {
    fs::create_directories(dump_dir_);
    std::string hash = sha256_hex(key).substr(0, 16);
    std::ofstream out(fs::path(dump_dir_) / (hash + ".mlir"));
    out << "// torch_tpu program " << hash << "\n// compiled for: " << origin << "\n" << program;
  } catch (const std::exception& e) {
    warn_("torch_tpu: cannot write to TORCH_TPU_DUMP_DIR=" + dump_dir_ + " (" + e.what() + ")");
  }
}

std::shared_ptr<pjrt::Executable> CompileCache::read_disk(const std::string& path, const std::string& key,
                                                          bool& writable) {
  writable = true;
  std::error_code ec;
  fs::file_status status = fs::status(path, ec);
  if (ec || status.type() == fs::file_type::not_found) return nullptr;  // a plain miss
  if (status.type() != fs::file_type::regular) {
    // a directory (or socket, fifo, ...) where an entry belongs: leave it alone, compile each time
    warn_("torch_tpu: compile cache entry " + path + " is not a regular file (" +
          (status.type() == fs::file_type::directory ? "a directory" : "a special file") +
          "); skipping it and compiling without the disk cache");
    metrics::add("cache.disk_unreadable");
    writable = false;
    return nullptr;
  }
  auto t0 = std::chrono::steady_clock::now();
  std::string data, error;
  if (!read_file(path, data, error)) {
    warn_("torch_tpu: compile cache entry " + path + " cannot be read (" + error + "); recompiling and replacing it");
    metrics::add("cache.disk_unreadable");
    return nullptr;
  }
  if (data.size() >= kMagicPrefix && std::memcmp(data.data(), kMagic, kMagicPrefix) == 0 &&
      (data.size() < sizeof(kMagic) || std::memcmp(data.data(), kMagic, sizeof(kMagic)) != 0)) {
    metrics::add("cache.disk_old_format");  // written by another version of torch_tpu: quietly replaced
    return nullptr;
  }
  uint64_t key_size = 0, payload_size = 0;
  bool ok = data.size() >= kHeader && std::memcmp(data.data(), kMagic, sizeof(kMagic)) == 0;
  if (ok) {
    std::memcpy(&key_size, data.data() + sizeof(kMagic), 8);
    std::memcpy(&payload_size, data.data() + sizeof(kMagic) + 8, 8);
    ok = key_size <= data.size() - kHeader && payload_size == data.size() - kHeader - key_size &&
         payload_size > 0;
  }
  std::string_view body = ok ? std::string_view(data).substr(kHeader) : std::string_view();
  if (!ok || sha256(body) != data.substr(sizeof(kMagic) + 16, 32)) {
    warn_("torch_tpu: compile cache entry " + path + " is corrupt; recompiling and overwriting it");
    metrics::add("cache.disk_corrupt");
    return nullptr;
  }
  if (body.substr(0, key_size) != key) {
    // intact, but written for another program (a copied or renamed file, a hash collision)
    warn_("torch_tpu: compile cache entry " + path +
          " was written for a different program; recompiling and overwriting it");
    metrics::add("cache.disk_key_mismatch");
    return nullptr;
  }
  try {
    std::shared_ptr<pjrt::Executable> exe = client_.deserialize(std::string(body.substr(key_size)));
    metrics::add("cache.disk_hits");
    metrics::add("cache.disk_load_seconds", seconds_since(t0));
    return exe;
  } catch (const pjrt::Error& e) {
    if (pjrt::Plugin::in_forked_child()) throw;
    warn_("torch_tpu: compile cache entry " + path + " could not be loaded (" + e.what() +
          "); recompiling and overwriting it");
    metrics::add("cache.disk_corrupt");
    return nullptr;
  }
}

void CompileCache::write_disk(const std::string& path, const std::string& key, const std::string& bytes) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  std::ostringstream tmp_name;
  tmp_name << path << ".tmp." << getpid() << "." << std::random_device{}();
  std::string tmp = tmp_name.str();
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    uint64_t key_size = key.size(), payload_size = bytes.size();
    out.write(kMagic, sizeof(kMagic));
    out.write(reinterpret_cast<const char*>(&key_size), 8);
    out.write(reinterpret_cast<const char*>(&payload_size), 8);
    out << sha256(key + bytes) << key << bytes;
    if (!out) {
      warn_("torch_tpu: cannot write compile cache entry " + tmp + "; continuing without it");
      fs::remove(tmp, ec);
      return;
    }
  }
  fs::rename(tmp, path, ec);  // atomic: readers see the old entry or the whole new one
  if (ec) {
    warn_("torch_tpu: cannot replace compile cache entry " + path + " (" + ec.message() + "); continuing without it");
    fs::remove(tmp, ec);
  }
}

}  // namespace tpu
