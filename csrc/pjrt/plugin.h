// A loaded PJRT plugin: the dlopen'ed library and its PJRT_Api table.
// Every call into the plugin goes through Plugin::call, which checks that the function exists
// in this plugin's table and turns a returned PJRT_Error into a pjrt::Error (the one place
// where plugin errors cross into C++).
#pragma once
#include <map>
#include <stdexcept>
#include <string>

#include "pjrt/c_api.h"

namespace tpu::pjrt {

class Error : public std::runtime_error {
 public:
  Error(abi::ErrorCode code, const std::string& msg) : std::runtime_error(msg), code(code) {}
  abi::ErrorCode code;
};

const char* error_code_name(abi::ErrorCode code);

class Plugin {
 public:
  // Loads (once per path, never unloaded) and initializes the plugin. Throws pjrt::Error with
  // a message saying what to do when the file is missing or speaks another API major version.
  static const Plugin& load(const std::string& path);

  bool has(abi::Fn fn) const;

  // True in a child forked after a plugin was loaded in this process (set by a pthread_atfork
  // handler). A plugin's threads do not survive fork, so in such a child every call is refused
  // with kForkMessage (never made: it could hang) and RAII destructors just leak their handles.
  static bool in_forked_child();
  static const char* const kForkMessage;

  template <class Args>
  void call(abi::Fn fn, Args& args) const {
    args.h.struct_size = sizeof(Args);
    args.h.extension_start = nullptr;
    check(reinterpret_cast<abi::Error* (*)(Args*)>(function(fn))(&args));
  }
  // Throws (and frees) `err` if non-null.
  void check(abi::Error* err) const;
  // Frees `err` and returns its message (empty for null).
  std::string take_message(abi::Error* err) const;

  std::string path;
  int major = 0, minor = 0;
  std::map<std::string, std::string> attributes;  // xla_version, stablehlo_current_version, ...

 private:
  void* function(abi::Fn fn) const;
  const abi::Api* api_ = nullptr;
};

}  // namespace tpu::pjrt
