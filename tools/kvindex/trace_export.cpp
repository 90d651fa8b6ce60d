#include "trace_export.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <span>
#include <variant>

#include "kvindex/core/block_hash.h"
#include "kvindex/ingest/ingest.h"
#include "report.h"

namespace kvindex::cli {

Result<std::unique_ptr<TraceExporter>> TraceExporter::Open(const std::string& path) {
  std::FILE* file = stdout;
  if (path != "-") {
    file = std::fopen(path.c_str(), "wb");
    if (file == nullptr) {
      return Status::IoError(path + ": cannot write: " + std::strerror(errno));
    }
  }
  return std::unique_ptr<TraceExporter>(new TraceExporter(path, file));
}

TraceExporter::~TraceExporter() {
  if (file_ != nullptr && file_ != stdout) std::fclose(file_);
}

uint64_t TraceExporter::TierBit(const std::optional<Tier>& tier) {
  const std::string name(tier.value_or(Tier::Gpu()).name());
  auto it = tier_bits_.find(name);
  if (it == tier_bits_.end()) {
    // 64 tier names at most get their own bit; any further ones share the last.
    const uint64_t bit = uint64_t{1} << std::min<size_t>(tier_bits_.size(), 63);
    it = tier_bits_.emplace(name, bit).first;
  }
  return it->second;
}

uint32_t TraceExporter::ScopeId(const SourceConfig& source, const EventScopeFields& scope,
                                uint32_t block_size) {
  std::string lora = source.lora;
  if (scope.lora_name) {
    lora = *scope.lora_name;
  } else if (scope.lora_id && *scope.lora_id >= 0) {
    lora = "id:" + std::to_string(*scope.lora_id);
  }
  // Fields joined with a byte that names never contain, so distinct scopes never collide.
  std::string key = scope.tenant.value_or(source.tenant);
  for (const std::string& part :
       {scope.model.value_or(source.model), lora, scope.salt.value_or(source.salt),
        std::to_string(block_size), std::to_string(scope.group.value_or(0))}) {
    key += '\x1f';
    key += part;
  }
  return scopes_.emplace(key, static_cast<uint32_t>(scopes_.size())).first->second;
}

uint32_t TraceExporter::IdOf(uint32_t scope, uint64_t prefix) {
  const auto [it, added] = ids_.try_emplace(IdKey{prefix, scope}, 0);
  if (added) it->second = static_cast<uint32_t>(stats_.distinct_ids++);
  return it->second;
}

void TraceExporter::OnApplied(const SourceConfig& source, uint64_t seq, int64_t recv_ns,
                              const EventBatch& batch) {
  if (!first_ns_) first_ns_ = recv_ns;
  SourceState& state = sources_[SourceDisplayName(source)];
  // Applied sequence numbers only grow within one incarnation of a publisher: a step back is a
  // restart, after which the source holds nothing (as the index's ClearSource).
  if (state.last_seq && seq <= *state.last_seq) {
    state.blocks.clear();
    ++stats_.restarts;
  }
  state.last_seq = seq;
  for (const Event& event : batch.events) {
    if (const auto* stored = std::get_if<BlockStored>(&event)) {
      OnStored(source, state, *stored, recv_ns);
    } else if (const auto* removed = std::get_if<BlockRemoved>(&event)) {
      const uint64_t bit = TierBit(removed->tier);
      for (EngineHash h : removed->block_hashes) {
        auto it = state.blocks.find(h.value);
        if (it == state.blocks.end()) continue;
        it->second.tiers &= ~bit;
        if (it->second.tiers == 0) state.blocks.erase(it);
      }
    } else if (const auto* cleared = std::get_if<AllCleared>(&event)) {
      if (!cleared->tier) {
        state.blocks.clear();
        continue;
      }
      const uint64_t bit = TierBit(cleared->tier);
      for (auto it = state.blocks.begin(); it != state.blocks.end();) {
        it->second.tiers &= ~bit;
        it = it->second.tiers == 0 ? state.blocks.erase(it) : std::next(it);
      }
    }
    // Mooncake store object updates (StoreUpdate) name objects, not block chains: not requests.
  }
}

void TraceExporter::OnStored(const SourceConfig& source, SourceState& state,
                             const BlockStored& stored, int64_t recv_ns) {
  const size_t n = stored.block_hashes.size();
  const size_t tokens = stored.token_ids.size();
  if (n == 0) {
    ++stats_.rejected;
    return;
  }
  // Tokens per block: the event's, else the source's, else what the token ids imply.
  uint32_t block_size = stored.scope.block_size.value_or(0);
  if (block_size == 0 && tokens == 0) block_size = source.block_size;
  if (block_size == 0 && tokens % n == 0) block_size = static_cast<uint32_t>(tokens / n);
  const bool standard = stored.standard_hashes || source.hash_standard;
  if (tokens == 0 && !(standard && block_size != 0)) {
    ++stats_.tokenless;
    return;
  }
  if (tokens != 0 && (block_size == 0 || tokens != n * block_size)) {
    ++stats_.rejected;
    return;
  }
  uint32_t parent = kNone;
  if (stored.parent) {
    auto it = state.blocks.find(stored.parent->value);
    if (it == state.blocks.end()) {
      ++stats_.orphans;
      return;
    }
    parent = it->second.node;
  }
  // A child inherits its parent's scope (a salt is carried on a prompt's first block only),
  // unless it names a salt of its own.
  const uint32_t scope = parent != kNone && !stored.scope.salt
                             ? nodes_[parent].scope
                             : ScopeId(source, stored.scope, block_size);
  const uint64_t bit = TierBit(stored.tier);
  const bool multimodal = stored.multimodal.size() == n;
  bool added = false;
  uint32_t previous = parent;
  for (size_t i = 0; i < n; ++i) {
    uint64_t prefix = stored.block_hashes[i].value;
    if (!standard) {
      const std::span<const TokenId> block(stored.token_ids.data() + i * block_size, block_size);
      LocalBlockHash local = HashBlockTokens(block, source.hash_seed);
      if (multimodal) local = MixMultimodalKeys(local, stored.multimodal[i], source.hash_seed);
      std::optional<PrefixHash> up;
      if (previous != kNone) up = PrefixHash{nodes_[previous].prefix};
      prefix = ChainPrefixHash(up, local, source.hash_seed).value;
    }
    auto it = state.blocks.find(stored.block_hashes[i].value);
    if (it != state.blocks.end()) {
      const Node& held = nodes_[it->second.node];
      if (held.prefix == prefix && held.scope == scope && held.parent == previous) {
        it->second.tiers |= bit;  // already held (in this or another tier): not new
        previous = it->second.node;
        continue;
      }
    }
    Node node;
    node.prefix = prefix;
    node.scope = scope;
    node.parent = previous;
    node.tokens = (previous == kNone ? 0 : nodes_[previous].tokens) + block_size;
    node.id = IdOf(scope, prefix);
    nodes_.push_back(node);
    previous = static_cast<uint32_t>(nodes_.size() - 1);
    state.blocks[stored.block_hashes[i].value] = Held{previous, bit};
    added = true;
  }
  if (!added) {
    ++stats_.copies;
    return;
  }
  if (pending_ && pending_->source == &state && parent != kNone && parent == pending_->last_node) {
    pending_->last_node = previous;  // the same prompt, grown: one request, keeping its time
    return;
  }
  WritePending();
  pending_ = Pending{&state, previous, recv_ns};
}

void TraceExporter::WritePending() {
  if (!pending_) return;
  WriteRequest(pending_->last_node, pending_->recv_ns);
  pending_.reset();
}

void TraceExporter::WriteRequest(uint32_t last_node, int64_t recv_ns) {
  chain_.clear();
  for (uint32_t at = last_node; at != kNone; at = nodes_[at].parent) chain_.push_back(nodes_[at].id);
  std::reverse(chain_.begin(), chain_.end());
  // Milliseconds since the first applied batch, to the microsecond, never decreasing (a realtime
  // clock step back must not reorder the requests when the trace is replayed).
  const int64_t us = std::max(last_us_, (recv_ns - *first_ns_) / 1000);
  last_us_ = us;
  char head[128];
  if (us % 1000 == 0) {
    std::snprintf(head, sizeof head, "{\"timestamp\": %lld", static_cast<long long>(us / 1000));
  } else {
    std::snprintf(head, sizeof head, "{\"timestamp\": %lld.%03lld",
                  static_cast<long long>(us / 1000), static_cast<long long>(us % 1000));
  }
  buffer_ += head;
  buffer_ += ", \"input_length\": " + std::to_string(nodes_[last_node].tokens) +
             ", \"output_length\": 0, \"hash_ids\": [";
  for (size_t i = 0; i < chain_.size(); ++i) {
    if (i != 0) buffer_ += ", ";
    buffer_ += std::to_string(chain_[i]);
  }
  buffer_ += "]}\n";
  ++stats_.requests;
  stats_.blocks += chain_.size();
  if (buffer_.size() >= (1u << 16)) Flush();
}

void TraceExporter::Flush() {
  if (buffer_.empty()) return;
  if (std::fwrite(buffer_.data(), 1, buffer_.size(), file_) != buffer_.size()) write_failed_ = true;
  buffer_.clear();
}

Status TraceExporter::Finish() {
  WritePending();
  Flush();
  bool ok = !write_failed_ && std::fflush(file_) == 0;
  if (file_ != stdout) {
    ok = std::fclose(file_) == 0 && ok;
    file_ = nullptr;
  }
  if (!ok) return Status::IoError(path_ + ": write failed");
  return Status::Ok();
}

nlohmann::json TraceExporter::StatsJson() const {
  return {{"file", path_},
          {"requests", stats_.requests},
          {"blocks", stats_.blocks},
          {"distinct_ids", stats_.distinct_ids},
          {"skipped", {{"tokenless", stats_.tokenless},
                       {"orphans", stats_.orphans},
                       {"rejected", stats_.rejected},
                       {"copies", stats_.copies}}},
          {"restarts", stats_.restarts}};
}

std::string TraceExporter::SummaryLine() const {
  return FormatCount(stats_.requests) + " requests, " + FormatCount(stats_.blocks) + " blocks, " +
         FormatCount(stats_.distinct_ids) + " distinct ids; skipped stored events: " +
         FormatCount(stats_.tokenless) + " tokenless, " + FormatCount(stats_.orphans) +
         " orphans, " + FormatCount(stats_.rejected) + " rejected, " +
         FormatCount(stats_.copies) + " copies";
}

}  // namespace kvindex::cli
