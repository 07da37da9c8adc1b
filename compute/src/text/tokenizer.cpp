#include "loom/compute/text/tokenizer.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "tokenizer_engine.hpp"

namespace loom::compute {

Tokenizer::Tokenizer(Vocabulary vocabulary) : vocabulary_(std::make_unique<const Vocabulary>(std::move(vocabulary))) {
  const auto& v = *vocabulary_;
  if (v.tokens.empty()) throw std::invalid_argument("tokenizer: the vocabulary has no tokens");
  if (v.scores.size() != v.tokens.size() || v.kinds.size() != v.tokens.size()) {
    throw std::invalid_argument("tokenizer: " + std::to_string(v.tokens.size()) + " tokens but " +
                                std::to_string(v.scores.size()) + " scores and " + std::to_string(v.kinds.size()) +
                                " kinds");
  }
  for (std::int32_t id = 0; id < v.size(); ++id) {
    const TokenKind kind = v.kinds[static_cast<std::size_t>(id)];
    const std::string& text = v.tokens[static_cast<std::size_t>(id)];
    // As the reference does: control and unknown tokens (<unk>) match only with parse_special, user-defined
    // pieces always.
    const bool special = kind == TokenKind::control || kind == TokenKind::unknown || kind == TokenKind::user_defined;
    if (special && !text.empty()) specials_.emplace_back(text, id);
  }
  // Longest first, so "<|im_start|>" wins over a shorter token that is its prefix.
  std::stable_sort(specials_.begin(), specials_.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  for (const auto& special : specials_) special_first_byte_[static_cast<unsigned char>(special.first[0])] = true;
  engine_ = v.model == TokenizerModel::sentencepiece ? detail::make_sentencepiece_engine(v)
                                                     : detail::make_byte_level_bpe_engine(v);
}

Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

std::vector<std::int32_t> Tokenizer::encode(std::string_view text, EncodeOptions options) const {
  std::vector<std::int32_t> out;
  out.reserve(text.size() / 3 + 4);
  const auto& v = *vocabulary_;
  if (options.add_special && v.add_bos && v.bos != Vocabulary::kNone) out.push_back(v.bos);

  bool after_boundary = true;
  std::size_t plain_start = 0;
  std::size_t i = 0;
  auto flush_plain = [&](std::size_t end) {
    if (end > plain_start) {
      engine_->encode(text.substr(plain_start, end - plain_start), after_boundary, out);
      after_boundary = false;
    }
  };
  while (i < text.size()) {
    const std::pair<std::string, std::int32_t>* match = nullptr;
    if (special_first_byte_[static_cast<unsigned char>(text[i])]) {
      for (const auto& special : specials_) {
        const bool allowed = options.parse_special || v.kinds[static_cast<std::size_t>(special.second)] == TokenKind::user_defined;
        if (allowed && text.compare(i, special.first.size(), special.first) == 0) {
          match = &special;
          break;
        }
      }
    }
    if (match == nullptr) {
      ++i;
      continue;
    }
    flush_plain(i);
    out.push_back(match->second);
    after_boundary = true;
    i += match->first.size();
    plain_start = i;
  }
  flush_plain(text.size());
  if (options.add_special && v.add_eos && v.eos != Vocabulary::kNone) out.push_back(v.eos);
  return out;
}

std::string Tokenizer::piece(std::int32_t id, bool render_special) const {
  if (!vocabulary_->valid(id)) {
    throw std::out_of_range("token id " + std::to_string(id) + " is outside the vocabulary (0.." +
                            std::to_string(vocabulary_->size() - 1) + ")");
  }
  const TokenKind kind = vocabulary_->kinds[static_cast<std::size_t>(id)];
  if (kind == TokenKind::control || kind == TokenKind::unknown || kind == TokenKind::unused ||
      kind == TokenKind::undefined) {
    return render_special ? vocabulary_->tokens[static_cast<std::size_t>(id)] : std::string();
  }
  return engine_->piece(id);
}

std::string Tokenizer::decode(std::span<const std::int32_t> ids, DecodeOptions options) const {
  std::string text;
  for (const std::int32_t id : ids) text += piece(id, options.render_special);
  if (options.strip_leading_space && vocabulary_->model == TokenizerModel::sentencepiece && vocabulary_->add_space_prefix &&
      !text.empty() && text.front() == ' ') {
    text.erase(0, 1);
  }
  return text;
}

std::vector<std::int32_t> encode_prompt(const Tokenizer& tokenizer, std::string_view text, bool parse_special) {
  std::vector<std::int32_t> ids;
  const auto& v = tokenizer.vocabulary();
  if (v.add_bos && v.bos != Vocabulary::kNone) ids.push_back(v.bos);
  const auto body = tokenizer.encode(text, {.add_special = false, .parse_special = parse_special});
  ids.insert(ids.end(), body.begin(), body.end());
  return ids;
}

}  // namespace loom::compute
