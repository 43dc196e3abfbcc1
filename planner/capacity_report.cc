#include "planner/capacity_report.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "base/str_cat.h"
#include "planner/plan_report.h"

namespace tpserve {
namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;
constexpr char kFont[] = "DejaVu Sans, Arial, Helvetica, sans-serif";

// Segment colours, one per kind of line; the legend lists them in this order. The weights'
// roles are shaded by family: embedding and LM head purple, attention blue, MLP green.
struct ColorKey {
  const char* name;
  const char* color;
};
constexpr ColorKey kColors[] = {
    {"runtime reserve", "#7f7f7f"},  {"weights: embedding", "#54278f"},
    {"weights: q", "#08519c"},       {"weights: k", "#3182bd"},
    {"weights: v", "#6baed6"},       {"weights: o", "#9ecae1"},
    {"weights: norms", "#bcbddc"},   {"weights: gate", "#006d2c"},
    {"weights: up", "#31a354"},      {"weights: down", "#74c476"},
    {"weights: lm_head", "#9e9ac8"}, {"draft model weights", "#e377c2"},
    {"step buffers", "#ff7f0e"},     {"draft step buffers", "#f7b6d2"},
    {"communicator", "#d62728"},     {"KV cache pool", "#f2c12e"},
    {"unallocated", "#eeeeee"},      {"safety margin", "#8c564b"},
};
// One colour per compared layout (lines of the capacity chart, bars of the roofline chart).
// None is a segment's colour, so a screenshot's colours say which chart drew them.
constexpr const char* kSeriesColors[] = {"#1f77b4", "#e6550d", "#2ca02c", "#9467bd", "#17becf",
                                         "#bcbd22", "#d6616b", "#393b79", "#637939", "#843c39"};

const char* ColorOf(std::string_view key) {
  for (const ColorKey& c : kColors) {
    if (key == c.name) return c.color;
  }
  return "#000000";
}

const char* SeriesColor(size_t i) { return kSeriesColors[i % std::size(kSeriesColors)]; }

// The legend key of a weights role: the three norms share one.
std::string RoleKey(TensorRole role) {
  switch (role) {
    case TensorRole::kAttnNorm:
    case TensorRole::kFfnNorm:
    case TensorRole::kFinalNorm:
      return "weights: norms";
    default:
      return StrCat("weights: ", TensorRoleName(role));
  }
}

// 12345.678, 1 -> "12,345.7".
std::string Number(double value, int decimals) {
  const std::string text = absl::StrFormat("%.*f", decimals, std::fabs(value));
  const std::vector<std::string> parts = absl::StrSplit(text, '.');
  std::string out = WithThousands(std::stoll(parts[0]));
  if (parts.size() > 1) absl::StrAppend(&out, ".", parts[1]);
  return value < 0 && text.find_first_not_of("0.") != std::string::npos ? "-" + out : out;
}

std::string GiB(int64_t bytes) { return absl::StrFormat("%s GiB", Number(bytes / kGiB, 2)); }

std::string Seconds(double s) {
  return s < 1 ? absl::StrFormat("%s ms", Number(s * 1e3, 1))
               : absl::StrFormat("%s s", Number(s, 2));
}

// "1K" for 1024, "128K", "1M"; other values with separators.
std::string ContextLabel(int64_t tokens) {
  if (tokens >= (1 << 20) && tokens % (1 << 20) == 0) return StrCat(tokens >> 20, "M");
  if (tokens >= 1024 && tokens % 1024 == 0) return StrCat(tokens / 1024, "K");
  return WithThousands(tokens);
}

// A round axis step (1, 2 or 5 times a power of ten) giving at most `max_ticks` ticks to `top`.
double NiceStep(double top, int max_ticks) {
  const double raw = top / max_ticks;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * power >= raw) return m * power;
  }
  return 10 * power;
}

std::string Text(double x, double y, std::string_view text, std::string_view attributes = "") {
  return absl::StrFormat("<text x=\"%.2f\" y=\"%.2f\"%s%s>%s</text>\n", x, y,
                         attributes.empty() ? "" : " ", std::string(attributes), XmlEscape(text));
}

