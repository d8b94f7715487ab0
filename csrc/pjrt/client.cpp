#include "pjrt/client.h"

#include <algorithm>
#include <cstring>

namespace tpu::pjrt {
using abi::Fn;

namespace {
// (our dtype, PJRT type) pairs; the one place the two enums meet.
constexpr std::pair<DType, abi::BufferType> kTypes[] = {
    {DType::Pred, abi::BufferType::PRED}, {DType::S8, abi::BufferType::S8},
    {DType::S16, abi::BufferType::S16}, {DType::S32, abi::BufferType::S32},
    {DType::S64, abi::BufferType::S64}, {DType::U8, abi::BufferType::U8},
    {DType::U16, abi::BufferType::U16}, {DType::U32, abi::BufferType::U32},
    {DType::U64, abi::BufferType::U64}, {DType::F16, abi::BufferType::F16},
    {DType::BF16, abi::BufferType::BF16}, {DType::F32, abi::BufferType::F32},
    {DType::F64, abi::BufferType::F64}, {DType::C64, abi::BufferType::C64},
    {DType::C128, abi::BufferType::C128}, {DType::F8E5M2, abi::BufferType::F8E5M2},
    {DType::F8E4M3FN, abi::BufferType::F8E4M3FN}, {DType::F8E5M2FNUZ, abi::BufferType::F8E5M2FNUZ},
    {DType::F8E4M3FNUZ, abi::BufferType::F8E4M3FNUZ}, {DType::F8E8M0FNU, abi::BufferType::F8E8M0FNU},
};

int64_t num_elements(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) throw Error(abi::ErrorCode::INVALID_ARGUMENT, "negative dimension " + std::to_string(d));
    n *= d;
  }
  return n;
}

void raise_to(std::atomic<int64_t>& peak, int64_t value) {
  int64_t seen = peak.load(std::memory_order_relaxed);
  while (value > seen && !peak.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {
  }
}

void append_varint(std::string& out, uint64_t v) {
  do {
    uint8_t byte = v & 0x7f;
    v >>= 7;
    out.push_back(static_cast<char>(byte | (v ? 0x80 : 0)));
  } while (v);
}
}  // namespace

abi::BufferType to_buffer_type(DType t) {
  for (auto [ours, theirs] : kTypes)
    if (ours == t) return theirs;
  // Unreachable for a valid DType; guards the plugin, which aborts on an invalid type.
  throw Error(abi::ErrorCode::INVALID_ARGUMENT, "invalid dtype");
}

DType from_buffer_type(abi::BufferType t) {
  for (auto [ours, theirs] : kTypes)
    if (theirs == t) return ours;
  throw Error(abi::ErrorCode::UNIMPLEMENTED,
              "PJRT buffer type " + std::to_string(static_cast<int>(t)) + " has no torch dtype");
}

// ---- Event

Event& Event::operator=(Event&& o) noexcept {
  std::swap(plugin_, o.plugin_);
  std::swap(event_, o.event_);
  return *this;
}

Event::~Event() {
  if (!event_) return;
  abi::Event_Destroy_Args a{};
  a.event = event_;
  try { plugin_->call(Fn::Event_Destroy, a); } catch (const Error&) {}
}

void Event::await() {
  if (!event_) return;
  abi::Event_Await_Args a{};
  a.event = event_;
  plugin_->call(Fn::Event_Await, a);
}

bool Event::is_ready() const {
  if (!event_) return true;
  abi::Event_IsReady_Args a{};
  a.event = event_;
  plugin_->call(Fn::Event_IsReady, a);
  return a.is_ready;
}

void Event::on_ready(std::function<void(const std::string&)> done) {
  if (!event_) return done("");
  struct Ctx { const Plugin* plugin; std::function<void(const std::string&)> done; };
  abi::Event_OnReady_Args a{};
  a.event = event_;
  a.user_arg = new Ctx{plugin_, std::move(done)};
  a.callback = [](abi::Error* err, void* arg) {
    std::unique_ptr<Ctx> ctx(static_cast<Ctx*>(arg));
    ctx->done(ctx->plugin->take_message(err));
  };
  plugin_->call(Fn::Event_OnReady, a);
}

// ---- ClientState / Buffer

int ClientState::device_index(abi::Device* device) const {
  for (size_t i = 0; i < devices.size(); ++i)
    if (devices[i] == device) return static_cast<int>(i);
  return -1;
}

ClientState::~ClientState() {
  abi::Client_Destroy_Args a{};
  a.client = client;
  try { plugin->call(Fn::Client_Destroy, a); } catch (const Error&) {}
}

