// loom: the command-line tool. Commands: generate and chat (text in, text out), tokenize and detokenize,
// logits (raw model outputs, comparable with reference files), info (what a model file holds), synth
// (random-weight models for tests and benchmarks), bench (throughput on this machine), template (a chat
// template rendered over a conversation).
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "bench_command.hpp"
#include "command_line.hpp"
#include "loom/compute/model/model_file_error.hpp"
#include "model_commands.hpp"
#include "template_command.hpp"
#include "text_commands.hpp"

namespace {

constexpr const char* kUsage = R"(loom: run and inspect LLMs from the command line.

Usage: loom COMMAND [options]
       loom --help | --version

Commands:
  generate --model PATH --prompt TEXT [--max-tokens N] [--temperature T] [--top-k K] [--top-p P] [--min-p M]
         [--repeat-penalty R] [--repeat-last-n N] [--frequency-penalty F] [--presence-penalty P]
         [--seed S] [--stop STR]... [--ignore-eos] [--json] [--no-echo] [--tokenizer FILE] [--context N]
         [--threads N] [--device cpu|vulkan[:N]] [--vulkan-arithmetic auto|pinned|fast] [KV cache options]
         [--grammar GBNF | --grammar-file FILE | --json-schema FILE|JSON | --json-object]
         Streams the prompt and its continuation to stdout; prompt and generated token counts, time to
         first token and tokens/s go to stderr. --json prints one JSON object at the end instead (text,
         tokens, finish_reason, usage, timings). Defaults: 256 tokens, temperature 0.8 (0 = greedy),
         top-k 40, top-p 0.95, min-p 0.05, a random seed. Ctrl-C stops the generation. The constraint
         options make the output follow a GBNF grammar (start rule root), a JSON Schema (inline when it
         starts with '{', else a file) or any JSON object; the output ends where the grammar may end.
  chat   --model PATH [--system TEXT] [--chat-template-file F | --chat-template NAME] [sampling options as for generate]
         An interactive chat: each line you type is a user turn; the reply streams as it is produced.
         The model's own chat template (tokenizer.chat_template, rendered as transformers does) unless a
         Jinja file or a built-in layout is named (chatml, llama2, llama3, mistral, gemma, phi3, zephyr,
         alpaca, vicuna); chatml for a model without one. Ctrl-C stops the current reply; Ctrl-D or
         /quit leaves; /reset forgets the conversation.
  tokenize --model PATH (--text T | --file F) [--no-bos] [--special] [--tokenizer FILE]
         Prints the token ids, space-separated, on one line. --special recognises control tokens
         (e.g. <|im_start|>) in the text; --no-bos adds no BOS/EOS.
  detokenize --model PATH --ids ID,ID,... [--special] [--tokenizer FILE]
         Prints the text of the ids (--special: control tokens as their text).
  logits --model PATH --tokens ID,ID,... [--continue ID,... | --greedy N] [--top K] [--threads N]
         [--device cpu|vulkan[:N]] [--vulkan-arithmetic auto|pinned|fast] [KV cache options]
         Feeds --tokens as one prefill batch, then each --continue token one at a time (teacher forced),
         or its own argmax for N steps (--greedy). Prints one JSON object:
         {"prompt_tokens", "prompt_top", "continue", "continue_top"}, where prompt_top[i] is the top-K
         [id, logit] after position i and continue_top[g] the top-K after feeding continue[g].
         --top defaults to 10; --threads to the number of physical cores.
  info   --model PATH | --devices
         --devices lists where a model can run: the CPU, and each Vulkan device (vulkan:N, as --device
         names it) with its type, device-local memory, max workgroup invocations, subgroup size, push
         descriptors, driver and whether the Vulkan backend can use it. --model PATH: architecture and its features (sliding windows, soft-caps, experts, LongRoPE), hyperparameters,
         tensor types with counts and sizes, vocabulary summary, whether loom runs the file ('runs: yes',
         or 'runs: no: ' and why) and the metadata.
  synth  --out FILE.gguf [--arch llama|qwen2|qwen3|gemma|gemma2|gemma3|phi3|qwen2moe|qwen3moe] [--dim D]
         [--ffn H] [--layers L] [--heads N] [--kv-heads K] [--head-dim D] [--context C]
         [--type f32|f16|bf16|q8_0|q4_0|q4_1|q5_0|q5_1|iq4_nl|q2_k|q3_k|q4_k|q5_k|q6_k|iq4_xs]
         [--vocab-from VOCAB.gguf | --vocab V]
         [--sliding-window W] [--attn-softcap C] [--final-softcap C] [--rope-base B] [--rope-base-swa B]
         [--experts E] [--experts-used K] [--expert-ffn H] [--shared-expert-ffn H]
         [--long-rope-context C] [--chat-template-file F.jinja] [--seed S]
         Writes a random-weight model, the same for the same options and seed. K-quant types need dim
         and ffn to be multiples of 256, the others multiples of 32. --experts gives each layer E
         experts of width --expert-ffn (default --ffn), K of them used per token (qwen2moe and
         qwen3moe: 4 experts by default; llama with experts is Mixtral-style), and --shared-expert-ffn a
         qwen2moe shared expert; --long-rope-context writes phi3 LongRoPE factors with that original
         context.
  bench  --model PATH [-p N] [-n N] [-b B,B,...] [-d D,D,...] [-t|--threads N] [-r N] [--json] [--probe-mb M]
         [--device cpu|vulkan[:N]] [--vulkan-arithmetic auto|pinned|fast]
         Measures the memory bandwidth and int8 / FP32 peaks of this machine, then prompt processing of N
         tokens (-p, --n-prompt, default 512), generation of N tokens one at a time (-n, --n-gen, default
         128) and N tokens of B sequences decoding together for each batch size (-b, --batch, default
         1,8,64; at most 512; -b none: no batched test), each repeated -r (--repetitions, default 3) times:
         one line per test with the median tokens/s, its min and max, ms per step and the fraction of the
         bound it is nearest (bandwidth, int8 or FP32 peak). -d (--depth, default 0): the generation test
         again after each of these many positions of context (filled first, untimed), e.g. -d 0,1000,2000
         for decode against context length. --json prints one JSON document instead. -p 0 or -n 0 skips
         those. --probe-mb M: the bandwidth probe reads M MiB (default 256; it must dwarf the last-level cache).
         With --device vulkan[:N] the same tests (not -d) run through the backend's steps on that device,
         one line each with tokens/s and ms per step (no CPU probes).
  template (--template FILE.jinja | --model PATH) --conversation FILE.json [--now 2025-03-09T08:05:03]
         Renders a chat template (a file, or the model's tokenizer.chat_template) over a conversation
         ({"messages": [...], "tools", "documents", "add_generation_prompt", "bos_token", "eos_token",
         "kwargs": {...}}) with loom's Jinja interpreter and prints exactly the rendered text. --now fixes
         the time strftime_now() sees (default: the current local time). A template error goes to stderr
         (exit code 1), with the template's own message for raise_exception.

--device (generate, chat, logits, bench): where the forward pass runs: cpu (the default), vulkan (the first
discrete GPU, else the first usable Vulkan device) or vulkan:N (device N of `loom info --devices`). The
Vulkan backend runs the same models, mixture-of-experts ones included; a build without it says so.
--vulkan-arithmetic auto|pinned|fast (with --device vulkan[:N]): pinned computes as the CPU backend does, bit
for bit (needs a device with 64-bit floats in shaders; slow on a GPU), fast with the device's own kernels
(logits a few ulps apart from the CPU's); auto (the default) is pinned on a CPU device such as lavapipe and
fast on a GPU.

KV cache options (generate, chat, logits): --kv-block-size N token slots per block (default 16);
--kv-cache-mb M the keys and values of all layers in M MiB (default: enough for the context, one stream's
worth: unlike loom-gateway, which sizes its cache from the machine for many streams at once; a smaller
budget shortens the context to what it holds); --kv-type f16|f32 (default f16).

A llama2.c checkpoint holds no vocabulary: give its tokenizer file with --tokenizer (a GGUF file with a
vocabulary works there too).

Models: GGUF (llama incl. Mistral-style sliding windows and Mixtral-style experts, qwen2, qwen3, qwen2moe,
qwen3moe, gemma, gemma2, gemma3, phi3; f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, q2_K, q3_K,
q4_K, q5_K, q6_K, iq4_xs) and llama2.c checkpoints.
)";

}  // namespace

int main(int argc, char** argv) {
  try {
    // bench's short options (-p 512) become long ones (--n-prompt 512) before parsing.
    std::vector<std::string> words = loom::cli::expand_bench_short_options(argc, argv);
    std::vector<char*> word_pointers;
    for (auto& w : words) word_pointers.push_back(w.data());
    loom::cli::CommandLine args(static_cast<int>(word_pointers.size()), word_pointers.data(),
                                {"help", "version", "json", "no-bos", "special", "no-echo", "ignore-eos", "devices"});
    if (args.flag("help") || argc == 1) {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (args.flag("version")) {
      std::printf("loom %s\n", LOOM_VERSION);
      return 0;
    }
    if (args.positional().size() != 1) {
      throw loom::cli::UsageError(args.positional().empty() ? "no command given" : "unexpected argument '" + args.positional()[1] + "'");
    }
    const std::string& command = args.positional()[0];
    if (command == "generate") return loom::cli::run_generate(args);
    if (command == "chat") return loom::cli::run_chat(args);
    if (command == "tokenize") return loom::cli::run_tokenize(args);
    if (command == "detokenize") return loom::cli::run_detokenize(args);
    if (command == "logits") return loom::cli::run_logits(args);
    if (command == "info") return loom::cli::run_info(args);
    if (command == "synth") return loom::cli::run_synth(args);
    if (command == "bench") return loom::cli::run_bench(args);
    if (command == "template") return loom::cli::run_template(args);
    throw loom::cli::UsageError("unknown command '" + command + "'");
  } catch (const loom::cli::UsageError& e) {
    std::fprintf(stderr, "loom: %s\nRun 'loom --help' for usage.\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "loom: %s\n", e.what());
    return 1;
  }
}