// <line ATTRIBUTES x1=.. y1=.. x2=.. y2=../>, with a <title> child (a tooltip) when given.
std::string SvgLine(double x1, double y1, double x2, double y2, std::string_view attributes,
                    std::string_view title = "") {
  std::string out = absl::StrFormat("<line %s x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"",
                                    std::string(attributes), x1, y1, x2, y2);
  return title.empty() ? out + "/>\n"
                       : StrCat(out, "><title>", XmlEscape(title), "</title></line>\n");
}

std::string SvgOpen(double width, double height, std::string_view title) {
  return absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
      "viewBox=\"0 0 %.0f %.0f\" font-family=\"%s\" font-size=\"12\">\n<title>%s</title>\n"
      "<rect class=\"background\" x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" "
      "fill=\"#ffffff\"/>\n",
      width, height, width, height, kFont, XmlEscape(title), width, height);
}

// "405b, 8,192 tokens x 10 users" style subject line shared by the charts.
std::string Subject(const CapacityReport& report) {
  if (report.layouts.empty()) return "no layouts";
  const PlanInputs& in = report.layouts[0].plan.inputs;
  return absl::StrFormat("%s on %s: %s tokens of context x %d users", in.model.name, in.device.name,
                         WithThousands(in.max_context_tokens), in.target_concurrent_sequences);
}

std::string Layout(const MemoryPlan& plan) {
  const PlanInputs& in = plan.inputs;
  return in.pp > 1 ? absl::StrFormat("tp=%d, pp=%d", in.tp, in.pp)
                   : absl::StrFormat("tp=%d", in.tp);
}

// --- memory chart ---------------------------------------------------------------------------

// `bars`: each layout's segments.
std::string MemoryLegend(const std::vector<std::vector<MemorySegment>>& bars, double x, double y) {
  // One entry per colour drawn (the three norms share one).
  std::vector<std::string> drawn;
  for (const std::vector<MemorySegment>& bar : bars) {
    for (const MemorySegment& s : bar) drawn.push_back(s.color);
  }
  auto has = [&](std::string_view color) {
    return std::find(drawn.begin(), drawn.end(), color) != drawn.end();
  };
  std::string out = "<g class=\"legend\">\n";
  for (const ColorKey& c : kColors) {
    if (!has(c.color)) continue;
    absl::StrAppendFormat(&out,
                          "<rect x=\"%.2f\" y=\"%.2f\" width=\"14\" height=\"14\" fill=\"%s\" "
                          "stroke=\"#999999\" stroke-width=\"0.5\"/>\n",
                          x, y - 11, c.color);
    out += Text(x + 20, y, c.name);
    y += 19;
  }
  out += SvgLine(x, y - 4, x + 14, y - 4,
                 "stroke=\"#000000\" stroke-width=\"2\" stroke-dasharray=\"6 3\"");
  out += Text(x + 20, y, "device memory");
  y += 19;
  out += SvgLine(x, y - 4, x + 14, y - 4, "stroke=\"#c00000\" stroke-width=\"3\"");
  out += Text(x + 20, y, "what the target needs");
  return out + "</g>\n";
}

}  // namespace

std::string XmlEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

const StageMemory& BindingStage(const MemoryPlan& plan) {
  const StageMemory* binding = &plan.stages[0];
  for (const StageMemory& m : plan.stages) {
    if (m.available_for_kv_bytes < binding->available_for_kv_bytes) binding = &m;
  }
  return *binding;
}

std::vector<MemorySegment> MemorySegments(const MemoryPlan& plan) {
  const StageMemory& m = BindingStage(plan);
  std::vector<MemorySegment> out;
  auto add = [&](std::string name, std::string_view key, int64_t bytes) {
    if (bytes > 0) out.push_back({std::move(name), ColorOf(key), bytes});
  };
  add("runtime reserve", "runtime reserve", m.runtime_reserve_bytes);
  for (const RoleShard& r : plan.sharding.stages[m.stage].roles) {
    add(StrCat("weights: ", TensorRoleName(r.role)), RoleKey(r.role), r.bytes_per_rank);
  }
  add("draft model weights", "draft model weights", m.draft_weight_bytes);
  add("step buffers", "step buffers", m.activations.Total());
  add("draft step buffers", "draft step buffers", m.draft_activations.Total());
  add("communicator", "communicator", m.comm.Total());
  add("KV cache pool", "KV cache pool", m.kv_pool_bytes);
  add("unallocated", "unallocated", m.unallocated_bytes);
  add("safety margin", "safety margin", m.safety_bytes);
  return out;
}

