// NatsLink and the journal's subject and stream helpers (nats_link.h), and the parsing of the
// journal flags (journal.h).
#include "nats_link.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <thread>

#include "kvindex/core/address.h"
#include "kvindex/core/log.h"

namespace kvindex {

Result<std::vector<std::string>> ParseJournalServers(std::string_view text,
                                                     std::string_view flag) {
  const std::string usage = std::string(flag) + ": expected nats://HOST:PORT[,HOST:PORT...], got '" +
                            std::string(text) + "'";
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view part = text.substr(start, end - start);
    Result<NetAddress> address = ParseNetAddress(part);
    if (!address.ok() || address->host.empty() || !address->port || *address->port == 0 ||
        !address->path.empty() || (!address->scheme.empty() && address->scheme != "nats") ||
        (out.empty() && address->scheme.empty())) {
      return Status::InvalidArgument(usage);
    }
    out.push_back("nats://" + address->HostPort());
    start = end + 1;
  }
  return out;
}

void CloseJournalLibrary() { nats_CloseAndWait(2000); }

Status CheckJournalStreamName(std::string_view name, std::string_view flag) {
  bool ok = !name.empty() && name.size() <= 64;
  for (const char c : name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_')) ok = false;
  }
  if (ok) return Status::Ok();
  return Status::InvalidArgument(std::string(flag) +
                                 ": a stream name is 1-64 letters, digits, '-' or '_'");
}

