#include "step/step_sampling_proto.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace tpserve {
namespace {

namespace wpb = tpserve::worker::v1;

wpb::SampledToken ToProto(const SampledToken& t) {
  wpb::SampledToken p;
  p.set_id(t.id);
  p.set_logprob(t.logprob);
  for (const auto& [id, logprob] : t.top_logprobs) {
    p.add_top_ids(id);
    p.add_top_logprobs(logprob);
  }
  return p;
}

absl::StatusOr<SampledToken> FromProto(const wpb::SampledToken& p) {
  if (p.top_ids_size() != p.top_logprobs_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SampledToken ", p.id(), ": ", p.top_ids_size(), " top_ids but ", p.top_logprobs_size(),
        " top_logprobs"));
  }
  SampledToken t;
  t.id = p.id();
  t.logprob = p.logprob();
  for (int i = 0; i < p.top_ids_size(); ++i) {
    t.top_logprobs.emplace_back(p.top_ids(i), p.top_logprobs(i));
  }
  return t;
}

}  // namespace

wpb::SampleRequest ToProto(const StepSampling& sampling) {
  wpb::SampleRequest out;
  for (const SequenceSampling& s : sampling.sequences) {
    wpb::SequenceSampling& p = *out.add_sequences();
    p.set_seq_id(s.seq_id);
    p.set_num_rows(s.num_rows);
    p.mutable_scored_ids()->Add(s.scored_ids.begin(), s.scored_ids.end());
    p.set_top_logprobs(s.top_logprobs);
    p.set_samples(s.samples);
    if (s.samples) {
      wpb::SamplingParams& q = *p.mutable_params();
      q.set_temperature(s.params.temperature);
      q.set_top_k(s.params.top_k);
      q.set_top_p(s.params.top_p);
      q.set_min_p(s.params.min_p);
      q.set_repetition_penalty(s.params.repetition_penalty);
      q.set_presence_penalty(s.params.presence_penalty);
      q.set_frequency_penalty(s.params.frequency_penalty);
      q.set_top_logprobs(s.params.top_logprobs);
      for (const auto& [id, bias] : s.params.logit_bias) {
        q.add_logit_bias_ids(id);
        q.add_logit_bias_values(bias);
      }
    }
    p.set_key(s.key);
    p.set_draws(s.draws);
    p.mutable_history()->Add(s.history.begin(), s.history.end());
    p.mutable_draft()->Add(s.draft.begin(), s.draft.end());
    for (const std::vector<int32_t>& mask : s.masks) {
      p.add_masks()->mutable_words()->Add(mask.begin(), mask.end());
    }
  }
  return out;
}

absl::StatusOr<StepSampling> FromProto(const wpb::SampleRequest& request) {
  StepSampling out;
  for (const wpb::SequenceSampling& p : request.sequences()) {
    SequenceSampling& s = out.sequences.emplace_back();
    s.seq_id = p.seq_id();
    s.num_rows = p.num_rows();
    s.scored_ids.assign(p.scored_ids().begin(), p.scored_ids().end());
    s.top_logprobs = p.top_logprobs();
    s.samples = p.samples();
    if (s.samples) {
      const wpb::SamplingParams& q = p.params();
      if (q.logit_bias_ids_size() != q.logit_bias_values_size()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "sampling: sequence ", s.seq_id, ": ", q.logit_bias_ids_size(),
            " logit_bias_ids but ", q.logit_bias_values_size(), " logit_bias_values"));
      }
      s.params.temperature = q.temperature();
      s.params.top_k = q.top_k();
      s.params.top_p = q.top_p();
      s.params.min_p = q.min_p();
      s.params.repetition_penalty = q.repetition_penalty();
      s.params.presence_penalty = q.presence_penalty();
      s.params.frequency_penalty = q.frequency_penalty();
      s.params.top_logprobs = q.top_logprobs();
      for (int i = 0; i < q.logit_bias_ids_size(); ++i) {
        s.params.logit_bias.emplace_back(q.logit_bias_ids(i), q.logit_bias_values(i));
      }
    }
    s.key = p.key();
    s.draws = p.draws();
    s.history.assign(p.history().begin(), p.history().end());
    s.draft.assign(p.draft().begin(), p.draft().end());
    for (const wpb::TokenMask& mask : p.masks()) {
      s.masks.emplace_back(mask.words().begin(), mask.words().end());
    }
  }
  return out;
}

wpb::SampleResponse ToProto(const std::vector<SequenceSamples>& samples) {
  wpb::SampleResponse out;
  for (const SequenceSamples& s : samples) {
    wpb::SequenceSamples& p = *out.add_sequences();
    for (const SampledToken& t : s.scored) *p.add_scored() = ToProto(t);
    for (const SampledToken& t : s.sampled) *p.add_sampled() = ToProto(t);
    p.set_draws(s.draws);
  }
  return out;
}

absl::StatusOr<std::vector<SequenceSamples>> FromProto(const wpb::SampleResponse& response) {
  std::vector<SequenceSamples> out;
  for (const wpb::SequenceSamples& p : response.sequences()) {
    SequenceSamples& s = out.emplace_back();
    for (const wpb::SampledToken& t : p.scored()) {
      absl::StatusOr<SampledToken> token = FromProto(t);
      if (!token.ok()) return token.status();
      s.scored.push_back(*std::move(token));
    }
    for (const wpb::SampledToken& t : p.sampled()) {
      absl::StatusOr<SampledToken> token = FromProto(t);
      if (!token.ok()) return token.status();
      s.sampled.push_back(*std::move(token));
    }
    s.draws = p.draws();
  }
  return out;
}

}  // namespace tpserve
