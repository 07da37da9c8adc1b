// Chat templates: the exact text of one conversation in every template, written out by hand from each
// family's published format (sources beside each), how system turns fold into templates without a system
// role, detection from Jinja excerpts, names, and the end-of-turn markers.
#include "loom/compute/text/chat_template.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

namespace loom::compute {
namespace {

// system, user, assistant, user; then the generation prompt.
const std::vector<ChatTurn> conversation{
    {ChatTurnRole::system, "You are terse."},
    {ChatTurnRole::user, "Hi"},
    {ChatTurnRole::assistant, "Hello!"},
    {ChatTurnRole::user, "What is 2+2?"},
};

std::string render(ChatTemplate t) { return render_chat(t, conversation, true); }

TEST(ChatTemplate, ChatML) {
  // The ChatML layout as in Qwen's and OpenHermes' tokenizer_config.json chat_template.
  EXPECT_EQ(render(ChatTemplate::chatml),
            "<|im_start|>system\nYou are terse.<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello!<|im_end|>\n"
            "<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatTemplate, Llama2) {
  // meta-llama/Llama-2-7b-chat-hf chat_template: bos_token + '[INST] ' + content.strip() + ' [/INST]' for a
  // user turn (the first one's content prefixed with '<<SYS>>\n' + system + '\n<</SYS>>\n\n'), and
  // ' ' + content.strip() + ' ' + eos_token for an assistant turn. The leading BOS is the tokenizer's.
  EXPECT_EQ(render(ChatTemplate::llama2),
            "[INST] <<SYS>>\nYou are terse.\n<</SYS>>\n\nHi [/INST] Hello! </s>"
            "<s>[INST] What is 2+2? [/INST]");
}

TEST(ChatTemplate, Llama3) {
  // meta-llama/Meta-Llama-3-8B-Instruct chat_template: '<|start_header_id|>' + role + '<|end_header_id|>\n\n'
  // + content | trim + '<|eot_id|>', then the assistant header; bos_token first is the tokenizer's.
  EXPECT_EQ(render(ChatTemplate::llama3),
            "<|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplate, Mistral) {
  // mistralai/Mistral-7B-Instruct-v0.2 and Mixtral-8x7B-Instruct-v0.1 chat_template: '[INST] ' + content +
  // ' [/INST]' for a user turn, content + eos_token for an assistant turn; no system role, so the system
  // text leads the first instruction followed by "\n\n" (Mistral's documented system-prompt convention).
  EXPECT_EQ(render(ChatTemplate::mistral),
            "[INST] You are terse.\n\nHi [/INST]Hello!</s>"
            "[INST] What is 2+2? [/INST]");
}

TEST(ChatTemplate, Gemma) {
  // google/gemma chat_template: '<start_of_turn>' + role + '\n' + content | trim + '<end_of_turn>\n' with
  // the assistant's role called 'model', then '<start_of_turn>model\n'; Gemma 3's template puts a system
  // message in front of the first user turn followed by "\n\n".
  EXPECT_EQ(render(ChatTemplate::gemma),
            "<start_of_turn>user\nYou are terse.\n\nHi<end_of_turn>\n"
            "<start_of_turn>model\nHello!<end_of_turn>\n"
            "<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n"
            "<start_of_turn>model\n");
}

TEST(ChatTemplate, Phi3) {
  // microsoft/Phi-3-mini-4k-instruct chat_template: '<|' + role + '|>\n' + content + '<|end|>\n', then
  // '<|assistant|>\n'.
  EXPECT_EQ(render(ChatTemplate::phi3),
            "<|system|>\nYou are terse.<|end|>\n"
            "<|user|>\nHi<|end|>\n"
            "<|assistant|>\nHello!<|end|>\n"
            "<|user|>\nWhat is 2+2?<|end|>\n"
            "<|assistant|>\n");
}

TEST(ChatTemplate, Zephyr) {
  // HuggingFaceH4/zephyr-7b-beta chat_template: '<|' + role + '|>\n' + content + eos_token, each on its own
  // line (the template's newlines after each expression survive trim_blocks), then '<|assistant|>' + '\n'.
  EXPECT_EQ(render(ChatTemplate::zephyr),
            "<|system|>\nYou are terse.</s>\n"
            "<|user|>\nHi</s>\n"
            "<|assistant|>\nHello!</s>\n"
            "<|user|>\nWhat is 2+2?</s>\n"
            "<|assistant|>\n");
}

TEST(ChatTemplate, Alpaca) {
  // Stanford Alpaca's prompt: preamble, "\n\n### Instruction:\n{instruction}\n\n### Response:\n"; one pair
  // per exchange, with the answer followed by a blank line.
  EXPECT_EQ(render(ChatTemplate::alpaca),
            "You are terse.\n\n"
            "### Instruction:\nHi\n\n"
            "### Response:\nHello!\n\n"
            "### Instruction:\nWhat is 2+2?\n\n"
            "### Response:\n");
}

TEST(ChatTemplate, Vicuna) {
  // FastChat's vicuna_v1.1 conversation (separator style ADD_COLON_TWO, sep " ", sep2 "</s>", roles USER and
  // ASSISTANT): system + " ", then role + ": " + message + the separator of its parity, then "ASSISTANT:".
  EXPECT_EQ(render(ChatTemplate::vicuna),
            "You are terse. USER: Hi ASSISTANT: Hello!</s>USER: What is 2+2? ASSISTANT:");
}

TEST(ChatTemplate, DefaultSystemTextForAlpacaAndVicuna) {
  const std::vector<ChatTurn> turns{{ChatTurnRole::user, "Hi"}};
  EXPECT_EQ(
      render_chat(ChatTemplate::alpaca, turns, true),
      "Below is an instruction that describes a task. Write a response that appropriately completes the "
      "request.\n\n### Instruction:\nHi\n\n### Response:\n");
  EXPECT_EQ(render_chat(ChatTemplate::vicuna, turns, true),
            "A chat between a curious user and an artificial intelligence assistant. The assistant gives "
            "helpful, detailed, and polite answers to the user's questions. USER: Hi ASSISTANT:");
}

TEST(ChatTemplate, TrimmingFollowsEachTemplate) {
  const std::vector<ChatTurn> turns{{ChatTurnRole::user, "  Hi \n"}};
  // Llama 3 and Gemma trim, Llama 2 strips, ChatML keeps the content as given.
  EXPECT_EQ(render_chat(ChatTemplate::llama3, turns, false),
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>");
  EXPECT_EQ(render_chat(ChatTemplate::gemma, turns, false), "<start_of_turn>user\nHi<end_of_turn>\n");
  EXPECT_EQ(render_chat(ChatTemplate::llama2, turns, false), "[INST] Hi [/INST]");
  EXPECT_EQ(render_chat(ChatTemplate::chatml, turns, false), "<|im_start|>user\n  Hi \n<|im_end|>\n");
}

TEST(ChatTemplate, SystemTurnsWithoutAFollowingUserTurn) {
  // Two system turns join; one before an assistant turn becomes a user turn of its own there.
  const std::vector<ChatTurn> turns{
      {ChatTurnRole::system, "A"}, {ChatTurnRole::system, "B"},    {ChatTurnRole::user, "u"},
      {ChatTurnRole::system, "C"}, {ChatTurnRole::assistant, "a"},
  };
  EXPECT_EQ(render_chat(ChatTemplate::mistral, turns, true),
            "[INST] A\n\nB\n\nu [/INST][INST] C\n\n [/INST]a</s>");
  EXPECT_EQ(render_chat(ChatTemplate::gemma, turns, false),
            "<start_of_turn>user\nA\n\nB\n\nu<end_of_turn>\n"
            "<start_of_turn>user\nC\n\n<end_of_turn>\n"
            "<start_of_turn>model\na<end_of_turn>\n");
  // A system turn last: a user turn holding it.
  const std::vector<ChatTurn> only_system{{ChatTurnRole::system, "S"}};
  EXPECT_EQ(render_chat(ChatTemplate::llama2, only_system, true), "[INST] <<SYS>>\nS\n<</SYS>> [/INST]");
}

TEST(ChatTemplate, NoTemplateStartsWithBosText) {
  for (const ChatTemplate t : all_chat_templates()) {
    const std::string text = render(t);
    for (const std::string bos : {"<s>", "<bos>", "<|begin_of_text|>", "<|endoftext|>"}) {
      EXPECT_NE(text.rfind(bos, 0), 0u) << name(t) << " starts with " << bos;
    }
  }
}

TEST(ChatTemplate, WithoutGenerationPromptTheTextEndsAfterTheLastTurn) {
  const std::vector<ChatTurn> turns{{ChatTurnRole::user, "Hi"}, {ChatTurnRole::assistant, "Yo"}};
  EXPECT_EQ(render_chat(ChatTemplate::chatml, turns, false),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nYo<|im_end|>\n");
  EXPECT_EQ(render_chat(ChatTemplate::phi3, turns, false), "<|user|>\nHi<|end|>\n<|assistant|>\nYo<|end|>\n");
  EXPECT_EQ(render_chat(ChatTemplate::chatml, {}, false), "");
}

TEST(ChatTemplate, EndOfTurnMarkersCloseTheAssistantTurn) {
  // In every template, what follows the assistant's text (after whitespace) is its first marker.
  for (const ChatTemplate t : all_chat_templates()) {
    const auto markers = end_of_turn_markers(t);
    ASSERT_FALSE(markers.empty()) << name(t);
    const std::string text = render(t);
    const std::size_t after = text.find("Hello!") + 6;
    const std::size_t next = text.find_first_not_of(" \n", after);
    EXPECT_EQ(text.compare(next, markers[0].size(), markers[0]), 0) << name(t) << ": " << text;
  }
  EXPECT_EQ(end_of_turn_markers(ChatTemplate::chatml)[0], "<|im_end|>");
  EXPECT_EQ(end_of_turn_markers(ChatTemplate::llama3)[0], "<|eot_id|>");
}

TEST(ChatTemplate, NamesRoundTrip) {
  std::set<std::string_view> names;
  for (const ChatTemplate t : all_chat_templates()) {
    names.insert(name(t));
    EXPECT_EQ(find_chat_template(name(t)), t);
  }
  EXPECT_EQ(names, (std::set<std::string_view>{"chatml", "llama2", "llama3", "mistral", "gemma", "phi3",
                                               "zephyr", "alpaca", "vicuna"}));
  EXPECT_EQ(find_chat_template("nope"), std::nullopt);
  EXPECT_EQ(find_chat_template("ChatML"), std::nullopt);
  EXPECT_EQ(find_chat_template(""), std::nullopt);
}

// Excerpts of the families' published Jinja chat templates.
TEST(ChatTemplate, DetectsEachFamilyFromItsJinja) {
  EXPECT_EQ(detect_chat_template("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
                                 "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"),
            ChatTemplate::chatml);
  EXPECT_EQ(detect_chat_template("{% set content = '<|start_header_id|>' + message['role'] + "
                                 "'<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' %}"),
            ChatTemplate::llama3);
  EXPECT_EQ(detect_chat_template("{% if loop.index0 == 0 and system_message != false %}{% set content = "
                                 "'<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}"
                                 "{% endif %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"),
            ChatTemplate::llama2);
  EXPECT_EQ(
      detect_chat_template("{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}"
                           "{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == "
                           "'assistant' %}{{ message['content'] + eos_token}}{% endif %}{% endfor %}"),
      ChatTemplate::mistral);
  EXPECT_EQ(detect_chat_template(
                "{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + "
                "'<end_of_turn>\\n' }}{% if add_generation_prompt %}{{'<start_of_turn>model\\n'}}"),
            ChatTemplate::gemma);
  EXPECT_EQ(
      detect_chat_template("{% for message in messages %}{{'<|' + message['role'] + '|>' + '\\n' + "
                           "message['content'] + '<|end|>\\n' }}{% endfor %}{% if add_generation_prompt %}"
                           "{{ '<|assistant|>\\n' }}{% endif %}"),
      ChatTemplate::phi3);
  EXPECT_EQ(detect_chat_template(
                "{% if message['role'] == 'user' %}\n{{ '<|user|>\\n' + message['content'] + "
                "eos_token }}\n{% elif message['role'] == 'assistant' %}\n{{ '<|assistant|>\\n'  + "
                "message['content'] + eos_token }}\n{% endif %}"),
            ChatTemplate::zephyr);
  EXPECT_EQ(
      detect_chat_template("{% if message['role'] == 'user' %}{{ '### Instruction:\\n' + message['content'] "
                           "+ '\\n\\n' }}{% elif message['role'] == 'assistant' %}{{ '### Response:\\n' + "
                           "message['content'] + eos_token + '\\n\\n' }}{% endif %}"),
      ChatTemplate::alpaca);
  EXPECT_EQ(detect_chat_template(
                "{% if message['role'] == 'user' %}{{ 'USER: ' + message['content'] + ' ' }}"
                "{% elif message['role'] == 'assistant' %}{{ 'ASSISTANT: ' + message['content'] + "
                "eos_token }}{% endif %}{% if add_generation_prompt %}{{ 'ASSISTANT:' }}{% endif %}"),
            ChatTemplate::vicuna);
}

TEST(ChatTemplate, UnknownJinjaIsNotGuessed) {
  EXPECT_EQ(detect_chat_template(""), std::nullopt);
  // DeepSeek's "User: ... Assistant:" layout.
  EXPECT_EQ(
      detect_chat_template("{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}"
                           "{{ 'User: ' + message['content'] + '\\n\\n' }}{% endif %}{% endfor %}"),
      std::nullopt);
  // ChatGLM uses Zephyr's role tags in another layout; Phi-4 uses ChatML's with its own separator.
  EXPECT_EQ(
      detect_chat_template("[gMASK]<sop>{% for item in messages %}{% if item['role'] == 'user' %}<|user|>\n"
                           "{{ item['content'] }}{% endif %}{% endfor %}<|assistant|>"),
      std::nullopt);
  EXPECT_EQ(detect_chat_template("{{'<|im_start|>' + message['role'] + '<|im_sep|>' + message['content'] + "
                                 "'<|im_end|>'}}"),
            std::nullopt);
}

}  // namespace
}  // namespace loom::compute
