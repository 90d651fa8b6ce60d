// The journal flags of `subscribe` and `record`, the ingester's journal status, the replica
// (`subscribe --from-journal`) and the journal export (`record --from-journal`).
#include "journal_cli.h"

#include <pthread.h>
#include <signal.h>
#include <time.h>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

#include "kvindex/core/clock.h"
#include "kvindex/core/log.h"
#include "kvindex/files/capture.h"
#include "kvindex/ingest/ingest.h"
#include "kvindex/ingest/record_order.h"
#include "kvindex/nats/journal_apply.h"
#include "cli_validators.h"
#include "journal_snapshots.h"
#include "live.h"

namespace kvindex::cli {

void AddJournalOptions(CLI::App* cmd, JournalCliOptions& options, bool publish_flags,
                       CLI::Option* excluded) {
  if (publish_flags) {
    cmd->add_option("--journal", options.publish,
                    "Also publish every record a capture would hold to the NATS JetStream journal "
                    "at nats://HOST:PORT[,HOST:PORT...] (docs/scale-out.md)");
    cmd->add_option("--journal-buffer", options.buffer_bytes,
                    "Bytes of journal records kept while NATS is slow or down (default 256 MiB); "
                    "beyond it records are dropped and counted")
        ->check(cli::Positive());
    cmd->add_option("--journal-batch", options.batch_records,
                    "Up to N records of one source per JetStream message (1-1024, default 1): "
                    "fewer, larger messages for more throughput; an HA pair may then store a "
                    "batch twice (replicas apply it once)")
        ->check(CLI::Range(uint64_t{1}, uint64_t{1024}));
    cmd->add_option("--journal-replicas", options.replicas,
                    "Replicas of the journal stream when --journal creates it (1-5, default 1; 3 "
                    "in a JetStream cluster)")
        ->check(CLI::Range(1, 5));
    cmd->add_option("--journal-max-age", options.max_age_s,
                    "The stream's age limit, set when --journal creates it or changed on an existing "
                    "one: JetStream drops records older than S seconds (default: never; at least 1)")
        ->check(cli::RealIn(1.0, cli::kMaxSeconds, /*zero_ok=*/false));
    cmd->add_option("--journal-max-bytes", options.max_bytes,
                    "The stream's size limit, set when --journal creates it or changed on an "
                    "existing one: JetStream drops the oldest records beyond B bytes (default: no "
                    "limit)")
        ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 62));
    cmd->add_option("--snapshot-to-journal", options.snapshot_every_s,
                    "Every S seconds write a snapshot of the index into the journal's snapshot "
                    "stream (NAME_SNAP), keeping --snapshot-keep; replicas start from the newest "
                    "(docs/scale-out.md)")
        ->check(cli::Seconds(/*zero_ok=*/false));
  }
  CLI::Option* from = cmd->add_option(
      "--from-journal", options.from,
      publish_flags ? "Be a replica: apply the journal at nats://HOST:PORT[,...] after its newest "
                      "snapshot (else from its start) instead of connecting to engines "
                      "(docs/scale-out.md)"
                    : "Export the journal at nats://HOST:PORT[,...] (as it is now) instead of "
                      "recording engines");
  if (excluded != nullptr) from->excludes(excluded);
  cmd->add_option_function<std::string>(
      "--journal-stream",
      [&options](const std::string& value) {
        options.stream = value;
        options.stream_given = true;
      },
      "The journal's JetStream stream (default kvindex; subjects NAME.>)");
}

Result<JournalOptions> MakeJournalOptions(const JournalCliOptions& options,
                                          const std::string& servers, const char* flag) {
  JournalOptions out;
  KVINDEX_ASSIGN_OR_RETURN(out.servers, ParseJournalServers(servers, flag));
  KVINDEX_RETURN_IF_ERROR(CheckJournalStreamName(options.stream, "--journal-stream"));
  out.stream = options.stream;
  out.buffer_bytes = options.buffer_bytes;
  out.batch_records = static_cast<size_t>(options.batch_records);
  out.stream_replicas = options.replicas;
  out.max_age = std::chrono::seconds(static_cast<int64_t>(options.max_age_s + 0.5));
  out.max_bytes = static_cast<int64_t>(options.max_bytes);
  return out;
}

