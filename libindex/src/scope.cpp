#include "kvindex/scope.h"

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack
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
  // Length-prefixed fields, so ("ab","c") and ("a","bc") differ.
  XXH3_state_t state;
  XXH3_64bits_reset(&state);
  for (const std::string* field : {&s.tenant, &s.model, &s.lora, &s.salt}) {
    const uint64_t length = field->size();
    XXH3_64bits_update(&state, &length, sizeof(length));
    XXH3_64bits_update(&state, field->data(), field->size());
  }
  const uint32_t numbers[2] = {s.block_size, s.group};
  XXH3_64bits_update(&state, numbers, sizeof(numbers));
  return static_cast<size_t>(XXH3_64bits_digest(&state));
}
