#include "runtime/op_call.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <optional>
#include <mutex>
#include <type_traits>
#include <unordered_map>

#include "lower/helpers.h"
#include "runtime/metrics.h"
#include "runtime/program.h"
#include "runtime/runtime.h"

namespace tpu {
namespace {

// Completion events of launched programs not yet known to be complete, for synchronize(), oldest
// first. Programs on a device finish roughly in launch order, so finished ones are dropped from the
// front: the cost does not grow with the queue.
struct Launch {
  int device;
  std::shared_ptr<pjrt::Event> done;
  std::string what;  // the op (or graph) it ran, for its error
};
std::mutex events_mu;
std::deque<Launch> events;
// Errors of launches found finished while pruning: kept until the next synchronize raises them.
std::vector<std::pair<int, pjrt::Error>> failures;

// The error of a finished launch, if it failed, naming what ran.
std::optional<pjrt::Error> failure_of(const Launch& l) {
  try {
    l.done->await();
  } catch (const pjrt::Error& e) {
    return pjrt::Error(e.code, "tpu: " + l.what + " failed: " + e.what());
  }
  return std::nullopt;
}

// Signatures are compact binary strings (hashed and compared, never shown): fixed-size fields as
// their bytes, variable-size ones with their length first, so no two signatures read alike.
struct Signature {
  std::string s;
  template <typename T>
  void put(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    s.append(reinterpret_cast<const char*>(&v), sizeof(v));
  }
  void put(const std::vector<int64_t>& d) {
    put(static_cast<uint32_t>(d.size()));
    s.append(reinterpret_cast<const char*>(d.data()), d.size() * sizeof(int64_t));
  }
  void put(std::string_view t) {
    put(static_cast<uint32_t>(t.size()));
    s += t;
  }
  void put(const std::string& t) { put(std::string_view(t)); }
  // A view's geometry without its offset (a runtime operand). A dim of size 1 never steps, so its
  // stride does not count: x[:, -1:] of a growing [1, n] sequence is one program for every n.
  void put(const lower::View& v) {
    put(v.dtype);
    put(v.sizes);
    put(static_cast<uint32_t>(v.strides.size()));
    for (size_t d = 0; d < v.strides.size(); ++d) put(v.sizes[d] == 1 ? int64_t{0} : v.strides[d]);
  }
};

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
  auto written = written_storages(c, p);
  for (size_t k = 0; k < written.size(); ++k) {
    int q = p.find(written[k].first);
    if (q >= 0 && !p.zero(q) && p.type[q] == written[k].second) target[q] = static_cast<int>(fresh + k);
  }
  return target;
}

}  // namespace

void track(int device, pjrt::Event done, std::string what) {
  if (!done) return;
  std::lock_guard<std::mutex> lock(events_mu);
  while (events.size() > 64 && events.front().done->is_ready()) {
    if (auto e = failure_of(events.front())) failures.emplace_back(events.front().device, *e);
    events.pop_front();
  }
  events.push_back({device, std::make_shared<pjrt::Event>(std::move(done)), std::move(what)});
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

int Params::find(const Storage* st) const {
  for (size_t q = 0; q < storage.size(); ++q)
    if (storage[q] == st) return static_cast<int>(q);
  return -1;
}

Params assign_params(const OpCall& c) {
  Params p;
  auto of_storage = [&](Storage* st) {
    if (int q = p.find(st); q >= 0) return q;
    p.storage.push_back(st);
    p.type.push_back(st->type());
    p.contents.push_back(st->contents());
    p.scalar.emplace_back();
    return static_cast<int>(p.storage.size() - 1);
  };
  auto of_scalar = [&](const Input& in) {
    p.storage.push_back(nullptr);
    p.type.push_back(hlo::scalar(in.scalar_dtype));
    p.contents.emplace_back();
    p.scalar.push_back(in);
    return static_cast<int>(p.storage.size() - 1);
  };
  for (const Input& in : c.inputs) p.of_input.push_back(in.storage ? of_storage(in.storage) : of_scalar(in));
  for (const Write& w : c.writes) {
    p.write_covers.push_back(w.covers());
    p.write_param.push_back(w.covers() ? p.find(w.dest) : of_storage(w.dest));
  }
  for (const Input& in : c.inputs)
    p.input_offset.push_back(in.storage && !in.view.covers(in.storage->type()) ? of_scalar(Input::integer(in.view.offset)) : -1);
  for (size_t j = 0; j < c.writes.size(); ++j)
    p.write_offset.push_back(p.write_covers[j] ? -1 : of_scalar(Input::integer(c.writes[j].view.offset)));
  return p;
}

std::string cache_key(const OpCall& c, const Params& p) {
  Signature k;
  k.s.reserve(256);
  k.put(c.name);
  k.put(c.precision);
  k.put(c.context_key);
  for (size_t a = 0; a < c.args.size(); ++a) {
    const lower::Arg& arg = c.args[a];
    k.put(arg.kind);
    k.put(arg.i);
    k.put(arg.ints);
    k.put(static_cast<uint32_t>(arg.floats.size()));
    for (double f : arg.floats) k.put(f);  // exact: 0.1 != 0.1000001
    k.put(arg.s);
    if (arg.kind == lower::Arg::Scalar && (c.rule->structural >> a & 1)) k.put(arg.f);
  }
  k.put(static_cast<uint32_t>(p.storage.size()));
  for (size_t q = 0; q < p.storage.size(); ++q) {
    k.put(static_cast<char>(!p.storage[q] ? 's' : p.zero(q) ? 'z' : 'p'));
    k.put(p.type[q].dtype);
    if (p.storage[q]) k.put(p.type[q].numel());
  }
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const Input& in = c.inputs[i];
    k.put(p.of_input[i]);
    if (!in.storage) continue;
    k.put(p.input_offset[i]);
    if (p.input_offset[i] < 0) k.put(in.view.sizes);
    else k.put(in.view);
  }
  for (size_t j = 0; j < c.writes.size(); ++j) {
    k.put(c.writes[j].result);
    k.put(p.write_param[j]);
    k.put(static_cast<bool>(p.write_covers[j]));
    k.put(c.writes[j].view);
  }
  return std::move(k.s);
}

