// tpu random number generators: a seed and a counter per device. Every random op draws a fresh
// (seed, counter) pair and passes both as runtime operands, so reseeding never recompiles and
// torch.manual_seed makes runs reproducible.
#pragma once
#include <ATen/core/Generator.h>

#include <utility>

namespace tpu::aten {

const at::Generator& default_generator(int device);
at::Generator make_generator(int device);
// (seed, counter) for one random op from `gen` (or the device's default when undefined).
std::pair<uint64_t, uint64_t> next_random(at::Generator gen, int device);

}  // namespace tpu::aten
