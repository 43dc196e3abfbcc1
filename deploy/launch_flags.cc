#include "deploy/launch_flags.h"

#include <optional>

#include "absl/flags/flag.h"

ABSL_FLAG(int, ranks, 1, "CPU worker ranks (tensor-parallel degree)");
ABSL_FLAG(int, gpus, 0, "GPU ranks: one per GPU (needs that many CUDA devices)");
ABSL_FLAG(int, pp, 1,
          "pipeline stages: --ranks (or --gpus) x --pp rank processes in all; each stage holds a "
          "contiguous run of the layers (it must divide their count) with --ranks-way tensor "
          "parallelism inside it; stage 0 embeds, the last computes the logits");
ABSL_FLAG(std::string, model, "smollm2",
          "a .gguf file, a Hugging Face directory, a bundled model (smollm2, gemma3-270m), or "
          "with --gpus a shape preset with its weights, e.g. 405b-fp8, 70b-bf16, 8b-int4");
ABSL_FLAG(std::string, checkpoint, "",
          "with --gpus and a shape preset: the checkpoint directory that holds its weights");
ABSL_FLAG(std::string, gpu, "",
          "with --gpus on a machine without GPUs: the GPU kind the plan sizes for (a //deploy:vram "
          "preset; default h100-80g, the product's). With GPUs the plan is for the ones found");
ABSL_FLAG(std::string, weights, "",
          "hold weights as stored (default) or quantize on load: fp8, fp8-block, int4, "
          "int4-g64, bf16, ... (the presets of //deploy:vram --weights)");
ABSL_FLAG(std::string, kv_dtype, "auto",
          "KV cache dtype: auto (bf16 on GPU ranks, their activations' type, which FlashInfer's "
          "attention reads as stored; f16 on CPU ranks), f32, f16, bf16 or fp8");
ABSL_FLAG(std::string, listen, "127.0.0.1", "host for the public API");
ABSL_FLAG(int, port, 50051, "port for the public gRPC API (0 = any free port)");
ABSL_FLAG(int, http_port, 8080,
          "port for the OpenAI-compatible HTTP API and /metrics on the same host (0 = off)");
ABSL_FLAG(int, http_threads, 64,
          "HTTP connections served at once (each open HTTP stream holds one thread)");
ABSL_FLAG(int, threads_per_rank, 0, "CPU threads per rank (default: cores / ranks)");
ABSL_FLAG(int, context, 4096, "context window served, tokens (capped by the model's)");
ABSL_FLAG(int, max_seqs, 8, "sequences batched per step");
ABSL_FLAG(int64_t, max_tokens_per_step, 0,
          "new tokens per step, summed over its sequences (prefill chunks, decodes, drafts); "
          "0 = 2048 with --gpus, 512 on CPU ranks (base/step_budget.h), as //deploy:vram plans");
ABSL_FLAG(std::string, comm, "auto",
          "collectives between CPU ranks: auto (shared memory when all ranks share a host, else "
          "Gloo over TCP), shm or gloo");
ABSL_FLAG(bool, deterministic_tp, false,
          "row-parallel layers reduce in fixed chunks (f32 all-gather) so every --ranks gives "
          "the same floats; costs C x the bytes of the default all-reduce (docs/PERFORMANCE.md). "
          "On GPUs also pinned GEMM algorithms and per-row attention splits "
          "(kernels/cuda/README.md), slower for long prompts");
ABSL_FLAG(int64_t, deterministic_tp_chunks, 0,
          "--deterministic_tp's chunk count: runs with the same count give the same floats at "
          "every --ranks that divides it; 0 = one chunk per KV-head group (every degree up to "
          "the KV-head count agrees), or per rank past it. Must be a multiple of --ranks that "
          "divides the heads and cuts o's and down's inputs into whole quantization blocks");
ABSL_FLAG(bool, expert_parallel, false,
          "mixture-of-experts models: place whole experts on ranks (num_experts / ranks each, "
          "the shared expert on every rank) and bring their outputs to the tokens with an "
          "all-to-all, instead of splitting every expert across the ranks (model/sharding.h)");