JournalServing ServingOf(const JournalPublisherStatus& status) {
  JournalServing out;
  out.connected = status.connected;
  out.records_pending = status.records_pending;
  out.bytes_pending = status.bytes_pending;
  out.last_acked_seq = status.last_acked_seq;
  out.lost_records = status.lost_records;
  out.lost_bytes = status.lost_bytes;
  return out;
}

std::string JournalStatusText(const JournalPublisherStatus& status) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "journal %s: %llu pending (%.1f MB), acked to seq %llu",
                status.connected ? "up" : "DOWN",
                static_cast<unsigned long long>(status.records_pending),
                static_cast<double>(status.bytes_pending) / 1e6,
                static_cast<unsigned long long>(status.last_acked_seq));
  std::string out = buf;
  if (status.lost_records != 0) {
    std::snprintf(buf, sizeof buf, ", LOST %llu records (%llu bytes)",
                  static_cast<unsigned long long>(status.lost_records),
                  static_cast<unsigned long long>(status.lost_bytes));
    out += buf;
  }
  return out;
}

nlohmann::json JournalJson(const JournalPublisherStatus& s) {
  return {{"connected", s.connected},           {"records_accepted", s.records_accepted},
          {"records_acked", s.records_acked},   {"messages_acked", s.messages_acked},
          {"duplicates", s.duplicates},
          {"records_pending", s.records_pending}, {"bytes_pending", s.bytes_pending},
          {"last_acked_seq", s.last_acked_seq}, {"resent", s.resent},
          {"lost_records", s.lost_records},     {"lost_bytes", s.lost_bytes}};
}

namespace {

// What a replica's consumer thread publishes for the HTTP API and the status line.
struct ReplicaSnapshot {
  std::vector<ServedSource> sources;
  JournalServing journal;
  JournalApplyStats stats;
};

class ReplicaBackend : public ServerBackend {
 public:
  std::vector<ServedSource> Sources() const override {
    std::lock_guard lock(mutex_);
    return snapshot_.sources;
  }
  Status Register(std::span<const SourceConfig>) override {
    return Status::Unsupported("a replica (--from-journal) takes its sources from the journal");
  }
  Result<ApplyResult> Unregister(const std::string&) override {
    return Status::Unsupported("a replica (--from-journal) takes its sources from the journal");
  }
  std::optional<JournalServing> Journal() const override {
    std::lock_guard lock(mutex_);
    return snapshot_.journal;
  }
  void Set(ReplicaSnapshot snapshot) {
    std::lock_guard lock(mutex_);
    snapshot_ = std::move(snapshot);
  }
  ReplicaSnapshot Get() const {
    std::lock_guard lock(mutex_);
    return snapshot_;
  }

