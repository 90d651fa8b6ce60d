// A libFuzzer-compatible driver for ctest: replays every file of a corpus directory through
// LLVMFuzzerTestOneInput, then a fixed number of seeded mutations of them (bit flips, byte
// overwrites with interesting values, inserts, deletes, truncations, chunk duplication, splices).
// A target reports a property violation by aborting, so any crash fails the test. The corpus must
// not be empty: a driver with nothing to run would pass vacuously.
//
//   <target> CORPUS_DIR [MUTATIONS] [SEED]
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

using Bytes = std::vector<uint8_t>;

Bytes ReadAll(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void Mutate(Bytes& bytes, const std::vector<Bytes>& corpus, std::mt19937_64& rng) {
  static constexpr uint8_t kInteresting[] = {0x00, 0x01, 0x7f, 0x80, 0xff, 0xc0, 0xc1,
                                             0xcc, 0xcd, 0xce, 0xcf, 0xd0, 0xd3, 0xd9,
                                             0xda, 0xdb, 0xdc, 0xdd, 0xde, 0xdf, 0x90,
                                             0x9f, 0x80, 0x8f, 0xa0, 0xbf, 0xc4, 0xc6};
  auto pick = [&](size_t n) { return n == 0 ? size_t{0} : static_cast<size_t>(rng() % n); };
  const int rounds = 1 + static_cast<int>(rng() % 4);
  for (int r = 0; r < rounds; ++r) {
    switch (rng() % 8) {
      case 0:  // flip a bit
        if (!bytes.empty()) bytes[pick(bytes.size())] ^= static_cast<uint8_t>(1u << (rng() % 8));
        break;
      case 1:  // overwrite with an interesting byte (msgpack type markers, limits)
        if (!bytes.empty()) bytes[pick(bytes.size())] = kInteresting[pick(sizeof(kInteresting))];
        break;
      case 2:  // insert random bytes
        bytes.insert(bytes.begin() + static_cast<long>(pick(bytes.size() + 1)),
                     static_cast<size_t>(1 + rng() % 8), static_cast<uint8_t>(rng()));
        break;
      case 3:  // delete a range
        if (!bytes.empty()) {
          const size_t at = pick(bytes.size());
          const size_t n = std::min(bytes.size() - at, static_cast<size_t>(1 + rng() % 16));
          bytes.erase(bytes.begin() + static_cast<long>(at), bytes.begin() + static_cast<long>(at + n));
        }
        break;
      case 4:  // truncate
        bytes.resize(pick(bytes.size() + 1));
        break;
      case 5: {  // duplicate a chunk in place
        if (bytes.empty()) break;
        const size_t at = pick(bytes.size());
        const size_t n = std::min(bytes.size() - at, static_cast<size_t>(1 + rng() % 32));
        Bytes chunk(bytes.begin() + static_cast<long>(at), bytes.begin() + static_cast<long>(at + n));
        bytes.insert(bytes.begin() + static_cast<long>(pick(bytes.size() + 1)), chunk.begin(), chunk.end());
        break;
      }
      case 6: {  // splice the tail of another corpus entry
        const Bytes& other = corpus[pick(corpus.size())];
        if (other.empty()) break;
        bytes.resize(pick(bytes.size() + 1));
        bytes.insert(bytes.end(), other.begin() + static_cast<long>(pick(other.size())), other.end());
        break;
      }
      default:  // overwrite a 32-bit window with an extreme value (lengths, counts)
        if (bytes.size() >= 4) {
          const size_t at = pick(bytes.size() - 3);
          const uint32_t v = (rng() & 1) ? 0xffffffffu : static_cast<uint32_t>(rng());
          for (int i = 0; i < 4; ++i) bytes[at + static_cast<size_t>(i)] = static_cast<uint8_t>(v >> (8 * i));
        }
        break;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR [MUTATIONS] [SEED]\n", argv[0]);
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  const uint64_t mutations = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 10000;
  const uint64_t seed = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 1;

  std::vector<Bytes> corpus;
  std::error_code ec;
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.is_regular_file()) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& file : files) corpus.push_back(ReadAll(file));
  if (corpus.empty()) {
    std::fprintf(stderr, "fuzz driver: corpus %s is empty or missing\n", dir.c_str());
    return 1;
  }
  for (const Bytes& input : corpus) LLVMFuzzerTestOneInput(input.data(), input.size());
  // Empty input and a lone byte are always worth one try.
  LLVMFuzzerTestOneInput(nullptr, 0);

  std::mt19937_64 rng(seed);
  Bytes scratch;
  for (uint64_t i = 0; i < mutations; ++i) {
    scratch = corpus[static_cast<size_t>(rng() % corpus.size())];
    Mutate(scratch, corpus, rng);
    LLVMFuzzerTestOneInput(scratch.data(), scratch.size());
  }
  std::printf("fuzz driver: %zu corpus inputs and %llu mutations (seed %llu) ran without a crash\n",
              corpus.size(), static_cast<unsigned long long>(mutations),
              static_cast<unsigned long long>(seed));
  return 0;
}
