// `kvindex replay INPUT`: offline replay. For a request trace (docs/simulation.md) it simulates a cluster
// for every configuration of a grid (policies × capacities × routers × instance counts), in
// parallel, and reports hit rates (replay_trace.cpp). Capture files (docs/capture-format.md) are recognised by
// DetectInput() and rebuilt into the index (replay_capture.cpp); a snapshot (docs/snapshot-format.md)
// is loaded and summarised.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "kvindex/files/capture.h"
#include "kvindex/sim/block_cache.h"
#include "kvindex/sim/simulator.h"

#include "cli_validators.h"
#include "commands.h"
#include "replay_capture.h"
#include "replay_options.h"
#include "replay_trace.h"
#include "report.h"
#include "snapshot_tools.h"

namespace kvindex::cli {
namespace {

enum class InputKind { kTrace, kCapture, kSnapshot };

// The largest --instances value (a cluster the simulator still runs in reasonable memory).
constexpr int kMaxInstances = 1024;

// The names --policy and --router accept, as the simulator spells them.
std::vector<std::string> PolicyNames() {
  std::vector<std::string> names;
  for (sim::PolicyKind kind : {sim::PolicyKind::kLru, sim::PolicyKind::kLfu, sim::PolicyKind::kFifo,
                               sim::PolicyKind::kPrefixLru}) {
    names.emplace_back(sim::PolicyName(kind));
  }
  return names;
}

std::vector<std::string> RouterNames() {
  std::vector<std::string> names;
  for (sim::RouterKind kind :
       {sim::RouterKind::kRoundRobin, sim::RouterKind::kRandom, sim::RouterKind::kLeastLoaded,
        sim::RouterKind::kCacheAware, sim::RouterKind::kSession}) {
    names.emplace_back(sim::RouterName(kind));
  }
  return names;
}

// Tells what kind of file `path` is from its first bytes. A request trace is JSON Lines whose
// first non-blank character is '{'; a capture file starts with its magic (docs/capture-format.md).
Result<InputKind> DetectInput(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Status::NotFound(path + ": cannot open: " + std::strerror(errno));
  }
  char buf[4096];
  in.read(buf, sizeof buf);
  const std::streamsize n = in.gcount();
  if (LooksLikeCapture(std::as_bytes(std::span<const char>(buf, static_cast<size_t>(n))))) {
    return InputKind::kCapture;
  }
  if (LooksLikeSnapshot(std::as_bytes(std::span<const char>(buf, static_cast<size_t>(n))))) {
    return InputKind::kSnapshot;
  }
  for (std::streamsize i = 0; i < n; ++i) {
    const char c = buf[i];
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') continue;
    if (c == '{') return InputKind::kTrace;
    break;
  }
  if (n == 0) return Status::Malformed(path + ": empty file: not a request trace");
  return Status::Malformed(path +
                           ": not a request trace (JSON Lines of objects) or a capture file");
}

// `replay SNAPSHOT`: the snapshot's summary (docs/cli.md "replay SNAPSHOT").
Status RunSnapshotSummary(const ReplayOptions& options) {
  if (options.inputs.size() > 1) {
    return Status::InvalidArgument(options.input + ": a snapshot is one file");
  }
  if (options.dump || !options.queries.empty() || !options.to_trace.empty() || options.curve ||
      options.reuse || !options.write_snapshot.empty()) {
    return Status::InvalidArgument(options.input +
                                   ": a snapshot takes only --json (and --max-blocks)");
  }
  IndexOptions index_options;
  index_options.max_blocks = options.max_blocks;
  KVINDEX_ASSIGN_OR_RETURN(LoadedSnapshot loaded, LoadedSnapshot::Load(options.input, index_options));
  if (!options.json.empty()) {
    KVINDEX_RETURN_IF_ERROR(WriteJson(options.json, SnapshotSummaryJson(loaded)));
    if (options.json == "-") return Status::Ok();
  }
  std::fputs(RenderSnapshotSummary(loaded).c_str(), stdout);
  return FlushStdout();
}

Status RunReplay(ReplayOptions options) {
  // Usage errors first, before touching the input.
  KVINDEX_RETURN_IF_ERROR(CheckGrid(options));
  if (!options.to_trace.empty() && (options.dump || !options.queries.empty())) {
    return Status::InvalidArgument("--to-trace: not with --dump or --queries");
  }
  if (options.to_trace == "-" && options.json == "-") {
    return Status::InvalidArgument("--to-trace - and --json -: only one can go to stdout");
  }
  options.input = options.inputs.front();
  KVINDEX_ASSIGN_OR_RETURN(InputKind kind, DetectInput(options.input));
  switch (kind) {
    case InputKind::kTrace:
      if (options.inputs.size() > 1) {
        return Status::InvalidArgument(
            "a request trace is one file; several inputs are the files "
            "of one capture");
      }
      if (options.dump || !options.queries.empty()) {
        return Status::InvalidArgument(options.input +
                                       ": --dump and --queries apply to captures, not traces");
      }
      if (!options.write_snapshot.empty()) {
        return Status::InvalidArgument(options.input +
                                       ": --write-snapshot applies to captures, not traces");
      }
      if (!options.to_trace.empty()) {
        return Status::InvalidArgument(options.input +
                                       ": --to-trace derives a trace from a capture; this is "
                                       "already a request trace");
      }
      return RunTraceReplay(options);
    case InputKind::kCapture: {
      if (options.curve || options.reuse) {
        return Status::InvalidArgument(options.input +
                                       ": --curve and --reuse apply to request traces, not "
                                       "captures");
      }
      for (size_t i = 1; i < options.inputs.size(); ++i) {
        KVINDEX_ASSIGN_OR_RETURN(InputKind other, DetectInput(options.inputs[i]));
        if (other != InputKind::kCapture) {
          return Status::Malformed(options.inputs[i] + ": not a capture file (the first input is)");
        }
      }
      CaptureReplayArgs args;
      args.inputs = options.inputs;
      args.dump = options.dump;
      args.queries = options.queries;
      args.json = options.json;
      args.max_blocks = options.max_blocks;
      args.to_trace = options.to_trace;
      args.write_snapshot = options.write_snapshot;
      return RunCaptureReplay(args);
    }
    case InputKind::kSnapshot:
      return RunSnapshotSummary(options);
  }
  return Status::Internal("unknown input kind");
}

}  // namespace