 private:
  mutable std::mutex mutex_;
  ReplicaSnapshot snapshot_;
};

ReplicaSnapshot SnapshotOf(const JournalApplier& applier, const ReplicaStart& start,
                           bool connected, uint64_t last_seq) {
  ReplicaSnapshot out;
  const Ingestor& ingestor = applier.ingestor();
  for (size_t i = 0; i < ingestor.source_count(); ++i) {
    const SourceId id{static_cast<uint32_t>(i)};
    ServedSource s;
    s.config = ingestor.config(id);
    s.name = SourceDisplayName(s.config);
    s.state = applier.unregistered(id) ? "unregistered" : "replica";
    s.counters = ingestor.counters(id);
    out.sources.push_back(std::move(s));
  }
  out.stats = applier.stats();
  out.journal.replica = true;
  out.journal.connected = connected;
  out.journal.applied_seq = out.stats.applied_seq;
  out.journal.stream_last_seq = std::max(last_seq, out.stats.applied_seq);
  out.journal.lag = out.journal.stream_last_seq - out.journal.applied_seq;
  out.journal.started_from = start.from;
  out.journal.snapshot_seq = start.covered_seq;
  out.journal.skipped_seqs = out.stats.skipped_seqs;
  out.journal.reordered = out.stats.reordered;
  out.journal.held_records = out.stats.held_records;
  out.journal.apply_lag = out.stats.apply_lag;
  return out;
}

// Opens the journal from `start_seq`, waiting for NATS and the stream until it can or `stop`.
// Null when stopped first.
Result<std::unique_ptr<JournalReader>> OpenJournal(const JournalOptions& journal,
                                                   uint64_t start_seq,
                                                   const std::atomic<bool>& stop) {
  bool told = false;
  while (!stop.load()) {
    Result<std::unique_ptr<JournalReader>> opened =
        JournalReader::Open(journal, start_seq, std::chrono::milliseconds(500));
    if (opened.ok()) {
      if (told) Log(LogLevel::kInfo, "replica: journal '" + journal.stream + "' opened");
      return opened;
    }
    if (opened.status().code() == StatusCode::kInvalidArgument) return opened.status();
    if (!told) {
      Log(LogLevel::kWarn, "replica: waiting for the journal: " + opened.status().message());
      told = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return std::unique_ptr<JournalReader>();
}

// The consumer thread: opens the journal after the last sequence applied (0, or what a snapshot
// covered), applies every entry, refreshes the snapshot about every 200 ms. A consumer that
// delivers nothing for 2 s while the stream holds more (a cluster node lost under it) is opened
// again after the last sequence applied. Sequences the stream no longer holds (its retention
// dropped them) are counted skipped and logged.
Status ConsumeJournal(const JournalOptions& journal, JournalApplier& applier,
                      const ReplicaStart& start, ReplicaBackend& backend,
                      const std::atomic<bool>& stop) {
  KVINDEX_ASSIGN_OR_RETURN(std::unique_ptr<JournalReader> reader,
                           OpenJournal(journal, applier.stats().applied_seq + 1, stop));
  if (!reader) return Status::Ok();
  JournalEntry entry;
  LogRateLimiter bad_log;
  // The stream's last sequence, once known (asked from the server, or a delivery's metadata).
  // Until then the replica is not `connected`: a lag computed without it would read 0 while the
  // records after the replica's start are still to come.
  uint64_t last_seq = 0;
  bool last_known = false;
  bool connected = false;
  if (const Result<uint64_t> last = reader->LastSeq(); last.ok()) {
    last_seq = *last;
    last_known = connected = true;
  }
  backend.Set(SnapshotOf(applier, start, connected, last_seq));
  bool told_behind = false;
  uint32_t applied_index = 0;  // the place in its message of the last record applied
  auto next_refresh = SteadyClock::now() + std::chrono::milliseconds(200);
  auto last_delivery = SteadyClock::now();
  while (!stop.load()) {
    if (reader->Next(entry, std::chrono::milliseconds(50))) {
      last_delivery = SteadyClock::now();
      last_known = true;
      // Every record is applied once, also when a reopened consumer repeats a message.
      const uint64_t expected = applier.stats().applied_seq + 1;
      if (entry.record_index == 0 && entry.stream_seq > expected) {
        const uint64_t skipped = entry.stream_seq - expected;
        Log(LogLevel::kWarn, "replica: the journal no longer holds seq " +
                                 std::to_string(expected) + ".." +
                                 std::to_string(entry.stream_seq - 1) + " (" +
                                 std::to_string(skipped) +
                                 " records dropped by its retention limits, no snapshot covers "
                                 "them): the index misses what they held");
        applier.NoteSkipped(skipped);
      }
      // A record the index refuses is counted (bad_records), logged and skipped: a replica
      // never stops on one.
      uint64_t suppressed = 0;
      const bool fresh = entry.record_index == 0
                             ? entry.stream_seq >= expected
                             : entry.stream_seq + 1 == expected && entry.record_index > applied_index;
      if (fresh) {
        applied_index = entry.record_index;
        const Status applied = applier.Apply(entry);
        if (!applied.ok() && bad_log.Allow(&suppressed)) {
          Log(LogLevel::kWarn, "replica: journal seq " + std::to_string(entry.stream_seq) +
                                   ": skipped: " + applied.message() +
                                   (suppressed != 0 ? " (" + std::to_string(suppressed) +
                                                          " similar suppressed)"
                                                    : std::string()));
        }
      }
      last_seq = std::max(last_seq, entry.stream_seq + entry.pending);
    }
    const auto now = SteadyClock::now();
    if (now >= next_refresh) {
      // While messages flow, their metadata gives the stream's last sequence: the server is asked
      // (a request this thread waits for, holding up every message behind it) only after a
      // refresh period without any.
      if (!last_known || now - last_delivery >= std::chrono::milliseconds(200)) {
        const Result<uint64_t> last = reader->LastSeq();
        connected = last.ok();
        if (last.ok()) last_seq = std::max(last_seq, *last);
        last_known = last_known || last.ok();
        if (last.ok() && *last < applier.stats().applied_seq && !told_behind) {
          // A snapshot covering more than the stream holds: the stream was made again.
          Log(LogLevel::kWarn, "replica: the journal ends at seq " + std::to_string(*last) +
                                   ", before seq " + std::to_string(applier.stats().applied_seq) +
                                   " that the replica started after: was the stream recreated?");
          told_behind = true;
        }
      } else {
        connected = true;
      }
      backend.Set(SnapshotOf(applier, start, connected, last_seq));
      next_refresh = now + std::chrono::milliseconds(200);
    }
    if (last_seq > applier.stats().applied_seq && now - last_delivery > std::chrono::seconds(2)) {
      reader.reset();
      KVINDEX_ASSIGN_OR_RETURN(reader,
                               OpenJournal(journal, applier.stats().applied_seq + 1, stop));
      if (!reader) break;
      last_delivery = SteadyClock::now();
    }
  }
  backend.Set(SnapshotOf(applier, start, connected, last_seq));
  return Status::Ok();
}

}  // namespace

Status RunReplica(const ReplicaRun& run) {
  IndexOptions index_options;
  index_options.max_blocks = run.max_blocks;
  BlockStopSignals();
  // The newest snapshot in the journal that reads, before serving: a replica answers from a
  // complete index or not at all.
  std::unique_ptr<PrefixIndex> index_owner;
  std::unique_ptr<JournalApplier> applier_owner;
  KVINDEX_ASSIGN_OR_RETURN(const ReplicaStart origin,
                           StartFromJournalSnapshot(run.journal, index_options,
                                                    std::chrono::seconds(2), index_owner,
                                                    applier_owner));
  PrefixIndex& index = *index_owner;
  JournalApplier& applier = *applier_owner;
  auto owned = std::make_unique<ReplicaBackend>();
  ReplicaBackend* backend = owned.get();
  backend->Set(SnapshotOf(applier, origin, false, 0));
  KVINDEX_ASSIGN_OR_RETURN(auto http, StartHttpServingWith(run.http, "", index, *backend));
  std::atomic<bool> stop{false};
  std::atomic<bool> done{false};
  Status result;
  const auto start = SteadyClock::now();
  std::thread consumer([&] {
    result = ConsumeJournal(run.journal, applier, origin, *backend, stop);
    done.store(true);
  });
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  double next_line = run.stats_interval_s;
  while (!done.load()) {
    timespec wait{0, 50'000'000};
    const int sig = sigtimedwait(&set, nullptr, &wait);
    const double elapsed = SecondsSince(start);
    if (sig == SIGINT || sig == SIGTERM || (run.duration_s > 0 && elapsed >= run.duration_s)) {
      stop.store(true);
    }
    if (run.stats_interval_s > 0 && elapsed >= next_line && !stop.load()) {
      const ReplicaSnapshot s = backend->Get();
      std::fprintf(stderr,
                   "kvindex subscribe: %.0f s: replica: journal %s, applied seq %llu, lag %llu, "
                   "%llu resident blocks\n",
                   elapsed, s.journal.connected ? "up" : "DOWN",
                   static_cast<unsigned long long>(s.journal.applied_seq),
                   static_cast<unsigned long long>(s.journal.lag),
                   static_cast<unsigned long long>(index.stats().blocks));
      next_line += run.stats_interval_s;
    }
  }
  consumer.join();
  CloseJournalLibrary();  // the consumer's reader is gone
  StopHttpServing(http);
  const ReplicaSnapshot s = backend->Get();
  const IndexStats stats = index.stats();
  if (origin.from == "snapshot") {
    std::printf("replica: started from journal snapshot %llu (covers seq %llu)\n",
                static_cast<unsigned long long>(origin.snapshot_id),
                static_cast<unsigned long long>(origin.covered_seq));
  }
  if (s.stats.skipped_seqs != 0) {
    std::printf("replica: %llu journal records were gone from the stream (retention) before "
                "they were applied\n",
                static_cast<unsigned long long>(s.stats.skipped_seqs));
  }
  std::printf("replica: %llu journal records applied, up to seq %llu (lag %llu), %llu bad\n"
              "index: %llu resident blocks, %llu presences, %llu orphans, %llu tokenless\n",
              static_cast<unsigned long long>(s.stats.entries),
              static_cast<unsigned long long>(s.stats.applied_seq),
              static_cast<unsigned long long>(s.journal.lag),
              static_cast<unsigned long long>(s.stats.bad_records),
              static_cast<unsigned long long>(stats.blocks),
              static_cast<unsigned long long>(stats.presences),
              static_cast<unsigned long long>(stats.orphans),
              static_cast<unsigned long long>(stats.tokenless));
  std::fflush(stdout);
  if (!run.json.empty()) {
    nlohmann::json json = {{"command", "subscribe"},
                           {"elapsed_s", SecondsSince(start)},
                           {"journal",
                            {{"entries", s.stats.entries},
                             {"applied_seq", s.stats.applied_seq},
                             {"stream_last_seq", s.journal.stream_last_seq},
                             {"lag", s.journal.lag},
                             {"bad_records", s.stats.bad_records},
                             {"lost_notes", s.stats.lost_notes},
                             {"given_up", s.stats.given_up},
                             {"started_from", origin.from},
                             {"snapshot_seq", origin.covered_seq},
                             {"skipped_seqs", s.stats.skipped_seqs},
                             {"reordered", s.stats.reordered},
                             {"held_records", s.stats.held_records},
                             {"released_early", s.stats.released_early}}}};
    if (run.index_json) json["index"] = run.index_json(stats);
    KVINDEX_RETURN_IF_ERROR(WriteJsonFile(run.json, json));
  }
  return result;
}

namespace {

// Writes one journal record into `writer` under the capture source id `source`.
Status WriteJournalRecord(CaptureWriter& writer, const CaptureRecordView& r, SourceId source) {
  switch (r.type) {
    case CaptureRecordType::kSourceDefinition:
      return writer.WriteSourceDefinition(source, r.text(), r.recv_ns);
    case CaptureRecordType::kMessage:
    case CaptureRecordType::kReplayed:
      return writer.WriteFrames(r.type, source, r.recv_ns, r.frames);
    case CaptureRecordType::kGap:
    case CaptureRecordType::kLost:
    case CaptureRecordType::kRestart:
    case CaptureRecordType::kTimeout:
      return writer.WriteObservation(r.type, source, r.recv_ns, r.first(), r.second());
    case CaptureRecordType::kMalformed:
    case CaptureRecordType::kNote:
      return writer.WriteText(r.type, source, r.recv_ns, r.text());
  }
  return Status::Ok();
}

}  // namespace

Status ExportJournal(const JournalOptions& journal, const std::string& out, bool overwrite,
                     const std::string& json_path) {
  KVINDEX_ASSIGN_OR_RETURN(auto reader,
                           JournalReader::Open(journal, 1, std::chrono::milliseconds(2000)));
  KVINDEX_ASSIGN_OR_RETURN(const uint64_t last, reader->LastSeq());
  CaptureWriterOptions writer_options;
  writer_options.overwrite = overwrite;
  KVINDEX_ASSIGN_OR_RETURN(auto writer, CaptureWriter::Create(out, writer_options));
  writer->set_coalescing(true);
  JournalSourceMap sources;
  JournalEntry entry;
  uint64_t records = 0;
  uint64_t bad = 0;
  uint64_t seq = 0;
  // Each source's batch records in the ingester's order (record_order.h), as a replica applies
  // them: replaying the capture then gives the replica's state.
  RecordOrderer orderer;
  uint64_t position = 0;  // records handed to the orderer
  Status written;
  const RecordOrderer::Sink write = [&](uint64_t, uint64_t key, CaptureRecordView& record) {
    if (!written.ok()) return;
    written = WriteJournalRecord(*writer, record, sources.Local(key));
    ++records;
  };
  auto last_progress = SteadyClock::now();
  bool message_done = true;  // the last record read ended its message
  while (seq < last || !message_done) {
    if (!reader->Next(entry, std::chrono::milliseconds(200))) {
      if (SteadyClock::now() - last_progress > std::chrono::seconds(10)) {
        return Status::Unavailable("journal: no message for 10 s at seq " + std::to_string(seq) +
                                   " of " + std::to_string(last));
      }
      continue;
    }
    last_progress = SteadyClock::now();
    if (entry.record_index == 0 && entry.stream_seq > seq + 1) {
      orderer.ReleaseAll(write);  // retention dropped some
    }
    seq = entry.stream_seq;
    message_done = entry.last_in_message;
    if (!entry.problem.ok()) {
      ++bad;
      continue;
    }
    if (entry.record.type == CaptureRecordType::kNote && entry.record.text() == kJournalLostNote) {
      orderer.ReleaseSource(entry.source_key, write);
    }
    orderer.Add(++position, entry.source_key, entry.body, entry.record, entry.prev, write);
    KVINDEX_RETURN_IF_ERROR(written);
  }
  // Records still waiting for a predecessor the stream does not hold (yet) end the capture.
  const uint64_t unordered = orderer.stats().held_now;
  orderer.ReleaseAll(write);
  KVINDEX_RETURN_IF_ERROR(written);
  KVINDEX_RETURN_IF_ERROR(writer->Close());
  reader.reset();
  CloseJournalLibrary();
  std::printf("journal '%s': %llu records to seq %llu (%llu not capture records, skipped; "
              "%llu put back in order, %llu without their predecessor at the end)\n"
              "capture: %s\n",
              journal.stream.c_str(), static_cast<unsigned long long>(records),
              static_cast<unsigned long long>(seq), static_cast<unsigned long long>(bad),
              static_cast<unsigned long long>(orderer.stats().held),
              static_cast<unsigned long long>(unordered), out.c_str());
  std::fflush(stdout);
  if (!json_path.empty()) {
    KVINDEX_RETURN_IF_ERROR(WriteJsonFile(
        json_path, {{"command", "record"},
                    {"journal",
                     {{"records", records},
                      {"last_seq", seq},
                      {"bad_records", bad},
                      {"reordered", orderer.stats().held},
                      {"unordered_at_end", unordered}}},
                    {"files", writer->paths()},
                    {"records_written", writer->records_written()}}));
  }
  return Status::Ok();
}

}  // namespace kvindex::cli
