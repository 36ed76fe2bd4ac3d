#include "engine/model_view.h"

#include <sstream>

#include "engine/method_hooks.h"
#include "engine/model/llama_layers.h"
#include "engine/model/llama_model.h"
#include "engine/session.h"

namespace kvb {

ModelView::ModelView(const LlamaModel& model, std::string cache_dir)
    : model_(model), cache_dir_(std::move(cache_dir)) {}

at::Tensor ModelView::queries(int layer, const at::Tensor& x, int64_t position) const {
  const ModelConfig& c = model_.config;
  if (position != rope_position_ || rope_cos_.device() != x.device()) {
    const RopeAngles r = rope_angles(model_, at::full({1}, position, x.options().dtype(at::kLong)));
    rope_position_ = position;
    rope_interleaved_ = r.interleaved;
    rope_cos_ = r.cos;
    rope_sin_ = r.sin;
  }
  const RopeAngles rope{rope_interleaved_, rope_cos_, rope_sin_};
  return layer_queries(model_, model_.layers.at(size_t(layer)), x, rope)
      .reshape({c.num_attention_heads, c.head_dim})
      .to(at::kFloat);
}

std::vector<int> ModelView::encode(const std::string& text) const {
  return model_.tokenizer->encode(text, /*add_special=*/true);
}

namespace {

// Full attention that hands each layer's prefill queries and keys to a visitor.
class QueryKeyRecorder : public Method {
 public:
  explicit QueryKeyRecorder(const ModelView::QueryKeyVisitor& visit) : visit_(visit) {}
  void on_prefill(int layer, const at::Tensor& q, const at::Tensor& k, const at::Tensor&,
                  LayerKV&) override {
    visit_(layer, q, k);
  }

 private:
  const ModelView::QueryKeyVisitor& visit_;
};

}  // namespace

void ModelView::prefill_queries_keys(const std::vector<int>& ids,
                                     const QueryKeyVisitor& visit) const {
  QueryKeyRecorder recorder(visit);
  Session session(model_, recorder, SessionOptions{.model_view = this});
  session.prefill(ids);
}

at::Device ModelView::device() const { return model_.device(); }

std::string ModelView::weights_id() const {
  if (weights_id_.empty()) {
    std::ostringstream hex;
    hex << std::hex << weights_hash(model_);
    weights_id_ = hex.str();
  }
  return weights_id_;
}

}  // namespace kvb