Buffer::Buffer(ClientRef client, abi::Buffer* buffer) : client_(std::move(client)), buffer_(buffer) {
  if (!buffer_ || !client_ || !client_->counters) return;
  try {  // accounting never fails the buffer: an unknown device or size is just not counted
    abi::Buffer_Device_Args d{};
    d.buffer = buffer_;
    client_->plugin->call(Fn::Buffer_Device, d);
    device_index_ = client_->device_index(d.device);
    if (device_index_ < 0) return;
    abi::Buffer_OnDeviceSizeInBytes_Args n{};
    n.buffer = buffer_;
    client_->plugin->call(Fn::Buffer_OnDeviceSizeInBytes, n);
    counted_ = static_cast<int64_t>(n.size);
  } catch (const Error&) {
    device_index_ = -1;
    counted_ = 0;
    return;
  }
  BufferCounters& c = client_->counters[device_index_];
  raise_to(c.peak_bytes, c.bytes.fetch_add(counted_, std::memory_order_relaxed) + counted_);
  raise_to(c.peak_buffers, c.buffers.fetch_add(1, std::memory_order_relaxed) + 1);
  c.allocs.fetch_add(1, std::memory_order_relaxed);
  c.bytes_allocated.fetch_add(counted_, std::memory_order_relaxed);
}

void Buffer::uncount() const {
  if (device_index_ < 0 || !client_ || !client_->counters) return;
  BufferCounters& c = client_->counters[device_index_];
  c.bytes.fetch_sub(counted_, std::memory_order_relaxed);
  c.buffers.fetch_sub(1, std::memory_order_relaxed);
  c.frees.fetch_add(1, std::memory_order_relaxed);
  c.bytes_freed.fetch_add(counted_, std::memory_order_relaxed);
  device_index_ = -1;
  counted_ = 0;
}

Buffer::~Buffer() {
  if (!buffer_) return;
  uncount();
  abi::Buffer_Destroy_Args a{};
  a.buffer = buffer_;
  try { client_->plugin->call(Fn::Buffer_Destroy, a); } catch (const Error&) {}
}

DType Buffer::dtype() const {
  abi::Buffer_ElementType_Args a{};
  a.buffer = buffer_;
  client_->plugin->call(Fn::Buffer_ElementType, a);
  return from_buffer_type(a.type);
}

std::vector<int64_t> Buffer::dims() const {
  abi::Buffer_Dimensions_Args a{};
  a.buffer = buffer_;
  client_->plugin->call(Fn::Buffer_Dimensions, a);
  return {a.dims, a.dims + a.num_dims};
}

size_t Buffer::on_device_bytes() const {
  abi::Buffer_OnDeviceSizeInBytes_Args a{};
  a.buffer = buffer_;
  client_->plugin->call(Fn::Buffer_OnDeviceSizeInBytes, a);
  return a.size;
}

abi::Device* Buffer::device() const {
  abi::Buffer_Device_Args a{};
  a.buffer = buffer_;
  client_->plugin->call(Fn::Buffer_Device, a);
  return a.device;
}

bool Buffer::is_deleted() const {
  abi::Buffer_IsDeleted_Args a{};
  a.buffer = buffer_;
  client_->plugin->call(Fn::Buffer_IsDeleted, a);
  return a.is_deleted;
}

Event Buffer::ready_event() const {
  abi::Buffer_ReadyEvent_Args a{};
  a.buffer = buffer_;
  client_->plugin->call(Fn::Buffer_ReadyEvent, a);
  return Event(client_->plugin, a.event);
}

Event Buffer::to_host_async(void* dst, size_t size) const {
  size_t need = num_elements(dims()) * byte_size(dtype());
  if (size != need)
    throw Error(abi::ErrorCode::INVALID_ARGUMENT, "device-to-host copy: destination holds " +
                std::to_string(size) + " bytes, buffer needs " + std::to_string(need));
  abi::Buffer_ToHostBuffer_Args a{};
  a.src = buffer_;
  a.dst = dst;
  a.dst_size = size;
  client_->plugin->call(Fn::Buffer_ToHostBuffer, a);
  return Event(client_->plugin, a.event);
}

Buffer Buffer::copy_to_device(abi::Device* device) const {
  abi::Buffer_CopyToDevice_Args a{};
  a.buffer = buffer_;
  a.dst_device = device;
  client_->plugin->call(Fn::Buffer_CopyToDevice, a);
  return Buffer(client_, a.dst_buffer);
}