int64_t TargetNeedBytes(const StageMemory& m) { return m.FixedBytes() + m.kv_target_bytes; }

absl::StatusOr<CapacityCurve> PlanCapacityCurve(const PlanInputs& inputs, std::string label) {
  CapacityCurve curve{std::move(label), {}};
  const int64_t model_max = inputs.model.max_context_tokens > 0 ? inputs.model.max_context_tokens
                                                                : inputs.max_context_tokens;
  std::vector<int64_t> contexts;
  for (int64_t c = std::min<int64_t>(1024, model_max); c < model_max; c *= 2) {
    contexts.push_back(c);
  }
  contexts.push_back(model_max);
  contexts.push_back(inputs.max_context_tokens);
  std::sort(contexts.begin(), contexts.end());
  contexts.erase(std::unique(contexts.begin(), contexts.end()), contexts.end());
  for (int64_t c : contexts) {
    if (c < inputs.kv_block_size_tokens) continue;
    PlanInputs at = inputs;
    at.max_context_tokens = c;
    TP_ASSIGN_OR_RETURN(MemoryPlan plan, PlanMemory(at));
    curve.points.push_back({c, plan.max_concurrent_sequences});
  }
  return curve;
}

std::string RenderMemorySvg(const CapacityReport& report) {
  const double left = 86, top = 84, plot_h = 440, bar_w = 84, gap = 64, bottom = 74;
  const size_t n = report.layouts.size();
  const double plot_right = left + n * (bar_w + gap);
  const double legend_x = plot_right + 24;
  const double width = legend_x + 230;
  const double height = std::max(top + plot_h + bottom, top + 19.0 * (std::size(kColors) + 3));
  std::vector<std::vector<MemorySegment>> bars;
  double y_max = 1;
  for (const ReportLayout& l : report.layouts) {
    const StageMemory& m = BindingStage(l.plan);
    bars.push_back(MemorySegments(l.plan));
    int64_t stacked = 0;
    for (const MemorySegment& s : bars.back()) stacked += s.bytes;
    y_max = std::max({y_max, static_cast<double>(m.device_bytes), static_cast<double>(stacked),
                      static_cast<double>(TargetNeedBytes(m))});
  }
  y_max *= 1.06;
  const double scale = plot_h / y_max;  // pixels per byte, every bar
  const double baseline = top + plot_h;
  auto y_of = [&](double bytes) { return baseline - bytes * scale; };

  std::string out = SvgOpen(width, height, StrCat("Memory per GPU: ", Subject(report)));
  out +=
      Text(left, 24, "Memory per GPU, by what it holds", "font-size=\"15\" font-weight=\"bold\"");
  out += Text(left, 44, Subject(report), "fill=\"#444444\"");
  out += Text(left, 60, "One rank of each layout (the stage with the least room for KV), to scale.",
              "fill=\"#444444\"");
  // Axis: round GiB steps.
  const double step = NiceStep(y_max / kGiB, 8);
  out += "<g class=\"axis\">\n";
  for (double v = 0; v * kGiB <= y_max; v += step) {
    const double y = y_of(v * kGiB);
    out += SvgLine(left, y, plot_right, y, "stroke=\"#e0e0e0\"");
    out +=
        Text(left - 8, y + 4, StrCat(Number(v, step < 1 ? 1 : 0), " GiB"), "text-anchor=\"end\"");
  }
  out += SvgLine(left, baseline, plot_right, baseline, "stroke=\"#000000\"") + "</g>\n";

  for (size_t i = 0; i < n; ++i) {
    const MemoryPlan& plan = report.layouts[i].plan;
    const StageMemory& m = BindingStage(plan);
    const double x = left + gap / 2 + i * (bar_w + gap);
    absl::StrAppendFormat(&out,
                          "<g class=\"bar\" data-layout=\"%s\" data-stage=\"%d\" "
                          "data-baseline=\"%.2f\" data-device-bytes=\"%d\">\n",
                          XmlEscape(report.layouts[i].label), m.stage, baseline, m.device_bytes);
    double stacked = 0;
    for (const MemorySegment& s : bars[i]) {
      const double h = s.bytes * scale;
      stacked += s.bytes;
      absl::StrAppendFormat(
          &out,
          "<rect class=\"segment\" data-segment=\"%s\" data-bytes=\"%d\" x=\"%.2f\" y=\"%.4f\" "
          "width=\"%.2f\" height=\"%.4f\" fill=\"%s\"><title>%s: %s B (%s)</title></rect>\n",
          XmlEscape(s.name), s.bytes, x, y_of(stacked), bar_w, h, s.color, XmlEscape(s.name),
          WithThousands(s.bytes), GiB(s.bytes));
    }
    // Labels inside the bar for the parts large enough to carry one.
    if (m.kv_pool_bytes * scale >= 30) {
      const double kv_top =
          y_of(stacked - m.safety_bytes - std::max<int64_t>(m.unallocated_bytes, 0));
      const double kv_mid = kv_top + m.kv_pool_bytes * scale / 2;
      out += Text(x + bar_w / 2, kv_mid - 2, "KV", "text-anchor=\"middle\" font-size=\"11\"");
      out += Text(x + bar_w / 2, kv_mid + 11, GiB(m.kv_pool_bytes),
                  "text-anchor=\"middle\" font-size=\"11\"");
    }
    const double device_y = y_of(m.device_bytes);
    out += SvgLine(x - 10, device_y, x + bar_w + 10, device_y,
                   absl::StrFormat("class=\"capacity\" data-bytes=\"%d\" stroke=\"#000000\" "
                                   "stroke-width=\"2\" stroke-dasharray=\"6 3\"",
                                   m.device_bytes),
                   StrCat("device memory: ", WithThousands(m.device_bytes), " B"));
    out += Text(x + bar_w / 2, device_y - 6, StrCat(GiB(m.device_bytes), " device"),
                "text-anchor=\"middle\" font-size=\"10\"");
    const int64_t need = TargetNeedBytes(m);
    const double need_y = y_of(need);
    out += SvgLine(
        x + bar_w - 4, need_y, x + bar_w + 14, need_y,
        absl::StrFormat("class=\"target\" data-bytes=\"%d\" stroke=\"#c00000\" stroke-width=\"3\"",
                        need),
        absl::StrFormat(
            "the target (%d x %s tokens) needs %s B (%s)", plan.inputs.target_concurrent_sequences,
            WithThousands(plan.inputs.max_context_tokens), WithThousands(need), GiB(need)));
    out += Text(x + bar_w / 2, baseline + 18,
                absl::StrFormat("%d \u00d7 %s", plan.num_ranks, plan.inputs.device.name),
                "text-anchor=\"middle\" font-weight=\"bold\"");
    out +=
        Text(x + bar_w / 2, baseline + 34, StrCat(Layout(plan), ", ", plan.inputs.weights.preset),
             "text-anchor=\"middle\" font-size=\"11\"");
    out += Text(x + bar_w / 2, baseline + 50,
                plan.meets_target ? absl::StrFormat("fits: %d seqs", plan.max_concurrent_sequences)
                                  : std::string("does not fit"),
                absl::StrFormat("text-anchor=\"middle\" font-size=\"11\" fill=\"%s\"",
                                plan.meets_target ? "#006d2c" : "#c00000"));
    if (plan.stages.size() > 1) {
      const StageShards& shards = plan.sharding.stages[m.stage];
      out += Text(x + bar_w / 2, baseline + 64,
                  absl::StrFormat("stage %d: layers %d-%d", m.stage, shards.first_layer,
                                  shards.first_layer + shards.num_layers - 1),
                  "text-anchor=\"middle\" font-size=\"10\"");
    }
    out += "</g>\n";
  }
  out += MemoryLegend(bars, legend_x, top + 10);
  return out + "</svg>\n";
}

