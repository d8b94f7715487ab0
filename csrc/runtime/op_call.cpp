#include "runtime/op_call.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <unordered_map>
#include <mutex>
#include <sstream>

#include "lower/helpers.h"
#include "runtime/metrics.h"
#include "runtime/runtime.h"

namespace tpu {
namespace {

std::atomic<bool> blocking{false};

// Completion events of launched programs not yet known to be complete, for synchronize(), oldest
// first. Programs on a device finish roughly in launch order, so finished ones are dropped from the
// front: the cost does not grow with the queue.
std::mutex pending_mu;
std::deque<std::pair<int, std::shared_ptr<pjrt::Event>>> pending;

void track(int device, pjrt::Event done) {
  if (!done) return;
  std::lock_guard<std::mutex> lock(pending_mu);
  while (pending.size() > 64 && pending.front().second->is_ready()) pending.pop_front();
  pending.emplace_back(device, std::make_shared<pjrt::Event>(std::move(done)));
}

// Scalar operands live on the device too; the same values recur (learning rates, 1.0, 0, view
// offsets), so their buffers are pooled by (device, dtype, bits).
std::shared_ptr<pjrt::Buffer> scalar_buffer(const Input& in, int device) {
  alignas(16) unsigned char data[16] = {};
  switch (in.scalar_dtype) {
    case DType::F64: { double re = in.scalar.real(); std::memcpy(data, &re, 8); break; }
    case DType::S64: std::memcpy(data, &in.scalar_int, 8); break;
    case DType::Pred: data[0] = in.scalar_int != 0; break;
    case DType::C128: std::memcpy(data, &in.scalar, 16); break;
    default: throw hlo::Error("scalar operand of unsupported dtype");
  }
  std::string k(2 + sizeof(data), '\0');
  k[0] = static_cast<char>(device);
  k[1] = static_cast<char>(in.scalar_dtype);
  std::memcpy(k.data() + 2, data, sizeof(data));
  static std::mutex mu;
  static std::unordered_map<std::string, std::shared_ptr<pjrt::Buffer>> pool;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = pool.find(k); it != pool.end()) return it->second;
  if (pool.size() > 4096) pool.clear();
  Runtime& rt = Runtime::get();
  auto buf = std::make_shared<pjrt::Buffer>(rt.client().to_device(data, in.scalar_dtype, {}, rt.device(device)));
  return pool[k] = buf;
}

void key_dims(std::ostringstream& k, const hlo::Dims& d) {
  for (int64_t x : d) k << x << ',';
}

// Program parameters: one per distinct storage read (inputs, and views written in part), one per
// scalar input, and one s64 offset per view that is not its whole storage (offsets are runtime
// operands: a view at another position reuses the program).
struct Params {
  std::vector<Storage*> storage;  // parameter -> storage, or null for a scalar
  std::vector<Input> scalar;      // parameter -> its scalar (when storage is null)
  std::vector<int> of_input;      // input index -> parameter
  std::vector<int> input_offset;  // input index -> parameter of its view's offset, or -1
  std::vector<int> write_offset;  // write index -> parameter of its view's offset, or -1
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
    scalar.emplace_back();
    return static_cast<int>(storage.size() - 1);
  }
  int of_scalar(const Input& in) {
    storage.push_back(nullptr);
    scalar.push_back(in);
    return static_cast<int>(storage.size() - 1);
  }
};

bool covers(const Write& w) { return w.covers(); }

Params assign_params(const OpCall& c) {
  Params p;
  for (const Input& in : c.inputs) p.of_input.push_back(in.storage ? p.of_storage(in.storage) : p.of_scalar(in));
  for (const Write& w : c.writes)
    if (!covers(w)) p.of_storage(w.dest);
  for (const Input& in : c.inputs)
    p.input_offset.push_back(in.storage && !in.view.covers(in.storage->type()) ? p.of_scalar(Input::integer(in.view.offset)) : -1);
  for (const Write& w : c.writes) p.write_offset.push_back(covers(w) ? -1 : p.of_scalar(Input::integer(w.view.offset)));
  return p;
}

// A view's geometry without its offset (a runtime operand).
void key_view(std::ostringstream& k, const lower::View& v) {
  k << static_cast<int>(v.dtype) << ':';
  key_dims(k, v.sizes);
  k << '/';
  key_dims(k, v.strides);
}

std::string cache_key(const OpCall& c, const Params& p) {
  std::ostringstream k;
  k << c.name << '|' << static_cast<int>(c.precision) << '|' << c.context_key << '|';
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
    else k << "|s" << static_cast<int>(p.scalar[q].scalar_dtype);
  }
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const Input& in = c.inputs[i];
    k << "|i" << p.of_input[i];
    if (!in.storage) continue;
    if (p.input_offset[i] < 0) key_dims(k, in.view.sizes);
    else key_view(k, in.view);
  }
  for (const Write& w : c.writes) {
    k << "|w" << w.result << '>' << w.dest->nbytes << ':';
    if (!covers(w)) k << 'p' << p.find(w.dest) << ':';
    key_view(k, w.view);
  }
  return k.str();
}

// The storages an op writes, in order of first write, each with its type after the op.
std::vector<std::pair<Storage*, hlo::TensorType>> written_storages(const OpCall& c) {
  std::vector<std::pair<Storage*, hlo::TensorType>> out;
  for (const Write& w : c.writes) {
    auto it = std::find_if(out.begin(), out.end(), [&](auto& e) { return e.first == w.dest; });
    if (it == out.end()) it = out.insert(out.end(), {w.dest, w.dest->type()});
    if (w.covers()) it->second = {w.view.dtype, {w.view.numel()}};  // a covering write decides the dtype
  }
  return out;
}

