// WriteSnapshot() (snapshot.h): frames of docs/snapshot-format.md, each buffered up to
// kFrameTarget bytes and handed to the sink with its checksum.
#include <xxhash.h>

#include <span>
#include <string>
#include <vector>
#include <utility>

#include "kvindex/codec/source_spec.h"
#include "kvindex/snapshot/snapshot.h"

#include "snapshot_format.h"

namespace kvindex {

namespace {

using namespace snapshot_internal;  // NOLINT: the format's own names

class FrameWriter {
 public:
  explicit FrameWriter(const SnapshotSink& sink) : sink_(sink) {}

  bool Header() {
    std::string h(kMagic, sizeof(kMagic));
    for (int i = 0; i < 4; ++i) h.push_back(static_cast<char>(kSnapshotVersion >> (8 * i)));
    h.append(4, '\0');
    return Emit(h);
  }
  // The payload of the open frame of `kind` (the previous one is closed when the kind changes).
  std::string& Open(Kind kind) {
    if (open_ && kind_ != kind) Close();
    open_ = true;
    kind_ = kind;
    return payload_;
  }
  // Closes the open frame when it has grown past the target size.
  void MaybeClose() {
    if (payload_.size() >= kFrameTarget) Close();
  }
  void Close() {
    if (!open_) return;
    open_ = false;
    std::string head;
    head.push_back(static_cast<char>(kind_));
    const uint32_t n = static_cast<uint32_t>(payload_.size());
    for (int i = 0; i < 4; ++i) head.push_back(static_cast<char>(n >> (8 * i)));
    std::string tail;
    PutU64(tail, XXH3_64bits_withSeed(payload_.data(), payload_.size(),
                                      static_cast<uint64_t>(kind_)));
    ok_ = ok_ && payload_.size() <= kMaxFramePayload && Emit(head) && Emit(payload_) &&
          Emit(tail);
    ++frames_;
    payload_.clear();
  }
  bool ok() const { return ok_; }
  uint64_t bytes() const { return bytes_; }
  uint64_t frames() const { return frames_; }