// ---- Executable

Executable::Executable(ClientRef client, abi::LoadedExecutable* exe)
    : client_(std::move(client)), exe_(exe) {
  abi::LoadedExecutable_GetExecutable_Args g{};
  g.loaded = exe_;
  client_->plugin->call(Fn::LoadedExecutable_GetExecutable, g);
  abi::Executable_NumOutputs_Args n{};
  n.executable = g.executable;
  client_->plugin->call(Fn::Executable_NumOutputs, n);
  num_outputs_ = n.num_outputs;
  abi::Executable_Destroy_Args d{};
  d.executable = g.executable;
  client_->plugin->call(Fn::Executable_Destroy, d);
}

Executable::~Executable() {
  abi::LoadedExecutable_Destroy_Args a{};
  a.executable = exe_;
  try { client_->plugin->call(Fn::LoadedExecutable_Destroy, a); } catch (const Error&) {}
}

std::string Executable::serialize() const {
  abi::LoadedExecutable_GetExecutable_Args g{};
  g.loaded = exe_;
  client_->plugin->call(Fn::LoadedExecutable_GetExecutable, g);
  abi::Executable_Serialize_Args s{};
  s.executable = g.executable;
  std::string out;
  try {
    client_->plugin->call(Fn::Executable_Serialize, s);
    out.assign(s.bytes, s.size);
  } catch (...) {
    abi::Executable_Destroy_Args d{};
    d.executable = g.executable;
    client_->plugin->call(Fn::Executable_Destroy, d);
    throw;
  }
  if (s.deleter) s.deleter(s.serialized);
  abi::Executable_Destroy_Args d{};
  d.executable = g.executable;
  client_->plugin->call(Fn::Executable_Destroy, d);
  return out;
}

std::vector<Buffer> Executable::execute(const std::vector<const Buffer*>& args, abi::Device* device,
                                        const std::vector<bool>& donated, Event* done) const {
  std::vector<abi::Buffer*> arg_handles;
  std::vector<int64_t> keep;
  for (size_t i = 0; i < args.size(); ++i) {
    arg_handles.push_back(args[i]->get());
    if (i >= donated.size() || !donated[i]) keep.push_back(static_cast<int64_t>(i));
  }
  std::vector<abi::Buffer*> outs(num_outputs_, nullptr);
  abi::Buffer* const* arg_list = arg_handles.data();
  abi::Buffer** out_list = outs.data();
  abi::Event* event = nullptr;

  abi::ExecuteOptions opts{};
  opts.h.struct_size = sizeof(opts);
  opts.non_donatable_input_indices = keep.data();
  opts.num_non_donatable_input_indices = keep.size();
  abi::LoadedExecutable_Execute_Args a{};
  a.executable = exe_;
  a.options = &opts;
  a.argument_lists = &arg_list;
  a.num_devices = 1;
  a.num_args = args.size();
  a.output_lists = &out_list;
  a.device_complete_events = done ? &event : nullptr;
  a.execute_device = device;
  client_->plugin->call(Fn::LoadedExecutable_Execute, a);
  for (size_t i = 0; i < args.size() && i < donated.size(); ++i) {
    if (!donated[i] || args[i]->device_index() < 0) continue;
    try {
      if (args[i]->is_deleted()) args[i]->uncount();  // its memory now belongs to an output
    } catch (const Error&) {
    }
  }

  std::vector<Buffer> result;
  result.reserve(outs.size());
  for (abi::Buffer* b : outs) result.emplace_back(client_, b);
  if (done) *done = Event(client_->plugin, event);
  return result;
}

// ---- Client

std::vector<abi::NamedValue> Client::encode_options(const std::vector<Option>& options) {
  std::vector<abi::NamedValue> values(options.size());
  for (size_t i = 0; i < options.size(); ++i) {
    const Option& o = options[i];
    abi::NamedValue& v = values[i];
    v.h.struct_size = sizeof(v);
    v.h.extension_start = nullptr;
    v.name = o.name.c_str();
    v.name_size = o.name.size();
    v.value_size = 1;
    switch (o.kind) {
      case Option::Int: v.type = abi::NamedValueType::Int64; v.int64_value = o.i; break;
      case Option::Bool: v.type = abi::NamedValueType::Bool; v.bool_value = o.b; break;
      case Option::Float: v.type = abi::NamedValueType::Float; v.float_value = o.f; break;
      case Option::String:
        v.type = abi::NamedValueType::String;
        v.string_value = o.s.c_str();
        v.value_size = o.s.size();
        break;
      case Option::Int64List:
        v.type = abi::NamedValueType::Int64List;
        v.int64_array_value = o.list.data();
        v.value_size = o.list.size();
        break;
    }
  }
  return values;
}

