// SnapshotReader (snapshot.h): a push parser of docs/snapshot-format.md. Bytes are buffered until
// a whole frame is there (a frame is at most kMaxFramePayload bytes, so memory stays bounded),
// the frame's checksum is verified, and its items go to an IndexLoader.
#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "kvindex/codec/source_spec.h"
#include "kvindex/snapshot/snapshot.h"

#include "snapshot_format.h"

namespace kvindex {

using namespace snapshot_internal;  // NOLINT: the format's own names

struct SnapshotReader::Impl {
  std::string name;
  PrefixIndex* into = nullptr;
  std::unique_ptr<PrefixIndex> scratch;  // when only checking
  std::unique_ptr<IndexLoader> loader;
  Status failed;
  std::string buf;
  size_t pos = 0;        // parsed up to here in buf
  uint64_t offset = 0;   // stream offset of buf[pos]
  bool header = false;
  int order = -1;
  bool ended = false;
  bool blocks_begun = false;
  uint64_t frames = 0;
  SnapshotInfo info;
  // Declared in the meta frame.
  uint64_t n_sources = 0, n_holders = 0, n_scopes = 0, n_tiers = 0, n_instances = 0;
  uint64_t n_blocks = 0, n_presences = 0, n_engine = 0;
  uint64_t got_holders = 0, got_scopes = 0, got_tiers = 0, got_blocks = 0, got_presences = 0,
           got_engine = 0;
  std::vector<StateInstance> inst;  // headers (name, listed, ...) per instance
  std::vector<bool> inst_seen;
  std::vector<StatePresence> presences;
  std::vector<uint64_t> hashes;
  std::vector<uint64_t> engines;
  std::vector<bool> engine_reserved;
  std::vector<uint64_t> engine_hint;  // per instance, from the meta frame (version 2)
  std::vector<uint32_t> evict_order;

