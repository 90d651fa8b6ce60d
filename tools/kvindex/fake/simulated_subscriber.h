// The correct subscriber publish-fake simulates, from which come the expected answers of
// `--emit-queries` and the `--out` capture. It takes the schedule's steps in order, as a subscriber
// receives them: a dropped or corrupt batch is a hole that the replay ring fills when there is a
// replay endpoint and the ring still holds it, and is lost otherwise; a restart clears the source.
// What that subscriber applies goes to FakeModel (never the index under test), the queries are
// written from the model's answers, and the capture is what that subscriber would have recorded.
// Each step also adds the batch to its source's summary counters.
//
// Thread safety: none (one thread).
#ifndef KVINDEX_TOOLS_FAKE_SIMULATED_SUBSCRIBER_H_
#define KVINDEX_TOOLS_FAKE_SIMULATED_SUBSCRIBER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kvindex/codec/event_codec.h"
#include "kvindex/codec/framing.h"
#include "kvindex/core/status.h"
#include "kvindex/files/capture.h"

#include "fake/fake_model.h"
#include "fake/fake_stream.h"
#include "fake/publish_fake_options.h"
#include "fake/query_writer.h"

namespace kvindex::cli {

class SimulatedSubscriber {
 public:
  // `o` and `stream` must outlive the object; Step() updates the counters of `stream.sources`.
  SimulatedSubscriber(const PublishFakeOptions& o, ReplayStyle style, FakeStream& stream);

  // Adds every source to the model with the DP rank the index will know it by (`format` decides
  // whether batches carry one), creates the --emit-queries file and the --out capture (with the
  // source definitions). kIoError naming a file that cannot be created.
  Status Open(WireFormat format);
  // Receives item `index` of source `source`. Fails only when writing the capture fails.
  Status Step(size_t source, size_t index);
  // Writes the final queries (answered at the end of the stream) and closes both files.
  Status Finish();

  const FakeModel& model() const { return model_; }

 private:
  using After = std::optional<std::pair<std::string, uint64_t>>;

  int64_t Now() { return base_ns_ + static_cast<int64_t>(record_no_++) * 1000; }
  Status WriteMessage(size_t si, CaptureRecordType type, const std::vector<Frame>& frames);
  Status WriteReplies(size_t si, size_t upto, uint64_t from_seq);
  Status WriteLive(size_t si, const FakeBatch& item, const Bytes& payload);
  Status WriteGiveUp(size_t si, uint64_t watermark);
  void ApplyToModel(size_t si, const FakeBatch& item);
  void Probe(const After& after, const FakeBatch& item);
  Status Restart(size_t si, const FakeBatch& item);
  Status ReceiveCorrupt(size_t si, size_t idx);
  Status Receive(size_t si, size_t idx);

  const PublishFakeOptions& o_;
  std::vector<FakeSource>& sources_;
  const ReplayStyle style_;
  const bool has_replay_;
  const SyntheticPrompts* synthetic_;
  const TracePrompts* trace_;
  FakeModel model_;
  std::unique_ptr<CaptureWriter> capture_;
  std::optional<QueryWriter> queries_;
  std::vector<std::optional<size_t>> pending_drop_;  // per source: a dropped item awaiting k+1
  std::vector<std::optional<uint64_t>> last_seq_;    // per source: last live seq (restart check)
  std::vector<std::optional<uint64_t>> max_seq_before_;  // highest seq of earlier incarnations
  std::vector<uint64_t> max_seq_now_;                    // highest seq of this incarnation
  int64_t base_ns_ = 0;
  uint64_t record_no_ = 0;
  std::vector<TokenId> probe_unseen_;  // a prompt no source ever served
};

}  // namespace kvindex::cli

#endif  // KVINDEX_TOOLS_FAKE_SIMULATED_SUBSCRIBER_H_
