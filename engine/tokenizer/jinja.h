// The Jinja2 subset Hugging Face chat templates are written in, rendered as transformers'
// apply_chat_template renders them: Jinja2's defaults (no autoescape, one trailing newline of
// the source dropped) with trim_blocks, lstrip_blocks, loop controls, {% generation %} blocks,
// raise_exception and Python's tojson. strftime_now is not defined (a prompt that changed with
// the day would not be reproducible), so templates that test for it take their fallback.
#pragma once
#include <nlohmann/json.hpp>

#include <string>

namespace kvb {

// Renders `source` with the template variables `variables` (a JSON object, its keys in the
// order a Python dict of them keeps; JSON null is Python's None). Syntax outside the subset (macros, call and filter blocks, unknown filters,
// tests or methods) and the template's own errors (raise_exception, undefined attributes) are
// an InputError "<where>: line N: ...".
std::string render_jinja(const std::string& source, const nlohmann::ordered_json& variables,
                         const std::string& where);

}  // namespace kvb