 private:
  bool Emit(std::string_view s) {
    bytes_ += s.size();
    return sink_(s);
  }
  const SnapshotSink& sink_;
  std::string payload_;
  Kind kind_ = Kind::kMeta;
  bool open_ = false;
  bool ok_ = true;
  uint64_t bytes_ = 0;
  uint64_t frames_ = 0;
};

void PutSeq(std::string& out, const SourceSeqState& s) {
  out.push_back(static_cast<char>((s.watermark ? 1 : 0) | (s.trust.exact ? 2 : 0)));
  PutVarint(out, s.watermark.value_or(0));
  PutString(out, s.publisher);
  PutVarint(out, s.lost);
  PutVarint(out, s.trust.lost_batches);
  PutVarint(out, ZigZag(s.trust.since_ns));
  PutVarint(out, ZigZag(s.trust.last_loss_ns));
  out.push_back(static_cast<char>(s.trust.reason));
}

void WriteInstances(const IndexState& state, FrameWriter& w) {
  for (size_t ii = 0; ii < state.instances.size(); ++ii) {
    const StateInstance& si = state.instances[ii];
    std::string& h = w.Open(Kind::kInstance);
    PutVarint(h, ii);
    h.push_back('\0');
    PutString(h, si.name);
    h.push_back(si.listed ? '\1' : '\0');
    PutVarint(h, si.block_size);
    PutVarint(h, si.orphans);
    w.Close();
    for (size_t i = 0; i < si.partials.size();) {
      std::string& p = w.Open(Kind::kInstance);
      PutVarint(p, ii);
      p.push_back('\1');
      for (; i < si.partials.size() && p.size() < kFrameTarget; ++i) {
        const StatePartial& sp = si.partials[i];
        PutU64(p, sp.key);
        PutVarint(p, sp.scope);
        p.push_back(sp.before ? '\1' : '\0');
        PutU64(p, sp.before.value_or(0));
        PutVarint(p, sp.tokens.size());
        for (TokenId t : sp.tokens) PutVarint(p, t);
      }
      w.Close();
    }
    for (size_t i = 0; i < si.objects.size();) {
      std::string& o = w.Open(Kind::kInstance);
      PutVarint(o, ii);
      o.push_back('\2');
      for (; i < si.objects.size() && o.size() < kFrameTarget; ++i) {
        PutString(o, si.objects[i].key);
        PutVarint(o, si.objects[i].blocks.size());
        for (uint32_t b : si.objects[i].blocks) PutVarint(o, b);
      }
      w.Close();
    }
  }
}

// Blocks go in runs of consecutive blocks that share scope, key space and presences (a prompt's
// blocks stored by one instance): (count << 2 | engine hashes follow << 1 | key space follows),
// [scope, ns], the presences (count, then holder and tiers each), then each block's key and,
// with the flag, its engine hash (StateBlock::engine). A frame's first run gives its key space.
class RunWriter {
 public:
  explicit RunWriter(FrameWriter& w) : w_(w) {}
  void Add(const StateBlock& b) {
    const bool engine = b.engine.has_value();
    if (!hashes_.empty() &&
        (b.scope != scope_ || b.ns != ns_ || engine != engine_ || hashes_.size() >= kMaxRun ||
         !SamePresences(b.presences))) {
      Flush();
    }
    if (hashes_.empty()) {
      scope_ = b.scope;
      ns_ = b.ns;
      engine_ = engine;
      presences_.assign(b.presences.begin(), b.presences.end());
    }
    hashes_.push_back(b.hash);
    if (engine) engines_.push_back(*b.engine);
  }
  void Flush() {
    if (hashes_.empty()) return;
    std::string& p = w_.Open(Kind::kBlocks);
    const bool new_key = p.empty() || scope_ != frame_scope_ || ns_ != frame_ns_;
    PutVarint(p, (uint64_t{hashes_.size()} << 2) | (engine_ ? 2 : 0) | (new_key ? 1 : 0));
    if (new_key) {
      PutVarint(p, scope_);
      PutVarint(p, ns_);
      frame_scope_ = scope_;
      frame_ns_ = ns_;
    }
    PutVarint(p, presences_.size());
    for (const StatePresence& pr : presences_) {
      PutVarint(p, pr.holder);
      PutVarint(p, pr.tiers);
    }
    for (size_t i = 0; i < hashes_.size(); ++i) {
      PutU64(p, hashes_[i]);
      if (engine_) PutU64(p, engines_[i]);
    }
    hashes_.clear();
    engines_.clear();
    w_.MaybeClose();
  }

