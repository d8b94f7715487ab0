// The tpu device for c10: device count and current device, the device guard, PyTorch's
// PrivateUse1 hooks. The runtime (PJRT client) starts on first use through the Python initializer.
#pragma once
#include <functional>
#include <string>

namespace tpu::aten {

// Called (once, with the GIL taken) the first time the runtime is needed; it discovers the plugin
// and initializes tpu::Runtime, or throws saying what to install.
void set_runtime_initializer(std::function<void()> init);
void ensure_runtime();       // throws c10::Error with the initializer's message
int device_count();          // 0 when no runtime can start
int current_device();
void set_current_device(int d);

}  // namespace tpu::aten