std::vector<std::pair<Storage*, hlo::TensorType>> written_storages(const OpCall& c, const Params& p) {
  std::vector<std::pair<Storage*, hlo::TensorType>> out;
  for (size_t j = 0; j < c.writes.size(); ++j) {
    const Write& w = c.writes[j];
    auto it = std::find_if(out.begin(), out.end(), [&](auto& e) { return e.first == w.dest; });
    if (it == out.end()) it = out.insert(out.end(), {w.dest, p.write_param[j] >= 0 ? p.type[p.write_param[j]] : hlo::TensorType{}});
    if (p.write_covers[j]) it->second = {storage_dtype(w.view.dtype), {w.view.numel()}};  // a covering write decides the dtype
  }
  return out;
}

hlo::Values emit(hlo::Builder& b, const OpCall& c, const Params& p, const hlo::Values& params, const Results& laid_out,
                 std::vector<DeviceCheck>& checks) {
  std::vector<hlo::TensorType> results = laid_out.types;  // as the rule computes them
  for (hlo::TensorType& t : results) t.dtype = compute_dtype(t.dtype);
  hlo::Values inputs;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    hlo::Value a = params[p.of_input[i]];
    int off = p.input_offset[i];
    inputs.push_back(c.inputs[i].storage ? lower::read_view(b, a, c.inputs[i].view, off < 0 ? nullptr : &params[off]) : a);
  }
  std::vector<bool> contiguous;
  for (const Input& in : c.inputs) contiguous.push_back(!in.storage || in.view.contiguous());
  lower::Ctx ctx{b, c.args, inputs, results, c.precision, &contiguous, &laid_out.types};
  size_t first_check = b.checks.size();
  hlo::Values outs = c.rule->fn(ctx);
  if (outs.size() != results.size())
    throw hlo::Error(std::string(c.name) + ": lowering returned " + std::to_string(outs.size()) + " results, expected " +
                     std::to_string(results.size()));
  for (size_t k = 0; k < outs.size(); ++k)
    if (outs[k].type != results[k])
      throw hlo::Error(std::string(c.name) + ": lowering result " + std::to_string(k) + " is " + outs[k].type.str() +
                       ", expected " + results[k].str());

  hlo::Values ret;
  std::vector<bool> written(outs.size(), false);
  for (const Write& w : c.writes) written[w.result] = true;
  for (size_t k = 0; k < outs.size(); ++k) {
    if (written[k]) continue;
    hlo::Dims order = lower::dense_order(results[k].dims, laid_out.strides[k]);
    hlo::Value laid = b.reshape(order.empty() ? outs[k] : b.transpose(outs[k], order), {results[k].numel()});
    ret.push_back(lower::to_storage(b, laid, laid_out.types[k].dtype));
  }
  // New contents of each written storage, in order of first write; later writes build on earlier.
  std::vector<std::pair<Storage*, hlo::Value>> bases;
  for (size_t j = 0; j < c.writes.size(); ++j) {
    const Write& w = c.writes[j];
    hlo::Value update = lower::convert(b, outs[w.result], compute_dtype(w.view.dtype));
    auto it = std::find_if(bases.begin(), bases.end(), [&](auto& e) { return e.first == w.dest; });
    hlo::Value base;
    if (it != bases.end()) base = it->second;
    else if (!p.write_covers[j]) base = params[p.write_param[j]];
    hlo::Value next = p.write_covers[j] ? lower::to_storage(b, b.reshape(update, {w.view.numel()}), w.view.dtype)
                                        : lower::write_view(b, base, update, w.view, &params[p.write_offset[j]]);
    if (it != bases.end()) it->second = next;
    else bases.emplace_back(w.dest, next);
  }
  for (auto& e : bases) ret.push_back(e.second);
  for (size_t k = first_check; k < b.checks.size(); ++k) {
    ret.push_back(b.checks[k].status);
    checks.push_back({b.checks[k].message, b.checks[k].index_error});
  }
  return ret;
}

