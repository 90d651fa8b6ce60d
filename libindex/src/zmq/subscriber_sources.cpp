// Subscriber::Impl's sources: opening a source's SUB and replay DEALER, and defining the source
// (ingestor, capture) once its sockets are open.
#include <cerrno>

#include "kvindex/codec/source_spec.h"

#include "subscriber_impl.h"

namespace kvindex {

Status Subscriber::Impl::OpenDealer(Source& s) {
  try {
    zmq::socket_t dealer(context, zmq::socket_type::dealer);
    dealer.set(zmq::sockopt::linger, 0);
    dealer.set(zmq::sockopt::rcvhwm, options.receive_hwm);
    dealer.set(zmq::sockopt::reconnect_ivl, static_cast<int>(options.reconnect_interval.count()));
    dealer.set(zmq::sockopt::reconnect_ivl_max,
               static_cast<int>(options.reconnect_interval_max.count()));
    dealer.connect(s.config.replay_endpoint);
    s.dealer.emplace(std::move(dealer));
  } catch (const zmq::error_t& e) {
    return Status::InvalidArgument("source '" + s.display + "': replay endpoint '" +
                                   s.config.replay_endpoint + "': " + e.what());
  }
  return Status::Ok();
}

Status Subscriber::Impl::OpenSub(Source& s) {
  try {
    zmq::socket_t sub(context, zmq::socket_type::sub);
    sub.set(zmq::sockopt::linger, 0);
    sub.set(zmq::sockopt::rcvhwm, options.receive_hwm);
    sub.set(zmq::sockopt::reconnect_ivl, static_cast<int>(options.reconnect_interval.count()));
    sub.set(zmq::sockopt::reconnect_ivl_max,
            static_cast<int>(options.reconnect_interval_max.count()));
    sub.set(zmq::sockopt::subscribe, s.config.topic);
    if (s.config.bind) {
      sub.bind(s.config.endpoint);
    } else {
      sub.connect(s.config.endpoint);
    }
    s.sub.emplace(std::move(sub));
  } catch (const zmq::error_t& e) {
    const std::string what = "source '" + s.display +
                             "': " + (s.config.bind ? "cannot bind '" : "cannot connect to '") +
                             s.config.endpoint + "': " + e.what();
    if (e.num() == EADDRINUSE || e.num() == EADDRNOTAVAIL || e.num() == EACCES) {
      return Status::Unavailable(what);
    }
    return Status::InvalidArgument(what);
  }
  return Status::Ok();
}

Result<std::unique_ptr<Subscriber::Impl::Source>> Subscriber::Impl::OpenSource(
    const SourceConfig& config) {
  auto source = std::make_unique<Source>();
  source->config = config;
  source->display = SourceDisplayName(config);
  source->status.name = source->display;
  source->status.endpoint = config.endpoint;
  KVINDEX_RETURN_IF_ERROR(OpenSub(*source));
  if (!config.replay_endpoint.empty()) KVINDEX_RETURN_IF_ERROR(OpenDealer(*source));
  return source;
}

Status Subscriber::Impl::Define(std::unique_ptr<Source> source) {
  added_any = true;
  std::optional<SourceId> id;
  const std::string json = SourceConfigToJson(source->config);
  for (size_t i = 0; i < ingestor.source_count(); ++i) {
    if (i < sources.size() && sources[i]) continue;
    if (i < retired.size() && retired[i]) continue;
    if (SourceConfigToJson(ingestor.config(SourceId{static_cast<uint32_t>(i)})) == json) {
      id = SourceId{static_cast<uint32_t>(i)};
      break;
    }
  }
  if (!id) {
    KVINDEX_ASSIGN_OR_RETURN(SourceId added, ingestor.AddSource(source->config));
    id = added;
  }
  source->id = *id;
  ingestor.ArmSilence(*id, RealtimeNs());  // silence counts from now, not from a warm capture
  RecordText(CaptureRecordType::kSourceDefinition, *id, json);
  KVINDEX_RETURN_IF_ERROR(fatal);
  if (sources.size() <= id->value) sources.resize(id->value + 1);
  sources[id->value] = std::move(source);
  return Status::Ok();
}

Status Subscriber::Impl::AddSources(const std::vector<SourceConfig>& configs) {
  // Every socket first: one that cannot be opened leaves none of them defined.
  std::vector<std::unique_ptr<Source>> opened;
  for (const SourceConfig& config : configs) {
    Result<std::unique_ptr<Source>> source = OpenSource(config);
    if (!source.ok()) return source.status();
    opened.push_back(std::move(*source));
  }
  Status added;
  for (auto& source : opened) {
    added = Define(std::move(source));
    if (!added.ok()) break;
  }
  if (added.ok()) {
    sockets_changed = true;  // Run() rebuilds its poll list after this cycle
    for (const SourceConfig& config : configs) {
      const std::string display = SourceDisplayName(config);
      for (auto& s : sources) {
        if (!s || s->display != display || s->config.endpoint != config.endpoint) continue;
        if (options.backfill && s->dealer) StartBackfill(*s);
      }
    }
  }
  return added;
}

Result<ApplyResult> Subscriber::Impl::RemoveInstance(const std::string& instance) {
  bool found = false;
  for (auto& s : sources) {
    if (!s || s->config.name != instance) continue;
    found = true;
    // Its sockets close now, so nothing will answer a replay request: a hole it waits at is given
    // up here (a `timeout` record, so that a replay gives up there too) instead of for good (a
    // journal snapshot is taken only while no source waits). A backfill given up may open a hole
    // among its held batches: a second round gives that up too.
    for (int round = 0; round < 2 && (ingestor.waiting(s->id) ||
                                      ingestor.replay_outstanding(s->id) ||
                                      ingestor.held(s->id) != 0);
         ++round) {
      StopWaiting(*s);
    }
    std::erase_if(pending_requests, [&s](const auto& request) { return request.first == s->id; });
    // Recorded (capture, journal) so that a replay, or a replica, purges the instance here too.
    RecordText(CaptureRecordType::kNote, s->id, kUnregisterNote);
    if (retired.size() <= s->id.value) retired.resize(s->id.value + 1, false);
    retired[s->id.value] = true;
    // Closed now (linger 0): ZeroMQ's reaper frees the socket, its descriptors and its slot of
    // the context's socket limit; the poll set is rebuilt before the next poll.
    s->sub.reset();
    s->dealer.reset();
    s.reset();
    sockets_changed = true;
  }
  if (index == nullptr) {
    if (!found) return Status::NotFound("unregister: no instance '" + instance + "'");
    return ApplyResult{};
  }
  Result<ApplyResult> removed = index->RemoveInstance(instance);
  if (!removed.ok() && found) return ApplyResult{};
  return removed;
}

}  // namespace kvindex
