// DeferAndFuse: the open graph of each device. Recording an op needs no compile (its launch plan, the
// result types per signature, is cached), captures what its inputs hold now, and leaves pending
// outputs in the storages it writes and the tensors it returns. A flush turns the graph into one
// program (each op emitted by the same code as a Strict launch), whose outputs are only the values a
// storage still holds, compiles it through the compile cache and runs it.
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <unordered_map>

#include "runtime/capture.h"
#include "runtime/metrics.h"
#include "runtime/program.h"
#include "runtime/runtime.h"

namespace tpu {
namespace {

std::atomic<Mode> current_mode{Mode::Strict};

// Where a recorded op's parameter comes from.
struct Source {
  int arg = -1;                      // a graph argument (a captured buffer, or a scalar)
  std::shared_ptr<Pending> pending;  // or an output of an earlier node
  bool zero = false;                 // or zeros (a never-written storage)
};

struct Node {
  OpCall call;  // its Storage pointers are identities only
  Params params;
  std::vector<Source> sources;  // per parameter
  Results results;
  std::vector<std::weak_ptr<Pending>> outputs;  // emit's outputs: unwritten results, written storages, checks
};

struct Graph {
  std::vector<std::unique_ptr<Node>> nodes;
  std::vector<std::shared_ptr<pjrt::Buffer>> buffers;  // argument -> its buffer (null: a scalar)
  std::vector<Input> scalars;                           // argument -> its scalar
  std::vector<hlo::TensorType> types;                   // argument -> its type
  std::unordered_map<const pjrt::Buffer*, int> arg_of;  // one argument per distinct buffer
  std::vector<Captured::Source> source;                 // argument -> Seed/Counter of a random op, else Constant
  std::string key;                                      // the nodes' signatures, wired: built as recorded
};

std::vector<Graph> graphs;  // per device
// Launch plans: signature -> result types and layouts, and device-side checks.
struct Plan {
  Results results;
  std::vector<DeviceCheck> checks;
};
std::unordered_map<std::string, Plan> plans;

size_t max_ops() {
  static const size_t n = [] {
    const char* v = std::getenv("TORCH_TPU_FUSE_MAX_OPS");
    if (!v || !*v) return size_t{1000};
    char* end = nullptr;
    long long x = std::strtoll(v, &end, 10);
    if (*end || x < 1 || x > 100000)
      throw std::invalid_argument("TORCH_TPU_FUSE_MAX_OPS must be a whole number from 1 to 100000, got '" + std::string(v) + "'");
    return static_cast<size_t>(x);
  }();
  return n;
}

int add_arg(Graph& g, std::shared_ptr<pjrt::Buffer> buffer, const Input& scalar, const hlo::TensorType& type) {
  if (buffer)
    if (auto it = g.arg_of.find(buffer.get()); it != g.arg_of.end()) return it->second;
  int a = static_cast<int>(g.buffers.size());
  if (buffer) g.arg_of[buffer.get()] = a;
  g.buffers.push_back(std::move(buffer));
  g.scalars.push_back(scalar);
  g.types.push_back(type);
  g.source.push_back(Captured::Source::Constant);
  return a;
}

// The values a flush must output: the pending outputs that something besides later nodes of this
// graph still holds (`all`: every pending output still alive).
std::vector<std::shared_ptr<Pending>> live_outputs(const Graph& g, std::vector<std::shared_ptr<Pending>>& all) {
  std::vector<std::shared_ptr<Pending>> live;
  for (auto& n : g.nodes)
    for (auto& o : n->outputs)
      if (auto sp = o.lock()) {
        bool needed = sp.use_count() - 1 > sp->graph_refs;
        all.push_back(sp);
        if (needed) live.push_back(sp);
      }
  return live;
}

std::string graph_name(const Graph& g) {
  return "graph of " + std::to_string(g.nodes.size()) + " ops ending with " + g.nodes.back()->call.known_where();
}

// The graph as one program (through the compile cache): argument a is donated to output alias[a] (-1: not).
std::shared_ptr<const Compiled> compile(Graph& g, const std::vector<std::shared_ptr<Pending>>& live,
                                        const std::vector<int>& alias) {
  std::string key = std::move(g.key);
  auto put = [&](int64_t v) { key.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
  key += "|out";
  for (size_t j = 0; j < live.size(); ++j) {
    put(static_cast<int64_t>(live[j]->node));
    put(static_cast<int64_t>(live[j]->output));
  }
  for (int a : alias) put(a);
  return Runtime::get().cache().get(key, [&] {
    hlo::Module m;
    hlo::Values argv;
    for (size_t a = 0; a < g.types.size(); ++a) argv.push_back(m.arg(g.types[a], alias[a]));
    hlo::Builder& b = m.builder();
    std::vector<hlo::Values> outs(g.nodes.size());
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      Node& n = *g.nodes[i];
      hlo::Values params(n.sources.size());
      for (size_t q = 0; q < n.sources.size(); ++q) {
        const Source& s = n.sources[q];
        params[q] = s.pending ? outs[s.pending->node][s.pending->output]
                    : s.zero  ? b.splat(n.params.type[q], 0)
                              : argv[s.arg];
      }
      try {
        std::vector<DeviceCheck> checks;
        outs[i] = emit(b, n.call, n.params, params, n.results, checks);
      } catch (const hlo::Error& e) {
        throw hlo::Error("tpu: lowering aten::" + n.call.known_where() + " failed: " + e.what());
      }
    }
    hlo::Values ret;
    std::vector<hlo::TensorType> types;
    for (auto& pd : live) {
      ret.push_back(outs[pd->node][pd->output]);
      types.push_back(ret.back().type);
    }
    m.ret(ret);
    // a compile: worth locating the Python line that cut the graph (this thread's, usually the user's)
    auto locate = g.nodes.back()->call.locate;
    std::string cut = locate ? locate() : "";
    return Program{m.str(), types, graph_name(g) + (cut.empty() ? "" : ", cut at " + cut)};
  });
}

// Runs `compiled` on `args` (a null buffer: the scalar of that argument) and returns its outputs.
std::vector<pjrt::Buffer> execute(const Compiled& compiled, int device, const std::vector<std::shared_ptr<pjrt::Buffer>>& buffers,
                                  const std::vector<Input>& scalars, const std::vector<bool>& donated, std::string what) {
  std::vector<std::shared_ptr<pjrt::Buffer>> hold;
  std::vector<const pjrt::Buffer*> args;
  for (size_t a = 0; a < buffers.size(); ++a) {
    hold.push_back(buffers[a] ? buffers[a] : scalar_buffer(scalars[a], device));
    args.push_back(hold.back().get());
  }
  Runtime& rt = Runtime::get();
  pjrt::Event done(nullptr, nullptr);
  std::vector<pjrt::Buffer> outs = compiled.exe->execute(args, rt.device(device), donated, &done);
  metrics::count(metrics::Executions);
  track(device, std::move(done), std::move(what));
  return outs;
}

// Compiles and runs graph `g`, filling its `live` pending outputs (or, if that fails, the error of
// every output in `all`). Donates an argument buffer that only this graph still holds, replaced in its
// storage by a live output of the same type, to that output (in-place updates do not double memory).
// `fixed_alias`: the program's aliasing, given (a captured graph's, donating nothing now), instead of
// the donation of unshared buffers.
std::shared_ptr<const Compiled> run(Graph& g, int device, const std::vector<std::shared_ptr<Pending>>& all,
                                    const std::vector<std::shared_ptr<Pending>>& live,
                                    const std::vector<int>* fixed_alias = nullptr) {
  if (live.empty()) return nullptr;  // nothing recorded is still needed
  std::vector<int> alias(g.buffers.size(), -1);
  for (size_t j = 0; j < live.size() && !fixed_alias; ++j)
    if (int a = live[j]->donor; a >= 0 && alias[a] < 0 && g.buffers[a].use_count() == 1) alias[a] = static_cast<int>(j);
  if (fixed_alias) alias = *fixed_alias;
  std::string what = graph_name(g);
  try {
    auto compiled = compile(g, live, alias);
    std::vector<bool> donated;
    for (int a : alias) donated.push_back(a >= 0 && !fixed_alias);
    auto outs = execute(*compiled, device, std::move(g.buffers), g.scalars, donated, what);
    for (size_t j = 0; j < live.size(); ++j) live[j]->buffer = std::make_shared<pjrt::Buffer>(std::move(outs[j]));
    return compiled;
  } catch (const std::exception& e) {
    std::string msg = e.what();
    for (auto& pd : all) pd->error = msg;
    if (auto* pe = dynamic_cast<const pjrt::Error*>(&e)) throw pjrt::Error(pe->code, msg);
    throw pjrt::Error(pjrt::abi::ErrorCode::INVALID_ARGUMENT, msg);
  }
}

// A capture in progress on a device (torch.compile): the buffers its inputs held when it began, and
// why it cannot be replayed (a flush cut it: a host read inside the graph).
struct Capture {
  bool active = false;
  std::vector<const pjrt::Buffer*> input_buffers;
  std::string broken;
  Mode previous = Mode::Strict;
};
std::vector<Capture> captures;  // per device

Capture* capturing(int device) {
  return device < static_cast<int>(captures.size()) && captures[device].active ? &captures[device] : nullptr;
}

void flush_locked(int device) {
  if (device >= static_cast<int>(graphs.size()) || graphs[device].nodes.empty()) return;
  Graph g = std::move(graphs[device]);
  graphs[device] = Graph();
  if (Capture* c = capturing(device); c && c->broken.empty())
    c->broken = "the graph was cut (a host read, or an op run outside it) after " + g.nodes.back()->call.known_where();
  std::vector<std::shared_ptr<Pending>> all, live = live_outputs(g, all);
  run(g, device, all, live);
}

}  // namespace

std::recursive_mutex& contents_mutex() {
  static auto* mu = new std::recursive_mutex();  // never destroyed: threads may still use it at exit
  return *mu;
}

Launched record(OpCall& c, const InferResults& infer_results) {
  std::lock_guard<std::recursive_mutex> lock(contents_mutex());
  if (static_cast<int>(graphs.size()) > c.device && graphs[c.device].nodes.size() >= max_ops() && !capturing(c.device))
    flush_locked(c.device);
  for (const Input& in : c.inputs)
    if (in.storage) in.storage->settle(in.view.dtype);
  for (const Write& w : c.writes)
    if (!w.covers()) w.dest->settle(w.view.dtype);
  auto node = std::make_unique<Node>();
  Params& p = node->params;
  p = assign_params(c);
  std::string signature = cache_key(c, p);
  auto plan = plans.find(signature);
  if (plan == plans.end()) {
    // A new signature: its lowering is tried now, so that a call the rule rejects raises at the op,
    // as in Strict mode, instead of at a later flush.
    Results results = infer_results();
    Program program = build(c, p, results);
    plan = plans.emplace(signature, Plan{std::move(results), std::move(program.checks)}).first;
  }
  node->results = plan->second.results;

  if (static_cast<int>(graphs.size()) <= c.device) graphs.resize(c.device + 1);
  Graph& g = graphs[c.device];
  size_t index = g.nodes.size();
  // The graph's key: each node's signature, then where each of its parameters comes from.
  g.key += signature;
  auto wire = [&](char kind, uint32_t a, uint32_t b = 0) {
    g.key += kind;
    g.key.append(reinterpret_cast<const char*>(&a), sizeof(a));
    g.key.append(reinterpret_cast<const char*>(&b), sizeof(b));
  };
  for (size_t q = 0; q < p.storage.size(); ++q) {
    Source& s = node->sources.emplace_back();
    if (!p.storage[q]) {
      s.arg = add_arg(g, nullptr, p.scalar[q], p.type[q]);
      wire('a', s.arg);
    } else if (p.contents[q].pending) {
      s.pending = p.contents[q].pending;
      s.pending->graph_refs++;
      wire('n', s.pending->node, s.pending->output);
    } else if (p.contents[q].buffer) {
      s.arg = add_arg(g, p.contents[q].buffer, {}, p.type[q]);
      wire('a', s.arg);
    } else {
      s.zero = true;
      wire('z', 0);
    }
  }

  if (c.rule->random) {  // its seed and counter: the last two inputs, drawn afresh on every replay
    size_t n = c.inputs.size();
    g.source[node->sources[p.of_input[n - 2]].arg] = Captured::Source::Seed;
    g.source[node->sources[p.of_input[n - 1]].arg] = Captured::Source::Counter;
  }

  Launched result;
  result.types = node->results.types;
  result.strides = node->results.strides;
  auto written = written_storages(c, p);
  // as emit() returns them: the results no write covers (several writes may share one storage)
  size_t fresh = 0;
  for (size_t k = 0; k < node->results.types.size(); ++k)
    fresh += std::none_of(c.writes.begin(), c.writes.end(), [&](const Write& w) { return w.result == k; });
  std::string where = c.known_where();
  const auto& checks = plan->second.checks;
  for (size_t k = 0; k < fresh + written.size() + checks.size(); ++k) {
    auto pd = std::make_shared<Pending>();
    pd->device = c.device;
    pd->node = index;
    pd->output = k;
    node->outputs.push_back(pd);
    if (k < fresh) {
      result.results.push_back({nullptr, pd});
      continue;
    }
    if (k >= fresh + written.size()) {  // a check's status: read at the next host sync
      expect(c.device, {nullptr, pd}, checks[k - fresh - written.size()], c.where());
      continue;
    }
    Storage* dest = written[k - fresh].first;
    // The buffer it replaces (directly, or through earlier pending contents), when of the same type,
    // may become its memory.
    int q = p.find(dest);
    if (q >= 0 && p.type[q] == written[k - fresh].second)
      pd->donor = p.contents[q].pending ? p.contents[q].pending->donor : node->sources[q].arg;
    dest->assign({nullptr, pd}, written[k - fresh].second.dtype, where);
  }
  for (Contents& held : p.contents) held = {};  // the graph's argument list holds the buffers now
  node->call = c;
  g.nodes.push_back(std::move(node));
  metrics::count(metrics::OpsDispatched);
  return result;
}

void flush(int device) {
  std::lock_guard<std::recursive_mutex> lock(contents_mutex());
  if (device >= 0) return flush_locked(device);
  for (size_t d = 0; d < graphs.size(); ++d) flush_locked(static_cast<int>(d));
}

void begin_capture(int device, const std::vector<Storage*>& inputs) {
  std::lock_guard<std::recursive_mutex> lock(contents_mutex());
  flush();
  if (static_cast<int>(captures.size()) <= device) captures.resize(device + 1);
  Capture& cap = captures[device];
  cap = Capture();
  for (Storage* st : inputs) cap.input_buffers.push_back(st->ready().get());
  cap.previous = current_mode;
  cap.active = true;
  current_mode = Mode::Fuse;
}

void abort_capture(int device) {
  std::lock_guard<std::recursive_mutex> lock(contents_mutex());
  if (Capture* cap = capturing(device)) {
    cap->active = false;
    current_mode = cap->previous;
  }
}

std::shared_ptr<Captured> end_capture(int device, const std::vector<Storage*>& inputs,
                                      const std::vector<Storage*>& outputs, std::string& why) {
  std::lock_guard<std::recursive_mutex> lock(contents_mutex());
  Capture cap = *capturing(device);
  abort_capture(device);
  why = cap.broken;
  if (!why.empty() || device >= static_cast<int>(graphs.size()) || graphs[device].nodes.empty()) {
    if (why.empty()) why = "the graph records no tpu op";
    flush_locked(device);
    return nullptr;
  }
  Graph g = std::move(graphs[device]);
  graphs[device] = Graph();
  auto captured = std::make_shared<Captured>();
  captured->device = device;
  captured->name = "compiled " + graph_name(g);
  std::vector<std::shared_ptr<Pending>> all, live = live_outputs(g, all);
  auto input_of = [&](const pjrt::Buffer* buffer) {
    for (size_t i = 0; i < inputs.size(); ++i)
      if (buffer && cap.input_buffers[i] == buffer) return static_cast<int>(i);
    return -1;
  };
  for (size_t a = 0; a < g.buffers.size(); ++a) {
    Captured::Arg& arg = captured->args.emplace_back();
    arg.source = g.source[a];
    arg.input = input_of(g.buffers[a].get());
    if (arg.input >= 0) arg.source = Captured::Source::Input;
    arg.buffer = arg.input >= 0 ? nullptr : g.buffers[a];
    arg.scalar = g.scalars[a];
  }
  captured->written_inputs.resize(live.size());
  for (size_t j = 0; j < live.size(); ++j) {
    captured->dtypes.push_back(DType::U8);
    bool held = false;
    for (size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i]->pending == live[j]) {
        captured->written_inputs[j].push_back(static_cast<int>(i));
        captured->dtypes[j] = inputs[i]->dtype;
        held = true;
      }
    for (Storage* st : outputs)
      if (st->pending == live[j]) held = true, captured->dtypes[j] = st->dtype;
    std::string where;
    if (const DeviceCheck* check = expected(live[j].get(), &where)) {
      captured->checks.push_back({static_cast<int>(j), *check, where});
      held = true;
    }
    if (!held && why.empty()) why = "a value it computes is kept outside its inputs and outputs";
  }
  for (Storage* st : outputs) {
    int slot = -1;
    for (size_t j = 0; j < live.size(); ++j)
      if (st->pending == live[j]) slot = static_cast<int>(j);
    if (slot < 0) {
      int i = st->pending ? -1 : input_of(st->buffer.get());
      if (i < 0 || inputs[i]->pending) {
        if (why.empty()) why = "an output is neither computed by the graph nor an unchanged input";
      } else {
        slot = -1 - i;
      }
    }
    captured->output_storage.push_back(slot);
  }
  // This call's results: the recorded pendings, computed by the program every replay runs (which
  // donates nothing: its arguments belong to the caller's tensors).
  if (live.empty() && why.empty()) why = "the graph computes nothing";
  if (!why.empty()) {
    run(g, device, all, live);
    return nullptr;
  }
  // An input the graph replaces with a value of the same type may give its buffer to that value (a
  // replay donates it when no one else holds it: parameters and optimizer state updated in place).
  captured->alias.assign(g.buffers.size(), -1);
  for (size_t j = 0; j < live.size(); ++j)
    for (int i : captured->written_inputs[j]) {
      int a = -1;
      for (size_t k = 0; k < captured->args.size(); ++k)
        if (captured->args[k].source == Captured::Source::Input && captured->args[k].input == i) a = static_cast<int>(k);
      hlo::TensorType t{captured->dtypes[j], {inputs[i]->nbytes / byte_size(captured->dtypes[j])}};
      if (a >= 0 && captured->alias[a] < 0 && g.types[a] == t) captured->alias[a] = static_cast<int>(j);
    }
  // This call's results: the recorded pendings, computed by the program every replay runs.
  captured->program = run(g, device, all, live, &captured->alias);
  return captured;
}

