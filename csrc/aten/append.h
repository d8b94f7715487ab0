// aten::cat on tpu: growing sequences get spare capacity (see append.cpp); the rest goes to `dispatch`.
#pragma once
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

namespace tpu::aten {

void cat(const c10::OperatorHandle& op, torch::jit::Stack* stack);

}  // namespace tpu::aten