// Per parameter, the output its buffer may be donated to (-1: none): the new contents of a written
// storage take the old buffer's place when both have the same type. The outputs are the results not
// written anywhere (`results` of them in all), then each written storage's new contents.
std::vector<int> donation_targets(const OpCall& c, const Params& p, size_t results) {
  std::vector<int> target(p.storage.size(), -1);
  std::vector<size_t> written_results;
  for (const Write& w : c.writes)
    if (std::find(written_results.begin(), written_results.end(), w.result) == written_results.end())
      written_results.push_back(w.result);
  size_t fresh = results - written_results.size();
  auto written = written_storages(c);
  for (size_t k = 0; k < written.size(); ++k) {
    int q = p.find(written[k].first);
    if (q >= 0 && !p.zero(q) && written[k].first->type() == written[k].second) target[q] = static_cast<int>(fresh + k);
  }
  return target;
}

Program build(const OpCall& c, const Params& p, std::vector<hlo::TensorType> results) {
  hlo::Module m;
  hlo::Values params(p.storage.size());
  std::vector<int> donate_to = donation_targets(c, p, results.size());
  for (size_t q = 0; q < p.storage.size(); ++q)
    if (!p.zero(q))
      params[q] = m.arg(p.storage[q] ? p.storage[q]->type() : hlo::scalar(p.scalar[q].scalar_dtype), donate_to[q]);
  hlo::Builder& b = m.builder();
  for (size_t q = 0; q < p.storage.size(); ++q)
    if (p.zero(q)) params[q] = b.splat(p.storage[q]->type(), 0);
  hlo::Values inputs;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    hlo::Value a = params[p.of_input[i]];
    int off = p.input_offset[i];
    inputs.push_back(c.inputs[i].storage ? lower::read_view(b, a, c.inputs[i].view, off < 0 ? nullptr : &params[off]) : a);
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
  for (size_t j = 0; j < c.writes.size(); ++j) {
    const Write& w = c.writes[j];
    hlo::Value update = lower::convert(b, outs[w.result], w.view.dtype);
    auto it = std::find_if(bases.begin(), bases.end(), [&](auto& e) { return e.first == w.dest; });
    hlo::Value base;
    if (it != bases.end()) base = it->second;
    else if (!covers(w)) base = params[p.find(w.dest)];
    hlo::Value next = covers(w) ? b.reshape(update, {w.view.numel()}) : lower::write_view(b, base, update, w.view, &params[p.write_offset[j]]);
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
  for (size_t i = 0; i < c.inputs.size(); ++i)
    if (c.inputs[i].storage) c.inputs[i].storage->settle(c.inputs[i].view.dtype);
  for (const Write& w : c.writes)
    if (!w.covers()) w.dest->settle(w.view.dtype);
  Params p = assign_params(c);
  std::string where = c.name + (c.origin.empty() ? "" : " at " + c.origin);
  auto compiled = rt.cache().get(cache_key(c, p), [&] { return build(c, p, infer_results()); }, where);

  // A written storage's old buffer is donated when the storage alone holds it: no other storage
  // (an out= result sharing it) can observe it. XLA then writes the new contents in place.
  std::vector<int> donate_to = donation_targets(c, p, compiled->results.size());
  std::vector<std::shared_ptr<pjrt::Buffer>> hold;
  std::vector<const pjrt::Buffer*> args;
  std::vector<bool> donated;
  for (size_t q = 0; q < p.storage.size(); ++q) {
    if (p.zero(q)) continue;
    donated.push_back(donate_to[q] >= 0 && p.storage[q]->buffer.use_count() == 1);
    hold.push_back(p.storage[q] ? p.storage[q]->buffer : scalar_buffer(p.scalar[q], c.device));
    args.push_back(hold.back().get());
  }
  std::vector<pjrt::Buffer> outs;
  pjrt::Event done(nullptr, nullptr);
  try {
    outs = compiled->exe->execute(args, rt.device(c.device), donated, &done);
  } catch (const pjrt::Error& e) {
    throw pjrt::Error(e.code, where + ": " + e.what());
  }
  metrics::add("ops_dispatched");
  if (blocking) {
    try {
      done.await();
    } catch (const pjrt::Error& e) {
      throw pjrt::Error(e.code, where + " failed: " + e.what());
    }
  } else {
    track(c.device, std::move(done));
  }

  Launched result;
  result.types = compiled->results;
  auto written = written_storages(c);
  size_t fresh = outs.size() - written.size();
  for (size_t k = 0; k < outs.size(); ++k) {
    auto buf = std::make_shared<pjrt::Buffer>(std::move(outs[k]));
    if (k < fresh) result.buffers.push_back(std::move(buf));
    else written[k - fresh].first->assign(std::move(buf), written[k - fresh].second.dtype, where);
  }
  return result;
}

void synchronize(int device) {
  std::vector<std::pair<int, std::shared_ptr<pjrt::Event>>> waiting;
  {
    std::lock_guard<std::mutex> lock(pending_mu);
    for (auto& e : pending)
      if (device < 0 || e.first == device) waiting.push_back(e);
    pending.erase(std::remove_if(pending.begin(), pending.end(),
                                 [&](auto& e) { return device < 0 || e.first == device; }),
                  pending.end());
  }
  for (auto& e : waiting) e.second->await();
}

}  // namespace tpu
