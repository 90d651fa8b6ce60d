// LocalBackend: the sources of a process without an ingest thread, under one mutex.
#include <mutex>

#include "kvindex/query/server_backend.h"

namespace kvindex {

InstanceTrustMap InstanceTrusts(std::span<const ServedSource> sources) {
  InstanceTrustMap out;
  for (const ServedSource& s : sources) {
    if (s.state == "unregistered") continue;
    const auto [it, first] = out.try_emplace(s.config.name);
    AddSourceTrust(it->second, s.counters.trust, first);
  }
  return out;
}

std::shared_ptr<const InstanceTrustMap> ServerBackend::Trust() const {
  const uint64_t generation = TrustGeneration();
  if (generation == 0) return std::make_shared<const InstanceTrustMap>(InstanceTrusts(Sources()));
  std::lock_guard lock(trust_mutex_);
  if (trust_ == nullptr || trust_generation_ != generation) {
    trust_ = std::make_shared<const InstanceTrustMap>(InstanceTrusts(Sources()));
    trust_generation_ = generation;
  }
  return trust_;
}

Result<SourceId> LocalBackend::AddSource(const SourceConfig& config) {
  std::lock_guard lock(mutex_);
  KVINDEX_ASSIGN_OR_RETURN(SourceId id, index_->AddSource(config));
  if (sources_.size() <= id.value) sources_.resize(id.value + 1);
  ServedSource& s = sources_[id.value];
  s.name = SourceDisplayName(config);
  s.config = config;
  s.state = "live";
  generation_.fetch_add(1);
  return id;
}

Result<ApplyResult> LocalBackend::Apply(SourceId source, const EventBatch& batch) {
  std::lock_guard lock(mutex_);
  KVINDEX_ASSIGN_OR_RETURN(ApplyResult result, index_->Apply(source, batch));
  if (source.value < sources_.size()) {
    ServedSource& s = sources_[source.value];
    ++s.counters.sequence.received;
    ++s.counters.sequence.applied;
    ++s.transport.messages;
    s.counters.events += batch.events.size();
    s.counters.index += result;
  }
  // Counts only: no source's trust changed, so Trust() keeps its view.
  return result;
}

std::vector<ServedSource> LocalBackend::Sources() const {
  std::lock_guard lock(mutex_);
  return sources_;
}

Status LocalBackend::Register(std::span<const SourceConfig> configs) {
  {
    std::lock_guard lock(mutex_);
    for (const SourceConfig& config : configs) {
      for (const ServedSource& s : sources_) {
        if (s.name == SourceDisplayName(config) && s.state != "unregistered") {
          return Status::InvalidArgument("source '" + s.name + "' is already registered");
        }
      }
    }
  }
  for (const SourceConfig& config : configs) KVINDEX_RETURN_IF_ERROR(AddSource(config).status());
  return Status::Ok();
}

Result<ApplyResult> LocalBackend::Unregister(const std::string& instance) {
  std::lock_guard lock(mutex_);
  bool listed = false;
  for (const ServedSource& s : sources_) {
    if (s.config.name == instance && s.state != "unregistered") listed = true;
  }
  if (!listed) return Status::NotFound("unregister: no instance '" + instance + "'");
  KVINDEX_ASSIGN_OR_RETURN(ApplyResult result, index_->RemoveInstance(instance));
  for (ServedSource& s : sources_) {
    if (s.config.name == instance) s.state = "unregistered";
  }
  generation_.fetch_add(1);
  return result;
}

}  // namespace kvindex
