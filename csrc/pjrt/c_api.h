// Our declarations of the slice of the PJRT C ABI that torch_tpu uses, written from the
// published C API (xla/pjrt/c/pjrt_c_api.h, API major version 0). Only layout matters here:
// every argument struct starts with {struct_size, extension_start}; the plugin reads
// `struct_size` to learn which trailing fields we know about, so each struct below ends at the
// last field we set or read. Functions are addressed by slot in the PJRT_Api table
// (see `Fn`), and `Plugin` checks each slot against the table's size before every call.
#pragma once
#include <cstddef>
#include <cstdint>

namespace tpu::pjrt::abi {

inline constexpr int kMajorVersion = 0;
inline constexpr int kMinMinorVersion = 60;  // oldest table layout these declarations match

struct Error; struct Event; struct Client; struct Device; struct DeviceDescription;
struct Memory; struct Executable; struct LoadedExecutable; struct Buffer; struct SerializedExecutable;

struct Header { size_t struct_size; void* extension_start; };

struct ApiVersion { Header h; int major_version; int minor_version; };

// The PJRT_Api table: header, version, then function pointers in this exact order.
// The order is the ABI; entries are never reordered within a major version.
#define TPU_PJRT_FUNCTIONS(X) \
  X(Error_Destroy) X(Error_Message) X(Error_GetCode) X(Plugin_Initialize) X(Plugin_Attributes) \
  X(Event_Destroy) X(Event_IsReady) X(Event_Error) X(Event_Await) X(Event_OnReady) \
  X(Client_Create) X(Client_Destroy) X(Client_PlatformName) X(Client_ProcessIndex) \
  X(Client_PlatformVersion) X(Client_Devices) X(Client_AddressableDevices) X(Client_LookupDevice) \
  X(Client_LookupAddressableDevice) X(Client_AddressableMemories) X(Client_Compile) \
  X(Client_DefaultDeviceAssignment) X(Client_BufferFromHostBuffer) X(DeviceDescription_Id) \
  X(DeviceDescription_ProcessIndex) X(DeviceDescription_Attributes) X(DeviceDescription_Kind) \
  X(DeviceDescription_DebugString) X(DeviceDescription_ToString) X(Device_GetDescription) \
  X(Device_IsAddressable) X(Device_LocalHardwareId) X(Device_AddressableMemories) \
  X(Device_DefaultMemory) X(Device_MemoryStats) X(Memory_Id) X(Memory_Kind) X(Memory_DebugString) \
  X(Memory_ToString) X(Memory_AddressableByDevices) X(Executable_Destroy) X(Executable_Name) \
  X(Executable_NumReplicas) X(Executable_NumPartitions) X(Executable_NumOutputs) \
  X(Executable_SizeOfGeneratedCodeInBytes) X(Executable_GetCostAnalysis) \
  X(Executable_OutputMemoryKinds) X(Executable_OptimizedProgram) X(Executable_Serialize) \
  X(LoadedExecutable_Destroy) X(LoadedExecutable_GetExecutable) \
  X(LoadedExecutable_AddressableDevices) X(LoadedExecutable_Delete) X(LoadedExecutable_IsDeleted) \
  X(LoadedExecutable_Execute) X(Executable_DeserializeAndLoad) X(LoadedExecutable_Fingerprint) \
  X(Buffer_Destroy) X(Buffer_ElementType) X(Buffer_Dimensions) X(Buffer_UnpaddedDimensions) \
  X(Buffer_DynamicDimensionIndices) X(Buffer_GetMemoryLayout) X(Buffer_OnDeviceSizeInBytes) \
  X(Buffer_Device) X(Buffer_Memory) X(Buffer_Delete) X(Buffer_IsDeleted) X(Buffer_CopyToDevice) \
  X(Buffer_ToHostBuffer) X(Buffer_IsOnCpu) X(Buffer_ReadyEvent)

enum class Fn : int {
#define TPU_PJRT_ENUM(name) name,
  TPU_PJRT_FUNCTIONS(TPU_PJRT_ENUM)
#undef TPU_PJRT_ENUM
  kCount
};

struct Api {
  size_t struct_size;
  void* extension_start;
  ApiVersion version;
  void* fns[1];  // really `struct_size` bytes long; index with Fn
};
inline constexpr size_t kFnTableOffset = offsetof(Api, fns);

enum class ErrorCode : int {
  OK = 0, CANCELLED, UNKNOWN, INVALID_ARGUMENT, DEADLINE_EXCEEDED, NOT_FOUND, ALREADY_EXISTS,
  PERMISSION_DENIED, RESOURCE_EXHAUSTED, FAILED_PRECONDITION, ABORTED, OUT_OF_RANGE,
  UNIMPLEMENTED, INTERNAL, UNAVAILABLE, DATA_LOSS, UNAUTHENTICATED,
};

// PJRT_Buffer_Type values.
enum class BufferType : int {
  INVALID, PRED, S8, S16, S32, S64, U8, U16, U32, U64, F16, F32, F64, BF16, C64, C128,
  F8E5M2, F8E4M3FN, F8E4M3B11FNUZ, F8E5M2FNUZ, F8E4M3FNUZ, S4, U4, TOKEN, S2, U2,
  F8E4M3, F8E3M4, F8E8M0FNU, F4E2M1FN,
};

enum class NamedValueType : int { String = 0, Int64, Int64List, Float, Bool };

struct NamedValue {
  Header h;
  const char* name;
  size_t name_size;
  NamedValueType type;
  union { const char* string_value; int64_t int64_value; const int64_t* int64_array_value;
          float float_value; bool bool_value; };
  size_t value_size;  // elements of a list or string; 1 for a scalar
};
static_assert(sizeof(NamedValue) == 56 && offsetof(NamedValue, value_size) == 48);

struct Error_Destroy_Args { Header h; Error* error; };
struct Error_Message_Args { Header h; const Error* error; const char* message; size_t message_size; };
struct Error_GetCode_Args { Header h; const Error* error; ErrorCode code; };

struct Plugin_Initialize_Args { Header h; };
struct Plugin_Attributes_Args { Header h; const NamedValue* attributes; size_t num_attributes; };

struct Event_Destroy_Args { Header h; Event* event; };
struct Event_IsReady_Args { Header h; Event* event; bool is_ready; };
struct Event_Await_Args { Header h; Event* event; };
using OnReadyCallback = void (*)(Error* error, void* user_arg);
struct Event_OnReady_Args { Header h; Event* event; OnReadyCallback callback; void* user_arg; };

// ---- The key-value store of a distributed client (PJRT_KeyValue*Callback)
// A multi-process client (CUDA, TPU) exchanges its topology and collective ids through callbacks the
// caller passes to Client_Create. The plugin fills these argument structs itself and does NOT set
// `h.struct_size`: a callback must not read it. A failing callback returns an error made with
// `(*callback_error)(code, message, size)` (the plugin owns and frees it). A value returned by a get
// callback is the caller's allocation; the plugin copies it and then frees it with `value_deleter`.
using CallbackError = Error* (*)(ErrorCode code, const char* message, size_t message_size);
using KeyValueValueDeleter = void (*)(char* value);

struct KeyValueGetCallback_Args {  // blocking get: wait up to timeout_in_ms for the key
  Header h;
  const char* key; size_t key_size;
  int timeout_in_ms;
  CallbackError* callback_error;
  void* user_arg;
  char* value; size_t value_size;        // out
  KeyValueValueDeleter value_deleter;    // out
};
struct KeyValueTryGetCallback_Args {  // non-blocking get: NOT_FOUND at once when missing
  Header h;
  const char* key; size_t key_size;
  CallbackError* callback_error;
  void* user_arg;
  char* value; size_t value_size;        // out
  KeyValueValueDeleter value_deleter;    // out
};
struct KeyValuePutCallback_Args {
  Header h;
  const char* key; size_t key_size;
  const char* value; size_t value_size;  // alive only during the call
  CallbackError* callback_error;
  void* user_arg;
};
using KeyValueGetCallback = Error* (*)(KeyValueGetCallback_Args* args);
using KeyValueTryGetCallback = Error* (*)(KeyValueTryGetCallback_Args* args);
using KeyValuePutCallback = Error* (*)(KeyValuePutCallback_Args* args);
// The published sizes (LP64): the layout is the ABI.
static_assert(sizeof(KeyValueGetCallback_Args) == 80 && offsetof(KeyValueGetCallback_Args, callback_error) == 40);
static_assert(sizeof(KeyValueTryGetCallback_Args) == 72 && offsetof(KeyValueTryGetCallback_Args, user_arg) == 40);
static_assert(sizeof(KeyValuePutCallback_Args) == 64 && offsetof(KeyValuePutCallback_Args, callback_error) == 48);

struct Client_Create_Args {
  Header h;
  const NamedValue* create_options;
  size_t num_options;
  KeyValueGetCallback kv_get_callback; void* kv_get_user_arg;
  KeyValuePutCallback kv_put_callback; void* kv_put_user_arg;
  Client* client;  // out
  KeyValueTryGetCallback kv_try_get_callback; void* kv_try_get_user_arg;  // later than `client`
};
static_assert(offsetof(Client_Create_Args, client) == 64 && sizeof(Client_Create_Args) == 88);
struct Client_Destroy_Args { Header h; Client* client; };
struct Client_String_Args { Header h; Client* client; const char* str; size_t size; };  // PlatformName/Version
struct Client_AddressableDevices_Args { Header h; Client* client; Device* const* devices; size_t num_devices; };

struct Program { Header h; const char* code; size_t code_size; const char* format; size_t format_size; };
struct Client_Compile_Args {
  Header h; Client* client; const Program* program;
  const char* compile_options; size_t compile_options_size;
  LoadedExecutable* executable;  // out
};

enum class HostBufferSemantics : int {
  ImmutableOnlyDuringCall, ImmutableUntilTransferCompletes, ImmutableZeroCopy, MutableZeroCopy,
};
struct Client_BufferFromHostBuffer_Args {
  Header h; Client* client; const void* data; BufferType type;
  const int64_t* dims; size_t num_dims; const int64_t* byte_strides; size_t num_byte_strides;
  HostBufferSemantics host_buffer_semantics;
  Device* device; Memory* memory; void* device_layout;
  Event* done_with_host_buffer;  // out
  Buffer* buffer;                // out
};

struct DeviceDescription_Id_Args { Header h; DeviceDescription* description; int id; };
struct DeviceDescription_String_Args { Header h; DeviceDescription* description; const char* str; size_t size; };  // Kind/DebugString
struct Device_GetDescription_Args { Header h; Device* device; DeviceDescription* description; };
struct Device_MemoryStats_Args {
  Header h; Device* device;
  int64_t bytes_in_use;
  // Each optional statistic is a value followed by its is_set flag.
  struct Opt { int64_t value; bool is_set; };
  Opt peak_bytes_in_use, num_allocs, largest_alloc_size, bytes_limit, bytes_reserved,
      peak_bytes_reserved, bytes_reservable_limit, largest_free_block_bytes, pool_bytes,
      peak_pool_bytes;
};

struct Executable_Destroy_Args { Header h; Executable* executable; };
struct Executable_NumOutputs_Args { Header h; Executable* executable; size_t num_outputs; };
struct Executable_Serialize_Args {
  Header h; const Executable* executable;
  const char* bytes; size_t size;  // out, backed by `serialized`
  SerializedExecutable* serialized;
  void (*deleter)(SerializedExecutable*);
};
struct LoadedExecutable_Destroy_Args { Header h; LoadedExecutable* executable; };
struct LoadedExecutable_GetExecutable_Args { Header h; LoadedExecutable* loaded; Executable* executable; };
struct ExecuteOptions {
  Header h;
  void** send_callbacks; void** recv_callbacks; size_t num_send_ops; size_t num_recv_ops;
  int launch_id;
  const int64_t* non_donatable_input_indices; size_t num_non_donatable_input_indices;
  void* context; const char* call_location; size_t num_tasks; int* task_ids; int64_t* incarnation_ids;
};
struct LoadedExecutable_Execute_Args {
  Header h; LoadedExecutable* executable; ExecuteOptions* options;
  Buffer* const* const* argument_lists; size_t num_devices; size_t num_args;
  Buffer** const* output_lists;        // in/out
  Event** device_complete_events;      // in/out
  Device* execute_device;
};
struct Executable_DeserializeAndLoad_Args {
  Header h; Client* client; const char* serialized; size_t size;
  LoadedExecutable* loaded;  // out
  const char* overridden_compile_options; size_t overridden_compile_options_size;
};

struct Buffer_Destroy_Args { Header h; Buffer* buffer; };
struct Buffer_ElementType_Args { Header h; Buffer* buffer; BufferType type; };
struct Buffer_Dimensions_Args { Header h; Buffer* buffer; const int64_t* dims; size_t num_dims; };
struct Buffer_OnDeviceSizeInBytes_Args { Header h; Buffer* buffer; size_t size; };
struct Buffer_Device_Args { Header h; Buffer* buffer; Device* device; };
struct Buffer_CopyToDevice_Args { Header h; Buffer* buffer; Device* dst_device; Buffer* dst_buffer; };
struct Buffer_ToHostBuffer_Args { Header h; Buffer* src; void* host_layout; void* dst; size_t dst_size; Event* event; };
struct Buffer_IsDeleted_Args { Header h; Buffer* buffer; bool is_deleted; };
struct Buffer_ReadyEvent_Args { Header h; Buffer* buffer; Event* event; };

}  // namespace tpu::pjrt::abi