// --- capacity curve -------------------------------------------------------------------------

std::string RenderCapacitySvg(const CapacityReport& report) {
  const double left = 86, top = 84, plot_w = 520, plot_h = 320, legend_w = 260;
  const double zero_row = top + plot_h + 26;  // where "0 sequences" is drawn (log scale)
  const double width = left + plot_w + 24 + legend_w, height = zero_row + 56;
  int64_t min_ctx = 0, max_ctx = 0, max_seqs = 1;
  for (const CapacityCurve& c : report.curves) {
    for (const CapacityPoint& p : c.points) {
      min_ctx = min_ctx == 0 ? p.context_tokens : std::min(min_ctx, p.context_tokens);
      max_ctx = std::max(max_ctx, p.context_tokens);
      max_seqs = std::max(max_seqs, p.max_sequences);
    }
  }
  const PlanInputs* target = report.layouts.empty() ? nullptr : &report.layouts[0].plan.inputs;
  if (target != nullptr) max_seqs = std::max(max_seqs, target->target_concurrent_sequences);
  if (min_ctx == 0) min_ctx = max_ctx = 1024;
  const double lx0 = std::log2(static_cast<double>(min_ctx));
  const double lx1 = std::max(lx0 + 1, std::log2(static_cast<double>(max_ctx)));
  const double decades = std::max(1.0, std::ceil(std::log10(static_cast<double>(max_seqs)) + 0.05));
  auto x_of = [&](int64_t ctx) {
    return left + (std::log2(static_cast<double>(ctx)) - lx0) / (lx1 - lx0) * plot_w;
  };
  auto y_of = [&](int64_t seqs) {
    if (seqs <= 0) return zero_row;
    return top + plot_h - std::log10(static_cast<double>(seqs)) / decades * plot_h;
  };

  std::string out = SvgOpen(width, height, StrCat("Capacity: ", Subject(report)));
  out += Text(left, 24, "Concurrent sequences that fit, by context",
              "font-size=\"15\" font-weight=\"bold\"");
  out += Text(left, 44, Subject(report), "fill=\"#444444\"");
  out += Text(left, 60, "Each point re-plans the layout at that context (log scales; 0 = none).",
              "fill=\"#444444\"");
  out += "<g class=\"axis\">\n";
  for (int d = 0; d <= decades; ++d) {
    for (int m : {1, 2, 5}) {
      const double v = m * std::pow(10.0, d);
      if (std::log10(v) > decades + 1e-9) continue;
      const double y = top + plot_h - std::log10(v) / decades * plot_h;
      out +=
          SvgLine(left, y, left + plot_w, y, m == 1 ? "stroke=\"#d0d0d0\"" : "stroke=\"#f0f0f0\"");
      out += Text(left - 8, y + 4, WithThousands(static_cast<int64_t>(v)), "text-anchor=\"end\"");
    }
  }
  out += Text(left - 8, zero_row + 4, "0", "text-anchor=\"end\"");
  for (int64_t c = int64_t{1} << static_cast<int>(std::ceil(lx0)); c <= max_ctx; c *= 2) {
    const double x = x_of(c);
    out += SvgLine(x, top, x, top + plot_h, "stroke=\"#e8e8e8\"");
    out += Text(x, zero_row + 22, ContextLabel(c), "text-anchor=\"middle\"");
  }
  out += SvgLine(left, top + plot_h, left + plot_w, top + plot_h, "stroke=\"#000000\"");
  out += Text(left + plot_w / 2, zero_row + 42, "context per sequence (tokens)",
              "text-anchor=\"middle\"");
  out += Text(20, top + plot_h / 2, "concurrent sequences",
              absl::StrFormat("text-anchor=\"middle\" transform=\"rotate(-90 20 %.2f)\"",
                              top + plot_h / 2));
  out += "</g>\n";

  for (size_t i = 0; i < report.curves.size(); ++i) {
    const CapacityCurve& curve = report.curves[i];
    const char* color = SeriesColor(i);
    absl::StrAppendFormat(&out, "<g class=\"series\" data-label=\"%s\">\n", XmlEscape(curve.label));
    std::string points;
    for (const CapacityPoint& p : curve.points) {
      absl::StrAppendFormat(&points, "%.2f,%.2f ", x_of(p.context_tokens), y_of(p.max_sequences));
    }
    absl::StrAppendFormat(&out,
                          "<polyline points=\"%s\" fill=\"none\" stroke=\"%s\" "
                          "stroke-width=\"2\"/>\n",
                          points, color);
    for (const CapacityPoint& p : curve.points) {
      absl::StrAppendFormat(
          &out,
          "<circle class=\"point\" data-context=\"%d\" data-sequences=\"%d\" cx=\"%.2f\" "
          "cy=\"%.2f\" r=\"3.5\" fill=\"%s\"><title>%s: %s sequences of %s tokens</title>"
          "</circle>\n",
          p.context_tokens, p.max_sequences, x_of(p.context_tokens), y_of(p.max_sequences),
          p.max_sequences > 0 ? color : "#ffffff\" stroke=\"" + std::string(color),
          XmlEscape(curve.label), WithThousands(p.max_sequences), WithThousands(p.context_tokens));
    }
    const double ly = top + 10 + i * 20;
    out += SvgLine(left + plot_w + 24, ly - 4, left + plot_w + 44, ly - 4,
                   absl::StrFormat("stroke=\"%s\" stroke-width=\"2\"", color));
    out += Text(left + plot_w + 50, ly, curve.label);
    out += "</g>\n";
  }
  if (target != nullptr) {
    const double x = x_of(target->max_context_tokens);
    const double y = y_of(target->target_concurrent_sequences);
    absl::StrAppendFormat(&out, "<g class=\"target\" data-context=\"%d\" data-sequences=\"%d\">\n",
                          target->max_context_tokens, target->target_concurrent_sequences);
    const char* pen = "stroke=\"#000000\" stroke-width=\"2\"";
    out += SvgLine(x - 7, y - 7, x + 7, y + 7, pen) + SvgLine(x - 7, y + 7, x + 7, y - 7, pen);
    out += Text(x + 10, y - 8,
                absl::StrFormat("target: %d \u00d7 %s tokens", target->target_concurrent_sequences,
                                WithThousands(target->max_context_tokens)),
                "font-weight=\"bold\"");
    out += "</g>\n";
  }
  return out + "</svg>\n";
}

