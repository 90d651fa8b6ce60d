#include "http_serve.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <set>
#include <sstream>

#include "kvindex/core/address.h"
#include "kvindex/core/clock.h"
#include "kvindex/snapshot/snapshot.h"
#include "kvindex/codec/source_spec.h"
#include "kvindex/ingest/ingest.h"
#include "kvindex/query/server_backend.h"
#include "live.h"
#include "snapshot_keeper.h"

namespace kvindex::cli {
namespace {

constexpr const char* kDefaultHttpAddress = "127.0.0.1:13333";

class SubscriberBackend : public ServerBackend {
 public:
  SubscriberBackend(Subscriber* subscriber, const PrefixIndex* index,
                    std::vector<SourceConfig> sources,
                    std::function<std::optional<JournalServing>()> journal)
      : subscriber_(subscriber),
        index_(index),
        configs_(std::move(sources)),
        started_ns_(RealtimeNs()),
        journal_(std::move(journal)) {}

  // A consistent state taken on the I/O thread, written in pieces of up to 256 KiB.
  SnapshotProducer Snapshot() const override {
    return [subscriber = subscriber_, index = index_](
               const std::function<bool(std::string_view)>& write) {
      std::optional<ConsistentState> state = TakeState(*subscriber, *index);
      if (!state) return false;
      std::string pending;
      bool open = true;
      auto flush = [&] {
        open = open && write(pending);
        pending.clear();
        return open;
      };
      const Result<uint64_t> n =
          WriteSnapshot(state->index, state->seq, RealtimeNs(), [&](std::string_view chunk) {
            pending.append(chunk);
            return pending.size() < (size_t{256} << 10) || flush();
          });
      return n.ok() && (pending.empty() || flush());
    };
  }

  std::optional<JournalServing> Journal() const override {
    return journal_ ? journal_() : std::nullopt;
  }

  std::vector<ServedSource> Sources() const override {
    const SubscriberStatus status = subscriber_->status();
    std::lock_guard lock(mutex_);
    std::vector<ServedSource> out;
    out.reserve(configs_.size());
    for (const SourceConfig& config : configs_) {
      ServedSource s;
      s.name = SourceDisplayName(config);
      s.config = config;
      s.state = status.running ? "live" : "stopped";
      s.subscribed = true;
      s.watched_since_ns = started_ns_;
      for (const SubscriberSourceStatus& st : status.sources) {
        if (st.name != s.name) continue;
        s.counters = st.ingest;
        s.transport = TransportOf(st);
        if (st.backfilling) s.state = "backfilling";
      }
      if (unregistered_.count(config.name) != 0) s.state = "unregistered";
      out.push_back(std::move(s));
    }
    return out;
  }

  Status Register(std::span<const SourceConfig> configs) override {
    {
      std::lock_guard lock(mutex_);
      for (const SourceConfig& config : configs) {
        const std::string name = SourceDisplayName(config);
        for (const SourceConfig& c : configs_) {
          if (SourceDisplayName(c) == name && unregistered_.count(c.name) == 0) {
            return Status::InvalidArgument("source '" + name + "' is already registered");
          }
        }
      }
    }
    // The subscriber opens every socket, then adds the sources, on its I/O thread (the index's
    // writer); a socket that cannot be opened leaves none added.
    KVINDEX_RETURN_IF_ERROR(subscriber_->AddSourceWhileRunning(configs));
    std::lock_guard lock(mutex_);
    for (const SourceConfig& config : configs) {
      // A registration again after /unregister replaces the old entry (one per display name).
      std::erase_if(configs_, [&](const SourceConfig& c) {
        return SourceDisplayName(c) == SourceDisplayName(config);
      });
      configs_.push_back(config);
      unregistered_.erase(config.name);
      generation_.fetch_add(1);
    }
    return Status::Ok();
  }

  Result<ApplyResult> Unregister(const std::string& instance) override {
    {
      std::lock_guard lock(mutex_);
      if (unregistered_.count(instance) != 0) {
        return Status::NotFound("unregister: instance '" + instance + "' is already unregistered");
      }
    }
    // The subscriber closes the instance's sockets and purges it on its I/O thread.
    Result<ApplyResult> result = subscriber_->RemoveInstanceWhileRunning(instance);
    if (result.ok()) {
      std::lock_guard lock(mutex_);
      unregistered_.insert(instance);
      generation_.fetch_add(1);
    }
    return result;
  }

 protected:
  // Both counters only grow, so their sum changes whenever either does.
  uint64_t TrustGeneration() const override {
    return subscriber_->status_generation() + generation_.load();
  }

