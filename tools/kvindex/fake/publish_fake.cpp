// kvindex publish-fake: a real ZeroMQ publisher of synthetic, trace-driven, listed or recorded KV
// events in every supported wire format, with fault injection and the exact answers a correct
// subscriber must give (docs/cli.md "publish-fake").
//
// Everything is generated before the first send (generate_batches.h), faults are assigned
// (faults.h) and a global schedule interleaves the sources (schedule.h). The same schedule drives
// the simulated correct subscriber, which writes the `--out` capture and the `--emit-queries`
// answers of FakeModel (simulated_subscriber.h), and the sockets (fake_publishers.h), so the three
// agree.
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "kvindex/codec/event_codec.h"
#include "kvindex/codec/framing.h"
#include "kvindex/core/address.h"
#include "kvindex/core/utf8.h"

#include "cli_validators.h"
#include "commands.h"
#include "fake/fake_publishers.h"
#include "fake/fake_stream.h"
#include "fake/fake_summary.h"
#include "fake/faults.h"
#include "fake/generate_batches.h"
#include "fake/publish_fake_options.h"
#include "fake/schedule.h"
#include "fake/simulated_subscriber.h"

namespace kvindex::cli {
namespace {

// Bounds of the flags that size what is generated before the first send (docs/cli.md
// "publish-fake", Limits): ports, batches per source, events per batch, blocks and tokens.
constexpr uint64_t kMaxPort = 65535;
constexpr uint64_t kMaxCount = 1'000'000'000;
constexpr uint64_t kMaxEventsPerBatch = 1'000'000;
constexpr uint64_t kMaxBlockCount = 1'048'576;

ReplayStyle DefaultReplayStyle(WireFormat f) {
  switch (f) {
    case WireFormat::kVllmMap:
      return ReplayStyle::kVllmTopic;  // map era = vLLM >= 0.26
    case WireFormat::kTrtllm:
      return ReplayStyle::kVllmTopic;  // TensorRT-LLM's replay replies carry the topic too
    case WireFormat::kMooncake:
    case WireFormat::kMooncakeSeed:
      return ReplayStyle::kMooncake;
    default:
      return ReplayStyle::kVllm;
  }
}

Status CheckOptions(const PublishFakeOptions& o) {
  const int workloads = (o.synthetic ? 1 : 0) + (!o.trace.empty() ? 1 : 0) +
                        (!o.capture.empty() ? 1 : 0) + (!o.batches_file.empty() ? 1 : 0);
  if (workloads > 1) {
    return Status::InvalidArgument("--synthetic, --trace, --capture and --batches are exclusive");
  }
  if (!o.batches_file.empty() && o.instances * o.dp_ranks != 1) {
    return Status::InvalidArgument(
        "--batches publishes one source: use --instances 1 --dp-ranks 1");
  }
  if (o.bind && !o.connect_host.empty()) {
    return Status::InvalidArgument("--bind and --connect are exclusive");
  }
  const uint64_t sources = uint64_t{o.instances} * o.dp_ranks;
  if (o.port == 0 || o.port + sources - 1 > 65535) {
    return Status::InvalidArgument("--port " + std::to_string(o.port) + ": ports up to port + " +
                                   std::to_string(sources - 1) + " must lie in 1..65535");
  }
  if (o.replay_port > 0 && o.replay_port + sources - 1 > 65535) {
    return Status::InvalidArgument("--replay-port " + std::to_string(o.replay_port) +
                                   ": ports must lie in 1..65535");
  }
  if (o.synth.prefix_blocks > o.synth.prompt_blocks) {
    return Status::InvalidArgument("--prefix-blocks " + std::to_string(o.synth.prefix_blocks) +
                                   " exceeds --prompt-blocks " +
                                   std::to_string(o.synth.prompt_blocks));
  }
  if (o.capacity < o.synth.prompt_blocks && o.trace.empty()) {
    return Status::InvalidArgument("--capacity " + std::to_string(o.capacity) +
                                   " is smaller than a prompt (--prompt-blocks " +
                                   std::to_string(o.synth.prompt_blocks) + ")");
  }
  if (o.trace.empty() && o.capture.empty() && o.batches_file.empty()) {
    if (o.count == 0) {
      return Status::InvalidArgument(
          "--count 0: the synthetic workload never ends; give a count (or --trace, --batches, "
          "--capture)");
    }
    auto d = [](uint64_t value) { return static_cast<double>(value); };
    const double tokens = d(sources) * d(o.count) * d(o.events_per_batch) *
                              d(o.synth.prompt_blocks) * d(o.synth.block_size) +
                          d(o.synth.prefixes) * d(o.synth.prefix_blocks) * d(o.synth.block_size);
    if (tokens > static_cast<double>(kMaxGeneratedTokens)) {
      return Status::InvalidArgument(
          "--count: the synthetic workload would be " +
          std::to_string(static_cast<uint64_t>(tokens)) +
          " token ids (sources x --count x --events-per-batch x --prompt-blocks x --block-size); "
          "at most 200000000");
    }
  }
  // CLI11 checked each value on its own; NaN passes its range checks, so the doubles once more.
  if (!(o.speed > 0)) return Status::InvalidArgument("--speed must be positive");
  if (!(o.rate >= 0)) return Status::InvalidArgument("--rate must not be negative");
  if (!(o.synth.zipf >= 0)) return Status::InvalidArgument("--zipf must not be negative");
  return Status::Ok();
}

Status RunPublishFake(const PublishFakeOptions& o) {
  KVINDEX_RETURN_IF_ERROR(CheckOptions(o));
  // vllm-hybrid(-sparse, -skipped): the vllm-map wire, events of a hybrid model's two KV-cache
  // groups.
  const bool hybrid = o.format.starts_with("vllm-hybrid");
  KVINDEX_ASSIGN_OR_RETURN(WireFormat format, ParseWireFormat(hybrid ? "vllm-map" : o.format));
  ReplayStyle style = DefaultReplayStyle(format);
  if (!o.replay_style.empty()) {
    KVINDEX_ASSIGN_OR_RETURN(style, ParseReplayStyle(o.replay_style));
  }
  const bool network = o.out.empty();
  KVINDEX_ASSIGN_OR_RETURN(FakeStream stream, GenerateStream(o, format));
  for (FakeSource& src : stream.sources) AssignFaults(o, src);
  const std::vector<ScheduleStep> steps = Schedule(stream.sources, !o.capture.empty());

  // The correct subscriber's view: model, queries, --out capture. Its model and the decoded
  // batches are freed before the live run: freeing millions of blocks takes seconds of CPU, which
  // the subscribers under test would otherwise share while they still receive.
  std::vector<size_t> model_blocks;
  {
    SimulatedSubscriber subscriber(o, style, stream);
    KVINDEX_RETURN_IF_ERROR(subscriber.Open(format));
    for (const ScheduleStep& step : steps) {
      KVINDEX_RETURN_IF_ERROR(subscriber.Step(step.source, step.index));
    }
    KVINDEX_RETURN_IF_ERROR(subscriber.Finish());
    for (size_t k = 0; k < stream.sources.size(); ++k) {
      model_blocks.push_back(subscriber.model().blocks(k));
    }
  }
  KeepPayloadsOnly(stream);

  PublishRun run;
  if (network) KVINDEX_RETURN_IF_ERROR(PublishLive(o, stream.sources, steps, style, run));
  return WriteSummary(o, style, stream.sources, model_blocks, network ? &run : nullptr);
}

// A count in [min, max], with the range in --help.
CLI::Validator Count(uint64_t min, uint64_t max) {
  return CLI::Range(min, max).description("N in " + std::to_string(min) + ".." +
                                          std::to_string(max));
}

// --connect HOST: a host name or address (IPv6 with or without brackets), read by the project's
// one address parser (core/address.h) as HOST:PORT would be.
CLI::Validator ConnectHost() {
  return CLI::Validator(
      [](std::string& host) {
        // An empty host has no ':' (front() is never read).
        const bool ipv6 = host.find(':') != std::string::npos && host.front() != '[';
        Result<NetAddress> address = ParseNetAddress((ipv6 ? "[" + host + "]" : host) + ":1");
        if (!address.ok() || !address->scheme.empty() || !address->path.empty() ||
            address->host.empty() || address->host.find_first_of(" \t/?#@") != std::string::npos) {
          return "'" + ToValidUtf8(host) + "' is not a host name or address";
        }
        return std::string();
      },
      "HOST");
}

// The workload, the sources and their sockets (the first half of --help).
void AddSourceFlags(CLI::App* cmd, PublishFakeOptions& o) {
  cmd->add_option("--format", o.format,
                  "Wire format: vllm-v0.9, vllm, vllm-map, sglang, mooncake, mooncake-seed, "
                  "sglang-eagle, trtllm, lmcache, vllm-hybrid, vllm-hybrid-sparse, "
                  "vllm-hybrid-skipped")
      ->check(
          CLI::IsMember({"vllm-v0.9", "vllm", "vllm-map", "sglang", "mooncake", "mooncake-seed",
                         "sglang-eagle", "trtllm", "lmcache", "vllm-hybrid", "vllm-hybrid-sparse",
                         "vllm-hybrid-skipped"}))
      ->capture_default_str();
  cmd->add_option("--replay-style", o.replay_style,
                  "Replay reply layout: vllm, vllm-topic, mooncake (default: the format's own)")
      ->check(CLI::IsMember({"vllm", "vllm-topic", "mooncake"}));
  cmd->add_flag("--synthetic", o.synthetic,
                "Seeded synthetic workload (the default): shared prefixes with Zipf popularity, "
                "per-source LRU capacity");
  cmd->add_option("--trace", o.trace,
                  "Workload from a Mooncake/Bailian JSONL trace (hash_ids), request i to source "
                  "i mod sources; token ids derived from hash ids")
      ->check(cli::InputFile());
  cmd->add_option("--capture", o.capture,
                  "Re-publish a capture's live messages at the recorded pace x --speed")
      ->check(cli::InputFile());
  cmd->add_option("--batches", o.batches_file,
                  "Publish the logical batches of a JSONL file (one {ts, events, dp_rank?} per "
                  "line, events as vLLM names their fields) on one source")
      ->check(cli::InputFile());
  cmd->add_option("--speed", o.speed, "--capture pace multiplier (2 = twice as fast; 0.001-10^6)")
      ->check(cli::RealIn(1e-3, 1e6, /*zero_ok=*/false))
      ->capture_default_str();
  cmd->add_option("--instances", o.instances, "Instances fake-0..fake-(N-1)")
      ->check(Count(1, kMaxPort))
      ->capture_default_str();
  cmd->add_option("--dp-ranks", o.dp_ranks, "Data-parallel ranks (sources) per instance")
      ->check(Count(1, kMaxPort))
      ->capture_default_str();
  cmd->add_option("--port", o.port, "Instance i, rank r publishes on port P + i*R + r")
      ->check(Count(1, kMaxPort))
      ->capture_default_str();
  cmd->add_option("--replay-port", o.replay_port,
                  "Replay ROUTER of instance i, rank r on Q + i*R + r (0 = no replay endpoint)")
      ->check(Count(0, kMaxPort))
      ->capture_default_str();
  cmd->add_flag("--bind", o.bind, "Bind tcp://*:PORT (the default)");
  cmd->add_option("--connect", o.connect_host,
                  "Connect to tcp://HOST:PORT instead of binding (the subscriber binds)")
      ->check(ConnectHost());
  cmd->add_option("--topic", o.topic, "Topic frame of every message (default empty)")
      ->check(cli::Utf8());
  cmd->add_option("--model", o.model, "Model name (sent by Mooncake formats; used in queries)")
      ->check(cli::Utf8())
      ->capture_default_str();
}

// The stream, its faults and pace, the answers and outputs, the synthetic workload's shape.
void AddStreamFlags(CLI::App* cmd, PublishFakeOptions& o) {
  cmd->add_option("--count", o.count,
                  "Batches per source (0 = until the trace, list or capture ends)")
      ->check(Count(0, kMaxCount))
      ->capture_default_str();
  cmd->add_option("--events-per-batch", o.events_per_batch, "Events per batch")
      ->check(Count(1, kMaxEventsPerBatch))
      ->capture_default_str();
  cmd->add_option("--rate", o.rate,
                  "Batches per second per source (0 = as fast as possible; else 0.001-10^9)")
      ->check(cli::RealIn(1e-3, 1e9, /*zero_ok=*/true))
      ->capture_default_str();
  cmd->add_option("--seed", o.seed, "Seed of the synthetic workload")->capture_default_str();
  cmd->add_flag("--blast", o.blast,
                "Send everything as fast as possible (payloads are pre-encoded; unlimited SNDHWM)");
  cmd->add_option("--drop-every", o.drop_every,
                  "Do not send every Nth batch live (it stays in the replay ring; N >= 2)")
      ->check(ZeroOrAtLeast(2, ""));
  cmd->add_option("--duplicate-every", o.duplicate_every, "Send every Nth batch twice");
  cmd->add_option("--corrupt-every", o.corrupt_every,
                  "Send a corrupt live copy of every Nth batch (the ring keeps the good one)");
  cmd->add_option(
         "--restart-after", o.restart_after,
         "After N batches per source, restart: empty the cache and ring, reset the sequence")
      ->check(ZeroOrAtLeast(2, "a restart shows as a sequence going back below the watermark"));
  cmd->add_option("--ring", o.ring, "Replay ring size in batches")->capture_default_str();
  cmd->add_option(
         "--linger", o.linger,
         "After the last batch, keep serving replay requests until S seconds pass without one")
      ->check(cli::Seconds(/*zero_ok=*/true))
      ->capture_default_str();
  cmd->add_option("--wait-subscribers", o.wait_subscribers,
                  "Wait until N subscriptions reached every source (XPUB) before publishing");
  cmd->add_option("--wait-timeout", o.wait_timeout, "Seconds --wait-subscribers waits at most")
      ->check(cli::Seconds(/*zero_ok=*/true))
      ->capture_default_str();
  cmd->add_option("--hwm", o.hwm, "Send high-water mark in messages (--blast: unlimited)")
      ->check(CLI::Range(0, std::numeric_limits<int>::max()))
      ->capture_default_str();
  cmd->add_option(
      "--emit-queries", o.emit_queries,
      "Write a replay --queries file with expected answers from publish-fake's own model");
  cmd->add_option("--query-every", o.query_every,
                  "With --emit-queries: also query after every Nth batch of each source");
  cmd->add_option("--out", o.out,
                  "Write the stream as a correct subscriber would have recorded it to a capture "
                  "file instead of publishing");
  cmd->add_option("--json", o.json, "Write the summary as JSON to FILE (- = stdout)");
  cmd->add_option("--block-size", o.synth.block_size, "Tokens per block")
      ->check(Count(1, kMaxBlockCount))
      ->capture_default_str();
  cmd->add_option("--prompt-blocks", o.synth.prompt_blocks, "Synthetic: full blocks per prompt")
      ->check(Count(1, kMaxBlockCount))
      ->capture_default_str();
  cmd->add_option("--prefix-blocks", o.synth.prefix_blocks,
                  "Synthetic: leading blocks taken from a shared prefix")
      ->check(Count(0, kMaxBlockCount))
      ->capture_default_str();
  cmd->add_option("--prefixes", o.synth.prefixes, "Synthetic: distinct shared prefixes")
      ->check(Count(0, kMaxBlockCount))
      ->capture_default_str();
  cmd->add_option("--zipf", o.synth.zipf,
                  "Synthetic: Zipf exponent of prefix popularity (0 = uniform)")
      ->check(cli::NonNegative())
      ->capture_default_str();
  cmd->add_option("--capacity", o.capacity,
                  "Blocks each source's cache holds before evicting (LRU; evictions are removals)")
      ->capture_default_str();
}

}  // namespace

void AddPublishFakeCommand(CLI::App& app, CommandOutcome& outcome) {
  auto opts = std::make_shared<PublishFakeOptions>();
  CLI::App* cmd = app.add_subcommand(
      "publish-fake",
      "Publish synthetic, trace-driven, listed or recorded KV events over ZeroMQ in any wire "
      "format, with fault injection and expected query answers");
  AddSourceFlags(cmd, *opts);
  AddStreamFlags(cmd, *opts);
  cmd->callback([opts, &outcome]() {
    outcome.command = "publish-fake";
    PublishFakeOptions run = *opts;
    run.synth.seed = run.seed;
    outcome.status = RunPublishFake(run);
  });
}

}  // namespace kvindex::cli
