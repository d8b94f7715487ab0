#include "runtime/op_call.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>

#include "lower/helpers.h"
#include "runtime/metrics.h"
#include "runtime/runtime.h"

namespace tpu {
namespace {

std::atomic<bool> blocking{false};

// Events of launched programs not yet known to be complete, for synchronize().
std::mutex pending_mu;
std::vector<std::pair<int, std::shared_ptr<pjrt::Buffer>>> pending;

void track(int device, const std::shared_ptr<pjrt::Buffer>& b) {
  std::lock_guard<std::mutex> lock(pending_mu);
  if (pending.size() > 256) {  // prune what already finished
    std::vector<std::pair<int, std::shared_ptr<pjrt::Buffer>>> keep;
    for (auto& p : pending)
      if (!p.second->ready_event().is_ready()) keep.push_back(p);
    pending.swap(keep);
  }
  pending.emplace_back(device, b);
}

// Scalar operands live on the device too; the same values recur (learning rates, 1.0, 0), so
// their buffers are pooled by (device, dtype, bits).
std::shared_ptr<pjrt::Buffer> scalar_buffer(const Input& in, int device) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<pjrt::Buffer>> pool;
  char key[1 + 1 + sizeof(std::complex<double>)];
  key[0] = static_cast<char>(device);
  key[1] = static_cast<char>(in.scalar_dtype);
  std::memcpy(key + 2, &in.scalar, sizeof(in.scalar));
  std::string k(key, sizeof(key));
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = pool.find(k); it != pool.end()) return it->second;
  if (pool.size() > 4096) pool.clear();
  alignas(16) unsigned char data[16] = {};
  double re = in.scalar.real();
  switch (in.scalar_dtype) {
    case DType::F64: std::memcpy(data, &re, 8); break;
    case DType::S64: { int64_t v = static_cast<int64_t>(re); std::memcpy(data, &v, 8); break; }
    case DType::Pred: data[0] = re != 0; break;
    case DType::C128: std::memcpy(data, &in.scalar, 16); break;
    default: throw hlo::Error("scalar operand of unsupported dtype");
  }
  Runtime& rt = Runtime::get();
  auto buf = std::make_shared<pjrt::Buffer>(rt.client().to_device(data, in.scalar_dtype, {}, rt.device(device)));
  return pool[k] = buf;
}

void key_dims(std::ostringstream& k, const hlo::Dims& d) {
  for (int64_t x : d) k << x << ',';
}

// Program parameters: one per distinct storage read (inputs, and views written in part), one per
// scalar input.
struct Params {
  std::vector<int> of_input;      // input index -> parameter
  std::vector<Storage*> storage;  // parameter -> storage, or null for a scalar
  std::vector<int> input;         // parameter -> input index (scalars) or -1
  // parameter -> its storage was never written: the program uses zeros, nothing is transferred
  bool zero(size_t q) const { return storage[q] && !storage[q]->buffer; }

  int find(const Storage* st) const {
    for (size_t p = 0; p < storage.size(); ++p)
      if (storage[p] == st) return static_cast<int>(p);
    return -1;
  }
  int of_storage(Storage* st) {
    if (int q = find(st); q >= 0) return q;
    storage.push_back(st);
    input.push_back(-1);
    return static_cast<int>(storage.size() - 1);
  }
};

bool covers(const Write& w) { return w.covers(); }

Params assign_params(const OpCall& c) {
  Params p;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    if (c.inputs[i].storage) {
      p.of_input.push_back(p.of_storage(c.inputs[i].storage));
    } else {
      p.storage.push_back(nullptr);
      p.input.push_back(static_cast<int>(i));
      p.of_input.push_back(static_cast<int>(p.storage.size() - 1));
    }
  }
  for (const Write& w : c.writes)
    if (!covers(w)) p.of_storage(w.dest);
  return p;
}

void key_view(std::ostringstream& k, const lower::View& v) {
  k << static_cast<int>(v.dtype) << ':' << v.offset << ':';
  key_dims(k, v.sizes);
  k << '/';
  key_dims(k, v.strides);
}