ABSL_FLAG(bool, attention_dp, false,
          "data-parallel attention: every rank holds the whole attention and attends for its "
          "own sequences, caching only their KV, so the ranks' KV caches add up instead of "
          "each holding the same latent (multi-head latent attention) or KV-head copies; the "
          "MLPs stay split and the experts split or, with --expert_parallel, whole "
          "(model/sharding.h). Costs each rank the whole attention's weights");
ABSL_FLAG(int, collective_timeout_ms, 5000,
          "a collective that waits longer fails, once the ranks' communicator has run one (a dead "
          "or stuck rank surfaces in this time)");
ABSL_FLAG(int, startup_timeout_ms, 120000,
          "how long the ranks' communicator may take to start: the rendezvous, NCCL's init and "
          "the first collectives, which set up connections lazily (a cold 8-GPU start takes "
          "seconds); the longer of this and --collective_timeout_ms");
ABSL_FLAG(bool, strict_kernels, false,
          "GPU ranks refuse to start rather than multiply a weight by decoding it whole to bf16 "
          "on every call (an fp8 scale mode or shape cuBLASLt refuses, a weight no fp8 kernel "
          "takes): the error names the weight's role, shape and why. Without it each such "
          "fallback is said once per role at load (kernels/cuda/matmul_plan_load.h)");
ABSL_FLAG(bool, enforce_eager, false,
          "run every step op by op: no decode step is recorded and replayed as a CUDA graph "
          "(by default GPU ranks record decode steps, padded to a power of two of sequences, "
          "collectives included at --gpus > 1; the memory plan counts the recordings). CPU "
          "ranks never record");
ABSL_FLAG(bool, spawn_ranks, true,
          "start the ranks as processes on this machine; false: wait for --ranks workers started "
          "elsewhere (worker --coordinator=<--worker_listen> --rank=R --cluster_secret_file=F) "
          "to join");
ABSL_FLAG(std::string, worker_listen, "",
          "HOST:PORT of the worker control plane the ranks join; default 127.0.0.1:0 (any free "
          "port) when this process spawns the ranks; required with --spawn_ranks=false");
ABSL_FLAG(std::string, cluster_secret_file, "",
          "file holding the cluster secret every worker-plane call carries (at least 32 "
          "characters); required with --spawn_ranks=false; default: a fresh one per launch");
ABSL_FLAG(int, join_timeout_s, 300, "how long to wait for every rank to join");
ABSL_FLAG(int, rank_replace_timeout_s, -1,
          "a rank that dies is replaced in place within this many seconds (default: 60 on CPU "
          "ranks; the launcher starts a successor, or with --spawn_ranks=false waits for one to "
          "join with that --rank), the other ranks keep their weights and regroup, and every "
          "request is recomputed from its tokens; past it, or 0, a lost rank ends the cluster "
          "(exit 1). GPU ranks only when this flag is given (a GPU shard loads for longer than "
          "the default allows; NCCL is aborted and re-formed: not yet run on a GPU)");
ABSL_FLAG(std::string, ready_file, "",
          "once serving, write the gRPC address here (line 1) and the HTTP base URL (line 2, "
          "when --http_port is not 0), for scripts");
ABSL_FLAG(bool, prefix_caching, true,
          "reuse the KV cache of full blocks of earlier prompts (automatic prefix caching)");
ABSL_FLAG(int, max_queued_requests, 256,
          "requests that may wait for a place in the batch; past it RESOURCE_EXHAUSTED / 429");
ABSL_FLAG(int, drain_timeout_s, 30,
          "on SIGTERM, how long streams in flight may run before they are cancelled");
ABSL_FLAG(std::string, tls_cert_file, "", "PEM certificate (chain) for the public ports: TLS");
ABSL_FLAG(std::string, tls_key_file, "", "PEM private key of --tls_cert_file");
ABSL_FLAG(std::string, tls_client_ca_file, "",
          "PEM CA: clients must present a certificate it signed (mutual TLS)");
ABSL_FLAG(std::string, auth_token_file, "",
          "file holding a bearer token every request must carry (Authorization: Bearer ...)");
ABSL_FLAG(std::string, reflection, "auto",
          "gRPC server reflection: on, off, or auto (on only for a loopback --listen)");