Client::Client(const Plugin& plugin, const std::vector<Option>& options, KeyValueStoreRef kv_store) {
  std::vector<abi::NamedValue> values = encode_options(options);
  abi::Client_Create_Args a{};
  a.create_options = values.data();
  a.num_options = values.size();
  if (kv_store) {
    a.kv_get_callback = &kv::get_callback;
    a.kv_get_user_arg = kv_store.get();
    a.kv_put_callback = &kv::put_callback;
    a.kv_put_user_arg = kv_store.get();
    if (kv_store->try_get) {
      a.kv_try_get_callback = &kv::try_get_callback;
      a.kv_try_get_user_arg = kv_store.get();
    }
  }
  plugin.call(Fn::Client_Create, a);
  state_.reset(new ClientState{&plugin, a.client, {}, nullptr, std::move(kv_store)});

  abi::Client_AddressableDevices_Args d{};
  d.client = a.client;
  plugin.call(Fn::Client_AddressableDevices, d);
  devices_.assign(d.devices, d.devices + d.num_devices);
  state_->devices = devices_;
  state_->counters.reset(new BufferCounters[devices_.size()]);
}

AllocationStats Client::allocation_stats(int index) const {
  if (index < 0 || index >= static_cast<int>(devices_.size()))
    throw Error(abi::ErrorCode::INVALID_ARGUMENT, "device index " + std::to_string(index) + " out of range (" +
                                                      std::to_string(devices_.size()) + " devices)");
  const BufferCounters& c = state_->counters[index];
  AllocationStats s;
  s.bytes = c.bytes.load();
  s.peak_bytes = std::max(c.peak_bytes.load(), s.bytes);
  s.buffers = c.buffers.load();
  s.peak_buffers = std::max(c.peak_buffers.load(), s.buffers);
  s.allocs = c.allocs.load();
  s.frees = c.frees.load();
  s.bytes_allocated = c.bytes_allocated.load();
  s.bytes_freed = c.bytes_freed.load();
  return s;
}

void Client::reset_peak_allocation(int index) {
  allocation_stats(index);  // range check
  BufferCounters& c = state_->counters[index];
  c.peak_bytes.store(c.bytes.load());
  c.peak_buffers.store(c.buffers.load());
}

void Client::reset_accumulated_allocation(int index) {
  allocation_stats(index);
  BufferCounters& c = state_->counters[index];
  c.allocs.store(0);
  c.frees.store(0);
  c.bytes_allocated.store(0);
  c.bytes_freed.store(0);
}

std::string Client::platform_name() const {
  abi::Client_String_Args a{};
  a.client = state_->client;
  state_->plugin->call(Fn::Client_PlatformName, a);
  return {a.str, a.size};
}

std::string Client::platform_version() const {
  abi::Client_String_Args a{};
  a.client = state_->client;
  state_->plugin->call(Fn::Client_PlatformVersion, a);
  return {a.str, a.size};
}

DeviceInfo Client::device_info(abi::Device* device) const {
  const Plugin& p = *state_->plugin;
  abi::Device_GetDescription_Args g{};
  g.device = device;
  p.call(Fn::Device_GetDescription, g);
  abi::DeviceDescription_Id_Args id{};
  id.description = g.description;
  p.call(Fn::DeviceDescription_Id, id);
  abi::DeviceDescription_String_Args kind{}, debug{};
  kind.description = debug.description = g.description;
  p.call(Fn::DeviceDescription_Kind, kind);
  p.call(Fn::DeviceDescription_DebugString, debug);
  return {id.id, {kind.str, kind.size}, {debug.str, debug.size}};
}

MemoryStats Client::memory_stats(abi::Device* device) const {
  MemoryStats out;
  abi::Device_MemoryStats_Args a{};
  a.device = device;
  try {
    state_->plugin->call(Fn::Device_MemoryStats, a);
  } catch (const Error&) {
    return out;  // the CPU plugin does not track device memory
  }
  out.reported = true;
  out.bytes_in_use = a.bytes_in_use;
  if (a.peak_bytes_in_use.is_set) out.peak_bytes_in_use = a.peak_bytes_in_use.value;
  if (a.bytes_limit.is_set) out.bytes_limit = a.bytes_limit.value;
  if (a.bytes_reserved.is_set) out.bytes_reserved = a.bytes_reserved.value;
  if (a.peak_bytes_reserved.is_set) out.peak_bytes_reserved = a.peak_bytes_reserved.value;
  if (a.pool_bytes.is_set) out.pool_bytes = a.pool_bytes.value;
  if (a.peak_pool_bytes.is_set) out.peak_pool_bytes = a.peak_pool_bytes.value;
  return out;
}

