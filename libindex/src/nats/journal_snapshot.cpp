// JournalSnapshotStore (journal_snapshot.h): chunks are published synchronously (each
// acknowledgement gives the chunk's sequence for the manifest), read back one by one by sequence
// with direct gets (the stream allows them: a chunk comes as stored, not base64 in JSON), and
// snapshots are listed from the stream's subjects (`<snap>.*.m`) and removed by purging their
// subjects.
#include <algorithm>
#include <set>
#include <string>
#include <string_view>
#include <thread>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "kvindex/core/clock.h"
#include "kvindex/nats/journal_snapshot.h"

#include "nats_link.h"

namespace kvindex {

using nats_internal::NatsError;

struct JournalSnapshotStore::Impl {
  JournalOptions options;
  std::string stream;  // the snapshot stream
  nats_internal::NatsLink link;
  uint64_t last_id = 0;
  kvStore* lease = nullptr;  // the writer lease bucket, bound on first use

  ~Impl() {
    if (lease != nullptr) kvStore_Destroy(lease);
  }
  Status BindLease(std::chrono::milliseconds ttl);

  std::string Subject(uint64_t id, const char* kind) const {
    return stream + "." + std::to_string(id) + "." + kind;
  }
  // The ids in the subjects of the stream that match `<stream>.*.<kind>`.
  Result<std::vector<uint64_t>> Ids(const char* kind);
  Status Purge(uint64_t id);
};

namespace {

// The id token of `<stream>.<id>.<kind>`; 0 for any other subject.
uint64_t SubjectId(std::string_view subject, std::string_view stream) {
  if (subject.size() <= stream.size() + 1 || subject.substr(0, stream.size()) != stream ||
      subject[stream.size()] != '.') {
    return 0;
  }
  subject.remove_prefix(stream.size() + 1);
  uint64_t id = 0;
  size_t i = 0;
  for (; i < subject.size() && subject[i] >= '0' && subject[i] <= '9' && i < 19; ++i) {
    id = id * 10 + static_cast<uint64_t>(subject[i] - '0');
  }
  return i > 0 && i < subject.size() && subject[i] == '.' ? id : 0;
}

std::string_view MsgData(natsMsg* msg) {
  return {natsMsg_GetData(msg), static_cast<size_t>(natsMsg_GetDataLength(msg))};
}

// The subject a message was stored on (a direct get names it in a header).
std::string StoredSubject(natsMsg* msg) {
  const char* subject = nullptr;
  if (natsMsgHeader_Get(msg, "Nats-Subject", &subject) == NATS_OK && subject != nullptr) {
    return subject;
  }
  return natsMsg_GetSubject(msg);
}

// One stored message by sequence or as the last of a subject (the other 0 / null).
natsStatus DirectGet(natsMsg** msg, jsCtx* js, const std::string& stream, uint64_t seq,
                     const char* last_of) {
  jsDirectGetMsgOptions options;
  jsDirectGetMsgOptions_Init(&options);
  options.Sequence = seq;
  options.LastBySubject = last_of;
  return js_DirectGetMsg(msg, js, stream.c_str(), nullptr, &options);
}

}  // namespace

JournalSnapshotStore::JournalSnapshotStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
JournalSnapshotStore::~JournalSnapshotStore() = default;

Result<std::unique_ptr<JournalSnapshotStore>> JournalSnapshotStore::Open(
    const JournalOptions& options, std::chrono::milliseconds connect_wait, bool create) {
  if (options.servers.empty()) return Status::InvalidArgument("journal: no NATS server");
  KVINDEX_RETURN_IF_ERROR(CheckJournalStreamName(options.stream, "--journal-stream"));
  const auto start = SteadyClock::now();
  for (;;) {
    auto impl = std::make_unique<Impl>();
    impl->options = options;
    impl->stream = JournalSnapshotStream(options.stream);
    jsOptions js_options;
    jsOptions_Init(&js_options);
    js_options.Wait = 5000;
    Status status = impl->link.Connect(options.servers, false, &js_options);
    if (status.ok()) {
      status = create ? nats_internal::EnsureStreamNamed(impl->link.js(), impl->stream, options,
                                                         /*snapshots=*/true)
                      : nats_internal::StreamLastSeq(impl->link.js(), impl->stream).status();
    }
    if (status.ok()) {
      return std::unique_ptr<JournalSnapshotStore>(new JournalSnapshotStore(std::move(impl)));
    }
    if (status.code() != StatusCode::kUnavailable || SteadyClock::now() - start >= connect_wait) {
      return status;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

Result<JournalSnapshotManifest> JournalSnapshotStore::Write(
    uint64_t covered_seq, std::vector<uint64_t> source_keys,
    std::vector<std::optional<JournalLink>> last_links, const JournalSnapshotProducer& produce) {
  Impl& m = *impl_;
  JournalSnapshotManifest manifest;
  manifest.id = std::max<uint64_t>(static_cast<uint64_t>(RealtimeNs()), m.last_id + 1);
  m.last_id = manifest.id;
  manifest.covered_seq = covered_seq;
  manifest.source_keys = std::move(source_keys);
  manifest.last_links = std::move(last_links);
  if (manifest.last_links.size() > manifest.source_keys.size()) {
    manifest.last_links.resize(manifest.source_keys.size());
  }
  const int64_t max_payload = natsConnection_GetMaxPayload(m.link.connection());
  const size_t chunk_bytes = max_payload > 8192 ? std::min(kJournalSnapshotChunkBytes,
                                                           static_cast<size_t>(max_payload) - 4096)
                                                : kJournalSnapshotChunkBytes;
  const std::string chunk_subject = m.Subject(manifest.id, "c");
  XXH3_state_t* whole = XXH3_createState();
  XXH3_64bits_reset(whole);
  std::string buffer;
  Status failed;
  const auto publish = [&](std::string_view chunk) {
    jsPubAck* ack = nullptr;
    jsErrCode err = static_cast<jsErrCode>(0);
    const natsStatus s = js_Publish(&ack, m.link.js(), chunk_subject.c_str(), chunk.data(),
                                    static_cast<int>(chunk.size()), nullptr, &err);
    if (s != NATS_OK || ack == nullptr) {
      failed = NatsError(StatusCode::kUnavailable, "publish a snapshot chunk", s);
      jsPubAck_Destroy(ack);
      return false;
    }
    manifest.chunks.push_back(
        {ack->Sequence, chunk.size(), XXH3_64bits(chunk.data(), chunk.size())});
    jsPubAck_Destroy(ack);
    return true;
  };
  const auto sink = [&](std::string_view bytes) {
    if (!failed.ok()) return false;
    XXH3_64bits_update(whole, bytes.data(), bytes.size());
    manifest.bytes += bytes.size();
    buffer.append(bytes);
    size_t done = 0;
    while (buffer.size() - done >= chunk_bytes) {
      if (!publish(std::string_view(buffer).substr(done, chunk_bytes))) return false;
      done += chunk_bytes;
    }
    buffer.erase(0, done);
    return true;
  };
  Status produced = produce(sink);
  manifest.xxh3 = XXH3_64bits_digest(whole);
  XXH3_freeState(whole);
  if (produced.ok() && failed.ok() && !buffer.empty()) publish(buffer);
  if (produced.ok() && failed.ok()) {
    const std::string text = EncodeJournalSnapshotManifest(manifest);
    const std::string subject = m.Subject(manifest.id, "m");
    jsErrCode err = static_cast<jsErrCode>(0);
    const natsStatus s = js_Publish(nullptr, m.link.js(), subject.c_str(), text.data(),
                                    static_cast<int>(text.size()), nullptr, &err);
    if (s == NATS_OK) return manifest;
    failed = NatsError(StatusCode::kUnavailable, "publish a snapshot manifest", s);
  }
  (void)m.Purge(manifest.id);  // best effort: a snapshot without a manifest is never read
  return !produced.ok() && failed.ok() ? produced : failed;
}

Result<std::vector<uint64_t>> JournalSnapshotStore::Impl::Ids(const char* kind) {
  const std::string filter = stream + ".*." + kind;
  jsOptions o;
  jsOptions_Init(&o);
  o.Stream.Info.SubjectsFilter = filter.c_str();
  jsStreamInfo* info = nullptr;
  jsErrCode err = static_cast<jsErrCode>(0);
  const natsStatus s = js_GetStreamInfo(&info, link.js(), stream.c_str(), &o, &err);
  if (s == NATS_NOT_FOUND || err == JSStreamNotFoundErr) {
    return Status::NotFound("nats: stream '" + stream + "' does not exist");
  }
  if (s != NATS_OK) return NatsError(StatusCode::kUnavailable, "stream info of " + stream, s);
  std::vector<uint64_t> ids;
  if (info->State.Subjects != nullptr) {
    for (int i = 0; i < info->State.Subjects->Count; ++i) {
      const uint64_t id = SubjectId(info->State.Subjects->List[i].Subject, stream);
      if (id != 0) ids.push_back(id);
    }
  }
  jsStreamInfo_Destroy(info);
  std::sort(ids.begin(), ids.end());
  return ids;
}

Status JournalSnapshotStore::Impl::Purge(uint64_t id) {
  const std::string subjects = stream + "." + std::to_string(id) + ".>";
  jsOptions o;
  jsOptions_Init(&o);
  o.Stream.Purge.Subject = subjects.c_str();
  jsErrCode err = static_cast<jsErrCode>(0);
  const natsStatus s = js_PurgeStream(link.js(), stream.c_str(), &o, &err);
  if (s != NATS_OK) return NatsError(StatusCode::kUnavailable, "purge " + subjects, s);
  return Status::Ok();
}

Result<std::vector<JournalSnapshotManifest>> JournalSnapshotStore::List(
    std::vector<std::string>& problems) {
  Impl& m = *impl_;
  KVINDEX_ASSIGN_OR_RETURN(const std::vector<uint64_t> ids, m.Ids("m"));
  std::vector<JournalSnapshotManifest> out;
  for (const uint64_t id : ids) {
    const std::string subject = m.Subject(id, "m");
    natsMsg* msg = nullptr;
    const natsStatus s = DirectGet(&msg, m.link.js(), m.stream, 0, subject.c_str());
    if (s != NATS_OK) {
      problems.push_back(subject + ": " + natsStatus_GetText(s));
      continue;
    }
    Result<JournalSnapshotManifest> manifest = ParseJournalSnapshotManifest(MsgData(msg));
    natsMsg_Destroy(msg);
    if (manifest.ok() && manifest->id != id) {
      manifest = Status::Malformed("snapshot manifest: id " + std::to_string(manifest->id) +
                                   " on the subject of " + std::to_string(id));
    }
    if (!manifest.ok()) {
      problems.push_back(subject + ": " + manifest.status().message());
      continue;
    }
    out.push_back(std::move(*manifest));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.covered_seq != b.covered_seq ? a.covered_seq > b.covered_seq : a.id > b.id;
  });
  return out;
}

Status JournalSnapshotStore::Read(const JournalSnapshotManifest& manifest,
                                  const std::function<Status(std::string_view)>& feed) {
  Impl& m = *impl_;
  const std::string subject = m.Subject(manifest.id, "c");
  XXH3_state_t* whole = XXH3_createState();
  XXH3_64bits_reset(whole);
  Status status;
  for (size_t i = 0; i < manifest.chunks.size() && status.ok(); ++i) {
    const JournalSnapshotChunk& chunk = manifest.chunks[i];
    const std::string where =
        "snapshot " + std::to_string(manifest.id) + ": chunk " + std::to_string(i + 1) + " of " +
        std::to_string(manifest.chunks.size()) + " (seq " + std::to_string(chunk.seq) + ")";
    natsMsg* msg = nullptr;
    const natsStatus s = DirectGet(&msg, m.link.js(), m.stream, chunk.seq, nullptr);
    if (s != NATS_OK) {
      status = NatsError(s == NATS_NOT_FOUND ? StatusCode::kNotFound : StatusCode::kUnavailable,
                         where, s);
      break;
    }
    const std::string_view data = MsgData(msg);
    if (subject != StoredSubject(msg)) {
      status = Status::Corrupt(where + ": a message of another subject");
    } else if (data.size() != chunk.bytes || XXH3_64bits(data.data(), data.size()) != chunk.xxh3) {
      status = Status::Corrupt(where + ": its size or checksum does not match the manifest");
    } else {
      XXH3_64bits_update(whole, data.data(), data.size());
      status = feed(data);
    }
    natsMsg_Destroy(msg);
  }
  const uint64_t digest = XXH3_64bits_digest(whole);
  XXH3_freeState(whole);
  if (status.ok() && digest != manifest.xxh3) {
    status = Status::Corrupt("snapshot " + std::to_string(manifest.id) +
                             ": the checksum of the whole does not match the manifest");
  }
  return status;
}

Result<size_t> JournalSnapshotStore::Prune(size_t keep) {
  Impl& m = *impl_;
  std::vector<std::string> problems;
  KVINDEX_ASSIGN_OR_RETURN(const std::vector<JournalSnapshotManifest> manifests, List(problems));
  std::set<uint64_t> kept;
  uint64_t newest_kept = 0;
  size_t removed = 0;
  for (size_t i = 0; i < manifests.size(); ++i) {
    if (i < keep) {
      kept.insert(manifests[i].id);
      newest_kept = std::max(newest_kept, manifests[i].id);
      continue;
    }
    KVINDEX_RETURN_IF_ERROR(m.Purge(manifests[i].id));
    ++removed;
  }
  // Chunks without a (readable) manifest: a writer that died or failed. One newer than every
  // snapshot kept may be a write still going on.
  KVINDEX_ASSIGN_OR_RETURN(std::vector<uint64_t> chunk_ids, m.Ids("c"));
  // ... and manifests that do not read (problems), under the same rule.
  KVINDEX_ASSIGN_OR_RETURN(const std::vector<uint64_t> manifest_ids, m.Ids("m"));
  chunk_ids.insert(chunk_ids.end(), manifest_ids.begin(), manifest_ids.end());
  std::sort(chunk_ids.begin(), chunk_ids.end());
  chunk_ids.erase(std::unique(chunk_ids.begin(), chunk_ids.end()), chunk_ids.end());
  for (const uint64_t id : chunk_ids) {
    if (kept.count(id) != 0 || id > newest_kept) continue;
    bool listed = false;
    for (const JournalSnapshotManifest& manifest : manifests) listed |= manifest.id == id;
    if (listed) continue;  // purged above
    KVINDEX_RETURN_IF_ERROR(m.Purge(id));
  }
  return removed;
}

std::string JournalSnapshotWriterBucket(const std::string& stream) {
  return stream + "_SNAP_WRITER";
}

namespace {
constexpr const char* kLeaseKey = "writer";
}  // namespace

Status JournalSnapshotStore::Impl::BindLease(std::chrono::milliseconds ttl) {
  if (lease != nullptr) return Status::Ok();
  const std::string bucket = JournalSnapshotWriterBucket(options.stream);
  natsStatus s = js_KeyValue(&lease, link.js(), bucket.c_str());
  if (s == NATS_NOT_FOUND || s == NATS_ERR) {
    kvConfig config;
    kvConfig_Init(&config);
    config.Bucket = bucket.c_str();
    config.History = 1;
    // An entry not renewed within the TTL expires: a writer that died hands over.
    config.TTL = std::chrono::duration_cast<std::chrono::nanoseconds>(ttl).count();
    config.StorageType = js_FileStorage;
    config.Replicas = options.stream_replicas;
    s = js_CreateKeyValue(&lease, link.js(), &config);
    // Another ingester may have created it first.
    if (s != NATS_OK) s = js_KeyValue(&lease, link.js(), bucket.c_str());
  }
  if (s != NATS_OK) {
    lease = nullptr;
    return NatsError(StatusCode::kUnavailable, "writer lease bucket '" + bucket + "'", s);
  }
  return Status::Ok();
}

Result<JournalSnapshotLease> JournalSnapshotStore::HoldWriterLease(
    const std::string& writer, std::chrono::milliseconds ttl) {
  KVINDEX_RETURN_IF_ERROR(impl_->BindLease(ttl));
  kvStore* kv = impl_->lease;
  kvEntry* entry = nullptr;
  natsStatus s = kvStore_Get(&entry, kv, kLeaseKey);
  JournalSnapshotLease out;
  uint64_t rev = 0;
  if (s == NATS_NOT_FOUND) {
    // Free (never held, expired or released): the first to create the key holds it.
    s = kvStore_CreateString(&rev, kv, kLeaseKey, writer.c_str());
    out.held = s == NATS_OK;
    if (!out.held) {
      kvEntry* now = nullptr;
      if (kvStore_Get(&now, kv, kLeaseKey) == NATS_OK) {
        out.holder = kvEntry_ValueString(now);
        kvEntry_Destroy(now);
      }
      return out;
    }
    out.holder = writer;
    return out;
  }
  if (s != NATS_OK) return NatsError(StatusCode::kUnavailable, "writer lease", s);
  out.holder = kvEntry_ValueString(entry);
  const uint64_t last = kvEntry_Revision(entry);
  kvEntry_Destroy(entry);
  if (out.holder != writer) return out;
  // Ours: renewed only if no one took it meanwhile.
  s = kvStore_UpdateString(&rev, kv, kLeaseKey, writer.c_str(), last);
  out.held = s == NATS_OK;
  return out;
}

void JournalSnapshotStore::ReleaseWriterLease(const std::string& writer) {
  if (impl_->lease == nullptr) return;
  kvEntry* entry = nullptr;
  if (kvStore_Get(&entry, impl_->lease, kLeaseKey) != NATS_OK) return;
  const bool ours = std::string_view(kvEntry_ValueString(entry)) == writer;
  kvEntry_Destroy(entry);
  if (ours) (void)kvStore_Delete(impl_->lease, kLeaseKey);
}

}  // namespace kvindex