void AddReplayCommand(CLI::App& app, CommandOutcome& outcome) {
  auto options = std::make_shared<ReplayOptions>();
  CLI::App* cmd = app.add_subcommand(
      "replay",
      "Simulate a request trace (Mooncake FAST'25 or Qwen-Bailian JSONL) on a cluster: hit rates "
      "per eviction policy, capacity, router and instance count; or rebuild the index from a "
      "capture and report, dump or query it");
  cmd->add_option("INPUT", options->inputs,
                  "A request trace (.jsonl), the files of one capture (.kvcap) in order, or a snapshot "
                  "(.kvsnap)")
      ->required()
      ->check(cli::InputFile());
  cmd->add_flag("--dump", options->dump,
                "Capture: print every applied event as one JSON line (docs/cli.md)");
  cmd->add_option("--queries", options->queries,
                  "Capture: answer the queries of FILE (JSON lines) at their 'after' positions; "
                  "exit 1 if an 'expect' differs")
      ->check(cli::InputFile());
  cmd->add_option("--max-blocks", options->max_blocks,
                  "Capture: cap the index at N resident blocks (least recently touched evicted)")
      ->check(cli::Positive());
  cmd->add_option("--block-tokens", options->block_tokens,
                  "Tokens per block, for token hit rates (default: 512 Mooncake, 16 Bailian)")
      ->check(cli::Positive());
  cmd->add_option("--max-requests", options->max_requests,
                  "Read only the first N requests of the file (default: all)")
      ->check(cli::Positive());
  cmd->add_flag("--skip-bad", options->skip_bad,
                "Skip and count bad lines instead of failing on the first");
  CommaList(
      cmd->add_option("--capacity", options->capacities,
                      "Cache blocks per instance, comma list; 'inf' = unbounded (default: inf)"))
      ->transform(Capacity(/*allow_none=*/false));
  CommaList(
      cmd->add_option("--policy", options->policies,
                      "Eviction policies, comma list: lru, lfu, fifo, prefix-lru (default: lru)"))
      ->check(CLI::IsMember(PolicyNames()));
  CommaList(cmd->add_option("--router", options->routers,
                            "Routers, comma list: round-robin, random, least-loaded, cache-aware, "
                            "session (default: round-robin)"))
      ->check(CLI::IsMember(RouterNames()));
  CommaList(cmd->add_option("--instances", options->instances,
                            "Instance counts, comma list (default: 1)"))
      ->transform(Decimal())
      ->check(CLI::Range(1, kMaxInstances));
  cmd->add_option("--seed", options->seed, "Seed of the random router (SplitMix64; default 0)");
  cmd->add_option("--threads", options->threads,
                  "Configurations simulated in parallel (default: hardware concurrency)")
      ->check(cli::Positive());
  cmd->add_option("--json", options->json, "Write {\"results\": [row...]} to FILE ('-' = stdout)");
  CommaList(cmd->add_option("--cpu-capacity", options->cpu_capacities,
                            "Blocks of a shared CPU pool (LRU, inclusive) below the GPU tiers, "
                            "comma list; 'inf' = unbounded, 'none' = no CPU tier (default: none)"))
      ->transform(Capacity(/*allow_none=*/true));
  CommaList(cmd->add_option("--disk-capacity", options->disk_capacities,
                            "Blocks of a shared disk tier (LRU, inclusive) below the CPU pool, "
                            "comma list; 'inf' = unbounded, 'none' = no disk tier (default: none)"))
      ->transform(Capacity(/*allow_none=*/true));
  cmd->add_option("--mode", options->mode,
                  "simulate (default), or storage-benchmark: the upstream storage benchmark's "
                  "counting (unbounded set, hit = membership)")
      ->check(CLI::IsMember({"simulate", "storage-benchmark"}));
  cmd->add_option("--window", options->window_s,
                  "Also count per time window of S seconds (JSON 'windows', CSV rows)")
      ->check(cli::Seconds(/*zero_ok=*/false));
  cmd->add_option("--csv", options->csv,
                  "Write CSV to FILE ('-' = stdout): one line per configuration, or per window "
                  "and instance with --window");
  cmd->add_option("--plot", options->plot,
                  "Write an SVG chart to FILE: prefix hit rate against capacity per "
                  "policy/router (a sweep), or over time with --window");
  cmd->add_option("--tier-write", options->tier_write,
                  "When blocks reach the shared CPU/disk pool: through (default: every block a "
                  "GPU stores or hits is written to the pool too) or victim (GPU victims only)")
      ->check(CLI::IsMember({"through", "victim"}));
  cmd->add_flag("--curve", options->curve,
                "Instead of the grid: the exact LRU prefix/any hit counts at every capacity from "
                "1 block to the working set, in one pass per instance (policy lru; not with the "
                "cache-aware router, shared tiers, --capacity or --window)");
  cmd->add_option("--curve-points", options->curve_points,
                  "Rows of the --curve table: N log-spaced capacities (default 16); --json and "
                  "--csv carry the whole curve")
      ->check(cli::Positive());
  cmd->add_flag("--reuse", options->reuse,
                "Instead of the grid: per request class (continuation, shared-prefix, fresh), the "
                "share of blocks and reuse-distance percentiles in blocks and seconds");
  cmd->add_option("--to-trace", options->to_trace,
                  "Capture: derive a request trace (Mooncake JSONL) into FILE ('-' = stdout): "
                  "one request per stored chain, hash_ids = the chain's blocks from the root");
  cmd->add_option("--write-snapshot", options->write_snapshot,
                  "Capture: write the rebuilt index, with each source's sequence state, as a "
                  "snapshot FILE (docs/snapshot-format.md)");
  cmd->callback([options, &outcome] {
    outcome.command = "replay";
    outcome.status = RunReplay(*options);
  });
}

}  // namespace kvindex::cli
