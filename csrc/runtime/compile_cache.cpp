#include "runtime/compile_cache.h"

#include <unistd.h>

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
// Entry layout: magic, 8-byte payload size, 32-byte SHA-256 of the payload, payload.
constexpr char kMagic[8] = {'T', 'P', 'U', 'E', 'X', 'E', '1', '\n'};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

CompileCache::CompileCache(const pjrt::Client& client, std::string disk_dir, std::string fingerprint,
                           WarnFn warn)
    : client_(client), dir_(std::move(disk_dir)), fingerprint_(std::move(fingerprint)),
      options_(pjrt::Client::default_compile_options()), warn_(std::move(warn)) {
  const char* n = std::getenv("TORCH_TPU_CACHE_MEMORY_ENTRIES");
  capacity_ = n && std::atoll(n) > 0 ? static_cast<size_t>(std::atoll(n)) : 4096;
}

std::shared_ptr<const Compiled> CompileCache::get(const std::string& key,
                                                  const std::function<Program()>& make_program,
                                                  const std::string& origin) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = memory_.find(key); it != memory_.end()) {
      metrics::add("cache.memory_hits");
      recent_.splice(recent_.begin(), recent_, it->second.at);
      return it->second.compiled;
    }
  }
  // Unlocked: making a program may run other ops (a rejected call's error comes from CPU's kernel run
  // on copies of device tensors). Two threads missing the same key both compile; the first one stays.
  Program program = make_program();
  auto compiled = std::make_shared<const Compiled>(
      Compiled{load_or_compile(program.text, origin), main_parameters(program.text), std::move(program.results)});
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = memory_.find(key); it != memory_.end()) return it->second.compiled;
  recent_.push_front(key);
  memory_.emplace(key, Entry{compiled, recent_.begin()});
  while (memory_.size() > capacity_) {  // in-flight executions keep their executable alive
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

std::shared_ptr<pjrt::Executable> CompileCache::load_or_compile(const std::string& program,
                                                                const std::string& origin) {
  std::string path;
  if (!dir_.empty()) {
    std::string id = sha256_hex(program + '\0' + options_ + '\0' + fingerprint_);
    path = (fs::path(dir_) / (id + ".pjrt")).string();
    if (auto exe = read_disk(path)) return exe;
  }
  auto t0 = std::chrono::steady_clock::now();
  std::shared_ptr<pjrt::Executable> exe = client_.compile(program, options_);
  double secs = seconds_since(t0);
  metrics::add("compiles");
  metrics::add("compile_seconds", secs);
  if (!origin.empty()) metrics::add("compiles_by:" + origin);
  if (!path.empty()) write_disk(path, exe->serialize());
  return exe;
}

std::shared_ptr<pjrt::Executable> CompileCache::read_disk(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return nullptr;
  auto t0 = std::chrono::steady_clock::now();
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t header = sizeof(kMagic) + 8 + 32;
  uint64_t size = 0;
  if (data.size() >= header) std::memcpy(&size, data.data() + sizeof(kMagic), 8);
  std::string_view payload;
  if (data.size() >= header && size == data.size() - header) payload = std::string_view(data).substr(header);
  if (payload.empty() || std::memcmp(data.data(), kMagic, sizeof(kMagic)) != 0 ||
      sha256(payload) != data.substr(sizeof(kMagic) + 8, 32)) {
    warn_("torch_tpu: compile cache entry " + path + " is corrupt; recompiling and overwriting it");
    metrics::add("cache.disk_corrupt");
    return nullptr;
  }
  try {
    std::shared_ptr<pjrt::Executable> exe = client_.deserialize(std::string(payload));
    metrics::add("cache.disk_hits");
    metrics::add("cache.disk_load_seconds", seconds_since(t0));
    return exe;
  } catch (const pjrt::Error& e) {
    warn_("torch_tpu: compile cache entry " + path + " could not be loaded (" + e.what() +
          "); recompiling and overwriting it");
    metrics::add("cache.disk_corrupt");
    return nullptr;
  }
}

void CompileCache::write_disk(const std::string& path, const std::string& bytes) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  std::ostringstream tmp_name;
  tmp_name << path << ".tmp." << getpid() << "." << std::random_device{}();
  std::string tmp = tmp_name.str();
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    uint64_t size = bytes.size();
    out.write(kMagic, sizeof(kMagic));
    out.write(reinterpret_cast<const char*>(&size), 8);
    out << sha256(bytes) << bytes;
    if (!out) {
      warn_("torch_tpu: cannot write compile cache entry " + tmp + "; continuing without it");
      fs::remove(tmp, ec);
      return;
    }
  }
  fs::rename(tmp, path, ec);  // atomic: readers see the old entry or the whole new one
  if (ec) fs::remove(tmp, ec);
}

}  // namespace tpu