std::string cache_key(const OpCall& c, const Params& p) {
  std::ostringstream k;
  k << c.name << '|' << static_cast<int>(c.precision) << '|' << c.out_key << '|';
  for (size_t a = 0; a < c.args.size(); ++a) {
    const lower::Arg& arg = c.args[a];
    k << static_cast<int>(arg.kind) << ':' << arg.i << ':';
    key_dims(k, arg.ints);
    for (double f : arg.floats) k << std::hexfloat << f << std::defaultfloat << ',';  // exact: 0.1 != 0.1000001
    k << arg.s;
    if (arg.kind == lower::Arg::Scalar && (c.rule->structural >> a & 1)) k << '=' << std::hexfloat << arg.f << std::defaultfloat;
    k << ';';
  }
  for (size_t q = 0; q < p.storage.size(); ++q) {
    if (p.storage[q]) k << (p.zero(q) ? "|z" : "|p") << static_cast<int>(p.storage[q]->dtype) << ':' << p.storage[q]->numel();
    else k << "|s" << static_cast<int>(c.inputs[p.input[q]].scalar_dtype);
  }
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const Input& in = c.inputs[i];
    k << "|i" << p.of_input[i];
    if (!in.storage) continue;
    if (in.view.covers(in.storage->type())) key_dims(k, in.view.sizes);
    else key_view(k, in.view);
  }
  for (const Write& w : c.writes) {
    k << "|w" << w.result << '>' << w.dest->nbytes << ':';
    if (!covers(w)) k << 'p' << p.find(w.dest) << ':';
    key_view(k, w.view);
  }
  return k.str();
}

Program build(const OpCall& c, const Params& p, std::vector<hlo::TensorType> results) {
  hlo::Module m;
  hlo::Values params(p.storage.size());
  for (size_t q = 0; q < p.storage.size(); ++q)
    if (!p.zero(q))
      params[q] = m.arg(p.storage[q] ? p.storage[q]->type() : hlo::scalar(c.inputs[p.input[q]].scalar_dtype));
  hlo::Builder& b = m.builder();
  for (size_t q = 0; q < p.storage.size(); ++q)
    if (p.zero(q)) params[q] = b.splat(p.storage[q]->type(), 0);
  hlo::Values inputs;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    hlo::Value a = params[p.of_input[i]];
    inputs.push_back(c.inputs[i].storage ? lower::read_view(b, a, c.inputs[i].view) : a);
  }
  std::vector<bool> contiguous;
  for (const Input& in : c.inputs) contiguous.push_back(!in.storage || in.view.contiguous());
  lower::Ctx ctx{b, c.args, inputs, results, c.precision, &contiguous};
  hlo::Values outs = c.rule->fn(ctx);
  if (outs.size() != results.size())
    throw hlo::Error(c.name + ": lowering returned " + std::to_string(outs.size()) + " results, expected " +
                     std::to_string(results.size()));
  for (size_t k = 0; k < outs.size(); ++k)
    if (outs[k].type != results[k])
      throw hlo::Error(c.name + ": lowering result " + std::to_string(k) + " is " + outs[k].type.str() +
                       ", expected " + results[k].str());

  hlo::Values ret;
  std::vector<bool> written(outs.size(), false);
  for (const Write& w : c.writes) written[w.result] = true;
  for (size_t k = 0; k < outs.size(); ++k)
    if (!written[k]) ret.push_back(b.reshape(outs[k], {results[k].numel()}));
  // New contents of each written storage, in order of first write; later writes build on earlier.
  std::vector<std::pair<Storage*, hlo::Value>> bases;
  for (const Write& w : c.writes) {
    hlo::Value update = lower::convert(b, outs[w.result], w.view.dtype);
    auto it = std::find_if(bases.begin(), bases.end(), [&](auto& e) { return e.first == w.dest; });
    hlo::Value base;
    if (it != bases.end()) base = it->second;
    else if (!covers(w)) base = params[p.find(w.dest)];
    hlo::Value next = covers(w) ? b.reshape(update, {w.view.numel()}) : lower::write_view(b, base, update, w.view);
    if (it != bases.end()) it->second = next;
    else bases.emplace_back(w.dest, next);
  }
  for (auto& e : bases) ret.push_back(e.second);
  m.ret(ret);
  return Program{m.str(), std::move(results)};
}

}  // namespace

