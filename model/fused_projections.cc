#include "model/fused_projections.h"

#include "base/str_cat.h"
#include "formats/tensor_format.h"

namespace tpserve {
namespace {

std::vector<TensorRole> RolesOf(FusedGroup group) {
  if (group == FusedGroup::kQkv) return {TensorRole::kQ, TensorRole::kK, TensorRole::kV};
  return {TensorRole::kGate, TensorRole::kUp};
}

// Whether `layer` has the group's projections as separate column-parallel matrices.
bool LayerHasGroup(const ModelSpec& c, int64_t layer, FusedGroup group) {
  if (group == FusedGroup::kQkv) return !c.mla.enabled();
  return !c.IsMoeLayer(layer);
}

// Why parts of one format and these rows cannot stack (""): a part but the last ending inside
// an output scale block, or a part off the backend's row tile.
std::string RowsProblem(const FusedLayout& l, const TensorFormat& format, int64_t row_multiple) {
  const int64_t block = OutputBlockRows(format);
  for (size_t i = 0; i < l.parts.size(); ++i) {
    const FusedPart& p = l.parts[i];
    if (i + 1 < l.parts.size() && p.rows % block != 0) {
      return StrCat(TensorRoleName(p.role), "'s ", p.rows, " rows end inside a ", block,
                    "-row scale tile of ", TensorFormatName(format), ", which ",
                    TensorRoleName(l.parts[i + 1].role), "'s first rows would share");
    }
    if (p.rows % row_multiple != 0) {
      return StrCat(TensorRoleName(p.role), "'s ", p.rows, " rows are not a multiple of the ",
                    "backend's ", row_multiple, "-row tile, so the stack could be held in ",
                    "another form than its parts");
    }
  }
  return "";
}

}  // namespace

std::string_view FusedGroupName(FusedGroup group) {
  return group == FusedGroup::kQkv ? "q/k/v" : "gate/up";
}

FusedLayout FusedLayoutFor(const ModelSpec& config, const ShardingPlan& plan,
                           const WeightFormats& formats, int64_t layer, FusedGroup group,
                           const Backend::ProjectionFusion& fusion) {
  FusedLayout l;
  l.group = group;
  if (!LayerHasGroup(config, layer, group)) return l;
  for (TensorRole role : RolesOf(group)) {
    const TensorSlice s = plan.Slice(role);
    l.parts.push_back({role, l.rows, s.num_rows});
    l.rows += s.num_rows;
    l.cols = s.num_cols;
  }
  if (!fusion.fuses) {
    l.why_not = "the backend multiplies them apart";
    return l;
  }
  l.fallback = true;
  const TensorFormat& first = formats.At(l.parts[0].role, layer);
  for (const FusedPart& p : l.parts) {
    const TensorFormat& f = formats.At(p.role, layer);
    if (!(f == first)) {
      l.why_not = StrCat(TensorRoleName(p.role), " is held as ", TensorFormatName(f), ", ",
                         TensorRoleName(l.parts[0].role), " as ", TensorFormatName(first));
      return l;
    }
  }
  l.why_not = RowsProblem(l, first, fusion.part_row_multiple);
  l.fused = l.why_not.empty();
  l.fallback = !l.fused;
  return l;
}

std::optional<std::string> FusionFallbackLog::Add(const FusedLayout& layout, int64_t layer,
                                                  std::string_view backend) {
  if (!layout.fallback || !said_.insert({layout.group, layout.why_not}).second) {
    return std::nullopt;
  }
  return StrCat(FusedGroupName(layout.group), " of layer ", layer, " stays ", layout.parts.size(),
                " GEMMs (", backend, "): ", layout.why_not);
}

}  // namespace tpserve
