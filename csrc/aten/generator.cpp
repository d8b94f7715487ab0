#include "aten/generator.h"

#include <ATen/Utils.h>
#include <c10/core/GeneratorImpl.h>
#include <c10/util/Exception.h>

#include <cstring>
#include <mutex>
#include <vector>

#include "aten/device.h"

namespace tpu::aten {
namespace {

struct Generator final : c10::GeneratorImpl {
  explicit Generator(int device)
      : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, device),
                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)) {}
  void set_current_seed(uint64_t seed) override { seed_ = seed; counter_ = 0; }
  void set_offset(uint64_t offset) override { counter_ = offset; }
  uint64_t get_offset() const override { return counter_; }
  uint64_t current_seed() const override { return seed_; }
  uint64_t seed() override {
    seed_ = c10::detail::getNonDeterministicRandom();
    counter_ = 0;
    return seed_;
  }
  // State: 16 bytes, seed then counter (what get_rng_state / set_rng_state carry).
  void set_state(const c10::TensorImpl& state) override {
    TORCH_CHECK(state.numel() == 16 && state.dtype() == at::kByte, "tpu generator state must be 16 bytes");
    std::memcpy(&seed_, state.data(), 8);
    std::memcpy(&counter_, static_cast<const char*>(state.data()) + 8, 8);
  }
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override {
    auto t = at::detail::empty_cpu({16}, at::kByte, std::nullopt, std::nullopt, std::nullopt, std::nullopt);
    std::memcpy(t.data_ptr(), &seed_, 8);
    std::memcpy(static_cast<char*>(t.data_ptr()) + 8, &counter_, 8);
    return t.getIntrusivePtr();
  }
  std::pair<uint64_t, uint64_t> next() { return {seed_, counter_++}; }
  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }

 private:
  Generator* clone_impl() const override {
    auto* g = new Generator(device().index());
    g->seed_ = seed_;
    g->counter_ = counter_;
    return g;
  }
  uint64_t seed_ = c10::default_rng_seed_val, counter_ = 0;
};

}  // namespace

const at::Generator& default_generator(int device) {
  static std::mutex mu;
  static std::vector<at::Generator> gens;
  std::lock_guard<std::mutex> lock(mu);
  if (gens.empty())
    for (int d = 0; d < std::max(device_count(), 1); ++d) gens.push_back(at::make_generator<Generator>(d));
  TORCH_CHECK(device >= 0 && device < static_cast<int>(gens.size()), "tpu: no device ", device);
  return gens[device];
}

at::Generator make_generator(int device) { return at::make_generator<Generator>(device); }

std::pair<uint64_t, uint64_t> next_random(at::Generator gen, int device) {
  if (!gen.defined()) gen = default_generator(device);
  std::lock_guard<std::mutex> lock(gen.mutex());
  return at::check_generator<Generator>(gen)->next();
}

}  // namespace tpu::aten