namespace nats_internal {
namespace {

void NoteConnected(natsConnection*, void*) {}

}  // namespace

Status NatsError(StatusCode code, std::string_view what, natsStatus s) {
  return Status(code, "nats: " + std::string(what) + ": " + natsStatus_GetText(s));
}

NatsLink::~NatsLink() { Close(); }

Status NatsLink::Connect(const std::vector<std::string>& servers, bool retry_in_background,
                         jsOptions* js_options) {
  natsOptions* opts = nullptr;
  natsStatus s = natsOptions_Create(&opts);
  std::vector<const char*> urls;
  for (const std::string& url : servers) urls.push_back(url.c_str());
  if (s == NATS_OK) s = natsOptions_SetServers(opts, urls.data(), static_cast<int>(urls.size()));
  if (s == NATS_OK) s = natsOptions_SetNoRandomize(opts, true);
  if (s == NATS_OK) s = natsOptions_SetMaxReconnect(opts, -1);
  if (s == NATS_OK) s = natsOptions_SetReconnectWait(opts, 100);
  if (s == NATS_OK) s = natsOptions_SetTimeout(opts, 1000);
  if (s == NATS_OK) s = natsOptions_SetPingInterval(opts, 1000);
  if (s == NATS_OK) s = natsOptions_SetMaxPingsOut(opts, 3);
  // Published while disconnected, nats.c would buffer: the journal buffers itself instead.
  if (s == NATS_OK) s = natsOptions_SetReconnectBufSize(opts, 8 << 20);
  if (s == NATS_OK && retry_in_background) {
    s = natsOptions_SetRetryOnFailedConnect(opts, true, NoteConnected, nullptr);
  }
  if (s != NATS_OK) {
    natsOptions_Destroy(opts);
    return NatsError(StatusCode::kInvalidArgument, "options", s);
  }
  s = natsConnection_Connect(&nc_, opts);
  natsOptions_Destroy(opts);
  if (s != NATS_OK && !(retry_in_background && s == NATS_NOT_YET_CONNECTED)) {
    nc_ = nullptr;
    return NatsError(StatusCode::kUnavailable, "connect to " + servers.front(), s);
  }
  s = natsConnection_JetStream(&js_, nc_, js_options);
  if (s != NATS_OK) {
    Close();
    return NatsError(StatusCode::kInternal, "JetStream context", s);
  }
  return Status::Ok();
}

bool NatsLink::connected() const {
  return nc_ != nullptr && natsConnection_Status(nc_) == NATS_CONN_STATUS_CONNECTED;
}

void NatsLink::Close() {
  if (nc_ != nullptr) natsConnection_Close(nc_);
  if (js_ != nullptr) jsCtx_Destroy(js_);
  if (nc_ != nullptr) natsConnection_Destroy(nc_);
  js_ = nullptr;
  nc_ = nullptr;
}

Result<uint64_t> StreamLastSeq(jsCtx* js, const std::string& stream) {
  jsStreamInfo* info = nullptr;
  jsErrCode err = static_cast<jsErrCode>(0);
  const natsStatus s = js_GetStreamInfo(&info, js, stream.c_str(), nullptr, &err);
  if (s == NATS_NOT_FOUND || err == JSStreamNotFoundErr) {
    return Status::NotFound("nats: stream '" + stream + "' does not exist");
  }
  if (s != NATS_OK) return NatsError(StatusCode::kUnavailable, "stream info", s);
  const uint64_t last = info->State.LastSeq;
  jsStreamInfo_Destroy(info);
  return last;
}

Status EnsureStream(jsCtx* js, const JournalOptions& options) {
  return EnsureStreamNamed(js, options.stream, options, /*snapshots=*/false);
}

namespace {

// An existing journal stream takes the retention limits given to this ingester when they differ
// from its own (JetStream applies a lower limit at once, dropping the oldest records).
Status UpdateRetention(jsCtx* js, const std::string& name, const JournalOptions& options) {
  jsStreamInfo* info = nullptr;
  jsErrCode err = static_cast<jsErrCode>(0);
  natsStatus s = js_GetStreamInfo(&info, js, name.c_str(), nullptr, &err);
  if (s != NATS_OK || info == nullptr || info->Config == nullptr) {
    if (info != nullptr) jsStreamInfo_Destroy(info);
    return NatsError(StatusCode::kUnavailable, "stream info of '" + name + "'", s);
  }
  jsStreamConfig& config = *info->Config;
  const int64_t age =
      std::chrono::duration_cast<std::chrono::nanoseconds>(options.max_age).count();
  const bool age_differs = age > 0 && config.MaxAge != age;
  const bool bytes_differ = options.max_bytes > 0 && config.MaxBytes != options.max_bytes;
  if (!age_differs && !bytes_differ) {
    jsStreamInfo_Destroy(info);
    return Status::Ok();
  }
  const int64_t old_age = config.MaxAge, old_bytes = config.MaxBytes;
  if (age_differs) {
    config.MaxAge = age;
    config.Duplicates = std::min(config.Duplicates, age);  // may not exceed the age limit
  }
  if (bytes_differ) config.MaxBytes = options.max_bytes;
  const int64_t new_age = config.MaxAge, new_bytes = config.MaxBytes;
  jsStreamInfo* updated = nullptr;
  s = js_UpdateStream(&updated, js, &config, nullptr, &err);
  if (updated != nullptr) jsStreamInfo_Destroy(updated);
  jsStreamInfo_Destroy(info);
  if (s != NATS_OK) {
    std::string what = "update the retention of stream '" + name + "'";
    if (err != 0) what += " (JetStream error " + std::to_string(static_cast<int>(err)) + ")";
    return NatsError(StatusCode::kUnavailable, what, s);
  }
  const auto limit = [](int64_t v, const char* unit, int64_t scale) {
    return v > 0 ? std::to_string(v / scale) + unit : std::string("none");
  };
  Log(LogLevel::kInfo, "journal stream '" + name + "': retention changed from max age " +
                           limit(old_age, " s", 1000000000) + ", max bytes " +
                           limit(old_bytes, "", 1) + " to max age " +
                           limit(new_age, " s", 1000000000) + ", max bytes " +
                           limit(new_bytes, "", 1));
  return Status::Ok();
}

}  // namespace

Status EnsureStreamNamed(jsCtx* js, const std::string& name, const JournalOptions& options,
                         bool snapshots) {
  Result<uint64_t> last = StreamLastSeq(js, name);
  if (last.ok()) {
    if (snapshots) return Status::Ok();
    // A stream that keeps its old limits still journals: said, not fatal.
    if (const Status updated = UpdateRetention(js, name, options); !updated.ok()) {
      Log(LogLevel::kWarn, "journal stream '" + name + "': " + updated.message());
    }
    return Status::Ok();
  }
  if (last.status().code() != StatusCode::kNotFound) return last.status();
  const std::string subjects = name + ".>";
  const char* subject_list[] = {subjects.c_str()};
  jsStreamConfig config;
  jsStreamConfig_Init(&config);
  config.Name = name.c_str();
  config.Subjects = subject_list;
  config.SubjectsLen = 1;
  config.Storage = js_FileStorage;
  config.Replicas = options.stream_replicas;
  config.Duplicates = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          options.duplicate_window).count();
  if (!snapshots && options.max_age.count() > 0) {
    config.MaxAge = std::chrono::duration_cast<std::chrono::nanoseconds>(options.max_age).count();
    // The duplicate window may not exceed the age limit.
    config.Duplicates = std::min(config.Duplicates, config.MaxAge);
  }
  if (!snapshots && options.max_bytes > 0) config.MaxBytes = options.max_bytes;
  // Chunks of up to 1 MiB are read back as they are stored (no base64 JSON envelope).
  if (snapshots) config.AllowDirect = true;
  jsStreamInfo* info = nullptr;
  jsErrCode err = static_cast<jsErrCode>(0);
  const natsStatus s = js_AddStream(&info, js, &config, nullptr, &err);
  if (info != nullptr) jsStreamInfo_Destroy(info);
  if (s == NATS_OK || err == JSStreamNameExistErr) return Status::Ok();  // another ingester won
  std::string what = "create stream '" + name + "'";
  if (err != 0) what += " (JetStream error " + std::to_string(static_cast<int>(err)) + ")";
  return NatsError(StatusCode::kUnavailable, what, s);
}

std::string Hex64(uint64_t value) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(value));
  return buf;
}

std::string SourceSubject(const std::string& stream, uint64_t key) {
  return stream + ".src." + Hex64(key);
}

std::optional<uint64_t> ParseHex64(std::string_view text) {
  if (text.size() != 16) return std::nullopt;
  uint64_t value = 0;
  for (const char c : text) {
    const int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (digit < 0) return std::nullopt;
    value = value << 4 | static_cast<uint64_t>(digit);
  }
  return value;
}

uint64_t SubjectSourceKey(std::string_view subject, std::string_view stream) {
  if (subject.size() != stream.size() + 5 + 16 || subject.substr(0, stream.size()) != stream ||
      subject.substr(stream.size(), 5) != ".src.") {
    return 0;
  }
  return ParseHex64(subject.substr(stream.size() + 5)).value_or(0);
}

}  // namespace nats_internal
}  // namespace kvindex
