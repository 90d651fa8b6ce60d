#include "kvindex/codec/event_codec.h"

#include <cstring>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "../libindex/src/codec/vllm_fast_decoder.h"  // the decoder's fast path, compared below
#include "codec_test_util.h"
#include "test_util.h"

namespace kvindex {
namespace {

using test::Decode;
using test::Describe;
using test::FromHex;
using test::LoadVectors;
using test::ToHex;

constexpr WireFormat kAllFormats[] = {
    WireFormat::kVllmV09,     WireFormat::kVllm,     WireFormat::kVllmMap,
    WireFormat::kSglang,      WireFormat::kMooncake, WireFormat::kMooncakeSeed,
    WireFormat::kSglangEagle, WireFormat::kTrtllm,   WireFormat::kLmcache};

FormatHint HintFrom(const std::string& name) {
  if (name == "vllm") return FormatHint::kVllm;
  if (name == "sglang") return FormatHint::kSglang;
  if (name == "sglang-eagle") return FormatHint::kSglangEagle;
  if (name == "trtllm") return FormatHint::kTrtllm;
  if (name == "mooncake") return FormatHint::kMooncake;
  return FormatHint::kAuto;
}

StatusCode CodeFrom(const std::string& name) {
  if (name == "unsupported") return StatusCode::kUnsupported;
  if (name == "limit") return StatusCode::kLimitExceeded;
  return StatusCode::kMalformed;
}

// Events and header equal; errors compared by index and code.
void CheckSameBatch(const EventBatch& got, const EventBatch& want) {
  CHECK_MESSAGE(got.ts == want.ts, Describe(got));
  CHECK_MESSAGE(got.dp_rank == want.dp_rank, Describe(got));
  CHECK_MESSAGE(got.events == want.events, "got:\n"
                                               << Describe(got) << "\nwant:\n"
                                               << Describe(want));
}

// decode(encode(batch, format)) == batch for every format that accepts the batch.
void CheckRoundTrips(const EventBatch& batch, const std::string& name) {
  for (WireFormat f : kAllFormats) {
    std::vector<std::byte> bytes;
    const Status s = EncodeEventBatch(batch, f, bytes);
    if (!s.ok()) {
      CHECK_MESSAGE(
          (s.code() == StatusCode::kUnsupported || s.code() == StatusCode::kInvalidArgument),
          name << " " << WireFormatName(f) << ": " << s.ToString());
      continue;
    }
    WireFormat detected{};
    auto again = Decode(bytes, FormatHint::kAuto, &detected);
    REQUIRE_MESSAGE(again.ok(),
                    name << " " << WireFormatName(f) << ": " << again.status().ToString());
    CHECK_MESSAGE(again->errors.empty(), name << " " << WireFormatName(f));
    CHECK_MESSAGE(again->events == batch.events, name << " via " << WireFormatName(f) << "\ngot:\n"
                                                      << Describe(*again) << "\nwant:\n"
                                                      << Describe(batch));
    CHECK(again->ts == batch.ts);
    CHECK(again->dp_rank == batch.dp_rank);
    // The detected format encodes the decoded batch too.
    std::vector<std::byte> bytes2;
    CHECK_MESSAGE(EncodeEventBatch(*again, detected, bytes2).ok(),
                  name << " detected " << WireFormatName(detected));
  }
}

TEST_SUITE("event_codec") {
  TEST_CASE("Wire format names parse back to their format") {
    for (WireFormat f : kAllFormats) {
      auto parsed = ParseWireFormat(WireFormatName(f));
      REQUIRE(parsed.ok());
      CHECK(*parsed == f);
    }
    CHECK(ParseWireFormat("vllm-0.9").status().code() == StatusCode::kInvalidArgument);
    CHECK(ParseWireFormat("VLLM").status().code() == StatusCode::kInvalidArgument);
  }

  TEST_CASE("Every oracle vector decodes to the content the oracle expects") {
    const auto vectors = LoadVectors();
    REQUIRE(vectors["vectors"].size() >= 20);
    for (const auto& v : vectors["vectors"]) {
      const std::string name = v["name"].get<std::string>();
      CAPTURE(name);
      auto batch = Decode(FromHex(v["payload_hex"].get<std::string>()),
                          HintFrom(v["hint"].get<std::string>()));
      REQUIRE_MESSAGE(batch.ok(), batch.status().ToString());
      const EventBatch want = test::ExpectedBatch(v["expect"]);
      CheckSameBatch(*batch, want);
      const auto& errors = v["expect"]["errors"];
      REQUIRE(batch->errors.size() == errors.size());
      for (size_t i = 0; i < errors.size(); ++i) {
        CHECK(batch->errors[i].index == errors[i]["index"].get<uint32_t>());
        CHECK_MESSAGE(batch->errors[i].status.code() == CodeFrom(errors[i]["code"]),
                      batch->errors[i].status.ToString());
      }
    }
  }

  TEST_CASE("Decoding every oracle vector into one reused batch gives what the oracle expects") {
    // Forward, then backward, then each vector twice: every event kind is decoded over every other
    // (a reused slot must not keep a field of the event it held before).
    const auto vectors = LoadVectors();
    std::vector<const nlohmann::json*> order;
    for (const auto& v : vectors["vectors"]) order.push_back(&v);
    for (auto it = vectors["vectors"].rbegin(); it != vectors["vectors"].rend(); ++it) {
      order.push_back(&*it);
      order.push_back(&*it);
    }
    EventBatch batch;
    for (const nlohmann::json* v : order) {
      const std::string name = (*v)["name"].get<std::string>();
      CAPTURE(name);
      const Status status = DecodeEventBatchInto(FromHex((*v)["payload_hex"].get<std::string>()),
                                                 batch, HintFrom((*v)["hint"].get<std::string>()));
      REQUIRE_MESSAGE(status.ok(), status.ToString());
      CheckSameBatch(batch, test::ExpectedBatch((*v)["expect"]));
      CHECK(batch.errors.size() == (*v)["expect"]["errors"].size());
    }
    // A failed envelope leaves a valid batch that the next payload overwrites completely.
    const std::vector<std::byte> garbage = {std::byte{0xc1}};
    CHECK_FALSE(DecodeEventBatchInto(garbage, batch).ok());
    const auto& first = vectors["vectors"][0];
    REQUIRE(DecodeEventBatchInto(FromHex(first["payload_hex"].get<std::string>()), batch,
                                 HintFrom(first["hint"].get<std::string>()))
                .ok());
    CheckSameBatch(batch, test::ExpectedBatch(first["expect"]));
  }

  TEST_CASE("Oracle vectors in an encoder's layout are reproduced byte for byte") {
    const auto vectors = LoadVectors();
    int checked = 0;
    for (const auto& v : vectors["vectors"]) {
      if (!v.contains("encode")) continue;
      const std::string name = v["name"].get<std::string>();
      CAPTURE(name);
      auto format = ParseWireFormat(v["encode"].get<std::string>());
      REQUIRE(format.ok());
      std::vector<std::byte> out;
      const Status s = EncodeEventBatch(test::ExpectedBatch(v["expect"]), *format, out);
      REQUIRE_MESSAGE(s.ok(), s.ToString());
      CHECK(ToHex(out) == v["payload_hex"].get<std::string>());
      ++checked;
    }
    CHECK(checked >= 10);
  }

  TEST_CASE("Every oracle vector round-trips through every format that can carry it") {
    const auto vectors = LoadVectors();
    for (const auto& v : vectors["vectors"]) {
      const std::string name = v["name"].get<std::string>();
      CAPTURE(name);
      WireFormat detected{};
      auto batch = Decode(FromHex(v["payload_hex"].get<std::string>()),
                          HintFrom(v["hint"].get<std::string>()), &detected);
      REQUIRE(batch.ok());
      // The detected format always carries the batch.
      std::vector<std::byte> bytes;
      const Status s = EncodeEventBatch(*batch, detected, bytes);
      REQUIRE_MESSAGE(s.ok(), WireFormatName(detected) << ": " << s.ToString());
      auto again = Decode(bytes);
      REQUIRE(again.ok());
      CHECK(again->events == batch->events);
      CheckRoundTrips(*batch, name);
    }
  }

  TEST_CASE("The detected format follows the era and the hint") {
    const auto vectors = LoadVectors();
    auto detect = [&](const std::string& prefix, FormatHint hint) {
      for (const auto& v : vectors["vectors"]) {
        if (v["name"].get<std::string>().rfind(prefix, 0) != 0) continue;
        WireFormat detected{};
        auto batch = Decode(FromHex(v["payload_hex"].get<std::string>()), hint, &detected);
        REQUIRE(batch.ok());
        return detected;
      }
      FAIL("no vector named " << prefix);
      return WireFormat::kVllm;
    };
    CHECK(detect("vllm v0.9:", FormatHint::kAuto) == WireFormat::kVllmV09);
    CHECK(detect("vllm full array era: 12", FormatHint::kAuto) == WireFormat::kVllm);
    CHECK(detect("vllm map era (>= 0.24)", FormatHint::kAuto) == WireFormat::kVllmMap);
    CHECK(detect("sglang early", FormatHint::kAuto) == WireFormat::kSglang);  // signed hashes
    CHECK(detect("sglang with medium", FormatHint::kSglang) == WireFormat::kSglang);
    CHECK(detect("mooncake RFC #1527", FormatHint::kAuto) == WireFormat::kMooncake);
    CHECK(detect("mooncake seed: BlockStoreEvent", FormatHint::kAuto) == WireFormat::kMooncakeSeed);
  }

  TEST_CASE("Golden captures of the real publishers decode, detect and re-encode exactly") {
    const auto golden = test::TestDataDir() / "golden";
    struct Golden {
      const char* file;
      FormatHint hint;
      WireFormat format;
    };
    for (const Golden& g :
         {Golden{"vllm_v0_9_0.json", FormatHint::kVllm, WireFormat::kVllmV09},
          Golden{"sglang_006d053f.json", FormatHint::kSglang, WireFormat::kSglang}}) {
      CAPTURE(g.file);
      const auto doc = nlohmann::json::parse(test::ReadFile(golden / g.file));
      std::vector<nlohmann::json> cases(doc["frames"].begin(), doc["frames"].end());
      cases.insert(cases.end(), doc["encoded_only"].begin(), doc["encoded_only"].end());
      REQUIRE(cases.size() >= 14);
      for (const auto& frame : cases) {
        const std::string hex = frame["payload_hex"].get<std::string>();
        CAPTURE(hex);
        WireFormat detected{};
        auto batch = Decode(FromHex(hex), g.hint, &detected);
        REQUIRE_MESSAGE(batch.ok(), batch.status().ToString());
        CHECK(batch->errors.empty());
        const EventBatch want = test::LogicalBatch(frame["logical"]);
        CheckSameBatch(*batch, want);
        CHECK(detected == g.format);
        std::vector<std::byte> out;
        REQUIRE(EncodeEventBatch(want, g.format, out).ok());
        CHECK(ToHex(out) == hex);
        CheckRoundTrips(*batch, g.file);
      }
    }
  }

  TEST_CASE("Rich batches round-trip through each format that carries them") {
    BlockStored full;
    full.block_hashes = {EngineHash{1}, EngineHash{~uint64_t{0}}};
    full.parent = EngineHash{0};
    full.token_ids = {1, 2, 3, 4, 0xffffffffu, 6, 7, 8};
    full.tier = Tier::Other("hbm");
    full.wire.tier_spelling = "hbm";
    full.scope.block_size = 4;
    full.scope.lora_id = -1;
    full.scope.lora_name = "L";
    full.scope.salt = "L";  // equal to the LoRA name: the position keeps them apart
    full.scope.group = 3;
    full.multimodal = {{{"img", -4}, {"embeds:00ff", 0}}, {}};
    full.wire.spec_kind = "sliding_window";
    full.wire.sliding_window = -1;
    EventBatch vllm{
        12.5, 7, {full, BlockRemoved{{EngineHash{9}}, Tier::Disk(), {}, {}}, AllCleared{}}, {}};
    CheckRoundTrips(vllm, "vllm-rich");
    std::vector<std::byte> bytes;
    CHECK(EncodeEventBatch(vllm, WireFormat::kVllm, bytes).ok());
    CHECK(EncodeEventBatch(vllm, WireFormat::kVllmMap, bytes).ok());
    CHECK(EncodeEventBatch(vllm, WireFormat::kVllmV09, bytes).code() == StatusCode::kUnsupported);
    CHECK(EncodeEventBatch(vllm, WireFormat::kMooncake, bytes).code() == StatusCode::kUnsupported);

    BlockStored rfc;
    rfc.block_hashes = {EngineHash{5}};
    rfc.scope = {"m", "tenant", "s", "lora", std::nullopt, 16, 2, 1};
    rfc.wire.event_id = 77;
    rfc.wire.timestamp_ms = -5;
    rfc.wire.backend_id = "b";
    rfc.wire.base_block_idx = 3;
    rfc.wire.object_key = "k";
    rfc.tier = Tier::Cpu();
    AllCleared rfc_clear;
    rfc_clear.tier = Tier::Disk();
    rfc_clear.scope.model = "m";
    EventBatch mooncake{1.25, std::nullopt, {rfc, rfc_clear}, {}};
    CheckRoundTrips(mooncake, "mooncake-rich");
    CHECK(EncodeEventBatch(mooncake, WireFormat::kMooncake, bytes).ok());

    BlockStored seed_stored;
    seed_stored.block_hashes = {EngineHash{0x41234125}};
    seed_stored.token_ids = {1, 2, 3};
    seed_stored.scope.model = "llama";
    seed_stored.wire.object_key = "key";
    StoreUpdate seed_update{
        "key",
        {Replica{Tier::Cpu(), "tcp://a:1", "memory"}, Replica{Tier::Disk(), "/x", std::nullopt}}};
    EventBatch seed{
        2.0, std::nullopt, {seed_stored, seed_update, AllCleared{}, StoreUpdate{"gone", {}}}, {}};
    CheckRoundTrips(seed, "seed-rich");
    CHECK(EncodeEventBatch(seed, WireFormat::kMooncakeSeed, bytes).ok());
    CHECK(EncodeEventBatch(seed, WireFormat::kVllm, bytes).code() == StatusCode::kUnsupported);
    CHECK(EncodeEventBatch(seed, WireFormat::kVllm, bytes).message() ==
          "event 0: model cannot be carried by vllm");

    // A BlockStored carrying an object key must be followed by its StoreUpdate in the seed format.
    EventBatch lonely{2.0, std::nullopt, {seed_stored}, {}};
    CHECK(EncodeEventBatch(lonely, WireFormat::kMooncakeSeed, bytes).code() ==
          StatusCode::kUnsupported);
  }

  TEST_CASE("Encoding refuses what a format cannot carry, naming it") {
    BlockStored s;
    s.block_hashes = {EngineHash{1}};
    s.scope.block_size = 4;
    s.tier = Tier::Cpu();
    EventBatch batch{1.0, std::nullopt, {s}, {}};
    std::vector<std::byte> out;
    const Status v09 = EncodeEventBatch(batch, WireFormat::kVllmV09, out);
    CHECK(v09.code() == StatusCode::kUnsupported);
    CHECK(v09.message() == "event 0: tier cannot be carried by vllm-v0.9");
    batch.dp_rank = 1;
    CHECK(EncodeEventBatch(batch, WireFormat::kMooncakeSeed, out).code() ==
          StatusCode::kUnsupported);  // a BlockStored without its store object
    std::get<BlockStored>(batch.events[0]).scope.block_size.reset();
    CHECK(EncodeEventBatch(batch, WireFormat::kVllm, out).code() == StatusCode::kInvalidArgument);
    CHECK(EncodeEventBatch(batch, WireFormat::kMooncake, out).ok());  // RFC block_size optional
    // A ts that is not whole milliseconds stays exact as float64 seconds.
    batch.ts = 0.0001;
    REQUIRE(EncodeEventBatch(batch, WireFormat::kMooncake, out).ok());
    CHECK(static_cast<uint8_t>(out[1]) == 0xcb);
    auto back = DecodeEventBatch(out);
    REQUIRE(back.ok());
    CHECK(back->ts == 0.0001);
    // A spelling must spell its tier.
    BlockRemoved r{{EngineHash{1}}, Tier::Cpu(), {}, {}};
    r.wire.tier_spelling = "disk";
    EventBatch bad{1.0, std::nullopt, {r}, {}};
    CHECK(EncodeEventBatch(bad, WireFormat::kVllm, out).code() == StatusCode::kInvalidArgument);
  }

  TEST_CASE("Encoding replaces the output buffer") {
    EventBatch batch{1750000000.0, std::nullopt, {AllCleared{}}, {}};
    std::vector<std::byte> out = FromHex("deadbeef");
    REQUIRE(EncodeEventBatch(batch, WireFormat::kVllmV09, out).ok());
    CHECK(ToHex(out) == "92cb41da13b8600000009191b0416c6c426c6f636b73436c6561726564");
  }

  // The decoder's fast path (codec_internal::DecodeVllmFast) against the general decoder, which
  // DecodeEventBatchInto() runs when a detected format is asked for. Whenever the fast path takes a
  // payload, the general decoder must accept it and give the same batch. `reused` is decoded into
  // over and over (the fast path when it applies) and must equal a fresh general decode each time,
  // so a field left over from the event a slot held before shows too. Returns whether the fast path
  // took the payload.
  bool CheckFastPathAgrees(const std::vector<std::byte>& payload, EventBatch& reused) {
    WireFormat detected{};
    EventBatch general;
    const Status want = DecodeEventBatchInto(payload, general, FormatHint::kAuto, &detected);
    const Status got = DecodeEventBatchInto(payload, reused);
    CHECK_MESSAGE(got.ok() == want.ok(),
                  ToHex(payload) << ": " << got.ToString() << " vs " << want.ToString());
    if (want.ok() && got.ok()) {
      CHECK_MESSAGE(reused == general, ToHex(payload) << "\ngot:\n"
                                                      << Describe(reused) << "\nwant:\n"
                                                      << Describe(general));
    }
    EventBatch fast;
    if (!codec_internal::DecodeVllmFast(payload, fast)) return false;
    REQUIRE_MESSAGE(want.ok(), ToHex(payload) << ": the fast path took a payload the decoder "
                                                 "refuses: "
                                              << want.ToString());
    CHECK_MESSAGE(fast == general, ToHex(payload) << "\nfast:\n"
                                                  << Describe(fast) << "\ngeneral:\n"
                                                  << Describe(general));
    return true;
  }

  // Batches in the shapes the fast path takes, and next to them.
  std::vector<EventBatch> FastPathBatches() {
    std::vector<EventBatch> out;
    const uint64_t hashes[] = {
        0, 1, 127, 128, 255, 256, 65535, 65536, 0xffffffffu, uint64_t{1} << 32, ~uint64_t{0}};
    const uint32_t tokens[] = {0,   5,     127,   128,   200,    255,
                               256, 40000, 65535, 65536, 151935, 0xffffffffu};
    for (int variant = 0; variant < 12; ++variant) {
      EventBatch batch;
      batch.ts = 1750000000.25 + variant;
      if (variant % 3 == 1) batch.dp_rank = variant;
      if (variant % 3 == 2) batch.dp_rank = 0;
      const int events = 1 + variant % 3;
      for (int e = 0; e < events; ++e) {
        if ((variant + e) % 4 == 3) {
          BlockRemoved removed;
          removed.block_hashes = {EngineHash{hashes[(variant + e) % 11]}, EngineHash{7}};
          if (variant % 2 == 0) removed.tier = Tier::Cpu();
          if (variant == 7) removed.scope.group = 2;
          batch.events.emplace_back(std::move(removed));
          continue;
        }
        BlockStored stored;
        const size_t blocks = 1 + static_cast<size_t>((variant + e) % 3);
        for (size_t b = 0; b < blocks; ++b) {
          stored.block_hashes.push_back(EngineHash{hashes[(variant * 3 + e + b) % 11]});
        }
        if (variant % 2 == 1) stored.parent = EngineHash{hashes[(variant + 5) % 11]};
        const uint32_t block_size = variant == 4 ? 1 : 4;
        stored.scope.block_size = block_size;
        for (size_t t = 0; t < blocks * block_size; ++t) {
          stored.token_ids.push_back(tokens[(variant + e + t) % 12]);
        }
        if (variant % 4 == 1) stored.tier = Tier::Gpu();
        if (variant % 4 == 2) stored.tier = Tier::Cpu();
        if (variant == 5) stored.scope.group = 1;
        if (variant == 6) stored.scope.lora_id = 3;            // outside the fast shape
        if (variant == 8) stored.tier = Tier::Disk();          // outside the fast shape
        if (variant == 9) stored.scope.lora_name = "adapter";  // outside the fast shape
        if (variant == 10) stored.wire.spec_kind = "full";     // outside the fast shape
        batch.events.emplace_back(std::move(stored));
      }
      if (variant == 11) batch.events.emplace_back(AllCleared{});  // outside the fast shape
      out.push_back(std::move(batch));
    }
    // Hash lists longer than the fast path's parse takes item by item (it reads those in place),
    // each event kind first and after the other.
    for (int variant = 0; variant < 2; ++variant) {
      EventBatch batch;
      batch.ts = 1750000100.5 + variant;
      if (variant == 1) batch.dp_rank = 3;
      BlockStored stored;
      for (size_t b = 0; b < 6; ++b) {
        stored.block_hashes.push_back(EngineHash{hashes[(variant * 5 + b) % 11]});
        for (size_t t = 0; t < 2; ++t) stored.token_ids.push_back(tokens[(b * 2 + t) % 12]);
      }
      if (variant == 0) stored.parent = EngineHash{~uint64_t{0}};
      stored.scope.block_size = 2;
      stored.tier = variant == 0 ? Tier::Gpu() : Tier::Cpu();
      if (variant == 1) stored.scope.group = 4;
      BlockRemoved removed;
      for (size_t b = 0; b < 5; ++b)
        removed.block_hashes.push_back(EngineHash{hashes[(b + 3) % 11]});
      if (variant == 1) removed.tier = Tier::Cpu();
      if (variant == 1) removed.scope.group = 0;
      if (variant == 0) {
        batch.events.emplace_back(std::move(stored));
        batch.events.emplace_back(std::move(removed));
      } else {
        batch.events.emplace_back(std::move(removed));
        batch.events.emplace_back(std::move(stored));
      }
      out.push_back(std::move(batch));
    }
    return out;
  }

  TEST_CASE("The fast path gives what the general decoder gives, or leaves the payload to it") {
    std::vector<std::vector<std::byte>> payloads;
    for (const EventBatch& batch : FastPathBatches()) {
      for (WireFormat f :
           {WireFormat::kVllm, WireFormat::kVllmV09, WireFormat::kSglang, WireFormat::kVllmMap}) {
        std::vector<std::byte> bytes;
        if (EncodeEventBatch(batch, f, bytes).ok()) payloads.push_back(bytes);
      }
    }
    const auto vectors = LoadVectors();
    for (const auto& v : vectors["vectors"]) {
      payloads.push_back(FromHex(v["payload_hex"].get<std::string>()));
    }
    EventBatch reused;
    size_t taken = 0;
    for (const auto& payload : payloads) taken += CheckFastPathAgrees(payload, reused) ? 1 : 0;
    // The fast path is not vacuous: it takes the plain vLLM batches (12 variants minus the 5
    // outside its shape, in the kVllm and kVllmV09 layouts) and the oracle's plain ones.
    CHECK(taken >= 14);
    CHECK(taken < payloads.size());

    // Every single-byte change and every truncation of the payloads it takes: it either gives the
    // general decoder's batch or leaves the payload to the general decoder.
    size_t mutants = 0, mutants_taken = 0;
    for (const auto& payload : payloads) {
      EventBatch probe;
      if (!codec_internal::DecodeVllmFast(payload, probe)) continue;
      for (size_t i = 0; i < payload.size(); ++i) {
        const auto b = std::to_integer<uint8_t>(payload[i]);
        for (uint8_t to : {uint8_t(b ^ 1), uint8_t(b + 1), uint8_t(b - 1), uint8_t(0x00),
                           uint8_t(0x7f), uint8_t(0x80), uint8_t(0xc0), uint8_t(0xcc),
                           uint8_t(0xcf), uint8_t(0xd3), uint8_t(0xa3), uint8_t(0xff)}) {
          if (to == b) continue;
          std::vector<std::byte> mutant = payload;
          mutant[i] = std::byte{to};
          ++mutants;
          mutants_taken += CheckFastPathAgrees(mutant, reused) ? 1 : 0;
        }
        std::vector<std::byte> cut(payload.begin(), payload.begin() + static_cast<ptrdiff_t>(i));
        if (!cut.empty()) mutants_taken += CheckFastPathAgrees(cut, reused) ? 1 : 0;
      }
    }
    CHECK(mutants > 1000);
    CHECK(mutants_taken > 100);  // changed values it still takes (hashes, tokens, ts, ranks)
  }

}  // TEST_SUITE

}  // namespace
}  // namespace kvindex
