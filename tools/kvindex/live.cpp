#include "live.h"

#include <pthread.h>
#include <signal.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "kvindex/codec/source_spec.h"
#include "kvindex/core/clock.h"

#include "cli_validators.h"
#include "engine_discovery.h"
#include "report.h"

namespace kvindex::cli {

Result<std::vector<SourceConfig>> GatherSources(const std::vector<std::string>& specs,
                                                const std::string& config_path,
                                                double auto_timeout_s) {
  std::vector<SourceConfig> out;
  // Every spec is checked (a usage error, exit 2) before any engine is asked.
  std::vector<EngineSourceSpec> engines;
  for (const std::string& spec : specs) {
    if (IsEngineSourceSpec(spec)) {
      KVINDEX_ASSIGN_OR_RETURN(auto engine, ParseEngineSourceSpec(spec));
      engines.push_back(std::move(engine));
      continue;
    }
    KVINDEX_ASSIGN_OR_RETURN(auto configs, ParseSourceSpec(spec));
    for (auto& c : configs) out.push_back(std::move(c));
  }
  for (const EngineSourceSpec& engine : engines) {
    KVINDEX_ASSIGN_OR_RETURN(auto configs, DiscoverEngineSources(engine, auto_timeout_s));
    const SourceConfig& first = configs.front();
    std::string line = "kvindex: source '" + first.name + "': " + first.format + " engine at " +
                       engine.config.endpoint + ": " + first.endpoint;
    if (configs.size() > 1) line += " and " + std::to_string(configs.size() - 1) + " more rank(s)";
    if (first.bind) line += " (bound: the engine connects)";
    line += ", model " + first.model + ", block size " +
            (first.block_size == 0 ? std::string("from the events")
                                   : std::to_string(first.block_size));
    std::fprintf(stderr, "%s\n", line.c_str());
    for (auto& c : configs) out.push_back(std::move(c));
  }
  if (!config_path.empty()) {
    std::ifstream in(config_path, std::ios::binary);
    if (!in) return Status::NotFound("--config " + config_path + ": cannot open");
    std::stringstream text;
    text << in.rdbuf();
    KVINDEX_ASSIGN_OR_RETURN(auto config, ParseSourcesConfig(text.str(), config_path));
    for (auto& c : config.sources) out.push_back(std::move(c));
  }
  if (out.empty()) return Status::InvalidArgument("no source: give --source or --config");
  return out;
}

void AddAutoTimeoutOption(CLI::App* cmd, double& seconds) {
  cmd->add_option("--auto-timeout", seconds,
                  "Keep asking an auto@http:// engine that is not reachable yet for up to S "
                  "seconds (default 0: ask once)")
      ->check(cli::Seconds(/*zero_ok=*/true));
}

SourceFlags AddSourceFlags(CLI::App* cmd, std::vector<std::string>& sources, std::string& config) {
  SourceFlags flags;
  flags.source =
      cmd->add_option("--source", sources,
                      "NAME=FORMAT@ENDPOINT[,key=value...] (repeatable; docs/cli.md \"Sources\")")
          ->check(cli::Utf8());
  flags.config = cmd->add_option("--config", config, "Upstream conductor JSON config of sources")
                     ->check(CLI::ExistingFile)
                     ->check(cli::InputFile());
  return flags;
}

void BlockStopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

namespace {

std::string Rate(double n, double seconds) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f/s", seconds > 0 ? n / seconds : 0.0);
  return buf;
}

std::string StatusLine(const std::string& command, const SubscriberStatus& now,
                       const SubscriberStatus& before, double elapsed, double interval,
                       const std::string& extra) {
  const auto t = now.Total();
  const auto b = before.Total();
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "kvindex %s: %.0f s: received %llu (%s), applied %llu, gaps %llu, recovered %llu, "
                "lost %llu, malformed %llu",
                command.c_str(), elapsed, static_cast<unsigned long long>(t.messages),
                Rate(static_cast<double>(t.messages - b.messages), interval).c_str(),
                static_cast<unsigned long long>(t.ingest.sequence.applied),
                static_cast<unsigned long long>(t.ingest.sequence.gaps),
                static_cast<unsigned long long>(t.ingest.sequence.recovered),
                static_cast<unsigned long long>(t.ingest.sequence.lost),
                static_cast<unsigned long long>(t.ingest.sequence.malformed +
                                                t.ingest.frame_errors));
  std::string line = buf;
  // Sources by trust state (docs/http-api.md "Trust states").
  size_t states[3] = {0, 0, 0};
  for (const SubscriberSourceStatus& s : now.sources) {
    ++states[static_cast<size_t>(s.ingest.trust.state())];
  }
  std::snprintf(buf, sizeof buf, ", sources exact %zu, degraded %zu, stale %zu", states[0],
                states[1], states[2]);
  line += buf;
  // Named only once they happen (docs/sequence-rules.md "Late join", "Corrupt sequences").
  if (t.ingest.sequence.late_joins != 0) {
    std::snprintf(buf, sizeof buf, ", late joins %llu (%llu batches unknown)",
                  static_cast<unsigned long long>(t.ingest.sequence.late_joins),
                  static_cast<unsigned long long>(t.ingest.sequence.late_join_batches));
    line += buf;
  }
  if (t.ingest.sequence.corrupt_seqs != 0) {
    std::snprintf(buf, sizeof buf, ", corrupt seqs %llu",
                  static_cast<unsigned long long>(t.ingest.sequence.corrupt_seqs));
    line += buf;
  }
  if (now.bytes_written != 0) {
    std::snprintf(buf, sizeof buf, ", %.1f MB written", static_cast<double>(now.bytes_written) / 1e6);
    line += buf;
  }
  if (!extra.empty()) line += ", " + extra;
  return line;
}

}  // namespace