// --- roofline -------------------------------------------------------------------------------

std::string RenderRooflineSvg(const CapacityReport& report) {
  const double label_w = 330, bar_max = 380, row = 24, width = label_w + bar_max + 150;
  struct Panel {
    const char* title;
    double (*value)(const Roofline&);
    std::string (*format)(double);
  };
  const Panel panels[] = {
      {"decode tokens/s per user", [](const Roofline& r) { return r.tokens_per_s_per_user; },
       [](double v) { return StrCat(Number(v, 1), " tok/s"); }},
      {"decode tokens/s, all users together",
       [](const Roofline& r) { return r.tokens_per_s_aggregate; },
       [](double v) { return StrCat(Number(v, 1), " tok/s"); }},
      {"time to first token (one prompt alone)", [](const Roofline& r) { return r.prefill_s; },
       [](double v) { return Seconds(v); }},
  };
  const size_t n = report.layouts.size();
  const double panel_h = 34 + n * row + 10;
  const double height = 56 + std::size(panels) * panel_h;
  std::string out = SvgOpen(width, height, StrCat("Roofline speed: ", Subject(report)));
  out += Text(10, 24, "Roofline speed at the target", "font-size=\"15\" font-weight=\"bold\"");
  out += Text(10, 42, Subject(report), "fill=\"#444444\"");
  double y = 56;
  for (const Panel& p : panels) {
    out += Text(10, y + 16, p.title, "font-weight=\"bold\"");
    double max_value = 0;
    for (const ReportLayout& l : report.layouts)
      max_value = std::max(max_value, p.value(l.roofline));
    for (size_t i = 0; i < n; ++i) {
      const ReportLayout& l = report.layouts[i];
      const double v = p.value(l.roofline);
      const double len = max_value > 0 ? v / max_value * bar_max : 0;
      const double by = y + 28 + i * row;
      out += Text(10, by + 13, StrCat(l.label, l.plan.meets_target ? "" : " (does not fit)"),
                  "font-size=\"11\"");
      absl::StrAppendFormat(&out,
                            "<rect class=\"speed\" data-value=\"%.6g\" x=\"%.2f\" y=\"%.2f\" "
                            "width=\"%.2f\" height=\"%.2f\" fill=\"%s\" fill-opacity=\"%s\"/>\n",
                            v, label_w, by, std::max(len, 1.0), row - 6, SeriesColor(i),
                            l.plan.meets_target ? "1" : "0.35");
      out += Text(label_w + std::max(len, 1.0) + 6, by + 13, p.format(v), "font-size=\"11\"");
    }
    y += panel_h;
  }
  return out + "</svg>\n";
}