Program build(const OpCall& c, const Params& p, Results results) {
  hlo::Module m;
  hlo::Values params(p.storage.size());
  std::vector<int> donate_to = donation_targets(c, p, results.types.size());
  for (size_t q = 0; q < p.storage.size(); ++q)
    if (!p.zero(q)) params[q] = m.arg(p.type[q], donate_to[q]);
  hlo::Builder& b = m.builder();
  for (size_t q = 0; q < p.storage.size(); ++q)
    if (p.zero(q)) params[q] = b.splat(p.type[q], 0);
  std::vector<DeviceCheck> checks;
  m.ret(emit(b, c, p, params, results, checks));
  return Program{m.str(), std::move(results.types), "", std::move(checks), std::move(results.strides)};
}

void Storage::settle(DType as) {
  if (!written()) dtype = storage_dtype(as);
}

void Storage::assign(Contents c, DType t, std::string from) {
  buffer = std::move(c.buffer);
  pending = std::move(c.pending);
  dtype = storage_dtype(t);
  origin = std::move(from);
}

Contents Storage::contents() {
  if (pending && pending->buffer) {  // computed by a flush since: the storage holds the buffer itself
    buffer = pending->buffer;
    pending.reset();
  }
  if (pending && !pending->error.empty()) throw pjrt::Error(pjrt::abi::ErrorCode::INTERNAL, pending->error);
  return {buffer, pending};
}

const std::shared_ptr<pjrt::Buffer>& Storage::ready() {
  std::lock_guard<std::recursive_mutex> lock(contents_mutex());
  if (pending && !pending->buffer && pending->error.empty()) flush(pending->device);
  contents();
  return buffer;
}

Launched launch(OpCall& c, const InferResults& infer_results) {
  Runtime& rt = Runtime::get();
  std::lock_guard<std::recursive_mutex> lock(contents_mutex());
  for (const Input& in : c.inputs)
    if (in.storage) in.storage->ready(), in.storage->settle(in.view.dtype);
  for (const Write& w : c.writes) {
    w.dest->ready();
    if (!w.covers()) w.dest->settle(w.view.dtype);
  }
  Params p = assign_params(c);
  std::string key = cache_key(c, p);
  auto compiled = rt.cache().get(key, [&] {
    Program program = build(c, p, infer_results());
    program.origin = c.where();  // a compile: worth locating the Python line
    return program;
  });

  // A written storage's old buffer is donated when the storage alone holds it: no other storage
  // (an out= result sharing it) can observe it. XLA then writes the new contents in place.
  std::vector<int> donate_to = donation_targets(c, p, compiled->results.size());
  std::vector<std::shared_ptr<pjrt::Buffer>> hold;
  std::vector<const pjrt::Buffer*> args;
  std::vector<bool> donated;
  for (size_t q = 0; q < p.storage.size(); ++q) {
    if (p.zero(q)) continue;
    if (p.storage[q]) p.contents[q] = {};  // drop the captured reference: the storage's own is the one left
    donated.push_back(donate_to[q] >= 0 && p.storage[q]->buffer.use_count() == 1);
    hold.push_back(p.storage[q] ? p.storage[q]->buffer : scalar_buffer(p.scalar[q], c.device));
    args.push_back(hold.back().get());
  }
  std::vector<pjrt::Buffer> outs;
  pjrt::Event done(nullptr, nullptr);
  try {
    outs = compiled->exe->execute(args, rt.device(c.device), donated, &done);
  } catch (const pjrt::Error& e) {
    throw pjrt::Error(e.code, c.where() + ": " + e.what());
  }
  metrics::count(metrics::OpsDispatched);
  metrics::count(metrics::Executions);
  if (launch_blocking()) {
    try {
      done.await();
    } catch (const pjrt::Error& e) {
      throw pjrt::Error(e.code, c.where() + " failed: " + e.what());
    }
  } else {
    track(c.device, std::move(done), c.known_where());
  }

  Launched result;
  result.types = compiled->results;
  result.strides = compiled->strides;
  auto written = written_storages(c, p);
  size_t checks = compiled->checks.size(), fresh = outs.size() - written.size() - checks;
  for (size_t k = 0; k < outs.size(); ++k) {
    auto buf = std::make_shared<pjrt::Buffer>(std::move(outs[k]));
    if (k < fresh) result.results.push_back({std::move(buf), nullptr});
    else if (k < fresh + written.size())
      written[k - fresh].first->assign({std::move(buf), nullptr}, written[k - fresh].second.dtype, c.known_where());
    else
      expect(c.device, {std::move(buf), nullptr}, compiled->checks[k - fresh - written.size()], c.where());
  }
  return result;
}

