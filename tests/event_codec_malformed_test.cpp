// The event codec on malformed input: every error names its code, the event and the byte offset,
// a bad event fails alone, truncations and deep nesting never crash, the hard limits hold, and
// hashes and token ids in every integer encoding read as the publishers mean them. Payloads are
// written by hand (the msgpack bytes are spelled out beside each).
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "kvindex/codec/event_codec.h"

#include "codec_test_util.h"
#include "test_util.h"

namespace kvindex {
namespace {

using test::Decode;
using test::FromHex;
using test::Hex;
using test::LoadVectors;

TEST_SUITE("event_codec") {
  TEST_CASE("Error messages name the event, the byte offset and the field") {
    // [1.0, [["BlockRemoved", [1]], ["BlockStored", [1], nil, "x", 1, nil]]]
    auto batch =
        Decode(Hex("92cb3ff000000000000092"
                   "92ac426c6f636b52656d6f7665649101"
                   "96ab426c6f636b53746f7265649101c0a17801c0"));
    REQUIRE(batch.ok());
    REQUIRE(batch->errors.size() == 1);
    CHECK(batch->errors[0].index == 1);
    CHECK(batch->errors[0].status.code() == StatusCode::kMalformed);
    CHECK(batch->errors[0].status.message() ==
          "event 1 (byte 43): token_ids: expected array, got str");
    CHECK(batch->events.size() == 1);
  }

  TEST_CASE("Malformed envelopes fail the batch with their code and offset") {
    struct Case {
      const char* name;
      std::string bytes;
      StatusCode code;
      const char* message;  // exact, or nullptr
    };
    const Case cases[] = {
        {"empty input", "", StatusCode::kMalformed, "batch (byte 0): empty payload"},
        {"an int", Hex("07"), StatusCode::kMalformed,
         "batch (byte 0): batch: expected array or map, got int"},
        {"one-element batch", Hex("91cb3ff0000000000000"), StatusCode::kMalformed,
         "batch (byte 0): batch: expected [ts, events(, dp_rank)], got an array of 1"},
        {"ts is a string", Hex("92a17890"), StatusCode::kMalformed,
         "batch (byte 1): ts: expected float seconds or int milliseconds, got str"},
        {"ts is NaN", Hex("92cb7ff800000000000090"), StatusCode::kMalformed,
         "batch (byte 1): ts: not a finite number"},
        {"events is a map where an array is expected", Hex("92cb3ff000000000000080"),
         StatusCode::kMalformed, "batch (byte 10): events: expected array, got map"},
        {"rank is a string", Hex("93cb3ff000000000000090a130"), StatusCode::kMalformed,
         "batch (byte 11): dp_rank: expected int, got str"},
        {"huge events array length", Hex("92cb3ff0000000000000dd0000ffff01"),
         StatusCode::kMalformed, nullptr},
        {"more events than the limit", Hex("92cb3ff0000000000000dd00100001"),
         StatusCode::kLimitExceeded,
         "batch (byte 10): events: 1048577 events exceed the limit of 1048576"},
        {"trailing bytes", Hex("92cb3ff00000000000009000"), StatusCode::kMalformed,
         "batch (byte 11): 1 trailing bytes after the batch"},
        {"reserved byte", Hex("c1"), StatusCode::kMalformed, nullptr},
        {"map batch without events", Hex("81a274736000"), StatusCode::kMalformed, nullptr},
        {"huge string length inside an event", Hex("92cb3ff00000000000009191dbffffffff"),
         StatusCode::kMalformed, nullptr},
    };
    for (const Case& c : cases) {
      CAPTURE(c.name);
      auto batch = Decode(c.bytes);
      REQUIRE(!batch.ok());
      CHECK(batch.status().code() == c.code);
      if (c.message) CHECK(batch.status().message() == c.message);
    }
  }

  TEST_CASE("Malformed events fail alone and the good events survive") {
    struct Case {
      const char* name;
      std::string event;  // one event, placed between two good ones
      StatusCode code;
    };
    const Case cases[] = {
        {"unknown tag", Hex("91a3466f6f"), StatusCode::kUnsupported},
        {"tag not a string", Hex("9101"), StatusCode::kMalformed},
        {"empty event array", Hex("90"), StatusCode::kMalformed},
        {"an int as event", Hex("2a"), StatusCode::kMalformed},
        {"BlockStored too short", Hex("93ab426c6f636b53746f7265649101c0"), StatusCode::kMalformed},
        {"hashes a map", Hex("92ac426c6f636b52656d6f76656480"), StatusCode::kMalformed},
        {"hash a float", Hex("92ac426c6f636b52656d6f76656491cb3ff0000000000000"),
         StatusCode::kMalformed},
        {"medium an int",
         Hex("93ac426c6f636b52656d6f76656491"
             "01"
             "05"),
         StatusCode::kMalformed},
        {"block_size negative", Hex("96ab426c6f636b53746f7265649101c090ffc0"),
         StatusCode::kMalformed},
        {"block_size nil", Hex("96ab426c6f636b53746f7265649101c090c0c0"), StatusCode::kMalformed},
        {"token id negative", Hex("96ab426c6f636b53746f7265649101c091ff01c0"),
         StatusCode::kMalformed},
        {"token id over u32", Hex("96ab426c6f636b53746f7265649101c091cf000000010000000001c0"),
         StatusCode::kMalformed},
        {"map event without type", Hex("81a178c0"), StatusCode::kMalformed},
        {"map event unknown event_type", Hex("81aa6576656e745f74797065a4626c6168"),
         StatusCode::kUnsupported},
        {"map stored without hashes", Hex("81a474797065ab426c6f636b53746f726564"),
         StatusCode::kMalformed},
        {"replicas not pairs",
         Hex("93b0426c6f636b5570646174654576656e74a16b9191a6"
             "6d656d6f7279"),
         StatusCode::kMalformed},
    };
    const std::string good = Hex("91b0416c6c426c6f636b73436c6561726564");  // ["AllBlocksCleared"]
    for (const Case& c : cases) {
      CAPTURE(c.name);
      const std::string payload = Hex("92cb3ff000000000000093") + good + c.event + good;
      auto batch = Decode(payload);
      REQUIRE_MESSAGE(batch.ok(), batch.status().ToString());
      CHECK(batch->events.size() == 2);
      REQUIRE(batch->errors.size() == 1);
      CHECK(batch->errors[0].index == 1);
      CHECK_MESSAGE(batch->errors[0].status.code() == c.code, batch->errors[0].status.ToString());
      CHECK(batch->errors[0].status.message().rfind("event 1 (byte ", 0) == 0);
    }
  }

  TEST_CASE("Every truncation of a good payload fails as malformed, never crashes") {
    const auto vectors = LoadVectors();
    for (const auto& v : vectors["vectors"]) {
      const auto bytes = FromHex(v["payload_hex"].get<std::string>());
      for (size_t cut = 0; cut < bytes.size(); ++cut) {
        CAPTURE(cut);
        std::vector<std::byte> prefix(bytes.begin(), bytes.begin() + static_cast<long>(cut));
        auto batch = Decode(prefix);
        REQUIRE(!batch.ok());
        CHECK(batch.status().code() == StatusCode::kMalformed);
        const std::string m = batch.status().message();
        const size_t at = m.find("(byte ");
        REQUIRE(at != std::string::npos);
        CHECK(std::stoul(m.substr(at + 6)) <= cut);
      }
    }
  }

  TEST_CASE("Deep nesting is refused at the limit") {
    // A map event with an unknown key whose value nests `depth` arrays.
    auto payload = [](int depth) {
      std::string p =
          Hex("92cb3ff00000000000009182a474797065b0416c6c426c6f636b73436c6561726564"
              "a178");
      p += std::string(static_cast<size_t>(depth), '\x91');
      p += '\x01';
      return p;
    };
    // batch(1) > events(2) > event map(3) > 29 arrays = 32 levels: accepted.
    auto ok = Decode(payload(29));
    REQUIRE_MESSAGE(ok.ok(), ok.status().ToString());
    CHECK(ok->events.size() == 1);
    auto deep = Decode(payload(30));
    REQUIRE(!deep.ok());
    CHECK(deep.status().code() == StatusCode::kLimitExceeded);
    auto very_deep = Decode(payload(100000));
    REQUIRE(!very_deep.ok());
    CHECK(very_deep.status().code() == StatusCode::kLimitExceeded);
  }

  TEST_CASE("Hard limits: payload size and token ids per event") {
    std::vector<std::byte> huge(kMaxPayloadBytes + 1, std::byte{0x90});
    auto big = Decode(huge);
    REQUIRE(!big.ok());
    CHECK(big.status().code() == StatusCode::kLimitExceeded);

    // One BlockStored with 16 M + 1 token ids (all 0, one byte each), then a good event.
    std::string p =
        Hex("92cb3ff000000000000092"
            "96ab426c6f636b53746f7265649101c0"
            "dd01000001");
    p += std::string(kMaxTokensPerEvent + 1, '\0');
    p +=
        Hex("01c0"
            "91b0416c6c426c6f636b73436c6561726564");
    auto batch = Decode(p);
    REQUIRE_MESSAGE(batch.ok(), batch.status().ToString());
    REQUIRE(batch->errors.size() == 1);
    CHECK(batch->errors[0].status.code() == StatusCode::kLimitExceeded);
    CHECK(batch->events.size() == 1);
  }

  TEST_CASE("Token ids in every integer encoding, a float32 ts; a negative id fails at its byte") {
    // [1.0f32, [["BlockStored", [1], nil, [5, u8 128, u16 256, u32 65536, u64 7, i8 5, i16 6,
    //  i32 8, i64 9], 1, nil]]]: signed encodings of non-negative values are ints like any other.
    auto batch =
        Decode(Hex("92ca3f800000"
                   "91"
                   "96ab426c6f636b53746f726564"
                   "9101"
                   "c0"
                   "99"
                   "05"
                   "cc80"
                   "cd0100"
                   "ce00010000"
                   "cf0000000000000007"
                   "d005"
                   "d10006"
                   "d200000008"
                   "d30000000000000009"
                   "01"
                   "c0"));
    REQUIRE_MESSAGE(batch.ok(), batch.status().ToString());
    REQUIRE(batch->errors.empty());
    CHECK(batch->ts == 1.0);
    const auto& s = std::get<BlockStored>(batch->events[0]);
    CHECK(s.token_ids == std::vector<TokenId>{5, 128, 256, 65536, 7, 5, 6, 8, 9});
    CHECK(s.scope.block_size == 1u);

    // The same event with token ids [i8 -1]: the id's own byte (24) is named.
    auto bad =
        Decode(Hex("92ca3f800000"
                   "91"
                   "96ab426c6f636b53746f726564"
                   "9101"
                   "c0"
                   "91"
                   "d0ff"
                   "01"
                   "c0"));
    REQUIRE_MESSAGE(bad.ok(), bad.status().ToString());
    REQUIRE(bad->errors.size() == 1);
    CHECK(bad->errors[0].status.message() ==
          "event 0 (byte 24): token_ids: token id -1 at index 0 does not fit in 32 bits");
    // And a str where the third id should be (byte 27, after 05 and cc80).
    auto str =
        Decode(Hex("92ca3f800000"
                   "91"
                   "96ab426c6f636b53746f726564"
                   "9101"
                   "c0"
                   "93"
                   "05"
                   "cc80"
                   "a178"
                   "01"
                   "c0"));
    REQUIRE_MESSAGE(str.ok(), str.status().ToString());
    REQUIRE(str->errors.size() == 1);
    CHECK(str->errors[0].status.message() ==
          "event 0 (byte 27): token_ids: expected int token id, got str");
  }

  TEST_CASE("Hash normalisation: ints, negative ints, bin and strings") {
    // ["BlockRemoved", [-1, 0xcf 2^64-1, bin(1), bin(9 bytes), "0x10", "16", "text"]]
    auto batch =
        Decode(Hex("92cb3ff00000000000009192ac426c6f636b52656d6f7665649807"
                   "ff"
                   "cfffffffffffffffff"
                   "c40102"
                   "c409010203040506070809"
                   "a3307831"
                   "30"
                   "a23136"));
    REQUIRE_MESSAGE(batch.ok(), batch.status().ToString());
    REQUIRE(batch->errors.empty());
    const auto& r = std::get<BlockRemoved>(batch->events[0]);
    REQUIRE(r.block_hashes.size() == 8);
    CHECK(r.block_hashes[0].value == 7);
    CHECK(r.block_hashes[1].value == ~uint64_t{0});           // -1
    CHECK(r.block_hashes[2].value == ~uint64_t{0});           // 2^64 - 1
    CHECK(r.block_hashes[3].value == 2);                      // bin 02, zero-extended
    CHECK(r.block_hashes[4].value == 0x0203040506070809ull);  // the last 8 of 9 bytes
    CHECK(r.block_hashes[5].value == 1);                      // "0x1"
    CHECK(r.block_hashes[6].value == 48);                     // the int 0x30
    CHECK(r.block_hashes[7].value == 16);                     // "16"
  }

}  // TEST_SUITE

}  // namespace
}  // namespace kvindex
