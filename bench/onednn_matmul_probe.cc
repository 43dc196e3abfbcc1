// oneDNN's matmul (Debian's libdnnl 2.6) on the shapes of //kernels/cpu:matmul_bench, for issue
// 39's library comparison: y[m, n] = x[m, k] W[n, k]^T for m = 1 .. 16, the weights reordered
// once into the layout oneDNN picks (format_tag::any, as a serving engine would prepack them).
// Formats: f32 (f32 x f32), bf16 (bf16 activations x bf16 weights, f32 out: the activations are
// rounded to bf16, which ours never does) and int8 (u8 activations x s8 weights, s32 out, what a
// Q8_0-like path would reduce to, without the block scales). Best of 7 timed runs of at least
// 0.2 s each; prints the implementation oneDNN chose, and whether row 0's outputs among m rows
// are bit for bit those of row 0 alone (m = 1): batch invariance, which the engine promises.
// --layout=plain gives oneDNN the weights as a checkpoint stores them (W[n, k] row-major)
// instead of reordered into the layout it picks for each m; --layout=fixed reorders them once
// into the layout it picks for m = 8 and uses that one for every m (what an engine holding one
// copy of its weights would do).
//
//   bench/onednn_matmul_probe.sh --shapes=576x1536,4096x4096 --tokens=1,2,4,5,8,16
//
// Not part of //...: a measurement, built by its script only.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unordered_map>
#include <vector>

#include "dnnl.hpp"

namespace {

using dnnl::memory;

std::vector<std::string> Split(const std::string& text, char sep) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find(sep, pos);
    if (end == std::string::npos) end = text.size();
    out.push_back(text.substr(pos, end - pos));
    pos = end + 1;
  }
  return out;
}

struct Format {
  const char* name;
  memory::data_type src, wei, dst;
  int64_t weight_bytes;  // per element, as stored
};

double SecondsPerCall(dnnl::stream& stream, dnnl::matmul& prim,
                      const std::unordered_map<int, memory>& args) {
  double best = 1e30;
  for (int run = 0; run < 7; ++run) {
    int64_t calls = 0;
    const auto start = std::chrono::steady_clock::now();
    double elapsed = 0;
    do {
      prim.execute(stream, args);
      stream.wait();
      ++calls;
      elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    } while (elapsed < 0.2);
    best = std::min(best, elapsed / static_cast<double>(calls));
  }
  return best;
}

