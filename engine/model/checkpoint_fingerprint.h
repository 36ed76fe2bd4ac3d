// What tells two checkpoints apart without reading all their weights: the results store keys
// a cell by its model as written (a folder path or a built-in name), so a result is reused
// only while the model's fingerprint is the one it ran with (another folder at that path, a
// retrained checkpoint saved over it, $KVBENCH_TINY_MODEL set elsewhere).
#pragma once
#include <string>

namespace kvb {

// "v1:<16 hex digits>": a hash of the files the loader reads in the model's folder, in a fixed
// order: config.json, tokenizer.json, tokenizer_config.json and generation_config.json
// (chat_template.jinja too where present) whole, then model.safetensors, or
// model.safetensors.index.json and each shard it names:
// each file's name and size, a file up to 8 MiB whole, a larger one by its first MiB (the
// safetensors header and the first tensors) and 256 blocks of 4 KiB spread evenly over it (a
// retrained or fine-tuned checkpoint differs in all of them; one that changed a few small
// tensors only may not). About 2 MiB read per weight file. "" for the models kvbench
// generates (random-*) and for a reference that is no folder (its load reports why).
std::string checkpoint_fingerprint(const std::string& reference);

}  // namespace kvb
