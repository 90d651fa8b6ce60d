#include "kvindex/core/scope.h"

#include <xxhash.h>

namespace kvindex {

std::string Scope::ToString() const {
  std::string out = tenant + "/" + model;
  if (!lora.empty()) out += "/lora=" + lora;
  if (!salt.empty()) out += "/salt=" + salt;
  out += "/bs=" + std::to_string(block_size);
  if (group != 0) out += "/group=" + std::to_string(group);
  return out;
}

std::string LoraNameFrom(std::optional<std::string_view> lora_name, std::optional<int64_t> lora_id) {
  if (lora_name && !lora_name->empty()) return std::string(*lora_name);
  if (lora_id && *lora_id >= 0) return "id:" + std::to_string(*lora_id);
  return std::string();
}

std::string_view EffectiveSalt(std::string_view source_salt,
                               std::optional<std::string_view> request_salt) {
  if (request_salt && !request_salt->empty()) return *request_salt;
  return source_salt;
}

std::string_view TenantOrDefault(std::optional<std::string_view> tenant) {
  if (tenant && !tenant->empty()) return *tenant;
  return kDefaultTenant;
}

}  // namespace kvindex

size_t std::hash<kvindex::Scope>::operator()(const kvindex::Scope& s) const noexcept {
  // One one-shot XXH3 per field, chained through the seed with the field's length mixed in, so
  // ("ab","c") and ("a","bc") differ. (The streaming XXH3 API costs ~10x more on inputs this
  // short: it was a visible share of a query's fixed cost and of live ingest.)
  uint64_t h = 0x9E3779B97F4A7C15ULL;
  for (const std::string* field : {&s.tenant, &s.model, &s.lora, &s.salt}) {
    h = XXH3_64bits_withSeed(field->data(), field->size(), h + field->size() * 0xC2B2AE3D27D4EB4FULL);
  }
  const uint64_t numbers = (static_cast<uint64_t>(s.block_size) << 32) | s.group;
  return static_cast<size_t>(XXH3_64bits_withSeed(&numbers, sizeof(numbers), h));
}