void Storage::settle(DType as) {
  if (!buffer) dtype = as;
}

const std::shared_ptr<pjrt::Buffer>& Storage::materialize(DType as) {
  if (!buffer) {
    dtype = as;
    std::vector<char> zeros(static_cast<size_t>(nbytes), 0);
    Runtime& rt = Runtime::get();
    buffer = std::make_shared<pjrt::Buffer>(rt.client().to_device(zeros.data(), dtype, {numel()}, rt.device(device)));
  }
  return buffer;
}

void Storage::assign(std::shared_ptr<pjrt::Buffer> b, DType t, std::string from) {
  buffer = std::move(b);
  dtype = t;
  origin = std::move(from);
}

void set_launch_blocking(bool on) { blocking = on; }
bool launch_blocking() { return blocking; }

Launched launch(OpCall& c, const std::function<std::vector<hlo::TensorType>()>& infer_results) {
  Runtime& rt = Runtime::get();
  Params p = assign_params(c);
  for (size_t i = 0; i < c.inputs.size(); ++i)
    if (c.inputs[i].storage) c.inputs[i].storage->settle(c.inputs[i].view.dtype);
  for (const Write& w : c.writes)
    if (!w.covers()) w.dest->settle(w.view.dtype);
  std::string where = c.name + (c.origin.empty() ? "" : " at " + c.origin);
  auto compiled = rt.cache().get(cache_key(c, p), [&] { return build(c, p, infer_results()); }, where);

  std::vector<std::shared_ptr<pjrt::Buffer>> hold;
  std::vector<const pjrt::Buffer*> args;
  for (size_t q = 0; q < p.storage.size(); ++q) {
    if (p.zero(q)) continue;
    hold.push_back(p.storage[q] ? p.storage[q]->buffer : scalar_buffer(c.inputs[p.input[q]], c.device));
    args.push_back(hold.back().get());
  }
  std::vector<pjrt::Buffer> outs;
  try {
    outs = compiled->exe->execute(args, rt.device(c.device), {});
  } catch (const pjrt::Error& e) {
    throw pjrt::Error(e.code, where + ": " + e.what());
  }
  metrics::add("ops_dispatched");

  Launched result;
  result.types = compiled->results;
  std::vector<Storage*> written;
  for (const Write& w : c.writes)
    if (std::find(written.begin(), written.end(), w.dest) == written.end()) written.push_back(w.dest);
  size_t fresh = outs.size() - written.size();
  for (size_t k = 0; k < outs.size(); ++k) {
    auto buf = std::make_shared<pjrt::Buffer>(std::move(outs[k]));
    if (blocking) {
      try {
        buf->ready_event().await();
      } catch (const pjrt::Error& e) {
        throw pjrt::Error(e.code, where + " failed: " + e.what());
      }
    } else if (k + 1 == outs.size()) {
      track(c.device, buf);
    }
    if (k < fresh) {
      result.buffers.push_back(std::move(buf));
    } else {
      Storage* dest = written[k - fresh];
      DType t = dest->dtype;
      for (const Write& w : c.writes)  // a covering write decides the storage's new dtype
        if (w.dest == dest && w.covers()) t = w.view.dtype;
      dest->assign(std::move(buf), t, where);
    }
  }
  return result;
}

void synchronize(int device) {
  std::vector<std::pair<int, std::shared_ptr<pjrt::Buffer>>> waiting;
  {
    std::lock_guard<std::mutex> lock(pending_mu);
    for (auto& e : pending)
      if (device < 0 || e.first == device) waiting.push_back(e);
    pending.erase(std::remove_if(pending.begin(), pending.end(),
                                 [&](auto& e) { return device < 0 || e.first == device; }),
                  pending.end());
  }
  for (auto& e : waiting) e.second->ready_event().await();
}

}  // namespace tpu