  // What a damaged file names (a tier, a source) is quoted with its bytes outside printable
  // ASCII as '?', so the message stays one line.
  Status Fail(uint64_t at, std::string what) {
    for (char& ch : what) {
      if (static_cast<unsigned char>(ch) < 0x20 || static_cast<unsigned char>(ch) >= 0x7f) ch = '?';
    }
    failed = Status::Corrupt(name + ": byte " + std::to_string(at) + ": " + what);
    return failed;
  }
  Status Frame(uint8_t kind, std::string_view payload, uint64_t at);
  Status Meta(Cursor& c);
  Status SourceFrame(Cursor& c);
  Status BlocksFrame(Cursor& c);
  Status EngineFrame(Cursor& c);
  Status OrderFrame(Cursor& c);
  Status BeginBlocks();
  Status InstanceFrame(Cursor& c);
  Status End(Cursor& c);
};

SnapshotReader::SnapshotReader(std::string name, PrefixIndex* into)
    : impl_(std::make_unique<Impl>()) {
  impl_->name = std::move(name);
  if (into == nullptr) {
    impl_->scratch = std::make_unique<PrefixIndex>();
    into = impl_->scratch.get();
  }
  impl_->into = into;
  auto loader = IndexLoader::Begin(*into);
  if (!loader.ok()) {
    impl_->failed = loader.status().WithContext(impl_->name);
  } else {
    impl_->loader = std::move(*loader);
  }
}
SnapshotReader::~SnapshotReader() = default;

#define KVINDEX_SNAP_CHECK(cond, what) \
  do {                                 \
    if (!(cond)) return Status::Corrupt(what); \
  } while (0)

Status SnapshotReader::Impl::Meta(Cursor& c) {
  info.created_ns = UnZigZag(c.Varint());
  n_sources = c.Varint();
  n_holders = c.Varint();
  n_scopes = c.Varint();
  n_tiers = c.Varint();
  n_instances = c.Varint();
  n_blocks = c.Varint();
  n_presences = c.Varint();
  n_engine = c.Varint();
  if (info.version >= 2) {
    uint64_t sum = 0;
    for (uint64_t i = 0; i < n_instances && !c.bad() && !c.done(); ++i) {
      engine_hint.push_back(c.Varint());
      sum += engine_hint.back();
    }
    KVINDEX_SNAP_CHECK(!c.bad() && engine_hint.size() == n_instances && sum == n_engine,
                       "malformed meta frame (engine entry counts)");
  }
  KVINDEX_SNAP_CHECK(!c.bad() && c.done(), "malformed meta frame");
  return Status::Ok();
}

// The blocks begin: the table is sized, and with version 2 every engine map too (the meta frame
// gave their sizes; the reservations together stay within the declared total).
Status SnapshotReader::Impl::BeginBlocks() {
  blocks_begun = true;
  if (Status st = loader->BeginBlocks(n_blocks); !st.ok()) return st;
  if (engine_hint.empty()) return Status::Ok();
  engine_reserved.assign(loader->instance_count(), false);
  uint64_t budget = std::min<uint64_t>(n_engine, uint64_t{1} << 24);
  for (uint32_t ii = 0; ii < engine_hint.size() && ii < loader->instance_count(); ++ii) {
    const uint64_t n = std::min(engine_hint[ii], budget);
    budget -= n;
    loader->ReserveEngine(ii, n);
    engine_reserved[ii] = true;
  }
  return Status::Ok();
}

Status SnapshotReader::Impl::OrderFrame(Cursor& c) {
  evict_order.clear();
  int64_t prev = 0;
  while (!c.done()) {
    const int64_t at = prev + UnZigZag(c.Varint());
    KVINDEX_SNAP_CHECK(!c.bad() && at >= 0 && at < int64_t{UINT32_MAX},
                       "eviction order out of range");
    evict_order.push_back(static_cast<uint32_t>(at));
    prev = at;
  }
  return loader->AddEvictionOrder(evict_order);
}

Status SnapshotReader::Impl::SourceFrame(Cursor& c) {
  const std::string_view json = c.String();
  SourceSeqState s;
  const uint8_t flags = c.Byte();
  const uint64_t watermark = c.Varint();
  if (flags & 1) s.watermark = watermark;
  s.trust.exact = (flags & 2) != 0;
  s.publisher = std::string(c.String());
  s.lost = c.Varint();
  s.trust.lost_batches = c.Varint();
  s.trust.since_ns = UnZigZag(c.Varint());
  s.trust.last_loss_ns = UnZigZag(c.Varint());
  const uint8_t reason = c.Byte();
  s.trust.reason = static_cast<TrustReason>(reason);
  KVINDEX_SNAP_CHECK(!c.bad() && c.done() && flags < 4 && reason < kTrustReasonCount,
                     "malformed source frame");
  auto config = SourceConfigFromJson(json);
  KVINDEX_SNAP_CHECK(config.ok(), "source: " + config.status().message());
  if (Status st = loader->AddSource(*config); !st.ok()) return st;
  info.sources.push_back(std::move(*config));
  info.seq.push_back(std::move(s));
  return Status::Ok();
}

Status SnapshotReader::Impl::BlocksFrame(Cursor& c) {
  bool have_key = false;
  uint32_t scope = 0;
  uint32_t ns = 0;
  while (!c.done()) {
    const uint64_t head = c.Varint();
    const uint64_t n = head >> 2;
    const bool with_engine = (head & 2) != 0;
    if (head & 1) {
      const uint64_t s = c.Varint();
      const uint64_t k = c.Varint();
      KVINDEX_SNAP_CHECK(s < UINT32_MAX && k < UINT32_MAX, "block scope out of range");
      scope = static_cast<uint32_t>(s);
      ns = static_cast<uint32_t>(k);
      have_key = true;
    }
    KVINDEX_SNAP_CHECK(have_key, "a run repeats a key space the frame has not given");
    const uint64_t count = c.Varint();
    KVINDEX_SNAP_CHECK(!c.bad() && n > 0 && n <= kMaxFramePayload / 8, "run length out of range");
    KVINDEX_SNAP_CHECK(count > 0 && count <= 0xFFFF, "presence count out of range");
    presences.resize(count);
    uint64_t per_block = 0;
    for (uint64_t i = 0; i < count; ++i) {
      const uint64_t holder = c.Varint();
      const uint64_t tiers = c.Varint();
      KVINDEX_SNAP_CHECK(holder < 0xFFFF && tiers <= 0xFFFF, "presence out of range");
      presences[i] = {static_cast<uint16_t>(holder), static_cast<uint16_t>(tiers)};
      per_block += static_cast<uint64_t>(std::popcount(static_cast<unsigned>(tiers)));
    }
    hashes.clear();
    engines.clear();
    for (uint64_t i = 0; i < n && !c.bad(); ++i) {
      hashes.push_back(c.U64());
      if (with_engine) engines.push_back(c.U64());
    }
    KVINDEX_SNAP_CHECK(!c.bad(), "malformed block run");
    if (Status st = loader->AddRun(scope, ns, presences, hashes, engines); !st.ok()) return st;
    got_blocks += n;
    got_presences += n * per_block;
    got_engine += engines.size();
  }
  return Status::Ok();
}

Status SnapshotReader::Impl::EngineFrame(Cursor& c) {
  const uint64_t ii = c.Varint();
  const uint64_t total = c.Varint();
  uint64_t block = c.Varint();
  KVINDEX_SNAP_CHECK(!c.bad() && ii < loader->instance_count(), "malformed engine frame");
  if (engine_reserved.size() <= ii) engine_reserved.resize(loader->instance_count());
  if (!engine_reserved[ii]) {
    engine_reserved[ii] = true;
    loader->ReserveEngine(static_cast<uint32_t>(ii), std::min(total, n_engine));
  }
  while (!c.done()) {
    const uint64_t head = c.Varint();
    block += head >> 1;
    KVINDEX_SNAP_CHECK(!c.bad() && block < UINT32_MAX, "engine entry out of range");
    uint64_t engine;
    if (head & 1) {
      const auto key = loader->BlockHashAt(static_cast<uint32_t>(block));
      KVINDEX_SNAP_CHECK(key.has_value(), "engine entry of unknown block");
      engine = *key;
    } else {
      engine = c.U64();
    }
    KVINDEX_SNAP_CHECK(!c.bad(), "malformed engine entry");
    const Status st = loader->AddEngine(static_cast<uint32_t>(ii),
                                        {engine, static_cast<uint32_t>(block)});
    if (!st.ok()) return st;
    ++got_engine;
  }
  return Status::Ok();
}

Status SnapshotReader::Impl::InstanceFrame(Cursor& c) {
  const uint64_t ii = c.Varint();
  const uint8_t part = c.Byte();
  KVINDEX_SNAP_CHECK(!c.bad() && ii < loader->instance_count(), "instance frame of unknown instance");
  if (inst.size() < loader->instance_count()) {
    inst.resize(loader->instance_count());
    inst_seen.resize(loader->instance_count());
  }
  StateInstance& h = inst[ii];
  if (part == 0) {
    h.name = std::string(c.String());
    h.listed = c.Byte() != 0;
    const uint64_t bs = c.Varint();
    h.orphans = c.Varint();
    KVINDEX_SNAP_CHECK(!c.bad() && c.done() && bs <= UINT32_MAX, "malformed instance frame");
    h.block_size = static_cast<uint32_t>(bs);
    inst_seen[ii] = true;
    return loader->SetInstance(static_cast<uint32_t>(ii), h);
  }
  KVINDEX_SNAP_CHECK(inst_seen[ii], "instance details before the instance");
  StateInstance items;
  items.name = h.name;
  items.listed = h.listed;
  items.block_size = h.block_size;
  items.orphans = h.orphans;
  while (!c.done() && !c.bad()) {
    if (part == 1) {
      StatePartial p;
      p.key = c.U64();
      const uint64_t scope = c.Varint();
      const bool has_before = c.Byte() != 0;
      const uint64_t before = c.U64();
      if (has_before) p.before = before;
      const uint64_t n = c.Varint();
      KVINDEX_SNAP_CHECK(scope < UINT32_MAX && n <= kMaxFramePayload, "partial out of range");
      p.scope = static_cast<uint32_t>(scope);
      for (uint64_t i = 0; i < n && !c.bad(); ++i) {
        const uint64_t t = c.Varint();
        KVINDEX_SNAP_CHECK(t <= UINT32_MAX, "token out of range");
        p.tokens.push_back(static_cast<TokenId>(t));
      }
      items.partials.push_back(std::move(p));
    } else if (part == 2) {
      StateObject o;
      o.key = std::string(c.String());
      const uint64_t n = c.Varint();
      KVINDEX_SNAP_CHECK(n <= kMaxFramePayload, "object out of range");
      for (uint64_t i = 0; i < n && !c.bad(); ++i) {
        const uint64_t b = c.Varint();
        KVINDEX_SNAP_CHECK(b < UINT32_MAX, "object block out of range");
        o.blocks.push_back(static_cast<uint32_t>(b));
      }
      items.objects.push_back(std::move(o));
    } else {
      return Status::Corrupt("unknown instance frame part");
    }
  }
  KVINDEX_SNAP_CHECK(!c.bad(), "malformed instance frame");
  return loader->SetInstance(static_cast<uint32_t>(ii), items);
}

Status SnapshotReader::Impl::End(Cursor& c) {
  const uint64_t blocks = c.Varint();
  const uint64_t pres = c.Varint();
  const uint64_t engine = c.Varint();
  const uint64_t frame_count = c.Varint();
  StateCounters counters;
  counters.orphans = c.Varint();
  counters.tokenless = c.Varint();
  counters.unmapped = c.Varint();
  counters.evictions = c.Varint();
  KVINDEX_SNAP_CHECK(!c.bad() && c.done(), "malformed end frame");
  KVINDEX_SNAP_CHECK(frame_count == frames, "frame count differs (frames missing)");
  KVINDEX_SNAP_CHECK(blocks == n_blocks && got_blocks == n_blocks, "block count differs");
  KVINDEX_SNAP_CHECK(pres == n_presences && got_presences == n_presences,
                     "presence count differs");
  KVINDEX_SNAP_CHECK(engine == n_engine && got_engine == n_engine, "engine entry count differs");
  KVINDEX_SNAP_CHECK(info.sources.size() == n_sources && got_holders == n_holders &&
                         got_scopes == n_scopes && got_tiers == n_tiers &&
                         loader->instance_count() == n_instances,
                     "section counts differ from the meta frame");
  for (size_t i = 0; i < n_instances; ++i) {
    KVINDEX_SNAP_CHECK(i < inst_seen.size() && inst_seen[i], "an instance frame is missing");
  }
  if (!blocks_begun) {
    if (Status st = BeginBlocks(); !st.ok()) return st;
  }
  return loader->Finish(counters);
}

Status SnapshotReader::Impl::Frame(uint8_t kind, std::string_view payload, uint64_t at) {
  const int o = KindOrder(kind);
  if (o < 0) return Fail(at, "unknown frame kind " + std::to_string(kind));
  if (ended) return Fail(at, "data after the end frame");
  if (order < 0 && kind != static_cast<uint8_t>(Kind::kMeta)) {
    return Fail(at, "the first frame is not the meta frame");
  }
  if (o < order || (kind == static_cast<uint8_t>(Kind::kMeta) && order >= 0)) {
    return Fail(at, "frame out of order");
  }
  order = o;
  if (o >= KindOrder(static_cast<uint8_t>(Kind::kEngine)) && !blocks_begun) {
    if (Status st = BeginBlocks(); !st.ok()) return Fail(at, st.message());
  }
  if (kind == static_cast<uint8_t>(Kind::kOrder) && info.version < 2) {
    return Fail(at, "an eviction order in a version 1 snapshot");
  }
  Cursor c(payload);
  Status st;
  switch (static_cast<Kind>(kind)) {
    case Kind::kMeta:
      st = Meta(c);
      break;
    case Kind::kSource:
      st = SourceFrame(c);
      break;
    case Kind::kHolders:
      while (st.ok() && !c.done()) {
        StateHolder h;
        const uint64_t src = c.Varint();
        const uint8_t has = c.Byte();
        const int64_t rank = UnZigZag(c.Varint());
        if (c.bad() || src >= UINT32_MAX || has > 1 || rank < INT32_MIN || rank > INT32_MAX) {
          st = Status::Corrupt("malformed holder");
          break;
        }
        h.source = static_cast<uint32_t>(src);
        if (has) h.rank = static_cast<DpRank>(rank);
        st = loader->AddHolder(h);
        ++got_holders;
      }
      break;
    case Kind::kScopes:
      while (st.ok() && !c.done()) {
        Scope s;
        s.tenant = std::string(c.String());
        s.model = std::string(c.String());
        s.lora = std::string(c.String());
        s.salt = std::string(c.String());
        const uint64_t bs = c.Varint();
        const uint64_t group = c.Varint();
        if (c.bad() || bs > UINT32_MAX || group > UINT32_MAX) {
          st = Status::Corrupt("malformed scope");
          break;
        }
        s.block_size = static_cast<uint32_t>(bs);
        s.group = static_cast<uint32_t>(group);
        st = loader->AddScope(s);
        ++got_scopes;
      }
      break;
    case Kind::kTiers:
      while (st.ok() && !c.done()) {
        const std::string t(c.String());
        st = c.bad() ? Status::Corrupt("malformed tier") : loader->AddTier(t);
        ++got_tiers;
      }
      break;
    case Kind::kBlocks:
      if (!blocks_begun) st = BeginBlocks();
      if (st.ok()) st = BlocksFrame(c);
      break;
    case Kind::kEngine:
      st = EngineFrame(c);
      break;
    case Kind::kOrder:
      st = OrderFrame(c);
      break;
    case Kind::kInstance:
      st = InstanceFrame(c);
      break;
    case Kind::kEnd:
      st = End(c);
      ended = true;
      break;
  }
  ++frames;
  if (!st.ok()) {
    return Fail(at, std::string("frame ") + static_cast<char>(kind) + ": " + st.message());
  }
  return Status::Ok();
}

Status SnapshotReader::Feed(std::string_view bytes) {
  Impl& r = *impl_;
  if (!r.failed.ok()) return r.failed;
  r.buf.append(bytes);
  for (;;) {
    const size_t have = r.buf.size() - r.pos;
    const auto* p = reinterpret_cast<const unsigned char*>(r.buf.data() + r.pos);
    if (!r.header) {
      if (have < kHeaderBytes) break;
      if (std::memcmp(p, kMagic, sizeof(kMagic)) != 0) {
        return r.Fail(0, "not a kvindex snapshot (bad magic)");
      }
      const uint64_t word = LoadU64(p + 8);
      if ((word >> 32) != 0) return r.Fail(12, "reserved header bytes are not zero");
      const uint32_t version = static_cast<uint32_t>(word & 0xFFFFFFFFu);
      if (version < kSnapshotOldestVersion || version > kSnapshotVersion) {
        r.failed = Status::Unsupported(r.name + ": byte 8: snapshot version " +
                                       std::to_string(version) + " (this build reads " +
                                       std::to_string(kSnapshotOldestVersion) + " to " +
                                       std::to_string(kSnapshotVersion) + ")");
        return r.failed;
      }
      r.info.version = version;
      r.header = true;
      r.pos += kHeaderBytes;
      r.offset += kHeaderBytes;
      continue;
    }
    if (have < kFrameHead) break;
    const uint8_t kind = p[0];
    const uint32_t len = static_cast<uint32_t>(p[1]) | (static_cast<uint32_t>(p[2]) << 8) |
                         (static_cast<uint32_t>(p[3]) << 16) | (static_cast<uint32_t>(p[4]) << 24);
    if (len > kMaxFramePayload) return r.Fail(r.offset, "frame length out of range");
    if (have < kFrameHead + len + kFrameTail) break;
    const char* payload = r.buf.data() + r.pos + kFrameHead;
    const uint64_t want = LoadU64(p + kFrameHead + len);
    if (XXH3_64bits_withSeed(payload, len, kind) != want) {
      return r.Fail(r.offset, "checksum mismatch");
    }
    if (Status st = r.Frame(kind, std::string_view(payload, len), r.offset); !st.ok()) return st;
    r.pos += kFrameHead + len + kFrameTail;
    r.offset += kFrameHead + len + kFrameTail;
  }
  if (r.pos > (size_t{1} << 20) && r.pos * 2 > r.buf.size()) {
    r.buf.erase(0, r.pos);
    r.pos = 0;
  }
  return Status::Ok();
}

Result<SnapshotInfo> SnapshotReader::Finish() {
  Impl& r = *impl_;
  if (!r.failed.ok()) return r.failed;
  if (!r.ended) {
    const uint64_t at = r.offset + (r.buf.size() - r.pos);
    return r.Fail(at, "truncated (the snapshot ends before its end frame)");
  }
  if (r.buf.size() != r.pos) return r.Fail(r.offset, "data after the end frame");
  SnapshotInfo info = r.info;
  info.holders = r.got_holders;
  info.scopes = r.got_scopes;
  info.blocks = r.got_blocks;
  info.presences = r.got_presences;
  info.engine_entries = r.got_engine;
  info.bytes = r.offset;
  return info;
}

bool LooksLikeSnapshot(std::span<const std::byte> prefix) {
  return prefix.size() >= sizeof(kMagic) && std::memcmp(prefix.data(), kMagic, sizeof(kMagic)) == 0;
}

}  // namespace kvindex