std::vector<std::shared_ptr<pjrt::Buffer>> replay(const Captured& c, const std::vector<Storage*>& inputs,
                                                  const DrawRandom& draw) {
  std::lock_guard<std::recursive_mutex> lock(contents_mutex());
  std::vector<std::shared_ptr<pjrt::Buffer>> buffers;
  std::vector<Input> scalars;
  std::pair<uint64_t, uint64_t> random{0, 0};
  for (const Captured::Arg& arg : c.args) {
    scalars.push_back(arg.scalar);
    switch (arg.source) {
      case Captured::Source::Input: buffers.push_back(inputs[arg.input]->ready()); break;
      case Captured::Source::Constant: buffers.push_back(arg.buffer); break;
      case Captured::Source::Seed:
        random = draw();
        scalars.back() = Input::integer(static_cast<int64_t>(random.first));
        buffers.push_back(nullptr);
        break;
      case Captured::Source::Counter:
        scalars.back() = Input::integer(static_cast<int64_t>(random.second));
        buffers.push_back(nullptr);
        break;
    }
  }
  std::vector<bool> donated(buffers.size(), false);
  for (size_t a = 0; a < buffers.size(); ++a)  // held only by its storage and this call
    donated[a] = c.alias[a] >= 0 && buffers[a] && buffers[a].use_count() == 2;
  auto outs = execute(*c.program, c.device, buffers, scalars, donated, c.name);
  std::vector<std::shared_ptr<pjrt::Buffer>> out(outs.size());
  for (size_t j = 0; j < outs.size(); ++j) {
    out[j] = std::make_shared<pjrt::Buffer>(std::move(outs[j]));
    for (int i : c.written_inputs[j]) inputs[i]->assign({out[j], nullptr}, c.dtypes[j], c.name);
  }
  for (const auto& check : c.checks) expect(c.device, {out[check.output], nullptr}, check.check, check.where);
  std::vector<std::shared_ptr<pjrt::Buffer>> result;
  for (int slot : c.output_storage) result.push_back(slot >= 0 ? out[slot] : nullptr);
  return result;
}

void set_mode(Mode m) {
  flush();
  current_mode = m;
}
Mode mode() { return current_mode; }
bool launch_blocking() { return current_mode == Mode::Debug; }
void set_launch_blocking(bool on) { set_mode(on ? Mode::Debug : Mode::Strict); }

}  // namespace tpu