// --- the page -------------------------------------------------------------------------------

namespace {

std::string Row(std::string_view name, const std::vector<std::string>& cells) {
  std::string out = StrCat("<tr><th>", XmlEscape(name), "</th>");
  for (const std::string& c : cells) absl::StrAppend(&out, "<td>", XmlEscape(c), "</td>");
  return out + "</tr>\n";
}

template <typename F>
std::vector<std::string> Cells(const CapacityReport& report, F f) {
  std::vector<std::string> cells;
  for (const ReportLayout& l : report.layouts) cells.push_back(f(l));
  return cells;
}

std::string InputsTable(const CapacityReport& report) {
  std::string out = "<table class=\"inputs\">\n<tr><th></th>";
  for (const ReportLayout& l : report.layouts)
    absl::StrAppend(&out, "<th>", XmlEscape(l.label), "</th>");
  out += "</tr>\n";
  auto in = [](const ReportLayout& l) -> const PlanInputs& { return l.plan.inputs; };
  out += Row("model", Cells(report, [&](const ReportLayout& l) {
               const ModelSpec& c = in(l).model;
               return absl::StrFormat(
                   "%s: %d layers, hidden %s, %d heads (%d KV) of %d, vocab %s, context %s", c.name,
                   c.num_layers, WithThousands(c.hidden_size), c.num_heads, c.num_kv_heads,
                   c.head_dim, WithThousands(c.vocab_size), WithThousands(c.max_context_tokens));
             }));
  out += Row("weights", Cells(report, [&](const ReportLayout& l) { return in(l).weights.preset; }));
  out += Row("KV cache, activations", Cells(report, [&](const ReportLayout& l) {
               return StrCat(TensorFormatName(TensorFormat::Of(in(l).kv_cache_dtype)), ", ",
                             TensorFormatName(TensorFormat::Of(in(l).activation_dtype)));
             }));
  out += Row("devices", Cells(report, [&](const ReportLayout& l) {
               return absl::StrFormat("%d x %s (tp=%d, pp=%d)", l.plan.num_ranks, in(l).device.name,
                                      in(l).tp, in(l).pp);
             }));
  out += Row("device", Cells(report, [&](const ReportLayout& l) {
               const GpuSpec& d = in(l).device;
               return absl::StrFormat("%s: %s B (%s), %s GB/s", d.description,
                                      WithThousands(d.memory_bytes), GiB(d.memory_bytes),
                                      Number(d.memory_bandwidth_bytes_per_s / 1e9, 0));
             }));
  out += Row("reserve, safety margin", Cells(report, [&](const ReportLayout& l) {
               const StageMemory& m = BindingStage(l.plan);
               return absl::StrFormat(
                   "%s B, %s%% after the reserve", WithThousands(m.runtime_reserve_bytes),
                   Number(100 * in(l).safety_fraction.value_or(in(l).device.safety_fraction), 1));
             }));
  out += Row("target", Cells(report, [&](const ReportLayout& l) {
               return absl::StrFormat("%d sequences x %s tokens", in(l).target_concurrent_sequences,
                                      WithThousands(in(l).max_context_tokens));
             }));
  out += Row("per step", Cells(report, [&](const ReportLayout& l) {
               return absl::StrFormat("%s tokens, %d sequences; KV blocks of %d tokens%s",
                                      WithThousands(in(l).max_tokens_per_step),
                                      in(l).max_sequences_per_step, in(l).kv_block_size_tokens,
                                      in(l).deterministic_tp ? "; deterministic TP" : "");
             }));
  if (!report.layouts.empty() && report.layouts[0].plan.inputs.draft.has_value()) {
    out += Row("draft model", Cells(report, [&](const ReportLayout& l) {
                 return in(l).draft.has_value()
                            ? StrCat(in(l).draft->model.name, " as ", in(l).draft->weights.preset)
                            : std::string("none");
               }));
  }
  out += Row("KV pool", Cells(report, [&](const ReportLayout& l) {
               return absl::StrFormat(
                   "%s blocks = %s tokens = %d sequences", WithThousands(l.plan.num_kv_blocks),
                   WithThousands(l.plan.kv_token_capacity), l.plan.max_concurrent_sequences);
             }));
  return out + "</table>\n";
}

std::string AssumptionList(const CapacityReport& report) {
  std::string out = "<ul class=\"assumptions\">\n";
  for (const ReportLayout& l : report.layouts) {
    const Roofline& r = l.roofline;
    absl::StrAppendFormat(
        &out,
        "<li><b>%s</b>: memory %s GB/s at decode efficiency %s; peak %s TFLOP/s at prefill "
        "efficiency %s; link %s, %s GB/s per direction, %s us per collective; decode of %d "
        "users at %s tokens of context: %s ms per step (%s GB weights + %s GB KV read per "
        "rank, %d collectives); prefill of one %s-token prompt.</li>\n",
        XmlEscape(l.label), Number(r.memory_bandwidth_bytes_per_s / 1e9, 0),
        Number(r.decode_efficiency, 2), Number(r.peak_flops / 1e12, 1),
        Number(r.prefill_efficiency, 2), XmlEscape(l.plan.inputs.device.interconnect.name),
        Number(r.link_bandwidth_bytes_per_s / 1e9, 0), Number(r.link_latency_s * 1e6, 1),
        r.concurrency, WithThousands(r.context_tokens), Number(r.decode_step_s * 1e3, 3),
        Number(r.weight_bytes_read / 1e9, 2), Number(r.kv_bytes_read / 1e9, 2),
        r.collectives_per_step, WithThousands(r.prompt_tokens));
  }
  return out + "</ul>\n";
}

}  // namespace

