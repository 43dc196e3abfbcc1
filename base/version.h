// The tpserve version, stated where a result must say what produced it (the capacity report).
// Bumped with each capability that lands: the minor number is the last issue resolved.
#ifndef TPSERVE_BASE_VERSION_H_
#define TPSERVE_BASE_VERSION_H_

namespace tpserve {

inline constexpr char kTpserveVersion[] = "0.23.0";

}  // namespace tpserve

#endif  // TPSERVE_BASE_VERSION_H_
