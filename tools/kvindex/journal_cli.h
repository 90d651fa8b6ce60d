// The event journal on the command line (docs/scale-out.md): the --journal* flags `subscribe`
// and `record` share, the ingester's journal status, a replica (`subscribe --from-journal`) and
// the export of a journal to a capture (`record --from-journal`).
#ifndef KVINDEX_TOOLS_JOURNAL_CLI_H_
#define KVINDEX_TOOLS_JOURNAL_CLI_H_

#include <cstdint>
#include <functional>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "kvindex/core/status.h"
#include "kvindex/index/prefix_index.h"
#include "kvindex/nats/journal.h"
#include "kvindex/query/server_backend.h"
#include "http_serve.h"

namespace kvindex::cli {

struct JournalCliOptions {
  std::string publish;       // subscribe --journal
  std::string from;          // --from-journal
  std::string stream = "kvindex";
  bool stream_given = false;
  uint64_t buffer_bytes = uint64_t{256} << 20;
  int replicas = 1;  // --journal-replicas
  double max_age_s = 0;       // --journal-max-age (0: none)
  uint64_t max_bytes = 0;     // --journal-max-bytes (0: none)
  double snapshot_every_s = 0;  // --snapshot-to-journal (0: off)
  uint64_t batch_records = 1;   // --journal-batch
};

// --journal-stream (and, with `publish_flags`, --journal, --journal-buffer, --journal-batch,
// --journal-replicas, --journal-max-age, --journal-max-bytes and --snapshot-to-journal) on `cmd`;
// always
// --from-journal, excluding `excluded` (the engine-side flags) when not null.
void AddJournalOptions(CLI::App* cmd, JournalCliOptions& options, bool publish_flags,
                       CLI::Option* excluded);

// JournalOptions from the flags (the servers of `servers`). kInvalidArgument (exit 2) naming the
// flag for a bad value.
Result<JournalOptions> MakeJournalOptions(const JournalCliOptions& options,
                                          const std::string& servers, const char* flag);

// The ingester's journal as the HTTP API reports it, and as the status line shows it.
JournalServing ServingOf(const JournalPublisherStatus& status);
std::string JournalStatusText(const JournalPublisherStatus& status);
nlohmann::json JournalJson(const JournalPublisherStatus& status);

struct ReplicaRun {
  JournalOptions journal;
  HttpCliOptions http;
  uint64_t max_blocks = 0;
  double duration_s = 0;
  double stats_interval_s = 5;
  std::string json;
  std::function<nlohmann::json(const IndexStats&)> index_json;
};

// `subscribe --from-journal`: applies the stream from its start, serving HTTP meanwhile, until a
// signal or the duration.
Status RunReplica(const ReplicaRun& run);

// `record --from-journal`: every record of the stream as it is now, into a new capture.
Status ExportJournal(const JournalOptions& journal, const std::string& out, bool overwrite,
                     const std::string& json_path);

}  // namespace kvindex::cli

#endif  // KVINDEX_TOOLS_JOURNAL_CLI_H_