namespace {
struct Expected {
  int device;
  Contents status;
  DeviceCheck check;
  std::string where;
};
std::mutex expected_mu;
std::vector<Expected> expected_checks;
std::vector<std::pair<int, CheckFailed>> failed_checks;  // found while pruning, raised at the next sync

// The failure of a check whose status is computed (or being computed), if it failed.
std::optional<CheckFailed> check_failure(Expected& e) {
  if (e.status.pending && !e.status.pending->buffer) {
    if (!e.status.pending->error.empty()) return std::nullopt;  // its graph failed: that error is raised instead
    flush(e.device);
  }
  const auto& buffer = e.status.buffer ? e.status.buffer : e.status.pending->buffer;
  if (!buffer) return std::nullopt;
  int64_t status[2] = {0, 0};
  try {
    buffer->to_host(status, sizeof(status));
  } catch (const pjrt::Error&) {
    return std::nullopt;  // the program failed: synchronize() raises that error
  }
  if (!status[0]) return std::nullopt;
  std::string msg = e.check.message;
  if (auto at = msg.find("{}"); at != std::string::npos) msg.replace(at, 2, std::to_string(status[1]));
  return CheckFailed(msg + " (tpu: aten::" + e.where + ")", e.check.index_error);
}
}  // namespace

void expect(int device, Contents status, DeviceCheck check, std::string where) {
  bool at_once = launch_blocking();  // Debug mode raises at the op itself
  std::vector<Expected> read;
  {
    std::lock_guard<std::mutex> lock(expected_mu);
    expected_checks.push_back({device, std::move(status), std::move(check), std::move(where)});
    if (!at_once && expected_checks.size() < 4096) return;
    // Without host syncs, checks pile up: the older half is read now (their programs are long done)
    // and a failure is kept for the next sync.
    size_t n = at_once ? expected_checks.size() : expected_checks.size() / 2;
    read.assign(expected_checks.begin(), expected_checks.begin() + n);
    expected_checks.erase(expected_checks.begin(), expected_checks.begin() + n);
  }
  for (Expected& e : read)
    if (auto f = check_failure(e)) {
      if (at_once) throw *f;
      std::lock_guard<std::mutex> lock(expected_mu);
      failed_checks.emplace_back(e.device, *f);
    }
}

const DeviceCheck* expected(const Pending* pd, std::string* where) {
  std::lock_guard<std::mutex> lock(expected_mu);
  for (auto& e : expected_checks)
    if (e.status.pending.get() == pd) {
      if (where) *where = e.where;
      return &e.check;
    }
  return nullptr;
}

void raise_failed_checks(int device) {
  std::vector<Expected> mine;
  std::optional<CheckFailed> first;
  {
    std::lock_guard<std::mutex> lock(expected_mu);
    auto of = [&](int d) { return device < 0 || d == device; };
    for (auto& f : failed_checks)
      if (of(f.first) && !first) first = f.second;
    failed_checks.erase(std::remove_if(failed_checks.begin(), failed_checks.end(), [&](auto& f) { return of(f.first); }),
                        failed_checks.end());
    if (expected_checks.empty() && !first) return;
    for (auto& e : expected_checks)
      if (of(e.device)) mine.push_back(e);
    expected_checks.erase(std::remove_if(expected_checks.begin(), expected_checks.end(),
                                         [&](auto& e) { return of(e.device); }),
                          expected_checks.end());
  }
  for (Expected& e : mine)
    if (!first) first = check_failure(e);
  if (first) throw *first;
}

void synchronize(int device) {
  flush(device);
  std::vector<Launch> waiting;
  std::vector<pjrt::Error> failed;
  {
    std::lock_guard<std::mutex> lock(events_mu);
    auto mine = [&](int d) { return device < 0 || d == device; };
    for (auto& l : events)
      if (mine(l.device)) waiting.push_back(l);
    events.erase(std::remove_if(events.begin(), events.end(), [&](auto& l) { return mine(l.device); }), events.end());
    for (auto& f : failures)
      if (mine(f.first)) failed.push_back(f.second);
    failures.erase(std::remove_if(failures.begin(), failures.end(), [&](auto& f) { return mine(f.first); }),
                   failures.end());
  }
  for (auto& l : waiting)  // wait for all, then raise the first error (never dropped)
    if (auto e = failure_of(l)) failed.push_back(*e);
  if (!failed.empty()) throw failed.front();
  raise_failed_checks(device);
}

}  // namespace tpu
