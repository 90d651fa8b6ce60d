// `kvindex subscribe`: the live index. One I/O thread (the Subscriber) is the index's only writer;
// the main thread waits for signals and prints status, and other threads (the HTTP server of
// --http) query the PrefixIndex concurrently.
#include <cstdio>
#include <filesystem>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli_validators.h"
#include "commands.h"
#include "kvindex/files/capture.h"
#include "kvindex/index/prefix_index.h"
#include "kvindex/zmq/subscriber.h"
#include "http_serve.h"
#include "journal_cli.h"
#include "journal_snapshots.h"
#include "live.h"
#include "snapshot_keeper.h"
#include "snapshot_tools.h"

namespace kvindex::cli {
namespace {

struct SubscribeOptions {
  std::vector<std::string> sources;
  std::string config;
  std::string record;
  bool force = false;
  std::vector<std::string> warm_from;
  uint64_t max_blocks = 0;
  double stats_interval = 5.0;
  double replay_timeout = 2.0;
  double stale_after = 30.0;
  double auto_timeout = 0;
  double duration = 0;
  double fsync_interval = 1.0;
  bool strict = false;
  std::string json;
  std::string snapshot_dir;
  double snapshot_interval = 60;
  uint64_t snapshot_keep = 3;
  HttpCliOptions http;
  JournalCliOptions journal;
};

nlohmann::json IndexJson(const IndexStats& stats) {
  nlohmann::json instances = nlohmann::json::object();
  for (const auto& instance : stats.instances) {
    nlohmann::json tiers = nlohmann::json::object();
    for (const auto& tier : instance.tiers) tiers[tier.tier] = tier.presences;
    instances[instance.instance] = {{"tiers", tiers}, {"orphans", instance.orphans}};
  }
  return {{"blocks", stats.blocks},       {"presences", stats.presences},
          {"scopes", stats.scopes},       {"orphans", stats.orphans},
          {"tokenless", stats.tokenless}, {"unmapped", stats.unmapped},
          {"evictions", stats.evictions}, {"bytes", stats.bytes},
          {"instances", instances}};
}

// --snapshot-to-journal, --journal-max-age, --journal-max-bytes or --journal-batch given (they
// need --journal).
bool JournalPublishFlagsGiven(const JournalCliOptions& journal) {
  return journal.snapshot_every_s > 0 || journal.max_age_s > 0 || journal.max_bytes > 0 ||
         journal.batch_records != 1;
}

Status RunReplicaOf(const SubscribeOptions& options) {
  if (JournalPublishFlagsGiven(options.journal)) {
    return Status::InvalidArgument("--from-journal: --snapshot-to-journal, --journal-max-age, "
                                   "--journal-max-bytes and --journal-batch belong to the "
                                   "ingester (--journal)");
  }
  if (!options.record.empty() || !options.warm_from.empty() || !options.journal.publish.empty() ||
      !options.snapshot_dir.empty()) {
    return Status::InvalidArgument(
        "--from-journal: a replica takes no --record, --warm-from, --snapshot-dir or --journal");
  }
  ReplicaRun run;
  KVINDEX_ASSIGN_OR_RETURN(run.journal,
                           MakeJournalOptions(options.journal, options.journal.from,
                                              "--from-journal"));
  run.http = options.http;
  run.max_blocks = options.max_blocks;
  run.duration_s = options.duration;
  run.stats_interval_s = options.stats_interval;
  run.json = options.json;
  run.index_json = IndexJson;
  return RunReplica(run);
}

Status RunSubscribe(const SubscribeOptions& options) {
  if (!options.journal.from.empty()) return RunReplicaOf(options);
  if (options.journal.stream_given && options.journal.publish.empty()) {
    return Status::InvalidArgument("--journal-stream needs --journal or --from-journal");
  }
  if (options.journal.publish.empty() && JournalPublishFlagsGiven(options.journal)) {
    return Status::InvalidArgument("--snapshot-to-journal, --journal-max-age, --journal-max-bytes "
                                   "and --journal-batch need --journal");
  }
  KVINDEX_ASSIGN_OR_RETURN(auto sources, GatherSources(options.sources, options.config,
                                                       options.auto_timeout));
  std::unique_ptr<JournalPublisher> journal;
  JournalOptions journal_options;
  if (!options.journal.publish.empty()) {
    KVINDEX_ASSIGN_OR_RETURN(journal_options,
                             MakeJournalOptions(options.journal, options.journal.publish,
                                                "--journal"));
    KVINDEX_ASSIGN_OR_RETURN(journal, JournalPublisher::Start(journal_options));
  }
  for (const auto& source : sources) {
    if ((source.format == "vllm" || source.format == "sglang") && source.model.empty()) {
      return Status::InvalidArgument("source '" + SourceDisplayName(source) + "' (" +
                                     source.format +
                                     ") needs model=M: vLLM and SGLang events do not carry it");
    }
  }
  std::unique_ptr<CaptureWriter> writer;
  if (!options.record.empty()) {
    CaptureWriterOptions writer_options;
    writer_options.fsync_interval = Millis(options.fsync_interval);
    writer_options.background_sync = true;  // the ingest thread never waits for the disk
    writer_options.drop_behind = true;      // nor fills the page cache with the capture
    writer_options.mapped = true;           // nor makes a system call per poll cycle
    writer_options.overwrite = options.force;
    KVINDEX_ASSIGN_OR_RETURN(writer, CaptureWriter::Create(options.record, writer_options));
  }
  IndexOptions index_options;
  index_options.max_blocks = options.max_blocks;
  std::unique_ptr<PrefixIndex> index_owner;
  // The newest valid snapshot of --snapshot-dir, else a snapshot --warm-from names.
  std::optional<SnapshotInfo> loaded;
  if (!options.snapshot_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(options.snapshot_dir, ec);
    if (ec) {
      return Status::IoError("--snapshot-dir " + options.snapshot_dir + ": " + ec.message());
    }
    loaded = LoadNewestSnapshot(options.snapshot_dir, index_options, index_owner);
  } else {
    index_owner = std::make_unique<PrefixIndex>(index_options);
  }
  const bool warm_snapshot = IsSnapshotWarmFrom(options.warm_from);
  if (warm_snapshot && options.warm_from.size() != 1) {
    return Status::InvalidArgument("--warm-from: one snapshot (file or http://HOST:PORT) at a time");
  }
  if (warm_snapshot && !loaded) {
    index_owner = std::make_unique<PrefixIndex>(index_options);
    KVINDEX_ASSIGN_OR_RETURN(loaded, WarmFromSnapshot(options.warm_from.front(), *index_owner));
  }
  PrefixIndex& index = *index_owner;

  BlockStopSignals();
  SubscriberOptions sub_options;
  sub_options.replay_timeout = Millis(options.replay_timeout);
  sub_options.stale_after = Millis(options.stale_after);
  sub_options.strict = options.strict;
  KVINDEX_ASSIGN_OR_RETURN(auto subscriber, Subscriber::Create(&index, writer.get(), sub_options));
  if (journal) subscriber->SetRecordSink(journal.get());
  if (loaded) {
    KVINDEX_RETURN_IF_ERROR(subscriber->AdoptSources(loaded->sources, loaded->seq));
    std::fprintf(stderr, "kvindex subscribe: continuing from a snapshot: %llu resident blocks\n",
                 static_cast<unsigned long long>(index.stats().blocks));
    if (!options.warm_from.empty() && !warm_snapshot) {
      std::fprintf(stderr, "kvindex subscribe: --warm-from ignored: --snapshot-dir held a "
                           "snapshot\n");
    }
  } else if (!options.warm_from.empty() && !warm_snapshot) {
    KVINDEX_RETURN_IF_ERROR(subscriber->WarmFrom(options.warm_from));
    const IndexStats warm = index.stats();
    std::fprintf(stderr, "kvindex subscribe: warmed from %zu file(s): %llu resident blocks\n",
                 options.warm_from.size(), static_cast<unsigned long long>(warm.blocks));
  }
  for (const auto& source : sources) KVINDEX_RETURN_IF_ERROR(subscriber->AddSource(source));

  LiveRun run;
  run.command = "subscribe";
  run.duration_s = options.duration;
  run.stats_interval_s = options.stats_interval;
  run.extra = [&index, &journal] {
    std::string text = std::to_string(index.stats().blocks) + " resident blocks";
    if (journal) text += ", " + JournalStatusText(journal->status());
    return text;
  };
  std::function<std::optional<JournalServing>()> journal_probe;
  // Made before the HTTP server reads it (journal_probe), started with the snapshot keeper.
  std::unique_ptr<JournalSnapshotter> journal_snapshots;
  if (journal && options.journal.snapshot_every_s > 0) {
    journal_snapshots = std::make_unique<JournalSnapshotter>(
        journal_options, options.journal.snapshot_every_s, options.snapshot_keep, *subscriber,
        index, *journal, loaded.has_value() || !options.warm_from.empty());
  }
  if (journal) {
    journal_probe = [&journal, &journal_snapshots]() -> std::optional<JournalServing> {
      JournalServing serving = ServingOf(journal->status());
      if (journal_snapshots) {
        const JournalSnapshotterStatus snaps = journal_snapshots->status();
        serving.snapshot_seq = snaps.last_covered_seq;
        serving.snapshots_written = snaps.written;
        serving.snapshots_failed = snaps.failed;
        serving.snapshot_writer = snaps.writer;
      }
      return serving;
    };
  }
  // The HTTP server (docs/http-api.md) queries `index` on its own threads; writes go through Submit().
  KVINDEX_ASSIGN_OR_RETURN(auto http, StartHttpServing(options.http, options.config, index,
                                                       *subscriber, sources, journal_probe));
  std::unique_ptr<SnapshotKeeper> keeper;
  if (!options.snapshot_dir.empty()) {
    keeper = std::make_unique<SnapshotKeeper>(options.snapshot_dir, options.snapshot_interval,
                                              options.snapshot_keep, *subscriber, index);
    keeper->Start();
  }
  if (journal_snapshots) journal_snapshots->Start();
  const LiveOutcome outcome = RunLive(*subscriber, run);
  if (journal_snapshots) journal_snapshots->Stop();
  StopHttpServing(http);
  if (keeper) {
    keeper->Stop();
    // The final snapshot of a clean stop: Run() has returned, so the ingestor is ours.
    if (outcome.status.ok()) {
      ConsistentState final_state{index.CopyState(), SequenceStates(subscriber->ingestor())};
      KVINDEX_RETURN_IF_ERROR(keeper->Write(final_state).WithContext("final snapshot"));
    }
  }
  Status closed;
  if (writer) closed = writer->Close();
  if (journal) {
    // The records still pending get a few seconds to reach the journal.
    journal->Close(std::chrono::milliseconds(5000));
    const JournalPublisherStatus js = journal->status();
    std::printf("%s\n", JournalStatusText(js).c_str());
  }
  const SubscriberStatus status = subscriber->status();
  const IndexStats stats = index.stats();
  std::string text = SummaryText(status, outcome.elapsed_s);
  std::fputs(text.c_str(), stdout);
  std::printf("index: %llu resident blocks, %llu presences, %llu orphans, %llu tokenless\n",
              static_cast<unsigned long long>(stats.blocks),
              static_cast<unsigned long long>(stats.presences),
              static_cast<unsigned long long>(stats.orphans),
              static_cast<unsigned long long>(stats.tokenless));
  std::fflush(stdout);
  if (!options.json.empty()) {
    auto summary = SummaryJson(status, outcome.elapsed_s);
    summary["command"] = "subscribe";
    summary["index"] = IndexJson(stats);
    if (writer) summary["files"] = writer->paths();
    if (journal) summary["journal"] = JournalJson(journal->status());
    if (journal_snapshots) {
      const JournalSnapshotterStatus snaps = journal_snapshots->status();
      summary["journal"]["snapshots"] = {{"written", snaps.written},
                                         {"failed", snaps.failed},
                                         {"last_covered_seq", snaps.last_covered_seq},
                                         {"writer", snaps.writer}};
    }
    KVINDEX_RETURN_IF_ERROR(WriteJsonFile(options.json, summary));
  }
  if (journal) {
    journal_snapshots.reset();  // its connection too
    journal.reset();
    CloseJournalLibrary();
  }
  KVINDEX_RETURN_IF_ERROR(outcome.status);
  return closed;
}

}  // namespace

void AddSubscribeCommand(CLI::App& app, CommandOutcome& outcome) {
  auto options = std::make_shared<SubscribeOptions>();
  CLI::App* cmd = app.add_subcommand(
      "subscribe",
      "Keep a live prefix index of KV-event sources (gap recovery, restarts, backfill), "
      "optionally recording a capture");
  const auto [source, config] = AddSourceFlags(cmd, options->sources, options->config);
  AddJournalOptions(cmd, options->journal, /*publish_flags=*/true, source);
  cmd->get_option("--from-journal")->excludes(config);
  cmd->add_option("--record", options->record, "Also record a capture to FILE");
  cmd->add_flag("--force", options->force, "Overwrite the --record file if it exists");
  cmd->add_option("--fsync-interval", options->fsync_interval,
                  "fsync the --record capture every S seconds while new data arrives, on a thread "
                  "of its own (default 1; 0 = on the recording thread after every poll cycle)")
      ->check(cli::Seconds(/*zero_ok=*/true));
  cmd->add_option("--warm-from", options->warm_from,
                  "Apply capture file(s) before going live (a rotated capture: every file, in "
                  "order), or load one snapshot: a file, or http://HOST:PORT (a running "
                  "subscribe's GET /snapshot)")
      ->check(cli::WarmFromInput());
  cmd->add_option("--snapshot-dir", options->snapshot_dir,
                  "Keep snapshots of the index in DIR: the newest valid one is loaded at start "
                  "and each source continues from its stored sequence; one is written every "
                  "--snapshot-interval and at a clean stop");
  cmd->add_option("--snapshot-interval", options->snapshot_interval,
                  "Seconds between snapshots of --snapshot-dir (default 60)")
      ->check(cli::Seconds(/*zero_ok=*/false));
  cmd->add_option("--snapshot-keep", options->snapshot_keep,
                  "Snapshots --snapshot-dir and --snapshot-to-journal keep, newest first "
                  "(default 3)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1000}));
  cmd->add_option("--max-blocks", options->max_blocks,
                  "At most N resident blocks (least recently touched evicted first; 0 = no limit)");
  cmd->add_option("--stats-interval", options->stats_interval,
                  "A status line on stderr every S seconds (0 = none; default 5)")
      ->check(cli::Seconds(/*zero_ok=*/true));
  AddAutoTimeoutOption(cmd, options->auto_timeout);
  cmd->add_option("--replay-timeout", options->replay_timeout,
                  "Give up on a silent replay after S seconds (default 2)")
      ->check(cli::Seconds(/*zero_ok=*/false));
  cmd->add_option("--stale-after", options->stale_after,
                  "A source silent for S seconds is stale in answers, /instances and /metrics "
                  "(default 30; 0 = never)")
      ->check(cli::Seconds(/*zero_ok=*/true));
  cmd->add_option("--duration", options->duration, "Stop after S seconds (default: until a signal)")
      ->check(cli::Seconds(/*zero_ok=*/false));
  cmd->add_flag("--strict", options->strict, "The first bad message is fatal (exit 1)");
  cmd->add_option("--json", options->json, "Write the summary as JSON to FILE ('-' = stdout)");
  AddHttpOptions(cmd, options->http);
  cmd->callback([options, &outcome] {
    outcome.command = "subscribe";
    outcome.status = RunSubscribe(*options);
  });
}

}  // namespace kvindex::cli