Buffer Client::to_device(const void* data, DType dtype, const std::vector<int64_t>& dims,
                         abi::Device* device, const std::vector<int64_t>* byte_strides) const {
  num_elements(dims);  // validates before the plugin sees them
  if (byte_strides && byte_strides->size() != dims.size())
    throw Error(abi::ErrorCode::INVALID_ARGUMENT, "host-to-device copy: strides and dims differ in rank");
  abi::Client_BufferFromHostBuffer_Args a{};
  a.client = state_->client;
  a.data = data;
  a.type = to_buffer_type(dtype);
  a.dims = dims.data();
  a.num_dims = dims.size();
  if (byte_strides) {
    a.byte_strides = byte_strides->data();
    a.num_byte_strides = byte_strides->size();
  }
  a.host_buffer_semantics = abi::HostBufferSemantics::ImmutableOnlyDuringCall;
  a.device = device;
  state_->plugin->call(Fn::Client_BufferFromHostBuffer, a);
  Event(state_->plugin, a.done_with_host_buffer).await();
  return Buffer(state_, a.buffer);
}

std::unique_ptr<Executable> Client::compile(const std::string& mlir, const std::string& options) const {
  abi::Program prog{};
  prog.h.struct_size = sizeof(prog);
  prog.code = mlir.data();
  prog.code_size = mlir.size();
  prog.format = "mlir";
  prog.format_size = 4;
  abi::Client_Compile_Args a{};
  a.client = state_->client;
  a.program = &prog;
  a.compile_options = options.data();
  a.compile_options_size = options.size();
  state_->plugin->call(Fn::Client_Compile, a);
  return std::make_unique<Executable>(state_, a.executable);
}

std::unique_ptr<Executable> Client::deserialize(const std::string& bytes) const {
  abi::Executable_DeserializeAndLoad_Args a{};
  a.client = state_->client;
  a.serialized = bytes.data();
  a.size = bytes.size();
  state_->plugin->call(Fn::Executable_DeserializeAndLoad, a);
  return std::make_unique<Executable>(state_, a.loaded);
}

std::string Client::default_compile_options() {
  // CompileOptionsProto { executable_build_options (3) : ExecutableBuildOptionsProto {
  //   num_replicas (4) = 1, num_partitions (5) = 1 }, compile_portable_executable (4) = true }.
  // Empty options abort the CPU plugin; a portable executable runs on any device we name.
  std::string build;
  append_varint(build, (4 << 3) | 0);
  append_varint(build, 1);
  append_varint(build, (5 << 3) | 0);
  append_varint(build, 1);
  std::string out;
  append_varint(out, (3 << 3) | 2);
  append_varint(out, build.size());
  out += build;
  append_varint(out, (4 << 3) | 0);
  append_varint(out, 1);
  return out;
}

std::string Client::option_overrides(const std::vector<std::pair<std::string, OptionValue>>& overrides) {
  auto bytes = [](int field, const std::string& v) {
    std::string out;
    append_varint(out, (static_cast<uint64_t>(field) << 3) | 2);
    append_varint(out, v.size());
    return out + v;
  };
  std::string out;
  for (const auto& [name, value] : overrides) {
    std::string v;  // OptionOverrideProto { oneof: string 1, bool 2, int 3, double 4 }
    if (auto* s = std::get_if<std::string>(&value)) {
      v = bytes(1, *s);
    } else if (auto* b = std::get_if<bool>(&value)) {
      append_varint(v, (2 << 3) | 0);
      append_varint(v, *b);
    } else if (auto* i = std::get_if<int64_t>(&value)) {
      append_varint(v, (3 << 3) | 0);
      append_varint(v, static_cast<uint64_t>(*i));
    } else {
      double d = std::get<double>(value);
      append_varint(v, (4 << 3) | 1);
      v.append(reinterpret_cast<const char*>(&d), sizeof(d));
    }
    out += bytes(7, bytes(1, name) + bytes(2, v));  // map entry { key 1, value 2 }
  }
  return out;
}

}  // namespace tpu::pjrt