std::string RenderCapacityReportHtml(const CapacityReport& report) {
  std::string out = absl::StrFormat(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<title>tpserve capacity report: %s</title>\n<style>\n"
      "body { font-family: %s; margin: 24px 32px; color: #202020; max-width: 1400px; }\n"
      "h1 { font-size: 22px; } h2 { font-size: 17px; margin-top: 28px; }\n"
      "pre, code { font-family: DejaVu Sans Mono, monospace; font-size: 12px; }\n"
      "pre.verdict { background: #f4f4f4; padding: 6px 10px; white-space: pre-wrap; }\n"
      "pre.fits { border-left: 4px solid #2ca02c; } pre.over { border-left: 4px solid #d62728; }\n"
      "table.inputs { border-collapse: collapse; font-size: 13px; }\n"
      "table.inputs th, table.inputs td { border: 1px solid #d0d0d0; padding: 3px 8px; "
      "text-align: left; vertical-align: top; }\n"
      "ul.assumptions { font-size: 13px; }\n"
      "</style>\n</head>\n<body>\n",
      XmlEscape(Subject(report)), kFont);
  absl::StrAppendFormat(&out, "<h1>Capacity report: %s</h1>\n", XmlEscape(Subject(report)));
  absl::StrAppendFormat(&out,
                        "<p class=\"meta\">tpserve %s. Every figure here is the engine's own "
                        "memory plan (the one it sizes its KV cache from).<br>Command: "
                        "<code class=\"command\">%s</code></p>\n",
                        XmlEscape(report.version), XmlEscape(report.command_line));
  out += "<h2>Verdict</h2>\n";
  for (const ReportLayout& l : report.layouts) {
    absl::StrAppendFormat(&out, "<p><b>%s</b></p>\n<pre class=\"verdict %s\">VERDICT   %s</pre>\n",
                          XmlEscape(l.label), l.plan.meets_target ? "fits" : "over",
                          XmlEscape(l.plan.verdict));
  }
  out += "<h2>Plan inputs</h2>\n" + InputsTable(report);
  out += "<h2>Memory per GPU</h2>\n" + RenderMemorySvg(report);
  out += "<h2>Capacity as context grows</h2>\n" + RenderCapacitySvg(report);
  out += "<h2>Speed (roofline)</h2>\n" + RenderRooflineSvg(report);
  out += "<p>Assumptions:</p>\n" + AssumptionList(report);
  absl::StrAppendFormat(&out,
                        "<h2>The text report</h2>\n<details>\n<summary>vram's output for "
                        "the same command</summary>\n<pre class=\"text-report\">%s</pre>\n"
                        "</details>\n</body>\n</html>\n",
                        XmlEscape(report.text_report));
  return out;
}

}  // namespace tpserve