ABSL_FLAG(std::string, served_model_name, "",
          "the model id clients send as `model` and see in responses (default: the model's "
          "general.name)");
ABSL_FLAG(std::string, chat_template, "",
          "a Jinja chat template file that replaces the model's own (tokenizer.chat_template "
          "or tokenizer_config.json's chat_template)");
ABSL_FLAG(std::string, tool_call_parser, "",
          "how the model writes tool calls: hermes, llama3_json, mistral, deepseek_v3 or "
          "deepseek_v31 (default: the format its chat template renders calls in, else hermes)");
ABSL_FLAG(std::string, reasoning_parser, "",
          "return <think>...</think> as reasoning_content: qwen3 or deepseek_r1 (default: off, "
          "the reasoning stays in the content)");
ABSL_FLAG(bool, structured_output, true,
          "serve structured output (JSON schema, regex, grammar, choice); off: such requests "
          "are refused with FAILED_PRECONDITION");
ABSL_FLAG(int, structured_compile_timeout_ms, 10000,
          "a constraint that takes longer to compile is refused (INVALID_ARGUMENT)");
ABSL_FLAG(int, structured_max_constraint_bytes, 64 << 10,
          "largest schema, regex, grammar or list of choices accepted, bytes");
ABSL_FLAG(int64_t, structured_max_grammar_bytes, int64_t{256} << 20,
          "largest compiled grammar (its token-mask caches), bytes");
ABSL_FLAG(int64_t, structured_cache_bytes, int64_t{1} << 30,
          "compiled grammars kept for reuse (LRU), bytes");
ABSL_FLAG(bool, jump_forward, true,
          "structured output: append text the constraint forces without a sampling step each");
ABSL_FLAG(std::string, speculative, "off",
          "speculative decoding: off, ngram (prompt lookup: drafts from the prompt and the output "
          "so far), draft (a smaller model with the same vocabulary, --draft_model, on the same "
          "ranks) or mtp (the checkpoint's multi-token-prediction layer, DeepSeek-V3's, one "
          "token per step); greedy and seeded tokens are the same as with off (docs/API.md)");
ABSL_FLAG(std::string, draft_model, "",
          "--speculative=draft: the draft model, a path (GGUF or Hugging Face directory) or "
          "smollm2; its weights, buffers and KV are in the memory plan");
ABSL_FLAG(std::string, draft_weights, "",
          "the draft model's weights as stored (default) or a preset, as --weights");
ABSL_FLAG(std::optional<int>, num_speculative_tokens, std::nullopt,
          "the most tokens a sequence drafts per step (K), 1..16; default 4, and 1 (the only "
          "value) with --speculative=mtp");
ABSL_FLAG(bool, speculative_adaptive, true,
          "choose each sequence's K from its recent acceptance, off where none pays");
ABSL_FLAG(int, speculative_max_batch, 4,
          "no sequence drafts in a step where more than this many decode: the step is compute-"
          "bound there (docs/PERFORMANCE.md); 0 = no limit");
ABSL_FLAG(std::string, demo_prompt, "",
          "once serving, stream an answer to this question through the public API");

