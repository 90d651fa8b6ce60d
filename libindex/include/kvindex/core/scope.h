// Scope: the namespace a block's identity lives in. Nothing is shared across scopes.
//
// A scope is (tenant, model, LoRA, salt, block size, group). Rules (docs/index-rules.md "Scopes"):
//  - tenant: "default" when absent; tenant ids given as integers are spelled in decimal.
//  - LoRA: a non-empty name wins; else lora_id >= 0 becomes "id:<n>"; lora_id -1 or absent means
//    no LoRA (the empty string).
//  - salt: a per-request cache_salt carried on a prompt's first block (vLLM extra_keys, SGLang
//    metadata) wins; else the source's configured salt; children of a salted block inherit it.
//  - group: the KV-cache group (vLLM group_idx), 0 = full attention, the default.
//
// Thread safety: plain values.
#ifndef KVINDEX_CORE_SCOPE_H_
#define KVINDEX_CORE_SCOPE_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace kvindex {

inline constexpr std::string_view kDefaultTenant = "default";

struct Scope {
  std::string tenant{kDefaultTenant};
  std::string model;
  std::string lora;  // empty = no LoRA
  std::string salt;  // empty = unsalted
  uint32_t block_size = 0;
  uint32_t group = 0;

  friend bool operator==(const Scope&, const Scope&) = default;
  // "tenant/model[/lora=..][/salt=..]/bs=N[/group=G]", for logs and errors.
  std::string ToString() const;
};

// Returns the scope's LoRA name from what an event or query carried (rules above).
std::string LoraNameFrom(std::optional<std::string_view> lora_name, std::optional<int64_t> lora_id);

// Returns the salt of a chain's root block: `request_salt` when present and non-empty, else
// `source_salt`.
std::string_view EffectiveSalt(std::string_view source_salt,
                               std::optional<std::string_view> request_salt);

// Returns the tenant name: "default" for an absent or empty tenant.
std::string_view TenantOrDefault(std::optional<std::string_view> tenant);

}  // namespace kvindex

template <>
struct std::hash<kvindex::Scope> {
  size_t operator()(const kvindex::Scope& s) const noexcept;
};

#endif  // KVINDEX_CORE_SCOPE_H_