 private:
  static constexpr size_t kMaxRun = 65535;
  bool SamePresences(std::span<const StatePresence> p) const {
    if (p.size() != presences_.size()) return false;
    for (size_t i = 0; i < p.size(); ++i) {
      if (p[i].holder != presences_[i].holder || p[i].tiers != presences_[i].tiers) return false;
    }
    return true;
  }
  FrameWriter& w_;
  uint32_t scope_ = 0, ns_ = 0;
  uint32_t frame_scope_ = 0, frame_ns_ = 0;
  bool engine_ = false;
  std::vector<StatePresence> presences_;
  std::vector<uint64_t> hashes_;
  std::vector<uint64_t> engines_;
};

void WriteBlocks(const IndexState& state, FrameWriter& w) {
  RunWriter runs(w);
  state.ForEachBlock([&](const StateBlock& b) { runs.Add(b); });
  runs.Flush();
  w.Close();
}

}  // namespace

Result<uint64_t> WriteSnapshot(const IndexState& state, std::span<const SourceSeqState> seq,
                               int64_t created_ns, const SnapshotSink& sink) {
  if (!seq.empty() && seq.size() != state.sources.size()) {
    return Status::InvalidArgument("snapshot: sequence states do not match the sources");
  }
  FrameWriter w(sink);
  if (!w.Header()) return Status::Unavailable("snapshot: the output went away");
  const uint64_t engine_entries = state.engine_entries;
  std::string& m = w.Open(Kind::kMeta);
  PutVarint(m, ZigZag(created_ns));
  for (uint64_t n : {uint64_t{state.sources.size()}, uint64_t{state.holders.size()},
                     uint64_t{state.scopes.size()}, uint64_t{state.tiers.size()},
                     uint64_t{state.instances.size()}, state.blocks, state.presences,
                     engine_entries}) {
    PutVarint(m, n);
  }
  for (uint32_t ii = 0; ii < state.instances.size(); ++ii) PutVarint(m, state.EngineEntries(ii));
  w.Close();
  for (size_t i = 0; i < state.sources.size(); ++i) {
    std::string& s = w.Open(Kind::kSource);
    PutString(s, SourceConfigToJson(state.sources[i]));
    PutSeq(s, seq.empty() ? SourceSeqState{} : seq[i]);
    w.Close();
  }
  for (const StateHolder& h : state.holders) {
    std::string& p = w.Open(Kind::kHolders);
    PutVarint(p, h.source);
    p.push_back(h.rank ? '\1' : '\0');
    PutVarint(p, ZigZag(h.rank.value_or(0)));
    w.MaybeClose();
  }
  for (const Scope& sc : state.scopes) {
    std::string& p = w.Open(Kind::kScopes);
    for (const std::string* f : {&sc.tenant, &sc.model, &sc.lora, &sc.salt}) PutString(p, *f);
    PutVarint(p, sc.block_size);
    PutVarint(p, sc.group);
    w.MaybeClose();
  }
  for (const std::string& t : state.tiers) PutString(w.Open(Kind::kTiers), t);
  w.Close();
  WriteBlocks(state, w);
  // Engine entries per instance, by block position: (delta << 1 | engine hash == block key),
  // [engine hash]; each frame starts with the instance, its entry count and a base position.
  for (uint32_t ii = 0; ii < state.instances.size(); ++ii) {
    uint32_t prev = 0;
    state.ForEachEngine(ii, [&](const StateEngineEntry& e) {
      std::string& p = w.Open(Kind::kEngine);
      if (p.empty()) {
        PutVarint(p, ii);
        PutVarint(p, state.EngineCount(ii));
        PutVarint(p, e.block);
        prev = e.block;
      }
      const bool same = state.BlockHashAt(e.block) == e.engine;
      PutVarint(p, (uint64_t{e.block - prev} << 1) | (same ? 1 : 0));
      if (!same) PutU64(p, e.engine);
      prev = e.block;
      w.MaybeClose();
    });
    w.Close();
  }
  // The eviction order (with max_blocks): positions, each as a zigzag delta from the previous of
  // its frame (the first from 0).
  uint32_t prev = 0;
  for (uint32_t pos : state.EvictionOrder()) {
    std::string& p = w.Open(Kind::kOrder);
    if (p.empty()) prev = 0;
    PutVarint(p, ZigZag(static_cast<int64_t>(pos) - static_cast<int64_t>(prev)));
    prev = pos;
    w.MaybeClose();
  }
  w.Close();
  WriteInstances(state, w);
  std::string& z = w.Open(Kind::kEnd);
  PutVarint(z, state.blocks);
  PutVarint(z, state.presences);
  PutVarint(z, engine_entries);
  PutVarint(z, w.frames());
  PutVarint(z, state.counters.orphans);
  PutVarint(z, state.counters.tokenless);
  PutVarint(z, state.counters.unmapped);
  PutVarint(z, state.counters.evictions);
  w.Close();
  if (!w.ok()) return Status::Unavailable("snapshot: the output went away");
  return w.bytes();
}

}  // namespace kvindex