namespace tpserve {

LaunchFlags ReadLaunchFlags() {
  LaunchFlags f;
  f.ranks = absl::GetFlag(FLAGS_ranks);
  f.pp = absl::GetFlag(FLAGS_pp);
  f.gpus = absl::GetFlag(FLAGS_gpus);
  f.model = absl::GetFlag(FLAGS_model);
  f.checkpoint = absl::GetFlag(FLAGS_checkpoint);
  f.gpu = absl::GetFlag(FLAGS_gpu);
  f.weights = absl::GetFlag(FLAGS_weights);
  f.kv_dtype = absl::GetFlag(FLAGS_kv_dtype);
  f.listen = absl::GetFlag(FLAGS_listen);
  f.port = absl::GetFlag(FLAGS_port);
  f.http_port = absl::GetFlag(FLAGS_http_port);
  f.http_threads = absl::GetFlag(FLAGS_http_threads);
  f.threads_per_rank = absl::GetFlag(FLAGS_threads_per_rank);
  f.context = absl::GetFlag(FLAGS_context);
  f.max_seqs = absl::GetFlag(FLAGS_max_seqs);
  f.max_tokens_per_step = absl::GetFlag(FLAGS_max_tokens_per_step);
  f.comm = absl::GetFlag(FLAGS_comm);
  f.deterministic_tp = absl::GetFlag(FLAGS_deterministic_tp);
  f.deterministic_tp_chunks = absl::GetFlag(FLAGS_deterministic_tp_chunks);
  f.expert_parallel = absl::GetFlag(FLAGS_expert_parallel);
  f.attention_dp = absl::GetFlag(FLAGS_attention_dp);
  f.collective_timeout_ms = absl::GetFlag(FLAGS_collective_timeout_ms);
  f.startup_timeout_ms = absl::GetFlag(FLAGS_startup_timeout_ms);
  f.strict_kernels = absl::GetFlag(FLAGS_strict_kernels);
  f.enforce_eager = absl::GetFlag(FLAGS_enforce_eager);
  f.spawn_ranks = absl::GetFlag(FLAGS_spawn_ranks);
  f.worker_listen = absl::GetFlag(FLAGS_worker_listen);
  f.cluster_secret_file = absl::GetFlag(FLAGS_cluster_secret_file);
  f.join_timeout_s = absl::GetFlag(FLAGS_join_timeout_s);
  // -1 (the default): not given, 60 s for CPU ranks and no replacement of GPU ranks.
  f.rank_replace_timeout_given = absl::GetFlag(FLAGS_rank_replace_timeout_s) != -1;
  f.rank_replace_timeout_s =
      f.rank_replace_timeout_given ? absl::GetFlag(FLAGS_rank_replace_timeout_s) : 60;
  f.ready_file = absl::GetFlag(FLAGS_ready_file);
  f.prefix_caching = absl::GetFlag(FLAGS_prefix_caching);
  f.max_queued_requests = absl::GetFlag(FLAGS_max_queued_requests);
  f.drain_timeout_s = absl::GetFlag(FLAGS_drain_timeout_s);
  f.tls_cert_file = absl::GetFlag(FLAGS_tls_cert_file);
  f.tls_key_file = absl::GetFlag(FLAGS_tls_key_file);
  f.tls_client_ca_file = absl::GetFlag(FLAGS_tls_client_ca_file);
  f.auth_token_file = absl::GetFlag(FLAGS_auth_token_file);
  f.reflection = absl::GetFlag(FLAGS_reflection);
  f.served_model_name = absl::GetFlag(FLAGS_served_model_name);
  f.chat_template = absl::GetFlag(FLAGS_chat_template);
  f.tool_call_parser = absl::GetFlag(FLAGS_tool_call_parser);
  f.reasoning_parser = absl::GetFlag(FLAGS_reasoning_parser);
  f.structured_output = absl::GetFlag(FLAGS_structured_output);
  f.structured_compile_timeout_ms = absl::GetFlag(FLAGS_structured_compile_timeout_ms);
  f.structured_max_constraint_bytes = absl::GetFlag(FLAGS_structured_max_constraint_bytes);
  f.structured_max_grammar_bytes = absl::GetFlag(FLAGS_structured_max_grammar_bytes);
  f.structured_cache_bytes = absl::GetFlag(FLAGS_structured_cache_bytes);
  f.jump_forward = absl::GetFlag(FLAGS_jump_forward);
  f.speculative = absl::GetFlag(FLAGS_speculative);
  f.draft_model = absl::GetFlag(FLAGS_draft_model);
  f.draft_weights = absl::GetFlag(FLAGS_draft_weights);
  // --speculative=mtp drafts one token: its default K.
  f.num_speculative_tokens =
      absl::GetFlag(FLAGS_num_speculative_tokens).value_or(f.speculative == "mtp" ? 1 : 4);
  f.speculative_adaptive = absl::GetFlag(FLAGS_speculative_adaptive);
  f.speculative_max_batch = absl::GetFlag(FLAGS_speculative_max_batch);
  f.demo_prompt = absl::GetFlag(FLAGS_demo_prompt);
  return f;
}

}  // namespace tpserve
