// SplitMix64: the simulator's pseudo-random generator (docs/simulation.md).
//
// Chosen because it is fully specified by a few lines of integer arithmetic (Steele, Lea, Flood,
// "Fast splittable pseudorandom number generators", OOPSLA 2014; the constants of Java's
// SplittableRandom), so a seed gives the same sequence on every platform and compiler, unlike the
// standard distributions, whose output is implementation-defined.
//
// Thread safety: a plain value; use one per thread.
#ifndef KVINDEX_SIM_PRNG_H_
#define KVINDEX_SIM_PRNG_H_

#include <cstdint>

namespace kvindex::sim {

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}

  // The next 64 pseudo-random bits.
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  // A value in [0, n) for n > 0: Next() % n. The modulo bias is below n / 2^64, negligible for
  // instance counts, and the rule is trivial to reproduce in any language.
  uint64_t Below(uint64_t n) { return Next() % n; }

 private:
  uint64_t state_;
};

}  // namespace kvindex::sim

#endif  // KVINDEX_SIM_PRNG_H_
