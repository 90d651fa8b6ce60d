// `kvindex record`: every message of live sources into a capture file (docs/capture-format.md), with the replay
// protocol run as `subscribe` runs it (replayed batches marked, observations recorded), no index.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli_validators.h"
#include "commands.h"
#include "kvindex/core/clock.h"
#include "kvindex/files/capture.h"
#include "kvindex/zmq/subscriber.h"
#include "journal_cli.h"
#include "live.h"

namespace kvindex::cli {
namespace {

struct RecordOptions {
  std::vector<std::string> sources;
  std::string config;
  std::string out;
  double duration = 0;
  uint64_t count = 0;
  uint64_t rotate_bytes = 0;
  double rotate_seconds = 0;
  double fsync_interval = 1.0;
  double replay_timeout = 2.0;
  double auto_timeout = 0;
  double stats_interval = 5.0;
  bool overwrite = false;
  std::string json;
  JournalCliOptions journal;
};

Status RunRecord(const RecordOptions& options) {
  if (!options.journal.from.empty()) {
    KVINDEX_ASSIGN_OR_RETURN(JournalOptions journal,
                             MakeJournalOptions(options.journal, options.journal.from,
                                                "--from-journal"));
    return ExportJournal(journal, options.out, options.overwrite, options.json);
  }
  if (options.journal.stream_given) {
    return Status::InvalidArgument("--journal-stream needs --from-journal");
  }
  KVINDEX_ASSIGN_OR_RETURN(auto sources, GatherSources(options.sources, options.config,
                                                       options.auto_timeout));
  CaptureWriterOptions writer_options;
  writer_options.fsync_interval = Millis(options.fsync_interval);
  writer_options.background_sync = true;  // the ingest thread never waits for the disk
  writer_options.drop_behind = true;      // nor fills the page cache with the capture
  writer_options.mapped = true;           // nor makes a system call per poll cycle
  writer_options.rotate_bytes = options.rotate_bytes;
  writer_options.rotate_interval =
      std::chrono::seconds(static_cast<int64_t>(options.rotate_seconds + 0.5));
  writer_options.overwrite = options.overwrite;
  KVINDEX_ASSIGN_OR_RETURN(auto writer, CaptureWriter::Create(options.out, writer_options));

  BlockStopSignals();
  SubscriberOptions sub_options;
  sub_options.replay_timeout = Millis(options.replay_timeout);
  sub_options.max_messages = options.count;
  KVINDEX_ASSIGN_OR_RETURN(auto subscriber,
                           Subscriber::Create(/*index=*/nullptr, writer.get(), sub_options));
  for (const auto& source : sources) KVINDEX_RETURN_IF_ERROR(subscriber->AddSource(source));
  KVINDEX_RETURN_IF_ERROR(writer->WriteText(CaptureRecordType::kNote, SourceId{0},
                                            RealtimeNs(), "recording started"));

  LiveRun run;
  run.command = "record";
  run.duration_s = options.duration;
  run.stats_interval_s = options.stats_interval;
  const LiveOutcome outcome = RunLive(*subscriber, run);
  const Status note = writer->WriteText(CaptureRecordType::kNote, SourceId{0}, RealtimeNs(),
                                        outcome.signalled ? "recording stopped (signal)"
                                                          : "recording stopped");
  const Status closed = writer->Close();
  const SubscriberStatus status = subscriber->status();
  std::string text = SummaryText(status, outcome.elapsed_s);
  std::fputs(text.c_str(), stdout);
  std::printf("capture: ");
  for (size_t i = 0; i < writer->paths().size(); ++i) {
    std::printf("%s%s", i == 0 ? "" : " ", writer->paths()[i].c_str());
  }
  std::printf("\n");
  std::fflush(stdout);
  if (!options.json.empty()) {
    auto json = SummaryJson(status, outcome.elapsed_s);
    json["command"] = "record";
    json["files"] = writer->paths();
    json["records_written"] = writer->records_written();
    json["bytes_written"] = writer->bytes_written();
    KVINDEX_RETURN_IF_ERROR(WriteJsonFile(options.json, json));
  }
  KVINDEX_RETURN_IF_ERROR(outcome.status);
  KVINDEX_RETURN_IF_ERROR(note);
  return closed;
}

}  // namespace

void AddRecordCommand(CLI::App& app, CommandOutcome& outcome) {
  auto options = std::make_shared<RecordOptions>();
  CLI::App* cmd = app.add_subcommand(
      "record",
      "Record live KV-event sources into a capture file: raw frames, replayed batches marked, "
      "gaps/lost/restarts/malformed observed (docs/capture-format.md)");
  const auto [source, config] = AddSourceFlags(cmd, options->sources, options->config);
  AddJournalOptions(cmd, options->journal, /*publish_flags=*/false, source);
  cmd->get_option("--from-journal")->excludes(config);
  cmd->add_option("--out", options->out, "Capture file to create (rotated files: NAME.1.EXT, ...)")
      ->required();
  cmd->add_flag("--force", options->overwrite, "Overwrite --out if it exists");
  cmd->add_option("--duration", options->duration, "Stop after S seconds (default: until a signal)")
      ->check(cli::Seconds(/*zero_ok=*/false));
  cmd->add_option("--count", options->count, "Stop after N live messages (all sources)")
      ->check(cli::Positive());
  cmd->add_option("--rotate-bytes", options->rotate_bytes,
                  "Start a new file once the current one exceeds N bytes")
      ->check(cli::Positive());
  cmd->add_option("--rotate-seconds", options->rotate_seconds,
                  "Start a new file once the current one is S seconds old")
      ->check(cli::Seconds(/*zero_ok=*/false));
  cmd->add_option("--fsync-interval", options->fsync_interval,
                  "fsync the capture every S seconds while data arrives, on a thread of its own "
                  "(default 1; 0 = on the recording thread after every poll cycle)")
      ->check(cli::Seconds(/*zero_ok=*/true));
  AddAutoTimeoutOption(cmd, options->auto_timeout);
  cmd->add_option("--replay-timeout", options->replay_timeout,
                  "Give up on a silent replay after S seconds (default 2)")
      ->check(cli::Seconds(/*zero_ok=*/false));
  cmd->add_option("--stats-interval", options->stats_interval,
                  "A status line on stderr every S seconds (0 = none; default 5)")
      ->check(cli::Seconds(/*zero_ok=*/true));
  cmd->add_option("--json", options->json, "Write the summary as JSON to FILE ('-' = stdout)");
  cmd->callback([options, &outcome] {
    outcome.command = "record";
    outcome.status = RunRecord(*options);
  });
}

}  // namespace kvindex::cli
