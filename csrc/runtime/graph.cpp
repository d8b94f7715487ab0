// DeferAndFuse: the open graph of each device. Recording an op needs no compile (its launch plan, the
// result types per signature, is cached), captures what its inputs hold now, and leaves pending
// outputs in the storages it writes and the tensors it returns. A flush turns the graph into one
// program (each op emitted by the same code as a Strict launch), whose outputs are only the values a
// storage still holds, compiles it through the compile cache and runs it.
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <unordered_map>

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
  std::vector<hlo::TensorType> results;
  std::vector<std::weak_ptr<Pending>> outputs;  // emit's outputs: unwritten results, then written storages
};

struct Graph {
  std::vector<std::unique_ptr<Node>> nodes;
  std::vector<std::shared_ptr<pjrt::Buffer>> buffers;  // argument -> its buffer (null: a scalar)
  std::vector<Input> scalars;                           // argument -> its scalar
  std::vector<hlo::TensorType> types;                   // argument -> its type
  std::unordered_map<const pjrt::Buffer*, int> arg_of;  // one argument per distinct buffer
  std::string key;                                      // the nodes' signatures, wired: built as recorded
};

std::vector<Graph> graphs;  // per device
std::unordered_map<std::string, std::vector<hlo::TensorType>> plans;  // launch plans: signature -> result types

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
  return a;
}

void flush_locked(int device) {
  if (device >= static_cast<int>(graphs.size()) || graphs[device].nodes.empty()) return;
  Graph g = std::move(graphs[device]);
  graphs[device] = Graph();

  // Outputs: the pending values something besides later nodes of this graph still holds.
  std::vector<std::shared_ptr<Pending>> all, live;
  for (auto& n : g.nodes)
    for (auto& o : n->outputs)
      if (auto sp = o.lock()) {
        bool needed = sp.use_count() - 1 > sp->graph_refs;
        all.push_back(sp);
        if (needed) live.push_back(sp);
      }
  // An argument buffer that only this graph still holds, replaced in its storage by a live output of
  // the same type, is donated to that output (in-place updates do not double memory).
  std::vector<int> alias(g.buffers.size(), -1);
  std::string key = std::move(g.key);
  auto put = [&](int64_t v) { key.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
  key += "|out";
  for (size_t j = 0; j < live.size(); ++j) {
    const Pending& pd = *live[j];
    put(static_cast<int64_t>(pd.node));
    put(static_cast<int64_t>(pd.output));
    int a = pd.donor, donor = -1;
    if (a >= 0 && alias[a] < 0 && g.buffers[a].use_count() == 1) alias[donor = a] = static_cast<int>(j);
    put(donor);
  }
  if (live.empty()) return;  // nothing recorded is still needed
  std::string last = g.nodes.back()->call.known_where();
  try {
    Runtime& rt = Runtime::get();
    auto make = [&] {
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
          outs[i] = emit(b, n.call, n.params, params, n.results);
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
      return Program{m.str(), types, "graph of " + std::to_string(g.nodes.size()) + " ops ending with " + last +
                                         (cut.empty() ? "" : ", cut at " + cut)};
    };
    auto compiled = rt.cache().get(key, make);

    std::vector<std::shared_ptr<pjrt::Buffer>> hold;
    std::vector<const pjrt::Buffer*> args;
    std::vector<bool> donated;
    for (size_t a = 0; a < g.buffers.size(); ++a) {
      hold.push_back(g.buffers[a] ? g.buffers[a] : scalar_buffer(g.scalars[a], device));
      args.push_back(hold.back().get());
      donated.push_back(alias[a] >= 0);
    }
    g.buffers.clear();
    pjrt::Event done(nullptr, nullptr);
    std::vector<pjrt::Buffer> outs = compiled->exe->execute(args, rt.device(device), donated, &done);
    metrics::count(metrics::Executions);
    track(device, std::move(done), "graph of " + std::to_string(g.nodes.size()) + " ops ending with " + last);
    for (size_t j = 0; j < live.size(); ++j) live[j]->buffer = std::make_shared<pjrt::Buffer>(std::move(outs[j]));
  } catch (const std::exception& e) {
    std::string msg = e.what();
    for (auto& pd : all) pd->error = msg;
    if (auto* pe = dynamic_cast<const pjrt::Error*>(&e)) throw pjrt::Error(pe->code, msg);
    throw pjrt::Error(pjrt::abi::ErrorCode::INVALID_ARGUMENT, msg);
  }
}

}  // namespace

std::recursive_mutex& contents_mutex() {
  static auto* mu = new std::recursive_mutex();  // never destroyed: threads may still use it at exit
  return *mu;
}

Launched record(OpCall& c, const InferResults& infer_results) {
  std::lock_guard<std::recursive_mutex> lock(contents_mutex());
  if (static_cast<int>(graphs.size()) > c.device && graphs[c.device].nodes.size() >= max_ops()) flush_locked(c.device);
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
    auto types = infer_results();
    build(c, p, types);
    plan = plans.emplace(signature, std::move(types)).first;
  }
  node->results = plan->second;

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

  Launched result;
  result.types = node->results;
  auto written = written_storages(c, p);
  size_t fresh = node->results.size() - written.size();
  std::string where = c.known_where();
  for (size_t k = 0; k < fresh + written.size(); ++k) {
    auto pd = std::make_shared<Pending>();
    pd->device = c.device;
    pd->node = index;
    pd->output = k;
    node->outputs.push_back(pd);
    if (k < fresh) {
      result.results.push_back({nullptr, pd});
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

void set_mode(Mode m) {
  flush();
  current_mode = m;
}
Mode mode() { return current_mode; }
bool launch_blocking() { return current_mode == Mode::Debug; }
void set_launch_blocking(bool on) { set_mode(on ? Mode::Debug : Mode::Strict); }

}  // namespace tpu