// Fills a memory object of any of the three types with small values (speed does not depend on
// them; zeros could take shortcuts).
void Fill(memory& mem) {
  const memory::desc desc = mem.get_desc();
  const size_t bytes = desc.get_size();
  auto* p = static_cast<unsigned char*>(mem.get_data_handle());
  for (size_t i = 0; i < bytes; ++i) p[i] = static_cast<unsigned char>((i * 37 + 11) % 61);
  if (desc.data_type() == memory::data_type::f32) {
    auto* f = static_cast<float*>(mem.get_data_handle());
    for (size_t i = 0; i < bytes / 4; ++i) f[i] = 0.01f * static_cast<float>((i * 37) % 61) - 0.3f;
  }
  if (desc.data_type() == memory::data_type::bf16) {
    auto* h = static_cast<uint16_t*>(mem.get_data_handle());
    for (size_t i = 0; i < bytes / 2; ++i) h[i] = 0x3c00 + static_cast<uint16_t>((i * 37) % 61);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string shapes = "576x1536", tokens = "1,2,4,5,8,16", formats = "f32,bf16,int8";
  std::string layout = "prepacked";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char* flag) -> const char* {
      const std::string prefix = std::string(flag) + "=";
      return arg.rfind(prefix, 0) == 0 ? argv[i] + prefix.size() : nullptr;
    };
    if (const char* v = value("--shapes")) {
      shapes = v;
    } else if (const char* v = value("--tokens")) {
      tokens = v;
    } else if (const char* v = value("--formats")) {
      formats = v;
    } else if (const char* v = value("--layout")) {
      layout = v;
      if (layout != "prepacked" && layout != "plain" && layout != "fixed") {
        std::fprintf(stderr, "onednn_matmul_probe: --layout=%s: prepacked, plain or fixed\n", v);
        return 2;
      }
    } else {
      std::fprintf(stderr, "onednn_matmul_probe: unknown flag %s\n", arg.c_str());
      return 2;
    }
  }
  const std::vector<Format> all = {
      {"f32", memory::data_type::f32, memory::data_type::f32, memory::data_type::f32, 4},
      {"bf16", memory::data_type::bf16, memory::data_type::bf16, memory::data_type::f32, 2},
      {"int8", memory::data_type::u8, memory::data_type::s8, memory::data_type::s32, 1},
  };
  const dnnl_version_t* version = dnnl_version();
  std::printf("oneDNN %d.%d.%d, cpu runtime %u, threads: OMP_NUM_THREADS=%s\n", version->major,
              version->minor, version->patch, version->cpu_runtime,
              std::getenv("OMP_NUM_THREADS") ? std::getenv("OMP_NUM_THREADS") : "(unset)");
  std::printf("weights: %s\n", layout.c_str());
  std::printf("%-6s %-11s %3s %10s %8s %8s %9s  %s\n", "format", "shape", "m", "us/call", "GB/s",
              "GFLOP/s", "row0==m1", "implementation");
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  for (const std::string& name : Split(formats, ',')) {
    const auto format = std::find_if(all.begin(), all.end(),
                                     [&](const Format& f) { return name == f.name; });
    if (format == all.end()) {
      std::fprintf(stderr, "onednn_matmul_probe: --formats: unknown format %s\n", name.c_str());
      return 2;
    }
    for (const std::string& shape : Split(shapes, ',')) {
      const std::vector<std::string> nk = Split(shape, 'x');
      const int64_t n = std::stoll(nk.at(0)), k = std::stoll(nk.at(1));
      std::vector<uint32_t> alone;  // row 0's outputs at m = 1, as bits
      // --layout=fixed: the layout oneDNN picks for m = 8, used for every m.
      const memory::desc fixed_md =
          dnnl::matmul::primitive_desc(
              dnnl::matmul::desc(memory::desc({8, k}, format->src, memory::format_tag::ab),
                                 memory::desc({k, n}, format->wei, memory::format_tag::any),
                                 memory::desc({8, n}, format->dst, memory::format_tag::ab)),
              engine)
              .weights_desc();
      for (const std::string& tokens_text : Split(tokens, ',')) {
        const int64_t m = std::stoll(tokens_text);
        const memory::desc src_md({m, k}, format->src, memory::format_tag::ab);
        const memory::desc wei_any =
            layout == "fixed" ? fixed_md
                              : memory::desc({k, n}, format->wei,
                                             layout == "plain" ? memory::format_tag::ba
                                                               : memory::format_tag::any);
        const memory::desc dst_md({m, n}, format->dst, memory::format_tag::ab);
        const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src_md, wei_any, dst_md), engine);
        memory src(src_md, engine), dst(dst_md, engine);
        memory wei_plain({{k, n}, format->wei, memory::format_tag::ba}, engine);  // W[n, k]
        Fill(src);
        Fill(wei_plain);
        // The weights reordered once into the layout oneDNN chose for this m (prepacked).
        memory wei(pd.weights_desc(), engine);
        dnnl::reorder(wei_plain, wei).execute(stream, wei_plain, wei);
        stream.wait();
        dnnl::matmul prim(pd);
        const std::unordered_map<int, memory> args = {
            {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}};
        const double s = SecondsPerCall(stream, prim, args);
        const auto* row0 = static_cast<const uint32_t*>(dst.get_data_handle());
        if (m == 1) alone.assign(row0, row0 + n);
        const char* same = alone.empty()                                     ? "-"
                           : std::equal(alone.begin(), alone.end(), row0) ? "yes"
                                                                            : "NO";
        const double bytes = static_cast<double>(n * k * format->weight_bytes);
        std::printf("%-6s %5ldx%-5ld %3ld %10.1f %8.2f %8.1f %9s  %s\n", format->name,
                    static_cast<long>(n), static_cast<long>(k), static_cast<long>(m), s * 1e6,
                    bytes / s * 1e-9, 2.0 * m * n * k / s * 1e-9, same, pd.impl_info_str());
      }
    }
  }
  return 0;
}
