#include "training/tiny_trainer.h"

#include <c10/core/GradMode.h>

#include <chrono>
#include <cmath>
#include <iomanip>
#include <ostream>

#include "engine/common/error.h"
#include "engine/device.h"
#include "engine/common/json_fields.h"
#include "training/adamw.h"
#include "training/bpe_vocabulary.h"
#include "training/training_forward.h"

namespace kvb {
namespace {

using Clock = std::chrono::steady_clock;

// The texts the tokenizer is learnt from: a few samples of every training task (rendered with
// the byte tokenizer, whose lengths do not matter here) and the essays.
std::vector<std::string> tokenizer_corpus(const EpisodeSources& sources) {
  auto byte_model = LlamaModel::random(random_tiny_config(), 0);
  std::vector<std::string> corpus;
  for (const std::string& task : episode_tasks()) {
    json params = {{"context_length", 2048}, {"samples", 8}};
    if (task != "passkey") params.update({{"wordlist_dir", sources.wordlist_dir},
                                          {"haystack_file", sources.haystack_file}});
    const DatasetInfo& info = dataset_registry().get(task, "training task");
    auto dataset = info.create(info.normalise_params(params, "training task " + task));
    for (const Sample& s : dataset->samples(*byte_model->tokenizer, 1)) {
      corpus.push_back(s.prompt);
      for (const std::string& a : s.answers) corpus.push_back(a);
    }
  }
  const json essays = read_json_file(sources.haystack_file);
  if (!essays.contains("text") || !essays["text"].is_string())
    throw InputError(sources.haystack_file + ": expected an object with a string field \"text\"");
  corpus.push_back(essays["text"].get<std::string>());
  return corpus;
}

std::shared_ptr<LlamaModel> initial_model(const TinyTrainingOptions& options, const json& tokenizer) {
  LlamaShape shape = options.shape;
  shape.vocab = int(tokenizer["model"]["vocab"].size());
  auto model = LlamaModel::random(llama_config(shape), options.seed);  // N(0, 0.02), unit norms
  model->tokenizer_json = tokenizer;
  model->tokenizer_config = bpe_tokenizer_config();
  model->tokenizer = Tokenizer::from_json(tokenizer, model->tokenizer_config, "<learnt tokenizer>");
  model->trained = true;
  // With every matrix N(0, 0.02), the first blocks' outputs swamp the token embeddings in the
  // residual stream; larger embeddings and residual projections scaled by 1/sqrt(2 layers)
  // (GPT-2's rule) made copying improve about twice as fast in our probes.
  c10::NoGradGuard no_grad;
  model->embed.mul_(options.embed_std / 0.02);
  for (LayerWeights& l : model->layers) {
    l.wo.mul_(1 / std::sqrt(2.0 * shape.layers));
    l.w_down.mul_(1 / std::sqrt(2.0 * shape.layers));
  }
  return model;
}

std::vector<at::Tensor> parameters(const LlamaModel& m) {
  std::vector<at::Tensor> out = {m.embed, m.final_norm};
  if (!m.lm_head.is_same(m.embed)) out.push_back(m.lm_head);
  for (const LayerWeights& l : m.layers)
    for (const at::Tensor& t : {l.attn_norm, l.mlp_norm, l.wq, l.wk, l.wv, l.wo, l.w_gate, l.w_up, l.w_down})
      out.push_back(t);
  return out;
}

// Linear warm-up to the peak, then cosine decay to final_lr_fraction of it.
double learning_rate(const TinyTrainingOptions& o, int64_t step, int64_t total) {
  if (step < o.warmup_steps) return o.peak_lr * double(step + 1) / double(o.warmup_steps);
  const double progress = double(step - o.warmup_steps) / double(std::max<int64_t>(1, total - o.warmup_steps));
  const double cosine = 0.5 * (1 + std::cos(M_PI * std::min(1.0, progress)));
  return o.peak_lr * (o.final_lr_fraction + (1 - o.final_lr_fraction) * cosine);
}

// Per task: answer tokens seen, predicted right (teacher-forced argmax), and their NLL.
struct AnswerStats {
  std::vector<double> tokens, correct, nll;
  void reset(size_t kinds) { tokens.assign(kinds, 0); correct.assign(kinds, 0); nll.assign(kinds, 0); }
  void add(const EpisodeBatch& b, const at::Tensor& logits, const at::Tensor& token_nll) {
    at::Tensor hit = (logits.argmax(-1) == b.targets).to(at::kDouble);
    for (size_t k = 0; k < tokens.size(); ++k) {
      at::Tensor mask = (b.answer_kind == int64_t(k)).to(at::kDouble);
      tokens[k] += mask.sum().item<double>();
      correct[k] += (hit * mask).sum().item<double>();
      nll[k] += (token_nll.to(at::kDouble) * mask).sum().item<double>();
    }
  }
};

json log_line(const TrainingPhase& phase, int64_t step, double lr, double loss, const AnswerStats& s,
              const std::vector<std::string>& kinds, double elapsed, std::ostream& log) {
  json per_task = json::object();
  log << std::fixed << std::setprecision(3) << "[" << phase.name << "] step " << step << "  lr "
      << std::setprecision(5) << lr << std::setprecision(3) << "  loss " << loss;
  for (size_t k = 0; k < kinds.size(); ++k) {
    if (s.tokens[k] == 0) continue;
    const double acc = s.correct[k] / s.tokens[k], nll = s.nll[k] / s.tokens[k];
    per_task[kinds[k]] = {{"answer_token_accuracy", acc}, {"answer_nll", nll}};
    log << "  " << kinds[k] << " " << std::setprecision(2) << acc << "/" << nll;
  }
  log << "  (" << std::setprecision(0) << elapsed << " s)" << std::endl;
  return {{"phase", phase.name}, {"step", step}, {"lr", lr}, {"loss", loss},
          {"elapsed_s", elapsed}, {"answers", per_task}};
}

// The batch's tensors on `device` (the sampler makes them on the CPU).
EpisodeBatch on_device(EpisodeBatch b, at::Device device) {
  for (at::Tensor* t : {&b.inputs, &b.targets, &b.weights, &b.doc, &b.answer_kind})
    if (t->defined()) *t = t->to(device);
  return b;
}

json phase_json(const TrainingPhase& p) {
  return {{"name", p.name}, {"length", p.mix.length}, {"min_doc", p.mix.min_doc},
          {"max_doc", p.mix.max_doc}, {"task_weights", p.mix.task_weights},
          {"context_loss_weight", p.mix.context_loss_weight}, {"repeat_vocab", p.mix.repeat_vocab},
          {"rows", p.rows}, {"steps", p.steps}};
}

}  // namespace

std::vector<TrainingPhase> default_curriculum(double scale) {
  auto steps = [scale](int64_t n) { return std::max<int64_t>(1, int64_t(std::lround(n * scale))); };
  const std::map<std::string, double> tasks = {
      {"repeat", 1.0},          {"passkey", 1.0},         {"niah_single_1", 1.0},
      {"niah_single_2", 0.5},   {"niah_multikey_1", 1.5}, {"niah_multikey_2", 0.5},
      {"niah_multivalue", 0.5}, {"niah_multiquery", 0.5}, {"vt", 1.5}};
  // Copying first, over short documents and a 256-token alphabet (digits, letters, common
  // words): in our probes copying over 128-256-token documents stayed near chance for 1000
  // steps, while over 16-40-token documents it started within 100, crawled to 0.3 accuracy by
  // step 1000 and jumped (the induction "phase change") to 0.84 between steps 1100 and 1600.
  const std::map<std::string, double> copy = {{"repeat", 1.0}};
  return {
      {"copy-short", {.length = 128, .min_doc = 16, .max_doc = 40, .task_weights = copy,
                      .repeat_vocab = 256}, 8, steps(1800)},
      {"copy-long", {.length = 256, .min_doc = 32, .max_doc = 160, .task_weights = copy,
                     .repeat_vocab = 256}, 8, steps(300)},
      {"tasks-256", {.length = 256, .min_doc = 64, .max_doc = 208, .task_weights = tasks}, 8, steps(600)},
      {"tasks-512", {.length = 512, .min_doc = 128, .max_doc = 464, .task_weights = tasks}, 4, steps(400)},
      // Documents must outgrow the evaluation length: a model trained on documents of at most
      // 976 tokens scored 70% on passkey at 896 tokens and 0% at 1024, where its answers were
      // not even digits. Most of the budget goes here.
      {"tasks-1280", {.length = 1280, .min_doc = 512, .max_doc = 1232, .task_weights = tasks}, 2, steps(1400)},
  };
}

std::shared_ptr<LlamaModel> train_tiny_model(const TinyTrainingOptions& options,
                                             const std::string& command_line, std::ostream& log) {
  const auto start = Clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  log << "learning a BPE tokenizer (" << options.bpe_merges << " merges) ..." << std::endl;
  const json tokenizer = learn_bpe_tokenizer(tokenizer_corpus(options.sources), options.bpe_merges);
  auto model = initial_model(options, tokenizer)->to(options.device, at::kFloat);
  log << "model: " << model->config.num_hidden_layers << " layers, hidden " << model->config.hidden_size
      << ", vocab " << model->config.vocab_size << "; training on " << options.device << " in "
      << dtype_name(options.compute_dtype) << std::endl;
  std::vector<at::Tensor> params = parameters(*model);
  for (at::Tensor& p : params) p.requires_grad_(true);
  AdamW optimizer(params, AdamWOptions{.weight_decay = options.weight_decay});
  EpisodeSampler sampler(*model->tokenizer, options.sources, options.seed);

  int64_t total = 0, step = 0;
  for (const TrainingPhase& p : options.phases) total += p.steps;
  json curve = json::array();
  for (const TrainingPhase& phase : options.phases) {
    AnswerStats stats;
    double loss_sum = 0;
    int64_t since_log = 0;
    for (int64_t i = 0; i < phase.steps; ++i, ++step) {
      const EpisodeBatch b = on_device(sampler.batch(phase.mix, phase.rows), options.device);
      if (stats.tokens.empty()) stats.reset(b.kind_names.size());
      // The weights this step computes with: the master weights themselves in fp32, else
      // their casts, through which the gradients flow back to them.
      const auto compute = options.compute_dtype == at::kFloat
                               ? model : model->to(options.device, options.compute_dtype);
      at::Tensor logits = training_logits(*compute, b.inputs, b.doc).to(at::kFloat);  // [B, L, V]
      at::Tensor token_nll = -at::log_softmax(logits, -1).gather(-1, b.targets.unsqueeze(-1)).squeeze(-1);
      at::Tensor loss = (token_nll * b.weights).sum() / b.weights.sum();
      loss.backward();
      optimizer.clip_grad_norm(options.clip_norm);
      const double lr = learning_rate(options, step, total);
      optimizer.step(lr);
      {
        c10::NoGradGuard no_grad;
        stats.add(b, logits.detach(), token_nll.detach());
      }
      loss_sum += loss.item<double>();
      if (++since_log == options.log_every || i + 1 == phase.steps) {
        curve.push_back(log_line(phase, i + 1, lr, loss_sum / double(since_log), stats,
                                 b.kind_names, seconds(), log));
        stats.reset(b.kind_names.size());
        loss_sum = 0;
        since_log = 0;
      }
    }
  }
  for (at::Tensor& p : params) p.requires_grad_(false);
  json phases = json::array();
  for (const TrainingPhase& p : options.phases) phases.push_back(phase_json(p));
  const json record = {{"command", command_line}, {"seed", options.seed},
                       {"device", describe_device(options.device)},
                       {"compute_dtype", dtype_name(options.compute_dtype)},
                       {"wall_time_s", seconds()}, {"phases", phases}, {"curve", curve}};
  save_model(*model->to(at::kCPU, at::kFloat), options.out_dir, 1, at::kFloat,
             {{"training.json", record}});
  log << "saved " << options.out_dir << " after " << std::setprecision(0) << seconds() << " s" << std::endl;
  return model;
}

}  // namespace kvb
