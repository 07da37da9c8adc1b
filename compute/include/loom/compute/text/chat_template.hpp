// Chat templates: the text layout each model family was fine-tuned on for a conversation (who says what,
// with which markers between turns), built in. A GGUF file names its layout only as Jinja source
// (`tokenizer.chat_template`); we recognise the family from its tell-tale markers instead of running Jinja.
//
// Rendering follows each family's published template (the model's own Jinja / its authors' reference
// code), whitespace included:
//   chatml   <|im_start|>{role}\n{content}<|im_end|>\n ... then "<|im_start|>assistant\n"
//   llama2   [INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST] {assistant} </s><s>[INST] {user} [/INST]
//            (Meta's Llama-2-chat template; content stripped of surrounding whitespace)
//   llama3   <|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|> ... then the assistant header
//            (Meta's Llama-3-Instruct template; content trimmed)
//   mistral  [INST] {system}\n\n{user} [/INST]{assistant}</s>[INST] {user} [/INST]
//            (Mistral-7B-Instruct v0.1/v0.2 and Mixtral-8x7B-Instruct)
//   gemma    <start_of_turn>user\n{system}\n\n{user}<end_of_turn>\n<start_of_turn>model\n{assistant}
//            <end_of_turn>\n ... then "<start_of_turn>model\n" (Gemma's template; content trimmed)
//   phi3     <|system|>\n{system}<|end|>\n<|user|>\n{user}<|end|>\n ... then "<|assistant|>\n"
//   zephyr   <|system|>\n{system}</s>\n<|user|>\n{user}</s>\n ... then "<|assistant|>\n" (zephyr-7b-beta)
//   alpaca   {system}\n\n### Instruction:\n{user}\n\n### Response:\n{assistant}\n\n ... then
//            "### Response:\n" (Stanford Alpaca's prompt, one Instruction/Response pair per exchange)
//   vicuna   {system} USER: {user} ASSISTANT: {assistant}</s>USER: {user} ASSISTANT:  (FastChat vicuna_v1.1)
//
// System messages: llama2, mistral and gemma have no system turn of their own; as their templates do,
// the system text goes into the next user turn (llama2 inside <<SYS>> markers, mistral and gemma as
// "{system}\n\n" in front of it). Several system turns before one user turn are joined with "\n\n"; a
// system turn followed by an assistant turn or by nothing becomes a user turn of its own.
// alpaca and vicuna start with their authors' default system text when the conversation has none
// ("Below is an instruction that describes a task. ..." / "A chat between a curious user and ...");
// a system turn elsewhere is rendered in place like the first. The other templates render system turns
// in place under their own role marker.
//
// BOS: no rendered text starts with the BOS token's text. The tokenizer adds BOS itself when the
// vocabulary asks for it (every family here whose template writes bos_token first), so the prompt never
// gets two. Later turns keep what the template puts between them: llama2 opens each later user turn with
// "<s>", and llama2, mistral, zephyr and vicuna close assistant turns with "</s>" (EOS), all written as
// text for the caller to tokenize with parse_special = true.
//
// Conversation shape is not checked (templates that insist on user/assistant alternation accept any
// order here, rendering each turn the same way).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace loom::compute {

enum class ChatTemplate { chatml, llama2, llama3, mistral, gemma, phi3, zephyr, alpaca, vicuna };
enum class ChatTurnRole { system, user, assistant };

struct ChatTurn {
  ChatTurnRole role = ChatTurnRole::user;
  std::string content;
};

// "chatml", "llama2", ... (the enumerator's name).
std::string_view name(ChatTemplate t) noexcept;
// By that exact name (lower case); nullopt for any other.
std::optional<ChatTemplate> find_chat_template(std::string_view name) noexcept;
std::span<const ChatTemplate> all_chat_templates() noexcept;

// The family of a GGUF `tokenizer.chat_template` Jinja source, from its markers: "<|start_header_id|>"
// llama3; "<|im_start|>" chatml (unless Phi-4's "<|im_sep|>" is there); "<start_of_turn>" gemma;
// "<|assistant|>" with "<|end|>" phi3; "<|user|>" and "<|assistant|>" zephyr (unless ChatGLM's
// "[gMASK]"); "[INST]" with "<<SYS>>" llama2, without it mistral; "USER:" and "ASSISTANT:" vicuna;
// "### Instruction:" and "### Response:" alpaca; checked in that order. nullopt when none fits.
std::optional<ChatTemplate> detect_chat_template(std::string_view jinja_source) noexcept;

// The prompt text for `turns`, ending with the assistant's opening when add_generation_prompt (llama2 and
// mistral have none: "[/INST]" is the opening). Special-token markers are written literally; tokenize
// with parse_special = true. Without add_generation_prompt the text ends after the last turn (Phi-3's own
// template would add its EOS text there; we leave that to whoever wants it).
std::string render_chat(ChatTemplate t, std::span<const ChatTurn> turns, bool add_generation_prompt);

// Text markers that end an assistant turn in this template (e.g. "<|im_end|>"), for use as stop strings
// when the vocabulary has no end-of-turn token. Where a turn ends with the EOS text "</s>" (llama2,
// mistral, zephyr, vicuna) or with no marker (alpaca), also the text that opens the next user turn
// ("[INST]", "<|user|>", "USER:", "### Instruction:"), so that a model writing it as text still stops.
std::span<const std::string_view> end_of_turn_markers(ChatTemplate t) noexcept;

}  // namespace loom::compute