 private:
  Subscriber* subscriber_;
  std::atomic<uint64_t> generation_{0};  // bumped by every register / unregister
  const PrefixIndex* index_;
  mutable std::mutex mutex_;
  std::vector<SourceConfig> configs_;
  int64_t started_ns_;  // when the subscriber began listening (realtime ns)
  std::set<std::string> unregistered_;
  std::function<std::optional<JournalServing>()> journal_;
};

}  // namespace

class HttpServing {
 public:
  std::unique_ptr<ServerBackend> owned_backend;  // the subscriber's (a replica keeps its own)
  std::unique_ptr<QueryServer> server;
};

void AddHttpOptions(CLI::App* cmd, HttpCliOptions& options) {
  cmd->add_option_function<std::string>(
         "--http",
         [&options](const std::string& value) {
           options.given = true;
           options.address = value;
         },
         "Serve the HTTP API (docs/http-api.md) on HOST:PORT (default 127.0.0.1:13333; a "
         "--config file's http_server_port also turns it on)")
      ->expected(0, 1);
  cmd->add_option("--compat", options.compat,
                  "'conductor': /query answers without the \"data\" wrapper, as the upstream "
                  "conductor does")
      ->check(CLI::IsMember({"conductor"}));
  cmd->add_option("--http-mode", options.mode,
                  "How HTTP connections get a thread. 'pool' (default): --http-threads I/O "
                  "threads share every open connection. 'dedicated': each connection has a "
                  "thread of its own, blocked in recv between requests (fewer system calls and "
                  "wake-ups per request; one thread per open connection, up to "
                  "--http-max-connections)")
      ->check(CLI::IsMember({"pool", "dedicated"}));
  cmd->add_option("--http-threads", options.threads,
                  "HTTP I/O threads with --http-mode pool (default 2); each reads, answers and "
                  "writes its share of the open connections")
      ->check(CLI::Range(1, 256));
  cmd->add_option("--http-max-connections", options.max_connections,
                  "HTTP connections open at once (default 1024); a further one waits until one "
                  "closes")
      ->check(CLI::Range(1, 65536));
}

Result<std::shared_ptr<HttpServing>> StartHttpServing(
    const HttpCliOptions& options, const std::string& config_path, PrefixIndex& index,
    Subscriber& subscriber, const std::vector<SourceConfig>& sources,
    std::function<std::optional<JournalServing>()> journal) {
  // The backend writes only through Subscriber::Submit (the I/O thread is the index's writer).
  auto backend =
      std::make_unique<SubscriberBackend>(&subscriber, &index, sources, std::move(journal));
  KVINDEX_ASSIGN_OR_RETURN(auto serving,
                           StartHttpServingWith(options, config_path, index, *backend));
  if (serving) serving->owned_backend = std::move(backend);
  return serving;
}

Result<std::shared_ptr<HttpServing>> StartHttpServingWith(const HttpCliOptions& options,
                                                          const std::string& config_path,
                                                          PrefixIndex& index,
                                                          ServerBackend& backend) {
  std::string address;
  if (options.given) {
    address = options.address.empty() ? kDefaultHttpAddress : options.address;
  } else if (!config_path.empty()) {
    std::ifstream in(config_path, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    Result<SourcesConfig> config = ParseSourcesConfig(text.str(), config_path);
    if (config.ok() && config->http_port) address = "127.0.0.1:" + std::to_string(*config->http_port);
  }
  if (address.empty()) {
    if (!options.compat.empty()) {
      return Status::InvalidArgument("--compat needs --http (or http_server_port in --config)");
    }
    return std::shared_ptr<HttpServing>();
  }
  KVINDEX_ASSIGN_OR_RETURN(const NetAddress listen, ParseListenAddress(address, "--http"));
  auto serving = std::make_shared<HttpServing>();
  QueryServerOptions server_options;
  server_options.host = listen.host;
  server_options.port = *listen.port;
  server_options.model = options.mode == "dedicated" ? http::ConnectionModel::kDedicated
                                                     : http::ConnectionModel::kPool;
  server_options.threads = options.threads;
  server_options.max_connections = options.max_connections;
  server_options.conductor_compat = options.compat == "conductor";
  KVINDEX_ASSIGN_OR_RETURN(serving->server,
                           QueryServer::Start(index, backend, server_options));
  std::fprintf(stderr, "kvindex subscribe: serving HTTP on %s:%u\n", listen.host.c_str(),
               static_cast<unsigned>(serving->server->port()));
  return serving;
}

void StopHttpServing(const std::shared_ptr<HttpServing>& serving) {
  if (serving && serving->server) serving->server->Stop();
}

}  // namespace kvindex::cli
