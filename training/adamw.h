// AdamW (Loshchilov & Hutter) over a list of parameter tensors, written with plain ATen ops so
// the trainer needs no torch::optim: m and v moments, bias correction, decoupled weight decay.
#pragma once
#include <ATen/ATen.h>

#include <vector>

namespace kvb {

struct AdamWOptions {
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double weight_decay = 0.1;  // applied to matrices only; norms' gains are not decayed
};

class AdamW {
 public:
  AdamW(std::vector<at::Tensor> params, AdamWOptions options);
  // One update with learning rate `lr` from the gradients in each parameter's .grad(), which
  // are then zeroed.
  void step(double lr);
  // Scales all gradients so their global L2 norm is at most `max_norm`; returns the norm before
  // (a 0-dim double tensor on the parameters' device: read it only when needed).
  at::Tensor clip_grad_norm(double max_norm);
  int64_t steps() const { return steps_; }

 private:
  std::vector<at::Tensor> params_, m_, v_;
  AdamWOptions options_;
  int64_t steps_ = 0;
};

}  // namespace kvb