LiveOutcome RunLive(Subscriber& subscriber, const LiveRun& run) {
  LiveOutcome outcome;
  std::atomic<bool> done{false};
  Status result;
  const auto start = SteadyClock::now();
  std::thread io([&] {
    result = subscriber.Run();
    done.store(true);
  });
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  auto next_line = start + std::chrono::duration_cast<SteadyClock::duration>(
                               std::chrono::duration<double>(run.stats_interval_s));
  SubscriberStatus previous = subscriber.status();
  bool stopping = false;
  while (!done.load()) {
    timespec wait{0, 50'000'000};  // 50 ms: notices the subscriber's own end promptly
    const int sig = sigtimedwait(&set, nullptr, &wait);
    const auto now = SteadyClock::now();
    const double elapsed = std::chrono::duration<double>(now - start).count();
    if ((sig == SIGINT || sig == SIGTERM) && !stopping) {
      outcome.signalled = true;
      stopping = true;
      subscriber.Stop();
    }
    if (run.duration_s > 0 && elapsed >= run.duration_s && !stopping) {
      stopping = true;
      subscriber.Stop();
    }
    if (run.stats_interval_s > 0 && now >= next_line && !stopping) {
      SubscriberStatus current = subscriber.status();
      std::fprintf(stderr, "%s\n",
                   StatusLine(run.command, current, previous, elapsed, run.stats_interval_s,
                              run.extra ? run.extra() : std::string())
                       .c_str());
      previous = std::move(current);
      next_line += std::chrono::duration_cast<SteadyClock::duration>(
          std::chrono::duration<double>(run.stats_interval_s));
    }
  }
  io.join();
  outcome.elapsed_s = SecondsSince(start);
  outcome.status = result;
  return outcome;
}

namespace {

nlohmann::json SourceJson(const SubscriberSourceStatus& s) {
  nlohmann::json out = {{"name", s.name}, {"endpoint", s.endpoint}};
  AddSourceCounters(out, s.ingest, TransportOf(s));
  return out;
}

}  // namespace

TransportCounters TransportOf(const SubscriberSourceStatus& s) {
  TransportCounters t;
  t.messages = s.messages;
  t.bytes = s.bytes;
  t.replay_messages = s.replay_messages;
  t.replay_timeouts = s.replay_timeouts;
  t.replay_send_failures = s.replay_send_failures;
  t.unsupported = s.unsupported;
  t.unrecorded = s.unrecorded;
  t.last_message_ns = s.last_message_ns;
  return t;
}

nlohmann::json SummaryJson(const SubscriberStatus& status, double elapsed_s) {
  nlohmann::json sources = nlohmann::json::array();
  for (const auto& s : status.sources) sources.push_back(SourceJson(s));
  nlohmann::json out = {{"elapsed_s", elapsed_s},
                        {"sources", sources},
                        {"total", SourceJson(status.Total())}};
  out["first_message_ns"] = status.first_message_ns;
  out["last_message_ns"] = status.last_message_ns;
  out["total"].erase("name");
  out["total"].erase("endpoint");
  if (status.records_written != 0) {
    out["records_written"] = status.records_written;
    out["bytes_written"] = status.bytes_written;
  }
  return out;
}

std::string SummaryText(const SubscriberStatus& status, double elapsed_s) {
  std::string out;
  char buf[512];
  auto row = [&](const SubscriberSourceStatus& s) {
    const auto& q = s.ingest.sequence;
    std::snprintf(buf, sizeof buf,
                  "%-24s %10llu %10llu %9llu %9llu %6llu %9llu %6llu %8llu %10llu\n",
                  s.name.c_str(), static_cast<unsigned long long>(q.received),
                  static_cast<unsigned long long>(q.applied),
                  static_cast<unsigned long long>(q.malformed + s.ingest.frame_errors),
                  static_cast<unsigned long long>(s.unsupported),
                  static_cast<unsigned long long>(q.gaps),
                  static_cast<unsigned long long>(q.recovered),
                  static_cast<unsigned long long>(q.lost),
                  static_cast<unsigned long long>(q.restarts),
                  static_cast<unsigned long long>(q.duplicates));
    out += buf;
  };
  std::snprintf(buf, sizeof buf, "%-24s %10s %10s %9s %9s %6s %9s %6s %8s %10s\n", "source",
                "received", "applied", "malformed", "unsupport", "gaps", "recovered", "lost",
                "restarts", "duplicates");
  out += buf;
  for (const auto& s : status.sources) row(s);
  if (status.sources.size() > 1) row(status.Total());
  std::snprintf(buf, sizeof buf, "elapsed %.1f s", elapsed_s);
  out += buf;
  if (status.records_written != 0) {
    std::snprintf(buf, sizeof buf, ", %llu records, %llu bytes written",
                  static_cast<unsigned long long>(status.records_written),
                  static_cast<unsigned long long>(status.bytes_written));
    out += buf;
  }
  out += "\n";
  return out;
}

Status WriteJsonFile(const std::string& path, const nlohmann::json& json) {
  return WriteJson(path, json).WithContext("--json");
}

}  // namespace kvindex::cli
