#include "training/adamw.h"

#include <c10/core/GradMode.h>

#include <cmath>

namespace kvb {

AdamW::AdamW(std::vector<at::Tensor> params, AdamWOptions options)
    : params_(std::move(params)), options_(options) {
  for (const at::Tensor& p : params_) {
    m_.push_back(at::zeros_like(p));
    v_.push_back(at::zeros_like(p));
  }
}

at::Tensor AdamW::clip_grad_norm(double max_norm) {
  c10::NoGradGuard no_grad;
  // On the parameters' device, summed in double in parameter order (as a host loop would):
  // no host read per step.
  at::Tensor sum_sq;
  for (const at::Tensor& p : params_) {
    if (!p.grad().defined()) continue;
    const at::Tensor s = p.grad().pow(2).sum().to(at::kDouble);
    sum_sq = sum_sq.defined() ? sum_sq + s : s;
  }
  if (!sum_sq.defined()) return {};
  const at::Tensor norm = sum_sq.sqrt();
  // 1 where the norm is within max_norm (grads unchanged), else max_norm / (norm + 1e-6).
  const at::Tensor factor = at::where(norm > max_norm, max_norm / (norm + 1e-6), at::ones_like(norm));
  for (const at::Tensor& p : params_)
    if (p.grad().defined()) p.mutable_grad().mul_(factor);
  return norm;
}

void AdamW::step(double lr) {
  c10::NoGradGuard no_grad;
  ++steps_;
  const double correction1 = 1 - std::pow(options_.beta1, double(steps_));
  const double correction2 = 1 - std::pow(options_.beta2, double(steps_));
  for (size_t i = 0; i < params_.size(); ++i) {
    at::Tensor& p = params_[i];
    if (!p.grad().defined()) continue;
    const at::Tensor& g = p.grad();
    m_[i].mul_(options_.beta1).add_(g, 1 - options_.beta1);
    v_[i].mul_(options_.beta2).addcmul_(g, g, 1 - options_.beta2);
    if (p.dim() >= 2) p.mul_(1 - lr * options_.weight_decay);
    at::Tensor denom = (v_[i] / correction2).sqrt_().add_(options_.eps);
    p.addcdiv_(m_[i], denom, -lr / correction1);
    p.mutable_grad().zero_();
  }
}

}  // namespace kvb
